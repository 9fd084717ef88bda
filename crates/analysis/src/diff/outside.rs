//! The outside of the cluster, cut into classes: the CIDRs that the policies of either state
//! name split each address family into regions whose addresses every policy treats alike.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use palisade_engine::{EndpointKind, Engine};

use crate::Analysis;
use crate::universe::successor;

/// Addresses outside the cluster that no policy of either state tells apart: `within` minus
/// every `except`, less the addresses pods and nodes hold.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Region {
    /// The smallest named CIDR holding the region (`0.0.0.0/0` or `::/0` when none does).
    pub within: IpNet,
    /// The largest named CIDRs inside `within`: not part of the region.
    pub except: Vec<IpNet>,
    /// An address of the region that neither state gives to a pod or a node.
    pub sample: IpAddr,
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.within)?;
        if !self.except.is_empty() {
            let ex: Vec<String> = self.except.iter().map(IpNet::to_string).collect();
            write!(f, " except {}", ex.join(", "))?;
        }
        Ok(())
    }
}

/// The outside regions of two states: every region the CIDRs of either state cut, in each
/// address family, that holds at least one address no pod or node of either state holds.
pub(crate) fn regions(old: &Engine, new: &Engine) -> Vec<Region> {
    let cidrs: BTreeSet<IpNet> = Analysis::new(old)
        .named_cidrs()
        .into_iter()
        .chain(Analysis::new(new).named_cidrs())
        .map(|c| c.trunc())
        .collect();
    let whole = [
        IpNet::V4(ipnet::Ipv4Net::default()),
        IpNet::V6(ipnet::Ipv6Net::default()),
    ];
    let owned = |ip: IpAddr| {
        [old, new]
            .iter()
            .any(|e| !matches!(e.endpoint_for_ip(ip).kind, EndpointKind::External))
    };
    // Every region starts at the start of a family, at a CIDR's first address, or just
    // after a CIDR's last one; from each start, step over addresses the cluster holds for
    // as long as the region does not change.
    let mut starts: BTreeSet<IpAddr> = whole.iter().map(IpNet::network).collect();
    for c in &cidrs {
        starts.insert(c.network());
        starts.extend(successor(c.broadcast()));
    }
    let owned_count = [old, new]
        .iter()
        .map(|e| e.owned_address_count())
        .sum::<usize>();
    let mut out: BTreeMap<IpNet, Region> = BTreeMap::new();
    for start in starts {
        let within = smallest(&cidrs, &whole, start);
        if out.contains_key(&within) {
            continue;
        }
        let mut ip = Some(start);
        for _ in 0..=owned_count {
            let Some(a) = ip else { break };
            if smallest(&cidrs, &whole, a) != within {
                break;
            }
            if owned(a) {
                ip = successor(a);
                continue;
            }
            let except = cidrs
                .iter()
                .filter(|c| within.contains(*c) && **c != within)
                .filter(|c| {
                    !cidrs
                        .iter()
                        .any(|p| p != *c && *p != within && p.contains(*c) && within.contains(p))
                })
                .copied()
                .collect();
            out.insert(
                within,
                Region {
                    within,
                    except,
                    sample: a,
                },
            );
            break;
        }
    }
    out.into_values().collect()
}

/// The smallest CIDR holding `ip`: a named one, or the whole family.
fn smallest(cidrs: &BTreeSet<IpNet>, whole: &[IpNet; 2], ip: IpAddr) -> IpNet {
    cidrs
        .iter()
        .filter(|c| c.contains(&ip))
        .max_by_key(|c| c.prefix_len())
        .copied()
        .unwrap_or(if ip.is_ipv6() { whole[1] } else { whole[0] })
}
