//! Neutron's shapes: security groups, their rules, and the groups each port carries.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;
use palisade_model::{PortRange, Protocol};
use serde::{Serialize, Serializer};

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
    pub fn of(ip: &IpAddr) -> Ethertype {
        if ip.is_ipv4() {
            Ethertype::IPv4
        } else {
            Ethertype::IPv6
        }
    }
}

/// What traffic a rule admits: every protocol, or one protocol on a port range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Traffic {
    /// Every protocol and port (Neutron's `protocol: null`).
    Any,
    /// One protocol, on an inclusive port range or (`None`) on every port.
    Protocol(Protocol, Option<PortRange>),
}

/// The remote side of a rule (the source for ingress, the destination for egress).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Remote {
    /// Any address of the rule's ethertype.
    Any,
    /// The addresses of a prefix (`remote_ip_prefix`).
    Prefix(IpNet),
    /// The ports that carry a group (`remote_group_id`; the group's name here, since
    /// Neutron ids do not exist yet when the translation runs).
    Group(String),
    /// The addresses of an address group (`remote_address_group_id`; its name here).
    AddressGroup(String),
}

/// A security group rule; serialized in the Neutron API's shape (`protocol`,
/// `port_range_min`/`max`, `remote_ip_prefix`, `remote_group_id` as strings, numbers or
/// null).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SgRule {
    /// Direction.
    pub direction: RuleDirection,
    /// Address family.
    pub ethertype: Ethertype,
    /// Protocol and ports.
    pub traffic: Traffic,
    /// Remote side.
    pub remote: Remote,
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

    /// Whether the rule admits a new connection in its direction with `remote` on the
    /// other side; `remote_group` says whether `remote` is a port carrying a given group,
    /// or is among the addresses of a given address group.
    pub fn admits(
        &self,
        remote: IpAddr,
        protocol: Protocol,
        port: u16,
        remote_group: impl Fn(&Remote) -> bool,
    ) -> bool {
        let traffic = match self.traffic {
            Traffic::Any => true,
            Traffic::Protocol(p, range) => p == protocol && range.is_none_or(|r| r.contains(port)),
        };
        traffic
            && self.ethertype == Ethertype::of(&remote)
            && match &self.remote {
                Remote::Any => true,
                Remote::Prefix(net) => net.contains(&remote),
                Remote::Group(_) | Remote::AddressGroup(_) => remote_group(&self.remote),
            }
    }
}

/// Neutron's spelling of a protocol.
fn neutron_protocol(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "tcp",
        Protocol::Udp => "udp",
        Protocol::Sctp => "sctp",
    }
}

/// [`SgRule`] in the Neutron API's field layout.
#[derive(Serialize)]
struct WireRule<'a> {
    direction: RuleDirection,
    ethertype: Ethertype,
    protocol: Option<&'static str>,
    port_range_min: Option<u16>,
    port_range_max: Option<u16>,
    remote_ip_prefix: Option<String>,
    remote_group_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    remote_address_group_id: Option<&'a str>,
    description: &'a str,
}

impl Serialize for SgRule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (protocol, range) = match self.traffic {
            Traffic::Any => (None, None),
            Traffic::Protocol(p, range) => (Some(neutron_protocol(p)), range),
        };
        WireRule {
            direction: self.direction,
            ethertype: self.ethertype,
            protocol,
            port_range_min: range.map(|r| r.start.get()),
            port_range_max: range.map(|r| r.end.get()),
            remote_ip_prefix: match &self.remote {
                Remote::Prefix(net) => Some(net.to_string()),
                _ => None,
            },
            remote_group_id: match &self.remote {
                Remote::Group(g) => Some(g),
                _ => None,
            },
            remote_address_group_id: match &self.remote {
                Remote::AddressGroup(g) => Some(g),
                _ => None,
            },
            description: &self.description,
        }
        .serialize(serializer)
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

/// An address group (`--peer-mode address-groups`): the addresses a selector peer
/// selects, referred to by `remote_address_group_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddressGroup {
    /// Name (stable across runs; rules refer to it).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// The addresses, as `/32` and `/128` prefixes, sorted.
    #[serde(serialize_with = "prefixes_as_strings")]
    pub addresses: Vec<IpNet>,
}

/// Serializes prefixes as text, as the Neutron API writes them (`serialize_with`).
pub fn prefixes_as_strings<S: Serializer>(
    nets: &[IpNet],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(nets.iter().map(ToString::to_string))
}

/// The groups one pod's port must carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortBinding {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// The pod's addresses.
    pub fixed_ips: Vec<IpAddr>,
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
    /// Every address group (only in [`crate::PeerMode::AddressGroups`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub address_groups: Vec<AddressGroup>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_model::Port;

    fn rule(traffic: Traffic, remote: Remote) -> SgRule {
        SgRule {
            direction: RuleDirection::Ingress,
            ethertype: Ethertype::IPv4,
            traffic,
            remote,
            description: "d".into(),
        }
    }

    #[test]
    fn rules_serialize_in_the_neutron_shape() {
        let port = |n| Port::new(n).unwrap();
        let range = PortRange {
            start: port(8000),
            end: port(8080),
        };
        let rows = [
            (
                rule(Traffic::Any, Remote::Any),
                r#"{"direction":"ingress","ethertype":"IPv4","protocol":null,"port_range_min":null,"port_range_max":null,"remote_ip_prefix":null,"remote_group_id":null,"description":"d"}"#,
                "every protocol, any remote: all null",
            ),
            (
                rule(
                    Traffic::Protocol(Protocol::Sctp, Some(range)),
                    Remote::Prefix("10.0.0.0/8".parse().unwrap()),
                ),
                r#"{"direction":"ingress","ethertype":"IPv4","protocol":"sctp","port_range_min":8000,"port_range_max":8080,"remote_ip_prefix":"10.0.0.0/8","remote_group_id":null,"description":"d"}"#,
                "lowercase protocol, inclusive range, prefix as text",
            ),
            (
                rule(
                    Traffic::Protocol(Protocol::Udp, None),
                    Remote::Group("g".into()),
                ),
                r#"{"direction":"ingress","ethertype":"IPv4","protocol":"udp","port_range_min":null,"port_range_max":null,"remote_ip_prefix":null,"remote_group_id":"g","description":"d"}"#,
                "a whole protocol, a remote group",
            ),
        ];
        for (r, want, why) in rows {
            assert_eq!(serde_json::to_string(&r).unwrap(), want, "{why}");
        }
    }

    #[test]
    fn admits_checks_family_protocol_range_and_remote() {
        let web = rule(
            Traffic::Protocol(
                Protocol::Tcp,
                Some(PortRange::single(Port::new(80).unwrap())),
            ),
            Remote::Prefix("10.0.0.0/24".parse().unwrap()),
        );
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let no_group = |_: &Remote| false;
        let rows = [
            (
                ip("10.0.0.9"),
                Protocol::Tcp,
                80,
                true,
                "inside the prefix, port and protocol",
            ),
            (
                ip("10.0.1.9"),
                Protocol::Tcp,
                80,
                false,
                "outside the prefix",
            ),
            (ip("10.0.0.9"), Protocol::Udp, 80, false, "another protocol"),
            (
                ip("10.0.0.9"),
                Protocol::Tcp,
                81,
                false,
                "outside the range",
            ),
            (ip("fd00::9"), Protocol::Tcp, 80, false, "another family"),
        ];
        for (remote, protocol, port, want, why) in rows {
            assert_eq!(web.admits(remote, protocol, port, no_group), want, "{why}");
        }
        let group = rule(Traffic::Any, Remote::Group("g".into()));
        assert!(
            group.admits(ip("10.0.0.9"), Protocol::Sctp, 9, |g| *g
                == Remote::Group("g".into())),
            "a member of the remote group"
        );
        assert!(
            !group.admits(ip("10.0.0.9"), Protocol::Sctp, 9, no_group),
            "not a member"
        );
    }
}
