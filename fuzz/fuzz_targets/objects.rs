//! Each kind's validator, reached directly: the first byte picks the kind, the rest is
//! the document after `apiVersion` and `kind`. An object is either loaded whole or, with
//! `skip_invalid`, skipped whole: an invalid object never contributes anything.
#![no_main]

use libfuzzer_sys::fuzz_target;

const KINDS: [(&str, &str); 10] = [
    ("v1", "Pod"),
    ("v1", "Namespace"),
    ("v1", "Node"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("extensions/v1beta1", "NetworkPolicy"),
    ("policy.networking.k8s.io/v1alpha1", "AdminNetworkPolicy"),
    (
        "policy.networking.k8s.io/v1alpha1",
        "BaselineAdminNetworkPolicy",
    ),
    ("policy.networking.k8s.io/v1alpha2", "ClusterNetworkPolicy"),
    ("v1", "PodList"),
    ("v1", "List"),
];

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let Ok(body) = std::str::from_utf8(rest) else {
        return;
    };
    let (api, kind) = KINDS[usize::from(k) % KINDS.len()];
    let text = format!("apiVersion: {api}\nkind: {kind}\n{body}");
    let strict = palisade_fuzz::load(&text, false);
    let lenient = palisade_fuzz::load_both(&text);
    let single = !kind.ends_with("List") && !body.contains("---") && !body.contains("...");
    if single && strict.is_err() {
        let c = &lenient.cluster;
        assert!(
            c.pods.is_empty()
                && c.nodes.is_empty()
                && c.network_policies.is_empty()
                && c.admin_policies.is_empty()
                && c.namespaces.iter().all(|n| n.origin.is_none()),
            "an invalid object was (partly) loaded with skip_invalid: {c:?}"
        );
    }
    if let Some(engine) = palisade_fuzz::small_engine(lenient.cluster, Default::default()) {
        palisade_fuzz::exercise(&engine);
    }
});
