//! The tenancy layer: admin-managed, grouped network policies for tools (the model of the
//! Thorium documentation), compiled into Kubernetes NetworkPolicies.
//!
//! A *group* is a namespace; a *tool* is the set of pods of one image in a group. Admins
//! write *network policies* (rules in a small vocabulary: `allowed_ips`, `allowed_groups`,
//! `allowed_tools`, `allowed_local`, `allowed_internet`, `allowed_all`, `allowed_custom`,
//! `ports`) and *base policies* that apply to every tool. [`Config::parse`] reads and
//! merges the YAML files; [`compile`] validates everything (all errors at once, with file,
//! line and field) and returns the NetworkPolicies plus the labels each tool's pods must
//! carry. See `docs/tenancy.md`.
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
//! "#)]).unwrap();
//! let out = compile(&config, &Options::default(), &State::default()).unwrap();
//! assert_eq!(out.network_policies.len(), 2, "the default base policy and `web`");
//! assert_eq!(out.tool_labels["corn/harvester"].len(), 2, "the tool label and web's label");
//! ```

mod compile;
mod config;
mod ranges;
mod state;

pub use compile::{
    MANAGED_BY, Options, Output, POLICY_ANNOTATION, POLICY_LABEL_PREFIX, TOOL_LABEL, compile,
    default_base, k8s_name,
};
pub use config::{
    BasePolicy, Config, CustomRule, IpRule, Label, Loc, Located, Policy, PortRule, Rule, Tool,
};
pub use ranges::{INTERNET_V4, INTERNET_V6, LOCAL};
pub use state::State;
