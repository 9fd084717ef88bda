//! Deciding a connection: egress at the source, ingress at the destination, each by tiers.

use std::net::IpAddr;
use std::sync::Arc;

use palisade_model::{Action, Direction, NamespaceMatch, Protocol};

use crate::rule_parts::ports_take;
use crate::state::{Engine, Isolating, Owner, PodId, Semantics};
use crate::verdict::{Decision, Exemption, PolicyInfo, RuleMatch, SideVerdict, Tier, Verdict};

/// What an address is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EndpointKind {
    /// A pod that is a policy subject (not host-network).
    Pod(PodId),
    /// A node's host address (a node, or a host-network pod); the node index when known.
    Host(Option<usize>),
    /// Outside the cluster.
    External,
}

/// One end of a connection: what it is and the address used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// What it is.
    pub kind: EndpointKind,
    /// The address on the wire.
    pub ip: IpAddr,
}

/// A connection attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flow {
    /// Source.
    pub src: Endpoint,
    /// Destination.
    pub dst: Endpoint,
    /// Protocol.
    pub protocol: Protocol,
    /// Destination port.
    pub port: u16,
}

impl Engine {
    /// The endpoint for an address: the pod or node that owns it, or external.
    pub fn endpoint_for_ip(&self, ip: IpAddr) -> Endpoint {
        let kind = match self.ip_owner.get(&ip) {
            Some(Owner::Pod(p)) => EndpointKind::Pod(*p),
            Some(Owner::Node(n)) => EndpointKind::Host(Some(*n)),
            None => EndpointKind::External,
        };
        Endpoint { kind, ip }
    }

    /// The endpoint for a pod, using its address of `family` (IPv4 when `None`) if it has
    /// one, else its first. Host-network pods are their node's host address. A workload's
    /// representative pod, which has no address, is at the unspecified address.
    /// `None` when any other pod has no address.
    #[inline]
    pub fn endpoint_for_pod(&self, pod: PodId, family_v6: Option<bool>) -> Option<Endpoint> {
        let p = &self.cluster.pods[pod];
        let node_ips = self.pod_node[pod].map(|n| &self.cluster.nodes[n].addresses);
        let ips: &[IpAddr] = if p.host_network && p.ips.is_empty() {
            node_ips.map(Vec::as_slice).unwrap_or(&[])
        } else {
            &p.ips
        };
        let want_v6 = family_v6.unwrap_or(false);
        let ip = match ips
            .iter()
            .find(|ip| ip.is_ipv6() == want_v6)
            .or_else(|| ips.first())
        {
            Some(ip) => *ip,
            // A workload's representative pod has no address yet: it is evaluated by
            // selector logic, at the unspecified address (see `depends_on_address`).
            None if palisade_model::workload_of(p).is_some() => match want_v6 {
                false => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                true => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
            },
            None => return None,
        };
        let kind = if p.host_network {
            EndpointKind::Host(self.pod_node[pod])
        } else {
            EndpointKind::Pod(pod)
        };
        Some(Endpoint { kind, ip })
    }

    /// Decides a connection, with the explanation of both sides.
    pub fn evaluate(&self, flow: &Flow) -> Verdict {
        if let Some(s) = self.same_pod(flow) {
            return Verdict {
                allowed: true,
                egress: s.clone(),
                ingress: s,
            };
        }
        self.evaluate_sides(flow)
    }

    /// The `dir` side of [`Engine::evaluate`]`(flow)`, deciding that side only.
    pub fn evaluate_side(&self, flow: &Flow, dir: Direction) -> SideVerdict {
        if let Some(s) = self.same_pod(flow) {
            return s;
        }
        match dir {
            Direction::Egress => self.egress_side(flow),
            Direction::Ingress => self.ingress_side(flow),
        }
    }

    /// A pod's flow to itself is exempt. A workload's representative stands for all its
    /// replicas: from itself to itself is one replica to another, decided by policy like
    /// any two pods.
    fn same_pod(&self, flow: &Flow) -> Option<SideVerdict> {
        match (flow.src.kind, flow.dst.kind) {
            (EndpointKind::Pod(a), EndpointKind::Pod(b))
                if a == b && palisade_model::workload_of(&self.cluster.pods[a]).is_none() =>
            {
                Some(SideVerdict::exempt(Exemption::SamePod))
            }
            _ => None,
        }
    }

    /// Decides both sides of `flow` by policy, with no same-pod shortcut.
    pub(crate) fn evaluate_sides(&self, flow: &Flow) -> Verdict {
        let egress = self.egress_side(flow);
        let ingress = self.ingress_side(flow);
        Verdict {
            allowed: egress.allowed && ingress.allowed,
            egress,
            ingress,
        }
    }

    /// The source's side of `flow`, with no same-pod shortcut.
    fn egress_side(&self, flow: &Flow) -> SideVerdict {
        match flow.src.kind {
            EndpointKind::Pod(p) => match self.shared_address(p) {
                Some(ip) => SideVerdict::shared_address(ip),
                None => self.decide(p, Direction::Egress, flow),
            },
            EndpointKind::Host(_) => SideVerdict::exempt(Exemption::Host),
            EndpointKind::External => SideVerdict::exempt(Exemption::External),
        }
    }

    /// The destination's side of `flow`, with no same-pod shortcut.
    fn ingress_side(&self, flow: &Flow) -> SideVerdict {
        match flow.dst.kind {
            EndpointKind::Pod(p) => match self.shared_address(p) {
                Some(ip) => SideVerdict::shared_address(ip),
                None if self.node_local(flow, p) => SideVerdict::exempt(Exemption::NodeLocal),
                None => self.decide(p, Direction::Ingress, flow),
            },
            EndpointKind::Host(_) => SideVerdict::exempt(Exemption::Host),
            EndpointKind::External => SideVerdict::exempt(Exemption::External),
        }
    }

    /// "Traffic from a node's own host IP to a pod on that node is allowed (kubelet probes)."
    fn node_local(&self, flow: &Flow, dst: PodId) -> bool {
        self.options.allow_node_local
            && matches!(flow.src.kind, EndpointKind::Host(Some(n)) if self.pod_node[dst] == Some(n))
    }

    /// One side, by tiers: admin, NetworkPolicy, baseline, default.
    pub fn decide(&self, pod: PodId, dir: Direction, flow: &Flow) -> SideVerdict {
        let lists = self.policies(pod, dir);
        let mut passes = Vec::new();
        let verdict = |allowed, tier, decision, passes| SideVerdict {
            allowed,
            tier,
            decision,
            passes,
        };
        // Tier 1: first matching admin rule decides; Pass goes on to NetworkPolicies.
        if let Some(m) = self.first_admin_match(&lists.admin, pod, dir, flow) {
            if m.action != Action::Pass {
                return verdict(
                    m.action == Action::Allow,
                    Tier::Admin,
                    Decision::Rule(m),
                    passes,
                );
            }
            passes.push(m);
        }
        // Tier 2: isolation and allow-lists.
        if self.isolated(pod, dir) {
            return match self.first_np_match(pod, dir, flow) {
                Some(m) => verdict(true, Tier::NetworkPolicy, Decision::Rule(m), passes),
                None => verdict(
                    false,
                    Tier::NetworkPolicy,
                    Decision::Isolated(self.isolating(pod, dir)),
                    passes,
                ),
            };
        }
        // Tier 3: baseline; Pass (v1alpha2) falls through.
        if let Some(m) = self.first_admin_match(&lists.baseline, pod, dir, flow) {
            if m.action != Action::Pass {
                return verdict(
                    m.action == Action::Allow,
                    Tier::Baseline,
                    Decision::Rule(m),
                    passes,
                );
            }
            passes.push(m);
        }
        verdict(true, Tier::Default, Decision::NoPolicy, passes)
    }

    /// The NetworkPolicies of `pod` that count in `dir` (those whose policyTypes name it;
    /// in legacy mode, for ingress, all that select it).
    pub fn counting_nps(&self, pod: PodId, dir: Direction) -> impl Iterator<Item = u32> + '_ {
        let legacy_ingress =
            self.options.semantics == Semantics::Legacy && dir == Direction::Ingress;
        self.policies(pod, dir)
            .network
            .iter()
            .copied()
            .filter(move |&i| {
                legacy_ingress
                    || self.cluster.network_policies[i as usize]
                        .policy_types
                        .has(dir)
            })
    }

    /// Whether `pod` is isolated in `dir`.
    pub fn isolated(&self, pod: PodId, dir: Direction) -> bool {
        if !self.is_subject(pod) {
            return false;
        }
        let annotated = self.policies(pod, Direction::Ingress).annotation;
        match (self.options.semantics, dir) {
            (Semantics::Standard, Direction::Ingress) => {
                annotated || self.counting_nps(pod, dir).next().is_some()
            }
            (Semantics::Standard, Direction::Egress) => {
                self.counting_nps(pod, dir).next().is_some()
            }
            // "Traffic is allowed to a pod if namespace.networkPolicy.ingress.isolation is undefined"
            (Semantics::Legacy, Direction::Ingress) => annotated,
            (Semantics::Legacy, Direction::Egress) => {
                annotated && self.counting_nps(pod, dir).next().is_some()
            }
        }
    }

    /// The policies that isolate `pod` in `dir` (the explanation of an isolation deny).
    pub fn isolating(&self, pod: PodId, dir: Direction) -> Isolating {
        self.policies(pod, dir).isolating.clone()
    }

    /// [`Engine::isolating`] computed from the pod's policy lists.
    pub(crate) fn compute_isolating(&self, pod: PodId, dir: Direction) -> Isolating {
        let mut out = Vec::new();
        if dir == Direction::Ingress
            && self.policies(pod, dir).annotation
            && let Some(ns) = self.cluster.namespaces.get(self.pod_ns[pod])
        {
            out.push(Arc::new(PolicyInfo::namespace_annotation(ns)));
        }
        if !(self.options.semantics == Semantics::Legacy && dir == Direction::Ingress) {
            out.extend(
                self.counting_nps(pod, dir)
                    .map(|i| self.nps[i as usize].info.clone()),
            );
        }
        out.into()
    }

    fn first_np_match(&self, pod: PodId, dir: Direction, flow: &Flow) -> Option<RuleMatch> {
        let peer = match dir {
            Direction::Ingress => &flow.src,
            Direction::Egress => &flow.dst,
        };
        self.counting_nps(pod, dir).find_map(|i| {
            let rules = self.nps[i as usize].rules(dir);
            let index = rules
                .iter()
                .position(|r| self.np_rule_matches(r, peer, flow))?;
            Some(RuleMatch {
                policy: self.nps[i as usize].info.clone(),
                direction: dir,
                index: index as u32,
                action: Action::Allow,
                fail_closed: false,
            })
        })
    }

    /// The first rule of `policies` (admin policy indices, in order) that matches `flow`
    /// for subject `pod` in `dir`.
    pub fn first_admin_match(
        &self,
        policies: &[u32],
        pod: PodId,
        dir: Direction,
        flow: &Flow,
    ) -> Option<RuleMatch> {
        policies.iter().find_map(|&i| {
            (0..self.cluster.admin_policies[i as usize].rules(dir).len())
                .find_map(|index| self.admin_rule_match(i, index, pod, dir, flow))
        })
    }

    /// What rule `index` of admin policy `i` does with `flow` for subject `pod`, if it matches.
    #[inline]
    pub fn admin_rule_match(
        &self,
        i: u32,
        index: usize,
        pod: PodId,
        dir: Direction,
        flow: &Flow,
    ) -> Option<RuleMatch> {
        let peer = match dir {
            Direction::Ingress => &flow.src,
            Direction::Egress => &flow.dst,
        };
        let rule = self.cluster.admin_policies[i as usize]
            .rules(dir)
            .get(index)?;
        let c = self.admins[i as usize].rules(dir).get(index)?;
        let matched = |action, fail_closed| RuleMatch {
            policy: self.admins[i as usize].info.clone(),
            direction: dir,
            index: index as u32,
            action,
            fail_closed,
        };
        let fail_closed = c.fail_closed;
        // "For Deny and Pass rules, fail closed means: treat the rule as a 'Deny all' rule".
        if fail_closed && rule.action != Action::Allow {
            return Some(matched(Action::Deny, true));
        }
        let ports_ok = ports_take(rule.ports.as_deref(), |p| self.admin_port_why(p, flow));
        let peer_ok = c
            .peers
            .iter()
            .any(|p| self.admin_peer_matches(p, pod, peer));
        (ports_ok && peer_ok).then(|| matched(rule.action, false))
    }

    /// KEP namespace relations between the subject pod's namespace and the peer pod's.
    pub fn namespace_related(&self, m: &NamespaceMatch, subject: PodId, peer: PodId) -> bool {
        let (sn, pn) = (self.pod_ns[subject], self.pod_ns[peer]);
        let labels = |i: usize| self.cluster.namespaces.get(i).map(|n| &n.labels);
        let same = |keys: &[String]| {
            let (Some(sl), Some(pl)) = (labels(sn), labels(pn)) else {
                return false;
            };
            !keys.is_empty()
                && keys
                    .iter()
                    .all(|k| sl.contains_key(k) && sl.get(k) == pl.get(k))
        };
        match m {
            NamespaceMatch::Selector(sel) => labels(pn).is_some_and(|l| sel.matches(l)),
            NamespaceMatch::SelfNamespace => sn == pn,
            NamespaceMatch::NotSelfNamespace => sn != pn,
            NamespaceMatch::SameLabels(keys) => same(keys),
            NamespaceMatch::NotSameLabels(keys) => !keys.is_empty() && !same(keys),
        }
    }
}
