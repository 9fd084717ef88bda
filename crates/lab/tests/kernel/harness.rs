//! What every kernel test uses: the cluster and its placements on nodes, the policy sets,
//! and a lab that removes itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use palisade_analysis::Probe;
use palisade_engine::{Engine, Options};
use palisade_lab::{Lab, Observed, observe};
use palisade_model::{Cluster, Protocol};
use palisade_nft::Ruleset;

/// The lab's in-namespace helper.
pub const HELPER: &str = env!("CARGO_BIN_EXE_palisade-lab-helper");

/// The probes of the matrix tests: both ports on both protocols.
pub const PROBES: [Probe; 4] = [
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

pub fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// Where the pods run: a cluster file, and the nodes it spreads the pods over.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// The cluster file, relative to this crate.
    pub file: &'static str,
    /// The nodes the pods name, in name order; empty when every pod is on one node.
    pub nodes: &'static [&'static str],
}

/// The cluster as written (`examples/xyz/cluster.yaml`): every pod on node-1.
pub const ONE_NODE: Placement = Placement {
    file: "../../examples/xyz/cluster.yaml",
    nodes: &[],
};

/// The same pods on two nodes, one without an `InternalIP`, with a host-network pod.
pub const TWO_NODES: Placement = Placement {
    file: "tests/fixtures/clusters/xyz-two-nodes.yaml",
    nodes: &["n1", "n2"],
};

/// The same pods on three nodes, with a host-network pod.
pub const THREE_NODES: Placement = Placement {
    file: "tests/fixtures/clusters/xyz-three-nodes.yaml",
    nodes: &["n1", "n2", "n3"],
};

/// One pod, x/a, serving 80 on TCP and UDP, on one node (`tests/fixtures/clusters`).
pub const ONE_POD: Placement = Placement {
    file: "tests/fixtures/clusters/one-pod.yaml",
    nodes: &[],
};

/// True when `dnsmasq` is installed; otherwise reports `test` unavailable (a failure
/// under `CI=true`).
pub fn require_dnsmasq(test: &str) -> bool {
    match palisade_lab::DnsServer::program() {
        Ok(_) => true,
        Err(e) => {
            palisade_test_support::unavailable(test, &e.to_string());
            false
        }
    }
}

/// Pods backing Services on two nodes, with clients (`tests/fixtures/services`).
pub const SERVICES: Placement = Placement {
    file: "tests/fixtures/services/cluster.yaml",
    nodes: &["n1", "n2"],
};

impl Placement {
    /// The cluster with `extra` manifests.
    pub fn cluster(&self, extra: &[PathBuf]) -> Cluster {
        let mut files = vec![manifest_dir().join(self.file)];
        files.extend(extra.iter().cloned());
        palisade_model::load_paths(&files, Default::default())
            .unwrap_or_else(|e| panic!("{files:?}: {e}"))
            .cluster
    }
}

/// One fixture: its name (the file stem), the evaluator (knowing the lab's node
/// addresses) and the compiled rulesets, one per node of the lab.
pub struct PolicySet {
    pub name: String,
    pub engine: Engine,
    pub rulesets: Vec<Ruleset>,
}

/// The fixture files of `tests/fixtures/sets`, in file-name order.
fn fixture_files() -> Vec<PathBuf> {
    let dir = manifest_dir().join("tests/fixtures/sets");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

pub fn set<'a>(sets: &'a [PolicySet], name: &str) -> &'a PolicySet {
    sets.iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no policy set {name}"))
}

/// A lab of the cluster, removed when dropped (also when the test panics).
pub struct TestLab {
    pub lab: Lab,
    placement: Placement,
}

impl TestLab {
    /// Builds a lab of the placed cluster named `<tag><pid in hex>`: unique per test and
    /// per process.
    pub fn up(tag: char, placement: Placement) -> TestLab {
        let cluster = placement.cluster(&[]);
        let name = format!("{tag}{:x}", std::process::id());
        match Lab::up(&cluster, &name, Path::new(HELPER)) {
            Ok(lab) => TestLab { lab, placement },
            Err(e) => {
                let _ = palisade_lab::down(&name);
                panic!("lab up {name}: {e}")
            }
        }
    }

    /// The policy sets of `tests/fixtures/sets` whose index `keep` accepts, each with the
    /// placed cluster, compiled for this lab's nodes.
    pub fn policy_sets(&self, keep: impl Fn(usize) -> bool) -> Vec<PolicySet> {
        fixture_files()
            .iter()
            .enumerate()
            .filter(|(i, _)| keep(*i))
            .map(|(_, f)| self.policy_set(f, Options::default()))
            .collect()
    }

    /// One policy set from `file`, with `options`, compiled for this lab's nodes.
    pub fn policy_set(&self, file: &Path, options: Options) -> PolicySet {
        let cluster = self.placement.cluster(&[file.to_path_buf()]);
        let engine = Engine::new(cluster, options);
        let engine = self
            .lab
            .engine(&engine)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let rulesets = self
            .lab
            .compile(&engine)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let name = file
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        PolicySet {
            name,
            engine,
            rulesets,
        }
    }

    /// The file `name` of `tests/fixtures`.
    pub fn fixture_file(name: &str) -> PathBuf {
        manifest_dir().join("tests/fixtures").join(name)
    }

    /// The fixture file named `name`.
    pub fn fixture(name: &str) -> PathBuf {
        manifest_dir().join(format!("tests/fixtures/sets/{name}.yaml"))
    }

    /// Loads each node's ruleset of `set` into its node.
    pub fn apply(&self, set: &PolicySet) {
        self.lab
            .apply(&set.rulesets)
            .unwrap_or_else(|e| panic!("apply {}: {e}", set.name));
    }

    /// Forgets every tracked connection of every node, so the next probes meet the rulesets.
    pub fn conntrack_flush(&self) {
        for node in &self.lab.nodes {
            let out = Command::new("ip")
                .args(["netns", "exec", &node.netns, "conntrack", "-F"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output()
                .unwrap_or_else(|e| panic!("conntrack -F: {e}"));
            assert!(
                out.status.success(),
                "conntrack -F in {}: {}",
                node.netns,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// The first node's tracked TCP connections, as `conntrack -L` prints them.
    pub fn conntrack_tcp(&self) -> String {
        Command::new("ip")
            .args(["netns", "exec", &self.lab.nodes[0].netns])
            .args(["conntrack", "-L", "-p", "tcp"])
            .stderr(Stdio::null())
            .output()
            .map_or_else(
                |e| format!("conntrack -L: {e}"),
                |o| String::from_utf8_lossy(&o.stdout).into_owned(),
            )
    }

    /// `nft -s list table inet palisade` in a node namespace (the ruleset, no counters).
    pub fn list_table(&self, netns: &str) -> String {
        let o = Command::new("ip")
            .args([
                "netns", "exec", netns, "nft", "-s", "list", "table", "inet", "palisade",
            ])
            .output()
            .unwrap_or_else(|e| panic!("nft list table: {e}"));
        assert!(
            o.status.success(),
            "nft list table in {netns}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub fn observe(&self, probes: &[Probe]) -> Observed {
        observe(&self.lab, Path::new(HELPER), probes).unwrap_or_else(|e| panic!("probe: {e}"))
    }

    /// Loads every set in turn and compares the full matrix with its evaluator; every
    /// disagreement, prefixed with the set's name, and the number of probes sent.
    pub fn matrix_disagreements(&self, sets: &[PolicySet]) -> (Vec<String>, usize) {
        let endpoints = self.lab.endpoints().count();
        let mut failures = Vec::new();
        let mut probes = 0;
        for s in sets {
            self.apply(s);
            self.conntrack_flush();
            let observed = self.observe(&PROBES);
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
        (failures, probes)
    }
}

impl Drop for TestLab {
    fn drop(&mut self) {
        let _ = palisade_lab::down(&self.lab.name);
    }
}
