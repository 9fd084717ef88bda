//! For random clusters and NetworkPolicies, the security groups decide every connection
//! exactly as the evaluator does (both peer modes).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::net::IpAddr;

use palisade_engine::{Engine, Flow, Options};
use palisade_gen::strategies::{labels, selector};
use palisade_model::*;
use palisade_neutron::{PeerMode, SgEvaluator, TranslateOptions, translate};
use proptest::prelude::*;

fn cidr() -> impl Strategy<Value = ipnet::IpNet> {
    prop_oneof![
        Just("10.0.0.0/16"),
        Just("10.0.1.0/24"),
        Just("10.0.0.0/30"),
        Just("10.0.0.2/32"),
        Just("192.168.0.0/24"),
        Just("0.0.0.0/0"),
        Just("203.0.113.0/24"),
        Just("fd00::/64"),
        Just("fd00::4/126"),
        Just("::/0"),
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

fn np_port() -> impl Strategy<Value = NetworkPolicyPort> {
    let spec = prop_oneof![
        Just(PortSpec::Any),
        (79u16..=81, 0u16..=1).prop_map(|(s, w)| PortSpec::Range(PortRange {
            start: Port::new(s.into()).unwrap(),
            end: Port::new((s + w).into()).unwrap()
        })),
        prop::sample::select(&["web", "dns", "nope"][..]).prop_map(|n| PortSpec::Named(n.into())),
    ];
    (prop::sample::select(&Protocol::ALL[..]), spec)
        .prop_map(|(protocol, port)| NetworkPolicyPort { protocol, port })
}

fn np_peer() -> impl Strategy<Value = NetworkPolicyPeer> {
    prop_oneof![
        (proptest::option::of(selector()), selector())
            .prop_map(|(namespaces, pods)| NetworkPolicyPeer::Pods { namespaces, pods }),
        ip_block().prop_map(NetworkPolicyPeer::IpBlock),
    ]
}

fn rule() -> impl Strategy<Value = NetworkPolicyRule> {
    (
        proptest::option::of(proptest::collection::vec(np_port(), 0..=2)),
        proptest::option::of(proptest::collection::vec(np_peer(), 0..=2)),
    )
        .prop_map(|(ports, peers)| NetworkPolicyRule { ports, peers })
}

fn policy(i: usize) -> impl Strategy<Value = NetworkPolicy> {
    (
        0..3usize,
        selector(),
        0..3u8,
        proptest::collection::vec(rule(), 0..=2),
        proptest::collection::vec(rule(), 0..=2),
    )
        .prop_map(
            move |(ns, pod_selector, types, ingress, egress)| NetworkPolicy {
                namespace: format!("ns{ns}"),
                name: format!("np{i}"),
                api: NetworkPolicyApi::V1,
                pod_selector,
                policy_types: PolicyTypes {
                    ingress: types != 1,
                    egress: types != 0,
                },
                ingress,
                egress,
                origin: Origin::default(),
            },
        )
}

fn pod(i: usize) -> impl Strategy<Value = Pod> {
    (
        0..3usize,
        labels(),
        prop::bool::weighted(0.15),
        0..2usize,
        0..3u8,
        prop::bool::weighted(0.2),
    )
        .prop_map(move |(ns, labels, host, node, ports, v6)| {
            let cp = |n: i64, name: &str, protocol| ContainerPort {
                name: Some(name.into()),
                port: Port::new(n).unwrap(),
                protocol,
            };
            let ip: IpAddr = if host {
                format!("192.168.0.{}", node + 1).parse().unwrap()
            } else if v6 {
                format!("fd00::{}", i + 1).parse().unwrap()
            } else {
                format!("10.0.{}.{}", i % 2, i + 1).parse().unwrap()
            };
            Pod {
                namespace: format!("ns{ns}"),
                name: format!("pod{i}"),
                labels,
                node_name: Some(format!("node{node}")),
                host_network: host,
                ips: vec![ip],
                // pods resolve the named ports differently
                ports: match ports {
                    0 => vec![cp(80, "web", Protocol::Tcp), cp(81, "dns", Protocol::Udp)],
                    1 => vec![cp(81, "web", Protocol::Tcp), cp(80, "dns", Protocol::Udp)],
                    _ => vec![cp(80, "web", Protocol::Udp)],
                },
                ready: true,
                origin: Origin::default(),
            }
        })
}

fn cluster() -> impl Strategy<Value = Cluster> {
    let namespaces = proptest::collection::vec(labels(), 3).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, mut labels)| {
                labels.insert(NAMESPACE_NAME_LABEL.into(), format!("ns{i}"));
                Namespace {
                    name: format!("ns{i}"),
                    labels,
                    default_deny_ingress: false,
                    origin: None,
                }
            })
            .collect::<Vec<_>>()
    });
    let nodes = (0..2)
        .map(|i| Node {
            name: format!("node{i}"),
            labels: Labels::new(),
            addresses: vec![format!("192.168.0.{}", i + 1).parse().unwrap()],
            origin: Origin::default(),
        })
        .collect::<Vec<_>>();
    let pods = (2..7usize).prop_flat_map(|n| (0..n).map(pod).collect::<Vec<_>>());
    let nps = (0..4usize).prop_flat_map(|n| (0..n).map(policy).collect::<Vec<_>>());
    (namespaces, pods, nps).prop_map(move |(namespaces, mut pods, network_policies)| {
        pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Cluster {
            namespaces,
            pods,
            nodes: nodes.clone(),
            network_policies,
            admin_policies: Vec::new(),
            ..Cluster::default()
        }
    })
}

fn check(c: &Cluster, mode: PeerMode, node_local: bool) -> Result<(), TestCaseError> {
    let engine = Engine::new(
        c.clone(),
        Options {
            allow_node_local: node_local,
            ..Options::default()
        },
    );
    let (t, _) = translate(
        &engine,
        &TranslateOptions {
            peer_mode: mode,
            ignore_admin_policies: false,
        },
    )
    .unwrap();
    let sg = SgEvaluator::new(&t);
    let mut ips: Vec<IpAddr> = c.pods.iter().flat_map(|p| p.ips.clone()).collect();
    ips.extend(
        [
            "192.168.0.1",
            "192.168.0.2",
            "203.0.113.7",
            "10.0.5.5",
            "fd00::99",
            "2001:db8::1",
        ]
        .iter()
        .map(|s| s.parse::<IpAddr>().unwrap()),
    );
    ips.sort();
    ips.dedup();
    for &src in &ips {
        for &dst in ips.iter().filter(|d| d.is_ipv4() == src.is_ipv4()) {
            for protocol in Protocol::ALL {
                for port in [79u16, 80, 81] {
                    let flow = Flow {
                        src: engine.endpoint_for_ip(src),
                        dst: engine.endpoint_for_ip(dst),
                        protocol,
                        port,
                    };
                    let want = engine.evaluate(&flow).allowed;
                    let got = sg.allows(src, dst, protocol, port);
                    prop_assert_eq!(
                        got,
                        want,
                        "{:?}: {} -> {} {}/{}\n{}\n{}",
                        mode,
                        src,
                        dst,
                        protocol,
                        port,
                        palisade_analysis::Analysis::new(&engine).explain(&flow),
                        serde_json::to_string_pretty(&t).unwrap()
                    );
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(300, 0x5eed_2026))]

    #[test]
    fn security_groups_agree_with_the_evaluator(c in cluster(), node_local in any::<bool>()) {
        check(&c, PeerMode::Prefixes, node_local)?;
        check(&c, PeerMode::RemoteGroups, node_local)?;
        check(&c, PeerMode::AddressGroups, node_local)?;
    }
}
