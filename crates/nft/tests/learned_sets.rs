//! Learned sets against the kernel: a `domainNames` peer compiles to a set with
//! `flags timeout` that loads empty, the agent's netlink elements land in it with their
//! timeouts, an update leaves them alone, and the reply capture table loads and holds
//! (root; skipped with a printed reason otherwise).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod support;

use std::net::IpAddr;
use std::time::Duration;

use palisade_engine::{Engine, Options};
use palisade_model::Protocol;
use palisade_nft::{LearnedElement, Lookup, NftVerdict, Packet, compile};
use support::ct::Netns;

const CLUSTER: &str = include_str!("../../cli/tests/fixtures/domains/cluster.yaml");

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn ruleset() -> palisade_nft::Ruleset {
    ruleset_with("")
}

/// The fixture's ruleset with `more` objects.
fn ruleset_with(more: &str) -> palisade_nft::Ruleset {
    let loaded =
        palisade_model::load_sources([("c", CLUSTER), ("m", more)], Default::default()).unwrap();
    compile(&Engine::new(loaded.cluster, Options::default()), None).unwrap()
}

#[test]
fn a_domain_peer_compiles_to_an_empty_learned_set_per_family() {
    let rs = ruleset();
    let learned: Vec<_> = rs.sets.iter().filter(|s| s.learned.is_some()).collect();
    assert_eq!(learned.len(), 2, "{:#?}", rs.sets);
    assert!(learned.iter().all(|s| s.elements.is_empty()));
    let name = palisade_nft::learned_set_name(learned[0].learned.as_ref().unwrap(), false);
    assert!(learned.iter().any(|s| s.name == name && !s.v6));
    let text = rs.render();
    assert!(
        text.contains(&format!(
            "set {name} {{\n    type ipv4_addr\n    flags timeout\n  }}"
        )),
        "{text}"
    );
    // Nothing learned: the rule admits nothing; learned (for a lookup): it admits.
    let p = Packet {
        src: ip("10.0.0.1"),
        dst: ip("54.187.174.169"),
        protocol: Protocol::Tcp,
        dport: 443,
    };
    assert!(matches!(Lookup::new(&rs).verdict(&p), NftVerdict::Drop(_)));
    let mut filled = rs.clone();
    for s in filled.sets.iter_mut().filter(|s| s.name == name) {
        s.elements = vec![ip("54.187.174.169").into()].into();
    }
    assert_eq!(Lookup::new(&filled).verdict(&p), NftVerdict::Accept);
    assert!(matches!(
        Lookup::new(&filled).verdict(&Packet { dport: 80, ..p }),
        NftVerdict::Drop(_)
    ));
}

#[test]
fn learned_elements_load_with_timeouts_and_updates_leave_them() {
    if !palisade_test_support::require_root(
        "learned_elements_load_with_timeouts_and_updates_leave_them",
    ) {
        return;
    }
    let rs = ruleset();
    let ns = Netns::new("learn");
    palisade_nft::apply(&rs, Some(&ns.0)).unwrap();
    let set = rs
        .sets
        .iter()
        .find(|s| s.learned.is_some() && !s.v6)
        .unwrap();
    let add = |addr: &str, secs| LearnedElement {
        set: set.name.clone(),
        ip: ip(addr),
        timeout: Duration::from_secs(secs),
    };
    palisade_nft::add_learned(
        &[add("54.187.174.169", 120), add("93.184.216.34", 30)],
        Some(&ns.0),
    )
    .unwrap();
    let list = || {
        let out = ns.exec(&["nft", "list", "set", "inet", "palisade", &set.name]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = list();
    assert!(text.contains("54.187.174.169 timeout 2m"), "{text}");
    assert!(text.contains("93.184.216.34 timeout 30s"), "{text}");
    // Adding again sets the new timeout.
    palisade_nft::add_learned(&[add("93.184.216.34", 90)], Some(&ns.0)).unwrap();
    assert!(list().contains("93.184.216.34 timeout 1m30s"), "{}", list());
    // An update (one more pod under the same policy) keeps them.
    let next = ruleset_with(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: pay-1, namespace: pay, labels: {app: pay}}\n\
         status: {podIP: 10.0.0.2}\n",
    );
    assert_ne!(next, rs);
    palisade_nft::update(&rs, &next, Some(&ns.0)).unwrap();
    assert!(list().contains("54.187.174.169"), "{}", list());
}

#[test]
fn the_reply_capture_loads_and_holds_while_renewed() {
    if !palisade_test_support::require_root("the_reply_capture_loads_and_holds_while_renewed") {
        return;
    }
    let ns = Netns::new("dnscap");
    palisade_nft::install_dns_capture(&[ip("10.96.0.10"), ip("fd00::10")], Some(&ns.0)).unwrap();
    palisade_nft::hold_replies(Duration::from_secs(3), Some(&ns.0)).unwrap();
    let out = ns.exec(&["nft", "list", "table", "inet", "palisade_dns"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("udp timeout 3s"), "{text}");
    assert!(
        text.contains("log prefix \"pal-dns-held\" group 102 snaplen 65535 queue-threshold 1 drop"),
        "{text}"
    );
    // Installing again (a restart) replaces it; removing leaves nothing.
    palisade_nft::install_dns_capture(&[ip("10.96.0.10")], Some(&ns.0)).unwrap();
    palisade_nft::remove_dns_capture(Some(&ns.0)).unwrap();
    palisade_nft::remove_dns_capture(Some(&ns.0)).unwrap();
    let out = ns.exec(&["nft", "list", "tables"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("palisade_dns"));
}
