//! The DNS replies the agent learns domain addresses from, decoded: the UDP datagram in an
//! IP packet as nflog hands it ([`udp_datagram`]), the question and the addresses a reply
//! resolves it to ([`parse_reply`]), and the UDP checksum of a packet the agent re-sends
//! ([`fix_udp_checksum`]). Pure functions over bytes; nothing here reads a socket.

use std::net::{IpAddr, SocketAddr};
use std::ops::Range;

/// A decoding failure: what was wrong, and at which byte offset of the buffer given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("byte {at}: {problem}")]
pub struct WireError {
    /// The offset, in the packet or the DNS message, where the problem was found.
    pub at: usize,
    /// What was wrong there.
    pub problem: Problem,
}

/// What was wrong with a packet or a DNS message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The buffer ends before a field it must hold.
    #[error("the buffer ends at {len} bytes, before the {field} ({need} bytes)")]
    Truncated {
        /// The field cut off.
        field: &'static str,
        /// The bytes the field needs.
        need: usize,
        /// The buffer's length.
        len: usize,
    },
    /// The IP version is neither 4 nor 6.
    #[error("IP version {0} is neither 4 nor 6")]
    IpVersion(u8),
    /// The IPv4 header length (IHL) is below 5 words or beyond the total length.
    #[error("IPv4 header length {0} words is invalid")]
    HeaderLength(u8),
    /// The IPv4 total length is below the header or beyond the buffer.
    #[error("IPv4 total length {total} does not fit the header and the {len}-byte buffer")]
    TotalLength {
        /// The total length field.
        total: usize,
        /// The buffer's length.
        len: usize,
    },
    /// The packet is a fragment (IPv4 MF or offset, or an IPv6 fragment header).
    #[error("the packet is a fragment")]
    Fragment,
    /// The transport protocol is not UDP.
    #[error("protocol {0} is not UDP")]
    NotUdp(u8),
    /// The UDP length field is below 8 or beyond the IP payload.
    #[error("UDP length {length} does not fit the {available}-byte IP payload")]
    UdpLength {
        /// The UDP length field.
        length: usize,
        /// The IP payload's length.
        available: usize,
    },
    /// The DNS message is a query (QR=0), not a response.
    #[error("the DNS message is a query, not a response")]
    NotResponse,
    /// The DNS opcode is not QUERY.
    #[error("DNS opcode {0} is not QUERY (0)")]
    Opcode(u8),
    /// The DNS response code is not NOERROR.
    #[error("DNS response code {0} is not NOERROR (0)")]
    Rcode(u8),
    /// The DNS message does not hold exactly one question.
    #[error("{0} questions, not exactly one")]
    QuestionCount(u16),
    /// The question's class is not IN.
    #[error("question class {0} is not IN (1)")]
    QuestionClass(u16),
    /// A compression pointer that does not point strictly backwards (a loop, or a forward
    /// reference).
    #[error("compression pointer to byte {0} does not point before itself")]
    PointerLoop(usize),
    /// A label length byte with the reserved high bits 01 or 10.
    #[error("label type 0x{0:02x} is not supported")]
    LabelType(u8),
    /// A label byte that is not printable ASCII, or a dot inside a label.
    #[error("label byte 0x{0:02x} is not printable ASCII other than '.'")]
    LabelByte(u8),
    /// A name longer than 255 octets.
    #[error("name longer than 255 octets")]
    NameTooLong,
    /// A record's data does not have the length its type requires.
    #[error("{kind} record data of {length} bytes")]
    RecordLength {
        /// The record type.
        kind: &'static str,
        /// The RDLENGTH field.
        length: usize,
    },
}

/// A UDP datagram: its endpoints and its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// The sender's address and port.
    pub source: SocketAddr,
    /// The receiver's address and port.
    pub destination: SocketAddr,
    /// The UDP payload (the DNS message).
    pub payload: &'a [u8],
}

/// What a DNS reply teaches: the question name and the addresses it resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The question name: lowercase ASCII, no trailing dot.
    pub question: String,
    /// The A and AAAA addresses reached from the question name, each with its TTL in
    /// seconds (the least TTL on the way through the CNAME chain).
    pub addresses: Vec<(IpAddr, u32)>,
    /// The CNAME chain followed from the question name, in order, lowercase.
    pub cnames: Vec<String>,
}

const UDP: u8 = 17;
const UDP_HEADER: usize = 8;
const IPV4_HEADER: usize = 20;
const IPV6_HEADER: usize = 40;

/// Where the UDP segment of a packet is: the IP addresses, and the segment's byte range
/// (header and payload, as the UDP length field says).
struct UdpSpan {
    src: IpAddr,
    dst: IpAddr,
    segment: Range<usize>,
}

fn err(at: usize, problem: Problem) -> WireError {
    WireError { at, problem }
}

/// `buf[at..at + n]`, or an error naming `field` when the buffer is shorter.
fn take<'a>(
    buf: &'a [u8],
    at: usize,
    n: usize,
    field: &'static str,
) -> Result<&'a [u8], WireError> {
    at.checked_add(n)
        .and_then(|end| buf.get(at..end))
        .ok_or_else(|| {
            err(
                at,
                Problem::Truncated {
                    field,
                    need: n,
                    len: buf.len(),
                },
            )
        })
}

/// The `N` bytes at `at`, or an error naming `field` when the buffer is shorter.
fn array_at<const N: usize>(
    buf: &[u8],
    at: usize,
    field: &'static str,
) -> Result<[u8; N], WireError> {
    let mut out = [0; N];
    out.copy_from_slice(take(buf, at, N, field)?);
    Ok(out)
}

fn u16_at(buf: &[u8], at: usize, field: &'static str) -> Result<u16, WireError> {
    array_at(buf, at, field).map(u16::from_be_bytes)
}

fn u32_at(buf: &[u8], at: usize, field: &'static str) -> Result<u32, WireError> {
    array_at(buf, at, field).map(u32::from_be_bytes)
}

/// Finds the UDP segment of an IPv4 or IPv6 packet, refusing fragments and other protocols.
fn udp_span(packet: &[u8]) -> Result<UdpSpan, WireError> {
    let [first] = array_at(packet, 0, "IP version")?;
    let (src, dst, start, end) = match first >> 4 {
        4 => ipv4_span(packet)?,
        6 => ipv6_span(packet)?,
        v => return Err(err(0, Problem::IpVersion(v))),
    };
    take(&packet[..end], start, UDP_HEADER, "UDP header")?;
    let length = usize::from(u16_at(packet, start + 4, "UDP length")?);
    let available = end - start;
    if length < UDP_HEADER || length > available {
        return Err(err(start + 4, Problem::UdpLength { length, available }));
    }
    Ok(UdpSpan {
        src,
        dst,
        segment: start..start + length,
    })
}

/// An IPv4 packet's addresses and the byte range of its payload, which must be UDP.
fn ipv4_span(p: &[u8]) -> Result<(IpAddr, IpAddr, usize, usize), WireError> {
    take(p, 0, IPV4_HEADER, "IPv4 header")?;
    let ihl = p[0] & 0x0f;
    let header = usize::from(ihl) * 4;
    let total = usize::from(u16_at(p, 2, "IPv4 total length")?);
    if total > p.len() || total < IPV4_HEADER {
        return Err(err(
            2,
            Problem::TotalLength {
                total,
                len: p.len(),
            },
        ));
    }
    if header < IPV4_HEADER || header > total {
        return Err(err(0, Problem::HeaderLength(ihl)));
    }
    // Flags and fragment offset: MF is 0x2000, the offset the low 13 bits.
    if u16_at(p, 6, "IPv4 fragment field")? & 0x3fff != 0 {
        return Err(err(6, Problem::Fragment));
    }
    if p[9] != UDP {
        return Err(err(9, Problem::NotUdp(p[9])));
    }
    let src = IpAddr::from(array_at::<4>(p, 12, "IPv4 source")?);
    let dst = IpAddr::from(array_at::<4>(p, 16, "IPv4 destination")?);
    Ok((src, dst, header, total))
}

/// An IPv6 packet's addresses and the byte range of its payload after the extension
/// headers, which must end in UDP.
fn ipv6_span(p: &[u8]) -> Result<(IpAddr, IpAddr, usize, usize), WireError> {
    take(p, 0, IPV6_HEADER, "IPv6 header")?;
    let payload = usize::from(u16_at(p, 4, "IPv6 payload length")?);
    let end = IPV6_HEADER + payload;
    take(p, IPV6_HEADER, payload, "IPv6 payload")?;
    let src = IpAddr::from(array_at::<16>(p, 8, "IPv6 source")?);
    let dst = IpAddr::from(array_at::<16>(p, 24, "IPv6 destination")?);
    let (mut next, mut next_at, mut at) = (p[6], 6, IPV6_HEADER);
    loop {
        match next {
            UDP => return Ok((src, dst, at, end)),
            // Hop-by-hop options, routing, destination options: next header, then the
            // length in 8-octet units not counting the first.
            0 | 43 | 60 => {
                let h = take(&p[..end], at, 2, "IPv6 extension header")?;
                let len = (usize::from(h[1]) + 1) * 8;
                take(&p[..end], at, len, "IPv6 extension header")?;
                (next, next_at) = (h[0], at);
                at += len;
            }
            44 => return Err(err(next_at, Problem::Fragment)),
            other => return Err(err(next_at, Problem::NotUdp(other))),
        }
    }
}

/// The source and destination and the payload of the UDP datagram in `packet`, an IPv4 or
/// IPv6 packet starting at its IP header; fragments and other protocols are refused.
pub fn udp_datagram(packet: &[u8]) -> Result<Datagram<'_>, WireError> {
    let span = udp_span(packet)?;
    let start = span.segment.start;
    let sport = u16_at(packet, start, "UDP source port")?;
    let dport = u16_at(packet, start + 2, "UDP destination port")?;
    Ok(Datagram {
        source: SocketAddr::new(span.src, sport),
        destination: SocketAddr::new(span.dst, dport),
        payload: &packet[start + UDP_HEADER..span.segment.end],
    })
}

/// Recomputes, in place, the UDP checksum of an IPv4 or IPv6 UDP packet; an IPv4 checksum
/// of 0 (none) stays 0.
pub fn fix_udp_checksum(packet: &mut [u8]) -> Result<(), WireError> {
    let span = udp_span(packet)?;
    let at = span.segment.start + 6;
    let old = u16_at(packet, at, "UDP checksum")?;
    if span.src.is_ipv4() && old == 0 {
        return Ok(());
    }
    packet[at..at + 2].copy_from_slice(&[0, 0]);
    let segment = &packet[span.segment.clone()];
    let mut sum = Sum::default();
    match (span.src, span.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            sum.add(&s.octets());
            sum.add(&d.octets());
        }
        (s, d) => {
            sum.add(&ip6_octets(s));
            sum.add(&ip6_octets(d));
        }
    }
    // The pseudo-header's protocol and length fields; the same sum for both families.
    sum.add(&[0, UDP]);
    sum.add(&(segment.len() as u32).to_be_bytes());
    sum.add(segment);
    // RFC 768: a computed checksum of zero is sent as all ones.
    let checksum = match sum.finish() {
        0 => 0xffff,
        c => c,
    };
    packet[at..at + 2].copy_from_slice(&checksum.to_be_bytes());
    Ok(())
}

fn ip6_octets(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V6(a) => a.octets(),
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
    }
}

/// The Internet checksum (RFC 1071) of byte strings added in order; each must start at an
/// even offset of the whole, which holds for the pseudo-header fields used here.
#[derive(Default)]
struct Sum(u64);

impl Sum {
    fn add(&mut self, bytes: &[u8]) {
        for pair in bytes.chunks(2) {
            let hi = u64::from(pair[0]) << 8;
            let lo = pair.get(1).map_or(0, |&b| u64::from(b));
            self.0 += hi | lo;
        }
    }

    fn finish(&self) -> u16 {
        let mut s = self.0;
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }
}

/// The longest name, in octets on the wire (RFC 1035 §2.3.4).
const MAX_NAME: usize = 255;

/// The most CNAMEs followed from the question name.
const MAX_CNAME_HOPS: usize = 8;

const TYPE_A: u16 = 1;
const TYPE_CNAME: u16 = 5;
const TYPE_AAAA: u16 = 28;
const CLASS_IN: u16 = 1;

/// Reads the (possibly compressed) name at `start`: the name in lowercase without the
/// trailing dot, and the offset just after it where it is written.
fn read_name(msg: &[u8], start: usize) -> Result<(String, usize), WireError> {
    let mut name = String::new();
    let mut at = start;
    // Where the name continues in place, once a pointer has been followed.
    let mut after = None;
    // RFC 1035 §4.1.4: a pointer replaces a name's end "with a pointer to a prior
    // occurance of the same name". Each pointer must point strictly before the name's
    // start and before the previous pointer's target, so no loop can form.
    let mut bound = start;
    let mut octets = 1;
    loop {
        let [len] = array_at(msg, at, "label length")?;
        match len >> 6 {
            0b00 if len == 0 => {
                return Ok((name, after.unwrap_or(at + 1)));
            }
            0b00 => {
                let len = usize::from(len);
                octets += len + 1;
                if octets > MAX_NAME {
                    return Err(err(at, Problem::NameTooLong));
                }
                let label = take(msg, at + 1, len, "label")?;
                if let Some((i, &b)) = label
                    .iter()
                    .enumerate()
                    .find(|&(_, &b)| !b.is_ascii_graphic() || b == b'.')
                {
                    return Err(err(at + 1 + i, Problem::LabelByte(b)));
                }
                if !name.is_empty() {
                    name.push('.');
                }
                name.extend(label.iter().map(|b| char::from(b.to_ascii_lowercase())));
                at += 1 + len;
            }
            0b11 => {
                let target = usize::from(u16_at(msg, at, "compression pointer")? & 0x3fff);
                if target >= bound {
                    return Err(err(at, Problem::PointerLoop(target)));
                }
                after.get_or_insert(at + 2);
                bound = target;
                at = target;
            }
            _ => return Err(err(at, Problem::LabelType(len))),
        }
    }
}

/// One answer record of class IN that the chain walk may use.
struct Record {
    owner: String,
    ttl: u32,
    data: Data,
}

/// What an answer record says about its owner.
enum Data {
    Address(IpAddr),
    Cname(String),
}

/// Reads the resource record at `at`: the record if it is an IN A, AAAA or CNAME, and the
/// offset of the next record.
fn read_record(msg: &[u8], at: usize) -> Result<(Option<Record>, usize), WireError> {
    let (owner, at) = read_name(msg, at)?;
    let kind = u16_at(msg, at, "record type")?;
    let class = u16_at(msg, at + 2, "record class")?;
    // RFC 2181 §8: a TTL with the top bit set is read as zero.
    let ttl = match u32_at(msg, at + 4, "record TTL")? {
        t if t > i32::MAX as u32 => 0,
        t => t,
    };
    let length = usize::from(u16_at(msg, at + 8, "record data length")?);
    let data_at = at + 10;
    let data = take(msg, data_at, length, "record data")?;
    let next = data_at + length;
    if class != CLASS_IN {
        return Ok((None, next));
    }
    let data = match kind {
        TYPE_A => match <[u8; 4]>::try_from(data) {
            Ok(b) => Data::Address(IpAddr::from(b)),
            Err(_) => return Err(err(at + 8, Problem::RecordLength { kind: "A", length })),
        },
        TYPE_AAAA => match <[u8; 16]>::try_from(data) {
            Ok(b) => Data::Address(IpAddr::from(b)),
            Err(_) => {
                return Err(err(
                    at + 8,
                    Problem::RecordLength {
                        kind: "AAAA",
                        length,
                    },
                ));
            }
        },
        TYPE_CNAME => {
            let (target, end) = read_name(msg, data_at)?;
            if end != next {
                return Err(err(
                    at + 8,
                    Problem::RecordLength {
                        kind: "CNAME",
                        length,
                    },
                ));
            }
            Data::Cname(target)
        }
        _ => return Ok((None, next)),
    };
    Ok((Some(Record { owner, ttl, data }), next))
}

/// The question of a DNS reply and the addresses the reply resolves it to (RFC 1035): a
/// response to a standard query with NOERROR and one IN question. Only A and AAAA records
/// reached from the question name through the answer's CNAME chain count, so a resolver's
/// reply never teaches addresses for a name it was not asked.
pub fn parse_reply(msg: &[u8]) -> Result<Reply, WireError> {
    let header = take(msg, 0, 12, "DNS header")?;
    let (flags, rcode) = (header[2], header[3] & 0x0f);
    if flags & 0x80 == 0 {
        return Err(err(2, Problem::NotResponse));
    }
    let opcode = (flags >> 3) & 0x0f;
    if opcode != 0 {
        return Err(err(2, Problem::Opcode(opcode)));
    }
    if rcode != 0 {
        return Err(err(3, Problem::Rcode(rcode)));
    }
    let truncated = flags & 0x02 != 0;
    let questions = u16_at(msg, 4, "question count")?;
    if questions != 1 {
        return Err(err(4, Problem::QuestionCount(questions)));
    }
    let answers = u16_at(msg, 6, "answer count")?;
    let (question, at) = read_name(msg, 12)?;
    let class = u16_at(msg, at + 2, "question class")?;
    if class != CLASS_IN {
        return Err(err(at + 2, Problem::QuestionClass(class)));
    }
    let mut at = at + 4;
    let mut records = Vec::new();
    for _ in 0..answers {
        match read_record(msg, at) {
            Ok((record, next)) => {
                records.extend(record);
                at = next;
            }
            // A truncated reply (TC=1) yields the records it holds in full.
            Err(WireError {
                problem: Problem::Truncated { .. },
                ..
            }) if truncated => break,
            Err(e) => return Err(e),
        }
    }
    let (addresses, cnames) = follow_chain(&question, &records);
    Ok(Reply {
        question,
        addresses,
        cnames,
    })
}

/// The addresses reached from `question` through the CNAME chain, each with the least TTL
/// on its way, and the CNAME targets followed.
fn follow_chain(question: &str, records: &[Record]) -> (Vec<(IpAddr, u32)>, Vec<String>) {
    let mut addresses: Vec<(IpAddr, u32)> = Vec::new();
    let mut cnames: Vec<String> = Vec::new();
    let mut name = question;
    let mut cap = u32::MAX;
    loop {
        let owned = || records.iter().filter(|r| r.owner == name);
        for r in owned() {
            if let Data::Address(ip) = r.data {
                let ttl = r.ttl.min(cap);
                match addresses.iter_mut().find(|(a, _)| *a == ip) {
                    Some((_, t)) => *t = (*t).max(ttl),
                    None => addresses.push((ip, ttl)),
                }
            }
        }
        let next = owned().find_map(|r| match &r.data {
            Data::Cname(target) => Some((target, r.ttl)),
            Data::Address(_) => None,
        });
        let Some((target, ttl)) = next else { break };
        if cnames.len() == MAX_CNAME_HOPS || target == question || cnames.contains(target) {
            break;
        }
        cap = cap.min(ttl);
        cnames.push(target.clone());
        name = target;
    }
    (addresses, cnames)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESPONSE: u16 = 0x8180;

    /// A name in uncompressed wire form.
    fn name(n: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for label in n.split('.').filter(|l| !l.is_empty()) {
            out.push(label.len() as u8);
            out.extend_from_slice(label.as_bytes());
        }
        out.push(0);
        out
    }

    /// A pointer to byte `at`.
    fn ptr(at: usize) -> Vec<u8> {
        vec![0xc0 | (at >> 8) as u8, at as u8]
    }

    /// A resource record of class `class`.
    fn rr_in(owner: &[u8], kind: u16, class: u16, ttl: u32, data: &[u8]) -> Vec<u8> {
        let mut out = owner.to_vec();
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&class.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(data);
        out
    }

    fn rr(owner: &[u8], kind: u16, ttl: u32, data: &[u8]) -> Vec<u8> {
        rr_in(owner, kind, CLASS_IN, ttl, data)
    }

    /// A DNS message: header with `flags`, the question `q` (class IN, type A), the answer
    /// records and the additional records.
    fn message(flags: u16, q: &str, answers: &[Vec<u8>], additional: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![0xbe, 0xef];
        for v in [flags, 1, answers.len() as u16, 0, additional.len() as u16] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend(name(q));
        out.extend_from_slice(&[0, 1, 0, 1]);
        answers.iter().chain(additional).for_each(|r| out.extend(r));
        out
    }

    fn reply(q: &str, answers: &[Vec<u8>]) -> Vec<u8> {
        message(RESPONSE, q, answers, &[])
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn octets(s: &str) -> Vec<u8> {
        match ip(s) {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        }
    }

    fn learned(q: &str, addresses: &[(&str, u32)], cnames: &[&str]) -> Reply {
        Reply {
            question: q.to_string(),
            addresses: addresses.iter().map(|&(a, t)| (ip(a), t)).collect(),
            cnames: cnames.iter().map(|c| c.to_string()).collect(),
        }
    }

    /// The question name starts right after the 12-byte header.
    const QUESTION: usize = 12;

    /// A CNAME chain written with compression: www.example.com → cdn.example.com (its
    /// suffix a pointer into the question) → A and AAAA records owned by a pointer to the
    /// CNAME's data.
    fn compressed_chain() -> Vec<u8> {
        let head = reply("www.Example.com", &[]);
        // The CNAME's data: "cdn" and a pointer to "example.com" in the question.
        let cname_data = [vec![3, b'c', b'd', b'n'], ptr(QUESTION + 4)].concat();
        let cname = rr(&ptr(QUESTION), TYPE_CNAME, 60, &cname_data);
        let data_at = head.len() + 2 + 10;
        let a = rr(&ptr(data_at), TYPE_A, 300, &octets("192.0.2.7"));
        let aaaa = rr(&ptr(data_at), TYPE_AAAA, 30, &octets("2001:db8::7"));
        reply("www.Example.com", &[cname, a, aaaa])
    }

    #[test]
    fn replies_teach_the_addresses_of_the_question_name() {
        let other = name("other.test");
        let cases: Vec<(&str, Vec<u8>, Reply)> = vec![
            (
                "an A record owned by a pointer to the question",
                reply(
                    "example.com",
                    &[rr(&ptr(QUESTION), TYPE_A, 300, &octets("192.0.2.1"))],
                ),
                learned("example.com", &[("192.0.2.1", 300)], &[]),
            ),
            (
                "an AAAA record; names compared without case, given in lowercase",
                reply(
                    "Example.COM",
                    &[rr(
                        &name("eXample.com"),
                        TYPE_AAAA,
                        60,
                        &octets("2001:db8::1"),
                    )],
                ),
                learned("example.com", &[("2001:db8::1", 60)], &[]),
            ),
            (
                "a compressed CNAME chain: each address's TTL is capped by the CNAME's",
                compressed_chain(),
                learned(
                    "www.example.com",
                    &[("192.0.2.7", 60), ("2001:db8::7", 30)],
                    &["cdn.example.com"],
                ),
            ),
            (
                "records owned by other names teach nothing, nor do CNAMEs from them",
                reply(
                    "example.com",
                    &[
                        rr(&other, TYPE_A, 300, &octets("198.51.100.1")),
                        rr(&other, TYPE_CNAME, 300, &ptr(QUESTION)),
                        rr(&name("example.com"), TYPE_CNAME, 300, &name("b.test")),
                        rr(&name("c.test"), TYPE_A, 300, &octets("198.51.100.3")),
                        rr(&name("b.test"), TYPE_A, 100, &octets("198.51.100.2")),
                    ],
                ),
                learned("example.com", &[("198.51.100.2", 100)], &["b.test"]),
            ),
            (
                "the additional section teaches nothing",
                message(
                    RESPONSE,
                    "example.com",
                    &[rr(&ptr(QUESTION), TYPE_A, 300, &octets("192.0.2.1"))],
                    &[rr(&ptr(QUESTION), TYPE_A, 300, &octets("192.0.2.66"))],
                ),
                learned("example.com", &[("192.0.2.1", 300)], &[]),
            ),
            (
                "records of class CH and other types are skipped",
                reply(
                    "example.com",
                    &[
                        rr_in(&ptr(QUESTION), TYPE_A, 3, 300, &octets("192.0.2.9")),
                        rr(&ptr(QUESTION), 16, 300, b"\x02hi"),
                        rr(&ptr(QUESTION), TYPE_A, 300, &octets("192.0.2.1")),
                    ],
                ),
                learned("example.com", &[("192.0.2.1", 300)], &[]),
            ),
            (
                "a TTL with the top bit set is read as zero",
                reply(
                    "example.com",
                    &[rr(
                        &ptr(QUESTION),
                        TYPE_A,
                        0x8000_0000,
                        &octets("192.0.2.1"),
                    )],
                ),
                learned("example.com", &[("192.0.2.1", 0)], &[]),
            ),
            (
                "a CNAME loop ends",
                reply(
                    "a.test",
                    &[
                        rr(&name("a.test"), TYPE_CNAME, 50, &name("b.test")),
                        rr(&name("b.test"), TYPE_CNAME, 40, &name("a.test")),
                        rr(&name("a.test"), TYPE_A, 300, &octets("192.0.2.1")),
                    ],
                ),
                learned("a.test", &[("192.0.2.1", 300)], &["b.test"]),
            ),
            (
                "an empty answer",
                reply("example.com", &[]),
                learned("example.com", &[], &[]),
            ),
        ];
        for (why, msg, want) in cases {
            assert_eq!(parse_reply(&msg), Ok(want), "{why}");
        }
    }

    /// A chain n0.test → n1.test → … → n{hops}.test with an address at its end.
    fn chain(hops: usize) -> Vec<u8> {
        let mut answers: Vec<Vec<u8>> = (0..hops)
            .map(|i| {
                rr(
                    &name(&format!("n{i}.test")),
                    TYPE_CNAME,
                    300,
                    &name(&format!("n{}.test", i + 1)),
                )
            })
            .collect();
        answers.push(rr(
            &name(&format!("n{hops}.test")),
            TYPE_A,
            300,
            &octets("192.0.2.1"),
        ));
        reply("n0.test", &answers)
    }

    #[test]
    fn cnames_are_followed_at_most_eight_hops() {
        let eight = parse_reply(&chain(8)).unwrap();
        assert_eq!(eight.addresses, vec![(ip("192.0.2.1"), 300)]);
        assert_eq!(eight.cnames.len(), 8);
        let nine = parse_reply(&chain(9)).unwrap();
        assert_eq!(nine.addresses, vec![], "the ninth hop is not followed");
        assert_eq!(nine.cnames.len(), 8);
    }

    #[test]
    fn bad_messages_are_refused_with_the_offset() {
        let a = || vec![rr(&ptr(QUESTION), TYPE_A, 300, &octets("192.0.2.1"))];
        let mut two_questions = reply("example.com", &a());
        two_questions[5] = 2;
        let mut no_question = reply("example.com", &[]);
        no_question[5] = 0;
        let mut chaos = reply("example.com", &[]);
        let class_at = chaos.len() - 2;
        chaos[class_at + 1] = 3;
        let self_pointer = [
            reply("x", &[])[..QUESTION].to_vec(),
            ptr(QUESTION),
            vec![0, 1, 0, 1],
        ]
        .concat();
        let forward = [
            reply("x", &[])[..QUESTION].to_vec(),
            ptr(QUESTION + 2),
            name("x"),
            vec![0, 1, 0, 1],
        ]
        .concat();
        // An answer owner: label "a", then a pointer back to that label.
        let mut back = reply("example.com", &[]);
        let owner_at = back.len();
        back[7] = 1;
        back.extend([vec![1, b'a'], ptr(owner_at)].concat());
        back.extend(rr(&[], TYPE_A, 1, &[1, 2, 3, 4]));
        let long = reply(&vec!["a".repeat(63); 4].join("."), &[]);
        let label_type = [
            reply("x", &[])[..QUESTION].to_vec(),
            vec![0x40, b'a', 0, 0, 1, 0, 1],
        ]
        .concat();
        // "a.b" as one label: it must not read as the two-label name a.b.
        let dotted = [
            reply("x", &[])[..QUESTION].to_vec(),
            b"\x03a.b\0\0\x01\0\x01".to_vec(),
        ]
        .concat();
        // The RDLENGTH of the first answer after example.com's question: header, name (13),
        // type and class, a pointer, then type, class and TTL.
        const RDLENGTH: usize = QUESTION + 13 + 4 + 2 + 8;
        let short_a = reply(
            "example.com",
            &[rr(&ptr(QUESTION), TYPE_A, 300, &[1, 2, 3])],
        );
        let cname_overrun = reply(
            "example.com",
            &[[rr(&ptr(QUESTION), TYPE_CNAME, 300, &[1, b'a', 0, 9])].concat()],
        );
        let cases: Vec<(&str, Vec<u8>, usize, Problem)> = vec![
            (
                "NXDOMAIN",
                message(0x8183, "example.com", &a(), &[]),
                3,
                Problem::Rcode(3),
            ),
            (
                "SERVFAIL",
                message(0x8182, "example.com", &[], &[]),
                3,
                Problem::Rcode(2),
            ),
            (
                "a query",
                message(0x0100, "example.com", &[], &[]),
                2,
                Problem::NotResponse,
            ),
            (
                "opcode STATUS",
                message(0x9080, "example.com", &a(), &[]),
                2,
                Problem::Opcode(2),
            ),
            ("two questions", two_questions, 4, Problem::QuestionCount(2)),
            ("no question", no_question, 4, Problem::QuestionCount(0)),
            ("class CH", chaos, class_at, Problem::QuestionClass(3)),
            (
                "a pointer to itself",
                self_pointer,
                QUESTION,
                Problem::PointerLoop(QUESTION),
            ),
            (
                "a forward pointer",
                forward,
                QUESTION,
                Problem::PointerLoop(QUESTION + 2),
            ),
            (
                "a pointer back into its own name",
                back,
                owner_at + 2,
                Problem::PointerLoop(owner_at),
            ),
            (
                "a name of 257 octets",
                long,
                QUESTION + 3 * 64,
                Problem::NameTooLong,
            ),
            (
                "label type 01",
                label_type,
                QUESTION,
                Problem::LabelType(0x40),
            ),
            (
                "a dot inside a label",
                dotted,
                QUESTION + 2,
                Problem::LabelByte(b'.'),
            ),
            (
                "an A record of 3 bytes",
                short_a,
                RDLENGTH,
                Problem::RecordLength {
                    kind: "A",
                    length: 3,
                },
            ),
            (
                "a CNAME name past its data",
                cname_overrun,
                RDLENGTH,
                Problem::RecordLength {
                    kind: "CNAME",
                    length: 4,
                },
            ),
        ];
        for (why, msg, at, problem) in cases {
            assert_eq!(parse_reply(&msg), Err(WireError { at, problem }), "{why}");
        }
    }

    #[test]
    fn every_truncation_of_a_reply_is_an_error() {
        let msg = compressed_chain();
        assert!(parse_reply(&msg).is_ok());
        for len in 0..msg.len() {
            let e = parse_reply(&msg[..len]).expect_err(&format!("{len} bytes"));
            assert!(
                matches!(e.problem, Problem::Truncated { .. }),
                "{len} bytes: {e}"
            );
        }
    }

    #[test]
    fn a_truncated_reply_yields_the_records_it_holds() {
        let answers = [
            rr(&ptr(QUESTION), TYPE_A, 300, &octets("192.0.2.1")),
            rr(&ptr(QUESTION), TYPE_A, 300, &octets("192.0.2.2")),
        ];
        let msg = message(RESPONSE | 0x0200, "example.com", &answers, &[]);
        let cut = &msg[..msg.len() - 3];
        assert_eq!(
            parse_reply(cut),
            Ok(learned("example.com", &[("192.0.2.1", 300)], &[]))
        );
        let whole = parse_reply(&msg).unwrap();
        assert_eq!(whole.addresses.len(), 2, "TC=1 with every record present");
        let without_tc = reply("example.com", &answers);
        assert!(
            parse_reply(&without_tc[..without_tc.len() - 3]).is_err(),
            "TC=0"
        );
    }

    const V4_SRC: &str = "10.96.0.10";
    const V4_DST: &str = "10.244.1.5";

    /// A UDP header (checksum 0) and payload.
    fn udp(payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for v in [53u16, 41000, (UDP_HEADER + payload.len()) as u16, 0] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(payload);
        out
    }

    /// An IPv4 packet with `options`, protocol `proto` and fragment field `frag`.
    fn ipv4(options: &[u8], proto: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
        let header = IPV4_HEADER + options.len();
        let total = (header + l4.len()) as u16;
        let mut p = vec![0x40 | (header / 4) as u8, 0];
        p.extend_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&[0x1c, 0x46]);
        p.extend_from_slice(&frag.to_be_bytes());
        p.extend_from_slice(&[64, proto, 0, 0]);
        p.extend(octets(V4_SRC));
        p.extend(octets(V4_DST));
        p.extend_from_slice(options);
        p.extend_from_slice(l4);
        p
    }

    /// An IPv6 packet whose first next header is `next`, then `after` (extension headers
    /// and the transport header).
    fn ipv6(next: u8, after: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&(after.len() as u16).to_be_bytes());
        p.extend_from_slice(&[next, 64]);
        p.extend(octets("fd00:10:96::a"));
        p.extend(octets("fd00:10:244:1::5"));
        p.extend_from_slice(after);
        p
    }

    #[test]
    fn udp_datagrams_are_found_in_ipv4_and_ipv6() {
        let dns = compressed_chain();
        let v4_from = SocketAddr::new(ip(V4_SRC), 53);
        let v4_to = SocketAddr::new(ip(V4_DST), 41000);
        let v6_from = SocketAddr::new(ip("fd00:10:96::a"), 53);
        let v6_to = SocketAddr::new(ip("fd00:10:244:1::5"), 41000);
        let hop_by_hop = [&[UDP, 0, 1, 4, 0, 0, 0, 0][..], &udp(&dns)].concat();
        let two = [
            &[60, 0, 1, 4, 0, 0, 0, 0][..],
            &[UDP, 1][..],
            &[0; 14][..],
            &udp(&dns),
        ]
        .concat();
        let mut padded = ipv4(&[], UDP, 0x4000, &udp(&dns));
        padded.extend_from_slice(&[0; 6]);
        let cases: Vec<(&str, Vec<u8>, SocketAddr, SocketAddr)> = vec![
            (
                "IPv4, DF set",
                ipv4(&[], UDP, 0x4000, &udp(&dns)),
                v4_from,
                v4_to,
            ),
            (
                "IPv4 with options (IHL 6)",
                ipv4(&[1, 1, 1, 0], UDP, 0, &udp(&dns)),
                v4_from,
                v4_to,
            ),
            (
                "IPv4 with bytes past the total length",
                padded,
                v4_from,
                v4_to,
            ),
            ("IPv6", ipv6(UDP, &udp(&dns)), v6_from, v6_to),
            (
                "IPv6 with hop-by-hop options",
                ipv6(0, &hop_by_hop),
                v6_from,
                v6_to,
            ),
            (
                "IPv6 with hop-by-hop and 16-byte destination options",
                ipv6(0, &two),
                v6_from,
                v6_to,
            ),
        ];
        for (why, packet, source, destination) in cases {
            let want = Datagram {
                source,
                destination,
                payload: &dns,
            };
            assert_eq!(udp_datagram(&packet), Ok(want), "{why}");
        }
    }

    #[test]
    fn packets_other_than_whole_udp_datagrams_are_refused() {
        let l4 = udp(b"dns");
        let mut cut = ipv4(&[], UDP, 0, &l4);
        cut.pop();
        let mut udp_long = ipv4(&[], UDP, 0, &l4);
        udp_long[IPV4_HEADER + 5] += 1;
        let mut udp_short = ipv4(&[], UDP, 0, &l4);
        udp_short[IPV4_HEADER + 5] = 7;
        let mut ihl4 = ipv4(&[], UDP, 0, &l4);
        ihl4[0] = 0x44;
        let mut v6_cut = ipv6(UDP, &l4);
        v6_cut.pop();
        let frag6 = [&[UDP, 0, 0, 1, 0, 0, 0, 1][..], &l4].concat();
        let dst_then_frag = [&[44, 0, 0, 0, 0, 0, 0, 0][..], &frag6].concat();
        let cases: Vec<(&str, Vec<u8>, usize, Problem)> = vec![
            (
                "IPv4 MF set",
                ipv4(&[], UDP, 0x2000, &l4),
                6,
                Problem::Fragment,
            ),
            (
                "IPv4 offset 1",
                ipv4(&[], UDP, 0x0001, &l4),
                6,
                Problem::Fragment,
            ),
            ("IPv4 TCP", ipv4(&[], 6, 0, &l4), 9, Problem::NotUdp(6)),
            (
                "IPv4 total length past the buffer",
                cut,
                2,
                Problem::TotalLength { total: 31, len: 30 },
            ),
            ("IPv4 IHL 4", ihl4, 0, Problem::HeaderLength(4)),
            (
                "UDP length past the IP payload",
                udp_long,
                IPV4_HEADER + 4,
                Problem::UdpLength {
                    length: 12,
                    available: 11,
                },
            ),
            (
                "UDP length below its header",
                udp_short,
                IPV4_HEADER + 4,
                Problem::UdpLength {
                    length: 7,
                    available: 11,
                },
            ),
            ("IPv5", vec![0x50; 40], 0, Problem::IpVersion(5)),
            ("IPv6 TCP", ipv6(6, &l4), 6, Problem::NotUdp(6)),
            (
                "IPv6 fragment header",
                ipv6(44, &frag6),
                6,
                Problem::Fragment,
            ),
            (
                "IPv6 fragment after destination options",
                ipv6(60, &dst_then_frag),
                40,
                Problem::Fragment,
            ),
            (
                "IPv6 payload past the buffer",
                v6_cut,
                IPV6_HEADER,
                Problem::Truncated {
                    field: "IPv6 payload",
                    need: 11,
                    len: 50,
                },
            ),
            (
                "empty",
                vec![],
                0,
                Problem::Truncated {
                    field: "IP version",
                    need: 1,
                    len: 0,
                },
            ),
        ];
        for (why, packet, at, problem) in cases {
            assert_eq!(
                udp_datagram(&packet),
                Err(WireError { at, problem }),
                "{why}"
            );
        }
    }

    /// Known-good packets (checksums computed outside this code): a DNS reply of 45 bytes
    /// (odd, so the last byte is padded) over IPv4 and over IPv6.
    const KNOWN_V4: &str = "450000491c464000401100000a60000a0af401050035a028003533efbeef81800001000100000000076578616d706c6503636f6d0000010001c00c000100010000012c00045db8d70e";
    const KNOWN_V6: &str = "6000000000351140fd00001000960000000000000000000afd0000100244000100000000000000050035a02800354d46beef81800001000100000000076578616d706c6503636f6d0000010001c00c000100010000012c00045db8d70e";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn checksums_are_recomputed_in_place() {
        for (family, known, udp_at) in [
            ("IPv4", KNOWN_V4, IPV4_HEADER),
            ("IPv6", KNOWN_V6, IPV6_HEADER),
        ] {
            let good = hex(known);
            let at = udp_at + 6;
            // Whatever was there: a partial (pseudo-header only) sum, garbage, the good one.
            for stale in [[0x12, 0x34], [0xff, 0xff], [good[at], good[at + 1]]] {
                let mut packet = good.clone();
                packet[at..at + 2].copy_from_slice(&stale);
                fix_udp_checksum(&mut packet).unwrap();
                assert_eq!(packet, good, "{family}, stale checksum {stale:?}");
            }
        }
        let mut none = hex(KNOWN_V4);
        none[IPV4_HEADER + 6..IPV4_HEADER + 8].copy_from_slice(&[0, 0]);
        let before = none.clone();
        fix_udp_checksum(&mut none).unwrap();
        assert_eq!(none, before, "IPv4 without a checksum keeps none");
        let mut tcp = hex(KNOWN_V4);
        tcp[9] = 6;
        assert_eq!(
            fix_udp_checksum(&mut tcp),
            Err(WireError {
                at: 9,
                problem: Problem::NotUdp(6)
            })
        );
    }

    #[test]
    fn a_checksum_that_sums_to_zero_is_sent_as_all_ones() {
        // Payload chosen so that the sum of everything else is 0xffff: then the checksum
        // computes to 0 and must be sent as 0xffff.
        let mut packet = ipv6(UDP, &udp(&[0, 0]));
        let at = IPV6_HEADER + 6;
        fix_udp_checksum(&mut packet).unwrap();
        let c = u16::from_be_bytes([packet[at], packet[at + 1]]);
        // Put the complement into the payload word so the data sums to 0xffff (one's
        // complement zero), leaving a computed checksum of 0.
        packet[IPV6_HEADER + 8..IPV6_HEADER + 10].copy_from_slice(&c.to_be_bytes());
        fix_udp_checksum(&mut packet).unwrap();
        assert_eq!([packet[at], packet[at + 1]], [0xff, 0xff]);
    }

    /// xorshift64*: a small deterministic generator for the fuzz loop.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let seed = palisade_test_support::seed::seed(0x5eed_d115);
        let mut rng = Rng(seed | 1);
        let dns = compressed_chain();
        let seeds = [
            dns.clone(),
            ipv4(&[], UDP, 0, &udp(&dns)),
            ipv6(0, &[&[UDP, 0, 0, 0, 0, 0, 0, 0][..], &udp(&dns)].concat()),
        ];
        for round in 0..20_000 {
            let mut bytes = if round % 2 == 0 {
                (0..rng.below(300)).map(|_| rng.next() as u8).collect()
            } else {
                // A valid message or packet with a few bytes changed and maybe cut short.
                let mut b = seeds[rng.below(seeds.len())].clone();
                for _ in 0..=rng.below(4) {
                    let i = rng.below(b.len());
                    b[i] = rng.next() as u8;
                }
                b.truncate(rng.below(b.len() + 1));
                b
            };
            if round % 4 == 1 && !bytes.is_empty() {
                bytes[0] = if rng.below(2) == 0 { 0x45 } else { 0x60 };
            }
            let _ = parse_reply(&bytes);
            if let Ok(d) = udp_datagram(&bytes) {
                let _ = parse_reply(d.payload);
            }
            let _ = fix_udp_checksum(&mut bytes);
        }
    }
}
