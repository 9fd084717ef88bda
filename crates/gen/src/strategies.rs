//! Proptest strategies for random clusters with every kind of object and every feature
//! (feature `proptest`): shared by the property tests of the engine and its consumers.
#![allow(missing_docs, clippy::unwrap_used)] // proptest strategies over generated, known-valid values

use palisade_model::*;
use proptest::prelude::*;

const LABEL_KEYS: [&str; 2] = ["app", "tier"];
const LABEL_VALUES: [&str; 2] = ["a", "b"];

pub fn labels() -> impl Strategy<Value = Labels> {
    proptest::collection::btree_map(
        prop::sample::select(&LABEL_KEYS[..]).prop_map(String::from),
        prop::sample::select(&LABEL_VALUES[..]).prop_map(String::from),
        0..=2,
    )
}

pub fn selector() -> impl Strategy<Value = Selector> {
    let expr = (
        prop::sample::select(&LABEL_KEYS[..]),
        0..4u8,
        prop::sample::select(&LABEL_VALUES[..]),
    )
        .prop_map(|(k, op, v)| Requirement {
            key: k.to_string(),
            op: match op {
                0 => SelectorOp::In(vec![v.to_string()]),
                1 => SelectorOp::NotIn(vec![v.to_string()]),
                2 => SelectorOp::Exists,
                _ => SelectorOp::DoesNotExist,
            },
        });
    (
        labels().prop_map(|l| if l.len() > 1 { Labels::new() } else { l }),
        proptest::collection::vec(expr, 0..=1),
    )
        .prop_map(|(match_labels, expressions)| Selector {
            match_labels,
            expressions,
        })
}

pub fn cidr() -> impl Strategy<Value = ipnet::IpNet> {
    prop_oneof![
        Just("10.0.0.0/16"),
        Just("10.0.1.0/24"),
        Just("10.0.0.0/30"),
        Just("10.0.0.2/32"),
        Just("192.168.0.0/24"),
        Just("0.0.0.0/0"),
        Just("203.0.113.0/24"),
    ]
    .prop_map(|s| s.parse::<ipnet::IpNet>().unwrap())
}

pub fn ip_block() -> impl Strategy<Value = IpBlock> {
    (cidr(), proptest::collection::vec(cidr(), 0..=2)).prop_map(|(cidr, ex)| IpBlock {
        cidr,
        except: ex
            .into_iter()
            .filter(|e| cidr.contains(e) && e.prefix_len() > cidr.prefix_len())
            .collect(),
    })
}

pub fn protocol() -> impl Strategy<Value = Protocol> {
    prop::sample::select(&Protocol::ALL[..])
}

pub fn port_range() -> impl Strategy<Value = PortRange> {
    (79u16..=81, 0u16..=1).prop_map(|(s, w)| PortRange {
        start: Port::new(s.into()).unwrap(),
        end: Port::new((s + w).into()).unwrap(),
    })
}

pub fn np_port() -> impl Strategy<Value = NetworkPolicyPort> {
    let spec = prop_oneof![
        Just(PortSpec::Any),
        port_range().prop_map(PortSpec::Range),
        prop::sample::select(&["http", "dns", "nope"][..])
            .prop_map(|n| PortSpec::Named(n.to_string())),
    ];
    (protocol(), spec).prop_map(|(protocol, port)| NetworkPolicyPort { protocol, port })
}

pub fn np_peer() -> impl Strategy<Value = NetworkPolicyPeer> {
    prop_oneof![
        (proptest::option::of(selector()), selector())
            .prop_map(|(namespaces, pods)| NetworkPolicyPeer::Pods { namespaces, pods }),
        ip_block().prop_map(NetworkPolicyPeer::IpBlock),
    ]
}

pub fn np_rule() -> impl Strategy<Value = NetworkPolicyRule> {
    (
        proptest::option::of(proptest::collection::vec(np_port(), 0..=2)),
        proptest::option::of(proptest::collection::vec(np_peer(), 0..=2)),
    )
        .prop_map(|(ports, peers)| NetworkPolicyRule { ports, peers })
}

pub fn network_policy(i: usize) -> impl Strategy<Value = NetworkPolicy> {
    (
        0..3usize,
        selector(),
        (any::<bool>(), any::<bool>()),
        proptest::collection::vec(np_rule(), 0..=2),
        proptest::collection::vec(np_rule(), 0..=2),
        any::<bool>(),
    )
        .prop_map(
            move |(ns, pod_selector, (ingress, egress), ing, eg, v1)| NetworkPolicy {
                namespace: format!("ns{ns}"),
                name: format!("np{i}"),
                api: if v1 {
                    NetworkPolicyApi::V1
                } else {
                    NetworkPolicyApi::ExtensionsV1beta1
                },
                pod_selector,
                policy_types: PolicyTypes {
                    ingress,
                    egress: egress || !ingress,
                },
                ingress: ing,
                egress: eg,
                origin: Origin::default(),
            },
        )
}

pub fn ns_match() -> impl Strategy<Value = NamespaceMatch> {
    prop_oneof![
        4 => selector().prop_map(NamespaceMatch::Selector),
        1 => Just(NamespaceMatch::SelfNamespace),
        1 => Just(NamespaceMatch::NotSelfNamespace),
        1 => Just(NamespaceMatch::SameLabels(vec!["app".into()])),
        1 => Just(NamespaceMatch::NotSameLabels(vec!["app".into()])),
    ]
}

pub fn admin_peer(egress: bool) -> BoxedStrategy<AdminPeer> {
    let common = prop_oneof![
        ns_match().prop_map(AdminPeer::Namespaces),
        (ns_match(), selector())
            .prop_map(|(namespaces, pods)| AdminPeer::Pods { namespaces, pods }),
    ];
    if egress {
        prop_oneof![
            6 => common,
            1 => selector().prop_map(AdminPeer::Nodes),
            1 => proptest::collection::vec(cidr(), 1..=2).prop_map(AdminPeer::Networks),
            1 => Just(AdminPeer::Unsupported(vec!["future".into()])),
        ]
        .boxed()
    } else {
        prop_oneof![8 => common, 1 => Just(AdminPeer::Unsupported(vec!["future".into()]))].boxed()
    }
}

pub fn admin_port_s() -> impl Strategy<Value = AdminPort> {
    prop_oneof![
        (protocol(), proptest::option::of(port_range()))
            .prop_map(|(protocol, range)| AdminPort::Ports { protocol, range }),
        prop::sample::select(&["http", "dns"][..]).prop_map(|n| AdminPort::Named(n.to_string())),
    ]
}

pub fn admin_rule(egress: bool, pass: bool) -> impl Strategy<Value = AdminRule> {
    let actions: &'static [Action] = if pass {
        &[Action::Allow, Action::Deny, Action::Pass]
    } else {
        &[Action::Allow, Action::Deny]
    };
    (
        prop::sample::select(actions),
        proptest::collection::vec(admin_peer(egress), 1..=2),
        proptest::option::of(proptest::collection::vec(admin_port_s(), 1..=2)),
    )
        .prop_map(|(action, peers, ports)| AdminRule {
            name: None,
            action,
            peers,
            ports,
        })
}

pub fn admin_policy(i: usize) -> impl Strategy<Value = AdminPolicy> {
    (
        0..3u8,
        0..3i32,
        prop_oneof![
            selector().prop_map(Subject::Namespaces),
            (selector(), selector())
                .prop_map(|(namespaces, pods)| Subject::Pods { namespaces, pods })
        ],
    )
        .prop_flat_map(move |(kind, priority, subject)| {
            let (kind, tier) = match kind {
                0 => (PolicyKind::AdminNetworkPolicy, AdminTier::Admin),
                1 => (PolicyKind::BaselineAdminNetworkPolicy, AdminTier::Baseline),
                _ => (
                    PolicyKind::ClusterNetworkPolicy,
                    if priority % 2 == 0 {
                        AdminTier::Admin
                    } else {
                        AdminTier::Baseline
                    },
                ),
            };
            let pass = kind != PolicyKind::BaselineAdminNetworkPolicy;
            (
                proptest::collection::vec(admin_rule(false, pass), 0..=2),
                proptest::collection::vec(admin_rule(true, pass), 0..=2),
            )
                .prop_map(move |(ingress, egress)| AdminPolicy {
                    kind,
                    name: format!("p{i}"),
                    tier,
                    priority: if kind == PolicyKind::BaselineAdminNetworkPolicy {
                        0
                    } else {
                        priority
                    },
                    subject: subject.clone(),
                    ingress,
                    egress,
                    origin: Origin::default(),
                })
        })
}

pub fn pod(i: usize) -> impl Strategy<Value = Pod> {
    (
        0..3usize,
        labels(),
        prop::bool::weighted(0.15),
        0..2usize,
        any::<bool>(),
    )
        .prop_map(move |(ns, labels, host, node, udp_dns)| {
            let port = |n: i64, name: &str, protocol| ContainerPort {
                name: Some(name.into()),
                port: Port::new(n).unwrap(),
                protocol,
            };
            Pod {
                namespace: format!("ns{ns}"),
                name: format!("pod{i}"),
                labels,
                node_name: Some(format!("node{node}")),
                host_network: host,
                ips: vec![
                    if host {
                        format!("192.168.0.{}", node + 1)
                    } else {
                        format!("10.0.{}.{}", i % 2, i + 1)
                    }
                    .parse()
                    .unwrap(),
                ],
                ports: vec![
                    port(80, "http", Protocol::Tcp),
                    port(if udp_dns { 81 } else { 80 }, "dns", Protocol::Udp),
                ],
                ready: true,
                origin: Origin::default(),
            }
        })
}

pub fn cluster() -> impl Strategy<Value = Cluster> {
    let namespaces =
        proptest::collection::vec((labels(), prop::bool::weighted(0.2)), 3).prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (mut labels, dd))| {
                    labels.insert(NAMESPACE_NAME_LABEL.into(), format!("ns{i}"));
                    Namespace {
                        name: format!("ns{i}"),
                        labels,
                        default_deny_ingress: dd,
                        origin: None,
                    }
                })
                .collect::<Vec<_>>()
        });
    let nodes = proptest::collection::vec(labels(), 2).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, labels)| Node {
                name: format!("node{i}"),
                labels,
                addresses: vec![format!("192.168.0.{}", i + 1).parse().unwrap()],
                origin: Origin::default(),
            })
            .collect::<Vec<_>>()
    });
    let pods = (2..6usize).prop_flat_map(|n| (0..n).map(pod).collect::<Vec<_>>());
    let nps = (0..4usize).prop_flat_map(|n| (0..n).map(network_policy).collect::<Vec<_>>());
    let admins = (0..4usize).prop_flat_map(|n| (0..n).map(admin_policy).collect::<Vec<_>>());
    (namespaces, nodes, pods, nps, admins).prop_map(
        |(namespaces, nodes, pods, network_policies, admin_policies)| {
            let mut c = Cluster {
                namespaces,
                pods,
                nodes,
                network_policies,
                admin_policies,
                ..Cluster::default()
            };
            // one BANP at most, named default, as validation guarantees
            let mut seen_banp = false;
            c.admin_policies.retain(|p| {
                p.kind != PolicyKind::BaselineAdminNetworkPolicy
                    || !std::mem::replace(&mut seen_banp, true)
            });
            c.pods
                .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
            c
        },
    )
}
