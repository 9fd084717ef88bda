//! Scratch git repositories for the tests of commands that read git.

use std::path::Path;
use std::process::Command;

/// Runs `git ARGS` in `dir` as a fixed test identity (no signing, branch `main`) and
/// returns its standard output; panics with git's error when it fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("git {args:?}: {e}"));
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Makes `dir` a repository with one commit on `main`: a copy of the directory `from`
/// as `dir/name`.
pub fn repo_with_copy(dir: &Path, from: &Path, name: &str) {
    git(dir, &["init", "-q"]);
    let copied = Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(dir.join(name))
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        copied,
        "cp -r {} {}",
        from.display(),
        dir.join(name).display()
    );
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", name]);
}
