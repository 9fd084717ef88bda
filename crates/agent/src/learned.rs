//! The names pods have looked up and the addresses they resolve to, as learned from the
//! DNS replies they received: each address until its answer's TTL (clamped) runs out.
//! From it come the elements of the ruleset's learned sets, and a DNS map that names the
//! domain in decision-log lines and that `palisade eval --dns` reads.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use palisade_model::{DnsEntry, DnsMap};
use palisade_nft::{LearnedElement, NamedSet, Ruleset};

/// The range a DNS answer's TTL is clamped to before its addresses are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlRange {
    /// The least time an address is kept (an answer with TTL 0 is still usable for a
    /// connection right after it).
    pub min: Duration,
    /// The most (a long TTL would keep an address its name has moved away from).
    pub max: Duration,
}

impl Default for TtlRange {
    fn default() -> Self {
        TtlRange {
            min: Duration::from_secs(30),
            max: Duration::from_secs(300),
        }
    }
}

impl TtlRange {
    /// `ttl` seconds, clamped.
    pub fn clamp(&self, ttl: u32) -> Duration {
        Duration::from_secs(u64::from(ttl)).clamp(self.min, self.max)
    }
}

/// Learned names: name (lower case, no trailing dot) → address → when it expires.
#[derive(Debug, Clone, Default)]
pub struct Learned {
    names: BTreeMap<String, BTreeMap<IpAddr, Instant>>,
}

/// What one reply taught.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lesson {
    /// Addresses not known for the name before.
    pub new: usize,
    /// The name's addresses with their timeouts, as the reply gave them.
    pub addresses: Vec<(IpAddr, Duration)>,
}

impl Learned {
    /// Takes in that `name` resolves to `addresses` (address, TTL in seconds) at `now`.
    /// An address known already keeps the later of its two expiries.
    pub fn learn(
        &mut self,
        name: &str,
        addresses: &[(IpAddr, u32)],
        ttl: TtlRange,
        now: Instant,
    ) -> Lesson {
        let name = palisade_model::dns::normalize(name);
        let known = self.names.entry(name).or_default();
        let mut lesson = Lesson::default();
        for &(ip, seconds) in addresses {
            let timeout = ttl.clamp(seconds);
            let until = now + timeout;
            match known.get_mut(&ip) {
                Some(at) if *at > now => *at = (*at).max(until),
                Some(at) => {
                    *at = until;
                    lesson.new += 1;
                }
                None => {
                    known.insert(ip, until);
                    lesson.new += 1;
                }
            }
            lesson.addresses.push((ip, timeout));
        }
        lesson
    }

    /// Forgets what expired by `now`; returns how many addresses that was.
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut evicted = 0;
        self.names.retain(|_, addrs| {
            let before = addrs.len();
            addrs.retain(|_, until| *until > now);
            evicted += before - addrs.len();
            !addrs.is_empty()
        });
        evicted
    }

    /// Addresses known at `now`, over every name.
    pub fn len(&self, now: Instant) -> usize {
        self.names
            .values()
            .flat_map(|a| a.values())
            .filter(|until| **until > now)
            .count()
    }

    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The elements the learned sets among `sets` hold at `now`: for each set, every
    /// address of a name its patterns match, with the time it has left (the longest over
    /// the names that give it).
    pub fn elements<'a>(
        &self,
        sets: impl IntoIterator<Item = &'a NamedSet>,
        now: Instant,
    ) -> Vec<LearnedElement> {
        let mut out = Vec::new();
        for set in sets {
            let Some(patterns) = &set.learned else {
                continue;
            };
            let mut left: BTreeMap<IpAddr, Duration> = BTreeMap::new();
            for (name, addrs) in &self.names {
                if !patterns.iter().any(|p| p.matches(name)) {
                    continue;
                }
                for (ip, until) in addrs {
                    if ip.is_ipv6() != set.v6 || *until <= now {
                        continue;
                    }
                    let t = left.entry(*ip).or_default();
                    *t = (*t).max(*until - now);
                }
            }
            out.extend(left.into_iter().map(|(ip, timeout)| LearnedElement {
                set: set.name.clone(),
                ip,
                timeout,
            }));
        }
        out
    }

    /// What is known at `now` as a DNS map (TTL: the seconds left, rounded up).
    pub fn dns_map(&self, now: Instant) -> DnsMap {
        let mut map = DnsMap::default();
        for (name, addrs) in &self.names {
            let live: Vec<(&IpAddr, &Instant)> = addrs.iter().filter(|(_, u)| **u > now).collect();
            let Some(last) = live.iter().map(|(_, u)| **u).max() else {
                continue;
            };
            let ttl = u32::try_from((last - now).as_secs() + 1).unwrap_or(u32::MAX);
            map.names.insert(
                name.clone(),
                DnsEntry {
                    addresses: live.iter().map(|(ip, _)| **ip).collect(),
                    ttl: Some(ttl),
                    at: "learned".into(),
                },
            );
        }
        map
    }
}

/// `rs` with the addresses `map` gives in its learned sets (for a lookup: loads never write
/// them); `None` when it has no learned set.
pub fn with_addresses(rs: &Ruleset, map: &DnsMap) -> Option<Ruleset> {
    if !rs.sets.iter().any(|s| s.learned.is_some()) {
        return None;
    }
    let mut filled = rs.clone();
    for set in &mut filled.sets {
        let Some(patterns) = &set.learned else {
            continue;
        };
        let mut ips: Vec<IpAddr> = patterns
            .iter()
            .flat_map(|p| map.resolve(p).map(|(_, ip)| ip))
            .filter(|ip| ip.is_ipv6() == set.v6)
            .collect();
        ips.sort();
        ips.dedup();
        set.elements = std::sync::Arc::new(ips.into_iter().map(ipnet::IpNet::from).collect());
    }
    Some(filled)
}

/// A DNS map as a hosts-style file (`ADDRESS NAME`, one per line, sorted), which
/// `--dns` reads.
pub fn hosts_text(map: &DnsMap) -> String {
    let mut s = String::from("# Names learned from DNS replies: ADDRESS NAME  # seconds left\n");
    for (name, entry) in &map.names {
        for ip in &entry.addresses {
            s += &format!("{ip} {name}  # {}\n", entry.ttl.unwrap_or(0));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_model::DomainPattern;
    use std::sync::Arc;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn set(name: &str, v6: bool, patterns: &[&str]) -> NamedSet {
        NamedSet {
            name: name.into(),
            v6,
            interval: false,
            elements: Default::default(),
            learned: Some(Arc::new(
                patterns.iter().map(|p| DomainPattern::parse(p)).collect(),
            )),
        }
    }

    #[test]
    fn ttls_are_clamped_and_an_address_keeps_its_later_expiry() {
        let t0 = Instant::now();
        let r = TtlRange::default();
        let mut l = Learned::default();
        let lesson = l.learn(
            "API.Stripe.com.",
            &[(ip("1.1.1.1"), 5), (ip("::1"), 9999)],
            r,
            t0,
        );
        assert_eq!(lesson.new, 2);
        assert_eq!(
            lesson.addresses,
            vec![
                (ip("1.1.1.1"), Duration::from_secs(30)),
                (ip("::1"), Duration::from_secs(300))
            ]
        );
        // Again with a shorter TTL: not new, and the longer expiry stays.
        let again = l.learn("api.stripe.com", &[(ip("::1"), 40)], r, t0);
        assert_eq!(again.new, 0);
        let v6 = set("d6x", true, &["*.stripe.com"]);
        let e = l.elements([&v6], t0 + Duration::from_secs(100));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].timeout, Duration::from_secs(200));
        // Expiry: the IPv4 address after 30 s, the IPv6 one after 300 s.
        assert_eq!(l.expire(t0 + Duration::from_secs(31)), 1);
        assert_eq!(l.len(t0 + Duration::from_secs(31)), 1);
        assert_eq!(l.expire(t0 + Duration::from_secs(301)), 1);
        assert!(l.is_empty());
        // An expired address learned again is new again.
        assert_eq!(
            l.learn("api.stripe.com", &[(ip("1.1.1.1"), 60)], r, t0).new,
            1
        );
    }

    #[test]
    fn a_set_holds_the_addresses_of_the_names_its_patterns_match_in_its_family() {
        let t0 = Instant::now();
        let r = TtlRange::default();
        let mut l = Learned::default();
        l.learn("api.stripe.com", &[(ip("54.187.174.169"), 60)], r, t0);
        l.learn("stripe.com", &[(ip("54.187.174.1"), 60)], r, t0);
        l.learn(
            "example.com",
            &[(ip("93.184.216.34"), 60), (ip("2606::1"), 60)],
            r,
            t0,
        );
        let wild = set("d4a", false, &["*.stripe.com"]);
        let exact = set("d4b", false, &["Example.COM."]);
        let exact6 = set("d6b", true, &["example.com"]);
        let got: Vec<(String, IpAddr)> = l
            .elements([&wild, &exact, &exact6], t0)
            .into_iter()
            .map(|e| (e.set, e.ip))
            .collect();
        assert_eq!(
            got,
            vec![
                ("d4a".into(), ip("54.187.174.169")),
                ("d4b".into(), ip("93.184.216.34")),
                ("d6b".into(), ip("2606::1")),
            ]
        );
        let hosts = hosts_text(&l.dns_map(t0));
        let map = DnsMap::parse("learned", &hosts).unwrap_or_else(|e| panic!("{e:?}\n{hosts}"));
        assert_eq!(
            map.get("api.stripe.com").map(|e| e.addresses.clone()),
            Some(vec![ip("54.187.174.169")])
        );
        assert_eq!(map.names.len(), 3);
    }
}
