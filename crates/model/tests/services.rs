//! Services and EndpointSlices: one bad-input fixture per validation rule (message and
//! line), valid objects at the limits, and what is read from them.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use palisade_model::{
    AddressType, ExternalTrafficPolicy, LoadError, LoadOptions, ServiceType, TargetPort,
    load_sources,
};
use palisade_test_support::service_table::{invalid, slice, svc, valid};

/// Loads `yaml` and returns every error as `line: field: message`.
fn errors(yaml: &str) -> Vec<String> {
    match load_sources([("bad.yaml", yaml)], LoadOptions::default()) {
        Ok(_) => Vec::new(),
        Err(LoadError::Invalid(d)) => d
            .iter()
            .map(|d| format!("{}: {}: {}", d.line, d.field, d.message))
            .collect(),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn each_rule_has_its_message_and_line() {
    for (what, yaml, want) in invalid() {
        let got = errors(&yaml);
        assert!(
            got.first().is_some_and(|e| e.starts_with(want)),
            "{what}: want {want:?}, got {got:?}\n{yaml}"
        );
    }
}

#[test]
fn valid_objects_load() {
    for (what, yaml) in valid() {
        assert_eq!(errors(&yaml), Vec::<String>::new(), "{what}\n{yaml}");
    }
}

#[test]
fn a_service_is_read_with_its_defaults() {
    let yaml = svc(
        "  type: NodePort\n  clusterIP: 10.96.0.10\n  selector: {app: web}\n  ports:\n  - {name: http, port: 80, targetPort: web, nodePort: 30080}\n  - {name: dns, port: 53, protocol: UDP}\n",
    );
    let loaded = load_sources([("s.yaml", yaml.as_str())], LoadOptions::default()).unwrap();
    let s = &loaded.cluster.services[0];
    assert_eq!(s.key(), "x/s");
    assert_eq!(s.service_type, ServiceType::NodePort);
    assert_eq!(s.external_traffic_policy, ExternalTrafficPolicy::Cluster);
    assert_eq!(
        s.cluster_ips,
        ["10.96.0.10".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(s.families_v6, [false]);
    assert_eq!(s.ports[0].target_port, TargetPort::Name("web".into()));
    assert_eq!(s.ports[0].node_port.map(|p| p.get()), Some(30080));
    assert_eq!(
        s.ports[1].target_port.to_string(),
        "53",
        "an absent targetPort is the port"
    );
    assert!(!s.headless);
}

#[test]
fn a_slice_is_read_with_its_service_and_conditions() {
    let yaml = slice(
        "addressType: IPv4\nendpoints:\n- addresses: [10.0.0.1]\n  targetRef: {kind: Pod, namespace: x, name: web-0}\n- addresses: [10.0.0.2]\n  conditions: {ready: false}\nports: [{name: http, port: 8080}]\n",
    );
    let loaded = load_sources([("e.yaml", yaml.as_str())], LoadOptions::default()).unwrap();
    let e = &loaded.cluster.endpoint_slices[0];
    assert_eq!(e.service.as_deref(), Some("s"));
    assert_eq!(e.address_type, AddressType::Ipv4);
    assert!(e.endpoints[0].ready && !e.endpoints[1].ready);
    assert_eq!(e.endpoints[0].pod, Some(("x".into(), "web-0".into())));
    assert_eq!(e.ports[0].port.map(|p| p.get()), Some(8080));
    assert_eq!(
        e.ports[0].protocol,
        palisade_model::Protocol::Tcp,
        "defaulted"
    );
}

#[test]
fn a_pod_is_ready_unless_its_ready_condition_says_otherwise() {
    let pod = |conditions: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: x}}\nstatus:\n  podIP: 10.0.0.1\n{conditions}"
        )
    };
    let ready = |yaml: String| {
        load_sources([("p.yaml", yaml.as_str())], LoadOptions::default())
            .unwrap()
            .cluster
            .pods[0]
            .ready
    };
    assert!(ready(pod("")), "no conditions: a manifest");
    assert!(ready(pod(
        "  conditions: [{type: Ready, status: \"True\"}]\n"
    )));
    assert!(!ready(pod(
        "  conditions: [{type: Ready, status: \"False\"}]\n"
    )));
    assert!(ready(pod(
        "  conditions: [{type: PodScheduled, status: \"True\"}]\n"
    )));
}

/// Unknown fields of a Service are notices, as for the other cluster-state kinds: a dump
/// from a newer API server has fields this version does not know.
#[test]
fn unknown_service_fields_are_notices() {
    let yaml = svc("  selectr: {app: a}\n  ports: [{port: 80}]\n");
    let loaded = load_sources([("s.yaml", yaml.as_str())], LoadOptions::default()).unwrap();
    let notice = loaded
        .diagnostics
        .iter()
        .find(|d| d.field == "spec.selectr");
    assert!(
        notice.is_some_and(|d| d.line == 7),
        "{:?}",
        loaded.diagnostics
    );
}

/// An EndpointSlice port outside 1–65535 is stored by the API server; it is read as no
/// port (no traffic is sent to it), with a notice at its line.
#[test]
fn a_slice_port_out_of_range_is_no_port_with_a_notice() {
    let yaml = slice(
        "addressType: IPv4\nendpoints: []\nports:\n- {name: a, port: 65536}\n- {name: b, port: 80}\n",
    );
    let loaded = load_sources([("e.yaml", yaml.as_str())], LoadOptions::default()).unwrap();
    let ports: Vec<Option<u16>> = loaded.cluster.endpoint_slices[0]
        .ports
        .iter()
        .map(|p| p.port.map(|p| p.get()))
        .collect();
    assert_eq!(ports, [None, Some(80)]);
    let notice = loaded
        .diagnostics
        .iter()
        .find(|d| d.field == "ports[0].port");
    assert!(
        notice.is_some_and(|d| d.line == 10 && d.message.contains("not a port number")),
        "{:?}",
        loaded.diagnostics
    );
}
