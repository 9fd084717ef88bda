//! kube-proxy in the lab: Service addresses translated (DNAT) to one endpoint at a time, and
//! probes through them compared with the evaluator's verdict for that endpoint.
//!
//! Each node namespace gets a table `ip palisade-lab-nat`, apart from the enforced
//! `inet palisade`, with what kube-proxy would install there:
//!
//! - a cluster IP and port → the endpoint's address and target port, in `prerouting` (pods'
//!   and the external host's packets) and `output` (the node's own);
//! - a node's address and `nodePort` → an endpoint, in `prerouting` of that node only: with
//!   `externalTrafficPolicy: Cluster` any endpoint, the client then hidden behind the node's
//!   address (SNAT in `postrouting`); with `Local` only the node's own endpoints, the client
//!   kept;
//! - hairpin: a pod sent to itself through a Service leaves with the node's address as its
//!   source (SNAT in `postrouting`), or the pod would answer itself and the reply never
//!   leave it.
//!
//! kube-proxy spreads connections over the endpoints at random. To observe every endpoint,
//! the lab pins them: in round `k` each Service port translates to its `k`-th endpoint only,
//! and every probe of that round reaches that endpoint. Endpoints are
//! [`Engine::service_endpoints`]' (from the EndpointSlices, or derived), never re-derived.
//!
//! Where the filter sees the packet: DNAT (priority `dstnat`, -100) runs before the
//! `forward`/`output` filter chains (priority `filter`, 0), SNAT (`srcnat`, 100) after them.
//! The agent's ruleset therefore decides on the endpoint's address (policy after DNAT, as the
//! evaluator), on the pod itself for hairpin (subject to policy), and on the client's address
//! at the node the client reached. A NodePort with `Cluster` sending to an endpoint on
//! another node is decided there on the first node's address (after its SNAT), as the
//! evaluator says; sending to an endpoint on the node reached, the filter still sees the
//! client's address where the evaluator says the node's: those probes are reported as not
//! compared (docs/lab.md, "Services").

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use palisade_engine::{Endpoint, EndpointKind, Engine, PortEndpoints, ServiceEndpoint, Verdict};
use palisade_model::{ExternalTrafficPolicy, Protocol};

use crate::{EndpointKind as LabKind, Lab, LabError, Target};

/// The lab's NAT table (kube-proxy's part), in every node namespace.
pub const NAT_TABLE: &str = "palisade-lab-nat";

/// The packet mark that asks `postrouting` to hide a NodePort client behind the node.
const MASQUERADE_MARK: u32 = 0x4000;

/// How a probe reaches a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceVia {
    /// Its cluster IP, from a pod or a node (or the external host of a one-node lab).
    ClusterIp,
    /// A node's address at the port's `nodePort`, from the external host.
    NodePort {
        /// The node reached.
        node: String,
        /// The node's address.
        node_ip: IpAddr,
        /// The Service's `externalTrafficPolicy`.
        policy: ExternalTrafficPolicy,
    },
}

/// One Service port, reached one way, pinned to one of its endpoints.
#[derive(Debug, Clone)]
pub struct PinnedPort {
    /// The Service, `namespace/name`.
    pub service: String,
    /// The Service port's label (its name, else its number).
    pub port_label: String,
    /// The port's endpoints (all of them: the verdict is taken for [`PinnedPort::endpoint`]).
    pub endpoints: PortEndpoints,
    /// How it is reached.
    pub via: ServiceVia,
    /// The address probed (cluster IP or node address).
    pub ip: IpAddr,
    /// The port probed (the Service port, or its `nodePort`).
    pub port: u16,
    /// The endpoint the lab translates to in this port's round.
    pub endpoint: ServiceEndpoint,
    /// The round in which this endpoint is the one.
    pub round: usize,
}

impl PinnedPort {
    fn protocol(&self) -> Protocol {
        self.endpoints.port.protocol
    }

    fn target(&self) -> Target {
        Target {
            ip: self.ip,
            port: self.port,
            protocol: self.protocol(),
        }
    }

    /// The client as policy sees it at the endpoint: the node's address for a NodePort with
    /// `externalTrafficPolicy: Cluster`, else the client.
    fn seen_source(&self, engine: &Engine, client: Endpoint) -> Option<Endpoint> {
        match &self.via {
            ServiceVia::NodePort { node, policy, .. } => {
                let via = engine.node_id(node)?;
                engine.node_port_source(*policy, via, client, &self.endpoint)
            }
            ServiceVia::ClusterIp => Some(client),
        }
    }

    /// The packets addressed to this port.
    fn matches(&self) -> String {
        format!(
            "ip daddr {} {} dport {}",
            self.ip,
            proto(self.protocol()),
            self.port
        )
    }

    /// The translation to the endpoint.
    fn dnat_to(&self) -> String {
        format!(
            "dnat ip to {}:{}",
            self.endpoint.at.ip,
            self.endpoint.port.get()
        )
    }

    fn dnat(&self) -> String {
        format!("{} {}", self.matches(), self.dnat_to())
    }
}

fn proto(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "tcp",
        Protocol::Udp => "udp",
        Protocol::Sctp => "sctp",
    }
}

/// Every (Service port, way in, endpoint) of the cluster the lab can probe, each with its
/// round: IPv4 cluster IPs of TCP and UDP ports, and in a lab of several nodes the
/// `nodePort`s on every node's address. `engine` must know the lab's nodes
/// ([`Lab::engine`]).
pub fn pinned_ports(lab: &Lab, engine: &Engine) -> Vec<PinnedPort> {
    let mut out = Vec::new();
    for svc in &engine.cluster().services {
        let Some(cluster_ip) = svc.cluster_ips.iter().find(|ip| ip.is_ipv4()).copied() else {
            continue;
        };
        if svc.headless {
            continue;
        }
        for pe in engine.service_endpoints(svc, false) {
            if pe.port.protocol == Protocol::Sctp {
                continue;
            }
            let mut pin = |via: ServiceVia, ip: IpAddr, port: u16, chosen: Vec<ServiceEndpoint>| {
                for (round, endpoint) in chosen.into_iter().enumerate() {
                    out.push(PinnedPort {
                        service: svc.key(),
                        port_label: pe.port.label(),
                        endpoints: pe.clone(),
                        via: via.clone(),
                        ip,
                        port,
                        endpoint,
                        round,
                    });
                }
            };
            pin(
                ServiceVia::ClusterIp,
                cluster_ip,
                pe.port.port.get(),
                pe.endpoints.clone(),
            );
            let Some(node_port) = pe.port.node_port.filter(|_| lab.fabric_netns.is_some()) else {
                continue;
            };
            for node in &lab.nodes {
                let (Some(name), Some(node_ip)) = (&node.name, node.ip()) else {
                    continue;
                };
                let policy = svc.external_traffic_policy;
                let chosen = pe
                    .endpoints
                    .iter()
                    .filter(|e| {
                        policy == ExternalTrafficPolicy::Cluster
                            || endpoint_node(lab, e.at.ip) == Some(name.as_str())
                    })
                    .copied()
                    .collect();
                let via = ServiceVia::NodePort {
                    node: name.clone(),
                    node_ip,
                    policy,
                };
                pin(via, node_ip, node_port.get(), chosen);
            }
        }
    }
    out
}

/// The node a pod endpoint of the lab sits on.
fn endpoint_node(lab: &Lab, ip: IpAddr) -> Option<&str> {
    lab.pods
        .iter()
        .find(|p| p.ip == ip)
        .and_then(|p| p.node.as_deref())
}

/// The number of rounds `pinned` needs: the most endpoints of one port.
pub fn rounds(pinned: &[PinnedPort]) -> usize {
    pinned.iter().map(|p| p.round + 1).max().unwrap_or(0)
}

/// The NAT table of one node for one round, as `nft -f` text.
fn nat_text(lab: &Lab, node_name: Option<&str>, pinned: &[PinnedPort], round: usize) -> String {
    let mut pre = String::new();
    let mut out = String::new();
    let mut post = String::new();
    let mut hairpins: Vec<IpAddr> = Vec::new();
    for p in pinned.iter().filter(|p| p.round == round) {
        match &p.via {
            ServiceVia::ClusterIp => {
                pre += &format!("    {}\n", p.dnat());
                out += &format!("    {}\n", p.dnat());
                if matches!(p.endpoint.at.kind, EndpointKind::Pod(_))
                    && !hairpins.contains(&p.endpoint.at.ip)
                {
                    hairpins.push(p.endpoint.at.ip);
                }
            }
            ServiceVia::NodePort { node, policy, .. } if Some(node.as_str()) == node_name => {
                // the mark after the matches: a statement before them would mark every packet
                let mark = match policy {
                    ExternalTrafficPolicy::Cluster => {
                        format!(" meta mark set {MASQUERADE_MARK:#x}")
                    }
                    ExternalTrafficPolicy::Local => String::new(),
                };
                pre += &format!("    {}{mark} {}\n", p.matches(), p.dnat_to());
            }
            ServiceVia::NodePort { .. } => {}
        }
    }
    for ip in hairpins {
        post += &format!("    ct status dnat ip saddr {ip} ip daddr {ip} masquerade\n");
    }
    if let Some(node_ip) = lab
        .nodes
        .iter()
        .find(|n| n.name.as_deref() == node_name)
        .and_then(|n| n.ip())
    {
        post += &format!("    meta mark {MASQUERADE_MARK:#x} snat ip to {node_ip}\n");
    }
    let chain = |name: &str, hook: &str, prio: &str, body: &str| {
        format!(
            "  chain {name} {{\n    type nat hook {hook} priority {prio}; policy accept;\n{body}  }}\n"
        )
    };
    format!(
        "add table ip {NAT_TABLE}\ndelete table ip {NAT_TABLE}\ntable ip {NAT_TABLE} {{\n{}{}{}}}\n",
        chain("prerouting", "prerouting", "-100", &pre),
        chain("output", "output", "-100", &out),
        chain("postrouting", "postrouting", "100", &post),
    )
}

impl Lab {
    /// Loads round `round` of `pinned` (from [`pinned_ports`]) into every node's NAT table and
    /// forgets the node's tracked connections, so that the next connections take the new
    /// translations.
    pub fn load_services(&self, pinned: &[PinnedPort], round: usize) -> Result<(), LabError> {
        for node in &self.nodes {
            let text = nat_text(self, node.name.as_deref(), pinned, round);
            nft_in(&node.netns, &text)?;
            // `conntrack -F` exits 1 on an empty table on some versions: not an error here
            let _ = Command::new("ip")
                .args(["netns", "exec", &node.netns, "conntrack", "-F"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        Ok(())
    }
}

/// Runs `nft -f -` with `text` in namespace `netns`.
fn nft_in(netns: &str, text: &str) -> Result<(), LabError> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", netns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(LabError::Command {
            command: format!("ip netns exec {netns} nft -f - ({NAT_TABLE})"),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// One probe through a Service address, with what the evaluator says of it.
#[derive(Debug, Clone)]
pub struct ServiceObservation {
    /// The client (`namespace/name`, or an address).
    pub from: String,
    /// The Service port and the endpoint it was pinned to.
    pub pinned: PinnedPort,
    /// The endpoint's key (`namespace/name` of a pod, else its address).
    pub endpoint: String,
    /// Whether the connection got through.
    pub reached: bool,
    /// [`Engine::evaluate_service_port`]'s verdict for this endpoint.
    pub verdict: Verdict,
    /// Whether the client is the endpoint itself.
    pub hairpin: bool,
}

impl ServiceObservation {
    /// Whether the kernel and the evaluator differ.
    pub fn disagrees(&self) -> bool {
        self.reached != self.verdict.allowed
    }
}

impl fmt::Display for ServiceObservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = |allowed: bool| if allowed { "allowed" } else { "denied" };
        let p = &self.pinned;
        let via = match &p.via {
            ServiceVia::ClusterIp => String::new(),
            ServiceVia::NodePort { node, policy, .. } => {
                format!(
                    " (nodePort on {node}, externalTrafficPolicy {})",
                    policy.as_str()
                )
            }
        };
        write!(
            f,
            "{} -> svc/{}:{} at {}:{}/{}{via} -> {}:{}{}: kernel {}, evaluator {}",
            self.from,
            p.service,
            p.port_label,
            p.ip,
            p.port,
            p.protocol(),
            self.endpoint,
            p.endpoint.port.get(),
            if self.hairpin { " (hairpin)" } else { "" },
            word(self.reached),
            word(self.verdict.allowed),
        )?;
        Ok(())
    }
}

/// Probes every Service port of the cluster, endpoint by endpoint (one round per endpoint
/// index, see [`pinned_ports`]), from every client: cluster IPs from the pods and nodes (and
/// the external host of a one-node lab), `nodePort`s from the external host. Leaves the last
/// round loaded. `engine` must know the lab's nodes ([`Lab::engine`]).
pub fn observe_services(
    lab: &Lab,
    exe: &Path,
    engine: &Engine,
) -> Result<Vec<ServiceObservation>, LabError> {
    let pinned = pinned_ports(lab, engine);
    let clients: Vec<_> = lab
        .endpoints()
        .filter(|e| e.kind != LabKind::External || lab.fabric_netns.is_none())
        .collect();
    let mut out = Vec::new();
    for round in 0..rounds(&pinned) {
        lab.load_services(&pinned, round)?;
        let this: Vec<&PinnedPort> = pinned.iter().filter(|p| p.round == round).collect();
        let mut plan: Vec<(String, Vec<Target>)> = clients
            .iter()
            .map(|c| {
                let targets = this
                    .iter()
                    .filter(|p| p.via == ServiceVia::ClusterIp)
                    .map(|p| p.target())
                    .collect();
                (c.netns.clone(), targets)
            })
            .collect();
        if lab.fabric_netns.is_some() {
            let targets = this
                .iter()
                .filter(|p| p.via != ServiceVia::ClusterIp)
                .map(|p| p.target())
                .collect();
            plan.push((lab.external.netns.clone(), targets));
        }
        let by_target: HashMap<Target, &PinnedPort> =
            this.iter().map(|p| (p.target(), *p)).collect();
        let mut results = lab.probe(exe, &plan)?;
        results.sort_by_key(|(netns, r)| (netns.clone(), r.target.ip, r.target.port));
        for (netns, r) in results {
            let (Some(p), Some(client)) = (
                by_target.get(&r.target),
                lab.endpoints().find(|e| e.netns == netns),
            ) else {
                continue;
            };
            out.extend(observation(
                lab,
                engine,
                client.key.clone(),
                client.ip,
                p,
                r.reached,
            ));
        }
    }
    Ok(out)
}

fn observation(
    lab: &Lab,
    engine: &Engine,
    from: String,
    client_ip: IpAddr,
    p: &PinnedPort,
    reached: bool,
) -> Option<ServiceObservation> {
    let client = engine.endpoint_for_ip(client_ip);
    let one = PortEndpoints {
        port: p.endpoints.port.clone(),
        endpoints: vec![p.endpoint],
        left_out: Vec::new(),
    };
    let decided = engine
        .evaluate_service_port(p.seen_source(engine, client)?, &one)
        .pop()?;
    let endpoint = lab
        .pods
        .iter()
        .find(|e| e.ip == p.endpoint.at.ip)
        .map_or_else(|| p.endpoint.at.ip.to_string(), |e| e.key.clone());
    Some(ServiceObservation {
        from,
        pinned: p.clone(),
        endpoint,
        reached,
        verdict: decided.verdict,
        hairpin: decided.hairpin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab_and_engine() -> (Lab, Engine) {
        let yaml = include_str!("../tests/fixtures/services/cluster.yaml");
        let cluster = palisade_model::load_sources([("cluster.yaml", yaml)], Default::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .cluster;
        let lab = Lab::planned(&cluster, "t").unwrap_or_else(|e| panic!("{e}"));
        let done = lab.complete(&cluster).unwrap_or_else(|e| panic!("{e}"));
        (lab, Engine::new(done, Default::default()))
    }

    #[test]
    fn each_round_translates_every_port_to_one_endpoint() {
        let (lab, engine) = lab_and_engine();
        let pinned = pinned_ports(&lab, &engine);
        assert_eq!(rounds(&pinned), 2);
        let n1 = nat_text(&lab, Some("n1"), &pinned, 0);
        let n2 = nat_text(&lab, Some("n2"), &pinned, 1);
        for (text, want, why) in [
            (
                &n1,
                "ip daddr 10.96.0.10 tcp dport 8080 dnat ip to 10.1.0.1:80",
                "web, api-1's `web`",
            ),
            (
                &n2,
                "ip daddr 10.96.0.10 tcp dport 8080 dnat ip to 10.1.0.2:81",
                "web, api-2's `web`",
            ),
            (
                &n1,
                "ip daddr 10.96.0.12 tcp dport 9000 dnat ip to 10.1.0.1:81",
                "manual, slice a",
            ),
            (
                &n2,
                "ip daddr 10.96.0.12 tcp dport 9000 dnat ip to 10.1.0.2:80",
                "manual, slice b",
            ),
            (
                &n1,
                "ct status dnat ip saddr 10.1.0.1 ip daddr 10.1.0.1 masquerade",
                "hairpin",
            ),
            (
                &n1,
                "ip daddr 192.168.1.1 tcp dport 30080 dnat ip to 10.1.0.1:80",
                "Local on n1",
            ),
            (
                &n1,
                "ip daddr 192.168.1.1 tcp dport 30081 meta mark set 0x4000 dnat ip to 10.1.0.1:81",
                "Cluster",
            ),
            (
                &n1,
                "meta mark 0x4000 snat ip to 192.168.1.1",
                "Cluster hides the client",
            ),
        ] {
            assert!(text.contains(want), "{why}: want {want}\n{text}");
        }
        // one endpoint per port and round; Local sends nothing from n1 to n2's endpoint
        assert_eq!(n1.matches("10.96.0.10 tcp dport 8080").count(), 2, "{n1}"); // prerouting, output
        let n1_round_1 = nat_text(&lab, Some("n1"), &pinned, 1);
        assert!(!n1_round_1.contains("dport 30080"), "{n1_round_1}");
    }
}
