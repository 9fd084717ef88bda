//! Criterion benchmarks: compile, single evaluation, one-pod incremental update. The
//! matrix and diff benchmarks are `palisade-analysis`'s.
//!
//! `cargo bench -p palisade-engine` (results in docs/performance.md).

#![allow(missing_docs, clippy::unwrap_used)] // a benchmark over generated, known-valid input

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use palisade_engine::{Change, Engine, Flow, Options, PodId};
use palisade_model::{Cluster, Object, Protocol};

fn cluster(pods: usize, policies: usize) -> Cluster {
    cluster_with(pods, policies, palisade_gen::PodLabels::Deployment)
}

fn cluster_with(pods: usize, policies: usize, labels: palisade_gen::PodLabels) -> Cluster {
    let g = palisade_gen::generate_with(
        &palisade_gen::Spec {
            pods,
            policies,
            seed: 1,
            admin: true,
        },
        labels,
    );
    g.load().unwrap()
}

const SIZES: [(usize, usize); 2] = [(1_000, 200), (10_000, 2_000)];

fn compile(c: &mut Criterion) {
    let mut g = c.benchmark_group("compile");
    g.sample_size(10);
    for (pods, policies) in SIZES {
        let cl = cluster(pods, policies);
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("{pods}p-{policies}np")),
            &cl,
            |b, cl| b.iter(|| Engine::new(cl.clone(), Options::default())),
        );
    }
    g.finish();
}

fn eval(c: &mut Criterion) {
    let mut g = c.benchmark_group("eval");
    for (pods, policies) in SIZES {
        let e = Engine::new(cluster(pods, policies), Options::default());
        let flows: Vec<_> = (0..1024)
            .map(|i| {
                let (a, b) = (
                    PodId::new((i * 7919) % pods),
                    PodId::new((i * 104_729 + 13) % pods),
                );
                let src = e.endpoint_for_pod(a, None).unwrap();
                let dst = e.endpoint_for_pod(b, Some(src.ip.is_ipv6())).unwrap();
                Flow {
                    src,
                    dst,
                    protocol: Protocol::Tcp,
                    port: 80,
                }
            })
            .collect();
        let mut i = 0;
        g.bench_function(
            BenchmarkId::from_parameter(format!("{pods}p-{policies}np")),
            |b| {
                b.iter(|| {
                    i = (i + 1) % flows.len();
                    e.evaluate(&flows[i]).allowed
                })
            },
        );
    }
    g.finish();
}

fn update(c: &mut Criterion) {
    let mut g = c.benchmark_group("update-one-pod");
    for (pods, policies) in SIZES {
        let mut e = Engine::new(cluster(pods, policies), Options::default());
        let original = e.cluster().pods[pods / 2].clone();
        let mut relabelled = original.clone();
        relabelled.labels.insert("tier".into(), "db".into());
        relabelled.labels.insert("app".into(), "a3".into());
        let mut flip = false;
        g.bench_function(
            BenchmarkId::from_parameter(format!("{pods}p-{policies}np")),
            |b| {
                b.iter(|| {
                    flip = !flip;
                    e.apply(Change::Upsert(Object::Pod(if flip {
                        relabelled.clone()
                    } else {
                        original.clone()
                    })));
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, eval, update, compile);
criterion_main!(benches);
