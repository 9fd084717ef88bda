//! Verdicts carry their own provenance: a verdict taken before [`Engine::apply`] still names
//! the policy and rule that decided it, however the engine's internal order changed since.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use common::*;
use palisade_engine::{Change, Decision, Engine, Verdict};
use palisade_model::{Direction, Kind, Object, ObjectKey};

/// Three ingress allow-lists on x/a, each from one namespace; the one from z is last.
const THREE_ALLOWS: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-x, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: x}}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-y, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: 'y'}}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-z, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: z}}}]}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: first}
spec:
  priority: 10
  subject: {namespaces: {matchLabels: {ns: 'y'}}}
  ingress: [{name: never, action: Deny, from: [{namespaces: {matchLabels: {ns: none}}}]}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: deny-x-to-y}
spec:
  priority: 20
  subject: {namespaces: {matchLabels: {ns: 'y'}}}
  ingress: [{name: block-x, action: Deny, from: [{namespaces: {matchLabels: {ns: x}}}]}]
"#;

fn rule_of(v: &Verdict) -> (String, Option<String>) {
    let Decision::Rule(m) = &v.ingress.decision else {
        panic!("expected a rule: {:?}", v.ingress.decision)
    };
    (m.policy.to_string(), m.rule_name().map(str::to_string))
}

fn remove_np(e: &mut Engine, name: &str) {
    e.apply(Change::Remove(ObjectKey::new(
        Kind::NetworkPolicy,
        Some("x"),
        name,
    )));
}

#[test]
fn a_verdict_taken_before_apply_names_the_same_policy_after() {
    let mut e = engine(THREE_ALLOWS);
    let before = eval(&e, "z/b", "x/a", TCP80);
    let expected = ("NetworkPolicy x/from-z".to_string(), None);
    assert_eq!(rule_of(&before), expected);
    let json_before = serde_json::to_string(&before).unwrap();

    // Removing the first policy moves the last one into its slot.
    remove_np(&mut e, "from-x");
    assert_eq!(rule_of(&before), expected, "the kept verdict is unchanged");
    assert_eq!(serde_json::to_string(&before).unwrap(), json_before);
    assert_eq!(
        rule_of(&eval(&e, "z/b", "x/a", TCP80)),
        expected,
        "a fresh verdict agrees"
    );

    // The same for admin policies, whose order is also rebuilt on every change.
    let before = eval(&e, "x/b", "y/a", TCP80);
    let expected = (
        "AdminNetworkPolicy deny-x-to-y".to_string(),
        Some("block-x".to_string()),
    );
    assert_eq!(rule_of(&before), expected);
    e.apply(Change::Remove(ObjectKey::new(
        Kind::AdminNetworkPolicy,
        None,
        "first",
    )));
    assert_eq!(rule_of(&before), expected);
    assert_eq!(rule_of(&eval(&e, "x/b", "y/a", TCP80)), expected);
}

#[test]
fn an_isolation_verdict_keeps_its_isolating_policies() {
    let mut e = engine(THREE_ALLOWS);
    assert!(eval(&e, "y/b", "x/a", TCP80).allowed, "from-y allows y/b");
    remove_np(&mut e, "from-y");
    let denied = eval(&e, "y/b", "x/a", TCP80);
    let Decision::Isolated(by) = &denied.ingress.decision else {
        panic!("{:?}", denied.ingress.decision)
    };
    let names: Vec<String> = by.iter().map(ToString::to_string).collect();
    assert_eq!(names, ["NetworkPolicy x/from-x", "NetworkPolicy x/from-z"]);
    for name in ["from-x", "from-z"] {
        remove_np(&mut e, name);
    }
    let names_after: Vec<String> = by.iter().map(ToString::to_string).collect();
    assert_eq!(
        names, names_after,
        "the isolating policies outlive their removal"
    );
    assert!(eval(&e, "y/b", "x/a", TCP80).allowed);
}

#[test]
fn a_verdict_keeps_the_rule_name_it_was_decided_by() {
    let mut e = engine(THREE_ALLOWS);
    let before = eval(&e, "x/b", "y/a", TCP80);
    let renamed = THREE_ALLOWS.replace("name: block-x", "name: renamed");
    let policy = palisade_model::load_str(&renamed)
        .unwrap()
        .cluster
        .admin_policies
        .into_iter()
        .find(|p| p.name == "deny-x-to-y")
        .unwrap();
    e.apply(Change::Upsert(Object::Admin(policy)));
    assert_eq!(rule_of(&before).1.as_deref(), Some("block-x"));
    assert_eq!(
        rule_of(&eval(&e, "x/b", "y/a", TCP80)).1.as_deref(),
        Some("renamed")
    );
}

#[test]
fn the_json_form_names_tier_policy_rule_and_action() {
    let e = engine(THREE_ALLOWS);
    let v: serde_json::Value = serde_json::to_value(eval(&e, "x/b", "y/a", TCP80)).unwrap();
    assert_eq!(v["allowed"], false);
    assert_eq!(v["egress"]["tier"], "Default");
    assert_eq!(v["egress"]["reason"], "NoPolicy");
    let ingress = &v["ingress"];
    assert_eq!(ingress["tier"], "Admin");
    assert_eq!(ingress["policy"]["kind"], "AdminNetworkPolicy");
    assert_eq!(ingress["policy"]["name"], "deny-x-to-y");
    assert_eq!(ingress["policy"]["priority"], 20);
    assert_eq!(ingress["policy"]["origin"]["file"], "policies.yaml");
    assert_eq!(ingress["direction"], Direction::Ingress.as_str());
    assert_eq!(ingress["rule"]["index"], 0);
    assert_eq!(ingress["rule"]["name"], "block-x");
    assert_eq!(ingress["action"], "Deny");
    assert_eq!(ingress["failClosed"], false);
}
