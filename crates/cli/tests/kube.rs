//! `--kube` on the analysis commands: the same answers from a (loopback, recorded) API
//! server as from the same objects in files.

mod common;
#[path = "../../follow/tests/kube_server/mod.rs"]
mod kube_server;

use std::collections::BTreeMap;
use std::path::Path;

use common::{palisade, stderr, stdout};
use kube_server::{ApiServer, Reply};
use serde_json::{Value, json};

/// Where the API server serves each kind's collection.
fn collection(api_version: &str, kind: &str) -> String {
    let plural = match kind {
        "Namespace" => "namespaces",
        "Pod" => "pods",
        "Node" => "nodes",
        "Service" => "services",
        "EndpointSlice" => "endpointslices",
        "NetworkPolicy" => "networkpolicies",
        "AdminNetworkPolicy" => "adminnetworkpolicies",
        "BaselineAdminNetworkPolicy" => "baselineadminnetworkpolicies",
        "ClusterNetworkPolicy" => "clusternetworkpolicies",
        other => panic!("no collection for {other}"),
    };
    if api_version.contains('/') {
        format!("/apis/{api_version}/{plural}")
    } else {
        format!("/api/{api_version}/{plural}")
    }
}

/// Serves the objects of the YAML files under `dir` as the API server would: one list per
/// kind, items without `kind`/`apiVersion`, every object with server-set metadata.
fn serve_directory(server: &ApiServer, dir: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    let mut lists: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut stack = vec![root];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).expect("read dir") {
                stack.push(entry.expect("entry").path());
            }
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read file");
        for doc in palisade_model::yaml::parse_documents(&text).expect("yaml") {
            let mut object = doc.value;
            let api_version = object["apiVersion"]
                .as_str()
                .expect("apiVersion")
                .to_string();
            let kind = object["kind"].as_str().expect("kind").to_string();
            let map = object.as_object_mut().expect("object");
            map.remove("apiVersion");
            map.remove("kind");
            object["metadata"]["uid"] = json!("0c0ffee0");
            object["metadata"]["resourceVersion"] = json!("42");
            object["metadata"]["managedFields"] = json!([{"manager": "kubectl"}]);
            lists
                .entry(collection(&api_version, &kind))
                .or_default()
                .push(object);
        }
    }
    for (path, items) in lists {
        let list = json!({"kind": "List", "apiVersion": "v1",
                          "metadata": {"resourceVersion": "42"}, "items": items});
        server.lists(&path, [Reply::json(list.to_string())]);
    }
    server.lists(
        "/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies",
        [Reply::not_found()],
    );
}

fn kubeconfig(server: &ApiServer) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, server.kubeconfig()).expect("write kubeconfig");
    let path = path.to_str().expect("utf-8 path").to_string();
    (dir, path)
}

/// Each output line's JSON without its `origin` fields, and the origins' files.
fn without_origins(output: &str) -> (Vec<Value>, Vec<String>) {
    fn strip(v: &mut Value, files: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(origin) = map.remove("origin") {
                    files.push(origin["file"].as_str().unwrap_or_default().to_string());
                }
                map.values_mut().for_each(|v| strip(v, files));
            }
            Value::Array(items) => items.iter_mut().for_each(|v| strip(v, files)),
            _ => {}
        }
    }
    let mut files = Vec::new();
    let values = output
        .lines()
        .map(|line| {
            // CSV lines are compared as they are.
            let mut v = serde_json::from_str(line).unwrap_or_else(|_| Value::from(line));
            strip(&mut v, &mut files);
            v
        })
        .collect();
    (values, files)
}

#[test]
fn matrix_eval_and_explain_from_the_cluster_equal_the_files() {
    let server = ApiServer::start();
    serve_directory(&server, "examples/xyz");
    let (_dir, config) = kubeconfig(&server);
    let cases: [&[&str]; 5] = [
        &["matrix", "-o", "jsonl"],
        &["matrix", "--ports", "80,81", "-o", "csv"],
        &[
            "eval", "--from", "y/a", "--to", "x/a", "--port", "80", "-o", "json",
        ],
        &[
            "eval", "--from", "z/b", "--to", "x/b", "--port", "80", "-o", "json",
        ],
        &[
            "explain", "--from", "y/b", "--to", "x/a", "--port", "80", "-o", "json",
        ],
    ];
    for args in cases {
        let files = palisade(&[args, &["-f", "examples/xyz"]].concat());
        let kube = palisade(&[args, &["--kube", "--kubeconfig", &config]].concat());
        assert!(files.status.success(), "{args:?}: {}", stderr(&files));
        assert!(kube.status.success(), "{args:?}: {}", stderr(&kube));
        assert!(!stdout(&files).is_empty());
        // The verdicts are the same; only where each policy was read differs.
        let (from_kube, kube_origins) = without_origins(&stdout(&kube));
        let (from_files, file_origins) = without_origins(&stdout(&files));
        assert_eq!(from_kube, from_files, "{args:?}");
        assert_eq!(kube_origins.len(), file_origins.len(), "{args:?}");
        assert!(
            kube_origins.iter().all(|o| o.starts_with("kube:")),
            "{kube_origins:?}"
        );
        assert!(
            stderr(&kube).contains("does not serve ClusterNetworkPolicy"),
            "a missing CRD is a notice: {}",
            stderr(&kube)
        );
    }
    // `--kubeconfig` and `--context` imply `--kube`.
    let files = palisade(&["matrix", "-o", "jsonl", "-f", "examples/xyz"]);
    let with_context = palisade(&[
        "matrix",
        "-o",
        "jsonl",
        "--kubeconfig",
        &config,
        "--context",
        "loopback",
    ]);
    assert!(with_context.status.success(), "{}", stderr(&with_context));
    assert_eq!(stdout(&with_context), stdout(&files));
}

#[test]
fn kubeconfig_from_the_environment_and_its_contexts() {
    let server = ApiServer::start();
    serve_directory(&server, "examples/xyz");
    let (_dir, config) = kubeconfig(&server);
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_palisade"))
            .args(args)
            .env("KUBECONFIG", &config)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .output()
            .expect("run palisade")
    };
    let files = palisade(&["matrix", "-o", "jsonl", "-f", "examples/xyz"]);
    let current = run(&["matrix", "-o", "jsonl", "--kube"]);
    assert!(current.status.success(), "{}", stderr(&current));
    assert_eq!(stdout(&current), stdout(&files), "the current context");
    let named = run(&["matrix", "-o", "jsonl", "--context", "loopback"]);
    assert!(named.status.success(), "{}", stderr(&named));
    assert_eq!(stdout(&named), stdout(&files), "a named context");
    // The other context names a cluster the kubeconfig does not define.
    let other = run(&["matrix", "--context", "elsewhere"]);
    assert_eq!(other.status.code(), Some(1), "{}", stderr(&other));
    assert!(stderr(&other).contains("palisade: error: Kubernetes API: kubeconfig"));
}

#[test]
fn invalid_objects_are_reported_under_their_id() {
    let server = ApiServer::start();
    let pods = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "5"},
        "items": [{"metadata": {"name": "bad", "namespace": "x", "labels": {"bad key": "v"}},
                   "spec": {"containers": [{"name": "c"}]}}]});
    server.lists("/api/v1/pods", [Reply::json(pods.to_string())]);
    let (_dir, config) = kubeconfig(&server);
    let o = palisade(&["matrix", "--kube", "--kubeconfig", &config]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("kube:Pod/x/bad:1: error: Pod x/bad: metadata.labels"),
        "{err}"
    );
}

#[test]
fn unusable_clusters_exit_1() {
    // A server that answers nothing: the port of a listener that was closed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\n\
         contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n\
         users:\n- name: u\n  user: {{}}\n"
    );
    std::fs::write(&path, text).expect("write");
    let config = path.to_str().expect("utf-8");
    let o = palisade(&["matrix", "--kube", "--kubeconfig", config]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("palisade: error: Kubernetes API: cannot list Namespace"),
        "{}",
        stderr(&o)
    );

    let o = palisade(&[
        "matrix",
        "--kube",
        "--kubeconfig",
        config,
        "--context",
        "other",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("other"), "{}", stderr(&o));

    let missing = dir.path().join("absent");
    let o = palisade(&[
        "matrix",
        "--kube",
        "--kubeconfig",
        missing.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("absent"), "{}", stderr(&o));
}

#[test]
fn kube_and_files_are_exclusive_and_one_is_required() {
    for args in [
        &["matrix", "--kube", "-f", "examples/xyz"][..],
        &["matrix"][..],
        &["matrix", "-f", "examples/xyz", "--kubeconfig", "k"][..],
        &["matrix", "-f", "examples/xyz", "--context", "c"][..],
    ] {
        let o = palisade(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn lint_and_diff_read_the_cluster_too() {
    let server = ApiServer::start();
    serve_directory(&server, "examples/xyz");
    let (_dir, config) = kubeconfig(&server);
    let files = palisade(&["lint", "-o", "json", "-f", "examples/xyz"]);
    let kube = palisade(&["lint", "-o", "json", "--kube", "--kubeconfig", &config]);
    assert_eq!(files.status.code(), kube.status.code(), "{}", stderr(&kube));
    let codes = |o: &std::process::Output| {
        let v: Value = serde_json::from_str(&stdout(o)).unwrap_or(Value::Null);
        let mut c: Vec<String> = v
            .as_array()
            .or_else(|| v["findings"].as_array())
            .into_iter()
            .flatten()
            .map(|f| f["code"].to_string())
            .collect();
        c.sort();
        c
    };
    assert!(!codes(&files).is_empty(), "{}", stdout(&files));
    assert_eq!(codes(&kube), codes(&files), "{}", stdout(&kube));
    // The live cluster against the same manifests as files: nothing changes.
    let diff = palisade(&[
        "diff",
        "--kube",
        "--kubeconfig",
        &config,
        "--to",
        "examples/xyz",
    ]);
    assert_eq!(
        diff.status.code(),
        Some(0),
        "{}{}",
        stdout(&diff),
        stderr(&diff)
    );
}
