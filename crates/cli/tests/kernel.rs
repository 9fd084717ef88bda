//! Smoke test of the `palisade lab` command line: up, apply, probe --compare, down.
//!
//! The kernel-versus-evaluator suite itself (every policy set, the connection cut, random
//! updates, several nodes) is `crates/lab/tests/kernel/`; this only checks that the subcommands are
//! wired to it. Needs root; run as another user, it prints why it is skipped and passes.

use std::process::Command;

mod common;

use common::{palisade, stderr};

/// Runs `palisade lab down` for the lab when dropped (also when the test panics).
struct Down<'a>(&'a str);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = palisade(&["lab", "down", "--name", self.0]);
    }
}

#[test]
fn lab_up_apply_probe_compare_down() {
    if !palisade_test_support::require_root("lab_up_apply_probe_compare_down") {
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

/// `lab apply` loads the lab's kube-proxy DNAT and `lab probe --compare` probes every Service
/// endpoint through the Service address (crates/lab/tests/fixtures/services: 56 probes).
#[test]
fn lab_probe_compare_probes_every_service_endpoint() {
    if !palisade_test_support::require_root("lab_probe_compare_probes_every_service_endpoint") {
        return;
    }
    let name = format!("v{:x}", std::process::id());
    let _down = Down(&name);
    let cluster = "crates/lab/tests/fixtures/services/cluster.yaml";
    let policies = "crates/lab/tests/fixtures/services/policies.yaml";
    let o = palisade(&["lab", "up", "-f", cluster, "--name", &name]);
    assert!(o.status.success(), "lab up: {}", stderr(&o));
    let o = palisade(&[
        "lab", "apply", "-f", cluster, "-f", policies, "--name", &name,
    ]);
    assert!(o.status.success(), "lab apply: {}", stderr(&o));
    let o = palisade(&[
        "lab",
        "probe",
        "-f",
        cluster,
        "-f",
        policies,
        "--name",
        &name,
        "--ports",
        "80",
        "--protocols",
        "TCP",
        "--compare",
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "lab probe --compare: {err}");
    assert!(
        err.contains("the kernel agrees with the evaluator on all 56 Service probes"),
        "{err}"
    );
}
