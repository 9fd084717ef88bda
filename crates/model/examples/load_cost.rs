//! What loading manifests costs, phase by phase: reading the files, parsing the YAML alone
//! (every document built, then dropped), and a whole load (parsing, decoding and
//! validating every object). Uses the allocator the `palisade` binary uses.
//!
//! ```text
//! cargo run --release -p palisade-model --example load_cost -- ROUNDS PATH...
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use palisade_model::yaml::{AliasBudget, map_texts};
use palisade_model::{LoadOptions, load_sources, read_paths};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args
        .next()
        .ok_or("usage: load_cost ROUNDS PATH...")?
        .parse()?;
    let paths: Vec<PathBuf> = args.map(PathBuf::from).collect();
    let (mut read, mut parse, mut load) = (Vec::new(), Vec::new(), Vec::new());
    let mut objects = 0;
    let mut bytes = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        let sources = read_paths(&paths)?;
        read.push(t.elapsed());
        bytes = sources.iter().map(|(_, text)| text.len()).sum::<usize>();
        let texts: Vec<&str> = sources.iter().map(|(_, text)| text.as_str()).collect();

        let t = Instant::now();
        let parsed = map_texts(&texts, &AliasBudget::default(), &|_, _| ());
        parse.push(t.elapsed());
        if let Some(e) = parsed.iter().flat_map(|p| &p.errors).next() {
            return Err(format!("syntax error at line {}: {}", e.line, e.message).into());
        }

        let t = Instant::now();
        let loaded = load_sources(
            sources.iter().map(|(n, text)| (n.as_str(), text.as_str())),
            LoadOptions::default(),
        )?;
        load.push(t.elapsed());
        let c = &loaded.cluster;
        objects = c.pods.len() + c.network_policies.len() + c.admin_policies.len();
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e3
    };
    println!(
        "{:.1} MB, {objects} pods and policies; median of {rounds}: read {:.1} ms, parse only {:.1} ms, whole load {:.1} ms",
        bytes as f64 / 1e6,
        median(&mut read),
        median(&mut parse),
        median(&mut load)
    );
    Ok(())
}
