//! A pod of a one-pod lab (`tests/fixtures/clusters/one-pod.yaml`, no ruleset loaded) looks
//! names up at a real DNS server (`dnsmasq`) on the external host and connects at once.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use palisade_lab::{
    Answer, DEFAULT_CONNECT_TIMEOUT, DnsRecords, DnsServer, LookupReport, LookupRequest,
    RecordType, lookup,
};
use palisade_model::Protocol;
use palisade_test_support::require_root;

use crate::harness::{HELPER, ONE_POD, TestLab, require_dnsmasq};

/// The TTL the server is told to give.
const TTL: u32 = 37;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn records(entries: &[(&str, &[&str])]) -> DnsRecords {
    entries
        .iter()
        .map(|(name, ips)| (name.to_string(), ips.iter().map(|s| ip(s)).collect()))
        .collect()
}

/// Looks `name` up from `netns` at `server` and connects to `connect` on the first address.
fn ask(
    netns: &str,
    server: SocketAddr,
    name: &str,
    record_type: RecordType,
    connect: Option<(u16, Protocol)>,
) -> LookupReport {
    let request = LookupRequest {
        server,
        name: name.into(),
        record_type,
        connect,
        connect_timeout: DEFAULT_CONNECT_TIMEOUT,
    };
    lookup(Path::new(HELPER), netns, &request).unwrap_or_else(|e| panic!("lookup {name}: {e}"))
}

/// The report of a lookup that got `answers` (TTL [`TTL`]) in one query and connected.
fn connected(report: &LookupReport, answers: &[&str], log: &str) {
    let want: Vec<Answer> = answers
        .iter()
        .map(|s| Answer {
            ip: ip(s),
            ttl: TTL,
        })
        .collect();
    assert_eq!(report.rcode, Some(0), "{report:?}\n{log}");
    assert_eq!(report.answers, want, "{report:?}\n{log}");
    assert_eq!(report.attempts, 1, "{report:?}");
    assert_eq!(report.connected, Some(true), "{report:?}");
    assert_eq!(report.error, None, "{report:?}");
    let us = report
        .reply_to_connect_us
        .unwrap_or_else(|| panic!("no reply-to-connect time: {report:?}"));
    assert!(
        us < 300_000,
        "a connection inside the lab takes well under the timeout: {report:?}"
    );
}

#[test]
fn a_pod_resolves_names_at_the_external_dnsmasq_and_reaches_each_address() {
    let test = "a_pod_resolves_names_at_the_external_dnsmasq_and_reaches_each_address";
    if !require_root(test) || !require_dnsmasq(test) {
        return;
    }
    let mut lab = TestLab::up('d', ONE_POD);
    let external = lab.lab.external.clone();
    let second = ip("192.0.2.20");
    lab.lab
        .add_external_address(Path::new(HELPER), second)
        .unwrap_or_else(|e| panic!("add external address: {e}"));
    let pod = lab
        .lab
        .pod("x/a")
        .unwrap_or_else(|| panic!("no pod x/a"))
        .clone();
    let mut dns = DnsServer::start(
        Path::new(HELPER),
        &external.netns,
        external.ip,
        &records(&[
            ("allowed.example.org", &["192.0.2.10"]),
            ("forbidden.example.org", &["192.0.2.20"]),
            ("v6.example.org", &["2001:db8::1"]),
        ]),
        TTL,
    )
    .unwrap_or_else(|e| panic!("dnsmasq: {e}"));
    let server = dns.addr();
    assert_eq!(server, SocketAddr::new(external.ip, 53));

    // One name per address of the external host; each reached over TCP and UDP.
    for (name, answer) in [
        ("allowed.example.org", "192.0.2.10"),
        ("forbidden.example.org", "192.0.2.20"),
    ] {
        for protocol in [Protocol::Tcp, Protocol::Udp] {
            let report = ask(
                &pod.netns,
                server,
                name,
                RecordType::A,
                Some((80, protocol)),
            );
            connected(&report, &[answer], &dns.log());
        }
    }

    // A closed port is a failed connection, reported with its cause.
    let closed = ask(
        &pod.netns,
        server,
        "allowed.example.org",
        RecordType::A,
        Some((81, Protocol::Tcp)),
    );
    assert_eq!(closed.connected, Some(false), "{closed:?}");
    assert!(closed.error.is_some(), "{closed:?}");

    // AAAA records come back with the same TTL; without a connection asked, none is made.
    let v6 = ask(&pod.netns, server, "v6.example.org", RecordType::Aaaa, None);
    assert_eq!(
        (v6.rcode, v6.answers.clone(), v6.connected),
        (
            Some(0),
            vec![Answer {
                ip: ip("2001:db8::1"),
                ttl: TTL
            }],
            None
        ),
        "{v6:?}"
    );

    // The server answers only what it is given.
    let unknown = ask(&pod.netns, server, "other.example.org", RecordType::A, None);
    assert!(unknown.answers.is_empty(), "{unknown:?}");

    // Moving a name to the other address: the next lookup sees it, and reaches it.
    dns.set_records(&records(&[
        ("allowed.example.org", &["192.0.2.20"]),
        ("forbidden.example.org", &["192.0.2.20"]),
    ]))
    .unwrap_or_else(|e| panic!("set records: {e}"));
    let moved = ask(
        &pod.netns,
        server,
        "allowed.example.org",
        RecordType::A,
        Some((80, Protocol::Tcp)),
    );
    connected(&moved, &["192.0.2.20"], &dns.log());
    let gone = ask(&pod.netns, server, "v6.example.org", RecordType::Aaaa, None);
    assert!(gone.answers.is_empty(), "a removed name: {gone:?}");
    drop(dns);
    let after = ask(
        &pod.netns,
        server,
        "allowed.example.org",
        RecordType::A,
        None,
    );
    assert_eq!(
        (after.rcode, after.attempts),
        (None, 2),
        "a stopped server answers nothing, after one retry: {after:?}"
    );
}
