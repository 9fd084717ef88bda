//! The userspace part of the connection cut (docs/performance.md): deciding many tracked
//! connections against one ruleset, with the ruleset prepared for each connection
//! ([`Ruleset::lookup`], as the cut did before) and prepared once ([`Lookup`], as it does
//! now), rounds alternating. No kernel involved.
//!
//! `cargo run --release -p palisade-nft --example lookup_cost [-- PODS CONNECTIONS ROUNDS]`
//! (default 10000 pods, policies = pods / 5, seed 1, admin policies included, the pods of
//! `node-1`; 10000 connections between random pods, one in four to a node-1 pod; 3 rounds).

#![allow(clippy::unwrap_used, missing_docs)] // a measurement over generated, known-valid input

use std::net::IpAddr;
use std::time::{Duration, Instant};

use palisade_engine::{Engine, Options};
use palisade_model::Protocol;
use palisade_nft::{Lookup, NftVerdict, Packet, Ruleset, compile};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().unwrap());
    let pods = args.next().unwrap_or(10_000);
    let connections = args.next().unwrap_or(10_000);
    let rounds = args.next().unwrap_or(3);
    let g = palisade_gen::generate(&palisade_gen::Spec {
        pods,
        policies: pods / 5,
        seed: 1,
        admin: true,
    });
    let cluster = g.load().unwrap();
    let ips: Vec<IpAddr> = cluster.pods.iter().flat_map(|p| p.ips.clone()).collect();
    let engine = Engine::new(cluster, Options::default());
    let ruleset = compile(&engine, Some("node-1")).unwrap();
    let local: Vec<IpAddr> = ruleset.ingress.iter().map(|(ip, _)| *ip).collect();
    let packets = packets(&ips, &local, connections);
    println!(
        "{pods} pods, node-1: {} chains, {} dispatch elements; {connections} connections",
        ruleset.chains.len(),
        ruleset.egress.len() + ruleset.ingress.len()
    );
    println!("round  per-connection_s  once_s  ratio  (dropped: per-connection / once)");
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let t = Instant::now();
        let dropped_before = per_connection(&ruleset, &packets);
        let b = t.elapsed();
        let t = Instant::now();
        let dropped_after = once(&ruleset, &packets);
        let a = t.elapsed();
        assert_eq!(dropped_before, dropped_after);
        println!(
            "{round:<6} {:<17.4} {:<7.4} {:<6.0} ({dropped_before} / {dropped_after})",
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
        "median {:<17.4} {:<7.4} {:.0}x",
        b.as_secs_f64(),
        a.as_secs_f64(),
        b.as_secs_f64() / a.as_secs_f64()
    );
}

/// `n` TCP connections between pods, one in four to an address of the node's pods.
fn packets(ips: &[IpAddr], local: &[IpAddr], n: usize) -> Vec<Packet> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |m: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m as u64) as usize
    };
    (0..n)
        .map(|i| {
            let dst = if i % 4 == 0 && !local.is_empty() {
                local[next(local.len())]
            } else {
                ips[next(ips.len())]
            };
            Packet {
                src: ips[next(ips.len())],
                dst,
                protocol: Protocol::Tcp,
                dport: [80, 443, 5432, 8080][next(4)],
            }
        })
        .collect()
}

fn per_connection(ruleset: &Ruleset, packets: &[Packet]) -> usize {
    packets
        .iter()
        .filter(|p| matches!(ruleset.lookup(p), NftVerdict::Drop(_)))
        .count()
}

fn once(ruleset: &Ruleset, packets: &[Packet]) -> usize {
    let lookup = Lookup::new(ruleset);
    packets
        .iter()
        .filter(|p| matches!(lookup.verdict(p), NftVerdict::Drop(_)))
        .count()
}
