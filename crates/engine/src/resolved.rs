//! NetworkPolicies as the engine resolved them — subjects and selector peers as pod sets,
//! named container ports indexed by name and protocol — for translators into other policy
//! models (Neutron security groups) that must not re-evaluate selectors.

use std::collections::HashMap;

use palisade_model::{Direction, IpBlock, NetworkPolicy, NetworkPolicyPort, Port, Protocol};

use crate::bitset::BitSet;
use crate::state::{CompiledNp, Engine, NpPeer, NpRule, PodId};

/// One NetworkPolicy with its subject and peers resolved to pods.
#[derive(Debug, Clone, Copy)]
pub struct ResolvedPolicy<'e> {
    /// The policy as written (it names itself by namespace and name).
    pub policy: &'e NetworkPolicy,
    /// The pods it selects (never host-network pods).
    pub subject: &'e BitSet,
    compiled: &'e CompiledNp,
}

impl<'e> ResolvedPolicy<'e> {
    /// Its rules for `dir`, in written order (whether or not its policyTypes name `dir`).
    pub fn rules(&self, dir: Direction) -> impl Iterator<Item = ResolvedRule<'e>> + 'e {
        let rules: &'e [NpRule] = match dir {
            Direction::Ingress => &self.compiled.ingress,
            Direction::Egress => &self.compiled.egress,
        };
        rules.iter().map(ResolvedRule::of)
    }
}

/// One rule of a [`ResolvedPolicy`]. In `networking.k8s.io/v1` an empty `from`/`to` or
/// `ports` list is the same as an absent one; both are `None` here.
#[derive(Debug, Clone)]
pub struct ResolvedRule<'e> {
    /// The peers; `None` matches every peer.
    pub peers: Option<Vec<ResolvedPeer<'e>>>,
    /// The ports as written; `None` matches every protocol and port.
    pub ports: Option<&'e [NetworkPolicyPort]>,
}

impl<'e> ResolvedRule<'e> {
    fn of(rule: &'e NpRule) -> ResolvedRule<'e> {
        ResolvedRule {
            peers: rule.peers.as_ref().map(|peers| {
                peers
                    .iter()
                    .map(|p| match p {
                        NpPeer::Pods(set) => ResolvedPeer::Pods(set),
                        NpPeer::IpBlock(b) => ResolvedPeer::IpBlock(b),
                    })
                    .collect()
            }),
            ports: rule.ports.as_deref(),
        }
    }
}

/// One peer of a [`ResolvedRule`].
#[derive(Debug, Clone, Copy)]
pub enum ResolvedPeer<'e> {
    /// The pods a pod and/or namespace selector selects (never host-network pods).
    Pods(&'e BitSet),
    /// An `ipBlock`: its CIDR minus its exceptions.
    IpBlock(&'e IpBlock),
}

/// Named container ports of the pods that can be policy peers (not host-network), indexed
/// by name and protocol.
#[derive(Debug, Clone, Default)]
pub struct NamedPorts {
    by_name: HashMap<(String, Protocol), Vec<(PodId, Port)>>,
}

impl NamedPorts {
    /// The pods that declare the port `name` with `protocol`, ascending, each with the
    /// number it gives it there.
    pub fn pods(&self, name: &str, protocol: Protocol) -> &[(PodId, Port)] {
        self.by_name
            .get(&(name.to_string(), protocol))
            .map_or(&[], Vec::as_slice)
    }

    /// The number `pod` gives the port `name` with `protocol`, if it declares one ("name
    /// and protocol must both match"; the first declaration wins).
    pub fn on(&self, pod: PodId, name: &str, protocol: Protocol) -> Option<Port> {
        let pods = self.pods(name, protocol);
        let at = pods.partition_point(|&(p, _)| p < pod);
        pods.get(at).filter(|&&(p, _)| p == pod).map(|&(_, n)| n)
    }
}

impl Engine {
    /// Every NetworkPolicy with its subject and peers resolved, in the cluster's order.
    pub fn resolved_network_policies(&self) -> impl Iterator<Item = ResolvedPolicy<'_>> {
        self.cluster
            .network_policies
            .iter()
            .zip(&self.nps)
            .map(|(policy, compiled)| ResolvedPolicy {
                policy,
                subject: &compiled.subject,
                compiled,
            })
    }

    /// The named container ports of every pod that can be a policy peer.
    pub fn named_ports(&self) -> NamedPorts {
        let mut by_name: HashMap<(String, Protocol), Vec<(PodId, Port)>> = HashMap::new();
        for pod in self.subjects.pods() {
            for cp in &self.cluster.pods[pod].ports {
                let Some(name) = &cp.name else { continue };
                let entry = by_name.entry((name.clone(), cp.protocol)).or_default();
                if entry.last().is_none_or(|&(p, _)| p != pod) {
                    entry.push((pod, cp.port));
                }
            }
        }
        NamedPorts { by_name }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;

    fn engine() -> Engine {
        let loaded = palisade_model::load_str(
            r#"
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x, labels: {app: a}}
spec: {containers: [{name: c, ports: [{containerPort: 80, name: web}, {containerPort: 53, name: dns, protocol: UDP}]}]}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: x, labels: {app: b}}
spec: {containers: [{name: c, ports: [{containerPort: 8080, name: web}]}]}
status: {podIP: 10.0.0.2}
---
apiVersion: v1
kind: Pod
metadata: {name: h, namespace: x, labels: {app: a}}
spec: {hostNetwork: true, containers: [{name: c, ports: [{containerPort: 9000, name: web}]}]}
status: {podIP: 192.168.0.1}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: p, namespace: x}
spec:
  podSelector: {matchLabels: {app: a}}
  ingress: [{from: [{podSelector: {matchLabels: {app: b}}}, {ipBlock: {cidr: 10.1.0.0/16}}], ports: []}, {from: []}]
"#,
        )
        .unwrap();
        Engine::new(loaded.cluster, Options::default())
    }

    #[test]
    fn policies_come_with_their_pod_sets() {
        let e = engine();
        let (a, b) = (e.pod_id("x", "a"), e.pod_id("x", "b"));
        let policies: Vec<_> = e.resolved_network_policies().collect();
        assert_eq!(policies.len(), 1, "one policy");
        let p = policies[0];
        assert_eq!(
            (p.policy.namespace.as_str(), p.policy.name.as_str()),
            ("x", "p")
        );
        assert_eq!(
            p.subject.pods().map(Some).collect::<Vec<_>>(),
            [a],
            "host-network pods are never subjects"
        );
        let rules: Vec<_> = p.rules(Direction::Ingress).collect();
        assert_eq!(rules.len(), 2, "rules in written order");
        let peers = rules[0].peers.as_deref().unwrap_or_default();
        assert!(
            matches!(peers, [ResolvedPeer::Pods(s), ResolvedPeer::IpBlock(_)] if s.pods().map(Some).eq([b])),
            "selector peers are pod sets: {peers:?}"
        );
        assert!(
            rules[0].ports.is_none(),
            "an empty ports list is an absent one"
        );
        assert!(
            rules[1].peers.is_none(),
            "an empty from list is an absent one"
        );
        assert_eq!(p.rules(Direction::Egress).count(), 0, "no egress rules");
    }

    #[test]
    fn named_ports_resolve_by_name_and_protocol() {
        let e = engine();
        let (a, b) = (e.pod_id("x", "a").unwrap(), e.pod_id("x", "b").unwrap());
        let n = e.named_ports();
        let numbers =
            |v: &[(PodId, Port)]| v.iter().map(|&(p, n)| (p, n.get())).collect::<Vec<_>>();
        assert_eq!(
            numbers(n.pods("web", Protocol::Tcp)),
            [(a, 80), (b, 8080)],
            "host-network pods excluded"
        );
        assert_eq!(
            n.on(a, "dns", Protocol::Udp).map(Port::get),
            Some(53),
            "name and protocol match"
        );
        assert_eq!(
            n.on(a, "dns", Protocol::Tcp),
            None,
            "the protocol must match too"
        );
        assert_eq!(n.on(b, "dns", Protocol::Udp), None, "b has no dns port");
        assert!(
            n.pods("nope", Protocol::Tcp).is_empty(),
            "unknown names resolve nowhere"
        );
    }
}
