//! Readers take the latest published snapshot and are never held up by a reconcile in
//! progress (the kernel work here is a stand-in that blocks until the test releases it).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use palisade_agent::metrics::Metrics;
use palisade_agent::reconcile::{Config, Kernel, Reconciler};
use palisade_agent::snapshot::Snapshot;
use palisade_follow::Follower;
use palisade_follow::source::{Event, Text};
use palisade_nft::{KernelError, Ruleset};

const CLUSTER: &str = include_str!("../../../examples/xyz/cluster.yaml");
const DENY_X: &str = include_str!("../../../examples/xyz/policies/01-deny-ingress-x.yaml");

/// A kernel whose incremental transactions wait until the test releases them.
struct Gate {
    entered: Sender<()>,
    release: Receiver<()>,
}

impl Kernel for Gate {
    fn replace(&mut self, _: &Ruleset, _: Option<&str>) -> Result<(), KernelError> {
        Ok(())
    }

    fn transition(&mut self, _: &Ruleset, _: &Ruleset, _: Option<&str>) -> Result<(), KernelError> {
        self.entered.send(()).unwrap();
        self.release.recv().unwrap();
        Ok(())
    }

    fn cut_forbidden(&mut self, _: &Ruleset, _: Option<&str>) -> Result<usize, KernelError> {
        Ok(0)
    }
}

fn text(id: &str, body: &str) -> Text {
    Text {
        id: id.into(),
        body: body.into(),
    }
}

#[test]
fn a_reader_is_not_blocked_while_a_reconcile_is_in_progress() {
    let (entered_tx, entered) = channel();
    let (release, release_rx) = channel();
    let gate = Gate {
        entered: entered_tx,
        release: release_rx,
    };
    let mut reconciler =
        Reconciler::new(Config::default(), Arc::new(Metrics::new())).with_kernel(gate);
    let snapshots = reconciler.snapshots();
    assert_eq!(snapshots.borrow().generation, 0, "nothing published yet");
    let mut follower = Follower::default();

    // The first full listing: a full replace, which the gate lets through.
    follower.step(
        vec![
            Event::Put(vec![text("cluster.yaml", CLUSTER)]),
            Event::Synced,
        ],
        Instant::now(),
        &mut reconciler,
    );
    let first = snapshots.borrow().clone();
    assert_eq!(first.generation, 1);
    assert!(first.ruleset.is_some(), "the first ruleset is in force");
    let pods = first.engine.as_ref().unwrap().cluster().pods.len();

    // A new policy: its incremental transaction blocks in the kernel stand-in.
    let worker = std::thread::spawn(move || {
        follower.step(
            vec![Event::Put(vec![text("deny.yaml", DENY_X)])],
            Instant::now(),
            &mut reconciler,
        );
        reconciler
    });
    entered
        .recv_timeout(Duration::from_secs(30))
        .expect("the reconcile reached the kernel");

    // Meanwhile a reader, on its own thread, gets the last published snapshot at once.
    let reader = {
        let snapshots = snapshots.clone();
        let (done, finished) = channel();
        std::thread::spawn(move || {
            let snapshot = snapshots.borrow().clone();
            done.send((snapshot.generation, snapshot.engine.clone()))
                .unwrap();
        });
        finished
    };
    let (generation, engine) = reader
        .recv_timeout(Duration::from_secs(5))
        .expect("a reader is not blocked by the reconcile in progress");
    assert_eq!(
        generation, 1,
        "the reader sees the state in force, not the one being applied"
    );
    assert_eq!(engine.unwrap().cluster().pods.len(), pods);
    let policies = |s: &Snapshot| s.engine.as_ref().unwrap().cluster().network_policies.len();
    assert_eq!(policies(&first), 0, "a published snapshot never changes");

    release.send(()).unwrap();
    let reconciler = worker.join().unwrap();
    let now = snapshots.borrow().clone();
    assert_eq!(now.generation, 2);
    assert_eq!(policies(&now), 1);
    assert_eq!(
        policies(&first),
        0,
        "the snapshot a reader kept is unchanged after the commit"
    );
    drop(reconciler);
}
