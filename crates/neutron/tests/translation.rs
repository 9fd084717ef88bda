//! One test per translation rule, including the worked examples of the Kuryr-Kubernetes
//! network policy design.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use palisade_engine::{Engine, Options};
use palisade_model::Protocol;
use palisade_neutron::{
    NeutronError, OPEN_EGRESS, OPEN_INGRESS, PeerMode, Remote, SgEvaluator, SgRule, Traffic,
    TranslateOptions, Translation, translate,
};

const PODS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: default, labels: {project: myproject}}
---
apiVersion: v1
kind: Namespace
metadata: {name: other, labels: {project: myproject}}
---
apiVersion: v1
kind: Namespace
metadata: {name: third}
---
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: default, labels: {role: db}}
spec: {containers: [{name: c, ports: [{containerPort: 6379, name: redis}, {containerPort: 53, name: dns, protocol: UDP}]}]}
status: {podIP: 10.0.0.10}
---
apiVersion: v1
kind: Pod
metadata: {name: db2, namespace: default, labels: {role: db}}
spec: {containers: [{name: c, ports: [{containerPort: 7000, name: redis}]}]}
status: {podIP: 10.0.0.11}
---
apiVersion: v1
kind: Pod
metadata: {name: frontend, namespace: default, labels: {role: frontend}}
status: {podIP: 10.0.0.20}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: other, labels: {role: frontend}}
status: {podIPs: [{ip: "fd00::30"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: stranger, namespace: third, labels: {role: frontend}}
status: {podIP: 10.0.0.40}
"#;

fn run(policies: &str, mode: PeerMode) -> Result<(Translation, Vec<String>, Engine), NeutronError> {
    let loaded =
        palisade_model::load_sources([("pods", PODS), ("policies", policies)], Default::default())
            .unwrap();
    let engine = Engine::new(loaded.cluster, Options::default());
    let opts = TranslateOptions {
        peer_mode: mode,
        ignore_admin_policies: false,
    };
    translate(&engine, &opts).map(|(t, w)| (t, w, engine))
}

fn group<'t>(t: &'t Translation, name: &str) -> &'t [SgRule] {
    &t.security_groups
        .iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no group {name}"))
        .security_group_rules
}

fn port<'t>(t: &'t Translation, pod: &str) -> Vec<&'t str> {
    t.ports
        .iter()
        .find(|p| p.pod == pod)
        .unwrap()
        .security_groups
        .iter()
        .map(String::as_str)
        .collect()
}

/// `direction proto min-max remote` for compact assertions.
fn show(r: &SgRule) -> String {
    let (protocol, ports) = match r.traffic {
        Traffic::Any => ("any".to_string(), String::new()),
        Traffic::Protocol(p, range) => (
            p.as_str().to_lowercase(),
            range.map(|r| format!(":{r}")).unwrap_or_default(),
        ),
    };
    let remote = match &r.remote {
        Remote::Any => "any".to_string(),
        Remote::Prefix(n) => n.to_string(),
        Remote::Group(g) | Remote::AddressGroup(g) => g.clone(),
    };
    format!(
        "{:?} {:?} {protocol}{ports} {remote}",
        r.direction, r.ethertype
    )
}

#[test]
fn the_kuryr_design_test_network_policy() {
    // The Kuryr-Kubernetes design's example, with its egress ipBlock indented as intended.
    let (t, _, _) = run(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: test-network-policy, namespace: default}
spec:
  podSelector: {matchLabels: {role: db}}
  policyTypes: [Ingress, Egress]
  ingress:
  - from:
    - ipBlock: {cidr: 172.17.0.0/16, except: [172.17.1.0/24]}
    - namespaceSelector: {matchLabels: {project: myproject}}
    - podSelector: {matchLabels: {role: frontend}}
    ports: [{protocol: TCP, port: 6379}]
  egress:
  - to: [{ipBlock: {cidr: 10.0.0.0/24}}]
    ports: [{protocol: TCP, port: 5978}]
"#,
        PeerMode::RemoteGroups,
    )
    .unwrap();
    let rules: Vec<String> = group(&t, "np-default/test-network-policy")
        .iter()
        .map(show)
        .collect();
    assert_eq!(
        rules,
        [
            "Ingress IPv4 tcp:6379 172.17.0.0/24",
            "Ingress IPv4 tcp:6379 172.17.2.0/23",
            "Ingress IPv4 tcp:6379 172.17.4.0/22",
            "Ingress IPv4 tcp:6379 172.17.8.0/21",
            "Ingress IPv4 tcp:6379 172.17.16.0/20",
            "Ingress IPv4 tcp:6379 172.17.32.0/19",
            "Ingress IPv4 tcp:6379 172.17.64.0/18",
            "Ingress IPv4 tcp:6379 172.17.128.0/17",
            "Ingress IPv4 tcp:6379 np-default/test-network-policy:in0:peer1",
            "Ingress IPv6 tcp:6379 np-default/test-network-policy:in0:peer1",
            "Ingress IPv4 tcp:6379 np-default/test-network-policy:in0:peer2",
            "Egress IPv4 tcp:5978 10.0.0.0/24",
        ]
    );
    // Every namespace the selector matches (default and other), not the last one.
    let mut members: Vec<&str> = t
        .ports
        .iter()
        .filter(|p| {
            p.security_groups
                .contains("np-default/test-network-policy:in0:peer1")
        })
        .map(|p| p.pod.as_str())
        .collect();
    members.sort();
    assert_eq!(
        members,
        ["default/db", "default/db2", "default/frontend", "other/web"]
    );
    assert_eq!(
        port(&t, "default/db"),
        [
            "np-default/test-network-policy",
            "np-default/test-network-policy:in0:peer1"
        ]
    );
    assert!(port(&t, "default/frontend").contains(&OPEN_INGRESS));
}

#[test]
fn isolation_is_per_pod_and_direction_over_all_policies() {
    let (t, _, e) = run(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: ingress-only, namespace: default}
spec: {podSelector: {matchLabels: {role: db}}, ingress: [{}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: no-egress, namespace: default}
spec: {podSelector: {matchLabels: {role: db}}, policyTypes: [Egress]}
"#,
        PeerMode::Prefixes,
    )
    .unwrap();
    assert!(
        group(&t, "np-default/ingress-only")
            .iter()
            .all(|r| show(r).starts_with("Ingress")),
        "an Ingress-only policy opens no egress"
    );
    assert!(
        group(&t, "np-default/no-egress").is_empty(),
        "deny all = an empty group"
    );
    let db = port(&t, "default/db");
    assert!(
        !db.contains(&OPEN_EGRESS) && !db.contains(&OPEN_INGRESS),
        "{db:?}"
    );
    assert!(port(&t, "default/frontend").contains(&OPEN_EGRESS));
    let sg = SgEvaluator::new(&t);
    let (db_ip, fe_ip) = ("10.0.0.10".parse().unwrap(), "10.0.0.20".parse().unwrap());
    assert!(!sg.allows(db_ip, fe_ip, Protocol::Tcp, 80));
    assert!(sg.allows(fe_ip, db_ip, Protocol::Tcp, 80));
    let _ = e;
}

#[test]
fn cartesian_product_deduplicated_ranges_and_whole_protocols() {
    let (t, _, _) = run(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: product, namespace: default}
spec:
  podSelector: {matchLabels: {role: frontend}}
  ingress:
  - from: [{ipBlock: {cidr: 192.0.2.0/24}}, {ipBlock: {cidr: 198.51.100.7/32}}, {ipBlock: {cidr: 192.0.2.0/24}}]
    ports: [{port: 8000, endPort: 8080}, {protocol: UDP}, {port: 8000, endPort: 8080}]
  - {}
  - from: []
    ports: []
"#,
        PeerMode::Prefixes,
    )
    .unwrap();
    let rules: Vec<String> = group(&t, "np-default/product").iter().map(show).collect();
    assert_eq!(
        rules,
        [
            "Ingress IPv4 tcp:8000-8080 192.0.2.0/24",
            "Ingress IPv4 udp 192.0.2.0/24",
            "Ingress IPv4 tcp:8000-8080 198.51.100.7/32",
            "Ingress IPv4 udp 198.51.100.7/32",
            "Ingress IPv4 any any",
            "Ingress IPv6 any any",
        ]
    );
}

#[test]
fn selector_peers_as_prefixes_by_default() {
    let (t, _, _) = run(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-frontends, namespace: default}
spec:
  podSelector: {matchLabels: {role: db}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {project: myproject}}, podSelector: {matchLabels: {role: frontend}}}], ports: [{port: 6379}]}]
"#,
        PeerMode::Prefixes,
    )
    .unwrap();
    let rules: Vec<String> = group(&t, "np-default/from-frontends")
        .iter()
        .map(show)
        .collect();
    assert_eq!(
        rules,
        [
            "Ingress IPv4 tcp:6379 10.0.0.20/32",
            "Ingress IPv6 tcp:6379 fd00::30/128"
        ]
    );
}

#[test]
fn named_ports_resolve_per_pod_with_protocol() {
    let (t, _, _) = run(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: named-in, namespace: default}
spec:
  podSelector: {matchLabels: {role: db}}
  ingress: [{ports: [{port: redis}, {port: dns, protocol: TCP}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: named-out, namespace: default}
spec:
  podSelector: {matchLabels: {role: frontend}}
  policyTypes: [Egress]
  egress: [{ports: [{port: dns, protocol: UDP}, {port: redis}]}]
"#,
        PeerMode::Prefixes,
    )
    .unwrap();
    // db (redis=6379) and db2 (redis=7000) resolve differently: one group each.
    let c0: Vec<String> = group(&t, "np-default/named-in:c0")
        .iter()
        .map(show)
        .collect();
    let c1: Vec<String> = group(&t, "np-default/named-in:c1")
        .iter()
        .map(show)
        .collect();
    let mut both = [c0, c1];
    both.sort();
    assert_eq!(
        both[0],
        ["Ingress IPv4 tcp:6379 any", "Ingress IPv6 tcp:6379 any"],
        "dns is UDP on db: TCP dns resolves to nothing"
    );
    assert_eq!(
        both[1],
        ["Ingress IPv4 tcp:7000 any", "Ingress IPv6 tcp:7000 any"]
    );
    // Egress: each destination pod's own number.
    let rules: Vec<String> = group(&t, "np-default/named-out").iter().map(show).collect();
    assert_eq!(
        rules,
        [
            "Egress IPv4 udp:53 10.0.0.10/32",
            "Egress IPv4 tcp:6379 10.0.0.10/32",
            "Egress IPv4 tcp:7000 10.0.0.11/32"
        ]
    );
}

#[test]
fn peers_that_select_nothing_produce_no_rule() {
    for mode in [
        PeerMode::Prefixes,
        PeerMode::RemoteGroups,
        PeerMode::AddressGroups,
    ] {
        let (t, _, _) = run(
            r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: nobody, namespace: default}
spec:
  podSelector: {matchLabels: {role: db}}
  ingress: [{from: [{podSelector: {matchLabels: {role: ghost}}}]}]
  egress: [{to: [{namespaceSelector: {matchLabels: {project: none}}}], ports: [{port: redis}]}]
"#,
            mode,
        )
        .unwrap();
        assert!(
            group(&t, "np-default/nobody").is_empty(),
            "{mode:?}: {:?}",
            group(&t, "np-default/nobody")
        );
    }
}

#[test]
fn admin_policies_are_refused_unless_ignored() {
    let anp = r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: guard}
spec: {priority: 1, subject: {namespaces: {}}, ingress: [{action: Deny, from: [{namespaces: {}}]}]}
"#;
    let err = run(anp, PeerMode::Prefixes).err().unwrap();
    assert!(
        err.to_string().contains("AdminNetworkPolicy guard"),
        "{err}"
    );
    let loaded =
        palisade_model::load_sources([("pods", PODS), ("p", anp)], Default::default()).unwrap();
    let engine = Engine::new(loaded.cluster, Options::default());
    let (_, warnings) = translate(
        &engine,
        &TranslateOptions {
            ignore_admin_policies: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(warnings[0].contains("AdminNetworkPolicy guard"));
}

#[test]
fn stable_names_and_tags() {
    let np = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: default}\nspec: {podSelector: {}}\n";
    let (a, _, _) = run(np, PeerMode::Prefixes).unwrap();
    let (b, _, _) = run(np, PeerMode::Prefixes).unwrap();
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    let g = a
        .security_groups
        .iter()
        .find(|g| g.name == "np-default/p")
        .unwrap();
    assert!(
        g.tags.iter().any(|t| t.starts_with("np-") && t.len() == 19),
        "{:?}",
        g.tags
    );
}

/// Hostile-input finding: NetworkPolicies `a/b-c` and `a-b/c` were both translated to the
/// group `np-a-b-c`, so the second overwrote the first and `0.0.0.0/0` reached `a/p2`,
/// which the evaluator denies.
#[test]
fn group_names_of_a_slash_b_c_and_a_b_slash_c_do_not_collide() {
    let yaml = r#"
apiVersion: v1
kind: Namespace
metadata: {name: a}
---
apiVersion: v1
kind: Namespace
metadata: {name: a-b}
---
apiVersion: v1
kind: Pod
metadata: {name: p2, namespace: a}
status: {podIP: 10.0.0.2}
---
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: a-b}
status: {podIP: 10.0.0.1}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b-c, namespace: a}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: c, namespace: a-b}
spec:
  podSelector: {}
  ingress: [{from: [{ipBlock: {cidr: 0.0.0.0/0}}]}]
"#;
    let loaded = palisade_model::load_str(yaml).unwrap();
    let engine = Engine::new(loaded.cluster, Options::default());
    for mode in [
        PeerMode::Prefixes,
        PeerMode::RemoteGroups,
        PeerMode::AddressGroups,
    ] {
        let (t, _) = translate(
            &engine,
            &TranslateOptions {
                peer_mode: mode,
                ignore_admin_policies: false,
            },
        )
        .unwrap();
        assert!(group(&t, "np-a/b-c").is_empty(), "{mode:?}: deny all");
        assert_eq!(
            group(&t, "np-a-b/c").iter().map(show).collect::<Vec<_>>(),
            ["Ingress IPv4 any 0.0.0.0/0"],
            "{mode:?}: allow from everywhere"
        );
        assert_eq!(port(&t, "a/p2"), ["np-a/b-c", OPEN_EGRESS], "{mode:?}");
        assert_eq!(port(&t, "a-b/p1"), ["np-a-b/c", OPEN_EGRESS], "{mode:?}");
        let sg = SgEvaluator::new(&t);
        let outside = "203.0.113.9".parse().unwrap();
        for (pod, ip) in [("a/p2", "10.0.0.2"), ("a-b/p1", "10.0.0.1")] {
            let (ns, name) = pod.split_once('/').unwrap();
            let flow = palisade_engine::Flow {
                src: engine.endpoint_for_ip(outside),
                dst: engine
                    .endpoint_for_pod(engine.pod_id(ns, name).unwrap(), None)
                    .unwrap(),
                protocol: Protocol::Tcp,
                port: 80,
            };
            let want = engine.evaluate(&flow).allowed;
            assert_eq!(
                want,
                pod == "a-b/p1",
                "the engine: only a-b/p1 is reachable"
            );
            assert_eq!(
                sg.allows(outside, ip.parse().unwrap(), Protocol::Tcp, 80),
                want,
                "{mode:?}: the groups agree with the engine for {pod}"
            );
        }
    }
}

#[test]
fn long_names_fit_neutron_and_stay_distinct() {
    // 253 characters, in labels of at most 63; the two differ only in their last character.
    let long = |last: &str| {
        [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(60) + last,
        ]
        .join(".")
    };
    let yaml = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: p, namespace: default, labels: {{role: db}}}}
status: {{podIP: 10.0.0.1}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: {a}, namespace: default}}
spec: {{podSelector: {{}}, ingress: [{{from: [{{podSelector: {{}}}}]}}]}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: {b}, namespace: default}}
spec: {{podSelector: {{}}, ingress: [{{from: [{{podSelector: {{}}}}]}}]}}
"#,
        a = long("1"),
        b = long("2"),
    );
    let loaded = palisade_model::load_str(&yaml).unwrap();
    let engine = Engine::new(loaded.cluster, Options::default());
    let (t, _) = translate(
        &engine,
        &TranslateOptions {
            peer_mode: PeerMode::RemoteGroups,
            ignore_admin_policies: false,
        },
    )
    .unwrap();
    let names: Vec<&str> = t.security_groups.iter().map(|g| g.name.as_str()).collect();
    let policy_groups: Vec<&&str> = names.iter().filter(|n| n.starts_with("np-")).collect();
    assert_eq!(
        policy_groups.len(),
        4,
        "two policies, each with a peer group: {names:?}"
    );
    for n in &names {
        assert!(
            n.len() <= palisade_neutron::MAX_NAME_LEN,
            "{} characters: {n}",
            n.len()
        );
    }
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "distinct: {names:?}");
}
