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
fn diff_reports_endpoints_moved_when_reach_stays_all() {
    // a reaches b1 and b2 on 8080 before, and on 9090 after: every endpoint both times,
    // but not the same ones.
    let both = POLICY_8080.replace("{port: 8080}", "{port: 8080}, {port: 9090}");
    let (svc_old, svc_new) = (service("http", "b"), service("alt", "b"));
    let dir = states(&[CLUSTER, &both, &svc_old], &[CLUSTER, &both, &svc_new]);
    let o = diff(&dir, "text");
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    assert!(
        stdout(&o).starts_with(
            "service reach moved: x/a -> svc/x/web:http TCP 80\n    \
             before: all (2); after: all (2)\n"
        ),
        "{}",
        stdout(&o)
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

/// Two nodes (the pods run on n1), a NodePort Service (`externalTrafficPolicy: Cluster`)
/// and a LoadBalancer one (`Local`), both to `app: b` port `http`.
const EXPOSED: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {addresses: [{type: InternalIP, address: 192.168.0.1}]}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {addresses: [{type: InternalIP, address: 192.168.0.2}]}
---
apiVersion: v1
kind: Service
metadata: {name: pub, namespace: x}
spec:
  type: NodePort
  clusterIP: 10.96.0.11
  selector: {app: b}
  ports: [{name: http, port: 80, targetPort: http, nodePort: 30080}]
---
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: x}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  clusterIP: 10.96.0.12
  selector: {app: b}
  ports: [{name: http, port: 80, targetPort: http, nodePort: 30081}]
status: {loadBalancer: {ingress: [{ip: 203.0.113.7}]}}
"#;

/// b admits TCP 8080 from `cidrs`.
fn admit_from(cidrs: &[&str]) -> String {
    let peers: Vec<String> = cidrs
        .iter()
        .map(|c| match c.split_once(" except ") {
            Some((c, e)) => format!("{{ipBlock: {{cidr: {c}, except: [{e}]}}}}"),
            None => format!("{{ipBlock: {{cidr: {c}}}}}"),
        })
        .collect();
    format!(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: b-outside, namespace: x}}
spec:
  podSelector: {{matchLabels: {{app: b}}}}
  ingress: [{{from: [{}], ports: [{{port: 8080}}]}}]
"#,
        peers.join(", ")
    )
}

/// `coverage -o text` of the documents, with the file name replaced by `F`.
fn coverage(docs: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("c.yaml");
    std::fs::write(&file, docs.join("\n---\n")).expect("write");
    let file = file.to_string_lossy().into_owned();
    let o = palisade(&["coverage", "-f", &file]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).replace(&file, "F")
}

#[test]
fn coverage_names_the_source_address_endpoints_see_through_node_ports() {
    // Only the node addresses are admitted: the Cluster Service works through n2 (masqueraded
    // to n2's address) but not through n1, the endpoints' own node, where the connection is
    // decided for the client's address; the Local one through none (its endpoints see the
    // clients).
    let out = coverage(&[
        CLUSTER,
        POLICY_8080,
        EXPOSED,
        &admit_from(&["192.168.0.1/32", "192.168.0.2/32"]),
    ]);
    let section = "exposed through Services: 2 Service(s) carry connections from outside the cluster
  svc/x/lb (LoadBalancer, F:53): externalTrafficPolicy Local: the endpoint sees the client's own address
    TCP 80 (http) via node port 30081, 203.0.113.7:80
      x/b1:8080: admits no address outside the cluster: connections through it are refused
      x/b2:8080: admits no address outside the cluster: connections through it are refused
  svc/x/pub (NodePort, F:44): externalTrafficPolicy Cluster: through another node the connection is masqueraded and decided for that node's address; through the endpoint's own node it is decided for the client's address
    TCP 80 (http) via node port 30080
      x/b1:8080: admits some of the sources it may see (1 of 4: 192.168.0.2)
      x/b2:8080: admits some of the sources it may see (1 of 4: 192.168.0.2)
";
    assert!(out.contains(section), "{out}");

    // Every outside address admitted, and node n1 but not n2: now the Local Service
    // works, and the Cluster one only through n1 (decided for the clients' addresses),
    // not through n2 (masqueraded to n2's address).
    let out = coverage(&[
        CLUSTER,
        POLICY_8080,
        EXPOSED,
        &admit_from(&["0.0.0.0/0 except 192.168.0.2/32"]),
    ]);
    for line in [
        "      x/b1:8080: admits any address outside the cluster\n",
        "      x/b1:8080: admits some of the sources it may see (3 of 4: 0.0.0.0, 192.168.0.3, 203.0.113.1)\n",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
}

#[test]
fn coverage_without_services_has_no_service_section() {
    let out = coverage(&[CLUSTER, POLICY_8080]);
    assert!(!out.contains("Services"), "{out}");
}

/// `lint -o text` of the documents, with the file name replaced by `F`.
fn lint(docs: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("c.yaml");
    std::fs::write(&file, docs.join("\n---\n")).expect("write");
    let file = file.to_string_lossy().into_owned();
    let o = palisade(&["lint", "-f", &file]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).replace(&file, "F")
}

#[test]
fn lint_finds_a_service_port_written_where_the_target_port_is_meant() {
    let svc = service("http", "b");
    let ingress_80 = POLICY_8080.replace("port: 8080", "port: 80");
    let egress_80 = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a-out, namespace: x}
spec:
  podSelector: {matchLabels: {app: a}}
  policyTypes: [Egress]
  egress: [{to: [{podSelector: {matchLabels: {app: b}}}], ports: [{port: 80}]}]
"#;
    let out = lint(&[CLUSTER, &ingress_80, egress_80, &svc]);
    for finding in [
        "F:31: warning[PAL015 service-port-in-policy]: NetworkPolicy x/b-http: spec.ingress[0].ports: admits TCP 80 (the port of Service x/web at F:43) but not the target port the connection arrives at on x/b1:8080, x/b2:8080: policy is decided after the Service's DNAT\n  fix: write the target port (http) in the rule, not the Service port 80\n",
        "F:41: warning[PAL015 service-port-in-policy]: NetworkPolicy x/a-out: spec.egress[0].ports: admits TCP 80 (the port of Service x/web at F:43) but not the target port the connection arrives at on x/b1:8080, x/b2:8080: policy is decided after the Service's DNAT\n",
    ] {
        assert!(out.contains(finding), "{finding}\n{out}");
    }
    // Written right, or naming both ports: no such finding.
    let both = POLICY_8080.replace("{port: 8080}", "{port: 80}, {port: 8080}");
    for policy in [POLICY_8080, &both] {
        let out = lint(&[CLUSTER, policy, &svc]);
        assert!(!out.contains("PAL015"), "{out}");
    }
}

#[test]
fn lint_finds_services_no_client_or_only_some_endpoints_admit() {
    // c1 carries app: b too, but a policy isolates it and admits nothing.
    let c1 = r#"
apiVersion: v1
kind: Pod
metadata: {name: c1, namespace: x, labels: {app: b, locked: "yes"}}
spec: {nodeName: n1, containers: [{name: c, image: i, ports: [{name: http, containerPort: 8080}]}]}
status: {podIP: 10.0.0.4}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: locked, namespace: x}
spec:
  podSelector: {matchLabels: {locked: "yes"}}
  policyTypes: [Ingress]
"#;
    let partly = POLICY_8080.replace("app: b}}", "app: b, locked: \"no\"}}");
    let mut docs = CLUSTER.replace("{app: b}", "{app: b, locked: \"no\"}");
    docs.push_str("---\n");
    docs.push_str(c1);
    let svc = service("http", "b");
    let locked = service("http", "b")
        .replace("name: web", "name: vault")
        .replace("selector: {app: b}", "selector: {locked: \"yes\"}");
    let nothing = service("http", "zzz").replace("name: web", "name: ghost");
    let out = lint(&[&docs, &partly, &svc, &locked, &nothing]);
    for finding in [
        "warning[PAL017 service-partly-admitted]: Service x/web: spec.ports[0]: x/a reaches only 2 of the 3 endpoint(s) of port http (TCP 80): its connections fail depending on the endpoint chosen; refused by NetworkPolicy x/locked (F:",
        "warning[PAL016 service-unreachable]: Service x/vault: spec.ports[0]: no client (pod, node or outside address) may reach any of the 1 endpoint(s) of port http (TCP 80): denied by NetworkPolicy x/locked (F:",
        "warning[PAL018 service-selects-nothing]: Service x/ghost: spec.selector: selector app=zzz matches no pod of namespace x: the Service has no endpoint\n",
    ] {
        assert!(out.contains(finding), "{finding}\n{out}");
    }
}
