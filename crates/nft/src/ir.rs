//! The ruleset as data: what `render` writes for `nft -f` and what `lookup` interprets.

use std::net::IpAddr;

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
    /// Rules in order; falling off the end returns.
    pub rules: Vec<Rule>,
}

/// A named address set, shared by every rule with the same peers; named after those peers,
/// so an update changes its elements in place.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NamedSet {
    /// Name.
    pub name: String,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// An interval set (`flags interval`: its elements are non-overlapping prefixes), else a
    /// hash set of host addresses.
    pub interval: bool,
    /// Prefixes (host prefixes for single addresses).
    pub elements: Vec<IpNet>,
}

/// The whole `inet palisade` table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ruleset {
    /// Address sets referenced by rules.
    pub sets: Vec<NamedSet>,
    /// Chains: one per class and side, and the programs they continue in (by name).
    pub chains: Vec<Chain>,
    /// Egress dispatch: source address → its pod's class chain.
    pub egress: Vec<(IpAddr, String)>,
    /// Ingress dispatch: destination address → its pod's class chain.
    pub ingress: Vec<(IpAddr, String)>,
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
