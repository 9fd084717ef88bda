//! Neutron's shapes: security groups, their rules, and the groups each port carries.

use std::collections::BTreeSet;

use serde::Serialize;

/// `ingress` or `egress`, seen from the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleDirection {
    /// Into the port.
    Ingress,
    /// Out of the port.
    Egress,
}

/// `IPv4` or `IPv6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Ethertype {
    /// IPv4.
    IPv4,
    /// IPv6.
    IPv6,
}

impl Ethertype {
    /// The ethertype of an address.
    pub fn of(ip: &std::net::IpAddr) -> Ethertype {
        if ip.is_ipv4() {
            Ethertype::IPv4
        } else {
            Ethertype::IPv6
        }
    }
}

/// A security group rule in the Neutron API's shape.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct SgRule {
    /// Direction.
    pub direction: RuleDirection,
    /// Address family.
    pub ethertype: Ethertype,
    /// `tcp`, `udp`, `sctp`, or null for every protocol.
    pub protocol: Option<String>,
    /// First port (null: every port).
    pub port_range_min: Option<u16>,
    /// Last port.
    pub port_range_max: Option<u16>,
    /// The remote side as a CIDR (null with a null group: any address).
    pub remote_ip_prefix: Option<String>,
    /// The remote side as the ports of another group (its name here).
    pub remote_group_id: Option<String>,
    /// Which policy and rule this implements.
    pub description: String,
}

impl SgRule {
    /// The rule without its description, for deduplication.
    pub(crate) fn key(&self) -> SgRule {
        SgRule {
            description: String::new(),
            ..self.clone()
        }
    }
}

/// A security group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecurityGroup {
    /// Name (stable across runs; `remote_group_id`s refer to it).
    pub name: String,
    /// Tags: `palisade` and one derived from the policy's namespace/name.
    pub tags: Vec<String>,
    /// What it is for.
    pub description: String,
    /// Its rules, deduplicated, in a stable order.
    pub security_group_rules: Vec<SgRule>,
}

/// The groups one pod's port must carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortBinding {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// The pod's addresses.
    pub fixed_ips: Vec<String>,
    /// Group names.
    pub security_groups: BTreeSet<String>,
}

/// The whole translation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Translation {
    /// Every group.
    pub security_groups: Vec<SecurityGroup>,
    /// Every pod port.
    pub ports: Vec<PortBinding>,
}

impl Translation {
    /// `groups, rules, ports` counts for a summary line.
    pub fn summary(&self) -> String {
        let rules: usize = self
            .security_groups
            .iter()
            .map(|g| g.security_group_rules.len())
            .sum();
        format!(
            "{} security groups, {} rules, {} ports",
            self.security_groups.len(),
            rules,
            self.ports.len()
        )
    }
}
