//! Enforcement in a lab: the cluster as the lab built it, and one ruleset per node
//! namespace, compiled for that node's pods only and loaded there.

use palisade_engine::Engine;
use palisade_model::{Cluster, Node, Origin};
use palisade_nft::{Ruleset, UpdateStats};

use crate::{Lab, LabError};

impl Lab {
    /// `cluster` as this lab built it: every node of the per-node layout with the address
    /// the lab gave it (a Node object is added for a node the input does not declare, and
    /// the address for one it declares without an IPv4 `InternalIP`). Fails when the input
    /// puts a pod on another node than the lab did or gives a node another address: the
    /// lab must then be built again.
    pub fn complete(&self, cluster: &Cluster) -> Result<Cluster, LabError> {
        let mut out = cluster.clone();
        if self.fabric_netns.is_none() {
            return Ok(out);
        }
        for p in &out.pods {
            if let Some(lab_pod) = self.pod(&p.key())
                && lab_pod.node != p.node_name
            {
                return Err(LabError::Layout(format!(
                    "pod {} is on node {} in the input ({}:{}) but on {} in lab {}: run lab up again",
                    p.key(),
                    p.node_name.as_deref().unwrap_or("(none)"),
                    p.origin.file,
                    p.origin.line,
                    lab_pod.node.as_deref().unwrap_or("(none)"),
                    self.name
                )));
            }
        }
        for node in &self.nodes {
            let (Some(name), Some(ip)) = (&node.name, node.ip()) else {
                continue;
            };
            match out.nodes.iter_mut().find(|n| &n.name == name) {
                None => out.nodes.push(Node {
                    name: name.clone(),
                    labels: Default::default(),
                    addresses: vec![ip],
                    origin: Origin {
                        file: format!("lab {}", self.name).into(),
                        line: 0,
                        fields: None,
                    },
                }),
                Some(n) if n.addresses.contains(&ip) => {}
                Some(n) if n.addresses.iter().any(|a| a.is_ipv4()) => {
                    return Err(LabError::Layout(format!(
                        "node {name} has the address {ip} in lab {} but not in the input ({}:{}): \
                         run lab up again",
                        self.name, n.origin.file, n.origin.line
                    )));
                }
                Some(n) => n.addresses.push(ip),
            }
        }
        Ok(out)
    }

    /// An engine for the cluster as this lab built it (see [`Lab::complete`]), with the
    /// options of `engine`; a copy of `engine` in the single-node layout.
    pub fn engine(&self, engine: &Engine) -> Result<Engine, LabError> {
        if self.fabric_netns.is_none() {
            return Ok(engine.clone());
        }
        Ok(Engine::new(
            self.complete(engine.cluster())?,
            engine.options(),
        ))
    }

    /// One ruleset per node namespace, in [`Lab::nodes`] order: in the per-node layout each
    /// holds only the sides of that node's pods (`compile --node`); the single node's holds
    /// every pod's. `engine` must know the lab's nodes (see [`Lab::engine`]).
    pub fn compile(&self, engine: &Engine) -> Result<Vec<Ruleset>, LabError> {
        self.nodes
            .iter()
            .map(|node| {
                let name = node.name.as_deref().filter(|_| self.fabric_netns.is_some());
                palisade_nft::compile(engine, name).map_err(|source| LabError::Nft {
                    netns: node.netns.clone(),
                    source: source.into(),
                })
            })
            .collect()
    }

    /// Loads each ruleset (from [`Lab::compile`]) into its node, one transaction per node.
    pub fn apply(&self, rulesets: &[Ruleset]) -> Result<(), LabError> {
        self.per_node(rulesets, |_, rs, netns| {
            palisade_nft::apply(rs, Some(netns))
        })
        .map(|_| ())
    }

    /// Moves each node from `old` to `new` (both from [`Lab::compile`]) with
    /// [`palisade_nft::update`]: changed chains and map elements only, then the cut of the
    /// connections `new` forbids.
    pub fn update(&self, old: &[Ruleset], new: &[Ruleset]) -> Result<Vec<UpdateStats>, LabError> {
        if old.len() != self.nodes.len() {
            return Err(self.count_mismatch(old.len()));
        }
        self.per_node(new, |i, rs, netns| {
            palisade_nft::update(&old[i], rs, Some(netns))
        })
    }

    /// Deletes, in each node, the tracked connections its ruleset forbids; the count per node.
    pub fn cut_forbidden(&self, rulesets: &[Ruleset]) -> Result<Vec<usize>, LabError> {
        self.per_node(rulesets, |_, rs, netns| {
            palisade_nft::cut_forbidden(rs, Some(netns))
        })
    }

    fn per_node<T>(
        &self,
        rulesets: &[Ruleset],
        f: impl Fn(usize, &Ruleset, &str) -> Result<T, palisade_nft::KernelError>,
    ) -> Result<Vec<T>, LabError> {
        if rulesets.len() != self.nodes.len() {
            return Err(self.count_mismatch(rulesets.len()));
        }
        self.nodes
            .iter()
            .zip(rulesets)
            .enumerate()
            .map(|(i, (node, rs))| {
                f(i, rs, &node.netns).map_err(|source| LabError::Nft {
                    netns: node.netns.clone(),
                    source: source.into(),
                })
            })
            .collect()
    }

    fn count_mismatch(&self, got: usize) -> LabError {
        LabError::Layout(format!(
            "{got} rulesets for the {} nodes of lab {}",
            self.nodes.len(),
            self.name
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(yaml: &str) -> Cluster {
        palisade_model::load_sources([("in.yaml", yaml)], Default::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .cluster
    }

    const PODS: &str = "
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x}
spec: {nodeName: n1, containers: [{name: c}]}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: x}
spec: {nodeName: n2, containers: [{name: c}]}
status: {podIP: 10.0.0.2}
";

    fn node(name: &str, ip: &str) -> String {
        let status = if ip.is_empty() {
            String::new()
        } else {
            format!("\nstatus: {{addresses: [{{type: InternalIP, address: {ip}}}]}}")
        };
        format!("---\napiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}{status}\n")
    }

    fn addresses(c: &Cluster) -> Vec<(String, Vec<String>)> {
        let mut v: Vec<(String, Vec<String>)> = c
            .nodes
            .iter()
            .map(|n| {
                let ips = n.addresses.iter().map(ToString::to_string).collect();
                (n.name.clone(), ips)
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_completed_cluster_knows_every_node_at_the_labs_address() {
        let built = PODS.to_string() + &node("n1", "192.168.1.1");
        let lab = Lab::planned(&cluster(&built), "t").unwrap_or_else(|e| panic!("{e}"));
        for (input, why) in [
            (
                PODS.to_string() + &node("n1", "192.168.1.1"),
                "n2 undeclared",
            ),
            (
                PODS.to_string() + &node("n1", "192.168.1.1") + &node("n2", "2001:db8::2"),
                "n2 with an IPv6 address only",
            ),
        ] {
            let done = lab
                .complete(&cluster(&input))
                .unwrap_or_else(|e| panic!("{why}: {e}"));
            let want_n2: Vec<&str> = if why.contains("IPv6") {
                vec!["2001:db8::2", "198.18.0.1"]
            } else {
                vec!["198.18.0.1"]
            };
            let got = addresses(&done);
            assert_eq!(
                got[0],
                ("n1".to_string(), vec!["192.168.1.1".to_string()]),
                "{why}"
            );
            assert_eq!(got[1].0, "n2", "{why}");
            assert_eq!(got[1].1, want_n2, "{why}");
        }
    }

    #[test]
    fn an_input_that_no_longer_fits_the_lab_is_refused() {
        let built = PODS.to_string() + &node("n1", "192.168.1.1");
        let lab = Lab::planned(&cluster(&built), "t").unwrap_or_else(|e| panic!("{e}"));
        for (input, want) in [
            (
                PODS.to_string() + &node("n1", "192.168.1.9"),
                "node n1 has the address 192.168.1.1 in lab t but not in the input (in.yaml:",
            ),
            (
                PODS.replace("nodeName: n2", "nodeName: n1"),
                "pod x/b is on node n1 in the input (in.yaml:",
            ),
        ] {
            match lab.complete(&cluster(&input)) {
                Err(LabError::Layout(msg)) => assert!(msg.contains(want), "{msg}\nwant {want}"),
                other => panic!("want {want:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn the_single_node_layout_leaves_the_cluster_as_it_is() {
        let one = PODS.replace("nodeName: n2", "nodeName: n1");
        let lab = Lab::planned(&cluster(&one), "t").unwrap_or_else(|e| panic!("{e}"));
        let done = lab
            .complete(&cluster(&one))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(done.nodes.is_empty());
    }
}
