//! What Neutron holds, read once per sync: the security groups tagged [`OWNED_TAG`] with
//! their rules (sorted by [`Owner`] into this cluster's and the others'), and the
//! project's ports. Rules are parsed into the translation's [`SgRule`] (remote groups by
//! id), so desired and observed rules compare by value.

use std::net::IpAddr;

use ipnet::IpNet;
use palisade_model::{Port, PortRange, Protocol};
use palisade_neutron::{Ethertype, Remote, RuleDirection, SgRule, Traffic};
use serde_json::{Value, json};

use crate::client::{ApiError, Client};

/// The tag every group the sync creates carries (with its cluster's [`Owner::cluster_tag`]).
pub const OWNED_TAG: &str = "palisade-managed";

/// What starts the tag naming the cluster a group belongs to.
pub const CLUSTER_TAG_PREFIX: &str = "palisade-cluster:";

/// The cluster id when none is given.
pub const DEFAULT_CLUSTER_ID: &str = "default";

/// Who the sync is: a group is its own only if it belongs to `project_id` and carries
/// [`OWNED_TAG`] and this cluster's tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The project the groups and ports belong to.
    pub project_id: String,
    /// The cluster's identity (`--cluster-id`).
    pub cluster_id: String,
}

impl Owner {
    /// An owner, refusing a cluster id that is empty, longer than 63 characters, or holds
    /// characters other than `a-z`, `0-9`, `-`, `.` and `_` (tags are filtered with
    /// commas and sent in URLs).
    pub fn new(project_id: &str, cluster_id: &str) -> Result<Owner, String> {
        let ok = !cluster_id.is_empty()
            && cluster_id.len() <= 63
            && cluster_id.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.' | '_')
            });
        if !ok {
            return Err(format!(
                "cluster id {cluster_id:?}: use 1 to 63 characters of a-z, 0-9, '-', '.' and '_'"
            ));
        }
        Ok(Owner {
            project_id: project_id.to_string(),
            cluster_id: cluster_id.to_string(),
        })
    }

    /// What starts the description of everything the cluster creates:
    /// `palisade cluster <id>: `.
    pub fn description_prefix(&self) -> String {
        format!("palisade cluster {}: ", self.cluster_id)
    }

    /// The tag that names this cluster: `palisade-cluster:<id>`.
    pub fn cluster_tag(&self) -> String {
        format!("{CLUSTER_TAG_PREFIX}{}", self.cluster_id)
    }

    /// Whose a group tagged [`OWNED_TAG`] is.
    pub fn classify(&self, g: &Group) -> Ownership {
        let clusters: Vec<&str> = g
            .tags
            .iter()
            .filter_map(|t| t.strip_prefix(CLUSTER_TAG_PREFIX))
            .collect();
        if g.project_id != self.project_id {
            return Ownership::OtherProject;
        }
        match clusters.as_slice() {
            [c] if *c == self.cluster_id => Ownership::Ours,
            // Made before groups named their cluster: the default cluster's.
            [] if self.cluster_id == DEFAULT_CLUSTER_ID => Ownership::Legacy,
            [] => Ownership::Unclaimed,
            _ => Ownership::OtherCluster,
        }
    }
}

/// Whose a group tagged [`OWNED_TAG`] is, seen by one [`Owner`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// This cluster's, in this project.
    Ours,
    /// Made before groups named their cluster, in this project, seen by the default
    /// cluster: adopted (it gets the cluster tag).
    Legacy,
    /// In this project, naming no cluster, seen by a cluster that is not the default one.
    Unclaimed,
    /// Another cluster's (or several clusters') in this project.
    OtherCluster,
    /// Another project's, visible here because it is shared (Neutron RBAC).
    OtherProject,
}

/// A security group as Neutron holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Neutron's id.
    pub id: String,
    /// Name.
    pub name: String,
    /// The project it belongs to.
    pub project_id: String,
    /// Description.
    pub description: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Rules.
    pub rules: Vec<Rule>,
}

/// An address group as Neutron holds it (`--peer-mode address-groups`). Neutron gives
/// address groups no tags: one is the cluster's when it belongs to the project and its
/// description starts with [`Owner::description_prefix`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrGroup {
    /// Neutron's id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Its addresses.
    pub addresses: Vec<IpNet>,
}

/// The project's address groups that are `owner`'s.
pub fn list_address_groups(client: &Client, owner: &Owner) -> Result<Vec<AddrGroup>, ApiError> {
    let path = format!(
        "address-groups?fields=id&fields=name&fields=description&fields=addresses&project_id={}",
        query_escape(&owner.project_id)
    );
    let list = list_all(client, &path, "address_groups")?;
    let prefix = owner.description_prefix();
    let mut out = Vec::new();
    for g in &list {
        let id = g["id"]
            .as_str()
            .ok_or_else(|| decode(&path, "an address group without id"))?;
        let description = g["description"].as_str().unwrap_or_default();
        if !description.starts_with(&prefix) {
            continue;
        }
        let addresses = strings(&g["addresses"])
            .iter()
            .map(|a| a.parse::<IpNet>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| decode(&path, &format!("address group {id}: {e}")))?;
        out.push(AddrGroup {
            id: id.to_string(),
            name: g["name"].as_str().unwrap_or_default().to_string(),
            description: description.to_string(),
            addresses,
        });
    }
    Ok(out)
}

/// A rule as Neutron holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Neutron's id.
    pub id: String,
    /// The rule (remote group by id; description empty), or `None` for a rule the
    /// translation never writes (another protocol, a remote address group): in an owned
    /// group such a rule is always removed.
    pub rule: Option<SgRule>,
}

/// A port as Neutron holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortState {
    /// Neutron's id.
    pub id: String,
    /// Its fixed addresses.
    pub fixed_ips: Vec<IpAddr>,
    /// The ids of the groups it carries.
    pub security_groups: Vec<String>,
    /// `device_owner` (`compute:kuryr` for Kuryr's pod ports, for instance).
    pub device_owner: String,
    /// The network it is on.
    pub network_id: String,
}

/// Neutron's groups and ports, as read at the start of a sync.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// This cluster's groups ([`Ownership::Ours`]).
    pub groups: Vec<Group>,
    /// Groups to adopt ([`Ownership::Legacy`]): owned from now on, once tagged.
    pub legacy: Vec<Group>,
    /// The other groups tagged [`OWNED_TAG`], with whose they are: never changed, never
    /// given to a port.
    pub foreign: Vec<(Group, Ownership)>,
    /// The ports (those of `--network`, when given).
    pub ports: Vec<PortState>,
    /// This cluster's address groups (read only when the translation has some or a rule
    /// refers to one).
    pub address_groups: Vec<AddrGroup>,
}

impl Observed {
    /// Whether a rule of the cluster's groups refers to an address group.
    pub fn uses_address_groups(&self) -> bool {
        self.groups
            .iter()
            .chain(&self.legacy)
            .flat_map(|g| &g.rules)
            .any(|r| {
                matches!(
                    &r.rule,
                    Some(SgRule {
                        remote: Remote::AddressGroup(_),
                        ..
                    })
                )
            })
    }
}

/// Which ports may be pods' ports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortFilter {
    /// Only ports on this network id.
    pub network_id: Option<String>,
    /// Only ports with this `device_owner`.
    pub device_owner: Option<String>,
}

/// Reads the groups tagged [`OWNED_TAG`] with their rules (one call) and the ports (one
/// call), and sorts the groups by whose they are.
pub fn observe(client: &Client, owner: &Owner, filter: &PortFilter) -> Result<Observed, ApiError> {
    let groups = list_groups(client, Some(OWNED_TAG))?;
    let mut observed = Observed {
        ports: list_ports(client, filter)?,
        ..Observed::default()
    };
    for g in groups {
        match owner.classify(&g) {
            Ownership::Ours => observed.groups.push(g),
            Ownership::Legacy => observed.legacy.push(g),
            other => observed.foreign.push((g, other)),
        }
    }
    Ok(observed)
}

/// Every group visible (or those with `tag`), rules included: the project's own and those
/// other projects share with it.
pub fn list_groups(client: &Client, tag: Option<&str>) -> Result<Vec<Group>, ApiError> {
    let mut path = String::from(
        "security-groups?fields=id&fields=name&fields=tags&fields=project_id&fields=description&fields=security_group_rules",
    );
    if let Some(tag) = tag {
        path.push_str("&tags=");
        path.push_str(&query_escape(tag));
    }
    list_groups_at(client, path)
}

/// The project's groups without [`OWNED_TAG`], rules included: where a group whose
/// creation answer was lost, or whose tagging failed, is found again.
pub fn untagged_groups(client: &Client, project_id: &str) -> Result<Vec<Group>, ApiError> {
    let path = format!(
        "security-groups?fields=id&fields=name&fields=tags&fields=project_id&fields=description&fields=security_group_rules&project_id={}&not-tags={OWNED_TAG}",
        query_escape(project_id),
    );
    list_groups_at(client, path)
}

fn list_groups_at(client: &Client, path: String) -> Result<Vec<Group>, ApiError> {
    let list = list_all(client, &path, "security_groups")?;
    list.iter()
        .map(|g| parse_group(g).ok_or_else(|| decode(&path, "a group without id or name")))
        .collect()
}

/// The project's ports the filter admits (only the project's, also for credentials that
/// see other projects' ports, such as an administrator's).
pub fn list_ports(client: &Client, filter: &PortFilter) -> Result<Vec<PortState>, ApiError> {
    let mut path = format!(
        "ports?fields=id&fields=fixed_ips&fields=security_groups&fields=device_owner&fields=network_id&project_id={}",
        query_escape(client.project_id())
    );
    if let Some(n) = &filter.network_id {
        path.push_str(&format!("&network_id={}", query_escape(n)));
    }
    if let Some(o) = &filter.device_owner {
        path.push_str(&format!("&device_owner={}", query_escape(o)));
    }
    let list = list_all(client, &path, "ports")?;
    list.iter()
        .map(|p| parse_port(p).ok_or_else(|| decode(&path, "a port without id")))
        .collect()
}

/// Every item of a listing, following Neutron's `next` links when it pages (a server
/// with `pagination_max_limit` set): one call per page.
pub(crate) fn list_all(client: &Client, first: &str, key: &str) -> Result<Vec<Value>, ApiError> {
    let mut items = Vec::new();
    let mut path = Some(first.to_string());
    while let Some(p) = path.take() {
        let mut v = client.get(&p)?;
        let page = v[key]
            .as_array_mut()
            .ok_or_else(|| decode(&p, &format!("no {key} list")))?;
        let empty = page.is_empty();
        items.append(page);
        let next = v[format!("{key}_links")]
            .as_array()
            .into_iter()
            .flatten()
            .find(|l| l["rel"] == "next")
            .and_then(|l| l["href"].as_str())
            .and_then(|href| href.split_once("/v2.0/").map(|(_, rest)| rest.to_string()));
        path = next.filter(|n| !empty && *n != p);
    }
    Ok(items)
}

fn decode(path: &str, message: &str) -> ApiError {
    ApiError::Decode {
        method: "GET",
        path: path.to_string(),
        message: message.to_string(),
    }
}

/// Percent-encodes a query value.
pub fn query_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A group from Neutron's JSON.
pub fn parse_group(g: &Value) -> Option<Group> {
    Some(Group {
        id: g["id"].as_str()?.to_string(),
        name: g["name"].as_str().unwrap_or_default().to_string(),
        project_id: g["project_id"]
            .as_str()
            .or(g["tenant_id"].as_str())
            .unwrap_or_default()
            .to_string(),
        description: g["description"].as_str().unwrap_or_default().to_string(),
        tags: strings(&g["tags"]),
        rules: g["security_group_rules"]
            .as_array()
            .map(|rules| rules.iter().filter_map(parse_rule).collect())
            .unwrap_or_default(),
    })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A rule from Neutron's JSON (`None` without an id).
pub fn parse_rule(r: &Value) -> Option<Rule> {
    Some(Rule {
        id: r["id"].as_str()?.to_string(),
        rule: to_sg_rule(r),
    })
}

fn to_sg_rule(r: &Value) -> Option<SgRule> {
    let direction = match r["direction"].as_str()? {
        "ingress" => RuleDirection::Ingress,
        "egress" => RuleDirection::Egress,
        _ => return None,
    };
    let ethertype = match r["ethertype"].as_str()? {
        "IPv4" => Ethertype::IPv4,
        "IPv6" => Ethertype::IPv6,
        _ => return None,
    };
    let range = match (r["port_range_min"].as_i64(), r["port_range_max"].as_i64()) {
        (None, None) => None,
        (Some(a), Some(b)) => Some(PortRange {
            start: Port::new(a)?,
            end: Port::new(b)?,
        }),
        _ => return None,
    };
    let traffic = match &r["protocol"] {
        Value::Null => {
            if range.is_some() {
                return None;
            }
            Traffic::Any
        }
        Value::String(p) => Traffic::Protocol(protocol(p)?, range),
        _ => return None,
    };
    let remote = match (
        r["remote_ip_prefix"].as_str(),
        r["remote_group_id"].as_str(),
        r["remote_address_group_id"].as_str(),
    ) {
        (None, None, None) => Remote::Any,
        (Some(p), None, None) => Remote::Prefix(p.parse::<IpNet>().ok()?),
        (None, Some(g), None) => Remote::Group(g.to_string()),
        (None, None, Some(a)) => Remote::AddressGroup(a.to_string()),
        _ => return None,
    };
    Some(SgRule {
        direction,
        ethertype,
        traffic,
        remote,
        description: String::new(),
    })
}

fn protocol(p: &str) -> Option<Protocol> {
    match p.to_ascii_lowercase().as_str() {
        "tcp" | "6" => Some(Protocol::Tcp),
        "udp" | "17" => Some(Protocol::Udp),
        "sctp" | "132" => Some(Protocol::Sctp),
        _ => None,
    }
}

/// A port from Neutron's JSON.
pub fn parse_port(p: &Value) -> Option<PortState> {
    Some(PortState {
        id: p["id"].as_str()?.to_string(),
        fixed_ips: p["fixed_ips"]
            .as_array()
            .map(|ips| {
                ips.iter()
                    .filter_map(|i| i["ip_address"].as_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default(),
        security_groups: strings(&p["security_groups"]),
        device_owner: p["device_owner"].as_str().unwrap_or_default().to_string(),
        network_id: p["network_id"].as_str().unwrap_or_default().to_string(),
    })
}

/// A rule's body for `POST /security-group-rules` in group `group_id`; a remote group is
/// given by id. Descriptions are cut to Neutron's 255 characters.
pub fn rule_body(group_id: &str, rule: &SgRule) -> Value {
    let mut v = serde_json::to_value(rule).unwrap_or(Value::Null);
    v["security_group_id"] = json!(group_id);
    v["description"] = json!(truncate(&rule.description, 255));
    if let Value::Object(map) = &mut v {
        map.retain(|_, value| !value.is_null());
    }
    v
}

/// At most `max` characters of `s`.
pub fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion
    use super::*;

    #[test]
    fn rules_read_back_as_the_translation_writes_them() {
        let rows = [
            (
                json!({"id": "r", "direction": "ingress", "ethertype": "IPv4", "protocol": "tcp",
                       "port_range_min": 80, "port_range_max": 81, "remote_ip_prefix": "10.0.0.0/24",
                       "remote_group_id": null, "remote_address_group_id": null}),
                "protocol, range and prefix",
            ),
            (
                json!({"id": "r", "direction": "egress", "ethertype": "IPv6", "protocol": null,
                       "port_range_min": null, "port_range_max": null, "remote_ip_prefix": null,
                       "remote_group_id": "g1"}),
                "any traffic to a remote group",
            ),
        ];
        for (json, why) in rows {
            let rule = parse_rule(&json).unwrap().rule.unwrap();
            let body = rule_body("sg", &rule);
            for k in [
                "direction",
                "ethertype",
                "protocol",
                "port_range_min",
                "remote_ip_prefix",
                "remote_group_id",
            ] {
                assert_eq!(body.get(k).unwrap_or(&Value::Null), &json[k], "{why}: {k}");
            }
            assert_eq!(body["security_group_id"], "sg", "{why}");
        }
    }

    #[test]
    fn rules_the_translation_never_writes_are_foreign() {
        let rows = [
            (
                json!({"id": "r", "direction": "ingress", "ethertype": "IPv4", "protocol": "icmp"}),
                "icmp",
            ),
            (
                json!({"id": "r", "direction": "ingress", "ethertype": "IPv4", "protocol": null, "remote_address_group_id": "a", "remote_ip_prefix": "10.0.0.0/8"}),
                "an address group and a prefix",
            ),
            (
                json!({"id": "r", "direction": "ingress", "ethertype": "IPv4", "protocol": null, "port_range_min": 1, "port_range_max": 2}),
                "ports without protocol",
            ),
        ];
        for (json, why) in rows {
            assert_eq!(parse_rule(&json).unwrap().rule, None, "{why}");
        }
    }

    #[test]
    fn query_values_are_escaped() {
        assert_eq!(query_escape("compute:kuryr"), "compute%3Akuryr");
        assert_eq!(query_escape("a b&c"), "a%20b%26c");
    }
}
