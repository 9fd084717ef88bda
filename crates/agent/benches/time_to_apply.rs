//! Time-to-apply: from one changed object reaching the reconcile loop to its nftables
//! transaction committed (conntrack cleanup included), at 1,000 and 10,000 generated pods,
//! for a policy change, a pod relabel and a change to an admin policy selecting every pod,
//! with one node's pods local and with every pod local. Needs root (a scratch network
//! namespace); prints p50 and p99.
//!
//! `cargo bench -p palisade-agent --bench time_to_apply [-- PODS... [--local node|all]
//! [--only policy|relabel] [--changes N]]`: `--local` runs one of the two placements,
//! `--only` one of the two kinds of change (`policy`: both policy changes; the other kind
//! is made twice, to warm up), and
//! `--changes` measures N changes of each kind instead of 40 (for a profile).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use palisade_agent::metrics::Metrics;
use palisade_agent::reconcile::{Config, Outcome, Reconciler};
use palisade_follow::source::{Event, Text};
use palisade_follow::{Batch, Follower, Sink};
use serde_json::Value;

/// The allocator the `palisade` binary (which runs the agent) ships with, so that the
/// bench measures what runs: freeing one compile and allocating the next cost otherwise
/// under the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Changes measured per scenario, by default.
const CHANGES: usize = 40;

/// What to run.
struct Args {
    sizes: Vec<usize>,
    /// Only the node's pods local (`Some(true)`), only every pod (`Some(false)`), or both.
    node_local: Option<bool>,
    /// Only policy changes (`Some(true)`), only relabels (`Some(false)`), or both.
    policy: Option<bool>,
    changes: usize,
}

impl Args {
    fn parse() -> Args {
        let mut args = Args {
            sizes: Vec::new(),
            node_local: None,
            policy: None,
            changes: CHANGES,
        };
        let mut it = std::env::args().skip(1);
        while let Some(a) = it.next() {
            match a.as_str() {
                "--local" => args.node_local = Some(it.next().as_deref() == Some("node")),
                "--only" => args.policy = Some(it.next().as_deref() == Some("policy")),
                "--changes" => {
                    args.changes = it.next().and_then(|n| n.parse().ok()).unwrap_or(CHANGES)
                }
                // cargo bench passes `--bench`; sizes are numbers.
                _ => args.sizes.extend(a.parse::<usize>().ok()),
            }
        }
        if args.sizes.is_empty() {
            args.sizes = vec![1000, 10000];
        }
        args
    }

    /// How many changes of the policy kind (`true`) or relabels to make.
    fn count(&self, policy: bool) -> usize {
        match self.policy {
            Some(only) if only != policy => 2,
            _ => self.changes,
        }
    }
}

/// The agent's sink, keeping each reconcile's outcome.
struct Measured {
    reconciler: Reconciler,
    last: Option<Outcome>,
}

impl Sink for Measured {
    fn source_health(&mut self, _: &str, _: Option<&str>) {}

    fn apply(&mut self, batch: Batch<'_>) {
        self.last = Some(self.reconciler.reconcile(&batch).expect("reconcile"));
    }
}

impl Measured {
    /// One batch through the follow loop's step and the reconciler.
    fn handle(&mut self, follower: &mut Follower, events: Vec<Event>, seen: Instant) -> Outcome {
        follower.step(events, seen, self);
        self.last.take().expect("a reconcile")
    }
}

struct Netns(String);

impl Netns {
    fn new() -> Netns {
        let name = format!("pal-tta-{}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .unwrap();
        assert!(ok.success(), "ip netns add (root needed)");
        Netns(name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn text(i: usize, object: &Value) -> Text {
    Text {
        id: format!("objects/{i:06}.json"),
        body: object.to_string().into(),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Prints p50/p99 of time-to-apply (to the committed transaction) and the p50 of each part.
fn report(what: &str, outcomes: &[(Duration, Outcome)]) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let p = |f: &dyn Fn(&(Duration, Outcome)) -> Duration, q: f64| {
        let mut v: Vec<Duration> = outcomes.iter().map(f).collect();
        v.sort();
        percentile(&v, q)
    };
    let incremental = outcomes.iter().filter(|o| o.1.incremental).count();
    println!(
        "{what:<52} p50 {:>7.1} ms  p99 {:>7.1} ms   (p50: store {:.1}, engine {:.1}, compile {:.1}, nft {:.1}; then conntrack {:.1}; compiled incrementally {incremental}/{})",
        ms(p(&|o| o.0, 0.5)),
        ms(p(&|o| o.0, 0.99)),
        ms(p(&|o| o.1.store, 0.5)),
        ms(p(&|o| o.1.engine, 0.5)),
        ms(p(&|o| o.1.compile, 0.5)),
        ms(p(&|o| o.1.transaction, 0.5)),
        ms(p(&|o| o.1.conntrack, 0.5)),
        outcomes.len(),
    );
    // The slowest change (p99 of 40 is the slowest), by stage and by its place in the run.
    if let Some((i, (total, o))) = outcomes.iter().enumerate().max_by_key(|(_, o)| o.0) {
        println!(
            "{:<52} slowest: change {} of {}, {:.1} ms (store {:.1}, engine {:.1}, compile {:.1}, nft {:.1})",
            "",
            i + 1,
            outcomes.len(),
            ms(*total),
            ms(o.store),
            ms(o.engine),
            ms(o.compile),
            ms(o.transaction),
        );
    }
}

/// Time-to-apply of one outcome: everything up to the committed transaction.
fn to_apply(o: &Outcome) -> Duration {
    o.store + o.engine + o.compile + o.transaction
}

fn scenario(pods: usize, node: Option<&str>, args: &Args) {
    let generated = palisade_gen::generate(&palisade_gen::Spec {
        pods,
        policies: pods / 5,
        seed: 1,
        admin: true,
    });
    let objects: Vec<Value> = generated
        .cluster
        .iter()
        .chain(&generated.policies)
        .cloned()
        .collect();
    let netns = Netns::new();
    let config = Config {
        node: node.map(str::to_string),
        netns: Some(netns.0.clone()),
    };
    let mut r = Measured {
        reconciler: Reconciler::new(config, Arc::new(Metrics::new())),
        last: None,
    };
    let mut follower = Follower::default();
    let texts: Vec<Text> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| text(i, o))
        .collect();
    let start = Instant::now();
    r.handle(&mut follower, vec![Event::Put(texts), Event::Synced], start);
    let local = node.map_or("every pod local".to_string(), |n| {
        format!("pods of {n} local")
    });
    println!(
        "{pods} pods, {local}: first sync {:.0} ms",
        start.elapsed().as_secs_f64() * 1e3
    );

    // A policy change: a NetworkPolicy's first port moves between two values. The policy
    // selects a local pod, so that the change reaches the node's ruleset.
    let on_node = |o: &Value| {
        node.is_none_or(|n| o.pointer("/spec/nodeName").and_then(Value::as_str) == Some(n))
    };
    let selects_local = |np: &Value| {
        objects.iter().any(|o| {
            o["kind"] == "Pod"
                && on_node(o)
                && o["metadata"]["namespace"] == np["metadata"]["namespace"]
                && selects(&np["spec"]["podSelector"], &o["metadata"]["labels"])
        })
    };
    let (np_index, np) = objects
        .iter()
        .enumerate()
        .find(|(_, o)| {
            o["kind"] == "NetworkPolicy"
                && o.pointer("/spec/ingress/0/ports/0/port").is_some()
                && selects_local(o)
        })
        .expect("a NetworkPolicy with an ingress port selecting a local pod");
    let mut times = Vec::new();
    for i in 0..args.count(true) {
        let mut changed = np.clone();
        changed["spec"]["ingress"][0]["ports"][0]["port"] =
            Value::from(if i % 2 == 0 { 8081 } else { 80 });
        let o = r.handle(
            &mut follower,
            vec![Event::Put(vec![text(np_index, &changed)])],
            Instant::now(),
        );
        assert!(o.committed);
        times.push((to_apply(&o), o));
    }
    report(&format!("{pods} pods, {local}: one policy change"), &times);

    // A relabel: a pod (on the node, when there is one) takes another deployment's labels.
    let pods_idx: Vec<usize> = objects
        .iter()
        .enumerate()
        .filter(|(_, o)| o["kind"] == "Pod" && on_node(o))
        .map(|(i, _)| i)
        .collect();
    let (a, b) = (pods_idx[0], pods_idx[pods_idx.len() / 2]);
    let mut times = Vec::new();
    for i in 0..args.count(false) {
        let mut changed = objects[a].clone();
        if i % 2 == 0 {
            changed["metadata"]["labels"] = objects[b]["metadata"]["labels"].clone();
        }
        let o = r.handle(
            &mut follower,
            vec![Event::Put(vec![text(a, &changed)])],
            Instant::now(),
        );
        times.push((to_apply(&o), o));
    }
    report(&format!("{pods} pods, {local}: one pod relabel"), &times);

    // A cluster-wide admin change: an AdminNetworkPolicy whose subject is every pod moves
    // its port between two values, so that every local pod's ingress decisions change.
    let index = objects.len();
    let mut times = Vec::new();
    for i in 0..=args.count(true) {
        let port = if i % 2 == 0 { 8081 } else { 80 };
        let anp = serde_json::json!({
            "apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
            "metadata": {"name": "bench-cluster-wide"},
            "spec": {"priority": 999, "subject": {"namespaces": {}},
                "ingress": [{"name": "r", "action": "Allow", "from": [{"namespaces": {}}],
                    "ports": [{"portNumber": {"protocol": "TCP", "port": port}}]}]}
        });
        let o = r.handle(
            &mut follower,
            vec![Event::Put(vec![text(index, &anp)])],
            Instant::now(),
        );
        assert!(o.committed);
        // The first puts the policy in place; the others change it.
        if i > 0 {
            times.push((to_apply(&o), o));
        }
    }
    report(
        &format!("{pods} pods, {local}: one cluster-wide admin change"),
        &times,
    );
}

/// Whether a pod selector of `matchLabels` only selects a pod with `labels` (one with
/// `matchExpressions` is taken to select none: the bench only needs some policy that
/// selects).
fn selects(selector: &Value, labels: &Value) -> bool {
    let Some(selector) = selector.as_object() else {
        return false;
    };
    if selector.keys().any(|k| k != "matchLabels") {
        return false;
    }
    (selector.get("matchLabels").and_then(Value::as_object))
        .is_none_or(|want| want.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

fn main() {
    let args = Args::parse();
    for &pods in &args.sizes {
        if args.node_local != Some(false) {
            scenario(pods, Some("node-0"), &args);
        }
        if args.node_local != Some(true) {
            scenario(pods, None, &args);
        }
    }
}
