//! Explanations: the verdict on a flow with the tier-by-tier walk that led to it, as data
//! ([`Explanation`]) that renders as text (`Display`) and serializes as JSON.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use palisade_engine::{
    Decision, EndpointKind, Flow, PodId, PolicyInfo, RuleMatch, SideVerdict, Tier, Verdict,
};
use palisade_model::{
    Action, AdminPort, ContainerPort, Direction, NamespaceMatch, PortSpec, Protocol,
};

use crate::Analysis;
use crate::whynot::{RuleMiss, RuleWhy};

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
        if palisade_engine::addressless_ip(&self.ip) {
            "no address yet".into()
        } else {
            self.ip.to_string()
        }
    }
}

impl<'e> Analysis<'e> {
    /// `x/a`, `node NAME` (a node's own address, a host-network pod's too), or the address;
    /// renderings add the address once.
    pub fn endpoint_name(&self, kind: EndpointKind, ip: IpAddr) -> String {
        match kind {
            EndpointKind::Pod(p) => self.engine.cluster().pods[p].key(),
            EndpointKind::Host(Some(n)) => format!("node {}", self.engine.cluster().nodes[n].name),
            EndpointKind::Host(None) | EndpointKind::External => ip.to_string(),
        }
    }

    /// Decides `flow` and records the tier-by-tier walk of both sides.
    pub fn explain(&self, flow: &Flow) -> Explanation {
        self.explain_verdict(flow, self.engine.evaluate(flow))
    }

    /// [`Analysis::explain`] for a connection through a Service address (see
    /// [`palisade_engine::Engine::evaluate_through_service`]).
    pub fn explain_through_service(&self, flow: &Flow) -> Explanation {
        let verdict = self.engine.evaluate_through_service(flow);
        self.explain_verdict(flow, verdict)
    }

    /// The walk of both sides of `flow`, which `verdict` decided.
    pub(crate) fn explain_verdict(&self, flow: &Flow, verdict: Verdict) -> Explanation {
        let named = |kind, ip| NamedEndpoint {
            name: self.endpoint_name(kind, ip),
            ip,
        };
        let walk = |side: &SideVerdict, kind: EndpointKind, ip, direction| SideWalk {
            direction,
            at: named(kind, ip),
            steps: match (kind, WalkShape::of(kind, side)) {
                (EndpointKind::Pod(p), shape) if shape.walked => {
                    self.walk(p, direction, shape, flow)
                }
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

    /// The tiers a side of `shape` went through for `pod`.
    fn walk(&self, pod: PodId, dir: Direction, shape: WalkShape, flow: &Flow) -> Vec<TierStep> {
        let tiers = self.subject_tiers(pod, dir);
        let admin_tier = |tier: Tier, ids: &[u32]| {
            let mut decided = false;
            let policies = ids
                .iter()
                .map(|&i| {
                    if decided {
                        return PolicyStep {
                            policy: self.engine.admin_policies()[i as usize].info.clone(),
                            outcome: PolicyOutcome::NotReached,
                            misses: Vec::new(),
                        };
                    }
                    let step = self.admin_step(i, pod, dir, flow);
                    decided = matches!(step.outcome, PolicyOutcome::Matched(_));
                    step
                })
                .collect();
            TierStep::AdminTier { tier, policies }
        };
        let mut steps = vec![admin_tier(Tier::Admin, &tiers.admin)];
        if shape.stops_at_admin {
            return steps;
        }
        let isolated = !tiers.isolated_by.is_empty();
        let misses = match shape.lists_network_rules {
            true => tiers
                .network
                .iter()
                .map(|&i| self.np_step(i, dir, flow))
                .collect(),
            false => Vec::new(),
        };
        steps.push(TierStep::NetworkPolicyTier {
            isolated_by: tiers.isolated_by,
            misses,
        });
        if !isolated {
            steps.push(admin_tier(Tier::Baseline, &tiers.baseline));
        }
        steps
    }

    /// The policy a [`WalkPolicy`] names.
    pub fn walk_policy(&self, policy: WalkPolicy) -> &'e Arc<PolicyInfo> {
        match policy {
            WalkPolicy::Admin(i) => &self.engine.admin_policies()[i as usize].info,
            WalkPolicy::Network(i) => &self.engine.network_policies()[i as usize].info,
        }
    }

    /// The policies a walk of `pod`'s side in `dir` goes through, tier by tier.
    pub fn subject_tiers(&self, pod: PodId, dir: Direction) -> SubjectTiers {
        let lists = self.engine.policies(pod, dir);
        SubjectTiers {
            admin: lists.admin.clone(),
            network: self.engine.counting_nps(pod, dir).collect(),
            baseline: lists.baseline.clone(),
            isolated_by: if self.engine.isolated(pod, dir) {
                self.engine.isolating(pod, dir)
            } else {
                Arc::from([])
            },
        }
    }

    /// What admin policy `admin` (an index of [`SubjectTiers::admin`] or
    /// [`SubjectTiers::baseline`]) did with `flow` for subject `pod`: the first of its rules
    /// that matched, or each rule and why it did not match.
    pub fn admin_step(&self, admin: u32, pod: PodId, dir: Direction, flow: &Flow) -> PolicyStep {
        let policy = self.engine.admin_policies()[admin as usize].info.clone();
        match self.admin_first_rule(admin, pod, dir, flow) {
            Some(m) => PolicyStep {
                policy,
                outcome: PolicyOutcome::Matched(m),
                misses: Vec::new(),
            },
            None => PolicyStep {
                policy,
                outcome: PolicyOutcome::NoRuleMatched,
                misses: self.admin_misses(admin, pod, dir, flow),
            },
        }
    }

    /// [`Analysis::admin_step`] as reasons only: equal codes read the same.
    pub fn admin_step_code(
        &self,
        admin: u32,
        pod: PodId,
        dir: Direction,
        flow: &Flow,
    ) -> AdminStepCode {
        match self.admin_first_rule(admin, pod, dir, flow) {
            Some(m) => AdminStepCode::Matched {
                index: m.index,
                action: m.action,
                fail_closed: m.fail_closed,
            },
            None => AdminStepCode::NoRuleMatched(self.admin_whys(admin, pod, dir, flow)),
        }
    }

    fn admin_first_rule(
        &self,
        admin: u32,
        pod: PodId,
        dir: Direction,
        flow: &Flow,
    ) -> Option<RuleMatch> {
        (0..self.engine.cluster().admin_policies[admin as usize]
            .rules(dir)
            .len())
            .find_map(|index| self.engine.admin_rule_match(admin, index, pod, dir, flow))
    }

    /// Each rule of isolating NetworkPolicy `np` (an index of [`SubjectTiers::network`]) and
    /// why it did not match `flow` (none of them did: the side was denied by isolation).
    pub fn np_step(&self, np: u32, dir: Direction, flow: &Flow) -> PolicyMisses {
        PolicyMisses {
            policy: self.engine.network_policies()[np as usize].info.clone(),
            rules: self.np_misses(np, dir, flow),
        }
    }

    /// What a step of policy `policy` in the walk of `pod`'s side depends on about `pod`,
    /// besides the policy selecting it: pods whose traits are equal get the same step for
    /// the same other end, protocol and port.
    pub fn step_traits(&self, policy: WalkPolicy, pod: PodId, dir: Direction) -> StepTraits {
        let (relations, named) = match policy {
            WalkPolicy::Admin(i) => {
                let rules = self.engine.cluster().admin_policies[i as usize].rules(dir);
                let relations = rules.iter().flat_map(|r| &r.peers).any(|p| {
                    matches!(
                        p,
                        palisade_model::AdminPeer::Namespaces(m)
                            | palisade_model::AdminPeer::Pods { namespaces: m, .. }
                            if !matches!(m, NamespaceMatch::Selector(_))
                    )
                });
                let named = rules
                    .iter()
                    .flat_map(|r| r.ports.iter().flatten())
                    .any(|p| matches!(p, AdminPort::Named(_)));
                (relations, named)
            }
            WalkPolicy::Network(i) => {
                let rules = self.engine.cluster().network_policies[i as usize].rules(dir);
                let named = rules
                    .iter()
                    .flat_map(|r| r.ports.iter().flatten())
                    .any(|p| matches!(p.port, PortSpec::Named(_)));
                (false, named)
            }
        };
        // Egress: the source's address picks the destination's family.
        let source_v6 = (dir == Direction::Egress)
            .then(|| {
                self.engine
                    .endpoint_for_pod(pod, None)
                    .map(|e| e.ip.is_ipv6())
            })
            .flatten();
        StepTraits {
            source_v6,
            namespace: relations.then(|| self.engine.pod_namespace(pod)),
            ports: (named && dir == Direction::Ingress)
                .then(|| self.engine.cluster().pods[pod].ports.clone()),
        }
    }
}

/// Which parts of its tier walk a side shows; `explain` and the matrix page read it alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WalkShape {
    /// A walk is shown: the side is a pod's and policy decided it (not exempt, not failing
    /// closed on a shared address before any policy was evaluated).
    pub walked: bool,
    /// The Admin tier decided: the later tiers are not shown.
    pub stops_at_admin: bool,
    /// The NetworkPolicy tier denied by isolation: each isolating policy's rules and why
    /// none matched are shown.
    pub lists_network_rules: bool,
}

impl WalkShape {
    /// The shape of the walk of `side`, decided at endpoint `at`.
    pub fn of(at: EndpointKind, side: &SideVerdict) -> WalkShape {
        WalkShape {
            walked: matches!(at, EndpointKind::Pod(_))
                && !matches!(
                    side.decision,
                    Decision::Exempt(_) | Decision::SharedAddress(_)
                ),
            stops_at_admin: side.tier == Tier::Admin,
            lists_network_rules: side.tier == Tier::NetworkPolicy
                && matches!(side.decision, Decision::Isolated(_)),
        }
    }
}

/// The policies a side's walk goes through for one pod, tier by tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectTiers {
    /// Admin tier policies selecting the pod, in evaluation order.
    pub admin: Vec<u32>,
    /// NetworkPolicies that count for the pod in this direction.
    pub network: Vec<u32>,
    /// Baseline tier policies selecting the pod, in evaluation order.
    pub baseline: Vec<u32>,
    /// The policies isolating the pod (empty: not isolated).
    pub isolated_by: Arc<[Arc<PolicyInfo>]>,
}

/// A policy of a walk: an admin policy (Admin or Baseline tier) or a NetworkPolicy, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WalkPolicy {
    /// An index of [`SubjectTiers::admin`] or [`SubjectTiers::baseline`].
    Admin(u32),
    /// An index of [`SubjectTiers::network`].
    Network(u32),
}

/// What a policy's step depends on about the subject pod (see [`Analysis::step_traits`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StepTraits {
    /// Egress: the family of the source address, which picks the destination's address.
    source_v6: Option<bool>,
    /// The subject's namespace, when the policy relates namespaces (`sameLabels`, `related`).
    namespace: Option<usize>,
    /// Ingress: the subject's container ports, when the policy names ports.
    ports: Option<Vec<ContainerPort>>,
}

/// What one admin policy did with a flow, as reasons only (see [`Analysis::admin_step_code`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AdminStepCode {
    /// This rule matched.
    Matched {
        /// Its index.
        index: u32,
        /// What it did.
        action: Action,
        /// Whether it fails closed on a peer Palisade cannot evaluate.
        fail_closed: bool,
    },
    /// No rule matched: each one's reasons.
    NoRuleMatched(Vec<RuleWhy>),
}

/// `  Admin tier, in priority order:`, or `  Admin tier: no policy selects this pod for
/// egress` when `any` is false: the first line of an admin tier's walk.
pub fn admin_tier_line(tier: Tier, dir: Direction, any: bool) -> String {
    if any {
        format!("  {} tier, in priority order:", tier.as_str())
    } else {
        format!(
            "  {} tier: no policy selects this pod for {}",
            tier.as_str(),
            dir.as_str().to_lowercase()
        )
    }
}

/// `  NetworkPolicy tier: isolated for ingress by NAME (FILE:LINE), ...`, or `not isolated`.
pub fn network_tier_line(isolated_by: &[Arc<PolicyInfo>], dir: Direction) -> String {
    let dir = dir.as_str().to_lowercase();
    if isolated_by.is_empty() {
        return format!("  NetworkPolicy tier: not isolated for {dir}");
    }
    let names: Vec<String> = isolated_by.iter().map(|p| p.with_origin()).collect();
    format!(
        "  NetworkPolicy tier: isolated for {dir} by {}",
        names.join(", ")
    )
}

/// `    KIND NAME (priority N, FILE:LINE)`: how an admin tier's walk names a policy, before
/// `: ` and its outcome.
pub fn admin_policy_head(policy: &PolicyInfo) -> String {
    let origin = policy
        .origin
        .as_ref()
        .map(|o| format!(", {}:{}", o.file, o.line))
        .unwrap_or_default();
    format!(
        "    {} (priority {}{origin})",
        policy,
        policy.priority.unwrap_or_default()
    )
}

/// What follows an admin policy's head: `matched RULE`, `no rule matched` and one line per
/// rule with why it did not match, or `not reached`.
pub fn admin_outcome_text(step: &PolicyStep, dir: Direction) -> String {
    match &step.outcome {
        PolicyOutcome::Matched(m) => format!("matched {}", m.in_policy()),
        PolicyOutcome::NoRuleMatched => {
            let mut out = String::from("no rule matched");
            for m in &step.misses {
                out.push_str(&format!("\n      {}", MissLine(m, dir)));
            }
            out
        }
        PolicyOutcome::NotReached => NOT_REACHED.into(),
    }
}

/// The outcome of an admin policy after an earlier one of its tier decided.
pub const NOT_REACHED: &str = "not reached";

/// `    KIND NAME`: how the NetworkPolicy tier's why-not names a policy, before `: `.
pub fn network_policy_head(policy: &PolicyInfo) -> String {
    format!("    {policy}")
}

/// What follows an isolating NetworkPolicy's head: `no rule matched` and one line per rule
/// with why it did not match, or `no ingress rule (it only isolates)`.
pub fn network_outcome_text(misses: &PolicyMisses, dir: Direction) -> String {
    if misses.rules.is_empty() {
        return format!("no {} rule (it only isolates)", dir.as_str().to_lowercase());
    }
    let mut out = String::from("no rule matched");
    for m in &misses.rules {
        out.push_str(&format!("\n      {}", MissLine(m, dir)));
    }
    out
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
            for step in &walk.steps {
                match step {
                    TierStep::AdminTier { tier, policies } => {
                        let dir = walk.direction;
                        writeln!(f, "{}", admin_tier_line(*tier, dir, !policies.is_empty()))?;
                        for s in policies {
                            let head = admin_policy_head(&s.policy);
                            writeln!(f, "{head}: {}", admin_outcome_text(s, dir))?;
                        }
                    }
                    TierStep::NetworkPolicyTier {
                        isolated_by,
                        misses,
                    } => {
                        writeln!(f, "{}", network_tier_line(isolated_by, walk.direction))?;
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
    for pm in misses {
        let head = network_policy_head(&pm.policy);
        writeln!(f, "{head}: {}", network_outcome_text(pm, direction))?;
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
