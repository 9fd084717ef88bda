//! The ruleset of the bundled example cluster (examples/xyz) as a reviewed snapshot.
//!
//! After an intended change: `UPDATE_GOLDEN=1 cargo test -p palisade-nft --test golden`,
//! then review the diff of `tests/golden/xyz.nft`.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use palisade_engine::{Engine, Options};

#[test]
fn xyz_ruleset_matches_the_reviewed_snapshot() {
    let sources = [
        (
            "cluster.yaml",
            include_str!("../../../examples/xyz/cluster.yaml"),
        ),
        (
            "01",
            include_str!("../../../examples/xyz/policies/01-deny-ingress-x.yaml"),
        ),
        (
            "02",
            include_str!("../../../examples/xyz/policies/02-anp.yaml"),
        ),
        (
            "03",
            include_str!("../../../examples/xyz/policies/03-banp.yaml"),
        ),
    ];
    let loaded = palisade_model::load_sources(sources, Default::default()).unwrap();
    let engine = Engine::new(loaded.cluster, Options::default());
    let rs = palisade_nft::compile(&engine, None).unwrap();
    let mut text = rs.render();
    text += "# log prefixes\n";
    for (prefix, name) in rs.log_prefixes() {
        text += &format!("#   {prefix}: {name}\n");
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/xyz.nft");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap();
    assert!(
        text == expected,
        "ruleset differs from {path}; rerun with UPDATE_GOLDEN=1 and review the diff"
    );
}
