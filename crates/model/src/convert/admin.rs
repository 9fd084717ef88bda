//! `policy.networking.k8s.io`: AdminNetworkPolicy and BaselineAdminNetworkPolicy (v1alpha1)
//! and ClusterNetworkPolicy (v1alpha2), validated as their CRD schemas and CEL rules do.
//!
//! The v1alpha1 kinds are read in both shapes: the upstream API (peers `namespaces: <label
//! selector>`, `pods: {namespaceSelector, podSelector}`, `nodes`, `networks`; ports
//! `portNumber`, `namedPort`, `portRange`) and the KEP's (peers `namespaces: {namespaceSelector
//! | related | sameLabels | notSameLabels}`, `pods: {namespaces, podSelector}`).

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Map, Value};

use crate::diag::{Ctx, index, join};
use crate::dns::DomainPattern;
use crate::objects::{
    Action, AdminPeer, AdminPolicy, AdminPort, AdminRule, AdminTier, NamespaceMatch, Origin,
    Subject,
};
use crate::types::{PolicyKind, PortRange, Protocol, Selector};
use crate::validate;

/// Limits and vocabulary that differ between the kinds.
struct Rules {
    kind: PolicyKind,
    max_rules: usize,
    max_peers: usize,
    actions: &'static [(&'static str, Action)],
}

const ANP: Rules = Rules {
    kind: PolicyKind::AdminNetworkPolicy,
    max_rules: 100,
    max_peers: 100,
    actions: &[
        ("Allow", Action::Allow),
        ("Deny", Action::Deny),
        ("Pass", Action::Pass),
    ],
};
const BANP: Rules = Rules {
    kind: PolicyKind::BaselineAdminNetworkPolicy,
    max_rules: 100,
    max_peers: 100,
    actions: &[("Allow", Action::Allow), ("Deny", Action::Deny)],
};
const CNP: Rules = Rules {
    kind: PolicyKind::ClusterNetworkPolicy,
    max_rules: 25,
    max_peers: 25,
    actions: &[
        ("Accept", Action::Allow),
        ("Deny", Action::Deny),
        ("Pass", Action::Pass),
    ],
};

/// Reads one admin policy object of `kind`.
pub(crate) fn admin_policy(
    ctx: &mut Ctx<'_>,
    value: &Value,
    kind: PolicyKind,
    origin: Origin,
) -> Option<AdminPolicy> {
    let rules = match kind {
        PolicyKind::AdminNetworkPolicy => &ANP,
        PolicyKind::BaselineAdminNetworkPolicy => &BANP,
        _ => &CNP,
    };
    let root = obj(ctx, "", value)?;
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    ctx.object = format!("{} {name}", kind.as_str());
    if name.is_empty() {
        ctx.error(
            "metadata.name",
            "Required value: name or generateName is required",
        );
    } else if let Some(e) = validate::dns_subdomain(&name) {
        ctx.error("metadata.name", e);
    }
    if kind == PolicyKind::BaselineAdminNetworkPolicy && !name.is_empty() && name != "default" {
        ctx.error(
            "metadata.name",
            "Invalid value: only one baseline admin network policy with metadata.name=\"default\" can be created in the cluster",
        );
    }
    let Some(spec) = root.get("spec").and_then(|s| obj(ctx, "spec", s)) else {
        ctx.error("spec", "Required value");
        return None;
    };
    let spec_keys: &[&str] = match kind {
        PolicyKind::BaselineAdminNetworkPolicy => &["subject", "ingress", "egress"],
        PolicyKind::AdminNetworkPolicy => &["priority", "subject", "ingress", "egress"],
        _ => &["tier", "priority", "subject", "ingress", "egress"],
    };
    known(ctx, "spec", spec, spec_keys);
    let (tier, priority) = tier_and_priority(ctx, spec, kind);
    let subject = subject(ctx, kind, "spec.subject", spec.get("subject"));
    let ingress = rule_list(ctx, rules, spec, "ingress");
    let egress = rule_list(ctx, rules, spec, "egress");
    let subject = subject?;
    Some(AdminPolicy {
        kind,
        name,
        tier,
        priority,
        subject,
        ingress,
        egress,
        origin,
    })
}

fn tier_and_priority(
    ctx: &mut Ctx<'_>,
    spec: &Map<String, Value>,
    kind: PolicyKind,
) -> (AdminTier, i32) {
    let tier = match kind {
        PolicyKind::AdminNetworkPolicy => AdminTier::Admin,
        PolicyKind::BaselineAdminNetworkPolicy => return (AdminTier::Baseline, 0),
        _ => {
            match spec.get("tier").and_then(|t| string(ctx, "spec.tier", t)) {
                Some("Admin") => AdminTier::Admin,
                Some("Baseline") => AdminTier::Baseline,
                Some(other) => {
                    ctx.error("spec.tier", format!("Unsupported value: {other:?}: supported values: \"Admin\", \"Baseline\""));
                    AdminTier::Admin
                }
                None => {
                    ctx.error("spec.tier", "Required value");
                    AdminTier::Admin
                }
            }
        }
    };
    let priority = match spec.get("priority") {
        None => {
            ctx.error("spec.priority", "Required value");
            0
        }
        Some(v) => match integer(ctx, "spec.priority", v) {
            Some(p) if (0..=1000).contains(&p) => p as i32,
            Some(p) => {
                ctx.error(
                    "spec.priority",
                    format!("Invalid value: {p}: must be between 0 and 1000, inclusive"),
                );
                0
            }
            None => 0,
        },
    };
    (tier, priority)
}

pub(crate) fn subject(
    ctx: &mut Ctx<'_>,
    kind: PolicyKind,
    path: &str,
    v: Option<&Value>,
) -> Option<Subject> {
    let Some(v) = v else {
        ctx.error(path, "Required value");
        return None;
    };
    let m = obj(ctx, path, v)?;
    known(ctx, path, m, &["namespaces", "pods"]);
    exactly_one(ctx, path, m, &["namespaces", "pods"])?;
    if let Some(ns) = m.get("namespaces") {
        return selector(ctx, &join(path, "namespaces"), ns).map(Subject::Namespaces);
    }
    let pods_path = join(path, "pods");
    let pods = obj(ctx, &pods_path, m.get("pods")?)?;
    known(ctx, &pods_path, pods, &["namespaceSelector", "podSelector"]);
    let namespaces = namespace_selector(ctx, kind, &pods_path, pods);
    let pod_sel = required_selector(ctx, &pods_path, pods, "podSelector");
    Some(Subject::Pods {
        namespaces: namespaces?,
        pods: pod_sel?,
    })
}

fn rule_list(
    ctx: &mut Ctx<'_>,
    rules: &Rules,
    spec: &Map<String, Value>,
    dir: &str,
) -> Vec<AdminRule> {
    let path = join("spec", dir);
    let Some(list) = spec.get(dir).and_then(|v| array(ctx, &path, v)) else {
        return Vec::new();
    };
    if list.len() > rules.max_rules {
        ctx.error(
            &path,
            format!(
                "Too many: {}: must have at most {} items",
                list.len(),
                rules.max_rules
            ),
        );
    }
    let egress = dir == "egress";
    list.iter()
        .enumerate()
        .filter_map(|(i, r)| rule(ctx, rules, &index(&path, i), r, egress))
        .collect()
}

fn rule(
    ctx: &mut Ctx<'_>,
    rules: &Rules,
    path: &str,
    v: &Value,
    egress: bool,
) -> Option<AdminRule> {
    let m = obj(ctx, path, v)?;
    let rule_keys: &[&str] = match (rules.kind, egress) {
        (PolicyKind::ClusterNetworkPolicy, false) => &["name", "action", "from", "protocols"],
        (PolicyKind::ClusterNetworkPolicy, true) => &["name", "action", "to", "protocols"],
        (_, false) => &["name", "action", "from", "ports"],
        (_, true) => &["name", "action", "to", "ports"],
    };
    known(ctx, path, m, rule_keys);
    let name = m
        .get("name")
        .and_then(|n| string(ctx, &join(path, "name"), n))
        .map(str::to_string);
    if let Some(n) = &name
        && n.chars().count() > 100
    {
        ctx.error(
            &join(path, "name"),
            "Too long: may not be more than 100 bytes",
        );
    }
    let action = match m
        .get("action")
        .and_then(|a| string(ctx, &join(path, "action"), a))
    {
        None => {
            ctx.error(&join(path, "action"), "Required value");
            None
        }
        Some(a) => match rules.actions.iter().find(|(s, _)| *s == a) {
            Some((_, act)) => Some(*act),
            None => {
                let allowed: Vec<String> = rules
                    .actions
                    .iter()
                    .map(|(s, _)| format!("{s:?}"))
                    .collect();
                ctx.error(
                    &join(path, "action"),
                    format!(
                        "Unsupported value: {a:?}: supported values: {}",
                        allowed.join(", ")
                    ),
                );
                None
            }
        },
    };
    let peers_key = if egress { "to" } else { "from" };
    let peers_path = join(path, peers_key);
    let peers: Vec<AdminPeer> = match m.get(peers_key).and_then(|p| array(ctx, &peers_path, p)) {
        None => {
            ctx.error(&peers_path, "Required value");
            Vec::new()
        }
        Some(list) => {
            if list.is_empty() {
                ctx.error(&peers_path, "Invalid value: 0: must have at least 1 items");
            }
            if list.len() > rules.max_peers {
                ctx.error(
                    &peers_path,
                    format!(
                        "Too many: {}: must have at most {} items",
                        list.len(),
                        rules.max_peers
                    ),
                );
            }
            list.iter()
                .enumerate()
                .filter_map(|(i, p)| peer(ctx, rules.kind, &index(&peers_path, i), p, egress))
                .collect()
        }
    };
    let ports = if rules.kind == PolicyKind::ClusterNetworkPolicy {
        m.get("protocols")
            .and_then(|p| protocols(ctx, &join(path, "protocols"), p))
    } else {
        m.get("ports")
            .and_then(|p| ports(ctx, &join(path, "ports"), p))
    };
    let named = ports
        .iter()
        .flatten()
        .any(|p| matches!(p, AdminPort::Named(_)));
    if named && rules.kind == PolicyKind::ClusterNetworkPolicy {
        if peers
            .iter()
            .any(|p| matches!(p, AdminPeer::Nodes(_) | AdminPeer::Networks(_)))
            || m.get(peers_key).is_some_and(has_domain_names)
        {
            ctx.error(path, "Invalid value: networks/nodes/domainNames peer cannot be set with namedPorts since there are no namedPorts for networks/nodes/domainNames");
        }
    } else if named
        && peers
            .iter()
            .any(|p| matches!(p, AdminPeer::Nodes(_) | AdminPeer::Networks(_)))
    {
        ctx.error(path, "Invalid value: networks/nodes peer cannot be set with namedPorts since there are no namedPorts for networks/nodes");
    }
    if action != Some(Action::Allow)
        && action.is_some()
        && m.get(peers_key).is_some_and(has_domain_names)
    {
        ctx.error(
            &peers_path,
            "Invalid value: domainNames peers are only supported for Accept rules",
        );
    }
    // An empty list filters nothing, as an absent one.
    let ports = ports.filter(|p| !p.is_empty());
    Some(AdminRule {
        name,
        action: action?,
        peers,
        ports,
    })
}

fn has_domain_names(peers: &Value) -> bool {
    peers
        .as_array()
        .is_some_and(|l| l.iter().any(|p| p.get("domainNames").is_some()))
}

const INGRESS_PEERS: &[&str] = &["namespaces", "pods"];
const EGRESS_PEERS: &[&str] = &["namespaces", "pods", "nodes", "networks", "domainNames"];

/// A peer. "If a consumer observes none of its fields are set, they should assume an unknown
/// option has been specified and fail closed": a peer with only unknown fields is kept as
/// [`AdminPeer::Unsupported`]; an empty one is invalid (MinProperties=1).
fn peer(
    ctx: &mut Ctx<'_>,
    kind: PolicyKind,
    path: &str,
    v: &Value,
    egress: bool,
) -> Option<AdminPeer> {
    let m = obj(ctx, path, v)?;
    let peer_fields = if egress { EGRESS_PEERS } else { INGRESS_PEERS };
    let present: Vec<&str> = peer_fields
        .iter()
        .copied()
        .filter(|k| m.contains_key(*k))
        .collect();
    if !egress
        && let Some(k) = EGRESS_PEERS
            .iter()
            .find(|k| !INGRESS_PEERS.contains(k) && m.contains_key(**k))
    {
        ctx.error(&join(path, k), "Forbidden: only allowed in egress peers");
        return None;
    }
    if present.is_empty() {
        if m.is_empty() {
            ctx.error(path, "Invalid value: must have at least 1 properties");
            return None;
        }
        let unknown: Vec<String> = m.keys().cloned().collect();
        ctx.notice(
            path,
            format!(
                "peer has no field Palisade knows ({}); it fails closed",
                unknown.join(", ")
            ),
        );
        return Some(AdminPeer::Unsupported(unknown));
    }
    if present.len() > 1 {
        ctx.error(
            path,
            format!(
                "Invalid value: must have at most 1 properties, found {}",
                present.join(", ")
            ),
        );
        return None;
    }
    let key = present[0];
    let p = join(path, key);
    let value = &m[key];
    match key {
        "namespaces" => namespace_match(ctx, &p, value).map(AdminPeer::Namespaces),
        "pods" => {
            let pm = obj(ctx, &p, value)?;
            let keys: &[&str] = if pm.contains_key("namespaces") {
                &["namespaces", "podSelector"]
            } else {
                &["namespaceSelector", "podSelector"]
            };
            known(ctx, &p, pm, keys);
            let pods = required_selector(ctx, &p, pm, "podSelector");
            let namespaces = if pm.contains_key("namespaces") {
                namespace_match(ctx, &join(&p, "namespaces"), &pm["namespaces"])
            } else {
                namespace_selector(ctx, kind, &p, pm).map(NamespaceMatch::Selector)
            };
            Some(AdminPeer::Pods {
                namespaces: namespaces?,
                pods: pods?,
            })
        }
        "nodes" => selector(ctx, &p, value).map(AdminPeer::Nodes),
        "networks" => networks(ctx, &p, value).map(AdminPeer::Networks),
        _ => domain_names(ctx, &p, value).map(AdminPeer::DomainNames),
    }
}

/// `domainNames`: 1–25 unique names, each matching the CRD's pattern.
fn domain_names(ctx: &mut Ctx<'_>, path: &str, v: &Value) -> Option<Vec<DomainPattern>> {
    let mut out = Vec::new();
    for (p, s) in peer_strings(ctx, path, v)? {
        if domain_pattern_valid(&s) {
            out.push(DomainPattern::parse(&s));
        } else {
            ctx.error(
                &p,
                format!(
                    "Invalid value: {s:?}: should match '^(\\*\\.)?([a-zA-z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?\\.)+[a-zA-z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?\\.?$'"
                ),
            );
        }
    }
    Some(out)
}

/// The strings of a `networks` or `domainNames` list, each with its path: 1–25 of them,
/// unique (a `set` list), each reported where it is not a string or is repeated.
fn peer_strings(ctx: &mut Ctx<'_>, path: &str, v: &Value) -> Option<Vec<(String, String)>> {
    let list = array(ctx, path, v)?;
    if list.is_empty() || list.len() > 25 {
        ctx.error(
            path,
            format!(
                "Invalid value: {} items: must have between 1 and 25 items",
                list.len()
            ),
        );
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let p = index(path, i);
        let Some(s) = string(ctx, &p, item) else {
            continue;
        };
        if !seen.insert(s) {
            ctx.error(&p, format!("Duplicate value: {s:?}"));
        }
        out.push((p, s.to_string()));
    }
    Some(out)
}

/// Whether `s` matches the ClusterNetworkPolicy CRD's `DomainName` pattern, exactly as
/// written upstream: its first-character class `[a-zA-z0-9]` spans `A` to `z`, so it also
/// admits `[`, `\`, `]`, `^`, `_` and a backtick (`lint` reports those).
pub(crate) fn domain_pattern_valid(s: &str) -> bool {
    let s = s.strip_prefix("*.").unwrap_or(s);
    let s = s.strip_suffix('.').unwrap_or(s);
    let first = |c: u8| c.is_ascii_digit() || c.is_ascii_lowercase() || (b'A'..=b'z').contains(&c);
    let middle = |c: u8| c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
    let label = |l: &str| {
        let b = l.as_bytes();
        match b {
            [] => false,
            [c] => first(*c),
            [c, mid @ .., last] => {
                first(*c) && mid.iter().all(|c| middle(*c)) && last.is_ascii_alphanumeric()
            }
        }
    };
    let labels: Vec<&str> = s.split('.').collect();
    labels.len() >= 2 && labels.iter().all(|l| label(l))
}

const KEP_NAMESPACE_FIELDS: &[&str] = &[
    "namespaceSelector",
    "related",
    "sameLabels",
    "notSameLabels",
];

/// `namespaces`: a label selector (upstream), or the KEP's NamespacedPeer.
fn namespace_match(ctx: &mut Ctx<'_>, path: &str, v: &Value) -> Option<NamespaceMatch> {
    let m = obj(ctx, path, v)?;
    let kep: Vec<&str> = KEP_NAMESPACE_FIELDS
        .iter()
        .copied()
        .filter(|k| m.contains_key(*k))
        .collect();
    if kep.is_empty() {
        return selector(ctx, path, v).map(NamespaceMatch::Selector);
    }
    if kep.len() != m.len() || kep.len() > 1 {
        ctx.error(
            path,
            format!(
                "Invalid value: exactly one of {} must be set",
                KEP_NAMESPACE_FIELDS.join(", ")
            ),
        );
        return None;
    }
    let key = kep[0];
    let p = join(path, key);
    match key {
        "namespaceSelector" => selector(ctx, &p, &m[key]).map(NamespaceMatch::Selector),
        "related" => match string(ctx, &p, &m[key])? {
            "Self" => Some(NamespaceMatch::SelfNamespace),
            "NotSelf" => Some(NamespaceMatch::NotSelfNamespace),
            other => {
                ctx.error(
                    &p,
                    format!(
                        "Unsupported value: {other:?}: supported values: \"Self\", \"NotSelf\""
                    ),
                );
                None
            }
        },
        _ => {
            let list = array(ctx, &p, &m[key])?;
            let mut keys = Vec::new();
            for (i, k) in list.iter().enumerate() {
                let kp = index(&p, i);
                if let Some(s) = string(ctx, &kp, k) {
                    if let Some(e) = validate::qualified_name(s) {
                        ctx.error(&kp, e);
                    }
                    keys.push(s.to_string());
                }
            }
            Some(if key == "sameLabels" {
                NamespaceMatch::SameLabels(keys)
            } else {
                NamespaceMatch::NotSameLabels(keys)
            })
        }
    }
}

fn networks(ctx: &mut Ctx<'_>, path: &str, v: &Value) -> Option<Vec<ipnet::IpNet>> {
    let mut out = Vec::new();
    for (p, s) in peer_strings(ctx, path, v)? {
        if s.len() > 43 {
            ctx.error(&p, "Too long: may not be more than 43 bytes");
        }
        match validate::parse_cidr(&s) {
            Ok(n) => out.push(n),
            Err(_) => ctx.error(
                &p,
                format!("Invalid value: {s:?}: Invalid CIDR format provided"),
            ),
        }
    }
    Some(out)
}

/// v1alpha1 `ports`: each entry exactly one of `portNumber`, `namedPort`, `portRange`.
fn ports(ctx: &mut Ctx<'_>, path: &str, v: &Value) -> Option<Vec<AdminPort>> {
    let list = array(ctx, path, v)?;
    if list.len() > 100 {
        ctx.error(
            path,
            format!("Too many: {}: must have at most 100 items", list.len()),
        );
    }
    let mut out = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let p = index(path, i);
        let Some(m) = obj(ctx, &p, item) else {
            continue;
        };
        known(ctx, &p, m, &["portNumber", "namedPort", "portRange"]);
        let Some(key) = exactly_one(ctx, &p, m, &["portNumber", "namedPort", "portRange"]) else {
            continue;
        };
        let kp = join(&p, key);
        let port = match key {
            "namedPort" => string(ctx, &kp, &m[key]).and_then(|n| named_port(ctx, &kp, n)),
            "portNumber" => obj(ctx, &kp, &m[key]).and_then(|pm| {
                known(ctx, &kp, pm, &["protocol", "port"]);
                let protocol = protocol_field(ctx, &kp, pm);
                let port = required_port(ctx, &kp, pm, "port")?;
                Some(AdminPort::Ports {
                    protocol,
                    range: Some(PortRange::single(port)),
                })
            }),
            _ => obj(ctx, &kp, &m[key]).and_then(|pm| {
                known(ctx, &kp, pm, &["protocol", "start", "end"]);
                let protocol = protocol_field(ctx, &kp, pm);
                port_range(ctx, &kp, pm).map(|range| AdminPort::Ports {
                    protocol,
                    range: Some(range),
                })
            }),
        };
        out.extend(port);
    }
    Some(out)
}

/// v1alpha2 `protocols`: each entry exactly one of `tcp`, `udp`, `sctp`, `destinationNamedPort`.
fn protocols(ctx: &mut Ctx<'_>, path: &str, v: &Value) -> Option<Vec<AdminPort>> {
    let list = array(ctx, path, v)?;
    if list.is_empty() || list.len() > 25 {
        ctx.error(
            path,
            format!(
                "Invalid value: {} items: must have between 1 and 25 items",
                list.len()
            ),
        );
    }
    let mut out = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let p = index(path, i);
        let Some(m) = obj(ctx, &p, item) else {
            continue;
        };
        known(ctx, &p, m, &["tcp", "udp", "sctp", "destinationNamedPort"]);
        let Some(key) = exactly_one(ctx, &p, m, &["tcp", "udp", "sctp", "destinationNamedPort"])
        else {
            continue;
        };
        let kp = join(&p, key);
        let protocol = match key {
            "tcp" => Protocol::Tcp,
            "udp" => Protocol::Udp,
            "sctp" => Protocol::Sctp,
            _ => {
                out.extend(string(ctx, &kp, &m[key]).and_then(|n| named_port(ctx, &kp, n)));
                continue;
            }
        };
        let Some(pm) = obj(ctx, &kp, &m[key]) else {
            continue;
        };
        known(ctx, &kp, pm, &["destinationPort"]);
        let Some(dest) = pm.get("destinationPort") else {
            if pm.is_empty() {
                ctx.error(&kp, "Invalid value: must have at least 1 properties");
            }
            out.push(AdminPort::Ports {
                protocol,
                range: None,
            });
            continue;
        };
        let dp = join(&kp, "destinationPort");
        let Some(dm) = obj(ctx, &dp, dest) else {
            continue;
        };
        known(ctx, &dp, dm, &["number", "range"]);
        let Some(which) = exactly_one(ctx, &dp, dm, &["number", "range"]) else {
            continue;
        };
        let range = if which == "number" {
            required_port(ctx, &dp, dm, "number").map(PortRange::single)
        } else {
            obj(ctx, &join(&dp, "range"), &dm["range"]).and_then(|rm| {
                known(ctx, &join(&dp, "range"), rm, &["start", "end"]);
                port_range(ctx, &join(&dp, "range"), rm)
            })
        };
        out.extend(range.map(|r| AdminPort::Ports {
            protocol,
            range: Some(r),
        }));
    }
    Some(out)
}

fn named_port(ctx: &mut Ctx<'_>, path: &str, name: &str) -> Option<AdminPort> {
    if let Some(e) = validate::port_name(name) {
        ctx.error(path, e);
        return None;
    }
    Some(AdminPort::Named(name.to_string()))
}

/// `start`/`end`, both 1–65535, "Start port must be less than End port".
fn port_range(ctx: &mut Ctx<'_>, path: &str, m: &Map<String, Value>) -> Option<PortRange> {
    let start = required_port(ctx, path, m, "start");
    let end = required_port(ctx, path, m, "end");
    let (start, end) = (start?, end?);
    if start >= end {
        ctx.error(path, "Invalid value: Start port must be less than End port");
        return None;
    }
    Some(PortRange { start, end })
}

fn protocol_field(ctx: &mut Ctx<'_>, path: &str, m: &Map<String, Value>) -> Protocol {
    let p = join(path, "protocol");
    let s = m.get("protocol").and_then(|v| string(ctx, &p, v));
    validate::protocol(ctx, &p, s)
}

fn required_port(
    ctx: &mut Ctx<'_>,
    path: &str,
    m: &Map<String, Value>,
    key: &str,
) -> Option<crate::types::Port> {
    let p = join(path, key);
    match m.get(key) {
        None => {
            ctx.error(&p, "Required value");
            None
        }
        Some(v) => integer(ctx, &p, v).and_then(|n| validate::port(ctx, &p, n)),
    }
}

/// `pods.namespaceSelector`: required in the v1alpha1 kinds; optional in
/// ClusterNetworkPolicy, where an absent one selects every namespace.
fn namespace_selector(
    ctx: &mut Ctx<'_>,
    kind: PolicyKind,
    path: &str,
    pods: &Map<String, Value>,
) -> Option<Selector> {
    if kind == PolicyKind::ClusterNetworkPolicy && !pods.contains_key("namespaceSelector") {
        return Some(Selector::default());
    }
    required_selector(ctx, path, pods, "namespaceSelector")
}

fn required_selector(
    ctx: &mut Ctx<'_>,
    path: &str,
    m: &Map<String, Value>,
    key: &str,
) -> Option<Selector> {
    match m.get(key) {
        None => {
            ctx.error(&join(path, key), "Required value");
            None
        }
        Some(v) => selector(ctx, &join(path, key), v),
    }
}

fn selector(ctx: &mut Ctx<'_>, path: &str, v: &Value) -> Option<Selector> {
    let v = if v.is_null() {
        &Value::Object(Map::new())
    } else {
        v
    };
    match super::decode_strict::<LabelSelector>(v, path) {
        Ok((s, unknown)) => {
            for field in unknown {
                ctx.error(&field, format!("unknown field {field:?}"));
            }
            Some(validate::selector(ctx, path, &s))
        }
        Err((at, message)) => {
            ctx.error(&at, message);
            None
        }
    }
}

/// Reports every key of `m` that is not one of `keys` (kubectl's strict field validation:
/// a misspelt field must not silently widen or drop a rule).
fn known(ctx: &mut Ctx<'_>, path: &str, m: &Map<String, Value>, keys: &[&str]) {
    for k in m.keys().filter(|k| !keys.contains(&k.as_str())) {
        let p = join(path, k);
        ctx.error(&p, format!("unknown field {p:?}"));
    }
}

/// Checks that exactly one of `keys` is present and returns it.
fn exactly_one<'k>(
    ctx: &mut Ctx<'_>,
    path: &str,
    m: &Map<String, Value>,
    keys: &[&'k str],
) -> Option<&'k str> {
    let present: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| m.contains_key(*k))
        .collect();
    match present.as_slice() {
        [one] => Some(one),
        [] => {
            ctx.error(
                path,
                format!(
                    "Invalid value: exactly one of {} must be set",
                    keys.join(", ")
                ),
            );
            None
        }
        many => {
            ctx.error(
                path,
                format!(
                    "Invalid value: exactly one of {} must be set, found {}",
                    keys.join(", "),
                    many.join(", ")
                ),
            );
            None
        }
    }
}

fn obj<'v>(ctx: &mut Ctx<'_>, path: &str, v: &'v Value) -> Option<&'v Map<String, Value>> {
    let m = v.as_object();
    if m.is_none() {
        ctx.error(
            path,
            format!("Invalid value: {}: must be an object", kind_of(v)),
        );
    }
    m
}

fn array<'v>(ctx: &mut Ctx<'_>, path: &str, v: &'v Value) -> Option<&'v Vec<Value>> {
    let a = v.as_array();
    if a.is_none() {
        ctx.error(
            path,
            format!("Invalid value: {}: must be a list", kind_of(v)),
        );
    }
    a
}

fn string<'v>(ctx: &mut Ctx<'_>, path: &str, v: &'v Value) -> Option<&'v str> {
    let s = v.as_str();
    if s.is_none() {
        ctx.error(
            path,
            format!("Invalid value: {}: must be a string", kind_of(v)),
        );
    }
    s
}

fn integer(ctx: &mut Ctx<'_>, path: &str, v: &Value) -> Option<i64> {
    let n = v.as_i64();
    if n.is_none() {
        ctx.error(path, format!("Invalid value: {v}: must be an integer"));
    }
    n
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}
