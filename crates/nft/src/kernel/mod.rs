//! The kernel half: everything that talks to the kernel. `nft -f` transactions, hand-encoded
//! nf_tables netlink batches, conntrack over ctnetlink, and the `nft -j` packet counters,
//! optionally inside a network namespace. It reads the pure half (IR, rendering, lookup,
//! diff); the pure half never imports it.

mod apply;
mod batch;
mod conntrack;
mod counters;
mod dialed;
mod dns;
mod error;
mod expr;
mod load;
mod netlink;
mod split;

pub use apply::{apply, check, load_in_stages, remove, transition, update};
pub use conntrack::{NewConnections, cut_forbidden, new_connections};
pub use counters::logged_packets;
pub use dialed::{DIAL_GROUP, DIAL_TABLE, install_dial_log, remove_dial_log};
pub use dns::{
    COPIED_PREFIX, DNS_GROUP, DNS_TABLE, HELD_PREFIX, LearnedElement, RESENT_MARK, add_learned,
    hold_replies, install_dns_capture, release_replies, remove_dns_capture,
};
pub use error::{KernelError, KernelFailure};
pub use netlink::{in_netns, netfilter_messages};
