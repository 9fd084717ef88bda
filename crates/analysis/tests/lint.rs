//! Every lint code: a fixture that triggers it (at the expected field and line) and one
//! that must not. The cluster is the e2e model of `examples/xyz`.

#![allow(clippy::unwrap_used)] // test fixtures are known-valid

mod common;

use palisade_analysis::Analysis;
use palisade_analysis::lint::{Code, Finding, ObjectLines, Severity, sarif};
use palisade_engine::{Engine, Options};
use palisade_model::{DnsMap, LoadOptions};

/// Lints `policies` (named `policies.yaml`) with the e2e cluster, as `palisade lint` does:
/// the loader's diagnostics become findings, and every finding is put on its field's line.
fn lint_with(cluster: bool, policies: &str) -> Vec<Finding> {
    let mut sources = vec![("policies.yaml", policies)];
    if cluster {
        sources.insert(0, ("cluster.yaml", common::CLUSTER));
    }
    let loaded = palisade_model::load_sources(
        sources.clone(),
        LoadOptions {
            skip_invalid: true,
            field_lines: true,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut findings: Vec<Finding> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.severity != palisade_model::Severity::Notice)
        .map(Finding::from_diagnostic)
        .collect();
    // One name for the domainNames checks, as `--dns` would give it.
    let mut cluster = loaded.cluster;
    let dns = DnsMap::parse("dns", "192.0.2.10 api.example.com\n").unwrap();
    cluster.dns = Some(std::sync::Arc::new(dns));
    let engine = Engine::new(cluster, Options::default());
    findings.extend(Analysis::new(&engine).lint());
    ObjectLines::new(engine.cluster(), &loaded.set_aside).refine(&mut findings);
    findings
}

fn lint(policies: &str) -> Vec<Finding> {
    lint_with(true, policies)
}

/// One row per code: the fixture pair, the field the finding names, and that field's line
/// in the triggering fixture.
struct Case {
    code: Code,
    trigger: &'static str,
    clean: &'static str,
    field: &'static str,
    line: usize,
}

macro_rules! case {
    ($code:expr, $name:literal, $field:literal, $line:literal) => {
        Case {
            code: $code,
            trigger: include_str!(concat!("fixtures/lint/", $name, ".yaml")),
            clean: include_str!(concat!("fixtures/lint/", $name, ".clean.yaml")),
            field: $field,
            line: $line,
        }
    };
}

fn cases() -> Vec<Case> {
    vec![
        case!(
            Code::InvalidObject,
            "invalid-object",
            "spec.ingress[0].from[0].ipBlock.except[0]",
            10
        ),
        case!(
            Code::SamePriorityOverlap,
            "same-priority-overlap",
            "spec.priority",
            13
        ),
        case!(
            Code::OverriddenRule,
            "overridden-rule",
            "spec.ingress[0]",
            15
        ),
        case!(
            Code::PartlyOverriddenRule,
            "partly-overridden-rule",
            "spec.ingress[0]",
            15
        ),
        case!(Code::ShadowedRule, "shadowed-rule", "spec.ingress[1]", 9),
        case!(Code::RedundantRule, "redundant-rule", "spec.ingress[1]", 8),
        case!(
            Code::PassToNothing,
            "pass-to-nothing",
            "spec.ingress[0].action",
            8
        ),
        case!(Code::EmptySubject, "empty-subject", "spec.podSelector", 5),
        case!(
            Code::EmptyPeer,
            "empty-peer",
            "spec.ingress[0].from[0].namespaceSelector",
            6
        ),
        case!(
            Code::UnresolvedNamedPort,
            "unresolved-named-port",
            "spec.ingress[0].ports[0].port",
            6
        ),
        case!(
            Code::CidrContainsPods,
            "cidr-contains-pods",
            "spec.ingress[0].from[0].ipBlock.cidr",
            6
        ),
        case!(
            Code::EgressWithoutDns,
            "egress-without-dns",
            "spec.policyTypes",
            6
        ),
        case!(Code::NoPods, "no-pods", "", 0),
        case!(
            Code::SuspiciousInput,
            "suspicious-input",
            "status.podIPs",
            4
        ),
        case!(Code::IgnoredRules, "ignored-rules", "spec.policyTypes", 6),
        case!(
            Code::ServicePortInPolicy,
            "service-port-in-policy",
            "spec.ingress[0].ports",
            14
        ),
        case!(
            Code::ServiceUnreachable,
            "service-unreachable",
            "spec.ports[0]",
            7
        ),
        case!(
            Code::ServicePartlyAdmitted,
            "service-partly-admitted",
            "spec.ports[0]",
            6
        ),
        case!(
            Code::ServiceSelectsNothing,
            "service-selects-nothing",
            "spec.selector",
            5
        ),
        case!(
            Code::DomainPatternAccident,
            "domain-pattern-accident",
            "spec.egress[0].to[0].domainNames[1]",
            15
        ),
        case!(
            Code::UnresolvedDomain,
            "unresolved-domain",
            "spec.egress[0].to[0].domainNames[1]",
            15
        ),
        case!(
            Code::DomainNetworkOverlap,
            "domain-network-overlap",
            "spec.egress[1].to[0].domainNames[0]",
            17
        ),
    ]
}

#[test]
fn every_code_has_a_fixture_pair() {
    let mut covered: Vec<Code> = cases().iter().map(|c| c.code).collect();
    covered.sort();
    assert_eq!(covered, Code::ALL, "one case per code, in code order");
}

#[test]
fn each_trigger_fixture_reports_its_code_at_its_field() {
    for case in cases() {
        let with_cluster = case.code != Code::NoPods;
        let found = lint_with(with_cluster, case.trigger);
        let hit = found
            .iter()
            .find(|f| f.code == case.code)
            .unwrap_or_else(|| panic!("{}: not reported; found {found:#?}", case.code));
        assert_eq!(hit.field, case.field, "{}: field", case.code);
        assert_eq!(
            hit.line, case.line,
            "{}: line of the field: {hit}",
            case.code
        );
        assert_eq!(
            hit.severity,
            case.code.severity(),
            "{}: severity",
            case.code
        );
        if case.code != Code::NoPods {
            assert_eq!(hit.file.as_deref(), Some("policies.yaml"), "{}", case.code);
        }
        assert!(!hit.message.is_empty() && !hit.fix.is_empty(), "{hit}");
    }
}

#[test]
fn each_clean_fixture_does_not_report_its_code() {
    for case in cases() {
        let found = lint(case.clean);
        let hits: Vec<&Finding> = found.iter().filter(|f| f.code == case.code).collect();
        assert!(
            hits.is_empty(),
            "{}: reported on the clean fixture: {hits:#?}",
            case.code
        );
    }
}

#[test]
fn the_bundled_example_policies_only_report_the_pass_with_nothing_below() {
    // protect-z-c passes z's traffic to z/c on to NetworkPolicies, but none isolates z/c
    // and the baseline policy is about y's egress: the Pass acts as Allow.
    let policies = [
        include_str!("../../../examples/xyz/policies/01-deny-ingress-x.yaml"),
        include_str!("../../../examples/xyz/policies/02-anp.yaml"),
        include_str!("../../../examples/xyz/policies/03-banp.yaml"),
    ]
    .join("\n---\n");
    let found = lint(&policies);
    assert_eq!(
        found.iter().map(|f| f.code).collect::<Vec<_>>(),
        [Code::PassToNothing],
        "{found:#?}"
    );
}

#[test]
fn findings_name_the_policies_responsible() {
    let found = lint(include_str!("fixtures/lint/shadowed-rule.yaml"));
    let f = found.iter().find(|f| f.code == Code::ShadowedRule).unwrap();
    assert_eq!(f.object, "AdminNetworkPolicy deny-then-allow");
    assert!(
        f.message.contains("ingress rule 0 \"deny-all\" (Deny)"),
        "names the shadowing rule: {}",
        f.message
    );
    let found = lint(include_str!("fixtures/lint/overridden-rule.yaml"));
    let f = found
        .iter()
        .find(|f| f.code == Code::OverriddenRule)
        .unwrap();
    assert_eq!(
        f.namespace.as_deref(),
        Some("x"),
        "the developer view keeps it"
    );
    assert!(
        f.message.contains("AdminNetworkPolicy allow-all-pods"),
        "{}",
        f.message
    );
    let found = lint(include_str!("fixtures/lint/same-priority-overlap.yaml"));
    let f = found
        .iter()
        .find(|f| f.code == Code::SamePriorityOverlap)
        .unwrap();
    assert!(
        f.message.contains("3 pod(s)") && f.message.contains("AdminNetworkPolicy first first"),
        "{}",
        f.message
    );
}

#[test]
fn a_slash_zero_block_is_info_a_narrower_one_a_warning() {
    let found = lint(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: all, namespace: x}\nspec:\n  podSelector: {}\n  policyTypes: [Ingress]\n  ingress: [{from: [{ipBlock: {cidr: 0.0.0.0/0}}]}]\n",
    );
    let f = found
        .iter()
        .find(|f| f.code == Code::CidrContainsPods)
        .unwrap();
    assert_eq!(f.severity, Severity::Info);
}

#[test]
fn sarif_is_a_2_1_0_log_with_every_rule_and_each_result_on_its_line() {
    let found = lint(include_str!("fixtures/lint/empty-peer.yaml"));
    let log = serde_json::to_value(sarif(&found, "1.2.3")).unwrap();
    assert_eq!(log["version"], "2.1.0");
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "palisade");
    assert_eq!(
        run["tool"]["driver"]["rules"].as_array().map(Vec::len),
        Some(Code::ALL.len())
    );
    let r = run["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "PAL008")
        .unwrap_or_else(|| panic!("{log:#}"));
    assert_eq!(r["level"], "warning");
    let loc = &r["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "policies.yaml");
    assert_eq!(loc["region"]["startLine"], 6);
    let index = r["ruleIndex"].as_u64().unwrap() as usize;
    let rule = &run["tool"]["driver"]["rules"][index];
    assert_eq!(rule["id"], "PAL008");
    assert!(
        rule["helpUri"]
            .as_str()
            .unwrap()
            .ends_with("docs/lint.md#pal008-empty-peer"),
        "{rule:#}"
    );
    let (message, fix) = (
        r["message"]["text"].as_str().unwrap(),
        r["properties"]["fix"].as_str().unwrap(),
    );
    assert!(
        !message.contains("Fix:") && !message.contains(fix),
        "message and fix apart: {r:#}"
    );
    assert!(!fix.is_empty(), "{r:#}");
    assert!(r.get("suppressions").is_none(), "not suppressed: {r:#}");
}
