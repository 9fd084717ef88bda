//! Whether a test's environment is there, and what a test does when it is not.

use std::io::Write;

/// Whether the tests run in CI (`CI=true`), where nothing may be skipped.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether this process runs as root (effective user id 0).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

/// Reports that `test` cannot run for `reason`: panics under `CI=true`, else prints
/// `SKIPPED <test>: <reason>` to the process's stderr (past the harness's capture).
pub fn unavailable(test: &str, reason: &str) {
    if in_ci() {
        panic!("{test}: cannot run under CI=true: {reason}");
    }
    // Straight to stderr, not eprintln!: the harness captures that, and a skip must be seen.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
}

/// True when `test` can run as root; otherwise reports it [`unavailable`].
pub fn require_root(test: &str) -> bool {
    let root = is_root();
    if !root {
        unavailable(
            test,
            "needs root (network namespaces and nftables need root)",
        );
    }
    root
}

/// The value of the environment variable `var`, or `None` after reporting `test`
/// [`unavailable`] with `how` (what sets it).
pub fn require_env(test: &str, var: &str, how: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            unavailable(test, &format!("{var} is not set ({how})"));
            None
        }
    }
}
