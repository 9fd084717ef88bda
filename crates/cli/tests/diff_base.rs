//! `diff --base REF` against a scratch git repository: the old state is the `-f` paths at
//! the ref (checked out to a temporary worktree that is removed afterwards), the new state
//! the working tree's.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{stderr, stdout};
use palisade_test_support::git::{git, repo_with_copy};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// A repository with examples/xyz committed on `main` (cluster.yaml and policies/).
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    repo_with_copy(dir.path(), &Path::new(ROOT).join("examples/xyz"), "xyz");
    dir
}

/// `palisade ARGS` in `dir`.
fn palisade_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

const DENY_Z: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: deny-z
  namespace: z
spec:
  podSelector: {}
  policyTypes: [Ingress]
";

/// Only the repository's own worktree is registered, and no checkout is left behind.
fn no_worktree_left(dir: &Path) {
    let list = git(dir, &["worktree", "list", "--porcelain"]);
    assert_eq!(
        list.lines().filter(|l| l.starts_with("worktree ")).count(),
        1,
        "{list}"
    );
}

#[test]
fn an_unchanged_tree_is_the_same_as_its_ref() {
    let dir = repo();
    let o = palisade_in(dir.path(), &["diff", "-f", "xyz", "--base", "main"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("no change over 9 pod(s)"),
        "{}",
        stdout(&o)
    );
    no_worktree_left(dir.path());
}

#[test]
fn a_new_policy_in_the_working_tree_is_diffed_against_the_ref() {
    let dir = repo();
    // Not committed: the working tree has the policy, main does not.
    std::fs::write(dir.path().join("xyz/policies/04-deny-z.yaml"), DENY_Z).unwrap();
    let o = palisade_in(
        dir.path(),
        &["diff", "-f", "xyz", "--base", "main", "-o", "md"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let md = stdout(&o);
    assert!(
        md.starts_with("**0** pair(s) gained and **15** lost a connection"),
        "{md}"
    );
    assert!(
        md.contains(
            "### lost: ingress denied: isolated by NetworkPolicy z/deny-z and no rule matched"
        ),
        "{md}"
    );
    no_worktree_left(dir.path());

    // Committed, and compared with the commit before it, from a subdirectory with
    // relative paths.
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "deny z"]);
    let sub = dir.path().join("xyz");
    let o = palisade_in(
        &sub,
        &[
            "diff",
            "-f",
            "policies",
            "cluster.yaml",
            "--base",
            "HEAD~1",
            "-o",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (doc["gained"].as_u64(), doc["lost"].as_u64()),
        (Some(0), Some(15))
    );
    // Against itself, nothing.
    let o = palisade_in(
        &sub,
        &["diff", "-f", "policies", "cluster.yaml", "--base", "HEAD"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    no_worktree_left(dir.path());
}

#[test]
fn a_path_the_ref_lacks_is_empty_there() {
    let dir = repo();
    std::fs::create_dir(dir.path().join("new")).unwrap();
    std::fs::write(dir.path().join("new/deny-z.yaml"), DENY_Z).unwrap();
    let o = palisade_in(
        dir.path(),
        &[
            "diff",
            "-f",
            "xyz/cluster.yaml",
            "new",
            "--base",
            "main",
            "-o",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("notice: main:new does not exist; its old state is empty"),
        "{}",
        stderr(&o)
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["lost"], 27, "{doc}");
}

#[test]
fn errors_name_the_ref_the_path_or_the_file_at_the_ref() {
    let dir = repo();
    let o = palisade_in(
        dir.path(),
        &["diff", "-f", "xyz", "--base", "no-such-branch"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--base no-such-branch: no such commit"),
        "{}",
        stderr(&o)
    );
    let o = palisade_in(dir.path(), &["diff", "-f", ROOT, "--base", "main"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("this one is outside it"),
        "{}",
        stderr(&o)
    );
    let o = palisade_in(dir.path(), &["diff", "-f", "-", "--base", "main"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = palisade_in(
        dir.path(),
        &["diff", "-f", "xyz", "--base", "main", "--to", "xyz"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    // An invalid file at the ref is reported as REF:path:line.
    std::fs::write(dir.path().join("xyz/policies/05-bad.yaml"), "kind: Nope\n").unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "bad"]);
    std::fs::remove_file(dir.path().join("xyz/policies/05-bad.yaml")).unwrap();
    let o = palisade_in(dir.path(), &["diff", "-f", "xyz", "--base", "HEAD"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("HEAD:xyz/policies/05-bad.yaml:1: error:"),
        "{}",
        stderr(&o)
    );
    no_worktree_left(dir.path());

    // Outside a repository.
    let plain = tempfile::tempdir().unwrap();
    let o = palisade_in(plain.path(), &["diff", "-f", ".", "--base", "main"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--base needs a git repository"),
        "{}",
        stderr(&o)
    );
}
