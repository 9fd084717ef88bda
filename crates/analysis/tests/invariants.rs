//! Invariants of the tier pipeline, checked on random clusters (palisade-gen's strategies)
//! over every address pair, protocol and port of interest:
//!
//! - adding a NetworkPolicy rule never removes an allowed connection of an isolated pod;
//! - a higher-priority admin Deny wins over any NetworkPolicy;
//! - Pass never allows what the NetworkPolicy tier denies;
//! - a pod selected by nothing in any tier is reachable from everywhere;
//! - the order of objects in the input never changes a verdict;
//! - IPv4 and IPv6 behave alike.
//!
//! Only `allowed` and `tier` are compared, never the provenance. Seeds are fixed and case
//! counts bounded, so the file is deterministic and fast in debug builds.

#![allow(missing_docs, clippy::unwrap_used)]

use std::net::{IpAddr, Ipv6Addr};

use ipnet::{IpNet, Ipv6Net};
use palisade_analysis::Analysis;
use palisade_engine::{Engine, Flow, Options, Tier, Verdict};
use palisade_gen::strategies::{cluster, np_rule, selector};
use palisade_model::*;
use proptest::prelude::*;

fn config(cases: u32, seed: u64) -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..palisade_test_support::proptest_config(cases, seed)
    }
}

/// Addresses worth probing: every pod and node address plus a few outside ones (inside and
/// outside the CIDRs the strategies use).
fn addresses(c: &Cluster) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = c.pods.iter().flat_map(|p| p.ips.clone()).collect();
    ips.extend(c.nodes.iter().flat_map(|n| n.addresses.clone()));
    ips.extend(
        [
            "203.0.113.7",
            "10.0.5.5",
            "10.0.0.3",
            "10.0.1.200",
            "8.8.8.8",
        ]
        .iter()
        .map(|s| s.parse::<IpAddr>().unwrap()),
    );
    ips.sort();
    ips.dedup();
    ips
}

const PORTS: [u16; 3] = [79, 80, 81];

/// Every (src, dst, protocol, port) over `ips`, same family only.
fn flows(ips: &[IpAddr]) -> Vec<(IpAddr, IpAddr, Protocol, u16)> {
    let mut out = Vec::new();
    for &src in ips {
        for &dst in ips.iter().filter(|d| d.is_ipv4() == src.is_ipv4()) {
            for protocol in Protocol::ALL {
                for port in PORTS {
                    out.push((src, dst, protocol, port));
                }
            }
        }
    }
    out
}

fn eval(engine: &Engine, (src, dst, protocol, port): (IpAddr, IpAddr, Protocol, u16)) -> Verdict {
    engine.evaluate(&Flow {
        src: engine.endpoint_for_ip(src),
        dst: engine.endpoint_for_ip(dst),
        protocol,
        port,
    })
}

/// The comparable part of a verdict: allowed, and the tier of each side.
fn summary(v: &Verdict) -> (bool, bool, Tier, bool, Tier) {
    (
        v.allowed,
        v.egress.allowed,
        v.egress.tier,
        v.ingress.allowed,
        v.ingress.tier,
    )
}

fn engine(c: &Cluster) -> Engine {
    Engine::new(c.clone(), Options::default())
}

fn namespace_labels<'c>(c: &'c Cluster, ns: &str) -> &'c Labels {
    &c.namespaces.iter().find(|n| n.name == ns).unwrap().labels
}

/// Every namespace, as a peer.
fn all_namespaces() -> AdminPeer {
    AdminPeer::Namespaces(NamespaceMatch::Selector(Selector::everything()))
}

/// An AdminNetworkPolicy at priority 0 whose rules match every peer with `action`; the
/// existing admin-tier priorities move up by one so that it is evaluated first.
fn with_top_admin(c: &Cluster, subject: Subject, action: Action) -> Cluster {
    let mut c = c.clone();
    for p in &mut c.admin_policies {
        if p.tier == AdminTier::Admin {
            p.priority += 1;
        }
    }
    let every = |egress: bool| AdminRule {
        name: None,
        action,
        peers: if egress {
            vec![
                all_namespaces(),
                AdminPeer::Nodes(Selector::everything()),
                AdminPeer::Networks(vec!["0.0.0.0/0".parse().unwrap(), "::/0".parse().unwrap()]),
            ]
        } else {
            vec![all_namespaces()]
        },
        ports: None,
    };
    c.admin_policies.push(AdminPolicy {
        kind: PolicyKind::AdminNetworkPolicy,
        name: "aaa-top".into(),
        tier: AdminTier::Admin,
        priority: 0,
        subject,
        ingress: vec![every(false)],
        egress: vec![every(true)],
        origin: Origin::default(),
    });
    c
}

/// Whether an admin subject selects `pod`.
fn subject_selects(c: &Cluster, subject: &Subject, pod: &Pod) -> bool {
    if pod.host_network {
        return false;
    }
    let ns = namespace_labels(c, &pod.namespace);
    match subject {
        Subject::Namespaces(sel) => sel.matches(ns),
        Subject::Pods { namespaces, pods } => namespaces.matches(ns) && pods.matches(&pod.labels),
    }
}

/// A deterministic permutation (Fisher–Yates with a small LCG).
fn shuffle<T>(v: &mut [T], seed: &mut u64) {
    for i in (1..v.len()).rev() {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let j = ((*seed >> 33) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// `a.b.c.d` → `fd00::a.b.c.d`; IPv6 addresses unchanged.
fn to_v6(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let [a, b, c, d] = a.octets();
            IpAddr::V6(Ipv6Addr::new(
                0xfd00,
                0,
                0,
                0,
                0,
                0,
                u16::from_be_bytes([a, b]),
                u16::from_be_bytes([c, d]),
            ))
        }
        v6 => v6,
    }
}

/// `a.b.c.d/n` → `fd00::a.b.c.d/(96 + n)`.
fn net_to_v6(n: IpNet) -> IpNet {
    match n {
        IpNet::V4(_) => {
            let IpAddr::V6(a) = to_v6(n.addr()) else {
                unreachable!()
            };
            IpNet::V6(Ipv6Net::new(a, 96 + n.prefix_len()).unwrap())
        }
        v6 => v6,
    }
}

/// The same cluster with every IPv4 address and CIDR moved into `fd00::/96`.
fn cluster_to_v6(c: &Cluster) -> Cluster {
    let mut c = c.clone();
    for p in &mut c.pods {
        p.ips = p.ips.iter().copied().map(to_v6).collect();
    }
    for n in &mut c.nodes {
        n.addresses = n.addresses.iter().copied().map(to_v6).collect();
    }
    let block = |b: &mut IpBlock| {
        b.cidr = net_to_v6(b.cidr);
        b.except = b.except.iter().copied().map(net_to_v6).collect();
    };
    for np in &mut c.network_policies {
        for rule in np.ingress.iter_mut().chain(np.egress.iter_mut()) {
            for peer in rule.peers.iter_mut().flatten() {
                if let NetworkPolicyPeer::IpBlock(b) = peer {
                    block(b);
                }
            }
        }
    }
    for p in &mut c.admin_policies {
        for rule in p.ingress.iter_mut().chain(p.egress.iter_mut()) {
            for peer in &mut rule.peers {
                if let AdminPeer::Networks(nets) = peer {
                    *nets = nets.iter().copied().map(net_to_v6).collect();
                }
            }
        }
    }
    c
}

proptest! {
    #![proptest_config(config(96, 0x1a7e_0001))]

    /// Adding a rule to a NetworkPolicy (in a direction it already isolates) only adds
    /// alternatives to the NetworkPolicy tier: nothing allowed before becomes denied.
    #[test]
    fn adding_a_rule_never_removes_an_allowed_connection(
        c in cluster(),
        which in any::<prop::sample::Index>(),
        egress in any::<bool>(),
        rule in np_rule(),
    ) {
        prop_assume!(!c.network_policies.is_empty());
        let mut wider = c.clone();
        let np = &mut wider.network_policies[which.index(c.network_policies.len())];
        let dir = if egress && np.policy_types.egress || !np.policy_types.ingress {
            &mut np.egress
        } else {
            &mut np.ingress
        };
        dir.push(rule);
        let (before, after) = (engine(&c), engine(&wider));
        for f in flows(&addresses(&c)) {
            if eval(&before, f).allowed {
                prop_assert!(eval(&after, f).allowed, "{:?} was allowed, the added rule denied it\n{}", f, Analysis::new(&after).explain(&Flow { src: after.endpoint_for_ip(f.0), dst: after.endpoint_for_ip(f.1), protocol: f.2, port: f.3 }));
            }
        }
    }
}

proptest! {
    #![proptest_config(config(96, 0x1a7e_0002))]

    /// An admin Deny evaluated before every other admin rule denies ingress from every
    /// other pod to the pods it selects, whatever the NetworkPolicies say.
    #[test]
    fn a_higher_priority_admin_deny_wins(c in cluster(), ns in selector(), pods in selector(), by_pod in any::<bool>()) {
        let subject = if by_pod { Subject::Pods { namespaces: ns, pods } } else { Subject::Namespaces(ns) };
        let denied = with_top_admin(&c, subject.clone(), Action::Deny);
        let e = engine(&denied);
        for dst in c.pods.iter().filter(|p| subject_selects(&c, &subject, p)) {
            for src in c.pods.iter().filter(|p| !p.host_network && p.key() != dst.key()) {
                for protocol in Protocol::ALL {
                    for port in PORTS {
                        let v = eval(&e, (src.ips[0], dst.ips[0], protocol, port));
                        prop_assert!(!v.allowed && !v.ingress.allowed && v.ingress.tier == Tier::Admin,
                            "{} -> {} {}/{}: {:?}", src.key(), dst.key(), protocol, port, summary(&v));
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config(96, 0x1a7e_0003))]

    /// A Pass evaluated first hands the decision to the NetworkPolicy tier: where that tier
    /// denies, the side is denied; and where the Pass covers the peer (every egress peer;
    /// ingress from pods, since admin ingress peers cannot name addresses) the side decides
    /// exactly as in the cluster without admin-tier policies.
    #[test]
    fn pass_never_allows_what_the_networkpolicy_tier_denies(c in cluster()) {
        let passed = engine(&with_top_admin(&c, Subject::Namespaces(Selector::everything()), Action::Pass));
        let mut no_admin = c.clone();
        no_admin.admin_policies.retain(|p| p.tier == AdminTier::Baseline);
        let reference = engine(&no_admin);
        for f in flows(&addresses(&c)) {
            let (got, want) = (eval(&passed, f), eval(&reference, f));
            let from_pod = c.pods.iter().any(|p| !p.host_network && p.ips.contains(&f.0));
            for (side, g, w, covered) in [("egress", &got.egress, &want.egress, true), ("ingress", &got.ingress, &want.ingress, from_pod)] {
                if w.tier == Tier::NetworkPolicy && !w.allowed {
                    prop_assert!(!g.allowed, "{:?} {}: the NetworkPolicy tier denies, the Pass allowed", f, side);
                }
                if covered {
                    prop_assert_eq!((g.allowed, g.tier), (w.allowed, w.tier), "{:?} {}", f, side);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config(96, 0x1a7e_0004))]

    /// A pod that no NetworkPolicy, admin or baseline subject selects (and whose namespace
    /// is not DefaultDeny) accepts every connection on its ingress side; from outside the
    /// cluster and from nodes, where no egress policy applies, it is reachable.
    #[test]
    fn a_pod_selected_by_nothing_is_reachable_from_everywhere(c in cluster(), labels in palisade_gen::strategies::labels()) {
        let mut c = c;
        let ns = Namespace {
            name: "lonely".into(),
            labels: [(NAMESPACE_NAME_LABEL.to_string(), "lonely".to_string())].into(),
            default_deny_ingress: false,
            origin: None,
        };
        let pod = Pod {
            namespace: "lonely".into(),
            name: "alone".into(),
            labels,
            node_name: Some("node0".into()),
            host_network: false,
            ips: vec!["10.9.9.9".parse().unwrap()],
            ports: vec![],
            ready: true,
            origin: Origin::default(),
        };
        c.namespaces.push(ns);
        c.pods.push(pod.clone());
        prop_assume!(!c.admin_policies.iter().any(|p| subject_selects(&c, &p.subject, &pod)));
        // NetworkPolicies live in ns0..ns2, so none selects the pod.
        let e = engine(&c);
        for src in addresses(&c) {
            for protocol in Protocol::ALL {
                for port in PORTS {
                    let v = eval(&e, (src, pod.ips[0], protocol, port));
                    prop_assert!(v.ingress.allowed, "{} -> lonely {}/{}: {:?}", src, protocol, port, summary(&v));
                    prop_assert!(matches!(v.ingress.tier, Tier::Default | Tier::Exempt), "{:?}", summary(&v));
                    let from_pod = c.pods.iter().any(|p| !p.host_network && p.ips.contains(&src));
                    if !from_pod {
                        prop_assert!(v.allowed, "{} -> lonely {}/{}: {:?}", src, protocol, port, summary(&v));
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config(64, 0x1a7e_0005))]

    /// Reordering namespaces, pods, nodes and policies changes no verdict.
    #[test]
    fn object_order_never_changes_a_verdict(c in cluster(), seed in any::<u64>()) {
        let mut shuffled = c.clone();
        let mut s = seed;
        shuffle(&mut shuffled.namespaces, &mut s);
        shuffle(&mut shuffled.pods, &mut s);
        shuffle(&mut shuffled.nodes, &mut s);
        shuffle(&mut shuffled.network_policies, &mut s);
        shuffle(&mut shuffled.admin_policies, &mut s);
        let (a, b) = (engine(&c), engine(&shuffled));
        for f in flows(&addresses(&c)) {
            prop_assert_eq!(summary(&eval(&a, f)), summary(&eval(&b, f)), "{:?}", f);
        }
    }
}

proptest! {
    #![proptest_config(config(64, 0x1a7e_0006))]

    /// The same cluster with every address and CIDR moved from IPv4 into IPv6 decides
    /// every connection the same way.
    #[test]
    fn ipv4_and_ipv6_behave_alike(c in cluster()) {
        let v6 = cluster_to_v6(&c);
        let (a, b) = (engine(&c), engine(&v6));
        for (src, dst, protocol, port) in flows(&addresses(&c)) {
            let mapped = (to_v6(src), to_v6(dst), protocol, port);
            prop_assert_eq!(
                summary(&eval(&a, (src, dst, protocol, port))),
                summary(&eval(&b, mapped)),
                "{} -> {} {}/{}", src, dst, protocol, port
            );
        }
    }
}
