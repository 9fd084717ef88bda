//! Explanations: the verdict on a flow with the tier-by-tier walk that led to it, as data
//! ([`Explanation`]) that renders as text (`Display`) and serializes as JSON.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use palisade_model::{Direction, Protocol};

use crate::eval::{EndpointKind, Flow};
use crate::state::{Engine, PodId};
use crate::verdict::{Decision, PolicyInfo, RuleMatch, SideVerdict, Tier, Verdict};
use crate::whynot::RuleMiss;

/// An endpoint as explanations print it: `x/a`, `node n1 (10.0.0.1)`, or the address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedEndpoint {
    /// The name.
    pub name: String,
    /// The address on the wire.
    pub ip: IpAddr,
}

/// What one policy of an admin tier did for a flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyOutcome {
    /// This rule matched (it decided, or passed to a later tier).
    Matched(RuleMatch),
    /// The policy was evaluated and none of its rules matched.
    NoRuleMatched,
    /// An earlier policy of the tier decided first.
    NotReached,
}

/// One policy of an admin tier, in evaluation order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyStep {
    /// The policy.
    pub policy: Arc<PolicyInfo>,
    /// What it did.
    pub outcome: PolicyOutcome,
    /// When no rule matched: each rule and why it did not match ("why not").
    pub misses: Vec<RuleMiss>,
}

/// A NetworkPolicy that isolates the pod, with each of its rules and why it did not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyMisses {
    /// The policy.
    pub policy: Arc<PolicyInfo>,
    /// Its rules of the side's direction, each with why it did not match (empty: it has none).
    pub rules: Vec<RuleMiss>,
}

/// One tier the evaluation of a side went through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TierStep {
    /// The Admin or Baseline tier: the policies selecting the pod, in evaluation order
    /// (empty when none does).
    AdminTier {
        /// [`Tier::Admin`] or [`Tier::Baseline`].
        tier: Tier,
        /// The policies.
        policies: Vec<PolicyStep>,
    },
    /// The NetworkPolicy tier: the policies isolating the pod (empty: not isolated).
    NetworkPolicyTier {
        /// The isolating policies.
        isolated_by: Arc<[Arc<PolicyInfo>]>,
        /// When isolated and no rule matched: each isolating NetworkPolicy's rules and why
        /// none matched ("why not").
        misses: Vec<PolicyMisses>,
    },
}

/// The walk of one side: the tiers visited, in order (empty when the side is exempt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideWalk {
    /// Egress (at the source) or ingress (at the destination).
    pub direction: Direction,
    /// The endpoint whose policies were walked.
    pub at: NamedEndpoint,
    /// The tiers.
    pub steps: Vec<TierStep>,
}

/// A flow's verdict and how each side reached it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The source.
    pub from: NamedEndpoint,
    /// The destination.
    pub to: NamedEndpoint,
    /// Protocol.
    pub protocol: Protocol,
    /// Destination port.
    pub port: u16,
    /// The verdict.
    pub verdict: Verdict,
    /// How egress at the source was decided.
    pub egress: SideWalk,
    /// How ingress at the destination was decided.
    pub ingress: SideWalk,
}

impl NamedEndpoint {
    /// The address, or `no address yet` for a workload's representative pod.
    pub fn address(&self) -> String {
        if crate::addressless::addressless_ip(&self.ip) {
            "no address yet".into()
        } else {
            self.ip.to_string()
        }
    }
}

impl Engine {
    /// `x/a`, `node NAME` (a node's own address, a host-network pod's too), or the address;
    /// renderings add the address once.
    pub fn endpoint_name(&self, kind: EndpointKind, ip: IpAddr) -> String {
        match kind {
            EndpointKind::Pod(p) => self.cluster.pods[p].key(),
            EndpointKind::Host(Some(n)) => format!("node {}", self.cluster.nodes[n].name),
            EndpointKind::Host(None) | EndpointKind::External => ip.to_string(),
        }
    }

    /// Decides `flow` and records the tier-by-tier walk of both sides.
    pub fn explain(&self, flow: &Flow) -> Explanation {
        let verdict = self.evaluate(flow);
        let named = |kind, ip| NamedEndpoint {
            name: self.endpoint_name(kind, ip),
            ip,
        };
        let walk = |side: &SideVerdict, kind: EndpointKind, ip, direction| SideWalk {
            direction,
            at: named(kind, ip),
            steps: match (kind, &side.decision) {
                (_, Decision::Exempt(_)) => Vec::new(),
                (EndpointKind::Pod(p), _) => self.walk(p, direction, side, flow),
                _ => Vec::new(),
            },
        };
        Explanation {
            from: named(flow.src.kind, flow.src.ip),
            to: named(flow.dst.kind, flow.dst.ip),
            protocol: flow.protocol,
            port: flow.port,
            egress: walk(
                &verdict.egress,
                flow.src.kind,
                flow.src.ip,
                Direction::Egress,
            ),
            ingress: walk(
                &verdict.ingress,
                flow.dst.kind,
                flow.dst.ip,
                Direction::Ingress,
            ),
            verdict,
        }
    }

    /// The "why not" of a side that the NetworkPolicy tier denied by isolation, as
    /// `explain` prints it: the isolating policies, then each one's rules and why none
    /// matched (empty for any other side). Cheaper than [`Engine::explain`]: the Admin and
    /// Baseline tiers are not walked.
    pub fn isolation_why_not(&self, flow: &Flow, side: &SideVerdict, dir: Direction) -> String {
        let at = match dir {
            Direction::Egress => flow.src.kind,
            Direction::Ingress => flow.dst.kind,
        };
        let (EndpointKind::Pod(pod), Decision::Isolated(_), Tier::NetworkPolicy) =
            (at, &side.decision, side.tier)
        else {
            return String::new();
        };
        let names: Vec<String> = self
            .isolating(pod, dir)
            .iter()
            .map(|p| p.with_origin())
            .collect();
        let misses: Vec<PolicyMisses> = self
            .counting_nps(pod, dir)
            .map(|i| PolicyMisses {
                policy: self.nps[i as usize].info.clone(),
                rules: self.np_misses(i, dir, flow),
            })
            .collect();
        let mut out = format!(
            "  NetworkPolicy tier: isolated for {} by {}\n",
            dir.as_str().to_lowercase(),
            names.join(", ")
        );
        // Writing to a String cannot fail.
        let _ = write_policy_misses(&mut out, &misses, dir);
        out
    }

    /// The tiers `side` went through for `pod`.
    fn walk(&self, pod: PodId, dir: Direction, side: &SideVerdict, flow: &Flow) -> Vec<TierStep> {
        let lists = self.policies(pod, dir);
        let matches: Vec<&RuleMatch> = side
            .passes
            .iter()
            .chain(match &side.decision {
                Decision::Rule(m) => Some(m),
                _ => None,
            })
            .collect();
        let admin_tier = |tier: Tier, ids: &[u32]| {
            let mut decided = false;
            let policies = ids
                .iter()
                .map(|&i| {
                    let policy = self.admins[i as usize].info.clone();
                    let here = matches.iter().find(|m| Arc::ptr_eq(&m.policy, &policy));
                    let outcome = match here {
                        _ if decided => PolicyOutcome::NotReached,
                        Some(m) => {
                            decided = true;
                            PolicyOutcome::Matched((*m).clone())
                        }
                        None => PolicyOutcome::NoRuleMatched,
                    };
                    let misses = match outcome {
                        PolicyOutcome::NoRuleMatched => self.admin_misses(i, pod, dir, flow),
                        _ => Vec::new(),
                    };
                    PolicyStep {
                        policy,
                        outcome,
                        misses,
                    }
                })
                .collect();
            TierStep::AdminTier { tier, policies }
        };
        let mut steps = vec![admin_tier(Tier::Admin, &lists.admin)];
        if side.tier == Tier::Admin {
            return steps;
        }
        let isolated_by = if self.isolated(pod, dir) {
            self.isolating(pod, dir)
        } else {
            Arc::from([])
        };
        let isolated = !isolated_by.is_empty();
        let misses = match side.decision {
            Decision::Isolated(_) if side.tier == Tier::NetworkPolicy => self
                .counting_nps(pod, dir)
                .map(|i| PolicyMisses {
                    policy: self.nps[i as usize].info.clone(),
                    rules: self.np_misses(i, dir, flow),
                })
                .collect(),
            _ => Vec::new(),
        };
        steps.push(TierStep::NetworkPolicyTier {
            isolated_by,
            misses,
        });
        if !isolated {
            steps.push(admin_tier(Tier::Baseline, &lists.baseline));
        }
        steps
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} ({}) -> {} ({}) {}/{}: {}",
            self.from.name,
            self.from.address(),
            self.to.name,
            self.to.address(),
            self.protocol,
            self.port,
            if self.verdict.allowed {
                "ALLOWED"
            } else {
                "DENIED"
            }
        )?;
        for (walk, side) in [
            (&self.egress, &self.verdict.egress),
            (&self.ingress, &self.verdict.ingress),
        ] {
            writeln!(f, "\n{} at {}:", walk.direction.as_str(), walk.at.name)?;
            let dir = walk.direction.as_str().to_lowercase();
            for step in &walk.steps {
                match step {
                    TierStep::AdminTier { tier, policies } if policies.is_empty() => writeln!(
                        f,
                        "  {} tier: no policy selects this pod for {dir}",
                        tier.as_str()
                    )?,
                    TierStep::AdminTier { tier, policies } => {
                        writeln!(f, "  {} tier, in priority order:", tier.as_str())?;
                        for s in policies {
                            let origin = s
                                .policy
                                .origin
                                .as_ref()
                                .map(|o| format!(", {}:{}", o.file, o.line))
                                .unwrap_or_default();
                            write!(
                                f,
                                "    {} (priority {}{origin}): ",
                                s.policy,
                                s.policy.priority.unwrap_or_default()
                            )?;
                            match &s.outcome {
                                PolicyOutcome::Matched(m) => {
                                    writeln!(f, "matched {}", m.in_policy())?
                                }
                                PolicyOutcome::NoRuleMatched => {
                                    writeln!(f, "no rule matched")?;
                                    for m in &s.misses {
                                        writeln!(f, "      {}", MissLine(m, walk.direction))?;
                                    }
                                }
                                PolicyOutcome::NotReached => writeln!(f, "not reached")?,
                            }
                        }
                    }
                    TierStep::NetworkPolicyTier { isolated_by, .. } if isolated_by.is_empty() => {
                        writeln!(f, "  NetworkPolicy tier: not isolated for {dir}")?
                    }
                    TierStep::NetworkPolicyTier {
                        isolated_by,
                        misses,
                    } => {
                        let names: Vec<String> =
                            isolated_by.iter().map(|p| p.with_origin()).collect();
                        writeln!(
                            f,
                            "  NetworkPolicy tier: isolated for {dir} by {}",
                            names.join(", ")
                        )?;
                        write_policy_misses(f, misses, walk.direction)?;
                    }
                }
            }
            writeln!(f, "  => {side}")?;
        }
        Ok(())
    }
}

/// Each isolating NetworkPolicy's rules and why none matched, as `explain` prints them.
fn write_policy_misses(
    f: &mut impl fmt::Write,
    misses: &[PolicyMisses],
    direction: Direction,
) -> fmt::Result {
    let dir = direction.as_str().to_lowercase();
    for pm in misses {
        if pm.rules.is_empty() {
            writeln!(f, "    {}: no {dir} rule (it only isolates)", pm.policy)?;
            continue;
        }
        writeln!(f, "    {}: no rule matched", pm.policy)?;
        for m in &pm.rules {
            writeln!(f, "      {}", MissLine(m, direction))?;
        }
    }
    Ok(())
}

/// `ingress rule 0 "name": ports TCP/443 (another port); from podSelector {app=b} (the
/// pod's labels do not match)`: one rule and why it did not match.
struct MissLine<'a>(&'a RuleMiss, Direction);

impl fmt::Display for MissLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (m, dir) = (self.0, self.1);
        write!(f, "{} rule {}", dir.as_str().to_lowercase(), m.index)?;
        if let Some(name) = &m.name {
            write!(f, " {name:?}")?;
        }
        f.write_str(": ")?;
        if !m.ports.is_empty() {
            let ports: Vec<String> = m
                .ports
                .iter()
                .map(|p| format!("{} ({})", p.port, p.why))
                .collect();
            write!(f, "ports {}", ports.join(", "))?;
            if !m.peers.is_empty() {
                f.write_str("; ")?;
            }
        }
        if !m.peers.is_empty() {
            let side = match dir {
                Direction::Ingress => "from",
                Direction::Egress => "to",
            };
            let peers: Vec<String> = m
                .peers
                .iter()
                .map(|p| format!("{} ({})", p.peer, p.why))
                .collect();
            write!(f, "{side} {}", peers.join(", "))?;
        }
        Ok(())
    }
}
