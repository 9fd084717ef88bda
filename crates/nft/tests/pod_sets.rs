//! Pod addresses are always a named set, however few: a pod joining or leaving a rule's
//! peers changes that set's elements, never the chains that use it.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use palisade_engine::{Change, Engine, Options};
use palisade_model::Object;
use palisade_nft::{compile, compile_after, update_script};

/// Namespace `a`: a database pod, two web pods allowed to reach it, and one other pod;
/// and an `ipBlock` peer of two CIDRs, which stays inline.
fn engine() -> Engine {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n\
         status: {addresses: [{type: InternalIP, address: 192.168.1.1}]}\n\
         ---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n",
    );
    for (i, app) in ["db", "web", "web", "other"].iter().enumerate() {
        yaml += &format!(
            "---\napiVersion: v1\nkind: Pod\n\
             metadata: {{name: p{i}, namespace: a, labels: {{app: {app}}}}}\n\
             spec: {{nodeName: n1, containers: [{{name: c, image: i}}]}}\n\
             status: {{podIP: 10.0.0.{ip}}}\n",
            ip = 10 * i + 1
        );
    }
    let policy = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db, namespace: a}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: web}}}]
    ports: [{port: 5432}]
  - from: [{ipBlock: {cidr: 172.16.0.0/16}}, {ipBlock: {cidr: 172.17.0.0/16}}]
"#;
    let loaded = palisade_model::load_sources(
        [("cluster.yaml", yaml.as_str()), ("policy.yaml", policy)],
        Default::default(),
    )
    .unwrap();
    Engine::new(loaded.cluster, Options::default())
}

#[test]
fn a_pod_joining_a_short_peer_list_changes_only_set_elements() {
    let mut e = engine();
    let old = compile(&e, None).unwrap();
    let text = old.render();
    // Two web pods are a named set; the CIDRs are few and hold no pod: inline.
    let allow = |rs: &palisade_nft::Ruleset| {
        rs.render()
            .lines()
            .filter(|l| l.contains("5432"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert!(
        allow(&old).iter().all(|l| l.contains("ip saddr @s4i")),
        "{text}"
    );
    assert!(text.contains("ip saddr { 172.16.0.0/15 }"), "{text}");

    // The other pod takes the web pods' labels: one more address in their set.
    let mut web = e.cluster().pods[3].clone();
    web.labels = e.cluster().pods[1].labels.clone();
    e.apply(Change::Upsert(Object::Pod(web)));
    let new = compile_after(&e, None, &old).unwrap();
    assert_eq!(new, compile_after(&e, None, &old).unwrap());
    // The pod's old class is gone (its chains are deleted); nothing is written.
    let (script, _) = update_script(&old, &new);
    assert!(
        !script.contains("add chain") && !script.contains("add rule"),
        "no chain written:\n{script}"
    );
    assert!(
        script.contains("add element inet palisade s4i") && script.contains("10.0.0.31"),
        "{script}"
    );
    assert_eq!(allow(&old), allow(&new));
}
