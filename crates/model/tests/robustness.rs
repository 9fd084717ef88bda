//! The loader never panics: arbitrary and mutated manifests give objects or diagnostics.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use palisade_model::{LoadOptions, load_sources};
use proptest::prelude::*;

const SEED: &str = r#"apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: p, namespace: x, labels: {a: b}}
spec:
  podSelector: {matchExpressions: [{key: k, operator: In, values: [v]}]}
  policyTypes: [Ingress, Egress]
  ingress:
  - from: [{ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}}, {namespaceSelector: {}}]
    ports: [{port: 80, endPort: 90, protocol: TCP}, {port: http}]
---
apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: c}
spec:
  tier: Admin
  priority: 3
  subject: {pods: {namespaceSelector: {}, podSelector: {}}}
  egress:
  - {action: Deny, to: [{networks: [0.0.0.0/0]}, {nodes: {}}], protocols: [{tcp: {destinationPort: {range: {start: 1, end: 2}}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x}
spec: {hostNetwork: true, containers: [{name: c, ports: [{containerPort: 80, name: web}]}]}
status: {podIPs: [{ip: "fd00::1"}]}
"#;

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(2000, 0x5eed_2026))]

    #[test]
    fn arbitrary_text_never_panics(text in "[ -~\n]{0,200}") {
        let _ = load_sources([("f", text.as_str())], LoadOptions::default());
    }

    #[test]
    fn mutated_manifests_never_panic(pos in 0usize..SEED.len(), len in 0usize..8, with in "[ -~\n]{0,6}", skip in any::<bool>()) {
        let mut text = SEED.to_string();
        let start = (0..=pos).rev().find(|i| text.is_char_boundary(*i)).unwrap();
        let end = (start + len..=text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
        text.replace_range(start..end, &with);
        let _ = load_sources([("f", text.as_str())], LoadOptions { skip_invalid: skip, field_lines: skip });
    }
}

#[test]
fn the_seed_is_valid() {
    let loaded = load_sources([("f", SEED)], LoadOptions::default()).unwrap();
    assert_eq!(loaded.cluster.network_policies.len(), 1);
    assert_eq!(loaded.cluster.admin_policies.len(), 1);
    assert_eq!(loaded.cluster.pods[0].ips[0].to_string(), "fd00::1");
}
