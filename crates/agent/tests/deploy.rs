//! The manifests in `deploy/`: every file parses, the ClusterRole grants exactly what the
//! Kubernetes source reads, and the DaemonSet keeps the security and probe settings the
//! agent relies on.

use std::collections::BTreeSet;
use std::path::Path;

use palisade_follow::source::kube::RESOURCES;
use serde_json::{Value, json};

/// Every object of every `deploy/*.yaml`, in file order.
fn objects() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("deploy/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        let docs = palisade_model::yaml::parse_documents(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(!docs.is_empty(), "{}: no objects", file.display());
        out.extend(docs.into_iter().map(|d| d.value));
    }
    out
}

fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}");
    found[0]
}

#[test]
fn cluster_role_grants_exactly_the_watched_kinds() {
    let objects = objects();
    let role = one(&objects, "ClusterRole");
    let mut granted = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        let verbs: BTreeSet<&str> = rule["verbs"]
            .as_array()
            .expect("verbs")
            .iter()
            .map(|v| v.as_str().expect("verb"))
            .collect();
        assert_eq!(verbs, BTreeSet::from(["get", "list", "watch"]), "{rule}");
        assert!(rule.get("resourceNames").is_none(), "{rule}");
        for group in rule["apiGroups"].as_array().expect("apiGroups") {
            for resource in rule["resources"].as_array().expect("resources") {
                let pair = (
                    group.as_str().expect("group").to_string(),
                    resource.as_str().expect("resource").to_string(),
                );
                assert!(granted.insert(pair.clone()), "{pair:?} granted twice");
            }
        }
    }
    let watched: BTreeSet<(String, String)> = RESOURCES
        .iter()
        .map(|k| (k.group.to_string(), k.plural.to_string()))
        .collect();
    assert_eq!(granted, watched);
}

#[test]
fn binding_and_daemonset_use_the_service_account() {
    let objects = objects();
    let sa = one(&objects, "ServiceAccount");
    let namespace = sa["metadata"]["namespace"].clone();
    let name = sa["metadata"]["name"].clone();
    assert_eq!(one(&objects, "Namespace")["metadata"]["name"], namespace);
    let binding = one(&objects, "ClusterRoleBinding");
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
               "name": one(&objects, "ClusterRole")["metadata"]["name"]})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": name, "namespace": namespace}])
    );
    let ds = one(&objects, "DaemonSet");
    assert_eq!(ds["metadata"]["namespace"], namespace);
    assert_eq!(ds["spec"]["template"]["spec"]["serviceAccountName"], name);
}

#[test]
fn daemonset_runs_the_agent_on_the_host_network_with_net_admin_only() {
    let objects = objects();
    let ds = one(&objects, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("arg"))
        .collect();
    assert_eq!(
        args[..5],
        ["agent", "--source", "kube", "--node", "$(NODE_NAME)"]
    );
    let node_name = c["env"]
        .as_array()
        .expect("env")
        .iter()
        .find(|e| e["name"] == "NODE_NAME")
        .expect("NODE_NAME");
    assert_eq!(
        node_name["valueFrom"],
        json!({"fieldRef": {"fieldPath": "spec.nodeName"}})
    );
    let sc = &c["securityContext"];
    assert_ne!(sc["privileged"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["add"], json!(["NET_ADMIN"]));
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert!(pod["securityContext"]["privileged"].is_null());
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(
            c[probe]["httpGet"],
            json!({"host": "127.0.0.1", "port": 19465, "path": path}),
            "{probe}"
        );
    }
    let listen = args
        .iter()
        .position(|a| *a == "--listen")
        .expect("--listen");
    assert_eq!(args[listen + 1], "127.0.0.1:19465", "the probes' address");
    // Metrics alone on the node's addresses, at the port the pod declares.
    let metrics = args
        .iter()
        .position(|a| *a == "--metrics-listen")
        .expect("--metrics-listen");
    assert_eq!(args[metrics + 1], "0.0.0.0:19464");
    assert_eq!(
        c["ports"],
        json!([{"name": "metrics", "containerPort": 19464, "protocol": "TCP"}])
    );
}
