//! The Kubernetes source against a loopback server that replays recorded API responses
//! (`tests/fixtures/kube/`, written by hand in the API server's wire format: lists
//! without `kind` on their items, watch streams as JSON Lines in chunked responses).

mod kube_server;

use std::collections::BTreeMap;
use std::time::Duration;

use kube_server::{ApiServer, End, Reply, fixture};
use palisade_follow::source::kube::{self as source, Options, RESOURCES};
use palisade_follow::source::{Content, Event, Text};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const PODS: &str = "/api/v1/pods";
const NAMESPACES: &str = "/api/v1/namespaces";
const NODES: &str = "/api/v1/nodes";
const NETPOLS: &str = "/apis/networking.k8s.io/v1/networkpolicies";
const ANPS: &str = "/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies";
const BANPS: &str = "/apis/policy.networking.k8s.io/v1alpha1/baselineadminnetworkpolicies";
const CNPS: &str = "/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies";

fn client(server: &ApiServer) -> kube::Client {
    let url = server.url.parse().expect("server url");
    kube::Client::try_from(kube::Config::new(url)).expect("client")
}

fn fast() -> Options {
    Options {
        missing_retry: Duration::from_millis(300),
        min_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        unserved_grace: Duration::from_millis(600),
        list_deadline: Duration::from_millis(400),
    }
}

/// A compact, comparable rendering of an event: kind and ids.
fn summary(event: &Event) -> String {
    let ids = |texts: &[Text]| {
        texts
            .iter()
            .map(|t| t.id.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    match event {
        Event::Put(texts) => format!("put {}", ids(texts)),
        Event::Remove(ids) => format!("remove {}", ids.join(" ")),
        Event::Replace { prefix, texts } => format!("replace {prefix} [{}]", ids(texts)),
        Event::Synced => "synced".into(),
        Event::Unreadable { id, .. } => format!("unreadable {id}"),
        Event::Health { part, problem } => match problem {
            Some(_) => format!("unhealthy {part}"),
            None => format!("healthy {part}"),
        },
    }
}

/// The kind (`Pod`, …) an event is about, or `None` for `Synced`.
fn kind_of(event: &Event) -> Option<String> {
    let id = match event {
        Event::Put(texts) => texts.first()?.id.clone(),
        Event::Remove(ids) => ids.first()?.clone(),
        Event::Replace { prefix, .. } => prefix.clone(),
        Event::Unreadable { id, .. } => id.clone(),
        Event::Health { part, .. } => format!("{part}/"),
        Event::Synced => return None,
    };
    let rest = id.strip_prefix("kube:")?;
    Some(rest.split('/').next()?.to_string())
}

/// Receives events until `done` holds for what was received, or fails after 20 s.
async fn collect(
    rx: &mut mpsc::UnboundedReceiver<Event>,
    done: impl Fn(&[Event]) -> bool,
) -> Vec<Event> {
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done(&events) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(e)) => events.push(e),
            Ok(None) => panic!("source closed its channel; got {:#?}", summaries(&events)),
            Err(_) => panic!("timed out; got {:#?}", summaries(&events)),
        }
    }
    events
}

/// Waits until `condition` holds (at most 10 s; the assertions after it tell what failed).
async fn eventually(condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !condition() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn summaries(events: &[Event]) -> Vec<String> {
    events.iter().map(summary).collect()
}

/// The events about one kind, summarised, in order; puts and removes one line per id (the
/// source may merge changes that arrive together).
fn of_kind(events: &[Event], kind: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| kind_of(e).as_deref() == Some(kind))
        .flat_map(|e| match e {
            Event::Put(texts) => texts.iter().map(|t| format!("put {}", t.id)).collect(),
            Event::Remove(ids) => ids.iter().map(|id| format!("remove {id}")).collect(),
            other => vec![summary(other)],
        })
        .collect()
}

fn script_cluster(server: &ApiServer) {
    server
        .lists(
            PODS,
            [
                Reply::json(fixture("pods-list.json")),
                Reply::json(fixture("pods-relist.json")),
            ],
        )
        .watches(
            PODS,
            [
                // ADDED, MODIFIED, BOOKMARK, then the connection drops mid-event.
                Reply::watch(&fixture("pods-watch-1.jsonl"), End::Cut),
                // Resumed from the bookmark: DELETED, then ERROR 410 Gone.
                Reply::watch(&fixture("pods-watch-2.jsonl"), End::Close),
            ],
        )
        .lists(
            NAMESPACES,
            [
                Reply::json(fixture("namespaces-list.json")),
                Reply::json(fixture("namespaces-relist.json")),
            ],
        )
        // The watch itself is refused with 410 Gone (status, not event).
        .watches(
            NAMESPACES,
            [Reply::Body(
                410,
                "application/json",
                fixture("status-410.json"),
            )],
        )
        .lists(NODES, [Reply::json(fixture("nodes-list.json"))])
        .lists(NETPOLS, [Reply::json(fixture("networkpolicies-list.json"))])
        .lists(
            ANPS,
            [Reply::json(fixture("adminnetworkpolicies-list.json"))],
        )
        .lists(BANPS, [Reply::not_found()])
        // Not installed at first; installed by the time the source tries again.
        .lists(
            CNPS,
            [
                Reply::not_found(),
                Reply::json(fixture("clusternetworkpolicies-list.json")),
            ],
        );
}

#[tokio::test]
async fn lists_watches_resumes_and_relists() {
    let server = ApiServer::start();
    script_cluster(&server);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(source::run_with(client(&server), tx, fast()));

    let events = collect(&mut rx, |ev| {
        of_kind(ev, "Pod").len() >= 5
            && of_kind(ev, "Namespace").len() >= 2
            && of_kind(ev, "ClusterNetworkPolicy").len() >= 2
    })
    .await;

    assert_eq!(
        of_kind(&events, "Pod"),
        [
            "replace kube:Pod/ [kube:Pod/x/a kube:Pod/x/b]",
            "put kube:Pod/y/c",
            "put kube:Pod/x/a",
            "remove kube:Pod/x/b",
            "replace kube:Pod/ [kube:Pod/x/a kube:Pod/y/c kube:Pod/y/d]",
        ],
        "list, ADDED, MODIFIED, (cut; resume) DELETED, (410 event) relist"
    );
    assert_eq!(
        of_kind(&events, "Namespace"),
        [
            "replace kube:Namespace/ [kube:Namespace/x kube:Namespace/y]",
            "replace kube:Namespace/ [kube:Namespace/x kube:Namespace/y kube:Namespace/z]",
        ],
        "a watch refused with 410 Gone relists"
    );
    assert_eq!(
        of_kind(&events, "Node"),
        ["replace kube:Node/ [kube:Node/node-1 kube:Node/node-2]"]
    );
    assert_eq!(
        of_kind(&events, "NetworkPolicy"),
        ["replace kube:NetworkPolicy/ [kube:NetworkPolicy/x/web]"]
    );
    assert_eq!(
        of_kind(&events, "AdminNetworkPolicy"),
        ["replace kube:AdminNetworkPolicy/ [kube:AdminNetworkPolicy/deny-z]"]
    );
    assert_eq!(
        of_kind(&events, "BaselineAdminNetworkPolicy"),
        ["replace kube:BaselineAdminNetworkPolicy/ []"],
        "a missing CRD is an empty kind, said once however often it is tried"
    );
    let banp_lists = || {
        server
            .requests()
            .iter()
            .filter(|r| r.starts_with(&format!("{BANPS}?")))
            .count()
    };
    eventually(|| banp_lists() >= 3).await;
    assert!(banp_lists() >= 3, "the missing CRD is tried again");
    let mut later = Vec::new();
    while let Ok(event) = rx.try_recv() {
        later.push(event);
    }
    assert_eq!(
        of_kind(&later, "BaselineAdminNetworkPolicy"),
        Vec::<String>::new(),
        "retries of a kind that is still missing send nothing"
    );
    assert_eq!(
        of_kind(&events, "ClusterNetworkPolicy"),
        [
            "replace kube:ClusterNetworkPolicy/ []",
            "replace kube:ClusterNetworkPolicy/ [kube:ClusterNetworkPolicy/baseline-deny]",
        ],
        "a missing CRD is tried again and found"
    );

    // Synced once, after the first listing of every kind.
    let synced: Vec<usize> = (0..events.len())
        .filter(|&i| events[i] == Event::Synced)
        .collect();
    assert_eq!(synced.len(), 1, "{:#?}", summaries(&events));
    for kind in RESOURCES {
        let first = events
            .iter()
            .position(|e| kind_of(e).as_deref() == Some(kind.kind))
            .expect("every kind listed");
        assert!(first < synced[0], "{} listed after Synced", kind.kind);
    }

    // The watches resumed from the list's version, then from the bookmark, then from
    // the relist's version; bookmarks were asked for.
    // (The watch after the relist starts after the relist was sent: wait for it.)
    let watches_of_pods = || -> Vec<String> {
        server
            .requests()
            .into_iter()
            .filter(|r| r.starts_with(&format!("{PODS}?")) && r.contains("watch=true"))
            .collect()
    };
    eventually(|| watches_of_pods().len() >= 3).await;
    let pod_watches = watches_of_pods();
    let versions: Vec<&str> = pod_watches
        .iter()
        .filter_map(|r| {
            r.split('&')
                .find_map(|p| p.strip_prefix("resourceVersion="))
        })
        .collect();
    assert_eq!(versions, ["100", "105", "200"], "{pod_watches:#?}");
    assert!(
        pod_watches
            .iter()
            .all(|r| r.contains("allowWatchBookmarks=true")),
        "{pod_watches:#?}"
    );

    drop(rx);
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the source stops when its receiver is dropped")
        .expect("source task");
}

#[tokio::test]
async fn texts_are_trimmed_and_decode() {
    let server = ApiServer::start();
    script_cluster(&server);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(source::run_with(client(&server), tx, fast()));
    let events = collect(&mut rx, |ev| ev.contains(&Event::Synced)).await;
    task.abort();

    let objects: BTreeMap<String, Value> = events
        .iter()
        .flat_map(|e| match e {
            Event::Replace { texts, .. } | Event::Put(texts) => texts.clone(),
            _ => Vec::new(),
        })
        .map(|t| match t.body {
            Content::Object(value) => (t.id, value),
            Content::Text(text) => panic!("{}: sent as text, not as an object: {text}", t.id),
        })
        .collect();
    let body = |id: &str| -> Value {
        objects
            .get(id)
            .cloned()
            .unwrap_or_else(|| panic!("no {id}"))
    };
    assert_eq!(
        body("kube:Pod/x/a"),
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "x", "labels": {"app": "a"}},
            "spec": {"nodeName": "node-1",
                     "containers": [{"name": "web", "ports": [
                         {"name": "http", "containerPort": 8080, "protocol": "TCP"}]}]},
            "status": {"phase": "Running", "hostIP": "192.0.2.11",
                       "hostIPs": [{"ip": "192.0.2.11"}], "podIP": "10.1.0.1",
                       "podIPs": [{"ip": "10.1.0.1"}]}
        }),
        "the pod keeps what Palisade reads, with apiVersion and kind set"
    );
    assert_eq!(
        body("kube:NetworkPolicy/x/web")["metadata"],
        json!({"name": "web", "namespace": "x"}),
        "annotations Palisade does not read are dropped"
    );
    assert!(
        body("kube:AdminNetworkPolicy/deny-z")
            .get("status")
            .is_none()
    );

    // What the source keeps of the recorded pods, against what the API server sent.
    let list: Value = serde_json::from_str(&fixture("pods-list.json")).expect("json");
    let sent: usize = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|p| p.to_string().len())
        .sum();
    let kept: usize = ["kube:Pod/x/a", "kube:Pod/x/b"]
        .iter()
        .map(|id| objects[*id].to_string().len())
        .sum();
    println!("pods: {sent} bytes sent by the API server, {kept} bytes kept");
    assert!(kept * 3 < sent, "kept {kept} of {sent} bytes");

    let decoded = palisade_model::decode_bodies(
        objects
            .iter()
            .map(|(id, object)| (id.as_str(), palisade_model::Body::Object(object.clone()))),
    );
    let errors: Vec<String> = decoded
        .diagnostics
        .iter()
        .filter(|d| d.severity == palisade_model::Severity::Error)
        .map(ToString::to_string)
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let c = &decoded.cluster;
    assert_eq!(
        (c.namespaces.len(), c.pods.len(), c.nodes.len()),
        (2, 2, 2),
        "namespaces, pods, nodes"
    );
    assert_eq!(c.network_policies.len(), 1);
    assert_eq!(c.admin_policies.len(), 1);
}

#[tokio::test]
async fn invalid_objects_are_reported_under_their_id() {
    let server = ApiServer::start();
    let bad = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "5"},
        "items": [{"metadata": {"name": "bad", "namespace": "x", "labels": {"bad key": "v"}},
                   "spec": {"containers": [{"name": "c"}]}}]});
    server.lists(PODS, [Reply::json(bad.to_string())]);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(source::run_with(client(&server), tx, fast()));
    let events = collect(&mut rx, |ev| ev.contains(&Event::Synced)).await;
    task.abort();
    let mut text = events
        .iter()
        .find_map(|e| match e {
            Event::Replace { prefix, texts } if prefix == "kube:Pod/" => texts.first().cloned(),
            _ => None,
        })
        .expect("the pod is sent, invalid as it is");
    let decoded = palisade_model::decode_bodies([(text.id.as_str(), text.body.take_body())]);
    let message = decoded
        .diagnostics
        .iter()
        .map(ToString::to_string)
        .find(|d| d.contains("bad key"))
        .expect("an error about the label");
    assert!(message.starts_with("kube:Pod/x/bad"), "{message}");
    assert_eq!(decoded.invalid.len(), 1);
}

#[tokio::test]
async fn snapshot_pages_and_notes_missing_kinds() {
    let server = ApiServer::start();
    let mut page1: Value = serde_json::from_str(&fixture("pods-list.json")).expect("json");
    page1["metadata"]["continue"] = json!("page-2");
    let page2 = json!({"kind": "PodList", "apiVersion": "v1",
        "metadata": {"resourceVersion": "100"},
        "items": [{"metadata": {"name": "z", "namespace": "y"}, "spec": {"containers": []}}]});
    server
        .lists(
            PODS,
            [
                Reply::json(page1.to_string()),
                Reply::json(page2.to_string()),
            ],
        )
        .lists(NAMESPACES, [Reply::json(fixture("namespaces-list.json"))])
        .lists(
            ANPS,
            [Reply::json(fixture("adminnetworkpolicies-list.json"))],
        )
        .lists(BANPS, [Reply::not_found()])
        .lists(CNPS, [Reply::not_found()]);
    let snapshot = source::snapshot(&client(&server)).await.expect("snapshot");
    let ids: Vec<&str> = snapshot.texts.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "kube:Namespace/x",
            "kube:Namespace/y",
            "kube:Pod/x/a",
            "kube:Pod/x/b",
            "kube:Pod/y/z",
            "kube:AdminNetworkPolicy/deny-z",
        ]
    );
    assert_eq!(
        snapshot.missing,
        ["BaselineAdminNetworkPolicy", "ClusterNetworkPolicy"]
    );
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.starts_with(PODS) && r.contains("continue=page-2")),
        "{:#?}",
        server.requests()
    );
}

#[tokio::test]
async fn snapshot_fails_on_a_refused_list() {
    let server = ApiServer::start();
    let forbidden = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "reason": "Forbidden", "code": 403,
        "message": "pods is forbidden: User \"system:serviceaccount:x:y\" cannot list resource \"pods\" in API group \"\" at the cluster scope"});
    server.lists(
        PODS,
        [Reply::Body(403, "application/json", forbidden.to_string())],
    );
    let err = source::snapshot(&client(&server))
        .await
        .expect_err("403 is an error");
    let message = err.to_string();
    assert!(
        message.starts_with("cannot list Pod") && message.contains("forbidden"),
        "{message}"
    );
}

#[tokio::test]
async fn client_reads_a_kubeconfig_and_its_contexts() {
    let server = ApiServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config");
    std::fs::write(&path, server.kubeconfig()).expect("write kubeconfig");
    let client = source::client(Some(&path), None).await.expect("client");
    let snapshot = source::snapshot(&client).await.expect("snapshot");
    assert!(snapshot.texts.is_empty());
    assert!(
        !server.requests().is_empty(),
        "the kubeconfig's server was used"
    );

    let Err(err) = source::client(Some(&path), Some("no-such-context")).await else {
        panic!("an unknown context is an error");
    };
    assert!(err.to_string().contains("no-such-context"), "{err}");
    let Err(err) = source::client(Some(&dir.path().join("absent")), None).await else {
        panic!("a missing kubeconfig is an error");
    };
    assert!(err.to_string().contains("absent"), "{err}");
}

#[tokio::test]
async fn tls_clients_build_and_fail_cleanly() {
    // rustls with ring is the only TLS provider: building an https client needs no
    // process-wide setup, and a refused connection is an error, not a panic.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let url = format!("https://127.0.0.1:{port}").parse().expect("url");
    let client = kube::Client::try_from(kube::Config::new(url)).expect("https client");
    let err = source::snapshot(&client)
        .await
        .expect_err("nothing listens");
    assert!(
        err.to_string().starts_with("cannot list Namespace"),
        "{err}"
    );
}

/// A TLS API server on 127.0.0.1 whose certificate a test CA signed; every request gets
/// an empty list. Returns the server's URL and the CA's PEM.
fn tls_server() -> (String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    use std::io::{BufRead, BufReader, Write};
    use std::sync::Arc;

    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "palisade test CA");
    let ca =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key")).expect("CA");
    let key = KeyPair::generate().expect("server key");
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .expect("server params")
        .signed_by(&key, &ca)
        .expect("server certificate");
    let tls = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .expect("server TLS config");
    let tls = Arc::new(tls);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("https://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let tls = tls.clone();
            std::thread::spawn(move || {
                let Ok(session) = rustls::ServerConnection::new(tls) else {
                    return;
                };
                let mut stream = BufReader::new(rustls::StreamOwned::new(session, conn));
                loop {
                    let mut line = String::new();
                    // Skip the request line and headers.
                    loop {
                        line.clear();
                        if stream.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let body = r#"{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}"#;
                    let response = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let out = stream.get_mut();
                    if out.write_all(response.as_bytes()).is_err() || out.flush().is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, ca.pem())
}

#[tokio::test]
async fn tls_with_the_kubeconfig_ca() {
    let (url, ca) = tls_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_path = dir.path().join("ca.pem");
    std::fs::write(&ca_path, &ca).expect("write CA");
    let config = |ca_line: &str| {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\n{ca_line}\
             contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n\
             users:\n- name: u\n  user: {{}}\n"
        )
    };
    let trusted = dir.path().join("trusted");
    std::fs::write(
        &trusted,
        config(&format!(
            "    certificate-authority: {}\n",
            ca_path.display()
        )),
    )
    .expect("write kubeconfig");
    let client = source::client(Some(&trusted), None).await.expect("client");
    let snapshot = source::snapshot(&client)
        .await
        .expect("the server's certificate is trusted through the kubeconfig's CA");
    assert!(snapshot.texts.is_empty() && snapshot.missing.is_empty());

    // Without the CA, the same server is not trusted.
    let untrusted = dir.path().join("untrusted");
    std::fs::write(&untrusted, config("")).expect("write kubeconfig");
    let client = source::client(Some(&untrusted), None)
        .await
        .expect("client");
    let err = source::snapshot(&client)
        .await
        .expect_err("an unknown CA is refused");
    let message = err.to_string();
    assert!(
        message.starts_with("cannot list Namespace") && message.contains("certificate"),
        "{message}"
    );
}

/// A watch that the API server ends with `410 Gone`: the source lists again.
fn expired_watch() -> Reply {
    let status: Value = serde_json::from_str(&fixture("status-410.json")).expect("status");
    Reply::watch(
        &json!({"type": "ERROR", "object": status}).to_string(),
        End::Close,
    )
}

/// A kind that was served keeps its objects through every failure of a relist (500, a 404
/// while the API server restarts, a hang), is reported unhealthy meanwhile, and reads
/// again when the API server answers; only discovery saying it is gone, for the grace
/// period, removes its objects.
#[tokio::test]
async fn a_served_kind_keeps_its_objects_when_a_relist_fails() {
    let server = ApiServer::start();
    let error_500 = Reply::Body(
        500,
        "application/json",
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500, "message": "etcdserver: leader changed"}).to_string(),
    );
    server
        .lists(
            NETPOLS,
            [
                Reply::json(fixture("networkpolicies-list.json")),
                error_500,
                Reply::not_found(),
                Reply::not_found(),
                Reply::json(fixture("networkpolicies-list.json")),
            ],
        )
        .watches(NETPOLS, [expired_watch()])
        .lists(
            ANPS,
            [
                Reply::json(fixture("adminnetworkpolicies-list.json")),
                Reply::not_found(),
            ],
        )
        .watches(ANPS, [expired_watch()])
        // Discovery: the group/version is not served any more.
        .lists(
            "/apis/policy.networking.k8s.io/v1alpha1",
            [Reply::not_found()],
        );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(source::run_with(client(&server), tx, fast()));

    let events = collect(&mut rx, |ev| {
        of_kind(ev, "NetworkPolicy").contains(&"healthy kube:NetworkPolicy".to_string())
            && of_kind(ev, "AdminNetworkPolicy").len() >= 4
    })
    .await;
    assert_eq!(
        of_kind(&events, "NetworkPolicy"),
        [
            "replace kube:NetworkPolicy/ [kube:NetworkPolicy/x/web]",
            "unhealthy kube:NetworkPolicy",
            "unhealthy kube:NetworkPolicy",
            "replace kube:NetworkPolicy/ [kube:NetworkPolicy/x/web]",
            "healthy kube:NetworkPolicy",
        ],
        "500 and 404 on the relist remove nothing; the next full listing is what reads again"
    );
    let anp = of_kind(&events, "AdminNetworkPolicy");
    assert_eq!(
        anp[..3],
        [
            "replace kube:AdminNetworkPolicy/ [kube:AdminNetworkPolicy/deny-z]",
            "unhealthy kube:AdminNetworkPolicy",
            "replace kube:AdminNetworkPolicy/ []",
        ],
        "dropped only after discovery said it is gone for the grace period"
    );
    let Some(Event::Health {
        problem: Some(problem),
        ..
    }) = events
        .iter()
        .filter(|e| kind_of(e).as_deref() == Some("AdminNetworkPolicy"))
        .nth(3)
    else {
        panic!("the removal is reported: {:#?}", summaries(&events));
    };
    assert!(problem.contains("no longer served"), "{problem}");
    drop(rx);
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the source stops")
        .expect("source task");
}

/// A relist that hangs (the API server accepted the request and sends nothing) removes
/// nothing while it hangs, and is reported once it takes longer than the list deadline.
#[tokio::test]
async fn a_relist_that_hangs_removes_nothing() {
    let server = ApiServer::start();
    server
        .lists(
            ANPS,
            [
                Reply::json(fixture("adminnetworkpolicies-list.json")),
                Reply::Watch(Vec::new(), End::Hang),
            ],
        )
        .watches(ANPS, [expired_watch()]);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(source::run_with(client(&server), tx, fast()));
    let events = collect(&mut rx, |ev| ev.contains(&Event::Synced)).await;
    assert_eq!(
        of_kind(&events, "AdminNetworkPolicy"),
        ["replace kube:AdminNetworkPolicy/ [kube:AdminNetworkPolicy/deny-z]"]
    );
    let relists = || {
        server
            .requests()
            .iter()
            .filter(|r| r.starts_with(&format!("{ANPS}?")) && !r.contains("watch=true"))
            .count()
    };
    eventually(|| relists() >= 2).await;
    assert!(relists() >= 2, "the source relisted after the 410");
    tokio::time::sleep(Duration::from_millis(900)).await;
    let mut later = Vec::new();
    while let Ok(event) = rx.try_recv() {
        later.push(event);
    }
    assert_eq!(
        of_kind(&later, "AdminNetworkPolicy"),
        ["unhealthy kube:AdminNetworkPolicy"],
        "nothing removed while the relist hangs; reported after the deadline"
    );
    drop(rx);
    task.abort();
}
