//! The agent's compiles name the egress and the ingress side's sets and chains in
//! parallel, each side apart, and join them; the reference names them in order. Where the
//! two would differ (one name for different contents on the two sides), the sides are
//! named in order instead, so the ruleset is the reference's.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::fmt::Write;

use palisade_engine::{Engine, Options};
use palisade_nft::{Compiled, compile};

/// Namespaces `a` (team red) and `b` (team blue), six pods each at addresses no prefix
/// merges (a named set each), and two policies with the same relative peer: egress for
/// the pods of `b`, ingress for the pods of `a`. The egress side names the peer's set
/// after `b`'s pods, the ingress side after `a`'s: named apart, both take the set's base
/// name.
fn engine() -> Engine {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n\
         status: {addresses: [{type: InternalIP, address: 192.168.1.1}]}\n",
    );
    for (ns, team, net) in [("a", "red", 1), ("b", "blue", 2)] {
        write!(
            yaml,
            "---\napiVersion: v1\nkind: Namespace\n\
             metadata: {{name: {ns}, labels: {{team: {team}}}}}\n"
        )
        .unwrap();
        for i in 0..6 {
            write!(
                yaml,
                "---\napiVersion: v1\nkind: Pod\n\
                 metadata: {{name: p{i}, namespace: {ns}, labels: {{app: w}}}}\n\
                 spec: {{nodeName: n1, containers: [{{name: c, image: i}}]}}\n\
                 status: {{podIP: 10.0.{net}.{ip}}}\n",
                ip = 4 * i + 1
            )
            .unwrap();
        }
    }
    let policies = r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: egress-to-team}
spec:
  priority: 5
  subject: {namespaces: {matchLabels: {team: blue}}}
  egress:
  - {action: Allow, to: [{namespaces: {sameLabels: [team]}}]}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: ingress-from-team}
spec:
  priority: 6
  subject: {namespaces: {matchLabels: {team: red}}}
  ingress:
  - {action: Allow, from: [{namespaces: {sameLabels: [team]}}]}
"#;
    let loaded = palisade_model::load_sources(
        [("cluster.yaml", yaml.as_str()), ("policies.yaml", policies)],
        Default::default(),
    )
    .unwrap();
    Engine::new(loaded.cluster, Options::default())
}

#[test]
fn sides_that_name_one_set_apart_are_named_in_order() {
    let e = engine();
    let reference = compile(&e, None).unwrap();
    // The case is there: named in order, the second side's set takes a name with a
    // digest of its addresses.
    assert!(
        reference.sets.iter().any(|s| s.name.contains('_')),
        "{}",
        reference.render()
    );
    let compiled = Compiled::full(&e, None, None).unwrap();
    assert_eq!(compiled.ruleset().render(), reference.render());
    assert!(**compiled.ruleset() == reference);
}
