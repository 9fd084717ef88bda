//! Human-readable renderings of verdicts: one-line summaries and the tier-by-tier walk.

use std::fmt::Write;

use palisade_model::{AdminTier, Direction};

use crate::eval::{EndpointKind, Flow};
use crate::state::{Engine, PodId};
use crate::verdict::{Decision, PolicyId, RuleMatch, SideVerdict, Tier};

impl Engine {
    /// `x/a`, a node name, or the address.
    pub fn endpoint_name(&self, kind: EndpointKind, ip: std::net::IpAddr) -> String {
        match kind {
            EndpointKind::Pod(p) => self.cluster.pods[p].key(),
            EndpointKind::Host(Some(n)) => format!("node {} ({ip})", self.cluster.nodes[n].name),
            EndpointKind::Host(None) | EndpointKind::External => ip.to_string(),
        }
    }

    /// `AdminNetworkPolicy deny-x, egress rule 0 "block" (Deny)`.
    pub fn describe_rule(&self, m: &RuleMatch) -> String {
        format!(
            "{}, {}",
            self.policy_ref(m.policy),
            self.describe_rule_in_policy(m)
        )
    }

    /// `egress rule 0 "block" (Deny)`: the rule without its policy.
    pub fn describe_rule_in_policy(&self, m: &RuleMatch) -> String {
        let dir = m.direction.as_str().to_lowercase();
        let (name, action) = match m.policy {
            PolicyId::Admin(i) => {
                let p = &self.cluster.admin_policies[i as usize];
                let name = p
                    .rules(m.direction)
                    .get(m.index as usize)
                    .and_then(|r| r.name.clone());
                (name, p.action_name(m.action))
            }
            _ => (None, "Allow"),
        };
        let name = name.map(|n| format!(" {n:?}")).unwrap_or_default();
        let closed = if m.fail_closed {
            ", failing closed on a peer it cannot evaluate"
        } else {
            ""
        };
        format!("{dir} rule {}{name} ({action}{closed})", m.index)
    }

    /// One line: what decided this side.
    pub fn describe_side(&self, side: &SideVerdict, pod: Option<PodId>, dir: Direction) -> String {
        let word = if side.allowed { "allowed" } else { "denied" };
        let what = match &side.decision {
            Decision::Exempt(e) => e.describe().to_string(),
            Decision::Rule(m) => format!("{} tier: {}", side.tier.as_str(), self.describe_rule(m)),
            Decision::Isolated => {
                let names: Vec<String> = pod
                    .map(|p| {
                        self.isolating(p, dir)
                            .into_iter()
                            .map(|id| self.policy_ref(id).to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                format!(
                    "NetworkPolicy tier: isolated by {} and no rule matched",
                    names.join(", ")
                )
            }
            Decision::NoPolicy => "no policy decided; allowed by default".to_string(),
        };
        let passes: Vec<String> = side
            .passes
            .iter()
            .map(|m| format!(" (after Pass by {})", self.describe_rule(m)))
            .collect();
        format!("{word}: {what}{}", passes.join(""))
    }

    /// A walk through the tiers for both sides of `flow`.
    pub fn explain(&self, flow: &Flow) -> String {
        let v = self.evaluate(flow);
        let mut out = String::new();
        let src = self.endpoint_name(flow.src.kind, flow.src.ip);
        let dst = self.endpoint_name(flow.dst.kind, flow.dst.ip);
        let _ = writeln!(
            out,
            "{src} ({}) -> {dst} ({}) {}/{}: {}",
            flow.src.ip,
            flow.dst.ip,
            flow.protocol,
            flow.port,
            if v.allowed { "ALLOWED" } else { "DENIED" }
        );
        for (side, kind, dir, who) in [
            (&v.egress, flow.src.kind, Direction::Egress, &src),
            (&v.ingress, flow.dst.kind, Direction::Ingress, &dst),
        ] {
            let _ = writeln!(out, "\n{} at {who}:", dir.as_str());
            let pod = match kind {
                EndpointKind::Pod(p) => Some(p),
                _ => None,
            };
            match (pod, &side.decision) {
                (Some(p), d) if !matches!(d, Decision::Exempt(_)) => {
                    self.walk(&mut out, p, dir, side)
                }
                _ => {}
            }
            let _ = writeln!(out, "  => {}", self.describe_side(side, pod, dir));
        }
        out
    }

    /// A policy's name and where it was read: `NetworkPolicy x/deny (policies.yaml:3)`.
    fn policy_with_origin(&self, id: PolicyId) -> String {
        let origin = match id {
            PolicyId::Network(i) => Some(&self.cluster.network_policies[i as usize].origin),
            PolicyId::Admin(i) => Some(&self.cluster.admin_policies[i as usize].origin),
            PolicyId::NamespaceAnnotation(i) => self.cluster.namespaces[i as usize].origin.as_ref(),
        };
        match origin {
            Some(o) => format!("{} ({}:{})", self.policy_ref(id), o.file, o.line),
            None => self.policy_ref(id).to_string(),
        }
    }

    fn walk(&self, out: &mut String, pod: PodId, dir: Direction, side: &SideVerdict) {
        let lists = self.policies(pod, dir);
        let decided_at = |tier: Tier| side.tier == tier;
        let admin_tier = |out: &mut String, ids: &[u32], tier: AdminTier, label: &str| {
            if ids.is_empty() {
                let _ = writeln!(
                    out,
                    "  {label} tier: no policy selects this pod for {}",
                    dir.as_str().to_lowercase()
                );
                return;
            }
            let decisive = side
                .passes
                .iter()
                .chain(match &side.decision {
                    Decision::Rule(m) => Some(m),
                    _ => None,
                })
                .find(|m| matches!(m.policy, PolicyId::Admin(i) if self.cluster.admin_policies[i as usize].tier == tier));
            let _ = writeln!(out, "  {label} tier, in priority order:");
            for &i in ids {
                let p = &self.cluster.admin_policies[i as usize];
                let here = decisive.filter(|m| m.policy == PolicyId::Admin(i));
                let status = match here {
                    Some(m) => format!("matched {}", self.describe_rule_in_policy(m)),
                    None if decisive.is_some_and(|m| {
                        ids.iter().position(|&x| PolicyId::Admin(x) == m.policy)
                            < ids.iter().position(|&x| x == i)
                    }) =>
                    {
                        "not reached".to_string()
                    }
                    None => "no rule matched".to_string(),
                };
                let _ = writeln!(
                    out,
                    "    {} (priority {}, {}:{}): {status}",
                    p.reference(),
                    p.priority,
                    p.origin.file,
                    p.origin.line
                );
            }
        };
        admin_tier(out, &lists.admin, AdminTier::Admin, "Admin");
        if decided_at(Tier::Admin) {
            return;
        }
        let isolating = self.isolating(pod, dir);
        if self.isolated(pod, dir) {
            let names: Vec<String> = isolating
                .iter()
                .map(|id| self.policy_with_origin(*id))
                .collect();
            let _ = writeln!(
                out,
                "  NetworkPolicy tier: isolated for {} by {}",
                dir.as_str().to_lowercase(),
                names.join(", ")
            );
            return;
        }
        let _ = writeln!(
            out,
            "  NetworkPolicy tier: not isolated for {}",
            dir.as_str().to_lowercase()
        );
        admin_tier(out, &lists.baseline, AdminTier::Baseline, "Baseline");
    }
}
