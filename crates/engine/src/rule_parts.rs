//! Whether one part of a rule — a port entry, a peer — takes a flow, and if not, why. The
//! one place these predicates are written: [`Engine::evaluate`] (a rule matches when every
//! part takes the flow), the "why not" of `explain` (the parts that do not, with the reason)
//! and the matrix rows (per probe) all ask here, so they cannot disagree.

use palisade_model::{AdminPort, NetworkPolicyPort, PortSpec, Protocol};

use crate::eval::{Endpoint, EndpointKind, Flow};
use crate::state::{AdminPeerC, Engine, NpPeer, NpRule, PodId};
use crate::whynot::PortWhy;

/// What a port entry says about a protocol and port number before any pod is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PortEntry<'a> {
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
pub(crate) fn np_port_entry(p: &NetworkPolicyPort, protocol: Protocol, port: u16) -> PortEntry<'_> {
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
pub(crate) fn admin_port_entry(p: &AdminPort, protocol: Protocol, port: u16) -> PortEntry<'_> {
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
pub(crate) fn ports_take<P>(ports: Option<&[P]>, why: impl Fn(&P) -> Option<PortWhy>) -> bool {
    ports.is_none_or(|list| list.iter().any(|p| why(p).is_none()))
}

impl Engine {
    /// Why a NetworkPolicy port entry does not take the flow, or `None` when it does.
    pub(crate) fn np_port_why(&self, p: &NetworkPolicyPort, flow: &Flow) -> Option<PortWhy> {
        self.port_why(np_port_entry(p, flow.protocol, flow.port), flow)
    }

    /// Why an admin port entry does not take the flow, or `None` when it does.
    pub(crate) fn admin_port_why(&self, p: &AdminPort, flow: &Flow) -> Option<PortWhy> {
        self.port_why(admin_port_entry(p, flow.protocol, flow.port), flow)
    }

    /// A port entry's verdict on the flow, resolving a named port against its destination.
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
    pub(crate) fn named_port_matches(
        &self,
        name: &str,
        protocol: Option<Protocol>,
        flow: &Flow,
    ) -> bool {
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
    pub(crate) fn np_rule_matches(&self, rule: &NpRule, peer: &Endpoint, flow: &Flow) -> bool {
        ports_take(rule.ports.as_deref(), |p| self.np_port_why(p, flow))
            && Self::np_peers_match(rule, peer)
    }

    /// Whether a NetworkPolicy rule's peers (not its ports) cover `peer`.
    pub(crate) fn np_peers_match(rule: &NpRule, peer: &Endpoint) -> bool {
        rule.peers
            .as_ref()
            .is_none_or(|peers| peers.iter().any(|p| np_peer_holds(p, peer)))
    }

    /// Whether a compiled admin peer holds `ep`, for the subject pod `subject`.
    pub(crate) fn admin_peer_matches(
        &self,
        peer: &AdminPeerC,
        subject: PodId,
        ep: &Endpoint,
    ) -> bool {
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
pub(crate) fn np_peer_holds(peer: &NpPeer, ep: &Endpoint) -> bool {
    match peer {
        NpPeer::Pods(set) => matches!(ep.kind, EndpointKind::Pod(i) if set.contains(i)),
        NpPeer::IpBlock(b) => b.contains(&ep.ip),
    }
}

#[cfg(test)]
mod tests {
    //! Eval and why-not agree by construction (they call the predicates above); this checks
    //! it on random clusters: the rules eval matches are exactly those why-not finds no
    //! reason against.
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeSet;
    use std::net::IpAddr;

    use palisade_gen::strategies::cluster;
    use palisade_model::{Cluster, Direction, Protocol};
    use proptest::prelude::*;
    use proptest::test_runner::RngSeed;

    use crate::eval::{EndpointKind, Flow};
    use crate::{Engine, Options};

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
        for i in 0..e.nps.len() as u32 {
            let rules = match dir {
                Direction::Ingress => &e.nps[i as usize].ingress,
                Direction::Egress => &e.nps[i as usize].egress,
            };
            let missed: BTreeSet<u32> = e.np_misses(i, dir, flow).iter().map(|m| m.index).collect();
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
            for i in 0..e.admins.len() as u32 {
                let missed: BTreeSet<u32> = e
                    .admin_misses(i, pod, dir, flow)
                    .iter()
                    .map(|m| m.index)
                    .collect();
                let n = e.cluster.admin_policies[i as usize].rules(dir).len();
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
