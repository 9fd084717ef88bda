//! `palisade compile --target nftables --stats`: the ruleset's size instead of the ruleset.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use common::{palisade, stderr, stdout};

#[test]
fn stats_count_the_ruleset_the_script_would_be() {
    let script = palisade(&["compile", "--target", "nftables", "-f", "examples/xyz"]);
    assert!(script.status.success(), "{}", stderr(&script));
    let o = palisade(&[
        "compile",
        "--target",
        "nftables",
        "-f",
        "examples/xyz",
        "--stats",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let count = |name: &str| -> usize {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in\n{out}"))
            .trim()
            .parse()
            .unwrap()
    };
    // The nine pods of examples/xyz, each in both maps.
    assert_eq!(count("map elements:"), 18, "{out}");
    let text = stdout(&script);
    let chains = text.matches("\n  chain ").count() - 2; // not the two base chains
    assert_eq!(count("chains:"), chains, "{out}");
    // The script printed without its trailing log-prefix comments.
    let body = text.split("# log prefixes").next().unwrap();
    assert_eq!(count("script bytes:"), body.len(), "{out}");
}

#[test]
fn stats_are_for_the_nftables_target_only() {
    let o = palisade(&[
        "compile",
        "--target",
        "neutron",
        "-f",
        "examples/xyz",
        "--stats",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--stats"), "{}", stderr(&o));
}
