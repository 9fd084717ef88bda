//! Criterion benchmark: NetworkPolicies → security groups on generated clusters, both peer
//! modes (the engine is compiled once, outside the measurement).
//!
//! `cargo bench -p palisade-neutron`.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use palisade_engine::{Engine, Options};
use palisade_neutron::{PeerMode, TranslateOptions, translate};

fn engine(pods: usize, policies: usize) -> Engine {
    let g = palisade_gen::generate(&palisade_gen::Spec {
        pods,
        policies,
        seed: 1,
        admin: false,
    });
    Engine::new(g.load().unwrap(), Options::default())
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("translate");
    g.sample_size(10);
    for (pods, policies) in [(1_000, 200), (5_000, 1_000)] {
        let e = engine(pods, policies);
        for (label, peer_mode) in [
            ("prefixes", PeerMode::Prefixes),
            ("remote-groups", PeerMode::RemoteGroups),
        ] {
            let options = TranslateOptions {
                peer_mode,
                ignore_admin_policies: false,
            };
            g.bench_function(
                BenchmarkId::new(label, format!("{pods}p-{policies}np")),
                |b| b.iter(|| translate(&e, &options).unwrap()),
            );
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
