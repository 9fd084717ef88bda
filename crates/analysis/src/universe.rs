//! A finite set of flows that stands for every flow the policies can tell apart: one pod
//! per class of pods no policy distinguishes, every node, one external address per region
//! the policies' CIDRs cut the address space into, and one port per interval the policies'
//! port ranges and the pods' container ports cut each protocol into. A property that holds
//! on these flows holds on every flow, so lint and coverage answer exactly, from the
//! engine's own decisions.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;
use palisade_engine::{Endpoint, EndpointKind, PodId};
use palisade_model::{AdminPeer, Direction, NetworkPolicyPeer};

use crate::Analysis;
use crate::probes::Probe;

/// Representative endpoints and probes (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct Universe {
    /// Pods with an address, grouped into classes no policy tells apart.
    pub classes: Vec<Vec<PodId>>,
    /// One endpoint per pod class and address family (two for a class with several pods,
    /// so a pod meets a distinct pod of its own class), per node and family, and per
    /// external region.
    pub peers: Vec<Endpoint>,
    /// One probe per port interval of each protocol.
    pub probes: Vec<Probe>,
}

impl Universe {
    /// The representative of each class.
    pub fn representatives(&self) -> impl Iterator<Item = PodId> + '_ {
        self.classes.iter().map(|c| c[0])
    }
}

impl<'e> Analysis<'e> {
    /// The representative flows of this cluster and its policies.
    pub(crate) fn universe(&self) -> Universe {
        let classes = self.classes_by_node();
        // Every address family of every peer: a rule may cover a dual-stack peer in one
        // family only.
        let mut peers = Vec::new();
        for members in &classes {
            for &p in members.iter().take(2) {
                for v6 in [false, true] {
                    if let Some(e) = self.engine.endpoint_for_pod(p, Some(v6))
                        && e.ip.is_ipv6() == v6
                    {
                        peers.push(e);
                    }
                }
            }
        }
        for (n, node) in self.engine.cluster().nodes.iter().enumerate() {
            for v6 in [false, true] {
                if let Some(ip) = node.addresses.iter().find(|ip| {
                    ip.is_ipv6() == v6
                        && matches!(self.engine.endpoint_for_ip(**ip).kind, EndpointKind::Host(Some(k)) if k == n)
                }) {
                    peers.push(self.engine.endpoint_for_ip(*ip));
                }
            }
        }
        peers.extend(
            self.external_representatives()
                .into_iter()
                .map(|ip| Endpoint {
                    kind: EndpointKind::External,
                    ip,
                }),
        );
        Universe {
            classes,
            peers,
            probes: self.representative_probes(),
        }
    }

    /// The (source, destination) pairs in which `pod` is the subject in `dir` (the source
    /// for egress, the destination for ingress), towards every representative peer of the
    /// pod's address family for which `keep` holds; pairs no policy decides (the pod
    /// itself, node-local traffic) are left out. Each pair is probed on every one of the
    /// universe's probes ([`Probe::flow`]); callers loop over those themselves, which
    /// compiles to a far tighter loop than a flattened iterator of flows.
    pub(crate) fn side_pairs<'u>(
        &self,
        universe: &'u Universe,
        pod: PodId,
        dir: Direction,
        keep: impl Fn(&Endpoint) -> bool + 'u,
    ) -> impl Iterator<Item = (Endpoint, Endpoint)> + 'u
    where
        'e: 'u,
    {
        let engine = self.engine;
        universe
            .peers
            .iter()
            .filter(move |peer| !matches!(peer.kind, EndpointKind::Pod(q) if q == pod))
            .filter(move |peer| keep(peer))
            .filter_map(move |peer| {
                let me = engine.endpoint_for_pod(pod, Some(peer.ip.is_ipv6()))?;
                let node_local = dir == Direction::Ingress
                    && engine.options().allow_node_local
                    && matches!(peer.kind, EndpointKind::Host(Some(n)) if engine.pod_node(pod) == Some(n));
                (!node_local && me.ip.is_ipv6() == peer.ip.is_ipv6()).then_some(match dir {
                    Direction::Egress => (me, *peer),
                    Direction::Ingress => (*peer, me),
                })
            })
    }

    /// Every CIDR a policy names (ipBlock cidr and excepts, admin networks).
    pub(crate) fn named_cidrs(&self) -> BTreeSet<IpNet> {
        let mut out = BTreeSet::new();
        for np in &self.engine.cluster().network_policies {
            for r in np.ingress.iter().chain(&np.egress) {
                for p in r.peers.iter().flatten() {
                    if let NetworkPolicyPeer::IpBlock(b) = p {
                        out.insert(b.cidr);
                        out.extend(b.except.iter().copied());
                    }
                }
            }
        }
        for a in &self.engine.cluster().admin_policies {
            for r in a.ingress.iter().chain(&a.egress) {
                for p in &r.peers {
                    if let AdminPeer::Networks(n) = p {
                        out.extend(n.iter().copied());
                    }
                }
            }
        }
        out
    }

    /// One address outside the cluster in every region the named CIDRs cut the address
    /// space into. CIDRs nest or are disjoint, so every region starts at the start of the
    /// space, at the first address of a CIDR, or just after the last one of a CIDR.
    pub(crate) fn external_representatives(&self) -> Vec<IpAddr> {
        let cidrs = self.named_cidrs();
        let v6 = cidrs.iter().any(|c| matches!(c, IpNet::V6(_)))
            || self
                .engine
                .cluster()
                .pods
                .iter()
                .flat_map(|p| &p.ips)
                .any(IpAddr::is_ipv6);
        let mut starts: BTreeSet<IpAddr> = BTreeSet::new();
        starts.insert(IpAddr::from([203, 0, 113, 1]));
        starts.insert(IpAddr::from([0u8; 4]));
        if v6 {
            starts.insert(IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]));
            starts.insert(IpAddr::from([0u16; 8]));
        }
        for c in &cidrs {
            starts.insert(c.network());
            if let Some(next) = successor(c.broadcast()) {
                starts.insert(next);
            }
        }
        let mut out = BTreeSet::new();
        for start in starts {
            // Step over addresses the cluster owns; a region this leaves is one with no
            // address outside the cluster in its first few.
            let mut ip = Some(start);
            for _ in 0..64 {
                let Some(a) = ip else { break };
                if self.engine.address_owner(&a).is_some() {
                    ip = successor(a);
                    continue;
                }
                out.insert(a);
                break;
            }
        }
        out.into_iter().collect()
    }
}

/// The next address, if any.
pub(crate) fn successor(ip: IpAddr) -> Option<IpAddr> {
    match ip {
        IpAddr::V4(a) => u32::from(a)
            .checked_add(1)
            .map(|n| IpAddr::from(n.to_be_bytes())),
        IpAddr::V6(a) => u128::from(a)
            .checked_add(1)
            .map(|n| IpAddr::from(n.to_be_bytes())),
    }
}

#[cfg(test)]
mod tests {
    use palisade_engine::{Engine, Options};
    use palisade_model::Protocol;

    use super::*;

    #[test]
    fn every_cidr_region_has_an_external_representative() {
        let loaded = palisade_model::load_str(
            r#"
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x}
status: {podIP: 10.0.0.0}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: p, namespace: x}
spec:
  podSelector: {}
  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}}], ports: [{port: 80, endPort: 90}]}]
"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let e = Engine::new(loaded.cluster, Options::default());
        let reps = Analysis::new(&e).external_representatives();
        let inside = |c: &str| {
            let c: IpNet = c.parse().unwrap_or_else(|e| panic!("{e}"));
            reps.iter().any(|ip| c.contains(ip))
        };
        assert!(inside("10.1.0.0/16"), "the except: {reps:?}");
        assert!(
            reps.iter().any(
                |ip| "10.0.0.0/8".parse::<IpNet>().is_ok_and(|c| c.contains(ip))
                    && !"10.1.0.0/16".parse::<IpNet>().is_ok_and(|c| c.contains(ip))
            ),
            "the cidr minus its except: {reps:?}"
        );
        assert!(
            !reps.contains(&"10.0.0.0".parse().unwrap_or_else(|e| panic!("{e}"))),
            "a pod's address is not external"
        );
        assert!(
            reps.iter()
                .any(|ip| !"10.0.0.0/8".parse::<IpNet>().is_ok_and(|c| c.contains(ip))),
            "outside every cidr: {reps:?}"
        );
        let ports: Vec<u16> = Analysis::new(&e)
            .representative_probes()
            .iter()
            .filter(|p| p.protocol == Protocol::Tcp)
            .map(|p| p.port)
            .collect();
        assert_eq!(ports, [1, 80, 91], "intervals [1,80) [80,90] [91,65535]");
    }
}
