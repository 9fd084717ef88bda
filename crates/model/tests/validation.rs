//! One bad-input fixture per validation rule, each with the message and line it must produce.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use palisade_model::{LoadError, LoadOptions, load_sources};

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

fn np(spec: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: p\n  namespace: x\nspec:\n{spec}"
    )
}

fn anp(spec: &str) -> String {
    format!(
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata:\n  name: a\nspec:\n{spec}"
    )
}

fn cnp(spec: &str) -> String {
    format!(
        "apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata:\n  name: c\nspec:\n{spec}"
    )
}

#[test]
fn each_rule_has_its_message_and_line() {
    let subject = "  priority: 1\n  subject:\n    namespaces: {}\n";
    let cases: Vec<(&str, String, &str)> = vec![
        ("label key", np("  podSelector:\n    matchLabels:\n      bad key: v\n"), "9: spec.podSelector.matchLabels.bad key: invalid label key"),
        ("label value", np("  podSelector:\n    matchLabels:\n      k: -v-\n"), "9: spec.podSelector.matchLabels.k: invalid label value"),
        ("In needs values", np("  podSelector:\n    matchExpressions:\n    - key: k\n      operator: In\n"), "spec.podSelector.matchExpressions[0].values: Required value"),
        ("Exists has no values", np("  podSelector:\n    matchExpressions:\n    - key: k\n      operator: Exists\n      values: [a]\n"), "11: spec.podSelector.matchExpressions[0].values: Forbidden"),
        ("bad operator", np("  podSelector:\n    matchExpressions:\n    - key: k\n      operator: Equals\n      values: [a]\n"), "10: spec.podSelector.matchExpressions[0].operator: Invalid value: \"Equals\": not a valid selector operator"),
        ("port 0", np("  ingress:\n  - ports:\n    - port: 0\n"), "9: spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535"),
        ("port 65536", np("  egress:\n  - ports:\n    - port: 65536\n"), "spec.egress[0].ports[0].port: Invalid value: 65536"),
        ("endPort without port", np("  ingress:\n  - ports:\n    - endPort: 90\n"), "spec.ingress[0].ports[0].port: Required value: must be specified when `endPort` is specified"),
        ("endPort with named port", np("  ingress:\n  - ports:\n    - port: http\n      endPort: 90\n"), "10: spec.ingress[0].ports[0].endPort: Forbidden: may not be specified when `port` is non-numeric"),
        ("endPort < port", np("  ingress:\n  - ports:\n    - port: 90\n      endPort: 80\n"), "10: spec.ingress[0].ports[0].endPort: Invalid value: 80: must be greater than or equal to `port`"),
        ("protocol", np("  ingress:\n  - ports:\n    - protocol: ICMP\n"), "9: spec.ingress[0].ports[0].protocol: Unsupported value: \"ICMP\""),
        ("lowercase protocol", np("  ingress:\n  - ports:\n    - protocol: tcp\n"), "spec.ingress[0].ports[0].protocol: Unsupported value: \"tcp\""),
        ("policyTypes", np("  policyTypes: [Ingress, Sideways]\n"), "7: spec.policyTypes[1]: Unsupported value: \"Sideways\""),
        ("bad port name", np("  ingress:\n  - ports:\n    - port: Not_A_Name\n"), "spec.ingress[0].ports[0].port: invalid port name"),
        ("cidr syntax", np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/33\n"), "10: spec.ingress[0].from[0].ipBlock.cidr: Invalid value: \"10.0.0.0/33\": must be a valid CIDR"),
        ("except outside", np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/16\n        except: [10.1.0.0/24]\n"), "11: spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: \"10.1.0.0/24\": must be a strict subset of `cidr`"),
        ("except equal", np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/16\n        except: [10.0.0.0/16]\n"), "ipBlock.except[0]: Invalid value: \"10.0.0.0/16\": must be a strict subset"),
        ("except other family", np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/16\n        except: [\"fd00::/64\"]\n"), "ipBlock.except[0]: Invalid value: \"fd00::/64\": must be a strict subset"),
        ("ipBlock and selector", np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/16\n      podSelector: {}\n"), "spec.ingress[0].from[0]: Forbidden: may not specify both ipBlock and another peer"),
        ("empty peer", np("  ingress:\n  - from:\n    - {}\n"), "spec.ingress[0].from[0]: Required value: must specify a peer"),
        ("port as float", np("  ingress:\n  - ports:\n    - port: 1.5\n"), "spec.ingress[0].ports[0].port"),
        ("anp priority", anp("  priority: 1001\n  subject:\n    namespaces: {}\n"), "6: spec.priority: Invalid value: 1001: must be between 0 and 1000"),
        ("anp subject union", anp("  priority: 1\n  subject:\n    namespaces: {}\n    pods:\n      namespaceSelector: {}\n      podSelector: {}\n"), "spec.subject: Invalid value: exactly one of namespaces, pods must be set"),
        ("anp no peers", anp(&format!("{subject}  ingress:\n  - action: Deny\n    from: []\n")), "spec.ingress[0].from: Invalid value: 0: must have at least 1 items"),
        ("anp peer union", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - namespaces: {{}}\n      networks: [10.0.0.0/8]\n")), "spec.egress[0].to[0]: Invalid value: must have at most 1 properties"),
        ("anp empty peer", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - {{}}\n")), "spec.egress[0].to[0]: Invalid value: must have at least 1 properties"),
        ("anp rule name", anp(&format!("{subject}  egress:\n  - action: Deny\n    name: {}\n    to:\n    - namespaces: {{}}\n", "n".repeat(101))), "spec.egress[0].name: Too long"),
        ("anp action", anp(&format!("{subject}  egress:\n  - action: Accept\n    to:\n    - namespaces: {{}}\n")), "spec.egress[0].action: Unsupported value: \"Accept\""),
        ("anp port union", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - namespaces: {{}}\n    ports:\n    - namedPort: http\n      portNumber: {{port: 80}}\n")), "spec.egress[0].ports[0]: Invalid value: exactly one of portNumber, namedPort, portRange"),
        ("anp range order", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - namespaces: {{}}\n    ports:\n    - portRange: {{start: 90, end: 80}}\n")), "spec.egress[0].ports[0].portRange: Invalid value: Start port must be less than End port"),
        ("anp ingress networks", anp(&format!("{subject}  ingress:\n  - action: Deny\n    from:\n    - networks: [10.0.0.0/8]\n")), "spec.ingress[0].from[0].networks: Forbidden: only allowed in egress peers"),
        ("anp named port to networks", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - networks: [10.0.0.0/8]\n    ports:\n    - namedPort: http\n")), "networks/nodes peer cannot be set with namedPorts"),
        ("anp bad network", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - networks: [10.0.0.300/8]\n")), "spec.egress[0].to[0].networks[0]: Invalid value: \"10.0.0.300/8\": Invalid CIDR format provided"),
        ("anp too many rules", anp(&format!("{subject}  ingress:\n{}", "  - action: Deny\n    from: [{namespaces: {}}]\n".repeat(101))), "spec.ingress: Too many: 101: must have at most 100 items"),
        ("banp name", "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata:\n  name: other\nspec:\n  subject:\n    namespaces: {}\n".to_string(), "4: metadata.name: Invalid value: only one baseline admin network policy with metadata.name=\"default\""),
        ("banp pass", "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata:\n  name: default\nspec:\n  subject:\n    namespaces: {}\n  ingress:\n  - action: Pass\n    from: [{namespaces: {}}]\n".to_string(), "9: spec.ingress[0].action: Unsupported value: \"Pass\""),
        ("cnp tier", cnp("  tier: Middle\n  priority: 1\n  subject:\n    namespaces: {}\n"), "6: spec.tier: Unsupported value: \"Middle\""),
        ("cnp rules", cnp(&format!("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {{}}\n  ingress:\n{}", "  - action: Deny\n    from: [{namespaces: {}}]\n".repeat(26))), "spec.ingress: Too many: 26: must have at most 25 items"),
        ("cnp peers", cnp(&format!("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {{}}\n  ingress:\n  - action: Deny\n    from:\n{}", "    - namespaces: {}\n".repeat(26))), "spec.ingress[0].from: Too many: 26: must have at most 25 items"),
        ("cnp range", cnp("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {}\n  ingress:\n  - action: Deny\n    from: [{namespaces: {}}]\n    protocols:\n    - tcp:\n        destinationPort:\n          range: {start: 80, end: 80}\n"), "spec.ingress[0].protocols[0].tcp.destinationPort.range: Invalid value: Start port must be less than End port"),
        ("cnp action", cnp("  tier: Baseline\n  priority: 1\n  subject:\n    namespaces: {}\n  egress:\n  - action: Allow\n    to: [{namespaces: {}}]\n"), "spec.egress[0].action: Unsupported value: \"Allow\""),
        ("cnp domainNames with a named port", cnp("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {}\n  egress:\n  - action: Accept\n    to: [{domainNames: [example.com]}]\n    protocols:\n    - destinationNamedPort: http\n"), "11: spec.egress[0]: Invalid value: networks/nodes/domainNames peer cannot be set with namedPorts"),
        ("cnp port number", cnp("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {}\n  egress:\n  - action: Deny\n    to: [{namespaces: {}}]\n    protocols:\n    - udp:\n        destinationPort: {number: 0}\n"), "spec.egress[0].protocols[0].udp.destinationPort.number: Invalid value: 0"),
        ("pod container port", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    ports:\n    - containerPort: 70000\n".to_string(), "9: spec.containers[0].ports[0].containerPort: Invalid value: 70000"),
        ("pod ip", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nstatus:\n  podIP: 10.0.0.256\n".to_string(), "6: status.podIP: Invalid value: \"10.0.0.256\""),
        ("namespace name", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: Bad_Name\n".to_string(), "4: metadata.name: invalid value \"Bad_Name\""),
        ("missing name", "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  namespace: x\nspec: {}\n".to_string(), "metadata.name: Required value"),
        ("unsupported version", "apiVersion: networking.k8s.io/v2\nkind: NetworkPolicy\nmetadata:\n  name: p\n".to_string(), "1: apiVersion: Unsupported value: \"networking.k8s.io/v2\""),
        ("no kind", "apiVersion: v1\nmetadata:\n  name: p\n".to_string(), "kind: Required value"),
        ("misspelt selector field", np("  podSelector:\n    matchlabels: {app: db}\n"), "8: spec.podSelector.matchlabels: unknown field \"spec.podSelector.matchlabels\""),
        ("misspelt rule field", np("  ingress:\n  - form:\n    - podSelector: {}\n"), "spec.ingress[0].form: unknown field"),
        ("anp misspelt spec field", anp("  priority: 1\n  subjet:\n    namespaces: {}\n"), "7: spec.subjet: unknown field"),
        ("anp misspelt selector", anp("  priority: 1\n  subject:\n    namespaces:\n      matchlabels: {a: b}\n"), "spec.subject.namespaces.matchlabels: unknown field"),
        ("cnp misspelt port", cnp("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {}\n  egress:\n  - action: Deny\n    to: [{namespaces: {}}]\n    protocols:\n    - tcp:\n        destinationPort: {numbr: 80}\n"), "destinationPort.numbr: unknown field"),
        ("yaml syntax", "kind: Pod\nmetadata: [unclosed\n".to_string(), "YAML syntax error"),
    ];
    let mut failures = Vec::new();
    for (what, yaml, want) in &cases {
        let errs = errors(yaml);
        if !errs.iter().any(|e| e.contains(want)) {
            failures.push(format!(
                "{what}: want an error containing {want:?}, got {errs:#?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn all_errors_are_reported_at_once_with_file() {
    let yaml = format!(
        "{}\n---\n{}",
        np("  policyTypes: [Bad]\n"),
        np("  ingress:\n  - ports:\n    - port: 0\n")
    );
    let err = load_sources([("two.yaml", yaml.as_str())], LoadOptions::default()).unwrap_err();
    let LoadError::Invalid(d) = err else { panic!() };
    assert_eq!(d.len(), 2, "{d:#?}");
    assert!(d.iter().all(|d| &*d.file == "two.yaml"));
    assert_eq!(
        d[1].to_string(),
        "two.yaml:18: error: NetworkPolicy x/p: spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"
    );
}

#[test]
fn skip_invalid_keeps_the_good_objects() {
    let yaml = format!(
        "{}\n---\n{}",
        np("  policyTypes: [Bad]\n"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: good\n"
    );
    assert!(load_sources([("f", yaml.as_str())], LoadOptions::default()).is_err());
    let loaded = load_sources(
        [("f", yaml.as_str())],
        LoadOptions {
            skip_invalid: true,
            field_lines: true,
        },
    )
    .unwrap();
    assert_eq!(
        loaded.cluster.namespaces.len(),
        1,
        "the invalid policy implies no namespace"
    );
    assert!(loaded.cluster.network_policies.is_empty());
    assert!(
        loaded
            .diagnostics
            .iter()
            .any(|d| d.message.contains("Sideways") || d.message.contains("\"Bad\""))
    );
}

#[test]
fn lists_unknown_kinds_and_defaults() {
    let yaml = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: s}
- apiVersion: networking.k8s.io/v1
  kind: NetworkPolicy
  metadata: {name: egress-rules}
  spec:
    egress: [{}]
- apiVersion: v1
  kind: PodList
  items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: p, namespace: q}
"#;
    let loaded = load_sources([("list.yaml", yaml)], LoadOptions::default()).unwrap();
    let c = &loaded.cluster;
    assert_eq!(c.pods.len(), 1);
    let np = &c.network_policies[0];
    assert_eq!(np.namespace, "default", "namespace defaults like kubectl");
    assert!(
        np.policy_types.ingress && np.policy_types.egress,
        "defaulted from egress rules"
    );
    assert!(np.pod_selector.is_empty());
    assert!(
        loaded
            .diagnostics
            .iter()
            .any(|d| d.message.contains("ConfigMap is not a kind") && d.line == 6)
    );
    let names: Vec<&str> = c.namespaces.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["default", "q"], "implied namespaces");
    assert_eq!(
        c.namespaces[1]
            .labels
            .get("kubernetes.io/metadata.name")
            .map(String::as_str),
        Some("q")
    );
}

#[test]
fn unknown_fields_of_cluster_objects_are_notices() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  colour: blue\nspec:\n  containers:\n  - name: c\n";
    let loaded = load_sources([("p.yaml", yaml)], LoadOptions::default()).unwrap();
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.field == "metadata.colour")
        .unwrap();
    assert_eq!(
        d.to_string(),
        "p.yaml:5: notice: Pod p: metadata.colour: unknown field \"metadata.colour\""
    );
}

/// ClusterNetworkPolicy's `pods.namespaceSelector` is optional (v1alpha2): absent, it
/// selects every namespace, in the subject and in peers; the v1alpha1 kinds require it.
#[test]
fn a_cluster_network_policy_pods_selector_without_namespaces_selects_every_namespace() {
    let yaml = cnp(
        "  tier: Admin\n  priority: 1\n  subject:\n    pods:\n      podSelector: {matchLabels: {app: db}}\n  ingress:\n  - action: Deny\n    from: [{pods: {podSelector: {}}}]\n",
    );
    let loaded = load_sources([("c.yaml", yaml.as_str())], LoadOptions::default()).unwrap();
    let p = &loaded.cluster.admin_policies[0];
    assert!(
        matches!(&p.subject, palisade_model::Subject::Pods { namespaces, .. } if *namespaces == Default::default()),
        "{:?}",
        p.subject
    );
    let v1alpha1 = anp("  priority: 1\n  subject:\n    pods:\n      podSelector: {}\n");
    assert_eq!(
        errors(&v1alpha1),
        ["8: spec.subject.pods.namespaceSelector: Required value"]
    );
}

/// CIDRs in the forms strict IP/CIDR validation refuses in new values (Kubernetes 1.33
/// and later) are read as objects stored before are read, with a notice each.
#[test]
fn legacy_cidr_forms_are_read_with_a_notice() {
    for (cidr, why) in [
        ("10.0.0.1/8", "bits set beyond the prefix length"),
        ("10.0.0.0/08", "a prefix length with a leading 0"),
        ("'::ffff:10.0.0.0/104'", "an IPv4-mapped IPv6 address"),
    ] {
        let yaml = np(&format!(
            "  ingress:\n  - from:\n    - ipBlock:\n        cidr: {cidr}\n"
        ));
        let loaded = load_sources([("p.yaml", yaml.as_str())], LoadOptions::default()).unwrap();
        let notice = loaded
            .diagnostics
            .iter()
            .find(|d| d.field.ends_with("ipBlock.cidr"))
            .unwrap_or_else(|| panic!("{cidr}: no notice"));
        assert!(notice.message.contains(why), "{cidr}: {}", notice.message);
    }
    let yaml = np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/8\n");
    let loaded = load_sources([("p.yaml", yaml.as_str())], LoadOptions::default()).unwrap();
    assert!(loaded.diagnostics.iter().all(|d| !d.field.contains("cidr")));
}

#[test]
fn json_input_and_duplicates() {
    let json =
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a","labels":{"team":"red"}}}"#;
    let loaded = load_sources([("ns.json", json)], LoadOptions::default()).unwrap();
    assert_eq!(
        loaded.cluster.namespaces[0]
            .labels
            .get("team")
            .map(String::as_str),
        Some("red")
    );
    let dup =
        load_sources([("a.json", json), ("b.json", json)], LoadOptions::default()).unwrap_err();
    let LoadError::Invalid(d) = dup else { panic!() };
    assert!(
        d[0].message.contains("already defined at a.json:1"),
        "{d:?}"
    );
}

#[test]
fn staged_policies_are_kept_apart() {
    let text = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: enforced, namespace: x}
spec: {podSelector: {}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: trial, namespace: x, annotations: {palisade.dev/staged: "true"}}
spec: {podSelector: {}}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: trial, annotations: {palisade.dev/staged: "true"}}
spec: {priority: 1, subject: {namespaces: {}}, ingress: [{action: Deny, from: [{namespaces: {}}]}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: explicit, namespace: x, annotations: {palisade.dev/staged: "false"}}
spec: {podSelector: {}}
"#;
    let c = palisade_model::load_str(text).unwrap().cluster;
    let names = |nps: &[palisade_model::NetworkPolicy]| {
        nps.iter().map(|p| p.name.clone()).collect::<Vec<_>>()
    };
    assert_eq!(names(&c.network_policies), ["enforced", "explicit"]);
    assert_eq!(names(&c.staged.network_policies), ["trial"]);
    assert_eq!(c.staged.admin_policies.len(), 1);
    assert!(c.admin_policies.is_empty());
    let all = c.with_staged();
    assert_eq!(all.network_policies.len(), 3);
    assert_eq!(all.admin_policies.len(), 1);
    assert!(all.staged.is_empty());
}

#[test]
fn a_staged_annotation_other_than_true_or_false_is_an_error() {
    let text = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: trial, namespace: x, annotations: {palisade.dev/staged: "yes"}}
spec: {podSelector: {}}
"#;
    let err = palisade_model::load_str(text).unwrap_err();
    let palisade_model::LoadError::Invalid(diags) = err else {
        panic!("{err}")
    };
    assert_eq!(diags[0].field, "metadata.annotations[palisade.dev/staged]");
    assert_eq!(diags[0].line, 4);
}

#[test]
fn only_a_load_for_lint_keeps_field_lines_and_only_for_the_kinds_lint_reports_on() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x}
status: {podIP: 10.0.0.1}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: p
  namespace: x
  annotations: {palisade.dev/lint-ignore: PAL002}
spec:
  podSelector: {}
  ingress:
  - from:
    - podSelector: {}
"#;
    let load = |field_lines| {
        load_sources(
            [("f.yaml", text)],
            LoadOptions {
                skip_invalid: false,
                field_lines,
            },
        )
        .unwrap()
        .cluster
    };
    let plain = load(false);
    assert!(plain.pods[0].origin.fields.is_none());
    assert!(plain.network_policies[0].origin.fields.is_none());
    let lint = load(true);
    assert!(lint.pods[0].origin.fields.is_none(), "pods keep no lines");
    let fields = lint.network_policies[0].origin.fields.as_ref().unwrap();
    assert_eq!(fields.lint_ignore.as_deref(), Some("PAL002"));
    assert_eq!(fields.lines.line_of("spec.ingress[0].from[0]"), Some(17));
    assert_eq!(fields.lines.line_of("metadata.name"), Some(10));
}
