//! Compiled tenancy policies, evaluated by the engine on a cluster of tool pods: the
//! connectivity a reader of the Thorium documentation expects.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::collections::BTreeMap;

use palisade_engine::{Decision, Engine, Flow, Options as EngineOptions, Tier};
use palisade_model::Protocol;
use palisade_tenancy::{Config, Options, Output, State, compile};

/// A cluster for `out`: a namespace per group, one pod per tool with the labels compile
/// asked for, the platform API, cluster DNS and node-local DNS; plus the NetworkPolicies.
fn engine(out: &Output, groups: &[&str]) -> Engine {
    let mut objects: Vec<serde_json::Value> = Vec::new();
    for ns in groups.iter().chain(&["platform", "kube-system"]) {
        objects.push(
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
    }
    let mut ip = 10;
    let mut pod = |ns: &str, name: &str, labels: BTreeMap<String, String>| {
        ip += 1;
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"podIP": format!("10.1.0.{ip}")}
        })
    };
    for (key, labels) in &out.tool_labels {
        let (group, tool) = key.split_once('/').unwrap();
        objects.push(pod(group, tool, labels.clone()));
    }
    objects.push(pod(
        "platform",
        "api",
        [("app".into(), "api".into())].into(),
    ));
    objects.push(pod(
        "kube-system",
        "coredns",
        [("k8s-app".into(), "kube-dns".into())].into(),
    ));
    objects.push(pod("crabs", "not-a-tool", BTreeMap::new()));
    for np in &out.network_policies {
        objects.push(serde_json::to_value(np).unwrap());
    }
    let text =
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string();
    let loaded =
        palisade_model::load_sources([("tenancy", text.as_str())], Default::default()).unwrap();
    Engine::new(loaded.cluster, EngineOptions::default())
}

fn compiled(yaml: &str, state: &State) -> Output {
    let config = Config::parse([("config.yaml", yaml)]).unwrap();
    compile(&config, &Options::default(), state)
}

fn flow(e: &Engine, from: &str, to: &str, proto: Protocol, port: u16) -> Flow {
    let ep = |s: &str| match s.split_once('/') {
        Some((ns, n)) => e
            .endpoint_for_pod(e.pod_id(ns, n).unwrap_or_else(|| panic!("{s}")), None)
            .unwrap(),
        None => e.endpoint_for_ip(s.parse().unwrap()),
    };
    Flow {
        src: ep(from),
        dst: ep(to),
        protocol: proto,
        port,
    }
}

fn allowed(e: &Engine, from: &str, to: &str, proto: Protocol, port: u16) -> bool {
    e.evaluate(&flow(e, from, to, proto, port)).allowed
}

/// The NetworkPolicy that decided a side, and the tenancy policies it implements.
fn decided_by(e: &Engine, side: &palisade_engine::SideVerdict) -> String {
    match &side.decision {
        Decision::Rule(m) => {
            let r = &m.policy.reference;
            let np = e
                .cluster()
                .network_policies
                .iter()
                .find(|n| n.name == r.name && Some(&n.namespace) == r.namespace.as_ref())
                .unwrap();
            format!(
                "{} {}",
                np.name.split('-').nth(1).unwrap_or_default(),
                np.namespace
            )
        }
        d => format!("{d:?}"),
    }
}

const TCP: Protocol = Protocol::Tcp;
const UDP: Protocol = Protocol::Udp;

const GROUPS_ONLY: &str = "groups: [corn, crabs]\ntools:\n  - {name: harvester, group: corn}\n  - {name: analyzer, group: crabs}\n";

#[test]
fn base_only_allows_the_platform_api_and_dns() {
    let out = compiled(GROUPS_ONLY, &State::default());
    let e = engine(&out, &["corn", "crabs"]);
    assert!(allowed(&e, "corn/harvester", "platform/api", TCP, 443));
    assert!(allowed(&e, "platform/api", "corn/harvester", TCP, 8080));
    assert!(allowed(
        &e,
        "corn/harvester",
        "kube-system/coredns",
        UDP,
        53
    ));
    assert!(
        !allowed(&e, "corn/harvester", "kube-system/coredns", TCP, 53),
        "the default base allows DNS over UDP only"
    );
    assert!(
        allowed(&e, "corn/harvester", "169.254.20.10", UDP, 53),
        "node-local DNS address"
    );
    assert!(
        !allowed(&e, "corn/harvester", "169.254.169.254", TCP, 80),
        "metadata service"
    );
    assert!(!allowed(&e, "corn/harvester", "8.8.8.8", TCP, 443));
    assert!(!allowed(&e, "corn/harvester", "crabs/analyzer", TCP, 80));
    assert!(!allowed(&e, "crabs/not-a-tool", "corn/harvester", TCP, 80));
    assert!(
        allowed(&e, "crabs/not-a-tool", "platform/api", TCP, 80),
        "non-tool pods are not restricted"
    );
    let v = e.evaluate(&flow(&e, "corn/harvester", "crabs/analyzer", TCP, 80));
    assert_eq!(v.egress.tier, Tier::NetworkPolicy);
    assert!(matches!(v.egress.decision, Decision::Isolated(_)));
    let v = e.evaluate(&flow(&e, "corn/harvester", "platform/api", TCP, 443));
    assert_eq!(decided_by(&e, &v.egress), "base corn");
}

#[test]
fn a_group_policy_adds_to_the_base() {
    let yaml = format!(
        "{GROUPS_ONLY}{}",
        r#"
network_policies:
  - name: corn-talks-to-crabs
    groups: [corn, crabs]
    egress: [{allowed_groups: [crabs]}]
    ingress: [{allowed_groups: [corn]}]
"#
    )
    .replace(
        "{name: harvester, group: corn}",
        "{name: harvester, group: corn, network_policies: [corn-talks-to-crabs]}",
    )
    .replace(
        "{name: analyzer, group: crabs}",
        "{name: analyzer, group: crabs, network_policies: [corn-talks-to-crabs]}",
    );
    let out = compiled(&yaml, &State::default());
    let e = engine(&out, &["corn", "crabs"]);
    assert!(allowed(&e, "corn/harvester", "crabs/analyzer", TCP, 80));
    let v = e.evaluate(&flow(&e, "corn/harvester", "crabs/analyzer", TCP, 80));
    assert!(
        decided_by(&e, &v.egress).ends_with(" corn")
            && !decided_by(&e, &v.egress).starts_with("base")
    );
    assert!(
        !allowed(&e, "crabs/analyzer", "corn/harvester", TCP, 80),
        "egress from crabs only to crabs"
    );
    assert!(
        allowed(&e, "corn/harvester", "platform/api", TCP, 443),
        "the base still applies"
    );
    assert!(
        !allowed(&e, "crabs/not-a-tool", "crabs/analyzer", TCP, 80),
        "ingress only from corn"
    );
}

const FORCED_AND_DEFAULT: &str = r#"
groups: [corn]
tools:
  - {name: picks-nothing, group: corn}
  - {name: picks-ssh, group: corn, network_policies: [ssh-out]}
network_policies:
  - name: web-out
    groups: [corn]
    egress: [{allowed_internet: true, ports: [{port: 443, protocol: TCP}]}]
    default_policy: true
  - name: ssh-out
    groups: [corn]
    egress: [{allowed_internet: true, ports: [{port: 22, protocol: TCP}]}]
  - name: dns-out
    groups: [corn]
    egress: [{allowed_all: true, ports: [{port: 53}]}]
    forced_policy: true
"#;

#[test]
fn forced_policies_apply_to_all_default_only_to_tools_without_policies() {
    let out = compiled(FORCED_AND_DEFAULT, &State::default());
    let e = engine(&out, &["corn"]);
    for tool in ["corn/picks-nothing", "corn/picks-ssh"] {
        assert!(allowed(&e, tool, "1.1.1.1", UDP, 53), "{tool}: forced");
    }
    assert!(
        allowed(&e, "corn/picks-nothing", "1.1.1.1", TCP, 443),
        "default attached"
    );
    assert!(!allowed(&e, "corn/picks-nothing", "1.1.1.1", TCP, 22));
    assert!(
        !allowed(&e, "corn/picks-ssh", "1.1.1.1", TCP, 443),
        "explicit choice: no default"
    );
    assert!(allowed(&e, "corn/picks-ssh", "1.1.1.1", TCP, 22));
    assert_eq!(
        out.state.default_attachments["corn/picks-nothing"],
        ["web-out"]
    );

    // The flag is cleared later: with the state, the tool keeps its default policy.
    let cleared = FORCED_AND_DEFAULT.replace("    default_policy: true\n", "");
    let kept = compiled(&cleared, &out.state);
    assert!(allowed(
        &engine(&kept, &["corn"]),
        "corn/picks-nothing",
        "1.1.1.1",
        TCP,
        443
    ));
    // Without the state (a tool seen for the first time), no default applies any more.
    let fresh = compiled(&cleared, &State::default());
    assert!(!allowed(
        &engine(&fresh, &["corn"]),
        "corn/picks-nothing",
        "1.1.1.1",
        TCP,
        443
    ));
    // The state survives a round trip through its file.
    assert_eq!(
        State::parse(&out.state.render().unwrap()).unwrap(),
        out.state
    );
}

#[test]
fn allowed_internet_excludes_metadata_and_private_addresses() {
    let yaml = r#"
groups: [corn]
tools: [{name: crawler, group: corn, network_policies: [internet]}]
network_policies:
  - {name: internet, groups: [corn], egress: [{allowed_internet: true}]}
  - {name: local, groups: [corn], egress: [{allowed_local: true}]}
"#;
    let out = compiled(yaml, &State::default());
    let e = engine(&out, &["corn"]);
    for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111"] {
        if ip.contains(':') {
            continue; // the tool pod is IPv4-only; family checked below on the ranges
        }
        assert!(allowed(&e, "corn/crawler", ip, TCP, 443), "{ip}");
    }
    for ip in [
        "169.254.169.254",
        "10.0.0.1",
        "192.168.1.1",
        "172.16.0.1",
        "100.64.0.1",
        "127.0.0.1",
        "224.0.0.1",
        "192.0.2.1",
    ] {
        assert!(!allowed(&e, "corn/crawler", ip, TCP, 80), "{ip}");
    }
    let v4 = palisade_tenancy::INTERNET_V4;
    let v6 = palisade_tenancy::INTERNET_V6;
    let public = |ip: &str| {
        let ip: std::net::IpAddr = ip.parse().unwrap();
        [v4, v6].iter().any(|(c, ex)| {
            c.parse::<ipnet::IpNet>().unwrap().contains(&ip)
                && !ex
                    .iter()
                    .any(|e| e.parse::<ipnet::IpNet>().unwrap().contains(&ip))
        })
    };
    assert!(
        public("2606:4700::1111")
            && !public("fe80::1")
            && !public("fd00::1")
            && !public("2001:db8::1")
            && !public("::1")
    );
}

#[test]
fn ports_without_protocol_allow_every_protocol() {
    let yaml = r#"
groups: [corn]
tools: [{name: harvester, group: corn, network_policies: [range]}]
network_policies:
  - name: range
    groups: [corn]
    egress: [{allowed_all: true, ports: [{port: 1000, end_port: 1006}]}]
"#;
    let out = compiled(yaml, &State::default());
    let e = engine(&out, &["corn"]);
    assert!(allowed(&e, "corn/harvester", "203.0.113.9", UDP, 1003));
    assert!(allowed(
        &e,
        "corn/harvester",
        "203.0.113.9",
        Protocol::Sctp,
        1006
    ));
    assert!(allowed(&e, "corn/harvester", "203.0.113.9", TCP, 1000));
    assert!(!allowed(&e, "corn/harvester", "203.0.113.9", UDP, 1007));
}

#[test]
fn empty_rule_list_denies_absent_allows() {
    let yaml = r#"
groups: [corn]
base_network_policies: [{name: open-ingress, ingress: {allowed_all: true}}]
tools:
  - {name: sealed, group: corn, network_policies: [no-egress]}
  - {name: open, group: corn}
network_policies:
  - {name: no-egress, groups: [corn], egress: []}
"#;
    let out = compiled(yaml, &State::default());
    let e = engine(&out, &["corn"]);
    assert!(
        !allowed(&e, "corn/sealed", "8.8.8.8", TCP, 443),
        "egress: [] denies all egress"
    );
    assert!(
        allowed(&e, "corn/open", "corn/sealed", TCP, 80),
        "no ingress list: ingress unrestricted"
    );
    assert!(
        allowed(&e, "corn/open", "8.8.8.8", TCP, 443),
        "no egress list anywhere: egress unrestricted"
    );
    let np = out
        .network_policies
        .iter()
        .find(|n| {
            n.metadata.annotations.as_ref().unwrap()["tenancy.palisade.io/policies"] == "no-egress"
        })
        .unwrap();
    let spec = np.spec.as_ref().unwrap();
    assert_eq!(
        spec.policy_types.as_deref(),
        Some(&["Egress".to_string()][..])
    );
    assert_eq!(spec.egress.as_ref().map(Vec::len), Some(0));
    // Policies add up: with the documentation's allow-all base policy, nothing is denied.
    let open = compiled(
        &yaml.replace(
            "{name: open-ingress, ingress: {allowed_all: true}}",
            "{name: allow_all, ingress: {allowed_all: true}, egress: {allowed_all: true}}",
        ),
        &State::default(),
    );
    assert!(allowed(
        &engine(&open, &["corn"]),
        "corn/sealed",
        "8.8.8.8",
        TCP,
        443
    ));
}

#[test]
fn the_documented_examples_compile_and_load() {
    let config = Config::parse([
        (
            "config.yaml",
            include_str!("../../../examples/tenancy/config.yaml"),
        ),
        (
            "base.yaml",
            include_str!("../../../examples/tenancy/base.yaml"),
        ),
    ])
    .unwrap();
    let out = compile(&config, &Options::default(), &State::default());
    let e = engine(&out, &["corn", "crabs"]);
    assert!(
        allowed(&e, "crabs/analyzer", "corn/harvester", UDP, 1007),
        "corn-and-crabs: egress to corn, ingress from crabs, every port"
    );
    assert!(
        !allowed(&e, "crabs/scanner", "corn/harvester", TCP, 80),
        "scanner has only the default https-to-internet"
    );
    assert!(allowed(&e, "crabs/scanner", "1.1.1.1", TCP, 443));
    assert!(
        allowed(&e, "crabs/analyzer", "corn/harvester", TCP, 1003),
        "allowed_tools harvester on 1000-1006, base ingress from crabs on TCP 1000-1006"
    );
    assert!(
        !allowed(&e, "corn/harvester", "crabs/scanner", TCP, 80),
        "no-ingress is forced in crabs"
    );
    // NetworkPolicy names do not change when a policy is renamed.
    let renamed_text =
        include_str!("../../../examples/tenancy/config.yaml").replace("corn-and-crabs", "renamed");
    let renamed = Config::parse([
        ("config.yaml", renamed_text.as_str()),
        (
            "base.yaml",
            include_str!("../../../examples/tenancy/base.yaml"),
        ),
    ])
    .unwrap();
    let again = compile(&renamed, &Options::default(), &State::default());
    let names = |o: &Output| {
        o.network_policies
            .iter()
            .map(|n| n.metadata.name.clone().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&out), names(&again));
    assert_eq!(out.tool_labels, again.tool_labels);
}
