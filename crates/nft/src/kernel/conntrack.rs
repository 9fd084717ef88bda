//! Connection cleanup after an update: the tracked connections a new ruleset forbids are
//! deleted over ctnetlink (the netfilter netlink interface `conntrack -L/-D` uses), with
//! one dump and batched deletions on one socket — no process per entry.

use std::io;
use std::net::IpAddr;

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla,
};
use netlink_packet_netfilter::conntrack::{
    ConntrackAttribute, ConntrackMessage, IPTuple, ProtoInfo, ProtoInfoTCP, ProtoTuple,
    Protocol as CtProtocol, Tuple,
};
use netlink_packet_netfilter::{
    NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily,
};
use netlink_sys::Socket;
use palisade_model::Protocol;

use crate::ir::Ruleset;
use crate::kernel::error::KernelError;
use crate::kernel::netlink::{netfilter_messages, socket};
use crate::lookup::{Lookup, NftVerdict, Packet};

/// Deletions per datagram: each is acknowledged, and the acknowledgements of one datagram
/// must fit the socket's default receive buffer (about 200 KiB, roughly 1 KiB per queued
/// acknowledgement).
const BATCH: usize = 64;

/// Receive buffer for dump parts: the kernel sizes a dump part after the reader's buffer,
/// up to 32 KiB.
const RECV_BUF: usize = 64 * 1024;

/// Deletes every tracked connection whose first packet `ruleset` would now drop ("the
/// enforcer should terminate and block the existing connection", from the NetworkPolicy
/// design proposal), in the network namespace `netns` (a name under `/run/netns`, as
/// `ip netns` manages them) or the current one. Returns how many entries were deleted.
///
/// One ctnetlink dump lists the table; entries of connections that can carry no more
/// data (TCP `TIME_WAIT` and `CLOSE`, SCTP `CLOSED`) are skipped; the forbidden ones are
/// deleted by exact original tuple, 64 deletions per datagram on the same socket. An entry that disappeared in the meantime is not
/// counted and is no error.
pub fn cut_forbidden(ruleset: &Ruleset, netns: Option<&str>) -> Result<usize, KernelError> {
    let socket = socket(netns).map_err(|e| err("open a ctnetlink socket", e))?;
    let lookup = Lookup::new(ruleset);
    let forbidden: Vec<Tracked> = dump(&socket)
        .map_err(|e| err("list tracked connections", e))?
        .into_iter()
        .filter(|t| !is_closed(t.state))
        .filter(|t| matches!(lookup.verdict(&t.packet), NftVerdict::Drop(_)))
        .collect();
    delete(&socket, &forbidden).map_err(|e| err("delete tracked connections", e))
}

/// ctnetlink's multicast group of new connections (`NFNLGRP_CONNTRACK_NEW`).
const NFNLGRP_CONNTRACK_NEW: u32 = 1;

/// A subscription to the kernel's new-connection events: one event per connection that
/// passed the filter and was confirmed (the kernel only tracks what it let through).
pub struct NewConnections {
    socket: Socket,
    buf: Vec<u8>,
}

/// Subscribes to new-connection events in the network namespace `netns` (or the current
/// one). The socket's receive timeout is `timeout`, so a reader can stop between waits.
pub fn new_connections(
    netns: Option<&str>,
    timeout: std::time::Duration,
) -> Result<NewConnections, KernelError> {
    let socket = socket(netns).map_err(|e| err("open a ctnetlink socket", e))?;
    socket
        .add_membership(NFNLGRP_CONNTRACK_NEW)
        .map_err(|e| err("subscribe to new connections", e))?;
    rustix::net::sockopt::set_socket_timeout(
        &socket,
        rustix::net::sockopt::Timeout::Recv,
        Some(timeout),
    )
    .map_err(|e| err("set a receive timeout", e.into()))?;
    Ok(NewConnections {
        socket,
        buf: vec![0u8; RECV_BUF],
    })
}

impl NewConnections {
    /// The first packets of the connections announced by the next datagram; an empty list
    /// when the timeout passed without one. Protocols the ruleset does not filter are left
    /// out; an error means events were lost (the reader fell behind) or the socket failed.
    pub fn recv(&mut self) -> io::Result<Vec<Packet>> {
        let n = match self.socket.recv(&mut &mut self.buf[..], 0) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(Vec::new());
            }
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for m in netfilter_messages(&self.buf[..n.min(self.buf.len())]) {
            if let Ok(NetlinkMessage {
                payload:
                    NetlinkPayload::InnerMessage(NetfilterMessage {
                        inner: NetfilterMessageInner::Conntrack(ConntrackMessage::New(attrs)),
                        ..
                    }),
                ..
            }) = m
            {
                out.extend(parse_conntrack(&attrs).map(|t| t.packet));
            }
        }
        Ok(out)
    }
}

fn err(what: &str, e: io::Error) -> KernelError {
    KernelError::io(format!("conntrack over netlink ({what})"), e)
}

/// One tracked connection: its first packet as the ruleset judged it, and its original
/// tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tracked {
    /// The connection's first packet as the filter saw it (what the ruleset judges): after
    /// a destination translation (a Service address to an endpoint, in `prerouting` or
    /// `output`, before the filter), before a source translation (in `postrouting`, after).
    packet: Packet,
    /// Source port of the original direction (part of the tuple to delete).
    sport: u16,
    /// Destination address and port of the original direction (the rest of it): a Service
    /// address when the connection was translated.
    original_dst: (IpAddr, u16),
    /// Protocol state where conntrack keeps one (TCP, SCTP).
    state: State,
}

/// The protocol state of a tracked connection, where it matters for the cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A `tcp_conntrack` state number (`include/uapi/linux/netfilter/nf_conntrack_tcp.h`).
    Tcp(u8),
    /// An `sctp_conntrack` state number.
    Sctp(u8),
    /// No state reported (UDP, or an entry without protocol info).
    None,
}

const TCP_CONNTRACK_TIME_WAIT: u8 = 7;
const TCP_CONNTRACK_CLOSE: u8 = 8;
const SCTP_CONNTRACK_CLOSED: u8 = 1;
/// `CTA_PROTOINFO_SCTP` inside `CTA_PROTOINFO`, and its `CTA_PROTOINFO_SCTP_STATE`.
const CTA_PROTOINFO_SCTP: u16 = 3;
const CTA_PROTOINFO_SCTP_STATE: u16 = 1;

/// Whether an entry belongs to a connection that can carry no more data, so cutting it
/// changes nothing: TCP `TIME_WAIT` and `CLOSE`, SCTP `CLOSED`. A SYN that reuses such a
/// tuple makes conntrack drop the old entry and track a new connection, which walks the
/// ruleset like any other; the only other packets the old entry still passes are
/// retransmitted FINs and ACKs. `CLOSE_WAIT`, `FIN_WAIT` and `LAST_ACK` are still cut: one
/// side of a half-closed connection may go on sending data.
fn is_closed(state: State) -> bool {
    match state {
        State::Tcp(s) => s == TCP_CONNTRACK_TIME_WAIT || s == TCP_CONNTRACK_CLOSE,
        State::Sctp(s) => s == SCTP_CONNTRACK_CLOSED,
        State::None => false,
    }
}

fn request(
    family: NetfilterProtoFamily,
    flags: u16,
    seq: u32,
    message: ConntrackMessage,
) -> NetlinkMessage<NetfilterMessage> {
    let mut header = NetlinkHeader::default();
    header.flags = flags;
    header.sequence_number = seq;
    let mut m = NetlinkMessage::new(
        header,
        NetlinkPayload::from(NetfilterMessage::new(
            NetfilterHeader::new(family, 0, 0),
            message,
        )),
    );
    m.finalize();
    m
}

fn append(buf: &mut Vec<u8>, m: &NetlinkMessage<NetfilterMessage>) {
    let start = buf.len();
    buf.resize(start + m.buffer_len(), 0);
    m.serialize(&mut buf[start..]);
}

/// Lists the whole table (IPv4 and IPv6) with one dump.
fn dump(socket: &Socket) -> io::Result<Vec<Tracked>> {
    let mut buf = Vec::new();
    append(
        &mut buf,
        &request(
            NetfilterProtoFamily::Unspec,
            NLM_F_REQUEST | NLM_F_DUMP,
            1,
            ConntrackMessage::Get(vec![]),
        ),
    );
    socket.send(&buf, 0)?;
    let mut tracked = Vec::new();
    let mut recv = vec![0u8; RECV_BUF];
    loop {
        let n = socket.recv(&mut &mut recv[..], 0)?;
        if n > recv.len() {
            return Err(io::Error::other("a dump part did not fit the buffer"));
        }
        for m in netfilter_messages(&recv[..n]) {
            let m = m.map_err(io::Error::other)?;
            match m.payload {
                NetlinkPayload::Done(_) => return Ok(tracked),
                NetlinkPayload::Error(e) if e.code.is_some() => return Err(e.to_io()),
                NetlinkPayload::InnerMessage(NetfilterMessage {
                    inner: NetfilterMessageInner::Conntrack(ConntrackMessage::New(attrs)),
                    ..
                }) => tracked.extend(parse_conntrack(&attrs)),
                _ => {}
            }
        }
    }
}

/// The addresses, protocol and ports of one direction's tuple, each when present.
#[derive(Debug, Clone, Copy, Default)]
struct Ends {
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    proto: Option<CtProtocol>,
    sport: Option<u16>,
    dport: Option<u16>,
}

fn ends(tuple: &[Tuple]) -> Ends {
    let mut e = Ends::default();
    for t in tuple {
        match t {
            Tuple::Ip(ips) => {
                for ip in ips {
                    match ip {
                        IPTuple::SourceAddress(a) => e.src = Some(*a),
                        IPTuple::DestinationAddress(a) => e.dst = Some(*a),
                        _ => {}
                    }
                }
            }
            Tuple::Proto(ps) => {
                for p in ps {
                    match p {
                        ProtoTuple::Protocol(p) => e.proto = Some(*p),
                        ProtoTuple::SourcePort(p) => e.sport = Some(*p),
                        ProtoTuple::DestinationPort(p) => e.dport = Some(*p),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    e
}

/// The first packet as the filter judged it, the original tuple and the state of one
/// dumped entry; `None` for protocols the ruleset does not filter (ICMP, …). The reply
/// tuple's source is where the connection went (the endpoint, after DNAT); without a reply
/// tuple, the original destination.
fn parse_conntrack(attrs: &[ConntrackAttribute]) -> Option<Tracked> {
    let (mut orig, mut reply) = (Ends::default(), None);
    let mut state = State::None;
    for a in attrs {
        match a {
            ConntrackAttribute::CtaTupleOrig(tuple) => orig = ends(tuple),
            ConntrackAttribute::CtaTupleReply(tuple) => reply = Some(ends(tuple)),
            ConntrackAttribute::CtaProtoInfo(infos) => {
                for info in infos {
                    match info {
                        ProtoInfo::TCP(tcp) => {
                            for t in tcp {
                                if let ProtoInfoTCP::State(s) = t {
                                    state = State::Tcp(*s);
                                }
                            }
                        }
                        ProtoInfo::Other(nla) if nla.kind() == CTA_PROTOINFO_SCTP => {
                            state = sctp_state(nla).map_or(state, State::Sctp);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let protocol = match orig.proto? {
        CtProtocol::Tcp => Protocol::Tcp,
        CtProtocol::Udp => Protocol::Udp,
        CtProtocol::Sctp => Protocol::Sctp,
        _ => return None,
    };
    let (dst, dport) = (orig.dst?, orig.dport?);
    let (to, to_port) = match reply {
        Some(Ends {
            src: Some(a),
            sport: Some(p),
            ..
        }) => (a, p),
        _ => (dst, dport),
    };
    Some(Tracked {
        packet: Packet {
            src: orig.src?,
            dst: to,
            protocol,
            dport: to_port,
        },
        sport: orig.sport?,
        original_dst: (dst, dport),
        state,
    })
}

/// `CTA_PROTOINFO_SCTP_STATE` inside a `CTA_PROTOINFO_SCTP` (the crate leaves SCTP raw).
fn sctp_state(nla: &netlink_packet_core::DefaultNla) -> Option<u8> {
    use netlink_packet_core::NlasIterator;
    let mut value = vec![0u8; nla.value_len()];
    nla.emit_value(&mut value);
    NlasIterator::new(&value[..])
        .filter_map(Result::ok)
        .find(|n| n.kind() == CTA_PROTOINFO_SCTP_STATE)
        .and_then(|n| n.value().first().copied())
}

/// The deletion of one entry by its exact original tuple.
fn delete_request(t: &Tracked, seq: u32) -> NetlinkMessage<NetfilterMessage> {
    let protocol = match t.packet.protocol {
        Protocol::Tcp => CtProtocol::Tcp,
        Protocol::Udp => CtProtocol::Udp,
        Protocol::Sctp => CtProtocol::Sctp,
    };
    let family = match t.packet.src {
        IpAddr::V4(_) => NetfilterProtoFamily::IPv4,
        IpAddr::V6(_) => NetfilterProtoFamily::IPv6,
    };
    request(
        family,
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        ConntrackMessage::Delete(vec![ConntrackAttribute::CtaTupleOrig(vec![
            Tuple::Ip(vec![
                IPTuple::SourceAddress(t.packet.src),
                IPTuple::DestinationAddress(t.original_dst.0),
            ]),
            Tuple::Proto(vec![
                ProtoTuple::Protocol(protocol),
                ProtoTuple::SourcePort(t.sport),
                ProtoTuple::DestinationPort(t.original_dst.1),
            ]),
        ])]),
    )
}

/// Deletes `entries`, [`BATCH`] per datagram, and counts the acknowledged deletions.
fn delete(socket: &Socket, entries: &[Tracked]) -> io::Result<usize> {
    let mut deleted = 0;
    let mut recv = vec![0u8; RECV_BUF];
    for (chunk_no, chunk) in entries.chunks(BATCH).enumerate() {
        let first = u32::try_from(chunk_no * BATCH + 2).unwrap_or(u32::MAX);
        let mut buf = Vec::new();
        for (i, t) in chunk.iter().enumerate() {
            append(&mut buf, &delete_request(t, first.wrapping_add(i as u32)));
        }
        socket.send(&buf, 0)?;
        let mut acked = 0;
        while acked < chunk.len() {
            let n = socket.recv(&mut &mut recv[..], 0)?;
            for m in netfilter_messages(&recv[..n.min(recv.len())]) {
                let m = m.map_err(io::Error::other)?;
                let NetlinkPayload::Error(e) = m.payload else {
                    continue;
                };
                acked += 1;
                match e.code {
                    None => deleted += 1,
                    // Gone since the dump (closed, timed out, or cut by someone else).
                    Some(c) if -c.get() == rustix::io::Errno::NOENT.raw_os_error() => {}
                    Some(_) => return Err(e.to_io()),
                }
            }
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_entry(state: u8) -> Vec<ConntrackAttribute> {
        vec![
            ConntrackAttribute::CtaTupleOrig(vec![
                Tuple::Ip(vec![
                    IPTuple::SourceAddress("10.0.0.10".parse().unwrap()),
                    IPTuple::DestinationAddress("10.0.1.11".parse().unwrap()),
                ]),
                Tuple::Proto(vec![
                    ProtoTuple::Protocol(CtProtocol::Tcp),
                    ProtoTuple::SourcePort(40000),
                    ProtoTuple::DestinationPort(80),
                ]),
            ]),
            ConntrackAttribute::CtaProtoInfo(vec![ProtoInfo::TCP(vec![ProtoInfoTCP::State(
                state,
            )])]),
        ]
    }

    #[test]
    fn dumped_entries_become_their_original_direction() {
        let t = parse_conntrack(&tcp_entry(3)).unwrap();
        assert_eq!(
            t,
            Tracked {
                packet: Packet {
                    src: "10.0.0.10".parse().unwrap(),
                    dst: "10.0.1.11".parse().unwrap(),
                    protocol: Protocol::Tcp,
                    dport: 80,
                },
                sport: 40000,
                original_dst: ("10.0.1.11".parse().unwrap(), 80),
                state: State::Tcp(3),
            }
        );
    }

    #[test]
    fn a_translated_entry_is_judged_at_its_endpoint_and_deleted_by_its_original_tuple() {
        // 10.0.0.10 -> Service 10.96.0.10:8080, translated to 10.0.1.11:8081; the reply
        // comes from the endpoint
        let mut entry = tcp_entry(3);
        entry[0] = ConntrackAttribute::CtaTupleOrig(vec![
            Tuple::Ip(vec![
                IPTuple::SourceAddress("10.0.0.10".parse().unwrap()),
                IPTuple::DestinationAddress("10.96.0.10".parse().unwrap()),
            ]),
            Tuple::Proto(vec![
                ProtoTuple::Protocol(CtProtocol::Tcp),
                ProtoTuple::SourcePort(40000),
                ProtoTuple::DestinationPort(8080),
            ]),
        ]);
        entry.push(ConntrackAttribute::CtaTupleReply(vec![
            Tuple::Ip(vec![
                IPTuple::SourceAddress("10.0.1.11".parse().unwrap()),
                IPTuple::DestinationAddress("10.0.0.10".parse().unwrap()),
            ]),
            Tuple::Proto(vec![
                ProtoTuple::Protocol(CtProtocol::Tcp),
                ProtoTuple::SourcePort(8081),
                ProtoTuple::DestinationPort(40000),
            ]),
        ]));
        let t = parse_conntrack(&entry).unwrap();
        assert_eq!(
            t.packet,
            Packet {
                src: "10.0.0.10".parse().unwrap(),
                dst: "10.0.1.11".parse().unwrap(),
                protocol: Protocol::Tcp,
                dport: 8081,
            }
        );
        assert_eq!(t.original_dst, ("10.96.0.10".parse().unwrap(), 8080));
        let ConntrackMessage::Delete(attrs) = (match delete_request(&t, 1).payload {
            NetlinkPayload::InnerMessage(m) => match m.inner {
                NetfilterMessageInner::Conntrack(c) => c,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }) else {
            panic!("not a deletion")
        };
        let [ConntrackAttribute::CtaTupleOrig(tuple)] = attrs.as_slice() else {
            panic!("{attrs:?}")
        };
        let e = ends(tuple);
        assert_eq!(e.dst, Some("10.96.0.10".parse().unwrap()));
        assert_eq!((e.sport, e.dport), (Some(40000), Some(8080)));
    }

    #[test]
    fn entries_the_ruleset_does_not_filter_are_ignored() {
        let mut icmp = tcp_entry(3);
        icmp[0] = ConntrackAttribute::CtaTupleOrig(vec![
            Tuple::Ip(vec![
                IPTuple::SourceAddress("10.0.0.1".parse().unwrap()),
                IPTuple::DestinationAddress("10.0.0.2".parse().unwrap()),
            ]),
            Tuple::Proto(vec![ProtoTuple::Protocol(CtProtocol::Icmp)]),
        ]);
        assert_eq!(parse_conntrack(&icmp), None, "ICMP");
        assert_eq!(parse_conntrack(&tcp_entry(3)[1..]), None, "no tuple");
    }

    #[test]
    fn closed_states_are_skipped_and_half_closed_ones_cut() {
        for (state, closed, why) in [
            (State::Tcp(3), false, "ESTABLISHED"),
            (
                State::Tcp(4),
                false,
                "FIN_WAIT: the other side may still send",
            ),
            (State::Tcp(5), false, "CLOSE_WAIT: one side may still send"),
            (State::Tcp(6), false, "LAST_ACK"),
            (State::Tcp(7), true, "TIME_WAIT"),
            (State::Tcp(8), true, "CLOSE"),
            (State::Sctp(1), true, "SCTP CLOSED"),
            (State::Sctp(3), false, "SCTP ESTABLISHED"),
            (State::None, false, "UDP"),
        ] {
            assert_eq!(is_closed(state), closed, "{why}");
        }
    }

    #[test]
    fn a_deletion_round_trips_through_the_wire_format() {
        let t = parse_conntrack(&tcp_entry(3)).unwrap();
        let m = delete_request(&t, 7);
        let mut buf = Vec::new();
        append(&mut buf, &m);
        append(&mut buf, &m);
        let back: Vec<_> = netfilter_messages(&buf).collect();
        assert_eq!(back.len(), 2);
        for b in back {
            let b = b.unwrap();
            assert_eq!(b.header.sequence_number, 7);
            let NetlinkPayload::InnerMessage(NetfilterMessage {
                inner: NetfilterMessageInner::Conntrack(ConntrackMessage::Delete(attrs)),
                ..
            }) = b.payload
            else {
                panic!("{b:?}")
            };
            let mut round = parse_conntrack(&attrs).unwrap();
            round.state = State::Tcp(3);
            assert_eq!(round, t);
        }
    }

    #[test]
    fn truncated_datagrams_are_errors_not_panics() {
        let t = parse_conntrack(&tcp_entry(3)).unwrap();
        let mut buf = Vec::new();
        append(&mut buf, &delete_request(&t, 1));
        for cut in [3, 16, 20, buf.len() - 1] {
            assert!(
                netfilter_messages(&buf[..cut]).any(|m| m.is_err()),
                "cut at {cut} of {}",
                buf.len()
            );
        }
    }
}
