//! Sending a held DNS reply on to the pod it was for, once its answer is learned: the
//! packet as the kernel logged it (its UDP checksum recomputed: a packet copied on a veth
//! may carry a partial one), through a raw socket that takes the IP header as given, marked
//! so that the capture table lets it pass.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// `IPPROTO_RAW`: the packet carries its own IP header.
const IPPROTO_RAW: i32 = 255;

/// Raw sockets, one per family, in the network namespace they were opened in.
#[derive(Debug)]
pub struct Resender {
    v4: Socket,
    v6: Socket,
}

impl Resender {
    /// Opens the sockets in the current namespace, or in `netns` (a name under
    /// `/run/netns`).
    pub fn open(netns: Option<&str>) -> io::Result<Resender> {
        let open = || -> io::Result<Resender> {
            let socket = |domain| -> io::Result<Socket> {
                let s = Socket::new(domain, Type::RAW, Some(Protocol::from(IPPROTO_RAW)))?;
                s.set_mark(palisade_nft::RESENT_MARK)?;
                Ok(s)
            };
            Ok(Resender {
                v4: socket(Domain::IPV4)?,
                v6: socket(Domain::IPV6)?,
            })
        };
        match netns {
            Some(name) => palisade_nft::in_netns(name, open),
            None => open(),
        }
    }

    /// Sends `packet` (an IP packet carrying UDP, whole) to its destination.
    pub fn send(&self, packet: &mut [u8]) -> io::Result<()> {
        crate::dns_wire::fix_udp_checksum(packet)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let datagram = crate::dns_wire::udp_datagram(packet)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let dst = datagram.destination.ip();
        let socket = if dst.is_ipv6() { &self.v6 } else { &self.v4 };
        // A raw socket's port is not used (IPv6 wants it zero).
        let to = SockAddr::from(SocketAddr::new(dst, 0));
        let sent = socket.send_to(packet, &to)?;
        if sent != packet.len() {
            return Err(io::Error::other(format!(
                "sent {sent} of {} bytes to {dst}",
                packet.len()
            )));
        }
        Ok(())
    }
}
