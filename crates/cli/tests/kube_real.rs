//! `--kube` against the real Kubernetes API server (etcd and kube-apiserver started by
//! `palisade-testenv`, objects applied with the real `kubectl`): `matrix`, `lint` and
//! `coverage` give the same answers through `--kube` as through the files `kubectl get -o
//! yaml` dumps of the same cluster. Without the built control plane the tests print why
//! they are skipped (and fail under `CI=true`).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{palisade, plane, stderr, stdout};
use palisade_testenv::ControlPlane;
use serde_json::Value;

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

/// A NodePort Service and its EndpointSlice (the control plane runs no controller that
/// would write one), read through `--kube`: coverage names the Service and its endpoint,
/// as it does from the dump.
#[test]
fn a_node_port_service_through_the_api_server_is_exposure() {
    let Some(cp) = plane("a_node_port_service_through_the_api_server_is_exposure") else {
        return;
    };
    cp.reset();
    let service = r#"
apiVersion: v1
kind: Service
metadata: {name: front, namespace: x}
spec:
  type: NodePort
  selector: {pod: a}
  ports: [{name: http, port: 8000, targetPort: 80, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: front-1
  namespace: x
  labels: {kubernetes.io/service-name: front}
addressType: IPv4
ports: [{name: http, port: 80, protocol: TCP}]
endpoints: [{addresses: [10.0.0.10], targetRef: {kind: Pod, namespace: x, name: a}}]
"#;
    let cluster = std::fs::read_to_string(repo("examples/xyz/cluster.yaml")).expect("read");
    cp.apply(&format!("{cluster}\n---\n{service}"));
    assert_kube_equals_dump(&cp, 9);
    let kubeconfig = cp.kubeconfig.display().to_string();
    let o = palisade(&["coverage", "--kubeconfig", &kubeconfig]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for line in [
        "  svc/x/front (NodePort, kube:Service/x/front:1): externalTrafficPolicy Cluster: through another node the connection is masqueraded and decided for that node's address; through the endpoint's own node it is decided for the client's address\n",
        "    TCP 8000 (http) via node port 30080\n",
        // One node: the endpoint's own, so only outside addresses reach it.
        "      x/a:80: admits every source it may see (2 of 2: other nodes' addresses, outside addresses through its own node)\n",
    ] {
        assert!(out.contains(line), "{line}{out}");
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
        "services [] [] [get list watch]",
        "endpointslices.discovery.k8s.io [] [] [get list watch]",
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
