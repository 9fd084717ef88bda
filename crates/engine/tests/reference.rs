//! The indexed engine against a naive evaluator written straight from the semantics
//! (docs/semantics.md), on random clusters and policies of every kind.

#![allow(missing_docs, clippy::unwrap_used)]

use std::net::IpAddr;

use palisade_engine::{EndpointKind, Engine, Flow, Options, Probe, Semantics};
use palisade_model::*;
use proptest::prelude::*;

// ---------------------------------------------------------------- the naive evaluator

struct Naive<'a> {
    c: &'a Cluster,
    o: Options,
}

#[derive(Clone, Copy)]
enum Ep<'a> {
    Pod(&'a Pod),
    Host(Option<&'a Node>),
    External,
}

impl<'a> Naive<'a> {
    fn ns(&self, name: &str) -> Option<&'a Namespace> {
        self.c.namespaces.iter().find(|n| n.name == name)
    }
    fn ns_labels(&self, name: &str) -> Labels {
        self.ns(name).map(|n| n.labels.clone()).unwrap_or_default()
    }
    fn classify(&self, ip: IpAddr) -> Ep<'a> {
        if let Some(n) = self.c.nodes.iter().find(|n| n.addresses.contains(&ip)) {
            return Ep::Host(Some(n));
        }
        match self
            .c
            .pods
            .iter()
            .find(|p| !p.host_network && p.ips.contains(&ip))
        {
            Some(p) => Ep::Pod(p),
            None => Ep::External,
        }
    }

    fn allowed(&self, src: IpAddr, dst: IpAddr, proto: Protocol, port: u16) -> bool {
        let (s, d) = (self.classify(src), self.classify(dst));
        if let (Ep::Pod(a), Ep::Pod(b)) = (s, d)
            && std::ptr::eq(a, b)
        {
            return true;
        }
        let egress = match s {
            Ep::Pod(p) => self.side(p, Direction::Egress, d, dst, proto, port),
            _ => true,
        };
        let ingress = match d {
            Ep::Pod(p) => {
                let local = matches!(s, Ep::Host(Some(n)) if p.node_name.as_deref() == Some(n.name.as_str()));
                (self.o.allow_node_local && local)
                    || self.side(p, Direction::Ingress, s, src, proto, port)
            }
            _ => true,
        };
        egress && ingress
    }

    fn side(
        &self,
        pod: &Pod,
        dir: Direction,
        peer: Ep<'a>,
        peer_ip: IpAddr,
        proto: Protocol,
        port: u16,
    ) -> bool {
        let dst_pod = match dir {
            Direction::Ingress => Some(pod),
            Direction::Egress => match peer {
                Ep::Pod(p) => Some(p),
                _ => None,
            },
        };
        let mut admins: Vec<&AdminPolicy> = self
            .c
            .admin_policies
            .iter()
            .filter(|p| self.subject(p, pod))
            .collect();
        admins.sort_by_key(|p| (p.tier, p.priority, p.kind, p.name.clone()));
        for tier in [AdminTier::Admin, AdminTier::Baseline] {
            if tier == AdminTier::Baseline && self.isolated(pod, dir) {
                let nps = self.counting(pod, dir);
                return nps.iter().any(|np| {
                    np.rules(dir)
                        .iter()
                        .any(|r| self.np_rule(np, r, peer, peer_ip, dst_pod, proto, port))
                });
            }
            'policies: for p in admins.iter().filter(|p| p.tier == tier) {
                for r in p.rules(dir) {
                    let unsupported = r
                        .peers
                        .iter()
                        .any(|x| matches!(x, AdminPeer::Unsupported(_)));
                    if unsupported && r.action != Action::Allow {
                        return false;
                    }
                    let ports = r
                        .ports
                        .as_ref()
                        .is_none_or(|ps| ps.iter().any(|x| admin_port(x, dst_pod, proto, port)));
                    if ports
                        && r.peers
                            .iter()
                            .any(|x| self.admin_peer(x, pod, peer, peer_ip))
                    {
                        match r.action {
                            Action::Allow => return true,
                            Action::Deny => return false,
                            Action::Pass => break 'policies,
                        }
                    }
                }
            }
        }
        true
    }

    fn subject(&self, p: &AdminPolicy, pod: &Pod) -> bool {
        if pod.host_network {
            return false;
        }
        let nl = self.ns_labels(&pod.namespace);
        match &p.subject {
            Subject::Namespaces(s) => s.matches(&nl),
            Subject::Pods { namespaces, pods } => {
                namespaces.matches(&nl) && pods.matches(&pod.labels)
            }
        }
    }

    fn counting(&self, pod: &Pod, dir: Direction) -> Vec<&'a NetworkPolicy> {
        let legacy_in = self.o.semantics == Semantics::Legacy && dir == Direction::Ingress;
        self.c
            .network_policies
            .iter()
            .filter(|np| np.namespace == pod.namespace && np.pod_selector.matches(&pod.labels))
            .filter(|np| legacy_in || np.policy_types.has(dir))
            .collect()
    }

    fn isolated(&self, pod: &Pod, dir: Direction) -> bool {
        let annotated = self
            .ns(&pod.namespace)
            .is_some_and(|n| n.default_deny_ingress);
        let any = !self.counting(pod, dir).is_empty();
        match (self.o.semantics, dir) {
            (Semantics::Standard, Direction::Ingress) => annotated || any,
            (Semantics::Standard, Direction::Egress) => any,
            (Semantics::Legacy, Direction::Ingress) => annotated,
            (Semantics::Legacy, Direction::Egress) => annotated && any,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn np_rule(
        &self,
        np: &NetworkPolicy,
        r: &NetworkPolicyRule,
        peer: Ep<'a>,
        ip: IpAddr,
        dst: Option<&Pod>,
        proto: Protocol,
        port: u16,
    ) -> bool {
        let legacy =
            self.o.semantics == Semantics::Legacy && np.api == NetworkPolicyApi::ExtensionsV1beta1;
        let ports_ok = match &r.ports {
            None => true,
            Some(v) if v.is_empty() && !legacy => true,
            Some(v) => v.iter().any(|p| {
                p.protocol == proto
                    && match &p.port {
                        PortSpec::Any => true,
                        PortSpec::Range(rg) => rg.contains(port),
                        PortSpec::Named(n) => named(dst, n, Some(p.protocol), proto, port),
                    }
            }),
        };
        let peers_ok = match &r.peers {
            None => true,
            Some(v) if v.is_empty() && !legacy => true,
            Some(v) => v.iter().any(|x| match x {
                NetworkPolicyPeer::IpBlock(b) => b.contains(&ip),
                NetworkPolicyPeer::Pods { namespaces, pods } => match peer {
                    Ep::Pod(p) => {
                        let ns_ok = match namespaces {
                            None => p.namespace == np.namespace,
                            Some(s) => s.matches(&self.ns_labels(&p.namespace)),
                        };
                        ns_ok && pods.matches(&p.labels)
                    }
                    _ => false,
                },
            }),
        };
        ports_ok && peers_ok
    }

    fn admin_peer(&self, x: &AdminPeer, subject: &Pod, peer: Ep<'a>, ip: IpAddr) -> bool {
        let ns_ok = |m: &NamespaceMatch, p: &Pod| {
            let (sl, pl) = (
                self.ns_labels(&subject.namespace),
                self.ns_labels(&p.namespace),
            );
            let same = |keys: &[String]| {
                !keys.is_empty()
                    && keys
                        .iter()
                        .all(|k| sl.contains_key(k) && sl.get(k) == pl.get(k))
            };
            match m {
                NamespaceMatch::Selector(s) => s.matches(&pl),
                NamespaceMatch::SelfNamespace => p.namespace == subject.namespace,
                NamespaceMatch::NotSelfNamespace => p.namespace != subject.namespace,
                NamespaceMatch::SameLabels(k) => same(k),
                NamespaceMatch::NotSameLabels(k) => !k.is_empty() && !same(k),
            }
        };
        match (x, peer) {
            (AdminPeer::Namespaces(m), Ep::Pod(p)) => ns_ok(m, p),
            (AdminPeer::Pods { namespaces, pods }, Ep::Pod(p)) => {
                ns_ok(namespaces, p) && pods.matches(&p.labels)
            }
            (AdminPeer::Nodes(s), Ep::Host(Some(n))) => s.matches(&n.labels),
            (AdminPeer::Networks(nets), _) => nets.iter().any(|n| n.contains(&ip)),
            _ => false,
        }
    }
}

fn named(
    dst: Option<&Pod>,
    name: &str,
    rule_proto: Option<Protocol>,
    proto: Protocol,
    port: u16,
) -> bool {
    dst.is_some_and(|d| {
        !d.host_network
            && d.ports.iter().any(|c| {
                c.name.as_deref() == Some(name)
                    && rule_proto.is_none_or(|r| r == c.protocol)
                    && c.protocol == proto
                    && c.port.get() == port
            })
    })
}

fn admin_port(x: &AdminPort, dst: Option<&Pod>, proto: Protocol, port: u16) -> bool {
    match x {
        AdminPort::Ports { protocol, range } => {
            *protocol == proto && range.is_none_or(|r| r.contains(port))
        }
        AdminPort::Named(n) => named(dst, n, None, proto, port),
    }
}

// ---------------------------------------------------------------- random clusters

const LABEL_KEYS: [&str; 2] = ["app", "tier"];
const LABEL_VALUES: [&str; 2] = ["a", "b"];

fn labels() -> impl Strategy<Value = Labels> {
    proptest::collection::btree_map(
        prop::sample::select(&LABEL_KEYS[..]).prop_map(String::from),
        prop::sample::select(&LABEL_VALUES[..]).prop_map(String::from),
        0..=2,
    )
}

fn selector() -> impl Strategy<Value = Selector> {
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

fn cidr() -> impl Strategy<Value = ipnet::IpNet> {
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

fn ip_block() -> impl Strategy<Value = IpBlock> {
    (cidr(), proptest::collection::vec(cidr(), 0..=2)).prop_map(|(cidr, ex)| IpBlock {
        cidr,
        except: ex
            .into_iter()
            .filter(|e| cidr.contains(e) && e.prefix_len() > cidr.prefix_len())
            .collect(),
    })
}

fn protocol() -> impl Strategy<Value = Protocol> {
    prop::sample::select(&Protocol::ALL[..])
}

fn port_range() -> impl Strategy<Value = PortRange> {
    (79u16..=81, 0u16..=1).prop_map(|(s, w)| PortRange {
        start: Port::new(s.into()).unwrap(),
        end: Port::new((s + w).into()).unwrap(),
    })
}

fn np_port() -> impl Strategy<Value = NetworkPolicyPort> {
    let spec = prop_oneof![
        Just(PortSpec::Any),
        port_range().prop_map(PortSpec::Range),
        prop::sample::select(&["http", "dns", "nope"][..])
            .prop_map(|n| PortSpec::Named(n.to_string())),
    ];
    (protocol(), spec).prop_map(|(protocol, port)| NetworkPolicyPort { protocol, port })
}

fn np_peer() -> impl Strategy<Value = NetworkPolicyPeer> {
    prop_oneof![
        (proptest::option::of(selector()), selector())
            .prop_map(|(namespaces, pods)| NetworkPolicyPeer::Pods { namespaces, pods }),
        ip_block().prop_map(NetworkPolicyPeer::IpBlock),
    ]
}

fn np_rule() -> impl Strategy<Value = NetworkPolicyRule> {
    (
        proptest::option::of(proptest::collection::vec(np_port(), 0..=2)),
        proptest::option::of(proptest::collection::vec(np_peer(), 0..=2)),
    )
        .prop_map(|(ports, peers)| NetworkPolicyRule { ports, peers })
}

fn network_policy(i: usize) -> impl Strategy<Value = NetworkPolicy> {
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

fn ns_match() -> impl Strategy<Value = NamespaceMatch> {
    prop_oneof![
        4 => selector().prop_map(NamespaceMatch::Selector),
        1 => Just(NamespaceMatch::SelfNamespace),
        1 => Just(NamespaceMatch::NotSelfNamespace),
        1 => Just(NamespaceMatch::SameLabels(vec!["app".into()])),
        1 => Just(NamespaceMatch::NotSameLabels(vec!["app".into()])),
    ]
}

fn admin_peer(egress: bool) -> BoxedStrategy<AdminPeer> {
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

fn admin_port_s() -> impl Strategy<Value = AdminPort> {
    prop_oneof![
        (protocol(), proptest::option::of(port_range()))
            .prop_map(|(protocol, range)| AdminPort::Ports { protocol, range }),
        prop::sample::select(&["http", "dns"][..]).prop_map(|n| AdminPort::Named(n.to_string())),
    ]
}

fn admin_rule(egress: bool, pass: bool) -> impl Strategy<Value = AdminRule> {
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

fn admin_policy(i: usize) -> impl Strategy<Value = AdminPolicy> {
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

fn pod(i: usize) -> impl Strategy<Value = Pod> {
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
                origin: Origin::default(),
            }
        })
}

fn cluster() -> impl Strategy<Value = Cluster> {
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn engine_agrees_with_the_naive_evaluator(c in cluster(), legacy in prop::bool::weighted(0.2), node_local in any::<bool>()) {
        let o = Options { semantics: if legacy { Semantics::Legacy } else { Semantics::Standard }, allow_node_local: node_local };
        let naive = Naive { c: &c, o };
        let engine = Engine::new(c.clone(), o);
        let mut ips: Vec<IpAddr> = c.pods.iter().flat_map(|p| p.ips.clone()).collect();
        ips.extend(["192.168.0.1", "192.168.0.2", "203.0.113.7", "10.0.5.5"].iter().map(|s| s.parse::<IpAddr>().unwrap()));
        ips.sort();
        ips.dedup();
        for &src in &ips {
            for &dst in &ips {
                for proto in Protocol::ALL {
                    for port in [80u16, 81] {
                        let flow = Flow { src: engine.endpoint_for_ip(src), dst: engine.endpoint_for_ip(dst), protocol: proto, port };
                        let got = engine.evaluate(&flow);
                        let want = naive.allowed(src, dst, proto, port);
                        prop_assert_eq!(got.allowed, want, "{} -> {} {}/{}\n{}", src, dst, proto, port, engine.explain(&flow));
                        // the explanation is consistent with the verdict
                        prop_assert_eq!(got.allowed, got.egress.allowed && got.ingress.allowed);
                        if let EndpointKind::Pod(p) = flow.dst.kind
                            && got.ingress.decision == palisade_engine::Decision::Isolated
                        {
                            prop_assert!(!engine.isolating(p, Direction::Ingress).is_empty());
                        }
                    }
                }
            }
        }
        let _ = Probe { protocol: Protocol::Tcp, port: 80 };
    }
}
