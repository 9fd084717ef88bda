//! Pods that share an address fail closed: no connection to or from either is allowed
//! (a data plane cannot tell them apart), in the evaluator, the matrix, the side programs
//! and across incremental updates.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use palisade_analysis::Analysis;
use palisade_engine::{Change, Decision, Engine, Flow, Options, Tier};
use palisade_model::{Kind, Object, ObjectKey, Protocol};

const CLUSTER: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: a}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: q, namespace: b}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: r, namespace: a}
status: {podIP: 10.0.0.3}
---
apiVersion: v1
kind: Pod
metadata: {name: s, namespace: a}
status: {podIP: 10.0.0.4}
"#;

fn engine() -> Engine {
    let loaded = palisade_model::load_str(CLUSTER).unwrap();
    Engine::new(loaded.cluster, Options::default())
}

fn flow(e: &Engine, from: (&str, &str), to: (&str, &str)) -> Flow {
    let ep = |(ns, n): (&str, &str)| e.endpoint_for_pod(e.pod_id(ns, n).unwrap(), None).unwrap();
    Flow {
        src: ep(from),
        dst: ep(to),
        protocol: Protocol::Tcp,
        port: 80,
    }
}

#[test]
fn both_pods_of_a_shared_address_are_denied_both_ways() {
    let e = engine();
    for shared in [("a", "p"), ("b", "q")] {
        let out = e.evaluate(&flow(&e, shared, ("a", "r")));
        assert!(!out.allowed, "{shared:?} -> a/r");
        assert_eq!(out.egress.tier, Tier::FailClosed);
        assert_eq!(
            out.egress.decision,
            Decision::SharedAddress("10.0.0.1".parse().unwrap())
        );
        let into = e.evaluate(&flow(&e, ("a", "r"), shared));
        assert!(!into.allowed, "a/r -> {shared:?}");
        assert!(into.egress.allowed, "the other side is unaffected");
        assert_eq!(into.ingress.tier, Tier::FailClosed);
        // The side programs a data plane compiles say the same.
        let id = e.pod_id(shared.0, shared.1).unwrap();
        for dir in [
            palisade_model::Direction::Ingress,
            palisade_model::Direction::Egress,
        ] {
            let prog = e.side_program(id, dir);
            assert_eq!(prog.shared_address, Some("10.0.0.1".parse().unwrap()));
        }
    }
    assert!(e.evaluate(&flow(&e, ("a", "r"), ("a", "s"))).allowed);
    let v = serde_json::to_value(e.evaluate(&flow(&e, ("a", "p"), ("a", "r")))).unwrap();
    assert_eq!(v["egress"]["reason"], "SharedAddress");
    assert_eq!(v["egress"]["address"], "10.0.0.1");
}

/// A node's address held by pods: one pod alone shares it with no other pod; a second pod
/// holding it shares it with the first (the node keeps owning the address either way).
#[test]
fn pods_holding_a_node_address_share_it_with_each_other_only() {
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {addresses: [{type: InternalIP, address: 10.0.0.9}]}\n---\n";
    let one = format!(
        "{node}{}",
        CLUSTER.replacen("podIP: 10.0.0.4", "podIP: 10.0.0.9", 1)
    );
    let e = Engine::new(
        palisade_model::load_str(&one).unwrap().cluster,
        Options::default(),
    );
    let s = e.pod_id("a", "s").unwrap();
    assert_eq!(
        e.shared_address(s),
        None,
        "a/s alone holds the node's address"
    );
    let two = one.replacen("podIP: 10.0.0.3", "podIP: 10.0.0.9", 1);
    let e = Engine::new(
        palisade_model::load_str(&two).unwrap().cluster,
        Options::default(),
    );
    for (ns, name) in [("a", "r"), ("a", "s")] {
        let id = e.pod_id(ns, name).unwrap();
        assert_eq!(
            e.shared_address(id),
            Some("10.0.0.9".parse().unwrap()),
            "{ns}/{name}"
        );
    }
    assert_eq!(
        e.shared_address(e.pod_id("b", "q").unwrap()),
        Some("10.0.0.1".parse().unwrap())
    );
}

#[test]
fn the_matrix_keeps_shared_pods_apart() {
    let e = engine();
    let m = Analysis::new(&e).matrix(&[palisade_analysis::Probe {
        protocol: Protocol::Tcp,
        port: 80,
    }]);
    let idx = |ns: &str, n: &str| {
        let id = e.pod_id(ns, n).unwrap();
        m.pods.iter().position(|&p| p == id).unwrap()
    };
    let (p, r, s) = (idx("a", "p"), idx("a", "r"), idx("a", "s"));
    assert!(!m.allowed(0, p, r) && !m.allowed(0, r, p));
    assert!(m.allowed(0, r, s) && m.allowed(0, s, r));
}

#[test]
fn removing_one_pod_ends_the_conflict_and_moving_one_starts_it() {
    let mut e = engine();
    e.apply(Change::Remove(ObjectKey::new(Kind::Pod, Some("b"), "q")));
    assert!(e.evaluate(&flow(&e, ("a", "p"), ("a", "r"))).allowed);
    let mut s = e.cluster().pods[e.pod_id("a", "s").unwrap()].clone();
    s.ips = vec!["10.0.0.3".parse().unwrap()];
    e.apply(Change::Upsert(Object::Pod(s)));
    let v = e.evaluate(&flow(&e, ("a", "p"), ("a", "r")));
    assert_eq!(
        v.ingress.tier,
        Tier::FailClosed,
        "a/r now shares 10.0.0.3 with a/s"
    );
    assert!(e.evaluate(&flow(&e, ("a", "p"), ("a", "s"))).ingress.tier == Tier::FailClosed);
}

#[test]
fn removing_another_pod_keeps_a_renumbered_shared_pod_failing_closed() {
    // a/r first, so removing it moves the last pod (b/q, which shares 10.0.0.1) into its slot.
    let text = CLUSTER.replacen(
        "metadata: {name: r, namespace: a}",
        "metadata: {name: t, namespace: a}",
        1,
    );
    let reordered = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: r, namespace: a}}\nstatus: {{podIP: 10.0.0.3}}\n---\n{}",
        text.replace("status: {podIP: 10.0.0.3}", "status: {podIP: 10.0.0.5}")
    );
    let mut e = Engine::new(
        palisade_model::load_str(&reordered).unwrap().cluster,
        Options::default(),
    );
    e.apply(Change::Remove(ObjectKey::new(Kind::Pod, Some("a"), "r")));
    for shared in [("a", "p"), ("b", "q")] {
        let v = e.evaluate(&flow(&e, shared, ("a", "s")));
        assert_eq!(
            v.egress.tier,
            Tier::FailClosed,
            "{shared:?} after the renumbering"
        );
    }
    assert!(e.evaluate(&flow(&e, ("a", "t"), ("a", "s"))).allowed);
}

#[test]
fn explain_walks_no_tier_for_a_side_failing_closed_on_a_shared_address() {
    // An admin policy selects every pod: a walked side would list it.
    let text = format!(
        "{CLUSTER}---\napiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {{name: all}}\nspec:\n  priority: 1\n  subject: {{namespaces: {{}}}}\n  egress: [{{action: Deny, to: [{{networks: [192.0.2.0/24]}}]}}]\n"
    );
    let e = Engine::new(
        palisade_model::load_str(&text).unwrap().cluster,
        Options::default(),
    );
    let x = Analysis::new(&e).explain(&flow(&e, ("a", "p"), ("a", "r")));
    assert!(x.egress.steps.is_empty(), "{x}");
    assert!(!x.ingress.steps.is_empty(), "a/r's side is walked: {x}");
    let text = x.to_string();
    let egress = text.split("\n\n").nth(1).unwrap();
    assert!(!egress.contains("Admin tier"), "{egress}");
    assert!(egress.contains("shares its address 10.0.0.1"), "{egress}");
}
