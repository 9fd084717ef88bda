//! The nftables sink of the follow loop: each batch of changes → [`Engine::apply`] → one
//! nftables transaction → conntrack cleanup of the connections the change forbids.
//!
//! Nothing reaches the kernel before the first full listing (the follow loop calls no sink
//! before it): until then a `palisade` table left by an earlier run keeps enforcing, and
//! the first ruleset replaces it atomically. A transaction the kernel refuses leaves the
//! previous ruleset in force; the next change retries with a full replace.
//!
//! The reconciler owns its evaluators and ruleset; after each reconcile it publishes a
//! [`Snapshot`] of them, so readers never wait for the kernel work.

use std::sync::Arc;
use std::time::{Duration, Instant};

use palisade_engine::{Change, Engine, Options, Touched};
use palisade_nft::{Compiled, KernelError, NftError, Ruleset};

use palisade_follow::store::{Scope, SharedChange, Store};
use palisade_follow::{Batch, Sink};
use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::snapshot::{Published, Snapshot, Snapshots};
use crate::status::Desired;

/// What the reconciler needs to know about where it runs.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Enforce only this node's pods (`None`: every pod with an address).
    pub node: Option<String>,
    /// Apply inside this network namespace (`ip netns exec`); `None`: the agent's own.
    pub netns: Option<String>,
}

/// Where rulesets are applied: this network namespace's nftables and conntrack
/// ([`Nftables`]), or a stand-in in tests.
pub trait Kernel: Send {
    /// Replaces the `palisade` table with `new`, atomically.
    fn replace(&mut self, new: &Ruleset, netns: Option<&str>) -> Result<(), KernelError>;
    /// Brings the table from `old` (in force) to `new` in one transaction.
    fn transition(
        &mut self,
        old: &Ruleset,
        new: &Ruleset,
        netns: Option<&str>,
    ) -> Result<(), KernelError>;
    /// Deletes the tracked connections `ruleset` forbids; returns how many.
    fn cut_forbidden(
        &mut self,
        ruleset: &Ruleset,
        netns: Option<&str>,
    ) -> Result<usize, KernelError>;
}

/// The kernel's nftables and conntrack.
#[derive(Debug, Default, Clone, Copy)]
pub struct Nftables;

impl Kernel for Nftables {
    fn replace(&mut self, new: &Ruleset, netns: Option<&str>) -> Result<(), KernelError> {
        palisade_nft::apply(new, netns)
    }

    fn transition(
        &mut self,
        old: &Ruleset,
        new: &Ruleset,
        netns: Option<&str>,
    ) -> Result<(), KernelError> {
        palisade_nft::transition(old, new, netns).map(|_| ())
    }

    fn cut_forbidden(
        &mut self,
        ruleset: &Ruleset,
        netns: Option<&str>,
    ) -> Result<usize, KernelError> {
        palisade_nft::cut_forbidden(ruleset, netns)
    }
}

/// Keeps the kernel in step with the objects in force.
pub struct Reconciler {
    config: Config,
    metrics: Arc<Metrics>,
    kernel: Box<dyn Kernel>,
    /// The enforced policies (`None` until the first full listing).
    engine: Option<Published>,
    /// Enforced plus staged policies, when any policy is staged.
    staged: Option<Published>,
    /// The ruleset in the kernel, if the last transaction succeeded, with what the next
    /// compile reuses of it.
    compiled: Option<Compiled>,
    /// What the changes since that compile touched.
    touched: Touched,
    /// Where each reconcile's snapshot is published.
    snapshots: watch::Sender<Arc<Snapshot>>,
    /// Where the enforced admin policies are published for `--report-status`.
    status: Option<watch::Sender<Desired>>,
    /// The names learned from DNS replies, when the agent learns them: the connection cut
    /// counts their addresses as in the learned sets.
    learned: Option<crate::learner::LearnedNames>,
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
    /// Whether the ruleset was compiled from the previous one (only what changed built).
    pub incremental: bool,
}

impl Reconciler {
    /// A reconciler that has seen nothing yet, applying to the kernel.
    pub fn new(config: Config, metrics: Arc<Metrics>) -> Self {
        Reconciler {
            config,
            metrics,
            kernel: Box::new(Nftables),
            engine: None,
            staged: None,
            compiled: None,
            touched: Touched::default(),
            snapshots: watch::Sender::new(Arc::default()),
            status: None,
            learned: None,
        }
    }

    /// Counts, when cutting connections, the addresses learned from DNS replies as members
    /// of the learned sets (else every connection a `domainNames` rule admitted would look
    /// forbidden).
    pub fn with_learned(mut self, names: crate::learner::LearnedNames) -> Self {
        self.learned = Some(names);
        self
    }

    /// Applies rulesets to `kernel` instead of this network namespace's nftables.
    pub fn with_kernel(mut self, kernel: impl Kernel + 'static) -> Self {
        self.kernel = Box::new(kernel);
        self
    }

    /// Publishes, after each reconcile that leaves a ruleset in the kernel, the enforced
    /// admin policies (for the status reporter).
    pub fn with_status(mut self, status: watch::Sender<Desired>) -> Self {
        self.status = Some(status);
        self
    }

    /// Where readers take the latest snapshot.
    pub fn snapshots(&self) -> Snapshots {
        self.snapshots.subscribe()
    }

    /// Brings the evaluators to a batch; commits to the kernel when the enforced state
    /// changed (or on the first batch); publishes the result.
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
        let first = self.engine.is_none();
        let mut enforced_changed = first || self.compiled.is_none();
        let t = Instant::now();
        match self.engine.as_mut() {
            None => {
                let engine = Engine::new(store.cluster(), Options::default());
                self.engine = Some(Published::new(engine));
            }
            Some(engine) => {
                let enforced: Vec<Change> = changes
                    .iter()
                    .filter(|(_, scope)| *scope == Scope::Enforced)
                    .map(|(change, _)| change.cloned())
                    .collect();
                enforced_changed |= !enforced.is_empty();
                self.touched.merge(&engine.apply(enforced));
            }
        }
        self.follow_staged(store, changes, first);
        outcome.engine = t.elapsed();
        let committed = enforced_changed.then(|| self.commit(seen, &mut outcome));
        self.publish();
        if let Some(committed) = committed {
            if committed.as_ref().is_ok_and(|c| *c) {
                self.cut_forbidden(&mut outcome);
            }
            self.metrics.reconciled(start, &committed);
            outcome.committed = committed?;
        }
        self.publish_status(store);
        // The readers now hold the version just published: the one before it can take
        // the changes it lacks before the next batch arrives.
        for published in [self.engine.as_mut(), self.staged.as_mut()]
            .into_iter()
            .flatten()
        {
            published.prepare();
        }
        Ok(outcome)
    }

    /// Publishes the evaluators and the ruleset in force as the next snapshot.
    fn publish(&self) {
        let generation = self.snapshots.borrow().generation + 1;
        self.snapshots.send_replace(Arc::new(Snapshot {
            generation,
            engine: self.engine.as_ref().map(|e| e.current().clone()),
            staged: self.staged.as_ref().map(|e| e.current().clone()),
            ruleset: self.ruleset().cloned(),
        }));
    }

    /// Keeps the staged view (enforced plus staged policies) in step, or drops it.
    fn follow_staged(&mut self, store: &Store, changes: &[(SharedChange, Scope)], rebuild: bool) {
        if !store.has_staged() {
            self.staged = None;
            return;
        }
        match self.staged.as_mut() {
            Some(staged) if !rebuild => {
                staged.apply(changes.iter().map(|(change, _)| change.cloned()).collect());
            }
            _ => {
                let cluster = store.cluster().with_staged();
                self.staged = Some(Published::new(Engine::new(cluster, Options::default())));
            }
        }
    }

    /// Publishes the enforced admin policies when a ruleset is in the kernel (after a
    /// refused transaction, nothing new is said until one is).
    fn publish_status(&self, store: &Store) {
        let Some(status) = &self.status else {
            return;
        };
        if self.compiled.is_some() {
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

    /// The ruleset in the kernel, if the last transaction succeeded.
    fn ruleset(&self) -> Option<&Arc<Ruleset>> {
        self.compiled.as_ref().map(Compiled::ruleset)
    }

    /// Compiles the enforced engine and brings the kernel to it: a full atomic replace the
    /// first time (or after a refused transaction), else an incremental update.
    fn commit(&mut self, seen: Instant, outcome: &mut Outcome) -> Result<bool, NftError> {
        let Some(engine) = self.engine.as_ref() else {
            return Ok(false);
        };
        let engine = engine.current().clone();
        let t = Instant::now();
        let node = self.config.node.as_deref();
        // From the ruleset in force: its log ids are kept, which keeps unchanged chains
        // unchanged, and only what the changes touched is built again.
        let new = match &mut self.compiled {
            Some(previous) => {
                let (new, path) = previous.next(&engine, node, &self.touched)?;
                outcome.incremental = path == palisade_nft::Path::Incremental;
                if let palisade_nft::Path::Full(why) = path {
                    tracing::debug!(why, "compiled in full");
                }
                new
            }
            None => Compiled::full(&engine, node, None)?,
        };
        self.touched = Touched::default();
        outcome.compile = t.elapsed();
        let netns = self.config.netns.as_deref();
        let t = Instant::now();
        // On failure the kernel still holds the old ruleset (the transaction is atomic),
        // and `self.compiled` stays empty: the next change replaces the table whole.
        let old = self.compiled.take();
        match &old {
            None => self.kernel.replace(new.ruleset(), netns)?,
            Some(old) => self
                .kernel
                .transition(old.ruleset(), new.ruleset(), netns)?,
        }
        outcome.transaction = t.elapsed();
        self.metrics.applied(seen);
        self.metrics.ruleset(new.ruleset());
        // Freeing what the previous compile kept (the programs and chains of the classes
        // built again, the peer sets no program names any more) is not on the way to the
        // kernel.
        drop(old);
        new.tidy();
        self.compiled = Some(new);
        Ok(true)
    }

    /// Deletes the tracked connections the ruleset in force forbids.
    fn cut_forbidden(&mut self, outcome: &mut Outcome) {
        let t = Instant::now();
        if let Some(mut ruleset) = self.ruleset().cloned() {
            if let Some(names) = &self.learned
                && let Some(filled) = crate::learned::with_addresses(&ruleset, &names.borrow())
            {
                ruleset = Arc::new(filled);
            }
            match self
                .kernel
                .cut_forbidden(&ruleset, self.config.netns.as_deref())
            {
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
