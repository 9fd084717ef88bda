//! [`Ruleset`] → `nft -f` text. Only addresses, numbers, keywords and generated chain names
//! reach the text: no user-supplied string can inject nft syntax.

use std::fmt::Write;

use crate::ir::{Field, Match, Rule, Ruleset, Verdict};

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
        for (name, v6, entries) in [
            ("egress4", false, &self.egress),
            ("egress6", true, &self.egress),
            ("ingress4", false, &self.ingress),
            ("ingress6", true, &self.ingress),
        ] {
            let ty = if v6 { "ipv6_addr" } else { "ipv4_addr" };
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
        let base = |hook: &str, egress: bool, ingress: bool| {
            let mut c = format!(
                "  chain {hook} {{\n    type filter hook {hook} priority filter; policy accept;\n"
            );
            c += "    ct state established,related accept\n    ct state invalid drop\n";
            if egress {
                c += "    ip saddr vmap @egress4\n    ip6 saddr vmap @egress6\n";
            }
            if ingress {
                c += "    ip daddr vmap @ingress4\n    ip6 daddr vmap @ingress6\n";
            }
            c + "  }\n"
        };
        s += &base("forward", true, true);
        s += &base("input", true, false);
        s += &base("output", false, true);
        for chain in &self.chains {
            let _ = writeln!(s, "  chain {} {{", chain.name);
            for r in &chain.rules {
                let _ = writeln!(s, "    {}", rule_text(r));
            }
            s += "  }\n";
        }
        s += "}\n";
        s
    }

    /// The same decisions as a flat list of rules in the forward chain (the iptables-style
    /// layout), for benchmarks only: every rule is reached linearly.
    pub fn render_linear(&self) -> String {
        let mut s = format!("add table {TABLE}\ndelete table {TABLE}\ntable {TABLE} {{\n");
        s += "  chain forward {\n    type filter hook forward priority filter; policy accept;\n";
        s += "    ct state established,related accept\n";
        for (dispatch, field) in [(&self.egress, "saddr"), (&self.ingress, "daddr")] {
            for (ip, chain) in dispatch {
                let fam = if ip.is_ipv6() { "ip6" } else { "ip" };
                if let Some(c) = self.chain(chain) {
                    for r in &c.rules {
                        // Jumps and returns become "no decision here": keep walking the list.
                        let mut flat = r.clone();
                        if !matches!(flat.verdict, Verdict::Drop) {
                            flat.log = None;
                            let _ = writeln!(
                                s,
                                "    {fam} {field} {ip} {} counter",
                                matches_text(&flat)
                            );
                        } else {
                            let _ = writeln!(s, "    {fam} {field} {ip} {}", rule_text(&flat));
                        }
                    }
                }
            }
        }
        s += "  }\n}\n";
        s
    }
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
                let fam = if *v6 { "ip6" } else { "ip" };
                let f = match field {
                    Field::Saddr => "saddr",
                    Field::Daddr => "daddr",
                };
                let op = if *negate { "!= " } else { "" };
                let list: Vec<String> = nets.iter().map(ToString::to_string).collect();
                format!("{fam} {f} {op}{{ {} }}", list.join(", "))
            }
            Match::Proto(p) => format!("meta l4proto {}", p.as_str().to_lowercase()),
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

fn rule_text(r: &Rule) -> String {
    let mut t = matches_text(r);
    if !t.is_empty() {
        t.push(' ');
    }
    if let Some(id) = r.log {
        let _ = write!(t, "counter log prefix \"pal-{id} \" group {LOG_GROUP} ");
    }
    t += &match &r.verdict {
        Verdict::Return => "return".to_string(),
        Verdict::Drop => "drop".to_string(),
        Verdict::Goto(c) => format!("goto {c}"),
    };
    t
}
