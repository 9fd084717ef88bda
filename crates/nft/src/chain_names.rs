//! Names of content chains: a digest of the chain's rules as IR, spelled out here, so that
//! a change to how `render` writes a rule (spacing, comments, keywords) renames nothing, and
//! the same rules get the same name in every run and build.

use std::fmt::Write;

use palisade_model::Protocol;

use crate::ir::{Field, Match, Rule, Verdict};

/// `prefix` and 12 hex digits of a digest of `rules`' [`spelling`].
pub(crate) fn content_name(prefix: char, rules: &[Rule]) -> String {
    let digest = palisade_model::digest::fnv64(&spelling(rules)) & 0xffff_ffff_ffff;
    format!("{prefix}{digest:012x}")
}

/// The canonical spelling of `rules`: one line per rule, every part of the IR in a fixed
/// order, nothing taken from `render` or `Debug`.
fn spelling(rules: &[Rule]) -> String {
    let mut s = String::new();
    for rule in rules {
        for m in &rule.matches {
            spell_match(&mut s, m);
            s.push(' ');
        }
        match &rule.verdict {
            Verdict::Return => s.push_str("return"),
            Verdict::Accept => s.push_str("accept"),
            Verdict::Drop => s.push_str("drop"),
            Verdict::Goto(c) => {
                let _ = write!(s, "goto({c})");
            }
            Verdict::Jump(c) => {
                let _ = write!(s, "jump({c})");
            }
        }
        if let Some(id) = rule.log {
            let _ = write!(s, " log({id})");
        }
        s.push('\n');
    }
    s
}

fn spell_match(s: &mut String, m: &Match) {
    let field = |f: &Field| match f {
        Field::Saddr => "src",
        Field::Daddr => "dst",
    };
    let family = |v6: bool| if v6 { 6 } else { 4 };
    let not = |negate: bool| if negate { "!" } else { "" };
    match m {
        Match::Addr {
            field: f,
            v6,
            nets,
            negate,
        } => {
            let _ = write!(s, "addr({},{},{}", field(f), family(*v6), not(*negate));
            for net in nets {
                let _ = write!(s, ",{net}");
            }
            s.push(')');
        }
        Match::Set {
            field: f,
            v6,
            set,
            negate,
        } => {
            let _ = write!(
                s,
                "set({},{},{},{set})",
                field(f),
                family(*v6),
                not(*negate)
            );
        }
        Match::Proto(p) => {
            let p = match p {
                Protocol::Tcp => "tcp",
                Protocol::Udp => "udp",
                Protocol::Sctp => "sctp",
            };
            let _ = write!(s, "proto({p})");
        }
        Match::DPort(ports) => {
            s.push_str("dport(");
            for (i, (lo, hi)) in ports.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                let _ = write!(s, "{sep}{lo}-{hi}");
            }
            s.push(')');
        }
        Match::TcpWithoutSyn => s.push_str("tcp-without-syn"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Chain;
    use crate::render::rule_text;

    fn rules() -> Vec<Rule> {
        vec![
            Rule {
                matches: vec![Match::TcpWithoutSyn],
                verdict: Verdict::Drop,
                log: None,
            },
            Rule {
                matches: vec![
                    Match::Addr {
                        field: Field::Daddr,
                        v6: false,
                        nets: vec!["10.0.0.0/8".parse().unwrap_or_else(|e| panic!("{e}"))],
                        negate: false,
                    },
                    Match::Proto(Protocol::Tcp),
                    Match::DPort(vec![(80, 80), (8000, 8999)]),
                ],
                verdict: Verdict::Accept,
                log: Some(3),
            },
            Rule {
                matches: vec![],
                verdict: Verdict::Goto("n0123456789ab".into()),
                log: None,
            },
        ]
    }

    #[test]
    fn a_name_is_the_same_in_every_run() {
        // Pinned: a change here renames chains in every loaded ruleset (and the goldens).
        assert_eq!(content_name('a', &rules()), "a0b2f0097376f");
        assert_eq!(
            content_name('a', &rules()),
            content_name('a', &rules().clone())
        );
    }

    #[test]
    fn rendering_does_not_name_chains() {
        // The name depends on no rendered text: a rendering that differs only in spacing
        // and comments (or is entirely different) leaves it alone.
        let name = content_name('a', &rules());
        let rendered: Vec<String> = rules().iter().map(rule_text).collect();
        let cosmetic: Vec<String> = rendered
            .iter()
            .map(|t| format!("  {}  # comment", t.replace(' ', "  ")))
            .collect();
        assert_ne!(rendered, cosmetic);
        assert!(!spelling(&rules()).contains(&rendered[1]));
        assert_eq!(content_name('a', &rules()), name);
        let chain = Chain {
            name: name.clone(),
            rules: rules().into(),
        };
        assert_eq!(content_name('a', &chain.rules), chain.name);
    }

    #[test]
    fn every_part_of_a_rule_names_its_chain() {
        let base = content_name('a', &rules());
        let mut changed = rules();
        changed[1].log = Some(4);
        assert_ne!(content_name('a', &changed), base);
        let mut changed = rules();
        changed[1].matches[2] = Match::DPort(vec![(80, 80), (8000, 8998)]);
        assert_ne!(content_name('a', &changed), base);
        let mut changed = rules();
        changed[2].verdict = Verdict::Jump("n0123456789ab".into());
        assert_ne!(content_name('a', &changed), base);
        assert_ne!(content_name('b', &rules()), base);
    }
}
