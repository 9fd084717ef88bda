//! Reports and queries for people: ports as numbers, ranges and names, allowed-port
//! listings, exit codes, why-not explanations, focused and readable matrices, Graphviz
//! and HTML views.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use common::{palisade, palisade_stdin, stderr, stdout};

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

#[test]
fn eval_echoes_the_flow_in_text_and_json() {
    let args = [
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/a",
        "--to",
        "x/a",
        "--port",
        "80",
    ];
    let o = palisade(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("DENIED: y/a (10.0.1.10) -> x/a (10.0.0.10) TCP/80\n"),
        "{out}"
    );
    let o = palisade(&[&args[..], &["-o", "json"]].concat());
    let v = json(&o);
    assert_eq!(v["from"]["name"], "y/a");
    assert_eq!(v["to"]["ip"], "10.0.0.10");
    assert_eq!(v["protocol"], "TCP");
    assert_eq!(v["port"], 80);
    assert_eq!(v["allowed"], false);
    assert_eq!(v["ingress"]["reason"], "IsolatedNoRuleMatched");
}

#[test]
fn eval_exit_code_is_0_allowed_3_denied() {
    let base = [
        "eval",
        "-f",
        "examples/xyz",
        "--to",
        "x/a",
        "--port",
        "80",
        "--exit-code",
    ];
    let allowed = palisade(&[&base[..], &["--from", "y/b"]].concat());
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    let denied = palisade(&[&base[..], &["--from", "y/a"]].concat());
    assert_eq!(denied.status.code(), Some(3), "{}", stderr(&denied));
    assert!(
        stdout(&denied).starts_with("DENIED"),
        "the verdict is still printed"
    );
    let without = palisade(
        &base[..base.len() - 1]
            .iter()
            .chain(&["--from", "y/a"])
            .copied()
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        without.status.code(),
        Some(0),
        "without --exit-code a deny exits 0"
    );
}

#[test]
fn eval_resolves_named_ports_against_the_destination() {
    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/b",
        "--to",
        "x/a",
        "--port",
        "serve-81-udp",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(
        (v["protocol"].as_str(), v["port"].as_u64()),
        (Some("UDP"), Some(81)),
        "the name's number and protocol"
    );
    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/b",
        "--to",
        "x/a",
        "--port",
        "nope",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains("x/a has no container port named nope (its ports: 80/TCP (serve-80-tcp)"),
        "{}",
        stderr(&o)
    );
    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/b",
        "--to",
        "192.0.2.1",
        "--port",
        "http",
    ]);
    assert_eq!(o.status.code(), Some(2), "a name needs a destination pod");
}

#[test]
fn eval_without_port_lists_allowed_ports_as_ranges() {
    let o = palisade(&["eval", "-f", "examples/xyz", "--from", "y/b", "--to", "x/a"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("allowed: TCP 80; UDP none; SCTP none\n"),
        "{out}"
    );
    assert!(out.contains("TCP 81-65535: DENIED\n"), "{out}");
    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/b",
        "--to",
        "x/a",
        "--port",
        "79-81",
        "-o",
        "json",
    ]);
    let v = json(&o);
    assert_eq!(v["allowedPorts"]["TCP"], serde_json::json!(["80"]));
    let ranges: Vec<&str> = v["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ports"].as_str().unwrap())
        .collect();
    assert_eq!(ranges, ["79", "80", "81"]);
    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/b",
        "--to",
        "x/a",
        "--port",
        "79-81",
        "--exit-code",
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "a range is allowed only if every port is"
    );
}

#[test]
fn explain_says_why_not() {
    let args = [
        "explain",
        "-f",
        "examples/xyz",
        "--from",
        "y/a",
        "--to",
        "x/a",
        "--port",
        "80",
    ];
    let o = palisade(&args);
    let out = stdout(&o);
    assert!(
        out.contains("ingress rule 0: from namespaceSelector {ns=y} podSelector {pod=b} (the pod's labels do not match)"),
        "{out}"
    );
    assert!(
        out.contains(
            "egress rule 0 \"no-y-to-z\": to namespaces {ns=z} (the namespace is not selected)"
        ),
        "{out}"
    );
    let v = json(&palisade(&[&args[..], &["-o", "json"]].concat()));
    let np = &v["walk"]["ingress"][1];
    assert_eq!(np["tier"], "NetworkPolicy");
    assert_eq!(np["whyNot"][0]["policy"]["name"], "allow-from-y-b");
    assert_eq!(
        np["whyNot"][0]["rules"][0]["peers"][0]["reason"],
        "PodLabelsNotSelected"
    );
    let o = palisade(&[
        "explain",
        "-f",
        "examples/xyz",
        "--from",
        "y/a",
        "--to",
        "x/a",
    ]);
    assert_eq!(o.status.code(), Some(2), "explain needs a port");
}
