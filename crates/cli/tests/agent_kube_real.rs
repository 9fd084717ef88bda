//! `palisade agent --source kube` against the real Kubernetes API server (etcd and
//! kube-apiserver from `palisade-testenv`, started on the loopback of the lab's node
//! namespace, where the agent runs), reading as the ServiceAccount `deploy/` makes, with
//! a token from `kubectl create token`. It follows `kubectl apply`, `label`, `delete` and
//! `patch --subresource=status` with the kernel equal to the evaluator of what the API
//! server holds after each; with kube-apiserver killed, and with etcd killed, the kernel
//! keeps enforcing, and once they are back a change made through them is enforced.
//! Needs root (network namespaces, nftables) and the built control plane: otherwise it
//! prints why it is skipped (under `CI=true` a missing control plane fails it).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod common;

use common::{agent_endpoint, lab_compare, palisade, stderr};
use palisade_test_support::wait_until;
use palisade_testenv::ControlPlane;

const EXE: &str = env!("CARGO_BIN_EXE_palisade");
const CLUSTER: &str = include_str!("../../../examples/xyz/cluster.yaml");
const DENY_X: &str = include_str!("../../../examples/xyz/policies/01-deny-ingress-x.yaml");
const ANP: &str = include_str!("../../../examples/xyz/policies/02-anp.yaml");
const DEPLOY: [&str; 4] = [
    include_str!("../../../deploy/00-namespace.yaml"),
    include_str!("../../../deploy/01-serviceaccount.yaml"),
    include_str!("../../../deploy/02-rbac.yaml"),
    include_str!("../../../deploy/03-daemonset.yaml"),
];
/// How soon after a `kubectl` command returns the kernel must enforce it.
const WITHIN: Duration = Duration::from_secs(5);

/// A lab, the control plane in its node namespace, and the agent beside it.
struct KubeAgentLab {
    name: String,
    netns: String,
    cp: Option<ControlPlane>,
    agent: Option<Child>,
    agent_kubeconfig: PathBuf,
    log: PathBuf,
    work: tempfile::TempDir,
}

impl KubeAgentLab {
    /// A lab of the xyz cluster (`<prefix><pid>`), the control plane in its node
    /// namespace with `deploy/` applied, and a kubeconfig with a token of the agent's
    /// ServiceAccount for the agent.
    fn up(prefix: &str, bins: &palisade_testenv::Binaries) -> KubeAgentLab {
        let name = format!("{prefix}{:x}", std::process::id());
        let o = palisade(&[
            "lab",
            "up",
            "-f",
            "examples/xyz/cluster.yaml",
            "--name",
            &name,
        ]);
        assert!(o.status.success(), "lab up: {}", stderr(&o));
        let netns = format!("{name}-node");
        let work = tempfile::tempdir().unwrap();
        let mut lab = KubeAgentLab {
            log: work.path().join("agent.log"),
            agent_kubeconfig: PathBuf::new(),
            cp: None,
            agent: None,
            name,
            netns,
            work,
        };
        let cp = ControlPlane::start(bins, Some(&lab.netns)).expect("the control plane");
        eprintln!(
            "control plane in {} ready in {:.2} s",
            lab.netns,
            cp.startup.as_secs_f64()
        );
        lab.cp = Some(cp);
        // deploy/ as shipped, and the agent reading as its ServiceAccount.
        lab.cp().apply(&DEPLOY.join("\n---\n"));
        let token = lab.cp().kubectl_ok(&[
            "create",
            "token",
            "palisade-agent",
            "-n",
            "palisade-system",
            "--duration=1h",
        ]);
        lab.agent_kubeconfig = lab.cp().token_kubeconfig("palisade-agent", token.trim());
        lab
    }

    fn cp(&self) -> &ControlPlane {
        self.cp.as_ref().expect("the control plane")
    }

    fn start_agent(&mut self) {
        self.spawn_agent();
        let ((), took) = wait_until(
            Duration::from_secs(30),
            || format!("agent not ready: {}", self.agent_log()),
            || (self.get("/readyz").0 == 200).then_some(()),
        );
        eprintln!("agent ready {:.2} s after it started", took.as_secs_f64());
    }

    fn kill_agent(&mut self) {
        if let Some(mut agent) = self.agent.take() {
            // `ip netns exec` execs the agent: this is the agent's own pid.
            let _ = agent.kill();
            let _ = agent.wait();
        }
    }

    fn spawn_agent(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.netns,
                EXE,
                "agent",
                "--source",
                "kube",
            ])
            .arg("--kubeconfig")
            .arg(&self.agent_kubeconfig)
            .args(["--listen", "127.0.0.1:9464", "--node", "node-1"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.agent = Some(child);
    }

    fn agent_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// (status, body) of the agent's endpoint, from inside its network namespace.
    fn get(&self, path: &str) -> (u16, String) {
        agent_endpoint(&self.netns, path)
    }

    fn commits(&self) -> f64 {
        let (_, body) = self.get("/metrics");
        body.lines()
            .find_map(|l| {
                l.strip_prefix("palisade_time_to_apply_seconds_count ")?
                    .parse()
                    .ok()
            })
            .unwrap_or(0.0)
    }

    /// How many "ruleset updated" lines the agent logged: each follows a commit once the
    /// tracked connections the change forbids were cut.
    fn updates_logged(&self) -> usize {
        self.agent_log().matches("ruleset updated").count()
    }

    /// Runs `kubectl ARGS` (with `stdin`), then waits until the agent committed a
    /// transaction; returns how long that took after kubectl returned. Returns once the
    /// agent also cut the tracked connections the change forbids (which follows the
    /// commit): until then a UDP flow a probe opened before may still pass.
    fn kubectl_and_wait(&self, args: &[&str], stdin: &str) -> Duration {
        let before = self.commits();
        let logged = self.updates_logged();
        self.cp().kubectl_stdin_ok(args, stdin);
        let ((), took) = wait_until(
            WITHIN,
            || format!("kubectl {args:?}: no transaction: {}", self.agent_log()),
            || (self.commits() > before).then_some(()),
        );
        // Both within WITHIN of the kubectl call, as one budget.
        wait_until(
            WITHIN.saturating_sub(took),
            || {
                format!(
                    "kubectl {args:?}: the commit's connection cut not done: {}",
                    self.agent_log()
                )
            },
            || (self.updates_logged() > logged).then_some(()),
        );
        took
    }

    /// [`KubeAgentLab::kubectl_and_wait`] with real packets probing every pair of pods
    /// from before the command until after the commit: no probe gets through where both
    /// the state before and the state after deny.
    fn kubectl_probed(&self, args: &[&str], stdin: &str) -> Duration {
        let before = self.cp().dump_yaml();
        let state = self.work.path().join("probed-before.yaml");
        std::fs::write(&state, &before).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (name, stop2) = (self.name.clone(), stop.clone());
        let prober = std::thread::spawn(move || {
            let mut allowed = BTreeSet::new();
            let mut runs = 0;
            // At least two runs: one across the change, one after it.
            while runs < 2 || !stop2.load(Ordering::SeqCst) {
                let o = palisade(&[
                    "lab",
                    "probe",
                    "-f",
                    state.to_str().unwrap(),
                    "--name",
                    &name,
                    "--ports",
                    "80,81",
                    "--protocols",
                    "TCP,UDP",
                    "-o",
                    "jsonl",
                ]);
                assert!(o.status.success(), "lab probe: {}", stderr(&o));
                allowed.extend(allowed_keys(&String::from_utf8_lossy(&o.stdout)));
                runs += 1;
            }
            allowed
        });
        let took = self.kubectl_and_wait(args, stdin);
        stop.store(true, Ordering::SeqCst);
        let observed = prober.join().expect("the probe loop");
        let after = self.cp().dump_yaml();
        let (before, after) = (evaluated(&before), evaluated(&after));
        let opened: Vec<&String> = observed
            .iter()
            .filter(|k| before.0.contains(*k) && after.0.contains(*k))
            .filter(|k| !before.1.contains(*k) && !after.1.contains(*k))
            .collect();
        assert!(
            opened.is_empty(),
            "kubectl {args:?}: probes got through that both states deny: {opened:?}"
        );
        took
    }

    /// The kernel agrees with the evaluator on `state` (manifest text).
    fn assert_enforces_text(&self, state: &str, what: &str) {
        let dir = self.work.path().join("expected");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("state.yaml"), state).unwrap();
        let o = lab_compare(&self.name, dir.to_str().unwrap());
        assert!(
            o.status.success(),
            "{what}: kernel and evaluator disagree: {}\nagent: {}",
            stderr(&o),
            self.agent_log()
        );
    }

    /// The kernel agrees with the evaluator on what the API server holds now.
    fn assert_enforces_cluster(&self, what: &str) -> String {
        let state = self.cp().dump_yaml();
        self.assert_enforces_text(&state, what);
        state
    }
}

impl Drop for KubeAgentLab {
    fn drop(&mut self) {
        self.kill_agent();
        // The control plane runs in the lab's namespace: stop it before the lab goes.
        drop(self.cp.take());
        let _ = palisade(&["lab", "down", "--name", &self.name]);
    }
}

/// The keys (from, to, protocol, port) of the allowed lines of a `-o jsonl` matrix.
fn allowed_keys(jsonl: &str) -> BTreeSet<String> {
    keys(jsonl).1
}

/// Every key of a `-o jsonl` matrix, and the allowed ones.
fn keys(jsonl: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut all, mut allowed) = (BTreeSet::new(), BTreeSet::new());
    for line in jsonl.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let key = format!("{} {} {} {}", v["from"], v["to"], v["protocol"], v["port"]);
        if v["allowed"] == true {
            allowed.insert(key.clone());
        }
        all.insert(key);
    }
    (all, allowed)
}

/// The evaluator's matrix of `state` (manifest text): every key and the allowed ones.
fn evaluated(state: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let o = common::palisade_stdin(
        &[
            "matrix",
            "-f",
            "-",
            "--ports",
            "80,81",
            "--protocols",
            "TCP,UDP",
            "-o",
            "jsonl",
        ],
        state,
    );
    assert!(o.status.success(), "matrix: {}", stderr(&o));
    keys(&String::from_utf8_lossy(&o.stdout))
}

/// The document of `CLUSTER` that names `name` in `namespace`, and the rest.
fn split_pod(name: &str, namespace: &str) -> (String, String) {
    let at = CLUSTER
        .find(&format!("  name: {name}\n  namespace: {namespace}"))
        .unwrap();
    let doc_start = CLUSTER[..at].rfind("---").unwrap();
    let doc_end = CLUSTER[at..].find("---").map_or(CLUSTER.len(), |i| at + i);
    (
        CLUSTER[doc_start..doc_end]
            .trim_start_matches("---")
            .to_string(),
        format!("{}{}", &CLUSTER[..doc_start], &CLUSTER[doc_end..]),
    )
}

#[test]
fn the_agent_follows_the_real_api_server_and_survives_its_faults() {
    const TEST: &str = "the_agent_follows_the_real_api_server_and_survives_its_faults";
    if !palisade_test_support::require_root(TEST) {
        return;
    }
    let Some(bins) = palisade_testenv::require(TEST) else {
        return;
    };
    let mut lab = KubeAgentLab::up("k", &bins);
    // Pod z/c starts outside the cluster; it is added later, then given its address.
    let (zc, without_zc) = split_pod("c", "z");
    lab.cp().apply(&without_zc);
    lab.cp().apply(DENY_X);
    lab.start_agent();
    lab.assert_enforces_cluster("after start");

    let mut took = Vec::new();
    took.push(lab.kubectl_probed(&["apply", "-f", "-"], ANP));
    lab.assert_enforces_cluster("a policy applied");

    took.push(lab.kubectl_probed(
        &["label", "pod", "b", "-n", "x", "pod=c", "--overwrite"],
        "",
    ));
    lab.assert_enforces_cluster("a pod relabelled");

    took.push(lab.kubectl_probed(&["label", "namespace", "y", "ns=w", "--overwrite"], ""));
    lab.assert_enforces_cluster("a namespace relabelled");

    took.push(lab.kubectl_probed(
        &["delete", "networkpolicy", "allow-from-y-b", "-n", "x"],
        "",
    ));
    lab.assert_enforces_cluster("a policy deleted");

    // A pod as the scheduler binds it (no address yet), then its address as the kubelet
    // reports it, through the status subresource.
    lab.cp().kubectl_stdin_ok(&["apply", "-f", "-"], &zc);
    lab.assert_enforces_cluster("a pod without an address");
    let ip = zc
        .lines()
        .find_map(|l| l.trim().strip_prefix("podIP: "))
        .expect("z/c's address")
        .trim_matches('"')
        .to_string();
    let patch =
        format!(r#"{{"status":{{"podIP":"{ip}","podIPs":[{{"ip":"{ip}"}}],"phase":"Running"}}}}"#);
    took.push(lab.kubectl_probed(
        &[
            "patch",
            "pod",
            "c",
            "-n",
            "z",
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ],
        "",
    ));
    let state = lab.assert_enforces_cluster("a pod's address reported");
    eprintln!("kubectl returned → kernel commit: {took:?}");

    // kube-apiserver killed: the kernel keeps enforcing the last state.
    lab.cp.as_mut().unwrap().kill_apiserver();
    std::thread::sleep(Duration::from_secs(2));
    lab.assert_enforces_text(&state, "kube-apiserver down");
    // ... and says it cannot read its input.
    let down = Instant::now();
    loop {
        let (code, body) = lab.get("/readyz");
        if code == 503 {
            assert!(body.contains("cannot read its input"), "{body}");
            break;
        }
        assert!(
            down.elapsed() < Duration::from_secs(20),
            "still ready with kube-apiserver down: {code} {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // While it starts (its CRD informer syncing: custom resources can answer 404 for a
    // moment) and the agent lists again, the kernel never leaves the state.
    lab.cp.as_mut().unwrap().start_apiserver().unwrap();
    let restarted = Instant::now();
    while restarted.elapsed() < Duration::from_secs(6) {
        lab.assert_enforces_text(&state, "kube-apiserver restarting, the agent resyncing");
    }
    lab.cp().wait_ready().unwrap();
    lab.kubectl_and_wait(&["delete", "adminnetworkpolicy", "protect-z-c"], "");
    lab.assert_enforces_cluster("a policy deleted after kube-apiserver restarted");
    // Every kind listed again: ready again, by itself.
    let back = Instant::now();
    while lab.get("/readyz").0 != 200 {
        assert!(
            back.elapsed() < Duration::from_secs(60),
            "not ready again after kube-apiserver came back: {:?}",
            lab.get("/readyz")
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // etcd killed: the API server stays up but can serve nothing; the kernel keeps
    // enforcing; etcd back, a change is followed.
    let state = lab.cp().dump_yaml();
    lab.cp.as_mut().unwrap().kill_etcd();
    std::thread::sleep(Duration::from_secs(2));
    lab.assert_enforces_text(&state, "etcd down");
    let (code, body) = lab.get("/readyz");
    eprintln!("etcd down: /readyz {code}: {body}");
    lab.cp.as_mut().unwrap().start_etcd().unwrap();
    let restarted = Instant::now();
    while restarted.elapsed() < Duration::from_secs(6) {
        lab.assert_enforces_text(&state, "etcd restarting, the agent resyncing");
    }
    lab.cp().wait_ready().unwrap();
    lab.kubectl_and_wait(&["apply", "-f", "-"], DENY_X);
    lab.assert_enforces_cluster("a policy applied after etcd restarted");

    // The API server answering 404 for a custom resource whose objects still exist (as
    // while its CRD informer syncs after a restart): the AdminNetworkPolicy version is
    // made unserved, then served again. The kernel keeps the policy throughout, the agent
    // reports not ready, then lists again and follows a change.
    lab.kubectl_and_wait(&["apply", "-f", "-"], ANP);
    let state = lab.assert_enforces_cluster("a policy applied before its kind went unserved");
    let served = |on: bool| {
        lab.cp().kubectl_ok(&[
            "patch",
            "crd",
            "adminnetworkpolicies.policy.networking.k8s.io",
            "--type=json",
            "-p",
            &format!(r#"[{{"op":"replace","path":"/spec/versions/0/served","value":{on}}}]"#),
        ]);
    };
    served(false);
    let unserved = Instant::now();
    loop {
        let o = lab.cp().kubectl(&[
            "get",
            "adminnetworkpolicies.v1alpha1.policy.networking.k8s.io",
        ]);
        if !o.status.success() {
            break;
        }
        assert!(unserved.elapsed() < Duration::from_secs(20), "still served");
        std::thread::sleep(Duration::from_millis(100));
    }
    loop {
        lab.assert_enforces_text(&state, "AdminNetworkPolicy unserved (404)");
        let (code, body) = lab.get("/readyz");
        if code == 503 {
            eprintln!("unserved: /readyz {code}: {body}");
            break;
        }
        assert!(
            unserved.elapsed() < Duration::from_secs(20),
            "still ready while AdminNetworkPolicy answers 404: {code} {body}\n{}",
            lab.agent_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let since = Instant::now();
    while since.elapsed() < Duration::from_secs(5) {
        lab.assert_enforces_text(&state, "AdminNetworkPolicy unserved (404)");
    }
    served(true);
    lab.cp().wait_ready().unwrap();
    let back = Instant::now();
    while lab.get("/readyz").0 != 200 {
        lab.assert_enforces_text(
            &state,
            "AdminNetworkPolicy served again, the agent resyncing",
        );
        assert!(
            back.elapsed() < Duration::from_secs(60),
            "not ready again after AdminNetworkPolicy is served again: {:?}\n{}",
            lab.get("/readyz"),
            lab.agent_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    lab.kubectl_and_wait(&["delete", "adminnetworkpolicy", "protect-z-c"], "");
    lab.assert_enforces_cluster("a policy deleted after its kind was served again");
}

/// `deploy/`'s ClusterRole is exactly what the agent needs: without any one of its
/// resources the agent never reports ready and its log names the resource it may not
/// read; with all of them it is ready.
#[test]
fn without_any_one_resource_of_deploy_s_role_the_agent_is_not_ready_and_says_which() {
    const TEST: &str =
        "without_any_one_resource_of_deploy_s_role_the_agent_is_not_ready_and_says_which";
    if !palisade_test_support::require_root(TEST) {
        return;
    }
    let Some(bins) = palisade_testenv::require(TEST) else {
        return;
    };
    let mut lab = KubeAgentLab::up("r", &bins);
    lab.cp().apply(CLUSTER);
    let rules: [(&str, &[&str]); 4] = [
        ("", &["namespaces", "pods", "nodes", "services"]),
        ("discovery.k8s.io", &["endpointslices"]),
        ("networking.k8s.io", &["networkpolicies"]),
        (
            "policy.networking.k8s.io",
            &[
                "adminnetworkpolicies",
                "baselineadminnetworkpolicies",
                "clusternetworkpolicies",
            ],
        ),
    ];
    for (_, resources) in rules {
        for missing in resources {
            let role = serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "palisade-agent"},
                "rules": rules
                    .iter()
                    .map(|(group, resources)| serde_json::json!({
                        "apiGroups": [group],
                        "resources": resources.iter().filter(|r| *r != missing).collect::<Vec<_>>(),
                        "verbs": ["get", "list", "watch"],
                    }))
                    .filter(|rule| rule["resources"] != serde_json::json!([]))
                    .collect::<Vec<_>>(),
            });
            lab.cp()
                .kubectl_stdin_ok(&["apply", "-f", "-"], &role.to_string());
            lab.log = lab.work.path().join(format!("agent-without-{missing}.log"));
            lab.spawn_agent();
            let said = |log: &str| {
                log.lines().any(|l| {
                    let l = l.to_lowercase();
                    l.contains(missing) && (l.contains("403") || l.contains("forbidden"))
                })
            };
            wait_until(
                Duration::from_secs(10),
                || {
                    format!(
                        "without {missing}: no log line names it as forbidden:\n{}",
                        lab.agent_log()
                    )
                },
                || said(&lab.agent_log()).then_some(()),
            );
            // Every other kind has long been listed; still not ready.
            std::thread::sleep(Duration::from_secs(1));
            let (code, body) = lab.get("/readyz");
            assert_ne!(code, 200, "without {missing} the agent is ready: {body}");
            if *missing == "pods" {
                eprintln!("without pods: /readyz {code}: {body}");
            }
            lab.kill_agent();
        }
    }
    // The role as shipped: ready.
    lab.cp().apply(DEPLOY[2]);
    lab.log = lab.work.path().join("agent.log");
    lab.start_agent();
    lab.assert_enforces_cluster("with deploy/'s role");
}

/// Removes a network namespace this test made.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// The time from `kubectl apply` returning to the agent's kernel commit, with a generated
/// cluster of 1,000 pods on 10 nodes and 200 policies of every kind in the API server and
/// the agent enforcing one node's pods: printed (docs/performance.md records it), and each
/// within 5 s.
#[test]
fn kubectl_apply_reaches_the_kernel_quickly_at_1000_pods() {
    const TEST: &str = "kubectl_apply_reaches_the_kernel_quickly_at_1000_pods";
    if !palisade_test_support::require_root(TEST) {
        return;
    }
    let Some(bins) = palisade_testenv::require(TEST) else {
        return;
    };
    // A bare network namespace is enough: nothing is probed, only commits are timed.
    let ns = Netns(format!("p{:x}-node", std::process::id()));
    for args in [
        &["netns", "add", &ns.0][..],
        &["-n", &ns.0, "link", "set", "lo", "up"],
    ] {
        assert!(Command::new("ip").args(args).status().unwrap().success());
    }
    let work = tempfile::tempdir().unwrap();
    let gen_dir = work.path().join("gen");
    // PALISADE_KUBE_PERF_PODS=10000 measures a larger cluster (one policy per five pods).
    let pods: usize = std::env::var("PALISADE_KUBE_PERF_PODS")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(1000);
    let policies = (pods / 5).to_string();
    let pods_arg = pods.to_string();
    let o = palisade(&[
        "gen",
        "--pods",
        &pods_arg,
        "--policies",
        &policies,
        "--mix",
        "all",
        "-o",
        gen_dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "gen: {}", stderr(&o));
    let text = ["cluster/cluster.yaml", "policies/policies.yaml"]
        .map(|f| std::fs::read_to_string(gen_dir.join(f)).unwrap())
        .join("\n---\n");
    let cp = ControlPlane::start(&bins, Some(&ns.0)).expect("the control plane");
    let begin = Instant::now();
    cp.apply_with(&["--server-side"], &text);
    eprintln!(
        "{pods} pods and {policies} policies applied in {:.1} s",
        begin.elapsed().as_secs_f64()
    );
    let mut lab = KubeAgentLab {
        // No lab of this name exists: dropping it stops the agent and the control plane.
        name: format!("p{:x}-none", std::process::id()),
        netns: ns.0.clone(),
        log: work.path().join("agent.log"),
        agent_kubeconfig: cp.kubeconfig.clone(),
        cp: Some(cp),
        agent: None,
        work,
    };
    lab.start_agent();
    let mut took = Vec::new();
    for i in 0..10 {
        // A policy selecting pods of every node, the kind of change a rollout makes.
        let policy = format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: timed-{i}\n  namespace: ns-{}\nspec:\n  podSelector: {{}}\n  ingress:\n  - ports:\n    - port: {}\n",
            i % 5,
            8000 + i
        );
        took.push(lab.kubectl_and_wait(&["apply", "-f", "-"], &policy));
    }
    took.sort();
    eprintln!(
        "{pods} pods: kubectl apply returned → kernel commit: median {:?}, max {:?} (all: {took:?})",
        took[took.len() / 2],
        took[took.len() - 1]
    );
}

/// Which enforcer runs in the lab's node namespace.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Enforcer {
    /// No enforcer: the baseline of the latency measurements.
    None,
    /// `palisade agent --source kube`.
    Palisade,
    /// kube-network-policies (the upstream reference enforcer: nfqueue, verdicts in user
    /// space), reading as the cluster's admin.
    KubeNetworkPolicies,
}

/// kube-network-policies' binary (NetworkPolicy, AdminNetworkPolicy and
/// BaselineAdminNetworkPolicy), as `bench/kube-network-policies.sh` builds it.
fn kube_network_policies() -> Option<PathBuf> {
    let path = std::env::var_os("PALISADE_KNP")
        .map(PathBuf::from)
        .or_else(|| {
            Some(
                PathBuf::from(std::env::var_os("HOME")?)
                    .join(".cache/palisade-peers/kube-network-policies-v1.1.1/npa-v1alpha1"),
            )
        })?;
    path.exists().then_some(path)
}

impl KubeAgentLab {
    /// Starts `enforcer` and waits until it enforces: the agent's `/readyz`, or
    /// kube-network-policies' table in place and its caches synced.
    fn start_enforcer(&mut self, enforcer: Enforcer, knp: &std::path::Path) {
        match enforcer {
            Enforcer::None => {}
            Enforcer::Palisade => self.start_agent(),
            Enforcer::KubeNetworkPolicies => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.log)
                    .unwrap();
                let child = Command::new("ip")
                    .args(["netns", "exec", &self.netns])
                    .arg(knp)
                    .arg(format!("--kubeconfig={}", self.cp().kubeconfig.display()))
                    .args([
                        "--hostname-override=node-1",
                        "--disable-nri",
                        "--fail-open=false",
                        "--metrics-bind-address=127.0.0.1:9080",
                    ])
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .unwrap();
                self.agent = Some(child);
                let start = Instant::now();
                while !self.nft_table_exists("kube-network-policies") {
                    assert!(
                        start.elapsed() < Duration::from_secs(30),
                        "kube-network-policies did not start: {}",
                        self.agent_log()
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
                // Its informers list before it answers a verdict; give them time.
                std::thread::sleep(Duration::from_secs(3));
            }
        }
    }

    /// Stops whichever enforcer runs and removes its table.
    fn stop_enforcer(&mut self) {
        self.kill_agent();
        for table in ["palisade", "kube-network-policies"] {
            let _ = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &self.netns,
                    "nft",
                    "delete",
                    "table",
                    "inet",
                    table,
                ])
                .stderr(Stdio::null())
                .status();
        }
    }

    fn nft_table_exists(&self, table: &str) -> bool {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.netns,
                "nft",
                "list",
                "table",
                "inet",
                table,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The enforcer's user and system CPU time and its peak resident memory (kB).
    fn enforcer_usage(&self) -> (Duration, u64) {
        let Some(pid) = self.agent.as_ref().map(Child::id) else {
            return (Duration::ZERO, 0);
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // After the command name in parentheses: fields 14 and 15 are utime and stime.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks: u64 = fields
            .get(11..13)
            .map(|f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum())
            .unwrap_or(0);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let hwm = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        (Duration::from_millis(ticks * 10), hwm)
    }
}

/// Whether this kernel has the nftables `queue` expression, which kube-network-policies'
/// dataplane needs (it sends new connections to user space through it): tried in a
/// scratch network namespace.
fn kernel_has_nft_queue() -> Option<String> {
    let ns = Netns(format!("q{:x}", std::process::id()));
    let ok = Command::new("ip")
        .args(["netns", "add", &ns.0])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "ip netns add");
    let o = Command::new("ip")
        .args(["netns", "exec", &ns.0, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .unwrap()
                .write_all(b"table inet q {\n  chain c {\n    type filter hook postrouting priority 0;\n    ct state new queue num 100 bypass\n  }\n}\n")?;
            c.wait_with_output()
        })
        .unwrap();
    (!o.status.success()).then(|| String::from_utf8_lossy(&o.stderr).trim().to_string())
}

/// Runs `f` on a thread in the network namespace `netns`.
fn in_netns<T: Send>(netns: &str, f: impl FnOnce() -> T + Send) -> T {
    let ns = std::fs::File::open(format!("/run/netns/{netns}")).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            use std::os::fd::AsFd;
            rustix::thread::move_into_link_name_space(
                ns.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .unwrap();
            f()
        })
        .join()
        .unwrap()
    })
}

/// Whether a new TCP connection to `to` exchanges a byte with the lab's echo responder.
fn exchange(to: std::net::SocketAddr) -> bool {
    use std::io::Read;
    let timeout = Duration::from_millis(150);
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&to, timeout) else {
        return false;
    };
    let mut byte = [0u8; 1];
    s.set_read_timeout(Some(timeout)).is_ok()
        && s.write_all(b"x").is_ok()
        && s.read_exact(&mut byte).is_ok()
}

/// New-connection latency from the pod namespace `from` to `to` (the lab's helper):
/// (p50 µs, p99 µs, connections).
fn connect_latency(from: &str, to: std::net::SocketAddr) -> (f64, f64, u64) {
    let o = Command::new("ip")
        .args(["netns", "exec", from, EXE, "lab", "connect-bench"])
        .args(["--to", &to.to_string(), "--millis", "1500"])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&o.stdout).to_string();
    let words: Vec<&str> = line.split_whitespace().collect();
    let field = |name: &str| -> f64 {
        words
            .iter()
            .position(|w| *w == name)
            .and_then(|i| words.get(i + 1)?.parse().ok())
            .unwrap_or_else(|| panic!("connect-bench: no {name} in {line:?} {}", stderr(&o)))
    };
    (
        field("p50_us"),
        field("p99_us"),
        field("connections") as u64,
    )
}

/// How long after `change` (a kubectl command) returns a new connection from `from` to
/// `to` first gets the answer `want` (true: exchanged, false: refused or dropped).
fn time_to_enforce(
    lab: &KubeAgentLab,
    from: &str,
    to: std::net::SocketAddr,
    change: &[&str],
    want: bool,
) -> Duration {
    let done = Arc::new(AtomicBool::new(false));
    let started: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let (done2, started2) = (done.clone(), started.clone());
    let netns = from.to_string();
    let prober = std::thread::spawn(move || {
        in_netns(&netns, || {
            let begin = Instant::now();
            loop {
                let attempt = Instant::now();
                let ok = exchange(to);
                let since = *started2.lock().unwrap();
                if let Some(since) = since
                    && ok == want
                {
                    return attempt.saturating_duration_since(since);
                }
                assert!(
                    begin.elapsed() < Duration::from_secs(60) && !done2.load(Ordering::SeqCst),
                    "no {want} answer within 60 s"
                );
            }
        })
    });
    lab.cp().kubectl_ok(change);
    *started.lock().unwrap() = Some(Instant::now());
    let took = prober.join().expect("the prober");
    done.store(true, Ordering::SeqCst);
    took
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i.min(samples.len() - 1)]
}

/// Palisade's agent and kube-network-policies side by side, one at a time, in the same
/// lab node namespace against the same real API server: conformance on the xyz fixture
/// (each kernel's observed matrix against the evaluator), added latency per new
/// connection with 0, 100 and 1,000 NetworkPolicies in the destination's namespace (and
/// 10,000 with `PALISADE_PEERS_RULES=0,100,1000,10000`), the time from `kubectl`
/// returning to enforcement of a policy change and a pod relabel, CPU and memory under a
/// storm of new connections, and what each does to an established connection when a
/// policy tightens. Prints the numbers docs/performance.md records ("Against other
/// tools"). Run by `bench/kube-network-policies.sh` (root).
#[test]
#[ignore = "measures; run with bench/kube-network-policies.sh (root)"]
fn side_by_side_with_kube_network_policies() {
    const TEST: &str = "side_by_side_with_kube_network_policies";
    assert!(palisade_test_support::is_root(), "{TEST}: needs root");
    let bins = palisade_testenv::require(TEST).expect("the control plane (testenv/build.sh)");
    let knp = kube_network_policies()
        .expect("kube-network-policies (bench/kube-network-policies.sh builds it)");
    // Without the kernel's queue expression kube-network-policies cannot enforce anything:
    // it is left out, and Palisade is measured alone by the same method.
    let peers: Vec<Enforcer> = match kernel_has_nft_queue() {
        None => vec![Enforcer::Palisade, Enforcer::KubeNetworkPolicies],
        Some(why) => {
            println!(
                "kube-network-policies left out: this kernel has no nftables queue expression (CONFIG_NFT_QUEUE), which its dataplane needs: {why}"
            );
            vec![Enforcer::Palisade]
        }
    };
    let mut lab = KubeAgentLab::up("s", &bins);
    let pods = lab.cp().objects(CLUSTER);
    let ip = |ns: &str, name: &str| -> std::net::IpAddr {
        let p = pods
            .iter()
            .find(|p| {
                p["kind"] == "Pod"
                    && p["metadata"]["namespace"] == ns
                    && p["metadata"]["name"] == name
            })
            .unwrap();
        p["status"]["podIP"].as_str().unwrap().parse().unwrap()
    };
    // y/a (the lab's p3) to y/b (p4) port 80.
    let (from, to) = (
        format!("{}-p3", lab.name),
        std::net::SocketAddr::new(ip("y", "b"), 80),
    );
    lab.cp().apply(CLUSTER);

    // 1. Conformance: the xyz policies, each enforcer's kernel against the evaluator.
    let policies = [
        DENY_X,
        ANP,
        include_str!("../../../examples/xyz/policies/03-banp.yaml"),
    ];
    lab.cp().apply(&policies.join("\n---\n"));
    for &enforcer in &peers {
        lab.start_enforcer(enforcer, &knp);
        let dir = lab.work.path().join("conformance");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("state.yaml"), lab.cp().dump_yaml()).unwrap();
        let o = lab_compare(&lab.name, dir.to_str().unwrap());
        println!(
            "conformance, xyz fixture, {enforcer:?}: {}",
            if o.status.success() {
                "the kernel equals the evaluator on every probe".to_string()
            } else {
                format!("the kernel differs from the evaluator:\n{}", stderr(&o))
            }
        );
        lab.stop_enforcer();
    }
    lab.cp().kubectl_ok(&[
        "delete",
        "networkpolicies,adminnetworkpolicies,baselineadminnetworkpolicies",
        "--all",
        "-A",
    ]);

    // 2. Added latency per new connection: y/b selected by a policy that allows y/a on
    // port 80, and N more policies in namespace y, each selecting a pod of its own on the
    // node.
    const ALLOW: &str = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: allow-a, namespace: \"y\"}\nspec:\n  podSelector: {matchLabels: {pod: b}}\n  ingress: [{from: [{podSelector: {matchLabels: {pod: a}}}], ports: [{port: PORT}]}]\n";
    lab.cp().apply(&ALLOW.replace("PORT", "80"));
    let counts: Vec<usize> = std::env::var("PALISADE_PEERS_RULES")
        .unwrap_or_else(|_| "0,100,1000".into())
        .split(',')
        .map(|n| n.trim().parse().unwrap())
        .collect();
    let mut applied = 0;
    for &n in &counts {
        let mut more = String::new();
        for i in applied..n {
            more.push_str(&format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: o-{i}, namespace: \"y\", labels: {{app: o{i}}}}}\nspec: {{nodeName: node-1, containers: [{{name: c, image: i, ports: [{{containerPort: 80}}]}}]}}\nstatus: {{phase: Running, podIP: 10.60.{}.{}, podIPs: [{{ip: 10.60.{}.{}}}]}}\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: np-{i}, namespace: \"y\"}}\nspec:\n  podSelector: {{matchLabels: {{app: o{i}}}}}\n  ingress: [{{from: [{{ipBlock: {{cidr: 10.70.{}.{}/32}}}}], ports: [{{port: 8080}}]}}]\n",
                i / 250, i % 250 + 1, i / 250, i % 250 + 1, i / 250, i % 250 + 1
            ));
        }
        if !more.is_empty() {
            lab.cp().apply_with(&["--server-side"], &more);
        }
        applied = n;
        for enforcer in std::iter::once(Enforcer::None).chain(peers.iter().copied()) {
            lab.start_enforcer(enforcer, &knp);
            let _ = Command::new("ip")
                .args(["netns", "exec", &lab.netns, "conntrack", "-F"])
                .stderr(Stdio::null())
                .status();
            connect_latency(&from, to); // warm up
            let (p50, p99, conns) = connect_latency(&from, to);
            assert!(
                conns > 0,
                "{enforcer:?} at {n} policies: no connection got through"
            );
            println!(
                "latency, {n} policies, {enforcer:?}: p50 {p50} µs, p99 {p99} µs ({conns} connections in 1.5 s)"
            );
            lab.stop_enforcer();
        }
    }

    // 3. Time to enforce, 4. CPU and memory under a storm, 5. established connections.
    let rounds: usize = std::env::var("PALISADE_PEERS_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    let n = applied;
    for &enforcer in &peers {
        lab.start_enforcer(enforcer, &knp);
        let (mut tighten, mut loosen, mut relabel, mut back) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let apply = |port: &str| -> Vec<String> {
                let file = lab.work.path().join("allow.yaml");
                std::fs::write(&file, ALLOW.replace("PORT", port)).unwrap();
                vec!["apply".into(), "-f".into(), file.display().to_string()]
            };
            let args = apply("81");
            tighten.push(time_to_enforce(
                &lab,
                &from,
                to,
                &args.iter().map(String::as_str).collect::<Vec<_>>(),
                false,
            ));
            let args = apply("80");
            loosen.push(time_to_enforce(
                &lab,
                &from,
                to,
                &args.iter().map(String::as_str).collect::<Vec<_>>(),
                true,
            ));
            relabel.push(time_to_enforce(
                &lab,
                &from,
                to,
                &["label", "pod", "a", "-n", "y", "pod=q", "--overwrite"],
                false,
            ));
            back.push(time_to_enforce(
                &lab,
                &from,
                to,
                &["label", "pod", "a", "-n", "y", "pod=a", "--overwrite"],
                true,
            ));
        }
        for (what, samples) in [
            ("policy tightened", &mut tighten),
            ("policy loosened", &mut loosen),
            ("pod relabelled out", &mut relabel),
            ("pod relabelled back", &mut back),
        ] {
            println!(
                "time to enforce, {n} policies, {enforcer:?}, {what}: p50 {:.1} ms, p99 {:.1} ms ({} changes)",
                percentile(samples, 0.5).as_secs_f64() * 1e3,
                percentile(samples, 0.99).as_secs_f64() * 1e3,
                samples.len()
            );
        }

        // A storm of new connections: 5 s, one client, loopback lab addresses only.
        let (cpu0, _) = lab.enforcer_usage();
        let storm = Command::new("ip")
            .args([
                "netns",
                "exec",
                &from,
                EXE,
                "lab",
                "connect-bench",
                "--to",
                &to.to_string(),
                "--millis",
                "5000",
            ])
            .output()
            .unwrap();
        let (cpu1, hwm) = lab.enforcer_usage();
        println!(
            "storm, {n} policies, {enforcer:?}: {} ; enforcer CPU {:.2} s in 5 s, peak RSS {} MB",
            String::from_utf8_lossy(&storm.stdout).trim(),
            (cpu1 - cpu0).as_secs_f64(),
            hwm / 1024
        );

        // An established connection when the policy tightens.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let netns = from.clone();
        let held = std::thread::spawn(move || {
            in_netns(&netns, move || {
                use std::io::Read;
                let mut s =
                    std::net::TcpStream::connect_timeout(&to, Duration::from_secs(1)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
                let mut byte = [0u8; 1];
                let mut exchange = || s.write_all(b"x").is_ok() && s.read_exact(&mut byte).is_ok();
                assert!(exchange(), "the held connection works before");
                rx.recv().unwrap();
                std::thread::sleep(Duration::from_secs(2));
                exchange()
            })
        });
        let file = lab.work.path().join("allow.yaml");
        std::fs::write(&file, ALLOW.replace("PORT", "81")).unwrap();
        lab.cp()
            .kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);
        tx.send(()).unwrap();
        let still = held.join().unwrap();
        println!(
            "established connection, {enforcer:?}: {} 2 s after the policy stopped allowing it",
            if still { "still passes" } else { "cut" }
        );
        std::fs::write(&file, ALLOW.replace("PORT", "80")).unwrap();
        lab.cp()
            .kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);
        lab.stop_enforcer();
    }
}
