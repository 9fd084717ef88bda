//! Checks on Services with the policies of their endpoints: a NetworkPolicy port written for
//! the Service port instead of the target port, a Service no client may reach, one whose
//! endpoints admit its clients only in part, a selector that matches no pod.
//!
//! Policy is decided after kube-proxy's DNAT, at each endpoint's target port; reach is
//! decided from every representative client (a pod of each class, every node, every
//! outside region) to every endpoint, through [`Engine::evaluate_service_port`]; a node
//! reaching the pods on itself only by the node-local exemption (kubelet probes) does not
//! count as a client.

use std::collections::BTreeMap;
use std::sync::Arc;

use palisade_engine::rule_parts::ports_take;
use palisade_engine::{
    Decision, Endpoint, EndpointKind, Engine, Exemption, Flow, PolicyInfo, PortEndpoints, Reach,
    Verdict,
};
use palisade_model::{Direction, NetworkPolicyPort, Origin, Service, ServiceType};

use super::{Code, Finding, rules_path, some};
use crate::Analysis;
use crate::universe::Universe;

/// `file:line`, or `?` when the place is not known.
fn place(o: Option<&Origin>) -> String {
    o.map_or_else(|| "?".to_string(), |o| format!("{}:{}", o.file, o.line))
}

/// `NetworkPolicy x/a (policies.yaml:12)`.
fn named(p: &PolicyInfo) -> String {
    format!("{} ({})", p.reference, place(p.origin.as_ref()))
}

/// The policies that denied a connection: the deciding rule's, or the isolating ones.
fn deniers(v: &Verdict) -> Vec<Arc<PolicyInfo>> {
    [&v.egress, &v.ingress]
        .into_iter()
        .filter(|s| !s.allowed)
        .flat_map(|s| match &s.decision {
            Decision::Rule(m) => vec![m.policy.clone()],
            Decision::Isolated(by) => by.to_vec(),
            _ => Vec::new(),
        })
        .collect()
}

/// Whether a client's connection counts as reaching the endpoint: allowed, and not only by
/// the node-local exemption (which is there for the kubelet's probes, not for clients).
fn reaches(v: &Verdict) -> bool {
    v.allowed && !matches!(v.ingress.decision, Decision::Exempt(Exemption::NodeLocal))
}

/// A finding about a Service.
fn about(code: Code, svc: &Service, field: String) -> Finding {
    let mut f = Finding::at(
        code,
        format!("Service {}", svc.key()),
        Some(&svc.origin),
        field,
    );
    f.namespace = Some(svc.namespace.clone());
    f
}

impl Analysis<'_> {
    pub(crate) fn lint_services(&self, universe: &Universe, out: &mut Vec<Finding>) {
        let mut services: Vec<&Service> = self
            .engine
            .cluster()
            .services
            .iter()
            .filter(|s| s.service_type != ServiceType::ExternalName)
            .collect();
        services.sort_by_key(|s| (&s.namespace, &s.name));
        for svc in services {
            if self.lint_selects_nothing(svc, out) {
                continue;
            }
            for &v6 in &svc.families_v6 {
                for (i, port) in self
                    .engine
                    .service_endpoints(svc, v6)
                    .into_iter()
                    .enumerate()
                {
                    self.lint_port_written_for_service(svc, &port, out);
                    if !svc.headless {
                        self.lint_reach(universe, svc, i, &port, v6, out);
                    }
                }
            }
        }
    }

    /// PAL018: a selector that matches no pod of the Service's namespace.
    fn lint_selects_nothing(&self, svc: &Service, out: &mut Vec<Finding>) -> bool {
        let Some(selector) = svc.selector.as_ref().filter(|s| !s.is_empty()) else {
            return false;
        };
        let matches = self.engine.cluster().pods.iter().any(|p| {
            p.namespace == svc.namespace && selector.iter().all(|(k, v)| p.labels.get(k) == Some(v))
        });
        if matches {
            return false;
        }
        let labels: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push(
            about(Code::ServiceSelectsNothing, svc, "spec.selector".into()).says(
                format!(
                    "selector {} matches no pod of namespace {}: the Service has no endpoint",
                    labels.join(","),
                    svc.namespace
                ),
                "correct the selector to the labels of the pods' template, or lint the Service together with its pods",
            ),
        );
        true
    }

    /// PAL015: NetworkPolicy rules (ingress at an endpoint, egress towards one) whose ports
    /// take the Service port but not the target port the connection arrives at.
    fn lint_port_written_for_service(
        &self,
        svc: &Service,
        port: &PortEndpoints,
        out: &mut Vec<Finding>,
    ) {
        // (policy, direction, rule) -> endpoints it misses.
        let mut missed: BTreeMap<(usize, Direction, usize), Vec<String>> = BTreeMap::new();
        for e in &port.endpoints {
            let EndpointKind::Pod(pod) = e.at.kind else {
                continue;
            };
            if e.port == port.port.port {
                continue;
            }
            let flow = |n: u16| Flow {
                src: e.at,
                dst: e.at,
                protocol: port.port.protocol,
                port: n,
            };
            let (at_service, at_target) = (flow(port.port.port.get()), flow(e.port.get()));
            let takes = |ports: &[NetworkPolicyPort], f: &Flow| {
                ports_take(Some(ports), |p| self.engine.np_port_why(p, f))
            };
            for (i, np) in self.engine.network_policies().iter().enumerate() {
                for dir in [Direction::Ingress, Direction::Egress] {
                    let applies = |rule: &palisade_engine::NpRule| match dir {
                        Direction::Ingress => np.subject.contains(pod),
                        Direction::Egress => Engine::np_peers_match(rule, &e.at),
                    };
                    for (j, rule) in np.rules(dir).iter().enumerate() {
                        let Some(ports) = rule.ports.as_deref() else {
                            continue;
                        };
                        if applies(rule) && takes(ports, &at_service) && !takes(ports, &at_target) {
                            missed.entry((i, dir, j)).or_default().push(format!(
                                "{}:{}",
                                self.engine.cluster().pods[pod].key(),
                                e.port
                            ));
                        }
                    }
                }
            }
        }
        for ((i, dir, j), endpoints) in missed {
            let np = &self.engine.cluster().network_policies[i];
            let mut f = Finding::network(
                Code::ServicePortInPolicy,
                np,
                format!("{}[{j}].ports", rules_path(dir)),
            );
            f.message = format!(
                "admits {} {} (the port of Service {} at {}) but not the target port the connection arrives at on {}: policy is decided after the Service's DNAT",
                port.port.protocol,
                port.port.port,
                svc.key(),
                place(Some(&svc.origin)),
                some(&endpoints, 3)
            );
            f.fix = format!(
                "write the target port ({}) in the rule, not the Service port {}",
                port.port.target_port, port.port.port
            );
            out.push(f);
        }
    }

    /// PAL016 and PAL017: no client reaches any endpoint of a port, or some client reaches
    /// only some of them.
    fn lint_reach(
        &self,
        universe: &Universe,
        svc: &Service,
        index: usize,
        port: &PortEndpoints,
        v6: bool,
        out: &mut Vec<Finding>,
    ) {
        if port.endpoints.is_empty() {
            return;
        }
        let clients: Vec<Endpoint> = universe
            .peers
            .iter()
            .filter(|p| p.ip.is_ipv6() == v6)
            .copied()
            .collect();
        let mut any = false;
        let mut partial: Option<(Endpoint, Vec<Verdict>)> = None;
        let mut denied: Option<Verdict> = None;
        for c in &clients {
            let verdicts = self.engine.evaluate_service_port(*c, port);
            let allowed = verdicts.iter().filter(|v| reaches(&v.verdict)).count();
            any |= allowed > 0;
            if denied.is_none() {
                denied = verdicts
                    .iter()
                    .find(|v| !reaches(&v.verdict))
                    .map(|v| v.verdict.clone());
            }
            if partial.is_none() && Reach::of(allowed, verdicts.len()) == Reach::Some {
                let refused = verdicts
                    .into_iter()
                    .filter(|v| !reaches(&v.verdict))
                    .map(|v| v.verdict)
                    .collect();
                partial = Some((*c, refused));
            }
        }
        let field = format!("spec.ports[{index}]");
        let policies = |vs: &[Verdict]| {
            let mut names: Vec<String> = vs.iter().flat_map(deniers).map(|p| named(&p)).collect();
            names.sort();
            names.dedup();
            if names.is_empty() {
                "no policy named".to_string()
            } else {
                some(&names, 3)
            }
        };
        if !any {
            let why = denied.map_or_else(String::new, |v| policies(&[v]));
            out.push(
                about(Code::ServiceUnreachable, svc, field).says(
                    format!(
                        "no client (pod, node or outside address) may reach any of the {} endpoint(s) of port {} ({} {}): denied by {why}",
                        port.endpoints.len(),
                        port.port.label(),
                        port.port.protocol,
                        port.port.port
                    ),
                    "admit the Service's clients at the target port in the endpoints' policies, or remove the Service",
                ),
            );
        } else if let Some((client, refused)) = partial {
            let who = match client.kind {
                EndpointKind::Pod(p) => self.engine.cluster().pods[p].key(),
                _ => client.ip.to_string(),
            };
            out.push(
                about(Code::ServicePartlyAdmitted, svc, field).says(
                    format!(
                        "{who} reaches only {} of the {} endpoint(s) of port {} ({} {}): its connections fail depending on the endpoint chosen; refused by {}",
                        port.endpoints.len() - refused.len(),
                        port.endpoints.len(),
                        port.port.label(),
                        port.port.protocol,
                        port.port.port,
                        policies(&refused)
                    ),
                    "give every pod the Service selects the same policies, or narrow the selector to the pods that admit its clients",
                ),
            );
        }
    }
}
