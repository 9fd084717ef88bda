//! `palisade agent --report-status` against the real Kubernetes API server (etcd and
//! kube-apiserver from `palisade-testenv`, in a network namespace where the agent enforces),
//! reading and writing as the ServiceAccount of the Helm chart rendered with
//! `reportStatus=true`: each AdminNetworkPolicy and ClusterNetworkPolicy the agent enforces
//! gets the condition `palisade.dev/Programmed-node-1` (True, Programmed, the policy's
//! generation); another node's condition is kept; a policy made staged loses it; a
//! BaselineAdminNetworkPolicy and a staged policy never get one; `agent --uninstall
//! --report-status` removes them all. Needs root, the built control plane and helm:
//! otherwise it prints why it is skipped (under `CI=true` a missing tool fails it).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::stderr;
use palisade_testenv::ControlPlane;
use serde_json::Value;

const EXE: &str = env!("CARGO_BIN_EXE_palisade");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const CLUSTER: &str = include_str!("../../../examples/xyz/cluster.yaml");
const ANP: &str = include_str!("../../../examples/xyz/policies/02-anp.yaml");
const BANP: &str = include_str!("../../../examples/xyz/policies/03-banp.yaml");
const CNP: &str = "apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata:
  name: deny-x-to-y
spec:
  tier: Admin
  priority: 20
  subject:
    namespaces:
      matchLabels: {ns: x}
  egress:
  - name: no-y
    action: Deny
    to:
    - namespaces:
        matchLabels: {ns: 'y'}
";
const STAGED: &str = "apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata:
  name: staged-one
  annotations:
    palisade.dev/staged: \"true\"
spec:
  priority: 30
  subject:
    namespaces: {}
  ingress:
  - name: deny-all
    action: Deny
    from:
    - namespaces: {}
";
const CONDITION: &str = "palisade.dev/Programmed-node-1";
const WITHIN: Duration = Duration::from_secs(20);

/// A network namespace with the control plane on its loopback; removed when dropped.
struct Env {
    netns: String,
    cp: Option<ControlPlane>,
    agent: Option<Child>,
    work: tempfile::TempDir,
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(mut agent) = self.agent.take() {
            let _ = agent.kill();
            let _ = agent.wait();
        }
        drop(self.cp.take());
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
    }
}

impl Env {
    fn cp(&self) -> &ControlPlane {
        self.cp.as_ref().unwrap()
    }

    /// `palisade ARGS` inside the namespace.
    fn palisade(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.netns, EXE]).args(args);
        c
    }

    fn conditions(&self, resource: &str, name: &str) -> Vec<Value> {
        let o = self.cp().kubectl_ok(&["get", resource, name, "-o", "json"]);
        let v: Value = serde_json::from_str(&o).unwrap();
        v["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn ours(&self, resource: &str, name: &str) -> Option<Value> {
        self.conditions(resource, name)
            .into_iter()
            .find(|c| c["type"] == CONDITION)
    }

    fn generation(&self, resource: &str, name: &str) -> i64 {
        let o = self.cp().kubectl_ok(&[
            "get",
            resource,
            name,
            "-o",
            "jsonpath={.metadata.generation}",
        ]);
        o.trim().parse().unwrap()
    }

    fn agent_log(&self) -> String {
        std::fs::read_to_string(self.work.path().join("agent.log")).unwrap_or_default()
    }

    /// Waits until `what` holds.
    fn until(&self, what: &str, check: impl Fn() -> bool) {
        let start = Instant::now();
        while !check() {
            assert!(
                start.elapsed() < WITHIN,
                "{what}: not within {WITHIN:?}\nagent: {}",
                self.agent_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The chart rendered with `reportStatus=true` (and its namespace).
fn chart_with_status(helm: &palisade_testenv::Helm) -> String {
    let o = Command::new(helm.bin())
        .args(["template", "palisade", "deploy/helm/palisade"])
        .args(["--namespace", "palisade-system"])
        .args([
            "--set",
            "namespace.create=true",
            "--set",
            "reportStatus=true",
        ])
        .current_dir(ROOT)
        .env("HELM_CONFIG_HOME", "/nonexistent/helm-config")
        .env("HELM_CACHE_HOME", "/nonexistent/helm-cache")
        .output()
        .unwrap();
    assert!(o.status.success(), "helm template: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn the_agent_reports_per_node_conditions_and_removes_them() {
    let test = "the_agent_reports_per_node_conditions_and_removes_them";
    if !palisade_test_support::require_root(test) {
        return;
    }
    let Some(bins) = palisade_testenv::require(test) else {
        return;
    };
    let Some(helm) = palisade_testenv::require_helm(test) else {
        return;
    };
    let netns = format!("pal-status-{}", std::process::id());
    let ok = Command::new("ip")
        .args(["netns", "add", &netns])
        .status()
        .unwrap();
    assert!(ok.success());
    let mut env = Env {
        netns: netns.clone(),
        cp: None,
        agent: None,
        work: tempfile::tempdir().unwrap(),
    };
    let ok = Command::new("ip")
        .args(["netns", "exec", &netns, "ip", "link", "set", "lo", "up"])
        .status()
        .unwrap();
    assert!(ok.success());
    env.cp = Some(ControlPlane::start(&bins, Some(&netns)).expect("control plane"));
    env.cp().apply(&chart_with_status(&helm));
    env.cp()
        .apply(&[CLUSTER, ANP, BANP, CNP, STAGED].join("\n---\n"));
    // Another node's condition, written before the agent starts, stays.
    let other = r#"{"status":{"conditions":[{"type":"palisade.dev/Programmed-node-2","status":"True","reason":"Programmed","message":"other","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#;
    env.cp().kubectl_ok(&[
        "patch",
        "clusternetworkpolicies",
        "deny-x-to-y",
        "--subresource=status",
        "--type=merge",
        "-p",
        other,
    ]);
    let token = env.cp().kubectl_ok(&[
        "create",
        "token",
        "palisade-agent",
        "-n",
        "palisade-system",
        "--duration=1h",
    ]);
    let kubeconfig = env.cp().token_kubeconfig("palisade-agent", token.trim());
    let kubeconfig = kubeconfig.to_str().unwrap().to_string();
    let log = std::fs::File::create(env.work.path().join("agent.log")).unwrap();
    env.agent = Some(
        env.palisade(&["agent", "--source", "kube", "--kubeconfig", &kubeconfig])
            .args([
                "--node",
                "node-1",
                "--listen",
                "127.0.0.1:9464",
                "--report-status",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );

    let anp = ("adminnetworkpolicies", "protect-z-c");
    let cnp = ("clusternetworkpolicies", "deny-x-to-y");
    env.until("both conditions written", || {
        env.ours(anp.0, anp.1).is_some() && env.ours(cnp.0, cnp.1).is_some()
    });
    for (resource, name) in [anp, cnp] {
        let c = env.ours(resource, name).unwrap();
        assert_eq!(c["status"], "True", "{name}: {c}");
        assert_eq!(c["reason"], "Programmed", "{name}: {c}");
        assert_eq!(
            c["message"], "enforced by the Palisade agent on node node-1",
            "{name}"
        );
        assert_eq!(
            c["observedGeneration"],
            env.generation(resource, name),
            "{name}"
        );
    }
    let types: Vec<Value> = env
        .conditions(cnp.0, cnp.1)
        .iter()
        .map(|c| c["type"].clone())
        .collect();
    assert_eq!(
        types,
        ["palisade.dev/Programmed-node-2", CONDITION],
        "the other node's condition is kept"
    );
    // Neither the staged policy nor the baseline policy gets one.
    assert!(env.ours("adminnetworkpolicies", "staged-one").is_none());
    assert!(
        env.conditions("baselineadminnetworkpolicies", "default")
            .is_empty(),
        "a BaselineAdminNetworkPolicy has no condition"
    );

    // A new generation is reported with its number.
    env.cp().kubectl_ok(&[
        "patch",
        anp.0,
        anp.1,
        "--type=merge",
        "-p",
        r#"{"spec":{"priority":11}}"#,
    ]);
    let generation = env.generation(anp.0, anp.1);
    env.until("the new generation reported", || {
        env.ours(anp.0, anp.1)
            .is_some_and(|c| c["observedGeneration"] == generation)
    });

    // Made staged, the policy is no longer enforced: its condition goes.
    env.cp()
        .kubectl_ok(&["annotate", anp.0, anp.1, "palisade.dev/staged=true"]);
    env.until("the staged policy's condition removed", || {
        env.ours(anp.0, anp.1).is_none()
    });
    assert!(env.ours(cnp.0, cnp.1).is_some());

    // Uninstalling removes this node's conditions and nothing else.
    if let Some(mut agent) = env.agent.take() {
        let _ = agent.kill();
        let _ = agent.wait();
    }
    let o = env
        .palisade(&[
            "agent",
            "--uninstall",
            "--report-status",
            "--node",
            "node-1",
        ])
        .args(["--kubeconfig", &kubeconfig])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("removed this node's status condition from 1 polic(ies)"),
        "{}",
        stderr(&o)
    );
    assert!(env.ours(cnp.0, cnp.1).is_none());
    assert_eq!(env.conditions(cnp.0, cnp.1).len(), 1, "node-2's stays");
}

#[test]
fn report_status_flags_are_checked() {
    for args in [
        &["agent", "--source", "kube", "--report-status"][..],
        &[
            "agent",
            "--source",
            "dir:.",
            "--node",
            "n",
            "--report-status",
        ],
        &["agent", "--uninstall", "--report-status"],
    ] {
        let o = common::palisade(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("--report-status"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}
