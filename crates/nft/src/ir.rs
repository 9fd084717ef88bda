//! The ruleset as data: what `render` writes for `nft -f` and what `lookup` interprets.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use ipnet::IpNet;
use palisade_model::Protocol;

/// Which address of the packet a match reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// Source address.
    Saddr,
    /// Destination address.
    Daddr,
}

/// One condition of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Match {
    /// The address is (or, negated, is not) in one of these prefixes, all of one family.
    Addr {
        /// Which address.
        field: Field,
        /// IPv6 prefixes (else IPv4).
        v6: bool,
        /// The prefixes.
        nets: Vec<IpNet>,
        /// `!=`.
        negate: bool,
    },
    /// The address is (or is not) in a named set of [`Ruleset::sets`] (of one family).
    Set {
        /// Which address.
        field: Field,
        /// IPv6 set (else IPv4).
        v6: bool,
        /// The set's name.
        set: String,
        /// `!=`.
        negate: bool,
    },
    /// The transport protocol.
    Proto(Protocol),
    /// The destination port is in one of these inclusive ranges.
    DPort(Vec<(u16, u16)>),
    /// A TCP packet that starts a tracked connection without being a SYN: a mid-stream
    /// packet of a connection whose conntrack entry was deleted (after a policy forbade
    /// it), which conntrack would otherwise pick up as new, possibly in the reverse direction.
    TcpWithoutSyn,
}

/// What a matching rule does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Back to the chain that jumped here, or to the base chain (this side allows).
    Return,
    /// This side allows: its base chain ends (the other side has a base chain of its own).
    Accept,
    /// Drop the packet.
    Drop,
    /// Continue in another chain (by name), not coming back.
    Goto(String),
    /// Run another chain (by name), then go on with the next rule when it returns.
    Jump(String),
}

impl Verdict {
    /// The chain this verdict continues in.
    pub fn target(&self) -> Option<&str> {
        match self {
            Verdict::Goto(c) | Verdict::Jump(c) => Some(c),
            _ => None,
        }
    }
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    /// All must hold.
    pub matches: Vec<Match>,
    /// Then this.
    pub verdict: Verdict,
    /// Count and log (nflog group 100) with this log id.
    pub log: Option<u32>,
}

/// A regular chain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Chain {
    /// Name (derived from a digest of the pod, never from user text).
    pub name: String,
    /// Rules in order; falling off the end returns. Shared between the rulesets of
    /// successive compiles while the chain stays as it was.
    pub rules: Arc<Vec<Rule>>,
}

/// A named address set, shared by every rule with the same peers; named after those peers,
/// so an update changes its elements in place.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NamedSet {
    /// Name.
    pub name: String,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// An interval set (`flags interval`), else a hash set of host addresses.
    pub interval: bool,
    /// Non-overlapping prefixes (host prefixes for single addresses). An interval set holds
    /// them as [`NamedSet::ranges`].
    /// Shared between the rulesets of successive compiles while the set stays as it was.
    pub elements: Arc<Vec<IpNet>>,
    /// A set of learned addresses (`flags timeout`): the addresses names matching these
    /// `domainNames` patterns resolve to. The node agent adds them to the kernel, each with
    /// the timeout of its DNS answer, as pods receive the answers. A compiled ruleset holds
    /// none; `elements` may carry the addresses learned so far for a [`crate::Lookup`] (the
    /// agent fills them before it cuts connections), and loads and updates never write them.
    pub learned: Option<std::sync::Arc<Vec<palisade_model::DomainPattern>>>,
}

impl NamedSet {
    /// The elements as the kernel holds them: for an interval set, the prefixes with
    /// adjacent ones merged into ranges (consecutive pod addresses rarely align to a
    /// prefix: 10.0.0.1–10.0.0.6 is four prefixes but one range, and every element costs
    /// the kernel alike); for a hash set, one single-address range per host.
    pub fn ranges(&self) -> Vec<AddrRange> {
        let mut spans: Vec<(u128, u128)> = self
            .elements
            .iter()
            .map(|n| (number(n.network()), number(n.broadcast())))
            .collect();
        spans.sort_unstable();
        if self.interval {
            spans = join_spans(spans);
        }
        let address = |n: u128| -> IpAddr {
            if self.v6 {
                Ipv6Addr::from(n).into()
            } else {
                Ipv4Addr::from(u32::try_from(n).unwrap_or(u32::MAX)).into()
            }
        };
        spans
            .into_iter()
            .map(|(first, last)| AddrRange {
                first: address(first),
                last: address(last),
            })
            .collect()
    }

    /// How many elements the kernel holds for this set: `ranges().len()`, counted in one
    /// pass without building them when the prefixes are in order (as a compile makes
    /// them), so that the agent's size metrics cost little per change.
    pub fn range_count(&self) -> usize {
        if !self.interval {
            return self.elements.len();
        }
        let (mut count, mut span): (usize, Option<(u128, u128)>) = (0, None);
        for net in self.elements.iter() {
            let (first, last) = (number(net.network()), number(net.broadcast()));
            match span {
                Some((start, _)) if first < start => return self.ranges().len(),
                Some((start, end)) if first <= end.saturating_add(1) => {
                    span = Some((start, end.max(last)));
                }
                _ => {
                    count += 1;
                    span = Some((first, last));
                }
            }
        }
        count
    }
}

/// An address as a number (an IPv4 address in the low 32 bits).
fn number(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// Sorted inclusive spans of keys with the overlapping and adjacent ones joined: the
/// elements of an interval set as the kernel holds them (and as `nft` merges an anonymous
/// one).
pub(crate) fn join_spans(sorted: impl IntoIterator<Item = (u128, u128)>) -> Vec<(u128, u128)> {
    let mut out: Vec<(u128, u128)> = Vec::new();
    for (first, last) in sorted {
        match out.last_mut() {
            Some((_, end)) if first <= end.saturating_add(1) => *end = (*end).max(last),
            _ => out.push((first, last)),
        }
    }
    out
}

/// An inclusive range of addresses of one family: one element of a set as the kernel holds
/// it (an interval set's start and end, or a hash set's address when `first == last`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddrRange {
    /// The first address.
    pub first: IpAddr,
    /// The last address.
    pub last: IpAddr,
}

impl std::fmt::Display for AddrRange {
    /// nft's spelling: an address, a prefix when the range is exactly one, else `first-last`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.first == self.last {
            return write!(f, "{}", self.first);
        }
        let bits = if self.first.is_ipv6() { 128 } else { 32 };
        let (first, last) = (number(self.first), number(self.last));
        // A prefix: the size is a power of two and the first address is aligned to it.
        let size = (last - first).wrapping_add(1);
        let whole = first == 0 && size == 0 && bits == 128;
        if whole || (size.is_power_of_two() && first % size == 0) {
            let len = if whole {
                0
            } else {
                bits - size.trailing_zeros()
            };
            return write!(f, "{}/{len}", self.first);
        }
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// The whole `inet palisade` table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ruleset {
    /// Address sets referenced by rules.
    pub sets: Vec<NamedSet>,
    /// Chains: one per class and side, and the programs they continue in (by name).
    pub chains: Vec<Chain>,
    /// Egress dispatch: source address → its pod's class chain (a class's pods share
    /// the name).
    pub egress: Vec<(IpAddr, Arc<str>)>,
    /// Ingress dispatch: destination address → its pod's class chain.
    pub ingress: Vec<(IpAddr, Arc<str>)>,
    /// (source, destination) pairs the egress side always allows (a pod's own addresses):
    /// these skip the egress dispatch.
    pub egress_exempt: Vec<(IpAddr, IpAddr)>,
    /// (destination, source) pairs the ingress side always allows (a pod's own addresses,
    /// its node's addresses): these skip the ingress dispatch.
    pub ingress_exempt: Vec<(IpAddr, IpAddr)>,
    /// This node's own addresses (traffic from them takes the output hook, to them the input hook).
    pub host_addrs: Vec<IpAddr>,
    /// Log id → the decision a logged rule stands for.
    pub logs: Vec<LoggedDecision>,
}

impl Ruleset {
    /// The chain named `name`.
    pub fn chain(&self, name: &str) -> Option<&Chain> {
        self.chains.iter().find(|c| c.name == name)
    }

    /// nflog prefix → the decision it stands for (tier, policy and rule, or the
    /// isolating policies).
    pub fn log_prefixes(&self) -> impl Iterator<Item = (String, &LoggedDecision)> {
        self.logs
            .iter()
            .enumerate()
            .map(|(i, d)| (format!("pal-{i}"), d))
    }

    /// The decision an nflog prefix (`pal-<id>`, trailing space allowed) stands for.
    pub fn logged_decision(&self, prefix: &str) -> Option<&LoggedDecision> {
        let id: usize = prefix.trim().strip_prefix("pal-")?.parse().ok()?;
        self.logs.get(id)
    }
}

/// What a logged rule decides, in the engine's verdict terms: a packet logged with this
/// entry's prefix was decided (or, for a Pass rule, passed on) as `decision` says.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LoggedDecision {
    /// Egress at the source or ingress at the destination.
    pub direction: palisade_model::Direction,
    /// The tier the rule belongs to.
    pub tier: palisade_engine::Tier,
    /// The rule, or the isolating policies (snapshots: no engine is needed to read them).
    pub decision: palisade_engine::Decision,
}

/// `ingress Admin tier: AdminNetworkPolicy x, ingress rule 0 "n" (Deny)`.
impl std::fmt::Display for LoggedDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} tier: {}",
            self.direction.as_str().to_lowercase(),
            self.tier.as_str(),
            self.decision
        )
    }
}

/// `{"direction": "Ingress", "tier": "Admin", "decision": <the engine's decision>}`.
impl serde::Serialize for LoggedDecision {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("direction", self.direction.as_str())?;
        m.serialize_entry("tier", &self.tier)?;
        m.serialize_entry("decision", &self.decision)?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(interval: bool, nets: &[&str]) -> NamedSet {
        NamedSet {
            name: "s".into(),
            v6: false,
            interval,
            elements: nets
                .iter()
                .map(|n| n.parse().unwrap_or_else(|e| panic!("{n}: {e}")))
                .collect::<Vec<_>>()
                .into(),
            learned: None,
        }
    }

    fn text(ranges: &[AddrRange]) -> Vec<String> {
        ranges.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_range_count_is_the_number_of_ranges() {
        let cases: &[&[&str]] = &[
            &[],
            &["10.0.0.1/32"],
            &["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/30", "10.0.0.9/32"],
            &["10.0.0.0/24", "10.0.0.7/32", "10.0.1.0/24", "10.0.3.0/24"],
            // Out of order: counted by building the ranges.
            &["10.0.0.9/32", "10.0.0.1/32", "10.0.0.2/31", "10.0.0.8/32"],
            &["10.0.0.0/28", "10.0.0.20/32", "10.0.0.3/32"],
            &["0.0.0.0/0", "255.255.255.255/32"],
        ];
        for nets in cases {
            for interval in [true, false] {
                let s = set(interval, nets);
                assert_eq!(s.range_count(), s.ranges().len(), "{nets:?} {interval}");
            }
        }
    }

    #[test]
    fn an_interval_set_merges_adjacent_prefixes_into_ranges() {
        let s = set(
            true,
            &[
                "10.0.0.6/32",
                "10.0.0.1/32",
                "10.0.0.2/31",
                "10.0.0.4/31",
                "10.0.1.0/24",
                "10.0.2.0/24",
                "10.0.4.0/32",
            ],
        );
        assert_eq!(
            text(&s.ranges()),
            ["10.0.0.1-10.0.0.6", "10.0.1.0-10.0.2.255", "10.0.4.0"]
        );
        // Prefixes that stay prefixes keep their spelling, up to the top of the space.
        let s = set(
            true,
            &[
                "10.0.0.0/25",
                "10.0.0.128/25",
                "255.255.255.255/32",
                "255.255.255.254/32",
            ],
        );
        assert_eq!(text(&s.ranges()), ["10.0.0.0/24", "255.255.255.254/31"]);
        assert_eq!(
            text(&set(true, &["0.0.0.0/1", "128.0.0.0/1"]).ranges()),
            ["0.0.0.0/0"]
        );
        let v6 = NamedSet {
            v6: true,
            ..set(true, &[])
        };
        let v6 = NamedSet {
            elements: vec![
                "::/1".parse().unwrap_or_else(|e| panic!("{e}")),
                "8000::/1".parse().unwrap_or_else(|e| panic!("{e}")),
            ]
            .into(),
            ..v6
        };
        assert_eq!(text(&v6.ranges()), ["::/0"]);
        // A hash set holds each address apart.
        let h = set(false, &["10.0.0.2/32", "10.0.0.1/32"]);
        assert_eq!(text(&h.ranges()), ["10.0.0.1", "10.0.0.2"]);
    }
}
