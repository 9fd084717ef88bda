//! Conntrack cleanup against the kernel: `cut_forbidden` deletes exactly the tracked
//! connections the ruleset forbids, leaves closed ones and allowed ones, in a fresh
//! network namespace (root; skipped with a printed reason otherwise).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod support;

use std::net::IpAddr;

use palisade_engine::{Engine, Options};
use palisade_nft::compile;
use support::ct::{Entry, Netns, insert};

const XYZ: &str = include_str!("../../../examples/xyz/cluster.yaml");
const DENY: &str = include_str!("../../../examples/xyz/policies/01-deny-ingress-x.yaml");

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn forbidden_connections_are_cut_in_one_pass_and_closed_or_allowed_ones_kept() {
    if !palisade_test_support::require_root(
        "forbidden_connections_are_cut_in_one_pass_and_closed_or_allowed_ones_kept",
    ) {
        return;
    }
    // Namespace x admits only y/b (10.0.1.11) on 80/TCP; y/c (10.0.1.12) is forbidden.
    let loaded =
        palisade_model::load_sources([("c", XYZ), ("p", DENY)], Default::default()).unwrap();
    let ruleset = compile(&Engine::new(loaded.cluster, Options::default()), None).unwrap();
    let ns = Netns::new("cut");
    let (x_a, y_b, y_c) = (ip("10.0.0.10"), ip("10.0.1.11"), ip("10.0.1.12"));
    let entry = |src, sport, proto, tcp_state| Entry {
        src,
        dst: x_a,
        proto,
        sport,
        dport: 80,
        tcp_state,
    };
    let mut entries = Vec::new();
    // 150 forbidden established TCP connections: more than two deletion datagrams.
    entries.extend((0..150).map(|i| entry(y_c, 20000 + i, 6, 3)));
    entries.push(entry(y_c, 30000, 17, 0)); // forbidden UDP
    entries.push(entry(y_c, 30001, 6, 5)); // forbidden, CLOSE_WAIT: still cut
    entries.push(entry(y_c, 30002, 6, 7)); // forbidden, TIME_WAIT: kept
    entries.push(entry(y_b, 30003, 6, 3)); // allowed
    insert(&ns.0, &entries).unwrap();
    assert_eq!(ns.conntrack_list().lines().count(), 154);

    let cut = palisade_nft::cut_forbidden(&ruleset, Some(&ns.0)).unwrap();
    let left = ns.conntrack_list();
    assert_eq!(
        cut, 152,
        "150 established + UDP + CLOSE_WAIT; left:\n{left}"
    );
    assert_eq!(left.lines().count(), 2, "{left}");
    for kept in [
        "TIME_WAIT src=10.0.1.12 dst=10.0.0.10 sport=30002 dport=80",
        "ESTABLISHED src=10.0.1.11 dst=10.0.0.10 sport=30003 dport=80",
    ] {
        assert!(
            left.lines().any(|l| l.contains(kept)),
            "{kept} not in\n{left}"
        );
    }
    // A second pass finds nothing more to cut.
    assert_eq!(
        palisade_nft::cut_forbidden(&ruleset, Some(&ns.0)).unwrap(),
        0
    );
}

/// Two dual-stack pods; `a` accepts no ingress.
const DUAL_STACK: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: d}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: d, labels: {pod: a}}
spec: {containers: [{name: c, ports: [{containerPort: 80}]}]}
status: {podIP: 10.9.0.1, podIPs: [{ip: 10.9.0.1}, {ip: "fd00:9::1"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: d, labels: {pod: b}}
spec: {containers: [{name: c}]}
status: {podIP: 10.9.0.2, podIPs: [{ip: 10.9.0.2}, {ip: "fd00:9::2"}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-a, namespace: d}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Ingress]
"#;

#[test]
fn ipv6_connections_are_cut_too() {
    if !palisade_test_support::require_root("ipv6_connections_are_cut_too") {
        return;
    }
    let loaded = palisade_model::load_sources([("d", DUAL_STACK)], Default::default()).unwrap();
    let ruleset = compile(&Engine::new(loaded.cluster, Options::default()), None).unwrap();
    let ns = Netns::new("cut6");
    let entry = |src: &str, dst: &str, proto| Entry {
        src: ip(src),
        dst: ip(dst),
        proto,
        sport: 40000,
        dport: 80,
        tcp_state: 3,
    };
    insert(
        &ns.0,
        &[
            entry("fd00:9::2", "fd00:9::1", 6),  // forbidden
            entry("fd00:9::2", "fd00:9::1", 17), // forbidden
            entry("10.9.0.2", "10.9.0.1", 6),    // forbidden
            entry("fd00:9::1", "fd00:9::2", 6),  // allowed (b accepts ingress)
        ],
    )
    .unwrap();
    let cut = palisade_nft::cut_forbidden(&ruleset, Some(&ns.0)).unwrap();
    let left = ns.conntrack_list();
    assert_eq!(cut, 3, "left:\n{left}");
    assert_eq!(left.lines().count(), 1, "{left}");
    assert!(
        left.contains("src=fd00:9::1 dst=fd00:9::2 sport=40000 dport=80"),
        "{left}"
    );
}

#[test]
fn an_unknown_namespace_is_an_error_naming_it() {
    let Err(e) = palisade_nft::cut_forbidden(&Default::default(), Some("palct-no-such-ns")) else {
        panic!("no error")
    };
    assert!(e.to_string().contains("palct-no-such-ns"), "{e}");
}
