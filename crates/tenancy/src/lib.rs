//! The tenancy layer: admin-managed, grouped network policies for tools, following the
//! Thorium documentation's network-policy model, compiled into Kubernetes NetworkPolicies.
//!
//! A *group* is a namespace; a *tool* is the set of pods of one image in a group. Admins
//! write *network policies* (rules in a small vocabulary: `allowed_ips`, `allowed_groups`,
//! `allowed_tools`, `allowed_local`, `allowed_internet`, `allowed_all`, `allowed_custom`,
//! `ports`) and *base policies* that apply to every tool.
//!
//! Data moves in two steps:
//!
//! 1. [`Config::parse`] reads and merges the YAML files, parses every value into its
//!    precise type (CIDRs as `ipnet`, ports as [`palisade_model::PortRange`], protocols as
//!    [`palisade_model::Protocol`]) and validates the whole configuration: every error at
//!    once, with file, line and field ([`Error::Invalid`]). A [`Config`] is valid.
//! 2. [`compile`] turns a valid configuration into NetworkPolicies plus the labels each
//!    tool's pods must carry ([`Output`]); it cannot fail. [`Output::to_yaml`] renders them.
//!
//! [`Options`] name the platform API that the default base policy lets tools talk to; they
//! are validated when built. See `docs/tenancy.md`.
//!
//! ```
//! use palisade_tenancy::{Config, Options, State, compile};
//! let config = Config::parse([("t.yaml", r#"
//! groups: [corn]
//! tools: [{name: harvester, group: corn}]
//! network_policies:
//!   - name: web
//!     groups: [corn]
//!     egress: [{allowed_internet: true, ports: [{port: 443, protocol: TCP}]}]
//!     forced_policy: true
//! "#)])?;
//! let out = compile(&config, &Options::default(), &State::default());
//! assert_eq!(out.network_policies.len(), 2, "the default base policy and `web`");
//! assert_eq!(out.tool_labels["corn/harvester"].len(), 2, "the tool label and web's label");
//! assert!(out.to_yaml()?.contains("kind: NetworkPolicy"));
//! # Ok::<(), palisade_tenancy::Error>(())
//! ```

mod compile;
mod config;
mod error;
mod ranges;
mod raw;
mod render;
mod state;
mod validate;

pub use compile::{
    DEFAULT_BASE_NAME, DEFAULT_PLATFORM_LABELS, DEFAULT_PLATFORM_NAMESPACE, MANAGED_BY, Options,
    Output, POLICY_ANNOTATION, POLICY_LABEL_PREFIX, TOOL_LABEL, compile, default_base, k8s_name,
};
pub use config::{
    BasePolicy, Config, CustomRule, IpBlock, Label, Loc, Located, Policy, PortRule, Rule, Tool,
};
pub use error::Error;
pub use ranges::{INTERNET_V4, INTERNET_V6, LOCAL};
pub use state::State;
