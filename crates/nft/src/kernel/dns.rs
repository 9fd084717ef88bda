//! Learning the addresses of `domainNames` peers from the DNS replies pods receive.
//!
//! A small table of the agent's own (`inet palisade_dns`) sends every UDP reply from a
//! trusted resolver (a reply, by conntrack, to a query sent to one of the resolver
//! addresses on port 53) to nflog group [`DNS_GROUP`], whole. While the agent holds
//! replies, it also drops them: the agent adds the answer's addresses to the learned sets
//! of the `inet palisade` table and then sends the reply on itself, marked with
//! [`RESENT_MARK`] so that the table lets it pass. A pod thus receives an answer only once
//! its addresses are allowed: its first connection cannot beat the set update.
//!
//! Holding lasts while the agent renews it ([`hold_replies`]): the table holds replies only
//! while its `holding` set has an element, which expires after the time given. An agent
//! that stops renewing (it crashed, or was stopped) stops holding within that time, and
//! replies then pass as if no agent were there; nothing is learned any more, and what was
//! learned expires with its DNS timeouts.

use std::net::IpAddr;
use std::time::Duration;

use crate::kernel::apply::{delete_table, run_script};
use crate::kernel::batch::{Batch, Element};
use crate::kernel::error::KernelError;

/// The nflog group the replies are sent to.
pub const DNS_GROUP: u16 = 102;

/// The table that captures them (`inet palisade_dns`).
pub const DNS_TABLE: &str = "inet palisade_dns";

/// The log prefix of a held reply (the agent sends it on) …
pub const HELD_PREFIX: &str = "pal-dns-held";

/// … and of a copied one (it passes by itself).
pub const COPIED_PREFIX: &str = "pal-dns-copied";

/// The packet mark of a reply the agent sends on after learning from it.
pub const RESENT_MARK: u32 = 0x0050_0000;

/// The table's `nft -f` text for the resolver addresses `resolvers`. Each reply is sent to
/// the reader at once (`queue-threshold 1`; nflog otherwise batches up to 100 packets or
/// one second).
fn script(resolvers: &[IpAddr]) -> String {
    let list = |v6: bool| {
        let items: Vec<String> = resolvers
            .iter()
            .filter(|ip| ip.is_ipv6() == v6)
            .map(ToString::to_string)
            .collect();
        items.join(", ")
    };
    let mut s = format!(
        "add table {DNS_TABLE}\nflush table {DNS_TABLE}\n\
         add set {DNS_TABLE} holding {{ type inet_proto; flags timeout; }}\n"
    );
    for (chain, hook) in [("forward", "forward"), ("output", "output")] {
        // Ahead of the `inet palisade` table's filter (priority 0).
        s += &format!(
            "add chain {DNS_TABLE} {chain} {{ type filter hook {hook} priority -10; policy accept; }}\n\
             add rule {DNS_TABLE} {chain} meta mark {RESENT_MARK:#x} accept\n"
        );
        for (v6, family) in [(false, "ip"), (true, "ip6")] {
            let addrs = list(v6);
            if addrs.is_empty() {
                continue;
            }
            let reply = format!(
                "meta nfproto {} meta l4proto udp ct direction reply ct original proto-dst 53 \
                 ct original {family} daddr {{ {addrs} }}",
                if v6 { "ipv6" } else { "ipv4" }
            );
            s += &format!(
                "add rule {DNS_TABLE} {chain} {reply} meta l4proto @holding \
                 log prefix \"{HELD_PREFIX}\" group {DNS_GROUP} snaplen 65535 queue-threshold 1 drop\n\
                 add rule {DNS_TABLE} {chain} {reply} \
                 log prefix \"{COPIED_PREFIX}\" group {DNS_GROUP} snaplen 65535 queue-threshold 1\n"
            );
        }
    }
    s
}

/// Installs (or refreshes) the capture of replies from `resolvers` in the node's namespace
/// (or `netns`). Replies pass (copied) until [`hold_replies`] is called.
pub fn install_dns_capture(resolvers: &[IpAddr], netns: Option<&str>) -> Result<(), KernelError> {
    run_script(&script(resolvers), netns)
}

/// Removes the capture (nothing when it is not there).
pub fn remove_dns_capture(netns: Option<&str>) -> Result<(), KernelError> {
    delete_table(DNS_TABLE, netns)
}

/// Holds replies for `duration` from now (renewed by calling again).
pub fn hold_replies(duration: Duration, netns: Option<&str>) -> Result<(), KernelError> {
    // The key is the protocol every captured reply has: UDP.
    let udp = Element::key(vec![17]);
    let mut batch = Batch::new();
    batch.add_elements_in(DNS_TABLE, "holding", &[udp.with_timeout(duration)]);
    batch.send(netns)
}

/// Stops holding replies at once (an agent that stops on purpose): they pass from now on.
pub fn release_replies(netns: Option<&str>) -> Result<(), KernelError> {
    run_script(&format!("flush set {DNS_TABLE} holding\n"), netns)
}

/// One learned address: the set of the `inet palisade` table it goes to, and how long it
/// stays there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnedElement {
    /// The learned set's name.
    pub set: String,
    /// The address.
    pub ip: IpAddr,
    /// Its timeout (an element already there gets this one).
    pub timeout: Duration,
}

/// Adds learned addresses to their sets in one transaction.
pub fn add_learned(elements: &[LearnedElement], netns: Option<&str>) -> Result<(), KernelError> {
    if elements.is_empty() {
        return Ok(());
    }
    let mut batch = Batch::new();
    for e in elements {
        batch.add_elements(&e.set, &[Element::expiring(e.ip, e.timeout)]);
    }
    batch.send(netns)
}

#[cfg(test)]
mod tests {
    #[test]
    fn replies_of_trusted_resolvers_are_captured_and_held_only_while_holding() {
        let s = super::script(&["10.96.0.10".parse().unwrap(), "fd00::a".parse().unwrap()]);
        assert!(s.contains("hook forward priority -10"), "{s}");
        assert!(s.contains("hook output priority -10"), "{s}");
        assert!(s.contains("meta mark 0x500000 accept"), "{s}");
        assert!(
            s.contains("ct original ip daddr { 10.96.0.10 } meta l4proto @holding log prefix \"pal-dns-held\" group 102 snaplen 65535 queue-threshold 1 drop"),
            "{s}"
        );
        assert!(s.contains("ct original ip6 daddr { fd00::a }"), "{s}");
        // Without resolvers nothing is captured.
        assert!(!super::script(&[]).contains("log group"));
    }
}
