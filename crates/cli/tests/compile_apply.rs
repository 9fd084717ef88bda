//! `palisade compile --target nftables --apply` (root): the ruleset loaded into the network
//! namespace the command runs in, as `nft -f` of the printed script would load it.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::{is_root, palisade, stderr, stdout};

/// A network namespace, deleted on drop.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("palapply-{tag}-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let out = Command::new("ip").args(["netns", "add", &name]).output();
        assert!(out.unwrap().status.success(), "ip netns add {name}");
        Netns(name)
    }

    /// `palisade ARGS` run inside the namespace, from the repository root.
    fn palisade(&self, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.0, env!("CARGO_BIN_EXE_palisade")])
            .args(args)
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .output()
            .unwrap()
    }

    /// `nft -f -` of `script` inside the namespace.
    fn nft_f(&self, script: &str) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.0, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The words of `nft list table inet palisade`, sorted: the same table lists the same
    /// words whatever order a hash set lists its elements in.
    fn table_words(&self) -> Vec<String> {
        let out = Command::new("ip")
            .args([
                "netns", "exec", &self.0, "nft", "list", "table", "inet", "palisade",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut words: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|w| w.trim_end_matches(',').to_string())
            .collect();
        words.sort();
        words
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
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
    if !is_root() {
        eprintln!("skipped: needs root for a network namespace");
        return;
    }
    let (applied, scripted) = (Netns::new("a"), Netns::new("s"));
    let apply = |args: &[&str]| {
        let mut all = vec!["compile", "--target", "nftables", "--apply"];
        all.extend(args);
        let o = applied.palisade(&all);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    // No table yet: loaded in stages.
    let said = apply(&["-f", "examples/xyz"]);
    assert!(
        said.starts_with("table inet palisade loaded in ") && said.contains(" 9 pod addresses"),
        "{said}"
    );
    scripted.nft_f(&script(&["-f", "examples/xyz"]));
    assert_eq!(applied.table_words(), scripted.table_words());
    // A table exists: replaced, here by the cluster without its policies.
    let bare = ["-f", "examples/xyz/cluster.yaml"];
    apply(&bare);
    scripted.nft_f(&script(&bare));
    assert_eq!(applied.table_words(), scripted.table_words());
    assert_ne!(
        applied.table_words(),
        {
            let with = Netns::new("w");
            with.nft_f(&script(&["-f", "examples/xyz"]));
            with.table_words()
        },
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
