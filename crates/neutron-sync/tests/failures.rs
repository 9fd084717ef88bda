//! Against a real Neutron behind a proxy that makes chosen calls fail: a sync interrupted
//! in any phase leaves Neutron admitting nothing that neither the old nor the new
//! policies admit — and, when it stops before the ports move, nothing the old policies do
//! not admit; the next sync completes the change.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use common::{engine, translation};

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use palisade_engine::{Engine, Flow};
use palisade_gen::{Generated, Spec, generate};
use palisade_model::Protocol;
use palisade_neutron::SgEvaluator;
use palisade_neutron_sync::client::Client;
use palisade_neutron_sync::readback::read_back;
use palisade_neutron_sync::state::{DEFAULT_CLUSTER_ID, Owner, PortFilter, observe};
use palisade_neutron_sync::{SyncOptions, plan, sync};
use serde_json::json;

/// Every probe Neutron admits is admitted by one of `allowed_by` (`what` names them).
fn admits_no_more(c: &Client, filter: &PortFilter, allowed_by: &[&Engine], what: &str) {
    let t = read_back(c, filter).unwrap();
    let sg = SgEvaluator::new(&t);
    let e = allowed_by[0];
    let mut ips: Vec<IpAddr> = e
        .cluster()
        .pods
        .iter()
        .flat_map(|p| p.ips.clone())
        .collect();
    ips.extend(e.cluster().nodes.iter().flat_map(|n| n.addresses.clone()));
    ips.extend(["203.0.113.7", "198.51.100.9"].map(|s| s.parse::<IpAddr>().unwrap()));
    let ports: BTreeSet<u16> = e
        .cluster()
        .pods
        .iter()
        .flat_map(|p| p.ports.iter().map(|cp| cp.port.get()))
        .chain([1])
        .collect();
    for &src in &ips {
        for &dst in &ips {
            for protocol in Protocol::ALL {
                for &port in &ports {
                    if !sg.allows(src, dst, protocol, port) {
                        continue;
                    }
                    let admitted = allowed_by.iter().any(|e| {
                        let flow = Flow {
                            src: e.endpoint_for_ip(src),
                            dst: e.endpoint_for_ip(dst),
                            protocol,
                            port,
                        };
                        e.evaluate(&flow).allowed
                    });
                    assert!(
                        admitted,
                        "{what}: Neutron admits {src} -> {dst} {protocol}/{port}, which {what} do not"
                    );
                }
            }
        }
    }
}

/// The change each case interrupts: policies deleted (pods lose groups), a new policy
/// (pods gain one), a relabel and an edit (rules change).
fn changed(mut g: Generated) -> Generated {
    let pods: Vec<usize> = (0..g.cluster.len())
        .filter(|&i| g.cluster[i]["kind"] == "Pod")
        .collect();
    let labels = g.cluster[pods[pods.len() - 1]]["metadata"]["labels"].clone();
    g.cluster[pods[0]]["metadata"]["labels"] = labels;
    let spec = g.policies[1]["spec"].clone();
    g.policies[2]["spec"] = spec;
    // An existing policy admits one more outside block (its group gains rules).
    let spec = &mut g.policies[3]["spec"];
    let mut ingress = spec["ingress"].as_array().cloned().unwrap_or_default();
    ingress.push(json!({"from": [{"ipBlock": {"cidr": "198.51.100.0/24"}}]}));
    spec["ingress"] = json!(ingress);
    let mut types = spec["policyTypes"].as_array().cloned().unwrap_or_default();
    if !types.contains(&json!("Ingress")) {
        types.push(json!("Ingress"));
    }
    spec["policyTypes"] = json!(types);
    g.policies.remove(0);
    let ns = g.cluster[pods[1]]["metadata"]["namespace"].clone();
    g.policies.push(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "deny-egress", "namespace": ns},
        "spec": {"podSelector": {}, "policyTypes": ["Egress"]}}),
    );
    g
}

/// Which calls fail, and what Neutron may admit afterwards.
struct Case {
    name: &'static str,
    /// (method, path) of the failing calls.
    fails: fn(&str, &str) -> bool,
    /// Whether the ports may already have moved (then the new policies count too).
    ports_may_move: bool,
}

#[test]
fn interrupted_syncs_never_open_more_than_the_old_or_new_policies() {
    let Some(url) = common::neutron_url() else {
        return;
    };
    let cases = [
        Case {
            name: "rule deletions fail",
            fails: |m, p| m == "DELETE" && p.contains("/security-group-rules/"),
            ports_may_move: false,
        },
        Case {
            name: "port updates fail",
            fails: |m, p| m == "PUT" && p.contains("/ports/"),
            ports_may_move: false,
        },
        Case {
            name: "rule additions fail",
            fails: |m, p| m == "POST" && p.ends_with("/security-group-rules"),
            ports_may_move: true,
        },
        Case {
            name: "group deletions fail",
            fails: |m, p| m == "DELETE" && p.contains("/security-groups/"),
            ports_may_move: true,
        },
    ];
    let old = generate(&Spec {
        pods: 20,
        policies: 8,
        seed: 5,
        admin: false,
    });
    let new = changed(old.clone());
    let (old_engine, new_engine) = (engine(&old), engine(&new));
    let (old_t, new_t) = (translation(&old_engine), translation(&new_engine));
    for case in cases {
        let project = common::project("fail");
        let c = common::client(&url, &project);
        let filter = common::pod_ports(&c, &old_engine.cluster().pods);
        let options = SyncOptions {
            dry_run: false,
            ports: filter.clone(),
            ..SyncOptions::default()
        };
        assert!(
            sync(&c, &old_t, &options).unwrap().ok(),
            "{}: the old state syncs",
            case.name
        );
        let owner = Owner::new(&project, DEFAULT_CLUSTER_ID).unwrap();
        let p = plan::plan(&new_t, &observe(&c, &owner, &filter).unwrap(), &owner);
        assert!(
            !p.delete_rules.is_empty()
                && !p.tighten_ports.is_empty()
                && !p.set_ports.is_empty()
                && !p.add_rules.is_empty()
                && !p.delete_groups.is_empty(),
            "the change exercises every phase: {p:#?}"
        );
        // Through the proxy: the chosen calls fail with a 400 (not retried).
        let failed = Arc::new(Mutex::new(0));
        let count = failed.clone();
        let fails = case.fails;
        let proxy = common::faulty_proxy(&url, 400, move |m, p| {
            let f = fails(m, p);
            *count.lock().unwrap() += usize::from(f);
            f
        });
        let broken = common::client(&proxy, &project);
        let report = sync(&broken, &new_t, &options).unwrap();
        assert!(!report.ok(), "{}: the sync reports the failures", case.name);
        assert!(
            *failed.lock().unwrap() > 0,
            "{}: a call was made to fail",
            case.name
        );
        if case.ports_may_move {
            admits_no_more(
                &c,
                &filter,
                &[&old_engine, &new_engine],
                &format!("{}: the old and new policies", case.name),
            );
        } else {
            admits_no_more(
                &c,
                &filter,
                &[&old_engine],
                &format!("{}: the old policies", case.name),
            );
        }
        // The next sync completes the change.
        assert!(
            sync(&c, &new_t, &options).unwrap().ok(),
            "{}: the repair sync",
            case.name
        );
        admits_no_more(
            &c,
            &filter,
            &[&new_engine],
            &format!("{}, repaired: the new policies", case.name),
        );
        assert_eq!(
            sync(&c, &new_t, &options).unwrap().counts.writes,
            0,
            "{}: then nothing to do",
            case.name
        );
    }
}
