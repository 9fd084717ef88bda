//! The connectivity matrix: every pod with an address to every other, for a set of probes.
//!
//! Pods that no policy can tell apart — same namespace, labels, network mode, the same side
//! of every CIDR any policy names, and (when it matters) the same node and container ports
//! — form classes; each class's row of destination classes is computed at once by set
//! algebra (see the `rows` module), the classes in parallel.

use std::collections::BTreeSet;
use std::net::IpAddr;

use palisade_engine::{BitSet, Endpoint, Flow, PodId, first_equal_fast};
use palisade_model::{AdminPeer, NetworkPolicyPeer, Protocol};
use rayon::prelude::*;

use crate::Analysis;
use crate::probes::Probe;

/// The verdicts for every (probe, source, destination).
#[derive(Debug, Clone)]
pub struct Matrix {
    /// Rows and columns: pods with an address, in namespace/name order.
    pub pods: Vec<PodId>,
    /// Probes, in the order given.
    pub probes: Vec<Probe>,
    /// The equivalence class of each row/column.
    pub class_of: Vec<usize>,
    /// Number of classes.
    pub classes: usize,
    /// `[probe][from class]`: the destination classes reached.
    verdicts: Vec<BitSet>,
    /// Per row: a workload's representative (its cell with itself is between replicas).
    replicated: Vec<bool>,
    /// Per row: the node whose own address the row is (host-network pods), and the node
    /// a pod runs on; applied over the classes when the node-local exemption is on.
    local: Vec<Local>,
}

/// A row's place for the node-local exemption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Local {
    /// A node's own address (a host-network pod on that node).
    Host(usize),
    /// A pod on that node.
    On(usize),
    /// Neither, or the exemption is off.
    None,
}

impl Matrix {
    /// Whether `pods[from]` reaches `pods[to]` on `probes[probe]`: its class's verdict, or
    /// the node-local exemption (a node's own address reaches the pods on that node).
    pub fn allowed(&self, probe: usize, from: usize, to: usize) -> bool {
        (from == to && !self.replicated[from])
            || self.node_local(from, to)
            || self.class_allowed(probe, self.class_of[from], self.class_of[to])
    }

    /// Whether `pods[from]` is the own address of the node `pods[to]` runs on, and the
    /// node-local exemption is on: allowed whatever the policies say. Classes leave this
    /// out (it would split every workload by node); it is this one rule for every pod.
    pub fn node_local(&self, from: usize, to: usize) -> bool {
        matches!((self.local[from], self.local[to]), (Local::Host(a), Local::On(b)) if a == b)
    }

    /// Whether some row is exempt by the node-local rule towards another (a host-network
    /// pod and a pod on its node, with the exemption on): reports then state the rule once.
    pub fn has_node_local(&self) -> bool {
        let hosts: BTreeSet<usize> = self
            .local
            .iter()
            .filter_map(|l| match l {
                Local::Host(n) => Some(*n),
                _ => None,
            })
            .collect();
        self.local
            .iter()
            .any(|l| matches!(l, Local::On(n) if hosts.contains(n)))
    }

    /// Whether pods of class `from` reach (other) pods of class `to` on `probes[probe]` by
    /// policy (the node-local exemption aside, see [`Matrix::node_local`]).
    pub fn class_allowed(&self, probe: usize, from: usize, to: usize) -> bool {
        self.class_row(probe, from).contains(to)
    }

    /// The classes whose (other) pods the pods of class `from` reach on `probes[probe]`.
    pub fn class_row(&self, probe: usize, from: usize) -> &BitSet {
        &self.verdicts[probe * self.classes + from]
    }

    /// The rows/columns of each class, in order.
    pub fn class_members(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.classes];
        for (i, &c) in self.class_of.iter().enumerate() {
            out[c].push(i);
        }
        out
    }
}

/// Why two pods with the same namespace and labels are in different classes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Distinction {
    /// A CIDR a policy names holds one pod's address and not the other's.
    Cidr {
        /// The CIDR.
        cidr: ipnet::IpNet,
        /// The policy that names it.
        policy: palisade_model::PolicyRef,
        /// Which of the two pods is inside (`true`: the first).
        first_inside: bool,
    },
    /// One is host-network and the other is not.
    HostNetwork,
    /// They are of different address families.
    Family,
    /// They are the own addresses of different nodes (host-network pods).
    Node,
    /// Their container ports differ, and some policy uses named ports.
    ContainerPorts,
    /// One shares its address with another pod (and fails closed).
    SharedAddress,
}

impl std::fmt::Display for Distinction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distinction::Cidr {
                cidr,
                policy,
                first_inside,
            } => write!(
                f,
                "{cidr} (named by {policy}) holds the {} one's address only",
                if *first_inside { "first" } else { "second" }
            ),
            Distinction::HostNetwork => f.write_str("one is host-network"),
            Distinction::Family => f.write_str("their address families differ"),
            Distinction::Node => f.write_str("they run on different nodes"),
            Distinction::ContainerPorts => {
                f.write_str("their container ports differ, and a policy uses named ports")
            }
            Distinction::SharedAddress => f.write_str("one shares its address with another pod"),
        }
    }
}

/// What makes two pods indistinguishable to every policy (borrowing the pod's labels and
/// port names).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Signature<'a> {
    namespace: usize,
    labels: &'a palisade_model::Labels,
    host_network: bool,
    family_v6: bool,
    regions: Regions,
    node: Option<usize>,
    ports: Vec<(Option<&'a str>, u16, Protocol)>,
    shared_address: bool,
}

/// Which policy CIDRs hold a pod's addresses: a bit per (address, CIDR), address-major;
/// the first 64 inline (most pods need no more).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Regions {
    len: usize,
    first: u64,
    rest: Vec<u64>,
}

impl Regions {
    fn of(ips: &[IpAddr], cidrs: &[ipnet::IpNet]) -> Regions {
        let len = ips.len() * cidrs.len();
        let mut regions = Regions {
            len,
            first: 0,
            rest: vec![0; len.div_ceil(64).saturating_sub(1)],
        };
        let inside = ips
            .iter()
            .flat_map(|ip| cidrs.iter().map(move |c| c.contains(ip)));
        for (i, inside) in inside.enumerate() {
            if inside {
                let word = match i / 64 {
                    0 => &mut regions.first,
                    w => &mut regions.rest[w - 1],
                };
                *word |= 1 << (i % 64);
            }
        }
        regions
    }
}

impl Analysis<'_> {
    /// Pods that have an address (host-network pods through their node), with their
    /// endpoint, in namespace/name order.
    pub fn addressable_pods(&self) -> Vec<(PodId, Endpoint)> {
        let engine = self.engine;
        let ids: Vec<PodId> = engine.pod_ids().collect();
        let mut pods: Vec<(PodId, Endpoint)> = ids
            .par_iter()
            .filter_map(|&p| engine.endpoint_for_pod(p, None).map(|e| (p, e)))
            .collect();
        let key = |p: PodId| {
            let pod = &engine.cluster().pods[p];
            (&pod.namespace, &pod.name)
        };
        // Loading sorts the pods so; only pods added since need sorting in.
        if !pods.par_windows(2).all(|w| key(w[0].0) <= key(w[1].0)) {
            pods.sort_by(|a, b| key(a.0).cmp(&key(b.0)));
        }
        pods
    }

    /// The flow between two pods: the source's primary address, and the destination's
    /// address of the same family.
    pub fn pod_flow(&self, from: PodId, to: PodId, probe: Probe) -> Option<Flow> {
        let src = self.engine.endpoint_for_pod(from, None)?;
        let dst = self.engine.endpoint_for_pod(to, Some(src.ip.is_ipv6()))?;
        Some(Flow {
            src,
            dst,
            protocol: probe.protocol,
            port: probe.port,
        })
    }

    /// Every CIDR a policy names (ipBlock cidr and excepts, admin networks).
    fn policy_cidrs(&self) -> Vec<ipnet::IpNet> {
        let set: BTreeSet<ipnet::IpNet> = self.cidr_owners().map(|(c, _)| c).collect();
        set.into_iter().collect()
    }

    /// Every CIDR a policy names, with the policy, in the cluster's order.
    fn cidr_owners(&self) -> impl Iterator<Item = (ipnet::IpNet, palisade_model::PolicyRef)> + '_ {
        let nps = self
            .engine
            .cluster()
            .network_policies
            .iter()
            .flat_map(|np| {
                np.ingress
                    .iter()
                    .chain(&np.egress)
                    .flat_map(|r| r.peers.iter().flatten())
                    .flat_map(|p| match p {
                        NetworkPolicyPeer::IpBlock(b) => {
                            std::iter::once(b.cidr).chain(b.except.clone()).collect()
                        }
                        _ => Vec::new(),
                    })
                    .map(|c| (c, np.reference()))
            });
        let admins = self.engine.cluster().admin_policies.iter().flat_map(|a| {
            a.ingress
                .iter()
                .chain(&a.egress)
                .flat_map(|r| &r.peers)
                .flat_map(|p| match p {
                    AdminPeer::Networks(n) => n.clone(),
                    _ => Vec::new(),
                })
                .map(|c| (c, a.reference()))
        });
        nps.chain(admins)
    }

    /// Why two pods of the same namespace and labels fall in different matrix classes
    /// (empty when they do not).
    pub fn distinctions(&self, a: PodId, b: PodId) -> Vec<Distinction> {
        self.distinctions_of(&[(a, b)]).pop().unwrap_or_default()
    }

    /// [`Analysis::distinctions`] of each pair.
    pub fn distinctions_of(&self, pairs: &[(PodId, PodId)]) -> Vec<Vec<Distinction>> {
        let cidrs = self.policy_cidrs();
        let owners: Vec<_> = self.cidr_owners().collect();
        let (named, nodes_matter) = (self.engine.uses_named_ports(), false);
        pairs
            .par_iter()
            .map(|&(a, b)| {
                let sa = self.signature_with(a, &cidrs, named, nodes_matter);
                let sb = self.signature_with(b, &cidrs, named, nodes_matter);
                self.distinctions_between((a, &sa), (b, &sb), &owners)
            })
            .collect()
    }

    fn distinctions_between(
        &self,
        (a, sa): (PodId, &Signature),
        (b, sb): (PodId, &Signature),
        owners: &[(ipnet::IpNet, palisade_model::PolicyRef)],
    ) -> Vec<Distinction> {
        let mut out = Vec::new();
        if sa.host_network != sb.host_network {
            out.push(Distinction::HostNetwork);
        }
        if sa.family_v6 != sb.family_v6 {
            out.push(Distinction::Family);
        }
        if sa.regions != sb.regions {
            let ips = |p: PodId| -> Vec<IpAddr> {
                self.engine
                    .endpoint_for_pod(p, None)
                    .map(|e| e.ip)
                    .into_iter()
                    .collect()
            };
            let (ia, ib) = (ips(a), ips(b));
            let mut seen = BTreeSet::new();
            for (cidr, policy) in owners {
                let (ina, inb) = (
                    ia.iter().any(|i| cidr.contains(i)),
                    ib.iter().any(|i| cidr.contains(i)),
                );
                if ina != inb && seen.insert(*cidr) {
                    out.push(Distinction::Cidr {
                        cidr: *cidr,
                        policy: policy.clone(),
                        first_inside: ina,
                    });
                }
            }
        }
        if sa.node != sb.node {
            out.push(Distinction::Node);
        }
        if sa.ports != sb.ports {
            out.push(Distinction::ContainerPorts);
        }
        if sa.shared_address != sb.shared_address {
            out.push(Distinction::SharedAddress);
        }
        out
    }

    /// Whether nodes tell pods apart: host endpoints (host-network pods) are sources, or
    /// node peers exist.
    fn nodes_matter(&self) -> bool {
        self.engine.cluster().pods.iter().any(|p| p.host_network)
            || self.engine.cluster().admin_policies.iter().any(|a| {
                a.egress
                    .iter()
                    .any(|r| r.peers.iter().any(|p| matches!(p, AdminPeer::Nodes(_))))
            })
    }

    fn signature_with(
        &self,
        pod: PodId,
        cidrs: &[ipnet::IpNet],
        named: bool,
        nodes_matter: bool,
    ) -> Signature<'_> {
        let p = &self.engine.cluster().pods[pod];
        let host_ip;
        let ips: &[IpAddr] = match self.engine.endpoint_for_pod(pod, None) {
            Some(e) if p.host_network => {
                host_ip = [e.ip];
                &host_ip
            }
            _ => &p.ips,
        };
        Signature {
            namespace: self.engine.pod_namespace(pod),
            labels: &p.labels,
            host_network: p.host_network,
            family_v6: ips.first().is_some_and(IpAddr::is_ipv6),
            regions: Regions::of(ips, cidrs),
            node: if nodes_matter || p.host_network {
                self.engine.pod_node(pod)
            } else {
                None
            },
            ports: if named {
                p.ports
                    .iter()
                    .map(|c| (c.name.as_deref(), c.port.get(), c.protocol))
                    .collect()
            } else {
                Vec::new()
            },
            shared_address: self.engine.shared_address(pod).is_some(),
        }
    }

    /// Groups the matrix pods into classes no policy can tell apart; with `by_node`, also
    /// by node wherever host endpoints or node peers exist (the node-local exemption then
    /// tells pods on different nodes apart).
    fn classes(&self, pods: &[PodId], by_node: bool) -> (Vec<usize>, Vec<PodId>, Vec<Vec<PodId>>) {
        let cidrs = self.policy_cidrs();
        let named = self.engine.uses_named_ports();
        let nodes_matter = by_node && self.nodes_matter();
        let first = first_equal_fast(pods.len(), |i| {
            self.signature_with(pods[i], &cidrs, named, nodes_matter)
        });
        // Classes in the order of their first pod.
        let mut members: Vec<Vec<PodId>> = Vec::new();
        let mut class_of: Vec<usize> = Vec::with_capacity(pods.len());
        for (i, (&pod, first)) in pods.iter().zip(first).enumerate() {
            let c = if first == i {
                members.push(Vec::new());
                members.len() - 1
            } else {
                class_of[first]
            };
            members[c].push(pod);
            class_of.push(c);
        }
        let reps = members.iter().map(|m| m[0]).collect();
        (class_of, reps, members)
    }

    /// The pods of [`Analysis::addressable_pods`], in its order.
    pub fn addressable_pod_ids(&self) -> Vec<PodId> {
        self.addressable_pods()
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    }

    /// The matrix pods, their classes, the members of each class and its representative.
    fn matrix_classes(&self) -> (Vec<PodId>, Vec<usize>, Vec<Vec<PodId>>) {
        self.classes_of_pods(self.addressable_pod_ids())
    }

    /// [`Analysis::matrix_classes`] of `pods`, the addressable pods in their order.
    fn classes_of_pods(&self, pods: Vec<PodId>) -> (Vec<PodId>, Vec<usize>, Vec<Vec<PodId>>) {
        let (class_of, _reps, members) = self.classes(&pods, false);
        (pods, class_of, members)
    }

    /// The matrix classes split by node where the node-local exemption tells pods apart:
    /// classes every flow of whose members, exemption included, is decided alike.
    pub(crate) fn classes_by_node(&self) -> Vec<Vec<PodId>> {
        self.classes(&self.addressable_pod_ids(), true).2
    }

    /// Evaluates every probe between every pair of addressable pods, a source class at a
    /// time.
    pub fn matrix(&self, probes: &[Probe]) -> Matrix {
        self.matrix_of(self.addressable_pod_ids(), probes)
    }

    /// [`Analysis::matrix`] given the addressable pods, as [`Analysis::addressable_pod_ids`]
    /// returns them (for a caller that holds them already).
    pub fn matrix_of(&self, pods: Vec<PodId>, probes: &[Probe]) -> Matrix {
        debug_assert_eq!(pods, self.addressable_pod_ids());
        let (pods, class_of, members) = self.classes_of_pods(pods);
        let reps: Vec<PodId> = members.iter().map(|m| m[0]).collect();
        let mut verdicts: Vec<BitSet> = if probes.is_empty() {
            Vec::new()
        } else {
            crate::rows::Rows::new(self.engine, &reps, probes)
                .verdicts()
                .into_iter()
                .flatten()
                .collect()
        };
        let c = members.len();
        // A one-pod class only meets itself (its replicas, for a workload).
        for (class, m) in members.iter().enumerate() {
            if m.len() == 1
                && palisade_model::workload_of(&self.engine.cluster().pods[m[0]]).is_none()
            {
                for p in 0..probes.len() {
                    verdicts[p * c + class].insert(class);
                }
            }
        }
        self.assemble(pods, probes, class_of, c, verdicts)
    }

    /// [`Analysis::matrix`] evaluated one class pair at a time with [`palisade_engine::Engine::evaluate`]: the
    /// reference the set-algebra evaluation is tested against.
    pub fn matrix_by_pairs(&self, probes: &[Probe]) -> Matrix {
        let (pods, class_of, members) = self.matrix_classes();
        let c = members.len();
        let cell = |probe: &Probe, from: usize, to: usize| -> bool {
            // Two distinct members of a class when from == to; a one-pod class only meets itself.
            let (a, b) = if from == to {
                match members[from].as_slice() {
                    [x, y, ..] => (*x, *y),
                    [x] if palisade_model::workload_of(&self.engine.cluster().pods[*x])
                        .is_some() =>
                    {
                        (*x, *x)
                    }
                    _ => return true,
                }
            } else {
                (members[from][0], members[to][0])
            };
            self.pod_flow(a, b, *probe)
                .is_some_and(|f| self.allowed_by_policy(&f))
        };
        let verdicts = probes
            .iter()
            .flat_map(|probe| {
                (0..c).map(move |from| {
                    let mut row = BitSet::new(c);
                    for to in 0..c {
                        row.set(to, cell(probe, from, to));
                    }
                    row
                })
            })
            .collect();
        self.assemble(pods, probes, class_of, c, verdicts)
    }

    /// Whether policy allows `flow`, the node-local exemption aside.
    fn allowed_by_policy(&self, flow: &Flow) -> bool {
        let v = self.engine.evaluate(flow);
        match (&v.ingress.decision, flow.dst.kind) {
            (
                palisade_engine::Decision::Exempt(palisade_engine::Exemption::NodeLocal),
                palisade_engine::EndpointKind::Pod(p),
            ) => {
                v.egress.allowed
                    && self
                        .engine
                        .decide(p, palisade_model::Direction::Ingress, flow)
                        .allowed
            }
            _ => v.allowed,
        }
    }

    fn assemble(
        &self,
        pods: Vec<PodId>,
        probes: &[Probe],
        class_of: Vec<usize>,
        classes: usize,
        verdicts: Vec<BitSet>,
    ) -> Matrix {
        let replicated = pods
            .iter()
            .map(|&p| palisade_model::workload_of(&self.engine.cluster().pods[p]).is_some())
            .collect();
        let local = pods
            .iter()
            .map(|&p| match self.engine.pod_node(p) {
                Some(n) if self.engine.options().allow_node_local => {
                    if self.engine.cluster().pods[p].host_network {
                        Local::Host(n)
                    } else {
                        Local::On(n)
                    }
                }
                _ => Local::None,
            })
            .collect();
        Matrix {
            replicated,
            local,
            pods,
            probes: probes.to_vec(),
            class_of,
            classes,
            verdicts,
        }
    }
}
