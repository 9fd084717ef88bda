//! diff, coverage and lint on Services: reach through a Service port, exposure through node
//! ports and load balancers, and the mistakes a Service and a policy make together.

mod common;

use common::{palisade, stderr, stdout};

/// Namespace x: client `a`, two `app: b` pods declaring `http` (8080) and `alt` (9090),
/// and a policy admitting `a` to b on 8080.
const CLUSTER: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: x}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x, labels: {app: a}}
spec: {nodeName: n1, containers: [{name: c, image: i}]}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: b1, namespace: x, labels: {app: b}}
spec: {nodeName: n1, containers: [{name: c, image: i, ports: [{name: http, containerPort: 8080}, {name: alt, containerPort: 9090}]}]}
status: {podIP: 10.0.0.2}
---
apiVersion: v1
kind: Pod
metadata: {name: b2, namespace: x, labels: {app: b}}
spec: {nodeName: n1, containers: [{name: c, image: i, ports: [{name: http, containerPort: 8080}, {name: alt, containerPort: 9090}]}]}
status: {podIP: 10.0.0.3}
"#;

const POLICY_8080: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b-http, namespace: x}
spec:
  podSelector: {matchLabels: {app: b}}
  ingress: [{from: [{podSelector: {matchLabels: {app: a}}}], ports: [{port: 8080}]}]
"#;

/// The Service `x/web` port 80 to `target`, selecting `selector`.
fn service(target: &str, selector: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: x}}
spec:
  clusterIP: 10.96.0.10
  selector: {{app: {selector}}}
  ports: [{{name: http, port: 80, targetPort: {target}}}]
"#
    )
}

/// Writes each state's documents to its own directory.
fn states(old: &[&str], new: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, docs) in [("old", old), ("new", new)] {
        std::fs::create_dir(dir.path().join(name)).expect("mkdir");
        std::fs::write(dir.path().join(name).join("c.yaml"), docs.join("\n---\n")).expect("write");
    }
    dir
}

fn diff(dir: &tempfile::TempDir, format: &str) -> std::process::Output {
    let path = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    palisade(&[
        "diff",
        "-f",
        &path("old"),
        "--to",
        &path("new"),
        "-o",
        format,
    ])
}

#[test]
fn diff_reports_reach_lost_when_only_a_target_port_changes() {
    let svc_old = service("http", "b");
    let svc_new = service("alt", "b");
    let dir = states(
        &[CLUSTER, POLICY_8080, &svc_old],
        &[CLUSTER, POLICY_8080, &svc_new],
    );
    let o = diff(&dir, "text");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "service reach lost: x/a -> svc/x/web:http TCP 80\n    \
         before: all (2); after: none (0 of 2)\n\
         0 pair(s) gained and 0 lost a connection over 3 pod(s), 0 node(s), 1 outside address \
         range(s); every port of TCP, UDP and SCTP; IPv4; 1 Service reach change(s)\n"
    );
    let o = diff(&dir, "json");
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(doc["same"], false);
    assert_eq!(
        doc["services"]["changes"],
        serde_json::json!([{
            "change": "lost", "service": "x/web", "port": "http", "number": 80,
            "protocol": "TCP", "family": "IPv4", "from": ["x/a"],
            "before": {"reach": "all", "allowed": ["x/b1:8080", "x/b2:8080"], "total": 2},
            "after": {"reach": "none", "allowed": [], "total": 2},
        }])
    );
}

#[test]
fn diff_reports_reach_lost_when_only_a_selector_changes() {
    let svc_old = service("http", "b");
    let svc_new = service("http", "a");
    let dir = states(
        &[CLUSTER, POLICY_8080, &svc_old],
        &[CLUSTER, POLICY_8080, &svc_new],
    );
    let o = diff(&dir, "text");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with(
            "service reach lost: x/a -> svc/x/web:http TCP 80\n    \
             before: all (2); after: none (0 of 0)\n"
        ),
        "{}",
        stdout(&o)
    );
}

#[test]
fn diff_reports_service_reach_through_a_policy_change() {
    // Only the policy differs: the pod diff compares only pairs at pods it selects, and
    // the Service's endpoints are such pods.
    let svc = service("http", "b");
    let policy_9090 = POLICY_8080.replace("port: 8080", "port: 9090");
    let dir = states(
        &[CLUSTER, POLICY_8080, &svc],
        &[CLUSTER, &policy_9090, &svc],
    );
    let o = diff(&dir, "jsonl");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.lines().any(|l| l
            == r#"{"after":{"allowed":[],"reach":"none","total":2},"before":{"allowed":["x/b1:8080","x/b2:8080"],"reach":"all","total":2},"change":"lost","family":"IPv4","from":"x/a","port":80,"protocol":"TCP","to":"svc/x/web:http"}"#),
        "{out}"
    );
}

#[test]
fn diff_of_equal_states_with_services_is_no_change() {
    let svc = service("http", "b");
    let dir = states(&[CLUSTER, POLICY_8080, &svc], &[CLUSTER, POLICY_8080, &svc]);
    let o = diff(&dir, "text");
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(
        stdout(&o),
        "no change over 3 pod(s), 0 node(s), 1 outside address range(s); every port of TCP, \
         UDP and SCTP; IPv4\n"
    );
}

#[test]
fn diff_reports_services_added_and_their_reach() {
    let svc = service("http", "b");
    let dir = states(&[CLUSTER, POLICY_8080], &[CLUSTER, POLICY_8080, &svc]);
    let o = diff(&dir, "text");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "service reach gained: x/a -> svc/x/web:http TCP 80\n    \
         before: absent; after: all (2)\n\
         services added: x/web\n\
         0 pair(s) gained and 0 lost a connection over 3 pod(s), 0 node(s), 1 outside address \
         range(s); every port of TCP, UDP and SCTP; IPv4; 1 Service reach change(s)\n"
    );
}
