//! Verdicts and their explanations.
//!
//! A [`Verdict`] is self-contained: every policy it names is an [`Arc<PolicyInfo>`], a
//! snapshot of the policy's identity and rule names taken when the engine compiled it. A
//! verdict kept across [`crate::Engine::apply`] therefore still names the policy that
//! decided it, and needs no engine to be printed or serialized.

use std::fmt;
use std::sync::Arc;

use palisade_model::{
    Action, AdminPolicy, Direction, NetworkPolicy, Origin, PolicyKind, PolicyRef,
};

/// A policy as verdicts name it: kind, namespace and name, its priority (admin tiers),
/// where it was read, and the names of its rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PolicyInfo {
    /// Kind, namespace and name.
    pub reference: PolicyRef,
    /// Priority within its tier (admin policies only).
    pub priority: Option<i32>,
    /// Where it was read (absent for a namespace created implicitly).
    pub origin: Option<Origin>,
    ingress_rules: Vec<Option<String>>,
    egress_rules: Vec<Option<String>>,
}

impl PolicyInfo {
    /// The snapshot of a NetworkPolicy (its rules have no names).
    pub fn network(np: &NetworkPolicy) -> PolicyInfo {
        PolicyInfo {
            reference: np.reference(),
            priority: None,
            origin: Some(np.origin.clone()),
            ingress_rules: Vec::new(),
            egress_rules: Vec::new(),
        }
    }

    /// The snapshot of an AdminNetworkPolicy, BaselineAdminNetworkPolicy or ClusterNetworkPolicy.
    pub fn admin(p: &AdminPolicy) -> PolicyInfo {
        let names = |dir| p.rules(dir).iter().map(|r| r.name.clone()).collect();
        PolicyInfo {
            reference: p.reference(),
            priority: Some(p.priority),
            origin: Some(p.origin.clone()),
            ingress_rules: names(Direction::Ingress),
            egress_rules: names(Direction::Egress),
        }
    }

    /// The legacy DefaultDeny annotation of namespace `ns`.
    pub fn namespace_annotation(ns: &palisade_model::Namespace) -> PolicyInfo {
        PolicyInfo {
            reference: PolicyRef {
                kind: PolicyKind::NamespaceDefaultDeny,
                namespace: Some(ns.name.clone()),
                name: ns.name.clone(),
            },
            priority: None,
            origin: ns.origin.clone(),
            ingress_rules: Vec::new(),
            egress_rules: Vec::new(),
        }
    }

    /// The name of rule `index` of direction `dir`, when it has one.
    pub fn rule_name(&self, dir: Direction, index: u32) -> Option<&str> {
        let names = match dir {
            Direction::Ingress => &self.ingress_rules,
            Direction::Egress => &self.egress_rules,
        };
        names.get(index as usize)?.as_deref()
    }

    /// The action as this policy's kind spells it (`Accept` in a ClusterNetworkPolicy).
    pub fn action_name(&self, action: Action) -> &'static str {
        match (action, self.reference.kind) {
            (Action::Allow, PolicyKind::ClusterNetworkPolicy) => "Accept",
            (Action::Allow, _) => "Allow",
            (Action::Deny, _) => "Deny",
            (Action::Pass, _) => "Pass",
        }
    }

    /// `NetworkPolicy x/deny (policies.yaml:3)`: the reference and where it was read.
    pub fn with_origin(&self) -> String {
        match &self.origin {
            Some(o) => format!("{} ({}:{})", self.reference, o.file, o.line),
            None => self.reference.to_string(),
        }
    }
}

impl fmt::Display for PolicyInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.reference.fmt(f)
    }
}

/// The tier that decided one side of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// No policy applies to this side (not a pod, a host-network pod, the pod itself, node-local traffic).
    Exempt,
    /// AdminNetworkPolicies and Admin-tier ClusterNetworkPolicies.
    Admin,
    /// NetworkPolicies (and the legacy namespace annotation).
    NetworkPolicy,
    /// The BaselineAdminNetworkPolicy and Baseline-tier ClusterNetworkPolicies.
    Baseline,
    /// Nothing decided: allowed.
    Default,
    /// The endpoint cannot be told apart from another pod (they share an address), so no
    /// policy can be enforced for it: denied.
    FailClosed,
}

impl Tier {
    /// Display name.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Exempt => "Exempt",
            Tier::Admin => "Admin",
            Tier::NetworkPolicy => "NetworkPolicy",
            Tier::Baseline => "Baseline",
            Tier::Default => "Default",
            Tier::FailClosed => "FailClosed",
        }
    }
}

/// Why a side is not subject to policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exemption {
    /// The endpoint is not a pod (an external address).
    External,
    /// The endpoint is a node's host address (a node, or a host-network pod).
    Host,
    /// The source and destination are the same pod.
    SamePod,
    /// The source is the host address of the destination pod's own node.
    NodeLocal,
}

impl Exemption {
    /// The stable name used in JSON (`External`, `Host`, `SamePod`, `NodeLocal`).
    pub fn as_str(self) -> &'static str {
        match self {
            Exemption::External => "External",
            Exemption::Host => "Host",
            Exemption::SamePod => "SamePod",
            Exemption::NodeLocal => "NodeLocal",
        }
    }

    /// A sentence for explanations.
    pub fn describe(self) -> &'static str {
        match self {
            Exemption::External => {
                "the endpoint is outside the cluster; no policy applies on this side"
            }
            Exemption::Host => {
                "the endpoint is a node's host address (a node or a host-network pod); no policy applies on this side"
            }
            Exemption::SamePod => "a pod can always reach itself",
            Exemption::NodeLocal => {
                "traffic from the pod's own node is always allowed (kubelet probes)"
            }
        }
    }
}

/// A rule that matched.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RuleMatch {
    /// The policy.
    pub policy: Arc<PolicyInfo>,
    /// The direction of the rule list.
    pub direction: Direction,
    /// Index of the rule in that list.
    pub index: u32,
    /// What the match did (NetworkPolicy rules are `Allow`).
    pub action: Action,
    /// The rule matched only because a peer it could not understand fails closed.
    pub fail_closed: bool,
}

impl RuleMatch {
    /// The rule's name, when it has one.
    pub fn rule_name(&self) -> Option<&str> {
        self.policy.rule_name(self.direction, self.index)
    }

    /// The action as the policy's kind spells it.
    pub fn action_name(&self) -> &'static str {
        self.policy.action_name(self.action)
    }

    /// `egress rule 0 "block" (Deny)`: the rule without its policy.
    pub fn in_policy(&self) -> RuleInPolicy<'_> {
        RuleInPolicy(self)
    }
}

/// [`RuleMatch::in_policy`]: displays a rule without naming its policy.
pub struct RuleInPolicy<'a>(&'a RuleMatch);

impl fmt::Display for RuleInPolicy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{} rule {}",
            m.direction.as_str().to_lowercase(),
            m.index
        )?;
        if let Some(name) = m.rule_name() {
            write!(f, " {name:?}")?;
        }
        write!(f, " ({}", m.action_name())?;
        if m.fail_closed {
            f.write_str(", failing closed on a peer it cannot evaluate")?;
        }
        f.write_str(")")
    }
}

/// `AdminNetworkPolicy deny-x, egress rule 0 "block" (Deny)`.
impl fmt::Display for RuleMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, {}", self.policy, self.in_policy())
    }
}

/// How one side was decided.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Decision {
    /// No policy applies to this side.
    Exempt(Exemption),
    /// A rule decided (admin, NetworkPolicy or baseline).
    Rule(RuleMatch),
    /// The pod is isolated in this direction by these policies and no rule of theirs matched.
    Isolated(Arc<[Arc<PolicyInfo>]>),
    /// No tier decided.
    NoPolicy,
    /// The pod shares this address with another pod; denied in both directions.
    SharedAddress(std::net::IpAddr),
}

/// `Admin tier: AdminNetworkPolicy x, ingress rule 0 (Pass)`, or
/// `NetworkPolicy tier: isolated by NetworkPolicy x/a and no rule matched`: what decided,
/// without the outcome.
impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Exempt(e) => f.write_str(e.describe()),
            Decision::Rule(m) => write!(f, "{m}"),
            Decision::Isolated(by) => {
                f.write_str("isolated by ")?;
                for (i, p) in by.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{p}")?;
                }
                f.write_str(" and no rule matched")
            }
            Decision::NoPolicy => f.write_str("no policy decided; allowed by default"),
            Decision::SharedAddress(ip) => write!(
                f,
                "the pod shares its address {ip} with another pod, so no policy can be enforced for it; failing closed"
            ),
        }
    }
}

/// The decision for one side (egress at the source, or ingress at the destination).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SideVerdict {
    /// Whether this side allows the connection.
    pub allowed: bool,
    /// The tier that decided.
    pub tier: Tier,
    /// How.
    pub decision: Decision,
    /// Pass rules that sent the evaluation on to a later tier, in order.
    pub passes: Vec<RuleMatch>,
}

impl SideVerdict {
    pub(crate) fn shared_address(ip: std::net::IpAddr) -> SideVerdict {
        SideVerdict {
            allowed: false,
            tier: Tier::FailClosed,
            decision: Decision::SharedAddress(ip),
            passes: Vec::new(),
        }
    }

    pub(crate) fn exempt(e: Exemption) -> SideVerdict {
        SideVerdict {
            allowed: true,
            tier: Tier::Exempt,
            decision: Decision::Exempt(e),
            passes: Vec::new(),
        }
    }
}

/// `denied: Admin tier: AdminNetworkPolicy deny-x, egress rule 0 "block" (Deny)`.
impl fmt::Display for SideVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.allowed {
            "allowed: "
        } else {
            "denied: "
        })?;
        match &self.decision {
            d @ (Decision::Rule(_) | Decision::Isolated(_)) => {
                write!(f, "{} tier: {d}", self.tier.as_str())?
            }
            d => write!(f, "{d}")?,
        }
        for m in &self.passes {
            write!(f, " (after Pass by {m})")?;
        }
        Ok(())
    }
}

/// The verdict on a connection: allowed iff both sides allow it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Verdict {
    /// Egress at the source and ingress at the destination both allow it.
    pub allowed: bool,
    /// Egress side (at the source).
    pub egress: SideVerdict,
    /// Ingress side (at the destination).
    pub ingress: SideVerdict,
}

/// `ALLOWED` or `DENIED`, then one line per side.
impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", if self.allowed { "ALLOWED" } else { "DENIED" })?;
        writeln!(f, "  egress:  {}", self.egress)?;
        write!(f, "  ingress: {}", self.ingress)
    }
}
