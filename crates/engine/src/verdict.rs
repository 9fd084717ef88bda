//! Verdicts and their explanations.

use palisade_model::{Action, Direction};

/// Identifies a policy inside an [`crate::Engine`]; [`crate::Engine::policy_ref`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PolicyId {
    /// Index into the cluster's NetworkPolicies.
    Network(u32),
    /// Index into the cluster's admin policies (ANP, BANP, CNP).
    Admin(u32),
    /// The legacy DefaultDeny annotation of the namespace with this index.
    NamespaceAnnotation(u32),
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleMatch {
    /// The policy.
    pub policy: PolicyId,
    /// The direction of the rule list.
    pub direction: Direction,
    /// Index of the rule in that list.
    pub index: u32,
    /// What the match did (NetworkPolicy rules are `Allow`).
    pub action: Action,
    /// The rule matched only because a peer it could not understand fails closed.
    pub fail_closed: bool,
}

/// How one side was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// No policy applies to this side.
    Exempt(Exemption),
    /// A rule decided (admin, NetworkPolicy or baseline).
    Rule(RuleMatch),
    /// The pod is isolated in this direction and no rule of the isolating policies matched;
    /// [`crate::Engine::isolating`] lists them.
    Isolated,
    /// No tier decided.
    NoPolicy,
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
    pub(crate) fn exempt(e: Exemption) -> SideVerdict {
        SideVerdict {
            allowed: true,
            tier: Tier::Exempt,
            decision: Decision::Exempt(e),
            passes: Vec::new(),
        }
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
