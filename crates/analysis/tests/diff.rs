//! Semantic diff: exact over every port, both address families, nodes and the outside
//! (property test against evaluating each connection on its own), the regressions where a
//! sampled diff said "no change", grouping into readable lines, and staged policies.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;
use palisade_analysis::Analysis;
use palisade_analysis::diff::{self, Actor, ChangeKind, Diff, Family, Filter};
use palisade_engine::{Endpoint, EndpointKind, Engine, Flow, Options};
use palisade_gen::strategies::cluster;
use palisade_model::{
    AdminPort, Cluster, LoadOptions, NetworkPolicyPeer, Port, PortRange, PortSpec, Protocol,
};
use proptest::prelude::*;

/// One end as the reference sees it: a name (the diff's actor name) and its endpoint in
/// each state and family.
struct End {
    name: String,
    subject: bool,
    at: BTreeMap<(bool, Family), Endpoint>,
}

/// Every pod and node of either state, and `outside` addresses named by the region of `d`
/// that holds them.
fn ends(old: &Engine, new: &Engine, d: &Diff, outside: &[IpAddr]) -> Vec<End> {
    let mut by_name: BTreeMap<String, End> = BTreeMap::new();
    for (is_new, e) in [(false, old), (true, new)] {
        for (p, _) in Analysis::new(e).addressable_pods() {
            let pod = &e.cluster().pods[p];
            let end = by_name.entry(pod.key()).or_insert_with(|| End {
                name: pod.key(),
                subject: false,
                at: BTreeMap::new(),
            });
            for f in Family::ALL {
                if let Some(ep) = e.endpoint_for_pod(p, Some(f == Family::V6))
                    && Family::of(ep.ip) == f
                {
                    end.subject |= matches!(ep.kind, EndpointKind::Pod(_));
                    end.at.insert((is_new, f), ep);
                }
            }
        }
        for (n, node) in e.cluster().nodes.iter().enumerate() {
            let name = format!("node/{}", node.name);
            let end = by_name.entry(name.clone()).or_insert_with(|| End {
                name,
                subject: false,
                at: BTreeMap::new(),
            });
            for f in Family::ALL {
                if let Some(ip) = node.addresses.iter().find(|ip| {
                    Family::of(**ip) == f
                        && matches!(e.endpoint_for_ip(**ip).kind, EndpointKind::Host(Some(k)) if k == n)
                }) {
                    end.at.insert((is_new, f), e.endpoint_for_ip(*ip));
                }
            }
        }
    }
    let mut out: Vec<End> = by_name.into_values().collect();
    for &ip in outside {
        let external = |e: &Engine| e.endpoint_for_ip(ip).kind == EndpointKind::External;
        if !external(old) || !external(new) {
            continue;
        }
        let f = Family::of(ip);
        if !d.families.contains(&f) {
            continue;
        }
        let region = d.actors.iter().find_map(|a| match a {
            Actor::Outside(r)
                if r.within.contains(&ip) && !r.except.iter().any(|x| x.contains(&ip)) =>
            {
                Some(r.to_string())
            }
            _ => None,
        });
        let Some(name) = region else {
            panic!(
                "{ip} is outside the cluster but in no region of {:#?}",
                d.actors
            )
        };
        let ep = Endpoint {
            kind: EndpointKind::External,
            ip,
        };
        out.push(End {
            name,
            subject: false,
            at: [((false, f), ep), ((true, f), ep)].into(),
        });
    }
    out
}

/// The ports where some policy or container port of either state starts or ends a run,
/// each with its neighbours, and the ends of the port space.
fn ports(states: [&Engine; 2]) -> BTreeSet<(Protocol, u16)> {
    let mut cuts: BTreeSet<(Protocol, u16)> = BTreeSet::new();
    let mut range = |p: Protocol, r: PortRange| {
        for n in [r.start.get(), r.end.get()] {
            for m in [n.saturating_sub(1), n, n.saturating_add(1)] {
                cuts.insert((p, m.max(1)));
            }
        }
    };
    for e in states {
        let c = e.cluster();
        for cp in c.pods.iter().flat_map(|p| &p.ports) {
            range(cp.protocol, PortRange::single(cp.port));
        }
        for r in c
            .network_policies
            .iter()
            .flat_map(|np| np.ingress.iter().chain(&np.egress))
        {
            for p in r.ports.iter().flatten() {
                if let PortSpec::Range(x) = p.port {
                    range(p.protocol, x);
                }
            }
        }
        for r in c
            .admin_policies
            .iter()
            .flat_map(|a| a.ingress.iter().chain(&a.egress))
        {
            for p in r.ports.iter().flatten() {
                if let AdminPort::Ports {
                    protocol,
                    range: Some(x),
                } = p
                {
                    range(*protocol, *x);
                }
            }
        }
    }
    for p in Protocol::ALL {
        cuts.extend([(p, 1), (p, 22), (p, 65535)]);
    }
    cuts
}

/// Every address a CIDR of either state starts or ends at, the one after, and a few others.
fn outside_addresses(states: [&Engine; 2]) -> Vec<IpAddr> {
    let mut out: BTreeSet<IpAddr> = [
        "203.0.113.77",
        "8.8.8.8",
        "0.0.0.0",
        "2001:db8::1",
        "fd00::ff",
        "::",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect();
    let mut add = |c: IpNet| {
        out.insert(c.network());
        out.insert(c.broadcast());
        let next = match c.broadcast() {
            IpAddr::V4(a) => u32::from(a)
                .checked_add(1)
                .map(|n| IpAddr::from(n.to_be_bytes())),
            IpAddr::V6(a) => u128::from(a)
                .checked_add(1)
                .map(|n| IpAddr::from(n.to_be_bytes())),
        };
        out.extend(next);
    };
    for e in states {
        let c = e.cluster();
        for r in c
            .network_policies
            .iter()
            .flat_map(|np| np.ingress.iter().chain(&np.egress))
        {
            for p in r.peers.iter().flatten() {
                if let NetworkPolicyPeer::IpBlock(b) = p {
                    add(b.cidr);
                    b.except.iter().copied().for_each(&mut add);
                }
            }
        }
        for r in c
            .admin_policies
            .iter()
            .flat_map(|a| a.ingress.iter().chain(&a.egress))
        {
            for p in &r.peers {
                if let palisade_model::AdminPeer::Networks(n) = p {
                    n.iter().copied().for_each(&mut add);
                }
            }
        }
    }
    out.into_iter().collect()
}

type Claim = (String, String, Family, Protocol);

/// Checks `d` against evaluating every connection between the ends on every port of
/// [`ports`]; returns the first disagreement.
fn check(old: &Engine, new: &Engine, d: &Diff) -> Result<usize, String> {
    let mut claims: BTreeMap<Claim, Vec<(PortRange, ChangeKind)>> = BTreeMap::new();
    for (g, a, b) in d.changes() {
        claims
            .entry((a.name(), b.name(), g.family, g.protocol))
            .or_default()
            .push((g.ports, g.change));
    }
    let ends = ends(old, new, d, &outside_addresses([old, new]));
    let ports = ports([old, new]);
    let mut checked = 0;
    for a in &ends {
        for b in &ends {
            if a.name == b.name || (!a.subject && !b.subject) {
                continue;
            }
            for f in Family::ALL {
                let flow = |is_new: bool, protocol, port| {
                    Some(Flow {
                        src: *a.at.get(&(is_new, f))?,
                        dst: *b.at.get(&(is_new, f))?,
                        protocol,
                        port,
                    })
                };
                for &(protocol, port) in &ports {
                    let allowed = |e: &Engine, is_new| {
                        flow(is_new, protocol, port).is_some_and(|fl| e.evaluate(&fl).allowed)
                    };
                    let want = match (allowed(old, false), allowed(new, true)) {
                        (false, true) => Some(ChangeKind::Gained),
                        (true, false) => Some(ChangeKind::Lost),
                        _ => None,
                    };
                    let key = (a.name.clone(), b.name.clone(), f, protocol);
                    let got: Vec<ChangeKind> = claims
                        .get(&key)
                        .into_iter()
                        .flatten()
                        .filter(|(r, _)| r.contains(port))
                        .map(|x| x.1)
                        .collect();
                    if got.as_slice() != want.as_slice() {
                        return Err(format!(
                            "{} -> {} {} {protocol} {port}: evaluated {want:?}, diff says {got:?}",
                            a.name,
                            b.name,
                            f.as_str()
                        ));
                    }
                    checked += 1;
                }
            }
        }
    }
    Ok(checked)
}

fn port_of(n: u16) -> Port {
    Port::new(i64::from(n)).unwrap()
}

/// A changed copy of the cluster objects: one pod gone, one relabelled and moved.
fn churn(mut c: Cluster, from: &Cluster) -> Cluster {
    if c.pods.len() > 2 {
        c.pods.remove(0);
    }
    if let (Some(p), Some(q)) = (c.pods.last_mut(), from.pods.first()) {
        p.labels = q.labels.clone();
        p.node_name = q.node_name.clone();
    }
    c
}

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(200, 0xd1ff_2027))]

    /// `diff A B` is exactly the connections A and B decide differently: every pod, node and
    /// outside class, both families, every port that can differ.
    #[test]
    fn diff_is_every_connection_decided_differently(
        a in cluster(),
        b in cluster(),
        mode in 0..3u8,
        v6 in prop::option::of((any::<bool>(), any::<bool>())),
    ) {
        let b = match mode {
            0 => Cluster { network_policies: b.network_policies, admin_policies: b.admin_policies, ..a.clone() },
            1 => { let moved = churn(a.clone(), &b); Cluster { network_policies: b.network_policies, admin_policies: b.admin_policies, ..moved } }
            _ => b,
        };
        let (a, b) = match v6 {
            Some((ra, rb)) => (common::dual_stack(a, ra), common::dual_stack(b, rb)),
            None => (a, b),
        };
        let (old, new) = (Engine::new(a, Options::default()), Engine::new(b, Options::default()));
        let d = diff::diff(&old, &new);
        let checked = check(&old, &new, &d);
        prop_assert!(checked.is_ok(), "{}", checked.unwrap_err());
        for g in &d.groups {
            prop_assert_eq!(g.before.as_ref().is_some_and(|v| v.allowed), g.change == ChangeKind::Lost, "the verdict before explains the change");
            prop_assert_eq!(g.after.as_ref().is_some_and(|v| v.allowed), g.change == ChangeKind::Gained, "the verdict after explains the change");
        }
        let (gained, lost) = d.counts();
        let lines: usize = d.lines().iter().map(|l| l.pairs).sum();
        prop_assert!(lines >= gained.max(lost), "the lines cover every changed pair");
        if mode == 0 && v6.is_none_or(|(x, y)| x == y) {
            prop_assert!(d.pods_added.is_empty() && d.pods_removed.is_empty());
        }
        let back = diff::diff(&new, &old);
        prop_assert_eq!(back.counts(), (lost, gained), "the diff back is the same change reversed");
    }
}

fn load(texts: &[(&str, &str)]) -> Engine {
    let loaded = palisade_model::load_sources(texts.iter().copied(), LoadOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    Engine::new(loaded.cluster, Options::default())
}

const DENY_X: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-x, namespace: x}
spec: {podSelector: {}}
";

/// Every (from, to, family, protocol, ports) of a change kind, as text.
fn list(d: &Diff, kind: ChangeKind) -> BTreeSet<String> {
    d.changes()
        .filter(|(g, _, _)| g.change == kind)
        .map(|(g, a, b)| {
            format!(
                "{} -> {} {} {} {}",
                a.name(),
                b.name(),
                g.family.as_str(),
                g.protocol,
                g.ports
            )
        })
        .collect()
}

#[test]
fn identical_states_have_no_difference() {
    let e = load(&[("c.yaml", common::CLUSTER), ("p.yaml", DENY_X)]);
    let d = diff::diff(&e, &e.clone());
    assert!(d.is_empty() && d.groups.is_empty(), "{d:?}");
}

#[test]
fn a_namespace_wide_deny_is_one_line_with_the_policy_responsible() {
    let old = load(&[("c.yaml", common::CLUSTER)]);
    let new = load(&[("c.yaml", common::CLUSTER), ("p.yaml", DENY_X)]);
    let d = diff::diff(&old, &new);
    // Every other pod (8) and the outside to each of x's 3 pods: 3 * 8 + 3 = 27.
    assert_eq!(d.counts(), (0, 27));
    let lines = d.lines();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let l = &lines[0];
    assert_eq!(l.change, ChangeKind::Lost);
    assert_eq!(d.describe(&l.from), "x/*, y/*, z/*, 0.0.0.0/0");
    assert_eq!(d.describe(&l.to), "x/*");
    assert_eq!(
        d.ports_text(&l.ports),
        "TCP 1-65535; UDP 1-65535; SCTP 1-65535"
    );
    assert_eq!(l.before, "allowed: no policy decided");
    assert_eq!(
        l.after,
        "ingress denied: isolated by NetworkPolicy x/deny-x and no rule matched"
    );
    let back = diff::diff(&new, &old);
    assert_eq!(
        back.counts(),
        (27, 0),
        "and back: the same connections, gained"
    );
}

/// A port no pod declares is compared too.
#[test]
fn opening_tcp_22_to_everyone_is_a_change() {
    let old = load(&[("c.yaml", common::CLUSTER), ("p.yaml", DENY_X)]);
    let open22 = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: ssh, namespace: x}
spec:
  podSelector: {}
  ingress: [{ports: [{port: 22}]}]
";
    let new = load(&[
        ("c.yaml", common::CLUSTER),
        ("p.yaml", DENY_X),
        ("s.yaml", open22),
    ]);
    let d = diff::diff(&old, &new);
    let gained = list(&d, ChangeKind::Gained);
    assert!(gained.contains("y/a -> x/b IPv4 TCP 22"), "{gained:#?}");
    assert!(
        gained.contains("0.0.0.0/0 -> x/a IPv4 TCP 22"),
        "{gained:#?}"
    );
    assert!(list(&d, ChangeKind::Lost).is_empty());
    assert_eq!(d.counts(), (27, 0));
    let narrowed = d.narrowed(&Filter {
        protocols: vec![Protocol::Tcp],
        ports: vec![PortRange {
            start: port_of(80),
            end: port_of(80),
        }],
    });
    assert!(narrowed.groups.is_empty(), "--ports 80 does not show it");
    let overlapping = d.narrowed(&Filter {
        protocols: vec![Protocol::Tcp],
        ports: vec![
            PortRange {
                start: port_of(1),
                end: port_of(30),
            },
            PortRange {
                start: port_of(20),
                end: port_of(22),
            },
        ],
    });
    assert_eq!(
        overlapping.changes().count(),
        27,
        "overlapping ranges asked report each change once"
    );
    assert!(
        !narrowed.is_empty() || !d.is_empty(),
        "but the diff is not empty"
    );
}

/// The outside is compared by the classes the CIDRs cut it into.
#[test]
fn exposing_8443_to_the_internet_is_a_change_from_the_outside_class() {
    let cluster = "apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop, labels: {app: web}}
spec: {containers: [{name: c, ports: [{containerPort: 80}]}]}
status: {podIP: 10.0.0.5}
";
    let policy = |from: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: web, namespace: shop}}
spec:
  podSelector: {{matchLabels: {{app: web}}}}
  ingress: [{{from: [{from}], ports: [{{port: 8443}}]}}]
"
        )
    };
    let old = load(&[
        ("c.yaml", cluster),
        ("p.yaml", &policy("{ipBlock: {cidr: 10.0.0.0/8}}")),
    ]);
    let new = load(&[
        ("c.yaml", cluster),
        ("p.yaml", &policy("{ipBlock: {cidr: 0.0.0.0/0}}")),
    ]);
    let d = diff::diff(&old, &new);
    assert_eq!(
        list(&d, ChangeKind::Gained),
        BTreeSet::from(["0.0.0.0/0 except 10.0.0.0/8 -> shop/web IPv4 TCP 8443".to_string()])
    );
    assert!(list(&d, ChangeKind::Lost).is_empty());
}

/// Both families of a dual-stack pod are compared.
#[test]
fn cutting_ipv6_on_a_dual_stack_cluster_is_a_change() {
    let pods = "apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x}
status: {podIPs: [{ip: 10.0.0.1}, {ip: 'fd00::1'}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: x}
status: {podIPs: [{ip: 10.0.0.2}, {ip: 'fd00::2'}]}
";
    let v4_only = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: v4-only, namespace: x}
spec:
  podSelector: {}
  ingress: [{from: [{ipBlock: {cidr: 0.0.0.0/0}}]}]
";
    let old = load(&[("c.yaml", pods)]);
    let new = load(&[("c.yaml", pods), ("p.yaml", v4_only)]);
    let d = diff::diff(&old, &new);
    let lost = list(&d, ChangeKind::Lost);
    assert!(lost.contains("x/a -> x/b IPv6 TCP 1-65535"), "{lost:#?}");
    assert!(lost.contains("::/0 -> x/b IPv6 UDP 1-65535"), "{lost:#?}");
    assert!(
        !lost.iter().any(|l| l.contains("IPv4")),
        "IPv4 still flows: {lost:#?}"
    );
    let line = &d.lines()[0];
    assert!(
        d.ports_text(&line.ports).ends_with("(IPv6)"),
        "{}",
        d.ports_text(&line.ports)
    );
}

#[test]
fn a_pod_added_gains_its_connections() {
    let old = load(&[("c.yaml", common::CLUSTER)]);
    let extra = "apiVersion: v1\nkind: Pod\nmetadata: {name: d, namespace: x}\nstatus: {podIP: 10.0.0.20}\n";
    let new = load(&[("c.yaml", common::CLUSTER), ("d.yaml", extra)]);
    let d = diff::diff(&old, &new);
    assert_eq!(d.pods_added, ["x/d"]);
    let gained = list(&d, ChangeKind::Gained);
    assert!(
        gained.contains("x/d -> y/a IPv4 TCP 1-65535"),
        "{gained:#?}"
    );
    assert!(
        gained.contains("y/a -> x/d IPv4 SCTP 1-65535"),
        "{gained:#?}"
    );
    // To and from the 9 other pods and the outside (and a node, if any holds an address).
    assert!(d.counts().0 >= 20, "{:?}", d.counts());
    let d = diff::diff(&new, &old);
    assert_eq!(d.pods_removed, ["x/d"]);
    assert_eq!(d.counts().0, 0);
    assert!(d.counts().1 >= 20);
}

#[test]
fn staged_policies_are_diffed_against_the_enforced_state() {
    let staged = DENY_X.replace(
        "metadata: {name: deny-x, namespace: x}",
        "metadata: {name: deny-x, namespace: x, annotations: {palisade.dev/staged: \"true\"}}",
    );
    let enforced = load(&[("c.yaml", common::CLUSTER), ("p.yaml", &staged)]);
    let x_a = enforced.pod_id("x", "a").unwrap();
    let y_a = enforced.pod_id("y", "a").unwrap();
    let flow = Analysis::new(&enforced)
        .pod_flow(y_a, x_a, common::TCP80)
        .unwrap();
    assert!(
        enforced.evaluate(&flow).allowed,
        "a staged policy is not enforced"
    );
    let with_staged = Engine::new(enforced.cluster().with_staged(), enforced.options());
    let d = diff::diff(&enforced, &with_staged);
    assert_eq!(d.counts(), (0, 27), "the staged deny would cut 27 pairs");
    let line = &d.lines()[0];
    assert!(
        line.after.contains("NetworkPolicy x/deny-x"),
        "{}",
        line.after
    );
}
