//! The command-line contract: formats, exit codes, stdin, colour.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use common::{palisade, palisade_stdin, stderr, stdout};

#[test]
fn matrix_jsonl_lines_are_exact() {
    let o = palisade(&[
        "matrix",
        "-f",
        "examples/xyz",
        "--ports",
        "80,81",
        "--protocols",
        "TCP,UDP",
        "-o",
        "jsonl",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2 * 2 * 9 * 9);
    assert_eq!(
        lines[0],
        r#"{"from":"x/a","to":"x/a","protocol":"TCP","port":80,"allowed":true}"#
    );
    // y/b may reach x/a on the named port serve-80-tcp, and nothing else in x.
    assert!(
        lines.contains(&r#"{"from":"y/b","to":"x/a","protocol":"TCP","port":80,"allowed":true}"#)
    );
    assert!(
        lines.contains(&r#"{"from":"y/b","to":"x/a","protocol":"TCP","port":81,"allowed":false}"#)
    );
    assert!(
        lines.contains(&r#"{"from":"y/a","to":"x/a","protocol":"TCP","port":80,"allowed":false}"#)
    );
}

#[test]
fn matrix_default_probes_are_container_ports() {
    let o = palisade(&["matrix", "-f", "examples/xyz", "-o", "csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().next(), Some("from,to,protocol,port,allowed"));
    // 2 ports × 3 protocols × 81 pairs
    assert_eq!(out.lines().count(), 1 + 6 * 81);
    assert!(out.contains("x/a,x/b,SCTP,81,"));
}

#[test]
fn matrix_table_is_plain_when_piped_and_other_formats_work() {
    let o = palisade(&["matrix", "-f", "examples/xyz", "--ports", "80"]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(!out.contains('\x1b'), "no colour codes when not a terminal");
    assert!(out.starts_with("TCP/80"));
    for format in ["json", "md"] {
        let o = palisade(&[
            "matrix",
            "-f",
            "examples/xyz",
            "--ports",
            "80",
            "-o",
            format,
        ]);
        assert!(o.status.success(), "{format}");
    }
    let json: serde_json::Value = serde_json::from_slice(
        &palisade(&[
            "matrix",
            "-f",
            "examples/xyz",
            "--ports",
            "80",
            "-o",
            "json",
        ])
        .stdout,
    )
    .unwrap();
    assert_eq!(json.as_array().unwrap().len(), 81);
}

#[test]
fn eval_json_names_tier_policy_and_rule() {
    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/b",
        "--to",
        "z/c",
        "--port",
        "80",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "deny still exits 0: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["allowed"], false);
    assert_eq!(v["egress"]["tier"], "Baseline");
    assert_eq!(v["egress"]["policy"]["kind"], "BaselineAdminNetworkPolicy");
    assert_eq!(v["egress"]["rule"]["name"], "no-y-to-z");
    assert_eq!(v["ingress"]["tier"], "Admin");
    assert_eq!(v["ingress"]["policy"]["name"], "protect-z-c");
    assert_eq!(v["ingress"]["rule"]["index"], 1);
    assert_eq!(v["ingress"]["action"], "Deny");

    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/a",
        "--to",
        "x/a",
        "--port",
        "80",
        "-o",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ingress"]["reason"], "IsolatedNoRuleMatched");
    assert_eq!(v["ingress"]["isolating"][0]["name"], "allow-from-y-b");
}

#[test]
fn eval_text_and_external_addresses() {
    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "203.0.113.5",
        "--to",
        "x/b",
        "--port",
        "80",
        "--protocol",
        "udp",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("DENIED"), "{out}");
    assert!(out.contains("outside the cluster"), "{out}");
    assert!(
        out.contains("isolated by NetworkPolicy x/allow-from-y-b"),
        "{out}"
    );
}

#[test]
fn explain_walks_the_tiers() {
    let o = palisade(&[
        "explain",
        "-f",
        "examples/xyz",
        "--from",
        "z/a",
        "--to",
        "z/c",
        "--port",
        "80",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("z/a (10.0.2.10) -> z/c (10.0.2.12) TCP/80: ALLOWED"),
        "{out}"
    );
    assert!(
        out.contains("AdminNetworkPolicy protect-z-c (priority 10, examples/xyz/policies/02-anp.yaml:2): matched"),
        "{out}"
    );
    assert!(out.contains("Pass"), "{out}");
}

#[test]
fn explain_json_is_the_verdict_plus_its_walk() {
    let args = [
        "explain",
        "-f",
        "examples/xyz",
        "--from",
        "z/a",
        "--to",
        "z/c",
        "--port",
        "80",
    ];
    let o = palisade(&[&args[..], &["-o", "json"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["from"]["name"], "z/a");
    assert_eq!(v["to"]["ip"], "10.0.2.12");
    assert_eq!(v["allowed"], true);
    assert_eq!(v["ingress"]["passedBy"][0]["rule"]["name"], "pass-from-z");
    let admin = &v["walk"]["ingress"][0];
    assert_eq!(admin["tier"], "Admin");
    assert_eq!(admin["policies"][0]["policy"]["name"], "protect-z-c");
    assert_eq!(admin["policies"][0]["outcome"], "Matched");
    assert_eq!(admin["policies"][0]["action"], "Pass");
    assert_eq!(v["walk"]["ingress"][1]["tier"], "NetworkPolicy");
    assert_eq!(v["walk"]["ingress"][1]["isolated"], false);
    // The same verdict as eval's JSON.
    let e = palisade(&[&["eval"], &args[1..], &["-o", "json"]].concat());
    let ev: serde_json::Value = serde_json::from_slice(&e.stdout).unwrap();
    assert_eq!(ev["ingress"], v["ingress"]);
    assert_eq!(ev["egress"], v["egress"]);
}

#[test]
fn compile_output_formats_are_checked_per_target() {
    let o = palisade(&[
        "compile",
        "--target",
        "nftables",
        "-f",
        "examples/xyz",
        "-o",
        "yaml",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("nft or linear"), "{}", stderr(&o));
    let o = palisade(&[
        "compile",
        "--target",
        "nftables",
        "-f",
        "examples/xyz",
        "--node",
        "nope",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = palisade(&["compile", "--target", "nftables", "-f", "examples/xyz"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(
            "pal-0: ingress NetworkPolicy tier: isolated by NetworkPolicy x/allow-from-y-b"
        ),
        "{}",
        stdout(&o)
    );
}

#[test]
fn stdin_input() {
    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/xyz/cluster.yaml"
    ))
    .unwrap();
    let o = palisade_stdin(
        &["matrix", "-f", "-", "--ports", "80", "-o", "jsonl"],
        &yaml,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 81);
}

#[test]
fn invalid_input_exits_1_with_every_error() {
    let bad = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  policyTypes: [Bad]\n  ingress:\n  - ports: [{port: 0}]\n";
    let o = palisade_stdin(&["matrix", "-f", "-"], bad);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(
            "<stdin>:5: error: NetworkPolicy x/p: spec.policyTypes[0]: Unsupported value: \"Bad\""
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "<stdin>:7: error: NetworkPolicy x/p: spec.ingress[0].ports[0].port: Invalid value: 0"
        ),
        "{err}"
    );
    assert!(stdout(&o).is_empty());
    // --skip-invalid evaluates what is valid: here nothing, which is an error, not an
    // empty success
    let o = palisade_stdin(&["matrix", "-f", "-", "--skip-invalid", "-o", "jsonl"], bad);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no pod in the input has an address"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).is_empty());
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &[
            "eval",
            "-f",
            "examples/xyz",
            "--from",
            "x/a",
            "--to",
            "x/b",
            "--port",
            "80",
            "--protocol",
            "ICMP",
        ][..],
        &[
            "eval",
            "-f",
            "examples/xyz",
            "--from",
            "x/nope",
            "--to",
            "x/b",
            "--port",
            "80",
        ][..],
        &[
            "eval",
            "-f",
            "examples/xyz",
            "--from",
            "x/a",
            "--to",
            "x/b",
            "--port",
            "0",
        ][..],
        &["matrix"][..],
    ] {
        let o = palisade(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
    let o = palisade(&["matrix", "-f", "/nonexistent/path"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/nonexistent/path"));
}

#[test]
fn tenancy_compile_output_is_palisade_input() {
    let dir = std::env::temp_dir().join(format!("palisade-tenancy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state.yaml");
    let labels = dir.join("labels.yaml");
    let o = palisade(&[
        "tenancy",
        "compile",
        "-f",
        "examples/tenancy/config.yaml",
        "examples/tenancy/base.yaml",
        "--state",
        state.to_str().unwrap(),
        "--labels-out",
        labels.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let yaml = stdout(&o);
    assert!(yaml.contains("kind: NetworkPolicy"));
    assert!(
        std::fs::read_to_string(&state)
            .unwrap()
            .contains("crabs/scanner")
    );
    assert!(
        std::fs::read_to_string(&labels)
            .unwrap()
            .contains("tenancy.palisade.io/tool: harvester")
    );
    // The policies load (no pods: the matrix itself is refused as empty, not as invalid).
    let o = palisade_stdin(&["matrix", "-f", "-", "-o", "jsonl"], &yaml);
    let invalid = stderr(&o)
        .lines()
        .any(|l| l.starts_with("<stdin>:") && l.contains(": error: "));
    assert!(!invalid, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no pod in the input has an address"),
        "{}",
        stderr(&o)
    );
    let o = palisade(&[
        "tenancy",
        "compile",
        "-f",
        "examples/tenancy/config.yaml",
        "-o",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kind"], "List");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn tenancy_check_reports_errors_with_lines() {
    let o = palisade_stdin(
        &["tenancy", "check", "-f", "-"],
        "groups: [corn]\ntools:\n  - {name: t, group: wheat}\n",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("<stdin>:3: error: tools[0].group: group \"wheat\" does not exist"),
        "{}",
        stderr(&o)
    );
    let o = palisade(&["tenancy", "check", "-f", "examples/tenancy/config.yaml"]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("ok: 2 groups, 3 tools"));
}

#[test]
fn compile_neutron_json_and_admin_refusal() {
    let o = palisade(&["compile", "--target", "neutron", "-f", "examples/xyz"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("AdminNetworkPolicy protect-z-c"),
        "{}",
        stderr(&o)
    );
    let o = palisade(&[
        "compile",
        "--target",
        "neutron",
        "-f",
        "examples/xyz",
        "--ignore-admin-policies",
        "--peer-mode",
        "remote-groups",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning: ignoring 2"));
    assert!(stderr(&o).contains("security groups"));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let groups = v["security_groups"].as_array().unwrap();
    assert!(groups.iter().any(|g| g["name"] == "np-x/allow-from-y-b"));
    assert_eq!(v["ports"].as_array().unwrap().len(), 9);
}

/// `gen`'s output directory is one cluster for `-f DIR`: network-config-analyzer's lists
/// are hidden, and hidden entries are not read.
#[test]
fn a_generated_directory_reads_as_one_cluster() {
    let dir = std::env::temp_dir().join(format!("palisade-gen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let o = palisade(&["gen", "--pods", "60", "--policies", "10", "-o", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join(".nca/pods.yaml").is_file());
    let o = palisade(&["matrix", "-f", d, "-o", "summary", "--ports", "80"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `eval` and `explain` print the enforced verdict and, where it differs, what the staged
/// policies would decide; `matrix` says staged policies are not in it.
#[test]
fn staged_policies_are_reported_beside_the_enforced_verdict() {
    let staged = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: trial, namespace: x, annotations: {palisade.dev/staged: \"true\"}}\nspec: {podSelector: {}, ingress: [{}]}\n";
    let args = [
        "-f",
        "examples/xyz",
        "-f",
        "-",
        "--from",
        "y/a",
        "--to",
        "x/a",
        "--port",
        "80",
    ];
    let o = palisade_stdin(&[&["eval", "-o", "json"][..], &args].concat(), staged);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["allowed"], false);
    assert_eq!(v["staged"]["allowed"], true, "{v}");
    assert_eq!(v["staged"]["ingress"]["policy"]["name"], "trial");
    let o = palisade_stdin(&[&["explain"][..], &args].concat(), staged);
    assert!(
        stdout(&o).contains("Staged policies: with them enforced"),
        "{}",
        stdout(&o)
    );
    // y/b is allowed either way: nothing staged to report.
    let o = palisade_stdin(
        &[
            "eval",
            "-f",
            "examples/xyz",
            "-f",
            "-",
            "--from",
            "y/b",
            "--to",
            "x/a",
            "--port",
            "80",
            "-o",
            "json",
        ],
        staged,
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v.get("staged").is_none(), "{v}");
    let o = palisade_stdin(
        &["matrix", "-f", "examples/xyz", "-f", "-", "-o", "summary"],
        staged,
    );
    assert!(
        stderr(&o).contains("1 staged policy is not enforced"),
        "{}",
        stderr(&o)
    );
}

const DUAL_AND_HOST: &str = "apiVersion: v1
kind: Namespace
metadata: {name: x}
---
apiVersion: v1
kind: Namespace
metadata: {name: kube-system}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {addresses: [{type: InternalIP, address: 192.168.0.1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: proxy, namespace: kube-system}
spec: {nodeName: n1, hostNetwork: true}
status: {podIP: 192.168.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x}
spec: {nodeName: n1}
status: {podIPs: [{ip: 10.0.0.1}, {ip: 'fd00::1'}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: x}
status: {podIPs: [{ip: 'fd00::2'}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: s, namespace: x}
";

#[test]
fn eval_meets_in_the_family_both_ends_share() {
    let o = palisade_stdin(
        &[
            "eval", "-f", "-", "--from", "x/a", "--to", "x/b", "--port", "80",
        ],
        DUAL_AND_HOST,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("ALLOWED: x/a (fd00::1) -> x/b (fd00::2) TCP/80\n"),
        "{}",
        stdout(&o)
    );
    let o = palisade_stdin(
        &[
            "eval", "-f", "-", "--from", "10.0.0.1", "--to", "x/b", "--port", "80",
        ],
        DUAL_AND_HOST,
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "an IPv4 address cannot reach an IPv6-only pod"
    );
}

#[test]
fn a_host_network_pod_is_named_once_with_its_address_once() {
    let o = palisade_stdin(
        &[
            "eval",
            "-f",
            "-",
            "--from",
            "kube-system/proxy",
            "--to",
            "x/a",
            "--port",
            "80",
        ],
        DUAL_AND_HOST,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("ALLOWED: node n1 (192.168.0.1) -> x/a (10.0.0.1) TCP/80\n"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn diff_prints_each_notice_once() {
    let dir = std::env::temp_dir().join(format!("palisade-notice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("c.yaml");
    std::fs::write(&f, DUAL_AND_HOST).unwrap();
    let f = f.to_string_lossy().into_owned();
    let o = palisade(&["diff", "-f", &f, "--to", &f]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let notices = stderr(&o)
        .matches("v1 ConfigMap is not a kind Palisade reads")
        .count();
    assert_eq!(notices, 1, "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn matrix_port_names_resolve_against_the_destinations_shown() {
    let cluster = "apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x}
spec: {containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: w}
spec: {containers: [{name: c, ports: [{name: http, containerPort: 9090}]}]}
status: {podIP: 10.0.0.2}
";
    let o = palisade_stdin(
        &[
            "matrix", "-f", "-", "--ports", "http", "--to", "x", "-o", "jsonl",
        ],
        cluster,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("\"port\":8080"), "{out}");
    assert!(
        !out.contains("9090"),
        "w/b's http is not a destination shown: {out}"
    );
}
