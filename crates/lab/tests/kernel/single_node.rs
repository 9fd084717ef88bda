//! The cluster as written: every pod on one node, the layout `<lab>-node`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use palisade_lab::{Helper, Observed};
use palisade_model::Protocol;

use palisade_test_support::require_root;

use crate::harness::{HELPER, ONE_NODE, PROBES, TestLab, now_us, set};

#[test]
fn every_policy_set_the_kernel_matrix_equals_the_evaluator() {
    if !require_root("every_policy_set_the_kernel_matrix_equals_the_evaluator") {
        return;
    }
    let lab = TestLab::up('m', ONE_NODE);
    assert_eq!(lab.lab.nodes.len(), 1);
    assert_eq!(lab.lab.nodes[0].netns, format!("{}-node", lab.lab.name));
    let sets = lab.policy_sets(|_| true);
    assert!(sets.len() >= 40, "{} policy sets", sets.len());
    let (failures, probes) = lab.matrix_disagreements(&sets);
    assert!(
        failures.is_empty(),
        "{} of {probes} probes disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn an_established_connection_is_cut_within_a_second_of_a_tightening_update() {
    if !require_root("an_established_connection_is_cut_within_a_second_of_a_tightening_update") {
        return;
    }
    let lab = TestLab::up('c', ONE_NODE);
    let sets = lab.policy_sets(|i| i <= 1);
    let (open, closed) = (set(&sets, "00-none"), set(&sets, "01-deny-ingress-x"));
    lab.apply(open);
    lab.conntrack_flush();
    let (src, dst) = match (lab.lab.pod("y/b"), lab.lab.pod("x/a")) {
        (Some(s), Some(d)) => (s.clone(), d.clone()),
        _ => panic!("the cluster has no y/b or x/a"),
    };
    let flow = palisade_engine::Flow {
        src: closed.engine.endpoint_for_ip(src.ip),
        dst: closed.engine.endpoint_for_ip(dst.ip),
        protocol: Protocol::Tcp,
        port: 80,
    };
    assert!(
        !closed.engine.evaluate(&flow).allowed,
        "the new policy must forbid y/b -> x/a"
    );
    // y/b holds a TCP connection to x/a:80, exchanging a byte every 50 ms.
    let hold = Helper::Hold {
        to: std::net::SocketAddr::new(dst.ip, 80),
        duration: Duration::from_millis(3000),
    };
    let mut child = hold
        .command(Path::new(HELPER), &src.netns)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("hold: {e}"));
    let stdout = child
        .stdout
        .take()
        .unwrap_or_else(|| panic!("hold: no stdout"));
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    std::thread::sleep(Duration::from_millis(800));
    let t0 = now_us() / 1000;
    let stats = lab
        .lab
        .update(&open.rulesets, &closed.rulesets)
        .unwrap_or_else(|e| panic!("update: {e}"));
    let stats = &stats[0];
    let t1 = now_us() / 1000;
    let status = child.wait().unwrap_or_else(|e| panic!("hold: {e}"));
    let tracked = lab.conntrack_tcp();
    let lines = reader.join().unwrap_or_default();
    assert!(status.success(), "hold failed: {lines:?}");
    let exchanges: Vec<(bool, u128)> = lines
        .iter()
        .filter_map(|l| {
            let (s, t) = l.split_once(' ')?;
            Some((s == "ok", t.parse().ok()?))
        })
        .collect();
    assert!(
        exchanges.iter().any(|&(ok, t)| ok && t < t0),
        "the connection never worked: {lines:?}"
    );
    let late_ok = exchanges
        .iter()
        .filter(|&&(ok, t)| ok && t > t0 + 1000)
        .count();
    assert!(
        late_ok == 0,
        "{late_ok} exchanges succeed more than 1 s after the update ({t0}..{t1} ms, {stats:?}): \
         {lines:?}\ntracked connections at the end:\n{tracked}"
    );
    assert!(
        exchanges.iter().any(|&(ok, t)| !ok && t <= t0 + 1000),
        "no failure within 1 s of the update: {lines:?}"
    );
    println!(
        "update took {} ms, {} connection(s) cut",
        t1 - t0,
        stats.connections_cut
    );
}

/// Deterministic xorshift64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A policy set and when it may have been in force, in microseconds since the epoch: from
/// the start of the update that installed it to the end of the update that replaced it.
struct InForce {
    set: usize,
    from_us: u128,
    until_us: u128,
}

#[test]
fn random_updates_under_continuous_probing_never_let_a_forbidden_probe_through() {
    const TEST: &str =
        "random_updates_under_continuous_probing_never_let_a_forbidden_probe_through";
    /// Updates, a fixed pseudo-random walk over the policy sets.
    const UPDATES: usize = 40;
    /// Pause after each update, so probes run under every set and across updates.
    const PAUSE: Duration = Duration::from_millis(100);
    if !require_root(TEST) {
        return;
    }
    let lab = TestLab::up('u', ONE_NODE);
    let sets = lab.policy_sets(|_| true);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let walk: Vec<usize> = std::iter::once(0)
        .chain((0..UPDATES).map(|_| (rng.next() % sets.len() as u64) as usize))
        .collect();
    lab.apply(&sets[walk[0]]);
    lab.conntrack_flush();
    let probes = [PROBES[0], PROBES[3]];
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut history: Vec<InForce> = Vec::new();
    // start of the update that installed the set now in force
    let mut since = 0;
    let rounds: Vec<Observed> = std::thread::scope(|s| {
        let prober = s.spawn(|| {
            let mut rounds = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                rounds.push(lab.observe(&probes));
            }
            rounds
        });
        for step in walk.windows(2) {
            // `update` ends by scanning every tracked connection for ones the new set
            // forbids; under continuous probing the table holds thousands of probe
            // connections. Forgetting them first keeps each update's cleanup to the last
            // interval's probes. It cannot hide a leak: forgetting a connection only makes
            // later packets of it meet the ruleset again.
            lab.conntrack_flush();
            let started = now_us();
            lab.lab
                .update(&sets[step[0]].rulesets, &sets[step[1]].rulesets)
                .unwrap_or_else(|e| panic!("update to {}: {e}", sets[step[1]].name));
            history.push(InForce {
                set: step[0],
                from_us: since,
                until_us: now_us(),
            });
            since = started;
            std::thread::sleep(PAUSE);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        prober
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
    });
    history.push(InForce {
        set: walk[UPDATES],
        from_us: since,
        until_us: u128::MAX,
    });
    let mut leaks = Vec::new();
    let (mut sent, mut reached) = (0, 0);
    for round in &rounds {
        for o in round.observations() {
            sent += 1;
            if !o.reached {
                continue; // a failed probe proves nothing: it may have timed out across an update
            }
            reached += 1;
            let in_force = history
                .iter()
                .filter(|h| h.from_us <= o.end_us && o.start_us <= h.until_us);
            if !in_force
                .clone()
                .any(|h| round.allowed(&sets[h.set].engine, o))
            {
                let (from, to) = (&round.endpoints()[o.from], &round.endpoints()[o.to]);
                let p = round.probes()[o.probe];
                let names: Vec<&str> = in_force.map(|h| sets[h.set].name.as_str()).collect();
                leaks.push(format!(
                    "{} -> {} {}/{} at {}..{} us, under {names:?}",
                    from.key, to.key, p.protocol, p.port, o.start_us, o.end_us
                ));
            }
        }
    }
    let slowest = history
        .iter()
        .zip(&history[1..])
        .map(|(a, b)| a.until_us.saturating_sub(b.from_us))
        .max()
        .unwrap_or(0);
    println!(
        "{UPDATES} updates (slowest {} ms), {} rounds, {sent} probes, {reached} reached",
        slowest / 1000,
        rounds.len()
    );
    assert!(
        rounds.len() >= 3,
        "too few probe rounds ran: {}",
        rounds.len()
    );
    assert!(
        reached >= 100,
        "too few probes got through to judge: {reached}"
    );
    assert!(
        leaks.is_empty(),
        "{} forbidden probes got through:\n{}",
        leaks.len(),
        leaks.join("\n")
    );
    // After the walk, the incrementally updated ruleset enforces the last set exactly.
    let last = &sets[walk[UPDATES]];
    lab.conntrack_flush();
    let disagreements = lab.observe(&PROBES).disagreements(&last.engine);
    assert!(
        disagreements.is_empty(),
        "after {UPDATES} updates, ending with {}:\n{}",
        last.name,
        disagreements
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}
