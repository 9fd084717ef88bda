//! `--kube` against the real Kubernetes API server (etcd and kube-apiserver started by
//! `palisade-testenv`, objects applied with the real `kubectl`): `matrix`, `lint` and
//! `coverage` give the same answers through `--kube` as through the files `kubectl get -o
//! yaml` dumps of the same cluster. Without the built control plane the tests print why
//! they are skipped (and fail under `CI=true`).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, OnceLock};

use common::{palisade, stderr, stdout};
use palisade_testenv::ControlPlane;
use serde_json::Value;

/// One control plane for this test binary; the tests take turns (each resets it).
fn plane(test: &str) -> Option<MutexGuard<'static, ControlPlane>> {
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

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
        .display()
        .to_string()
}

/// Every `*.yaml` under `dir`, concatenated as one multi-document stream.
fn manifests(dir: &Path) -> String {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).expect("read dir") {
                stack.push(entry.expect("entry").path());
            }
        } else if path.extension().is_some_and(|e| e == "yaml")
            // Not gen's hidden .nca/ copies for another tool.
            && !path
                .strip_prefix(dir)
                .expect("under dir")
                .components()
                .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
        {
            files.push(path);
        }
    }
    files.sort();
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("read manifest"))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Drops the fields that say where an object was read (`origin`, a finding's `file` and
/// `line`), returning them separately: through `--kube` they name `kube:Kind/ns/name`,
/// through the dump a line of the dump file.
fn split_origins(v: &mut Value, origins: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for key in ["origin", "file", "line"] {
                if let Some(o) = map.remove(key) {
                    origins.push(o.to_string());
                }
            }
            map.values_mut().for_each(|v| split_origins(v, origins));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| split_origins(v, origins)),
        _ => {}
    }
}

/// Applies nothing itself: compares the three reports through `--kube` with the same
/// reports from a `kubectl get -o yaml` dump of the cluster, and returns the matrix.
fn assert_kube_equals_dump(cp: &ControlPlane, expect_pods: usize) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let dump = dir.path().join("cluster.yaml");
    std::fs::write(&dump, cp.dump_yaml()).expect("write the dump");
    let dump = dump.display().to_string();
    let kubeconfig = cp.kubeconfig.display().to_string();

    let run = |args: &[&str]| {
        let o = palisade(args);
        // lint exits 1 when it finds errors; anything else is a failure to run.
        assert!(
            o.status.code().is_some_and(|c| c <= 1),
            "palisade {args:?}: {}",
            stderr(&o)
        );
        assert!(
            !stderr(&o).contains("error:"),
            "palisade {args:?}: {}",
            stderr(&o)
        );
        (o.status.code(), stdout(&o))
    };

    // The matrix says nothing about origins: byte-identical.
    let kube_matrix = run(&["matrix", "--kubeconfig", &kubeconfig, "-o", "jsonl"]);
    let file_matrix = run(&["matrix", "-f", &dump, "-o", "jsonl"]);
    assert_eq!(kube_matrix.0, Some(0));
    assert!(
        kube_matrix.1 == file_matrix.1,
        "matrix --kube and -f differ ({} and {} lines)",
        kube_matrix.1.lines().count(),
        file_matrix.1.lines().count()
    );
    let pods: std::collections::BTreeSet<String> = kube_matrix
        .1
        .lines()
        .map(|l| {
            // `{"from":"ns/pod",…`: no need to parse millions of lines.
            let from = l.strip_prefix(r#"{"from":""#).expect("a line from a pod");
            from[..from.find('"').expect("the end of from")].to_string()
        })
        .collect();
    assert_eq!(pods.len(), expect_pods, "pods in the matrix");

    for report in ["lint", "coverage"] {
        let kube = run(&[report, "--kubeconfig", &kubeconfig, "-o", "json"]);
        let file = run(&[report, "-f", &dump, "-o", "json"]);
        assert_eq!(kube.0, file.0, "{report}: exit codes");
        let (mut k, mut f): (Value, Value) = (
            serde_json::from_str(&kube.1).expect("JSON"),
            serde_json::from_str(&file.1).expect("JSON"),
        );
        let (mut k_origins, mut f_origins) = (Vec::new(), Vec::new());
        split_origins(&mut k, &mut k_origins);
        split_origins(&mut f, &mut f_origins);
        // lint lists its findings in the order of where they were read (file and line, or
        // kube:Kind/namespace/name): the same findings, in another order.
        for v in [&mut k, &mut f] {
            if let Some(Value::Array(findings)) = v.get_mut("findings") {
                findings.sort_by_key(|f| f.to_string());
            }
        }
        if k != f {
            let (k, f) = (
                serde_json::to_string_pretty(&k).expect("JSON"),
                serde_json::to_string_pretty(&f).expect("JSON"),
            );
            let at = k
                .lines()
                .zip(f.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            let around = |t: &str| {
                t.lines()
                    .skip(at.saturating_sub(8))
                    .take(16)
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            panic!(
                "{report} --kube and -f differ at line {at} (origins removed):\n{}\n--- -f:\n{}",
                around(&k),
                around(&f)
            );
        }
        assert_eq!(k_origins.len(), f_origins.len(), "{report}: origins");
        assert!(
            k_origins
                .iter()
                .filter(|o| o.starts_with('"'))
                .all(|o| o.starts_with("\"kube:") || o.contains("\"file\":\"kube:")),
            "{report}: --kube names its objects kube:…: {k_origins:?}"
        );
    }
    kube_matrix.1
}

/// The xyz example, and the lab's three-node fixture with the example's policies, as
/// applied by `kubectl apply`: through `--kube` they also give the matrix of their own
/// files (the API server changes nothing Palisade reads).
#[test]
fn examples_through_the_api_server_equal_their_dump_and_files() {
    let Some(cp) = plane("examples_through_the_api_server_equal_their_dump_and_files") else {
        return;
    };
    let cases: [(&[&str], usize); 2] = [
        (&["examples/xyz"], 9),
        (
            &[
                "crates/lab/tests/fixtures/clusters/xyz-three-nodes.yaml",
                "examples/xyz/policies",
            ],
            10,
        ),
    ];
    for (paths, pods) in cases {
        cp.reset();
        let text = paths
            .iter()
            .map(|p| {
                let p = Path::new(&repo(p)).to_path_buf();
                if p.is_dir() {
                    manifests(&p)
                } else {
                    std::fs::read_to_string(&p).expect("read manifest")
                }
            })
            .collect::<Vec<_>>()
            .join("\n---\n");
        cp.apply(&text);
        let matrix = assert_kube_equals_dump(&cp, pods);
        let files = palisade(&[&["matrix"], &["-f"][..], paths, &["-o", "jsonl"]].concat());
        assert!(files.status.success(), "{}", stderr(&files));
        assert!(
            stdout(&files) == matrix,
            "{paths:?}: the matrix from the API server differs from the files'"
        );
    }
}

/// A generated cluster of 1,000 pods and 200 policies of every kind, applied with
/// `kubectl apply --server-side`.
#[test]
fn a_generated_1000_pod_cluster_through_the_api_server_equals_its_dump() {
    let Some(cp) = plane("a_generated_1000_pod_cluster_through_the_api_server_equals_its_dump")
    else {
        return;
    };
    cp.reset();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().display().to_string();
    let o = palisade(&[
        "gen",
        "--pods",
        "1000",
        "--policies",
        "200",
        "--mix",
        "all",
        "-o",
        &out,
    ]);
    assert!(o.status.success(), "gen: {}", stderr(&o));
    let text = manifests(dir.path());
    let begin = std::time::Instant::now();
    cp.apply_with(&["--server-side"], &text);
    eprintln!(
        "applied 1,000 pods and 200 policies in {:.1} s",
        begin.elapsed().as_secs_f64()
    );
    let matrix = assert_kube_equals_dump(&cp, 1000);
    let files = palisade(&["matrix", "-f", &out, "-o", "jsonl"]);
    assert!(files.status.success(), "{}", stderr(&files));
    assert!(
        stdout(&files) == matrix,
        "the generated cluster's matrix from the API server differs from its files'"
    );
}

/// The rows of `kubectl auth can-i --list` for a ServiceAccount, as (resource, verbs).
fn can_i_list(cp: &ControlPlane, namespace: &str, account: &str) -> BTreeSet<String> {
    let out = cp.kubectl_ok(&[
        "auth",
        "can-i",
        "--list",
        &format!("--as=system:serviceaccount:{namespace}:{account}"),
        "-n",
        namespace,
    ]);
    out.lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// deploy/ as shipped, applied to the real API server: its ServiceAccount may do exactly
/// what a ServiceAccount without any binding may do, plus get, list and watch on the kinds
/// the agent reads, and nothing else.
#[test]
fn deploy_grants_the_agent_exactly_what_it_reads() {
    let Some(cp) = plane("deploy_grants_the_agent_exactly_what_it_reads") else {
        return;
    };
    cp.reset();
    let deploy = [
        "deploy/00-namespace.yaml",
        "deploy/01-serviceaccount.yaml",
        "deploy/02-rbac.yaml",
        "deploy/03-daemonset.yaml",
    ]
    .map(|f| std::fs::read_to_string(repo(f)).expect("read deploy/"))
    .join("\n---\n");
    cp.apply(&deploy);
    cp.kubectl_ok(&[
        "create",
        "serviceaccount",
        "nobody",
        "-n",
        "palisade-system",
    ]);
    let baseline = can_i_list(&cp, "palisade-system", "nobody");
    let agent = can_i_list(&cp, "palisade-system", "palisade-agent");
    let extra: BTreeSet<&String> = agent.difference(&baseline).collect();
    let expected: BTreeSet<String> = [
        "namespaces [] [] [get list watch]",
        "nodes [] [] [get list watch]",
        "pods [] [] [get list watch]",
        "networkpolicies.networking.k8s.io [] [] [get list watch]",
        "adminnetworkpolicies.policy.networking.k8s.io [] [] [get list watch]",
        "baselineadminnetworkpolicies.policy.networking.k8s.io [] [] [get list watch]",
        "clusternetworkpolicies.policy.networking.k8s.io [] [] [get list watch]",
    ]
    .map(String::from)
    .into();
    assert_eq!(
        extra,
        expected.iter().collect(),
        "what deploy/ grants beyond an unbound ServiceAccount"
    );
    assert!(
        baseline.is_subset(&agent),
        "the agent may do less than an unbound ServiceAccount"
    );
    // A token of that account reads the cluster: `palisade matrix --kube` with it works.
    cp.apply(&std::fs::read_to_string(repo("examples/xyz/cluster.yaml")).expect("read"));
    let token = cp.kubectl_ok(&["create", "token", "palisade-agent", "-n", "palisade-system"]);
    let config = cp.token_kubeconfig("palisade-agent", token.trim());
    let o = palisade(&[
        "matrix",
        "--kubeconfig",
        config.to_str().expect("utf-8 path"),
        "-o",
        "jsonl",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o)
            == stdout(&palisade(&[
                "matrix",
                "-f",
                "examples/xyz/cluster.yaml",
                "-o",
                "jsonl"
            ]))
    );
    // The unbound account may not.
    let token = cp.kubectl_ok(&["create", "token", "nobody", "-n", "palisade-system"]);
    let config = cp.token_kubeconfig("nobody", token.trim());
    let o = palisade(&[
        "matrix",
        "--kubeconfig",
        config.to_str().expect("utf-8 path"),
    ]);
    assert!(!o.status.success(), "an unbound account read the cluster");
    assert!(
        stderr(&o).contains("403") || stderr(&o).contains("forbidden"),
        "{}",
        stderr(&o)
    );
}

fn np(spec: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: p\n  namespace: x\nspec:\n{spec}"
    )
}

fn anp(spec: &str) -> String {
    format!(
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata:\n  name: a\nspec:\n{spec}"
    )
}

fn cnp(spec: &str) -> String {
    format!(
        "apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata:\n  name: c\nspec:\n{spec}"
    )
}

/// Whether Palisade accepts `yaml` (lint reports no PAL000 error for it).
fn palisade_accepts(yaml: &str) -> bool {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("object.yaml");
    std::fs::write(&file, yaml).expect("write");
    let o = palisade(&["lint", "-f", file.to_str().expect("utf-8"), "-o", "json"]);
    let report: Value = match serde_json::from_slice(&o.stdout) {
        Ok(v) => v,
        // No report at all: the input could not be read.
        Err(_) => return false,
    };
    !report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .any(|f| f["code"] == "PAL000")
}

/// Every object of the model's validation table (the invalid ones), and valid objects at
/// the same boundaries, sent to the real API server with a server-side dry run: Palisade
/// accepts exactly what the API server (NetworkPolicy validation, the CRDs' schema and CEL
/// rules) accepts, except for the disagreement written down in docs/semantics.md.
#[test]
fn palisade_and_the_api_server_accept_the_same_objects() {
    let Some(cp) = plane("palisade_and_the_api_server_accept_the_same_objects") else {
        return;
    };
    cp.reset();
    cp.kubectl_ok(&["create", "namespace", "x"]);
    let subject = "  priority: 1\n  subject:\n    namespaces: {}\n";
    // The model's validation table (crates/model/tests/validation.rs): each should be
    // refused by both.
    let invalid: Vec<(&str, String, &str)> = vec![
        ("label key", np("  podSelector:\n    matchLabels:\n      bad key: v\n"), "9: spec.podSelector.matchLabels.bad key: invalid label key"),
        ("label value", np("  podSelector:\n    matchLabels:\n      k: -v-\n"), "9: spec.podSelector.matchLabels.k: invalid label value"),
        ("In needs values", np("  podSelector:\n    matchExpressions:\n    - key: k\n      operator: In\n"), "spec.podSelector.matchExpressions[0].values: Required value"),
        ("Exists has no values", np("  podSelector:\n    matchExpressions:\n    - key: k\n      operator: Exists\n      values: [a]\n"), "11: spec.podSelector.matchExpressions[0].values: Forbidden"),
        ("bad operator", np("  podSelector:\n    matchExpressions:\n    - key: k\n      operator: Equals\n      values: [a]\n"), "10: spec.podSelector.matchExpressions[0].operator: Invalid value: \"Equals\": not a valid selector operator"),
        ("port 0", np("  ingress:\n  - ports:\n    - port: 0\n"), "9: spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535"),
        ("port 65536", np("  egress:\n  - ports:\n    - port: 65536\n"), "spec.egress[0].ports[0].port: Invalid value: 65536"),
        ("endPort without port", np("  ingress:\n  - ports:\n    - endPort: 90\n"), "spec.ingress[0].ports[0].port: Required value: must be specified when `endPort` is specified"),
        ("endPort with named port", np("  ingress:\n  - ports:\n    - port: http\n      endPort: 90\n"), "10: spec.ingress[0].ports[0].endPort: Forbidden: may not be specified when `port` is non-numeric"),
        ("endPort < port", np("  ingress:\n  - ports:\n    - port: 90\n      endPort: 80\n"), "10: spec.ingress[0].ports[0].endPort: Invalid value: 80: must be greater than or equal to `port`"),
        ("protocol", np("  ingress:\n  - ports:\n    - protocol: ICMP\n"), "9: spec.ingress[0].ports[0].protocol: Unsupported value: \"ICMP\""),
        ("lowercase protocol", np("  ingress:\n  - ports:\n    - protocol: tcp\n"), "spec.ingress[0].ports[0].protocol: Unsupported value: \"tcp\""),
        ("policyTypes", np("  policyTypes: [Ingress, Sideways]\n"), "7: spec.policyTypes[1]: Unsupported value: \"Sideways\""),
        ("bad port name", np("  ingress:\n  - ports:\n    - port: Not_A_Name\n"), "spec.ingress[0].ports[0].port: invalid port name"),
        ("cidr syntax", np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/33\n"), "10: spec.ingress[0].from[0].ipBlock.cidr: Invalid value: \"10.0.0.0/33\": must be a valid CIDR"),
        ("except outside", np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/16\n        except: [10.1.0.0/24]\n"), "11: spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: \"10.1.0.0/24\": must be a strict subset of `cidr`"),
        ("except equal", np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/16\n        except: [10.0.0.0/16]\n"), "ipBlock.except[0]: Invalid value: \"10.0.0.0/16\": must be a strict subset"),
        ("except other family", np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/16\n        except: [\"fd00::/64\"]\n"), "ipBlock.except[0]: Invalid value: \"fd00::/64\": must be a strict subset"),
        ("ipBlock and selector", np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/16\n      podSelector: {}\n"), "spec.ingress[0].from[0]: Forbidden: may not specify both ipBlock and another peer"),
        ("empty peer", np("  ingress:\n  - from:\n    - {}\n"), "spec.ingress[0].from[0]: Required value: must specify a peer"),
        ("port as float", np("  ingress:\n  - ports:\n    - port: 1.5\n"), "spec.ingress[0].ports[0].port"),
        ("anp priority", anp("  priority: 1001\n  subject:\n    namespaces: {}\n"), "6: spec.priority: Invalid value: 1001: must be between 0 and 1000"),
        ("anp subject union", anp("  priority: 1\n  subject:\n    namespaces: {}\n    pods:\n      namespaceSelector: {}\n      podSelector: {}\n"), "spec.subject: Invalid value: exactly one of namespaces, pods must be set"),
        ("anp no peers", anp(&format!("{subject}  ingress:\n  - action: Deny\n    from: []\n")), "spec.ingress[0].from: Invalid value: 0: must have at least 1 items"),
        ("anp peer union", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - namespaces: {{}}\n      networks: [10.0.0.0/8]\n")), "spec.egress[0].to[0]: Invalid value: must have at most 1 properties"),
        ("anp empty peer", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - {{}}\n")), "spec.egress[0].to[0]: Invalid value: must have at least 1 properties"),
        ("anp rule name", anp(&format!("{subject}  egress:\n  - action: Deny\n    name: {}\n    to:\n    - namespaces: {{}}\n", "n".repeat(101))), "spec.egress[0].name: Too long"),
        ("anp action", anp(&format!("{subject}  egress:\n  - action: Accept\n    to:\n    - namespaces: {{}}\n")), "spec.egress[0].action: Unsupported value: \"Accept\""),
        ("anp port union", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - namespaces: {{}}\n    ports:\n    - namedPort: http\n      portNumber: {{port: 80}}\n")), "spec.egress[0].ports[0]: Invalid value: exactly one of portNumber, namedPort, portRange"),
        ("anp range order", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - namespaces: {{}}\n    ports:\n    - portRange: {{start: 90, end: 80}}\n")), "spec.egress[0].ports[0].portRange: Invalid value: Start port must be less than End port"),
        ("anp ingress networks", anp(&format!("{subject}  ingress:\n  - action: Deny\n    from:\n    - networks: [10.0.0.0/8]\n")), "spec.ingress[0].from[0].networks: Forbidden: only allowed in egress peers"),
        ("anp named port to networks", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - networks: [10.0.0.0/8]\n    ports:\n    - namedPort: http\n")), "networks/nodes peer cannot be set with namedPorts"),
        ("anp bad network", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - networks: [10.0.0.300/8]\n")), "spec.egress[0].to[0].networks[0]: Invalid value: \"10.0.0.300/8\": Invalid CIDR format provided"),
        ("anp too many rules", anp(&format!("{subject}  ingress:\n{}", "  - action: Deny\n    from: [{namespaces: {}}]\n".repeat(101))), "spec.ingress: Too many: 101: must have at most 100 items"),
        ("banp name", "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata:\n  name: other\nspec:\n  subject:\n    namespaces: {}\n".to_string(), "4: metadata.name: Invalid value: only one baseline admin network policy with metadata.name=\"default\""),
        ("banp pass", "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata:\n  name: default\nspec:\n  subject:\n    namespaces: {}\n  ingress:\n  - action: Pass\n    from: [{namespaces: {}}]\n".to_string(), "9: spec.ingress[0].action: Unsupported value: \"Pass\""),
        ("cnp tier", cnp("  tier: Middle\n  priority: 1\n  subject:\n    namespaces: {}\n"), "6: spec.tier: Unsupported value: \"Middle\""),
        ("cnp rules", cnp(&format!("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {{}}\n  ingress:\n{}", "  - action: Deny\n    from: [{namespaces: {}}]\n".repeat(26))), "spec.ingress: Too many: 26: must have at most 25 items"),
        ("cnp peers", cnp(&format!("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {{}}\n  ingress:\n  - action: Deny\n    from:\n{}", "    - namespaces: {}\n".repeat(26))), "spec.ingress[0].from: Too many: 26: must have at most 25 items"),
        ("cnp range", cnp("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {}\n  ingress:\n  - action: Deny\n    from: [{namespaces: {}}]\n    protocols:\n    - tcp:\n        destinationPort:\n          range: {start: 80, end: 80}\n"), "spec.ingress[0].protocols[0].tcp.destinationPort.range: Invalid value: Start port must be less than End port"),
        ("cnp action", cnp("  tier: Baseline\n  priority: 1\n  subject:\n    namespaces: {}\n  egress:\n  - action: Allow\n    to: [{namespaces: {}}]\n"), "spec.egress[0].action: Unsupported value: \"Allow\""),
        ("cnp port number", cnp("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {}\n  egress:\n  - action: Deny\n    to: [{namespaces: {}}]\n    protocols:\n    - udp:\n        destinationPort: {number: 0}\n"), "spec.egress[0].protocols[0].udp.destinationPort.number: Invalid value: 0"),
        ("pod container port", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    ports:\n    - containerPort: 70000\n".to_string(), "9: spec.containers[0].ports[0].containerPort: Invalid value: 70000"),
        ("pod ip", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nstatus:\n  podIP: 10.0.0.256\n".to_string(), "6: status.podIP: Invalid value: \"10.0.0.256\""),
        ("namespace name", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: Bad_Name\n".to_string(), "4: metadata.name: invalid value \"Bad_Name\""),
        ("missing name", "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  namespace: x\nspec: {}\n".to_string(), "metadata.name: Required value"),
        ("unsupported version", "apiVersion: networking.k8s.io/v2\nkind: NetworkPolicy\nmetadata:\n  name: p\n".to_string(), "1: apiVersion: Unsupported value: \"networking.k8s.io/v2\""),
        ("no kind", "apiVersion: v1\nmetadata:\n  name: p\n".to_string(), "kind: Required value"),
        ("misspelt selector field", np("  podSelector:\n    matchlabels: {app: db}\n"), "8: spec.podSelector.matchlabels: unknown field \"spec.podSelector.matchlabels\""),
        ("misspelt rule field", np("  ingress:\n  - form:\n    - podSelector: {}\n"), "spec.ingress[0].form: unknown field"),
        ("anp misspelt spec field", anp("  priority: 1\n  subjet:\n    namespaces: {}\n"), "7: spec.subjet: unknown field"),
        ("anp misspelt selector", anp("  priority: 1\n  subject:\n    namespaces:\n      matchlabels: {a: b}\n"), "spec.subject.namespaces.matchlabels: unknown field"),
        ("cnp misspelt port", cnp("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {}\n  egress:\n  - action: Deny\n    to: [{namespaces: {}}]\n    protocols:\n    - tcp:\n        destinationPort: {numbr: 80}\n"), "destinationPort.numbr: unknown field"),
        ("yaml syntax", "kind: Pod\nmetadata: [unclosed\n".to_string(), "YAML syntax error"),

    ];
    let valid: Vec<(&str, String)> = vec![
        ("port 1 and 65535", np("  ingress:\n  - ports:\n    - port: 1\n    - port: 65535\n")),
        ("endPort equal to port", np("  ingress:\n  - ports:\n    - port: 80\n      endPort: 80\n")),
        ("named port", np("  ingress:\n  - ports:\n    - port: http\n")),
        ("except strict subset", np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/16\n        except: [10.0.1.0/24]\n")),
        ("selector In", np("  podSelector:\n    matchExpressions:\n    - key: k\n      operator: In\n      values: [a]\n")),
        ("SCTP", np("  ingress:\n  - ports:\n    - protocol: SCTP\n      port: 9\n")),
        ("empty spec", np("  podSelector: {}\n")),
        ("anp priority 1000", anp("  priority: 1000\n  subject:\n    namespaces: {}\n")),
        ("anp 100 rules", anp(&format!("{subject}  ingress:\n{}", "  - action: Deny\n    from: [{namespaces: {}}]\n".repeat(100)))),
        ("anp networks in egress", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - networks: [10.0.0.0/8]\n"))),
        ("anp port range", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - namespaces: {{}}\n    ports:\n    - portRange: {{start: 80, end: 90}}\n"))),
        ("anp pass", anp(&format!("{subject}  ingress:\n  - action: Pass\n    from: [{{namespaces: {{}}}}]\n"))),
        ("banp default", "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata:\n  name: default\nspec:\n  subject:\n    namespaces: {}\n  ingress:\n  - action: Deny\n    from: [{namespaces: {}}]\n".to_string()),
        ("cnp 25 rules", cnp(&format!("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {{}}\n  ingress:\n{}", "  - action: Deny\n    from: [{namespaces: {}}]\n".repeat(25)))),
        ("cnp range", cnp("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {}\n  ingress:\n  - action: Deny\n    from: [{namespaces: {}}]\n    protocols:\n    - tcp:\n        destinationPort:\n          range: {start: 80, end: 81}\n")),
        ("cnp baseline accept", cnp("  tier: Baseline\n  priority: 1\n  subject:\n    namespaces: {}\n  egress:\n  - action: Accept\n    to: [{namespaces: {}}]\n")),
        ("cnp port 65535", cnp("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {}\n  egress:\n  - action: Deny\n    to: [{namespaces: {}}]\n    protocols:\n    - udp:\n        destinationPort: {number: 65535}\n")),
    ];
    let mut disagreements = Vec::new();
    let cases = invalid
        .iter()
        .map(|(what, yaml, _)| (*what, yaml, false))
        .chain(valid.iter().map(|(what, yaml)| (*what, yaml, true)));
    let mut count = 0;
    for (what, yaml, should_be_valid) in cases {
        count += 1;
        let api = cp
            .kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], yaml)
            .status
            .success();
        let palisade = palisade_accepts(yaml);
        if api != palisade {
            disagreements.push(format!(
                "{what}: API server {}, Palisade {}",
                if api { "accepts" } else { "refuses" },
                if palisade { "accepts" } else { "refuses" }
            ));
        } else if api != should_be_valid {
            disagreements.push(format!(
                "{what}: both {} it",
                if api { "accept" } else { "refuse" }
            ));
        }
    }
    eprintln!("{count} objects compared; disagreements: {disagreements:#?}");
    // Each written down in docs/semantics.md (Validation), with the reason.
    assert_eq!(
        disagreements,
        ["anp range order: API server accepts, Palisade refuses"]
    );
}
