//! Regressions for what fuzzing found (inputs kept under fuzz/regressions/TARGET/).

#![allow(missing_docs, clippy::unwrap_used)]

use palisade_model::validate::dns_subdomain;

/// fuzz/regressions/validators/dns-subdomain-part-longer-than-63: apimachinery's
/// `IsDNS1123Subdomain` limits the whole name to 253 characters and has no limit per
/// dot-separated part, so a 64-character single-part name is a valid object name.
#[test]
fn dns_subdomain_has_no_per_part_limit() {
    let name = "a".repeat(64);
    assert_eq!(dns_subdomain(&name), None, "{name}");
    let name = format!("{}.b", "a".repeat(70));
    assert_eq!(dns_subdomain(&name), None, "{name}");
    let yaml = format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: {}, namespace: x}}\nspec: {{podSelector: {{}}}}\n",
        "a".repeat(71)
    );
    let loaded = palisade_model::load_str(&yaml).unwrap();
    assert_eq!(loaded.cluster.network_policies.len(), 1);
}
