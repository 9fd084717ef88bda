//! One nf_tables transaction sent over netlink: the stages of a first load (the table and
//! its declarations, elements, rules, the base chains), and the parts of an update that
//! change objects the kernel already holds (set and map elements, class entry chains, the
//! deletion of what is no longer used); and the one request that asks whether the table
//! exists.
//!
//! `nft -f` first reads the table back from the kernel, and any element command makes
//! nftables 1.0 read the elements of every interval set: at 10,000 pods that read, not the
//! change, costs hundreds of milliseconds. A batch needs no read. The messages are the ones
//! `nft` itself sends for the same commands (`nft --debug=netlink` shows them), framed by
//! `NFNL_MSG_BATCH_BEGIN`/`END`, so the kernel applies all of them or none.

use std::io;
use std::net::IpAddr;

use netlink_packet_core::NetlinkPayload;

use crate::base::{BaseChain, ESTABLISHED_RELATED, INVALID, PRIORITY_FILTER};
use crate::ir::{AddrRange, NamedSet, Rule};
use crate::kernel::error::KernelError;
use crate::kernel::expr;
use crate::kernel::netlink::{netfilter_messages, socket};
use crate::render::{TABLE, rule_text};

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFPROTO_INET: u8 = 1;

const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_GETTABLE: u16 = 1;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_DELCHAIN: u16 = 5;
const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_DELRULE: u16 = 8;
const NFT_MSG_NEWSET: u16 = 9;
const NFT_MSG_DELSET: u16 = 11;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;

const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_APPEND: u16 = 0x800;
const NLA_F_NESTED: u16 = 0x8000;

/// What a failed [`Batch::send`] was doing.
const BATCH: &str = "an nf_tables netlink batch";

/// `NFTA_LIST_ELEM`, the one attribute of list nests.
pub(crate) const LIST_ELEM: u16 = 1;
// NFTA_TABLE_*, NFTA_CHAIN_*, NFTA_HOOK_*, NFTA_RULE_*, NFTA_SET_*, NFTA_SET_ELEM_LIST_*.
const TABLE_NAME: u16 = 1;
const TABLE_FLAGS: u16 = 2;
const CHAIN_TABLE: u16 = 1;
const CHAIN_NAME: u16 = 3;
const CHAIN_HOOK: u16 = 4;
const CHAIN_POLICY: u16 = 5;
const CHAIN_TYPE: u16 = 7;
const HOOK_NUMBER: u16 = 1;
const HOOK_PRIORITY: u16 = 2;
/// `NF_ACCEPT`, a base chain's policy.
const POLICY_ACCEPT: u32 = 1;
const RULE_TABLE: u16 = 1;
const RULE_CHAIN: u16 = 2;
const RULE_EXPRESSIONS: u16 = 4;
const SET_TABLE: u16 = 1;
const SET_NAME: u16 = 2;
const SET_FLAGS: u16 = 3;
const SET_KEY_TYPE: u16 = 4;
const SET_KEY_LEN: u16 = 5;
const SET_DATA_TYPE: u16 = 6;
const SET_DATA_LEN: u16 = 7;
const SET_ID: u16 = 10;
const SET_USERDATA: u16 = 13;
/// `NFT_SET_INTERVAL`, `NFT_SET_MAP`.
const SET_INTERVAL: u32 = 4;
const SET_MAP: u32 = 8;
/// `NFT_SET_TIMEOUT`: elements may carry a timeout.
const SET_TIMEOUT: u32 = 0x10;
/// The data type of a verdict map (`NFT_DATA_VERDICT`).
const DATA_TYPE_VERDICT: u32 = 0xffff_ff00;
/// nft's data types `ipv4_addr`, `ipv6_addr` and `inet_service`.
pub(crate) const TYPE_IPV4_ADDR: u32 = 7;
pub(crate) const TYPE_IPV6_ADDR: u32 = 8;
pub(crate) const TYPE_INET_SERVICE: u32 = 13;
/// nft's set user data `NFTNL_UDATA_SET_KEYBYTEORDER` = `BYTEORDER_BIG_ENDIAN` (type,
/// length, host-order u32), as nft writes it for address sets.
const ADDRESS_SET_USERDATA: [u8; 6] = [0, 4, 2, 0, 0, 0];
/// The user data nft writes for `type ipv4_addr : verdict` (and IPv6): key and data byte
/// order, and that the data is not an interval.
const VERDICT_MAP_USERDATA: [u8; 18] = [0, 4, 2, 0, 0, 0, 1, 4, 0, 0, 0, 0, 6, 4, 0, 0, 0, 0];
/// The user data nft writes for `type ipv4_addr . ipv4_addr` (and IPv6), as nftables 1.0
/// sends it (`nft --debug=mnl`).
const ADDRESS_PAIR_USERDATA: [u8; 16] = [0, 4, 0, 0, 0, 0, 3, 8, 0, 4, 13, 0, 0, 0, 1, 0];
const ELEM_LIST_TABLE: u16 = 1;
const ELEM_LIST_SET: u16 = 2;
const ELEM_LIST_ELEMENTS: u16 = 3;
const ELEM_LIST_SET_ID: u16 = 4;
const SET_DESC: u16 = 9;
const SET_DESC_SIZE: u16 = 1;
/// `NFT_SET_ANONYMOUS | NFT_SET_CONSTANT`.
const SET_ANONYMOUS_CONSTANT: u32 = 1 | 2;
/// The name the kernel numbers (`__set0`, `__set1`, …) for an anonymous set.
pub(crate) const ANONYMOUS_NAME: &str = "__set%d";
// NFTA_SET_ELEM_*.
const ELEM_KEY: u16 = 1;
const ELEM_DATA: u16 = 2;
const ELEM_FLAGS: u16 = 3;
const ELEM_TIMEOUT: u16 = 4;
const ELEM_USERDATA: u16 = 6;
/// `NFT_SET_ELEM_INTERVAL_END`.
const INTERVAL_END: u32 = 1;
/// nft's element user data `NFTNL_UDATA_SET_ELEM_FLAGS` = `NFTNL_SET_ELEM_F_INTERVAL_OPEN`
/// (type, length, host-order u32): an interval that runs to the end of the address space,
/// so `nft list` prints it as a prefix.
const OPEN_INTERVAL_USERDATA: [u8; 6] = [1, 4, 1, 0, 0, 0];
// NFTA_DATA_*, NFTA_VERDICT_*.
pub(crate) const DATA_VALUE: u16 = 1;
const DATA_VERDICT: u16 = 2;
const VERDICT_CODE: u16 = 1;
const VERDICT_CHAIN: u16 = 2;
/// `NFT_JUMP` and `NFT_GOTO` (negative verdict codes, sent as big-endian 32-bit).
pub(crate) const JUMP: i32 = -3;
pub(crate) const GOTO: i32 = -4;
/// Elements per message: a nest's length is 16 bits.
const ELEMENTS_PER_MESSAGE: usize = 256;

/// One set or map element as the kernel stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Element {
    key: Vec<u8>,
    /// The end of an interval (the first key after it).
    end: bool,
    /// An interval that runs to the end of the address space (it has no end element).
    open: bool,
    /// A map element's verdict: jump to this chain.
    jump: Option<String>,
    /// The element's timeout, in milliseconds (a set with `flags timeout`).
    timeout_ms: Option<u64>,
}

impl Element {
    pub fn key(key: Vec<u8>) -> Self {
        Element {
            key,
            end: false,
            open: false,
            jump: None,
            timeout_ms: None,
        }
    }

    /// A host address that the kernel removes after `timeout`.
    pub fn expiring(ip: IpAddr, timeout: std::time::Duration) -> Self {
        Element::host(ip).with_timeout(timeout)
    }

    /// This element, removed by the kernel after `timeout` (a set with `flags timeout`).
    pub fn with_timeout(self, timeout: std::time::Duration) -> Self {
        Element {
            timeout_ms: Some(
                u64::try_from(timeout.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
            ),
            ..self
        }
    }

    /// A host address of a hash set.
    pub fn host(ip: IpAddr) -> Self {
        Element::key(octets(ip))
    }

    /// A map element: `ip : jump chain`.
    pub fn jump(ip: IpAddr, chain: &str) -> Self {
        Element {
            jump: Some(chain.to_string()),
            ..Element::host(ip)
        }
    }

    /// A concatenation `a . b` (both of one family; each part fills whole 32-bit
    /// registers, so no padding).
    pub fn pair(a: IpAddr, b: IpAddr) -> Self {
        let mut key = octets(a);
        key.extend(octets(b));
        Element::key(key)
    }

    /// The elements of `ranges` in `set` (an interval set stores each range as its start
    /// and the address after it); none for a learned set, whose elements the agent adds.
    pub fn of_set(set: &NamedSet, ranges: &[AddrRange]) -> Vec<Self> {
        if set.learned.is_some() {
            Vec::new()
        } else if set.interval {
            ranges
                .iter()
                .flat_map(|r| Element::span(octets(r.first), octets(r.last)))
                .collect()
        } else {
            ranges.iter().map(|r| Element::host(r.first)).collect()
        }
    }

    /// The inclusive range `first..=last` of big-endian keys in an interval set: its
    /// first key, and the key after its last unless it runs to the end of the key space.
    pub fn span(first: Vec<u8>, mut after: Vec<u8>) -> Vec<Self> {
        // Big-endian increment; a carry out of the top byte means there is no "after".
        let carry = after.iter_mut().rev().all(|b| {
            let (v, overflow) = b.overflowing_add(1);
            *b = v;
            overflow
        });
        if carry {
            return vec![Element {
                open: true,
                ..Element::key(first)
            }];
        }
        vec![
            Element::key(first),
            Element {
                end: true,
                ..Element::key(after)
            },
        ]
    }

    /// The end of an interval that ends before `key`'s first value: `nft` opens an
    /// anonymous interval set with it when the set does not start at zero.
    pub fn zero_end(len: usize) -> Self {
        Element {
            end: true,
            ..Element::key(vec![0; len])
        }
    }
}

pub(crate) fn octets(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// A transaction under construction: messages between a batch begin and a batch end.
pub(crate) struct Batch {
    buf: Vec<u8>,
    /// Sequence numbers of the nf_tables messages, with what each does (for errors).
    messages: Vec<(u32, String)>,
}

impl Batch {
    /// An empty transaction.
    pub fn new() -> Self {
        let mut b = Batch {
            buf: Vec::new(),
            messages: Vec::new(),
        };
        b.header(
            NFNL_MSG_BATCH_BEGIN,
            NLM_F_REQUEST,
            0,
            0,
            NFNL_SUBSYS_NFTABLES,
        );
        b
    }

    /// No message yet.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The bytes of its messages so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Deletes `elements` from the set or map `set`.
    pub fn delete_elements(&mut self, set: &str, elements: &[Element]) {
        self.elements(NFT_MSG_DELSETELEM, 0, "delete element", set, elements);
    }

    /// Adds `elements` to the set or map `set`.
    pub fn add_elements(&mut self, set: &str, elements: &[Element]) {
        self.add_elements_in(table_name(), set, elements);
    }

    /// Adds `elements` to the set `set` of another `inet` table, `table` (`inet NAME`).
    pub fn add_elements_in(&mut self, table: &str, set: &str, elements: &[Element]) {
        self.elements_in(
            table,
            (NFT_MSG_NEWSETELEM, NLM_F_CREATE),
            "add element",
            set,
            elements,
        );
    }

    fn elements(&mut self, ty: u16, flags: u16, verb: &str, set: &str, elements: &[Element]) {
        self.elements_in(TABLE, (ty, flags), verb, set, elements);
    }

    fn elements_in(
        &mut self,
        table: &str,
        (ty, flags): (u16, u16),
        verb: &str,
        set: &str,
        elements: &[Element],
    ) {
        for chunk in elements.chunks(ELEMENTS_PER_MESSAGE) {
            self.message(ty, flags, format!("{verb} {table} {set}"), |m| {
                m.string(ELEM_LIST_TABLE, name_of(table));
                m.string(ELEM_LIST_SET, set);
                m.nest(ELEM_LIST_ELEMENTS, |list| {
                    for e in chunk {
                        list.nest(LIST_ELEM, |a| element(a, e));
                    }
                });
            });
        }
    }

    /// Deletes every rule of `chain`.
    pub fn flush_chain(&mut self, chain: &str) {
        self.message(
            NFT_MSG_DELRULE,
            0,
            format!("flush chain {TABLE} {chain}"),
            |m| {
                m.string(RULE_TABLE, table_name());
                m.string(RULE_CHAIN, chain);
            },
        );
    }

    /// Creates the (empty) address set `set` as `nft` does for `add set` with its type and
    /// flags; its elements are added separately.
    pub fn add_set(&mut self, set: &NamedSet) {
        self.new_set(
            format!("add set {TABLE} {}", set.name),
            &set.name,
            SetKind {
                flags: if set.interval { SET_INTERVAL } else { 0 }
                    | if set.learned.is_some() {
                        SET_TIMEOUT
                    } else {
                        0
                    },
                userdata: &ADDRESS_SET_USERDATA,
                ..SetKind::addresses(set.v6)
            },
        );
    }

    /// Creates and fills an anonymous set for one rule, as `nft` does for a list in a
    /// rule's text; returns its id in this batch, by which the rule's lookup names it.
    pub fn anonymous_set(&mut self, set: &expr::AnonymousSet) -> u32 {
        let what = format!("anonymous set of {} elements", set.elements.len());
        let id = self.new_set(
            what.clone(),
            ANONYMOUS_NAME,
            SetKind {
                flags: SET_ANONYMOUS_CONSTANT | if set.interval { SET_INTERVAL } else { 0 },
                key_type: set.key_type,
                key_len: set.key_len,
                verdicts: false,
                size: Some(u32::try_from(set.elements.len()).unwrap_or(u32::MAX)),
                userdata: &set.userdata,
            },
        );
        for chunk in set.elements.chunks(ELEMENTS_PER_MESSAGE) {
            self.message(NFT_MSG_NEWSETELEM, NLM_F_CREATE, what.clone(), |m| {
                m.string(ELEM_LIST_TABLE, table_name());
                m.string(ELEM_LIST_SET, ANONYMOUS_NAME);
                m.u32(ELEM_LIST_SET_ID, id);
                m.nest(ELEM_LIST_ELEMENTS, |list| {
                    for e in chunk {
                        list.nest(LIST_ELEM, |a| element(a, e));
                    }
                });
            });
        }
        id
    }

    /// Creates the table, refused (with the whole batch) where it exists: nft's `create
    /// table`.
    pub fn create_table(&mut self) {
        self.message(
            NFT_MSG_NEWTABLE,
            NLM_F_CREATE | NLM_F_EXCL,
            format!("create table {TABLE}"),
            |m| {
                m.string(TABLE_NAME, table_name());
                m.u32(TABLE_FLAGS, 0);
            },
        );
    }

    /// Creates the (empty) verdict map `map` keyed by addresses of one family, as `nft`
    /// does for `add map … { type ipv4_addr : verdict; }`.
    pub fn add_verdict_map(&mut self, map: &str, v6: bool) {
        self.new_set(
            format!("add map {TABLE} {map}"),
            map,
            SetKind {
                flags: SET_MAP,
                verdicts: true,
                userdata: &VERDICT_MAP_USERDATA,
                ..SetKind::addresses(v6)
            },
        );
    }

    /// Creates the (empty) set `set` of address pairs of one family, as `nft` does for
    /// `add set … { type ipv4_addr . ipv4_addr; }`.
    pub fn add_pair_set(&mut self, set: &str, v6: bool) {
        let one = SetKind::addresses(v6);
        self.new_set(
            format!("add set {TABLE} {set}"),
            set,
            SetKind {
                // nft's concatenated type: each part's type, 6 bits apiece.
                key_type: (one.key_type << 6) | one.key_type,
                key_len: 2 * one.key_len,
                userdata: &ADDRESS_PAIR_USERDATA,
                ..one
            },
        );
    }

    /// `NFT_MSG_NEWSET` for the set `name` of `kind`; returns its id in this batch.
    fn new_set(&mut self, what: String, name: &str, kind: SetKind<'_>) -> u32 {
        let id = self.next_seq();
        self.message(NFT_MSG_NEWSET, NLM_F_CREATE, what, |m| {
            m.string(SET_TABLE, table_name());
            m.string(SET_NAME, name);
            m.u32(SET_FLAGS, kind.flags);
            m.u32(SET_KEY_TYPE, kind.key_type);
            m.u32(SET_KEY_LEN, kind.key_len);
            if kind.verdicts {
                m.u32(SET_DATA_TYPE, DATA_TYPE_VERDICT);
                m.u32(SET_DATA_LEN, 0);
            }
            m.u32(SET_ID, id);
            if let Some(size) = kind.size {
                m.nest(SET_DESC, |d| d.u32(SET_DESC_SIZE, size));
            }
            m.bytes(SET_USERDATA, kind.userdata);
        });
        id
    }

    /// Creates the base chain `chain` with its rules (see `base.rs`).
    pub fn add_base_chain(&mut self, chain: &BaseChain) {
        let name = chain.name;
        let hook = chain.hook;
        self.message(
            NFT_MSG_NEWCHAIN,
            NLM_F_CREATE,
            format!("add chain {TABLE} {name} (hook {})", hook.name()),
            |m| {
                m.string(CHAIN_TABLE, table_name());
                m.string(CHAIN_NAME, name);
                m.string(CHAIN_TYPE, "filter");
                m.u32(CHAIN_POLICY, POLICY_ACCEPT);
                m.nest(CHAIN_HOOK, |h| {
                    h.u32(HOOK_NUMBER, hook.number());
                    h.u32(HOOK_PRIORITY, PRIORITY_FILTER as u32);
                });
            },
        );
        let what = |rule: &str| format!("add rule {TABLE} {name} {rule}");
        self.new_rule(name, what("ct state established,related accept"), |l| {
            expr::ct_state(l, ESTABLISHED_RELATED, true);
        });
        self.new_rule(name, what("ct state invalid drop"), |l| {
            expr::ct_state(l, INVALID, false);
        });
        for v6 in [false, true] {
            let (_, map) = chain.dispatch(v6);
            self.new_rule(name, what(&format!("… vmap @{map}")), |l| {
                expr::dispatch(l, chain, v6);
            });
        }
    }

    /// Creates the (regular, empty) chain `chain`.
    pub fn add_chain(&mut self, chain: &str) {
        self.message(
            NFT_MSG_NEWCHAIN,
            NLM_F_CREATE,
            format!("add chain {TABLE} {chain}"),
            |m| {
                m.string(CHAIN_TABLE, table_name());
                m.string(CHAIN_NAME, chain);
            },
        );
    }

    /// Appends `rule` to `chain` (after the anonymous sets its lists need); `rule` must
    /// be [`expr::encodable`].
    pub fn add_rule(&mut self, chain: &str, rule: &Rule) {
        let ids: Vec<u32> = expr::anonymous_sets(rule)
            .iter()
            .map(|set| self.anonymous_set(set))
            .collect();
        let what = format!("add rule {TABLE} {chain} {}", rule_text(rule));
        self.new_rule(chain, what, |list| expr::rule_expressions(list, rule, &ids));
    }

    fn new_rule(&mut self, chain: &str, what: String, expressions: impl FnOnce(&mut Attrs)) {
        self.message(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, what, |m| {
            m.string(RULE_TABLE, table_name());
            m.string(RULE_CHAIN, chain);
            m.nest(RULE_EXPRESSIONS, expressions);
        });
    }

    /// Deletes the (empty, unreferenced) chain `chain`.
    pub fn delete_chain(&mut self, chain: &str) {
        self.message(
            NFT_MSG_DELCHAIN,
            0,
            format!("delete chain {TABLE} {chain}"),
            |m| {
                m.string(CHAIN_TABLE, table_name());
                m.string(CHAIN_NAME, chain);
            },
        );
    }

    /// Deletes the (unreferenced) set `set`.
    pub fn delete_set(&mut self, set: &str) {
        self.message(
            NFT_MSG_DELSET,
            0,
            format!("delete set {TABLE} {set}"),
            |m| {
                m.string(SET_TABLE, table_name());
                m.string(SET_NAME, set);
            },
        );
    }

    /// The datagram: the messages between a batch begin and a batch end.
    pub fn bytes(mut self) -> (Vec<u8>, Vec<(u32, String)>) {
        let seq = self.next_seq();
        self.header(
            NFNL_MSG_BATCH_END,
            NLM_F_REQUEST,
            seq,
            0,
            NFNL_SUBSYS_NFTABLES,
        );
        (self.buf, self.messages)
    }

    /// Sends the transaction to the kernel (in `netns` when given) and waits for every
    /// message's acknowledgement: `Ok` when the kernel committed all of it.
    pub fn send(self, netns: Option<&str>) -> Result<(), KernelError> {
        let (datagram, messages) = self.bytes();
        let io_err = |e: io::Error| KernelError::io(BATCH, e);
        let socket = socket(netns).map_err(io_err)?;
        // The whole transaction is one datagram, and every message is acknowledged: make
        // room for both (forced as root, else up to the system's limits).
        let send_room = datagram.len() + 64 * 1024;
        let recv_room = (messages.len() + 16) * 1024;
        if rustix::net::sockopt::set_socket_send_buffer_size_force(&socket, send_room).is_err() {
            rustix::net::sockopt::set_socket_send_buffer_size(&socket, send_room)
                .map_err(|e| io_err(e.into()))?;
        }
        if rustix::net::sockopt::set_socket_recv_buffer_size_force(&socket, recv_room).is_err() {
            rustix::net::sockopt::set_socket_recv_buffer_size(&socket, recv_room)
                .map_err(|e| io_err(e.into()))?;
        }
        socket.send(&datagram, 0).map_err(io_err)?;
        // The kernel handles the batch while `send` runs; every reply is queued by now.
        socket.set_non_blocking(true).map_err(io_err)?;
        let mut acked = 0;
        let mut refused = Vec::new();
        let mut recv = vec![0u8; 64 * 1024];
        loop {
            let n = match socket.recv(&mut &mut recv[..], 0) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(io_err(e)),
            };
            for m in netfilter_messages(&recv[..n.min(recv.len())]) {
                let m = m.map_err(|e| io_err(io::Error::other(e)))?;
                let NetlinkPayload::Error(e) = m.payload else {
                    continue;
                };
                match e.code {
                    None => acked += 1,
                    Some(code) => {
                        let seq = m.header.sequence_number;
                        let what = messages
                            .iter()
                            .find(|(s, _)| *s == seq)
                            .map_or("the batch", |(_, w)| w.as_str());
                        let errno = io::Error::from_raw_os_error(-code.get());
                        refused.push(format!("{what}: {errno}"));
                    }
                }
            }
        }
        // Closing the socket waits for the kernel to free what the transaction replaced
        // (an RCU grace period, milliseconds); the transaction is in force already.
        std::thread::spawn(move || drop(socket));
        if !refused.is_empty() {
            return Err(KernelError::rejected(BATCH, refused.join("; ")));
        }
        if acked != messages.len() {
            return Err(KernelError::rejected(
                BATCH,
                format!(
                    "the kernel acknowledged {acked} of the batch's {} messages",
                    messages.len()
                ),
            ));
        }
        Ok(())
    }

    fn next_seq(&self) -> u32 {
        u32::try_from(self.messages.len() + 1).unwrap_or(u32::MAX)
    }

    /// One nf_tables message of the `inet` family, acknowledged.
    fn message(&mut self, ty: u16, flags: u16, what: String, attrs: impl FnOnce(&mut Attrs)) {
        let seq = self.next_seq();
        let start = self.header(
            (NFNL_SUBSYS_NFTABLES << 8) | ty,
            NLM_F_REQUEST | NLM_F_ACK | flags,
            seq,
            NFPROTO_INET,
            0,
        );
        attrs(&mut Attrs(&mut self.buf));
        let len = u32::try_from(self.buf.len() - start).unwrap_or(u32::MAX);
        self.buf[start..start + 4].copy_from_slice(&len.to_ne_bytes());
        self.messages.push((seq, what));
    }

    /// `nlmsghdr` and `nfgenmsg`; returns where the message starts (its length is
    /// written once known, for the batch markers right away).
    fn header(&mut self, ty: u16, flags: u16, seq: u32, family: u8, res_id: u16) -> usize {
        let start = self.buf.len();
        self.buf.extend(20u32.to_ne_bytes());
        self.buf.extend(ty.to_ne_bytes());
        self.buf.extend(flags.to_ne_bytes());
        self.buf.extend(seq.to_ne_bytes());
        self.buf.extend(0u32.to_ne_bytes()); // port id: the kernel
        self.buf.extend([family, 0]); // NFNETLINK_V0
        self.buf.extend(res_id.to_be_bytes());
        start
    }
}

/// Whether the namespace (`netns` when given) has the `inet palisade` table: one
/// `NFT_MSG_GETTABLE` request, answered with the table or with `ENOENT`.
pub(crate) fn table_exists(netns: Option<&str>) -> Result<bool, KernelError> {
    let io_err = |e: io::Error| KernelError::io("an nf_tables netlink request", e);
    let mut request = Batch {
        buf: Vec::new(),
        messages: Vec::new(),
    };
    request.message(NFT_MSG_GETTABLE, 0, format!("get table {TABLE}"), |m| {
        m.string(TABLE_NAME, table_name());
    });
    let socket = socket(netns).map_err(io_err)?;
    socket.send(&request.buf, 0).map_err(io_err)?;
    let mut recv = vec![0u8; 64 * 1024];
    let n = socket.recv(&mut &mut recv[..], 0).map_err(io_err)?;
    // The first reply decides: the table itself (its acknowledgement follows), or an error.
    let reply = netfilter_messages(&recv[..n.min(recv.len())]).next();
    let Some(Ok(NetlinkPayload::Error(e))) = reply.map(|m| m.map(|m| m.payload)) else {
        return Ok(true);
    };
    match e.code {
        None => Ok(true),
        Some(code) => {
            let errno = io::Error::from_raw_os_error(-code.get());
            match errno.kind() {
                io::ErrorKind::NotFound => Ok(false),
                io::ErrorKind::PermissionDenied => Err(KernelError::io(
                    format!("`nft list table {TABLE}` (needs root or CAP_NET_ADMIN)"),
                    errno,
                )),
                _ => Err(KernelError::io(format!("`nft list table {TABLE}`"), errno)),
            }
        }
    }
}

/// What `NFT_MSG_NEWSET` declares of a set besides its name, as `nft` sends it.
struct SetKind<'u> {
    /// `NFT_SET_*` flags.
    flags: u32,
    /// nft's data type of the key.
    key_type: u32,
    /// Bytes of the key.
    key_len: u32,
    /// A verdict map (else a set).
    verdicts: bool,
    /// The number of elements, which nft gives for an anonymous set.
    size: Option<u32>,
    /// nft's user data (how `nft list` prints the set).
    userdata: &'u [u8],
}

impl SetKind<'_> {
    /// A set of addresses of one family, without flags.
    fn addresses(v6: bool) -> Self {
        SetKind {
            flags: 0,
            key_type: if v6 { TYPE_IPV6_ADDR } else { TYPE_IPV4_ADDR },
            key_len: if v6 { 16 } else { 4 },
            verdicts: false,
            size: None,
            userdata: &[],
        }
    }
}

/// `palisade` of `inet palisade`.
fn table_name() -> &'static str {
    name_of(TABLE)
}

/// The name of a table written `family name`.
fn name_of(table: &str) -> &str {
    table.split_once(' ').map_or(table, |(_, name)| name)
}

/// A verdict nest (`NFTA_DATA_VERDICT`): code, and the target chain of a jump or goto.
pub(crate) fn verdict(d: &mut Attrs, code: i32, chain: Option<&str>) {
    d.nest(DATA_VERDICT, |v| {
        v.u32(VERDICT_CODE, code as u32);
        if let Some(chain) = chain {
            v.string(VERDICT_CHAIN, chain);
        }
    });
}

/// One element's attributes.
fn element(a: &mut Attrs, e: &Element) {
    a.nest(ELEM_KEY, |k| k.bytes(DATA_VALUE, &e.key));
    if e.end {
        a.u32(ELEM_FLAGS, INTERVAL_END);
    }
    if let Some(chain) = &e.jump {
        a.nest(ELEM_DATA, |d| verdict(d, JUMP, Some(chain)));
    }
    if e.open {
        a.bytes(ELEM_USERDATA, &OPEN_INTERVAL_USERDATA);
    }
    if let Some(ms) = e.timeout_ms {
        a.bytes(ELEM_TIMEOUT, &ms.to_be_bytes());
    }
}

/// Netlink attributes appended to a message.
pub(crate) struct Attrs<'b>(&'b mut Vec<u8>);

impl Attrs<'_> {
    pub(crate) fn bytes(&mut self, ty: u16, value: &[u8]) {
        let len = u16::try_from(4 + value.len()).unwrap_or(u16::MAX);
        self.0.extend(len.to_ne_bytes());
        self.0.extend(ty.to_ne_bytes());
        self.0.extend(value);
        self.pad();
    }

    /// A NUL-terminated string.
    pub(crate) fn string(&mut self, ty: u16, s: &str) {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        self.bytes(ty, &v);
    }

    /// A big-endian 32-bit number (nf_tables' integers).
    pub(crate) fn u32(&mut self, ty: u16, v: u32) {
        self.bytes(ty, &v.to_be_bytes());
    }

    pub(crate) fn nest(&mut self, ty: u16, inner: impl FnOnce(&mut Attrs)) {
        let start = self.0.len();
        self.0.extend([0, 0]);
        self.0.extend((ty | NLA_F_NESTED).to_ne_bytes());
        inner(&mut Attrs(self.0));
        let len = u16::try_from(self.0.len() - start).unwrap_or(u16::MAX);
        self.0[start..start + 2].copy_from_slice(&len.to_ne_bytes());
    }

    fn pad(&mut self) {
        let n = self.0.len().next_multiple_of(4);
        self.0.resize(n, 0);
    }
}

#[cfg(test)]
mod tests {
    use ipnet::IpNet;

    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// A prefix's elements in an interval set.
    fn interval(p: &str) -> Vec<Element> {
        let n = net(p);
        Element::span(octets(n.network()), octets(n.broadcast()))
    }

    #[test]
    fn a_prefix_is_its_start_and_the_address_after_it() {
        let e = interval("10.0.0.0/8");
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].key.as_slice(), e[0].end), (&[10, 0, 0, 0][..], false));
        assert_eq!((e[1].key.as_slice(), e[1].end), (&[11, 0, 0, 0][..], true));
        let host = interval("1.2.3.255/32");
        assert_eq!(host[1].key, vec![1, 2, 4, 0]);
    }

    #[test]
    fn a_prefix_reaching_the_top_of_the_address_space_is_open() {
        for p in ["0.0.0.0/0", "255.0.0.0/8", "ffff::/16", "::/0"] {
            let e = interval(p);
            assert_eq!(e.len(), 1, "{p}");
            assert!(e[0].open && !e[0].end, "{p}");
        }
    }

    #[test]
    fn a_batch_is_framed_and_every_length_is_right() {
        let mut b = Batch::new();
        b.add_elements(
            "egress4",
            &[Element::jump(IpAddr::from([10, 0, 0, 1]), "eabc")],
        );
        b.flush_chain("eabc");
        b.add_rule(
            "eabc",
            &Rule {
                matches: vec![],
                verdict: crate::ir::Verdict::Goto("axyz".into()),
                log: None,
            },
        );
        let (bytes, messages) = b.bytes();
        assert_eq!(messages.len(), 3);
        // Walk the messages by their lengths: begin, three, end, nothing left over.
        let mut rest = bytes.as_slice();
        let mut types = Vec::new();
        while !rest.is_empty() {
            let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            types.push(u16::from_ne_bytes([rest[4], rest[5]]));
            assert!(
                len >= 20 && len.is_multiple_of(4) && len <= rest.len(),
                "{len}"
            );
            rest = &rest[len..];
        }
        assert_eq!(
            types,
            vec![
                NFNL_MSG_BATCH_BEGIN,
                (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSETELEM,
                (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELRULE,
                (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE,
                NFNL_MSG_BATCH_END
            ]
        );
    }

    #[test]
    fn a_table_is_found_only_where_it_exists() {
        use std::process::Command;
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if !root {
            eprintln!("skipped: needs root for a network namespace");
            return;
        }
        let ns = format!("palisade-table-{}", std::process::id());
        let run = |args: &[&str]| {
            let out = Command::new("ip").args(args).output();
            assert!(out.is_ok_and(|o| o.status.success()), "ip {args:?}");
        };
        run(&["netns", "add", &ns]);
        let exists = || table_exists(Some(&ns)).unwrap_or_else(|e| panic!("{e}"));
        assert!(!exists());
        run(&["netns", "exec", &ns, "nft", "add table inet other"]);
        assert!(!exists());
        run(&["netns", "exec", &ns, "nft", "add table ip palisade"]);
        assert!(!exists(), "another family's table of the same name");
        run(&["netns", "exec", &ns, "nft", "add table inet palisade"]);
        assert!(exists());
        run(&["netns", "del", &ns]);
    }

    #[test]
    fn a_long_list_in_a_rule_fills_its_anonymous_set_in_messages_that_fit() {
        let ports: Vec<(u16, u16)> = (0..600).map(|i| (i * 3, i * 3)).collect();
        let rule = Rule {
            matches: vec![
                crate::ir::Match::Proto(palisade_model::Protocol::Tcp),
                crate::ir::Match::DPort(ports),
            ],
            verdict: crate::ir::Verdict::Return,
            log: None,
        };
        let mut b = Batch::new();
        b.add_rule("c", &rule);
        let (bytes, messages) = b.bytes();
        // The set, its 600 elements in three messages, the rule.
        assert_eq!(messages.len(), 5);
        let mut rest = bytes.as_slice();
        while !rest.is_empty() {
            let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            assert!(len >= 20 && len <= rest.len() && len < 1 << 16, "{len}");
            rest = &rest[len..];
        }
    }
}
