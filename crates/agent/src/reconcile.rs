//! The nftables sink of the follow loop: each batch of changes → [`Engine::apply`] → one
//! nftables transaction → conntrack cleanup of the connections the change forbids.
//!
//! Nothing reaches the kernel before the first full listing (the follow loop calls no sink
//! before it): until then a `palisade` table left by an earlier run keeps enforcing, and the first ruleset
//! replaces it atomically. A transaction the kernel refuses leaves the previous ruleset in
//! force; the next change retries with a full replace.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use palisade_engine::{Engine, Options};
use palisade_nft::{NftError, Ruleset};

use palisade_follow::store::{Scope, Store, Update};
use palisade_follow::{Batch, Sink};

use crate::metrics::Metrics;
use crate::status::Desired;

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

/// Keeps the kernel in step with the objects in force.
pub struct Reconciler {
    config: Config,
    state: Shared,
    metrics: Arc<Metrics>,
    /// Where the enforced admin policies are published for `--report-status`.
    status: Option<tokio::sync::watch::Sender<Desired>>,
}

/// What one reconcile did, and where its time went.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Engine changes applied.
    pub changes: usize,
    /// Whether a transaction was committed to the kernel.
    pub committed: bool,
    /// Decoding the texts and working out the changes.
    pub store: Duration,
    /// Applying the changes to the evaluators.
    pub engine: Duration,
    /// Compiling the ruleset.
    pub compile: Duration,
    /// The kernel transaction.
    pub transaction: Duration,
    /// Deleting the tracked connections the change forbids.
    pub conntrack: Duration,
}

impl Reconciler {
    /// A reconciler that has seen nothing yet.
    pub fn new(config: Config, state: Shared, metrics: Arc<Metrics>) -> Self {
        Reconciler {
            config,
            state,
            metrics,
            status: None,
        }
    }

    /// Publishes, after each reconcile that leaves a ruleset in the kernel, the enforced
    /// admin policies (for the status reporter).
    pub fn with_status(mut self, status: tokio::sync::watch::Sender<Desired>) -> Self {
        self.status = Some(status);
        self
    }

    /// Brings the evaluators to a batch; commits to the kernel when the enforced state
    /// changed (or on the first batch).
    pub fn reconcile(&mut self, batch: &Batch<'_>) -> Result<Outcome, NftError> {
        let start = Instant::now()
            .checked_sub(batch.stored)
            .unwrap_or_else(Instant::now);
        let (store, changes, seen) = (batch.store, &batch.changes, batch.seen);
        let mut outcome = Outcome {
            changes: changes.len(),
            store: batch.stored,
            ..Outcome::default()
        };
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        let first = state.engine.is_none();
        let mut enforced_changed = first || state.ruleset.is_none();
        let t = Instant::now();
        if first {
            state.engine = Some(Engine::new(store.cluster(), Options::default()));
        } else if let Some(engine) = state.engine.as_mut() {
            for (update, scope) in changes {
                if *scope == Scope::Enforced {
                    engine.apply(update.change());
                    enforced_changed = true;
                }
            }
        }
        follow_staged(store, &mut state, changes, first);
        outcome.engine = t.elapsed();
        if enforced_changed {
            let committed = self.commit(&mut state, seen, &mut outcome);
            drop(state);
            if committed.as_ref().is_ok_and(|c| *c) {
                self.cut_forbidden(&mut outcome);
            }
            self.metrics.reconciled(start, &committed);
            outcome.committed = committed?;
        } else {
            drop(state);
        }
        self.publish_status(store);
        Ok(outcome)
    }

    /// Publishes the enforced admin policies when a ruleset is in the kernel (after a
    /// refused transaction, nothing new is said until one is).
    fn publish_status(&self, store: &Store) {
        let Some(status) = &self.status else {
            return;
        };
        let in_force = self
            .state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .ruleset
            .is_some();
        if in_force {
            let now = crate::status::desired(store);
            status.send_if_modified(|shown| {
                let changed = *shown != now;
                if changed {
                    *shown = now;
                }
                changed
            });
        }
    }

    /// Compiles the enforced engine and brings the kernel to it: a full atomic replace the
    /// first time (or after a refused transaction), else an incremental update; then cuts
    /// the tracked connections the new ruleset forbids.
    fn commit(
        &self,
        state: &mut State,
        seen: Instant,
        outcome: &mut Outcome,
    ) -> Result<bool, NftError> {
        let Some(engine) = state.engine.as_ref() else {
            return Ok(false);
        };
        let t = Instant::now();
        let node = self.config.node.as_deref();
        // Keeping the log ids of the ruleset in force keeps unchanged chains unchanged.
        let new = match &state.ruleset {
            Some(previous) => palisade_nft::compile_after(engine, node, previous)?,
            None => palisade_nft::compile(engine, node)?,
        };
        outcome.compile = t.elapsed();
        let netns = self.config.netns.as_deref();
        let t = Instant::now();
        // On failure the kernel still holds the old ruleset (the transaction is atomic),
        // and `state.ruleset` stays empty: the next change replaces the table whole.
        match state.ruleset.take() {
            None => palisade_nft::apply(&new, netns)?,
            Some(old) => {
                palisade_nft::transition(&old, &new, netns)?;
            }
        }
        outcome.transaction = t.elapsed();
        self.metrics.applied(seen);
        self.metrics.ruleset(&new);
        state.ruleset = Some(new);
        Ok(true)
    }

    /// Deletes the tracked connections the ruleset in force forbids (readers of the state
    /// are not held up meanwhile).
    fn cut_forbidden(&self, outcome: &mut Outcome) {
        let t = Instant::now();
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        if let Some(ruleset) = &state.ruleset {
            match palisade_nft::cut_forbidden(ruleset, self.config.netns.as_deref()) {
                Ok(n) => self.metrics.connections_cut(n),
                Err(e) => tracing::warn!(error = %e, "conntrack cleanup failed"),
            }
        }
        outcome.conntrack = t.elapsed();
    }
}

impl Sink for Reconciler {
    fn source_health(&mut self, part: &str, problem: Option<&str>) {
        self.metrics.source_health(part, problem);
    }

    fn stored(&mut self, store: &Store) {
        self.metrics.objects(store);
    }

    fn apply(&mut self, batch: Batch<'_>) {
        let seen = batch.seen;
        match self.reconcile(&batch) {
            Ok(o) if o.committed => {
                let ms = |d: Duration| d.as_millis() as u64;
                tracing::info!(
                    changes = o.changes,
                    elapsed_ms = ms(seen.elapsed()),
                    store_ms = ms(o.store),
                    engine_ms = ms(o.engine),
                    compile_ms = ms(o.compile),
                    transaction_ms = ms(o.transaction),
                    conntrack_ms = ms(o.conntrack),
                    "ruleset updated"
                );
            }
            Ok(_) => {}
            Err(e) => {
                tracing::error!(error = %e, "reconcile failed; the previous ruleset stays in force")
            }
        }
    }
}

/// Keeps the staged view (enforced plus staged policies) in step, or drops it.
fn follow_staged(store: &Store, state: &mut State, changes: &[(Update, Scope)], rebuild: bool) {
    if !store.has_staged() {
        state.staged = None;
        return;
    }
    match state.staged.as_mut() {
        Some(staged) if !rebuild => {
            for (update, _) in changes {
                staged.apply(update.change());
            }
        }
        _ => {
            let cluster = store.cluster().with_staged();
            state.staged = Some(Engine::new(cluster, Options::default()));
        }
    }
}
