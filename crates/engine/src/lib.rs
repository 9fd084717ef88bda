//! Palisade's evaluator: decides whether a connection is allowed under NetworkPolicy,
//! AdminNetworkPolicy, BaselineAdminNetworkPolicy and ClusterNetworkPolicy, and says why.
//!
//! [`Engine::new`] compiles a [`palisade_model::Cluster`]: selectors are resolved to pod
//! sets once, and every pod gets, per direction, the ordered list of policies that apply.
//! [`Engine::evaluate`] then decides a [`Flow`] side by side (egress at the source, ingress
//! at the destination), each through the tiers Admin → NetworkPolicy → Baseline → Default,
//! and returns a [`Verdict`] whose [`SideVerdict`]s name the tier, policy and rule.
//! [`Engine::apply`] keeps it current under changes and says which pods they touched
//! ([`Touched`]); [`Engine::side_classes`] and [`Engine::resolved_network_policies`] give
//! the concrete and resolved rule sets that the enforcers compile.
//!
//! This crate is the trusted core: what it decides, the enforcers enforce. The questions
//! asked of a state (matrix, explain and why-not, lint, diff, coverage) live beside it in
//! `palisade-analysis` and read it only through the query methods of [`Engine`] and the
//! read-only compiled policies ([`CompiledNp`], [`CompiledAdmin`]); each rule part is
//! decided in one place, [`rule_parts`], which eval and the analyses share.
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

mod address_cache;
mod addressless;
mod bitset;
mod concrete;
mod domains;
mod eval;
mod fast_map;
mod group;
mod index;
pub mod json;
mod new_peers;
mod resolved;
pub mod rule_parts;
mod services;
mod state;
mod update;
mod verdict;

pub use address_cache::AddressCache;
pub use addressless::{addressless, addressless_ip};
pub use bitset::{BitSet, intersect_transposed};
pub use concrete::{
    ConcreteRule, LearnedDomains, PeerAddrs, PortAlt, Rules, SideClasses, SideProgram,
};
pub use domains::DomainHit;
pub use eval::{Endpoint, EndpointKind, Flow};
pub use fast_map::{FastHasher, FastMap, FastSet};
pub use group::{first_equal, first_equal_fast};
pub use new_peers::{Moved, NewPeers, Reshaped};
pub use palisade_model::Change;
pub use resolved::{NamedPorts, ResolvedPeer, ResolvedPolicy, ResolvedRule};
pub use rule_parts::{PeerWhy, PortWhy};
pub use services::{
    EndpointSource, EndpointVerdict, PortEndpoints, Reach, ServiceEndpoint, picks_port,
};
pub use state::{
    AdminPeerC, AdminRuleC, CompiledAdmin, CompiledNp, Engine, Isolating, NpPeer, NpRule, NsScope,
    Options, Owner, PodId, PodPolicies, Semantics,
};
pub use update::{IdChange, PeerRule, RenewedSet, Touched};
pub use verdict::{
    Decision, Exemption, PolicyInfo, RuleInPolicy, RuleMatch, SideVerdict, Tier, Verdict,
};
