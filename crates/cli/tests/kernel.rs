//! Smoke test of the `palisade lab` command line: up, apply, probe --compare, down.
//!
//! The kernel-versus-evaluator suite itself (every policy set, the connection cut, random
//! updates) is `crates/lab/tests/kernel.rs`; this only checks that the subcommands are
//! wired to it. Needs root; run as another user, it prints why it is skipped and passes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_palisade");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn palisade(args: &[&str]) -> Output {
    Command::new(EXE)
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the palisade binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `palisade lab down` for the lab when dropped (also when the test panics).
struct Down<'a>(&'a str);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = palisade(&["lab", "down", "--name", self.0]);
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

#[test]
fn lab_up_apply_probe_compare_down() {
    if !is_root() {
        // straight to stderr, past the test harness's output capture
        let _ = writeln!(
            std::io::stderr(),
            "lab_up_apply_probe_compare_down: skipped: not root (network namespaces and nftables need root)"
        );
        return;
    }
    let name = format!("s{:x}", std::process::id());
    let _down = Down(&name);
    let o = palisade(&[
        "lab",
        "up",
        "-f",
        "examples/xyz/cluster.yaml",
        "--name",
        &name,
    ]);
    assert!(o.status.success(), "lab up: {}", stderr(&o));
    let o = palisade(&["lab", "apply", "-f", "examples/xyz", "--name", &name]);
    assert!(o.status.success(), "lab apply: {}", stderr(&o));
    let o = palisade(&[
        "lab",
        "probe",
        "-f",
        "examples/xyz",
        "--name",
        &name,
        "--ports",
        "80",
        "--protocols",
        "TCP",
        "-o",
        "jsonl",
        "--compare",
    ]);
    assert!(o.status.success(), "lab probe --compare: {}", stderr(&o));
    // nine pods and the external host: a 10 × 10 grid (an endpoint with itself is printed
    // as allowed and not probed, so 90 probes)
    let lines = String::from_utf8_lossy(&o.stdout).lines().count();
    assert_eq!(lines, 10 * 10, "probe -o jsonl: {}", stderr(&o));
    assert!(
        stderr(&o).contains("the kernel agrees with the evaluator on all 90 probes"),
        "{}",
        stderr(&o)
    );
    let o = palisade(&["lab", "down", "--name", &name]);
    assert!(o.status.success(), "lab down: {}", stderr(&o));
    let netns = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list runs");
    let left: Vec<String> = String::from_utf8_lossy(&netns.stdout)
        .lines()
        .filter(|l| l.starts_with(&format!("{name}-")))
        .map(str::to_string)
        .collect();
    assert!(left.is_empty(), "lab down left {left:?}");
}
