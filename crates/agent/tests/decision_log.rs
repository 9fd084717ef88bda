//! Decision-log lines: the endpoints by name, the tier, the policy and rule the kernel's
//! log prefix stands for, and what staged policies would do instead.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::sync::Arc;
use std::time::SystemTime;

use palisade_agent::decision_log::line;
use palisade_agent::nflog::LoggedPacket;
use palisade_agent::snapshot::Snapshot as State;
use palisade_engine::{Decision, Engine, Options};
use palisade_model::Protocol;

const CLUSTER: &str = include_str!("../../../examples/xyz/cluster.yaml");
const DENY_X: &str = include_str!("../../../examples/xyz/policies/01-deny-ingress-x.yaml");
const ANP: &str = include_str!("../../../examples/xyz/policies/02-anp.yaml");

fn state(policies: &str) -> State {
    let loaded = palisade_model::load_sources(
        [("c.yaml", CLUSTER), ("p.yaml", policies)],
        Default::default(),
    )
    .unwrap();
    let staged = (!loaded.cluster.staged.is_empty())
        .then(|| Engine::new(loaded.cluster.with_staged(), Options::default()));
    let engine = Engine::new(loaded.cluster, Options::default());
    let ruleset = palisade_nft::compile(&engine, None).unwrap();
    State {
        generation: 1,
        engine: Some(Arc::new(engine)),
        staged: staged.map(Arc::new),
        ruleset: Some(Arc::new(ruleset)),
    }
}

/// The log prefix the ruleset uses for ingress isolation by `allow-from-y-b`.
fn isolation_prefix(state: &State) -> String {
    state
        .ruleset
        .as_ref()
        .unwrap()
        .log_prefixes()
        .find(|(_, d)| matches!(&d.decision, Decision::Isolated(p) if p[0].reference.name == "allow-from-y-b"))
        .map(|(p, _)| p)
        .unwrap()
}

fn packet(prefix: &str) -> LoggedPacket {
    LoggedPacket {
        prefix: format!("{prefix} "),
        // y/a → x/a on TCP 80: x accepts only y/b
        src: "10.0.1.10".parse().unwrap(),
        dst: "10.0.0.10".parse().unwrap(),
        protocol: Some(Protocol::Tcp),
        sport: Some(40000),
        dport: Some(80),
        original_dst: None,
        payload: Vec::new(),
    }
}

#[test]
fn a_denied_packet_names_the_endpoints_and_the_isolating_policy() {
    let s = state(DENY_X);
    let l = line(&s, &packet(&isolation_prefix(&s)), SystemTime::now()).unwrap();
    assert_eq!(l["src"], "y/a");
    assert_eq!(l["dst"], "x/a");
    assert_eq!(l["protocol"], "TCP");
    assert_eq!(l["port"], 80);
    assert_eq!(l["verdict"], "deny");
    assert_eq!(l["direction"], "Ingress");
    assert_eq!(l["tier"], "NetworkPolicy");
    assert_eq!(
        l["decision"]["isolating"][0]["name"], "allow-from-y-b",
        "{l}"
    );
    assert!(l.get("staged").is_none());
}

#[test]
fn an_admin_rule_is_named_with_its_index_and_name() {
    let s = state(ANP);
    let (prefix, _) = s
        .ruleset
        .as_ref()
        .unwrap()
        .log_prefixes()
        .find(|(_, d)| matches!(&d.decision, Decision::Rule(m) if m.rule_name() == Some("deny-everyone-else")))
        .unwrap();
    let mut p = packet(&prefix);
    p.dst = "10.0.2.12".parse().unwrap(); // z/c
    let l = line(&s, &p, SystemTime::now()).unwrap();
    assert_eq!(l["policy"]["kind"], "AdminNetworkPolicy");
    assert_eq!(l["policy"]["name"], "protect-z-c");
    assert_eq!(l["rule"]["name"], "deny-everyone-else");
    assert_eq!(l["rule"]["index"], 1);
    assert_eq!(l["dst"], "z/c");
}

#[test]
fn a_staged_policy_that_would_decide_otherwise_is_reported() {
    // Enforced: x is isolated (y/a is denied). Staged: an allow-all ingress in x.
    let staged = "---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: trial, namespace: x, annotations: {palisade.dev/staged: \"true\"}}\nspec: {podSelector: {}, ingress: [{}]}\n";
    let s = state(&format!("{DENY_X}{staged}"));
    let l = line(&s, &packet(&isolation_prefix(&s)), SystemTime::now()).unwrap();
    assert_eq!(l["verdict"], "deny");
    assert_eq!(l["staged"]["allowed"], true, "{l}");
    assert_eq!(
        l["staged"]["verdict"]["ingress"]["policy"]["name"], "trial",
        "{l}"
    );
}

#[test]
fn a_prefix_of_no_rule_in_force_gives_no_line() {
    let s = state(DENY_X);
    assert!(line(&s, &packet("pal-999"), SystemTime::now()).is_none());
}

#[test]
fn every_log_prefix_reads_back_as_its_decision() {
    let s = state(&format!("{DENY_X}---\n{ANP}"));
    let ruleset = s.ruleset.as_ref().unwrap();
    assert!(ruleset.log_prefixes().count() > 2);
    for (prefix, decision) in ruleset.log_prefixes() {
        assert_eq!(
            ruleset.logged_decision(&format!("{prefix} ")),
            Some(decision)
        );
    }
    assert_eq!(ruleset.logged_decision("pal-x"), None);
    assert_eq!(ruleset.logged_decision("other-1"), None);
}

#[test]
fn a_new_connection_that_staged_policies_would_deny_is_reported() {
    use palisade_agent::decision_log::staged_denial;
    // Enforced: nothing isolates x. Staged: a lockdown of x.
    let staged = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: lockdown, namespace: x, annotations: {palisade.dev/staged: \"true\"}}\nspec: {podSelector: {}, policyTypes: [Ingress]}\n";
    let s = state(staged);
    let p = palisade_nft::Packet {
        src: "10.0.1.10".parse().unwrap(),
        dst: "10.0.0.10".parse().unwrap(),
        protocol: Protocol::Tcp,
        dport: 80,
    };
    let l = staged_denial(&s, &p, SystemTime::now()).unwrap();
    assert_eq!(l["src"], "y/a");
    assert_eq!(l["dst"], "x/a");
    assert_eq!(l["verdict"], "allow");
    assert_eq!(l["staged"]["allowed"], false, "{l}");
    assert_eq!(
        l["staged"]["verdict"]["ingress"]["isolating"][0]["name"], "lockdown",
        "{l}"
    );
    // A connection the staged policies leave alone: no line.
    let mut out = p;
    out.dst = "10.0.1.11".parse().unwrap(); // y/b
    assert!(staged_denial(&s, &out, SystemTime::now()).is_none());
}

#[test]
fn a_denied_connection_addressed_to_a_service_names_it_and_the_address() {
    // x/a's Service at 10.96.0.10:8080 (targetPort 80), and a NodePort 30080
    let svc = "---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: x}\nspec: {type: NodePort, clusterIP: 10.96.0.10, selector: {pod: a}, ports: [{port: 8080, targetPort: 80, nodePort: 30080}]}\n";
    let s = state(&format!("{DENY_X}{svc}"));
    let mut p = packet(&isolation_prefix(&s));
    // not translated: no Service
    let l = line(&s, &p, SystemTime::now()).unwrap();
    assert!(l.get("service").is_none(), "{l}");
    for (to, want) in [
        ("10.96.0.10:8080", "10.96.0.10:8080"),
        ("192.168.1.1:30080", "192.168.1.1:30080"), // node-1's address, the nodePort
    ] {
        let to: std::net::SocketAddr = to.parse().unwrap();
        p.original_dst = Some((to.ip(), Some(to.port())));
        let l = line(&s, &p, SystemTime::now()).unwrap();
        assert_eq!(l["service"], "x/web", "{l}");
        assert_eq!(l["serviceAddress"], want, "{l}");
        assert_eq!(l["dst"], "x/a", "{l}");
        assert_eq!(l["port"], 80, "{l}");
    }
    // translated from an address that is no Service's: no Service named
    p.original_dst = Some(("10.96.0.99".parse().unwrap(), Some(8080)));
    let l = line(&s, &p, SystemTime::now()).unwrap();
    assert!(l.get("service").is_none(), "{l}");
}
