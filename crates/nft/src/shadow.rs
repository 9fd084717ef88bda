//! Rules no packet can reach: a rule whose conditions imply those of an earlier rule in the
//! same chain that ends in a verdict (anything but `jump`, after which the chain goes on)
//! only ever sees packets that rule has already decided.
//!
//! The test is structural: the same named set, the same protocol, ports within the earlier
//! rule's ports, inline prefixes within the earlier rule's prefixes. It never compares a
//! named set's elements, so a pod joining or leaving a set never changes which rules are
//! written, and an update stays a change of elements.

use ipnet::IpNet;

use crate::ir::{Match, Rule, Verdict};

/// `rules` without those an earlier rule shadows, in order.
pub(crate) fn reachable(rules: Vec<Rule>) -> Vec<Rule> {
    let mut kept: Vec<Rule> = Vec::with_capacity(rules.len());
    for rule in rules {
        let shadowed = kept
            .iter()
            .any(|earlier| !matches!(earlier.verdict, Verdict::Jump(_)) && covers(earlier, &rule));
        if !shadowed {
            kept.push(rule);
        }
    }
    kept
}

/// Whether every packet `later` matches also matches `earlier`: each of `earlier`'s
/// conditions follows from one of `later`'s.
fn covers(earlier: &Rule, later: &Rule) -> bool {
    earlier
        .matches
        .iter()
        .all(|want| later.matches.iter().any(|have| implies(have, want)))
}

/// Whether a packet meeting `have` always meets `want`.
fn implies(have: &Match, want: &Match) -> bool {
    match (have, want) {
        (Match::DPort(have), Match::DPort(want)) => have
            .iter()
            .all(|&(lo, hi)| want.iter().any(|&(a, b)| a <= lo && hi <= b)),
        (
            Match::Addr {
                field: f1,
                v6: v1,
                nets: have,
                negate: false,
            },
            Match::Addr {
                field: f2,
                v6: v2,
                nets: want,
                negate: false,
            },
        ) if f1 == f2 && v1 == v2 => have.iter().all(|n| within(n, want)),
        _ => have == want,
    }
}

/// Whether `net` lies inside one of `nets`.
fn within(net: &IpNet, nets: &[IpNet]) -> bool {
    nets.iter().any(|outer| outer.contains(net))
}

#[cfg(test)]
mod tests {
    use super::reachable;
    use crate::ir::{Field, Match, Rule, Verdict};
    use palisade_model::Protocol;

    fn set(name: &str) -> Match {
        Match::Set {
            field: Field::Saddr,
            v6: false,
            set: name.into(),
            negate: false,
        }
    }

    fn addr(nets: &[&str], negate: bool) -> Match {
        Match::Addr {
            field: Field::Saddr,
            v6: false,
            nets: nets.iter().filter_map(|n| n.parse().ok()).collect(),
            negate,
        }
    }

    fn rule(matches: Vec<Match>, verdict: Verdict, log: u32) -> Rule {
        Rule {
            matches,
            verdict,
            log: Some(log),
        }
    }

    fn logs(rules: &[Rule]) -> Vec<u32> {
        rules.iter().filter_map(|r| r.log).collect()
    }

    #[test]
    fn a_rule_is_dropped_only_when_an_earlier_one_matches_all_it_matches() {
        let tcp80 = || vec![Match::Proto(Protocol::Tcp), Match::DPort(vec![(80, 80)])];
        let rules = vec![
            rule([vec![set("a")], tcp80()].concat(), Verdict::Drop, 0),
            // the same peers and port, another verdict: never reached
            rule([vec![set("a")], tcp80()].concat(), Verdict::Return, 1),
            // every port of the same peers: reached (port 81)
            rule(vec![set("a")], Verdict::Return, 2),
            // a port of those peers, after the rule for all their ports: never reached
            rule(
                vec![
                    set("a"),
                    Match::Proto(Protocol::Udp),
                    Match::DPort(vec![(53, 53)]),
                ],
                Verdict::Drop,
                3,
            ),
            // another set, even if it held the same addresses: reached
            rule(vec![set("b")], Verdict::Drop, 4),
            rule(vec![addr(&["10.0.0.0/24"], false)], Verdict::Drop, 5),
            // inside the earlier prefixes: never reached
            rule(vec![addr(&["10.0.0.8/29"], false)], Verdict::Return, 6),
            // partly outside: reached
            rule(vec![addr(&["10.0.0.0/23"], false)], Verdict::Return, 7),
            // negated: only the same condition counts
            rule(vec![addr(&["10.9.0.0/29"], true)], Verdict::Return, 8),
            rule(vec![addr(&["10.9.0.0/30"], true)], Verdict::Drop, 9),
            rule(vec![addr(&["10.9.0.0/29"], true)], Verdict::Drop, 10),
            // ports within the union of an earlier rule's ranges, the protocol the same
            rule(
                vec![
                    Match::Proto(Protocol::Tcp),
                    Match::DPort(vec![(1, 9), (20, 30)]),
                ],
                Verdict::Drop,
                11,
            ),
            rule(
                vec![
                    Match::Proto(Protocol::Tcp),
                    Match::DPort(vec![(2, 3), (25, 30)]),
                ],
                Verdict::Return,
                12,
            ),
            rule(
                vec![Match::Proto(Protocol::Sctp), Match::DPort(vec![(2, 3)])],
                Verdict::Return,
                13,
            ),
            rule(
                vec![Match::Proto(Protocol::Tcp), Match::DPort(vec![(8, 21)])],
                Verdict::Return,
                14,
            ),
            // a jump comes back: what follows is reached
            rule(vec![set("d")], Verdict::Jump("j".into()), 18),
            rule(vec![set("d")], Verdict::Drop, 19),
            rule(vec![], Verdict::Goto("n".into()), 15),
            // after an unconditional rule nothing is reached
            rule(vec![set("c")], Verdict::Drop, 16),
            rule(vec![Match::TcpWithoutSyn], Verdict::Drop, 17),
        ];
        assert_eq!(
            logs(&reachable(rules)),
            vec![0, 2, 4, 5, 7, 8, 9, 11, 13, 14, 18, 19, 15]
        );
    }
}
