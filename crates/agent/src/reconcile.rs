//! The reconcile loop: source events → [`Store`] → [`Engine::apply`] → one nftables
//! transaction → conntrack cleanup of the connections the change forbids.
//!
//! Nothing reaches the kernel before the first full listing ([`Event::Synced`]): until
//! then a `palisade` table left by an earlier run keeps enforcing, and the first ruleset
//! replaces it atomically. A transaction the kernel refuses leaves the previous ruleset in
//! force; the next change retries with a full replace.

use std::sync::{Arc, RwLock};
use std::time::Instant;

use palisade_engine::{Engine, Options};
use palisade_nft::{NftError, Ruleset};

use crate::metrics::Metrics;
use crate::source::Event;
use crate::store::{Scope, Store};

/// What the reconciler needs to know about where it runs.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Enforce only this node's pods (`None`: every pod with an address).
    pub node: Option<String>,
    /// Apply inside this network namespace (`ip netns exec`); `None`: the agent's own.
    pub netns: Option<String>,
}

/// The evaluator state the kernel enforces, shared with the decision log.
#[derive(Default)]
pub struct State {
    /// The enforced policies (`None` until the first full listing).
    pub engine: Option<Engine>,
    /// Enforced plus staged policies, when any policy is staged.
    pub staged: Option<Engine>,
    /// The ruleset in the kernel, if the last transaction succeeded.
    pub ruleset: Option<Ruleset>,
}

/// State shared between the reconciler and its readers.
pub type Shared = Arc<RwLock<State>>;

/// Follows source events and keeps the kernel in step.
pub struct Reconciler {
    config: Config,
    store: Store,
    synced: bool,
    state: Shared,
    metrics: Arc<Metrics>,
}

/// What one reconcile did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Engine changes applied.
    pub changes: usize,
    /// Whether a transaction was committed to the kernel.
    pub committed: bool,
}

impl Reconciler {
    /// A reconciler that has seen nothing yet.
    pub fn new(config: Config, state: Shared, metrics: Arc<Metrics>) -> Self {
        Reconciler {
            config,
            store: Store::default(),
            synced: false,
            state,
            metrics,
        }
    }

    /// Applies a batch of events first seen at `seen`; commits to the kernel when the
    /// enforced state changed (or on the first full listing).
    pub fn handle(&mut self, events: Vec<Event>, seen: Instant) -> Result<Outcome, NftError> {
        let start = Instant::now();
        let mut changes = Vec::new();
        for event in events {
            self.synced |= event == Event::Synced;
            changes.extend(self.store.handle(event));
        }
        self.metrics.objects(&self.store);
        if !self.synced {
            return Ok(Outcome::default());
        }
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        let first = state.engine.is_none();
        let mut enforced_changed = first || state.ruleset.is_none();
        if first {
            state.engine = Some(Engine::new(self.store.cluster(), Options::default()));
        } else if let Some(engine) = state.engine.as_mut() {
            for (change, scope) in &changes {
                if *scope == Scope::Enforced {
                    engine.apply(change.clone());
                    enforced_changed = true;
                }
            }
        }
        self.follow_staged(&mut state, &changes, first);
        let result = if enforced_changed {
            self.commit(&mut state)
        } else {
            Ok(false)
        };
        drop(state);
        self.metrics.reconciled(start, seen, &result);
        Ok(Outcome {
            changes: changes.len(),
            committed: result?,
        })
    }

    /// Keeps the staged view (enforced plus staged policies) in step, or drops it.
    fn follow_staged(
        &self,
        state: &mut State,
        changes: &[(palisade_engine::Change, Scope)],
        rebuild: bool,
    ) {
        if !self.store.has_staged() {
            state.staged = None;
            return;
        }
        match state.staged.as_mut() {
            Some(staged) if !rebuild => {
                for (change, _) in changes {
                    staged.apply(change.clone());
                }
            }
            _ => {
                let cluster = self.store.cluster().with_staged();
                state.staged = Some(Engine::new(cluster, Options::default()));
            }
        }
    }

    /// Compiles the enforced engine and brings the kernel to it: a full atomic replace the
    /// first time (or after a refused transaction), else an incremental update.
    fn commit(&self, state: &mut State) -> Result<bool, NftError> {
        let Some(engine) = state.engine.as_ref() else {
            return Ok(false);
        };
        let new = palisade_nft::compile(engine, self.config.node.as_deref())?;
        let netns = self.config.netns.as_deref();
        let result = match state.ruleset.take() {
            None => palisade_nft::apply(&new, netns)
                .and_then(|()| palisade_nft::cut_forbidden(&new, netns)),
            Some(old) => palisade_nft::update(&old, &new, netns).map(|s| s.connections_cut),
        };
        match result {
            Ok(cut) => {
                self.metrics.connections_cut(cut);
                self.metrics.ruleset(&new);
                state.ruleset = Some(new);
                Ok(true)
            }
            // The transaction was atomic: the kernel still holds the old ruleset; the next
            // change replaces it whole.
            Err(e) => Err(e),
        }
    }

    /// Whether the first full listing is in the kernel.
    pub fn ready(&self) -> bool {
        self.synced
            && self
                .state
                .read()
                .map(|s| s.ruleset.is_some())
                .unwrap_or(false)
    }

    /// The objects in force and their problems.
    pub fn store(&self) -> &Store {
        &self.store
    }
}
