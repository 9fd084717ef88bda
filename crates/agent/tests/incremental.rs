//! The reconciler compiles a policy edit and a relabel incrementally, and the ruleset it
//! commits is the full compile's (the kernel here is a stand-in that keeps what it gets).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::sync::Arc;
use std::time::Instant;

use palisade_agent::metrics::Metrics;
use palisade_agent::reconcile::{Config, Kernel, Outcome, Reconciler};
use palisade_follow::source::{Event, Text};
use palisade_follow::{Batch, Follower, Sink};
use palisade_nft::{KernelError, Ruleset};
use serde_json::Value;

/// A kernel that accepts every transaction.
struct Accepting;

impl Kernel for Accepting {
    fn replace(&mut self, _: &Ruleset, _: Option<&str>) -> Result<(), KernelError> {
        Ok(())
    }

    fn transition(&mut self, _: &Ruleset, _: &Ruleset, _: Option<&str>) -> Result<(), KernelError> {
        Ok(())
    }

    fn cut_forbidden(&mut self, _: &Ruleset, _: Option<&str>) -> Result<usize, KernelError> {
        Ok(0)
    }
}

/// The reconciler as the follow loop's sink, keeping each outcome.
struct Measured {
    reconciler: Reconciler,
    last: Option<Outcome>,
}

impl Sink for Measured {
    fn source_health(&mut self, _: &str, _: Option<&str>) {}

    fn apply(&mut self, batch: Batch<'_>) {
        self.last = Some(self.reconciler.reconcile(&batch).unwrap());
    }
}

fn text(i: usize, object: &Value) -> Text {
    Text {
        id: format!("objects/{i:06}.json"),
        body: object.to_string().into(),
    }
}

#[test]
fn a_policy_edit_and_a_relabel_are_compiled_incrementally_and_equal_the_full_compile() {
    let g = palisade_gen::generate(&palisade_gen::Spec {
        pods: 400,
        policies: 80,
        seed: 5,
        admin: true,
    });
    let objects: Vec<Value> = g.cluster.iter().chain(&g.policies).cloned().collect();
    for node in [None, Some("node-0")] {
        let config = Config {
            node: node.map(str::to_string),
            netns: None,
        };
        let reconciler = Reconciler::new(config, Arc::new(Metrics::new())).with_kernel(Accepting);
        let snapshots = reconciler.snapshots();
        let mut sink = Measured {
            reconciler,
            last: None,
        };
        let mut follower = Follower::default();
        let all = objects
            .iter()
            .enumerate()
            .map(|(i, o)| text(i, o))
            .collect();
        follower.step(
            vec![Event::Put(all), Event::Synced],
            Instant::now(),
            &mut sink,
        );

        let (np_index, np) = objects
            .iter()
            .enumerate()
            .find(|(_, o)| {
                o["kind"] == "NetworkPolicy" && o.pointer("/spec/ingress/0/ports/0/port").is_some()
            })
            .unwrap();
        let mut edited = np.clone();
        edited["spec"]["ingress"][0]["ports"][0]["port"] = Value::from(8081);
        let on_node = |o: &Value| {
            node.is_none_or(|n| o.pointer("/spec/nodeName").and_then(Value::as_str) == Some(n))
        };
        let pods: Vec<usize> = (0..objects.len())
            .filter(|&i| objects[i]["kind"] == "Pod" && on_node(&objects[i]))
            .collect();
        let (a, b) = (pods[0], pods[pods.len() / 2]);
        let mut relabelled = objects[a].clone();
        relabelled["metadata"]["labels"] = objects[b]["metadata"]["labels"].clone();

        for (i, changed) in [(np_index, edited), (a, relabelled)] {
            let before = snapshots.borrow().ruleset.clone().unwrap();
            follower.step(
                vec![Event::Put(vec![text(i, &changed)])],
                Instant::now(),
                &mut sink,
            );
            let outcome = sink.last.take().unwrap();
            assert!(
                outcome.committed && outcome.incremental,
                "{node:?}: {outcome:?}"
            );
            let now = snapshots.borrow().clone();
            let engine = now.engine.as_ref().unwrap();
            let full = palisade_nft::compile_after(engine, node, &before).unwrap();
            assert!(**now.ruleset.as_ref().unwrap() == full, "{node:?}");
        }
    }
}
