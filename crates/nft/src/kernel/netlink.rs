//! Netfilter netlink sockets and framing, shared by the conntrack cleanup, the nf_tables
//! update batches and the node agent's nflog reader.

use std::io;
use std::os::fd::AsFd;

use netlink_packet_core::{NetlinkBuffer, NetlinkMessage};
use netlink_packet_netfilter::NetfilterMessage;
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};

/// A netlink socket for the netfilter subsystems, in `netns` (a name under `/run/netns`)
/// when given. A socket stays in the namespace it was created in, so a short-lived thread
/// enters the namespace, creates it and exits; the calling thread never changes namespace.
pub(crate) fn socket(netns: Option<&str>) -> io::Result<Socket> {
    fn here() -> io::Result<Socket> {
        let mut socket = Socket::new(NETLINK_NETFILTER)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        Ok(socket)
    }
    match netns {
        Some(name) => in_netns(name, here),
        None => here(),
    }
}

/// Runs `open` in the network namespace `name` (under `/run/netns`) on a short-lived thread
/// and returns what it opened: sockets stay in the namespace they were created in, and the
/// calling thread never changes namespace.
pub fn in_netns<T: Send>(name: &str, open: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    let ns = std::fs::File::open(std::path::Path::new("/run/netns").join(name))
        .map_err(|e| io::Error::new(e.kind(), format!("network namespace {name:?}: {e}")))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            rustix::thread::move_into_link_name_space(
                ns.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
            open()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the namespace thread panicked")))
    })
}

/// The messages of one datagram; a message that cannot be decoded is returned as its
/// error so the caller decides (the framing is checked first, so one bad message does not
/// hide the next).
pub fn netfilter_messages(
    datagram: &[u8],
) -> impl Iterator<Item = Result<NetlinkMessage<NetfilterMessage>, String>> + '_ {
    let mut rest = datagram;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let len = match NetlinkBuffer::new_checked(rest) {
            Ok(b) if b.length() >= 16 => b.length() as usize,
            Ok(b) => {
                rest = &[];
                return Some(Err(format!(
                    "netlink message length {} too short",
                    b.length()
                )));
            }
            Err(e) => {
                rest = &[];
                return Some(Err(format!("bad netlink framing: {e}")));
            }
        };
        let (this, next) = rest.split_at(len.min(rest.len()));
        rest = next.get(len.next_multiple_of(4) - len..).unwrap_or(&[]);
        Some(NetlinkMessage::deserialize(this).map_err(|e| e.to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undecodable_messages_are_reported_and_framing_errors_end_the_datagram() {
        // A netlink header claiming 8 bytes: too short to be a message.
        let bad = [8u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let got: Vec<_> = netfilter_messages(&bad).collect();
        assert_eq!(got.len(), 1);
        assert!(got[0].is_err());
        // A header claiming more bytes than the datagram holds.
        let long = [200u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(netfilter_messages(&long).all(|m| m.is_err()));
    }
}
