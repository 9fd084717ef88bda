//! The configuration as written: the shapes serde reads before [`crate::config`] turns
//! them into precise types. Nothing outside the loader sees these.

use serde::Deserialize;

/// A `tools` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Tool {
    pub name: String,
    pub group: String,
    #[serde(default)]
    pub network_policies: Vec<String>,
}

/// A `network_policies` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Policy {
    pub name: String,
    pub groups: Vec<String>,
    #[serde(default)]
    pub ingress: Option<Vec<Rule>>,
    #[serde(default)]
    pub egress: Option<Vec<Rule>>,
    #[serde(default)]
    pub forced_policy: bool,
    #[serde(default)]
    pub default_policy: bool,
}

/// A `base_network_policies` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BasePolicy {
    pub name: String,
    #[serde(default)]
    pub ingress: Option<Vec<Rule>>,
    #[serde(default)]
    pub egress: Option<Vec<Rule>>,
}

/// A rule as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rule {
    #[serde(default)]
    pub allowed_ips: Vec<IpRule>,
    #[serde(default)]
    pub allowed_groups: Vec<String>,
    /// `tools` is the spelling of the Thorium documentation's schema table.
    #[serde(default, alias = "tools")]
    pub allowed_tools: Vec<String>,
    #[serde(default)]
    pub allowed_local: bool,
    #[serde(default)]
    pub allowed_internet: bool,
    #[serde(default)]
    pub allowed_all: bool,
    #[serde(default)]
    pub ports: Option<Vec<PortRule>>,
    #[serde(default)]
    pub allowed_custom: Vec<CustomRule>,
}

/// An `allowed_ips` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IpRule {
    pub cidr: String,
    #[serde(default)]
    pub except: Vec<String>,
}

/// A `ports` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PortRule {
    pub port: i64,
    #[serde(default)]
    pub end_port: Option<i64>,
    #[serde(default)]
    pub protocol: Option<String>,
}

/// An `allowed_custom` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CustomRule {
    #[serde(default)]
    pub namespace_labels: Vec<Label>,
    #[serde(default)]
    pub pod_labels: Vec<Label>,
}

/// A `{key, value}` label as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Label {
    pub key: String,
    pub value: String,
}
