//! `lint`, `diff` and `coverage` end to end: formats, exit codes, and the staged diff.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use common::{palisade, stderr, stdout};

const CLUSTER: &str = "examples/xyz/cluster.yaml";
const FIXTURES: &str = "crates/analysis/tests/fixtures/lint";

fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}.yaml")
}

#[test]
fn lint_text_names_file_line_code_and_fix() {
    let f = fixture("empty-peer");
    let o = palisade(&["lint", "-f", CLUSTER, &f]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "no --fail-on: exit 0; {}",
        stderr(&o)
    );
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "{f}:6: warning[PAL008 empty-peer]: NetworkPolicy x/from-team: spec.ingress[0].from[0].namespaceSelector: namespaceSelector team=nope matches no namespace"
        )),
        "{out}"
    );
    assert!(out.contains("\n  fix: "), "{out}");
    assert!(
        out.ends_with("1 finding(s): 0 error(s), 1 warning(s), 0 info\n"),
        "{out}"
    );
}

#[test]
fn lint_fail_on_sets_exit_3_at_or_above_the_level() {
    let f = fixture("empty-peer");
    let warn = palisade(&["lint", "-f", CLUSTER, &f, "--fail-on", "warning"]);
    assert_eq!(warn.status.code(), Some(3), "{}", stderr(&warn));
    assert!(stderr(&warn).contains("1 finding(s) at or above --fail-on warning"));
    let err = palisade(&["lint", "-f", CLUSTER, &f, "--fail-on", "error"]);
    assert_eq!(err.status.code(), Some(0), "a warning is below error");
    let clean = palisade(&[
        "lint",
        "-f",
        CLUSTER,
        &fixture("empty-peer.clean"),
        "--fail-on",
        "info",
    ]);
    assert_eq!(clean.status.code(), Some(0), "{}", stdout(&clean));
    let bad = palisade(&["lint", "-f", CLUSTER, "--fail-on", "nope"]);
    assert_eq!(bad.status.code(), Some(2), "usage");
}

#[test]
fn lint_reports_invalid_objects_as_findings_and_exits_1() {
    let f = fixture("invalid-object");
    for format in ["text", "json", "sarif"] {
        let o = palisade(&["lint", "-f", CLUSTER, &f, "-o", format]);
        assert_eq!(o.status.code(), Some(1), "{format}: invalid input");
        assert!(stdout(&o).contains("PAL000"), "{format}: {}", stdout(&o));
        assert!(stdout(&o).contains("must be a strict subset of `cidr`"));
    }
}

#[test]
fn lint_json_and_sarif_parse() {
    let f = fixture("shadowed-rule");
    let o = palisade(&["lint", "-f", CLUSTER, &f, "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let finding = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["code"] == "PAL004")
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(finding["severity"], "warning");
    assert_eq!(finding["file"], f.as_str());
    assert_eq!(finding["line"], 9);
    assert_eq!(finding["field"], "spec.ingress[1]");
    assert_eq!(v["summary"]["warning"], 1);
    let o = palisade(&["lint", "-f", CLUSTER, &f, "-o", "sarif"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let r = &v["runs"][0]["results"][0];
    assert_eq!(r["ruleId"], "PAL004");
    assert_eq!(
        r["locations"][0]["physicalLocation"]["region"]["startLine"],
        9
    );
}

#[test]
fn lint_namespace_keeps_the_developer_view() {
    let f = fixture("overridden-rule");
    let x = palisade(&["lint", "-f", CLUSTER, &f, "--namespace", "x", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&x.stdout).unwrap();
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["PAL002"], "{v:#}");
    let y = palisade(&["lint", "-f", CLUSTER, &f, "--namespace", "y", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&y.stdout).unwrap();
    assert_eq!(v["findings"].as_array().map(Vec::len), Some(0));
}

const DENY_X: &str = "examples/xyz/policies/01-deny-ingress-x.yaml";

#[test]
fn diff_exits_0_when_nothing_changes_and_3_when_something_does() {
    let same = palisade(&["diff", "-f", CLUSTER, DENY_X, "--to", DENY_X, CLUSTER]);
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    assert_eq!(
        stdout(&same),
        "no change over 9 pod(s), 1 node(s), 1 outside address range(s); every port of TCP, UDP and SCTP; IPv4\n"
    );
    let changed = palisade(&[
        "diff", "-f", CLUSTER, "--to", CLUSTER, DENY_X, "--ports", "80",
    ]);
    assert_eq!(changed.status.code(), Some(3), "{}", stderr(&changed));
    assert_eq!(
        stdout(&changed),
        "lost: ingress denied: isolated by NetworkPolicy x/allow-from-y-b and no rule matched\n  x/*, y/{a,c}, z/*, 0.0.0.0/0 -> x/* on TCP 80 (24 pair(s))\n    before: allowed: no policy decided\nmore changes on other ports or protocols are not shown (--ports/--protocols)\n0 pair(s) gained and 24 lost a connection over 9 pod(s), 1 node(s), 1 outside address range(s); every port of TCP, UDP and SCTP; IPv4\n"
    );
    let usage = palisade(&["diff", "-f", CLUSTER]);
    assert_eq!(usage.status.code(), Some(2), "--to or --staged is required");
    let invalid = palisade(&["diff", "-f", CLUSTER, "--to", &fixture("invalid-object")]);
    assert_eq!(invalid.status.code(), Some(1), "invalid input");
}

#[test]
fn diff_ports_take_ranges_and_names_and_narrow_the_report_only() {
    let dir = std::env::temp_dir().join(format!("palisade-diff-ports-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let web = dir.join("web.yaml");
    std::fs::write(
        &web,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: x, labels: {app: web}}\nspec: {containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]}\nstatus: {podIP: 10.0.9.9}\n",
    )
    .unwrap();
    let ssh = dir.join("ssh.yaml");
    std::fs::write(
        &ssh,
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny-web, namespace: x}\nspec: {podSelector: {matchLabels: {app: web}}}\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: ssh, namespace: x}\nspec:\n  podSelector: {matchLabels: {app: web}}\n  ingress: [{ports: [{port: 22}]}]\n",
    )
    .unwrap();
    let (web, ssh) = (web.to_string_lossy(), ssh.to_string_lossy());
    let deny = dir.join("deny.yaml");
    std::fs::write(
        &deny,
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny-web, namespace: x}\nspec: {podSelector: {matchLabels: {app: web}}}\n",
    )
    .unwrap();
    let deny = deny.to_string_lossy();
    // TCP 22 opened to everyone: no pod declares port 22, and it is still a change.
    let all = palisade(&[
        "diff", "-f", CLUSTER, &web, &deny, "--to", CLUSTER, &web, &ssh,
    ]);
    assert_eq!(
        all.status.code(),
        Some(3),
        "{}{}",
        stdout(&all),
        stderr(&all)
    );
    assert!(
        stdout(&all).contains("-> x/web on TCP 22 (11 pair(s))"),
        "{}",
        stdout(&all)
    );
    assert!(
        stdout(&all).contains("0.0.0.0/0"),
        "the outside gains it too: {}",
        stdout(&all)
    );
    let low = palisade(&[
        "diff", "-f", CLUSTER, &web, &deny, "--to", CLUSTER, &web, &ssh, "--ports", "1-1024",
    ]);
    assert_eq!(low.status.code(), Some(3), "{}", stderr(&low));
    assert!(stdout(&low).contains("TCP 22"), "{}", stdout(&low));
    let named = palisade(&[
        "diff", "-f", CLUSTER, &web, &deny, "--to", CLUSTER, &web, &ssh, "--ports", "http",
    ]);
    assert_eq!(
        named.status.code(),
        Some(3),
        "narrowed, but something changed: {}",
        stderr(&named)
    );
    assert!(
        stdout(&named).contains("more changes on other ports or protocols are not shown"),
        "{}",
        stdout(&named)
    );
    assert!(!stdout(&named).contains("TCP 22"), "{}", stdout(&named));
    let unknown = palisade(&["diff", "-f", CLUSTER, "--to", CLUSTER, "--ports", "nosuch"]);
    assert_eq!(
        unknown.status.code(),
        Some(2),
        "a name no pod gives is a usage error"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn diff_jsonl_is_the_matrix_line_plus_change_and_verdicts() {
    let o = palisade(&[
        "diff", "-f", CLUSTER, "--to", CLUSTER, DENY_X, "--ports", "80", "-o", "jsonl",
    ]);
    assert_eq!(o.status.code(), Some(3));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.len(),
        24,
        "one line per changed pair and run of ports"
    );
    let l = lines
        .iter()
        .find(|l| l["from"] == "y/a" && l["to"] == "x/b")
        .unwrap();
    assert_eq!(l["protocol"], "TCP");
    assert_eq!(l["port"], 80);
    assert_eq!(l["allowed"], false);
    assert_eq!(l["change"], "lost");
    assert_eq!(l["before"]["allowed"], true);
    assert_eq!(
        l["after"]["ingress"]["isolating"][0]["name"],
        "allow-from-y-b"
    );
    assert!(
        !lines.iter().any(|l| l["from"] == "y/b"),
        "y/b is still allowed on TCP 80"
    );
}

#[test]
fn diff_json_and_md() {
    let args = [
        "diff", "-f", CLUSTER, "--to", CLUSTER, DENY_X, "--ports", "80",
    ];
    let o = palisade(&[&args[..], &["-o", "json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["same"], false);
    assert_eq!(v["lost"], 24);
    assert_eq!(v["gained"], 0);
    let o = palisade(&[&args[..], &["-o", "md"]].concat());
    let md = stdout(&o);
    assert!(
        md.contains("### lost: ingress denied: isolated by NetworkPolicy x/allow-from-y-b and no rule matched\n\n| from | to | ports | pairs | before |"),
        "{md}"
    );
    assert!(
        md.contains(
            "| x/*, y/{a,c}, z/*, 0.0.0.0/0 | x/* | TCP 80 | 24 | allowed: no policy decided |"
        ),
        "{md}"
    );
}

#[test]
fn diff_staged_compares_enforced_with_enforced_plus_staged() {
    let dir = std::env::temp_dir().join(format!("palisade-staged-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let staged = dir.join("staged.yaml");
    std::fs::write(
        &staged,
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: deny-z\n  namespace: z\n  annotations: {palisade.dev/staged: \"true\"}\nspec: {podSelector: {}}\n",
    )
    .unwrap();
    let staged = staged.to_string_lossy().into_owned();
    let o = palisade(&["diff", "-f", CLUSTER, &staged, "--staged", "--ports", "80"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("-> z/*"), "{out}");
    assert!(out.contains("isolated by NetworkPolicy z/deny-z"), "{out}");
    assert!(
        out.contains("0 pair(s) gained and 27 lost a connection"),
        "{out}"
    );
    let none = palisade(&["diff", "-f", CLUSTER, "--staged"]);
    assert_eq!(
        none.status.code(),
        Some(0),
        "nothing staged: nothing changes"
    );
    let both = palisade(&["diff", "-f", CLUSTER, "--staged", "--to", CLUSTER]);
    assert_eq!(
        both.status.code(),
        Some(2),
        "--staged and --to exclude each other"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn coverage_formats() {
    let o = palisade(&["coverage", "-f", CLUSTER, "examples/xyz/policies"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("exposed: 6 of 9 pod(s) accept connections from outside the cluster\n  y/a: TCP 1-65535; UDP 1-65535; SCTP 1-65535 from any address outside the cluster\n"),
        "{out}"
    );
    assert!(
        out.contains("default deny: 3 of 9 pod(s) for ingress, 0 for egress\n"),
        "{out}"
    );
    assert!(
        out.contains("x/a\n  ingress: isolated by NetworkPolicy x/allow-from-y-b — default deny\n  egress:  open (no policy applies)\n  exposed: not reachable from outside\n"),
        "{out}"
    );
    assert!(
        out.contains("z/c\n  ingress: Admin: AdminNetworkPolicy protect-z-c\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "open (every connection allowed) for ingress: 5 of 9 pod(s): y/a, y/b, y/c, z/a, z/b\n"
        ),
        "{out}"
    );
    let o = palisade(&[
        "coverage",
        "-f",
        CLUSTER,
        "examples/xyz/policies",
        "-o",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["pods"][0]["pod"], "x/a");
    assert_eq!(
        v["pods"][0]["ingress"]["isolatedBy"][0]["name"],
        "allow-from-y-b"
    );
    assert_eq!(
        v["pods"][0]["exposure"]["ports"].as_array().map(Vec::len),
        Some(0)
    );
    let o = palisade(&[
        "coverage",
        "-f",
        CLUSTER,
        "examples/xyz/policies",
        "-o",
        "md",
    ]);
    assert!(stdout(&o).starts_with("exposed: 6 of 9 pod(s)"));
    assert!(stdout(&o).contains("\n| pod | ingress | egress | exposed |\n"));
}

#[test]
fn lint_ignore_annotation_suppresses_its_codes_and_keeps_the_reason() {
    let dir = std::env::temp_dir().join(format!("palisade-lint-ignore-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = |annotation: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: all-then-y\n  namespace: x\n  annotations: {{palisade.dev/lint-ignore: \"{annotation}\"}}\nspec:\n  podSelector: {{}}\n  ingress:\n    - from: [{{namespaceSelector: {{}}}}]\n    - from: [{{namespaceSelector: {{matchLabels: {{ns: \"y\"}}}}}}]\n"
        )
    };
    let file = dir.join("p.yaml");
    std::fs::write(&file, policy("PAL005: defence in depth")).unwrap();
    let f = file.to_string_lossy().into_owned();
    let o = palisade(&["lint", "-f", CLUSTER, &f, "--fail-on", "info"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("suppressed by annotation: ")
            && out
                .contains("PAL005: NetworkPolicy x/all-then-y: spec.ingress[1] (defence in depth)"),
        "{out}"
    );
    assert!(out.ends_with("0 finding(s): 0 error(s), 0 warning(s), 0 info; 1 suppressed (1 by annotation, 0 by the baseline)\n"), "{out}");
    let json = palisade(&["lint", "-f", CLUSTER, &f, "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["findings"][0]["suppressed"]["by"], "annotation");
    assert_eq!(v["findings"][0]["suppressed"]["reason"], "defence in depth");
    assert_eq!(v["summary"]["suppressed"], 1);
    let sarif = palisade(&["lint", "-f", CLUSTER, &f, "-o", "sarif"]);
    let v: serde_json::Value = serde_json::from_slice(&sarif.stdout).unwrap();
    let s = &v["runs"][0]["results"][0]["suppressions"][0];
    assert_eq!(s["kind"], "inSource");
    assert_eq!(s["justification"], "defence in depth");
    // Another code in the annotation does not suppress this one; an unknown code is reported.
    std::fs::write(&file, policy("PAL002")).unwrap();
    let o = palisade(&["lint", "-f", CLUSTER, &f, "--fail-on", "info"]);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    std::fs::write(&file, policy("PAL05")).unwrap();
    let o = palisade(&["lint", "-f", CLUSTER, &f]);
    assert!(
        stdout(&o).contains("\"PAL05\" is not a lint code"),
        "{}",
        stdout(&o)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lint_baseline_fails_only_on_new_findings() {
    let dir = std::env::temp_dir().join(format!("palisade-lint-baseline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let baseline = dir.join("baseline.json").to_string_lossy().into_owned();
    let (redundant, empty) = (fixture("redundant-rule"), fixture("empty-peer"));
    let w = palisade(&[
        "lint",
        "-f",
        CLUSTER,
        &redundant,
        "--write-baseline",
        &baseline,
    ]);
    assert_eq!(w.status.code(), Some(0), "{}", stderr(&w));
    assert!(
        stderr(&w).contains("wrote 1 finding(s) to the baseline"),
        "{}",
        stderr(&w)
    );
    let same = palisade(&[
        "lint",
        "-f",
        CLUSTER,
        &redundant,
        "--baseline",
        &baseline,
        "--fail-on",
        "info",
    ]);
    assert_eq!(same.status.code(), Some(0), "{}", stdout(&same));
    assert!(
        stdout(&same).contains("1 suppressed (0 by annotation, 1 by the baseline)"),
        "{}",
        stdout(&same)
    );
    let new = palisade(&[
        "lint",
        "-f",
        CLUSTER,
        &redundant,
        &empty,
        "--baseline",
        &baseline,
        "--fail-on",
        "warning",
    ]);
    assert_eq!(
        new.status.code(),
        Some(3),
        "a new finding fails: {}",
        stdout(&new)
    );
    assert!(stdout(&new).contains("PAL008"), "{}", stdout(&new));
    std::fs::write(&baseline, "{\"version\": 1}").unwrap();
    let bad = palisade(&["lint", "-f", CLUSTER, &redundant, "--baseline", &baseline]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("not a lint baseline: \"findings\" must be a list"),
        "{}",
        stderr(&bad)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lint_namespace_takes_a_list() {
    let f = fixture("overridden-rule");
    let o = palisade(&[
        "lint",
        "-f",
        CLUSTER,
        &f,
        "--namespace",
        "y,x",
        "-o",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["findings"].as_array().map(Vec::len), Some(1), "{v:#}");
}
