//! The configuration format: `groups`, `tools`, `network_policies`, `base_network_policies`,
//! read from one or more YAML files and merged, every item remembering where it was written.

use std::collections::BTreeMap;
use std::sync::Arc;

use palisade_model::yaml::{LineMap, parse_documents};
use palisade_model::{Diagnostic, Severity};
use serde::Deserialize;
use serde_json::Value;

/// Where a config item was written, for error messages.
#[derive(Debug, Clone)]
pub struct Loc {
    file: Arc<str>,
    lines: Arc<LineMap>,
    /// Path of the item in its document (`network_policies[2]`).
    pub path: String,
}

impl Loc {
    /// A location for items Palisade itself supplies (the default base policy).
    pub fn synthetic() -> Loc {
        Loc {
            file: Arc::from("<built-in>"),
            lines: Arc::new(LineMap::default()),
            path: String::new(),
        }
    }

    /// An error about `field` of this item (empty field = the item itself).
    pub fn error(&self, field: &str, message: impl Into<String>) -> Diagnostic {
        let path = match (self.path.is_empty(), field.is_empty()) {
            (_, true) => self.path.clone(),
            (true, false) => field.to_string(),
            (false, false) => format!("{}.{field}", self.path),
        };
        Diagnostic {
            severity: Severity::Error,
            file: self.file.clone(),
            line: self.lines.line_of(&path).unwrap_or(1),
            object: String::new(),
            field: path,
            message: message.into(),
        }
    }
}

/// A tool: the pods of one image, in one group.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// Name, unique in its group.
    pub name: String,
    /// The group (namespace) it runs in.
    pub group: String,
    /// Policies attached to it (of its group); absent or empty = none chosen.
    #[serde(default)]
    pub network_policies: Vec<String>,
}

/// A network policy that admins manage and tools opt into.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Name, unique in each of its groups.
    pub name: String,
    /// Groups it belongs to.
    pub groups: Vec<String>,
    /// Ingress rules; absent = no restriction, empty = deny all ingress.
    #[serde(default)]
    pub ingress: Option<Vec<Rule>>,
    /// Egress rules; absent = no restriction, empty = deny all egress.
    #[serde(default)]
    pub egress: Option<Vec<Rule>>,
    /// Applies to every tool of its groups.
    #[serde(default)]
    pub forced_policy: bool,
    /// Attached to a new tool that chooses no policy.
    #[serde(default)]
    pub default_policy: bool,
}

/// A base policy: applies to every tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasePolicy {
    /// Name, unique among base policies.
    pub name: String,
    /// Ingress rules; absent = no restriction, empty = deny all ingress.
    #[serde(default)]
    pub ingress: Option<Vec<Rule>>,
    /// Egress rules; absent = no restriction, empty = deny all egress.
    #[serde(default)]
    pub egress: Option<Vec<Rule>>,
}

/// One rule: the peers it allows (all fields add up) and the ports it applies to.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Addresses and CIDRs.
    #[serde(default)]
    pub allowed_ips: Vec<IpRule>,
    /// Every pod of these groups.
    #[serde(default)]
    pub allowed_groups: Vec<String>,
    /// The pods of these tools (`tools` is the Thorium documentation's schema spelling).
    #[serde(default, alias = "tools")]
    pub allowed_tools: Vec<String>,
    /// The private address ranges.
    #[serde(default)]
    pub allowed_local: bool,
    /// The public address space.
    #[serde(default)]
    pub allowed_internet: bool,
    /// Every peer.
    #[serde(default)]
    pub allowed_all: bool,
    /// Ports; absent = every port of every protocol.
    #[serde(default)]
    pub ports: Option<Vec<PortRule>>,
    /// Pods and namespaces matched by labels.
    #[serde(default)]
    pub allowed_custom: Vec<CustomRule>,
}

/// An `allowed_ips` entry.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IpRule {
    /// A CIDR or a single address.
    pub cidr: String,
    /// CIDRs inside `cidr` to leave out.
    #[serde(default)]
    pub except: Vec<String>,
}

/// A `ports` entry.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PortRule {
    /// The port, or the first of a range.
    pub port: i64,
    /// The last port of the range.
    #[serde(default)]
    pub end_port: Option<i64>,
    /// TCP, UDP or SCTP; absent = all three.
    #[serde(default)]
    pub protocol: Option<String>,
}

/// An `allowed_custom` entry.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CustomRule {
    /// Labels the peer's namespace must all have.
    #[serde(default)]
    pub namespace_labels: Vec<Label>,
    /// Labels the peer pod must all have.
    #[serde(default)]
    pub pod_labels: Vec<Label>,
}

/// A key/value label.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Label {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
}

/// A value and where it was written.
#[derive(Debug, Clone)]
pub struct Located<T> {
    /// The value.
    pub value: T,
    /// Where.
    pub loc: Loc,
}

/// Every file's contents, merged.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `groups`.
    pub groups: Vec<Located<String>>,
    /// `tools`.
    pub tools: Vec<Located<Tool>>,
    /// `network_policies`.
    pub network_policies: Vec<Located<Policy>>,
    /// `base_network_policies`.
    pub base_network_policies: Vec<Located<BasePolicy>>,
}

const TOP_LEVEL: [&str; 4] = [
    "groups",
    "tools",
    "network_policies",
    "base_network_policies",
];

impl Config {
    /// Reads and merges named YAML texts; syntax and shape errors are all collected.
    pub fn parse<'a>(
        sources: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Config, Vec<Diagnostic>> {
        let mut config = Config::default();
        let mut errors = Vec::new();
        for (name, text) in sources {
            let file: Arc<str> = Arc::from(name);
            let docs = match parse_documents(text) {
                Ok(d) => d,
                Err(e) => {
                    let lines = Arc::new(LineMap::default());
                    let loc = Loc {
                        file: file.clone(),
                        lines,
                        path: String::new(),
                    };
                    let mut d = loc.error("", format!("YAML syntax error: {}", e.message));
                    d.line = e.line;
                    errors.push(d);
                    continue;
                }
            };
            for doc in docs {
                let lines = Arc::new(doc.lines);
                let top = Loc {
                    file: file.clone(),
                    lines: lines.clone(),
                    path: String::new(),
                };
                let Value::Object(map) = doc.value else {
                    errors.push(top.error("", "a configuration document must be a mapping"));
                    continue;
                };
                for (key, value) in map {
                    let at = |i: usize| Loc {
                        file: file.clone(),
                        lines: lines.clone(),
                        path: format!("{key}[{i}]"),
                    };
                    match key.as_str() {
                        "groups" => items(&value, &key, &top, at, &mut config.groups, &mut errors),
                        "tools" => items(&value, &key, &top, at, &mut config.tools, &mut errors),
                        "network_policies" => items(
                            &value,
                            &key,
                            &top,
                            at,
                            &mut config.network_policies,
                            &mut errors,
                        ),
                        "base_network_policies" => items(
                            &value,
                            &key,
                            &top,
                            at,
                            &mut config.base_network_policies,
                            &mut errors,
                        ),
                        other => errors.push(top.error(
                            other,
                            format!(
                                "unknown top-level key {other:?}: expected one of {}",
                                TOP_LEVEL.join(", ")
                            ),
                        )),
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(errors)
        }
    }
}

fn items<T: serde::de::DeserializeOwned>(
    value: &Value,
    key: &str,
    top: &Loc,
    at: impl Fn(usize) -> Loc,
    out: &mut Vec<Located<T>>,
    errors: &mut Vec<Diagnostic>,
) {
    let list = match value {
        Value::Array(a) => a.as_slice(),
        Value::Null => &[],
        _ => {
            errors.push(top.error(key, "must be a list"));
            return;
        }
    };
    for (i, item) in list.iter().enumerate() {
        let loc = at(i);
        let item = single_rules_as_lists(item);
        match serde_path_to_error::deserialize::<_, T>(&item) {
            Ok(value) => out.push(Located { value, loc }),
            Err(e) => {
                let p = e.path().to_string();
                let field = if p == "." { String::new() } else { p };
                errors.push(loc.error(&field, e.into_inner().to_string()));
            }
        }
    }
}

/// The Thorium documentation's allow-all example writes `ingress: {allowed_all: true}`: one
/// rule, not a list.
fn single_rules_as_lists(item: &Value) -> Value {
    let mut item = item.clone();
    if let Value::Object(m) = &mut item {
        for key in ["ingress", "egress"] {
            if let Some(v @ Value::Object(_)) = m.get_mut(key) {
                *v = Value::Array(vec![v.take()]);
            }
        }
    }
    item
}

/// Label map from key/value pairs.
pub(crate) fn label_map(labels: &[Label]) -> BTreeMap<String, String> {
    labels
        .iter()
        .map(|l| (l.key.clone(), l.value.clone()))
        .collect()
}
