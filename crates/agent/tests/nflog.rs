//! The nflog reader against the kernel: in a fresh network namespace, an nftables rule
//! logs the first packet of TCP and UDP connections on the loopback interface to group 100
//! with a `pal-<id>` prefix; the reader must return each with its prefix, addresses,
//! protocol and ports, over IPv4 and IPv6, through the blocking and the threaded reader.
//! Needs root (network namespaces, `nft`); skipped with a printed reason otherwise.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)] // a test: a failed unwrap is a failed assertion

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::process::Command;
use std::time::{Duration, Instant};

use palisade_agent::nflog::{LoggedPacket, Nflog, NflogError};
use palisade_model::Protocol;

const GROUP: u16 = palisade_nft::LOG_GROUP;

/// A network namespace named after the test and the process id, deleted on drop (also
/// when the test panics).
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("palnflog-{tag}-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .unwrap();
        assert!(out.status.success(), "ip netns add {name}: {out:?}");
        let ns = Netns(name);
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        ns
    }

    /// Runs a command inside the namespace; it must succeed.
    fn exec(&self, args: &[&str]) {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.0])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }

    /// Loads an nftables script inside the namespace.
    fn nft(&self, script: &str) {
        let path = std::env::temp_dir().join(format!("{}.nft", self.0));
        std::fs::write(&path, script).unwrap();
        self.exec(&["nft", "-f", path.to_str().unwrap()]);
        let _ = std::fs::remove_file(&path);
    }

    /// Runs `f` on a thread that has entered this namespace (sockets it creates stay
    /// there).
    fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let file = std::fs::File::open(format!("/run/netns/{}", self.0)).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                rustix::thread::move_into_link_name_space(
                    file.as_fd(),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )
                .unwrap();
                f()
            })
            .join()
            .unwrap()
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// Logs the first packet of every TCP connection to port 5000 and UDP flow to port 5001
/// (on the output hook, so each is logged once), with the prefixes a Palisade ruleset
/// uses.
const RULES: &str = r#"
table inet palnflogtest {
    chain out {
        type filter hook output priority 0; policy accept;
        ct state new tcp dport 5000 log prefix "pal-7" group 100
        ct state new udp dport 5001 log prefix "pal-12" group 100
    }
}
"#;

/// Opens one TCP connection and sends one UDP datagram from `ip` to itself; returns the
/// packets the rules must log.
fn traffic(ip: IpAddr) -> Vec<LoggedPacket> {
    let listener = TcpListener::bind(SocketAddr::new(ip, 5000)).unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let tcp_sport = client.local_addr().unwrap().port();
    let server = UdpSocket::bind(SocketAddr::new(ip, 5001)).unwrap();
    let udp = UdpSocket::bind(SocketAddr::new(ip, 0)).unwrap();
    udp.send_to(b"x", server.local_addr().unwrap()).unwrap();
    let udp_sport = udp.local_addr().unwrap().port();
    let packet = |prefix: &str, protocol, sport, dport| LoggedPacket {
        prefix: prefix.into(),
        src: ip,
        dst: ip,
        protocol: Some(protocol),
        sport: Some(sport),
        dport: Some(dport),
        original_dst: None,
        payload: Vec::new(),
    };
    vec![
        packet("pal-7", Protocol::Tcp, tcp_sport, 5000),
        packet("pal-12", Protocol::Udp, udp_sport, 5001),
    ]
}

/// The packets as text, without the bytes copied (the headers they were read from).
fn sorted(v: Vec<LoggedPacket>) -> BTreeSet<String> {
    v.into_iter()
        .map(|p| {
            format!(
                "{:?}",
                LoggedPacket {
                    payload: Vec::new(),
                    ..p
                }
            )
        })
        .collect()
}

#[test]
fn logged_packets_are_read_back_with_prefix_addresses_protocol_and_ports() {
    if !palisade_test_support::require_root(
        "logged_packets_are_read_back_with_prefix_addresses_protocol_and_ports",
    ) {
        return;
    }
    let ns = Netns::new("read");
    ns.nft(RULES);
    let (mut nflog, want4) = ns.enter(|| {
        let nflog = Nflog::bind(GROUP).unwrap();
        (nflog, traffic("127.0.0.1".parse().unwrap()))
    });
    assert_eq!(nflog.group(), GROUP);

    // The blocking reader: both packets are queued by the time `traffic` returns.
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < want4.len() && Instant::now() < deadline {
        got.extend(nflog.recv_timeout(Duration::from_millis(200)).unwrap());
    }
    assert_eq!(sorted(got), sorted(want4));
    assert_eq!(nflog.lost(), 0);

    // The threaded reader, awaited from tokio, over IPv6.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut stream = nflog.spawn().unwrap();
    let want6 = ns.enter(|| traffic("::1".parse().unwrap()));
    let got = rt.block_on(async {
        let mut got = Vec::new();
        while got.len() < want6.len() {
            let next = tokio::time::timeout(Duration::from_secs(5), stream.recv())
                .await
                .expect("no log message within 5 s")
                .expect("the reader thread ended")
                .unwrap();
            got.extend(next);
        }
        got
    });
    assert_eq!(sorted(got), sorted(want6));
    assert_eq!(stream.group(), GROUP);
}

#[test]
fn a_second_reader_of_the_same_group_is_refused_with_the_group_named() {
    if !palisade_test_support::require_root(
        "a_second_reader_of_the_same_group_is_refused_with_the_group_named",
    ) {
        return;
    }
    let ns = Netns::new("busy");
    let second = ns.enter(|| {
        let _first = Nflog::bind(GROUP).unwrap();
        Nflog::bind(GROUP).map(|_| ())
    });
    let Err(e @ NflogError::Bind { .. }) = second else {
        panic!("the second bind succeeded: {second:?}")
    };
    assert!(e.to_string().contains(&format!("group {GROUP}")), "{e}");
}

/// A Service address: connections to 10.96.0.10:8080 are translated (DNAT, in the `nat`
/// output hook, before the filter) to 10.1.0.1:5000, where the filter logs them as a
/// Palisade drop would be logged.
const DNAT_RULES: &str = r#"
table ip palnflogdnat {
    chain nat_out {
        type nat hook output priority -100; policy accept;
        ip daddr 10.96.0.10 tcp dport 8080 dnat to 10.1.0.1:5000
    }
    chain out {
        type filter hook output priority 0; policy accept;
        ct state new tcp dport 5000 log prefix "pal-7" group 100
    }
}
"#;

#[test]
fn a_translated_connection_is_read_back_with_the_address_it_was_sent_to() {
    if !palisade_test_support::require_root(
        "a_translated_connection_is_read_back_with_the_address_it_was_sent_to",
    ) {
        return;
    }
    let ns = Netns::new("dnat");
    for ip in ["10.1.0.1/32", "10.96.0.10/32"] {
        ns.exec(&["ip", "addr", "add", ip, "dev", "lo"]);
    }
    ns.nft(DNAT_RULES);
    palisade_nft::install_dial_log(Some(&ns.0)).unwrap();
    let (mut nflog, mut dials, sport) = ns.enter(|| {
        let nflog = Nflog::bind(GROUP).unwrap();
        let dials = Nflog::bind(palisade_nft::DIAL_GROUP).unwrap();
        let listener = TcpListener::bind("10.1.0.1:5000").unwrap();
        let client = TcpStream::connect("10.96.0.10:8080").unwrap();
        drop(listener);
        (nflog, dials, client.local_addr().unwrap().port())
    });
    let mut got = Vec::new();
    let mut dialed = palisade_agent::dialed::Dialed::default();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.is_empty() && Instant::now() < deadline {
        for d in dials.recv_timeout(Duration::from_millis(50)).unwrap() {
            dialed.record(&d, Instant::now());
        }
        got.extend(nflog.recv_timeout(Duration::from_millis(200)).unwrap());
    }
    for d in dials.recv_timeout(Duration::from_millis(50)).unwrap() {
        dialed.record(&d, Instant::now());
    }
    let [p] = got.as_slice() else {
        panic!("want one logged packet, got {got:?}")
    };
    assert_eq!((p.dst, p.dport), ("10.1.0.1".parse().unwrap(), Some(5000)));
    assert_eq!(p.sport, Some(sport));
    let sent_to = Some(("10.96.0.10".parse().unwrap(), Some(8080)));
    // Paired with the dial log, on every kernel.
    assert_eq!(dialed.original(p), sent_to, "{p:?}");
    // From nflog's own conntrack attribute, where the kernel attaches it.
    if nflog.conntrack() {
        assert_eq!(p.original_dst, sent_to, "{p:?}");
    }
    palisade_nft::remove_dial_log(Some(&ns.0)).unwrap();
}

/// An IPv4 or IPv6 packet from `src`:53 to `dst`:`dport` carrying `payload`, with a wrong
/// UDP checksum (as a reply copied on a veth may have one).
fn udp_packet(src: IpAddr, dst: IpAddr, dport: u16, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let mut udp = Vec::new();
    udp.extend(53u16.to_be_bytes());
    udp.extend(dport.to_be_bytes());
    udp.extend((udp_len as u16).to_be_bytes());
    udp.extend(0x1234u16.to_be_bytes());
    udp.extend(payload);
    let mut p = Vec::new();
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            p.extend([0x45, 0]);
            p.extend(((20 + udp_len) as u16).to_be_bytes());
            p.extend([0, 0, 0, 0, 64, 17, 0, 0]);
            p.extend(s.octets());
            p.extend(d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            p.extend([0x60, 0, 0, 0]);
            p.extend((udp_len as u16).to_be_bytes());
            p.extend([17, 64]);
            p.extend(s.octets());
            p.extend(d.octets());
        }
        _ => panic!("one family"),
    }
    p.extend(udp);
    p
}

/// A held reply is sent on as it was logged, its checksum mended, marked so the capture
/// table lets it pass: over IPv4 and IPv6, a UDP socket receives it from port 53.
#[test]
fn held_replies_are_sent_on_marked_with_their_checksum_mended() {
    if !palisade_test_support::require_root(
        "held_replies_are_sent_on_marked_with_their_checksum_mended",
    ) {
        return;
    }
    let ns = Netns::new("resend");
    ns.nft(&format!(
        "table inet palresendtest {{\n chain out {{\n  type filter hook output priority 0; policy accept;\n  meta mark {:#x} udp sport 53 counter\n }}\n}}\n",
        palisade_nft::RESENT_MARK
    ));
    let resender = palisade_agent::resend::Resender::open(Some(&ns.0)).unwrap();
    for ip in ["127.0.0.1", "::1"] {
        let ip: IpAddr = ip.parse().unwrap();
        let socket = ns.enter(|| UdpSocket::bind(SocketAddr::new(ip, 0)).unwrap());
        socket
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let port = socket.local_addr().unwrap().port();
        let mut packet = udp_packet(ip, ip, port, b"held reply");
        resender.send(&mut packet).unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = socket
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("{ip}: nothing received: {e}"));
        assert_eq!(&buf[..n], b"held reply");
        assert_eq!(from, SocketAddr::new(ip, 53));
    }
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.0,
            "nft",
            "list",
            "chain",
            "inet",
            "palresendtest",
            "out",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("counter packets 2 "),
        "both sent marked:\n{text}"
    );
}
