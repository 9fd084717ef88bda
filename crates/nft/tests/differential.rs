//! The generated ruleset, interpreted, decides every connection as the engine does; and
//! the kernel accepts its text.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::net::IpAddr;

use palisade_engine::{Engine, Flow, Options};
use palisade_model::Protocol;
use palisade_nft::{NftVerdict, Packet, compile};
use proptest::prelude::*;

fn addresses(c: &palisade_model::Cluster) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = c.pods.iter().flat_map(|p| p.ips.clone()).collect();
    ips.extend(
        [
            "192.168.0.1",
            "192.168.0.2",
            "203.0.113.7",
            "10.0.5.5",
            "10.0.0.3",
        ]
        .iter()
        .map(|s| s.parse::<IpAddr>().unwrap()),
    );
    ips.sort();
    ips.dedup();
    ips
}

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(300, 0x5eed_2026))]

    #[test]
    fn ruleset_agrees_with_the_engine(c in palisade_gen::strategies::cluster(), node_local in any::<bool>()) {
        let engine = Engine::new(c.clone(), Options { allow_node_local: node_local, ..Options::default() });
        let rs = compile(&engine, None).unwrap();
        for &src in &addresses(&c) {
            for &dst in &addresses(&c) {
                for protocol in Protocol::ALL {
                    for port in [79u16, 80, 81] {
                        let flow = Flow { src: engine.endpoint_for_ip(src), dst: engine.endpoint_for_ip(dst), protocol, port };
                        // a packet from a pod to itself at a node's hooks came through a
                        // Service address (hairpin): subject to policy
                        let want = engine.evaluate_through_service(&flow).allowed;
                        let got = rs.lookup(&Packet { src, dst, protocol, dport: port }) == NftVerdict::Accept;
                        prop_assert_eq!(got, want, "{} -> {} {}/{}\n{}\n{}", src, dst, protocol, port, palisade_analysis::Analysis::new(&engine).explain(&flow), rs.render());
                    }
                }
            }
        }
    }
}

const XYZ: &str = include_str!("../../../examples/xyz/cluster.yaml");

fn xyz_engine(policies: &str) -> Engine {
    let loaded =
        palisade_model::load_sources([("c", XYZ), ("p", policies)], Default::default()).unwrap();
    Engine::new(loaded.cluster, Options::default())
}

#[test]
fn drops_are_logged_with_ids_that_name_the_policy() {
    let e = xyz_engine(
        &[
            include_str!("../../../examples/xyz/policies/01-deny-ingress-x.yaml"),
            include_str!("../../../examples/xyz/policies/02-anp.yaml"),
            include_str!("../../../examples/xyz/policies/03-banp.yaml"),
        ]
        .join("\n---\n"),
    );
    let rs = compile(&e, None).unwrap();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let v = rs.lookup(&Packet {
        src: ip("10.0.1.10"),
        dst: ip("10.0.2.12"),
        protocol: Protocol::Tcp,
        dport: 80,
    });
    let NftVerdict::Drop(Some(id)) = v else {
        panic!("{v:?}")
    };
    let logged = &rs.logs[id as usize];
    assert_eq!(
        logged.to_string(),
        "egress Baseline tier: BaselineAdminNetworkPolicy default, egress rule 0 \"no-y-to-z\" (Deny)"
    );
    let flow = |src: &str, dst: &str| palisade_engine::Flow {
        src: e.endpoint_for_ip(ip(src)),
        dst: e.endpoint_for_ip(ip(dst)),
        protocol: Protocol::Tcp,
        port: 80,
    };
    let verdict = e.evaluate(&flow("10.0.1.10", "10.0.2.12"));
    assert_eq!(
        logged.decision, verdict.egress.decision,
        "the log names the engine's decision"
    );
    let v = rs.lookup(&Packet {
        src: ip("10.0.1.10"),
        dst: ip("10.0.0.10"),
        protocol: Protocol::Tcp,
        dport: 80,
    });
    let NftVerdict::Drop(Some(id)) = v else {
        panic!("{v:?}")
    };
    let logged = &rs.logs[id as usize];
    assert_eq!(
        logged.to_string(),
        "ingress NetworkPolicy tier: isolated by NetworkPolicy x/allow-from-y-b and no rule matched"
    );
    let verdict = e.evaluate(&flow("10.0.1.10", "10.0.0.10"));
    assert_eq!(
        logged.decision, verdict.ingress.decision,
        "the log names the engine's decision"
    );
    let text = rs.render();
    assert!(text.contains("log prefix \"pal-") && text.contains("group 100"));
    // SCTP rules are rendered (they cannot be probed in this kernel).
    let sctp = xyz_engine(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: s, namespace: x}\nspec:\n  podSelector: {}\n  ingress: [{ports: [{protocol: SCTP, port: 80}]}]\n",
    );
    assert!(
        compile(&sctp, None)
            .unwrap()
            .render()
            .contains("meta l4proto sctp th dport { 80 }")
    );
}

#[test]
fn names_and_labels_never_reach_the_ruleset() {
    let hostile = r#"
apiVersion: v1
kind: Namespace
metadata: {name: evil, labels: {x: "a"}}
---
apiVersion: v1
kind: Pod
metadata: {name: "p.drop", namespace: evil, labels: {app: "drop"}}
status: {podIP: 10.9.9.9}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: "accept.all", namespace: evil}
spec: {podSelector: {matchLabels: {app: drop}}}
"#;
    let rs = compile(&xyz_engine(hostile), None).unwrap();
    let text = rs.render();
    for word in ["evil", "p.drop", "accept.all"] {
        assert!(!text.contains(word), "{word} leaked into the ruleset");
    }
}

#[test]
fn one_node_only() {
    let e = xyz_engine("");
    assert_eq!(compile(&e, Some("node-1")).unwrap().egress.len(), 9);
    assert!(compile(&e, Some("nope")).is_err());
}

/// `nft -c` in a fresh network namespace (root only; CI runs as root).
#[test]
fn the_kernel_accepts_the_rendered_rulesets() {
    if !palisade_test_support::require_root("the_kernel_accepts_the_rendered_rulesets") {
        return;
    }
    let ns = format!("palisade-nftc-{}", std::process::id());
    assert!(
        std::process::Command::new("ip")
            .args(["netns", "add", &ns])
            .status()
            .unwrap()
            .success()
    );
    let result = std::panic::catch_unwind(|| {
        let policies = std::fs::read_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/xyz/policies"
        ))
        .unwrap()
        .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap())
        .collect::<Vec<_>>()
        .join("\n---\n");
        let rs = compile(&xyz_engine(&policies), None).unwrap();
        palisade_nft::check(&rs.render(), Some(&ns)).unwrap();
        palisade_nft::check(&rs.render_linear(), Some(&ns)).unwrap();
        for seed in 0..5 {
            let g = palisade_gen::generate(&palisade_gen::Spec {
                pods: 60,
                policies: 30,
                seed,
                admin: true,
            });
            let rs = compile(&Engine::new(g.load().unwrap(), Options::default()), None).unwrap();
            palisade_nft::check(&rs.render(), Some(&ns))
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
    });
    let _ = std::process::Command::new("ip")
        .args(["netns", "del", &ns])
        .status();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// An incremental update script is accepted by the kernel and leaves the same table as a
/// full apply of the new ruleset (root only).
#[test]
fn updates_apply_in_the_kernel_and_equal_a_full_apply() {
    if !palisade_test_support::require_root("updates_apply_in_the_kernel_and_equal_a_full_apply") {
        return;
    }
    let ns = format!("palisade-nftu-{}", std::process::id());
    assert!(
        std::process::Command::new("ip")
            .args(["netns", "add", &ns])
            .status()
            .unwrap()
            .success()
    );
    let result = std::panic::catch_unwind(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/xyz/policies/");
        let all: Vec<String> = ["01-deny-ingress-x.yaml", "02-anp.yaml", "03-banp.yaml"]
            .iter()
            .map(|f| std::fs::read_to_string(format!("{dir}{f}")).unwrap())
            .collect();
        let steps = [
            String::new(),
            all[0].clone(),
            all.join("\n---\n"),
            all[1].clone(),
            String::new(),
        ];
        let mut old = compile(&xyz_engine(""), None).unwrap();
        palisade_nft::apply(&old, Some(&ns)).unwrap();
        for step in &steps[1..] {
            let new = compile(&xyz_engine(step), None).unwrap();
            palisade_nft::update(&old, &new, Some(&ns)).unwrap();
            let listed = list(&ns);
            palisade_nft::apply(&new, Some(&ns)).unwrap();
            assert_eq!(
                listed,
                list(&ns),
                "incremental update differs from a full apply"
            );
            old = new;
        }
    });
    let _ = std::process::Command::new("ip")
        .args(["netns", "del", &ns])
        .status();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// The loaded table, chains and sets sorted, counters zeroed (for comparison).
fn list(ns: &str) -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args([
            "netns", "exec", ns, "nft", "list", "table", "inet", "palisade",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    // The table's closing brace, so that the last chain compares like the others.
    let text = text
        .trim_end()
        .strip_suffix('}')
        .unwrap_or(&text)
        .trim_end();
    let mut blocks: Vec<String> = text
        .split("\n\n")
        .map(|b| b.replace(|c: char| c.is_ascii_digit(), "#"))
        .collect();
    blocks.sort();
    blocks
}

#[test]
fn an_address_two_pods_share_is_dispatched_once_and_dropped() {
    let cluster = r#"
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: a}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: q, namespace: b}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: r, namespace: a}
status: {podIP: 10.0.0.3}
"#;
    let e = Engine::new(
        palisade_model::load_str(cluster).unwrap().cluster,
        Options::default(),
    );
    let rs = compile(&e, None).unwrap();
    for map in [&rs.egress, &rs.ingress] {
        let mut keys: Vec<IpAddr> = map.iter().map(|(ip, _)| *ip).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), map.len(), "nft refuses duplicate map keys");
    }
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    for (src, dst) in [("10.0.0.1", "10.0.0.3"), ("10.0.0.3", "10.0.0.1")] {
        let v = rs.lookup(&Packet {
            src: ip(src),
            dst: ip(dst),
            protocol: Protocol::Tcp,
            dport: 80,
        });
        let NftVerdict::Drop(Some(id)) = v else {
            panic!("{src} -> {dst}: {v:?}")
        };
        assert!(
            rs.logs[id as usize]
                .to_string()
                .contains("shares its address 10.0.0.1"),
            "{}",
            rs.logs[id as usize]
        );
    }
}
