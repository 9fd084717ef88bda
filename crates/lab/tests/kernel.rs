//! Kernel tests: real packets through a network-namespace node must be allowed and denied
//! exactly as the evaluator says.
//!
//! Each test builds its own lab of the x/y/z × a/b/c cluster (`examples/xyz/cluster.yaml`:
//! nine pods serving 80 and 81 on TCP and UDP, and the external host 192.0.2.10), so the
//! tests run in parallel. Every policy set is a file in `tests/fixtures/sets`. The pods'
//! responders and probers are this crate's `palisade-lab-helper` binary.
//!
//! They need root (network namespaces, `nft`, `conntrack`); run as another user, each test
//! prints why it is skipped and passes.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use palisade_engine::{Engine, Options, Probe};
use palisade_lab::{Helper, Lab, Observed, observe};
use palisade_model::Protocol;
use palisade_nft::Ruleset;

/// The lab's in-namespace helper.
const HELPER: &str = env!("CARGO_BIN_EXE_palisade-lab-helper");

/// The probes of the matrix test: both ports on both protocols.
const PROBES: [Probe; 4] = [
    Probe {
        protocol: Protocol::Tcp,
        port: 80,
    },
    Probe {
        protocol: Protocol::Tcp,
        port: 81,
    },
    Probe {
        protocol: Protocol::Udp,
        port: 80,
    },
    Probe {
        protocol: Protocol::Udp,
        port: 81,
    },
];

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn cluster_file() -> PathBuf {
    manifest_dir().join("../../examples/xyz/cluster.yaml")
}

/// True when running as root; otherwise prints why `test` is skipped. The message goes
/// straight to the process's stderr, past the test harness's output capture.
fn root_or_skip(test: &str) -> bool {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    });
    if !root {
        let _ = writeln!(
            std::io::stderr(),
            "{test}: skipped: not root (network namespaces and nftables need root)"
        );
    }
    root
}

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// One fixture: its name (the file stem), the evaluator and the compiled ruleset.
struct PolicySet {
    name: String,
    engine: Engine,
    ruleset: Ruleset,
}

/// Every policy set of `tests/fixtures/sets`, in file-name order, each with the cluster.
fn policy_sets() -> Vec<PolicySet> {
    let dir = manifest_dir().join("tests/fixtures/sets");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let loaded =
                palisade_model::load_paths(&[cluster_file(), f.clone()], Default::default())
                    .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let engine = Engine::new(loaded.cluster, Options::default());
            let ruleset = palisade_nft::compile(&engine, None)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let name = f
                .file_stem()
                .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
            PolicySet {
                name,
                engine,
                ruleset,
            }
        })
        .collect()
}

fn set<'a>(sets: &'a [PolicySet], name: &str) -> &'a PolicySet {
    sets.iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no policy set {name}"))
}

/// A lab of the cluster, removed when dropped (also when the test panics).
struct TestLab(Lab);

impl TestLab {
    /// Builds a lab named `<tag><pid in hex>`: unique per test and per process.
    fn up(tag: char) -> TestLab {
        let cluster = palisade_model::load_paths(&[cluster_file()], Default::default())
            .unwrap_or_else(|e| panic!("cluster: {e}"))
            .cluster;
        let name = format!("{tag}{:x}", std::process::id());
        match Lab::up(&cluster, &name, Path::new(HELPER)) {
            Ok(lab) => TestLab(lab),
            Err(e) => {
                let _ = palisade_lab::down(&name);
                panic!("lab up {name}: {e}")
            }
        }
    }

    fn node(&self) -> &str {
        &self.0.node_netns
    }

    fn apply(&self, ruleset: &Ruleset) {
        palisade_nft::apply(ruleset, Some(self.node())).unwrap_or_else(|e| panic!("apply: {e}"));
    }

    /// Forgets every tracked connection of the node, so the next probes meet the ruleset.
    fn conntrack_flush(&self) {
        let out = Command::new("ip")
            .args(["netns", "exec", self.node(), "conntrack", "-F"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap_or_else(|e| panic!("conntrack -F: {e}"));
        assert!(
            out.status.success(),
            "conntrack -F: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The node's tracked TCP connections, as `conntrack -L` prints them.
    fn conntrack_tcp(&self) -> String {
        Command::new("ip")
            .args(["netns", "exec", self.node(), "conntrack", "-L", "-p", "tcp"])
            .stderr(Stdio::null())
            .output()
            .map_or_else(
                |e| format!("conntrack -L: {e}"),
                |o| String::from_utf8_lossy(&o.stdout).into_owned(),
            )
    }

    fn observe(&self, probes: &[Probe]) -> Observed {
        observe(&self.0, Path::new(HELPER), probes).unwrap_or_else(|e| panic!("probe: {e}"))
    }
}

impl Drop for TestLab {
    fn drop(&mut self) {
        let _ = palisade_lab::down(&self.0.name);
    }
}

#[test]
fn every_policy_set_the_kernel_matrix_equals_the_evaluator() {
    if !root_or_skip("every_policy_set_the_kernel_matrix_equals_the_evaluator") {
        return;
    }
    let sets = policy_sets();
    assert!(sets.len() >= 40, "{} policy sets", sets.len());
    let lab = TestLab::up('m');
    let endpoints = lab.0.endpoints().count();
    let mut failures = Vec::new();
    let mut probes = 0;
    for s in &sets {
        lab.apply(&s.ruleset);
        lab.conntrack_flush();
        let observed = lab.observe(&PROBES);
        let sent = observed.observations().len();
        assert_eq!(
            sent,
            endpoints * (endpoints - 1) * PROBES.len(),
            "{}: probes lost",
            s.name
        );
        probes += sent;
        let denied = observed
            .observations()
            .iter()
            .filter(|o| !o.reached)
            .count();
        println!("{}: {sent} probes, {denied} denied", s.name);
        failures.extend(
            observed
                .disagreements(&s.engine)
                .into_iter()
                .map(|d| format!("{}: {d}", s.name)),
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {probes} probes disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn an_established_connection_is_cut_within_a_second_of_a_tightening_update() {
    if !root_or_skip("an_established_connection_is_cut_within_a_second_of_a_tightening_update") {
        return;
    }
    let sets = policy_sets();
    let (open, closed) = (set(&sets, "00-none"), set(&sets, "01-deny-ingress-x"));
    let lab = TestLab::up('c');
    lab.apply(&open.ruleset);
    lab.conntrack_flush();
    let (src, dst) = match (lab.0.pod("y/b"), lab.0.pod("x/a")) {
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
    let stats = palisade_nft::update(&open.ruleset, &closed.ruleset, Some(lab.node()))
        .unwrap_or_else(|e| panic!("update: {e}"));
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
    if !root_or_skip(TEST) {
        return;
    }
    let sets = policy_sets();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let walk: Vec<usize> = std::iter::once(0)
        .chain((0..UPDATES).map(|_| (rng.next() % sets.len() as u64) as usize))
        .collect();
    let lab = TestLab::up('u');
    lab.apply(&sets[walk[0]].ruleset);
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
            // forbids, one `conntrack` process per deletion; under continuous probing the
            // table holds thousands of closed (TIME_WAIT) probe connections, and that scan
            // would take seconds per update. Forgetting them first keeps each update to the
            // last interval's probes. It cannot hide a leak: forgetting a connection only
            // makes later packets of it meet the ruleset again.
            lab.conntrack_flush();
            let started = now_us();
            palisade_nft::update(
                &sets[step[0]].ruleset,
                &sets[step[1]].ruleset,
                Some(lab.node()),
            )
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
