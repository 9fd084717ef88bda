//! `palisade neutron sync` and `controller` against a real Neutron (PALISADE_NEUTRON_URL,
//! or one started by deploy/neutron/dev-server.sh): --dry-run never writes, a second sync
//! writes nothing, the controller follows a directory; and bad input is an error, never
//! a panic.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;
#[path = "../../neutron-sync/tests/common/mod.rs"]
mod neutron;

use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{palisade, stderr, stdout};
use palisade_neutron_sync::readback::read_back;
use palisade_neutron_sync::state::PortFilter;
use serde_json::Value;

const XYZ_POLICY: &str = "examples/xyz/policies/01-deny-ingress-x.yaml";

fn xyz_ips() -> Vec<IpAddr> {
    [
        "10.0.0.10",
        "10.0.0.11",
        "10.0.0.12",
        "10.0.1.10",
        "10.0.1.11",
        "10.0.1.12",
        "10.0.2.10",
        "10.0.2.11",
        "10.0.2.12",
    ]
    .map(|s| s.parse().unwrap())
    .to_vec()
}

fn sync_json(url: &str, project: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "neutron",
        "sync",
        "-f",
        "examples/xyz/cluster.yaml",
        XYZ_POLICY,
        "--neutron-url",
        url,
        "--project-id",
        project,
        "-o",
        "json",
    ];
    args.extend(extra);
    let o = palisade(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

#[test]
fn dry_run_writes_nothing_and_a_second_sync_writes_nothing() {
    let Some(url) = neutron::neutron_url() else {
        return;
    };
    let project = neutron::project("cli");
    let c = neutron::client(&url, &project);
    neutron::make_ports(&c, &xyz_ips());
    let filter = PortFilter::default();
    let before = read_back(&c, &filter).unwrap();
    let dry = sync_json(&url, &project, &["--dry-run"]);
    assert_eq!(dry["counts"]["writes"], 0, "--dry-run wrote: {dry:#}");
    assert!(
        dry["calls"].as_array().unwrap().len() > 9,
        "the dry run lists the calls: {dry:#}"
    );
    assert_eq!(
        read_back(&c, &filter).unwrap(),
        before,
        "--dry-run changed Neutron"
    );
    let first = sync_json(&url, &project, &[]);
    assert_eq!(
        first["counts"]["writes"],
        dry["calls"].as_array().unwrap().len(),
        "{first:#}"
    );
    assert_eq!(first["unmatched"].as_array().unwrap().len(), 0, "{first:#}");
    let second = sync_json(&url, &project, &[]);
    assert_eq!(second["counts"]["writes"], 0, "{second:#}");
    let o = palisade(&[
        "neutron",
        "sync",
        "-f",
        "examples/xyz/cluster.yaml",
        XYZ_POLICY,
        "--neutron-url",
        &url,
        "--project-id",
        &project,
    ]);
    assert!(stderr(&o).contains("0 write(s)"), "{}", stderr(&o));
}

#[test]
fn bad_input_and_unreachable_neutron_are_errors() {
    let rows: [(&[&str], i32, &str); 4] = [
        (
            &["neutron", "sync", "-f", "examples/xyz/cluster.yaml"],
            2,
            "no Neutron credentials",
        ),
        (
            &[
                "neutron",
                "sync",
                "-f",
                "examples/xyz/cluster.yaml",
                "--project-id",
                "p",
            ],
            2,
            "--neutron-url",
        ),
        (
            &[
                "neutron",
                "sync",
                "-f",
                "/nonexistent.yaml",
                "--neutron-url",
                "http://127.0.0.1:9",
                "--project-id",
                "p",
            ],
            1,
            "nonexistent",
        ),
        (
            &[
                "neutron",
                "sync",
                "-f",
                "examples/xyz",
                "--neutron-url",
                "http://127.0.0.1:9",
                "--project-id",
                "p",
            ],
            1,
            "--ignore-admin-policies",
        ),
    ];
    for (args, code, want) in rows {
        let o = palisade(args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}");
    }
    // Nothing listens on port 9 of loopback: retried, then exit 1 naming the call.
    let o = palisade(&[
        "neutron",
        "sync",
        "-f",
        "examples/xyz/cluster.yaml",
        "--neutron-url",
        "http://127.0.0.1:9",
        "--project-id",
        "p",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Neutron: GET security-groups"),
        "{}",
        stderr(&o)
    );
    let bad_cloud = palisade(&[
        "neutron",
        "sync",
        "-f",
        "examples/xyz/cluster.yaml",
        "--os-cloud",
        "nope",
    ]);
    assert_eq!(bad_cloud.status.code(), Some(1), "{}", stderr(&bad_cloud));
}

#[test]
fn the_controller_follows_a_directory() {
    let Some(url) = neutron::neutron_url() else {
        return;
    };
    let project = neutron::project("controller");
    let c = neutron::client(&url, &project);
    neutron::make_ports(&c, &xyz_ips());
    let dir = tempfile::tempdir().unwrap();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    std::fs::copy(
        format!("{root}examples/xyz/cluster.yaml"),
        dir.path().join("cluster.yaml"),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args([
            "neutron",
            "controller",
            "--source",
            &format!("dir:{}", dir.path().display()),
            "--neutron-url",
            &url,
            "--project-id",
            &project,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let filter = PortFilter::default();
    let port_groups = |ip: &str| -> usize {
        let t = read_back(&c, &filter).unwrap();
        let ip: IpAddr = ip.parse().unwrap();
        t.ports
            .iter()
            .find(|p| p.fixed_ips.contains(&ip))
            .map_or(0, |p| p.security_groups.len())
    };
    let wait = |what: &str, f: &dyn Fn() -> bool| {
        let start = Instant::now();
        while !f() {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "timed out waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    // No policy: every pod carries the open groups and its node's group.
    wait("the open groups", &|| port_groups("10.0.0.10") == 3);
    let groups_before = read_back(&c, &filter).unwrap().security_groups.len();
    std::fs::copy(
        format!("{root}{XYZ_POLICY}"),
        dir.path().join("policy.yaml"),
    )
    .unwrap();
    wait("the policy's group", &|| {
        read_back(&c, &filter).unwrap().security_groups.len() > groups_before
    });
    std::fs::remove_file(dir.path().join("policy.yaml")).unwrap();
    wait("the policy's group to go", &|| {
        read_back(&c, &filter).unwrap().security_groups.len() == groups_before
    });
    child.kill().unwrap();
    child.wait().unwrap();
}
