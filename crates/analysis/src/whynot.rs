//! "Why not": for a policy none of whose rules matched a flow, each rule and what about it
//! failed to match — the port or protocol, and each peer with the reason it does not cover
//! the other end (its namespace or labels, the CIDR, the except that excludes the address).

use ipnet::IpNet;
use palisade_engine::rule_parts::np_peer_holds;
use palisade_engine::{AdminPeerC, Endpoint, EndpointKind, Flow, PeerWhy, PodId, PortWhy};
use palisade_model::{
    AdminPeer, AdminPort, Direction, NamespaceMatch, NetworkPolicyPeer, PortSpec, Selector,
};

use crate::Analysis;

/// One rule that did not match, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleMiss {
    /// Index of the rule in its direction's list.
    pub index: u32,
    /// The rule's name, when it has one.
    pub name: Option<String>,
    /// Its port entries, none of which matched (absent when the ports matched).
    pub ports: Vec<PortMiss>,
    /// Its peers, none of which matched (absent when the peers matched).
    pub peers: Vec<PeerMiss>,
}

/// Why one rule did not match, as reasons only: what a [`RuleMiss`] says without its texts,
/// cheap to compute, compare and hash (one reason per port entry and per peer, in order).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RuleWhy {
    /// Index of the rule in its direction's list.
    pub index: u32,
    /// Why each port entry did not take the flow (empty when the ports matched).
    pub ports: Vec<PortWhy>,
    /// Why each peer did not hold the other end (empty when the peers matched).
    pub peers: Vec<PeerWhy>,
}

/// A port entry of a rule and why the flow's protocol and port are not in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMiss {
    /// The entry as written: `TCP/80`, `TCP/8080-8090`, `UDP` (every port), `named port http`.
    pub port: String,
    /// Why it did not match.
    pub why: PortWhy,
}

/// A peer of a rule and why the other end of the flow is not in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerMiss {
    /// The peer as written: `podSelector {app=b}`, `ipBlock 10.0.0.0/8 except 10.1.0.0/16`, ...
    pub peer: String,
    /// Why it did not match.
    pub why: PeerWhy,
}

/// `{app=b}`, or `{}` for the empty selector.
fn braces(s: &Selector) -> String {
    if s.is_empty() {
        "{}".into()
    } else {
        format!("{{{s}}}")
    }
}

/// `TCP/80`, `TCP/8080-8090`, `UDP` (every port), `TCP/named port http`.
fn np_port_text(p: &palisade_model::NetworkPolicyPort) -> String {
    match &p.port {
        PortSpec::Any => p.protocol.to_string(),
        PortSpec::Range(r) => format!("{}/{r}", p.protocol),
        PortSpec::Named(n) => format!("{}/named port {n}", p.protocol),
    }
}

fn np_peer_text(p: &NetworkPolicyPeer) -> String {
    match p {
        NetworkPolicyPeer::Pods {
            namespaces: None,
            pods,
        } => format!("podSelector {}", braces(pods)),
        NetworkPolicyPeer::Pods {
            namespaces: Some(ns),
            pods,
        } => format!(
            "namespaceSelector {} podSelector {}",
            braces(ns),
            braces(pods)
        ),
        NetworkPolicyPeer::IpBlock(b) if b.except.is_empty() => format!("ipBlock {}", b.cidr),
        NetworkPolicyPeer::IpBlock(b) => {
            let except: Vec<String> = b.except.iter().map(IpNet::to_string).collect();
            format!("ipBlock {} except {}", b.cidr, except.join(","))
        }
    }
}

fn namespace_match_text(m: &NamespaceMatch) -> String {
    match m {
        NamespaceMatch::Selector(s) => braces(s),
        NamespaceMatch::SelfNamespace => "related: Self".into(),
        NamespaceMatch::NotSelfNamespace => "related: NotSelf".into(),
        NamespaceMatch::SameLabels(k) => format!("sameLabels [{}]", k.join(",")),
        NamespaceMatch::NotSameLabels(k) => format!("notSameLabels [{}]", k.join(",")),
    }
}

/// `TCP` (every port), `TCP/80`, `TCP/8080-8090`, `named port http`.
fn admin_port_text(p: &AdminPort) -> String {
    match p {
        AdminPort::Ports {
            protocol,
            range: None,
        } => protocol.to_string(),
        AdminPort::Ports {
            protocol,
            range: Some(r),
        } => format!("{protocol}/{r}"),
        AdminPort::Named(n) => format!("named port {n}"),
    }
}

fn admin_peer_text(p: &AdminPeer) -> String {
    match p {
        AdminPeer::Namespaces(m) => format!("namespaces {}", namespace_match_text(m)),
        AdminPeer::Pods { namespaces, pods } => format!(
            "pods namespaces {} podSelector {}",
            namespace_match_text(namespaces),
            braces(pods)
        ),
        AdminPeer::Nodes(s) => format!("nodes {}", braces(s)),
        AdminPeer::Networks(n) => {
            let n: Vec<String> = n.iter().map(IpNet::to_string).collect();
            format!("networks [{}]", n.join(","))
        }
        AdminPeer::DomainNames(d) => {
            let d: Vec<&str> = d.iter().map(|p| p.text.as_str()).collect();
            format!("domainNames [{}]", d.join(","))
        }
        AdminPeer::Unsupported(fields) => format!("peer with only [{}]", fields.join(",")),
    }
}

impl Analysis<'_> {
    /// Why a pod peer given by a namespace scope and pod selector does not hold `ep`.
    fn pod_peer_why(&self, ep: &Endpoint, ns_ok: impl Fn(PodId) -> bool) -> PeerWhy {
        match ep.kind {
            EndpointKind::Pod(p) if !ns_ok(p) => PeerWhy::Namespace,
            EndpointKind::Pod(_) => PeerWhy::PodLabels,
            EndpointKind::Host(_) | EndpointKind::External => PeerWhy::NotAPod,
        }
    }

    /// Why no rule of NetworkPolicy `np` (by index) in `dir` matched the flow: one entry per rule.
    pub(crate) fn np_misses(&self, np: u32, dir: Direction, flow: &Flow) -> Vec<RuleMiss> {
        let rules = self.engine.network_policies()[np as usize].rules(dir);
        let written = self.engine.cluster().network_policies[np as usize].rules(dir);
        self.np_whys(np, dir, flow)
            .into_iter()
            .map(|why| {
                let i = why.index as usize;
                let ports = rules[i].ports.as_deref().unwrap_or_default();
                let peers = written[i].peers.as_deref().unwrap_or_default();
                RuleMiss {
                    index: why.index,
                    name: None,
                    ports: (why.ports.iter().enumerate())
                        .map(|(k, &why)| PortMiss {
                            port: ports
                                .get(k)
                                .map_or_else(|| "an empty list".into(), np_port_text),
                            why,
                        })
                        .collect(),
                    peers: (why.peers.into_iter().enumerate())
                        .map(|(k, why)| PeerMiss {
                            peer: peers
                                .get(k)
                                .map_or_else(|| "an empty list".into(), np_peer_text),
                            why,
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// Why each rule of NetworkPolicy `np` in `dir` does not match `flow`, as reasons only
    /// (equal reasons read the same).
    pub fn np_whys(&self, np: u32, dir: Direction, flow: &Flow) -> Vec<RuleWhy> {
        let policy = &self.engine.cluster().network_policies[np as usize];
        let peer_ep = match dir {
            Direction::Ingress => &flow.src,
            Direction::Egress => &flow.dst,
        };
        let mut out = Vec::new();
        for (index, (rule, written)) in self.engine.network_policies()[np as usize]
            .rules(dir)
            .iter()
            .zip(policy.rules(dir))
            .enumerate()
        {
            let mut ports = Vec::new();
            if let Some(list) = &rule.ports {
                if list.is_empty() {
                    ports.push(PortWhy::EmptyList);
                } else if let Some(whys) = list
                    .iter()
                    .map(|p| self.engine.np_port_why(p, flow))
                    .collect()
                {
                    ports = whys;
                }
            }
            let mut peers = Vec::new();
            if let (Some(list), Some(written)) = (&rule.peers, &written.peers) {
                if list.is_empty() {
                    // The original v1beta1 model: a present, empty list matches nothing.
                    peers.push(PeerWhy::EmptyList);
                } else if let Some(whys) = list
                    .iter()
                    .zip(written)
                    .map(|(c, w)| self.np_peer_why(policy, c, w, peer_ep))
                    .collect()
                {
                    peers = whys;
                }
            }
            if ports.is_empty() && peers.is_empty() {
                continue;
            }
            out.push(RuleWhy {
                index: index as u32,
                ports,
                peers,
            });
        }
        out
    }

    /// Why a compiled NetworkPolicy peer does not hold `ep`, or `None` when it does.
    fn np_peer_why(
        &self,
        policy: &palisade_model::NetworkPolicy,
        compiled: &palisade_engine::NpPeer,
        written: &NetworkPolicyPeer,
        ep: &Endpoint,
    ) -> Option<PeerWhy> {
        match (compiled, written) {
            _ if np_peer_holds(compiled, ep) => None,
            (palisade_engine::NpPeer::Pods(_), NetworkPolicyPeer::Pods { namespaces, .. }) => {
                let ns_ok = |p: PodId| match namespaces {
                    None => self.engine.cluster().pods[p].namespace == policy.namespace,
                    Some(sel) => self
                        .engine
                        .cluster()
                        .namespaces
                        .get(self.engine.pod_namespace(p))
                        .is_some_and(|n| sel.matches(&n.labels)),
                };
                Some(self.pod_peer_why(ep, ns_ok))
            }
            (_, NetworkPolicyPeer::IpBlock(b)) => {
                if palisade_engine::addressless(ep) {
                    Some(PeerWhy::AddressUnknown)
                } else if !b.cidr.contains(&ep.ip) {
                    Some(PeerWhy::OutsideCidr)
                } else {
                    b.except
                        .iter()
                        .find(|e| e.contains(&ep.ip))
                        .map(|e| PeerWhy::Excepted(*e))
                }
            }
            _ => None,
        }
    }

    /// Why no rule of admin policy `admin` (by index) in `dir` matched the flow.
    pub(crate) fn admin_misses(
        &self,
        admin: u32,
        subject: PodId,
        dir: Direction,
        flow: &Flow,
    ) -> Vec<RuleMiss> {
        let rules = self.engine.cluster().admin_policies[admin as usize].rules(dir);
        self.admin_whys(admin, subject, dir, flow)
            .into_iter()
            .map(|why| {
                let rule = &rules[why.index as usize];
                let ports = rule.ports.as_deref().unwrap_or_default();
                RuleMiss {
                    index: why.index,
                    name: rule.name.clone(),
                    ports: (ports.iter().zip(why.ports))
                        .map(|(p, why)| PortMiss {
                            port: admin_port_text(p),
                            why,
                        })
                        .collect(),
                    peers: (rule.peers.iter().zip(why.peers))
                        .map(|(w, why)| PeerMiss {
                            peer: admin_peer_text(w),
                            why,
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// Why each rule of admin policy `admin` in `dir` does not match `flow`, as reasons only
    /// (equal reasons read the same).
    pub fn admin_whys(
        &self,
        admin: u32,
        subject: PodId,
        dir: Direction,
        flow: &Flow,
    ) -> Vec<RuleWhy> {
        let policy = &self.engine.cluster().admin_policies[admin as usize];
        let compiled = self.engine.admin_policies()[admin as usize].rules(dir);
        let peer_ep = match dir {
            Direction::Ingress => &flow.src,
            Direction::Egress => &flow.dst,
        };
        let mut out = Vec::new();
        for (index, (rule, c)) in policy.rules(dir).iter().zip(compiled).enumerate() {
            let ports: Vec<PortWhy> = rule
                .ports
                .as_ref()
                .and_then(|list| {
                    list.iter()
                        .map(|p| self.engine.admin_port_why(p, flow))
                        .collect()
                })
                .unwrap_or_default();
            let peers: Vec<PeerWhy> = c
                .peers
                .iter()
                .zip(&rule.peers)
                .map(|(c, w)| self.admin_peer_why(c, w, subject, peer_ep))
                .collect::<Option<_>>()
                .unwrap_or_default();
            if ports.is_empty() && peers.is_empty() {
                continue;
            }
            out.push(RuleWhy {
                index: index as u32,
                ports,
                peers,
            });
        }
        out
    }

    /// Why a compiled admin peer does not hold `ep`, or `None` when it does.
    fn admin_peer_why(
        &self,
        compiled: &AdminPeerC,
        written: &AdminPeer,
        subject: PodId,
        ep: &Endpoint,
    ) -> Option<PeerWhy> {
        if self.engine.admin_peer_matches(compiled, subject, ep) {
            return None;
        }
        let ns_selects = |sel: &Selector, p: PodId| {
            self.engine
                .cluster()
                .namespaces
                .get(self.engine.pod_namespace(p))
                .is_some_and(|n| sel.matches(&n.labels))
        };
        Some(match (compiled, written) {
            (AdminPeerC::Unsupported, AdminPeer::DomainNames(_)) => PeerWhy::NoDnsMap,
            (AdminPeerC::Unsupported, _) => PeerWhy::Unsupported,
            (AdminPeerC::Networks(_), _) if palisade_engine::addressless(ep) => {
                PeerWhy::AddressUnknown
            }
            (AdminPeerC::Networks(_), AdminPeer::DomainNames(_)) => PeerWhy::NoDomainAnswer,
            (AdminPeerC::Networks(_), _) => PeerWhy::OutsideCidr,
            (AdminPeerC::Nodes(_), _) => match ep.kind {
                EndpointKind::Host(Some(_)) => PeerWhy::NodeLabels,
                _ => PeerWhy::NotANode,
            },
            (_, AdminPeer::Namespaces(NamespaceMatch::Selector(sel))) => {
                self.pod_peer_why(ep, |p| ns_selects(sel, p))
            }
            (
                _,
                AdminPeer::Pods {
                    namespaces: NamespaceMatch::Selector(sel),
                    ..
                },
            ) => self.pod_peer_why(ep, |p| ns_selects(sel, p)),
            (_, AdminPeer::Namespaces(m) | AdminPeer::Pods { namespaces: m, .. }) => {
                match ep.kind {
                    EndpointKind::Pod(p) if !self.engine.namespace_related(m, subject, p) => {
                        PeerWhy::NamespaceRelation
                    }
                    EndpointKind::Pod(_) => PeerWhy::PodLabels,
                    _ => PeerWhy::NotAPod,
                }
            }
            (
                _,
                AdminPeer::Nodes(_)
                | AdminPeer::Networks(_)
                | AdminPeer::DomainNames(_)
                | AdminPeer::Unsupported(_),
            ) => PeerWhy::Unsupported,
        })
    }
}

#[cfg(test)]
mod tests {
    use palisade_engine::{Engine, Options, PeerWhy, PortWhy};
    use palisade_model::Protocol;

    use crate::{Analysis, TierStep};

    const CLUSTER: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: x, labels: {team: x}}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x, labels: {app: a}}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: x, labels: {app: b}}
status: {podIP: 10.0.0.2}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b, namespace: x}
spec:
  podSelector: {matchLabels: {app: b}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: c}}}]
  - from: [{namespaceSelector: {matchLabels: {team: other}}}]
    ports: [{port: 80}]
  - from: [{ipBlock: {cidr: 10.0.0.0/24, except: [10.0.0.0/30]}}]
  - ports: [{protocol: UDP, port: 80}]
"#;

    #[test]
    fn each_rule_says_why_it_did_not_match() {
        let loaded = palisade_model::load_str(CLUSTER).unwrap();
        let e = Engine::new(loaded.cluster, Options::default());
        let a = e
            .endpoint_for_pod(e.pod_id("x", "a").unwrap(), None)
            .unwrap();
        let b = e
            .endpoint_for_pod(e.pod_id("x", "b").unwrap(), None)
            .unwrap();
        let x = Analysis::new(&e).explain(&palisade_engine::Flow {
            src: a,
            dst: b,
            protocol: Protocol::Tcp,
            port: 80,
        });
        assert!(!x.verdict.allowed);
        let misses = x
            .ingress
            .steps
            .iter()
            .find_map(|s| match s {
                TierStep::NetworkPolicyTier { misses, .. } => Some(misses.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(misses.len(), 1, "one isolating policy");
        let rules = &misses[0].rules;
        let whys: Vec<(u32, Vec<PortWhy>, Vec<PeerWhy>)> = rules
            .iter()
            .map(|r| {
                (
                    r.index,
                    r.ports.iter().map(|p| p.why).collect(),
                    r.peers.iter().map(|p| p.why.clone()).collect(),
                )
            })
            .collect();
        assert_eq!(
            whys,
            [
                (0, vec![], vec![PeerWhy::PodLabels]),
                (1, vec![], vec![PeerWhy::Namespace]),
                (
                    2,
                    vec![],
                    vec![PeerWhy::Excepted("10.0.0.0/30".parse().unwrap())]
                ),
                (3, vec![PortWhy::Protocol], vec![]),
            ],
            "{rules:?}"
        );
        let text = x.to_string();
        assert!(
            text.contains(
                "ingress rule 0: from podSelector {app=c} (the pod's labels do not match)"
            ),
            "{text}"
        );
        assert!(
            text.contains("ingress rule 3: ports UDP/80 (another protocol)"),
            "{text}"
        );
        let json = serde_json::to_value(&x).unwrap();
        let why = &json["walk"]["ingress"][1]["whyNot"][0]["rules"][2]["peers"][0];
        assert_eq!(why["reason"], "Excepted");
        assert_eq!(why["except"], "10.0.0.0/30");
    }
}

#[cfg(test)]
mod eval_agrees {
    //! Eval and why-not agree by construction (they call the predicates above); this checks
    //! it on random clusters: the rules eval matches are exactly those why-not finds no
    //! reason against.
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeSet;
    use std::net::IpAddr;

    use palisade_engine::{EndpointKind, Engine, Flow, Options};
    use palisade_gen::strategies::cluster;
    use palisade_model::{Cluster, Direction, Protocol};
    use proptest::prelude::*;
    use proptest::test_runner::RngSeed;

    use crate::Analysis;

    /// Every pod and node address plus outside ones inside and outside the strategies' CIDRs.
    fn addresses(c: &Cluster) -> Vec<IpAddr> {
        let mut ips: Vec<IpAddr> = c.pods.iter().flat_map(|p| p.ips.clone()).collect();
        ips.extend(c.nodes.iter().flat_map(|n| n.addresses.clone()));
        ips.extend(
            ["203.0.113.7", "10.0.5.5", "10.0.0.3", "10.0.1.200"]
                .iter()
                .map(|s| s.parse::<IpAddr>().unwrap()),
        );
        ips.sort();
        ips.dedup();
        ips
    }

    /// A rule: (0 NetworkPolicy / 1 admin, policy index, rule index).
    type RuleKey = (u8, u32, u32);

    /// For one flow and direction: (matched by eval, found no reason by why-not), as sets of
    /// (policy kind, policy, rule) over every NetworkPolicy and admin policy.
    fn both_sets(
        e: &Engine,
        flow: &Flow,
        dir: Direction,
    ) -> (BTreeSet<RuleKey>, BTreeSet<RuleKey>) {
        let (peer, subject) = match dir {
            Direction::Ingress => (&flow.src, flow.dst.kind),
            Direction::Egress => (&flow.dst, flow.src.kind),
        };
        let (mut matched, mut no_reason) = (BTreeSet::new(), BTreeSet::new());
        for i in 0..e.network_policies().len() as u32 {
            let rules = match dir {
                Direction::Ingress => &e.network_policies()[i as usize].ingress,
                Direction::Egress => &e.network_policies()[i as usize].egress,
            };
            let missed: BTreeSet<u32> = Analysis::new(e)
                .np_misses(i, dir, flow)
                .iter()
                .map(|m| m.index)
                .collect();
            for (r, rule) in rules.iter().enumerate() {
                let r = r as u32;
                if e.np_rule_matches(rule, peer, flow) {
                    matched.insert((0, i, r));
                }
                if !missed.contains(&r) {
                    no_reason.insert((0, i, r));
                }
            }
        }
        if let EndpointKind::Pod(pod) = subject {
            for i in 0..e.admin_policies().len() as u32 {
                let missed: BTreeSet<u32> = Analysis::new(e)
                    .admin_misses(i, pod, dir, flow)
                    .iter()
                    .map(|m| m.index)
                    .collect();
                let n = e.cluster().admin_policies[i as usize].rules(dir).len();
                for r in 0..n {
                    // A fail-closed Deny or Pass rule is taken as "deny all" without being
                    // matched; it always decides, so why-not is never asked about it.
                    match e.admin_rule_match(i, r, pod, dir, flow) {
                        Some(m) if m.fail_closed => continue,
                        Some(_) => {
                            matched.insert((1, i, r as u32));
                        }
                        None => {}
                    }
                    if !missed.contains(&(r as u32)) {
                        no_reason.insert((1, i, r as u32));
                    }
                }
            }
        }
        (matched, no_reason)
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 128,
            rng_seed: RngSeed::Fixed(0x5eed_0002),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn eval_matches_exactly_the_rules_why_not_finds_no_reason_against(c in cluster()) {
            let e = Engine::new(c.clone(), Options::default());
            let ips = addresses(&c);
            for &src in &ips {
                for &dst in ips.iter().filter(|d| d.is_ipv4() == src.is_ipv4()) {
                    for protocol in Protocol::ALL {
                        for port in [79, 80, 81] {
                            let flow = Flow {
                                src: e.endpoint_for_ip(src),
                                dst: e.endpoint_for_ip(dst),
                                protocol,
                                port,
                            };
                            for dir in [Direction::Ingress, Direction::Egress] {
                                let (matched, no_reason) = both_sets(&e, &flow, dir);
                                prop_assert_eq!(matched, no_reason, "{:?} {:?}", flow, dir);
                            }
                        }
                    }
                }
            }
        }
    }
}
