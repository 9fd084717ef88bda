//! The configuration format: `groups`, `tools`, `network_policies`, `base_network_policies`,
//! read from one or more YAML files and merged, every item remembering where it was written.
//!
//! Loading parses every value once into its precise type (CIDRs as [`IpNet`], ports as
//! [`PortRange`], protocols as [`Protocol`]) and then validates the whole configuration
//! (see [`crate::validate`]); a [`Config`] that [`Config::parse`] returns is valid.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use palisade_model::validate::{dns_label, label_value, parse_cidr, qualified_name};
use palisade_model::yaml::{LineMap, parse_documents};
use palisade_model::{Diagnostic, Port, PortRange, Protocol, Severity};
use serde::Serialize;
use serde::ser::SerializeStruct;
use serde_json::Value;

use crate::error::Error;
use crate::raw;

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
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// Name, unique in its group; a valid Kubernetes label value (it labels the pods).
    pub name: String,
    /// The group (namespace) it runs in.
    pub group: String,
    /// Policies attached to it (of its group); absent or empty = none chosen.
    pub network_policies: Vec<String>,
}

/// A network policy that admins manage and tools opt into.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Name, unique in each of its groups.
    pub name: String,
    /// Groups it belongs to.
    pub groups: Vec<String>,
    /// Ingress rules; absent = no restriction, empty = deny all ingress.
    pub ingress: Option<Vec<Rule>>,
    /// Egress rules; absent = no restriction, empty = deny all egress.
    pub egress: Option<Vec<Rule>>,
    /// Applies to every tool of its groups.
    pub forced_policy: bool,
    /// Attached to a new tool that chooses no policy.
    pub default_policy: bool,
}

/// A base policy: applies to every tool.
#[derive(Debug, Clone, PartialEq)]
pub struct BasePolicy {
    /// Name, unique among base policies.
    pub name: String,
    /// Ingress rules; absent = no restriction, empty = deny all ingress.
    pub ingress: Option<Vec<Rule>>,
    /// Egress rules; absent = no restriction, empty = deny all egress.
    pub egress: Option<Vec<Rule>>,
}

/// One rule: the peers it allows (all fields add up) and the ports it applies to.
///
/// Its serialized form (field names and order as written in the configuration) is what a
/// policy's id digests, so the field order must not change.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Rule {
    /// Addresses and CIDRs.
    pub allowed_ips: Vec<IpBlock>,
    /// Every pod of these groups.
    pub allowed_groups: Vec<String>,
    /// The pods of these tools (`tools` is also read, the Thorium schema's spelling).
    pub allowed_tools: Vec<String>,
    /// The private address ranges.
    pub allowed_local: bool,
    /// The public address space.
    pub allowed_internet: bool,
    /// Every peer.
    pub allowed_all: bool,
    /// Ports; absent = every port of every protocol.
    pub ports: Option<Vec<PortRule>>,
    /// Pods and namespaces matched by labels.
    pub allowed_custom: Vec<CustomRule>,
}

/// An `allowed_ips` entry: a CIDR (or one address) minus `except` CIDRs strictly inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct IpBlock {
    /// The network, in network form (host bits cleared); a single address is a /32 or /128.
    pub cidr: IpNet,
    /// Whether it was written as a single address (which cannot have excepts).
    pub single_address: bool,
    /// CIDRs inside `cidr`, of its IP version, to leave out.
    pub except: Vec<IpNet>,
}

impl IpBlock {
    /// A whole network, no excepts.
    pub fn net(cidr: IpNet) -> IpBlock {
        IpBlock {
            cidr,
            single_address: false,
            except: Vec::new(),
        }
    }
}

/// Written as in the configuration (`cidr` an address when it was one), for the policy id.
impl Serialize for IpBlock {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("IpRule", 2)?;
        if self.single_address {
            st.serialize_field("cidr", &self.cidr.addr().to_string())?;
        } else {
            st.serialize_field("cidr", &self.cidr.to_string())?;
        }
        let except: Vec<String> = self.except.iter().map(IpNet::to_string).collect();
        st.serialize_field("except", &except)?;
        st.end()
    }
}

/// A `ports` entry: an inclusive port range and a protocol (`None` = TCP, UDP and SCTP).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PortRule {
    /// `port`..=`end_port`.
    pub ports: PortRange,
    /// TCP, UDP or SCTP; `None` = all three.
    pub protocol: Option<Protocol>,
}

/// Written as in the configuration (`port`, `end_port`, `protocol`), for the policy id.
impl Serialize for PortRule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("PortRule", 3)?;
        st.serialize_field("port", &self.ports.start.get())?;
        let end = (self.ports.end != self.ports.start).then(|| self.ports.end.get());
        st.serialize_field("end_port", &end)?;
        st.serialize_field("protocol", &self.protocol.map(Protocol::as_str))?;
        st.end()
    }
}

/// An `allowed_custom` entry; at least one of the two lists is non-empty.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CustomRule {
    /// Labels the peer's namespace must all have.
    pub namespace_labels: Vec<Label>,
    /// Labels the peer pod must all have.
    pub pod_labels: Vec<Label>,
}

/// A key/value label, both valid Kubernetes label syntax.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Label {
    /// Key (a qualified name).
    pub key: String,
    /// Value (a label value).
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

/// Every file's contents, merged and validated.
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
    /// Reads, merges and validates named YAML texts; every error is collected
    /// ([`Error::Invalid`]).
    pub fn parse<'a>(
        sources: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Config, Error> {
        let mut config = Config::default();
        let mut errors = Vec::new();
        let mut complete = true;
        let mut files = Vec::new();
        for (name, text) in sources {
            complete &= config.read_file(name, text, &mut errors);
            files.push(name);
        }
        // Items with invalid fields are kept (without those fields), so references to
        // them still resolve; an item that could not be read at all would make every
        // reference to it a spurious error, so then the cross-item checks wait.
        if complete {
            crate::validate::validate(&config, &mut errors);
        }
        if errors.is_empty() {
            return Ok(config);
        }
        // In reading order: by file, then line (stable, so a line's errors keep theirs).
        errors.sort_by_key(|d| {
            let file = files.iter().position(|f| **f == *d.file);
            (file.unwrap_or(usize::MAX), d.line)
        });
        Err(Error::Invalid(errors))
    }

    /// Reads one file's items; `false` when some item could not be read at all.
    fn read_file(&mut self, name: &str, text: &str, errors: &mut Vec<Diagnostic>) -> bool {
        let file: Arc<str> = Arc::from(name);
        let docs = match parse_documents(text) {
            Ok(d) => d,
            Err(e) => {
                let loc = Loc {
                    file,
                    lines: Arc::new(LineMap::default()),
                    path: String::new(),
                };
                let mut d = loc.error("", format!("YAML syntax error: {}", e.message));
                d.line = e.line;
                errors.push(d);
                return false;
            }
        };
        let mut read = Reader {
            errors,
            complete: true,
        };
        for doc in docs {
            let lines = Arc::new(doc.lines);
            let top = Loc {
                file: file.clone(),
                lines: lines.clone(),
                path: String::new(),
            };
            let Value::Object(map) = doc.value else {
                read.err(&top, "", "a configuration document must be a mapping");
                read.complete = false;
                continue;
            };
            for (key, value) in map {
                let at = |i: usize| Loc {
                    file: file.clone(),
                    lines: lines.clone(),
                    path: format!("{key}[{i}]"),
                };
                match key.as_str() {
                    "groups" => {
                        for (v, loc) in read.items::<String>(&value, &key, &top, at) {
                            self.groups.push(read.group(v, loc));
                        }
                    }
                    "tools" => {
                        for (v, loc) in read.items::<raw::Tool>(&value, &key, &top, at) {
                            self.tools.push(read.tool(v, loc));
                        }
                    }
                    "network_policies" => {
                        for (v, loc) in read.items::<raw::Policy>(&value, &key, &top, at) {
                            self.network_policies.push(read.policy(v, loc));
                        }
                    }
                    "base_network_policies" => {
                        for (v, loc) in read.items::<raw::BasePolicy>(&value, &key, &top, at) {
                            self.base_network_policies.push(read.base(v, loc));
                        }
                    }
                    other => read.err(
                        &top,
                        other,
                        format!(
                            "unknown top-level key {other:?}: expected one of {}",
                            TOP_LEVEL.join(", ")
                        ),
                    ),
                }
            }
        }
        read.complete
    }
}

/// The Thorium documentation's allow-all example writes `ingress: {allowed_all: true}`:
/// one rule, not a list.
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

/// Turns as-written items into precise types, reporting every field error. An item is
/// always returned (invalid parts left out) so that validation can still check what
/// refers to it; the configuration as a whole is refused when any error was reported.
struct Reader<'e> {
    errors: &'e mut Vec<Diagnostic>,
    /// Whether every item could be decoded (then references to items can be checked).
    complete: bool,
}

impl Reader<'_> {
    fn err(&mut self, loc: &Loc, field: &str, message: impl Into<String>) {
        self.errors.push(loc.error(field, message));
    }

    /// Decodes each item of a top-level list into its as-written shape, with its location.
    fn items<T: serde::de::DeserializeOwned>(
        &mut self,
        value: &Value,
        key: &str,
        top: &Loc,
        at: impl Fn(usize) -> Loc,
    ) -> Vec<(T, Loc)> {
        let list = match value {
            Value::Array(a) => a.as_slice(),
            Value::Null => &[],
            _ => {
                self.err(top, key, "must be a list");
                self.complete = false;
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for (i, item) in list.iter().enumerate() {
            let loc = at(i);
            let item = single_rules_as_lists(item);
            match serde_path_to_error::deserialize::<_, T>(&item) {
                Ok(value) => out.push((value, loc)),
                Err(e) => {
                    let p = e.path().to_string();
                    let field = if p == "." { String::new() } else { p };
                    self.err(&loc, &field, e.into_inner().to_string());
                    self.complete = false;
                }
            }
        }
        out
    }

    /// "a group is a namespace": its name is a DNS-1123 label.
    fn group(&mut self, name: String, loc: Loc) -> Located<String> {
        if let Some(e) = dns_label(&name) {
            self.err(&loc, "", format!("group {e} (a group is a namespace)"));
        }
        Located { value: name, loc }
    }

    fn tool(&mut self, t: raw::Tool, loc: Loc) -> Located<Tool> {
        if t.name.is_empty() {
            self.err(&loc, "name", "a tool needs a name");
        } else if let Some(e) = label_value(&t.name) {
            self.err(
                &loc,
                "name",
                format!("tool name: {e} (a tool's name labels its pods)"),
            );
        }
        Located {
            value: Tool {
                name: t.name,
                group: t.group,
                network_policies: t.network_policies,
            },
            loc,
        }
    }

    fn policy(&mut self, p: raw::Policy, loc: Loc) -> Located<Policy> {
        self.policy_name(&loc, &p.name);
        let ingress = self.rules(&loc, "ingress", p.ingress);
        let egress = self.rules(&loc, "egress", p.egress);
        Located {
            value: Policy {
                name: p.name,
                groups: p.groups,
                ingress,
                egress,
                forced_policy: p.forced_policy,
                default_policy: p.default_policy,
            },
            loc,
        }
    }

    fn base(&mut self, b: raw::BasePolicy, loc: Loc) -> Located<BasePolicy> {
        self.policy_name(&loc, &b.name);
        let ingress = self.rules(&loc, "ingress", b.ingress);
        let egress = self.rules(&loc, "egress", b.egress);
        Located {
            value: BasePolicy {
                name: b.name,
                ingress,
                egress,
            },
            loc,
        }
    }

    /// Policy names are listed, comma-separated, in the `tenancy.palisade.io/policies`
    /// annotation: they must be non-blank and hold no comma or control character.
    fn policy_name(&mut self, loc: &Loc, name: &str) {
        if name.trim().is_empty() {
            self.err(loc, "name", "a policy needs a name");
        } else if name.chars().any(|c| c == ',' || c.is_control()) {
            self.err(
                loc,
                "name",
                format!("policy name {name:?} must not contain ',' or control characters"),
            );
        }
    }

    fn rules(&mut self, loc: &Loc, dir: &str, rules: Option<Vec<raw::Rule>>) -> Option<Vec<Rule>> {
        rules.map(|rules| {
            rules
                .into_iter()
                .enumerate()
                .map(|(i, r)| self.rule(loc, &format!("{dir}[{i}]"), r))
                .collect()
        })
    }

    fn rule(&mut self, loc: &Loc, path: &str, r: raw::Rule) -> Rule {
        let allowed_ips = r
            .allowed_ips
            .iter()
            .enumerate()
            .filter_map(|(i, ip)| self.ip_block(loc, &format!("{path}.allowed_ips[{i}]"), ip))
            .collect();
        let ports = r.ports.map(|ports| {
            ports
                .iter()
                .enumerate()
                .filter_map(|(i, p)| self.port(loc, &format!("{path}.ports[{i}]"), p))
                .collect()
        });
        let allowed_custom = r
            .allowed_custom
            .into_iter()
            .enumerate()
            .filter_map(|(i, c)| self.custom(loc, &format!("{path}.allowed_custom[{i}]"), c))
            .collect();
        Rule {
            allowed_ips,
            allowed_groups: r.allowed_groups,
            allowed_tools: r.allowed_tools,
            allowed_local: r.allowed_local,
            allowed_internet: r.allowed_internet,
            allowed_all: r.allowed_all,
            ports,
            allowed_custom,
        }
    }

    /// "an error occur if any of the CIDR's are not in the allowed CIDR's address space, are
    /// of a different standard (v4 vs v6), or if the cidr above is a single IP address and
    /// except CIDR's were provided".
    fn ip_block(&mut self, loc: &Loc, path: &str, ip: &raw::IpRule) -> Option<IpBlock> {
        let (cidr, single_address) = match parse_net(&ip.cidr) {
            Ok(c) => c,
            Err(e) => {
                self.err(loc, &format!("{path}.cidr"), e);
                return None;
            }
        };
        if single_address && !ip.except.is_empty() {
            self.err(
                loc,
                &format!("{path}.except"),
                format!(
                    "{} is a single address: it cannot have except CIDRs",
                    ip.cidr
                ),
            );
            return None;
        }
        let mut except = Vec::new();
        for (i, e) in ip.except.iter().enumerate() {
            let p = format!("{path}.except[{i}]");
            match parse_net(e) {
                Err(msg) => self.err(loc, &p, msg),
                Ok((n, _)) if n.addr().is_ipv4() != cidr.addr().is_ipv4() => self.err(
                    loc,
                    &p,
                    format!("{e} is not the same IP version as {}", ip.cidr),
                ),
                Ok((n, _)) if !(cidr.contains(&n) && n.prefix_len() > cidr.prefix_len()) => {
                    self.err(loc, &p, format!("{e} is not inside {}", ip.cidr));
                }
                Ok((n, _)) => except.push(n),
            }
        }
        Some(IpBlock {
            cidr,
            single_address,
            except,
        })
    }

    /// "port: Any valid port number (1-65535)"; "end_port: the last port in the range of
    /// ports starting with `port`"; "protocol: TCP/UDP/SCTP".
    fn port(&mut self, loc: &Loc, path: &str, p: &raw::PortRule) -> Option<PortRule> {
        let start = Port::new(p.port);
        if start.is_none() {
            self.err(
                loc,
                &format!("{path}.port"),
                format!("port {} is not within 1-65535", p.port),
            );
        }
        let end = match p.end_port {
            None => start,
            Some(end) => match Port::new(end) {
                None => {
                    self.err(
                        loc,
                        &format!("{path}.end_port"),
                        format!("end_port {end} is not within 1-65535"),
                    );
                    None
                }
                Some(e) if start.is_some_and(|s| e < s) => {
                    self.err(
                        loc,
                        &format!("{path}.end_port"),
                        format!("end_port {end} is lower than port {}", p.port),
                    );
                    None
                }
                Some(e) => Some(e),
            },
        };
        let protocol = match p.protocol.as_deref() {
            None => Ok(None),
            Some(s) => s.parse::<Protocol>().map(Some).map_err(|_| {
                self.err(
                    loc,
                    &format!("{path}.protocol"),
                    format!("protocol {s:?} is not one of TCP, UDP, SCTP"),
                );
            }),
        };
        Some(PortRule {
            ports: PortRange {
                start: start?,
                end: end?,
            },
            protocol: protocol.ok()?,
        })
    }

    fn custom(&mut self, loc: &Loc, path: &str, c: raw::CustomRule) -> Option<CustomRule> {
        if c.namespace_labels.is_empty() && c.pod_labels.is_empty() {
            self.err(
                loc,
                path,
                "a custom rule needs namespace_labels, pod_labels or both",
            );
            return None;
        }
        Some(CustomRule {
            namespace_labels: self.labels(
                loc,
                &format!("{path}.namespace_labels"),
                c.namespace_labels,
            ),
            pod_labels: self.labels(loc, &format!("{path}.pod_labels"), c.pod_labels),
        })
    }

    fn labels(&mut self, loc: &Loc, path: &str, labels: Vec<raw::Label>) -> Vec<Label> {
        let mut out = Vec::new();
        for (i, l) in labels.into_iter().enumerate() {
            let key_error = qualified_name(&l.key);
            let value_error = label_value(&l.value);
            if let Some(e) = &key_error {
                self.err(loc, &format!("{path}[{i}].key"), e);
            }
            if let Some(e) = &value_error {
                self.err(loc, &format!("{path}[{i}].value"), e);
            }
            if key_error.is_none() && value_error.is_none() {
                out.push(Label {
                    key: l.key,
                    value: l.value,
                });
            }
        }
        out
    }
}

/// A CIDR, or a single address as /32 or /128; `true` when it was a single address.
fn parse_net(s: &str) -> Result<(IpNet, bool), String> {
    if s.contains('/') {
        parse_cidr(s)
            .map(|n| (n, false))
            .map_err(|_| format!("{s:?} is not a valid CIDR"))
    } else {
        s.parse::<IpAddr>()
            .map(|ip| (IpNet::from(ip), true))
            .map_err(|_| format!("{s:?} is not a valid IP address or CIDR"))
    }
}

/// Label map from key/value pairs.
pub(crate) fn label_map(labels: &[Label]) -> BTreeMap<String, String> {
    labels
        .iter()
        .map(|l| (l.key.clone(), l.value.clone()))
        .collect()
}
