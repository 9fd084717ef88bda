//! Cutting an API object down to the fields Palisade reads, so that the agent's memory
//! grows with what the evaluator needs rather than with what the cluster stores (a Pod
//! from the API server is several kilobytes, mostly `managedFields`, container specs and
//! status conditions; what Palisade reads of it is a few hundred bytes).
//!
//! What is kept follows the model's decoders: for Pods `spec.hostNetwork`,
//! `spec.nodeName`, each container's `name` and `ports`, and `status.podIP(s)`,
//! `hostIP(s)` and `phase`; for Nodes `status.addresses`; for Namespaces the labels and
//! the legacy isolation annotation; for Services `spec` and `status.loadBalancer`; for
//! EndpointSlices `addressType`, `endpoints` and `ports`; for policies the whole `spec`.
//! Every kind keeps
//! `metadata.name`, `namespace`, `labels` and the annotations Palisade reads; everything
//! else (`managedFields`, `uid`, `resourceVersion`, other annotations, `status` of
//! policies) is dropped.

use serde_json::{Map, Value};

/// The annotations any decoder reads.
const ANNOTATIONS: [&str; 2] = [
    palisade_model::STAGED_ANNOTATION,
    palisade_model::LEGACY_ISOLATION_ANNOTATION,
];

/// The object `value` of `kind`, trimmed, with `apiVersion` and `kind` set (list items
/// from the API server carry neither).
pub fn trim(api_version: &str, kind: &str, value: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), api_version.into());
    out.insert("kind".into(), kind.into());
    out.insert("metadata".into(), metadata(value.get("metadata")));
    match kind {
        "Pod" => {
            if let Some(spec) = value.get("spec") {
                out.insert("spec".into(), pod_spec(spec));
            }
            if let Some(status) = value.get("status") {
                let keep = ["podIP", "podIPs", "hostIP", "hostIPs", "phase"];
                out.insert("status".into(), pick(status, &keep));
            }
        }
        "Node" => {
            if let Some(status) = value.get("status") {
                out.insert("status".into(), pick(status, &["addresses"]));
            }
        }
        "Namespace" => {}
        "Service" => {
            if let Some(spec) = value.get("spec") {
                out.insert("spec".into(), spec.clone());
            }
            // The load balancer's addresses are destinations too.
            if let Some(status) = value.get("status") {
                out.insert("status".into(), pick(status, &["loadBalancer"]));
            }
        }
        // An EndpointSlice has no spec: its fields are at the top.
        "EndpointSlice" => {
            if let Value::Object(fields) = pick(value, &["addressType", "endpoints", "ports"]) {
                out.extend(fields);
            }
        }
        _ => {
            if let Some(spec) = value.get("spec") {
                out.insert("spec".into(), spec.clone());
            }
        }
    }
    Value::Object(out)
}

/// `metadata` with only name, namespace, labels and the annotations Palisade reads.
fn metadata(meta: Option<&Value>) -> Value {
    let Some(meta) = meta else {
        return Value::Object(Map::new());
    };
    let mut out = match pick(meta, &["name", "namespace", "labels"]) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if let Some(Value::Object(annotations)) = meta.get("annotations") {
        let kept: Map<String, Value> = annotations
            .iter()
            .filter(|(k, _)| ANNOTATIONS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            out.insert("annotations".into(), Value::Object(kept));
        }
    }
    Value::Object(out)
}

/// `spec.hostNetwork`, `spec.nodeName` and each container's name and ports.
fn pod_spec(spec: &Value) -> Value {
    let mut out = match pick(spec, &["hostNetwork", "nodeName"]) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    match spec.get("containers") {
        Some(Value::Array(containers)) => {
            let trimmed = containers.iter().map(|c| pick(c, &["name", "ports"]));
            out.insert("containers".into(), Value::Array(trimmed.collect()));
        }
        // Not an array: kept as it is, so the decoder reports it.
        Some(other) => {
            out.insert("containers".into(), other.clone());
        }
        None => {}
    }
    Value::Object(out)
}

/// The named fields of an object (a non-object is kept whole, for the decoder to report).
fn pick(value: &Value, keys: &[&str]) -> Value {
    let Value::Object(map) = value else {
        return value.clone();
    };
    let mut out = Map::new();
    for key in keys {
        if let Some(v) = map.get(*key) {
            out.insert((*key).to_string(), v.clone());
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_keeps_only_what_the_model_reads() {
        let pod = json!({
            "metadata": {
                "name": "a", "namespace": "x", "uid": "u-1", "resourceVersion": "7",
                "labels": {"app": "a"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}",
                                "palisade.dev/staged": "true"},
                "managedFields": [{"manager": "kubectl"}]
            },
            "spec": {
                "nodeName": "n1", "hostNetwork": false, "serviceAccountName": "default",
                "containers": [{"name": "c", "image": "nginx", "env": [{"name": "A"}],
                                "ports": [{"name": "http", "containerPort": 80}]}]
            },
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "podIPs": [{"ip": "10.0.0.1"}], "hostIP": "192.0.2.1",
                       "conditions": [{"type": "Ready"}]}
        });
        assert_eq!(
            trim("v1", "Pod", &pod),
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "a", "namespace": "x", "labels": {"app": "a"},
                             "annotations": {"palisade.dev/staged": "true"}},
                "spec": {"nodeName": "n1", "hostNetwork": false,
                         "containers": [{"name": "c",
                                         "ports": [{"name": "http", "containerPort": 80}]}]},
                "status": {"phase": "Running", "podIP": "10.0.0.1",
                           "podIPs": [{"ip": "10.0.0.1"}], "hostIP": "192.0.2.1"}
            })
        );
    }

    #[test]
    fn node_namespace_and_policy() {
        let node = json!({"metadata": {"name": "n1", "labels": {"zone": "a"}},
                          "spec": {"podCIDR": "10.0.0.0/24"},
                          "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.1"}],
                                     "capacity": {"cpu": "2"}}});
        assert_eq!(
            trim("v1", "Node", &node),
            json!({"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": "n1", "labels": {"zone": "a"}},
                   "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.1"}]}}),
            "a node keeps its labels and addresses"
        );
        let ns = json!({"metadata": {"name": "x", "annotations": {
                            "net.beta.kubernetes.io/network-policy": "{}", "other": "y"}},
                        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        assert_eq!(
            trim("v1", "Namespace", &ns),
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "x", "annotations": {
                       "net.beta.kubernetes.io/network-policy": "{}"}}}),
            "a namespace keeps the legacy isolation annotation"
        );
        let anp = json!({"metadata": {"name": "p", "generation": 3},
                         "spec": {"priority": 5, "subject": {"namespaces": {}}},
                         "status": {"conditions": []}});
        assert_eq!(
            trim(
                "policy.networking.k8s.io/v1alpha1",
                "AdminNetworkPolicy",
                &anp
            ),
            json!({"apiVersion": "policy.networking.k8s.io/v1alpha1",
                   "kind": "AdminNetworkPolicy", "metadata": {"name": "p"},
                   "spec": {"priority": 5, "subject": {"namespaces": {}}}}),
            "a policy keeps its whole spec and drops its status"
        );
    }

    #[test]
    fn service_and_endpoint_slice() {
        let svc = json!({"metadata": {"name": "web", "namespace": "x", "uid": "u"},
                         "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                                  "ports": [{"port": 80, "targetPort": "http"}]},
                         "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]},
                                    "conditions": []}});
        assert_eq!(
            trim("v1", "Service", &svc),
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "web", "namespace": "x"},
                   "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                            "ports": [{"port": 80, "targetPort": "http"}]},
                   "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}}),
            "a Service keeps its spec and its load balancer's addresses"
        );
        let slice = json!({"metadata": {"name": "web-1", "namespace": "x",
                                        "labels": {"kubernetes.io/service-name": "web"},
                                        "generateName": "web-"},
                           "addressType": "IPv4",
                           "endpoints": [{"addresses": ["10.0.0.1"]}],
                           "ports": [{"name": "", "port": 8080, "protocol": "TCP"}]});
        assert_eq!(
            trim("discovery.k8s.io/v1", "EndpointSlice", &slice),
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                   "metadata": {"name": "web-1", "namespace": "x",
                                "labels": {"kubernetes.io/service-name": "web"}},
                   "addressType": "IPv4",
                   "endpoints": [{"addresses": ["10.0.0.1"]}],
                   "ports": [{"name": "", "port": 8080, "protocol": "TCP"}]}),
            "an EndpointSlice keeps its top-level fields"
        );
    }

    #[test]
    fn malformed_fields_are_kept_for_the_decoder_to_report() {
        let pod = json!({"metadata": {"name": "a"}, "spec": {"containers": "nope"}});
        assert_eq!(
            trim("v1", "Pod", &pod)["spec"]["containers"],
            json!("nope"),
            "a wrong type must reach validation, not vanish"
        );
    }
}
