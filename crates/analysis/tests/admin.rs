//! Truth tables for AdminNetworkPolicy, BaselineAdminNetworkPolicy and ClusterNetworkPolicy.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;
use common::*;
use palisade_engine::{Decision, Tier};

const DENY_X_FROM_Y: &str = r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: deny-y-to-x}
spec:
  priority: 20
  subject: {namespaces: {matchLabels: {ns: x}}}
  ingress:
  - name: no-y
    action: Deny
    from: [{namespaces: {matchLabels: {ns: 'y'}}}]
"#;

#[test]
fn anp_deny_beats_networkpolicy_allow() {
    let e = engine(&format!(
        "{DENY_X_FROM_Y}---\n{}",
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-all, namespace: x}
spec: {podSelector: {}, ingress: [{}]}
"#
    ));
    assert_matrix(&e, TCP80, |from, to| !(ns(from) == "y" && ns(to) == "x"));
    let v = eval(&e, "y/a", "x/a", TCP80);
    assert_eq!(
        decided_by(&v.ingress),
        "Admin AdminNetworkPolicy deny-y-to-x rule 0"
    );
    let v = eval(&e, "z/a", "x/a", TCP80);
    assert_eq!(
        decided_by(&v.ingress),
        "NetworkPolicy NetworkPolicy x/allow-all rule 0"
    );
}

#[test]
fn anp_allow_beats_networkpolicy_isolation() {
    let e = engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: allow-monitoring}
spec:
  priority: 5
  subject: {namespaces: {}}
  ingress:
  - action: Allow
    from: [{pods: {namespaceSelector: {matchLabels: {ns: z}}, podSelector: {matchLabels: {pod: c}}}}]
    ports: [{portNumber: {protocol: TCP, port: 80}}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: x}
spec: {podSelector: {}}
"#,
    );
    assert_matrix(&e, TCP80, |from, to| ns(to) != "x" || from == "z/c");
    assert_matrix(&e, TCP81, |_, to| ns(to) != "x");
}

#[test]
fn priorities_order_admin_policies() {
    let e = engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: low-priority-allow}
spec:
  priority: 50
  subject: {namespaces: {matchLabels: {ns: x}}}
  ingress: [{action: Allow, from: [{namespaces: {}}]}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: high-priority-deny}
spec:
  priority: 10
  subject: {namespaces: {matchLabels: {ns: x}}}
  ingress: [{action: Deny, from: [{namespaces: {matchLabels: {ns: z}}}]}]
"#,
    );
    assert_matrix(&e, TCP80, |from, to| !(ns(to) == "x" && ns(from) == "z"));
    let v = eval(&e, "y/a", "x/a", TCP80);
    assert_eq!(
        decided_by(&v.ingress),
        "Admin AdminNetworkPolicy low-priority-allow rule 0"
    );
}

#[test]
fn rules_in_written_order() {
    let e = engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: ordered}
spec:
  priority: 1
  subject: {namespaces: {matchLabels: {ns: x}}}
  egress:
  - {name: allow-80, action: Allow, to: [{namespaces: {}}], ports: [{portNumber: {port: 80}}]}
  - {name: deny-rest, action: Deny, to: [{namespaces: {}}]}
"#,
    );
    assert_matrix(&e, TCP80, |_, _| true);
    assert_matrix(&e, UDP80, |from, _| ns(from) != "x");
    assert_matrix(&e, TCP81, |from, _| ns(from) != "x");
}

#[test]
fn pass_delegates_to_networkpolicy_then_baseline() {
    let e = engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: pass-x}
spec:
  priority: 10
  subject: {namespaces: {matchLabels: {ns: x}}}
  ingress: [{name: delegate, action: Pass, from: [{namespaces: {}}]}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: deny-all-later}
spec:
  priority: 20
  subject: {namespaces: {}}
  ingress: [{action: Deny, from: [{namespaces: {}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a-from-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{podSelector: {matchLabels: {pod: b}}}]}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {ns: x}}}
  ingress: [{name: baseline-deny-y, action: Deny, from: [{namespaces: {matchLabels: {ns: 'y'}}}]}]
"#,
    );
    assert_matrix(&e, TCP80, |from, to| match ns(to) {
        // Pass skips deny-all-later; x/a is isolated by its NP, x/b and x/c fall to the baseline.
        "x" if to == "x/a" => from == "x/b",
        "x" => ns(from) != "y",
        _ => false,
    });
    let v = eval(&e, "x/b", "x/a", TCP80);
    assert_eq!(
        decided_by(&v.ingress),
        "NetworkPolicy NetworkPolicy x/a-from-b rule 0"
    );
    assert_eq!(v.ingress.passes.len(), 1);
    let v = eval(&e, "y/a", "x/b", TCP80);
    assert_eq!(
        decided_by(&v.ingress),
        "Baseline BaselineAdminNetworkPolicy default rule 0"
    );
    let v = eval(&e, "z/a", "x/b", TCP80);
    assert_eq!((v.ingress.tier, v.ingress.allowed), (Tier::Default, true));
}

#[test]
fn baseline_applies_only_without_networkpolicy_isolation() {
    let e = engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {}}
  ingress: [{action: Deny, from: [{namespaces: {}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: open-y, namespace: 'y'}
spec: {podSelector: {}, ingress: [{from: [{namespaceSelector: {matchLabels: {ns: x}}}]}]}
"#,
    );
    assert_matrix(&e, TCP80, |from, to| ns(to) == "y" && ns(from) == "x");
}

#[test]
fn cluster_network_policy_both_tiers() {
    let e = engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: admin-accept-dns-like}
spec:
  tier: Admin
  priority: 3
  subject: {namespaces: {}}
  egress:
  - name: accept-udp-80-to-z
    action: Accept
    to: [{namespaces: {matchLabels: {ns: z}}}]
    protocols: [{udp: {destinationPort: {number: 80}}}]
  - name: pass-tcp-range
    action: Pass
    to: [{pods: {namespaceSelector: {}, podSelector: {matchLabels: {pod: a}}}}]
    protocols: [{tcp: {destinationPort: {range: {start: 80, end: 81}}}}]
---
apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: baseline-deny}
spec:
  tier: Baseline
  priority: 1
  subject: {namespaces: {}}
  egress:
  - {name: deny, action: Deny, to: [{namespaces: {}}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-egress-y, namespace: 'y'}
spec: {podSelector: {}, policyTypes: [Egress]}
"#,
    );
    // UDP/80 to z accepted in the admin tier even from isolated y.
    assert_matrix(&e, UDP80, |_, to| ns(to) == "z");
    // TCP to pods "a": passed; y is isolated (deny); others reach the baseline deny.
    assert_matrix(&e, TCP80, |_, _| false);
    let v = eval(&e, "x/b", "z/a", TCP80);
    assert_eq!(
        decided_by(&v.egress),
        "Baseline ClusterNetworkPolicy baseline-deny rule 0"
    );
    assert_eq!(v.egress.passes.len(), 1);
    let v = eval(&e, "y/b", "z/a", TCP80);
    assert_eq!(v.egress.tier, Tier::NetworkPolicy);
    assert!(matches!(v.egress.decision, Decision::Isolated(_)));
}

#[test]
fn cnp_baseline_pass_falls_through_to_default() {
    let e = engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: baseline-pass}
spec:
  tier: Baseline
  priority: 1
  subject: {namespaces: {}}
  ingress: [{action: Pass, from: [{namespaces: {matchLabels: {ns: x}}}]}]
---
apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: baseline-deny}
spec:
  tier: Baseline
  priority: 2
  subject: {namespaces: {}}
  ingress: [{action: Deny, from: [{namespaces: {}}]}]
"#,
    );
    assert_matrix(&e, TCP80, |from, _| ns(from) == "x");
}

#[test]
fn equal_priorities_are_ordered_by_kind_then_name() {
    let e = engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: a-cnp-allow}
spec:
  tier: Admin
  priority: 7
  subject: {namespaces: {}}
  ingress: [{action: Accept, from: [{namespaces: {}}]}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: z-anp-deny}
spec:
  priority: 7
  subject: {namespaces: {}}
  ingress: [{action: Deny, from: [{namespaces: {}}]}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: y-anp-allow}
spec:
  priority: 7
  subject: {namespaces: {}}
  ingress: [{action: Allow, from: [{namespaces: {matchLabels: {ns: x}}}]}]
"#,
    );
    // AdminNetworkPolicy before ClusterNetworkPolicy; y-anp-allow before z-anp-deny.
    assert_matrix(&e, TCP80, |from, _| ns(from) == "x");
}

#[test]
fn named_ports_in_admin_rules() {
    let e = engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: named}
spec:
  priority: 1
  subject: {namespaces: {matchLabels: {ns: x}}}
  ingress:
  - {action: Deny, from: [{namespaces: {}}], ports: [{namedPort: serve-81-udp}]}
  egress:
  - {action: Deny, to: [{namespaces: {}}], ports: [{namedPort: serve-80-tcp}]}
"#,
    );
    assert_matrix(&e, UDP81, |_, to| ns(to) != "x");
    assert_matrix(&e, TCP81, |_, _| true);
    assert_matrix(&e, TCP80, |from, _| ns(from) != "x");
    assert_matrix(&e, UDP80, |_, _| true);
}

#[test]
fn port_range_in_admin_rules() {
    let e = engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: range}
spec:
  priority: 1
  subject: {namespaces: {matchLabels: {ns: 'y'}}}
  ingress:
  - {action: Deny, from: [{namespaces: {}}], ports: [{portRange: {protocol: UDP, start: 81, end: 90}}]}
"#,
    );
    assert_matrix(&e, UDP81, |_, to| ns(to) != "y");
    assert_matrix(&e, UDP80, |_, _| true);
    assert_matrix(&e, TCP81, |_, _| true);
}

#[test]
fn networks_and_nodes_peers() {
    let e = engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: egress-peers}
spec:
  priority: 1
  subject: {namespaces: {matchLabels: {ns: x}}}
  egress:
  - {name: nodes, action: Deny, to: [{nodes: {matchLabels: {kubernetes.io/hostname: node-1}}}]}
  - {name: cidr, action: Deny, to: [{networks: [10.0.2.0/24, "2001:db8::/32"]}]}
  - {name: internet, action: Allow, to: [{networks: [0.0.0.0/0]}]}
"#,
    );
    assert_matrix(&e, TCP80, |from, to| ns(from) != "x" || ns(to) != "z");
    let v = eval_to_ip(&e, "x/a", "192.168.1.1", TCP80);
    assert_eq!(
        decided_by(&v.egress),
        "Admin AdminNetworkPolicy egress-peers rule 0"
    );
    let v = eval_to_ip(&e, "x/a", "8.8.8.8", TCP80);
    assert_eq!(
        decided_by(&v.egress),
        "Admin AdminNetworkPolicy egress-peers rule 2"
    );
}

/// The e2e model with x and y in tenant t1 and z in t2.
fn tenant_engine(policy: &str) -> palisade_engine::Engine {
    let cluster = CLUSTER
        .replace(
            "  labels:\n    ns: x",
            "  labels:\n    ns: x\n    tenant: t1",
        )
        .replace(
            "  labels:\n    ns: \"y\"",
            "  labels:\n    ns: \"y\"\n    tenant: t1",
        )
        .replace(
            "  labels:\n    ns: z",
            "  labels:\n    ns: z\n    tenant: t2",
        );
    let loaded =
        palisade_model::load_sources([("c", cluster.as_str()), ("p", policy)], Default::default())
            .unwrap();
    palisade_engine::Engine::new(loaded.cluster, Default::default())
}

#[test]
fn same_labels_and_not_same_labels() {
    // KEP story 4: isolate tenants from each other.
    let e = tenant_engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: tenants}
spec:
  priority: 50
  subject: {namespaces: {matchExpressions: [{key: tenant, operator: Exists}]}}
  ingress:
  - {action: Deny, from: [{namespaces: {notSameLabels: [tenant]}}]}
"#,
    );
    let tenant = |p: &str| if ns(p) == "z" { 2 } else { 1 };
    assert_matrix(&e, TCP80, |from, to| tenant(from) == tenant(to));
    let e = tenant_engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: tenants}
spec:
  priority: 50
  subject: {namespaces: {matchExpressions: [{key: tenant, operator: Exists}]}}
  ingress:
  - {action: Pass, from: [{namespaces: {sameLabels: [tenant]}}]}
  - {action: Deny, from: [{namespaces: {namespaceSelector: {}}}]}
"#,
    );
    assert_matrix(&e, TCP80, |from, to| tenant(from) == tenant(to));
    let v = eval(&e, "y/a", "x/a", TCP80);
    assert_eq!((v.ingress.tier, v.ingress.passes.len()), (Tier::Default, 1));
}

#[test]
fn related_self_and_not_self() {
    let e = engine(
        r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: related}
spec:
  priority: 10
  subject: {namespaces: {}}
  ingress:
  - action: Allow
    from: [{pods: {namespaces: {related: Self}, podSelector: {matchLabels: {pod: b}}}}]
  - action: Deny
    from: [{namespaces: {related: NotSelf}}]
"#,
    );
    // same namespace: b always allowed, a/c fall through to default allow; other namespaces denied
    assert_matrix(&e, TCP80, |from, to| ns(from) == ns(to));
    let v = eval(&e, "x/b", "x/a", TCP80);
    assert_eq!(
        decided_by(&v.ingress),
        "Admin AdminNetworkPolicy related rule 0"
    );
}

#[test]
fn unknown_peers_fail_closed() {
    let loaded = palisade_model::load_sources(
        [
            ("c", CLUSTER),
            (
                "p",
                r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: future-allow}
spec:
  priority: 1
  subject: {namespaces: {matchLabels: {ns: x}}}
  ingress: [{action: Allow, from: [{serviceAccounts: {name: foo}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: x}
spec: {podSelector: {}}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: future-pass}
spec:
  priority: 2
  subject: {namespaces: {matchLabels: {ns: 'y'}}}
  ingress: [{action: Pass, from: [{serviceAccounts: {name: foo}}]}]
"#,
            ),
        ],
        Default::default(),
    )
    .unwrap();
    assert!(
        loaded
            .diagnostics
            .iter()
            .any(|d| d.message.contains("fails closed")),
        "{:?}",
        loaded.diagnostics
    );
    let e = palisade_engine::Engine::new(loaded.cluster, Default::default());
    // Allow with an unknown peer matches nothing: x stays isolated; Pass with one denies everything.
    assert_matrix(&e, TCP80, |_, to| ns(to) == "z");
    let v = eval(&e, "z/a", "y/a", TCP80);
    assert_eq!(
        decided_by(&v.ingress),
        "Admin AdminNetworkPolicy future-pass rule 0"
    );
    match v.ingress.decision {
        Decision::Rule(m) => assert!(m.fail_closed),
        other => panic!("{other:?}"),
    }
}
