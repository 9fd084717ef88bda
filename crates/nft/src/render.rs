//! [`Ruleset`] → `nft -f` text. Only addresses, numbers, keywords and generated chain names
//! reach the text: no user-supplied string can inject nft syntax.

use std::fmt::Write;
use std::net::IpAddr;
use std::sync::Arc;

use crate::base::{base_chains, exempt_set, verdict_map};
use crate::ir::{AddrRange, Field, Match, Rule, Ruleset, Verdict};

/// The table's name and family.
pub const TABLE: &str = "inet palisade";

/// nflog group of Palisade's log rules.
pub const LOG_GROUP: u16 = 100;

impl Ruleset {
    /// A complete script that atomically replaces `table inet palisade` (one transaction).
    pub fn render(&self) -> String {
        let mut s = format!("add table {TABLE}\ndelete table {TABLE}\n");
        s += &self.render_table();
        s
    }

    /// The table definition alone.
    pub fn render_table(&self) -> String {
        let mut s = format!("table {TABLE} {{\n");
        for (name, v6, entries) in verdict_maps(self) {
            let ty = addr_type(v6);
            let _ = writeln!(s, "  map {name} {{\n    type {ty} : verdict");
            let elems: Vec<String> = entries
                .iter()
                .filter(|(ip, _)| ip.is_ipv6() == v6)
                .map(|(ip, c)| format!("{ip} : jump {c}"))
                .collect();
            if !elems.is_empty() {
                let _ = writeln!(s, "    elements = {{ {} }}", elems.join(", "));
            }
            s += "  }\n";
        }
        for (name, v6, pairs) in exempt_sets(self) {
            let ty = addr_type(v6);
            let _ = writeln!(s, "  set {name} {{\n    type {ty} . {ty}");
            let elems: Vec<String> = pairs
                .iter()
                .filter(|(a, _)| a.is_ipv6() == v6)
                .map(|(a, b)| format!("{a} . {b}"))
                .collect();
            if !elems.is_empty() {
                let _ = writeln!(s, "    elements = {{ {} }}", elems.join(", "));
            }
            s += "  }\n";
        }
        for set in &self.sets {
            s += &set_text(set);
        }
        s += &base_chains();
        for chain in &self.chains {
            let _ = writeln!(s, "  chain {} {{", chain.name);
            for r in chain.rules.iter() {
                let _ = writeln!(s, "    {}", rule_text(r));
            }
            s += "  }\n";
        }
        s += "}\n";
        s
    }

    /// A flat list of rules in the forward chain (the iptables-style layout) with the same
    /// ingress decisions, for benchmarks only: every pod's ingress rules are walked in order
    /// (`ip daddr <pod> ...`), allow → `accept`, deny → `drop`. Egress chains are left out,
    /// so it equals [`Ruleset::render`] only for policy sets without egress isolation.
    pub fn render_linear(&self) -> String {
        let mut s = format!("add table {TABLE}\ndelete table {TABLE}\ntable {TABLE} {{\n");
        for set in &self.sets {
            s += &set_text(set);
        }
        s += "  chain forward {\n    type filter hook forward priority filter; policy accept;\n";
        s += "    ct state established,related accept\n";
        for (ip, chain) in &self.ingress {
            let prefix = format!("{} daddr {ip}", if ip.is_ipv6() { "ip6" } else { "ip" });
            self.linear_rules(chain, false, &prefix, &mut s);
        }
        s += "  }\n}\n";
        s
    }

    /// The rules met from `chain` on, for [`Ruleset::render_linear`]: unconditional jumps and
    /// gotos followed, conditional ones and conditional returns from a jumped-to chain
    /// (admin Pass) left out, a return elsewhere (an allow) written as `accept`.
    fn linear_rules(&self, chain: &str, jumped: bool, prefix: &str, s: &mut String) {
        let Some(c) = self.chain(chain) else {
            return;
        };
        for r in c.rules.iter() {
            let unconditional = r.matches.is_empty();
            let verdict = match &r.verdict {
                Verdict::Accept => "accept",
                Verdict::Drop => "drop",
                Verdict::Return if !jumped => "accept",
                Verdict::Return if unconditional => return,
                Verdict::Goto(to) if unconditional => {
                    return self.linear_rules(to, jumped, prefix, s);
                }
                Verdict::Jump(to) if unconditional => {
                    self.linear_rules(to, true, prefix, s);
                    continue;
                }
                Verdict::Return | Verdict::Goto(_) | Verdict::Jump(_) => continue,
            };
            let _ = writeln!(s, "    {prefix} {} {verdict}", matches_text(r));
        }
    }
}

/// nft's type of an address of the family (`ipv4_addr` or `ipv6_addr`).
pub(crate) fn addr_type(v6: bool) -> &'static str {
    if v6 { "ipv6_addr" } else { "ipv4_addr" }
}

/// One verdict map: its name, whether it is IPv6, and the dispatch (of both families).
pub(crate) type VerdictMap<'r> = (&'static str, bool, &'r [(IpAddr, Arc<str>)]);

/// The verdict maps that send pod addresses to their class chains.
pub(crate) fn verdict_maps(rs: &Ruleset) -> [VerdictMap<'_>; 4] {
    [
        (verdict_map(true, false), false, &rs.egress),
        (verdict_map(true, true), true, &rs.egress),
        (verdict_map(false, false), false, &rs.ingress),
        (verdict_map(false, true), true, &rs.ingress),
    ]
}

/// One exemption set: its name, whether it is IPv6, and the pairs (of both families).
pub(crate) type ExemptSet<'r> = (&'static str, bool, &'r [(IpAddr, IpAddr)]);

/// The sets of exempt (pod address, peer) pairs.
pub(crate) fn exempt_sets(rs: &Ruleset) -> [ExemptSet<'_>; 4] {
    [
        (exempt_set(true, false), false, &rs.egress_exempt),
        (exempt_set(true, true), true, &rs.egress_exempt),
        (exempt_set(false, false), false, &rs.ingress_exempt),
        (exempt_set(false, true), true, &rs.ingress_exempt),
    ]
}

/// A set's body: type, flags, elements, joined by `sep`.
pub(crate) fn set_body(set: &crate::ir::NamedSet, sep: &str) -> String {
    let mut parts = vec![format!("type {}", addr_type(set.v6))];
    if set.interval {
        parts.push("flags interval".into());
    }
    if set.learned.is_some() {
        // Learned elements come and go with their DNS answers, not with the ruleset.
        parts.push("flags timeout".into());
        return parts.join(sep);
    }
    parts.push(format!("elements = {{ {} }}", elements_text(&set.ranges())));
    parts.join(sep)
}

/// Set elements as nft text.
pub(crate) fn elements_text(ranges: &[AddrRange]) -> String {
    let elems: Vec<String> = ranges.iter().map(ToString::to_string).collect();
    elems.join(", ")
}

/// A set definition (inside the table).
pub(crate) fn set_text(set: &crate::ir::NamedSet) -> String {
    format!(
        "  set {} {{\n    {}\n  }}\n",
        set.name,
        set_body(set, "\n    ")
    )
}

fn matches_text(r: &Rule) -> String {
    let mut parts = Vec::new();
    for m in &r.matches {
        parts.push(match m {
            Match::Addr {
                field,
                v6,
                nets,
                negate,
            } => {
                let op = if *negate { "!= " } else { "" };
                let list: Vec<String> = nets.iter().map(ToString::to_string).collect();
                format!(
                    "{} {op}{{ {} }}",
                    address_text(*field, *v6),
                    list.join(", ")
                )
            }
            Match::Set {
                field,
                v6,
                set,
                negate,
            } => {
                let op = if *negate { "!= " } else { "" };
                format!("{} {op}@{set}", address_text(*field, *v6))
            }
            Match::Proto(p) => format!("meta l4proto {}", p.as_str().to_lowercase()),
            Match::TcpWithoutSyn => "tcp flags & (fin|syn|rst|ack) != syn".to_string(),
            Match::DPort(ranges) => {
                let list: Vec<String> = ranges
                    .iter()
                    .map(|(a, b)| {
                        if a == b {
                            a.to_string()
                        } else {
                            format!("{a}-{b}")
                        }
                    })
                    .collect();
                format!("th dport {{ {} }}", list.join(", "))
            }
        });
    }
    parts.join(" ")
}

/// nft's spelling of an address field of a family (`ip saddr`, `ip6 daddr`).
pub(crate) fn address_text(field: Field, v6: bool) -> String {
    let family = if v6 { "ip6" } else { "ip" };
    let field = match field {
        Field::Saddr => "saddr",
        Field::Daddr => "daddr",
    };
    format!("{family} {field}")
}

/// `add rule` lines for the rules of `chain`.
pub(crate) fn add_rules(s: &mut String, chain: &crate::ir::Chain) {
    for rule in chain.rules.iter() {
        let _ = writeln!(s, "add rule {TABLE} {} {}", chain.name, rule_text(rule));
    }
}

/// One rule as nft text.
pub(crate) fn rule_text(r: &Rule) -> String {
    let mut t = matches_text(r);
    if !t.is_empty() {
        t.push(' ');
    }
    if let Some(id) = r.log {
        let _ = write!(t, "counter log prefix \"pal-{id} \" group {LOG_GROUP} ");
    }
    t += &match &r.verdict {
        Verdict::Return => "return".to_string(),
        Verdict::Accept => "accept".to_string(),
        Verdict::Drop => "drop".to_string(),
        Verdict::Goto(c) => format!("goto {c}"),
        Verdict::Jump(c) => format!("jump {c}"),
    };
    t
}
