//! Incremental updates at the size of a small node: one pod relabel and one policy change
//! touch only what changed, and the kernel's table after the update equals a full apply of
//! the new ruleset.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::process::Command;

use palisade_engine::{Change, Engine, Options};
use palisade_model::Protocol;
use palisade_nft::{NftVerdict, Packet, Ruleset, compile, compile_after, update_script};

fn engine() -> Engine {
    let g = palisade_gen::generate(&palisade_gen::Spec {
        pods: 200,
        policies: 40,
        seed: 7,
        admin: true,
    });
    let (c, p) = (g.cluster_yaml(), g.policies_yaml());
    let loaded =
        palisade_model::load_sources([("c", c.as_str()), ("p", p.as_str())], Default::default())
            .unwrap();
    Engine::new(loaded.cluster, Options::default())
}

/// A pod that can take the labels of another pod of its namespace (an existing class).
fn relabel(e: &Engine) -> Change {
    let pods = &e.cluster().pods;
    let (p, labels) = pods
        .iter()
        .enumerate()
        .find_map(|(i, p)| {
            pods[i + 1..]
                .iter()
                .find(|q| q.namespace == p.namespace && q.labels != p.labels)
                .map(|q| (p, q.labels.clone()))
        })
        .unwrap();
    let mut moved = p.clone();
    moved.labels = labels;
    Change::UpsertPod(moved)
}

/// A NetworkPolicy with its last ingress rule removed.
fn policy_change(e: &Engine) -> Change {
    let np = e
        .cluster()
        .network_policies
        .iter()
        .find(|p| p.ingress.len() > 1)
        .unwrap();
    let mut changed = np.clone();
    changed.ingress.pop();
    Change::UpsertNetworkPolicy(changed)
}

/// Both rulesets decide every pod pair the same on a few ports.
fn same_decisions(a: &Ruleset, b: &Ruleset, e: &Engine) {
    let ips: Vec<_> = e
        .cluster()
        .pods
        .iter()
        .flat_map(|p| p.ips.clone())
        .collect();
    for &src in ips.iter().step_by(7) {
        for &dst in ips.iter().step_by(5) {
            for dport in [53, 80, 443, 8080] {
                for protocol in [Protocol::Tcp, Protocol::Udp] {
                    let p = Packet {
                        src,
                        dst,
                        protocol,
                        dport,
                    };
                    let (x, y) = (a.lookup(&p), b.lookup(&p));
                    assert_eq!(x == NftVerdict::Accept, y == NftVerdict::Accept, "{p:?}");
                }
            }
        }
    }
}

#[test]
fn a_relabel_to_an_existing_class_moves_only_that_pods_elements() {
    let mut e = engine();
    let old = compile(&e, None).unwrap();
    e.apply(relabel(&e));
    let new = compile_after(&e, None, &old).unwrap();
    same_decisions(&new, &compile(&e, None).unwrap(), &e);
    let (script, stats) = update_script(&old, &new);
    // Its address in each map (deleted and added), the elements of the peer sets it joins
    // or leaves, and at most the chains with a short peer list written inline.
    let map_lines = script
        .lines()
        .filter(|l| l.contains(" egress4 ") || l.contains(" ingress4 "))
        .count();
    assert_eq!(map_lines, 4, "{script}");
    assert!(
        stats.chains * 10 < old.chains.len(),
        "{} of {} chains written:\n{script}",
        stats.chains,
        old.chains.len()
    );
    assert!(
        !script.contains("delete element inet palisade egress_exempt")
            && !script.contains("delete element inet palisade ingress_exempt"),
        "the pod's exemptions do not change:\n{script}"
    );
}

#[test]
fn a_policy_change_rewrites_only_the_chains_of_the_classes_it_selects() {
    let mut e = engine();
    let old = compile(&e, None).unwrap();
    e.apply(policy_change(&e));
    let new = compile_after(&e, None, &old).unwrap();
    same_decisions(&new, &compile(&e, None).unwrap(), &e);
    let (script, stats) = update_script(&old, &new);
    assert_eq!(stats.elements, 0, "no pod moves:\n{script}");
    assert!(stats.chains > 0, "the change is in the ruleset");
    assert!(
        stats.chains * 4 < old.chains.len(),
        "{} of {} chains written:\n{script}",
        stats.chains,
        old.chains.len()
    );
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The loaded table's text, chains and sets sorted, counters zeroed.
fn list(ns: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args([
            "netns", "exec", ns, "nft", "list", "table", "inet", "palisade",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let text = text
        .trim_end()
        .strip_suffix('}')
        .unwrap_or(&text)
        .trim_end();
    let mut blocks: Vec<String> = text
        .split("\n\n")
        .map(|b| b.replace(|c: char| c.is_ascii_digit(), "#"))
        .collect();
    blocks.sort();
    blocks
}

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn incremental_updates_leave_the_table_a_full_apply_leaves() {
    if !is_root() {
        eprintln!("skipped: needs root for a network namespace");
        return;
    }
    let ns = Netns(format!("palisade-nfti-{}", std::process::id()));
    assert!(
        Command::new("ip")
            .args(["netns", "add", &ns.0])
            .status()
            .unwrap()
            .success()
    );
    let mut e = engine();
    let mut old = compile(&e, None).unwrap();
    palisade_nft::apply(&old, Some(&ns.0)).unwrap();
    for change in [relabel(&e), policy_change(&e)] {
        e.apply(change);
        let new = compile_after(&e, None, &old).unwrap();
        palisade_nft::update(&old, &new, Some(&ns.0)).unwrap();
        let updated = list(&ns.0);
        palisade_nft::apply(&new, Some(&ns.0)).unwrap();
        assert!(
            updated == list(&ns.0),
            "incremental update differs from a full apply"
        );
        old = new;
    }
}
