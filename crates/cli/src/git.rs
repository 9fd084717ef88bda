//! A git ref checked out to a temporary worktree, for `diff --base`: the old state is the
//! same paths as the working tree's, read at that ref.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::CliError;

/// A detached checkout of one ref in a temporary directory, registered with the repository
/// as a worktree and removed (directory and registration) when dropped.
#[derive(Debug)]
pub struct Checkout {
    /// The repository's working tree (its top level).
    repo: PathBuf,
    /// The temporary worktree.
    dir: PathBuf,
    /// The ref as given.
    reference: String,
}

/// Runs `git` in `dir`; its standard output, or an error with git's own message.
fn git(dir: &Path, args: &[&str]) -> Result<String, CliError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|e| CliError::Git(format!("cannot run git: {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
    } else {
        Err(CliError::Git(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl Checkout {
    /// Checks `reference` out (detached) to a new temporary worktree of the repository that
    /// holds the current directory.
    pub fn new(reference: &str) -> Result<Checkout, CliError> {
        let cwd = std::env::current_dir().map_err(CliError::file("."))?;
        let repo = PathBuf::from(
            git(&cwd, &["rev-parse", "--show-toplevel"])
                .map_err(|e| CliError::Usage(format!("--base needs a git repository: {e}")))?,
        );
        // Resolved first, so that a wrong ref is named as such rather than as a checkout
        // failure.
        let commit = git(
            &repo,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &format!("{reference}^{{commit}}"),
            ],
        )
        .map_err(|_| {
            CliError::Git(format!(
                "--base {reference}: no such commit in {}",
                repo.display()
            ))
        })?;
        let dir = unique_temp_dir()?;
        let path = dir.to_string_lossy().into_owned();
        let checkout = Checkout {
            repo,
            dir,
            reference: reference.to_string(),
        };
        git(
            &checkout.repo,
            &["worktree", "add", "--detach", "--quiet", &path, &commit],
        )?;
        Ok(checkout)
    }

    /// Where `path` (a file or directory of the working tree) is in the checkout, and the
    /// name to report it under (`REF:relative/path`); a usage error when the path lies
    /// outside the repository.
    pub fn locate(&self, path: &Path) -> Result<(PathBuf, String), CliError> {
        let absolute = std::path::absolute(path).map_err(CliError::file(path))?;
        let absolute = normalize(&absolute);
        let repo =
            normalize(&std::fs::canonicalize(&self.repo).map_err(CliError::file(&self.repo))?);
        // A path through a symlinked directory is compared by its real location.
        let real = std::fs::canonicalize(&absolute)
            .map(|p| normalize(&p))
            .unwrap_or(absolute.clone());
        let relative = real
            .strip_prefix(&repo)
            .or_else(|_| absolute.strip_prefix(&repo))
            .map_err(|_| {
                CliError::Usage(format!(
                    "{}: --base compares paths of the repository {}; this one is outside it",
                    path.display(),
                    repo.display()
                ))
            })?;
        let name = format!("{}:{}", self.reference, relative.display());
        Ok((self.dir.join(relative), name))
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        let path = self.dir.to_string_lossy().into_owned();
        if git(&self.repo, &["worktree", "remove", "--force", &path]).is_err() {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = git(&self.repo, &["worktree", "prune"]);
        }
    }
}

/// `a/./b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A fresh path under the temporary directory (not created: `git worktree add` creates it).
fn unique_temp_dir() -> Result<PathBuf, CliError> {
    let base = std::env::temp_dir();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    for attempt in 0..100u32 {
        let dir = base.join(format!(
            "palisade-base-{}-{stamp}-{attempt}",
            std::process::id()
        ));
        if !dir.exists() {
            return Ok(dir);
        }
    }
    Err(CliError::Git(format!(
        "no free temporary directory name in {}",
        base.display()
    )))
}
