//! `palisade compile --target nftables --apply` (root): the ruleset loaded into the network
//! namespace the command runs in, as `nft -f` of the printed script would load it.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;
#[path = "../../nft/tests/support/ct.rs"]
mod ct;

use common::{palisade, stderr, stdout};
use ct::Netns;

/// The example cluster's files, by absolute path (commands run in a namespace start
/// elsewhere).
const XYZ: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/xyz");

/// The words of `nft list table inet palisade` in `ns`, sorted: the same table lists the
/// same words whatever order a hash set lists its elements in.
fn table_words(ns: &Netns) -> Vec<String> {
    let out = ns.exec(&["nft", "list", "table", "inet", "palisade"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut words: Vec<String> = stdout(&out)
        .split_whitespace()
        .map(|w| w.trim_end_matches(',').to_string())
        .collect();
    words.sort();
    words
}

/// The script `palisade compile --target nftables ARGS` prints.
fn script(args: &[&str]) -> String {
    let mut all = vec!["compile", "--target", "nftables"];
    all.extend(args);
    let o = palisade(&all);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

#[test]
fn apply_loads_what_the_script_loads_first_and_when_a_table_exists() {
    if !palisade_test_support::require_root(
        "apply_loads_what_the_script_loads_first_and_when_a_table_exists",
    ) {
        return;
    }
    let (applied, scripted) = (Netns::new("apply"), Netns::new("script"));
    let apply = |input: &str| {
        let bin = env!("CARGO_BIN_EXE_palisade");
        let o = applied.exec(&[
            bin, "compile", "--target", "nftables", "-f", input, "--apply",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    // No table yet: loaded in stages.
    let said = apply(XYZ);
    assert!(
        said.starts_with("table inet palisade loaded in ") && said.contains(" 9 pod addresses"),
        "{said}"
    );
    scripted.nft_f(&script(&["-f", XYZ]));
    let with_policies = table_words(&applied);
    assert_eq!(with_policies, table_words(&scripted));
    // A table exists: replaced, here by the cluster without its policies.
    let bare = format!("{XYZ}/cluster.yaml");
    apply(&bare);
    scripted.nft_f(&script(&["-f", &bare]));
    assert_eq!(table_words(&applied), table_words(&scripted));
    assert_ne!(
        table_words(&applied),
        with_policies,
        "the policies change the table"
    );
}

#[test]
fn apply_is_for_the_nftables_ruleset_only() {
    for args in [
        &["--target", "neutron"][..],
        &["--target", "nftables", "-o", "linear"],
        &["--target", "nftables", "--stats"],
    ] {
        let mut all = vec!["compile", "-f", "examples/xyz", "--apply"];
        all.extend(args);
        let o = palisade(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("--apply"), "{}", stderr(&o));
    }
}

#[test]
fn apply_without_privilege_says_what_it_needs() {
    if !palisade_test_support::require_root("apply_without_privilege_says_what_it_needs") {
        return;
    }
    let cluster = std::fs::read(format!("{XYZ}/cluster.yaml")).unwrap();
    // As nobody, reading the cluster from stdin.
    let mut child = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args([
            env!("CARGO_BIN_EXE_palisade"),
            "compile",
            "--target",
            "nftables",
        ])
        .args(["-f", "-", "--apply"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &cluster).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("needs root or CAP_NET_ADMIN"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}
