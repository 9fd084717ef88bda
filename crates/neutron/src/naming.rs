//! Security-group names: readable, at most [`MAX_NAME_LEN`] characters, and distinct for
//! distinct policies.
//!
//! A policy's groups are named `np-<namespace>/<name>` followed by `:`-separated parts
//! that say which of its groups it is (`:c1`, `:in0:peer2`). Kubernetes names never
//! contain `/`, `:` or `~`, so the namespace, the name and the parts can be read back from
//! the name: two different policies (or two groups of one policy) cannot share it.
//!
//! When a name would exceed Neutron's limit, or a namespace or name holds characters
//! outside `[a-z0-9.-]` (which validation rejects, but a translator must not trust), the
//! readable part is cleaned and truncated and followed by `~` and a 64-bit digest of the
//! exact namespace and name: `np-<truncated>~<16 hex digits><parts>`. Only these names
//! carry a `~`, so they never equal a name of the first form; two of them are equal only
//! if the digests of two different policies collide, which the translation detects and
//! refuses ([`crate::NeutronError::GroupNameCollision`]).

use palisade_model::digest::fnv64;

/// Neutron's limit on the length of a security group's name.
pub const MAX_NAME_LEN: usize = 255;

/// Prefix of the groups of a NetworkPolicy.
const POLICY_PREFIX: &str = "np-";
/// Prefix of a node's node-local group.
const NODE_PREFIX: &str = "palisade-node-";
/// Separates the namespace from the name (never in a Kubernetes name).
const NAME_SEPARATOR: char = '/';
/// Starts the digest in a shortened name (never in a Kubernetes name).
const DIGEST_MARK: char = '~';
/// Characters kept as written (the characters of Kubernetes object names).
fn plain(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'
}

/// Which of a NetworkPolicy's groups a name is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Part {
    /// One of the groups of a policy split by named-port resolution (`:c<n>`).
    Class(usize),
    /// The member-only group of a selector peer (`:in<rule>:peer<n>` / `:eg<rule>:peer<n>`).
    Peer {
        /// Whether the rule is an egress rule.
        egress: bool,
        /// Rule index.
        rule: usize,
        /// Peer index within the rule.
        peer: usize,
    },
}

impl Part {
    fn render(self) -> String {
        match self {
            Part::Class(n) => format!(":c{n}"),
            Part::Peer { egress, rule, peer } => {
                format!(":{}{rule}:peer{peer}", if egress { "eg" } else { "in" })
            }
        }
    }
}

/// The 64-bit digest of a namespace and name: FNV-1a of an encoding that no other pair
/// shares (the namespace's length first).
pub(crate) fn policy_digest(namespace: &str, name: &str) -> u64 {
    fnv64(&format!(
        "{}:{namespace}{NAME_SEPARATOR}{name}",
        namespace.len()
    ))
}

/// The name of a NetworkPolicy's group: its own (`parts` empty) or one of its classes or
/// peer groups.
#[cfg(test)]
pub(crate) fn policy_group(namespace: &str, name: &str, parts: &[Part]) -> String {
    policy_group_with(namespace, name, parts, policy_digest(namespace, name))
}

/// [`policy_group`] with the digest given (tests use colliding digests).
pub(crate) fn policy_group_with(
    namespace: &str,
    name: &str,
    parts: &[Part],
    digest: u64,
) -> String {
    let suffix: String = parts.iter().map(|p| p.render()).collect();
    let exact = [namespace, name]
        .iter()
        .all(|s| !s.is_empty() && s.chars().all(plain));
    let readable = format!("{namespace}{NAME_SEPARATOR}{name}");
    shorten(POLICY_PREFIX, &readable, exact, &suffix, digest)
}

/// The name of a node's node-local group.
pub(crate) fn node_group(node: &str) -> String {
    let exact = !node.is_empty() && node.chars().all(plain);
    shorten(NODE_PREFIX, node, exact, "", fnv64(node))
}

/// `prefix + readable + suffix` when `exact` and it fits; otherwise the readable part
/// cleaned and truncated, then `~` and the digest.
fn shorten(prefix: &str, readable: &str, exact: bool, suffix: &str, digest: u64) -> String {
    if exact && prefix.len() + readable.len() + suffix.len() <= MAX_NAME_LEN {
        return format!("{prefix}{readable}{suffix}");
    }
    let room = MAX_NAME_LEN.saturating_sub(prefix.len() + 1 + 16 + suffix.len());
    let cleaned: String = readable
        .chars()
        .map(|c| {
            if plain(c) || c == NAME_SEPARATOR {
                c
            } else {
                '_'
            }
        })
        .take(room)
        .collect();
    format!("{prefix}{cleaned}{DIGEST_MARK}{digest:016x}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn readable_names_for_kubernetes_names() {
        let rows = [
            (
                ("a", "b-c"),
                &[][..],
                "np-a/b-c",
                "the namespace ends at the slash",
            ),
            (
                ("a-b", "c"),
                &[][..],
                "np-a-b/c",
                "so a/b-c and a-b/c differ",
            ),
            (
                ("x", "web.v1"),
                &[Part::Class(1)][..],
                "np-x/web.v1:c1",
                "a class",
            ),
            (
                ("x", "db"),
                &[
                    Part::Class(0),
                    Part::Peer {
                        egress: false,
                        rule: 2,
                        peer: 3,
                    },
                ][..],
                "np-x/db:c0:in2:peer3",
                "a peer group of a class",
            ),
            (
                ("x", "db"),
                &[Part::Peer {
                    egress: true,
                    rule: 0,
                    peer: 1,
                }][..],
                "np-x/db:eg0:peer1",
                "an egress peer group",
            ),
        ];
        for ((ns, name), parts, want, why) in rows {
            assert_eq!(policy_group(ns, name, parts), want, "{why}");
        }
        assert_eq!(node_group("node-1"), "palisade-node-node-1");
    }

    #[test]
    fn long_or_unusual_names_are_shortened_with_a_digest() {
        let long = "n".repeat(253);
        let got = policy_group("ns", &long, &[Part::Class(7)]);
        assert_eq!(got.len(), MAX_NAME_LEN, "truncated to the limit: {got}");
        assert!(got.starts_with("np-ns/nnn"), "readable prefix: {got}");
        let digest = format!("~{:016x}:c7", policy_digest("ns", &long));
        assert!(
            got.ends_with(&digest),
            "digest of the exact name, then the part: {got}"
        );
        let odd = policy_group("A/b", "c:d~e", &[]);
        assert_eq!(
            odd,
            format!("np-_/b/c_d_e~{:016x}", policy_digest("A/b", "c:d~e")),
            "characters outside Kubernetes names are replaced, and the digest decides"
        );
        let node = node_group(&"m".repeat(253));
        assert_eq!(node.len(), MAX_NAME_LEN, "node names too: {node}");
    }

    #[test]
    fn injectivity_does_not_rest_on_the_digest() {
        // With every digest equal, names of the exact form still differ for different
        // policies, and never equal a shortened name.
        let pairs = [
            ("a", "b-c"),
            ("a-b", "c"),
            ("a", "b.c"),
            ("a.b", "c"),
            ("ab", "c"),
        ];
        let mut seen = HashMap::new();
        for (ns, name) in pairs {
            for parts in [&[][..], &[Part::Class(0)][..]] {
                let got = policy_group_with(ns, name, parts, 0);
                assert!(!got.contains('~'), "{got}");
                assert_eq!(seen.insert(got.clone(), (ns, name, parts)), None, "{got}");
            }
        }
        let long = "x".repeat(300);
        let shortened = policy_group_with("a", &long, &[], 0);
        assert!(shortened.contains('~') && !seen.contains_key(&shortened));
    }

    /// Namespace or name: short ones over a small alphabet (to provoke look-alikes), valid
    /// long ones, and arbitrary text.
    fn component() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[ab.-]{1,4}",
            2 => "[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?",
            1 => "[a-z]{240,300}",
            1 => any::<String>(),
            1 => "[a/:~_-]{0,6}",
        ]
    }

    fn part() -> impl Strategy<Value = Vec<Part>> {
        prop_oneof![
            Just(Vec::new()),
            (0..12usize).prop_map(|n| vec![Part::Class(n)]),
            (
                any::<bool>(),
                0..12usize,
                0..12usize,
                proptest::option::of(0..3usize)
            )
                .prop_map(|(egress, rule, peer, class)| {
                    class
                        .map(Part::Class)
                        .into_iter()
                        .chain([Part::Peer { egress, rule, peer }])
                        .collect()
                }),
        ]
    }

    proptest! {
        #![proptest_config(palisade_test_support::proptest_config(200, 0x5eed_2026))]

        /// Different (namespace, name, group) triples get different names, each within
        /// Neutron's limit; node groups never take a policy group's name.
        #[test]
        fn group_names_are_injective_and_fit_neutron(
            groups in proptest::collection::vec((component(), component(), part()), 1..40),
            nodes in proptest::collection::vec(component(), 0..5),
        ) {
            let mut seen: HashMap<String, String> = HashMap::new();
            for (ns, name, parts) in &groups {
                let got = policy_group(ns, name, parts);
                prop_assert!(got.len() <= MAX_NAME_LEN, "{} characters: {}", got.len(), got);
                let owner = format!("policy {ns:?}/{name:?} {parts:?}");
                if let Some(other) = seen.insert(got.clone(), owner.clone()) {
                    prop_assert_eq!(&other, &owner, "two groups named {}", got);
                }
            }
            for node in &nodes {
                let got = node_group(node);
                prop_assert!(got.len() <= MAX_NAME_LEN, "{} characters: {}", got.len(), got);
                let owner = format!("node {node:?}");
                if let Some(other) = seen.insert(got.clone(), owner.clone()) {
                    prop_assert_eq!(&other, &owner, "two groups named {}", got);
                }
            }
        }
    }
}
