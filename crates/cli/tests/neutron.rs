//! `palisade neutron sync` and `controller` against a real Neutron (PALISADE_NEUTRON_URL,
//! or one started by deploy/neutron/dev-server.sh): --dry-run never writes, a second sync
//! writes nothing, the controller follows a directory; a port that cannot be placed is
//! closed and makes `sync` exit 3 and the controller not ready; `--skip-invalid` isolates
//! the subject of an invalid policy as the controller does; and bad input is an error,
//! never a panic.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;
#[path = "../../neutron-sync/tests/common/mod.rs"]
mod neutron;

use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{palisade, stderr, stdout};
use palisade_neutron::SgEvaluator;
use palisade_neutron_sync::client::Client;
use palisade_neutron_sync::readback::read_back;
use palisade_neutron_sync::state::PortFilter;
use serde_json::{Value, json};

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
            "--listen",
            &free_addr(),
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

/// A loopback address nothing listens on now.
fn free_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// `GET path` from the controller at `addr`: the status and the body (`None` while it
/// does not listen yet).
fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n")?.1.to_string();
    Some((status, body))
}

/// A second port, on a network of its own, holding `ip` (besides an address of its own):
/// the pod with that address is on two ports. Returns the port's id.
fn second_port(c: &Client, ip: &str) -> String {
    let net = c
        .post("networks", &json!({"network": {"name": "other"}}))
        .unwrap();
    let net_id = net["network"]["id"].as_str().unwrap();
    let subnet = c
        .post("subnets", &json!({"subnet": {"network_id": net_id, "ip_version": 4, "cidr": "10.0.0.0/8", "gateway_ip": null}}))
        .unwrap();
    let subnet_id = subnet["subnet"]["id"].as_str().unwrap();
    let port = c
        .post(
            "ports",
            &json!({"port": {"network_id": net_id, "fixed_ips": [
                {"subnet_id": subnet_id, "ip_address": "10.250.0.1"},
                {"subnet_id": subnet_id, "ip_address": ip}]}}),
        )
        .unwrap();
    port["port"]["id"].as_str().unwrap().to_string()
}

#[test]
fn a_port_that_cannot_be_placed_is_closed_and_sync_exits_3() {
    let Some(url) = neutron::neutron_url() else {
        return;
    };
    let project = neutron::project("cli-exit3");
    let c = neutron::client(&url, &project);
    neutron::make_ports(&c, &xyz_ips());
    let second = second_port(&c, "10.0.0.10");
    let o = palisade(&[
        "neutron",
        "sync",
        "-f",
        "examples/xyz/cluster.yaml",
        "--neutron-url",
        &url,
        "--project-id",
        &project,
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("closed port {second} (pods x/a)")),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("2 port(s) closed because they cannot be placed"),
        "{}",
        stderr(&o)
    );
    let t = read_back(&c, &PortFilter::default()).unwrap();
    let ip: IpAddr = "10.0.0.10".parse().unwrap();
    for p in t.ports.iter().filter(|p| p.fixed_ips.contains(&ip)) {
        assert!(p.security_groups.is_empty(), "{p:?}");
    }
}

#[test]
fn the_controller_reports_a_port_it_cannot_place_in_readyz_and_metrics() {
    let Some(url) = neutron::neutron_url() else {
        return;
    };
    let project = neutron::project("cli-readyz");
    let c = neutron::client(&url, &project);
    neutron::make_ports(&c, &xyz_ips());
    second_port(&c, "10.0.0.10");
    let dir = tempfile::tempdir().unwrap();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    std::fs::copy(
        format!("{root}examples/xyz/cluster.yaml"),
        dir.path().join("cluster.yaml"),
    )
    .unwrap();
    let addr = free_addr();
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
            "--listen",
            &addr,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let metrics = loop {
        if let Some((200, body)) = get(&addr, "/metrics")
            && body.contains("palisade_neutron_syncs_total 1")
        {
            break body;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "timed out waiting for the first sync"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let readyz = get(&addr, "/readyz").unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        metrics.contains("palisade_neutron_unplaceable_ports 2\n")
            && metrics.contains("palisade_neutron_ready 0\n"),
        "{metrics}"
    );
    assert_eq!(readyz.0, 503, "{readyz:?}");
    assert!(readyz.1.contains("cannot be placed"), "{readyz:?}");
}

#[test]
fn sync_skip_invalid_isolates_the_subject_of_an_invalid_policy() {
    let Some(url) = neutron::neutron_url() else {
        return;
    };
    let project = neutron::project("cli-skip");
    let c = neutron::client(&url, &project);
    neutron::make_ports(&c, &xyz_ips());
    let dir = tempfile::tempdir().unwrap();
    let invalid = dir.path().join("invalid.yaml");
    std::fs::write(
        &invalid,
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: web, namespace: x}\nspec:\n  podSelector: {}\n  ingress: [{ports: [{protocol: ICMP}]}]\n",
    )
    .unwrap();
    let o = palisade(&[
        "neutron",
        "sync",
        "-f",
        "examples/xyz/cluster.yaml",
        invalid.to_str().unwrap(),
        "--skip-invalid",
        "--neutron-url",
        &url,
        "--project-id",
        &project,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("skipped: "), "{}", stderr(&o));
    let t = read_back(&c, &PortFilter::default()).unwrap();
    let sg = SgEvaluator::new(&t);
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let tcp = palisade_model::Protocol::Tcp;
    assert!(
        !sg.allows(ip("10.0.1.10"), ip("10.0.0.10"), tcp, 80),
        "the invalid policy's subject x/a is isolated for ingress"
    );
    assert!(
        sg.allows(ip("10.0.0.10"), ip("10.0.1.10"), tcp, 80),
        "and nothing else changes: y/a is not isolated"
    );
    let bad = palisade(&[
        "neutron",
        "sync",
        "-f",
        "examples/xyz/cluster.yaml",
        "--neutron-url",
        &url,
        "--project-id",
        &project,
        "--cluster-id",
        "Bad,Id",
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("--cluster-id"), "{}", stderr(&bad));
}

/// The controller given a relative `dir:PATH`, as the README writes it: an edit applies
/// (each file is named one way); the directory moved away keeps every group and rule in
/// Neutron and answers `/readyz` 503 with the reason; back, it is ready again.
#[test]
fn the_controller_fails_closed_when_its_directory_moves() {
    let Some(url) = neutron::neutron_url() else {
        return;
    };
    let project = neutron::project("cli-moved");
    let c = neutron::client(&url, &project);
    neutron::make_ports(&c, &xyz_ips());
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("manifests");
    std::fs::create_dir(&dir).unwrap();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    std::fs::copy(
        format!("{root}examples/xyz/cluster.yaml"),
        dir.join("cluster.yaml"),
    )
    .unwrap();
    std::fs::copy(format!("{root}{XYZ_POLICY}"), dir.join("policy.yaml")).unwrap();
    let addr = free_addr();
    let mut child = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .current_dir(parent.path())
        .args([
            "neutron",
            "controller",
            "--source",
            "dir:manifests",
            "--neutron-url",
            &url,
            "--project-id",
            &project,
            "--listen",
            &addr,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let filter = PortFilter::default();
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
    wait("ready", &|| {
        get(&addr, "/readyz").is_some_and(|(s, _)| s == 200)
    });
    let rules = |t: &palisade_neutron::Translation| -> usize {
        t.security_groups
            .iter()
            .map(|g| g.security_group_rules.len())
            .sum()
    };
    let groups = || read_back(&c, &filter).unwrap().security_groups.len();
    let synced = read_back(&c, &filter).unwrap();
    let (with_policy, all_rules) = (synced.security_groups.len(), rules(&synced));
    // An edit through the relative root: removing the policy removes its group.
    std::fs::remove_file(dir.join("policy.yaml")).unwrap();
    wait("the policy's group to go", &|| groups() < with_policy);
    std::fs::copy(format!("{root}{XYZ_POLICY}"), dir.join("policy.yaml")).unwrap();
    // Back in full: the group is written before its rules, so wait for both.
    wait("the policy's group and rules back", &|| {
        let now = read_back(&c, &filter).unwrap();
        now.security_groups.len() == with_policy && rules(&now) == all_rules
    });
    // Moved away: not ready, and nothing in Neutron changes.
    let before = read_back(&c, &filter).unwrap();
    std::fs::rename(&dir, parent.path().join("elsewhere")).unwrap();
    wait("not ready", &|| {
        get(&addr, "/readyz").is_some_and(|(s, _)| s == 503)
    });
    let (_, why) = get(&addr, "/readyz").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let during = read_back(&c, &filter).unwrap();
    std::fs::rename(parent.path().join("elsewhere"), &dir).unwrap();
    wait("ready again", &|| {
        get(&addr, "/readyz").is_some_and(|(s, _)| s == 200)
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(why.contains("cannot read its input"), "{why}");
    assert_eq!(
        during.security_groups.len(),
        before.security_groups.len(),
        "a moved directory removed groups"
    );
    assert_eq!(
        rules(&during),
        rules(&before),
        "a moved directory changed rules"
    );
}
