//! Palisade's object model: the Kubernetes objects that decide network connectivity, read
//! from YAML or JSON manifests and validated as the API server would validate them.
//!
//! This crate is the boundary: everything downstream works on the precise types here
//! ([`Cluster`], [`NetworkPolicy`], [`AdminPolicy`], [`Selector`], [`Port`], …) and never
//! re-parses a string. Loading collects *every* problem with its file, line and field path
//! ([`Diagnostic`]) before failing.
//!
//! ```
//! let loaded = palisade_model::load_str(r#"
//! apiVersion: networking.k8s.io/v1
//! kind: NetworkPolicy
//! metadata: {name: deny, namespace: x}
//! spec: {podSelector: {}}
//! "#).unwrap();
//! let np = &loaded.cluster.network_policies[0];
//! assert!(np.policy_types.ingress && !np.policy_types.egress);
//! ```

mod change;
mod convert;
mod diag;
pub mod digest;
pub mod dns;
mod load;
mod object;
mod objects;
mod service;
pub mod tree;
mod types;
pub mod validate;
pub mod yaml;

pub use change::{Change, SharedChange};
pub use convert::core::{LEGACY_ISOLATION_ANNOTATION, NAMESPACE_NAME_LABEL};
pub use convert::stand_in::StandIn;
pub use convert::workload::{WorkloadKind, workload_of};
pub use diag::{Diagnostic, Severity};
pub use dns::{DnsEntry, DnsMap, DomainPattern};
pub use load::{
    Body, Decoded, Invalid, LoadError, LoadOptions, Loaded, MAX_SOURCE_BYTES, MAX_TOTAL_BYTES,
    STDIN_NAME, decode_bodies, decode_texts, load_bodies, load_paths, load_sources, load_str,
    read_paths,
};
pub use object::{Kind, Object, ObjectKey};
pub use objects::*;
pub use service::*;
pub use types::*;
