//! What the kernel enforces as of one reconcile, published to the readers (decision log,
//! metrics, status) as an immutable value: a reader takes the latest and never waits for
//! a reconcile in progress.

use std::sync::Arc;

use palisade_engine::{Change, Engine, Touched};
use palisade_nft::Ruleset;
use tokio::sync::watch;

/// The evaluators and the ruleset of one reconcile.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Counts the reconciles published (0: nothing yet).
    pub generation: u64,
    /// The enforced policies (`None` until the first full listing).
    pub engine: Option<Arc<Engine>>,
    /// Enforced plus staged policies, when any policy is staged.
    pub staged: Option<Arc<Engine>>,
    /// The ruleset in the kernel, if the last transaction succeeded.
    pub ruleset: Option<Arc<Ruleset>>,
}

/// Where the readers take the latest snapshot (`borrow().clone()`).
pub type Snapshots = watch::Receiver<Arc<Snapshot>>;

/// An engine shared with readers, kept current without a copy per change: the version the
/// readers were given before the current one is brought forward and reused once no reader
/// holds it any more (else the current one is copied).
#[derive(Debug)]
pub(crate) struct Published {
    current: Arc<Engine>,
    /// The previous version and the changes it lacks.
    previous: Option<(Arc<Engine>, Vec<Change>)>,
}

impl Published {
    /// Publishes a newly built engine, with a spare copy for the first change to take:
    /// copying a whole engine (85 ms at 10,000 pods) belongs with the full build, not on
    /// the way from the first change to the kernel.
    pub(crate) fn new(engine: Engine) -> Self {
        let spare = Arc::new(engine.clone());
        Published {
            current: Arc::new(engine),
            previous: Some((spare, Vec::new())),
        }
    }

    /// The version to give readers.
    pub(crate) fn current(&self) -> &Arc<Engine> {
        &self.current
    }

    /// Brings the previous version up to date now, if no reader holds it, so that the next
    /// change applies to it alone: replaying the changes it lacks is not on the way from
    /// that change to the kernel.
    pub(crate) fn prepare(&mut self) {
        let Some((previous, lag)) = self.previous.take() else {
            return;
        };
        if lag.is_empty() {
            self.previous = Some((previous, lag));
            return;
        }
        self.previous = Some(match Arc::try_unwrap(previous) {
            Ok(engine) => (Arc::new(self.caught_up(engine, lag)), Vec::new()),
            Err(held) => (held, lag),
        });
    }

    /// `engine`, the previous version, with the changes it lacks (`lag`) applied.
    fn caught_up(&self, mut engine: Engine, lag: Vec<Change>) -> Engine {
        for change in lag {
            engine.apply(change);
        }
        // The same changes from the same engine: the same addresses, and the compile's
        // caches of them stay valid for this version too.
        engine.share_address_epoch(&self.current);
        engine
    }

    /// Makes a new current version: the old one with `changes` applied, in order; returns
    /// what they touched.
    pub(crate) fn apply(&mut self, changes: Vec<Change>) -> Touched {
        let mut touched = Touched::default();
        if changes.is_empty() {
            return touched;
        }
        let mut next = match self.previous.take() {
            Some((previous, lag)) => match Arc::try_unwrap(previous) {
                Ok(engine) => self.caught_up(engine, lag),
                Err(_) => Engine::clone(&self.current),
            },
            None => Engine::clone(&self.current),
        };
        for change in &changes {
            touched.merge(&next.apply(change.clone()));
        }
        let previous = std::mem::replace(&mut self.current, Arc::new(next));
        self.previous = Some((previous, changes));
        touched
    }
}
