//! Test and benchmark support: a throw-away network namespace with `nft -f` inside it, and
//! conntrack entries injected into it over ctnetlink (as `conntrack -I` would, without a
//! process per entry).

#![allow(dead_code, clippy::unwrap_used)] // shared by tests and examples; a failed unwrap is a failure

use std::io::{self, Write};
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage,
    NetlinkPayload,
};
use netlink_packet_netfilter::conntrack::{
    ConntrackAttribute, ConntrackMessage, IPTuple, ProtoInfo, ProtoInfoTCP, ProtoTuple, Protocol,
    Tuple,
};
use netlink_packet_netfilter::{NetfilterHeader, NetfilterMessage, NetfilterProtoFamily};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};

/// A network namespace named after the test and the process id, deleted on drop (also
/// when the test panics).
pub struct Netns(pub String);

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let name = format!("palct-{tag}-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .unwrap();
        assert!(out.status.success(), "ip netns add {name}: {out:?}");
        Netns(name)
    }

    /// Runs a command inside the namespace.
    pub fn exec(&self, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.0])
            .args(args)
            .output()
            .unwrap()
    }

    /// `nft -f -` of `script` inside the namespace, which must accept it; how long it took
    /// (the process start and nft's read of the loaded table included).
    pub fn nft_f(&self, script: &str) -> Duration {
        let t = Instant::now();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.0, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "nft refused the script: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        t.elapsed()
    }

    /// The tracked connections, as `conntrack -L` prints them (an independent reading).
    pub fn conntrack_list(&self) -> String {
        String::from_utf8_lossy(&self.exec(&["conntrack", "-L"]).stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// One connection to inject, in its original direction.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// 6 (TCP) or 17 (UDP).
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
    /// A `tcp_conntrack` state (3 ESTABLISHED, 5 CLOSE_WAIT, 7 TIME_WAIT).
    pub tcp_state: u8,
}

fn socket_in(ns: &str) -> io::Result<Socket> {
    let file = std::fs::File::open(format!("/run/netns/{ns}"))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            rustix::thread::move_into_link_name_space(
                file.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
            let mut socket = Socket::new(NETLINK_NETFILTER)?;
            socket.bind_auto()?;
            socket.connect(&SocketAddr::new(0, 0))?;
            Ok(socket)
        })
        .join()
        .unwrap()
    })
}

fn tuple(src: IpAddr, dst: IpAddr, proto: u8, sport: u16, dport: u16) -> Vec<Tuple> {
    vec![
        Tuple::Ip(vec![
            IPTuple::SourceAddress(src),
            IPTuple::DestinationAddress(dst),
        ]),
        Tuple::Proto(vec![
            ProtoTuple::Protocol(Protocol::from(proto)),
            ProtoTuple::SourcePort(sport),
            ProtoTuple::DestinationPort(dport),
        ]),
    ]
}

/// Creates the entries in `ns` (timeout 10 minutes), 64 per datagram, each acknowledged.
pub fn insert(ns: &str, entries: &[Entry]) -> io::Result<()> {
    let socket = socket_in(ns)?;
    let mut recv = vec![0u8; 65536];
    for (c, chunk) in entries.chunks(64).enumerate() {
        let mut buf = Vec::new();
        for (i, e) in chunk.iter().enumerate() {
            let mut attrs = vec![
                ConntrackAttribute::CtaTupleOrig(tuple(e.src, e.dst, e.proto, e.sport, e.dport)),
                ConntrackAttribute::CtaTupleReply(tuple(e.dst, e.src, e.proto, e.dport, e.sport)),
                ConntrackAttribute::CtaTimeout(600),
            ];
            if e.proto == 6 {
                attrs.push(ConntrackAttribute::CtaProtoInfo(vec![ProtoInfo::TCP(
                    vec![ProtoInfoTCP::State(e.tcp_state)],
                )]));
            }
            let mut header = NetlinkHeader::default();
            header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
            header.sequence_number = (c * 64 + i) as u32 + 1;
            let family = if e.src.is_ipv4() {
                NetfilterProtoFamily::IPv4
            } else {
                NetfilterProtoFamily::IPv6
            };
            let mut m = NetlinkMessage::new(
                header,
                NetlinkPayload::from(NetfilterMessage::new(
                    NetfilterHeader::new(family, 0, 0),
                    ConntrackMessage::New(attrs),
                )),
            );
            m.finalize();
            let start = buf.len();
            buf.resize(start + m.buffer_len(), 0);
            m.serialize(&mut buf[start..]);
        }
        socket.send(&buf, 0)?;
        let mut acked = 0;
        while acked < chunk.len() {
            let n = socket.recv(&mut &mut recv[..], 0)?;
            let mut off = 0;
            while off < n {
                let m = NetlinkMessage::<NetfilterMessage>::deserialize(&recv[off..n])
                    .map_err(|e| io::Error::other(e.to_string()))?;
                off += (m.header.length as usize).next_multiple_of(4);
                if let NetlinkPayload::Error(e) = m.payload {
                    acked += 1;
                    if e.code.is_some() {
                        return Err(e.to_io());
                    }
                }
            }
        }
    }
    Ok(())
}
