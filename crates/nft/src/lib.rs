//! Enforcement with nftables: the evaluator's decisions for the pods of one node, compiled
//! into one `inet palisade` table.
//!
//! [`compile`] turns each pod's [`palisade_engine::SideProgram`]s into chains reached
//! through verdict maps keyed by pod address (`egress4/6` by source, `ingress4/6` by
//! destination), so the per-packet cost does not grow with the number of pods. A class's
//! entry chain jumps to its admin tier (allow = `accept`, deny = `drop`, pass = `return`),
//! then goes on to NetworkPolicy isolation (allow-list then `drop`) and the baseline; each
//! side has a base chain of its own (egress in `prerouting`, ingress in `postrouting`).
//! Connections, not packets:
//! `ct state established,related accept` comes first. Every drop and admin
//! decision is counted and logged to nflog group 100 with a `pal-<id>` prefix that
//! [`Ruleset::log_prefixes`] maps back to the engine's decision (tier, policy and rule, or
//! the isolating policies).
//!
//! [`Ruleset::render`] writes the `nft -f` script (one atomic transaction);
//! [`Ruleset::lookup`] interprets exactly that ruleset in userspace, so tests compare it
//! with the engine on thousands of cases without a kernel; [`Compiled::next`] compiles
//! after a change by building only the classes the change touched (the full compile stays
//! the reference and the fallback); [`apply`], [`update`] (changed
//! chains and map elements only, one transaction, then conntrack cleanup) and [`remove`]
//! talk to the kernel. See `docs/nftables.md`.

// The pure half: no I/O, no kernel; none of these modules imports `kernel`.
mod base;
mod both;
mod chain_names;
mod compile;
mod diff;
mod incremental;
mod ir;
mod lookup;
mod peer_cache;
mod peer_names;
mod render;
mod shadow;
mod stats;

// The kernel half.
mod kernel;

pub use compile::{CompileError, compile, compile_after, learned_set_name};
pub use diff::{UpdateStats, update_script};
pub use incremental::{Compiled, Path};
pub use ir::{AddrRange, Chain, Field, LoggedDecision, Match, NamedSet, Rule, Ruleset, Verdict};
pub use kernel::{
    COPIED_PREFIX, DIAL_GROUP, DIAL_TABLE, DNS_GROUP, DNS_TABLE, HELD_PREFIX, KernelError,
    KernelFailure, LearnedElement, NewConnections, RESENT_MARK, add_learned, apply, check,
    cut_forbidden, hold_replies, in_netns, install_dial_log, install_dns_capture, load_in_stages,
    logged_packets, netfilter_messages, new_connections, release_replies, remove, remove_dial_log,
    remove_dns_capture, transition, update,
};
pub use lookup::{Lookup, NftVerdict, Packet};
pub use render::{LOG_GROUP, TABLE};
pub use stats::Stats;

/// Why compiling or loading a ruleset failed: either half's error, for callers that do both.
#[derive(Debug, thiserror::Error)]
pub enum NftError {
    /// Compiling failed (the pure half).
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// Talking to the kernel failed (the kernel half).
    #[error(transparent)]
    Kernel(#[from] KernelError),
}

#[cfg(test)]
mod tests {
    /// The pure modules' sources, which must not name the kernel half.
    const PURE: [(&str, &str); 11] = [
        ("base.rs", include_str!("base.rs")),
        ("chain_names.rs", include_str!("chain_names.rs")),
        ("compile.rs", include_str!("compile.rs")),
        ("diff.rs", include_str!("diff.rs")),
        ("incremental.rs", include_str!("incremental.rs")),
        ("ir.rs", include_str!("ir.rs")),
        ("lookup.rs", include_str!("lookup.rs")),
        ("peer_names.rs", include_str!("peer_names.rs")),
        ("render.rs", include_str!("render.rs")),
        ("shadow.rs", include_str!("shadow.rs")),
        ("stats.rs", include_str!("stats.rs")),
    ];

    #[test]
    fn the_pure_half_does_not_import_the_kernel_half() {
        for (name, text) in PURE {
            for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                assert!(
                    !line.contains("kernel::")
                        && !line.contains("std::process")
                        && !line.contains("netlink_"),
                    "{name} reaches the kernel: {line}"
                );
            }
        }
    }
}
