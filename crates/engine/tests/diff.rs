//! Semantic diff: exactly the probes where the two matrices differ (property test against
//! pair-by-pair evaluation), grouping into readable lines, and staged policies.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::collections::BTreeSet;

use palisade_engine::diff::{self, ChangeKind};
use palisade_engine::{Engine, Options, Probe};
use palisade_gen::strategies::cluster;
use palisade_model::{Cluster, LoadOptions, Protocol};
use proptest::prelude::*;

type Cell = (String, String, Probe, ChangeKind);

/// Every (from, to, probe) the two states decide differently, pod pair by pod pair.
fn naive(old: &Engine, new: &Engine, probes: &[Probe]) -> BTreeSet<Cell> {
    let keyed = |e: &Engine| {
        e.addressable_pods()
            .into_iter()
            .map(|(p, _)| (e.cluster().pods[p].key(), p))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let (ko, kn) = (keyed(old), keyed(new));
    let common: Vec<(&String, usize, usize)> = ko
        .iter()
        .filter_map(|(k, &o)| kn.get(k).map(|&n| (k, o, n)))
        .collect();
    let allowed = |e: &Engine, a, b, probe| {
        e.pod_flow(a, b, probe)
            .is_some_and(|f| e.evaluate(&f).allowed)
    };
    let mut out = BTreeSet::new();
    for &(ka, oa, na) in &common {
        for &(kb, ob, nb) in &common {
            if ka == kb {
                continue;
            }
            for &probe in probes {
                let (before, after) = (allowed(old, oa, ob, probe), allowed(new, na, nb, probe));
                if before != after {
                    let change = if after {
                        ChangeKind::Gained
                    } else {
                        ChangeKind::Lost
                    };
                    out.insert((ka.clone(), kb.clone(), probe, change));
                }
            }
        }
    }
    out
}

fn probes() -> Vec<Probe> {
    Protocol::ALL
        .iter()
        .flat_map(|&protocol| [80u16, 81].map(|port| Probe { protocol, port }))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, rng_seed: proptest::test_runner::RngSeed::Fixed(0xd1ff_2026), ..ProptestConfig::default() })]

    /// `diff A B` lists exactly the probes where `matrix A` and `matrix B` differ.
    #[test]
    fn diff_lists_exactly_the_cells_the_matrices_differ_in(a in cluster(), b in cluster(), same_pods in any::<bool>()) {
        let b = if same_pods {
            Cluster { network_policies: b.network_policies, admin_policies: b.admin_policies, ..a.clone() }
        } else {
            b
        };
        let (old, new) = (Engine::new(a, Options::default()), Engine::new(b, Options::default()));
        let probes = probes();
        let d = diff::diff(&old, &new, &probes);
        let got: BTreeSet<Cell> = d.changes().map(|(g, x, y)| (x.key.clone(), y.key.clone(), g.probe, g.change)).collect();
        prop_assert_eq!(got.len(), d.changes().count(), "each changed connection is listed once");
        let want = naive(&old, &new, &probes);
        prop_assert_eq!(&got, &want);
        let (gained, lost) = d.counts();
        prop_assert_eq!(gained + lost, want.len());
        for g in &d.groups {
            prop_assert_eq!(g.before.allowed, g.change == ChangeKind::Lost, "the verdict before explains the change");
            prop_assert_eq!(g.after.allowed, g.change == ChangeKind::Gained, "the verdict after explains the change");
        }
        // The merged lines cover exactly the same connections.
        let merged: usize = d.merged().iter().map(|m| m.connections * m.probes.len()).sum();
        prop_assert_eq!(merged, want.len());
        if same_pods {
            prop_assert!(d.pods_added.is_empty() && d.pods_removed.is_empty());
        }
        prop_assert_eq!(d.is_empty(), want.is_empty() && d.pods_added.is_empty() && d.pods_removed.is_empty());
    }
}

fn load(texts: &[(&str, &str)]) -> Engine {
    let loaded = palisade_model::load_sources(texts.iter().copied(), LoadOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    Engine::new(loaded.cluster, Options::default())
}

const DENY_X: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-x, namespace: x}
spec: {podSelector: {}}
";

#[test]
fn identical_states_have_no_difference() {
    let e = load(&[("c.yaml", common::CLUSTER), ("p.yaml", DENY_X)]);
    let d = diff::diff(&e, &e.clone(), &probes());
    assert!(d.is_empty() && d.groups.is_empty(), "{d:?}");
}

#[test]
fn a_namespace_wide_deny_is_one_line_with_the_policy_responsible() {
    let old = load(&[("c.yaml", common::CLUSTER)]);
    let new = load(&[("c.yaml", common::CLUSTER), ("p.yaml", DENY_X)]);
    let tcp80 = [common::TCP80];
    let d = diff::diff(&old, &new, &tcp80);
    // Every other pod (8) to each of x's 3 pods, minus each pod to itself: 3 * 8 = 24.
    assert_eq!(d.counts(), (0, 24));
    let lines = d.merged();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let l = &lines[0];
    assert_eq!(l.change, ChangeKind::Lost);
    assert_eq!(d.describe(&old, &l.from), "x/*, y/*, z/*");
    assert_eq!(d.describe(&old, &l.to), "x/*");
    assert_eq!(l.before, "allowed: no policy decided");
    assert_eq!(
        l.after,
        "ingress denied: isolated by NetworkPolicy x/deny-x and no rule matched"
    );
    // And back: the same connections, gained.
    let back = diff::diff(&new, &old, &tcp80);
    assert_eq!(back.counts(), (24, 0));
}

#[test]
fn pods_only_in_one_state_are_listed_not_diffed() {
    let old = load(&[("c.yaml", common::CLUSTER)]);
    let extra = "apiVersion: v1\nkind: Pod\nmetadata: {name: d, namespace: x}\nstatus: {podIP: 10.0.0.20}\n";
    let new = load(&[("c.yaml", common::CLUSTER), ("d.yaml", extra)]);
    let d = diff::diff(&old, &new, &probes());
    assert_eq!(d.pods_added, ["x/d"]);
    assert!(d.groups.is_empty() && !d.is_empty());
    let d = diff::diff(&new, &old, &probes());
    assert_eq!(d.pods_removed, ["x/d"]);
}

#[test]
fn staged_policies_are_diffed_against_the_enforced_state() {
    let staged = DENY_X.replace(
        "metadata: {name: deny-x, namespace: x}",
        "metadata: {name: deny-x, namespace: x, annotations: {palisade.dev/staged: \"true\"}}",
    );
    let enforced = load(&[("c.yaml", common::CLUSTER), ("p.yaml", &staged)]);
    let x_a = enforced.pod_id("x", "a").unwrap();
    let y_a = enforced.pod_id("y", "a").unwrap();
    let flow = enforced.pod_flow(y_a, x_a, common::TCP80).unwrap();
    assert!(
        enforced.evaluate(&flow).allowed,
        "a staged policy is not enforced"
    );
    let with_staged = Engine::new(enforced.cluster().with_staged(), enforced.options());
    let d = diff::diff(&enforced, &with_staged, &[common::TCP80]);
    assert_eq!(
        d.counts(),
        (0, 24),
        "the staged deny would cut 24 connections"
    );
    let line = &d.merged()[0];
    assert!(
        line.after.contains("NetworkPolicy x/deny-x"),
        "{}",
        line.after
    );
}
