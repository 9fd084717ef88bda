//! The connectivity matrix: every pod with an address to every other, for a set of probes.

use std::collections::BTreeSet;

use palisade_model::Protocol;

use crate::eval::{Endpoint, Flow};
use crate::state::{Engine, PodId};

/// A protocol and destination port to probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Probe {
    /// Protocol.
    pub protocol: Protocol,
    /// Destination port.
    pub port: u16,
}

/// The verdicts for every (probe, source, destination).
#[derive(Debug, Clone)]
pub struct Matrix {
    /// Rows and columns: pods with an address, in namespace/name order.
    pub pods: Vec<PodId>,
    /// Probes, in the order given.
    pub probes: Vec<Probe>,
    allowed: Vec<bool>,
}

impl Matrix {
    /// Whether `pods[from]` reaches `pods[to]` on `probes[probe]`.
    pub fn allowed(&self, probe: usize, from: usize, to: usize) -> bool {
        let n = self.pods.len();
        self.allowed[(probe * n + from) * n + to]
    }
}

impl Engine {
    /// The distinct (protocol, port) of every pod's container ports, sorted by port then protocol.
    pub fn container_probes(&self) -> Vec<Probe> {
        let set: BTreeSet<(u16, Protocol)> = self
            .cluster
            .pods
            .iter()
            .flat_map(|p| p.ports.iter().map(|cp| (cp.port.get(), cp.protocol)))
            .collect();
        set.into_iter()
            .map(|(port, protocol)| Probe { protocol, port })
            .collect()
    }

    /// Pods that have an address (host-network pods through their node), with their endpoint.
    pub fn addressable_pods(&self) -> Vec<(PodId, Endpoint)> {
        (0..self.cluster.pods.len())
            .filter_map(|p| self.endpoint_for_pod(p, None).map(|e| (p, e)))
            .collect()
    }

    /// The flow between two pods: the source's primary address, and the destination's
    /// address of the same family.
    pub fn pod_flow(&self, from: PodId, to: PodId, probe: Probe) -> Option<Flow> {
        let src = self.endpoint_for_pod(from, None)?;
        let dst = self.endpoint_for_pod(to, Some(src.ip.is_ipv6()))?;
        Some(Flow {
            src,
            dst,
            protocol: probe.protocol,
            port: probe.port,
        })
    }

    /// Evaluates every probe between every pair of addressable pods.
    pub fn matrix(&self, probes: &[Probe]) -> Matrix {
        let pods: Vec<PodId> = self
            .addressable_pods()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let n = pods.len();
        let mut allowed = vec![false; probes.len() * n * n];
        for (pi, probe) in probes.iter().enumerate() {
            for (fi, &from) in pods.iter().enumerate() {
                for (ti, &to) in pods.iter().enumerate() {
                    let ok = self
                        .pod_flow(from, to, *probe)
                        .is_some_and(|f| self.evaluate(&f).allowed);
                    allowed[(pi * n + fi) * n + ti] = ok;
                }
            }
        }
        Matrix {
            pods,
            probes: probes.to_vec(),
            allowed,
        }
    }
}
