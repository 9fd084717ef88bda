//! The indexed engine against a naive evaluator written straight from the semantics
//! (docs/semantics.md), on random clusters and policies of every kind.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::net::IpAddr;

use palisade_analysis::{Analysis, Probe};
use palisade_engine::{EndpointKind, Engine, Flow, Options, Semantics};
use palisade_gen::strategies::cluster;
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

    #[allow(clippy::too_many_arguments)] // mirrors the reference model's rule fields one to one
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

/// A connection decided from `Engine::side_program` alone.
fn program_allows(e: &Engine, flow: &Flow) -> bool {
    let side = |pod, dir, peer: IpAddr| {
        let prog = e.side_program(pod, dir);
        if prog.exempt.contains(&peer) {
            return true;
        }
        if prog.shared_address.is_some() {
            return false;
        }
        let m = |r: &palisade_engine::ConcreteRule| {
            r.matches(&peer, &flow.dst.ip, flow.protocol, flow.port)
        };
        let mut passed = false;
        for r in prog.admin.iter() {
            if m(r) {
                match r.rule.action {
                    Action::Allow => return true,
                    Action::Deny => return false,
                    Action::Pass => {
                        passed = true;
                        break;
                    }
                }
            }
        }
        let _ = passed;
        if prog.isolated {
            return prog.network.iter().any(m);
        }
        for r in prog.baseline.iter() {
            if m(r) {
                return r.rule.action != Action::Deny;
            }
        }
        true
    };
    let egress = match flow.src.kind {
        EndpointKind::Pod(p) => side(p, Direction::Egress, flow.dst.ip),
        _ => true,
    };
    let ingress = match flow.dst.kind {
        EndpointKind::Pod(p) => side(p, Direction::Ingress, flow.src.ip),
        _ => true,
    };
    egress && ingress
}

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(400, 0x5eed_2026))]

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
                        prop_assert_eq!(got.allowed, want, "{} -> {} {}/{}\n{}", src, dst, proto, port, Analysis::new(&engine).explain(&flow));
                        // The concrete side programs (what data planes compile) agree.
                        let by_program = program_allows(&engine, &flow);
                        prop_assert_eq!(by_program, want, "side programs: {} -> {} {}/{}\n{}", src, dst, proto, port, Analysis::new(&engine).explain(&flow));
                        // the explanation is consistent with the verdict
                        prop_assert_eq!(got.allowed, got.egress.allowed && got.ingress.allowed);
                        if let palisade_engine::Decision::Isolated(by) = &got.ingress.decision {
                            prop_assert!(!by.is_empty(), "an isolation deny names its policies");
                        }
                    }
                }
            }
        }
        // The class-based matrix equals pair-by-pair evaluation.
        let probes: Vec<Probe> = Protocol::ALL.iter().flat_map(|&protocol| [80u16, 81].map(|port| Probe { protocol, port })).collect();
        let m = Analysis::new(&engine).matrix(&probes);
        for (pi, probe) in probes.iter().enumerate() {
            for (f, &from) in m.pods.iter().enumerate() {
                for (t, &to) in m.pods.iter().enumerate() {
                    let want = from == to || Analysis::new(&engine).pod_flow(from, to, *probe).is_some_and(|fl| engine.evaluate(&fl).allowed);
                    prop_assert_eq!(m.allowed(pi, f, t), want, "matrix cell {} -> {} {:?}", from, to, probe);
                }
            }
        }
    }
}
