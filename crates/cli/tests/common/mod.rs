//! Running the built `palisade` binary from the repository root, for the CLI test binaries.

#![allow(dead_code, clippy::unwrap_used)] // shared by several test binaries, each using a part

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};

use palisade_testenv::ControlPlane;

/// Runs `palisade ARGS` from the repository root with empty stdin.
pub fn palisade(args: &[&str]) -> Output {
    palisade_stdin(args, "")
}

/// Runs `palisade ARGS` from the repository root with `stdin` on its standard input.
pub fn palisade_stdin(args: &[&str], stdin: impl AsRef<[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_ref())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// (status, body) of `GET path` on the agent's endpoint (`127.0.0.1:9464`) inside the
/// network namespace `netns`; status 0 when nothing answers.
pub fn agent_endpoint(netns: &str, path: &str) -> (u16, String) {
    let o = Command::new("ip")
        .args(["netns", "exec", netns, "curl", "-s", "-m", "2"])
        .args(["-w", "\n%{http_code}"])
        .arg(format!("http://127.0.0.1:9464{path}"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// `palisade lab probe --compare` of lab `name` on TCP and UDP 80 and 81 against the
/// manifests at `path`: success when the kernel decides every probe as the evaluator.
pub fn lab_compare(name: &str, path: &str) -> Output {
    palisade(&[
        "lab",
        "probe",
        "-f",
        path,
        "--name",
        name,
        "--ports",
        "80,81",
        "--protocols",
        "TCP,UDP",
        "--compare",
        "-o",
        "jsonl",
    ])
}

/// One control plane (etcd and kube-apiserver) for the test binary that asks; its tests
/// take turns (each resets it). `None`, saying why, when the binaries are not built.
pub fn plane(test: &str) -> Option<MutexGuard<'static, ControlPlane>> {
    static PLANE: OnceLock<Option<Mutex<ControlPlane>>> = OnceLock::new();
    let plane = PLANE.get_or_init(|| {
        let bins = palisade_testenv::Binaries::find().ok()?;
        let cp = ControlPlane::start(&bins, None).expect("start the control plane");
        eprintln!(
            "control plane at {} ready in {:.2} s",
            cp.url(),
            cp.startup.as_secs_f64()
        );
        Some(Mutex::new(cp))
    });
    match plane {
        Some(m) => Some(m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())),
        // Says why this test is skipped (or fails it under CI=true).
        None => {
            palisade_testenv::require(test);
            None
        }
    }
}
