//! "Why not": for a policy none of whose rules matched a flow, each rule and what about it
//! failed to match — the port or protocol, and each peer with the reason it does not cover
//! the other end (its namespace or labels, the CIDR, the except that excludes the address).

use std::fmt;

use ipnet::IpNet;
use palisade_model::{
    AdminPeer, AdminPort, Direction, NamespaceMatch, NetworkPolicyPeer, PortSpec, Selector,
};

use crate::eval::{Endpoint, EndpointKind, Flow};
use crate::rule_parts::np_peer_holds;
use crate::state::{AdminPeerC, Engine, PodId};

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

/// Why a port entry did not match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortWhy {
    /// The flow's protocol differs.
    Protocol,
    /// The flow's port is outside the entry's port or range.
    Port,
    /// The destination pod declares no container port of that name (and protocol) with the
    /// flow's number.
    NamedPortAbsent,
    /// A named port only matches a destination that is a pod.
    NamedPortNeedsPod,
    /// A present, empty list of ports (the original v1beta1 model: it matches nothing).
    EmptyList,
}

/// A peer of a rule and why the other end of the flow is not in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerMiss {
    /// The peer as written: `podSelector {app=b}`, `ipBlock 10.0.0.0/8 except 10.1.0.0/16`, ...
    pub peer: String,
    /// Why it did not match.
    pub why: PeerWhy,
}

/// Why a peer did not match.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PeerWhy {
    /// The peer selects pods, and the other end is not a pod (a node or an outside address).
    NotAPod,
    /// The other end's namespace is not one the peer selects.
    Namespace,
    /// The namespace is selected, but the pod's labels do not match the pod selector.
    PodLabels,
    /// The namespace relation (`sameLabels`, `notSameLabels`, `related`) does not hold.
    NamespaceRelation,
    /// The address is outside the CIDR(s).
    OutsideCidr,
    /// The address is in the CIDR but this `except` removes it.
    Excepted(IpNet),
    /// The peer selects nodes, and the other end is not a node's address.
    NotANode,
    /// The node's labels do not match the node selector.
    NodeLabels,
    /// The peer has no field Palisade can evaluate; in an Allow rule it matches nothing.
    Unsupported,
    /// A `domainNames` peer, and no name its patterns match resolves to the address in
    /// the DNS map.
    NoDomainAnswer,
    /// A `domainNames` peer with no DNS map to match it with: it matches nothing.
    NoDnsMap,
    /// A present, empty list of peers (the original v1beta1 model: it matches nothing).
    EmptyList,
    /// The other end is a workload without an address yet: whether it will be inside the
    /// CIDR is not known (decided as outside).
    AddressUnknown,
}

impl fmt::Display for PortWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PortWhy::Protocol => "another protocol",
            PortWhy::Port => "another port",
            PortWhy::NamedPortAbsent => {
                "the destination pod has no container port of that name with this number"
            }
            PortWhy::NamedPortNeedsPod => "a named port only matches a destination pod",
            PortWhy::EmptyList => "an empty list matches nothing in this API version",
        })
    }
}

impl fmt::Display for PeerWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerWhy::NotAPod => f.write_str("it selects pods, and the other end is not a pod"),
            PeerWhy::Namespace => f.write_str("the namespace is not selected"),
            PeerWhy::PodLabels => f.write_str("the pod's labels do not match"),
            PeerWhy::NamespaceRelation => f.write_str("the namespace relation does not hold"),
            PeerWhy::OutsideCidr => f.write_str("the address is outside it"),
            PeerWhy::Excepted(net) => write!(f, "the address is excluded by except {net}"),
            PeerWhy::NotANode => f.write_str("it selects nodes, and the other end is not a node"),
            PeerWhy::NodeLabels => f.write_str("the node's labels do not match"),
            PeerWhy::Unsupported => f.write_str("Palisade cannot evaluate it (fails closed)"),
            PeerWhy::NoDomainAnswer => {
                f.write_str("no name it matches resolves to the address in the DNS map")
            }
            PeerWhy::NoDnsMap => {
                f.write_str("no DNS map (--dns) to match names with: it matches nothing")
            }
            PeerWhy::EmptyList => f.write_str("an empty list matches nothing in this API version"),
            PeerWhy::AddressUnknown => f.write_str(
                "the workload has no address yet: taken as outside, depends on the address",
            ),
        }
    }
}

impl PeerWhy {
    /// The name JSON gives the reason.
    pub fn as_str(&self) -> &'static str {
        match self {
            PeerWhy::NotAPod => "NotAPod",
            PeerWhy::Namespace => "NamespaceNotSelected",
            PeerWhy::PodLabels => "PodLabelsNotSelected",
            PeerWhy::NamespaceRelation => "NamespaceRelation",
            PeerWhy::OutsideCidr => "OutsideCidr",
            PeerWhy::Excepted(_) => "Excepted",
            PeerWhy::NotANode => "NotANode",
            PeerWhy::NodeLabels => "NodeLabelsNotSelected",
            PeerWhy::Unsupported => "Unsupported",
            PeerWhy::NoDomainAnswer => "NoDomainAnswer",
            PeerWhy::NoDnsMap => "NoDnsMap",
            PeerWhy::EmptyList => "EmptyList",
            PeerWhy::AddressUnknown => "AddressUnknown",
        }
    }
}

impl PortWhy {
    /// The name JSON gives the reason.
    pub fn as_str(self) -> &'static str {
        match self {
            PortWhy::Protocol => "Protocol",
            PortWhy::Port => "Port",
            PortWhy::NamedPortAbsent => "NamedPortAbsent",
            PortWhy::NamedPortNeedsPod => "NamedPortNeedsPod",
            PortWhy::EmptyList => "EmptyList",
        }
    }
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

impl Engine {
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
        let rules = self.nps[np as usize].rules(dir);
        let written = self.cluster.network_policies[np as usize].rules(dir);
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

    /// [`Engine::np_misses`] as reasons only.
    pub fn np_whys(&self, np: u32, dir: Direction, flow: &Flow) -> Vec<RuleWhy> {
        let policy = &self.cluster.network_policies[np as usize];
        let peer_ep = match dir {
            Direction::Ingress => &flow.src,
            Direction::Egress => &flow.dst,
        };
        let mut out = Vec::new();
        for (index, (rule, written)) in self.nps[np as usize]
            .rules(dir)
            .iter()
            .zip(policy.rules(dir))
            .enumerate()
        {
            let mut ports = Vec::new();
            if let Some(list) = &rule.ports {
                if list.is_empty() {
                    ports.push(PortWhy::EmptyList);
                } else if let Some(whys) = list.iter().map(|p| self.np_port_why(p, flow)).collect()
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
        compiled: &crate::state::NpPeer,
        written: &NetworkPolicyPeer,
        ep: &Endpoint,
    ) -> Option<PeerWhy> {
        match (compiled, written) {
            _ if np_peer_holds(compiled, ep) => None,
            (crate::state::NpPeer::Pods(_), NetworkPolicyPeer::Pods { namespaces, .. }) => {
                let ns_ok = |p: PodId| match namespaces {
                    None => self.cluster.pods[p].namespace == policy.namespace,
                    Some(sel) => self
                        .cluster
                        .namespaces
                        .get(self.pod_ns[p])
                        .is_some_and(|n| sel.matches(&n.labels)),
                };
                Some(self.pod_peer_why(ep, ns_ok))
            }
            (_, NetworkPolicyPeer::IpBlock(b)) => {
                if crate::addressless::addressless(ep) {
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
        let rules = self.cluster.admin_policies[admin as usize].rules(dir);
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

    /// [`Engine::admin_misses`] as reasons only.
    pub fn admin_whys(
        &self,
        admin: u32,
        subject: PodId,
        dir: Direction,
        flow: &Flow,
    ) -> Vec<RuleWhy> {
        let policy = &self.cluster.admin_policies[admin as usize];
        let compiled = self.admins[admin as usize].rules(dir);
        let peer_ep = match dir {
            Direction::Ingress => &flow.src,
            Direction::Egress => &flow.dst,
        };
        let mut out = Vec::new();
        for (index, (rule, c)) in policy.rules(dir).iter().zip(compiled).enumerate() {
            let ports: Vec<PortWhy> = rule
                .ports
                .as_ref()
                .and_then(|list| list.iter().map(|p| self.admin_port_why(p, flow)).collect())
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
        if self.admin_peer_matches(compiled, subject, ep) {
            return None;
        }
        let ns_selects = |sel: &Selector, p: PodId| {
            self.cluster
                .namespaces
                .get(self.pod_ns[p])
                .is_some_and(|n| sel.matches(&n.labels))
        };
        Some(match (compiled, written) {
            (AdminPeerC::Unsupported, AdminPeer::DomainNames(_)) => PeerWhy::NoDnsMap,
            (AdminPeerC::Unsupported, _) => PeerWhy::Unsupported,
            (AdminPeerC::Networks(_), _) if crate::addressless::addressless(ep) => {
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
                    EndpointKind::Pod(p) if !self.namespace_related(m, subject, p) => {
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
    use crate::{Engine, Options, PeerWhy, PortWhy, TierStep};
    use palisade_model::Protocol;

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
        let x = e.explain(&crate::Flow {
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
