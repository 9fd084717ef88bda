//! Every validation the Thorium documentation promises, each with its message, field and line.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use palisade_tenancy::{Config, Options, State, compile};

fn errors(yaml: &str) -> Vec<String> {
    match Config::parse([("c.yaml", yaml)]) {
        Ok(_) => Vec::new(),
        Err(e) => e
            .diagnostics()
            .iter()
            .map(|d| format!("{}: {}: {}", d.line, d.field, d.message))
            .collect(),
    }
}

fn policy(rule: &str) -> String {
    format!(
        "groups: [corn]\nnetwork_policies:\n  - name: p\n    groups: [corn]\n    egress:\n      - {rule}\n"
    )
}

#[test]
fn promised_validations() {
    let cases: Vec<(&str, String, &str)> = vec![
        ("except outside", policy("allowed_ips: [{cidr: 10.0.0.0/16, except: [10.1.0.0/24]}]"), "6: network_policies[0].egress[0].allowed_ips[0].except[0]: 10.1.0.0/24 is not inside 10.0.0.0/16"),
        ("except other version", policy("allowed_ips: [{cidr: 10.0.0.0/16, except: [\"fd00::/64\"]}]"), "except[0]: fd00::/64 is not the same IP version as 10.0.0.0/16"),
        ("except on single address", policy("allowed_ips: [{cidr: 10.0.0.1, except: [10.0.0.1/32]}]"), "allowed_ips[0].except: 10.0.0.1 is a single address: it cannot have except CIDRs"),
        ("bad cidr", policy("allowed_ips: [{cidr: 10.0.0.0/40}]"), "allowed_ips[0].cidr: \"10.0.0.0/40\" is not a valid CIDR"),
        ("port 0", policy("{allowed_all: true, ports: [{port: 0}]}"), "ports[0].port: port 0 is not within 1-65535"),
        ("port 70000", policy("{allowed_all: true, ports: [{port: 70000}]}"), "ports[0].port: port 70000 is not within 1-65535"),
        ("end_port < port", policy("{allowed_all: true, ports: [{port: 90, end_port: 80}]}"), "ports[0].end_port: end_port 80 is lower than port 90"),
        ("protocol", policy("{allowed_all: true, ports: [{port: 80, protocol: ICMP}]}"), "ports[0].protocol: protocol \"ICMP\" is not one of TCP, UDP, SCTP"),
        ("unknown group in rule", policy("allowed_groups: [wheat]"), "egress[0].allowed_groups[0]: group \"wheat\" does not exist"),
        ("unknown tool in rule", policy("allowed_tools: [ghost]"), "egress[0].allowed_tools[0]: tool \"ghost\" does not exist"),
        ("label key", policy("allowed_custom: [{pod_labels: [{key: \"bad key\", value: v}]}]"), "allowed_custom[0].pod_labels[0].key: invalid label key \"bad key\""),
        ("label value", policy("allowed_custom: [{namespace_labels: [{key: k, value: \"-bad\"}]}]"), "allowed_custom[0].namespace_labels[0].value: invalid label value \"-bad\""),
        ("empty custom", policy("allowed_custom: [{}]"), "allowed_custom[0]: a custom rule needs namespace_labels, pod_labels or both"),
        ("unknown rule field", policy("{allowed_everything: true}"), "unknown field `allowed_everything`"),
        ("policy group missing", "groups: [corn]\nnetwork_policies:\n  - {name: p, groups: [corn, wheat]}\n".into(), "3: network_policies[0].groups[1]: group \"wheat\" does not exist"),
        ("policy name unique per group", "groups: [corn]\nnetwork_policies:\n  - {name: Web, groups: [corn]}\n  - {name: web, groups: [corn]}\n".into(), "4: network_policies[1].name: policy \"web\" is not unique in group \"corn\""),
        ("policy name as k8s name", "groups: [corn]\nnetwork_policies:\n  - {name: \"!!!\", groups: [corn]}\n".into(), "network_policies[0].name: policy name \"!!!\" does not make a valid Kubernetes name"),
        ("group name", "groups: [Corn_Field]\n".into(), "1: groups[0]: group invalid value \"Corn_Field\""),
        ("duplicate group", "groups: [corn, corn]\n".into(), "groups[1]: duplicate group \"corn\""),
        ("tool group missing", "groups: [corn]\ntools:\n  - {name: t, group: wheat}\n".into(), "3: tools[0].group: group \"wheat\" does not exist"),
        ("tool unique per group", "groups: [corn]\ntools:\n  - {name: t, group: corn}\n  - {name: T, group: corn}\n".into(), "tools[1].name: tool \"T\" is not unique in group \"corn\""),
        ("tool name too long", format!("groups: [corn]\ntools:\n  - {{name: {}, group: corn}}\n", "t".repeat(64)), "tools[0].name: tool name"),
        ("attached policy in group", "groups: [corn, crabs]\ntools:\n  - {name: t, group: corn, network_policies: [p]}\nnetwork_policies:\n  - {name: p, groups: [crabs]}\n".into(), "3: tools[0].network_policies[0]: policy \"p\" does not exist in group \"corn\""),
        ("base names unique", "base_network_policies:\n  - {name: b}\n  - {name: b}\n".into(), "3: base_network_policies[1].name: base policy name \"b\" is not unique"),
        ("top-level key", "group: [corn]\n".into(), "1: group: unknown top-level key \"group\""),
        ("missing name", "groups: [corn]\ntools:\n  - {group: corn}\n".into(), "tools[0]: missing field `name`"),
    ];
    let mut failures = Vec::new();
    for (what, yaml, want) in &cases {
        let errs = errors(yaml);
        if !errs.iter().any(|e| e.contains(want)) {
            failures.push(format!("{what}: want {want:?}, got {errs:#?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn all_errors_at_once_across_files() {
    let a = "groups: [corn]\ntools:\n  - {name: t, group: wheat}\n";
    let b = "network_policies:\n  - {name: p, groups: [barley]}\n";
    let errs = Config::parse([("a.yaml", a), ("b.yaml", b)]).unwrap_err();
    let files: Vec<String> = errs
        .diagnostics()
        .iter()
        .map(|d| format!("{}:{}", d.file, d.line))
        .collect();
    assert_eq!(files, ["a.yaml:3", "b.yaml:2"], "{errs:#?}");
}

#[test]
fn single_addresses_become_host_prefixes() {
    let yaml = "groups: [corn]\nnetwork_policies:\n  - {name: p, groups: [corn], egress: [{allowed_ips: [{cidr: 10.0.0.7}, {cidr: \"2001:db8::7\"}, {cidr: 10.1.2.3/16}]}]}\n";
    let config = Config::parse([("c.yaml", yaml)]).unwrap();
    let out = compile(&config, &Options::default(), &State::default());
    let np = out
        .network_policies
        .iter()
        .find(|n| n.metadata.annotations.as_ref().unwrap()["tenancy.palisade.io/policies"] == "p")
        .unwrap();
    let cidrs: Vec<String> = np.spec.as_ref().unwrap().egress.as_ref().unwrap()[0]
        .to
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| p.ip_block.as_ref().unwrap().cidr.clone())
        .collect();
    assert_eq!(cidrs, ["10.0.0.7/32", "2001:db8::7/128", "10.1.0.0/16"]);
}

#[test]
fn field_and_reference_errors_are_reported_together() {
    let yaml = "groups: [corn]\ntools:\n  - {name: \"-t\", group: corn}\nnetwork_policies:\n  - {name: p, groups: [corn], egress: [{allowed_ips: [{cidr: 10.0.0.0/40}], allowed_tools: [\"-t\"]}, {allowed_groups: [wheat]}]}\n";
    assert_eq!(
        errors(yaml),
        [
            "3: tools[0].name: tool name: invalid label value \"-t\": a valid label value must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (a tool's name labels its pods)",
            "5: network_policies[0].egress[0].allowed_ips[0].cidr: \"10.0.0.0/40\" is not a valid CIDR",
            "5: network_policies[0].egress[1].allowed_groups[0]: group \"wheat\" does not exist",
        ],
        "the invalid tool is still known to allowed_tools"
    );
}

#[test]
fn an_unreadable_item_does_not_cause_spurious_reference_errors() {
    let yaml = "groups: [corn]\ntools:\n  - {name: t, group: corn, colour: red}\nnetwork_policies:\n  - {name: p, groups: [corn], egress: [{allowed_tools: [t]}]}\n";
    let errs = errors(yaml);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(errs[0].contains("unknown field `colour`"), "{errs:#?}");
}
