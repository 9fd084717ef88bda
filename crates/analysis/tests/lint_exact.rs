//! Lint findings that claim a rule changes nothing (PAL002 overridden, PAL004 shadowed,
//! PAL005 redundant) are checked by deleting the rule and comparing every connection
//! before and after, single-stack and dual-stack.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use palisade_analysis::lint::Code;
use palisade_analysis::{Analysis, diff};
use palisade_engine::{Engine, Options};
use palisade_gen::strategies::cluster;
use palisade_model::{Cluster, Direction, LoadOptions};
use proptest::prelude::*;

/// The rule a finding is about: (admin?, policy index, direction, rule index).
fn rule_of(c: &Cluster, object: &str, field: &str) -> Option<(bool, usize, Direction, usize)> {
    let (dir, k) = if let Some(k) = field.strip_prefix("spec.ingress[") {
        (Direction::Ingress, k)
    } else {
        (Direction::Egress, field.strip_prefix("spec.egress[")?)
    };
    let k: usize = k.strip_suffix(']')?.parse().ok()?;
    if let Some(i) = c
        .network_policies
        .iter()
        .position(|p| p.reference().to_string() == object)
    {
        return Some((false, i, dir, k));
    }
    let i = c
        .admin_policies
        .iter()
        .position(|p| p.reference().to_string() == object)?;
    Some((true, i, dir, k))
}

/// The cluster without that rule.
fn without(mut c: Cluster, (admin, i, dir, k): (bool, usize, Direction, usize)) -> Cluster {
    if admin {
        let p = &mut c.admin_policies[i];
        match dir {
            Direction::Ingress => p.ingress.remove(k),
            Direction::Egress => p.egress.remove(k),
        };
    } else {
        let p = &mut c.network_policies[i];
        match dir {
            Direction::Ingress => p.ingress.remove(k),
            Direction::Egress => p.egress.remove(k),
        };
    }
    c
}

/// Deletes the rule of every finding of `codes` and returns the first one whose deletion
/// changes a connection.
fn check(c: &Cluster) -> Result<usize, String> {
    let old = Engine::new(c.clone(), Options::default());
    let mut checked = 0;
    for f in Analysis::new(&old).lint() {
        if !matches!(
            f.code,
            Code::OverriddenRule | Code::ShadowedRule | Code::RedundantRule
        ) {
            continue;
        }
        let Some(rule) = rule_of(c, &f.object, &f.field) else {
            return Err(format!("no rule for {f}"));
        };
        let new = Engine::new(without(c.clone(), rule), Options::default());
        let d = diff::diff(&old, &new);
        if let Some((g, a, b)) = d.changes().next() {
            return Err(format!(
                "{f}\ndeleting it changes {} -> {} {} {} {}: {:?}",
                a.name(),
                b.name(),
                g.family.as_str(),
                g.protocol,
                g.ports,
                g.change
            ));
        }
        checked += 1;
    }
    Ok(checked)
}

/// Every rule list starts with a rule that covers the pods' IPv4 addresses only
/// (`10.0.0.0/16`), with the ports and action of the rule it precedes: on a dual-stack
/// cluster it decides every IPv4 connection of the later rules, and no IPv6 one.
fn ipv4_rule_first(mut c: Cluster) -> Cluster {
    let pods: ipnet::IpNet = "10.0.0.0/16".parse().unwrap();
    for np in &mut c.network_policies {
        for rules in [&mut np.ingress, &mut np.egress] {
            if let Some(first) = rules.first() {
                let block = palisade_model::IpBlock {
                    cidr: pods,
                    except: Vec::new(),
                };
                let rule = palisade_model::NetworkPolicyRule {
                    ports: first.ports.clone(),
                    peers: Some(vec![palisade_model::NetworkPolicyPeer::IpBlock(block)]),
                };
                rules.insert(0, rule);
            }
        }
    }
    for a in &mut c.admin_policies {
        if let Some(first) = a.egress.first() {
            let rule = palisade_model::AdminRule {
                name: None,
                peers: vec![palisade_model::AdminPeer::Networks(vec![pods])],
                ..first.clone()
            };
            a.egress.insert(0, rule);
        }
    }
    c
}

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(200, 0x11a7_2026))]

    /// A rule lint says changes nothing can be deleted without changing any connection.
    #[test]
    fn deleting_what_lint_flags_changes_no_connection(c in cluster(), v6 in prop::option::of(any::<bool>()), v4_first in any::<bool>()) {
        let c = if v4_first { ipv4_rule_first(c) } else { c };
        let c = match v6 {
            Some(rules) => common::dual_stack(c, rules),
            None => c,
        };
        let r = check(&c);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

const DUAL_STACK: &str = "apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x, labels: {app: a}}
status: {podIPs: [{ip: 10.0.0.1}, {ip: 'fd00::1'}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: x, labels: {app: b}}
status: {podIPs: [{ip: 10.0.0.2}, {ip: 'fd00::2'}]}
";

fn codes(policies: &str) -> Vec<(Code, String)> {
    let loaded = palisade_model::load_sources(
        [("c.yaml", DUAL_STACK), ("p.yaml", policies)],
        LoadOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let c = loaded.cluster;
    let r = check(&c);
    assert!(r.is_ok(), "{}", r.unwrap_err());
    Analysis::new(&Engine::new(c, Options::default()))
        .lint()
        .into_iter()
        .map(|f| (f.code, f.field))
        .collect()
}

/// An earlier rule that covers the peers' IPv4 addresses only does not make a later rule
/// for the same pods redundant: it still allows their IPv6 connections.
#[test]
fn a_rule_after_an_ipv4_only_rule_is_not_redundant_on_dual_stack() {
    let found = codes(
        "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b, namespace: x}
spec:
  podSelector: {matchLabels: {app: b}}
  ingress:
  - from: [{ipBlock: {cidr: 10.0.0.0/8}}]
  - from: [{podSelector: {matchLabels: {app: a}}}]
",
    );
    assert!(
        !found.iter().any(|(c, _)| *c == Code::RedundantRule),
        "{found:?}"
    );
}

#[test]
fn an_admin_rule_after_an_ipv4_only_rule_is_not_shadowed_on_dual_stack() {
    let found = codes(
        "apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: p}
spec:
  priority: 1
  subject: {namespaces: {}}
  egress:
  - {action: Deny, to: [{networks: [10.0.0.0/8]}]}
  - {action: Deny, to: [{pods: {namespaceSelector: {}, podSelector: {}}}]}
",
    );
    assert!(
        !found.iter().any(|(c, _)| *c == Code::ShadowedRule),
        "{found:?}"
    );
}

#[test]
fn a_rule_the_admin_tier_overrides_in_ipv4_only_is_not_overridden_on_dual_stack() {
    let found = codes(
        "apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: p}
spec:
  priority: 1
  subject: {namespaces: {}}
  ingress:
  - {action: Deny, from: [{namespaces: {}}], ports: [{portNumber: {port: 1}}]}
  egress:
  - {action: Allow, to: [{networks: [10.0.0.0/8]}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a, namespace: x}
spec:
  podSelector: {matchLabels: {app: a}}
  policyTypes: [Egress]
  egress:
  - to: [{podSelector: {matchLabels: {app: b}}}]
",
    );
    assert!(
        !found.iter().any(|(c, _)| *c == Code::OverriddenRule),
        "{found:?}"
    );
}
