//! Label selectors, parsed from manifests and matched through the engine's label index,
//! select exactly the pods (podSelector) and namespaces (namespaceSelector) that the
//! Kubernetes rules say; selectors the API server would refuse are refused.
#![no_main]

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use palisade_engine::{Engine, Flow};
use palisade_model::{Direction, Protocol};
use serde_json::{Value, json};

/// Label keys: valid ones that overlap, and a few the API server refuses.
const KEYS: [&str; 8] = [
    "app",
    "tier",
    "example.com/role",
    "a.b",
    "x_y",
    "-bad",
    "a/b/c",
    "",
];
/// Label values: valid ones, the empty value, and invalid ones.
const VALUES: [&str; 7] = ["a", "b", "", "A-1.z", "bad value", "-x", "v"];
const OPS: [&str; 5] = ["In", "NotIn", "Exists", "DoesNotExist", "Equals"];

#[derive(Arbitrary, Debug)]
struct Expr {
    key: u8,
    op: u8,
    values: Vec<u8>,
}

#[derive(Arbitrary, Debug)]
struct Sel {
    labels: Vec<(u8, u8)>,
    exprs: Vec<Expr>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    pods: Vec<(bool, Vec<(u8, u8)>)>,
    namespaces: [Vec<(u8, u8)>; 2],
    pod_selector: Sel,
    namespace_selector: Sel,
}

fn key(i: u8) -> &'static str {
    KEYS[usize::from(i) % KEYS.len()]
}
fn value(i: u8) -> &'static str {
    VALUES[usize::from(i) % VALUES.len()]
}

fn labels(pairs: &[(u8, u8)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|&(k, v)| (key(k).to_string(), value(v).to_string()))
        .collect()
}

fn labels_valid(l: &BTreeMap<String, String>) -> bool {
    l.iter()
        .all(|(k, v)| palisade_fuzz::ref_qualified_name(k) && palisade_fuzz::ref_label_value(v))
}

fn selector_json(s: &Sel) -> Value {
    let exprs: Vec<Value> = s
        .exprs
        .iter()
        .take(4)
        .map(|e| {
            let values: Vec<&str> = e.values.iter().take(3).map(|&v| value(v)).collect();
            json!({"key": key(e.key), "operator": OPS[usize::from(e.op) % OPS.len()], "values": values})
        })
        .collect();
    json!({"matchLabels": labels(&s.labels), "matchExpressions": exprs})
}

/// Whether the API server accepts the selector.
fn selector_valid(s: &Sel) -> bool {
    labels_valid(&labels(&s.labels))
        && s.exprs.iter().take(4).all(|e| {
            let values: Vec<&str> = e.values.iter().take(3).map(|&v| value(v)).collect();
            let op = OPS[usize::from(e.op) % OPS.len()];
            palisade_fuzz::ref_qualified_name(key(e.key))
                && values.iter().all(|v| palisade_fuzz::ref_label_value(v))
                && match op {
                    "In" | "NotIn" => !values.is_empty(),
                    "Exists" | "DoesNotExist" => values.is_empty(),
                    _ => false,
                }
        })
}

/// The Kubernetes selector semantics, written out independently.
fn selects(s: &Sel, l: &BTreeMap<String, String>) -> bool {
    labels(&s.labels).iter().all(|(k, v)| l.get(k) == Some(v))
        && s.exprs.iter().take(4).all(|e| {
            let values: Vec<&str> = e.values.iter().take(3).map(|&v| value(v)).collect();
            let have = l.get(key(e.key)).map(String::as_str);
            match OPS[usize::from(e.op) % OPS.len()] {
                "In" => have.is_some_and(|h| values.contains(&h)),
                "NotIn" => have.is_none_or(|h| !values.contains(&h)),
                "Exists" => have.is_some(),
                _ => have.is_none(),
            }
        })
}

fuzz_target!(|input: Input| {
    let mut items = Vec::new();
    let mut ns_labels = Vec::new();
    for (i, l) in input.namespaces.iter().enumerate() {
        let mut l = labels(l);
        l.insert("kubernetes.io/metadata.name".into(), format!("ns{i}"));
        items.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns{i}"), "labels": l}}));
        ns_labels.push(l);
    }
    let pods: Vec<(usize, BTreeMap<String, String>)> = input
        .pods
        .iter()
        .take(12)
        .map(|(ns, l)| (usize::from(*ns), labels(l)))
        .collect();
    for (i, (ns, l)) in pods.iter().enumerate() {
        items.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("p{i}"), "namespace": format!("ns{ns}"), "labels": l},
            "status": {"podIP": format!("10.0.{ns}.{}", i + 1)}}));
    }
    items.push(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "sel", "namespace": "ns0"},
        "spec": {"podSelector": selector_json(&input.pod_selector), "policyTypes": ["Ingress"]}}),
    );
    items.push(
        json!({"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
        "metadata": {"name": "sel"},
        "spec": {"priority": 1, "subject": {"namespaces": selector_json(&input.namespace_selector)},
                 "egress": [{"action": "Deny", "to": [{"networks": ["0.0.0.0/0"]}]}]}}),
    );
    let text = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();

    let valid = pods.iter().all(|(_, l)| labels_valid(l))
        && ns_labels.iter().all(labels_valid)
        && selector_valid(&input.pod_selector)
        && selector_valid(&input.namespace_selector);
    let loaded = match palisade_fuzz::load(&text, false) {
        Ok(l) => {
            assert!(valid, "an invalid label or selector was accepted: {text}");
            l
        }
        Err(e) => {
            assert!(!valid, "a valid input was refused: {e:?}\n{text}");
            return;
        }
    };
    let engine = Engine::new(loaded.cluster, Default::default());
    for (i, (ns, l)) in pods.iter().enumerate() {
        let id = engine
            .pod_id(&format!("ns{ns}"), &format!("p{i}"))
            .expect("pod loaded");
        assert_eq!(
            engine.isolated(id, Direction::Ingress),
            *ns == 0 && selects(&input.pod_selector, l),
            "podSelector on p{i} {l:?}"
        );
        let src = engine
            .endpoint_for_pod(id, None)
            .expect("pod has an address");
        let flow = Flow {
            src,
            dst: engine.endpoint_for_ip([203, 0, 113, 1].into()),
            protocol: Protocol::Tcp,
            port: 80,
        };
        assert_eq!(
            engine.evaluate(&flow).allowed,
            !selects(&input.namespace_selector, &ns_labels[*ns]),
            "namespaceSelector on ns{ns} {:?}",
            ns_labels[*ns]
        );
    }
});
