//! A rule of the IR, and each rule of a base chain, as the nf_tables expressions `nft`
//! sends for its text (as `nft --debug=netlink` prints them), so that a rule loaded by
//! netlink lists exactly as the same rule loaded by `nft -f`.
//!
//! A list of prefixes or ports becomes an anonymous set, created in the same batch just
//! before its rule ([`anonymous_sets`]). A single prefix that does not end on a byte
//! boundary is the whole address under a mask, as `nft` writes it. The one form not
//! encoded ([`encodable`] is false) is a match on `/0` alone; such a rule goes through
//! `nft -f`.

use palisade_model::Protocol;

use crate::base::BaseChain;
use crate::ir::{Field, Match, Rule, Verdict, join_spans};
use crate::kernel::batch::{
    ANONYMOUS_NAME, Attrs, DATA_VALUE, Element, GOTO, JUMP, LIST_ELEM, TYPE_INET_SERVICE,
    TYPE_IPV4_ADDR, TYPE_IPV6_ADDR, octets, verdict,
};
use crate::render::LOG_GROUP;

// NFTA_EXPR_*, NFTA_META_*, NFTA_CMP_*, NFTA_PAYLOAD_*, NFTA_BITWISE_*, NFTA_LOOKUP_*,
// NFTA_LOG_*, NFTA_IMMEDIATE_*, NFTA_CT_*.
const EXPR_NAME: u16 = 1;
const EXPR_DATA: u16 = 2;
const META_DREG: u16 = 1;
const META_KEY: u16 = 2;
const CMP_SREG: u16 = 1;
const CMP_OP: u16 = 2;
const CMP_DATA: u16 = 3;
const PAYLOAD_DREG: u16 = 1;
const PAYLOAD_BASE: u16 = 2;
const PAYLOAD_OFFSET: u16 = 3;
const PAYLOAD_LEN: u16 = 4;
const BITWISE_SREG: u16 = 1;
const BITWISE_DREG: u16 = 2;
const BITWISE_LEN: u16 = 3;
const BITWISE_MASK: u16 = 4;
const BITWISE_XOR: u16 = 5;
const BITWISE_OP: u16 = 6;
const LOOKUP_SET: u16 = 1;
const LOOKUP_SREG: u16 = 2;
const LOOKUP_DREG: u16 = 3;
const LOOKUP_SET_ID: u16 = 4;
const LOOKUP_FLAGS: u16 = 5;
const LOG_GROUP_ATTR: u16 = 1;
const LOG_PREFIX: u16 = 2;
const IMMEDIATE_DREG: u16 = 1;
const IMMEDIATE_DATA: u16 = 2;
const CT_DREG: u16 = 1;
const CT_KEY: u16 = 2;

/// Register 1 (`NFT_REG_1`); register 0 holds the verdict.
const REG: u32 = 1;
/// The verdict register (`NFT_REG_VERDICT`).
const VERDICT_REG: u32 = 0;
/// Where the second part of a concatenation goes: after an IPv4 address, the next 32-bit
/// register (`NFT_REG32_01`); after an IPv6 address, the next 128-bit one (`NFT_REG_2`).
const CONCAT_REG_V4: u32 = 9;
const CONCAT_REG_V6: u32 = 2;
const NFT_CT_STATE: u32 = 0;
const NFT_META_NFPROTO: u32 = 15;
const NFT_META_L4PROTO: u32 = 16;
const NFT_PAYLOAD_NETWORK_HEADER: u32 = 1;
const NFT_PAYLOAD_TRANSPORT_HEADER: u32 = 2;
const NFT_CMP_EQ: u32 = 0;
const NFT_CMP_NEQ: u32 = 1;
const NFT_CMP_LTE: u32 = 3;
const NFT_CMP_GTE: u32 = 5;
const NFT_LOOKUP_F_INV: u32 = 1;
const NF_DROP: i32 = 0;
const NF_ACCEPT: i32 = 1;
const NFT_RETURN: i32 = -5;
const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;

/// Whether [`rule_expressions`] can encode `rule`.
pub(crate) fn encodable(rule: &Rule) -> bool {
    rule.matches.iter().all(|m| match m {
        Match::Addr { nets, .. } => match nets.as_slice() {
            [net] => net.prefix_len() > 0,
            _ => true,
        },
        _ => true,
    })
}

/// An anonymous set as `nft` creates it for a list in a rule.
pub(crate) struct AnonymousSet {
    /// nft's data type of the key (`ipv4_addr`, `ipv6_addr`, `inet_service`).
    pub key_type: u32,
    /// Bytes of the key.
    pub key_len: u32,
    /// Whether some element is a prefix or range (else each is one value).
    pub interval: bool,
    /// The elements as the kernel stores them.
    pub elements: Vec<Element>,
    /// nft's set user data: key byte order, for intervals "merge elements", and the
    /// header field the key is the type of, so that the rule lists as written.
    pub userdata: Vec<u8>,
}

/// The anonymous sets `rule`'s lists need, in the order of its matches.
pub(crate) fn anonymous_sets(rule: &Rule) -> Vec<AnonymousSet> {
    rule.matches
        .iter()
        .filter_map(|m| match m {
            Match::Addr {
                field, v6, nets, ..
            } if nets.len() > 1 => {
                let spans = nets
                    .iter()
                    .map(|n| (octets(n.network()), octets(n.broadcast())))
                    .collect();
                // nft's payload description and field of the address (`ip saddr` …).
                let (desc, ty) = match (v6, field) {
                    (false, Field::Saddr) => (0x0c, 0x0b),
                    (false, Field::Daddr) => (0x0c, 0x0c),
                    (true, Field::Saddr) => (0x0d, 0x08),
                    (true, Field::Daddr) => (0x0d, 0x09),
                };
                let (key_type, key_len) = if *v6 {
                    (TYPE_IPV6_ADDR, 16)
                } else {
                    (TYPE_IPV4_ADDR, 4)
                };
                Some(anonymous(key_type, key_len, spans, desc, ty))
            }
            Match::DPort(ranges) if ranges.len() > 1 => {
                let spans = ranges
                    .iter()
                    .map(|(lo, hi)| (lo.to_be_bytes().to_vec(), hi.to_be_bytes().to_vec()))
                    .collect();
                // `th dport`, of type `inet_service`.
                Some(anonymous(TYPE_INET_SERVICE, 2, spans, 0x0b, 0x02))
            }
            _ => None,
        })
        .collect()
}

/// The set of the inclusive `spans` of big-endian keys, for the header field that nft's
/// payload description `desc` and field number `field` name.
fn anonymous(
    key_type: u32,
    key_len: u32,
    mut spans: Vec<(Vec<u8>, Vec<u8>)>,
    desc: u8,
    field: u8,
) -> AnonymousSet {
    spans.sort();
    let interval = spans.iter().any(|(a, b)| a != b);
    let mut elements = Vec::new();
    if interval {
        if spans
            .first()
            .is_some_and(|(a, _)| a.iter().any(|&b| b != 0))
        {
            elements.push(Element::zero_end(key_len as usize));
        }
        for (first, last) in merged(&spans, key_len as usize) {
            elements.extend(Element::span(first, last));
        }
    } else {
        elements.extend(spans.into_iter().map(|(key, _)| Element::key(key)));
    }
    let mut userdata = vec![0, 4, 2, 0, 0, 0];
    if interval {
        userdata.extend([2, 4, 1, 0, 0, 0]);
    }
    userdata.extend([
        3, 0x14, 0, 4, 7, 0, 0, 0, 1, 0x0c, 0, 4, desc, 0, 0, 0, 1, 4, field, 0, 0, 0,
    ]);
    AnonymousSet {
        key_type,
        key_len,
        interval,
        elements,
        userdata,
    }
}

/// The expressions of an [`encodable`] rule (inside `NFTA_RULE_EXPRESSIONS`); `sets` are
/// the batch ids of its [`anonymous_sets`].
pub(crate) fn rule_expressions(list: &mut Attrs, rule: &Rule, sets: &[u32]) {
    // nft checks the network protocol once, before the first address of the rule.
    let mut family_checked = false;
    let mut sets = sets.iter();
    for m in &rule.matches {
        match m {
            Match::Addr {
                field,
                v6,
                nets,
                negate,
            } => {
                family(list, *v6, &mut family_checked);
                let op = if *negate { NFT_CMP_NEQ } else { NFT_CMP_EQ };
                match nets.as_slice() {
                    [net] if net.prefix_len() % 8 == 0 => {
                        let bytes = usize::from(net.prefix_len() / 8);
                        address(list, *field, *v6, bytes);
                        cmp(list, op, &octets(net.network())[..bytes]);
                    }
                    [net] => {
                        // The whole address, masked to the prefix.
                        let netmask = octets(net.netmask());
                        address(list, *field, *v6, netmask.len());
                        mask(list, &netmask);
                        cmp(list, op, &octets(net.network()));
                    }
                    _ => {
                        address(list, *field, *v6, if *v6 { 16 } else { 4 });
                        anonymous_lookup(list, sets.next(), *negate);
                    }
                }
            }
            Match::Set {
                field,
                v6,
                set,
                negate,
            } => {
                family(list, *v6, &mut family_checked);
                address(list, *field, *v6, if *v6 { 16 } else { 4 });
                expr(list, "lookup", |a| {
                    a.u32(LOOKUP_SREG, REG);
                    a.string(LOOKUP_SET, set);
                    if *negate {
                        a.u32(LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
                    }
                });
            }
            Match::Proto(p) => l4proto(list, *p),
            Match::DPort(ranges) => {
                payload(list, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
                match ranges.as_slice() {
                    [(lo, hi)] if lo == hi => cmp(list, NFT_CMP_EQ, &lo.to_be_bytes()),
                    [(lo, hi)] => {
                        cmp(list, NFT_CMP_GTE, &lo.to_be_bytes());
                        cmp(list, NFT_CMP_LTE, &hi.to_be_bytes());
                    }
                    _ => anonymous_lookup(list, sets.next(), false),
                }
            }
            Match::TcpWithoutSyn => {
                l4proto(list, Protocol::Tcp);
                payload(list, NFT_PAYLOAD_TRANSPORT_HEADER, 13, 1);
                // flags & (fin|syn|rst|ack) != syn
                mask(list, &[0x17]);
                cmp(list, NFT_CMP_NEQ, &[0x02]);
            }
        }
    }
    if let Some(id) = rule.log {
        expr(list, "counter", |_| {});
        expr(list, "log", |a| {
            a.string(LOG_PREFIX, &format!("pal-{id} "));
            a.bytes(LOG_GROUP_ATTR, &LOG_GROUP.to_be_bytes());
        });
    }
    let (code, chain) = match &rule.verdict {
        Verdict::Return => (NFT_RETURN, None),
        Verdict::Accept => (NF_ACCEPT, None),
        Verdict::Drop => (NF_DROP, None),
        Verdict::Goto(c) => (GOTO, Some(c.as_str())),
        Verdict::Jump(c) => (JUMP, Some(c.as_str())),
    };
    immediate_verdict(list, code, chain);
}

/// `ct state <bits> accept|drop`: the connection state, masked, is not zero.
pub(crate) fn ct_state(list: &mut Attrs, bits: u32, accept: bool) {
    expr(list, "ct", |a| {
        a.u32(CT_KEY, NFT_CT_STATE);
        a.u32(CT_DREG, REG);
    });
    // The state is a host-order 32-bit word.
    mask(list, &bits.to_ne_bytes());
    cmp(list, NFT_CMP_NEQ, &[0; 4]);
    immediate_verdict(list, if accept { NF_ACCEPT } else { NF_DROP }, None);
}

/// A base chain's dispatch for one family: `<key> . <peer> != @<exempt> <key> vmap
/// @<map>`.
pub(crate) fn dispatch(list: &mut Attrs, chain: &BaseChain, v6: bool) {
    let (key, peer) = chain.fields();
    let (exempt, map) = chain.dispatch(v6);
    let len = if v6 { 16 } else { 4 };
    family(list, v6, &mut false);
    address(list, key, v6, len);
    address_into(
        list,
        if v6 { CONCAT_REG_V6 } else { CONCAT_REG_V4 },
        peer,
        v6,
        len,
    );
    expr(list, "lookup", |a| {
        a.u32(LOOKUP_SREG, REG);
        a.string(LOOKUP_SET, exempt);
        a.u32(LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
    });
    address(list, key, v6, len);
    expr(list, "lookup", |a| {
        a.u32(LOOKUP_SREG, REG);
        a.string(LOOKUP_SET, map);
        a.u32(LOOKUP_DREG, VERDICT_REG);
    });
}

/// Sorted inclusive spans of big-endian keys of `len` bytes with the adjacent and
/// overlapping ones joined, as `nft` merges the elements of an anonymous interval set.
fn merged(spans: &[(Vec<u8>, Vec<u8>)], len: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let number = |key: &[u8]| key.iter().fold(0u128, |n, &b| (n << 8) | u128::from(b));
    let key = |n: u128| n.to_be_bytes()[16 - len..].to_vec();
    join_spans(
        spans
            .iter()
            .map(|(first, last)| (number(first), number(last))),
    )
    .into_iter()
    .map(|(a, b)| (key(a), key(b)))
    .collect()
}

/// `immediate reg 0 <verdict>`.
pub(crate) fn immediate_verdict(list: &mut Attrs, code: i32, chain: Option<&str>) {
    expr(list, "immediate", |a| {
        a.u32(IMMEDIATE_DREG, 0);
        a.nest(IMMEDIATE_DATA, |d| verdict(d, code, chain));
    });
}

/// `lookup` in the anonymous set of batch id `id`.
fn anonymous_lookup(list: &mut Attrs, id: Option<&u32>, negate: bool) {
    expr(list, "lookup", |a| {
        a.u32(LOOKUP_SREG, REG);
        a.string(LOOKUP_SET, ANONYMOUS_NAME);
        if let Some(&id) = id {
            a.u32(LOOKUP_SET_ID, id);
        }
        if negate {
            a.u32(LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
        }
    });
}

/// One expression: its name and its attributes.
fn expr(list: &mut Attrs, name: &str, data: impl FnOnce(&mut Attrs)) {
    list.nest(LIST_ELEM, |e| {
        e.string(EXPR_NAME, name);
        e.nest(EXPR_DATA, data);
    });
}

/// `meta nfproto ipv4|ipv6`, once per rule.
fn family(list: &mut Attrs, v6: bool, checked: &mut bool) {
    if std::mem::replace(checked, true) {
        return;
    }
    meta(list, NFT_META_NFPROTO);
    cmp(
        list,
        NFT_CMP_EQ,
        &[if v6 { NFPROTO_IPV6 } else { NFPROTO_IPV4 }],
    );
}

/// `meta l4proto <p>`.
fn l4proto(list: &mut Attrs, p: Protocol) {
    meta(list, NFT_META_L4PROTO);
    let number = match p {
        Protocol::Tcp => 6,
        Protocol::Udp => 17,
        Protocol::Sctp => 132,
    };
    cmp(list, NFT_CMP_EQ, &[number]);
}

/// The first `len` bytes of the source or destination address into the register.
fn address(list: &mut Attrs, field: Field, v6: bool, len: usize) {
    address_into(list, REG, field, v6, len);
}

/// [`address`] into register `dreg`.
fn address_into(list: &mut Attrs, dreg: u32, field: Field, v6: bool, len: usize) {
    let offset = match (v6, field) {
        (false, Field::Saddr) => 12,
        (false, Field::Daddr) => 16,
        (true, Field::Saddr) => 8,
        (true, Field::Daddr) => 24,
    };
    payload_into(list, dreg, NFT_PAYLOAD_NETWORK_HEADER, offset, len);
}

fn meta(list: &mut Attrs, key: u32) {
    expr(list, "meta", |a| {
        a.u32(META_KEY, key);
        a.u32(META_DREG, REG);
    });
}

fn payload(list: &mut Attrs, base: u32, offset: u32, len: usize) {
    payload_into(list, REG, base, offset, len);
}

/// [`payload`] into register `dreg`.
fn payload_into(list: &mut Attrs, dreg: u32, base: u32, offset: u32, len: usize) {
    expr(list, "payload", |a| {
        a.u32(PAYLOAD_DREG, dreg);
        a.u32(PAYLOAD_BASE, base);
        a.u32(PAYLOAD_OFFSET, offset);
        a.u32(PAYLOAD_LEN, u32::try_from(len).unwrap_or(u32::MAX));
    });
}

/// `bitwise reg 1 = (reg 1 & mask) ^ 0`.
fn mask(list: &mut Attrs, mask: &[u8]) {
    expr(list, "bitwise", |a| {
        a.u32(BITWISE_SREG, REG);
        a.u32(BITWISE_DREG, REG);
        a.u32(BITWISE_OP, 0);
        a.u32(BITWISE_LEN, u32::try_from(mask.len()).unwrap_or(u32::MAX));
        a.nest(BITWISE_MASK, |d| d.bytes(DATA_VALUE, mask));
        a.nest(BITWISE_XOR, |d| d.bytes(DATA_VALUE, &vec![0; mask.len()]));
    });
}

fn cmp(list: &mut Attrs, op: u32, value: &[u8]) {
    expr(list, "cmp", |a| {
        a.u32(CMP_SREG, REG);
        a.u32(CMP_OP, op);
        a.nest(CMP_DATA, |d| d.bytes(DATA_VALUE, value));
    });
}

#[cfg(test)]
mod tests {
    use super::encodable;
    use crate::ir::{Field, Match, Rule, Verdict};

    /// A single prefix goes by netlink whatever its length (masked when it does not end on
    /// a byte boundary), except `/0` alone.
    #[test]
    fn every_single_prefix_but_the_whole_space_is_encoded() {
        for (net, want) in [
            ("10.0.0.0/8", true),
            ("10.0.0.1/32", true),
            ("10.1.37.24/29", true),
            ("172.16.0.0/12", true),
            ("fd00:0:0:8::/61", true),
            ("0.0.0.0/0", false),
            ("::/0", false),
        ] {
            let nets = vec![net.parse().unwrap_or_else(|e| panic!("{net}: {e}"))];
            let rule = Rule {
                matches: vec![Match::Addr {
                    field: Field::Saddr,
                    v6: net.contains(':'),
                    nets,
                    negate: false,
                }],
                verdict: Verdict::Return,
                log: None,
            };
            assert_eq!(encodable(&rule), want, "{net}");
        }
    }
}
