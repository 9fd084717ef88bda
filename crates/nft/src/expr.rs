//! A rule of the IR as the nf_tables expressions `nft` sends for its text (as
//! `nft --debug=netlink` prints them), so that a rule loaded by netlink lists exactly as
//! the same rule loaded by `nft -f`.
//!
//! Only the forms that need no anonymous set are encoded: an address match on one prefix
//! of whole bytes, one port or one range. A rule with a list of prefixes or ports
//! ([`encodable`] is false) goes through `nft -f`.

use palisade_model::Protocol;

use crate::batch::{Attrs, DATA_VALUE, LIST_ELEM, octets, verdict};
use crate::ir::{Field, Match, Rule, Verdict};
use crate::render::LOG_GROUP;

// NFTA_EXPR_*, NFTA_META_*, NFTA_CMP_*, NFTA_PAYLOAD_*, NFTA_BITWISE_*, NFTA_LOOKUP_*,
// NFTA_LOG_*, NFTA_IMMEDIATE_*.
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
const LOOKUP_FLAGS: u16 = 5;
const LOG_GROUP_ATTR: u16 = 1;
const LOG_PREFIX: u16 = 2;
const IMMEDIATE_DREG: u16 = 1;
const IMMEDIATE_DATA: u16 = 2;

/// Register 1 (`NFT_REG_1`); register 0 holds the verdict.
const REG: u32 = 1;
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
const NFT_GOTO: i32 = -4;
const NFT_RETURN: i32 = -5;
const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;

/// Whether [`rule_expressions`] can encode `rule`.
pub(crate) fn encodable(rule: &Rule) -> bool {
    rule.matches.iter().all(|m| match m {
        Match::Addr { nets, .. } => {
            matches!(nets.as_slice(), [net] if net.prefix_len() > 0 && net.prefix_len() % 8 == 0)
        }
        Match::DPort(ranges) => ranges.len() == 1,
        Match::Set { .. } | Match::Proto(_) | Match::TcpWithoutSyn => true,
    })
}

/// The expressions of an [`encodable`] rule (inside `NFTA_RULE_EXPRESSIONS`).
pub(crate) fn rule_expressions(list: &mut Attrs, rule: &Rule) {
    // nft checks the network protocol once, before the first address of the rule.
    let mut family_checked = false;
    for m in &rule.matches {
        match m {
            Match::Addr {
                field,
                v6,
                nets,
                negate,
            } => {
                let Some(net) = nets.first() else { continue };
                family(list, *v6, &mut family_checked);
                let bytes = usize::from(net.prefix_len() / 8);
                address(list, *field, *v6, bytes);
                let key = octets(net.network());
                cmp(
                    list,
                    if *negate { NFT_CMP_NEQ } else { NFT_CMP_EQ },
                    &key[..bytes],
                );
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
                let Some(&(lo, hi)) = ranges.first() else {
                    continue;
                };
                payload(list, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
                if lo == hi {
                    cmp(list, NFT_CMP_EQ, &lo.to_be_bytes());
                } else {
                    cmp(list, NFT_CMP_GTE, &lo.to_be_bytes());
                    cmp(list, NFT_CMP_LTE, &hi.to_be_bytes());
                }
            }
            Match::TcpWithoutSyn => {
                l4proto(list, Protocol::Tcp);
                payload(list, NFT_PAYLOAD_TRANSPORT_HEADER, 13, 1);
                // flags & (fin|syn|rst|ack) != syn
                expr(list, "bitwise", |a| {
                    a.u32(BITWISE_SREG, REG);
                    a.u32(BITWISE_DREG, REG);
                    a.u32(BITWISE_OP, 0);
                    a.u32(BITWISE_LEN, 1);
                    a.nest(BITWISE_MASK, |d| d.bytes(DATA_VALUE, &[0x17]));
                    a.nest(BITWISE_XOR, |d| d.bytes(DATA_VALUE, &[0]));
                });
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
        Verdict::Drop => (NF_DROP, None),
        Verdict::Goto(c) => (NFT_GOTO, Some(c.as_str())),
    };
    immediate_verdict(list, code, chain);
}

/// `immediate reg 0 <verdict>`.
pub(crate) fn immediate_verdict(list: &mut Attrs, code: i32, chain: Option<&str>) {
    expr(list, "immediate", |a| {
        a.u32(IMMEDIATE_DREG, 0);
        a.nest(IMMEDIATE_DATA, |d| verdict(d, code, chain));
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
    let offset = match (v6, field) {
        (false, Field::Saddr) => 12,
        (false, Field::Daddr) => 16,
        (true, Field::Saddr) => 8,
        (true, Field::Daddr) => 24,
    };
    payload(list, NFT_PAYLOAD_NETWORK_HEADER, offset, len);
}

fn meta(list: &mut Attrs, key: u32) {
    expr(list, "meta", |a| {
        a.u32(META_KEY, key);
        a.u32(META_DREG, REG);
    });
}

fn payload(list: &mut Attrs, base: u32, offset: u32, len: usize) {
    expr(list, "payload", |a| {
        a.u32(PAYLOAD_DREG, REG);
        a.u32(PAYLOAD_BASE, base);
        a.u32(PAYLOAD_OFFSET, offset);
        a.u32(PAYLOAD_LEN, u32::try_from(len).unwrap_or(u32::MAX));
    });
}

fn cmp(list: &mut Attrs, op: u32, value: &[u8]) {
    expr(list, "cmp", |a| {
        a.u32(CMP_SREG, REG);
        a.u32(CMP_OP, op);
        a.nest(CMP_DATA, |d| d.bytes(DATA_VALUE, value));
    });
}
