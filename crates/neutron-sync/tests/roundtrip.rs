//! Against a real Neutron: after each sync, what Neutron holds (read back) decides every
//! probe as the engine does — on generated clusters, in both peer modes, through pod
//! relabels, policy edits and deletions; a second sync writes nothing; `--dry-run` writes
//! nothing.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::collections::BTreeSet;
use std::net::IpAddr;

use palisade_engine::{Engine, Flow, Options};
use palisade_gen::{Generated, Spec, generate};
use palisade_model::Protocol;
use palisade_neutron::{PeerMode, SgEvaluator, TranslateOptions, Translation, translate};
use palisade_neutron_sync::client::Client;
use palisade_neutron_sync::readback::read_back;
use palisade_neutron_sync::state::PortFilter;
use palisade_neutron_sync::{Report, SyncOptions, sync};
use serde_json::json;

fn engine(g: &Generated) -> Engine {
    Engine::new(g.load().unwrap(), Options::default())
}

fn translation(e: &Engine, mode: PeerMode) -> Translation {
    translate(
        e,
        &TranslateOptions {
            peer_mode: mode,
            ignore_admin_policies: false,
        },
    )
    .unwrap()
    .0
}

fn run(c: &Client, t: &Translation, filter: &PortFilter, dry_run: bool) -> Report {
    let r = sync(
        c,
        t,
        &SyncOptions {
            dry_run,
            ports: filter.clone(),
            ..SyncOptions::default()
        },
    )
    .unwrap();
    assert!(r.ok(), "sync failed: {:?}", r.applied);
    assert!(r.unmatched.is_empty(), "unmatched pods: {:?}", r.unmatched);
    r
}

/// Neutron, read back, decides every probe as the engine does.
fn check(e: &Engine, c: &Client, filter: &PortFilter, step: &str) {
    let t = read_back(c, filter).unwrap();
    let sg = SgEvaluator::new(&t);
    let cluster = e.cluster();
    let mut ips: Vec<IpAddr> = cluster.pods.iter().flat_map(|p| p.ips.clone()).collect();
    ips.extend(cluster.nodes.iter().flat_map(|n| n.addresses.clone()));
    ips.extend(["203.0.113.7", "10.1.200.9", "10.7.0.1"].map(|s| s.parse::<IpAddr>().unwrap()));
    let mut ports: BTreeSet<u16> = cluster
        .pods
        .iter()
        .flat_map(|p| p.ports.iter().map(|cp| cp.port.get()))
        .collect();
    ports.extend([1, 53, 8081]);
    let mut checked = 0;
    for &src in &ips {
        for &dst in ips.iter().filter(|d| d.is_ipv4() == src.is_ipv4()) {
            for protocol in Protocol::ALL {
                for &port in &ports {
                    let flow = Flow {
                        src: e.endpoint_for_ip(src),
                        dst: e.endpoint_for_ip(dst),
                        protocol,
                        port,
                    };
                    let want = e.evaluate(&flow).allowed;
                    let got = sg.allows(src, dst, protocol, port);
                    assert_eq!(
                        got,
                        want,
                        "{step}: {src} -> {dst} {protocol}/{port}\n{}",
                        palisade_analysis::Analysis::new(e).explain(&flow)
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 1000, "{step}: only {checked} probes");
}

/// Syncs, checks equivalence, and checks that a second sync writes nothing.
fn step(
    c: &Client,
    g: &Generated,
    mode: PeerMode,
    filter: &PortFilter,
    ports: usize,
    name: &str,
) -> Report {
    let e = engine(g);
    let t = translation(&e, mode);
    let dry = run(c, &t, filter, true);
    assert_eq!(dry.counts.writes, 0, "{name}: --dry-run wrote");
    let first = run(c, &t, filter, false);
    assert_eq!(
        first.counts.writes,
        dry.calls.len(),
        "{name}: the dry run predicts the writes: {:#?}",
        dry.calls
    );
    check(&e, c, filter, name);
    let again = run(c, &t, filter, false);
    assert_eq!(
        again.counts.writes, 0,
        "{name}: a second sync wrote: {:#?}",
        again.calls
    );
    // Pages of 10 (the dev server's limit); a full last page is followed by an empty one.
    let pages = |n: usize| n / 10 + 1;
    let address_groups = if t.address_groups.is_empty() {
        0
    } else {
        pages(t.address_groups.len())
    };
    assert_eq!(
        again.counts.reads,
        pages(t.security_groups.len()) + pages(ports) + address_groups,
        "{name}: a sync lists groups and ports once (and address groups when it uses them)"
    );
    first
}

fn pod_ips(g: &Generated) -> Vec<IpAddr> {
    engine(g)
        .cluster()
        .pods
        .iter()
        .filter(|p| !p.host_network)
        .flat_map(|p| p.ips.clone())
        .collect()
}

fn scenario(mode: PeerMode, seed: u64, tag: &str) {
    let Some(url) = common::neutron_url() else {
        return;
    };
    let c = common::client(&url, &common::project(tag));
    let mut g = generate(&Spec {
        pods: 24,
        policies: 8,
        seed,
        admin: false,
    });
    let ports = pod_ips(&g).len();
    let net = common::make_ports(&c, &pod_ips(&g));
    let filter = PortFilter {
        network_id: Some(net),
        device_owner: Some("compute:kuryr".into()),
    };
    step(&c, &g, mode, &filter, ports, "first sync");

    // A pod takes another pod's labels.
    let pods: Vec<usize> = (0..g.cluster.len())
        .filter(|&i| g.cluster[i]["kind"] == "Pod")
        .collect();
    let labels = g.cluster[pods[pods.len() - 1]]["metadata"]["labels"].clone();
    g.cluster[pods[0]]["metadata"]["labels"] = labels;
    step(&c, &g, mode, &filter, ports, "pod relabel");

    // A policy takes another policy's spec.
    let spec = g.policies[1]["spec"].clone();
    g.policies[0]["spec"] = spec;
    step(&c, &g, mode, &filter, ports, "policy edit");

    // A policy isolates everything in a namespace for egress, with no rule.
    let ns = g.cluster[pods[1]]["metadata"]["namespace"].clone();
    g.policies.push(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "deny-egress", "namespace": ns},
        "spec": {"podSelector": {}, "policyTypes": ["Egress"]}}),
    );
    step(&c, &g, mode, &filter, ports, "policy added");

    // Policies and a pod are deleted (its port stays, and loses the owned groups).
    g.policies.remove(2);
    g.policies.remove(0);
    g.cluster.remove(pods[3]);
    step(&c, &g, mode, &filter, ports, "deletions");

    // Every policy deleted.
    g.policies.clear();
    let last = step(&c, &g, mode, &filter, ports, "no policies");
    assert!(
        last.applied.unwrap().groups_deleted > 0,
        "groups of deleted policies are deleted"
    );
}

#[test]
fn prefixes_round_trip() {
    scenario(PeerMode::Prefixes, 11, "prefixes");
}

#[test]
fn remote_groups_round_trip() {
    scenario(PeerMode::RemoteGroups, 12, "remote");
}

#[test]
fn address_groups_round_trip() {
    scenario(PeerMode::AddressGroups, 13, "addrgroups");
}
