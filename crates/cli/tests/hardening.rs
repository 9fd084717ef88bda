//! End to end: hostile and edge inputs give the verdicts a cluster would, or exit 1
//! with the file and line; never a panic, never a silent success.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use common::{palisade_stdin as palisade, stderr};

/// `eval -f - --from z/b --to x/a --port 80 -o json` on `text`: (exit code, allowed).
fn eval(text: &str, extra: &[&str]) -> (i32, Option<bool>, String) {
    let mut args = vec![
        "eval", "-f", "-", "--from", "z/b", "--to", "x/a", "--port", "80", "-o", "json",
    ];
    args.extend(extra);
    let o = palisade(&args, text.as_bytes());
    let allowed = serde_json::from_slice::<serde_json::Value>(&o.stdout)
        .ok()
        .and_then(|v| v["allowed"].as_bool());
    (o.status.code().unwrap_or(-1), allowed, stderr(&o))
}

const PODS: &str = "apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x}
spec: {containers: [{name: c, ports: [{containerPort: 80}]}]}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: z}
spec: {containers: [{name: c}]}
status: {podIP: 10.0.0.2}
";

#[test]
fn anp_priority_010_outranks_priority_9_as_in_a_cluster() {
    let text = format!(
        "{PODS}---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {{name: deny-all}}
spec: {{priority: 010, subject: {{namespaces: {{}}}}, ingress: [{{action: Deny, from: [{{namespaces: {{}}}}]}}]}}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {{name: allow-all}}
spec: {{priority: 9, subject: {{namespaces: {{}}}}, ingress: [{{action: Allow, from: [{{namespaces: {{}}}}]}}]}}
"
    );
    let (code, allowed, err) = eval(&text, &[]);
    assert_eq!(
        (code, allowed),
        (0, Some(false)),
        "010 is 8, before 9: {err}"
    );
}

#[test]
fn networkpolicy_port_0120_is_port_80() {
    let text = format!(
        "{PODS}---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: only-80, namespace: x}}
spec: {{podSelector: {{}}, ingress: [{{ports: [{{port: 0120}}]}}]}}
"
    );
    let (code, allowed, err) = eval(&text, &[]);
    assert_eq!((code, allowed), (0, Some(true)), "0120 is 80: {err}");
}

#[test]
fn skip_invalid_keeps_the_deny_all_before_a_syntax_error() {
    let text = format!(
        "{PODS}---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: deny-all, namespace: x}}
spec: {{podSelector: {{}}}}
---
a: [unclosed
"
    );
    let (code, allowed, err) = eval(&text, &["--skip-invalid"]);
    assert_eq!((code, allowed), (0, Some(false)), "{err}");
    assert!(
        err.contains("skipped: <stdin>:19: error: YAML syntax error:")
            && err.contains("(in the document starting at line 17)"),
        "{err}"
    );
    let (code, _, err) = eval(&text, &[]);
    assert_eq!(code, 1, "{err}");
}

#[test]
fn pods_sharing_an_ip_are_reported() {
    let twin = PODS
        .split("---\n")
        .next()
        .unwrap()
        .replace("name: a,", "name: twin,");
    let text = format!("{PODS}---\n{twin}");
    let o = palisade(&["matrix", "-f", "-", "-o", "summary"], text.as_bytes());
    let err = stderr(&o);
    assert!(
        err.contains(
            "<stdin>:12: warning: Pod x/twin: status.podIPs: 10.0.0.1 is also the IP of Pod x/a (<stdin>:1)"
        ),
        "{err}"
    );
}

#[test]
fn duplicate_keys_exit_1_with_both_lines() {
    let text = PODS.replace(
        "status: {podIP: 10.0.0.1}",
        "status: {podIP: 10.0.0.1, podIP: 10.0.0.3}",
    );
    let (code, _, err) = eval(&text, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("<stdin>:5: error: YAML syntax error: duplicate mapping key \"podIP\""),
        "{err}"
    );
}

#[test]
fn empty_stdin_and_empty_directory_exit_1() {
    let (code, _, err) = eval("", &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("<stdin>:1: error: no objects"), "{err}");

    let dir = std::env::temp_dir().join(format!("palisade-cli-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = palisade(&["matrix", "-f", dir.to_str().unwrap()], b"");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no manifests"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn binary_input_exits_1_with_a_line() {
    let mut bytes = PODS.as_bytes().to_vec();
    bytes.extend_from_slice(b"---\n\xff\xfe\x00\x01\n");
    let o = palisade(&["matrix", "-f", "-"], &bytes);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("<stdin>:13: error: not UTF-8 text"), "{err}");
}
