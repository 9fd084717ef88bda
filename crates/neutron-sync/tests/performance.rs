//! The numbers in docs/performance.md and docs/neutron.md: API calls and wall time of a
//! first sync, one pod relabel and one policy edit at 100 pods / 30 policies and 1,000
//! pods / 100 policies (`palisade gen` seed 1), in each peer mode (prefixes, remote
//! groups, address groups), against a real Neutron. Ignored by default (it measures, it
//! does not check); run with
//! `cargo test -p palisade-neutron-sync --test performance -- --ignored --nocapture --test-threads 1`.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::time::Instant;

use palisade_engine::{Engine, Options};
use palisade_gen::{Generated, Spec, generate};
use palisade_neutron::{PeerMode, TranslateOptions, translate};
use palisade_neutron_sync::client::Client;
use palisade_neutron_sync::state::PortFilter;
use palisade_neutron_sync::{SyncOptions, sync};

fn measure(c: &Client, g: &Generated, mode: PeerMode, filter: &PortFilter, what: &str) {
    let engine = Engine::new(g.load().unwrap(), Options::default());
    let options = TranslateOptions {
        peer_mode: mode,
        ignore_admin_policies: false,
    };
    let t = translate(&engine, &options).unwrap().0;
    let rules: usize = t
        .security_groups
        .iter()
        .map(|g| g.security_group_rules.len())
        .sum();
    let start = Instant::now();
    let r = sync(
        c,
        &t,
        &SyncOptions {
            dry_run: false,
            ports: filter.clone(),
            ..SyncOptions::default()
        },
    )
    .unwrap();
    let a = r.applied.clone().unwrap();
    assert!(a.errors.is_empty(), "{:?}", a.errors);
    println!(
        "{mode:?}, {what}: {} groups / {rules} rules / {} address groups wanted; {} reads + {} writes ({} retried); groups +{} -{}, rules +{} -{}, {} port updates; {} ms",
        t.security_groups.len(),
        t.address_groups.len(),
        r.counts.reads,
        r.counts.writes,
        r.counts.retries,
        a.groups_created,
        a.groups_deleted,
        a.rules_created,
        a.rules_deleted,
        a.ports_updated,
        start.elapsed().as_millis()
    );
}

#[test]
#[ignore = "measures; run with --ignored --nocapture"]
fn sync_at_100_pods_30_policies() {
    for mode in [
        PeerMode::Prefixes,
        PeerMode::RemoteGroups,
        PeerMode::AddressGroups,
    ] {
        scenario(mode, 100, 30);
    }
}

#[test]
#[ignore = "measures; run with --ignored --nocapture"]
fn sync_at_1000_pods_100_policies() {
    for mode in [
        PeerMode::Prefixes,
        PeerMode::RemoteGroups,
        PeerMode::AddressGroups,
    ] {
        scenario(mode, 1000, 100);
    }
}

fn scenario(mode: PeerMode, pods: usize, policies: usize) {
    let Some(url) = common::neutron_url() else {
        return;
    };
    let c = common::client(&url, &common::project("perf"));
    println!("{pods} pods, {policies} policies:");
    let mut g = generate(&Spec {
        pods,
        policies,
        seed: 1,
        admin: false,
    });
    let filter = common::pod_ports(&c, &g.load().unwrap().pods);
    measure(&c, &g, mode, &filter, "first sync");
    measure(&c, &g, mode, &filter, "second sync, nothing changed");
    let pods: Vec<usize> = (0..g.cluster.len())
        .filter(|&i| g.cluster[i]["kind"] == "Pod")
        .collect();
    let labels = g.cluster[pods[pods.len() - 1]]["metadata"]["labels"].clone();
    g.cluster[pods[0]]["metadata"]["labels"] = labels;
    measure(&c, &g, mode, &filter, "one pod relabelled");
    let spec = g.policies[1]["spec"].clone();
    g.policies[0]["spec"] = spec;
    measure(&c, &g, mode, &filter, "one policy edited");
}
