//! Neutron's semantics, to check a translation: a port's groups' rules are a union of
//! allows per direction; connections are stateful, so only the first packet is judged.

use std::collections::HashMap;
use std::net::IpAddr;

use palisade_model::Protocol;

use crate::groups::{AddressGroup, PortBinding, Remote, RuleDirection, SecurityGroup, Translation};

/// A translation indexed for evaluation.
pub struct SgEvaluator<'t> {
    groups: HashMap<&'t str, &'t SecurityGroup>,
    address_groups: HashMap<&'t str, &'t AddressGroup>,
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
        let ports = t
            .ports
            .iter()
            .flat_map(|p| p.fixed_ips.iter().map(move |ip| (*ip, p)))
            .collect();
        let address_groups = t
            .address_groups
            .iter()
            .map(|g| (g.name.as_str(), g))
            .collect();
        SgEvaluator {
            groups,
            address_groups,
            ports,
        }
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
        self.side(sp.copied(), RuleDirection::Egress, dst, protocol, port)
            && self.side(dp.copied(), RuleDirection::Ingress, src, protocol, port)
    }

    /// Whether some rule of `dir` of a group on `port_of` (if it is a port) admits the
    /// connection with `remote` on the other side.
    fn side(
        &self,
        port_of: Option<&PortBinding>,
        dir: RuleDirection,
        remote: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> bool {
        let Some(binding) = port_of else {
            return true;
        };
        let carries = |r: &Remote| match r {
            Remote::Group(group) => self
                .ports
                .get(&remote)
                .is_some_and(|p| p.security_groups.contains(group)),
            Remote::AddressGroup(name) => self
                .address_groups
                .get(name.as_str())
                .is_some_and(|g| g.addresses.iter().any(|n| n.contains(&remote))),
            _ => false,
        };
        binding
            .security_groups
            .iter()
            .filter_map(|g| self.groups.get(g.as_str()))
            .flat_map(|g| &g.security_group_rules)
            .any(|r| r.direction == dir && r.admits(remote, protocol, port, carries))
    }
}
