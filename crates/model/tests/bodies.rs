//! An object handed as a parsed value decodes as its one-line JSON text does: the same
//! objects, and the same diagnostics (file, line, object, field, message).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use palisade_model::{Body, decode_bodies, decode_texts};
use serde_json::{Value, json};

fn objects() -> Vec<(String, Value)> {
    vec![
        (
            "kube:Pod/x/a".into(),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "a", "namespace": "x", "labels": {"app": "a"}},
                   "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 8080}]}]},
                   "status": {"podIP": "10.0.0.1"}}),
        ),
        (
            "kube:Pod/x/bad".into(),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "bad", "namespace": "x", "labels": {"bad key!": "v"}},
                   "status": {"podIP": "10.0.0.2"}}),
        ),
        (
            "kube:NetworkPolicy/x/web".into(),
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                   "metadata": {"name": "web", "namespace": "x"},
                   "spec": {"podSelector": {"matchLabels": {"app": "a"}},
                            "ingress": [{"ports": [{"port": "http", "protocol": "SCTPX"}]}]}}),
        ),
        (
            "kube:Widget/x/w".into(),
            json!({"apiVersion": "example.com/v1", "kind": "Widget",
                   "metadata": {"name": "w", "namespace": "x"}}),
        ),
    ]
}

#[test]
fn a_value_decodes_as_its_json_text() {
    let objects = objects();
    let texts: Vec<(String, String)> = objects
        .iter()
        .map(|(id, v)| (id.clone(), v.to_string()))
        .collect();
    let from_text = decode_texts(texts.iter().map(|(id, t)| (id.as_str(), t.as_str())));
    let from_value =
        decode_bodies((objects.iter()).map(|(id, v)| (id.as_str(), Body::Object(v.clone()))));
    let show = |d: &[palisade_model::Diagnostic]| -> Vec<String> {
        d.iter()
            .map(|d| format!("{} {} {} {}: {}", d.file, d.line, d.object, d.field, d))
            .collect()
    };
    let errors = show(&from_text.diagnostics);
    assert!(
        errors.iter().any(|e| e.contains("kube:Pod/x/bad")),
        "the invalid pod is reported: {errors:#?}"
    );
    assert_eq!(show(&from_value.diagnostics), errors);
    assert_eq!(
        format!("{:?}", from_value.cluster),
        format!("{:?}", from_text.cluster)
    );
    let invalid = |d: &palisade_model::Decoded| -> Vec<String> {
        d.invalid
            .iter()
            .map(|i| format!("{} {:?} {:?} {:?}", i.kind, i.namespace, i.name, i.origin))
            .collect()
    };
    assert_eq!(invalid(&from_value), invalid(&from_text));
}
