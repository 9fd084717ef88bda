//! The probe planner: which (protocol, port) pairs a question must ask so that no port the
//! policies treat differently goes unasked. Every analysis takes its ports from here: the
//! matrix its default probes, lint and coverage their representative probes, explain and
//! diff the runs of ports ([`Analysis::port_segments`]).

use std::collections::BTreeSet;

use palisade_engine::{Endpoint, EndpointKind, Flow};
use palisade_model::{AdminPort, Cluster, PortRange, PortSpec, Protocol};

use crate::Analysis;

/// A protocol and destination port to probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Probe {
    /// Protocol.
    pub protocol: Protocol,
    /// Destination port.
    pub port: u16,
}

impl Probe {
    /// The flow from `src` to `dst` on this probe.
    #[inline]
    pub fn flow(self, src: Endpoint, dst: Endpoint) -> Flow {
        Flow {
            src,
            dst,
            protocol: self.protocol,
            port: self.port,
        }
    }
}

/// Every numeric port range a policy's rule names (NetworkPolicy and admin), with its
/// protocol. Named ports are not here: they resolve against the destination's container
/// ports.
fn policy_port_ranges(cluster: &Cluster) -> impl Iterator<Item = (Protocol, PortRange)> + '_ {
    let nps = cluster.network_policies.iter().flat_map(|np| {
        (np.ingress.iter().chain(&np.egress))
            .flat_map(|r| r.ports.iter().flatten())
            .filter_map(|p| match p.port {
                PortSpec::Range(range) => Some((p.protocol, range)),
                _ => None,
            })
    });
    let admins = cluster.admin_policies.iter().flat_map(|a| {
        (a.ingress.iter().chain(&a.egress))
            .flat_map(|r| r.ports.iter().flatten())
            .filter_map(|p| match *p {
                AdminPort::Ports {
                    protocol,
                    range: Some(range),
                } => Some((protocol, range)),
                _ => None,
            })
    });
    nps.chain(admins)
}

impl Analysis<'_> {
    /// The distinct (protocol, port) of every pod's container ports, sorted by port then
    /// protocol: the matrix's probes when none are asked for.
    pub fn container_probes(&self) -> Vec<Probe> {
        let set: BTreeSet<(u16, Protocol)> = (self.engine.cluster().pods.iter())
            .flat_map(|p| p.ports.iter().map(|cp| (cp.port.get(), cp.protocol)))
            .collect();
        set.into_iter()
            .map(|(port, protocol)| Probe { protocol, port })
            .collect()
    }

    /// Per protocol, port 1 and the first port of every interval the policies' port ranges
    /// and the container ports start or end: one probe per run of ports that every rule
    /// treats alike for every destination.
    pub(crate) fn representative_probes(&self) -> Vec<Probe> {
        let mut cuts: BTreeSet<(Protocol, u16)> = Protocol::ALL.iter().map(|&p| (p, 1)).collect();
        let mut cut = |p: Protocol, start: u16, end: u16| {
            cuts.insert((p, start));
            if let Some(next) = end.checked_add(1) {
                cuts.insert((p, next));
            }
        };
        for pod in &self.engine.cluster().pods {
            for cp in &pod.ports {
                cut(cp.protocol, cp.port.get(), cp.port.get());
            }
        }
        for (protocol, range) in policy_port_ranges(self.engine.cluster()) {
            cut(protocol, range.start.get(), range.end.get());
        }
        cuts.into_iter()
            .map(|(protocol, port)| Probe { protocol, port })
            .collect()
    }

    /// The ports where a port range some policy names starts, or just after one ends, of
    /// any protocol.
    pub(crate) fn policy_port_cuts(&self) -> BTreeSet<u32> {
        policy_port_ranges(self.engine.cluster())
            .flat_map(|(_, r)| [u32::from(r.start.get()), u32::from(r.end.get()) + 1])
            .collect()
    }

    /// The first ports of the runs within which no rule's port matching can change for a
    /// connection to `dst`: `policy_cuts` ([`Analysis::policy_port_cuts`]), and the
    /// destination pod's container ports (named ports resolve against them), clipped to
    /// `within`.
    pub(crate) fn port_cuts(
        &self,
        dst: &Endpoint,
        within: PortRange,
        policy_cuts: &BTreeSet<u32>,
    ) -> BTreeSet<u32> {
        let (lo, hi) = (u32::from(within.start.get()), u32::from(within.end.get()));
        let mut cuts: BTreeSet<u32> = policy_cuts.range(lo..=hi).copied().collect();
        cuts.insert(lo);
        if let EndpointKind::Pod(pod) = dst.kind {
            for cp in &self.engine.cluster().pods[pod].ports {
                for c in [u32::from(cp.port.get()), u32::from(cp.port.get()) + 1] {
                    if lo <= c && c <= hi {
                        cuts.insert(c);
                    }
                }
            }
        }
        cuts
    }
}
