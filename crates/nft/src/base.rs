//! The base chains that hook the table into the stack, one per side: tracked connections
//! pass, invalid ones drop, then each pod address not exempt for its peer goes to its
//! class's chain through a verdict map. The egress side (`prerouting`) sees every packet
//! that enters the host, the ingress side (`postrouting`) every packet that leaves it, both
//! after destination NAT and before source NAT: a pod's packet to another pod runs the
//! source's egress side, then the destination's ingress side; a packet to this node's host
//! the egress side only, a packet from the host the ingress side only. A side that allows
//! ends its own base chain only.
//!
//! One chain per side, not one per hook that sees it (forward, input, output), because the
//! kernel's check of the table for loops, made whenever a transaction adds a jump (a
//! relabel's map element), walks each verdict map once per base chain that looks it up.
//!
//! One description serves the `nft -f` text ([`base_chains`]) and the netlink messages
//! (`Batch::add_base_chain`).

use crate::ir::Field;
use crate::render::address_text;

/// A netfilter hook of the `inet` family.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Hook {
    /// Packets entering this host, before routing.
    Prerouting,
    /// Packets leaving this host, after routing.
    Postrouting,
}

impl Hook {
    /// nft's name of the hook.
    pub fn name(self) -> &'static str {
        match self {
            Hook::Prerouting => "prerouting",
            Hook::Postrouting => "postrouting",
        }
    }

    /// `NF_INET_PRE_ROUTING`, `NF_INET_POST_ROUTING`.
    pub fn number(self) -> u32 {
        match self {
            Hook::Prerouting => 0,
            Hook::Postrouting => 4,
        }
    }
}

/// The priority of every base chain: nft's `filter` (after destination NAT, before source
/// NAT).
pub(crate) const PRIORITY_FILTER: i32 = 0;

/// One base chain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BaseChain {
    /// Its name in the table.
    pub name: &'static str,
    /// Where it hooks in.
    pub hook: Hook,
    /// Whether it dispatches the egress side (by source address) or the ingress side.
    pub egress: bool,
}

/// Every base chain of the table.
pub(crate) const BASE_CHAINS: [BaseChain; 2] = [
    BaseChain {
        name: "prerouting",
        hook: Hook::Prerouting,
        egress: true,
    },
    BaseChain {
        name: "postrouting",
        hook: Hook::Postrouting,
        egress: false,
    },
];

/// Connection states (`ct state` bits): what passes, and what drops, before any dispatch.
pub(crate) const ESTABLISHED_RELATED: u32 = 2 | 4;
/// `ct state invalid`.
pub(crate) const INVALID: u32 = 1;

impl BaseChain {
    /// The address that picks the class chain (the source on the egress side), then the
    /// peer's.
    pub fn fields(&self) -> (Field, Field) {
        if self.egress {
            (Field::Saddr, Field::Daddr)
        } else {
            (Field::Daddr, Field::Saddr)
        }
    }

    /// The exemption set and the verdict map of the chain's side, for one family.
    pub fn dispatch(&self, v6: bool) -> (&'static str, &'static str) {
        (exempt_set(self.egress, v6), verdict_map(self.egress, v6))
    }

    /// The chain as it appears inside the table's text.
    fn text(&self) -> String {
        let mut c = format!(
            "  chain {} {{\n    type filter hook {} priority filter; policy accept;\n",
            self.name,
            self.hook.name()
        );
        c += "    ct state established,related accept\n    ct state invalid drop\n";
        let (key, peer) = self.fields();
        for v6 in [false, true] {
            let (exempt, map) = self.dispatch(v6);
            let [key, peer] = [key, peer].map(|f| address_text(f, v6));
            c += &format!("    {key} . {peer} != @{exempt} {key} vmap @{map}\n");
        }
        c + "  }\n"
    }
}

/// The verdict map of a side and family (`egress4` …).
pub(crate) fn verdict_map(egress: bool, v6: bool) -> &'static str {
    match (egress, v6) {
        (true, false) => "egress4",
        (true, true) => "egress6",
        (false, false) => "ingress4",
        (false, true) => "ingress6",
    }
}

/// The set of exempt (pod address, peer) pairs of a side and family (`egress_exempt4` …).
pub(crate) fn exempt_set(egress: bool, v6: bool) -> &'static str {
    match (egress, v6) {
        (true, false) => "egress_exempt4",
        (true, true) => "egress_exempt6",
        (false, false) => "ingress_exempt4",
        (false, true) => "ingress_exempt6",
    }
}

/// The base chains as they appear inside the table's text.
pub(crate) fn base_chains() -> String {
    BASE_CHAINS.iter().map(BaseChain::text).collect()
}
