//! Criterion benchmarks: compile, single evaluation, one-pod incremental update, matrix
//! (also with one class per pod, by rows and by pairs).
//!
//! `cargo bench -p palisade-engine` (results in docs/performance.md).

#![allow(missing_docs, clippy::unwrap_used)] // a benchmark over generated, known-valid input

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use palisade_engine::{Change, Engine, Options, Probe};
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
                let (a, b) = ((i * 7919) % pods, (i * 104_729 + 13) % pods);
                e.pod_flow(
                    a,
                    b,
                    Probe {
                        protocol: Protocol::Tcp,
                        port: 80,
                    },
                )
                .unwrap()
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

fn matrix(c: &mut Criterion) {
    let mut g = c.benchmark_group("matrix");
    g.sample_size(10);
    let e = Engine::new(cluster(1_000, 200), Options::default());
    let probes = e.container_probes();
    g.bench_function("1000p-200np", |b| b.iter(|| e.matrix(&probes).classes));
    g.finish();
}

/// The matrix where policies tell every pod apart (one class per pod): rows by set
/// algebra, and the pair-at-a-time reference.
fn matrix_rows(c: &mut Criterion) {
    let mut g = c.benchmark_group("matrix-distinct");
    g.sample_size(10);
    let e = Engine::new(
        cluster_with(1_000, 200, palisade_gen::PodLabels::Distinct),
        Options::default(),
    );
    let probes = e.container_probes();
    g.bench_function("rows/1000p-200np", |b| b.iter(|| e.matrix(&probes).classes));
    g.bench_function("pairs/1000p-200np", |b| {
        b.iter(|| e.matrix_by_pairs(&probes).classes)
    });
    g.finish();
}

/// The exact diff of two states, one NetworkPolicy apart: every pod, node and outside
/// class, every port of every protocol.
fn diff(c: &mut Criterion) {
    let mut g = c.benchmark_group("diff");
    g.sample_size(10);
    let old_cluster = cluster(1_000, 200);
    let mut new_cluster = old_cluster.clone();
    new_cluster.network_policies.remove(0);
    let old = Engine::new(old_cluster, Options::default());
    let new = Engine::new(new_cluster, Options::default());
    g.bench_function("1000p-200np-one-removed", |b| {
        b.iter(|| palisade_engine::diff::diff(&old, &new).groups.len())
    });
    g.finish();
}

criterion_group!(benches, eval, update, compile, matrix, matrix_rows, diff);
criterion_main!(benches);
