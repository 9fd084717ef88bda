//! The base chains that hook the table into the stack, one per hook and side: tracked
//! connections pass, invalid ones drop, then each pod address not exempt for its peer goes
//! to its class's chain through a verdict map. A side that allows ends its own base chain
//! only: in the forward hook the egress side (`forward_egress`) runs first, then the
//! ingress side (`forward_ingress`, the next priority); `input` has the egress side only (a
//! pod to this node's host), `output` the ingress side only.
//!
//! One description serves the `nft -f` text ([`base_chains`]) and the netlink messages
//! (`Batch::add_base_chain`).

use crate::ir::Field;
use crate::render::address_text;

/// A netfilter hook of the `inet` family.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Hook {
    /// Packets to this host.
    Input,
    /// Packets routed through this host.
    Forward,
    /// Packets from this host.
    Output,
}

impl Hook {
    /// nft's name of the hook.
    pub fn name(self) -> &'static str {
        match self {
            Hook::Input => "input",
            Hook::Forward => "forward",
            Hook::Output => "output",
        }
    }

    /// `NF_INET_LOCAL_IN`, `NF_INET_FORWARD`, `NF_INET_LOCAL_OUT`.
    pub fn number(self) -> u32 {
        match self {
            Hook::Input => 1,
            Hook::Forward => 2,
            Hook::Output => 3,
        }
    }
}

/// One base chain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BaseChain {
    /// Its name in the table.
    pub name: &'static str,
    /// Where it hooks in.
    pub hook: Hook,
    /// Its priority after the filter priority (0).
    pub after_filter: i32,
    /// Whether it dispatches the egress side (by source address) or the ingress side.
    pub egress: bool,
}

/// Every base chain of the table.
pub(crate) const BASE_CHAINS: [BaseChain; 4] = [
    BaseChain {
        name: "forward_egress",
        hook: Hook::Forward,
        after_filter: 0,
        egress: true,
    },
    BaseChain {
        name: "forward_ingress",
        hook: Hook::Forward,
        after_filter: 1,
        egress: false,
    },
    BaseChain {
        name: "input",
        hook: Hook::Input,
        after_filter: 0,
        egress: true,
    },
    BaseChain {
        name: "output",
        hook: Hook::Output,
        after_filter: 0,
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
        let priority = match self.after_filter {
            0 => "filter".to_string(),
            n => format!("filter + {n}"),
        };
        let mut c = format!(
            "  chain {} {{\n    type filter hook {} priority {priority}; policy accept;\n",
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
