//! The binary as a kubectl plugin: installed as `kubectl-palisade` (a symlink, as krew
//! installs it), the real `kubectl` (from the testenv cache) lists it and runs it as
//! `kubectl palisade …`, which answers as the binary does and names itself
//! `kubectl palisade` in its usage. Without the built kubectl the tests print why they are
//! skipped (and fail under `CI=true`).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{palisade, stderr, stdout};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// A directory holding only the `kubectl-palisade` symlink to the test binary, and the
/// kubectl to run (`None`, after saying why, where the testenv is not built).
fn setup(test: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    let bins = palisade_testenv::require(test)?;
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_palisade"),
        dir.path().join("kubectl-palisade"),
    )
    .unwrap();
    Some((dir, bins.bin("kubectl")))
}

/// `kubectl ARGS` from the repository root with only `plugins` and the system directories
/// on PATH, so that no other plugin is found.
fn kubectl(kubectl: &Path, plugins: &Path, args: &[&str]) -> Output {
    Command::new(kubectl)
        .args(args)
        .current_dir(ROOT)
        .env("PATH", format!("{}:/usr/bin:/bin", plugins.display()))
        // No cluster is needed: the plugin's commands here read files.
        .env("KUBECONFIG", "/dev/null")
        .output()
        .unwrap()
}

#[test]
fn kubectl_finds_the_plugin() {
    let Some((dir, bin)) = setup("kubectl_finds_the_plugin") else {
        return;
    };
    let o = kubectl(&bin, dir.path(), &["plugin", "list", "--name-only"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The header line, then one line per plugin found: exactly this one.
    let found: Vec<String> = stdout(&o)
        .lines()
        .filter(|l| l.starts_with("kubectl-"))
        .map(str::to_string)
        .collect();
    assert_eq!(found, ["kubectl-palisade"], "{}", stdout(&o));
}

#[test]
fn kubectl_palisade_answers_as_palisade() {
    let Some((dir, bin)) = setup("kubectl_palisade_answers_as_palisade") else {
        return;
    };
    let args = [
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/b",
        "--to",
        "x/a",
        "--port",
        "80",
        "-o",
        "json",
    ];
    let direct = palisade(&args);
    assert!(direct.status.success(), "{}", stderr(&direct));
    let mut through = vec!["palisade"];
    through.extend(args);
    let o = kubectl(&bin, dir.path(), &through);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), stdout(&direct));
    let verdict: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(verdict["allowed"], true);
    assert_eq!(
        verdict["ingress"]["policy"]["name"], "allow-from-y-b",
        "{verdict}"
    );
    // Exit codes pass through kubectl: a usage error is still 2.
    let o = kubectl(&bin, dir.path(), &["palisade", "eval", "--bogus"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn as_a_plugin_it_names_itself_kubectl_palisade() {
    let Some((dir, bin)) = setup("as_a_plugin_it_names_itself_kubectl_palisade") else {
        return;
    };
    let o = kubectl(&bin, dir.path(), &["palisade", "--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("Usage: kubectl palisade <COMMAND>"),
        "{}",
        stdout(&o)
    );
    let o = kubectl(
        &bin,
        dir.path(),
        &["palisade", "diff", "-f", "examples/xyz"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("Usage: kubectl palisade diff"),
        "{}",
        stderr(&o)
    );
    // Run as itself, it is `palisade`.
    let o = palisade(&["--help"]);
    assert!(
        stdout(&o).contains("Usage: palisade <COMMAND>"),
        "{}",
        stdout(&o)
    );
}
