//! Whether one part of a rule — a port entry, a peer — takes a flow, and if not, why. The
//! one place these predicates are written: [`Engine::evaluate`] (a rule matches when every
//! part takes the flow), the "why not" of `explain` (the parts that do not, with the reason)
//! and the matrix rows (per probe) all ask here, so they cannot disagree.

use std::fmt;

use ipnet::IpNet;
use palisade_model::{AdminPort, NetworkPolicyPort, PortSpec, Protocol};

use crate::eval::{Endpoint, EndpointKind, Flow};
use crate::state::{AdminPeerC, Engine, NpPeer, NpRule, PodId};

/// What a port entry says about a protocol and port number before any pod is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortEntry<'a> {
    /// Decided by the numbers alone: `None` when the entry takes them, else why not.
    Numeric(Option<PortWhy>),
    /// A named port (of `protocol`, if the entry gives one): it takes the flow when the
    /// destination pod declares a container port of that name with the flow's number.
    Named {
        /// The port's name.
        name: &'a str,
        /// The protocol the entry requires of the container port.
        protocol: Option<Protocol>,
    },
}

/// A NetworkPolicy port entry against `protocol`/`port`: the protocol first, then the port.
#[inline]
pub fn np_port_entry(p: &NetworkPolicyPort, protocol: Protocol, port: u16) -> PortEntry<'_> {
    if p.protocol != protocol {
        return PortEntry::Numeric(Some(PortWhy::Protocol));
    }
    match &p.port {
        PortSpec::Any => PortEntry::Numeric(None),
        PortSpec::Range(r) => PortEntry::Numeric((!r.contains(port)).then_some(PortWhy::Port)),
        PortSpec::Named(name) => PortEntry::Named {
            name,
            protocol: Some(p.protocol),
        },
    }
}

/// An admin port entry against `protocol`/`port` (a named one leaves the protocol to the
/// container port).
#[inline]
pub fn admin_port_entry(p: &AdminPort, protocol: Protocol, port: u16) -> PortEntry<'_> {
    match p {
        AdminPort::Ports { protocol: want, .. } if *want != protocol => {
            PortEntry::Numeric(Some(PortWhy::Protocol))
        }
        AdminPort::Ports { range, .. } => PortEntry::Numeric(
            range
                .is_some_and(|r| !r.contains(port))
                .then_some(PortWhy::Port),
        ),
        AdminPort::Named(name) => PortEntry::Named {
            name,
            protocol: None,
        },
    }
}

/// Whether a rule's port list takes a flow, given each entry's reason (`None`: takes it).
/// An absent list takes everything; a present, empty one nothing.
#[inline]
pub fn ports_take<P>(ports: Option<&[P]>, why: impl Fn(&P) -> Option<PortWhy>) -> bool {
    ports.is_none_or(|list| list.iter().any(|p| why(p).is_none()))
}

impl Engine {
    /// Why a NetworkPolicy port entry does not take the flow, or `None` when it does.
    #[inline]
    pub fn np_port_why(&self, p: &NetworkPolicyPort, flow: &Flow) -> Option<PortWhy> {
        self.port_why(np_port_entry(p, flow.protocol, flow.port), flow)
    }

    /// Why an admin port entry does not take the flow, or `None` when it does.
    #[inline]
    pub fn admin_port_why(&self, p: &AdminPort, flow: &Flow) -> Option<PortWhy> {
        self.port_why(admin_port_entry(p, flow.protocol, flow.port), flow)
    }

    /// A port entry's verdict on the flow, resolving a named port against its destination.
    #[inline]
    fn port_why(&self, entry: PortEntry<'_>, flow: &Flow) -> Option<PortWhy> {
        match entry {
            PortEntry::Numeric(why) => why,
            PortEntry::Named { .. } if !matches!(flow.dst.kind, EndpointKind::Pod(_)) => {
                Some(PortWhy::NamedPortNeedsPod)
            }
            PortEntry::Named { name, protocol } => {
                (!self.named_port_matches(name, protocol, flow)).then_some(PortWhy::NamedPortAbsent)
            }
        }
    }

    /// Whether the destination is a pod with a container port `name` (of `protocol`, if given)
    /// that is the flow's protocol and port.
    ///
    /// "In an ingress rule they resolve against the destination (the selected) pod's container
    /// ports; in an egress rule against the destination peer pod. Name and protocol must both match."
    #[inline]
    pub fn named_port_matches(&self, name: &str, protocol: Option<Protocol>, flow: &Flow) -> bool {
        let EndpointKind::Pod(dst) = flow.dst.kind else {
            return false;
        };
        self.cluster.pods[dst].ports.iter().any(|cp| {
            cp.name.as_deref() == Some(name)
                && protocol.is_none_or(|p| p == cp.protocol)
                && cp.protocol == flow.protocol
                && cp.port.get() == flow.port
        })
    }

    /// Whether a NetworkPolicy rule matches: its ports take the flow and a peer holds `peer`.
    #[inline]
    pub fn np_rule_matches(&self, rule: &NpRule, peer: &Endpoint, flow: &Flow) -> bool {
        ports_take(rule.ports.as_deref(), |p| self.np_port_why(p, flow))
            && Self::np_peers_match(rule, peer)
    }

    /// Whether a NetworkPolicy rule's peers (not its ports) cover `peer`.
    #[inline]
    pub fn np_peers_match(rule: &NpRule, peer: &Endpoint) -> bool {
        rule.peers
            .as_ref()
            .is_none_or(|peers| peers.iter().any(|p| np_peer_holds(p, peer)))
    }

    /// Whether a compiled admin peer holds `ep`, for the subject pod `subject`.
    #[inline]
    pub fn admin_peer_matches(&self, peer: &AdminPeerC, subject: PodId, ep: &Endpoint) -> bool {
        match peer {
            AdminPeerC::Pods(set) => matches!(ep.kind, EndpointKind::Pod(i) if set.contains(i)),
            AdminPeerC::Related { namespaces, pods } => match ep.kind {
                EndpointKind::Pod(i) => {
                    self.namespace_related(namespaces, subject, i)
                        && pods.matches(&self.cluster.pods[i].labels)
                }
                _ => false,
            },
            AdminPeerC::Nodes(sel) => {
                matches!(ep.kind, EndpointKind::Host(Some(n)) if sel.matches(&self.cluster.nodes[n].labels))
            }
            AdminPeerC::Networks(nets) => nets.iter().any(|n| n.contains(&ep.ip)),
            AdminPeerC::Unsupported => false,
        }
    }
}

/// Whether a compiled NetworkPolicy peer holds `ep`.
#[inline]
pub fn np_peer_holds(peer: &NpPeer, ep: &Endpoint) -> bool {
    match peer {
        NpPeer::Pods(set) => matches!(ep.kind, EndpointKind::Pod(i) if set.contains(i)),
        NpPeer::IpBlock(b) => b.contains(&ep.ip),
    }
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
