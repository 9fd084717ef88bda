//! `palisade neutron controller --source kube` with the real Kubernetes API server (etcd
//! and kube-apiserver from `palisade-testenv`, objects applied with the real `kubectl`)
//! and the real Neutron (PALISADE_NEUTRON_URL, or one started by
//! deploy/neutron/dev-server.sh): a NetworkPolicy applied with kubectl gets its security
//! group, and deleting it with kubectl removes the group. Skipped, saying why, without
//! either (a missing control plane fails it under `CI=true`).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;
#[path = "../../neutron-sync/tests/common/mod.rs"]
mod neutron;

use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use palisade_neutron_sync::readback::read_back;
use palisade_neutron_sync::state::PortFilter;
use palisade_testenv::ControlPlane;

const CLUSTER: &str = include_str!("../../../examples/xyz/cluster.yaml");
const DENY_X: &str = include_str!("../../../examples/xyz/policies/01-deny-ingress-x.yaml");

#[test]
fn the_neutron_controller_follows_the_real_api_server() {
    let Some(bins) =
        palisade_testenv::require("the_neutron_controller_follows_the_real_api_server")
    else {
        return;
    };
    let Some(url) = neutron::neutron_url() else {
        return;
    };
    let cp = ControlPlane::start(&bins, None).expect("the control plane");
    cp.apply(CLUSTER);
    let project = neutron::project("kube-controller");
    let c = neutron::client(&url, &project);
    let ips: Vec<IpAddr> = [
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
    .to_vec();
    neutron::make_ports(&c, &ips);
    let mut child = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(["neutron", "controller", "--source", "kube", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .args(["--neutron-url", &url, "--project-id", &project])
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
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], DENY_X);
    wait("the policy's group", &|| {
        read_back(&c, &filter).unwrap().security_groups.len() > groups_before
    });
    cp.kubectl_ok(&["delete", "networkpolicy", "allow-from-y-b", "-n", "x"]);
    wait("the policy's group to go", &|| {
        read_back(&c, &filter).unwrap().security_groups.len() == groups_before
    });
    child.kill().unwrap();
    child.wait().unwrap();
}
