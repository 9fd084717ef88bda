//! Egress isolation without a DNS allowance: pods whose egress side denies UDP 53 to every
//! DNS server (the pods labelled `k8s-app=kube-dns`, or every address when the input has
//! none) can no longer resolve names.

use std::collections::BTreeMap;

use palisade_engine::{Decision, Endpoint, EndpointKind, Flow, PodId};
use palisade_model::{Direction, PolicyKind, PolicyRef, Protocol};

use super::{Code, Finding, some};
use crate::Analysis;
use crate::universe::Universe;

/// The label of the cluster DNS pods (CoreDNS and kube-dns alike).
const DNS_LABEL: (&str, &str) = ("k8s-app", "kube-dns");

impl Analysis<'_> {
    pub(crate) fn lint_dns(&self, universe: &Universe, out: &mut Vec<Finding>) {
        let servers: Vec<Endpoint> = self
            .engine
            .subjects()
            .pods()
            .filter(|&p| {
                self.engine.cluster().pods[p]
                    .labels
                    .get(DNS_LABEL.0)
                    .map(String::as_str)
                    == Some(DNS_LABEL.1)
            })
            .filter_map(|p| self.engine.endpoint_for_pod(p, None))
            .collect();
        let (servers, where_) = if servers.is_empty() {
            (universe.peers.clone(), "any address")
        } else {
            (servers, "the cluster DNS pods (k8s-app=kube-dns)")
        };
        // The decision that blocks DNS, by the policy (and rule) to blame, with the pods.
        let mut blocked: BTreeMap<(PolicyRef, String), (Decision, Vec<PodId>)> = BTreeMap::new();
        for members in &universe.classes {
            let pod = members[0];
            if !self.engine.is_subject(pod) || self.engine.shared_address(pod).is_some() {
                continue;
            }
            let Some(decision) = self.dns_blocked(pod, &servers) else {
                continue;
            };
            let (blame, field) = match &decision {
                Decision::Rule(m) => (
                    m.policy.reference.clone(),
                    format!("spec.egress[{}]", m.index),
                ),
                Decision::Isolated(by) => match by.first() {
                    Some(p) => (p.reference.clone(), "spec.policyTypes".to_string()),
                    None => continue,
                },
                _ => continue,
            };
            let entry = blocked
                .entry((blame, field))
                .or_insert_with(|| (decision.clone(), Vec::new()));
            entry.1.extend(members.iter().copied());
        }
        for ((blame, field), (decision, pods)) in blocked {
            let mut names: Vec<String> = pods
                .iter()
                .map(|&p| self.engine.cluster().pods[p].key())
                .collect();
            names.sort();
            let finding = match blame.kind {
                PolicyKind::NetworkPolicy => self
                    .engine
                    .cluster()
                    .network_policies
                    .iter()
                    .find(|np| np.reference() == blame)
                    .map(|np| Finding::network(Code::EgressWithoutDns, np, field)),
                _ => self
                    .engine
                    .cluster()
                    .admin_policies
                    .iter()
                    .find(|p| p.reference() == blame)
                    .map(|p| Finding::admin(Code::EgressWithoutDns, p, field)),
            };
            let Some(f) = finding else { continue };
            out.push(f.says(
                format!(
                    "{} pod(s) ({}) cannot resolve names: egress on UDP 53 to {where_} is denied ({decision})",
                    names.len(),
                    some(&names, 3)
                ),
                "allow egress to the DNS pods: to [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}, podSelector: {matchLabels: {k8s-app: kube-dns}}}], ports [{protocol: UDP, port: 53}, {protocol: TCP, port: 53}]",
            ));
        }
    }

    /// When `pod`'s egress side denies UDP 53 to every server: the decision for the first.
    fn dns_blocked(&self, pod: PodId, servers: &[Endpoint]) -> Option<Decision> {
        let mut first = None;
        for server in servers {
            if matches!(server.kind, EndpointKind::Pod(q) if q == pod) {
                continue;
            }
            let Some(src) = self.engine.endpoint_for_pod(pod, Some(server.ip.is_ipv6())) else {
                continue;
            };
            let flow = Flow {
                src,
                dst: *server,
                protocol: Protocol::Udp,
                port: 53,
            };
            let side = self.engine.decide(pod, Direction::Egress, &flow);
            if side.allowed {
                return None;
            }
            first.get_or_insert(side.decision);
        }
        first
    }
}
