//! A userspace interpreter of exactly the generated ruleset, for tests without a kernel
//! and for deciding which tracked connections an update must cut.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use palisade_model::Protocol;

use crate::ir::{Chain, Field, Match, Rule, Ruleset, Verdict};

/// The first packet of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Packet {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Protocol.
    pub protocol: Protocol,
    /// Destination port.
    pub dport: u16,
}

/// What the ruleset does with a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NftVerdict {
    /// Accepted.
    Accept,
    /// Dropped, by the rule with this log id (if it logs).
    Drop(Option<u32>),
}

enum Flow {
    Continue,
    Drop(Option<u32>),
}

impl Ruleset {
    /// Decides a new connection as the kernel would with this ruleset loaded (see
    /// [`Lookup::verdict`]). Prepares a [`Lookup`] for this one packet: to decide many,
    /// prepare one with [`Lookup::new`] and reuse it.
    pub fn lookup(&self, p: &Packet) -> NftVerdict {
        Lookup::new(self).verdict(p)
    }
}

/// A ruleset prepared for deciding many connections: its chains, sets, dispatch maps and
/// exemptions indexed once.
pub struct Lookup<'r> {
    chains: HashMap<&'r str, &'r Chain>,
    sets: HashMap<&'r str, &'r [ipnet::IpNet]>,
    host_addrs: HashSet<IpAddr>,
    egress: HashMap<IpAddr, &'r str>,
    ingress: HashMap<IpAddr, &'r str>,
    egress_exempt: HashSet<(IpAddr, IpAddr)>,
    ingress_exempt: HashSet<(IpAddr, IpAddr)>,
}

impl<'r> Lookup<'r> {
    /// Indexes `ruleset` for [`Lookup::verdict`].
    pub fn new(ruleset: &'r Ruleset) -> Self {
        // An address listed twice dispatches to its first chain, as a linear search would.
        let dispatch = |map: &'r [(IpAddr, Arc<str>)]| {
            let mut by_ip = HashMap::with_capacity(map.len());
            for (ip, chain) in map {
                by_ip.entry(*ip).or_insert(&**chain);
            }
            by_ip
        };
        Lookup {
            chains: ruleset
                .chains
                .iter()
                .map(|c| (c.name.as_str(), c))
                .collect(),
            sets: ruleset
                .sets
                .iter()
                .map(|s| (s.name.as_str(), s.elements.as_slice()))
                .collect(),
            host_addrs: ruleset.host_addrs.iter().copied().collect(),
            egress: dispatch(&ruleset.egress),
            ingress: dispatch(&ruleset.ingress),
            egress_exempt: ruleset.egress_exempt.iter().copied().collect(),
            ingress_exempt: ruleset.ingress_exempt.iter().copied().collect(),
        }
    }

    /// Decides a new connection as the kernel would with the ruleset loaded: the forward
    /// hook (egress dispatch, then ingress dispatch, each skipped for an exempt pair), or
    /// input/output for this node's own addresses.
    pub fn verdict(&self, p: &Packet) -> NftVerdict {
        let from_host = self.host_addrs.contains(&p.src);
        let to_host = self.host_addrs.contains(&p.dst);
        let egress = !from_host; // output hook: no egress dispatch
        let ingress = !to_host; // input hook: no ingress dispatch
        if egress
            && !self.egress_exempt.contains(&(p.src, p.dst))
            && let Some(c) = self.egress.get(&p.src)
            && let Flow::Drop(log) = run(self, c, p)
        {
            return NftVerdict::Drop(log);
        }
        if ingress
            && !self.ingress_exempt.contains(&(p.dst, p.src))
            && let Some(c) = self.ingress.get(&p.dst)
            && let Flow::Drop(log) = run(self, c, p)
        {
            return NftVerdict::Drop(log);
        }
        NftVerdict::Accept
    }
}

/// One side: the class chain `name` and the chains it continues in, as the kernel runs
/// them (a `jump` comes back to the rule after it; `return` and the end of a chain go back
/// to where the last jump came from, or end the side, which then allows).
fn run(t: &Lookup<'_>, name: &str, p: &Packet) -> Flow {
    // (chain, index of its next rule) of the chains a jump will return to
    let mut stack: Vec<(&Chain, usize)> = Vec::new();
    let mut at = t.chains.get(name).map(|c| (*c, 0));
    while let Some((chain, start)) = at.take() {
        let mut next = None;
        for (i, rule) in chain.rules.iter().enumerate().skip(start) {
            if !matches(t, rule, p) {
                continue;
            }
            match &rule.verdict {
                Verdict::Return => {}
                Verdict::Accept => return Flow::Continue,
                Verdict::Drop => return Flow::Drop(rule.log),
                Verdict::Goto(to) => next = Some(to),
                Verdict::Jump(to) => {
                    stack.push((chain, i + 1));
                    next = Some(to);
                }
            }
            break;
        }
        at = match next {
            // a chain that does not exist continues as if it were empty
            Some(to) => t.chains.get(to.as_str()).map(|c| (*c, 0)),
            None => None,
        }
        .or_else(|| stack.pop());
    }
    Flow::Continue
}

fn matches(t: &Lookup<'_>, rule: &Rule, p: &Packet) -> bool {
    let mut proto: Option<Protocol> = None;
    rule.matches.iter().all(|m| match m {
        Match::Addr {
            field,
            v6,
            nets,
            negate,
        } => {
            let ip = match field {
                Field::Saddr => p.src,
                Field::Daddr => p.dst,
            };
            // `ip daddr` / `ip6 daddr` never match a packet of the other family, negated or not.
            ip.is_ipv6() == *v6 && nets.iter().any(|n| n.contains(&ip)) != *negate
        }
        Match::Set {
            field,
            v6,
            set,
            negate,
        } => {
            let ip = match field {
                Field::Saddr => p.src,
                Field::Daddr => p.dst,
            };
            let members = t.sets.get(set.as_str()).copied().unwrap_or_default();
            ip.is_ipv6() == *v6 && members.iter().any(|n| n.contains(&ip)) != *negate
        }
        Match::Proto(x) => {
            proto = Some(*x);
            p.protocol == *x
        }
        Match::DPort(ranges) => {
            proto.is_some() && ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&p.dport))
        }
        // A packet is a connection's first packet: a TCP SYN.
        Match::TcpWithoutSyn => false,
    })
}
