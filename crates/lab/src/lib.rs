//! `palisade lab`: one Kubernetes node built from network namespaces, to prove with real
//! packets that the kernel enforces what the evaluator decides.
//!
//! Topology (routed; no bridge, so no bridge-netfilter question): a node namespace with
//! IPv4 forwarding; per pod a namespace joined to it by a veth pair, the pod side holding
//! the pod's address as a /32 with a default route via 169.254.1.1, the node side holding
//! 169.254.1.1/32 and a /32 route to the pod. Every pod-to-pod packet crosses the node's
//! forward hook, where `inet palisade` filters. An external host (192.0.2.10) is wired the
//! same way.
//!
//! - [`Lab::up`] builds the node and starts a responder in each pod; [`down`] removes
//!   everything, also after a crash (what `up` creates is recorded in a state file first).
//! - The processes inside the namespaces are [`Helper`]s: the lab re-executes a program
//!   (the `palisade` binary, or this crate's `palisade-lab-helper`) as
//!   `<exe> lab <helper> ...`, and that program passes its arguments to
//!   [`run_if_helper`].
//! - [`observe`] probes every endpoint pair with real packets; [`Observed::disagreements`]
//!   compares each outcome with the engine's verdict.
//!
//! Building and probing a lab needs root (network namespaces, `ip`, `nft`, `conntrack`):
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use palisade_engine::{Engine, Options, Probe};
//! use palisade_model::Protocol;
//!
//! let loaded = palisade_model::load_paths(&["examples/xyz".into()], Default::default())?;
//! let engine = Engine::new(loaded.cluster.clone(), Options::default());
//! let exe = std::env::current_exe()?; // this program calls `run_if_helper` first in `main`
//! let lab = palisade_lab::Lab::up(&loaded.cluster, "demo", &exe)?;
//! // ... load the engine's compiled ruleset into `lab.node_netns` (palisade-nft), then:
//! let tcp_80 = Probe { protocol: Protocol::Tcp, port: 80 };
//! let observed = palisade_lab::observe(&lab, &exe, &[tcp_80])?;
//! for d in observed.disagreements(&engine) {
//!     eprintln!("{d}");
//! }
//! palisade_lab::down("demo")?;
//! # Ok(())
//! # }
//! ```
//!
//! The helpers' command lines need no root:
//!
//! ```
//! use palisade_lab::Helper;
//!
//! let probe = Helper::ProbeBatch { targets: vec!["10.0.0.11:80/TCP".parse()?] };
//! // a lab runs `<exe> lab probe-batch 10.0.0.11:80/TCP` inside the source pod's namespace
//! assert_eq!(probe.args(), ["probe-batch", "10.0.0.11:80/TCP"]);
//! assert_eq!(Helper::parse(probe.args())?, probe);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod compare;
mod helper;
mod net;
mod probe;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use palisade_model::{Cluster, Protocol};

pub use compare::{Disagreement, Observation, Observed, observe};
pub use helper::{Helper, PREFIX as HELPER_PREFIX, run_if_helper};
pub use probe::{ConnectStats, ProbeResult, Target, connect_bench, hold, probe_batch, serve};

/// The external test host's address.
pub const EXTERNAL_IP: &str = "192.0.2.10";

/// Why a lab operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A command failed.
    #[error("{command}: {message}")]
    Command {
        /// The command line.
        command: String,
        /// Its error output.
        message: String,
    },
    /// Reading or writing the state file or a socket failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The state file is unreadable.
    #[error("lab state {0}: {1}")]
    State(PathBuf, String),
    /// Something did not become ready in time.
    #[error("{0}")]
    Timeout(String),
    /// A helper was started with arguments it does not understand.
    #[error("{0}")]
    Usage(String),
}

/// One pod of the lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabPod {
    /// `namespace/name`.
    pub key: String,
    /// Its network namespace.
    pub netns: String,
    /// Its address.
    pub ip: IpAddr,
    /// Ports its responder serves.
    pub ports: Vec<(u16, Protocol)>,
}

/// A running lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lab {
    /// Name (prefix of everything it creates).
    pub name: String,
    /// The node namespace (where the ruleset is loaded).
    pub node_netns: String,
    /// The pods.
    pub pods: Vec<LabPod>,
    /// The external host (a pod-like namespace outside the cluster).
    pub external: LabPod,
    /// Responder processes.
    pub pids: Vec<u32>,
}

/// Where lab state files live (`PALISADE_LAB_DIR`, default `/run/palisade-lab`).
pub fn state_dir() -> PathBuf {
    std::env::var_os("PALISADE_LAB_DIR")
        .map_or_else(|| PathBuf::from("/run/palisade-lab"), PathBuf::from)
}

fn state_file(name: &str) -> PathBuf {
    state_dir().join(format!("{name}.json"))
}

impl Lab {
    /// Builds the lab for the IPv4 pods of `cluster` (host-network pods are skipped) and
    /// starts their responders, running the [`Helper::Serve`] of `exe` inside each pod. `name` must be a
    /// short alphanumeric prefix (at most 8 characters).
    pub fn up(cluster: &Cluster, name: &str, exe: &Path) -> Result<Lab, LabError> {
        if name.is_empty() || name.len() > 8 || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(LabError::State(
                state_file(name),
                "the lab name must be 1-8 letters or digits".into(),
            ));
        }
        down(name)?; // leftovers of a crashed run
        let mut pods: Vec<LabPod> = cluster
            .pods
            .iter()
            .filter(|p| !p.host_network)
            .filter_map(|p| {
                let ip = *p.ips.iter().find(|ip| ip.is_ipv4())?;
                let mut ports: Vec<(u16, Protocol)> =
                    p.ports.iter().map(|c| (c.port.get(), c.protocol)).collect();
                ports.sort();
                ports.dedup();
                Some(LabPod {
                    key: p.key(),
                    netns: String::new(),
                    ip,
                    ports,
                })
            })
            .collect();
        pods.sort_by(|a, b| a.key.cmp(&b.key));
        for (i, p) in pods.iter_mut().enumerate() {
            p.netns = format!("{name}-p{i}");
        }
        let all_ports: Vec<(u16, Protocol)> = {
            let mut v: Vec<(u16, Protocol)> = pods.iter().flat_map(|p| p.ports.clone()).collect();
            v.sort();
            v.dedup();
            v
        };
        let external = LabPod {
            key: EXTERNAL_IP.to_string(),
            netns: format!("{name}-ext"),
            ip: EXTERNAL_IP
                .parse()
                .map_err(|_| LabError::State(state_file(name), "bad external address".into()))?,
            ports: all_ports,
        };
        let mut lab = Lab {
            name: name.to_string(),
            node_netns: format!("{name}-node"),
            pods,
            external,
            pids: Vec::new(),
        };
        lab.save()?; // before creating anything, so a crash can be cleaned up
        net::node(&lab.node_netns)?;
        let endpoints: Vec<LabPod> = lab.endpoints().cloned().collect();
        for (i, p) in endpoints.iter().enumerate() {
            net::attach(&lab.node_netns, &p.netns, &format!("{name}v{i}"), p.ip)?;
        }
        let ready = state_dir().join(format!("{name}.ready"));
        std::fs::create_dir_all(&ready)?;
        for p in endpoints.iter().filter(|p| !p.ports.is_empty()) {
            let helper = Helper::Serve {
                ports: p.ports.clone(),
                ready_file: Some(ready.join(&p.netns)),
            };
            let child = helper
                .command(exe, &p.netns)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()?;
            lab.pids.push(child.id());
            lab.save()?;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for p in endpoints.iter().filter(|p| !p.ports.is_empty()) {
            while !ready.join(&p.netns).exists() {
                if Instant::now() > deadline {
                    return Err(LabError::Timeout(format!(
                        "responder in {} did not start",
                        p.netns
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(lab)
    }

    /// The lab recorded under `name`.
    pub fn load(name: &str) -> Result<Lab, LabError> {
        let path = state_file(name);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| LabError::State(path.clone(), e.to_string()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| LabError::State(path.clone(), e.to_string()))?;
        let bad = || LabError::State(path.clone(), "malformed".into());
        let pod = |p: &serde_json::Value| -> Option<LabPod> {
            Some(LabPod {
                key: p["key"].as_str()?.to_string(),
                netns: p["netns"].as_str()?.to_string(),
                ip: p["ip"].as_str()?.parse().ok()?,
                ports: p["ports"]
                    .as_array()?
                    .iter()
                    .filter_map(|x| {
                        let (n, proto) = x.as_str()?.split_once('/')?;
                        Some((n.parse().ok()?, proto.parse().ok()?))
                    })
                    .collect(),
            })
        };
        Ok(Lab {
            name: v["name"].as_str().ok_or_else(bad)?.to_string(),
            node_netns: v["node"].as_str().ok_or_else(bad)?.to_string(),
            pods: v["pods"]
                .as_array()
                .ok_or_else(bad)?
                .iter()
                .map(pod)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(bad)?,
            external: pod(&v["external"]).ok_or_else(bad)?,
            pids: v["pids"]
                .as_array()
                .ok_or_else(bad)?
                .iter()
                .filter_map(|p| p.as_u64().map(|p| p as u32))
                .collect(),
        })
    }

    fn save(&self) -> Result<(), LabError> {
        let pod = |p: &LabPod| {
            let ports: Vec<String> = p
                .ports
                .iter()
                .map(|(n, proto)| format!("{n}/{proto}"))
                .collect();
            serde_json::json!({"key": p.key, "netns": p.netns, "ip": p.ip.to_string(), "ports": ports})
        };
        let v = serde_json::json!({
            "name": self.name, "node": self.node_netns,
            "pods": self.pods.iter().map(pod).collect::<Vec<_>>(),
            "external": pod(&self.external), "pids": self.pids,
        });
        std::fs::create_dir_all(state_dir())?;
        std::fs::write(state_file(&self.name), v.to_string())?;
        Ok(())
    }

    /// The pod with this `namespace/name`.
    pub fn pod(&self, key: &str) -> Option<&LabPod> {
        self.pods.iter().find(|p| p.key == key)
    }

    /// Every endpoint that can be probed: the pods, then the external host.
    pub fn endpoints(&self) -> impl Iterator<Item = &LabPod> {
        self.pods.iter().chain(std::iter::once(&self.external))
    }

    /// Probes `targets` from each source namespace concurrently (one [`Helper::ProbeBatch`]
    /// of `exe` per source) and returns every result with its source namespace.
    pub fn probe(
        &self,
        exe: &Path,
        plan: &[(String, Vec<Target>)],
    ) -> Result<Vec<(String, ProbeResult)>, LabError> {
        let mut children = Vec::new();
        for (netns, targets) in plan {
            if targets.is_empty() {
                continue;
            }
            let helper = Helper::ProbeBatch {
                targets: targets.clone(),
            };
            let child = helper
                .command(exe, netns)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()?;
            children.push((netns.clone(), child));
        }
        let mut out = Vec::new();
        for (netns, child) in children {
            let o = child.wait_with_output()?;
            if !o.status.success() {
                return Err(LabError::Command {
                    command: format!("probe-batch in {netns}"),
                    message: String::from_utf8_lossy(&o.stderr).into_owned(),
                });
            }
            for line in String::from_utf8_lossy(&o.stdout).lines() {
                if let Some(r) = ProbeResult::parse(line) {
                    out.push((netns.clone(), r));
                }
            }
        }
        Ok(out)
    }
}

/// Removes everything the lab `name` created: responders, namespaces (and with them the
/// veth pairs), the state file. Safe to call when nothing exists.
pub fn down(name: &str) -> Result<(), LabError> {
    if let Ok(lab) = Lab::load(name) {
        for pid in &lab.pids {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
    for ns in net::list_netns()? {
        if ns.starts_with(&format!("{name}-")) {
            // processes left in the namespace would keep it busy: kill them first
            if let Ok(o) = std::process::Command::new("ip")
                .args(["netns", "pids", &ns])
                .output()
            {
                for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                    let _ = std::process::Command::new("kill")
                        .args(["-9", pid])
                        .stderr(std::process::Stdio::null())
                        .status();
                }
            }
            net::run(&["ip", "netns", "del", &ns])?;
        }
    }
    let _ = std::fs::remove_file(state_file(name));
    let _ = std::fs::remove_dir_all(state_dir().join(format!("{name}.ready")));
    Ok(())
}
