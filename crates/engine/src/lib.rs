//! Palisade's evaluator: decides whether a connection is allowed under NetworkPolicy,
//! AdminNetworkPolicy, BaselineAdminNetworkPolicy and ClusterNetworkPolicy, and says why.
//!
//! [`Engine::new`] compiles a [`palisade_model::Cluster`]: selectors are resolved to pod
//! sets once, and every pod gets, per direction, the ordered list of policies that apply.
//! [`Engine::evaluate`] then decides a [`Flow`] side by side (egress at the source, ingress
//! at the destination), each through the tiers Admin → NetworkPolicy → Baseline → Default,
//! and returns a [`Verdict`] whose [`SideVerdict`]s name the tier, policy and rule.
//! [`Engine::explain`] adds the tier-by-tier walk and, where no rule matched, why each rule
//! did not ([`RuleMiss`]); [`Engine::port_segments`] gives the verdict on every run of ports
//! that the policies treat alike; [`Engine::matrix`] evaluates every pair of pods.
//!
//! On top of that: [`Engine::matrix`] (every pod pair), [`Engine::lint`] (policies that are
//! valid but likely wrong, [`lint`]), [`diff::diff`] (the connections two states decide
//! differently) and [`Engine::coverage`] (what each pod is covered by, and exposed to).
//!
//! ```
//! use palisade_engine::{Engine, Options, Flow};
//! use palisade_model::Protocol;
//! let loaded = palisade_model::load_str(r#"
//! apiVersion: v1
//! kind: Pod
//! metadata: {name: a, namespace: x}
//! status: {podIP: 10.0.0.1}
//! ---
//! apiVersion: networking.k8s.io/v1
//! kind: NetworkPolicy
//! metadata: {name: deny-all, namespace: x}
//! spec: {podSelector: {}}
//! "#).unwrap();
//! let engine = Engine::new(loaded.cluster, Options::default());
//! let a = engine.pod_id("x", "a").unwrap();
//! let flow = Flow {
//!     src: engine.endpoint_for_ip("192.0.2.1".parse().unwrap()),
//!     dst: engine.endpoint_for_pod(a, None).unwrap(),
//!     protocol: Protocol::Tcp,
//!     port: 80,
//! };
//! let v = engine.evaluate(&flow);
//! assert!(!v.allowed);
//! assert_eq!(v.ingress.tier, palisade_engine::Tier::NetworkPolicy);
//! ```

mod addressless;
mod bitset;
mod concrete;
pub mod coverage;
pub mod diff;
mod domains;
mod eval;
mod explain;
mod index;
mod json;
pub mod lint;
mod matrix;
mod new_peers;
mod ports;
mod resolved;
mod rows;
mod rule_parts;
mod service_matrix;
mod services;
mod state;
mod universe;
mod update;
mod verdict;
mod whynot;

pub use bitset::BitSet;
pub use concrete::{ConcreteRule, LearnedDomains, PeerAddrs, PortAlt, SideClasses, SideProgram};
pub use domains::DomainHit;
pub use eval::{Endpoint, EndpointKind, Flow};
pub use explain::{
    AdminStepCode, Explanation, NOT_REACHED, NamedEndpoint, PolicyMisses, PolicyOutcome,
    PolicyStep, SideWalk, StepTraits, SubjectTiers, TierStep, WalkPolicy, WalkShape,
    admin_outcome_text, admin_policy_head, admin_tier_line, network_outcome_text,
    network_policy_head, network_tier_line,
};
pub use matrix::{Distinction, Matrix, Probe};
pub use new_peers::{NewPeers, Reshaped};
pub use palisade_model::Change;
pub use ports::PortSegment;
pub use resolved::{NamedPorts, ResolvedPeer, ResolvedPolicy, ResolvedRule};
pub use service_matrix::{NotEvaluable, PortReach, ServiceCell, ServiceColumn, ServiceMatrix};
pub use services::{
    EndpointSource, EndpointVerdict, PortEndpoints, Reach, ServiceEndpoint, picks_port,
};
pub use state::{Engine, Options, PodId, Semantics};
pub use update::{PeerRule, Touched};
pub use verdict::{
    Decision, Exemption, PolicyInfo, RuleInPolicy, RuleMatch, SideVerdict, Tier, Verdict,
};
pub use whynot::{PeerMiss, PeerWhy, PortMiss, PortWhy, RuleMiss, RuleWhy};
