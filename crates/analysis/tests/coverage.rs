//! Coverage: the policies of every pod and direction, what nothing covers, and exposure
//! ranges that are exact at the edges of the policies' CIDRs and port ranges.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use palisade_analysis::Analysis;
use palisade_engine::Flow;
use palisade_model::{Direction, Protocol};

const POLICIES: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-from-net, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
    - from: [{ipBlock: {cidr: 198.51.100.0/24, except: [198.51.100.128/25]}}]
      ports: [{port: 8000, endPort: 8080}, {protocol: UDP, port: 53}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {ns: "y"}}}
  egress: [{action: Deny, to: [{networks: [0.0.0.0/0]}]}]
"#;

#[test]
fn every_pod_and_direction_names_its_policies() {
    let e = common::engine(POLICIES);
    let c = Analysis::new(&e).coverage();
    assert_eq!(c.pods.len(), 9);
    let pod = |k: &str| c.pods.iter().find(|p| p.key == k).unwrap();
    let xa = pod("x/a");
    assert_eq!(xa.ingress.isolated_by.len(), 1);
    assert_eq!(
        xa.ingress.isolated_by[0].to_string(),
        "NetworkPolicy x/web-from-net"
    );
    assert!(xa.egress.is_open());
    let ya = pod("y/a");
    assert!(ya.ingress.is_open());
    assert_eq!(
        ya.egress
            .baseline
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>(),
        ["BaselineAdminNetworkPolicy default"]
    );
    let open_ingress: Vec<&str> = c.open(Direction::Ingress).map(|p| p.key.as_str()).collect();
    assert_eq!(
        open_ingress,
        ["x/b", "x/c", "y/a", "y/b", "y/c", "z/a", "z/b", "z/c"]
    );
    assert_eq!(c.open_namespaces, ["z"], "x and y have a covered pod");
    assert!(c.host_network.is_empty());
}

#[test]
fn exposure_is_exact_at_the_edges_of_cidrs_and_port_ranges() {
    let e = common::engine(POLICIES);
    let c = Analysis::new(&e).coverage();
    let xa = c.pods.iter().find(|p| p.key == "x/a").unwrap();
    let ex = xa.exposure.as_ref().unwrap();
    let shown: Vec<String> = ex.ports.iter().map(|p| p.to_string()).collect();
    assert_eq!(shown, ["TCP 8000-8080", "UDP 53"]);
    assert!(!ex.from_everywhere, "only from part of 198.51.100.0/24");
    assert!(!ex.sources.is_empty());
    // Every source reported really is inside the block, and the engine agrees at the edges.
    let a = e.pod_id("x", "a").unwrap();
    let dst = e.endpoint_for_pod(a, None).unwrap();
    for (ip, port, want) in [
        ("198.51.100.1", 8000, true),
        ("198.51.100.127", 8080, true),
        ("198.51.100.1", 7999, false),
        ("198.51.100.1", 8081, false),
        ("198.51.100.128", 8000, false),
        ("198.51.101.0", 8000, false),
    ] {
        let flow = Flow {
            src: e.endpoint_for_ip(ip.parse().unwrap()),
            dst,
            protocol: Protocol::Tcp,
            port,
        };
        assert_eq!(e.evaluate(&flow).allowed, want, "{ip}:{port}");
    }
    for ip in &ex.sources {
        assert!(
            "198.51.100.0/25"
                .parse::<ipnet::IpNet>()
                .unwrap()
                .contains(ip),
            "{ip} is a source that reaches x/a"
        );
    }
    // A pod no policy covers is reachable on every port from everywhere.
    let za = c.pods.iter().find(|p| p.key == "z/a").unwrap();
    let ex = za.exposure.as_ref().unwrap();
    assert!(ex.from_everywhere);
    let shown: Vec<String> = ex.ports.iter().map(|p| p.to_string()).collect();
    assert_eq!(shown, ["TCP 1-65535", "UDP 1-65535", "SCTP 1-65535"]);
    assert_eq!(
        c.exposed().count(),
        9,
        "x/a on some ports, every other pod on all"
    );
}

/// A cluster-wide admin policy with narrow Allow rules leaves every other connection to
/// the lower tiers: the pods it selects are still open, and exposed to the outside.
#[test]
fn a_cluster_wide_admin_policy_with_narrow_allows_does_not_cover() {
    let e = common::engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: allow-monitoring}
spec:
  priority: 10
  subject: {namespaces: {}}
  ingress: [{action: Allow, from: [{namespaces: {matchLabels: {ns: "y"}}}], ports: [{portNumber: {port: 9090}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all, namespace: x}
spec: {podSelector: {matchLabels: {pod: a}}, policyTypes: [Ingress, Egress]}
"#,
    );
    let c = Analysis::new(&e).coverage();
    let open: Vec<&str> = c
        .selected_but_open(Direction::Ingress)
        .map(|p| p.key.as_str())
        .collect();
    assert_eq!(
        open,
        ["x/b", "x/c", "y/a", "y/b", "y/c", "z/a", "z/b", "z/c"]
    );
    assert!(c.open(Direction::Ingress).all(|p| !p.ingress.no_policy()));
    assert_eq!(c.exposed().count(), 8, "every pod but x/a, on every port");
    let xa = c.pods.iter().find(|p| p.key == "x/a").unwrap();
    assert!(xa.ingress.default_deny && xa.egress.default_deny, "{xa:?}");
    assert!(!xa.ingress.is_open());
    let dd: Vec<&str> = c
        .default_deny(Direction::Ingress)
        .map(|p| p.key.as_str())
        .collect();
    assert_eq!(dd, ["x/a"]);
}
