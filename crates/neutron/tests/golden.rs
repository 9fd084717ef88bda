//! The translation's JSON, byte for byte, as reviewed snapshots in `tests/golden/`: the
//! example cluster, the translation tests' scenarios and a generated cluster, in both peer
//! modes. Set `PALISADE_UPDATE_GOLDEN=1`
//! to rewrite the snapshots after an intended change, then review the diff.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::path::{Path, PathBuf};

use palisade_engine::{Engine, Options};
use palisade_neutron::{PeerMode, TranslateOptions, translate};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Translates `sources` and compares the pretty JSON with `tests/golden/<name>.json`.
fn check(name: &str, sources: &[(&str, &str)], mode: PeerMode) {
    let loaded = palisade_model::load_sources(sources.iter().copied(), Default::default()).unwrap();
    let engine = Engine::new(loaded.cluster, Options::default());
    let options = TranslateOptions {
        peer_mode: mode,
        ignore_admin_policies: true,
    };
    let (t, _) = translate(&engine, &options).unwrap();
    let got = serde_json::to_string_pretty(&t).unwrap() + "\n";
    let path = golden_dir().join(format!("{name}.json"));
    if std::env::var_os("PALISADE_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with PALISADE_UPDATE_GOLDEN=1)",
            path.display()
        )
    });
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
        panic!(
            "{name}: the translation differs from {} from line {}:\n got: {:?}\nwant: {:?}",
            path.display(),
            line + 1,
            got.lines().nth(line),
            want.lines().nth(line)
        );
    }
}

fn example_sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/xyz");
    let mut files = vec![root.join("cluster.yaml")];
    let mut policies: Vec<PathBuf> = std::fs::read_dir(root.join("policies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    policies.sort();
    files.extend(policies);
    files
        .into_iter()
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn example_xyz() {
    let sources = example_sources();
    let sources: Vec<(&str, &str)> = sources
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    check("xyz-prefixes", &sources, PeerMode::Prefixes);
    check("xyz-remote-groups", &sources, PeerMode::RemoteGroups);
}

#[test]
fn scenarios() {
    let path = golden_dir().join("scenarios.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let sources = [("scenarios.yaml", text.as_str())];
    check("scenarios-prefixes", &sources, PeerMode::Prefixes);
    check("scenarios-remote-groups", &sources, PeerMode::RemoteGroups);
}

#[test]
fn generated_cluster() {
    let g = palisade_gen::generate(&palisade_gen::Spec {
        pods: 40,
        policies: 16,
        seed: 7,
        admin: false,
    });
    let (c, p) = (g.cluster_yaml(), g.policies_yaml());
    let sources = [("cluster", c.as_str()), ("policies", p.as_str())];
    check("gen-40-prefixes", &sources, PeerMode::Prefixes);
    check("gen-40-remote-groups", &sources, PeerMode::RemoteGroups);
}
