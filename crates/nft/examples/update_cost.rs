//! The cost of one change at scale (docs/performance.md): a generated cluster's ruleset with
//! every pod local is loaded into a fresh network namespace, then one NetworkPolicy change
//! and one pod relabel are applied incrementally (and reverted), timing both ways of
//! applying them: the whole change as one `nft -f` script, and [`transition`] (new objects
//! by `nft -f`, then the switch-over as one netlink batch).
//!
//! `cargo run --release -p palisade-nft --example update_cost [-- PODS]` (root; default
//! 10000 pods, policies = pods / 5, seed 1, admin policies included).

#![allow(clippy::unwrap_used)] // a measurement over generated, known-valid input

#[path = "../tests/support/ct.rs"]
mod ct;

use std::time::{Duration, Instant};

use ct::Netns;

use palisade_engine::{Change, Engine, Options};
use palisade_model::Object;
use palisade_nft::{Ruleset, compile, compile_after, transition, update_script};

fn engine(pods: usize) -> Engine {
    let g = palisade_gen::generate(&palisade_gen::Spec {
        pods,
        policies: pods / 5,
        seed: 1,
        admin: true,
    });
    Engine::new(g.load().unwrap(), Options::default())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Applies `change`, then alternately the transaction to the changed ruleset and back,
/// three times each, as one `nft -f` script and by [`transition`]; prints the medians.
fn measure(ns: &Netns, what: &str, e: &mut Engine, base: &Ruleset, change: Change, undo: Change) {
    let t = Instant::now();
    e.apply(change);
    let changed = compile_after(e, None, base).unwrap();
    let recompile = t.elapsed();
    let (forward, stats) = update_script(base, &changed);
    let (back, _) = update_script(&changed, base);
    let (mut fwd, mut rev) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        fwd.push(ns.nft_f(&forward));
        rev.push(ns.nft_f(&back));
    }
    let (mut prepare, mut switch, mut total, mut total_back) = (vec![], vec![], vec![], vec![]);
    for _ in 0..3 {
        let t = Instant::now();
        let s = transition(base, &changed, Some(&ns.0)).unwrap();
        total.push(t.elapsed());
        assert!(s.netlink, "{what}: not switched over by netlink");
        prepare.push(s.prepare);
        switch.push(s.switch);
        let t = Instant::now();
        transition(&changed, base, Some(&ns.0)).unwrap();
        total_back.push(t.elapsed());
    }
    e.apply(undo);
    println!(
        "| {what} | {} | {} | {} | {} B ({} commands) | {} | {} | {} + {} = {} | {} |",
        ms(recompile),
        stats.chains,
        stats.elements,
        forward.len(),
        forward.lines().count(),
        ms(median(fwd)),
        ms(median(rev)),
        ms(median(prepare)),
        ms(median(switch)),
        ms(median(total)),
        ms(median(total_back)),
    );
}

fn main() {
    let pods: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let mut e = engine(pods);
    let t = Instant::now();
    let base = compile(&e, None).unwrap();
    let compiled = t.elapsed();
    let text = base.render();
    let ns = Netns::new("update");
    let load = ns.nft_f(&text);
    println!(
        "{pods} pods, {} policies: compile {}, full load {}\n{}",
        pods / 5,
        ms(compiled),
        ms(load),
        base.stats()
    );
    println!(
        "| change | recompile | chains written | elements changed | script | `nft -f` script | back | transition: prepare + switch = total | back |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let cluster = e.cluster().clone();
    // One NetworkPolicy change: its last ingress rule removed.
    if let Some(np) = cluster
        .network_policies
        .iter()
        .find(|p| p.ingress.len() > 1)
    {
        let mut changed = np.clone();
        changed.ingress.pop();
        measure(
            &ns,
            "NetworkPolicy: one ingress rule removed",
            &mut e,
            &base,
            Change::Upsert(Object::NetworkPolicy(changed)),
            Change::Upsert(Object::NetworkPolicy(np.clone())),
        );
    }
    // One pod relabel: a pod takes the labels of another pod of its namespace.
    let moved = cluster.pods.iter().enumerate().find_map(|(i, p)| {
        cluster.pods[i + 1..]
            .iter()
            .find(|q| q.namespace == p.namespace && q.labels != p.labels)
            .map(|q| (p, q.labels.clone()))
    });
    if let Some((pod, labels)) = moved {
        let mut relabeled = pod.clone();
        relabeled.labels = labels;
        measure(
            &ns,
            "pod relabel (to an existing class)",
            &mut e,
            &base,
            Change::Upsert(Object::Pod(relabeled)),
            Change::Upsert(Object::Pod(pod.clone())),
        );
    }
}
