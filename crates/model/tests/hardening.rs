//! Regression tests for hostile and edge inputs, one per defect, through the
//! loader's public entry points.

#![allow(missing_docs, clippy::unwrap_used)]

use palisade_model::{
    AdminPort, Diagnostic, LoadError, LoadOptions, Loaded, NetworkPolicyPort, PortSpec, Severity,
    load_paths, load_sources,
};

fn load(text: &str) -> Result<Loaded, LoadError> {
    load_sources([("f.yaml", text)], LoadOptions::default())
}

fn load_skipping(text: &str) -> Loaded {
    load_sources(
        [("f.yaml", text)],
        LoadOptions {
            skip_invalid: true,
            field_lines: true,
        },
    )
    .unwrap()
}

fn invalid(result: Result<Loaded, LoadError>) -> Vec<Diagnostic> {
    match result {
        Err(LoadError::Invalid(d)) => d,
        Err(e) => panic!("not an input error: {e}"),
        Ok(l) => panic!("loaded: {:?}", l.cluster),
    }
}

const DENY_ALL: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all, namespace: x}
spec: {podSelector: {}}
";

#[test]
fn anp_priority_010_is_8_as_kubectl_reads_it() {
    let text = "apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: deny-all}
spec: {priority: 010, subject: {namespaces: {}}, ingress: [{action: Deny, from: [{namespaces: {}}], ports: [{portNumber: {port: 0120}}]}]}
";
    let loaded = load(text).unwrap();
    let anp = &loaded.cluster.admin_policies[0];
    assert_eq!(anp.priority, 8, "010 is octal in YAML 1.1");
    let ports = anp.ingress[0].ports.as_ref().unwrap();
    let AdminPort::Ports {
        range: Some(range), ..
    } = &ports[0]
    else {
        panic!("{ports:?}")
    };
    assert_eq!((range.start.get(), range.end.get()), (80, 80), "0120 is 80");
}

#[test]
fn networkpolicy_port_0120_is_80_and_quoted_stays_a_string() {
    let text = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: p, namespace: x}
spec:
  podSelector: {}
  ingress:
  - ports: [{port: 0120}, {port: 0x1F}, {port: 1_000, endPort: 0b10000000000}]
";
    let loaded = load(text).unwrap();
    let ports: Vec<(u16, u16)> = loaded.cluster.network_policies[0].ingress[0]
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .map(|p: &NetworkPolicyPort| match &p.port {
            PortSpec::Range(r) => (r.start.get(), r.end.get()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ports, [(80, 80), (31, 31), (1000, 1024)]);
    // A quoted "0120" is a string: a port name, and not a valid one.
    let quoted = text.replace("{port: 0120}", "{port: \"0120\"}");
    let errors = invalid(load(&quoted));
    assert!(
        errors
            .iter()
            .any(|d| d.line == 7 && d.message.contains("0120")),
        "{errors:?}"
    );
}

#[test]
fn yaml_1_1_booleans_are_not_label_values() {
    // kubectl sends `tier: yes` as the boolean true, which a label value cannot be.
    let text = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n  labels: {tier: yes}\n";
    let errors = invalid(load(text));
    assert_eq!(errors[0].line, 5, "{errors:?}");
    assert!(errors[0].field.contains("labels"), "{errors:?}");
}

#[test]
fn long_subdomain_names_are_valid_per_kind() {
    let long = "a".repeat(71);
    let text = format!(
        "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: {long}.x, namespace: x}}
spec: {{podSelector: {{}}}}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {{name: {long}}}
spec: {{priority: 1, subject: {{namespaces: {{}}}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: {long}, namespace: x}}
"
    );
    let loaded = load(&text).unwrap();
    assert_eq!(loaded.cluster.network_policies[0].name.len(), 73);
    assert_eq!(loaded.cluster.admin_policies[0].name, long);
    assert_eq!(loaded.cluster.pods[0].name, long);
    // Namespaces are DNS-1123 labels: at most 63.
    let ns = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {long}}}\n");
    let errors = invalid(load(&ns));
    assert!(errors[0].message.contains("63"), "{errors:?}");
    // 254 characters is too long for any name.
    let name = format!("{}.{}.{}.{}", long, long, long, "a".repeat(38));
    assert_eq!(name.len(), 254);
    let errors = invalid(load(&text.replace(&format!("{long}.x"), &name)));
    assert!(errors[0].message.contains("253"), "{errors:?}");
}

#[test]
fn skip_invalid_keeps_the_documents_around_a_syntax_error() {
    let text = format!(
        "{DENY_ALL}---\na: [unclosed\n---\n{}",
        DENY_ALL.replace("deny-all", "second")
    );
    let loaded = load_skipping(&text);
    let names: Vec<&str> = loaded
        .cluster
        .network_policies
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["deny-all", "second"]);
    let skipped: Vec<&Diagnostic> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!((6..=7).contains(&skipped[0].line), "{skipped:?}");
    assert!(skipped[0].message.contains("YAML syntax error"));
    // Without --skip-invalid the error fails the load.
    assert_eq!(invalid(load(&text)).len(), 1);
}

fn pod(ns: &str, name: &str, ip: &str, host: bool) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{hostNetwork: {host}, containers: []}}\nstatus: {{podIP: {ip}}}\n"
    )
}

#[test]
fn duplicate_pod_ips_are_warned_about_and_exposed() {
    let text = [
        pod("a", "p", "10.0.0.1", false),
        pod("b", "q", "10.0.0.1", false),
        pod("c", "h1", "192.168.0.1", true),
        pod("c", "h2", "192.168.0.1", true),
        pod("c", "r", "10.0.0.2", false),
    ]
    .concat();
    let loaded = load(&text).unwrap();
    let warnings: Vec<&Diagnostic> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Warning)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = warnings[0].to_string();
    assert!(
        w.starts_with("f.yaml:7: warning: Pod b/q: status.podIPs: 10.0.0.1 is also the IP of Pod a/p (f.yaml:1)"),
        "{w}"
    );
    let shared = loaded.cluster.duplicate_pod_ips();
    assert_eq!(
        shared.len(),
        1,
        "host-network pods share their node's IP by design"
    );
    let (ip, pods) = shared.iter().next().unwrap();
    assert_eq!(ip.to_string(), "10.0.0.1");
    let keys: Vec<String> = pods.iter().map(|p| p.key()).collect();
    assert_eq!(keys, ["a/p", "b/q"]);
}

#[test]
fn alias_bomb_of_a_large_string_is_refused_with_a_line() {
    let big = "x".repeat(100_000);
    let text = format!("s: &s {big}\nl:\n{}", "  - *s\n".repeat(100_000));
    let errors = invalid(load(&text));
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]
            .message
            .contains("aliases expand to more than 64 MiB"),
        "{errors:?}"
    );
    assert!(errors[0].line > 600, "{errors:?}");
}

#[test]
fn duplicate_keys_are_refused_with_both_lines() {
    let text = DENY_ALL.replace(
        "spec: {podSelector: {}}",
        "spec:\n  podSelector: {}\n  podSelector: {matchLabels: {a: b}}",
    );
    let errors = invalid(load(&text));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].line, 6);
    assert!(
        errors[0]
            .message
            .contains("duplicate mapping key \"podSelector\": first at line 5, again at line 6"),
        "{errors:?}"
    );
}

#[test]
fn binary_input_has_a_line() {
    let dir = std::env::temp_dir().join(format!("palisade-bug9-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bin.yaml");
    std::fs::write(&file, b"kind: Pod\nmetadata:\n  name: \xff\xfe\n").unwrap();
    let errors = invalid(load_paths(
        std::slice::from_ref(&file),
        LoadOptions::default(),
    ));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].line, 3, "{errors:?}");
    assert!(errors[0].message.contains("UTF-8"), "{errors:?}");
    // NUL bytes are UTF-8 but not YAML: a syntax error, with its line.
    std::fs::write(&file, b"a: 1\n\0\0\0\n").unwrap();
    let errors = invalid(load_paths(
        std::slice::from_ref(&file),
        LoadOptions::default(),
    ));
    assert!(
        errors[0].line >= 1 && errors[0].message.contains("YAML"),
        "{errors:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn no_objects_at_all_is_an_error() {
    let dir = std::env::temp_dir().join(format!("palisade-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let errors = invalid(load_paths(
        std::slice::from_ref(&dir),
        LoadOptions::default(),
    ));
    assert!(errors[0].message.contains("no manifests"), "{errors:?}");
    assert_eq!(&*errors[0].file, dir.display().to_string());
    std::fs::remove_dir_all(&dir).unwrap();

    for text in ["", "\n# only a comment\n", "---\n---\n"] {
        let errors = invalid(load(text));
        assert!(
            errors[0].message.contains("no objects"),
            "{text:?}: {errors:?}"
        );
    }
    let errors = invalid(load(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    ));
    assert!(
        errors[0].message.contains("no objects Palisade reads"),
        "{errors:?}"
    );
    // With --skip-invalid, objects that were found and skipped are reported, not "empty".
    let loaded = load_skipping("apiVersion: v1\nkind: Namespace\nmetadata: {name: X}\n");
    assert!(loaded.cluster.is_empty());
    assert_eq!(loaded.diagnostics[0].severity, Severity::Error);
}

#[test]
fn pod_ip_must_match_the_first_pod_ips_entry() {
    let text = "apiVersion: v1
kind: Pod
metadata: {name: p, namespace: x}
status:
  podIP: 10.0.0.2
  podIPs: [{ip: 10.0.0.1}]
";
    let errors = invalid(load(text));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        (errors[0].line, errors[0].field.as_str()),
        (5, "status.podIP")
    );
    assert!(errors[0].message.contains("must match status.podIPs[0].ip"));
    let same = text.replace("10.0.0.2", "10.0.0.1");
    assert_eq!(load(&same).unwrap().cluster.pods[0].ips.len(), 1);
    let two_v4 = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: x}\nstatus: {podIPs: [{ip: 10.0.0.1}, {ip: 10.0.0.3}]}\n";
    assert!(
        invalid(load(two_v4))[0]
            .message
            .contains("one IP for each IP family")
    );
    let dual = two_v4.replace("10.0.0.3", "fd00::1");
    assert_eq!(load(&dual).unwrap().cluster.pods[0].ips.len(), 2);
}

/// `-f DIR` with directory symlinks: a directory reached twice is read once, a loop is an
/// error naming it (at once, not after 24 s and 730 MB), and a FIFO named `*.yaml` is
/// skipped rather than blocking the load.
#[test]
fn directory_symlinks_are_read_once_and_loops_refused() {
    use std::os::unix::fs::symlink;
    let root = std::env::temp_dir().join(format!("palisade-symlinks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::write(
        root.join("a/ns.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n",
    )
    .unwrap();
    symlink(root.join("a"), root.join("b")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(root.join("a/pipe.yaml"))
        .status()
        .unwrap();
    assert!(fifo.success());
    let loaded = palisade_model::load_paths(std::slice::from_ref(&root), Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.cluster.namespaces.len(), 1, "read once");
    symlink(&root, root.join("a/loop")).unwrap();
    let err = palisade_model::load_paths(std::slice::from_ref(&root), Default::default())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("loop") && err.contains("a/loop"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}
