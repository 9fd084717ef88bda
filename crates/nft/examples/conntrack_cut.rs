//! Time to cut forbidden tracked connections (docs/performance.md): `cut_forbidden` (one
//! ctnetlink dump, batched deletions) against the way it used to work (`conntrack -L`,
//! then one `conntrack -D` process per forbidden entry, closed entries included), on the
//! same table in a fresh network namespace, rounds alternating.
//!
//! `cargo run --release -p palisade-nft --example conntrack_cut [-- FORBIDDEN [ROUNDS]]`
//! (default 1000 forbidden connections, 3 rounds). Root only. Besides the forbidden
//! ESTABLISHED entries the table holds 10% as many allowed ones and 10% as many forbidden
//! TIME_WAIT ones.

#![allow(clippy::unwrap_used, missing_docs)] // a measurement over known-valid input

#[path = "../tests/support/ct.rs"]
mod ct;

use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ct::{Entry, Netns, insert};
use palisade_engine::{Engine, Options};
use palisade_nft::{NftVerdict, Packet, Ruleset, compile};

const XYZ: &str = include_str!("../../../examples/xyz/cluster.yaml");
const DENY: &str = include_str!("../../../examples/xyz/policies/01-deny-ingress-x.yaml");

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().unwrap());
    let forbidden = args.next().unwrap_or(1000);
    let rounds = args.next().unwrap_or(3);
    if !palisade_test_support::is_root() {
        eprintln!("needs root (a network namespace)");
        std::process::exit(1);
    }
    let loaded =
        palisade_model::load_sources([("c", XYZ), ("p", DENY)], Default::default()).unwrap();
    let ruleset = compile(&Engine::new(loaded.cluster, Options::default()), None).unwrap();
    let ns = Netns::new("bench");
    let entries = table(forbidden);
    println!(
        "{forbidden} forbidden ESTABLISHED + {} TIME_WAIT + {} allowed tracked TCP connections",
        forbidden / 10,
        forbidden / 10
    );
    println!("round  per-entry-processes_s  ctnetlink-batch_s  ratio  (cut: before / after)");
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        insert(&ns.0, &entries).unwrap();
        let t = Instant::now();
        let cut_before = per_entry_processes(&ruleset, &ns.0);
        let b = t.elapsed();
        flush(&ns.0);
        insert(&ns.0, &entries).unwrap();
        let t = Instant::now();
        let cut_after = palisade_nft::cut_forbidden(&ruleset, Some(&ns.0)).unwrap();
        let a = t.elapsed();
        flush(&ns.0);
        println!(
            "{round:<6} {:<22.3} {:<18.4} {:<6.0} ({cut_before} / {cut_after})",
            b.as_secs_f64(),
            a.as_secs_f64(),
            b.as_secs_f64() / a.as_secs_f64()
        );
        before.push(b);
        after.push(a);
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (b, a) = (median(&mut before), median(&mut after));
    println!(
        "median {:<22.3} {:<18.4} {:.0}x",
        b.as_secs_f64(),
        a.as_secs_f64(),
        b.as_secs_f64() / a.as_secs_f64()
    );
}

/// Namespace x admits only y/b on 80/TCP: y/c's connections to x/a are forbidden.
fn table(forbidden: usize) -> Vec<Entry> {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let (x_a, y_b, y_c) = (ip("10.0.0.10"), ip("10.0.1.11"), ip("10.0.1.12"));
    let entry = |src, i: usize, tcp_state| Entry {
        src,
        dst: x_a,
        proto: 6,
        sport: 1024 + u16::try_from(i).unwrap(),
        dport: 80,
        tcp_state,
    };
    let mut v: Vec<Entry> = (0..forbidden).map(|i| entry(y_c, i, 3)).collect();
    v.extend((0..forbidden / 10).map(|i| entry(y_c, forbidden + i, 7)));
    v.extend((0..forbidden / 10).map(|i| entry(y_b, i, 3)));
    v
}

fn flush(ns: &str) {
    Command::new("ip")
        .args(["netns", "exec", ns, "conntrack", "-F"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
}

/// The cleanup as it was before ctnetlink: list with `conntrack -L`, then one
/// `conntrack -D` per entry the ruleset drops, whatever its state.
fn per_entry_processes(ruleset: &Ruleset, ns: &str) -> usize {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "conntrack", "-L"])
        .output()
        .unwrap();
    let mut cut = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let field = |key: &str| line.split_whitespace().find_map(|w| w.strip_prefix(key));
        if !line.starts_with("tcp") {
            continue;
        }
        let (Some(src), Some(dst), Some(sport), Some(dport)) = (
            field("src="),
            field("dst="),
            field("sport="),
            field("dport="),
        ) else {
            continue;
        };
        let packet = Packet {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            protocol: palisade_model::Protocol::Tcp,
            dport: dport.parse().unwrap(),
        };
        if let NftVerdict::Drop(_) = ruleset.lookup(&packet) {
            let status = Command::new("ip")
                .args(["netns", "exec", ns, "conntrack", "-D", "-p", "tcp"])
                .args(["-s", src, "-d", dst, "--sport", sport, "--dport", dport])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            if status.success() {
                cut += 1;
            }
        }
    }
    cut
}
