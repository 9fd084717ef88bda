//! The incremental compile equals the full compile: random clusters, random sequences of
//! changes (policies added, edited and removed; pods added, removed and relabelled;
//! namespaces relabelled; nodes), and after each change the ruleset built from the previous
//! compile and what the change touched is compared with the full compile of the same
//! engine: as IR, as `nft` text, and by the userspace lookup on every address pair.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::net::IpAddr;

use palisade_engine::{Change, Engine, Options};
use palisade_model::*;
use palisade_nft::{Compiled, Lookup, NftVerdict, Packet, Path, Ruleset, compile, compile_after};
use proptest::prelude::*;

use palisade_gen::strategies::{admin_policy, cluster, labels, network_policy, pod};

/// Random changes to every kind of object, policy edits and relabels weighted up (they are
/// what the incremental compile serves; the rest falls back to the full compile).
fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => (0..7usize).prop_flat_map(pod).prop_map(|mut p| {
            // one address per (namespace, name): distinct pods never share one
            if !p.host_network {
                let ns: u8 = p.namespace.trim_start_matches("ns").parse().unwrap();
                let i: u8 = p.name.trim_start_matches("pod").parse().unwrap();
                p.ips = vec![IpAddr::from([10, 100 + ns, 0, i + 1])];
            }
            Change::UpsertPod(p)
        }),
        1 => (0..3usize, 0..7usize).prop_map(|(ns, i)| Change::RemovePod { namespace: format!("ns{ns}"), name: format!("pod{i}") }),
        4 => (0..5usize).prop_flat_map(network_policy).prop_map(Change::UpsertNetworkPolicy),
        1 => (0..3usize, 0..5usize).prop_map(|(ns, i)| Change::RemoveNetworkPolicy { namespace: format!("ns{ns}"), name: format!("np{i}") }),
        3 => (0..5usize).prop_flat_map(admin_policy).prop_map(Change::UpsertAdminPolicy),
        1 => (0..5usize).prop_flat_map(admin_policy).prop_map(|p| Change::RemoveAdminPolicy { kind: p.kind, name: p.name }),
        2 => (0..4usize, labels(), any::<bool>()).prop_map(|(i, mut labels, dd)| {
            labels.insert(NAMESPACE_NAME_LABEL.into(), format!("ns{i}"));
            Change::UpsertNamespace(Namespace { name: format!("ns{i}"), labels, default_deny_ingress: dd, origin: None })
        }),
        1 => (0..3usize, labels()).prop_map(|(i, labels)| Change::UpsertNode(Node {
            name: format!("node{i}"), labels, addresses: vec![format!("192.168.0.{}", i + 1).parse().unwrap()], origin: Origin::default(),
        })),
    ]
}

/// An upsert of an existing pod whose name ends in an even digit keeps everything but the
/// labels: a relabel.
fn as_relabel(engine: &Engine, change: Change) -> Change {
    match change {
        Change::UpsertPod(p) if p.name.ends_with(['0', '2', '4', '6']) => engine
            .cluster()
            .pods
            .iter()
            .find(|q| q.namespace == p.namespace && q.name == p.name)
            .map(|q| {
                Change::UpsertPod(Pod {
                    labels: p.labels.clone(),
                    ..q.clone()
                })
            })
            .unwrap_or(Change::UpsertPod(p)),
        other => other,
    }
}

/// Every verdict of `rs` on pairs of `ips` (a few ports and protocols), with the decision
/// of the rule that dropped, as text.
fn verdicts(rs: &Ruleset, ips: &[IpAddr]) -> Vec<String> {
    let lookup = Lookup::new(rs);
    let mut out = Vec::new();
    for &src in ips {
        for &dst in ips {
            for protocol in Protocol::ALL {
                for dport in [80u16, 81, 443] {
                    let p = Packet {
                        src,
                        dst,
                        protocol,
                        dport,
                    };
                    // A drop by the decision it stands for: log ids depend on the history.
                    let verdict = match lookup.verdict(&p) {
                        NftVerdict::Accept => "accept".to_string(),
                        NftVerdict::Drop(None) => "drop".to_string(),
                        NftVerdict::Drop(Some(id)) => {
                            format!("drop: {:?}", rs.logs.get(id as usize))
                        }
                    };
                    out.push(format!("{p:?} {verdict}"));
                }
            }
        }
    }
    out
}

/// The addresses worth asking about: every pod's and node's, and one outside.
fn addresses(e: &Engine) -> Vec<IpAddr> {
    let c = e.cluster();
    let mut ips: Vec<IpAddr> = c.pods.iter().flat_map(|p| p.ips.clone()).collect();
    ips.extend(c.nodes.iter().flat_map(|n| n.addresses.clone()));
    ips.push("203.0.113.7".parse().unwrap());
    ips.sort();
    ips.dedup();
    ips
}

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(150, 0x1c0_2026))]

    #[test]
    fn incremental_compile_equals_the_full_compile(
        c in cluster(),
        changes in proptest::collection::vec(change(), 1..12),
        on_node in any::<bool>(),
    ) {
        let node = on_node.then_some("node0");
        let mut engine = Engine::new(c, Options::default());
        let Ok(mut compiled) = Compiled::full(&engine, node, None) else {
            return Ok(()); // no node0 in this cluster
        };
        for ch in changes {
            let ch = as_relabel(&engine, ch);
            let touched = engine.apply(ch.clone());
            let full = compile_after(&engine, node, compiled.ruleset());
            let next = compiled.next(&engine, node, &touched);
            let (full, (next, path)) = match (full, next) {
                (Ok(f), Ok(n)) => (f, n),
                (Err(_), Err(_)) => return Ok(()), // node0 removed: both refuse
                (f, n) => {
                    prop_assert!(false, "one compile failed: {:?} / {:?}", f.err(), n.err());
                    unreachable!()
                }
            };
            let incremental = next.ruleset();
            prop_assert_eq!(incremental.render(), full.render(), "{:?} after {:#?}", path, ch);
            prop_assert_eq!(&incremental.sets, &full.sets, "sets ({:?}) after {:#?}", path, ch);
            prop_assert_eq!(&incremental.chains, &full.chains, "chains ({:?}) after {:#?}", path, ch);
            prop_assert_eq!(&incremental.logs, &full.logs, "logs ({:?}) after {:#?}", path, ch);
            prop_assert!(**incremental == full, "IR differs ({:?}) after {:#?}", path, ch);
            let ips = addresses(&engine);
            let fresh = compile(&engine, node).unwrap();
            prop_assert_eq!(verdicts(incremental, &ips), verdicts(&fresh, &ips), "{:?} after {:#?}", path, ch);
            compiled = next;
        }
    }
}

/// At the size of a small cluster, a policy edit and a relabel take the incremental path
/// (and give the full compile's ruleset).
#[test]
fn a_policy_edit_and_a_relabel_compile_incrementally() {
    let g = palisade_gen::generate(&palisade_gen::Spec {
        pods: 300,
        policies: 60,
        seed: 11,
        admin: true,
    });
    let mut engine = Engine::new(g.load().unwrap(), Options::default());
    for node in [None, Some("node-0")] {
        let mut compiled = Compiled::full(&engine, node, None).unwrap();
        let np = engine
            .cluster()
            .network_policies
            .iter()
            .find(|p| p.ingress.len() > 1)
            .unwrap();
        let mut edited = np.clone();
        edited.ingress.pop();
        let pods = &engine.cluster().pods;
        let on_node = |i: &usize| node.is_none_or(|n| pods[*i].node_name.as_deref() == Some(n));
        let a = (0..pods.len()).find(on_node).unwrap();
        let b = (a + 1..pods.len())
            .find(|&b| pods[b].namespace == pods[a].namespace && pods[b].labels != pods[a].labels)
            .unwrap();
        let mut moved = pods[a].clone();
        moved.labels = pods[b].labels.clone();
        for ch in [
            Change::UpsertNetworkPolicy(edited),
            Change::UpsertPod(moved),
        ] {
            let touched = engine.apply(ch);
            let full = compile_after(&engine, node, compiled.ruleset()).unwrap();
            let (next, path) = compiled.next(&engine, node, &touched).unwrap();
            assert_eq!(path, Path::Incremental, "{node:?}");
            assert!(**next.ruleset() == full, "{node:?}");
            compiled = next;
        }
    }
}
