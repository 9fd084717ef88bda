//! Which domain name made a `domainNames` rule match: the pattern, the name of the DNS map
//! it matched and the address that name resolves to.

use std::net::IpAddr;

use palisade_model::{AdminPeer, Direction, DnsMap};

use crate::eval::Flow;
use crate::state::Engine;
use crate::verdict::RuleMatch;

/// A `domainNames` pattern that matched a name resolving to the destination.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DomainHit {
    /// The pattern as written.
    pub pattern: String,
    /// The name of the DNS map it matched.
    pub name: String,
    /// The address that name resolves to: the destination.
    pub address: IpAddr,
}

impl std::fmt::Display for DomainHit {
    /// `` `*.stripe.com` matched api.stripe.com → 54.187.174.169 ``.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` matched {} \u{2192} {}",
            self.pattern, self.name, self.address
        )
    }
}

impl Engine {
    /// The domain name through which the egress rule `m` matched `flow`, when the rule has
    /// a `domainNames` peer that holds the destination (none without a DNS map).
    pub fn domain_hit(&self, m: &RuleMatch, flow: &Flow) -> Option<DomainHit> {
        self.domain_hit_in(self.cluster.dns.as_deref()?, m, flow.dst.ip)
    }

    /// The domain name through which the egress rule `m` matched a connection to `dst`,
    /// by the answers of `dns` (the names a node agent learned, say).
    pub fn domain_hit_in(&self, dns: &DnsMap, m: &RuleMatch, dst: IpAddr) -> Option<DomainHit> {
        if m.direction != Direction::Egress {
            return None;
        }
        let policy = self
            .cluster
            .admin_policies
            .iter()
            .zip(&self.admins)
            .find(|(_, c)| c.info.reference == m.policy.reference)?
            .0;
        let rule = policy.egress.get(m.index as usize)?;
        rule.peers.iter().find_map(|peer| match peer {
            AdminPeer::DomainNames(patterns) => patterns.iter().find_map(|p| {
                dns.resolve(p)
                    .find(|(_, ip)| *ip == dst)
                    .map(|(name, address)| DomainHit {
                        pattern: p.text.clone(),
                        name: name.to_string(),
                        address,
                    })
            }),
            _ => None,
        })
    }
}
