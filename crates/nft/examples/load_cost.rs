//! The cost of a first load at scale (docs/performance.md): where the time of
//! `palisade compile` goes (reading the files, building the engine, compiling, rendering),
//! then the ruleset loaded into fresh network namespaces two ways, alternately: the
//! rendered script as one `nft -f` transaction, and [`palisade_nft::load_in_stages`], which loads a
//! namespace without a table in stages.
//!
//! `cargo run --release -p palisade-nft --example load_cost -- NODE|all ROUNDS PATH...`
//! (root for the loads; `ROUNDS` 0 times the compile alone).

#![allow(clippy::unwrap_used)] // a measurement; a failure is a failed run

#[path = "../tests/support/ct.rs"]
mod ct;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ct::Netns;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [node, rounds, paths @ ..] = args.as_slice() else {
        panic!("usage: load_cost NODE|all ROUNDS PATH...");
    };
    let node = (node != "all").then_some(node.as_str());
    let rounds: usize = rounds.parse().unwrap();
    let paths: Vec<PathBuf> = paths.iter().map(Into::into).collect();

    let t = Instant::now();
    let loaded = palisade_model::load_paths(&paths, Default::default()).unwrap();
    let read = t.elapsed();
    let t = Instant::now();
    let engine = palisade_engine::Engine::new(loaded.cluster, Default::default());
    let build = t.elapsed();
    let t = Instant::now();
    let ruleset = palisade_nft::compile(&engine, node).unwrap();
    let compile = t.elapsed();
    let t = Instant::now();
    let script = ruleset.render();
    let render = t.elapsed();
    println!(
        "read {} engine {} compile {} render {} ({} bytes)",
        ms(read),
        ms(build),
        ms(compile),
        ms(render),
        script.len()
    );
    for round in 1..=rounds {
        let one = fresh_namespace(|ns| {
            if std::env::var_os("STAGED_ONLY").is_none() {
                ns.nft_f(&script);
            }
        });
        let staged =
            fresh_namespace(|ns| palisade_nft::load_in_stages(&ruleset, Some(&ns.0)).unwrap());
        println!(
            "round {round}: one nft -f {}, staged apply {} ({:.2}x)",
            ms(one),
            ms(staged),
            one.as_secs_f64() / staged.as_secs_f64()
        );
    }
}

/// Times `load` in a new network namespace (deleted afterwards).
fn fresh_namespace(load: impl FnOnce(&Netns)) -> Duration {
    let ns = Netns::new("load");
    let t = Instant::now();
    load(&ns);
    t.elapsed()
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}
