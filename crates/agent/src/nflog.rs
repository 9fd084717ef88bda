//! The kernel's log of decisions: packets the nftables ruleset logs to an nflog group
//! (`log group 100 prefix "pal-<id>"`), read over netlink (`NFNETLINK_ULOG`), each reduced
//! to its log prefix and the addresses, protocol and ports of its headers.
//!
//! [`Nflog::bind`] binds a socket to one group in the current network namespace (copy
//! mode "packet", the first [`COPY_RANGE`] bytes: enough for the IP header, IPv6 extension
//! headers and the ports). [`Nflog::recv`] blocks for the next datagram
//! ([`Nflog::recv_timeout`] gives up after a while); for tokio, [`Nflog::spawn`] moves the
//! reader to a thread of its own that feeds a channel ([`NflogStream`]). A message that cannot be
//! decoded is skipped with a warning; log messages the kernel dropped because the reader
//! fell behind are counted ([`Nflog::lost`]) and reading goes on.
//!
//! The time of a decision is not read from the kernel: the caller stamps what it reads.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use netlink_packet_core::{NLM_F_ACK, NLM_F_REQUEST, NetlinkMessage, NetlinkPayload, Nla};
use netlink_packet_netfilter::nflog::{
    ConfigCmd, ConfigFlags, ConfigMode, ConfigNla, PacketNla, ULogMessage, config_request,
};
use netlink_packet_netfilter::{NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};
use palisade_model::Protocol;
use palisade_nft::netfilter_messages;

/// Bytes of each logged packet the kernel copies: an IPv6 header (40), a few extension
/// headers and the first bytes of the transport header.
pub const COPY_RANGE: u32 = 256;

/// Receive buffer asked of the kernel for queued log messages (capped by
/// `net.core.rmem_max`).
const SOCKET_BUFFER: usize = 1 << 20;

/// One datagram's worth of log messages at most (the kernel batches up to its own
/// buffer size, 128 KiB at most).
const DATAGRAM: usize = 256 * 1024;

/// A packet the ruleset logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedPacket {
    /// The rule's log prefix (`pal-<id>` for Palisade's rules; empty when the rule has none).
    pub prefix: String,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Transport protocol, when it is one a policy can name.
    pub protocol: Option<Protocol>,
    /// Source port (TCP, UDP, SCTP; not for non-first fragments or truncated copies).
    pub sport: Option<u16>,
    /// Destination port (same conditions).
    pub dport: Option<u16>,
    /// The destination the connection was addressed to, from conntrack's original tuple,
    /// when it differs from the packet's (the packet was translated, as a Service address is
    /// by kube-proxy's DNAT): the address, and the port when the protocol has ports.
    pub original_dst: Option<(IpAddr, Option<u16>)>,
    /// The packet as copied, from its IP header on (the first [`COPY_RANGE`] bytes, or
    /// as many as the reader was bound to copy).
    pub payload: Vec<u8>,
}

/// Why the nflog reader failed.
#[derive(Debug, thiserror::Error)]
pub enum NflogError {
    /// The netlink socket could not be created.
    #[error("could not open a netfilter netlink socket: {0}")]
    Socket(#[source] io::Error),
    /// The kernel refused to bind the group (`EBUSY`: another process reads it).
    #[error("could not bind nflog group {group}: {source}")]
    Bind {
        /// The group.
        group: u16,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// Reading from the socket failed.
    #[error("could not read nflog group {group}: {source}")]
    Recv {
        /// The group.
        group: u16,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// A netlink socket bound to one nflog group.
pub struct Nflog {
    socket: Socket,
    group: u16,
    buf: Vec<u8>,
    lost: Arc<AtomicU64>,
    /// The receive timeout currently set on the socket.
    timeout: Option<Duration>,
    /// Whether the kernel attaches each packet's conntrack entry.
    conntrack: bool,
}

impl std::fmt::Debug for Nflog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nflog")
            .field("group", &self.group)
            .field("lost", &self.lost())
            .finish()
    }
}

impl Nflog {
    /// Binds `group` in the current network namespace, copying the first [`COPY_RANGE`]
    /// bytes of each logged packet.
    pub fn bind(group: u16) -> Result<Nflog, NflogError> {
        Nflog::bind_copying(group, COPY_RANGE)
    }

    /// Binds `group`, copying the first `range` bytes of each logged packet (the rule's
    /// `snaplen` may copy fewer).
    pub fn bind_copying(group: u16, range: u32) -> Result<Nflog, NflogError> {
        let mut socket = Socket::new(NETLINK_NETFILTER).map_err(NflogError::Socket)?;
        socket.bind_auto().map_err(NflogError::Socket)?;
        socket
            .connect(&SocketAddr::new(0, 0))
            .map_err(NflogError::Socket)?;
        // Best effort: a larger buffer only makes drops under bursts rarer.
        let _ = socket.set_rx_buf_sz(SOCKET_BUFFER);
        let mut nflog = Nflog {
            socket,
            group,
            buf: vec![0; DATAGRAM],
            lost: Arc::default(),
            timeout: None,
            conntrack: false,
        };
        let bind_err = |source| NflogError::Bind { group, source };
        nflog
            .configure(vec![
                ConfigCmd::Bind.into(),
                ConfigMode::new_packet(range).into(),
            ])
            .map_err(bind_err)?;
        // Best effort: without the kernel's conntrack netlink support the log still works,
        // only without the address a connection was first sent to.
        // (EOPNOTSUPP when the kernel is built without CONFIG_NETFILTER_NETLINK_GLUE_CT.)
        let flags = nflog.configure(vec![ConfigNla::Flags(ConfigFlags::CONNTRACK)]);
        nflog.conntrack = flags.is_ok();
        if let Err(e) = flags {
            tracing::warn!(
                group,
                error = %e,
                "nflog: no conntrack attribute; Services are not named in the decision log"
            );
        }
        Ok(nflog)
    }

    /// The group this reader is bound to.
    pub fn group(&self) -> u16 {
        self.group
    }

    /// Whether the kernel attaches each logged packet's conntrack entry, from which
    /// [`LoggedPacket::original_dst`] is read (it does not when built without
    /// `CONFIG_NETFILTER_NETLINK_GLUE_CT`).
    pub fn conntrack(&self) -> bool {
        self.conntrack
    }

    /// Log messages the kernel dropped because this reader fell behind (`ENOBUFS`).
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Sends one configuration request for this group and waits for its acknowledgement.
    fn configure(&mut self, nlas: Vec<ConfigNla>) -> io::Result<()> {
        let mut request = config_request(NetfilterProtoFamily::Unspec, self.group, nlas);
        request.header.flags = NLM_F_REQUEST | NLM_F_ACK;
        request.header.sequence_number = 1;
        let mut out = vec![0; request.buffer_len()];
        request.serialize(&mut out);
        self.socket.send(&out, 0)?;
        loop {
            let n = self.socket.recv(&mut &mut self.buf[..], 0)?;
            for message in netfilter_messages(&self.buf[..n.min(self.buf.len())]) {
                if let Ok(m) = message
                    && let NetlinkPayload::Error(e) = m.payload
                    && m.header.sequence_number == 1
                {
                    return match e.code {
                        None => Ok(()),
                        Some(_) => Err(e.to_io()),
                    };
                }
            }
        }
    }

    /// Waits for the next datagram and returns the packets it logs (possibly none, when
    /// every message in it was undecodable or not a packet).
    pub fn recv(&mut self) -> Result<Vec<LoggedPacket>, NflogError> {
        loop {
            if let Some(packets) = self.next(None)? {
                return Ok(packets);
            }
        }
    }

    /// Like [`Nflog::recv`], but returns an empty list when nothing arrived within
    /// `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Vec<LoggedPacket>, NflogError> {
        Ok(self.next(Some(timeout))?.unwrap_or_default())
    }

    /// One datagram, or `None` when the timeout passed first or the call was interrupted.
    fn next(&mut self, timeout: Option<Duration>) -> Result<Option<Vec<LoggedPacket>>, NflogError> {
        let group = self.group;
        let recv_err = |source| NflogError::Recv { group, source };
        // A zero timeout means "block forever" to the kernel.
        let timeout = timeout.map(|t| t.max(Duration::from_millis(1)));
        if timeout != self.timeout {
            rustix::net::sockopt::set_socket_timeout(
                &self.socket,
                rustix::net::sockopt::Timeout::Recv,
                timeout,
            )
            .map_err(|e| recv_err(e.into()))?;
            self.timeout = timeout;
        }
        match self.socket.recv(&mut &mut self.buf[..], 0) {
            Ok(n) => Ok(Some(self.decode(n))),
            // ENOBUFS: the kernel dropped messages; the socket stays usable.
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOBUFS.raw_os_error()) => {
                self.lost.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    group,
                    "nflog: the kernel dropped log messages (reader too slow)"
                );
                Ok(None)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(recv_err(e)),
        }
    }

    /// Moves the reader to a thread of its own that feeds a channel, for async code:
    /// netlink sockets have no tokio type, and registering a raw descriptor with tokio's
    /// reactor takes `unsafe` code, which this workspace forbids. The thread checks every
    /// [`POLL`] whether the [`NflogStream`] is gone and then ends.
    pub fn spawn(mut self) -> Result<NflogStream, NflogError> {
        let group = self.group;
        let lost = Arc::clone(&self.lost);
        let (tx, rx) = tokio::sync::mpsc::channel(CHANNEL);
        std::thread::Builder::new()
            .name(format!("nflog-{group}"))
            .spawn(move || {
                while !tx.is_closed() {
                    match self.next(Some(POLL)) {
                        Ok(Some(packets)) if packets.is_empty() => {}
                        Ok(Some(packets)) => {
                            if tx.blocking_send(Ok(packets)).is_err() {
                                break;
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            let _ = tx.blocking_send(Err(e));
                            break;
                        }
                    }
                }
            })
            .map_err(|source| NflogError::Recv { group, source })?;
        Ok(NflogStream { rx, lost, group })
    }

    fn decode(&self, n: usize) -> Vec<LoggedPacket> {
        if n > self.buf.len() {
            tracing::warn!(
                group = self.group,
                bytes = n,
                "nflog: truncated datagram skipped"
            );
            return Vec::new();
        }
        let mut out = Vec::new();
        for message in netfilter_messages(&self.buf[..n]) {
            match message.map_err(|e| e.to_string()).and_then(packet) {
                Ok(Some(p)) => out.push(p),
                Ok(None) => {}
                Err(e) => tracing::warn!(group = self.group, "nflog: message skipped: {e}"),
            }
        }
        out
    }
}

/// Datagrams the reader thread may queue before it waits for the consumer (while it
/// waits, the kernel queues in the socket buffer, then drops and [`Nflog::lost`] counts).
const CHANNEL: usize = 64;

/// How often the reader thread checks that its consumer is still there.
pub const POLL: Duration = Duration::from_millis(200);

/// Log messages from an [`Nflog`] moved to its own thread, for tokio tasks.
#[derive(Debug)]
pub struct NflogStream {
    rx: tokio::sync::mpsc::Receiver<Result<Vec<LoggedPacket>, NflogError>>,
    lost: Arc<AtomicU64>,
    group: u16,
}

impl NflogStream {
    /// The group the reader is bound to.
    pub fn group(&self) -> u16 {
        self.group
    }

    /// Log messages the kernel dropped because the reader fell behind.
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// The packets of the next datagram that logs any; `None` once the reader thread has
    /// ended (after it returned an error).
    pub async fn recv(&mut self) -> Option<Result<Vec<LoggedPacket>, NflogError>> {
        self.rx.recv().await
    }
}

/// The logged packet in one message; `None` for messages that log no packet.
fn packet(message: NetlinkMessage<NetfilterMessage>) -> Result<Option<LoggedPacket>, String> {
    let NetlinkPayload::InnerMessage(NetfilterMessage {
        inner: NetfilterMessageInner::ULog(ULogMessage::Packet(nlas)),
        ..
    }) = message.payload
    else {
        return Ok(None);
    };
    let mut prefix = String::new();
    let mut payload = None;
    let mut original = None;
    for nla in nlas {
        match nla {
            PacketNla::Prefix(p) => prefix = p.to_string_lossy().into_owned(),
            PacketNla::Payload(p) => payload = Some(p),
            PacketNla::Other(a) if a.kind() & NLA_TYPE_MASK == NFULA_CT => {
                let mut value = vec![0; a.value_len()];
                a.emit_value(&mut value);
                original = original_tuple(&value);
            }
            _ => {}
        }
    }
    let payload =
        payload.ok_or_else(|| format!("packet logged with prefix {prefix:?} has no payload"))?;
    let h = parse_headers(&payload).map_err(|e| format!("prefix {prefix:?}: {e}"))?;
    Ok(Some(LoggedPacket {
        prefix,
        src: h.src,
        dst: h.dst,
        protocol: h.protocol,
        sport: h.sport,
        dport: h.dport,
        original_dst: original
            .filter(|o| o.dst != h.dst || (h.dport.is_some() && o.dport != h.dport))
            .map(|o| (o.dst, o.dport.filter(|_| h.dport.is_some()))),
        payload,
    }))
}

/// `NFULA_CT`: the packet's conntrack entry, in ctnetlink's attribute format.
const NFULA_CT: u16 = 19;
/// The attribute type without the nested and byte-order flags.
const NLA_TYPE_MASK: u16 = 0x3fff;
/// ctnetlink: `CTA_TUPLE_ORIG`, inside it `CTA_TUPLE_IP` and `CTA_TUPLE_PROTO`.
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_TUPLE_IP: u16 = 1;
const CTA_TUPLE_PROTO: u16 = 2;
/// ctnetlink: the destination address (IPv4, IPv6) and port of a tuple.
const CTA_IP_V4_DST: u16 = 2;
const CTA_IP_V6_DST: u16 = 4;
const CTA_PROTO_DST_PORT: u16 = 3;

/// The destination of conntrack's original tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Original {
    dst: IpAddr,
    dport: Option<u16>,
}

/// The original tuple's destination in an `NFULA_CT` attribute's value; `None` when it is
/// not there or malformed.
fn original_tuple(ct: &[u8]) -> Option<Original> {
    let tuple = attribute(ct, CTA_TUPLE_ORIG)?;
    let ip = attribute(tuple, CTA_TUPLE_IP)?;
    let dst: IpAddr = if let Some(v4) = attribute(ip, CTA_IP_V4_DST) {
        let b: [u8; 4] = v4.get(..4)?.try_into().ok()?;
        Ipv4Addr::from(b).into()
    } else {
        let b: [u8; 16] = attribute(ip, CTA_IP_V6_DST)?.get(..16)?.try_into().ok()?;
        Ipv6Addr::from(b).into()
    };
    let dport = attribute(tuple, CTA_TUPLE_PROTO)
        .and_then(|p| attribute(p, CTA_PROTO_DST_PORT))
        .and_then(|b| Some(u16::from_be_bytes(b.get(..2)?.try_into().ok()?)));
    Some(Original { dst, dport })
}

/// The value of the first netlink attribute of type `kind` in `attrs` (a run of
/// attributes: 16-bit length and type in host order, the value, padding to 4 bytes).
fn attribute(mut attrs: &[u8], kind: u16) -> Option<&[u8]> {
    while attrs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([attrs[0], attrs[1]]));
        let t = u16::from_ne_bytes([attrs[2], attrs[3]]) & NLA_TYPE_MASK;
        let value = attrs.get(4..len)?;
        if t == kind {
            return Some(value);
        }
        attrs = attrs.get(len.next_multiple_of(4)..)?;
    }
    None
}

/// The fields of a packet's headers that a decision log reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Headers {
    src: IpAddr,
    dst: IpAddr,
    protocol: Option<Protocol>,
    sport: Option<u16>,
    dport: Option<u16>,
}

const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_SCTP: u8 = 132;

fn transport(number: u8) -> Option<Protocol> {
    match number {
        IPPROTO_TCP => Some(Protocol::Tcp),
        IPPROTO_UDP => Some(Protocol::Udp),
        IPPROTO_SCTP => Some(Protocol::Sctp),
        _ => None,
    }
}

/// Parses the IPv4 or IPv6 header at the start of `p` and the ports of the transport
/// header after it. The addresses must be present; the ports are `None` when the copy
/// ends before them, for a fragment that is not the first, and for other protocols.
fn parse_headers(p: &[u8]) -> Result<Headers, String> {
    let version = p.first().ok_or("empty payload")? >> 4;
    let (src, dst, number, l4): (IpAddr, IpAddr, u8, Option<&[u8]>) = match version {
        4 => {
            let fixed: &[u8; 20] = p
                .get(..20)
                .and_then(|h| h.try_into().ok())
                .ok_or_else(|| format!("IPv4 header truncated at {} bytes", p.len()))?;
            let ihl = usize::from(fixed[0] & 0x0f) * 4;
            if ihl < 20 {
                return Err(format!("IPv4 header length {ihl} below 20"));
            }
            let fragment_offset = u16::from_be_bytes([fixed[6], fixed[7]]) & 0x1fff;
            let src = Ipv4Addr::from([fixed[12], fixed[13], fixed[14], fixed[15]]);
            let dst = Ipv4Addr::from([fixed[16], fixed[17], fixed[18], fixed[19]]);
            let l4 = (fragment_offset == 0).then(|| p.get(ihl..)).flatten();
            (src.into(), dst.into(), fixed[9], l4)
        }
        6 => {
            let fixed: &[u8; 40] = p
                .get(..40)
                .and_then(|h| h.try_into().ok())
                .ok_or_else(|| format!("IPv6 header truncated at {} bytes", p.len()))?;
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&fixed[8..24]);
            dst.copy_from_slice(&fixed[24..40]);
            let (number, l4) = ipv6_transport(fixed[6], &p[40..]);
            (
                Ipv6Addr::from(src).into(),
                Ipv6Addr::from(dst).into(),
                number,
                l4,
            )
        }
        v => return Err(format!("IP version {v} is neither 4 nor 6")),
    };
    let protocol = transport(number);
    let ports = protocol.and(l4).and_then(|l4| l4.get(..4)).map(|b| {
        (
            u16::from_be_bytes([b[0], b[1]]),
            u16::from_be_bytes([b[2], b[3]]),
        )
    });
    Ok(Headers {
        src,
        dst,
        protocol,
        sport: ports.map(|p| p.0),
        dport: ports.map(|p| p.1),
    })
}

/// Follows IPv6 extension headers (hop-by-hop, routing, fragment, destination options,
/// authentication) to the transport protocol number and its header; the header is
/// `None` when the copy ends first or the packet is a non-first fragment.
fn ipv6_transport(mut next: u8, mut rest: &[u8]) -> (u8, Option<&[u8]>) {
    const HOP_BY_HOP: u8 = 0;
    const ROUTING: u8 = 43;
    const FRAGMENT: u8 = 44;
    const AUTH: u8 = 51;
    const DEST_OPTS: u8 = 60;
    // A bound on the chain: each header is at least 8 bytes of a 256-byte copy.
    for _ in 0..32 {
        let len = match (next, rest.get(..2)) {
            (HOP_BY_HOP | ROUTING | DEST_OPTS, Some(h)) => (usize::from(h[1]) + 1) * 8,
            (AUTH, Some(h)) => (usize::from(h[1]) + 2) * 4,
            (FRAGMENT, Some(h)) => {
                let later = rest
                    .get(2..4)
                    .is_some_and(|o| u16::from_be_bytes([o[0], o[1]]) >> 3 != 0);
                if later {
                    return (h[0], None);
                }
                8
            }
            (HOP_BY_HOP | ROUTING | DEST_OPTS | AUTH | FRAGMENT, None) => return (next, None),
            _ => return (next, Some(rest)),
        };
        next = rest[0];
        rest = match rest.get(len..) {
            Some(r) => r,
            None => return (next, None),
        };
    }
    (next, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One netlink attribute: length and type in host order, the value, padding.
    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let len = u16::try_from(4 + value.len()).unwrap_or(u16::MAX);
        let mut v = len.to_ne_bytes().to_vec();
        v.extend(kind.to_ne_bytes());
        v.extend(value);
        v.resize(v.len().next_multiple_of(4), 0);
        v
    }

    const NESTED: u16 = 0x8000;

    /// An `NFULA_CT` value: original tuple `src → dst:dport`, then a reply tuple that must
    /// not be read as the original.
    fn ct(dst_attr: u16, dst: &[u8], dport: u16) -> Vec<u8> {
        let tuple = |dst: &[u8], dport: u16| {
            let ip = [nla(dst_attr - 1, &[10, 1, 0, 3]), nla(dst_attr, dst)].concat();
            let proto = [
                nla(1, &[6]),
                nla(2, &40000u16.to_be_bytes()),
                nla(CTA_PROTO_DST_PORT, &dport.to_be_bytes()),
            ]
            .concat();
            [
                nla(CTA_TUPLE_IP | NESTED, &ip),
                nla(CTA_TUPLE_PROTO | NESTED, &proto),
            ]
            .concat()
        };
        [
            nla(CTA_TUPLE_ORIG | NESTED, &tuple(dst, dport)),
            nla(2 | NESTED, &tuple(&[10, 1, 0, 1], 80)), // CTA_TUPLE_REPLY
        ]
        .concat()
    }

    #[test]
    fn the_original_destination_is_read_from_the_conntrack_attribute() {
        let v4 = ct(CTA_IP_V4_DST, &[10, 96, 0, 10], 8080);
        assert_eq!(
            original_tuple(&v4),
            Some(Original {
                dst: "10.96.0.10"
                    .parse()
                    .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
                dport: Some(8080)
            })
        );
        let dst6: IpAddr = "fd00::10"
            .parse()
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let IpAddr::V6(d6) = dst6 else {
            panic!("not IPv6")
        };
        let v6 = ct(CTA_IP_V6_DST, &d6.octets(), 53);
        assert_eq!(
            original_tuple(&v6),
            Some(Original {
                dst: dst6,
                dport: Some(53)
            })
        );
        // truncated or empty: nothing, never a panic
        for cut in [0, 3, 7, 12, v4.len() - 1] {
            let _ = original_tuple(&v4[..cut]);
        }
        assert_eq!(original_tuple(&[]), None);
    }

    fn ipv4(proto: u8, l4: &[u8]) -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0, 10, 0, 1, 12, 10, 0, 0, 10,
        ];
        p.extend_from_slice(l4);
        p
    }

    fn ipv6(next: u8, after: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, next, 64];
        p.extend_from_slice(&"fd00::1".parse::<Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(&"fd00::2".parse::<Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(after);
        p
    }

    const PORTS: [u8; 8] = [0x9c, 0x40, 0, 80, 0, 0, 0, 0]; // 40000 -> 80

    fn h(src: &str, dst: &str, protocol: Option<Protocol>, ports: Option<(u16, u16)>) -> Headers {
        Headers {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            protocol,
            sport: ports.map(|p| p.0),
            dport: ports.map(|p| p.1),
        }
    }

    #[test]
    fn headers_of_logged_packets() {
        let tcp4 = h(
            "10.0.1.12",
            "10.0.0.10",
            Some(Protocol::Tcp),
            Some((40000, 80)),
        );
        let v6 = |protocol, ports| h("fd00::1", "fd00::2", protocol, ports);
        let mut fragment = ipv4(IPPROTO_UDP, &PORTS);
        fragment[6] = 0x00;
        fragment[7] = 0x10; // offset 16 * 8 bytes: no transport header here
        let mut options = ipv4(IPPROTO_TCP, &[1, 1, 1, 1]);
        options[0] = 0x46; // 24-byte header: the ports follow the options
        options.extend_from_slice(&PORTS);
        let mut hop_by_hop = vec![IPPROTO_UDP, 0, 0, 0, 0, 0, 0, 0];
        hop_by_hop.extend_from_slice(&PORTS);
        let mut later_fragment = vec![IPPROTO_TCP, 0, 0, 0x08, 0, 0, 0, 1];
        later_fragment.extend_from_slice(&PORTS);
        let mut first_fragment = vec![IPPROTO_SCTP, 0, 0, 0x01, 0, 0, 0, 1];
        first_fragment.extend_from_slice(&PORTS);
        for (packet, want, why) in [
            (ipv4(IPPROTO_TCP, &PORTS), Ok(tcp4), "IPv4 TCP"),
            (
                ipv4(IPPROTO_UDP, &PORTS),
                Ok(Headers {
                    protocol: Some(Protocol::Udp),
                    ..tcp4
                }),
                "IPv4 UDP",
            ),
            (options, Ok(tcp4), "IPv4 with options"),
            (
                ipv4(IPPROTO_TCP, &PORTS[..3]),
                Ok(Headers {
                    sport: None,
                    dport: None,
                    ..tcp4
                }),
                "IPv4, copy ends inside the ports",
            ),
            (
                fragment,
                Ok(Headers {
                    protocol: Some(Protocol::Udp),
                    sport: None,
                    dport: None,
                    ..tcp4
                }),
                "IPv4 non-first fragment",
            ),
            (
                ipv4(1, &[8, 0, 0, 0]),
                Ok(Headers {
                    protocol: None,
                    sport: None,
                    dport: None,
                    ..tcp4
                }),
                "ICMP: unknown to policies",
            ),
            (
                ipv6(IPPROTO_TCP, &PORTS),
                Ok(v6(Some(Protocol::Tcp), Some((40000, 80)))),
                "IPv6 TCP",
            ),
            (
                ipv6(0, &hop_by_hop),
                Ok(v6(Some(Protocol::Udp), Some((40000, 80)))),
                "IPv6 hop-by-hop then UDP",
            ),
            (
                ipv6(44, &later_fragment),
                Ok(v6(Some(Protocol::Tcp), None)),
                "IPv6 non-first fragment",
            ),
            (
                ipv6(44, &first_fragment),
                Ok(v6(Some(Protocol::Sctp), Some((40000, 80)))),
                "IPv6 first fragment",
            ),
            (
                ipv6(0, &[IPPROTO_UDP, 4]),
                Ok(v6(Some(Protocol::Udp), None)),
                "IPv6 extension header cut short",
            ),
            (ipv6(58, &[128, 0, 0, 0]), Ok(v6(None, None)), "ICMPv6"),
            (
                ipv6(253, &PORTS),
                Ok(v6(None, None)),
                "IPv6 experimental protocol",
            ),
        ] {
            assert_eq!(parse_headers(&packet), want, "{why}");
        }
    }

    #[test]
    fn malformed_headers_are_errors_not_panics() {
        let mut short_ihl = ipv4(IPPROTO_TCP, &PORTS);
        short_ihl[0] = 0x44;
        for (packet, why) in [
            (vec![], "empty"),
            (ipv4(IPPROTO_TCP, &[])[..19].to_vec(), "IPv4 truncated"),
            (short_ihl, "IPv4 header length 16"),
            (ipv6(IPPROTO_TCP, &[])[..39].to_vec(), "IPv6 truncated"),
            (vec![0x50; 40], "version 5"),
        ] {
            assert!(parse_headers(&packet).is_err(), "{why}");
        }
    }

    #[test]
    fn every_truncation_of_a_logged_packet_is_handled() {
        for full in [
            ipv4(IPPROTO_TCP, &PORTS),
            ipv6(0, &[IPPROTO_UDP, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]),
        ] {
            for cut in 0..full.len() {
                let _ = parse_headers(&full[..cut]);
            }
        }
    }
}
