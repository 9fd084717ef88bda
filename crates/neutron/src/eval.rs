//! Neutron's semantics, to check a translation: a port's groups' rules are a union of
//! allows per direction; connections are stateful, so only the first packet is judged.

use std::collections::HashMap;
use std::net::IpAddr;

use palisade_model::Protocol;

use crate::groups::{Ethertype, PortBinding, RuleDirection, SecurityGroup, SgRule, Translation};

/// A translation indexed for evaluation.
pub struct SgEvaluator<'t> {
    groups: HashMap<&'t str, &'t SecurityGroup>,
    ports: HashMap<IpAddr, &'t PortBinding>,
}

impl<'t> SgEvaluator<'t> {
    /// Indexes a translation.
    pub fn new(t: &'t Translation) -> SgEvaluator<'t> {
        let groups = t
            .security_groups
            .iter()
            .map(|g| (g.name.as_str(), g))
            .collect();
        let mut ports = HashMap::new();
        for p in &t.ports {
            for ip in &p.fixed_ips {
                if let Ok(ip) = ip.parse() {
                    ports.insert(ip, p);
                }
            }
        }
        SgEvaluator { groups, ports }
    }

    /// Whether a new connection from `src` to `dst` is allowed: egress rules of the
    /// source port (if it is a port) and ingress rules of the destination port (likewise).
    pub fn allows(&self, src: IpAddr, dst: IpAddr, protocol: Protocol, port: u16) -> bool {
        let (sp, dp) = (self.ports.get(&src), self.ports.get(&dst));
        if let (Some(a), Some(b)) = (sp, dp)
            && std::ptr::eq(*a, *b)
        {
            return true; // a pod's traffic to itself never reaches its port
        }
        let side = |port_of: Option<&&PortBinding>, dir, remote: IpAddr| match port_of {
            None => true,
            Some(p) => p
                .security_groups
                .iter()
                .filter_map(|g| self.groups.get(g.as_str()))
                .any(|g| {
                    g.security_group_rules
                        .iter()
                        .any(|r| r.direction == dir && self.matches(r, remote, protocol, port))
                }),
        };
        side(sp, RuleDirection::Egress, dst) && side(dp, RuleDirection::Ingress, src)
    }

    fn matches(&self, r: &SgRule, remote: IpAddr, protocol: Protocol, port: u16) -> bool {
        if r.ethertype != Ethertype::of(&remote) {
            return false;
        }
        if let Some(p) = &r.protocol
            && !p.eq_ignore_ascii_case(protocol.as_str())
        {
            return false;
        }
        if let (Some(min), Some(max)) = (r.port_range_min, r.port_range_max)
            && !(min..=max).contains(&port)
        {
            return false;
        }
        if let Some(prefix) = &r.remote_ip_prefix {
            return prefix
                .parse::<ipnet::IpNet>()
                .is_ok_and(|n| n.contains(&remote));
        }
        if let Some(group) = &r.remote_group_id {
            return self
                .ports
                .get(&remote)
                .is_some_and(|p| p.security_groups.contains(group));
        }
        true
    }
}
