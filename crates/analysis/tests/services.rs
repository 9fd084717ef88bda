//! Services as destinations: endpoints from EndpointSlices or derived from the selector,
//! named target ports per pod, families, and the hairpin rule.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use palisade_analysis::Analysis;
use palisade_engine::{EndpointSource, Engine, Flow, Options, Reach};
use palisade_model::{Protocol, load_str};

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web}}
status: {podIPs: [{ip: 10.0.0.1}, {ip: "fd00::1"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: api-0, namespace: shop, labels: {app: api}}
spec: {containers: [{name: c, ports: [{name: http, containerPort: 8080}, {name: dns, containerPort: 53, protocol: UDP}]}]}
status: {podIPs: [{ip: 10.0.0.2}, {ip: "fd00::2"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: api-1, namespace: shop, labels: {app: api}}
spec: {containers: [{name: c, ports: [{name: http, containerPort: 9090}]}]}
status: {podIP: 10.0.0.3}
---
apiVersion: v1
kind: Pod
metadata: {name: api-2, namespace: shop, labels: {app: api}}
spec: {containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]}
status:
  podIP: 10.0.0.4
  conditions: [{type: Ready, status: "False"}]
---
apiVersion: v1
kind: Pod
metadata: {name: api-3, namespace: other, labels: {app: api}}
spec: {containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]}
status: {podIP: 10.0.0.5}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop}
spec:
  clusterIPs: [10.96.0.10, "fd00:96::10"]
  selector: {app: api}
  ports:
  - {name: http, port: 80, targetPort: http}
  - {name: dns, port: 53, protocol: UDP, targetPort: dns}
  - {name: raw, port: 7000}
"#;

fn engine(extra: &str) -> Engine {
    let loaded = load_str(&format!("{PODS}---\n{extra}")).unwrap();
    Engine::new(loaded.cluster, Options::default())
}

/// `(endpoint name, target port)` of each endpoint of port `i`.
fn endpoints(e: &Engine, i: usize, v6: bool) -> Vec<(String, u16)> {
    let svc = e.service("shop", "api").unwrap();
    e.service_endpoints(svc, v6)[i]
        .endpoints
        .iter()
        .map(|x| {
            (
                Analysis::new(e).endpoint_name(x.at.kind, x.at.ip),
                x.port.get(),
            )
        })
        .collect()
}

#[test]
fn endpoints_are_derived_as_the_endpoint_slice_controller_would() {
    let e = engine("apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n");
    let svc = e.service("shop", "api").unwrap();
    assert_eq!(e.endpoint_source(svc), EndpointSource::Derived);
    // Ready pods of the namespace only; a named target port lands on each pod's own number.
    assert_eq!(
        endpoints(&e, 0, false),
        [("shop/api-0".into(), 8080), ("shop/api-1".into(), 9090)]
    );
    // The name must match with its protocol: only api-0 declares dns/UDP.
    assert_eq!(endpoints(&e, 1, false), [("shop/api-0".into(), 53)]);
    // A number: every ready pod, whatever it declares.
    assert_eq!(
        endpoints(&e, 2, false),
        [("shop/api-0".into(), 7000), ("shop/api-1".into(), 7000)]
    );
    // IPv6: only the pods with an IPv6 address.
    assert_eq!(endpoints(&e, 0, true), [("shop/api-0".into(), 8080)]);
    let left_out: Vec<(String, &str)> = e.service_endpoints(svc, false)[1]
        .left_out
        .iter()
        .map(|(p, why)| (e.cluster().pods[*p].key(), *why))
        .collect();
    assert_eq!(
        left_out,
        [
            (
                "shop/api-1".into(),
                "declares no container port of that name and protocol"
            ),
            ("shop/api-2".into(), "not ready"),
        ]
    );
}

#[test]
fn endpoint_slices_replace_the_derivation() {
    let e = engine(
        r#"apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: api-x, namespace: shop, labels: {kubernetes.io/service-name: api}}
addressType: IPv4
endpoints:
- addresses: [10.0.0.4]
- addresses: [10.0.0.2]
  conditions: {ready: false}
- addresses: [192.0.2.7]
ports: [{name: http, port: 8443}]
"#,
    );
    let svc = e.service("shop", "api").unwrap();
    assert_eq!(e.endpoint_source(svc), EndpointSource::Slices);
    // Ready endpoints only, at the slice's port, whatever the selector says; an address
    // outside the cluster is an endpoint too.
    assert_eq!(
        endpoints(&e, 0, false),
        [("shop/api-2".into(), 8443), ("192.0.2.7".into(), 8443)]
    );
    assert!(
        endpoints(&e, 1, false).is_empty(),
        "no slice port named dns"
    );
    assert!(endpoints(&e, 0, true).is_empty(), "no IPv6 slice");
}

#[test]
fn a_service_address_names_its_service() {
    let e = engine("");
    assert_eq!(
        e.service_at("fd00:96::10".parse().unwrap())
            .map(|s| s.key()),
        Some("shop/api".into())
    );
    assert!(e.service_at("10.0.0.2".parse().unwrap()).is_none());
}

const DENY_SELF: &str = r#"apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: only-web, namespace: shop}
spec:
  podSelector: {matchLabels: {app: api}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: web}}}]
"#;

#[test]
fn a_pod_reaching_itself_through_a_service_is_subject_to_policy() {
    let e = engine(DENY_SELF);
    let svc = e.service("shop", "api").unwrap();
    let ports = e.service_endpoints(svc, false);
    let api0 = e.pod_id("shop", "api-0").unwrap();
    let src = e.endpoint_for_pod(api0, Some(false)).unwrap();
    let verdicts = e.evaluate_service_port(src, &ports[0]);
    let by_name: Vec<(String, bool, bool)> = verdicts
        .iter()
        .map(|v| {
            let at = v.endpoint.at;
            (
                Analysis::new(&e).endpoint_name(at.kind, at.ip),
                v.hairpin,
                v.verdict.allowed,
            )
        })
        .collect();
    assert_eq!(
        by_name,
        [
            ("shop/api-0".into(), true, false),
            ("shop/api-1".into(), false, false)
        ],
        "through the Service, api-0 is a client like any other"
    );
    // Through its own address, a pod always reaches itself.
    let direct = Flow {
        src,
        dst: src,
        protocol: Protocol::Tcp,
        port: 8080,
    };
    assert!(e.evaluate(&direct).allowed);
    assert!(!e.evaluate_through_service(&direct).allowed);
    let walk = Analysis::new(&e)
        .explain_through_service(&direct)
        .to_string();
    assert!(
        walk.contains("isolated for ingress by NetworkPolicy shop/only-web"),
        "{walk}"
    );
    // The web pod reaches both.
    let web = e.pod_id("shop", "web-0").unwrap();
    let web = e.endpoint_for_pod(web, Some(false)).unwrap();
    let allowed = e.evaluate_service_port(web, &ports[0]);
    assert!(allowed.iter().all(|v| v.verdict.allowed && !v.hairpin));
}

#[test]
fn reach_counts_endpoints() {
    assert_eq!(Reach::of(0, 0), Reach::None);
    assert_eq!(Reach::of(0, 2), Reach::None);
    assert_eq!(Reach::of(1, 2), Reach::Some);
    assert_eq!(Reach::of(2, 2), Reach::All);
}

#[test]
fn services_change_no_pod_program() {
    let mut e = engine("");
    let mut svc = e.service("shop", "api").unwrap().clone();
    svc.selector = Some([("app".to_string(), "web".to_string())].into());
    let touched = e.apply(palisade_engine::Change::Upsert(
        palisade_model::Object::Service(svc),
    ));
    assert!(!touched.all && touched.pods.is_empty());
    assert_eq!(endpoints(&e, 2, false), [("shop/web-0".into(), 7000)]);
    e.apply(palisade_engine::Change::Remove(
        palisade_model::ObjectKey::new(palisade_model::Kind::Service, Some("shop"), "api"),
    ));
    assert!(e.service("shop", "api").is_none());
}
