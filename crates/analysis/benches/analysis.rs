//! Criterion benchmarks: the matrix (also with one class per pod, by rows and by pairs)
//! and the exact diff.
//!
//! `cargo bench -p palisade-analysis` (results in docs/performance.md).

#![allow(missing_docs, clippy::unwrap_used)] // a benchmark over generated, known-valid input

use criterion::{Criterion, criterion_group, criterion_main};
use palisade_analysis::Analysis;
use palisade_engine::{Engine, Options};
use palisade_model::Cluster;

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

fn matrix(c: &mut Criterion) {
    let mut g = c.benchmark_group("matrix");
    g.sample_size(10);
    let e = Engine::new(cluster(1_000, 200), Options::default());
    let probes = Analysis::new(&e).container_probes();
    g.bench_function("1000p-200np", |b| {
        b.iter(|| Analysis::new(&e).matrix(&probes).classes)
    });
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
    let probes = Analysis::new(&e).container_probes();
    g.bench_function("rows/1000p-200np", |b| {
        b.iter(|| Analysis::new(&e).matrix(&probes).classes)
    });
    g.bench_function("pairs/1000p-200np", |b| {
        b.iter(|| Analysis::new(&e).matrix_by_pairs(&probes).classes)
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
        b.iter(|| palisade_analysis::diff::diff(&old, &new).groups.len())
    });
    g.finish();
}

criterion_group!(benches, matrix, matrix_rows, diff);
criterion_main!(benches);
