//! The incremental compile equals the full compile: random clusters, random sequences of
//! changes (policies added, edited and removed; pods added, removed and relabelled;
//! namespaces relabelled; nodes), and after each change the ruleset built from the previous
//! compile and what the change touched is compared with the full compile of the same
//! engine: as IR, as `nft` text, and by the userspace lookup on every address pair.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::net::IpAddr;

use palisade_engine::{Engine, Options};
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
            Change::Upsert(Object::Pod(p))
        }),
        1 => (0..3usize, 0..7usize).prop_map(|(ns, i)| Change::Remove(ObjectKey::new(Kind::Pod, Some(&format!("ns{ns}")), &format!("pod{i}")))),
        4 => (0..5usize).prop_flat_map(network_policy).prop_map(|o| Change::Upsert(Object::NetworkPolicy(o))),
        1 => (0..3usize, 0..5usize).prop_map(|(ns, i)| Change::Remove(ObjectKey::new(Kind::NetworkPolicy, Some(&format!("ns{ns}")), &format!("np{i}")))),
        3 => (0..5usize).prop_flat_map(admin_policy).prop_map(|o| Change::Upsert(Object::Admin(o))),
        1 => (0..5usize).prop_flat_map(admin_policy).prop_map(|p| Change::Remove(ObjectKey::new(Kind::of_admin(p.kind), None, &p.name))),
        2 => (0..4usize, labels(), any::<bool>()).prop_map(|(i, mut labels, dd)| {
            labels.insert(NAMESPACE_NAME_LABEL.into(), format!("ns{i}"));
            Change::Upsert(Object::Namespace(Namespace { name: format!("ns{i}"), labels, default_deny_ingress: dd, origin: None }))
        }),
        1 => (0..3usize, labels()).prop_map(|(i, labels)| Change::Upsert(Object::Node(Node {
            name: format!("node{i}"), labels, addresses: vec![format!("192.168.0.{}", i + 1).parse().unwrap()], origin: Origin::default(),
        }))),
    ]
}

/// An upsert of an existing pod whose name ends in an even digit keeps everything but the
/// labels: a relabel.
fn as_relabel(engine: &Engine, change: Change) -> Change {
    match change {
        Change::Upsert(Object::Pod(p)) if p.name.ends_with(['0', '2', '4', '6']) => engine
            .cluster()
            .pods
            .iter()
            .find(|q| q.namespace == p.namespace && q.name == p.name)
            .map(|q| {
                Change::Upsert(Object::Pod(Pod {
                    labels: p.labels.clone(),
                    ..q.clone()
                }))
            })
            .unwrap_or(Change::Upsert(Object::Pod(p))),
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

/// One change applied to `engine`, then the ruleset compiled from `compiled` and what the
/// change touched, checked against the full compile (IR, text, lookup verdicts); the new
/// compile, or `None` when both compiles refuse (the node is gone).
fn step(
    engine: &mut Engine,
    compiled: &mut Compiled,
    node: Option<&str>,
    ch: Change,
) -> Result<Option<(Compiled, Path)>, TestCaseError> {
    let touched = engine.apply(ch.clone());
    let full = compile_after(engine, node, compiled.ruleset());
    let next = compiled.next(engine, node, &touched);
    let (full, (next, path)) = match (full, next) {
        (Ok(f), Ok(n)) => (f, n),
        (Err(_), Err(_)) => return Ok(None), // node0 removed: both refuse
        (f, n) => {
            prop_assert!(false, "one compile failed: {:?} / {:?}", f.err(), n.err());
            unreachable!()
        }
    };
    let incremental = next.ruleset();
    prop_assert_eq!(
        incremental.render(),
        full.render(),
        "{:?} after {:#?}",
        path,
        ch
    );
    prop_assert_eq!(
        &incremental.sets,
        &full.sets,
        "sets ({:?}) after {:#?}",
        path,
        ch
    );
    prop_assert_eq!(
        &incremental.chains,
        &full.chains,
        "chains ({:?}) after {:#?}",
        path,
        ch
    );
    prop_assert_eq!(
        &incremental.logs,
        &full.logs,
        "logs ({:?}) after {:#?}",
        path,
        ch
    );
    prop_assert!(
        **incremental == full,
        "IR differs ({:?}) after {:#?}",
        path,
        ch
    );
    let ips = addresses(engine);
    let fresh = compile(engine, node).unwrap();
    prop_assert_eq!(
        verdicts(incremental, &ips),
        verdicts(&fresh, &ips),
        "{:?} after {:#?}",
        path,
        ch
    );
    Ok(Some((next, path)))
}

/// A cluster for relabels: 12 to 23 pods in three namespaces, every address its own
/// prefix (so a peer of five pods is a named set, one of four an inline list), about half
/// of them with an IPv6 address as well (so a family can come and go from a peer), and the
/// random policies and namespaces of [`cluster`].
fn relabel_cluster() -> impl Strategy<Value = Cluster> {
    let pods = proptest::collection::vec((0..3u8, labels(), any::<bool>(), 0..2u8), 12..24);
    (cluster(), pods).prop_map(|(mut c, pods)| {
        c.pods = pods
            .into_iter()
            .enumerate()
            .map(|(i, (ns, labels, v6, node))| {
                let i = i as u8;
                let mut ips = vec![IpAddr::from([10, 100 + ns, 0, 4 * i + 1])];
                if v6 {
                    ips.push(IpAddr::from([
                        0xfd00,
                        0,
                        0,
                        0,
                        0,
                        0,
                        ns.into(),
                        4 * u16::from(i) + 1,
                    ]));
                }
                Pod {
                    namespace: format!("ns{ns}"),
                    name: format!("pod{i}"),
                    labels,
                    node_name: Some(format!("node{node}")),
                    host_network: false,
                    ips,
                    ports: vec![ContainerPort {
                        name: Some("http".into()),
                        port: Port::new(80).unwrap(),
                        protocol: Protocol::Tcp,
                    }],
                    ready: true,
                    origin: Origin::default(),
                }
            })
            .collect();
        c
    })
}

/// Mostly relabels (of the pod with this index, modulo their number), with now and then a
/// policy edit between them.
#[derive(Debug, Clone)]
enum Step {
    /// The pod with this index (modulo their number) takes these labels.
    Relabel(usize, Labels),
    /// Another change.
    Other(Box<Change>),
}

fn relabel_change() -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => (0..24usize, labels()).prop_map(|(i, l)| Step::Relabel(i, l)),
        1 => (0..5usize).prop_flat_map(network_policy).prop_map(|p| Step::Other(Box::new(Change::Upsert(Object::NetworkPolicy(p))))),
        1 => (0..5usize).prop_flat_map(admin_policy).prop_map(|p| Step::Other(Box::new(Change::Upsert(Object::Admin(p))))),
    ]
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
            match step(&mut engine, &mut compiled, node, ch)? {
                Some((next, _)) => {
                    compiled = next;
                    compiled.tidy(); // as the agent does after each commit
                }
                None => return Ok(()),
            }
        }
    }

}

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(40, 0x7e1a_2026))]

    /// Relabels that move pods in and out of peer selections, across the inline/named-set
    /// boundary and the families, compile as the full compile does.
    #[test]
    fn relabels_compile_as_the_full_compile(
        c in relabel_cluster(),
        changes in proptest::collection::vec(relabel_change(), 1..16),
        on_node in any::<bool>(),
    ) {
        let node = on_node.then_some("node0");
        let mut engine = Engine::new(c, Options::default());
        let Ok(mut compiled) = Compiled::full(&engine, node, None) else {
            return Ok(());
        };
        for ch in changes {
            let ch = match ch {
                Step::Relabel(i, labels) => {
                    let pods = &engine.cluster().pods;
                    Change::Upsert(Object::Pod(Pod { labels, ..pods[i % pods.len()].clone() }))
                }
                Step::Other(ch) => *ch,
            };
            match step(&mut engine, &mut compiled, node, ch)? {
                Some((next, _)) => {
                    compiled = next;
                    compiled.tidy(); // as the agent does after each commit
                }
                None => return Ok(()),
            }
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
            Change::Upsert(Object::NetworkPolicy(edited)),
            Change::Upsert(Object::Pod(moved)),
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
