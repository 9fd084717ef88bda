//! Services: every endpoint of every Service port, reached through the Service address
//! (the lab's kube-proxy DNAT pinned to that endpoint), from every client, equals
//! `Engine::evaluate_service_port`'s verdict for that endpoint, under the rulesets the agent
//! compiles.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use palisade_engine::Options;
use palisade_lab::{Helper, ServiceObservation, ServiceVia, observe_services, pinned_ports};
use palisade_test_support::require_root;

use crate::harness::{HELPER, PROBES, SERVICES, TestLab, now_us};

/// The observations from `from` to `service:port` through `via` (`cluster`, or a node's
/// name for its nodePort), as `endpoint → reached`.
fn seen(
    obs: &[ServiceObservation],
    from: &str,
    service: &str,
    via: &str,
) -> Vec<(String, u16, bool)> {
    let mut v: Vec<(String, u16, bool)> = obs
        .iter()
        .filter(|o| {
            o.from == from && format!("{}:{}", o.pinned.service, o.pinned.port_label) == service
        })
        .filter(|o| match &o.pinned.via {
            ServiceVia::ClusterIp => via == "cluster",
            ServiceVia::NodePort { node, .. } => via == node,
        })
        .map(|o| (o.endpoint.clone(), o.pinned.endpoint.port.get(), o.reached))
        .collect();
    v.sort();
    v
}

fn e(key: &str, port: u16, reached: bool) -> (String, u16, bool) {
    (key.to_string(), port, reached)
}

#[test]
fn every_service_endpoint_through_the_service_address_equals_the_evaluator() {
    if !require_root("every_service_endpoint_through_the_service_address_equals_the_evaluator") {
        return;
    }
    let lab = TestLab::up('s', SERVICES);
    let set = lab.policy_set(
        &TestLab::fixture_file("services/policies.yaml"),
        Options::default(),
    );
    lab.apply(&set);
    let obs = observe_services(&lab.lab, Path::new(HELPER), &set.engine)
        .unwrap_or_else(|e| panic!("probe services: {e}"));
    for o in &obs {
        println!("{o}");
    }
    // 6 clients (4 pods, 2 nodes) × 8 pinned cluster-IP ports, and from the external host
    // 2 + 2 Local nodePorts (one endpoint per node) and 2 × 2 Cluster ones
    assert_eq!(obs.len(), 6 * 8 + 8, "probes lost");
    let wrong: Vec<String> = obs
        .iter()
        .filter(|o| o.disagrees())
        .map(ToString::to_string)
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {} Service probes disagree:\n{}",
        wrong.len(),
        obs.len(),
        wrong.join("\n")
    );

    // endpoints that disagree: api-2 admits only the client; the named target port `web`
    // is 80 on api-1 and 81 on api-2
    let web = "s/web:http";
    assert_eq!(
        seen(&obs, "t/other", web, "cluster"),
        [e("s/api-1", 80, true), e("s/api-2", 81, false)]
    );
    assert_eq!(
        seen(&obs, "s/client", web, "cluster"),
        [e("s/api-1", 80, true), e("s/api-2", 81, true)]
    );
    // hairpin: allowed on api-1 (not isolated), denied on api-2 (isolated, not a client)
    let hairpin = |from: &str| {
        obs.iter()
            .find(|o| o.hairpin && o.from == from && o.pinned.service == "s/web")
            .map(|o| (o.reached, o.verdict.allowed))
    };
    assert_eq!(hairpin("s/api-1"), Some((true, true)));
    assert_eq!(hairpin("s/api-2"), Some((false, false)));
    // EndpointSlices given explicitly: their ports, and the not-ready client left out
    assert_eq!(
        seen(&obs, "s/client", "s/manual:http", "cluster"),
        [e("s/api-1", 81, true), e("s/api-2", 80, true)]
    );
    // NodePort, externalTrafficPolicy Local: each node sends to its own endpoint, and the
    // endpoint sees the external client
    let ext = "192.0.2.10";
    assert_eq!(seen(&obs, ext, web, "n1"), [e("s/api-1", 80, true)]);
    assert_eq!(seen(&obs, ext, web, "n2"), [e("s/api-2", 81, false)]);
    // NodePort, Cluster: an endpoint on the other node is reached from that node's address
    // (api-2 denies n1's, api-1 admits n2's); one on the node reached is decided for the
    // client's own address, the node's filter running before the masquerade
    let cluster = "s/web-cluster:http";
    // (api-2 on n2 denies the client, where n2's own address would pass as node-local)
    for via in ["n1", "n2"] {
        assert_eq!(
            seen(&obs, ext, cluster, via),
            [e("s/api-1", 81, true), e("s/api-2", 81, false)],
            "via {via}"
        );
    }

    // with the Service translations loaded, connections to the endpoints' own addresses
    // are untouched: the matrix still equals the evaluator (TCP: a port no one serves
    // answers with a reset, which counts as reached; not every pod here serves UDP)
    let observed = lab.observe(&PROBES[..2]);
    let wrong: Vec<String> = observed
        .disagreements(&set.engine)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A connection made through a Service address is cut when an update forbids it at the
/// endpoint: the cut judges the tracked connection as the filter saw it (after DNAT), and
/// deletes it by its original tuple (to the Service address).
#[test]
fn a_connection_through_a_service_is_cut_when_its_endpoint_is_forbidden() {
    if !require_root("a_connection_through_a_service_is_cut_when_its_endpoint_is_forbidden") {
        return;
    }
    let lab = TestLab::up('k', SERVICES);
    let open = lab.policy_set(&TestLab::fixture("00-none"), Options::default());
    let closed = lab.policy_set(
        &TestLab::fixture_file("services/policies.yaml"),
        Options::default(),
    );
    lab.apply(&open);
    // s/web:http (10.96.0.10:8080) pinned to api-2 (81), which the closed set forbids to
    // t/other
    let pinned = pinned_ports(&lab.lab, &open.engine);
    let round = pinned
        .iter()
        .find(|p| {
            p.service == "s/web" && p.port == 8080 && p.endpoint.at.ip.to_string() == "10.1.0.2"
        })
        .map(|p| p.round)
        .unwrap_or_else(|| panic!("s/web:8080 has no endpoint api-2"));
    lab.lab
        .load_services(&pinned, round)
        .unwrap_or_else(|e| panic!("load services: {e}"));
    let other = lab
        .lab
        .pod("t/other")
        .unwrap_or_else(|| panic!("no t/other"))
        .clone();
    let hold = Helper::Hold {
        to: "10.96.0.10:8080".parse().unwrap_or_else(|e| panic!("{e}")),
        duration: Duration::from_millis(3000),
    };
    let mut child = hold
        .command(Path::new(HELPER), &other.netns)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("hold: {e}"));
    let stdout = child
        .stdout
        .take()
        .unwrap_or_else(|| panic!("hold: no stdout"));
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    std::thread::sleep(Duration::from_millis(800));
    let t0 = now_us() / 1000;
    let stats = lab
        .lab
        .update(&open.rulesets, &closed.rulesets)
        .unwrap_or_else(|e| panic!("update: {e}"));
    let status = child.wait().unwrap_or_else(|e| panic!("hold: {e}"));
    let lines = reader.join().unwrap_or_default();
    assert!(status.success(), "hold failed: {lines:?}");
    let exchanges: Vec<(bool, u128)> = lines
        .iter()
        .filter_map(|l| {
            let (s, t) = l.split_once(' ')?;
            Some((s == "ok", t.parse().ok()?))
        })
        .collect();
    assert!(
        exchanges.iter().any(|&(ok, t)| ok && t < t0),
        "the connection never worked: {lines:?}"
    );
    let late_ok = exchanges
        .iter()
        .filter(|&&(ok, t)| ok && t > t0 + 1000)
        .count();
    assert_eq!(
        late_ok, 0,
        "exchanges succeed more than 1 s after the update ({stats:?}): {lines:?}"
    );
    let cut: usize = stats.iter().map(|s| s.connections_cut).sum();
    assert!(cut >= 1, "nothing cut: {stats:?}");
}
