//! `palisade lab`: Kubernetes nodes built from network namespaces, to prove with real
//! packets that the kernel enforces what the evaluator decides.
//!
//! Topology (routed; no bridge, so no bridge-netfilter question): a node namespace with
//! IPv4 forwarding; per pod a namespace joined to its node by a veth pair, the pod side
//! holding the pod's address as a /32 with a default route via 169.254.1.1, the node side
//! holding 169.254.1.1/32 and a /32 route to the pod. Every packet from or to a pod crosses
//! its node's hooks, where `inet palisade` filters.
//!
//! - When every pod sits on one node (or names none), the lab is that one node,
//!   `<lab>-node`, with the external host (192.0.2.10) wired to it like a pod.
//! - When the pods name several nodes (`spec.nodeName`), each node is a namespace
//!   `<lab>-node-<nodeName>` with its own address (the Node's `InternalIP`, else a
//!   generated one), joined to a fabric namespace `<lab>-fab` that routes every pod and
//!   node address to its node; the external host hangs off the fabric. A cross-node packet
//!   crosses the source node's `forward` hook (egress) and the destination node's
//!   (ingress). Host-network pods live in their node's namespace, at its address.
//!
//! [`Lab::up`] builds a lab and starts a responder in each pod and node; [`down`] removes
//! everything, also after a crash (what `up` creates is recorded in a state file first).
//! [`Lab::compile`] compiles one ruleset per node (only that node's pods' sides) and
//! [`Lab::apply`] / [`Lab::update`] load them. The processes inside the namespaces are
//! [`Helper`]s: the lab re-executes a program (the `palisade` binary, or this crate's
//! `palisade-lab-helper`) as `<exe> lab <helper> ...`, and that program passes its
//! arguments to [`run_if_helper`]. [`observe`] probes every endpoint pair with real
//! packets; [`Observed::disagreements`] compares each outcome with the engine's verdict.
//! Services: the lab plays kube-proxy ([`NAT_TABLE`] in every node, one endpoint per
//! Service port at a time), and [`observe_services`] probes every endpoint through the
//! Service address against [`palisade_engine::Engine::evaluate_service_port`].
//! DNS: [`DnsServer`] runs `dnsmasq` in a lab namespace answering only the records given;
//! [`Lab::add_external_address`] gives the external host more addresses; [`lookup`] runs
//! the [`Helper::Lookup`] in a pod's namespace: a name looked up and its first address
//! connected to at once, reported as a [`LookupReport`].
//!
//! Building and probing a lab needs root (network namespaces, `ip`, `nft`, `conntrack`):
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use palisade_analysis::Probe;
//! use palisade_engine::{Engine, Options};
//! use palisade_model::Protocol;
//!
//! let loaded = palisade_model::load_paths(&["examples/xyz".into()], Default::default())?;
//! let exe = std::env::current_exe()?; // this program calls `run_if_helper` first in `main`
//! let lab = palisade_lab::Lab::up(&loaded.cluster, "demo", &exe)?;
//! // the cluster as built: with the addresses the lab gave nodes the input has none for
//! let engine = Engine::new(lab.complete(&loaded.cluster)?, Options::default());
//! lab.apply(&lab.compile(&engine)?)?;
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
mod dns;
mod enforce;
mod helper;
mod layout;
mod lookup;
mod net;
mod probe;
mod services;
mod state;
mod topology;

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use palisade_model::Protocol;

pub use compare::{Disagreement, Observation, Observed, observe};
pub use dns::{DnsRecords, DnsServer};
pub use helper::{Helper, PREFIX as HELPER_PREFIX, run_if_helper};
pub use lookup::{
    Answer, DEFAULT_CONNECT_TIMEOUT, LookupReport, LookupRequest, RecordType, lookup,
};
pub use probe::{ConnectStats, ProbeResult, Target, connect_bench, hold, probe_batch, serve};
pub use services::{
    NAT_TABLE, PinnedPort, ServiceObservation, ServiceVia, observe_services, pinned_ports, rounds,
};
pub use state::state_dir;
pub use topology::down;

/// The external test host's address.
pub const EXTERNAL_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);

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
    /// The cluster cannot be laid out as a lab, or the input no longer fits the lab.
    #[error("{0}")]
    Layout(String),
    /// Compiling or loading a node's ruleset failed.
    #[error("node namespace {netns}: {source}")]
    Nft {
        /// The node namespace.
        netns: String,
        /// What went wrong.
        #[source]
        source: palisade_nft::NftError,
    },
    /// Something did not become ready in time.
    #[error("{0}")]
    Timeout(String),
    /// A helper was started with arguments it does not understand.
    #[error("{0}")]
    Usage(String),
}

/// What an endpoint of the lab is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EndpointKind {
    /// A pod (not host-network), in a namespace of its own.
    Pod,
    /// A node's address, in the node's namespace (where its host-network pods live too).
    Node,
    /// The external host, outside the cluster.
    External,
}

/// One endpoint of the lab: a namespace at an address, with a responder on its ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabEndpoint {
    /// `namespace/name` of a pod; the address of a node or of the external host.
    pub key: String,
    /// What it is.
    pub kind: EndpointKind,
    /// The node it sits on (per-node layout; `None` for the external host and in the
    /// single-node layout).
    pub node: Option<String>,
    /// Its network namespace.
    pub netns: String,
    /// Its address.
    pub ip: IpAddr,
    /// Ports its responder serves.
    pub ports: Vec<(u16, Protocol)>,
}

/// One node namespace of the lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabNode {
    /// The node's name (`spec.nodeName` of its pods); `None` in the single-node layout when
    /// the pods name no node.
    pub name: Option<String>,
    /// Its network namespace: its ruleset is loaded there, and a node agent runs there
    /// (`ip netns exec <netns> palisade agent --node <name> ...`).
    pub netns: String,
    /// Its address as a probe endpoint (per-node layout only).
    pub endpoint: Option<LabEndpoint>,
    /// Whether the lab made the address up (the input gives the node no IPv4 `InternalIP`).
    pub generated_address: bool,
    /// The host-network pods placed in it (`namespace/name`), reached at its address.
    pub host_network_pods: Vec<String>,
}

impl LabNode {
    /// The node's address (per-node layout only).
    pub fn ip(&self) -> Option<IpAddr> {
        self.endpoint.as_ref().map(|e| e.ip)
    }
}

/// A running lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lab {
    /// Name (prefix of everything it creates).
    pub name: String,
    /// The node namespaces, where the rulesets are loaded: one (`<lab>-node`) in the
    /// single-node layout, else one per node the pods name (`<lab>-node-<nodeName>`), in
    /// name order.
    pub nodes: Vec<LabNode>,
    /// The namespace joining the nodes (`<lab>-fab`, per-node layout only).
    pub fabric_netns: Option<String>,
    /// The pods, by key.
    pub pods: Vec<LabEndpoint>,
    /// The external host (a pod-like namespace outside the cluster).
    pub external: LabEndpoint,
    /// Responder processes.
    pub pids: Vec<u32>,
}

impl Lab {
    /// The pod with this `namespace/name`.
    pub fn pod(&self, key: &str) -> Option<&LabEndpoint> {
        self.pods.iter().find(|p| p.key == key)
    }

    /// The node with this name.
    pub fn node(&self, name: &str) -> Option<&LabNode> {
        self.nodes.iter().find(|n| n.name.as_deref() == Some(name))
    }

    /// The pods on `node` (per-node layout; in the single-node layout every pod is on the
    /// one node).
    pub fn pods_on<'a>(&'a self, node: &'a LabNode) -> impl Iterator<Item = &'a LabEndpoint> {
        self.pods
            .iter()
            .filter(move |p| self.node_of(p).is_some_and(|n| n.netns == node.netns))
    }

    /// The node namespace an endpoint's traffic enters the cluster through: its own node's,
    /// the single node's, or for the external host `None` in the per-node layout.
    pub fn node_of(&self, e: &LabEndpoint) -> Option<&LabNode> {
        match &e.node {
            Some(n) => self.node(n),
            None if self.fabric_netns.is_none() => self.nodes.first(),
            None => None,
        }
    }

    /// Every endpoint that can be probed: the pods, the nodes' addresses, then the
    /// external host.
    pub fn endpoints(&self) -> impl Iterator<Item = &LabEndpoint> {
        self.pods
            .iter()
            .chain(self.nodes.iter().filter_map(|n| n.endpoint.as_ref()))
            .chain(std::iter::once(&self.external))
    }
}
