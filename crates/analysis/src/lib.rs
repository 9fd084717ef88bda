//! The questions people ask of a network-policy state, answered from the trusted engine
//! ([`palisade_engine::Engine`]) through its query methods: every pod pair
//! ([`Analysis::matrix`]), one connection walked tier by tier with the reasons each rule
//! did not match ([`Analysis::explain`]), the runs of ports the policies treat alike
//! ([`Analysis::port_segments`]), policies that are valid but likely wrong
//! ([`Analysis::lint`]), the connections two states decide differently ([`diff::diff`]), and
//! what each pod is covered by and exposed to ([`Analysis::coverage`]).
//!
//! None of these decides a connection itself: each verdict comes from the engine, and each
//! rule part from [`palisade_engine::rule_parts`], so an analysis cannot disagree with what
//! the enforcers enforce.
//!
//! ```
//! use palisade_analysis::{Analysis, Probe};
//! use palisade_engine::{Engine, Options};
//! use palisade_model::Protocol;
//! let loaded = palisade_model::load_str(r#"
//! apiVersion: v1
//! kind: Pod
//! metadata: {name: a, namespace: x}
//! status: {podIP: 10.0.0.1}
//! ---
//! apiVersion: v1
//! kind: Pod
//! metadata: {name: b, namespace: x}
//! status: {podIP: 10.0.0.2}
//! ---
//! apiVersion: networking.k8s.io/v1
//! kind: NetworkPolicy
//! metadata: {name: deny-all, namespace: x}
//! spec: {podSelector: {}}
//! "#).unwrap();
//! let engine = Engine::new(loaded.cluster, Options::default());
//! let tcp_80 = Probe { protocol: Protocol::Tcp, port: 80 };
//! let matrix = Analysis::new(&engine).matrix(&[tcp_80]);
//! assert!(!matrix.allowed(0, 0, 1));
//! ```

mod coverage;
pub mod diff;
mod explain;
mod json;
pub mod lint;
mod matrix;
mod ports;
mod probes;
mod rows;
mod service_matrix;
mod universe;
mod whynot;

pub use coverage::{
    Coverage, EndpointAdmission, ExposedPorts, ExposedServicePort, Exposure, PodCoverage,
    SeenSource, ServiceExposure, SideCoverage,
};
pub use explain::{
    AdminStepCode, Explanation, NOT_REACHED, NamedEndpoint, PolicyMisses, PolicyOutcome,
    PolicyStep, SideWalk, StepTraits, SubjectTiers, TierStep, WalkPolicy, WalkShape,
    admin_outcome_text, admin_policy_head, admin_tier_line, network_outcome_text,
    network_policy_head, network_tier_line,
};
pub use matrix::{Distinction, Matrix};
use palisade_engine::Engine;
pub use ports::PortSegment;
pub use probes::Probe;
pub use service_matrix::{NotEvaluable, PortReach, ServiceCell, ServiceColumn, ServiceMatrix};
pub use whynot::{PeerMiss, PortMiss, RuleMiss, RuleWhy};

/// The analyses of one engine state. Cheap to make: it borrows the engine and keeps
/// nothing of its own.
#[derive(Debug, Clone, Copy)]
pub struct Analysis<'e> {
    engine: &'e Engine,
}

impl<'e> Analysis<'e> {
    /// The analyses of `engine`'s current state.
    pub fn new(engine: &'e Engine) -> Analysis<'e> {
        Analysis { engine }
    }

    /// The engine analysed.
    pub fn engine(&self) -> &'e Engine {
        self.engine
    }
}
