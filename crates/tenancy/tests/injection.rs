//! Names cannot inject YAML: they are validated where they become label values or object
//! names, and the output goes through a serializer that quotes and escapes strings.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use k8s_openapi::api::networking::v1 as net;
use palisade_tenancy::{Config, Error, Options, Output, State, compile};

const INJECTED_DOCUMENT: &str = "t\\n---\\nkind: NetworkPolicy\\napiVersion: networking.k8s.io/v1\\nmetadata: {name: evil, namespace: corn}\\nspec: {podSelector: {}, ingress: [{}]}";

fn errors(yaml: &str) -> Vec<String> {
    match Config::parse([("c.yaml", yaml)]) {
        Ok(_) => Vec::new(),
        Err(e) => e
            .diagnostics()
            .iter()
            .map(|d| format!("{}:{}: {}: {}", d.file, d.line, d.field, d.message))
            .collect(),
    }
}

/// Bug: a tool named "t\n---\nkind: NetworkPolicy..." added a document to the output.
#[test]
fn tool_name_that_injects_a_document_is_rejected() {
    let yaml =
        format!("groups: [corn]\ntools:\n  - name: \"{INJECTED_DOCUMENT}\"\n    group: corn\n");
    let errs = errors(&yaml);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].starts_with("c.yaml:3: tools[0].name: tool name: invalid label value"),
        "{errs:#?}"
    );
}

/// Bug: a tool named "t\n[" made the output unparseable.
#[test]
fn tool_name_that_breaks_the_output_is_rejected() {
    let errs = errors("groups: [corn]\ntools:\n  - {group: corn, name: \"t\\n[\"}\n");
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].starts_with("c.yaml:3: tools[0].name: tool name: invalid label value"),
        "{errs:#?}"
    );
}

#[test]
fn names_that_become_labels_or_annotations_are_validated() {
    let cases = [
        (
            "groups: [corn]\ntools:\n  - {group: corn, name: \"-t\"}\n",
            "c.yaml:3: tools[0].name: tool name: invalid label value \"-t\"",
        ),
        (
            "groups: [corn]\ntools:\n  - {group: corn, name: \"\"}\n",
            "c.yaml:3: tools[0].name: a tool needs a name",
        ),
        (
            "groups: [corn]\nnetwork_policies:\n  - {name: \"p\\nq\", groups: [corn]}\n",
            "c.yaml:3: network_policies[0].name: policy name \"p\\nq\" must not contain ',' or control characters",
        ),
        (
            "groups: [corn]\nnetwork_policies:\n  - {name: \"a,b\", groups: [corn]}\n",
            "c.yaml:3: network_policies[0].name: policy name \"a,b\" must not contain ','",
        ),
        (
            "base_network_policies:\n  - {name: \"b\\n---\"}\n",
            "c.yaml:2: base_network_policies[0].name: policy name \"b\\n---\" must not contain",
        ),
        (
            "base_network_policies:\n  - {name: \" \"}\n",
            "c.yaml:2: base_network_policies[0].name: a policy needs a name",
        ),
        (
            "groups: [\"corn\\n---\"]\n",
            "c.yaml:1: groups[0]: group invalid value",
        ),
    ];
    let mut failures = Vec::new();
    for (yaml, want) in cases {
        let errs = errors(yaml);
        if !errs.iter().any(|e| e.starts_with(want)) {
            failures.push(format!("want {want:?}, got {errs:#?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Bug: `--platform-label` was not validated, so the default base policy could carry a
/// selector that Palisade (and the API server) reject.
#[test]
fn platform_options_that_make_invalid_network_policies_are_rejected() {
    let label = |k: &str, v: &str| [(k.to_string(), v.to_string())];
    for (namespace, labels, want) in [
        (
            "platform",
            label("app", "a b"),
            "invalid label value \"a b\"",
        ),
        ("platform", label("app", "x\n---"), "invalid label value"),
        (
            "platform",
            label("bad key", "api"),
            "invalid label key \"bad key\"",
        ),
        (
            "platform",
            label("/app", "api"),
            "prefix part must be non-empty",
        ),
        (
            "Platform_NS",
            label("app", "api"),
            "namespace invalid value \"Platform_NS\"",
        ),
        ("", label("app", "api"), "namespace invalid value \"\""),
    ] {
        match Options::new(namespace, labels.clone()) {
            Err(e @ Error::Option { .. }) => {
                assert!(e.to_string().contains(want), "{namespace} {labels:?}: {e}")
            }
            other => panic!("{namespace} {labels:?}: {other:?}"),
        }
    }
    let ok = Options::new("tools-api", label("app.kubernetes.io/name", "api")).unwrap();
    assert_eq!(ok.platform_namespace(), "tools-api");
}

/// Emit → parse with Palisade's own YAML reader → the same objects, even when strings
/// that never pass validation (as in a hand-built output) look like YAML structure.
#[test]
fn yaml_output_is_injection_proof_and_reads_back() {
    let hostile = [
        "t\n---\nkind: NetworkPolicy\nmetadata: {name: evil}",
        "t\n[",
        "---",
        "... ",
        "- x",
        "{a: 1}",
        "a: b # c",
        "yes",
        "010",
        "0x1F",
        "1_000",
        "~",
        "null",
        "&anchor",
        "*alias",
        "!tag x",
        "%YAML 1.2",
        "'",
        "\"",
        "tab\there",
        "\u{7}bell",
        " leading",
        "trailing ",
        "",
    ];
    let config = Config::parse([(
        "c.yaml",
        "groups: [corn]\ntools: [{name: t, group: corn}]\nnetwork_policies: [{name: p, groups: [corn], egress: [{allowed_all: true}], forced_policy: true}]\n",
    )])
    .unwrap();
    let mut out: Output = compile(&config, &Options::default(), &State::default());
    for (i, h) in hostile.iter().enumerate() {
        let np = &mut out.network_policies[i % 2];
        np.metadata
            .annotations
            .get_or_insert_default()
            .insert(format!("k{i}"), (*h).to_string());
        out.state
            .default_attachments
            .insert(format!("corn/{h}"), vec![(*h).to_string()]);
    }
    let text = out.to_yaml().unwrap();
    let docs = palisade_model::yaml::parse_documents(&text).unwrap();
    let back: Vec<net::NetworkPolicy> = docs
        .into_iter()
        .map(|d| serde_json::from_value(d.value).unwrap())
        .collect();
    assert_eq!(back, out.network_policies, "{text}");
    let state = State::parse(&out.state.render().unwrap()).unwrap();
    assert_eq!(state, out.state);
    let labels = palisade_model::yaml::parse_documents(&out.labels_yaml().unwrap()).unwrap();
    assert_eq!(
        labels[0].value,
        serde_json::to_value(&out.tool_labels).unwrap()
    );
}

/// The ids digest the rules as written, so typed parsing must not change them: these are
/// the ids of `examples/tenancy` before rules were parsed into types.
#[test]
fn policy_ids_are_those_of_the_rules_as_written() {
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
    let names: std::collections::BTreeSet<String> = out
        .network_policies
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    for id in [
        "tenancy-c99133f20b7c",
        "tenancy-1dbf901634aa",
        "tenancy-5507391b4c8f",
        "tenancy-base-f6ae3eb4bada",
    ] {
        assert!(names.contains(id), "{id} in {names:?}");
    }
}
