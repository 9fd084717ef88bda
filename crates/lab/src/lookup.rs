//! The lookup helper: one UDP DNS query for A or AAAA records at a given server, then at
//! once a connection to the first address, reported as one [`LookupReport`] JSON line.
//!
//! The DNS wire code here is deliberately minimal (one question, answers of the asked type,
//! compressed names skipped) and private to the lab: the agent decodes DNS replies with its
//! own code, and the lab must stay an independent witness of what pods receive.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use palisade_model::Protocol;

use crate::{Helper, LabError};

/// How long one DNS attempt waits for its reply; the query is sent at most twice.
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(1000);

/// The connect timeout when none is given: short, so a dropped first SYN shows as a failure
/// instead of a retransmission a second later.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(300);

/// The record type a lookup asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RecordType {
    /// IPv4 addresses.
    A,
    /// IPv6 addresses.
    #[serde(rename = "AAAA")]
    Aaaa,
}

impl RecordType {
    /// The type's code on the wire.
    fn code(self) -> u16 {
        match self {
            RecordType::A => 1,
            RecordType::Aaaa => 28,
        }
    }
}

impl std::fmt::Display for RecordType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RecordType::A => "A",
            RecordType::Aaaa => "AAAA",
        })
    }
}

impl std::str::FromStr for RecordType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "A" => Ok(RecordType::A),
            "AAAA" => Ok(RecordType::Aaaa),
            _ => Err(format!("record type A or AAAA, not {s:?}")),
        }
    }
}

/// What a lookup helper is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupRequest {
    /// The DNS server, port included.
    pub server: SocketAddr,
    /// The name looked up.
    pub name: String,
    /// A or AAAA.
    pub record_type: RecordType,
    /// The port and protocol to reach at the first address received; `None` only looks up.
    pub connect: Option<(u16, Protocol)>,
    /// How long the connection (or the UDP probe's echo) may take.
    pub connect_timeout: Duration,
}

/// One address received, with its TTL.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Answer {
    /// The address.
    pub ip: IpAddr,
    /// Its TTL in seconds.
    pub ttl: u32,
}

/// The line a lookup helper prints.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LookupReport {
    /// The name looked up.
    pub name: String,
    /// A or AAAA.
    #[serde(rename = "type")]
    pub record_type: RecordType,
    /// The reply's response code (0 NOERROR, 3 NXDOMAIN, 5 REFUSED, ...); `None` without
    /// a reply.
    pub rcode: Option<u8>,
    /// The addresses of the asked type in the answer section, in reply order.
    pub answers: Vec<Answer>,
    /// Queries sent (1, or 2 after a lost reply).
    pub attempts: u8,
    /// Whether the connection to the first address succeeded (TCP connected, UDP echo
    /// received); `None` when no connection was asked for or no address came back.
    pub connected: Option<bool>,
    /// Microseconds from the reply's arrival to the connection's result.
    pub reply_to_connect_us: Option<u64>,
    /// Why the connection failed.
    pub error: Option<String>,
}

/// Runs the lookup helper of `exe` inside namespace `netns` and reads its report.
pub fn lookup(exe: &Path, netns: &str, request: &LookupRequest) -> Result<LookupReport, LabError> {
    let helper = Helper::Lookup(request.clone());
    let out = helper.command(exe, netns).stdin(Stdio::null()).output()?;
    let command = || format!("lookup {} in {netns}", request.name);
    if !out.status.success() {
        return Err(LabError::Command {
            command: command(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).map_err(|e| LabError::Command {
        command: command(),
        message: format!("unreadable report {stdout:?}: {e}"),
    })
}

/// Looks the name up and connects, in this process.
pub(crate) fn run(request: &LookupRequest) -> Result<LookupReport, LabError> {
    let id = query_id();
    let query = encode_query(id, &request.name, request.record_type)?;
    let bind: SocketAddr = match request.server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(bind)?;
    socket.connect(request.server)?;
    socket.set_read_timeout(Some(ATTEMPT_TIMEOUT))?;
    let mut report = LookupReport {
        name: request.name.clone(),
        record_type: request.record_type,
        rcode: None,
        answers: Vec::new(),
        attempts: 0,
        connected: None,
        reply_to_connect_us: None,
        error: None,
    };
    let mut buf = [0u8; 4096];
    let mut arrival = None;
    while report.attempts < 2 && arrival.is_none() {
        report.attempts += 1;
        match socket.send(&query) {
            Ok(_) => {}
            Err(e) if is_lost(&e) => continue,
            Err(e) => return Err(e.into()),
        }
        let deadline = Instant::now() + ATTEMPT_TIMEOUT;
        while Instant::now() < deadline {
            let n = match socket.recv(&mut buf) {
                Ok(n) => n,
                Err(e) if is_lost(&e) => break,
                Err(e) => return Err(e.into()),
            };
            let at = Instant::now();
            // A stray or malformed datagram is not the reply: keep waiting for it.
            if let Ok(reply) = decode_reply(&buf[..n], id, request.record_type) {
                report.rcode = Some(reply.rcode);
                report.answers = reply.answers;
                arrival = Some(at);
                break;
            }
        }
    }
    let (Some(at), Some((port, protocol)), Some(first)) =
        (arrival, request.connect, report.answers.first())
    else {
        return Ok(report);
    };
    let to = SocketAddr::new(first.ip, port);
    let result = reach(to, protocol, request.connect_timeout);
    report.reply_to_connect_us = Some(u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX));
    report.connected = Some(result.is_ok());
    report.error = result.err();
    Ok(report)
}

/// Connects to `to` (TCP), or sends a datagram and waits for its echo (UDP).
fn reach(to: SocketAddr, protocol: Protocol, timeout: Duration) -> Result<(), String> {
    match protocol {
        Protocol::Tcp => TcpStream::connect_timeout(&to, timeout)
            .map(drop)
            .map_err(|e| e.to_string()),
        Protocol::Udp => {
            let bind: SocketAddr = match to {
                SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
                SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
            };
            let s = UdpSocket::bind(bind).map_err(|e| e.to_string())?;
            s.connect(to).map_err(|e| e.to_string())?;
            s.set_read_timeout(Some(timeout))
                .map_err(|e| e.to_string())?;
            s.send(b"lookup-probe").map_err(|e| e.to_string())?;
            let mut buf = [0u8; 64];
            s.recv(&mut buf).map(drop).map_err(|e| e.to_string())
        }
        Protocol::Sctp => Err("SCTP is not probed by the lookup helper".into()),
    }
}

/// Whether an error means only that this attempt got no reply: a timeout, or nothing
/// listening at the server yet (an ICMP port unreachable).
fn is_lost(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::ConnectionRefused
    )
}

/// A query id that differs between runs.
fn query_id() -> u16 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (nanos ^ std::process::id()) as u16
}

/// A recursive query for one name and type, class IN.
pub(crate) fn encode_query(id: u16, name: &str, qtype: RecordType) -> Result<Vec<u8>, LabError> {
    let mut out = Vec::with_capacity(32 + name.len());
    out.extend(id.to_be_bytes());
    out.extend(0x0100u16.to_be_bytes()); // RD
    out.extend([0, 1, 0, 0, 0, 0, 0, 0]); // one question, no other records
    for label in name.trim_end_matches('.').split('.') {
        let len = u8::try_from(label.len())
            .ok()
            .filter(|l| (1..=63).contains(l))
            .ok_or_else(|| LabError::Usage(format!("{name:?} is not a DNS name")))?;
        out.push(len);
        out.extend(label.as_bytes());
    }
    out.push(0);
    out.extend(qtype.code().to_be_bytes());
    out.extend(1u16.to_be_bytes()); // IN
    Ok(out)
}

/// What a reply says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Reply {
    rcode: u8,
    answers: Vec<Answer>,
}

/// Reads the reply to query `id`: its response code and the answers of type `qtype`.
pub(crate) fn decode_reply(buf: &[u8], id: u16, qtype: RecordType) -> Result<Reply, String> {
    let mut r = Reader { buf, at: 0 };
    if r.u16()? != id {
        return Err("another query's id".into());
    }
    let flags = r.u16()?;
    if flags & 0x8000 == 0 {
        return Err("not a response".into());
    }
    let (questions, answers) = (r.u16()?, r.u16()?);
    r.skip(4)?; // authority and additional counts
    for _ in 0..questions {
        r.name()?;
        r.skip(4)?;
    }
    let mut out = Vec::new();
    for _ in 0..answers {
        r.name()?;
        let (rtype, class, ttl, len) = (r.u16()?, r.u16()?, r.u32()?, r.u16()?);
        let data = r.take(usize::from(len))?;
        if class != 1 || rtype != qtype.code() {
            continue; // CNAMEs and the like: only the addresses are reported
        }
        let ip = match (qtype, data.len()) {
            (RecordType::A, 4) => IpAddr::from([data[0], data[1], data[2], data[3]]),
            (RecordType::Aaaa, 16) => {
                let mut b = [0u8; 16];
                b.copy_from_slice(data);
                IpAddr::from(b)
            }
            _ => return Err(format!("{qtype} record of {} bytes", data.len())),
        };
        out.push(Answer { ip, ttl });
    }
    Ok(Reply {
        rcode: (flags & 0x000f) as u8,
        answers: out,
    })
}

/// A bounds-checked cursor over a message.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or_else(|| format!("reply cut short at byte {}", self.buf.len()))?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn skip(&mut self, n: usize) -> Result<(), String> {
        self.take(n).map(drop)
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Skips a name: labels up to the root, or up to a compression pointer.
    fn name(&mut self) -> Result<(), String> {
        loop {
            let len = self.take(1)?[0];
            match len {
                0 => return Ok(()),
                l if l & 0xc0 == 0xc0 => return self.skip(1),
                l if l & 0xc0 == 0 => self.skip(usize::from(l))?,
                l => return Err(format!("label type {l:#x}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply to `query` carrying a CNAME then two A records named by pointers.
    fn reply_to(query: &[u8], rcode: u8) -> Vec<u8> {
        let mut m = query[..2].to_vec();
        m.extend((0x8180u16 | u16::from(rcode)).to_be_bytes());
        m.extend([0, 1, 0, 3, 0, 0, 0, 0]);
        m.extend(&query[12..]);
        // www.example.org CNAME -> pointer to the question name
        m.extend([0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 2, 0xc0, 12]);
        m.extend([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 192, 0, 2, 20]);
        m.extend([0xc0, 12, 0, 1, 0, 1, 0, 0, 1, 0, 0, 4, 192, 0, 2, 21]);
        m
    }

    #[test]
    fn a_query_is_one_question_with_recursion_desired() {
        let q = encode_query(0xbeef, "www.example.org", RecordType::Aaaa).expect("a name");
        let mut want = vec![0xbe, 0xef, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        want.extend(b"\x03www\x07example\x03org\x00");
        want.extend([0, 28, 0, 1]);
        assert_eq!(q, want);
        assert_eq!(
            encode_query(1, "www.example.org.", RecordType::Aaaa).expect("a name")[12..],
            want[12..],
            "a trailing dot names the same name"
        );
    }

    #[test]
    fn names_that_cannot_be_sent_are_refused() {
        for bad in ["", "a..b", &"x".repeat(64)] {
            assert!(encode_query(1, bad, RecordType::A).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_reply_gives_its_addresses_with_their_ttls_in_order() {
        let q = encode_query(7, "www.example.org", RecordType::A).expect("a name");
        let reply = decode_reply(&reply_to(&q, 0), 7, RecordType::A).expect("a reply");
        let ip = |s: &str| s.parse::<IpAddr>().expect("an address");
        assert_eq!(
            reply,
            Reply {
                rcode: 0,
                answers: vec![
                    Answer {
                        ip: ip("192.0.2.20"),
                        ttl: 30
                    },
                    Answer {
                        ip: ip("192.0.2.21"),
                        ttl: 256
                    },
                ],
            }
        );
        let refused = decode_reply(&reply_to(&q, 5), 7, RecordType::A).expect("a reply");
        assert_eq!(refused.rcode, 5);
    }

    #[test]
    fn another_id_a_query_or_a_cut_reply_is_not_the_reply() {
        let q = encode_query(7, "www.example.org", RecordType::A).expect("a name");
        let full = reply_to(&q, 0);
        assert!(decode_reply(&full, 8, RecordType::A).is_err(), "other id");
        assert!(decode_reply(&q, 7, RecordType::A).is_err(), "a query");
        for cut in 0..full.len() {
            assert!(
                decode_reply(&full[..cut], 7, RecordType::A).is_err(),
                "cut at {cut}"
            );
        }
    }
}
