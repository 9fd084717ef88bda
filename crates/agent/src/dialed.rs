//! Where recent connections were dialed to: the first packets the dial log
//! ([`palisade_nft::DIAL_GROUP`]) reports before address translation, by protocol and
//! source, so that a denied packet, logged at its endpoint after kube-proxy's DNAT, can be
//! paired with the Service address it was sent to.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use palisade_model::Protocol;

use crate::nflog::LoggedPacket;

/// How long a dialed address is remembered: a denied first packet follows its dial log
/// entry within microseconds; retransmissions within a few seconds.
const KEEP: Duration = Duration::from_secs(30);

/// The most connections remembered; the oldest are forgotten first.
const CAPACITY: usize = 65_536;

/// A connection's first packet as dialed: protocol, source address and port.
type Key = (Protocol, IpAddr, u16);

/// Recently dialed destinations (address and port), by connection source.
#[derive(Debug, Default)]
pub struct Dialed {
    by_source: HashMap<Key, (IpAddr, u16, Instant)>,
    order: VecDeque<(Key, Instant)>,
}

impl Dialed {
    /// Remembers where the connection of `p` (a dial log packet) was dialed to.
    pub fn record(&mut self, p: &LoggedPacket, now: Instant) {
        let (Some(protocol), Some(sport), Some(dport)) = (p.protocol, p.sport, p.dport) else {
            return;
        };
        let key = (protocol, p.src, sport);
        self.by_source.insert(key, (p.dst, dport, now));
        self.order.push_back((key, now));
        while self.order.len() > CAPACITY
            || self
                .order
                .front()
                .is_some_and(|(_, t)| now.duration_since(*t) > KEEP)
        {
            let Some((old, t)) = self.order.pop_front() else {
                break;
            };
            // Forget it unless the source was dialed again since.
            if self
                .by_source
                .get(&old)
                .is_some_and(|(_, _, seen)| *seen == t)
            {
                self.by_source.remove(&old);
            }
        }
    }

    /// Where the connection of the logged packet `p` was dialed to, when that differs from
    /// its destination (it was translated on the way).
    pub fn original(&self, p: &LoggedPacket) -> Option<(IpAddr, Option<u16>)> {
        let key = (p.protocol?, p.src, p.sport?);
        let (ip, port, _) = self.by_source.get(&key)?;
        ((*ip, Some(*port)) != (p.dst, p.dport)).then_some((*ip, Some(*port)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(dst: &str, dport: u16) -> LoggedPacket {
        LoggedPacket {
            prefix: String::new(),
            src: "10.0.0.1".parse().unwrap_or(IpAddr::from([0, 0, 0, 0])),
            dst: dst.parse().unwrap_or(IpAddr::from([0, 0, 0, 0])),
            protocol: Some(Protocol::Tcp),
            sport: Some(40000),
            dport: Some(dport),
            original_dst: None,
            payload: Vec::new(),
        }
    }

    #[test]
    fn a_translated_packet_is_paired_with_its_dialed_address() {
        let mut d = Dialed::default();
        let t0 = Instant::now();
        d.record(&packet("10.96.0.10", 80), t0);
        let svc: IpAddr = "10.96.0.10".parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
        assert_eq!(d.original(&packet("10.1.0.5", 8080)), Some((svc, Some(80))));
        // Not translated: nothing to say.
        assert_eq!(d.original(&packet("10.96.0.10", 80)), None);
        // Another source port: another connection.
        let mut other = packet("10.1.0.5", 8080);
        other.sport = Some(40001);
        assert_eq!(d.original(&other), None);
        // Forgotten once old (another connection's record moves time on).
        d.record(&other, t0 + KEEP + Duration::from_secs(1));
        assert_eq!(d.original(&packet("10.1.0.5", 8080)), None);
    }
}
