//! Validation parity with the real API server: objects sent to kube-apiserver with a
//! server-side dry run (`kubectl create --dry-run=server`, strict field validation) and
//! read by Palisade's loader are accepted or refused alike. NetworkPolicy, Namespace and Pod
//! are validated by the API server itself, the admin kinds by the CRDs' schema and CEL
//! rules. The objects: the model's validation table, valid objects at the same limits, the
//! fuzz regressions that are Kubernetes objects, and a few hundred variants generated field
//! by field around each limit. Without the built control plane the test prints why it is
//! skipped (and fails under `CI=true`).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::collections::BTreeSet;

use common::plane;
use palisade_testenv::ControlPlane;

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

/// Whether Palisade's loader accepts `yaml` (what every command and the agent read).
fn palisade_accepts(yaml: &str) -> bool {
    palisade_model::load_sources([("object.yaml", yaml)], Default::default()).is_ok()
}

/// Whether the API server accepts each of `objects` (`kind/name` and YAML each, the kind
/// in lower case as kubectl prints it): one dry run of all that are named apart, then one
/// per object that batch did not report as created (a batch stops at a document kubectl
/// cannot decode, its error lines do not always name the object, and two objects of one
/// name cannot be told apart in it).
fn api_server_accepts(cp: &ControlPlane, objects: &[(String, String)]) -> Vec<bool> {
    // `networkpolicy.networking.k8s.io/v3 created (server dry run)`: `networkpolicy/v3`.
    let created = |out: &[u8]| -> BTreeSet<String> {
        String::from_utf8_lossy(out)
            .lines()
            .filter_map(|l| l.strip_suffix(" created (server dry run)"))
            .filter_map(|l| l.split_once('/'))
            .map(|(resource, name)| format!("{}/{name}", resource.split('.').next().unwrap_or("")))
            .collect()
    };
    let mut seen = BTreeSet::new();
    let first: Vec<bool> = objects.iter().map(|(key, _)| seen.insert(key)).collect();
    let stream: Vec<&str> = objects
        .iter()
        .zip(&first)
        .filter(|(_, first)| **first)
        .map(|((_, yaml), _)| yaml.as_str())
        .collect();
    let batch = cp.kubectl_stdin(
        &["create", "--dry-run=server", "-f", "-"],
        &stream.join("\n---\n"),
    );
    let in_batch = created(&batch.stdout);
    objects
        .iter()
        .zip(first)
        .map(|((key, yaml), first)| {
            (first && in_batch.contains(key)) || {
                let one = cp.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], yaml);
                one.status.success() && created(&one.stdout).contains(key)
            }
        })
        .collect()
}

/// Each object compared: `(what, yaml, expected)` where `expected` is `Some(valid)` for
/// the hand-written table and `None` for generated variants (the API server decides).
/// Returns every disagreement, and every table entry both get wrong, as a sentence.
fn compare(cp: &ControlPlane, cases: Vec<(String, String, Option<bool>)>) -> Vec<String> {
    // Each object under a name of its own (`v0`, `v1`, …) unless its name is what is
    // varied, so that one batch can hold most of them.
    let named: Vec<(String, String)> = cases
        .iter()
        .enumerate()
        .map(|(i, (_, yaml, _))| {
            let mut yaml = yaml.clone();
            let mut name = format!("v{i}");
            if let Some(placeholder) = ["  name: p\n", "  name: a\n", "  name: c\n"]
                .into_iter()
                .find(|p| yaml.contains(p))
            {
                yaml = yaml.replacen(placeholder, &format!("  name: {name}\n"), 1);
            } else if let Some(own) = yaml.lines().find_map(|l| {
                l.strip_prefix("  name: ").or_else(|| {
                    l.strip_prefix("metadata: {name: ")?
                        .split([',', '}'])
                        .next()
                })
            }) {
                name = own.trim_matches('\'').to_string();
            }
            let kind = yaml
                .lines()
                .find_map(|l| l.strip_prefix("kind: "))
                .unwrap_or("")
                .to_lowercase();
            let name = format!("{kind}/{name}");
            (name, yaml)
        })
        .collect();
    let accepted = api_server_accepts(cp, &named);
    let mut disagreements = Vec::new();
    for (((what, _, expected), (_, yaml)), api) in cases.iter().zip(&named).zip(accepted) {
        let palisade = palisade_accepts(yaml);
        if api != palisade {
            disagreements.push(format!(
                "{what}: API server {}, Palisade {}",
                if api { "accepts" } else { "refuses" },
                if palisade { "accepts" } else { "refuses" }
            ));
        } else if expected.is_some_and(|valid| valid != api) {
            disagreements.push(format!(
                "{what}: both {} it",
                if api { "accept" } else { "refuse" }
            ));
        }
    }
    eprintln!("{} objects compared", cases.len());
    disagreements
}

/// The model's validation table (its invalid objects), and valid objects at the same
/// boundaries: accepted and refused alike, and as the table says.
#[test]
fn the_validation_table_agrees_with_the_api_server() {
    let Some(cp) = plane("the_validation_table_agrees_with_the_api_server") else {
        return;
    };
    cp.reset();
    cp.kubectl_ok(&["create", "namespace", "x"]);
    let subject = "  priority: 1\n  subject:\n    namespaces: {}\n";
    // The model's validation table (crates/model/tests/validation.rs): each should be
    // refused by both.
    let invalid: Vec<(&str, String, &str)> = vec![
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
    let valid: Vec<(&str, String)> = vec![
        ("port 1 and 65535", np("  ingress:\n  - ports:\n    - port: 1\n    - port: 65535\n")),
        ("endPort equal to port", np("  ingress:\n  - ports:\n    - port: 80\n      endPort: 80\n")),
        ("named port", np("  ingress:\n  - ports:\n    - port: http\n")),
        ("except strict subset", np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/16\n        except: [10.0.1.0/24]\n")),
        ("selector In", np("  podSelector:\n    matchExpressions:\n    - key: k\n      operator: In\n      values: [a]\n")),
        ("SCTP", np("  ingress:\n  - ports:\n    - protocol: SCTP\n      port: 9\n")),
        ("empty spec", np("  podSelector: {}\n")),
        ("anp priority 1000", anp("  priority: 1000\n  subject:\n    namespaces: {}\n")),
        ("anp 100 rules", anp(&format!("{subject}  ingress:\n{}", "  - action: Deny\n    from: [{namespaces: {}}]\n".repeat(100)))),
        ("anp networks in egress", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - networks: [10.0.0.0/8]\n"))),
        ("anp port range", anp(&format!("{subject}  egress:\n  - action: Deny\n    to:\n    - namespaces: {{}}\n    ports:\n    - portRange: {{start: 80, end: 90}}\n"))),
        ("anp pass", anp(&format!("{subject}  ingress:\n  - action: Pass\n    from: [{{namespaces: {{}}}}]\n"))),
        ("banp default", "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata:\n  name: default\nspec:\n  subject:\n    namespaces: {}\n  ingress:\n  - action: Deny\n    from: [{namespaces: {}}]\n".to_string()),
        ("cnp 25 rules", cnp(&format!("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {{}}\n  ingress:\n{}", "  - action: Deny\n    from: [{namespaces: {}}]\n".repeat(25)))),
        ("cnp range", cnp("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {}\n  ingress:\n  - action: Deny\n    from: [{namespaces: {}}]\n    protocols:\n    - tcp:\n        destinationPort:\n          range: {start: 80, end: 81}\n")),
        ("cnp baseline accept", cnp("  tier: Baseline\n  priority: 1\n  subject:\n    namespaces: {}\n  egress:\n  - action: Accept\n    to: [{namespaces: {}}]\n")),
        ("cnp port 65535", cnp("  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {}\n  egress:\n  - action: Deny\n    to: [{namespaces: {}}]\n    protocols:\n    - udp:\n        destinationPort: {number: 65535}\n")),
    ];
    let cases = invalid
        .into_iter()
        .map(|(what, yaml, _)| (what.to_string(), yaml, Some(false)))
        .chain(
            valid
                .into_iter()
                .map(|(what, yaml)| (what.to_string(), yaml, Some(true))),
        )
        .collect();
    // Each written down in docs/semantics.md (Validation), with the reason.
    assert_eq!(
        compare(&cp, cases),
        ["anp range order: API server accepts, Palisade refuses"]
    );
}

/// `(what, yaml)` for every `value` put in place of `{}` in `template`.
fn family(what: &str, template: &str, values: &[&str]) -> Vec<(String, String)> {
    values
        .iter()
        .map(|v| (format!("{what}: {v}"), template.replace("{}", v)))
        .collect()
}

/// Variants of each validated field, at and around its limits, in each kind.
fn variants() -> Vec<(String, String)> {
    let ports = [
        "0",
        "1",
        "80",
        "65535",
        "65536",
        "-1",
        "1.5",
        "'80'",
        "'0x50'",
        "http",
        "a",
        "http-1",
        "-http",
        "http-",
        "h--p",
        "abcdefghijklmno",
        "abcdefghijklmnop",
        "HTTP",
        "1http",
        "a_b",
        "''",
    ];
    let cidrs = [
        "10.0.0.0/8",
        "10.0.0.1/8",
        "0.0.0.0/0",
        "'::/0'",
        "'fd00::/8'",
        "'fd00::1/128'",
        "10.0.0.0/33",
        "10.0.0.0",
        "010.0.0.0/8",
        "10.0.0.0/08",
        "1.2.3.4/32",
        "'::ffff:10.0.0.0/104'",
        "10.0.0.0/-1",
        "''",
        "'fd00::/129'",
        "' 10.0.0.0/8'",
        "'FD00::/8'",
        "10.0.0.0/0",
    ];
    let keys = [
        "a",
        "a.b",
        "a/b",
        "example.com/a",
        "-a",
        "a-",
        "'a_b'",
        "A",
        "a..b",
        "example.com/",
        "/a",
        "kubernetes.io/x",
        "a/b/c",
        "Ex.com/a",
        "'-.com/a'",
    ];
    let long = |n: usize| "a".repeat(n);
    let (k63, k64, p254) = (long(63), long(64), format!("{}/a", long(254)));
    let mut keys: Vec<&str> = keys.to_vec();
    keys.extend([k63.as_str(), k64.as_str(), p254.as_str()]);
    let values = [
        "''",
        "a",
        "-a",
        "a-",
        "A_b.c",
        "'a b'",
        "'1'",
        "a..b",
        "a/b",
        k63.as_str(),
        k64.as_str(),
    ];
    let mut out = Vec::new();
    let mut add = |v: Vec<(String, String)>| out.extend(v);

    // NetworkPolicy (the API server's own validation).
    add(family(
        "np ingress port",
        &np("  ingress:\n  - ports:\n    - port: {}\n"),
        &ports,
    ));
    add(family(
        "np egress port",
        &np("  egress:\n  - ports:\n    - port: {}\n"),
        &["0", "65536", "http", "HTTP"],
    ));
    add(family(
        "np endPort after port 80",
        &np("  ingress:\n  - ports:\n    - port: 80\n      endPort: {}\n"),
        &["0", "1", "79", "80", "81", "65535", "65536", "'90'"],
    ));
    add(family(
        "np endPort 90 after port",
        &np("  ingress:\n  - ports:\n    - port: {}\n      endPort: 90\n"),
        &["http", "'80'", "0", "null"],
    ));
    add(family(
        "np protocol",
        &np("  ingress:\n  - ports:\n    - protocol: {}\n      port: 53\n"),
        &["TCP", "UDP", "SCTP", "tcp", "ICMP", "''", "Tcp", "null"],
    ));
    add(family(
        "np ipBlock cidr",
        &np("  ingress:\n  - from:\n    - ipBlock:\n        cidr: {}\n"),
        &cidrs,
    ));
    add(family(
        "np egress ipBlock cidr",
        &np("  egress:\n  - to:\n    - ipBlock:\n        cidr: {}\n"),
        &["10.0.0.1/8", "010.0.0.0/8", "'::ffff:10.0.0.0/104'"],
    ));
    add(family(
        "np except of 10.0.0.0/16",
        &np(
            "  ingress:\n  - from:\n    - ipBlock:\n        cidr: 10.0.0.0/16\n        except: [{}]\n",
        ),
        &[
            "10.0.1.0/24",
            "10.0.0.0/16",
            "10.1.0.0/24",
            "10.0.0.0/8",
            "10.0.1.1/24",
            "'fd00::/64'",
            "10.0.1.0/33",
            "10.0.0.0/17",
            "10.0.0.1/32",
            "010.0.1.0/24",
            "''",
        ],
    ));
    add(family(
        "np except of fd00::/48",
        &np(
            "  ingress:\n  - from:\n    - ipBlock:\n        cidr: 'fd00::/48'\n        except: [{}]\n",
        ),
        &[
            "'fd00::/64'",
            "'fd00::/48'",
            "'fd01::/64'",
            "10.0.0.0/8",
            "'fd00::1/128'",
        ],
    ));
    add(family(
        "np pod selector label key",
        &np("  podSelector:\n    matchLabels:\n      {}: v\n"),
        &keys,
    ));
    add(family(
        "np namespace selector label key",
        &np(
            "  ingress:\n  - from:\n    - namespaceSelector:\n        matchLabels:\n          {}: v\n",
        ),
        &["a/b", "-a", k64.as_str(), "a/b/c"],
    ));
    add(family(
        "np pod selector label value",
        &np("  podSelector:\n    matchLabels:\n      k: {}\n"),
        &values,
    ));
    add(family(
        "np expression key",
        &np("  podSelector:\n    matchExpressions:\n    - key: {}\n      operator: Exists\n"),
        &["a", "-a", "a/b/c", k64.as_str(), "''"],
    ));
    add(family(
        "np expression value",
        &np(
            "  podSelector:\n    matchExpressions:\n    - key: k\n      operator: In\n      values: [{}]\n",
        ),
        &["a", "-a", "''", k64.as_str(), "'a b'"],
    ));
    for op in [
        "In",
        "NotIn",
        "Exists",
        "DoesNotExist",
        "Equals",
        "in",
        "''",
    ] {
        for vals in [
            "",
            "\n      values: []",
            "\n      values: [a]",
            "\n      values: [a, b]",
        ] {
            add(vec![(
                format!(
                    "np operator {op} with values{}",
                    vals.trim_start_matches("\n      values:")
                ),
                np(&format!(
                    "  podSelector:\n    matchExpressions:\n    - key: k\n      operator: {op}{vals}\n"
                )),
            )]);
        }
    }
    add(family(
        "np policyTypes",
        &np("  policyTypes: {}\n"),
        &[
            "[Ingress]",
            "[Egress]",
            "[Ingress, Egress]",
            "[Egress, Ingress]",
            "[]",
            "[ingress]",
            "[Ingress, Ingress]",
            "[Ingress, Egress, Ingress]",
            "[Sideways]",
        ],
    ));
    add(family(
        "np ingress peer",
        &np("  ingress:\n  - from:\n    - {}\n"),
        &[
            "{podSelector: {}}",
            "{namespaceSelector: {}}",
            "{podSelector: {}, namespaceSelector: {}}",
            "{ipBlock: {cidr: 10.0.0.0/8}, namespaceSelector: {}}",
            "{}",
            "{ipBlock: {}}",
            "{ipBlock: {cidr: 10.0.0.0/8, except: []}}",
        ],
    ));
    add(family(
        "np rule",
        &np("  ingress:\n  - {}\n"),
        &[
            "{}",
            "{from: []}",
            "{ports: []}",
            "{ports: [{}]}",
            "{ports: [{port: 80, protocol: UDP, endPort: 81}]}",
        ],
    ));
    add(family(
        "np spec",
        &np("{}\n"),
        &[
            "  {}",
            "  podSelector: {}\n  ingress: []",
            "  podSelector: {}\n  egress: [{}]",
        ],
    ));
    let (n63, n64, n253, n254) = (long(63), long(64), long(253), long(254));
    for name in [
        "a-b",
        "A",
        "a_b",
        "a.b",
        "-a",
        "a.",
        "'1'",
        n63.as_str(),
        n64.as_str(),
        n253.as_str(),
        n254.as_str(),
    ] {
        add(vec![(
            format!("np name: {}", name.len()),
            np("  podSelector: {}\n").replacen("  name: p\n", &format!("  name: {name}\n"), 1),
        )]);
    }

    // Namespaces and Pods (what a dump holds of them).
    for name in [
        "ns-a",
        "ns.a",
        "NS",
        "-ns",
        "ns-",
        "1ns",
        &format!("n{}", long(62)),
        &format!("n{}", long(63)),
    ] {
        add(vec![(
            format!("namespace name: {name}"),
            format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n"),
        )]);
    }
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: x\nspec:\n  containers:\n  - name: c\n    image: i\n    ports:\n    - {}\n";
    add(family(
        "pod port",
        pod,
        &[
            "{containerPort: 0}",
            "{containerPort: 1}",
            "{containerPort: 65535}",
            "{containerPort: 65536}",
            "{containerPort: 80, name: http}",
            "{containerPort: 80, name: HTTP}",
            "{containerPort: 80, name: abcdefghijklmnop}",
            "{containerPort: 80, name: '1'}",
            "{containerPort: 80, protocol: ICMP}",
            "{containerPort: 80, protocol: udp}",
            "{containerPort: 80, protocol: SCTP}",
            "{name: http}",
        ],
    ));

    // AdminNetworkPolicy (the v1alpha1 CRD's schema and CEL rules).
    let subject = "  priority: 1\n  subject:\n    namespaces: {}\n";
    let anp_egress = |to: &str, ports: &str| {
        anp(&format!(
            "{subject}  egress:\n  - action: Deny\n    to:\n    - {to}\n{ports}"
        ))
    };
    for priority in ["-1", "0", "1", "999", "1000", "1001", "'1'"] {
        add(vec![(
            format!("anp priority: {priority}"),
            anp(&format!(
                "  priority: {priority}\n  subject:\n    namespaces: {{}}\n"
            )),
        )]);
    }
    add(family(
        "anp subject",
        &anp("  priority: 1\n  subject: {}\n"),
        &[
            "{namespaces: {}}",
            "{pods: {namespaceSelector: {}, podSelector: {}}}",
            "{pods: {namespaceSelector: {}}}",
            "{pods: {podSelector: {}}}",
            "{}",
            "{namespaces: {matchLabels: {a/b/c: v}}}",
            "{namespaces: {matchExpressions: [{key: k, operator: Equals, values: [a]}]}}",
            "{namespaces: {matchExpressions: [{key: k, operator: In}]}}",
            "{namespaces: {matchLabels: {k: -v-}}}",
        ],
    ));
    for dir in ["ingress", "egress"] {
        let peer = if dir == "ingress" { "from" } else { "to" };
        add(family(
            &format!("anp {dir} action"),
            &anp(&format!(
                "{subject}  {dir}:\n  - action: {{}}\n    {peer}: [{{namespaces: {{}}}}]\n"
            )),
            &["Allow", "Deny", "Pass", "Accept", "allow", "''"],
        ));
        add(family(
            &format!("anp {dir} rule name length"),
            &anp(&format!(
                "{subject}  {dir}:\n  - action: Deny\n    name: {{}}\n    {peer}: [{{namespaces: {{}}}}]\n"
            )),
            &["a", "''", &long(100), &long(101)],
        ));
        add(family(
            &format!("anp {dir} peer"),
            &anp(&format!(
                "{subject}  {dir}:\n  - action: Deny\n    {peer}:\n    - {{}}\n"
            )),
            &[
                "{namespaces: {}}",
                "{pods: {namespaceSelector: {}, podSelector: {}}}",
                "{pods: {podSelector: {}}}",
                "{nodes: {}}",
                "{networks: [10.0.0.0/8]}",
                "{}",
                "{namespaces: {}, pods: {namespaceSelector: {}, podSelector: {}}}",
            ],
        ));
    }
    add(family(
        "anp networks",
        &anp_egress("networks: [{}]", ""),
        &cidrs,
    ));
    add(family(
        "anp networks list",
        &anp_egress("networks: {}", ""),
        &[
            "[]",
            "[10.0.0.0/8, 10.0.0.0/8]",
            "[10.0.0.0/8, 11.0.0.0/8]",
            &format!(
                "[{}]",
                (0..25)
                    .map(|i| format!("10.{i}.0.0/16"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            &format!(
                "[{}]",
                (0..26)
                    .map(|i| format!("10.{i}.0.0/16"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ],
    ));
    for protocol in ["TCP", "UDP", "SCTP", "ICMP", "tcp"] {
        add(family(
            &format!("anp portNumber {protocol}"),
            &anp_egress(
                "namespaces: {}",
                &format!("    ports:\n    - portNumber: {{protocol: {protocol}, port: {{}}}}\n"),
            ),
            &["0", "1", "65535", "65536"],
        ));
    }
    add(family(
        "anp portNumber",
        &anp_egress("namespaces: {}", "    ports:\n    - portNumber: {}\n"),
        &["{port: 80}", "{protocol: TCP}", "{}"],
    ));
    add(family(
        "anp namedPort",
        &anp_egress("namespaces: {}", "    ports:\n    - namedPort: {}\n"),
        &["http", "''", "HTTP", "-x", "abcdefghijklmnop"],
    ));
    add(family(
        "anp portRange",
        &anp_egress("namespaces: {}", "    ports:\n    - portRange: {}\n"),
        &[
            "{start: 1, end: 2}",
            "{start: 80, end: 80}",
            "{start: 0, end: 10}",
            "{start: 1, end: 65536}",
            "{start: 1, end: 65535}",
            "{protocol: UDP, start: 1, end: 2}",
            "{protocol: ICMP, start: 1, end: 2}",
            "{start: 1}",
        ],
    ));
    add(family(
        "anp named port with peer",
        &anp_egress("{}", "    ports:\n    - namedPort: http\n"),
        &[
            "nodes: {}",
            "networks: [10.0.0.0/8]",
            "pods: {namespaceSelector: {}, podSelector: {}}",
        ],
    ));
    add(family(
        "anp ingress peers",
        &anp(&format!(
            "{subject}  ingress:\n  - action: Deny\n    from: [{{}}]\n"
        )),
        &[
            &vec!["{namespaces: {}}"; 100].join(", "),
            &vec!["{namespaces: {}}"; 101].join(", "),
        ],
    ));
    add(family(
        "anp ports",
        &anp_egress("namespaces: {}", "    ports: {}\n"),
        &[
            "[]",
            &format!("[{}]", vec!["{portNumber: {port: 80}}"; 101].join(", ")),
        ],
    ));

    // BaselineAdminNetworkPolicy: one object may be named `default`, so each goes alone
    // under that name, and the others under other names.
    for (i, rule) in [
        "action: Allow",
        "action: Deny",
        "action: Pass",
        "action: Deny\n    name: x",
    ]
    .iter()
    .enumerate()
    {
        let name = if i == 0 {
            "default".to_string()
        } else {
            format!("b{i}")
        };
        add(vec![(
            format!("banp {name} {rule}"),
            format!(
                "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata:\n  name: {name}\nspec:\n  subject:\n    namespaces: {{}}\n  ingress:\n  - {rule}\n    from: [{{namespaces: {{}}}}]\n"
            ),
        )]);
    }

    // ClusterNetworkPolicy (the v1alpha2 CRD's schema and CEL rules).
    for tier in ["Admin", "Baseline", "admin", "Middle"] {
        for priority in ["-1", "0", "1000", "1001"] {
            add(vec![(
                format!("cnp tier {tier} priority {priority}"),
                cnp(&format!(
                    "  tier: {tier}\n  priority: {priority}\n  subject:\n    namespaces: {{}}\n"
                )),
            )]);
        }
        for action in ["Accept", "Deny", "Pass", "Allow"] {
            add(vec![(
                format!("cnp tier {tier} action {action}"),
                cnp(&format!(
                    "  tier: {tier}\n  priority: 1\n  subject:\n    namespaces: {{}}\n  ingress:\n  - action: {action}\n    from: [{{namespaces: {{}}}}]\n"
                )),
            )]);
        }
    }
    let cnp_head = "  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {}\n";
    let cnp_egress = |action: &str, to: &str, protocols: &str| {
        cnp(&format!(
            "{cnp_head}  egress:\n  - action: {action}\n    to:\n    - {to}\n{protocols}"
        ))
    };
    add(family(
        "cnp subject",
        &cnp("  tier: Admin\n  priority: 1\n  subject: {}\n"),
        &[
            "{}",
            "{pods: {namespaceSelector: {}, podSelector: {}}}",
            "{namespaces: {}, pods: {namespaceSelector: {}, podSelector: {}}}",
            "{pods: {podSelector: {}}}",
        ],
    ));
    for protocol in ["tcp", "udp", "sctp"] {
        add(family(
            &format!("cnp {protocol} destinationPort"),
            &cnp_egress(
                "Deny",
                "namespaces: {}",
                &format!("    protocols:\n    - {protocol}:\n        destinationPort: {{}}\n"),
            ),
            &[
                "{number: 0}",
                "{number: 1}",
                "{number: 65535}",
                "{number: 65536}",
                "{range: {start: 1, end: 2}}",
                "{range: {start: 80, end: 80}}",
                "{range: {start: 90, end: 80}}",
                "{range: {start: 0, end: 5}}",
                "{range: {start: 1, end: 65536}}",
                "{}",
                "{number: 80, range: {start: 1, end: 2}}",
            ],
        ));
    }
    add(family(
        "cnp protocol entry",
        &cnp_egress("Deny", "namespaces: {}", "    protocols:\n    - {}\n"),
        &[
            "{tcp: {}}",
            "{destinationNamedPort: http}",
            "{destinationNamedPort: ''}",
            "{destinationNamedPort: HTTP}",
            "{tcp: {destinationPort: {number: 80}}, udp: {destinationPort: {number: 80}}}",
            "{}",
            "{icmp: {}}",
        ],
    ));
    add(family(
        "cnp protocols list",
        &cnp_egress("Deny", "namespaces: {}", "    protocols: {}\n"),
        &[
            "[]",
            &format!(
                "[{}]",
                vec!["{tcp: {destinationPort: {number: 80}}}"; 26].join(", ")
            ),
        ],
    ));
    add(family(
        "cnp networks",
        &cnp_egress("Deny", "networks: [{}]", ""),
        &cidrs,
    ));
    add(family(
        "cnp egress peer",
        &cnp_egress("Deny", "{}", ""),
        &["nodes: {}", "pods: {podSelector: {}}", "{}", "networks: []"],
    ));
    let domains = [
        "example.com",
        "'*.example.com'",
        "example.com.",
        "'*example.com'",
        "a..b",
        "EXAMPLE.com",
        "'*.*.example.com'",
        "-a.com",
        "1.2.3.4",
        "''",
        "localhost",
        "a_b.example.com",
        "'*'",
        "'*.com'",
        "a-.com",
        // The CRD's class [a-zA-z0-9] spans A to z: these pass it by accident.
        "'^a.example.com'",
        "'_x.example.com'",
        "'`x.example.com'",
        "'[x.example.com'",
        "'x.example.com.'",
        "'EXAMPLE.com'",
    ];
    add(family(
        "cnp domainNames",
        &cnp_egress("Accept", "domainNames: [{}]", ""),
        &domains,
    ));
    add(family(
        "cnp domainNames action",
        &cnp_egress("{}", "domainNames: [example.com]", ""),
        &["Deny", "Pass"],
    ));
    add(family(
        "cnp named port with peer",
        &cnp_egress(
            "Deny",
            "{}",
            "    protocols:\n    - destinationNamedPort: http\n",
        ),
        &[
            "nodes: {}",
            "networks: [10.0.0.0/8]",
            "pods: {namespaceSelector: {}, podSelector: {}}",
        ],
    ));
    add(vec![(
        "cnp domainNames with a named port".to_string(),
        cnp_egress(
            "Accept",
            "domainNames: [example.com]",
            "    protocols:\n    - destinationNamedPort: http\n",
        ),
    )]);
    add(vec![(
        "cnp ingress from networks".to_string(),
        cnp(&format!(
            "{cnp_head}  ingress:\n  - action: Deny\n    from: [{{networks: [10.0.0.0/8]}}]\n"
        )),
    )]);
    out
}

/// Generated variants of every validated field, and the fuzz regressions that are
/// Kubernetes objects: Palisade and the API server accept and refuse the same ones but
/// those written down in docs/semantics.md (Validation).
#[test]
fn generated_variants_and_fuzz_regressions_agree_with_the_api_server() {
    let Some(cp) = plane("generated_variants_and_fuzz_regressions_agree_with_the_api_server")
    else {
        return;
    };
    cp.reset();
    for namespace in ["x", "a", "a-b"] {
        cp.kubectl_ok(&["create", "namespace", namespace]);
    }
    let mut cases: Vec<(String, String, Option<bool>)> = variants()
        .into_iter()
        .map(|(what, yaml)| (what, yaml, None))
        .collect();
    let regressions =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    for file in std::fs::read_dir(regressions.join("neutron")).unwrap() {
        let path = file.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, doc) in text.split("\n---\n").enumerate() {
            cases.push((
                format!(
                    "fuzz regression {} #{i}",
                    path.file_name().unwrap().to_string_lossy()
                ),
                doc.to_string(),
                Some(true),
            ));
        }
    }
    let name =
        std::fs::read_to_string(regressions.join("validators/dns-subdomain-part-longer-than-63"))
            .unwrap();
    // The fuzz input's first byte chose the validator; the rest is the name.
    let name = name.trim().trim_start_matches('\u{1}');
    cases.push((
        "fuzz regression: a 64-character name, as a NetworkPolicy's".to_string(),
        np("  podSelector: {}\n").replacen("  name: p\n", &format!("  name: {name}\n"), 1),
        Some(true),
    ));
    cases.push((
        "fuzz regression: a 64-character name, as a Namespace's".to_string(),
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n"),
        Some(false),
    ));
    let count = cases.len();
    assert!(count >= 300, "{count} objects");
    let disagreements = compare(&cp, cases);
    // Each written down in docs/semantics.md (Validation), with the reason.
    let expected = [
        // CIDR forms that strict IP/CIDR validation refuses in new values but that objects
        // stored before keep: read as the API server reads them, with a notice.
        "np ipBlock cidr: 10.0.0.1/8: API server refuses, Palisade accepts",
        "np ipBlock cidr: 10.0.0.0/08: API server refuses, Palisade accepts",
        "np ipBlock cidr: '::ffff:10.0.0.0/104': API server refuses, Palisade accepts",
        "np ipBlock cidr: 10.0.0.0/0: API server refuses, Palisade accepts",
        "np egress ipBlock cidr: 10.0.0.1/8: API server refuses, Palisade accepts",
        "np egress ipBlock cidr: '::ffff:10.0.0.0/104': API server refuses, Palisade accepts",
        "np except of 10.0.0.0/16: 10.0.1.1/24: API server refuses, Palisade accepts",
        // Selectors the v1alpha1 CRD does not validate but no implementation can read:
        // refused, so that they fail closed.
        "anp subject: {namespaces: {matchLabels: {a/b/c: v}}}: API server accepts, Palisade refuses",
        "anp subject: {namespaces: {matchExpressions: [{key: k, operator: Equals, values: [a]}]}}: API server accepts, Palisade refuses",
        "anp subject: {namespaces: {matchExpressions: [{key: k, operator: In}]}}: API server accepts, Palisade refuses",
        "anp subject: {namespaces: {matchLabels: {k: -v-}}}: API server accepts, Palisade refuses",
        // Pods written for the analysis, without the containers a kubelet needs.
        "fuzz regression group-name-collision-a-b-c.yaml #0: API server refuses, Palisade accepts",
        "fuzz regression group-name-collision-a-b-c.yaml #1: API server refuses, Palisade accepts",
    ];
    assert_eq!(disagreements, expected, "{count} objects compared");
}

/// Services and EndpointSlices: the table of the model's tests (invalid objects, valid ones
/// at the same limits) is accepted and refused by the API server as by Palisade.
#[test]
fn services_and_endpoint_slices_agree_with_the_api_server() {
    use palisade_test_support::service_table::{invalid, valid};
    let Some(cp) = plane("services_and_endpoint_slices_agree_with_the_api_server") else {
        return;
    };
    cp.reset();
    cp.kubectl_ok(&["create", "namespace", "x"]);
    // Each object under a name of its own, so that one batch can hold them.
    let own_name = |i: usize, yaml: String| {
        yaml.replacen("  name: s\n", &format!("  name: s{i}\n"), 1)
            .replacen("  name: s-1\n", &format!("  name: s{i}-1\n"), 1)
    };
    let cases = (invalid().into_iter())
        .map(|(what, yaml, _)| (what, yaml, false))
        .chain(valid().into_iter().map(|(what, yaml)| (what, yaml, true)))
        .enumerate()
        .map(|(i, (what, yaml, valid))| (what.to_string(), own_name(i, yaml), Some(valid)))
        .collect();
    // Each written down in docs/semantics.md (Validation), with the reason.
    assert_eq!(
        compare(&cp, cases),
        [
            "node port range: API server accepts, Palisade refuses",
            "dual-stack cluster IPs: API server refuses, Palisade accepts",
        ],
        "a dry run allocates no node port, and only the API server knows its address families"
    );
}
