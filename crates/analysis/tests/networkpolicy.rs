//! Truth tables for NetworkPolicy semantics on the e2e model (x, y, z × a, b, c).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;
use common::*;
use palisade_engine::{Decision, Exemption, Options, Semantics, Tier};

#[test]
fn no_policies_allow_everything() {
    let e = engine("");
    for probe in [TCP80, UDP81, SCTP80] {
        assert_matrix(&e, probe, |_, _| true);
    }
    let v = eval(&e, "x/a", "y/b", TCP80);
    assert_eq!(
        (v.egress.tier, v.ingress.tier),
        (Tier::Default, Tier::Default)
    );
}

const DENY_INGRESS_X: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-ingress, namespace: x}
spec:
  podSelector: {}
"#;

#[test]
fn default_deny_ingress() {
    let e = engine(DENY_INGRESS_X);
    for probe in [TCP80, UDP80, SCTP80] {
        assert_matrix(&e, probe, |_, to| ns(to) != "x");
    }
    let v = eval(&e, "y/a", "x/b", TCP80);
    assert!(!v.allowed);
    assert!(v.egress.allowed && v.egress.tier == Tier::Default);
    assert_eq!(v.ingress.tier, Tier::NetworkPolicy);
    let Decision::Isolated(by) = &v.ingress.decision else {
        panic!("{:?}", v.ingress.decision)
    };
    let names: Vec<String> = by.iter().map(|p| p.to_string()).collect();
    assert_eq!(names, ["NetworkPolicy x/deny-ingress"]);
    // a pod can always reach itself
    assert_eq!(
        eval(&e, "x/a", "x/a", TCP80).ingress.decision,
        Decision::Exempt(Exemption::SamePod)
    );
}

#[test]
fn default_deny_egress() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-egress, namespace: x}
spec:
  podSelector: {}
  policyTypes: [Egress]
"#,
    );
    assert_matrix(&e, TCP80, |from, _| ns(from) != "x");
    assert_matrix(&e, UDP81, |from, _| ns(from) != "x");
    let v = eval_to_ip(&e, "x/a", "8.8.8.8", UDP80);
    assert!(!v.allowed && v.egress.tier == Tier::NetworkPolicy);
}

#[test]
fn deny_both_directions() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all, namespace: 'y'}
spec:
  podSelector: {}
  policyTypes: [Ingress, Egress]
"#,
    );
    assert_matrix(&e, TCP80, |from, to| ns(from) != "y" && ns(to) != "y");
}

#[test]
fn allow_all_ingress_after_deny_is_additive() {
    let e = engine(&format!(
        "{DENY_INGRESS_X}---\n{}",
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-all, namespace: x}
spec:
  podSelector: {}
  ingress: [{}]
"#
    ));
    assert_matrix(&e, TCP80, |_, _| true);
    let v = eval(&e, "y/a", "x/b", TCP80);
    assert_eq!(
        decided_by(&v.ingress),
        "NetworkPolicy NetworkPolicy x/allow-all rule 0"
    );
}

#[test]
fn pod_selector_peer_is_own_namespace_only() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a-from-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - podSelector: {matchLabels: {pod: b}}
"#,
    );
    assert_matrix(&e, TCP80, |from, to| to != "x/a" || from == "x/b");
}

#[test]
fn namespace_selector_peer() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a-from-y, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {ns: 'y'}}
"#,
    );
    assert_matrix(&e, UDP80, |from, to| to != "x/a" || ns(from) == "y");
}

#[test]
fn namespace_and_pod_selector_are_anded() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: and, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {ns: 'y'}}
      podSelector: {matchLabels: {pod: c}}
"#,
    );
    assert_matrix(&e, TCP80, |from, to| to != "x/a" || from == "y/c");
}

#[test]
fn separate_peers_are_ored() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: or, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {ns: 'y'}}
    - podSelector: {matchLabels: {pod: c}}
"#,
    );
    assert_matrix(&e, TCP80, |from, to| {
        to != "x/a" || ns(from) == "y" || from == "x/c"
    });
}

#[test]
fn match_expressions() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: exprs, namespace: x}
spec:
  podSelector:
    matchExpressions: [{key: pod, operator: In, values: [a, b]}]
  ingress:
  - from:
    - namespaceSelector:
        matchExpressions: [{key: ns, operator: NotIn, values: ['y']}]
      podSelector:
        matchExpressions: [{key: pod, operator: Exists}, {key: missing, operator: DoesNotExist}]
"#,
    );
    assert_matrix(&e, TCP80, |from, to| {
        !matches!(to, "x/a" | "x/b") || ns(from) != "y"
    });
}

#[test]
fn named_port_ingress_resolves_against_destination_with_protocol() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: named, namespace: x}
spec:
  podSelector: {}
  ingress:
  - ports:
    - port: serve-81-udp
      protocol: UDP
    - port: serve-80-udp   # protocol defaults to TCP: the UDP container port never matches
"#,
    );
    assert_matrix(&e, UDP81, |_, _| true);
    assert_matrix(&e, UDP80, |_, to| ns(to) != "x");
    assert_matrix(&e, TCP80, |_, to| ns(to) != "x");
    assert_matrix(&e, TCP81, |_, to| ns(to) != "x");
}

#[test]
fn named_port_egress_resolves_against_destination_pod() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: named-egress, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress:
  - ports: [{port: serve-81-tcp}]
"#,
    );
    assert_matrix(&e, TCP81, |_, _| true);
    assert_matrix(&e, TCP80, |from, _| from != "x/a");
    // an external destination has no named ports
    assert!(!eval_to_ip(&e, "x/a", "192.0.2.1", TCP81).allowed);
}

#[test]
fn end_port_ranges_are_inclusive() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: range, namespace: x}
spec:
  podSelector: {}
  ingress:
  - ports:
    - {protocol: TCP, port: 79, endPort: 80}
    - {protocol: UDP, port: 81, endPort: 81}
"#,
    );
    assert_matrix(&e, TCP80, |_, _| true);
    assert_matrix(&e, TCP81, |_, to| ns(to) != "x");
    assert_matrix(&e, UDP81, |_, _| true);
    assert_matrix(&e, UDP80, |_, to| ns(to) != "x");
}

#[test]
fn port_without_number_matches_whole_protocol() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: udp-only, namespace: x}
spec:
  podSelector: {}
  ingress:
  - ports: [{protocol: UDP}]
"#,
    );
    assert_matrix(&e, UDP80, |_, _| true);
    assert_matrix(&e, UDP81, |_, _| true);
    assert_matrix(&e, TCP80, |_, to| ns(to) != "x");
    assert_matrix(&e, SCTP80, |_, to| ns(to) != "x");
}

#[test]
fn ip_block_with_except_covers_pod_ips() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: cidr, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress:
  - to:
    - ipBlock:
        cidr: 10.0.0.0/16
        except: [10.0.1.0/24, 10.0.2.12/32]
"#,
    );
    // y is 10.0.1.0/24; z/c is 10.0.2.12
    assert_matrix(&e, TCP80, |from, to| {
        from != "x/a" || (ns(to) != "y" && to != "z/c")
    });
    assert!(!eval_to_ip(&e, "x/a", "192.0.2.1", TCP80).allowed);
    assert!(eval_to_ip(&e, "x/a", "10.0.200.1", TCP80).allowed);
}

#[test]
fn egress_to_external_ips() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: to-internet, namespace: x}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress:
  - to: [{ipBlock: {cidr: 0.0.0.0/0, except: [10.0.0.0/8]}}]
    ports: [{port: 443}]
"#,
    );
    let v = eval_to_ip(&e, "x/b", "203.0.113.9", Probe443::TCP);
    assert!(v.allowed);
    assert_eq!(
        decided_by(&v.egress),
        "NetworkPolicy NetworkPolicy x/to-internet rule 0"
    );
    assert_eq!(v.ingress.decision, Decision::Exempt(Exemption::External));
    assert!(!eval_to_ip(&e, "x/b", "203.0.113.9", TCP80).allowed);
    assert!(!eval_to_ip(&e, "x/b", "10.9.9.9", Probe443::TCP).allowed);
    assert_matrix(&e, TCP80, |from, _| ns(from) != "x");
}

#[allow(non_snake_case)] // reads as a probe constant at the call site: Probe443::TCP
mod Probe443 {
    pub const TCP: palisade_analysis::Probe = palisade_analysis::Probe {
        protocol: palisade_model::Protocol::Tcp,
        port: 443,
    };
}

#[test]
fn ingress_from_external_ip_block() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-office, namespace: 'y'}
spec:
  podSelector: {}
  ingress:
  - from: [{ipBlock: {cidr: 198.51.100.0/24}}]
"#,
    );
    assert!(eval_from_ip(&e, "198.51.100.7", "y/a", TCP80).allowed);
    assert!(!eval_from_ip(&e, "198.51.99.7", "y/a", TCP80).allowed);
    assert_matrix(&e, TCP80, |_, to| ns(to) != "y");
}

#[test]
fn policy_types_decide_isolation_not_rule_presence() {
    // Egress-only policy with ingress rules: ingress is not isolated, the rules are ignored.
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: egress-only, namespace: x}
spec:
  podSelector: {}
  policyTypes: [Egress]
  ingress: [{from: [{podSelector: {matchLabels: {pod: nobody}}}]}]
  egress: [{}]
"#,
    );
    assert_matrix(&e, TCP80, |_, _| true);
    // No policyTypes, egress rules present: both directions isolated.
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: defaulted, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  egress: [{to: [{podSelector: {}}]}]
"#,
    );
    assert_matrix(&e, TCP80, |from, to| {
        let egress_ok = from != "x/a" || ns(to) == "x";
        let ingress_ok = to != "x/a";
        egress_ok && ingress_ok
    });
}

#[test]
fn empty_lists_equal_absent_in_v1() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: empties, namespace: x}
spec:
  podSelector: {}
  ingress: [{from: [], ports: []}]
"#,
    );
    assert_matrix(&e, TCP80, |_, _| true);
}

#[test]
fn null_pod_selector_selects_namespace() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: nulls, namespace: z}
spec:
  podSelector:
"#,
    );
    assert_matrix(&e, TCP80, |_, to| ns(to) != "z");
}

#[test]
fn multiple_policies_are_additive() {
    let e = engine(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{podSelector: {matchLabels: {pod: b}}}], ports: [{port: 80}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-c, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{podSelector: {matchLabels: {pod: c}}}], ports: [{port: 81}]}]
"#,
    );
    assert_matrix(&e, TCP80, |from, to| to != "x/a" || from == "x/b");
    assert_matrix(&e, TCP81, |from, to| to != "x/a" || from == "x/c");
    let xa = e.pod_id("x", "a").unwrap();
    assert_eq!(e.isolating(xa, palisade_model::Direction::Ingress).len(), 2);
}

const LEGACY: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: legacy
  labels: {ns: legacy}
  annotations:
    net.beta.kubernetes.io/network-policy: '{"ingress": {"isolation": "DefaultDeny"}}'
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: legacy, labels: {pod: a}}
spec: {containers: [{name: c, ports: [{containerPort: 80}]}]}
status: {podIP: 10.0.9.10}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: legacy, labels: {pod: b}}
spec: {containers: [{name: c, ports: [{containerPort: 80}]}]}
status: {podIP: 10.0.9.11}
---
apiVersion: extensions/v1beta1
kind: NetworkPolicy
metadata: {name: allow-frontend, namespace: legacy}
spec:
  podSelector: {matchLabels: {pod: b}}
  ingress:
  - from: [{podSelector: {matchLabels: {pod: a}}}]
    ports: [{protocol: TCP, port: 80}]
---
apiVersion: extensions/v1beta1
kind: NetworkPolicy
metadata: {name: in-open-namespace, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from: [{podSelector: {matchLabels: {pod: b}}}]
"#;

fn legacy_engine(semantics: Semantics) -> palisade_engine::Engine {
    let loaded =
        palisade_model::load_sources([("c", CLUSTER), ("l", LEGACY)], Default::default()).unwrap();
    palisade_engine::Engine::new(
        loaded.cluster,
        Options {
            semantics,
            ..Options::default()
        },
    )
}

#[test]
fn legacy_default_deny_annotation_isolates_ingress() {
    let e = legacy_engine(Semantics::Standard);
    let v = eval(&e, "x/b", "legacy/a", TCP80);
    assert!(!v.allowed);
    let Decision::Isolated(by) = &v.ingress.decision else {
        panic!("{:?}", v.ingress.decision)
    };
    let names: Vec<String> = by.iter().map(|p| p.to_string()).collect();
    assert_eq!(names, ["Namespace(DefaultDeny) legacy"]);
    assert!(eval(&e, "legacy/a", "legacy/b", TCP80).allowed);
    assert!(!eval(&e, "legacy/b", "legacy/a", TCP80).allowed);
    // Standard semantics: the v1beta1 policy in x isolates x/a.
    assert!(!eval(&e, "x/c", "x/a", TCP80).allowed);
}

#[test]
fn legacy_semantics_only_default_deny_namespaces_are_isolated() {
    let e = legacy_engine(Semantics::Legacy);
    assert!(
        eval(&e, "x/c", "x/a", TCP80).allowed,
        "x has no DefaultDeny: not isolated at all"
    );
    assert!(eval(&e, "legacy/a", "legacy/b", TCP80).allowed);
    assert!(!eval(&e, "legacy/a", "legacy/b", UDP80).allowed);
    assert!(!eval(&e, "x/a", "legacy/b", TCP80).allowed);
}

#[test]
fn legacy_semantics_empty_lists_match_nothing_in_v1beta1() {
    let policies = format!(
        "{LEGACY}---\n{}",
        r#"
apiVersion: extensions/v1beta1
kind: NetworkPolicy
metadata: {name: empty-from, namespace: legacy}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: []}]
"#
    );
    let loaded = palisade_model::load_sources(
        [("c", CLUSTER), ("l", policies.as_str())],
        Default::default(),
    )
    .unwrap();
    let legacy = palisade_engine::Engine::new(
        loaded.cluster.clone(),
        Options {
            semantics: Semantics::Legacy,
            ..Options::default()
        },
    );
    assert!(
        !eval(&legacy, "legacy/b", "legacy/a", TCP80).allowed,
        "v1beta1 proposal: an empty from matches no sources"
    );
    let standard = palisade_engine::Engine::new(loaded.cluster, Options::default());
    assert!(
        eval(&standard, "legacy/b", "legacy/a", TCP80).allowed,
        "released: empty = absent"
    );
}

const HOSTS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: h, namespace: x, labels: {pod: h}}
spec: {hostNetwork: true, nodeName: node-1, containers: [{name: c, ports: [{containerPort: 80, name: http}]}]}
status: {podIP: 192.168.1.1}
"#;

#[test]
fn node_local_traffic_and_host_network_pods() {
    let e = engine(&format!("{DENY_INGRESS_X}---\n{HOSTS}"));
    // The host-network pod is its node's address: node-local traffic is exempt.
    let v = eval(&e, "x/h", "x/a", TCP80);
    assert!(v.allowed);
    assert_eq!(v.egress.decision, Decision::Exempt(Exemption::Host));
    assert_eq!(v.ingress.decision, Decision::Exempt(Exemption::NodeLocal));
    // Ingress to a host-network pod is never subject to policy.
    assert!(eval(&e, "x/a", "x/h", TCP80).allowed);
    // Switched off, the node is an ordinary source.
    let loaded = palisade_model::load_sources(
        [
            ("c", CLUSTER),
            ("p", format!("{DENY_INGRESS_X}---\n{HOSTS}").as_str()),
        ],
        Default::default(),
    )
    .unwrap();
    let strict = palisade_engine::Engine::new(
        loaded.cluster,
        Options {
            allow_node_local: false,
            ..Options::default()
        },
    );
    assert!(!eval(&strict, "x/h", "x/a", TCP80).allowed);
}

#[test]
fn pod_selectors_do_not_match_host_network_pods() {
    let e = engine(&format!(
        "{HOSTS}---\n{}",
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: egress-to-pods, namespace: 'y'}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress: [{to: [{namespaceSelector: {}}]}]
"#
    ));
    assert!(eval(&e, "y/a", "x/a", TCP80).allowed);
    assert!(
        !eval(&e, "y/a", "x/h", TCP80).allowed,
        "host-network pods are their node's address"
    );
}
