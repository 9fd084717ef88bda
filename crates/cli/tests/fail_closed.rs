//! An invalid object never widens what is allowed, in any command, with or without
//! `--skip-invalid`: each command either exits 1, or its verdicts are no more permissive
//! than for the same input without the invalid object. The invalid object is tried in a
//! file of its own and appended to the file of valid policies (where a broken document
//! must not take the valid ones before it down with it).

#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

const CLUSTER: &str = include_str!("../../../examples/xyz/cluster.yaml");

/// The valid policies: the bundled examples plus a deny-all ingress in y, so that an
/// invalid allow-all in x or y would be visible as a widening.
fn policies() -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/xyz/policies");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut docs: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    docs.push(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny-y, namespace: 'y'}\nspec: {podSelector: {}}\n"
            .into(),
    );
    docs.join("\n---\n")
}

/// A fresh directory under the system temp dir, unique to this process and call.
fn scratch() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "palisade-fail-closed-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Flows checked one by one with `eval`: pod to pod, and to and from addresses (an
/// invalid pod could take over an address).
const EVAL_FLOWS: &[(&str, &str, &str)] = &[
    ("203.0.113.7", "x/a", "80"),
    ("203.0.113.7", "10.0.0.10", "80"),
    ("203.0.113.7", "10.0.0.11", "80"),
    ("203.0.113.7", "y/a", "80"),
    ("x/a", "203.0.113.7", "80"),
    ("y/b", "z/c", "80"),
    ("z/a", "x/b", "81"),
    ("x/c", "y/b", "80"),
];

/// What the commands said about one input: `None` when the command exited 1.
#[derive(Debug)]
struct Verdicts {
    matrix: Option<BTreeMap<String, bool>>,
    eval: Vec<Option<bool>>,
    nftables: Option<String>,
}

/// Exit 0 → `Some(stdout)`, exit 1 → `None`; anything else fails the test.
fn outcome(what: &str, o: &Output) -> Option<String> {
    match o.status.code() {
        Some(0) => Some(text(&o.stdout)),
        Some(1) => None,
        other => panic!("{what}: exit {other:?} (want 0 or 1)\n{}", text(&o.stderr)),
    }
}

fn verdicts(files: &[&Path], skip_invalid: bool) -> Verdicts {
    let mut input: Vec<&str> = vec!["-f"];
    input.extend(files.iter().map(|p| p.to_str().unwrap()));
    if skip_invalid {
        input.push("--skip-invalid");
    }
    let with = |args: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(&input);
        run(&all)
    };
    let matrix = outcome(
        "matrix",
        &with(&[
            "matrix",
            "--ports",
            "80,81",
            "--protocols",
            "TCP,UDP",
            "-o",
            "jsonl",
        ]),
    )
    .map(|out| {
        out.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let key = format!(
                    "{} -> {} {}/{}",
                    v["from"].as_str().unwrap(),
                    v["to"].as_str().unwrap(),
                    v["protocol"].as_str().unwrap(),
                    v["port"]
                );
                (key, v["allowed"].as_bool().unwrap())
            })
            .collect()
    });
    let eval = EVAL_FLOWS
        .iter()
        .map(|(from, to, port)| {
            outcome(
                "eval",
                &with(&[
                    "eval", "--from", from, "--to", to, "--port", port, "-o", "json",
                ]),
            )
            .map(|out| {
                let v: serde_json::Value = serde_json::from_str(&out).unwrap();
                v["allowed"].as_bool().unwrap()
            })
        })
        .collect();
    let nftables = outcome("compile", &with(&["compile", "--target", "nftables"]));
    Verdicts {
        matrix,
        eval,
        nftables,
    }
}

/// Every allowed cell of `got` is allowed in `baseline` (cells of pods the baseline does
/// not have are not compared). Returns the widened cells.
fn widened(baseline: &Verdicts, got: &Verdicts) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(b), Some(g)) = (&baseline.matrix, &got.matrix) {
        for (cell, allowed) in g {
            if *allowed && b.get(cell) == Some(&false) {
                out.push(format!("matrix {cell}"));
            }
        }
    }
    for (i, (b, g)) in baseline.eval.iter().zip(&got.eval).enumerate() {
        if let (Some(false), Some(true)) = (b, g) {
            let (from, to, port) = EVAL_FLOWS[i];
            out.push(format!("eval {from} -> {to} {port}"));
        }
    }
    out
}

/// Where the invalid object goes.
#[derive(Debug, Clone, Copy)]
enum Placement {
    OwnFile,
    AfterValidPolicies,
}

/// Checks one invalid object in both placements, with and without `--skip-invalid`.
/// `policy_only`: the object is a policy, so skipping it must give exactly the baseline.
fn never_widens(invalid: &[u8], policy_only: bool) {
    let dir = scratch();
    let cluster = dir.join("cluster.yaml");
    std::fs::write(&cluster, CLUSTER).unwrap();
    let valid = dir.join("policies.yaml");
    std::fs::write(&valid, policies()).unwrap();
    let baseline = verdicts(&[&cluster, &valid], false);
    assert!(
        baseline.matrix.is_some() && baseline.nftables.is_some(),
        "the baseline is valid"
    );
    let mut problems = Vec::new();
    for placement in [Placement::OwnFile, Placement::AfterValidPolicies] {
        let files: Vec<PathBuf> = match placement {
            Placement::OwnFile => {
                let bad = dir.join("zz-invalid.yaml");
                std::fs::write(&bad, invalid).unwrap();
                vec![cluster.clone(), valid.clone(), bad]
            }
            Placement::AfterValidPolicies => {
                let mut both = policies().into_bytes();
                both.extend_from_slice(b"\n---\n");
                both.extend_from_slice(invalid);
                let p = dir.join("policies-and-invalid.yaml");
                std::fs::write(&p, both).unwrap();
                vec![cluster.clone(), p]
            }
        };
        let files: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
        for skip in [false, true] {
            let got = verdicts(&files, skip);
            for w in widened(&baseline, &got) {
                problems.push(format!("{placement:?}, skip_invalid={skip}: widened {w}"));
            }
            if skip && policy_only {
                if got.matrix.is_some() && got.matrix != baseline.matrix {
                    problems.push(format!(
                        "{placement:?}, skip_invalid: the matrix differs from the input without the invalid policy"
                    ));
                }
                if got.nftables.is_some() && got.nftables != baseline.nftables {
                    problems.push(format!(
                        "{placement:?}, skip_invalid: the nftables ruleset differs from the input without the invalid policy"
                    ));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        problems.is_empty(),
        "invalid input:\n{}\n{}",
        text(invalid),
        problems.join("\n")
    );
}

const ALLOW_ALL_X: &str =
    "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: open, namespace: x}\n";

#[test]
fn allow_all_with_port_zero() {
    never_widens(
        format!("{ALLOW_ALL_X}spec:\n  podSelector: {{}}\n  ingress: [{{ports: [{{port: 0}}]}}]\n")
            .as_bytes(),
        true,
    );
}

#[test]
fn allow_all_with_an_invalid_cidr() {
    never_widens(
        format!("{ALLOW_ALL_X}spec:\n  podSelector: {{}}\n  ingress: [{{from: [{{ipBlock: {{cidr: 0.0.0.0/33}}}}]}}]\n").as_bytes(),
        true,
    );
}

#[test]
fn allow_all_with_an_invalid_label_key() {
    never_widens(
        format!("{ALLOW_ALL_X}spec:\n  podSelector: {{matchLabels: {{\"bad key\": v}}}}\n  ingress: [{{}}]\n  egress: [{{}}]\n").as_bytes(),
        true,
    );
}

#[test]
fn allow_all_with_an_uppercase_name() {
    never_widens(
        b"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: Open, namespace: 'y'}\nspec: {podSelector: {}, ingress: [{}]}\n",
        true,
    );
}

#[test]
fn admin_allow_all_with_an_unknown_action() {
    never_widens(
        b"apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: open}\nspec:\n  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Allw, from: [{namespaces: {}}]}]\n",
        true,
    );
}

#[test]
fn admin_allow_all_with_a_negative_priority() {
    never_widens(
        b"apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: open}\nspec:\n  priority: -1\n  subject: {namespaces: {}}\n  ingress: [{action: Allow, from: [{namespaces: {}}]}]\n",
        true,
    );
}

#[test]
fn cluster_network_policy_with_an_unknown_tier() {
    never_widens(
        b"apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata: {name: open}\nspec:\n  tier: Top\n  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Accept, from: [{namespaces: {}}]}]\n",
        true,
    );
}

#[test]
fn baseline_not_named_default() {
    never_widens(
        b"apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata: {name: other}\nspec:\n  subject: {namespaces: {}}\n  egress: [{action: Allow, to: [{namespaces: {}}]}]\n",
        true,
    );
}

#[test]
fn object_without_kind() {
    never_widens(
        b"apiVersion: networking.k8s.io/v1\nmetadata: {name: open, namespace: x}\nspec: {podSelector: {}, ingress: [{}]}\n",
        true,
    );
}

#[test]
fn a_name_longer_than_253_characters() {
    never_widens(
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: {}, namespace: x}}\nspec: {{podSelector: {{}}, ingress: [{{}}]}}\n",
            "a".repeat(254)
        )
        .as_bytes(),
        true,
    );
}

/// kubectl refuses duplicate mapping keys; taking the last `spec` would turn a deny-all
/// into an allow-all.
#[test]
fn duplicate_mapping_keys() {
    never_widens(
        format!("{ALLOW_ALL_X}spec: {{podSelector: {{}}}}\nspec: {{podSelector: {{}}, ingress: [{{}}]}}\n").as_bytes(),
        true,
    );
}

/// A YAML syntax error must not take down the valid documents before it in the same file.
#[test]
fn a_yaml_syntax_error() {
    never_widens(b"a: [unclosed\n", true);
}

#[test]
fn binary_input() {
    never_widens(b"\x00\xff\xfe garbage \x01\x02", true);
}

/// A pod whose address is already x/a's must not take over x/a's address.
#[test]
fn a_pod_with_a_duplicate_address() {
    never_widens(
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: dup, namespace: zz}\nspec: {nodeName: node-1}\nstatus: {podIP: 10.0.0.10, podIPs: [{ip: 10.0.0.10}]}\n",
        false,
    );
}

/// The API requires `podIP` to equal `podIPs[0]`.
#[test]
fn a_pod_whose_pod_ip_differs_from_pod_ips() {
    never_widens(
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: mismatch, namespace: zz}\nspec: {nodeName: node-1}\nstatus: {podIP: 10.0.0.11, podIPs: [{ip: 10.0.9.9}]}\n",
        false,
    );
}
