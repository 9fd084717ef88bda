//! Incremental updates equal a full recompile: random clusters, random sequences of
//! changes to every kind of object, verdicts compared on every address pair.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::net::IpAddr;
use std::sync::Arc;

use palisade_engine::{AddressCache, Engine, Flow, Options, PodId};
use palisade_model::*;
use proptest::prelude::*;

use palisade_gen::strategies::{admin_policy, cluster, labels, network_policy, pod};

/// The same change applied to a plain cluster: the reference for what `apply` must mean.
fn apply_to_cluster(c: &mut Cluster, change: &Change) {
    fn upsert<T: Clone>(v: &mut Vec<T>, x: &T, same: impl Fn(&T) -> bool) {
        match v.iter().position(same) {
            Some(i) => v[i] = x.clone(),
            None => v.push(x.clone()),
        }
    }
    match change {
        Change::Upsert(Object::Namespace(ns)) => {
            upsert(&mut c.namespaces, ns, |n| n.name == ns.name)
        }
        Change::Upsert(Object::Pod(p)) => {
            if !c.namespaces.iter().any(|n| n.name == p.namespace) {
                let labels = [(NAMESPACE_NAME_LABEL.to_string(), p.namespace.clone())].into();
                c.namespaces.push(Namespace {
                    name: p.namespace.clone(),
                    labels,
                    default_deny_ingress: false,
                    origin: None,
                });
            }
            upsert(&mut c.pods, p, |x| {
                x.namespace == p.namespace && x.name == p.name
            })
        }
        Change::Upsert(Object::Node(n)) => upsert(&mut c.nodes, n, |x| x.name == n.name),
        Change::Upsert(Object::NetworkPolicy(np)) => upsert(&mut c.network_policies, np, |x| {
            x.namespace == np.namespace && x.name == np.name
        }),
        Change::Upsert(Object::Admin(p)) => upsert(&mut c.admin_policies, p, |x| {
            x.kind == p.kind && x.name == p.name
        }),
        Change::Upsert(Object::Service(s)) => upsert(&mut c.services, s, |x| {
            x.namespace == s.namespace && x.name == s.name
        }),
        Change::Upsert(Object::EndpointSlice(s)) => upsert(&mut c.endpoint_slices, s, |x| {
            x.namespace == s.namespace && x.name == s.name
        }),
        Change::Remove(key) => {
            let namespace = key.namespace.as_deref().unwrap_or_default();
            let name = key.name.as_str();
            match key.kind {
                Kind::Namespace => {
                    c.namespaces.retain(|n| n.name != name);
                    c.pods.retain(|p| p.namespace != name);
                    c.network_policies.retain(|p| p.namespace != name);
                }
                Kind::Pod => c
                    .pods
                    .retain(|p| !(p.namespace == namespace && p.name == name)),
                Kind::Node => c.nodes.retain(|n| n.name != name),
                Kind::NetworkPolicy => c
                    .network_policies
                    .retain(|p| !(p.namespace == namespace && p.name == name)),
                Kind::AdminNetworkPolicy
                | Kind::ClusterNetworkPolicy
                | Kind::BaselineAdminNetworkPolicy => c
                    .admin_policies
                    .retain(|p| !(Some(p.kind) == key.kind.policy_kind() && p.name == name)),
                Kind::Service => c
                    .services
                    .retain(|s| !(s.namespace == namespace && s.name == name)),
                Kind::EndpointSlice => c
                    .endpoint_slices
                    .retain(|s| !(s.namespace == namespace && s.name == name)),
            }
        }
    }
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => (0..7usize).prop_flat_map(pod).prop_map(|mut p| {
            // one address per (namespace, name): distinct pods never share one
            if !p.host_network {
                let ns: u8 = p.namespace.trim_start_matches("ns").parse().unwrap();
                let i: u8 = p.name.trim_start_matches("pod").parse().unwrap();
                p.ips = vec![IpAddr::from([10, 100 + ns, 0, i + 1])];
            }
            Change::Upsert(Object::Pod(p))
        }),
        2 => (0..3usize, 0..7usize).prop_map(|(ns, i)| Change::Remove(ObjectKey::new(Kind::Pod, Some(&format!("ns{ns}")), &format!("pod{i}")))),
        2 => (0..5usize).prop_flat_map(network_policy).prop_map(|np| Change::Upsert(Object::NetworkPolicy(np))),
        1 => (0..3usize, 0..5usize).prop_map(|(ns, i)| Change::Remove(ObjectKey::new(Kind::NetworkPolicy, Some(&format!("ns{ns}")), &format!("np{i}")))),
        2 => (0..5usize).prop_flat_map(admin_policy).prop_map(|p| Change::Upsert(Object::Admin(p))),
        1 => (0..5usize).prop_flat_map(admin_policy).prop_map(|p| Change::Remove(ObjectKey::new(Kind::of_admin(p.kind), None, &p.name))),
        2 => (0..4usize, labels(), any::<bool>()).prop_map(|(i, mut labels, dd)| {
            labels.insert(NAMESPACE_NAME_LABEL.into(), format!("ns{i}"));
            Change::Upsert(Object::Namespace(Namespace { name: format!("ns{i}"), labels, default_deny_ingress: dd, origin: None }))
        }),
        1 => (0..4usize).prop_map(|i| Change::Remove(ObjectKey::new(Kind::Namespace, None, &format!("ns{i}")))),
        1 => (0..3usize, labels()).prop_map(|(i, labels)| Change::Upsert(Object::Node(Node {
            name: format!("node{i}"), labels, addresses: vec![format!("192.168.0.{}", i + 1).parse().unwrap()], origin: Origin::default(),
        }))),
        1 => (0..3usize).prop_map(|i| Change::Remove(ObjectKey::new(Kind::Node, None, &format!("node{i}")))),
    ]
}

fn verdicts(e: &Engine, ips: &[IpAddr]) -> Vec<(bool, &'static str)> {
    let mut out = Vec::new();
    for &src in ips {
        for &dst in ips {
            for protocol in Protocol::ALL {
                for port in [80u16, 81] {
                    let v = e.evaluate(&Flow {
                        src: e.endpoint_for_ip(src),
                        dst: e.endpoint_for_ip(dst),
                        protocol,
                        port,
                    });
                    out.push((v.allowed, v.ingress.tier.as_str()));
                    out.push((v.egress.allowed, v.egress.tier.as_str()));
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(200, 0x5eed_2026))]

    #[test]
    fn incremental_equals_full_recompile(c in cluster(), changes in proptest::collection::vec(change(), 1..12)) {
        let mut engine = Engine::new(c.clone(), Options::default());
        let mut mirror = c;
        // Kept across every change, as a data plane keeps it from one compile to the next.
        let addresses = Arc::new(AddressCache::default());
        for ch in &changes {
            // Half the upserts of an existing pod change only its labels (a relabel).
            let relabel = match ch {
                Change::Upsert(Object::Pod(p)) if p.name.ends_with(['0', '2', '4', '6']) => mirror
                    .pods
                    .iter()
                    .find(|q| q.namespace == p.namespace && q.name == p.name)
                    .map(|q| Change::Upsert(Object::Pod(Pod { labels: p.labels.clone(), ..q.clone() }))),
                _ => None,
            };
            let ch = relabel.as_ref().unwrap_or(ch);
            let programs = |e: &Engine| -> Vec<_> {
                let pods: Vec<PodId> = e.pod_ids().collect();
                [Direction::Ingress, Direction::Egress].map(|d| e.side_programs(&pods, d)).into()
            };
            let before = programs(&engine);
            let held: Vec<(String, String)> =
                engine.cluster().pods.iter().map(|p| (p.namespace.clone(), p.name.clone())).collect();
            // The address sets of the engine before the change, kept.
            let pods: Vec<PodId> = engine.pod_ids().collect();
            for d in [Direction::Ingress, Direction::Egress] {
                engine.side_classes_cached(&pods, d, &addresses);
            }
            let touched = engine.apply(ch.clone());
            apply_to_cluster(&mut mirror, ch);
            // A caller that holds pod ids and follows `ids` still names the same pods.
            let ids = PodId::all(held.len())
                .map(|id| touched.ids.iter().try_fold(id, |id, change| change.follow(id)));
            for (key, id) in held.iter().zip(ids) {
                let now = engine.pod_id(&key.0, &key.1);
                prop_assert_eq!(id, now, "pod {:?} after {:#?}", key, ch);
            }
            // What `apply` says it left alone is left alone (a data plane keeps it).
            // What it says it only moved peers of is the old program with those peers anew.
            if !touched.all {
                let after = programs(&engine);
                let new_peers = engine.new_peers(&touched, &addresses);
                for (b, a) in before.iter().zip(&after) {
                    prop_assert_eq!(b.len(), a.len());
                    for (pod, (b, a)) in PodId::all(b.len()).zip(b.iter().zip(a)) {
                        if !touched.contains(pod) {
                            prop_assert_eq!(b, a, "pod {} after {:#?}", pod, ch);
                        }
                        if !touched.reshaped(pod) {
                            let now = new_peers.program(b);
                            prop_assert!(now.is_ok(), "pod {} reshaped after {:#?}", pod, ch);
                            let now = now.unwrap().unwrap_or_else(|| b.clone());
                            prop_assert_eq!(&now, a, "pod {} after {:#?}", pod, ch);
                        }
                        // What it says changed only in its admin and baseline tiers is the
                        // old program with those tiers as they are now.
                        if touched.admin_tiers_only(pod) {
                            let now = new_peers.program(b);
                            prop_assert!(now.is_ok(), "pod {} reshaped after {:#?}", pod, ch);
                            let now = now.unwrap().unwrap_or_else(|| b.clone());
                            let now = palisade_engine::SideProgram {
                                admin: a.admin.clone(),
                                baseline: a.baseline.clone(),
                                ..now
                            };
                            prop_assert_eq!(&now, a, "pod {} after {:#?}", pod, ch);
                        }
                    }
                }
            }
            // The address sets kept from before the change, and those brought up to date
            // from them, are right for the engine after.
            let pods: Vec<PodId> = engine.pod_ids().collect();
            for d in [Direction::Ingress, Direction::Egress] {
                let cached = engine.side_classes_cached(&pods, d, &addresses);
                let fresh = engine.side_classes(&pods, d);
                prop_assert_eq!(cached.programs, fresh.programs, "{:?} after {:#?}", d, ch);
            }
            addresses.prune();
        }
        let full = Engine::new(mirror.clone(), Options::default());
        let mut ips: Vec<IpAddr> = mirror.pods.iter().flat_map(|p| p.ips.clone()).collect();
        ips.extend(["192.168.0.1", "192.168.0.2", "192.168.0.3", "203.0.113.7"].iter().map(|s| s.parse::<IpAddr>().unwrap()));
        ips.sort();
        ips.dedup();
        prop_assert_eq!(verdicts(&engine, &ips), verdicts(&full, &ips), "after {:#?}", changes);
        prop_assert_eq!(engine.cluster().pods.len(), mirror.pods.len());
    }
}

/// Every side program of every pod, ingress then egress.
fn all_programs(e: &Engine) -> [Vec<palisade_engine::SideProgram>; 2] {
    let pods: Vec<PodId> = e.pod_ids().collect();
    [Direction::Ingress, Direction::Egress].map(|d| e.side_programs(&pods, d))
}

/// Relabels in a generated cluster without admin policies (no namespace-relative peers, so
/// a relabel names the pods it touches): a pod taking the labels of pods of other
/// deployments leaves every program outside `Touched` as it was, and changes some outside
/// the pod itself (the subjects of the policies whose peers it joined or left).
#[test]
fn a_relabel_touches_the_subjects_of_the_peer_sets_it_moves_between() {
    let g = palisade_gen::generate(&palisade_gen::Spec {
        pods: 300,
        policies: 60,
        seed: 3,
        admin: false,
    });
    let mut e = Engine::new(g.load().unwrap(), Options::default());
    let mut others_changed = 0;
    let mut peers_only = 0;
    for (a, b) in [(0, 150), (7, 299), (42, 3), (120, 260), (0, 1)] {
        let mut moved = e.cluster().pods[a].clone();
        moved.labels = e.cluster().pods[b].labels.clone();
        let before = all_programs(&e);
        let touched = e.apply(Change::Upsert(Object::Pod(moved)));
        assert!(!touched.all, "a relabel names the pods it touches");
        assert!(
            touched.reshaped(PodId::new(a)),
            "the relabelled pod's own programs are computed anew"
        );
        for pod in e.pod_ids() {
            if pod != PodId::new(a) && touched.contains(pod) {
                peers_only += usize::from(!touched.reshaped(pod));
            }
        }
        let after = all_programs(&e);
        let new_peers = e.new_peers(&touched, &Default::default());
        for (bs, xs) in before.iter().zip(&after) {
            for (pod, (was, is)) in PodId::all(bs.len()).zip(bs.iter().zip(xs)) {
                if !touched.contains(pod) {
                    assert_eq!(was, is, "pod {pod} untouched by relabelling pod {a}");
                } else if pod != PodId::new(a) && was != is {
                    others_changed += 1;
                }
                if !touched.reshaped(pod) {
                    let now = new_peers.program(was).expect("only peers moved");
                    assert_eq!(&now.unwrap_or_else(|| was.clone()), is, "pod {pod}");
                }
            }
        }
    }
    assert!(others_changed > 0, "some relabel changed other pods' peers");
    assert!(
        peers_only > 0,
        "other pods' programs changed only in peer addresses"
    );
}

/// After a relabel, a fresh class computed through [`palisade_engine::NewPeers`] and an
/// old program brought up to date by it hold each moved rule's peers as one `Arc` (the
/// incremental compile then compares them by pointer), and are equal.
#[test]
fn fresh_classes_share_the_moved_peers_of_programs_brought_up_to_date() {
    let g = palisade_gen::generate(&palisade_gen::Spec {
        pods: 300,
        policies: 60,
        seed: 3,
        admin: false,
    });
    let mut e = Engine::new(g.load().unwrap(), Options::default());
    let mut shared = 0;
    for (a, b) in [(0, 150), (7, 299), (42, 3), (120, 260)] {
        let mut moved = e.cluster().pods[a].clone();
        moved.labels = e.cluster().pods[b].labels.clone();
        let before = all_programs(&e);
        let touched = e.apply(Change::Upsert(Object::Pod(moved)));
        let new_peers = e.new_peers(&touched, &Default::default());
        for (bs, d) in before.iter().zip([Direction::Ingress, Direction::Egress]) {
            for (pod, was) in PodId::all(bs.len()).zip(bs) {
                if touched.reshaped(pod) {
                    continue;
                }
                let Some(now) = new_peers.program(was).expect("only peers moved") else {
                    continue;
                };
                let fresh = new_peers.side_classes(&[pod], d);
                let fresh = &fresh.programs[0];
                let rules = |p: &palisade_engine::SideProgram| {
                    let tiers = [&p.admin, &p.network, &p.baseline];
                    tiers
                        .into_iter()
                        .flat_map(|t| t.iter())
                        .cloned()
                        .collect::<Vec<_>>()
                };
                let (was, now_rules, fresh_rules) = (rules(was), rules(&now), rules(fresh));
                for ((w, n), f) in was.iter().zip(&now_rules).zip(&fresh_rules) {
                    if !std::sync::Arc::ptr_eq(&w.peers.addrs, &n.peers.addrs) {
                        assert!(
                            std::sync::Arc::ptr_eq(&n.peers.addrs, &f.peers.addrs),
                            "pod {pod}: the moved peers are computed twice"
                        );
                        shared += 1;
                    }
                }
                let mut now = now.clone();
                now.exempt.clear();
                assert_eq!(&now, fresh, "pod {pod}");
            }
        }
    }
    assert!(shared > 0, "some relabel moved some peers");
}

/// The programs of one `side_classes` hold one `Arc` per distinct tier, and a tier whose
/// rules' peers moved is brought up to date once: every program that shared it shares the
/// new one.
#[test]
fn equal_tiers_are_one_arc_and_move_together() {
    let g = palisade_gen::generate(&palisade_gen::Spec {
        pods: 300,
        policies: 60,
        seed: 3,
        admin: true,
    });
    let mut e = Engine::new(g.load().unwrap(), Options::default());
    let tiers =
        |p: &palisade_engine::SideProgram| [p.admin.clone(), p.network.clone(), p.baseline.clone()];
    let (mut shared, mut together) = (0, 0);
    for (a, b) in [(0, 150), (7, 299), (42, 3), (120, 260)] {
        let pods: Vec<PodId> = e.pod_ids().collect();
        let mut before = Vec::new();
        for d in [Direction::Ingress, Direction::Egress] {
            let programs = e.side_classes(&pods, d).programs;
            for (i, p) in programs.iter().enumerate() {
                for (t, tier) in tiers(p).iter().enumerate() {
                    let earlier = programs[..i]
                        .iter()
                        .map(|q| tiers(q)[t].clone())
                        .find(|x| x == tier);
                    if let Some(x) = earlier.filter(|_| !tier.is_empty()) {
                        assert!(Arc::ptr_eq(&x, tier), "{d:?}: equal tiers apart");
                        shared += 1;
                    }
                }
            }
            before.extend(programs);
        }
        let mut moved = e.cluster().pods[a].clone();
        moved.labels = e.cluster().pods[b].labels.clone();
        let touched = e.apply(Change::Upsert(Object::Pod(moved)));
        let new_peers = e.new_peers(&touched, &Default::default());
        let mut now = Vec::new();
        for was in &before {
            let Ok(m) = new_peers.moved(was) else {
                continue; // a program the relabel reshaped
            };
            let mut p = was.clone();
            m.apply(&mut p);
            let copy = new_peers.program(was).unwrap();
            assert_eq!(copy.unwrap_or_else(|| was.clone()), p);
            now.push((tiers(was), tiers(&p)));
        }
        for (i, (was, p)) in now.iter().enumerate() {
            for (other, q) in &now[..i] {
                for t in 0..3 {
                    if Arc::ptr_eq(&was[t], &other[t]) && !Arc::ptr_eq(&was[t], &p[t]) {
                        assert!(Arc::ptr_eq(&p[t], &q[t]), "a shared tier moved twice");
                        together += 1;
                    }
                }
            }
        }
    }
    assert!(shared > 0, "no two classes share a tier");
    assert!(together > 0, "no shared tier moved");
}
