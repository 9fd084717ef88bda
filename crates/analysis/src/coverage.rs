//! Coverage: for every pod and direction, which tiers and policies apply to it; the pods
//! and namespaces no policy covers; and the exposure view — which pods accept connections
//! from outside the cluster, on which ports.
//!
//! Exposure is decided on representative flows: one external address per region the
//! policies' CIDRs cut the address space into, one port per interval their port ranges
//! and the container ports cut each protocol into; so the ranges reported are exact.
//!
//! Services exposed outside the cluster (NodePort, LoadBalancer, external IPs) are part of
//! the exposure view: see [`ServiceExposure`].

mod services;

use std::net::IpAddr;
use std::sync::Arc;

use palisade_engine::{EndpointKind, Flow, PodId, PolicyInfo, Tier};
use palisade_model::{Direction, Protocol};
use serde::ser::{Serialize, SerializeMap, Serializer};
pub use services::{EndpointAdmission, ExposedServicePort, SeenSource, ServiceExposure};

use crate::Analysis;
use crate::universe::Universe;

/// The policies that apply to one pod in one direction, by tier.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SideCoverage {
    /// Admin-tier policies whose subject selects the pod and that have rules here.
    pub admin: Vec<Arc<PolicyInfo>>,
    /// The policies that isolate the pod (empty: NetworkPolicies do not isolate it).
    pub isolated_by: Vec<Arc<PolicyInfo>>,
    /// Baseline-tier policies whose subject selects the pod and that have rules here.
    pub baseline: Vec<Arc<PolicyInfo>>,
    /// This side allows every connection: every peer (pods, nodes, every outside address)
    /// on every port, whatever policies apply.
    pub allows_all: bool,
    /// No connection of this side is left to the default: what no rule allows is denied.
    pub default_deny: bool,
}

impl SideCoverage {
    /// Whether no policy of any tier applies.
    pub fn no_policy(&self) -> bool {
        self.admin.is_empty() && self.isolated_by.is_empty() && self.baseline.is_empty()
    }

    /// Whether this side allows every connection (no policy, or policies that leave it
    /// open): the pod is not covered in this direction.
    pub fn is_open(&self) -> bool {
        self.allows_all
    }
}

/// Ports of one protocol on which a pod accepts connections from outside the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExposedPorts {
    /// Protocol.
    pub protocol: Protocol,
    /// Inclusive port ranges.
    pub ranges: Vec<(u16, u16)>,
}

/// How a pod is reachable from outside the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposure {
    /// The ports reachable from at least one external address.
    pub ports: Vec<ExposedPorts>,
    /// Whether every external address reaches every one of those ports.
    pub from_everywhere: bool,
    /// External addresses that reach it (one per CIDR region of the policies).
    pub sources: Vec<IpAddr>,
}

/// One pod's coverage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCoverage {
    /// The pod.
    pub pod: PodId,
    /// `namespace/name`.
    pub key: String,
    /// Ingress at the pod.
    pub ingress: SideCoverage,
    /// Egress from the pod.
    pub egress: SideCoverage,
    /// Reachability from outside the cluster (`None` for a pod without an address).
    pub exposure: Option<Exposure>,
}

impl PodCoverage {
    /// The side of `dir`.
    pub fn side(&self, dir: Direction) -> &SideCoverage {
        match dir {
            Direction::Ingress => &self.ingress,
            Direction::Egress => &self.egress,
        }
    }
}

/// The coverage of every pod.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    /// Pods that can be policy subjects (not host-network), in namespace/name order.
    pub pods: Vec<PodCoverage>,
    /// Host-network pods: never policy subjects (`namespace/name`).
    pub host_network: Vec<String>,
    /// Namespaces with pods none of which any policy covers, in either direction.
    pub open_namespaces: Vec<String>,
    /// Services that carry connections from outside the cluster.
    pub services: Vec<ServiceExposure>,
}

impl Coverage {
    /// Pods some policy selects in `dir` that still allow every connection there.
    pub fn selected_but_open(&self, dir: Direction) -> impl Iterator<Item = &PodCoverage> {
        self.pods.iter().filter(move |p| {
            let s = p.side(dir);
            s.is_open() && !s.no_policy()
        })
    }

    /// Pods in default deny in `dir`.
    pub fn default_deny(&self, dir: Direction) -> impl Iterator<Item = &PodCoverage> {
        self.pods.iter().filter(move |p| p.side(dir).default_deny)
    }

    /// Pods that allow every connection in `dir` (nothing covers them there).
    pub fn open(&self, dir: Direction) -> impl Iterator<Item = &PodCoverage> {
        self.pods.iter().filter(move |p| match dir {
            Direction::Ingress => p.ingress.is_open(),
            Direction::Egress => p.egress.is_open(),
        })
    }

    /// Pods reachable from outside the cluster.
    pub fn exposed(&self) -> impl Iterator<Item = (&PodCoverage, &Exposure)> {
        self.pods.iter().filter_map(|p| {
            p.exposure
                .as_ref()
                .filter(|e| !e.ports.is_empty())
                .map(|e| (p, e))
        })
    }
}

impl Analysis<'_> {
    /// The coverage of every pod.
    pub fn coverage(&self) -> Coverage {
        let universe = self.universe();
        let mut order: Vec<PodId> = self.engine.pod_ids().collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (
                &self.engine.cluster().pods[a],
                &self.engine.cluster().pods[b],
            );
            (&x.namespace, &x.name).cmp(&(&y.namespace, &y.name))
        });
        let mut exposure: Vec<Option<Exposure>> = vec![None; self.engine.cluster().pods.len()];
        // Per pod, per direction: (allows every connection, default deny).
        let mut openness: Vec<[(bool, bool); 2]> =
            vec![[(true, false); 2]; self.engine.cluster().pods.len()];
        for members in &universe.classes {
            if !self.engine.is_subject(members[0]) {
                continue;
            }
            let e = self.exposure(&universe, members[0]);
            let o = [Direction::Ingress, Direction::Egress]
                .map(|dir| self.openness(&universe, members[0], dir));
            for &p in members {
                exposure[p] = Some(e.clone());
                openness[p] = o;
            }
        }
        let mut out = Coverage::default();
        for pod in order {
            let p = &self.engine.cluster().pods[pod];
            if !self.engine.is_subject(pod) {
                out.host_network.push(p.key());
                continue;
            }
            let [i, e] = openness[pod];
            out.pods.push(PodCoverage {
                pod,
                key: p.key(),
                ingress: self.side_coverage(pod, Direction::Ingress, i),
                egress: self.side_coverage(pod, Direction::Egress, e),
                exposure: exposure[pod].take(),
            });
        }
        for ns in &self.engine.cluster().namespaces {
            let mut pods = out
                .pods
                .iter()
                .filter(|p| self.engine.cluster().pods[p.pod].namespace == ns.name);
            let mut any = false;
            if pods.all(|p| {
                any = true;
                p.ingress.is_open() && p.egress.is_open()
            }) && any
            {
                out.open_namespaces.push(ns.name.clone());
            }
        }
        out.open_namespaces.sort();
        out.services = self.service_exposure(&universe);
        out
    }

    /// Whether `pod`'s side in `dir` allows every representative connection, and whether
    /// none of them is left to the default tier (exact: the representatives stand for every
    /// connection).
    fn openness(&self, universe: &Universe, pod: PodId, dir: Direction) -> (bool, bool) {
        let (mut all, mut any, mut default) = (true, false, false);
        'pairs: for (src, dst) in self.side_pairs(universe, pod, dir, |_| true) {
            for probe in &universe.probes {
                let side = self.engine.evaluate_side(&probe.flow(src, dst), dir);
                any = true;
                all &= side.allowed;
                default |= side.tier == Tier::Default;
                if !all && default {
                    break 'pairs;
                }
            }
        }
        (all, any && !default)
    }

    fn side_coverage(
        &self,
        pod: PodId,
        dir: Direction,
        (allows_all, default_deny): (bool, bool),
    ) -> SideCoverage {
        let lists = self.engine.policies(pod, dir);
        let infos = |v: &[u32]| {
            v.iter()
                .map(|&i| self.engine.admin_policies()[i as usize].info.clone())
                .collect()
        };
        SideCoverage {
            admin: infos(&lists.admin),
            isolated_by: if self.engine.isolated(pod, dir) {
                self.engine.isolating(pod, dir).to_vec()
            } else {
                Vec::new()
            },
            baseline: infos(&lists.baseline),
            allows_all,
            default_deny,
        }
    }

    /// The ports on which `pod` accepts connections from the external representatives.
    fn exposure(&self, universe: &Universe, pod: PodId) -> Exposure {
        let externals: Vec<_> = universe
            .peers
            .iter()
            .filter(|p| p.kind == EndpointKind::External)
            .collect();
        let mut sources = Vec::new();
        // Per probe: reachable from some external address.
        let mut reachable = vec![false; universe.probes.len()];
        for ext in &externals {
            let Some(dst) = self.engine.endpoint_for_pod(pod, Some(ext.ip.is_ipv6())) else {
                continue;
            };
            if dst.ip.is_ipv6() != ext.ip.is_ipv6() {
                continue;
            }
            let mut reached = false;
            for (i, probe) in universe.probes.iter().enumerate() {
                let flow = Flow {
                    src: **ext,
                    dst,
                    protocol: probe.protocol,
                    port: probe.port,
                };
                let ok = self.engine.evaluate(&flow).allowed;
                reached |= ok;
                reachable[i] |= ok;
            }
            if reached {
                sources.push(ext.ip);
            }
        }
        // A probe stands for the ports from it to the next probe of its protocol.
        let mut ports: Vec<ExposedPorts> = Vec::new();
        for (i, probe) in universe.probes.iter().enumerate() {
            let end = universe
                .probes
                .get(i + 1)
                .filter(|n| n.protocol == probe.protocol)
                .map_or(u16::MAX, |n| n.port - 1);
            if !reachable[i] {
                continue;
            }
            match ports.last_mut() {
                Some(e) if e.protocol == probe.protocol => match e.ranges.last_mut() {
                    Some(r) if r.1.checked_add(1) == Some(probe.port) => r.1 = end,
                    _ => e.ranges.push((probe.port, end)),
                },
                _ => ports.push(ExposedPorts {
                    protocol: probe.protocol,
                    ranges: vec![(probe.port, end)],
                }),
            }
        }
        let from_everywhere =
            !ports.is_empty() && self.all_reach(universe, pod, &externals, &reachable);
        Exposure {
            ports,
            from_everywhere,
            sources,
        }
    }

    /// Whether every external representative reaches `pod` on every probe in `reachable`.
    fn all_reach(
        &self,
        universe: &Universe,
        pod: PodId,
        externals: &[&palisade_engine::Endpoint],
        reachable: &[bool],
    ) -> bool {
        externals.iter().all(|ext| {
            let Some(dst) = self.engine.endpoint_for_pod(pod, Some(ext.ip.is_ipv6())) else {
                return true;
            };
            dst.ip.is_ipv6() != ext.ip.is_ipv6()
                || universe
                    .probes
                    .iter()
                    .zip(reachable)
                    .filter(|(_, r)| **r)
                    .all(|(probe, _)| {
                        self.engine
                            .evaluate(&Flow {
                                src: **ext,
                                dst,
                                protocol: probe.protocol,
                                port: probe.port,
                            })
                            .allowed
                    })
        })
    }
}

impl std::fmt::Display for ExposedPorts {
    /// `TCP 80, 8000-8080`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ", self.protocol)?;
        for (i, (a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        Ok(())
    }
}

struct Infos<'a>(&'a [Arc<PolicyInfo>]);

impl Serialize for Infos<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|p| &**p))
    }
}

/// `{"open", "defaultDeny", "noPolicy", "admin": [policy], "isolatedBy": [policy],
/// "baseline": [policy]}`.
impl Serialize for SideCoverage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("open", &self.is_open())?;
        m.serialize_entry("defaultDeny", &self.default_deny)?;
        m.serialize_entry("noPolicy", &self.no_policy())?;
        m.serialize_entry("admin", &Infos(&self.admin))?;
        m.serialize_entry("isolatedBy", &Infos(&self.isolated_by))?;
        m.serialize_entry("baseline", &Infos(&self.baseline))?;
        m.end()
    }
}

/// `{"ports": [{"protocol", "ranges": [[from, to]]}], "fromEverywhere", "sources": [ip]}`.
impl Serialize for Exposure {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Ports<'a>(&'a ExposedPorts);
        impl Serialize for Ports<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("protocol", self.0.protocol.as_str())?;
                m.serialize_entry("ranges", &self.0.ranges)?;
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("ports", &self.ports.iter().map(Ports).collect::<Vec<_>>())?;
        m.serialize_entry("fromEverywhere", &self.from_everywhere)?;
        m.serialize_entry("sources", &self.sources)?;
        m.end()
    }
}

/// `{"pod", "ingress", "egress", "exposure"}`.
impl Serialize for PodCoverage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("pod", &self.key)?;
        m.serialize_entry("ingress", &self.ingress)?;
        m.serialize_entry("egress", &self.egress)?;
        m.serialize_entry("exposure", &self.exposure)?;
        m.end()
    }
}

/// `{"pods", "hostNetwork", "openNamespaces", "services"}`; `services` only when some
/// Service is exposed.
impl Serialize for Coverage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("pods", &self.pods)?;
        m.serialize_entry("hostNetwork", &self.host_network)?;
        m.serialize_entry("openNamespaces", &self.open_namespaces)?;
        if !self.services.is_empty() {
            m.serialize_entry("services", &self.services)?;
        }
        m.end()
    }
}
