//! The agent's DNS learning: reads the replies of trusted resolvers that the capture table
//! logs (whole, to nflog group [`palisade_nft::DNS_GROUP`]), learns the names some
//! `domainNames` peer matches, puts their addresses in the ruleset's learned sets with
//! their TTLs (clamped), and, while holding, sends each held reply on once its addresses
//! are in the kernel. It keeps the capture table holding (renewing it every
//! [`RENEW`]), refills the learned sets after each reconcile (a full load empties them),
//! and publishes what it knows as a DNS map for the decision log and `/learned`.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use palisade_model::DnsMap;
use palisade_nft::{NamedSet, Ruleset};
use tokio::sync::watch;

use crate::learned::{Learned, TtlRange};
use crate::metrics::Metrics;
use crate::nflog::{LoggedPacket, Nflog};
use crate::resend::Resender;
use crate::snapshot::Snapshots;

/// How the agent learns domain names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The resolvers whose replies are trusted (the cluster DNS Service address, or a
    /// node-local cache): a reply is read only when it answers a query sent to one of them
    /// on port 53. Empty: nothing is learned and `domainNames` peers admit nothing.
    pub resolvers: Vec<IpAddr>,
    /// The range TTLs are clamped to.
    pub ttl: TtlRange,
    /// Whether replies are held until their addresses are in the kernel (else they pass
    /// and are learned from a copy: a connection right after the lookup may find its
    /// address not yet allowed).
    pub hold: bool,
}

/// How often the agent renews holding, expires what it learned and publishes its map.
pub const RENEW: Duration = Duration::from_secs(1);

/// How long holding lasts without renewal: an agent that stops lets replies pass within
/// this time.
pub const HOLD_FOR: Duration = Duration::from_secs(3);

/// Why learning could not start.
#[derive(Debug, thiserror::Error)]
pub enum LearnError {
    /// The capture table could not be installed.
    #[error("the DNS reply capture: {0}")]
    Capture(#[from] palisade_nft::KernelError),
    /// The nflog group could not be read.
    #[error(transparent)]
    Nflog(#[from] crate::nflog::NflogError),
    /// The socket to send held replies on could not be opened.
    #[error("the socket for held DNS replies: {0}")]
    Resend(#[source] std::io::Error),
}

/// Where readers take the latest learned names.
pub type LearnedNames = watch::Receiver<Arc<DnsMap>>;

/// Where the learner publishes what it knows, and where readers take it.
pub fn channel() -> (watch::Sender<Arc<DnsMap>>, LearnedNames) {
    watch::channel(Arc::new(DnsMap::default()))
}

/// Starts learning in the node's namespace (or `netns` for the kernel's tables): installs
/// the capture table and spawns the task, which publishes to `publish`.
pub fn start(
    settings: Settings,
    snapshots: Snapshots,
    metrics: Arc<Metrics>,
    netns: Option<String>,
    publish: watch::Sender<Arc<DnsMap>>,
) -> Result<tokio::task::JoinHandle<()>, LearnError> {
    palisade_nft::install_dns_capture(&settings.resolvers, netns.as_deref())?;
    let stream = Nflog::bind_copying(palisade_nft::DNS_GROUP, 65_535)?.spawn()?;
    let resender = Resender::open(netns.as_deref()).map_err(LearnError::Resend)?;
    let learner = Learner {
        settings,
        learned: Learned::default(),
        metrics,
        netns,
        resender,
        publish,
    };
    Ok(tokio::spawn(learner.run(stream, snapshots)))
}

struct Learner {
    settings: Settings,
    learned: Learned,
    metrics: Arc<Metrics>,
    netns: Option<String>,
    resender: Resender,
    publish: watch::Sender<Arc<DnsMap>>,
}

impl Learner {
    async fn run(mut self, mut stream: crate::nflog::NflogStream, mut snapshots: Snapshots) {
        let mut tick = tokio::time::interval(RENEW);
        let mut ruleset = snapshots.borrow().ruleset.clone();
        loop {
            tokio::select! {
                _ = tick.tick() => self.renew(),
                changed = snapshots.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    ruleset = snapshots.borrow_and_update().ruleset.clone();
                    self.refill(ruleset.as_deref());
                }
                packets = stream.recv() => match packets {
                    Some(Ok(packets)) => {
                        for p in packets {
                            self.reply(p, ruleset.as_deref());
                        }
                        self.publish();
                    }
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "DNS replies can no longer be read; nothing more is learned");
                        return;
                    }
                    None => return,
                },
            }
        }
    }

    /// Renews holding, forgets what expired, publishes.
    fn renew(&mut self) {
        if self.settings.hold
            && let Err(e) = palisade_nft::hold_replies(HOLD_FOR, self.netns.as_deref())
        {
            tracing::warn!(error = %e, "could not renew holding DNS replies");
        }
        let now = Instant::now();
        let evicted = self.learned.expire(now);
        self.metrics
            .dns_addresses(0, evicted, self.learned.len(now));
        if evicted > 0 {
            self.publish();
        }
    }

    /// Puts everything known into the learned sets of the ruleset now in the kernel.
    fn refill(&mut self, ruleset: Option<&Ruleset>) {
        let Some(rs) = ruleset else { return };
        let elements = self.learned.elements(learned_sets(rs), Instant::now());
        if let Err(e) = palisade_nft::add_learned(&elements, self.netns.as_deref()) {
            tracing::warn!(error = %e, "could not refill the learned sets");
        }
    }

    /// Learns from one captured reply and, when held, sends it on.
    fn reply(&mut self, mut packet: LoggedPacket, ruleset: Option<&Ruleset>) {
        let read = Instant::now();
        let reply = crate::dns_wire::udp_datagram(&packet.payload)
            .map_err(|e| e.to_string())
            .and_then(|d| crate::dns_wire::parse_reply(d.payload).map_err(|e| e.to_string()));
        match reply {
            Ok(reply) => {
                let sets: Vec<&NamedSet> = ruleset
                    .map(|rs| {
                        learned_sets(rs)
                            .filter(|s| {
                                s.learned
                                    .as_ref()
                                    .is_some_and(|ps| ps.iter().any(|p| p.matches(&reply.question)))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                if sets.is_empty() {
                    self.metrics.dns_reply("ignored");
                } else {
                    self.metrics.dns_reply("learned");
                    let lesson = self.learned.learn(
                        &reply.question,
                        &reply.addresses,
                        self.settings.ttl,
                        read,
                    );
                    let mut elements = self.learned.elements(sets, read);
                    elements.retain(|e| lesson.addresses.iter().any(|(ip, _)| *ip == e.ip));
                    if let Err(e) = palisade_nft::add_learned(&elements, self.netns.as_deref()) {
                        tracing::warn!(error = %e, name = %reply.question, "could not add learned addresses; connections to them stay denied");
                    }
                    self.metrics
                        .dns_addresses(lesson.new, 0, self.learned.len(read));
                    tracing::debug!(name = %reply.question, addresses = ?lesson.addresses, "learned");
                }
            }
            Err(e) => {
                self.metrics.dns_reply("undecodable");
                tracing::debug!(error = %e, "a DNS reply could not be read; passed on unlearned");
            }
        }
        // Every held reply is sent on, learned from or not: the pod gets its answer; what
        // was not learned stays denied.
        if packet.prefix == palisade_nft::HELD_PREFIX {
            match self.resender.send(&mut packet.payload) {
                Ok(()) => self.metrics.dns_held(read.elapsed().as_secs_f64()),
                Err(e) => {
                    // A reply larger than the path MTU to the pod (EMSGSIZE) is one case.
                    self.metrics.dns_reply("unsent");
                    tracing::warn!(error = %e, bytes = packet.payload.len(), "a held DNS reply could not be sent on");
                }
            }
        }
    }

    fn publish(&self) {
        let map = self.learned.dns_map(Instant::now());
        let text = crate::learned::hosts_text(&map);
        self.publish.send_if_modified(|old| {
            let changed = **old != map;
            if changed {
                *old = Arc::new(map);
            }
            changed
        });
        self.metrics.set_learned(text);
    }
}

/// The learned sets of a ruleset.
fn learned_sets(rs: &Ruleset) -> impl Iterator<Item = &NamedSet> {
    rs.sets.iter().filter(|s| s.learned.is_some())
}
