//! ClusterNetworkPolicy `domainNames` offline: `--dns FILE` maps names to addresses, a
//! domain peer matches the addresses of the names its patterns match, and the answer names
//! the pattern and the name; without a map the peer fails closed.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use common::{palisade, palisade_stdin, stderr, stdout};

const CLUSTER: &str = "crates/cli/tests/fixtures/domains/cluster.yaml";
const HOSTS: &str = "crates/cli/tests/fixtures/domains/hosts";
const YAML: &str = "crates/cli/tests/fixtures/domains/dns.yaml";

fn eval(to: &str, dns: Option<&str>, json: bool) -> std::process::Output {
    let mut args = vec![
        "eval",
        "-f",
        CLUSTER,
        "--from",
        "pay/pay-0",
        "--to",
        to,
        "--port",
        "443",
    ];
    if let Some(d) = dns {
        args.extend(["--dns", d]);
    }
    if json {
        args.extend(["-o", "json"]);
    }
    palisade(&args)
}

#[test]
fn a_matching_name_is_allowed_and_named() {
    let out = stdout(&eval("api.stripe.com", Some(HOSTS), false));
    assert!(
        out.starts_with("ALLOWED: pay/pay-0 (10.0.0.1) -> 54.187.174.169 TCP/443\n  egress:  allowed: Admin tier: ClusterNetworkPolicy stripe, egress rule 1 \"stripe\" (Accept)\n           `*.stripe.com` matched api.stripe.com \u{2192} 54.187.174.169\n"),
        "{out}"
    );
    // The exact pattern, written in capitals with a trailing dot, matches in any case.
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&eval("93.184.216.34", Some(HOSTS), true))).unwrap();
    assert_eq!(json["allowed"], true);
    assert_eq!(json["domain"]["pattern"], "Example.COM.");
    assert_eq!(json["domain"]["name"], "example.com");
}

#[test]
fn names_the_patterns_do_not_match_are_denied() {
    for to in ["evil.example.net", "203.0.113.9"] {
        let out = stdout(&eval(to, Some(HOSTS), false));
        assert!(out.starts_with("DENIED"), "{to}: {out}");
        assert!(out.contains("egress rule 2 \"deny\" (Deny)"), "{to}: {out}");
    }
    // A name that shares a matching name's address is allowed: the peer holds addresses.
    assert!(stdout(&eval("www.example.com", Some(HOSTS), false)).starts_with("ALLOWED"));
    // `*.stripe.com` does not match stripe.com itself.
    let out = stdout(&eval("stripe.com", Some(YAML), false));
    assert!(out.starts_with("DENIED"), "{out}");
    // Without its deny rule, the walk lists why the domain rule did not match.
    let allow_only =
        std::fs::read_to_string(format!("{}/../../{CLUSTER}", env!("CARGO_MANIFEST_DIR")))
            .unwrap()
            .replace(
                "  - name: deny\n    action: Deny\n    to: [{networks: [0.0.0.0/0]}]\n",
                "",
            );
    let walk = stdout(&palisade_stdin(
        &[
            "explain",
            "-f",
            "-",
            "--from",
            "pay/pay-0",
            "--to",
            "stripe.com",
            "--port",
            "443",
            "--dns",
            YAML,
        ],
        allow_only,
    ));
    assert!(
        walk.contains("to domainNames [*.stripe.com,Example.COM.] (no name it matches resolves to the address in the DNS map)"),
        "{walk}"
    );
}

#[test]
fn without_a_map_the_peer_fails_closed_and_says_so() {
    let o = eval("54.187.174.169", None, false);
    assert!(stdout(&o).starts_with("DENIED"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("cluster.yaml:6: notice: ClusterNetworkPolicy stripe: its domainNames peers match nothing without a DNS map (--dns FILE); they fail closed (the node agent learns their addresses with --dns-resolver)"),
        "{}",
        stderr(&o)
    );
    let by_name = eval("api.stripe.com", None, false);
    assert_eq!(by_name.status.code(), Some(2));
    assert!(stderr(&by_name).contains("needs a DNS map: --dns FILE"));
}

#[test]
fn a_bad_map_is_refused_with_its_line() {
    let dir = std::env::temp_dir().join(format!("palisade-dns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad-hosts");
    std::fs::write(&bad, "10.0.0.1 ok.example.com\n10.0.0.300 x.example.com\n").unwrap();
    let o = eval("ok.example.com", Some(bad.to_str().unwrap()), false);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("bad-hosts:2: error"), "{}", stderr(&o));
    let o = eval("ok.example.com", Some("/nonexistent/dns"), false);
    assert_eq!(o.status.code(), Some(1));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lint_reports_accidental_unresolved_and_overlapping_entries() {
    let policy = "apiVersion: v1\nkind: Pod\nmetadata: {name: pay-0, namespace: pay}\nstatus: {podIP: 10.0.0.1}\n---\napiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata: {name: stripe}\nspec:\n  tier: Admin\n  priority: 10\n  subject: {namespaces: {}}\n  egress:\n  - name: deny-aws\n    action: Deny\n    to: [{networks: [54.187.0.0/16]}]\n  - name: stripe\n    action: Accept\n    to:\n    - domainNames:\n      - \"*.stripe.com\"\n      - \"_x.example.com\"\n      - \"nothing.example.org\"\n";
    let codes = |dns: bool| {
        let mut args = vec!["lint", "-f", "-", "-o", "json"];
        if dns {
            args.extend(["--dns", HOSTS]);
        }
        let json: serde_json::Value =
            serde_json::from_str(&stdout(&palisade_stdin(&args, policy))).unwrap();
        let mut codes: Vec<(String, u64)> = json["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["code"].as_str().unwrap().to_string(),
                    f["line"].as_u64().unwrap(),
                )
            })
            .collect();
        codes.sort();
        codes
    };
    let pal = |c: &str, line: u64| (c.to_string(), line);
    assert_eq!(
        codes(true),
        [
            pal("PAL019", 22),
            pal("PAL020", 22),
            pal("PAL020", 23),
            pal("PAL021", 21)
        ]
    );
    // Without a map only the pattern itself can be judged.
    assert_eq!(codes(false), [pal("PAL019", 22)]);
}
