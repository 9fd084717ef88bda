//! Where connections were dialed to, before any address translation. A small table of its
//! own logs the first packet of each new TCP, UDP or SCTP connection not yet translated to [`DIAL_GROUP`] in
//! the prerouting and output hooks at priority -150, ahead of kube-proxy's DNAT (-100):
//! the decision log pairs a denied packet (logged after DNAT, at an endpoint) with the
//! address its connection was dialed to, and names the Service. This works on every kernel,
//! with or without conntrack entries in nflog messages.

use crate::kernel::apply::{delete_table, run_script};
use crate::kernel::error::KernelError;

/// The nflog group the first packets of new connections are logged to.
pub const DIAL_GROUP: u16 = 101;

/// The table that logs them (`inet palisade_dialed`).
pub const DIAL_TABLE: &str = "inet palisade_dialed";

/// The table's `nft -f` text: created, or emptied and filled again.
fn script() -> String {
    // Not once more after its translation (a connection looped back to this host meets
    // prerouting after output).
    let rule = format!(
        "ct state new ct status & dnat == 0 meta l4proto {{ tcp, udp, sctp }} log group {DIAL_GROUP}"
    );
    format!(
        "add table {DIAL_TABLE}\nflush table {DIAL_TABLE}\n\
         add chain {DIAL_TABLE} prerouting {{ type filter hook prerouting priority -150; policy accept; }}\n\
         add chain {DIAL_TABLE} output {{ type filter hook output priority -150; policy accept; }}\n\
         add rule {DIAL_TABLE} prerouting {rule}\n\
         add rule {DIAL_TABLE} output {rule}\n"
    )
}

/// Installs (or refreshes) the dial log in the node's namespace (or `netns`).
pub fn install_dial_log(netns: Option<&str>) -> Result<(), KernelError> {
    run_script(&script(), netns)
}

/// Removes the dial log (nothing when it is not there).
pub fn remove_dial_log(netns: Option<&str>) -> Result<(), KernelError> {
    delete_table(DIAL_TABLE, netns)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_table_logs_new_connections_before_dnat() {
        let s = super::script();
        assert!(s.contains("hook prerouting priority -150"), "{s}");
        assert!(s.contains("hook output priority -150"), "{s}");
        let rule =
            "ct state new ct status & dnat == 0 meta l4proto { tcp, udp, sctp } log group 101";
        assert!(s.contains(rule), "{s}");
    }
}
