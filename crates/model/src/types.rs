//! Precise value types shared by every object kind: protocols, ports, labels, selectors, names.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// Labels of an object.
pub type Labels = BTreeMap<String, String>;

/// A transport protocol that network policies can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// Every protocol, in a fixed order.
    pub const ALL: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp];

    /// The Kubernetes spelling (`TCP`, `UDP`, `SCTP`).
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Protocol {
    type Err = String;
    /// Parses the exact Kubernetes spelling; the API server is case-sensitive.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "TCP" => Ok(Protocol::Tcp),
            "UDP" => Ok(Protocol::Udp),
            "SCTP" => Ok(Protocol::Sctp),
            other => Err(format!(
                "unsupported protocol {other:?}: must be TCP, UDP or SCTP"
            )),
        }
    }
}

/// A port number, 1–65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Port(u16);

impl Port {
    /// A port from an API integer, if it is within 1–65535.
    pub fn new(n: i64) -> Option<Port> {
        (1..=65535).contains(&n).then_some(Port(n as u16))
    }
    /// The number.
    pub fn get(self) -> u16 {
        self.0
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An inclusive range of ports (`start..=end`, start ≤ end).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortRange {
    /// First port.
    pub start: Port,
    /// Last port, included.
    pub end: Port,
}

impl PortRange {
    /// One port.
    pub fn single(p: Port) -> PortRange {
        PortRange { start: p, end: p }
    }
    /// Whether `port` is inside.
    pub fn contains(&self, port: u16) -> bool {
        self.start.get() <= port && port <= self.end.get()
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.start == self.end {
            write!(f, "{}", self.start)
        } else {
            write!(f, "{}-{}", self.start, self.end)
        }
    }
}

/// A label selector requirement operator, with the values it carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SelectorOp {
    /// The label is present with one of these values.
    In(Vec<String>),
    /// The label is absent or has none of these values.
    NotIn(Vec<String>),
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// Operator and values.
    pub op: SelectorOp,
}

/// A validated label selector: all `match_labels` and all `expressions` must hold.
/// The empty selector selects everything.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Selector {
    /// `matchLabels`.
    pub match_labels: BTreeMap<String, String>,
    /// `matchExpressions`.
    pub expressions: Vec<Requirement>,
}

impl Selector {
    /// The selector that selects everything.
    pub fn everything() -> Selector {
        Selector::default()
    }

    /// Whether it selects everything.
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.expressions.is_empty()
    }

    /// Whether an object with `labels` is selected.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.expressions.iter().all(|r| r.matches(labels))
    }
}

impl Requirement {
    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match &self.op {
            SelectorOp::In(values) => value.is_some_and(|v| values.contains(v)),
            SelectorOp::NotIn(values) => value.is_none_or(|v| !values.contains(v)),
            SelectorOp::Exists => value.is_some(),
            SelectorOp::DoesNotExist => value.is_none(),
        }
    }
}

impl fmt::Display for Selector {
    /// The kubectl `-l` spelling; `{}` for the empty selector.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("{}");
        }
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for r in &self.expressions {
            parts.push(match &r.op {
                SelectorOp::In(v) => format!("{} in ({})", r.key, v.join(",")),
                SelectorOp::NotIn(v) => format!("{} notin ({})", r.key, v.join(",")),
                SelectorOp::Exists => r.key.clone(),
                SelectorOp::DoesNotExist => format!("!{}", r.key),
            });
        }
        f.write_str(&parts.join(","))
    }
}

/// The kind of a policy object, in the order used to break priority ties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PolicyKind {
    /// `policy.networking.k8s.io/v1alpha1` AdminNetworkPolicy.
    AdminNetworkPolicy,
    /// `policy.networking.k8s.io/v1alpha2` ClusterNetworkPolicy.
    ClusterNetworkPolicy,
    /// `policy.networking.k8s.io/v1alpha1` BaselineAdminNetworkPolicy.
    BaselineAdminNetworkPolicy,
    /// `networking.k8s.io/v1` or `extensions/v1beta1` NetworkPolicy.
    NetworkPolicy,
    /// The legacy `net.beta.kubernetes.io/network-policy` DefaultDeny namespace annotation.
    NamespaceDefaultDeny,
}

impl PolicyKind {
    /// The Kubernetes kind name.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::AdminNetworkPolicy => "AdminNetworkPolicy",
            PolicyKind::ClusterNetworkPolicy => "ClusterNetworkPolicy",
            PolicyKind::BaselineAdminNetworkPolicy => "BaselineAdminNetworkPolicy",
            PolicyKind::NetworkPolicy => "NetworkPolicy",
            PolicyKind::NamespaceDefaultDeny => "Namespace(DefaultDeny)",
        }
    }
}

/// Names a policy object: kind, namespace (for namespaced kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PolicyRef {
    /// Kind.
    pub kind: PolicyKind,
    /// Namespace, for NetworkPolicy and the namespace annotation.
    pub namespace: Option<String>,
    /// Name (the namespace's name for the annotation).
    pub name: String,
}

impl fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) if self.kind != PolicyKind::NamespaceDefaultDeny => {
                write!(f, "{} {}/{}", self.kind.as_str(), ns, self.name)
            }
            _ => write!(f, "{} {}", self.kind.as_str(), self.name),
        }
    }
}
