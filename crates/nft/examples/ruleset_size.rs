//! Ruleset size and compile/render/apply time for synthetic clusters (docs/performance.md).
//!
//! `cargo run --release -p palisade-nft --example ruleset_size [-- PODS...]`
//! (default 1000 and 10000 pods, policies = pods / 5, seed 1, admin policies included).
//! As root, also times `nft -f` of the full ruleset into a fresh network namespace.

#![allow(clippy::unwrap_used)] // a measurement over generated, known-valid input

use std::process::Command;
use std::time::{Duration, Instant};

use palisade_engine::{Engine, Options};

fn engine(pods: usize) -> Engine {
    let g = palisade_gen::generate(&palisade_gen::Spec {
        pods,
        policies: pods / 5,
        seed: 1,
        admin: true,
    });
    let (c, p) = (g.cluster_yaml(), g.policies_yaml());
    let cl =
        palisade_model::load_sources([("c", c.as_str()), ("p", p.as_str())], Default::default())
            .unwrap()
            .cluster;
    Engine::new(cl, Options::default())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false)
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 10_000]
    } else {
        sizes
    };
    println!(
        "| pods | policies | compile (ms) | render (ms) | apply nft -f (ms) | chains | rules | map elements | script bytes |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for pods in sizes {
        let e = engine(pods);
        let runs = 5;
        let mut tc = Vec::new();
        let mut tr = Vec::new();
        let mut rs = None;
        let mut text = String::new();
        for _ in 0..runs {
            let t = Instant::now();
            let r = palisade_nft::compile(&e, None).unwrap();
            tc.push(t.elapsed());
            let t = Instant::now();
            text = r.render();
            tr.push(t.elapsed());
            rs = Some(r);
        }
        let rs = rs.unwrap();
        let apply = if is_root() {
            let ns = format!("palnftbench{}", std::process::id());
            Command::new("ip")
                .args(["netns", "add", &ns])
                .status()
                .unwrap();
            let mut ta = Vec::new();
            for _ in 0..3 {
                let t = Instant::now();
                if let Err(e) = palisade_nft::apply(&rs, Some(&ns)) {
                    std::fs::write("/tmp/palisade-nft-bench.nft", &text).unwrap();
                    eprintln!("apply failed ({e}); script in /tmp/palisade-nft-bench.nft");
                    break;
                }
                ta.push(t.elapsed());
            }
            Command::new("ip")
                .args(["netns", "del", &ns])
                .status()
                .unwrap();
            if ta.is_empty() {
                "failed".into()
            } else {
                format!("{:.0}", median(ta).as_secs_f64() * 1e3)
            }
        } else {
            "n/a (not root)".into()
        };
        let rules: usize = rs.chains.iter().map(|c| c.rules.len()).sum();
        println!(
            "| {pods} | {} | {:.1} | {:.1} | {apply} | {} | {rules} | {} | {} |",
            pods / 5,
            median(tc).as_secs_f64() * 1e3,
            median(tr).as_secs_f64() * 1e3,
            rs.chains.len(),
            rs.egress.len() + rs.ingress.len(),
            text.len()
        );
    }
}
