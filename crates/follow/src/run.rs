//! The follow loop: source events → [`Store`] → a [`Sink`], one batch at a time.
//!
//! Everything waiting when the loop wakes is taken at once, so a burst of changes becomes
//! one batch (one nftables transaction, one Neutron sync). The sink sees nothing before
//! the source's first full listing ([`Event::Synced`]): until then, what it enforced
//! before this process started stays in force.

use std::time::{Duration, Instant};

use crate::source::{Event, Source};
use crate::store::{Scope, SharedChange, Store};

/// A consistent new state of the store and the engine changes that lead to it.
pub struct Batch<'a> {
    /// The objects in force.
    pub store: &'a Store,
    /// The engine changes since the previous batch, in order (the first batch after the
    /// full listing: the changes since the start; build from [`Store::cluster`] instead).
    pub changes: Vec<(SharedChange, Scope)>,
    /// When the batch's first event was received.
    pub seen: Instant,
    /// How long decoding the events and working out the changes took.
    pub stored: Duration,
}

/// What follows the cluster: an enforcer of the objects in force.
pub trait Sink {
    /// One part of the source can read its input again (`problem: None`) or cannot.
    fn source_health(&mut self, part: &str, problem: Option<&str>);

    /// The store after every batch, before the first full listing too (counts, problems).
    fn stored(&mut self, store: &Store) {
        let _ = store;
    }

    /// Brings the sink to a new consistent state; called for each batch once the source
    /// has listed everything, and when [`Sink::wake_after`] passes with no event.
    fn apply(&mut self, batch: Batch<'_>);

    /// How long to wait for events before applying the same state again (`None`: wait
    /// for events only).
    fn wake_after(&self) -> Option<Duration> {
        None
    }
}

/// The store and whether the source's first full listing is in: the loop's state, one
/// batch at a time (for callers that drive it without [`follow`]: tests, benchmarks).
#[derive(Debug, Default)]
pub struct Follower {
    store: Store,
    synced: bool,
}

impl Follower {
    /// A follower that starts from `store`.
    pub fn new(store: Store) -> Self {
        Follower {
            store,
            synced: false,
        }
    }

    /// The objects in force.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Applies a batch of events first seen at `seen` to the store, then to the sink once
    /// the source has listed everything.
    pub fn step<S: Sink + ?Sized>(&mut self, events: Vec<Event>, seen: Instant, sink: &mut S) {
        let start = Instant::now();
        let mut changes = Vec::new();
        for event in events {
            self.synced |= event == Event::Synced;
            if let Event::Health { part, problem } = &event {
                sink.source_health(part, problem.as_deref());
            }
            changes.extend(self.store.handle(event));
        }
        sink.stored(&self.store);
        if self.synced {
            sink.apply(Batch {
                store: &self.store,
                changes,
                seen,
                stored: start.elapsed(),
            });
        }
    }
}

/// Follows `source` into `sink`, starting from `store`, until the source stops. The sink
/// runs on this task's thread (`block_in_place`: a multi-threaded runtime is needed), so
/// it may do blocking work.
pub async fn follow<S: Sink>(mut source: Source, store: Store, mut sink: S) {
    let mut follower = Follower::new(store);
    loop {
        let first = match sink.wake_after() {
            Some(wait) => tokio::select! {
                e = source.recv() => match e {
                    Some(e) => Some(e),
                    None => return,
                },
                () = tokio::time::sleep(wait) => None,
            },
            None => match source.recv().await {
                Some(e) => Some(e),
                None => return,
            },
        };
        let seen = Instant::now();
        let mut batch: Vec<Event> = first.into_iter().collect();
        while let Some(e) = source.try_recv() {
            batch.push(e);
        }
        tokio::task::block_in_place(|| follower.step(batch, seen, &mut sink));
    }
}
