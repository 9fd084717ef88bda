//! `eval` and `explain` with a Service as the destination: `svc/NS/NAME[:PORT]` and a
//! Service address, a verdict per endpoint, and what a client experiences.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use common::{palisade, stderr, stdout};

const CLUSTER: &str = "crates/cli/tests/fixtures/services.yaml";

fn eval(args: &[&str]) -> std::process::Output {
    let mut all = vec!["eval", "-f", CLUSTER];
    all.extend_from_slice(args);
    palisade(&all)
}

#[test]
fn a_service_is_answered_per_endpoint_with_what_clients_see() {
    let o = eval(&["--from", "shop/web-0", "--to", "svc/shop/orders:http"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "svc/shop/orders:http (TCP 80) from shop/web-0 (10.0.0.1): 1 of 2 endpoint(s) reachable (derived from its selector)"
    );
    // The named target port lands on each pod's own number.
    assert_eq!(lines[1], "  ALLOWED: shop/orders-0 (10.0.0.2) TCP/8080");
    assert_eq!(lines[4], "  DENIED: shop/orders-1 (10.0.0.3) TCP/9090");
    assert!(
        lines[6].contains("isolated by NetworkPolicy shop/orders and no rule matched"),
        "{out}"
    );
    assert_eq!(
        lines[7],
        "  not an endpoint: shop/orders-2 (declares no container port of that name and protocol)"
    );
    assert_eq!(
        lines[8],
        "  clients: some connections fail: each connection lands on one of 2 endpoints, and 1 of them denies it"
    );
    // --exit-code: every endpoint must admit the client.
    let denied = eval(&[
        "--from",
        "shop/web-0",
        "--to",
        "svc/shop/orders",
        "--exit-code",
    ]);
    assert_eq!(denied.status.code(), Some(3));
    let allowed = eval(&[
        "--from",
        "shop/orders-1",
        "--to",
        "svc/shop/orders",
        "--exit-code",
    ]);
    assert_eq!(allowed.status.code(), Some(0), "{}", stdout(&allowed));
}

#[test]
fn a_service_address_is_the_service_and_any_other_address_port_a_flow() {
    let by_name = stdout(&eval(&[
        "--from",
        "shop/web-0",
        "--to",
        "svc/shop/db",
        "-o",
        "json",
    ]));
    let by_ip = stdout(&eval(&[
        "--from",
        "shop/web-0",
        "--to",
        "10.96.0.20:5432",
        "-o",
        "json",
    ]));
    assert_eq!(by_name, by_ip);
    let json: serde_json::Value = serde_json::from_str(&by_ip).unwrap();
    assert_eq!(json["service"], "shop/db");
    assert_eq!(json["endpointsFrom"], "slices");
    let port = &json["ports"][0];
    assert_eq!(port["reach"], "all");
    assert_eq!(port["endpoints"][0]["to"]["ip"], "192.0.2.50");
    assert_eq!(port["endpoints"][0]["ingress"]["reason"], "External");
    // ADDRESS:PORT of a pod is the plain flow.
    let flow = stdout(&eval(&["--from", "shop/web-0", "--to", "10.0.0.3:9090"]));
    assert!(
        flow.starts_with("DENIED: shop/web-0 (10.0.0.1) -> shop/orders-1 (10.0.0.3) TCP/9090"),
        "{flow}"
    );
    let both = eval(&[
        "--from",
        "shop/web-0",
        "--to",
        "10.0.0.3:9090",
        "--port",
        "80",
    ]);
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn hairpin_is_marked_and_decided_by_policy() {
    let o = eval(&[
        "--from",
        "shop/orders-1",
        "--to",
        "svc/shop/orders",
        "-o",
        "json",
    ]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let endpoints = json["ports"][0]["endpoints"].as_array().unwrap();
    let hairpin: Vec<(&str, bool, bool)> = endpoints
        .iter()
        .map(|e| {
            (
                e["to"]["name"].as_str().unwrap(),
                e["hairpin"].as_bool().unwrap(),
                e["allowed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        hairpin,
        [
            ("shop/orders-0", false, true),
            ("shop/orders-1", true, true)
        ]
    );
    // The allowing rule is a policy rule, not the same-pod exemption.
    assert_eq!(endpoints[1]["ingress"]["policy"]["name"], "orders");
    let text = stdout(&palisade(&[
        "explain",
        "-f",
        CLUSTER,
        "--from",
        "shop/orders-1",
        "--to",
        "svc/shop/orders:80",
    ]));
    assert!(
        text.contains("== ALLOWED: shop/orders-1 (10.0.0.3) TCP/9090 (the client itself, through the Service address: subject to policy) =="),
        "{text}"
    );
    assert!(
        text.contains("Ingress at shop/orders-1:\n  Admin tier: no policy selects this pod for ingress\n  NetworkPolicy tier: isolated for ingress by NetworkPolicy shop/orders"),
        "{text}"
    );
}

#[test]
fn services_that_cannot_be_answered_say_why() {
    let cases = [
        (
            "svc/shop/mail",
            "is an ExternalName Service (an alias of smtp.example.com)",
        ),
        (
            "svc/shop/orders:81",
            "svc/shop/orders has no port 81 (its ports: http (TCP 80))",
        ),
        ("svc/shop/nope", "no Service shop/nope in the input"),
        ("svc/orders", "a Service is svc/NAMESPACE/NAME[:PORT]"),
    ];
    for (to, message) in cases {
        let o = eval(&["--from", "shop/web-0", "--to", to]);
        assert_eq!(o.status.code(), Some(2), "{to}");
        assert!(stderr(&o).contains(message), "{to}: {}", stderr(&o));
    }
    let range = eval(&[
        "--from",
        "shop/web-0",
        "--to",
        "svc/shop/orders",
        "--port",
        "80-81",
    ]);
    assert_eq!(range.status.code(), Some(2));
    let empty = stdout(&eval(&["--from", "shop/web-0", "--to", "svc/shop/empty"]));
    assert!(
        empty.contains("clients: no ready endpoint for this port: every connection fails (not a policy decision)"),
        "{empty}"
    );
}
