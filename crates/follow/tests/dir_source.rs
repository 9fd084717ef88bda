//! The directory source under what operations do to a directory: kubelet's atomic
//! ConfigMap updates, files written in place, emptied, replaced by directories or FIFOs,
//! symlink loops, and the directory itself moved away and back. Whatever happens, what a
//! file held stays in force until the file is gone or holds a valid replacement.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use palisade_follow::source::{Event, dir};
use palisade_follow::store::Store;
use tokio::sync::mpsc;

const CLUSTER: &str = include_str!("../../../examples/xyz/cluster.yaml");
const DENY_X: &str = include_str!("../../../examples/xyz/policies/01-deny-ingress-x.yaml");

/// A policy text named `name` in namespace x that admits pods labelled `pod: <from>`.
fn policy(name: &str, from: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: {name}\n  namespace: x\nspec:\n  podSelector: {{}}\n  ingress:\n  - from:\n    - podSelector:\n        matchLabels:\n          pod: {from}\n"
    )
}

/// The source's events applied to a store, and the health it reported.
struct Followed {
    rx: mpsc::UnboundedReceiver<Event>,
    store: Store,
    health: BTreeMap<String, String>,
    synced: bool,
    _source: dir::DirSource,
}

impl Followed {
    fn start(root: &Path) -> Followed {
        let (tx, rx) = mpsc::unbounded_channel();
        let source = dir::watch(root, tx).unwrap();
        let mut f = Followed {
            rx,
            store: Store::default(),
            health: BTreeMap::new(),
            synced: false,
            _source: source,
        };
        f.until("the first listing", |f| f.synced);
        f
    }

    fn apply(&mut self, event: Event) {
        self.synced |= event == Event::Synced;
        if let Event::Health { part, problem } = &event {
            match problem {
                Some(p) => self.health.insert(part.clone(), p.clone()),
                None => self.health.remove(part),
            };
        }
        self.store.handle(event);
    }

    /// Applies events until `done` holds (at most 5 s).
    fn until(&mut self, what: &str, done: impl Fn(&Followed) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !done(self) {
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: not within 5 s; policies {:?}, problems {:?}, health {:?}",
                self.policies(),
                self.store.problems().keys().collect::<Vec<_>>(),
                self.health
            );
            match self.rx.try_recv() {
                Ok(e) => self.apply(e),
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// Applies whatever arrives in the next `d`.
    fn settle(&mut self, d: Duration) {
        let deadline = std::time::Instant::now() + d;
        while std::time::Instant::now() < deadline {
            match self.rx.try_recv() {
                Ok(e) => self.apply(e),
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// The NetworkPolicies in force: `name:from-label`.
    fn policies(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .store
            .cluster()
            .network_policies
            .iter()
            .map(|p| {
                let rules = format!("{:?}", p.ingress);
                let from = ["a", "b", "c"]
                    .into_iter()
                    .find(|l| rules.contains(&format!("\"{l}\"")))
                    .unwrap_or("*");
                format!("{}:{from}", p.name)
            })
            .collect();
        out.sort();
        out
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Writes `text` to `dir/name` atomically (a temporary file renamed into place).
fn put(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// What kubelet does to a ConfigMap volume: the files in a new hidden timestamped
/// directory, `..data_tmp` pointing at it renamed over `..data`, the old directory removed;
/// the visible names are symlinks through `..data`, made once.
fn kubelet_update(volume: &Path, generation: u32, files: &[(&str, &str)]) {
    let ts = format!("..2026_11_28_00_00_{generation:02}.{generation}");
    let new = volume.join(&ts);
    std::fs::create_dir(&new).unwrap();
    for (name, text) in files {
        std::fs::write(new.join(name), text).unwrap();
    }
    let old = std::fs::read_link(volume.join("..data")).ok();
    symlink(&ts, volume.join("..data_tmp")).unwrap();
    std::fs::rename(volume.join("..data_tmp"), volume.join("..data")).unwrap();
    for (name, _) in files {
        let visible = volume.join(name);
        if std::fs::symlink_metadata(&visible).is_err() {
            symlink(format!("..data/{name}"), visible).unwrap();
        }
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(volume.join(old)).unwrap();
    }
}

#[test]
fn a_configmap_volume_update_applies_and_hidden_paths_are_not_texts() {
    let dir = tempdir();
    let volume = dir.path();
    kubelet_update(
        volume,
        1,
        &[
            ("cluster.yaml", CLUSTER),
            ("policy.yaml", &policy("web", "a")),
        ],
    );
    let mut f = Followed::start(volume);
    assert_eq!(f.policies(), ["web:a"]);
    kubelet_update(
        volume,
        2,
        &[
            ("cluster.yaml", CLUSTER),
            ("policy.yaml", &policy("web", "b")),
        ],
    );
    f.until("the update", |f| f.policies() == ["web:b"]);
    kubelet_update(
        volume,
        3,
        &[
            ("cluster.yaml", CLUSTER),
            ("policy.yaml", &policy("db", "c")),
        ],
    );
    f.until("a rename", |f| f.policies() == ["db:c"]);
    f.settle(Duration::from_millis(400));
    assert!(
        f.store.problems().is_empty(),
        "no text of a hidden path was read: {:?}",
        f.store.problems()
    );
}

#[test]
fn a_file_written_in_place_is_read_only_when_its_writer_closes_it() {
    let dir = tempdir();
    put(dir.path(), "cluster.yaml", CLUSTER);
    put(dir.path(), "policy.yaml", &policy("web", "a"));
    let mut f = Followed::start(dir.path());
    assert_eq!(f.policies(), ["web:a"]);
    // Rewritten in place, slowly: a prefix cut after `- from:` parses, and admits everyone.
    let new = policy("web", "b");
    let cut = new.find("    - podSelector").unwrap();
    let mut file = std::fs::File::create(dir.path().join("policy.yaml")).unwrap();
    file.write_all(&new.as_bytes()[..cut]).unwrap();
    file.flush().unwrap();
    f.settle(Duration::from_millis(700));
    assert_eq!(f.policies(), ["web:a"], "the half-written file was read");
    file.write_all(&new.as_bytes()[cut..]).unwrap();
    drop(file);
    f.until("the closed file", |f| f.policies() == ["web:b"]);
}

#[test]
fn an_emptied_file_keeps_its_objects_until_it_is_deleted() {
    let dir = tempdir();
    put(dir.path(), "cluster.yaml", CLUSTER);
    put(dir.path(), "policy.yaml", &policy("web", "a"));
    let mut f = Followed::start(dir.path());
    std::fs::File::create(dir.path().join("policy.yaml")).unwrap();
    let id = dir
        .path()
        .canonicalize()
        .unwrap()
        .join("policy.yaml")
        .display()
        .to_string();
    f.until("the emptied file reported", |f| {
        f.store.problems().contains_key(&id)
    });
    assert_eq!(f.policies(), ["web:a"]);
    std::fs::remove_file(dir.path().join("policy.yaml")).unwrap();
    f.until("the deletion", |f| f.policies().is_empty());
    assert!(f.store.problems().is_empty());
}

#[test]
fn a_moved_directory_keeps_everything_and_is_followed_when_it_comes_back() {
    let parent = tempdir();
    let root = parent.path().join("manifests");
    std::fs::create_dir(&root).unwrap();
    put(&root, "cluster.yaml", CLUSTER);
    put(&root, "policy.yaml", &policy("web", "a"));
    let mut f = Followed::start(&root);
    let moved = parent.path().join("moved");
    std::fs::rename(&root, &moved).unwrap();
    f.until("reported", |f| !f.health.is_empty());
    assert_eq!(f.policies(), ["web:a"], "a moved directory removed objects");
    // A new directory at the same path (as after `rm -rf; git clone`).
    std::fs::create_dir(&root).unwrap();
    put(&root, "cluster.yaml", CLUSTER);
    put(&root, "policy.yaml", &policy("web", "b"));
    f.until("followed again", |f| {
        f.health.is_empty() && f.policies() == ["web:b"]
    });
    // And its changes are watched.
    put(&root, "policy.yaml", &policy("web", "c"));
    f.until("an edit after the return", |f| f.policies() == ["web:c"]);
    // Deleted outright: still nothing removed.
    std::fs::remove_dir_all(&root).unwrap();
    f.until("reported", |f| !f.health.is_empty());
    f.settle(Duration::from_millis(300));
    assert_eq!(f.policies(), ["web:c"]);
}

#[test]
fn fifos_are_skipped_and_symlink_loops_reported_without_blocking() {
    let dir = tempdir();
    put(dir.path(), "cluster.yaml", CLUSTER);
    let status = std::process::Command::new("mkfifo")
        .arg(dir.path().join("pipe.yaml"))
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    symlink(dir.path(), dir.path().join("sub/loop")).unwrap();
    // A directory reached twice is read once: no "defined twice".
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    put(&dir.path().join("policies"), "p.yaml", &policy("web", "a"));
    symlink(dir.path().join("policies"), dir.path().join("again")).unwrap();
    let mut f = Followed::start(dir.path());
    assert_eq!(f.policies(), ["web:a"]);
    let problems: Vec<String> = f.store.problems().keys().cloned().collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].ends_with("sub/loop"), "{problems:?}");
    // The source is not stuck on the FIFO: an edit still applies.
    put(&dir.path().join("policies"), "p.yaml", &policy("web", "b"));
    f.until("an edit", |f| f.policies() == ["web:b"]);
}

#[test]
fn a_non_canonical_root_names_each_file_one_way() {
    let dir = tempdir();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    put(dir.path(), "cluster.yaml", CLUSTER);
    put(dir.path(), "deny.yaml", DENY_X);
    let roundabout: PathBuf = dir.path().join("sub").join("..");
    let mut f = Followed::start(&roundabout);
    assert_eq!(f.policies().len(), 1);
    put(dir.path(), "deny.yaml", &policy("web", "b"));
    f.until("the edit", |f| f.policies() == ["web:b"]);
    assert!(f.store.problems().is_empty(), "{:?}", f.store.problems());
    std::fs::remove_file(dir.path().join("deny.yaml")).unwrap();
    f.until("the deletion", |f| f.policies().is_empty());
}

#[test]
fn a_file_replaced_by_a_directory_removes_its_text() {
    let dir = tempdir();
    put(dir.path(), "cluster.yaml", CLUSTER);
    put(dir.path(), "p.yaml", &policy("web", "a"));
    let mut f = Followed::start(dir.path());
    std::fs::remove_file(dir.path().join("p.yaml")).unwrap();
    std::fs::create_dir(dir.path().join("p.yaml")).unwrap();
    put(&dir.path().join("p.yaml"), "q.yaml", &policy("db", "b"));
    f.until("the directory", |f| f.policies() == ["db:b"]);
    std::fs::remove_dir_all(dir.path().join("p.yaml")).unwrap();
    put(dir.path(), "p.yaml", &policy("web", "c"));
    f.until("and back", |f| f.policies() == ["web:c"]);
}

const ANP: &str = include_str!("../../../examples/xyz/policies/02-anp.yaml");
const BANP: &str = include_str!("../../../examples/xyz/policies/03-banp.yaml");

/// The allowed (src, dst, port) probes among every pod address, on TCP 80 and 81.
fn allowed(cluster: palisade_model::Cluster) -> std::collections::BTreeSet<String> {
    use palisade_engine::{Engine, Flow, Options};
    let e = Engine::new(cluster, Options::default());
    let ips: Vec<std::net::IpAddr> = e
        .cluster()
        .pods
        .iter()
        .flat_map(|p| p.ips.clone())
        .collect();
    let mut out = std::collections::BTreeSet::new();
    for src in &ips {
        for dst in &ips {
            for port in [80, 81] {
                let flow = Flow {
                    src: e.endpoint_for_ip(*src),
                    dst: e.endpoint_for_ip(*dst),
                    protocol: palisade_model::Protocol::Tcp,
                    port,
                };
                if e.evaluate(&flow).allowed {
                    out.insert(format!("{src}->{dst}:{port}"));
                }
            }
        }
    }
    out
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Random sequences of what operations do to a directory — atomic and slow in-place
/// writes, truncations, deletions, renames, the directory moved away and back, typos —
/// with the state in force checked after each: no probe is allowed that both the previous
/// and the next valid state deny. `PALISADE_SEED=N` replays one sequence.
#[test]
fn random_operations_never_allow_what_both_valid_states_deny() {
    let seeds: Vec<u64> = match std::env::var("PALISADE_SEED") {
        Ok(s) => vec![s.parse().expect("PALISADE_SEED: a number")],
        Err(_) => vec![0x5eed_0001, 0x5eed_0002],
    };
    for seed in seeds {
        eprintln!("random_operations_never_allow_what_both_valid_states_deny: seed {seed}");
        random_sequence(seed, 24);
    }
}

fn random_sequence(seed: u64, steps: usize) {
    let parent = tempdir();
    let root = parent.path().join("m");
    std::fs::create_dir(&root).unwrap();
    // (the object it defines, text): two files never define one object.
    let texts = [
        ("deny-x", DENY_X.to_string()),
        ("anp", ANP.to_string()),
        ("banp", BANP.to_string()),
        ("web", policy("web", "a")),
        ("web", policy("web", "b")),
        ("db", policy("db", "c")),
    ];
    let names = ["p0.yaml", "p1.yaml", "p2.yaml"];
    put(&root, "cluster.yaml", CLUSTER);
    // The directory as it should read, when valid: file -> text.
    let mut files: BTreeMap<&str, String> = BTreeMap::new();
    files.insert("p0.yaml", DENY_X.to_string());
    put(&root, "p0.yaml", DENY_X);
    let expected = |files: &BTreeMap<&str, String>| {
        let mut sources = vec![("cluster.yaml".to_string(), CLUSTER.to_string())];
        sources.extend(files.iter().map(|(n, t)| (n.to_string(), t.clone())));
        let loaded = palisade_model::load_sources(
            sources.iter().map(|(n, t)| (n.as_str(), t.as_str())),
            Default::default(),
        )
        .unwrap();
        allowed(loaded.cluster)
    };
    let mut f = Followed::start(&root);
    let mut rng = Rng(seed);
    // (observed allowed set, whether the directory was valid then, its expected set)
    let mut history = vec![(allowed(f.store.cluster()), Some(expected(&files)))];
    for step in 0..steps {
        let name = names[rng.below(names.len())];
        let (object, text) = texts[rng.below(texts.len())].clone();
        let held_elsewhere = files
            .iter()
            .any(|(n, t)| *n != name && texts.iter().any(|(o, x)| *o == object && x == t));
        if held_elsewhere {
            continue;
        }
        let op = rng.below(7);
        match op {
            0 => {
                put(&root, name, &text);
                files.insert(name, text);
            }
            1 => {
                // Slow in-place write, observed half way.
                let mut file = std::fs::File::create(root.join(name)).unwrap();
                let half = text.len() / 2;
                file.write_all(&text.as_bytes()[..half]).unwrap();
                file.flush().unwrap();
                f.settle(Duration::from_millis(400));
                history.push((allowed(f.store.cluster()), None));
                file.write_all(&text.as_bytes()[half..]).unwrap();
                drop(file);
                files.insert(name, text);
            }
            2 if files.contains_key(name) => {
                // Truncated: unreadable until rewritten or deleted.
                std::fs::File::create(root.join(name)).unwrap();
                f.settle(Duration::from_millis(400));
                history.push((allowed(f.store.cluster()), None));
                put(&root, name, &files[name]);
            }
            3 if files.contains_key(name) => {
                std::fs::remove_file(root.join(name)).unwrap();
                files.remove(name);
            }
            4 if files.contains_key(name) => {
                let other = names.iter().find(|n| !files.contains_key(**n));
                if let Some(other) = other {
                    std::fs::rename(root.join(name), root.join(other)).unwrap();
                    let t = files.remove(name).unwrap();
                    files.insert(other, t);
                }
            }
            5 => {
                // The directory moved away, then back.
                let away = parent.path().join("away");
                std::fs::rename(&root, &away).unwrap();
                f.settle(Duration::from_millis(400));
                history.push((allowed(f.store.cluster()), None));
                std::fs::rename(&away, &root).unwrap();
            }
            _ if files.contains_key(name) => {
                // A typo in the kind, then fixed.
                let typo = files[name].replacen("Policy\n", "Policies\n", 1);
                put(&root, name, &typo);
                f.settle(Duration::from_millis(400));
                history.push((allowed(f.store.cluster()), None));
                put(&root, name, &files[name]);
            }
            _ => {}
        }
        f.settle(Duration::from_millis(400));
        let want = expected(&files);
        let got = allowed(f.store.cluster());
        assert_eq!(
            got, want,
            "seed {seed} step {step} (op {op} on {name}): the settled state differs from the directory"
        );
        history.push((got, Some(want)));
    }
    // Every observation in between two valid states allows nothing both deny.
    let mut last_valid: Option<&std::collections::BTreeSet<String>> = None;
    for (i, (observed, valid)) in history.iter().enumerate() {
        if let Some(v) = valid {
            last_valid = Some(v);
            continue;
        }
        let next = history[i..].iter().find_map(|(_, v)| v.as_ref()).unwrap();
        let before = last_valid.unwrap();
        let opened: Vec<&String> = observed
            .iter()
            .filter(|p| !before.contains(*p) && !next.contains(*p))
            .collect();
        assert!(
            opened.is_empty(),
            "seed {seed}, observation {i}: allowed although both valid states deny: {opened:?}"
        );
    }
}
