//! Where everything of a lab goes: which node namespace each pod sits in, each node's
//! address, and the names of the namespaces. Pure data; [`crate::Lab::up`] builds it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use palisade_model::{Cluster, Protocol};

use crate::{EXTERNAL_IP, EndpointKind, LabEndpoint, LabError, LabNode};

/// The first address handed to a node the input gives no IPv4 address (198.18.0.0/15 is
/// reserved for benchmarking networks, so it is outside any real cluster's ranges).
const GENERATED_BASE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

/// The nodes, pods and external host of a lab, before anything exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The node namespaces: one (`<lab>-node`) when every pod sits on one node or names
    /// none, else one per node the pods name, in name order.
    pub nodes: Vec<LabNode>,
    /// The fabric namespace joining the nodes (per-node layout only).
    pub fabric: Option<String>,
    /// The pods that get a namespace, by key.
    pub pods: Vec<LabEndpoint>,
    /// The external host.
    pub external: LabEndpoint,
}

/// The lab `name` of the IPv4 pods of `cluster`.
pub(crate) fn layout(cluster: &Cluster, name: &str) -> Result<Layout, LabError> {
    let external_ip: IpAddr = IpAddr::V4(EXTERNAL_IP);
    let pods: Vec<&palisade_model::Pod> = cluster
        .pods
        .iter()
        .filter(|p| p.host_network || p.ips.iter().any(IpAddr::is_ipv4))
        .collect();
    let node_names: BTreeSet<&str> = pods.iter().filter_map(|p| p.node_name.as_deref()).collect();
    let all_ports = {
        let mut v: Vec<(u16, Protocol)> = pods.iter().flat_map(|p| ports(p)).collect();
        v.sort();
        v.dedup();
        v
    };
    let per_node = node_names.len() > 1;
    let mut endpoints: Vec<LabEndpoint> = pods
        .iter()
        .filter(|p| !p.host_network)
        .filter_map(|p| {
            Some(LabEndpoint {
                key: p.key(),
                kind: EndpointKind::Pod,
                node: p.node_name.clone().filter(|_| per_node),
                netns: String::new(),
                ip: *p.ips.iter().find(|ip| ip.is_ipv4())?,
                ports: ports(p),
            })
        })
        .collect();
    endpoints.sort_by(|a, b| a.key.cmp(&b.key));
    for (i, p) in endpoints.iter_mut().enumerate() {
        p.netns = format!("{name}-p{i}");
    }
    let external = LabEndpoint {
        key: EXTERNAL_IP.to_string(),
        kind: EndpointKind::External,
        node: None,
        netns: format!("{name}-ext"),
        ip: external_ip,
        ports: all_ports.clone(),
    };
    if !per_node {
        // Today's layout: one node namespace, no node address, host-network pods left out.
        let node = LabNode {
            name: node_names.first().map(|n| n.to_string()),
            netns: format!("{name}-node"),
            endpoint: None,
            generated_address: false,
            host_network_pods: Vec::new(),
        };
        return Ok(Layout {
            nodes: vec![node],
            fabric: None,
            pods: endpoints,
            external,
        });
    }
    if let Some(p) = pods.iter().find(|p| p.node_name.is_none()) {
        return Err(LabError::Layout(format!(
            "pod {} ({}:{}) has no spec.nodeName, but the pods are spread over the nodes {}: \
             give every pod a node",
            p.key(),
            p.origin.file,
            p.origin.line,
            node_names.iter().copied().collect::<Vec<_>>().join(", ")
        )));
    }
    for n in &node_names {
        check_node_name(n)?;
    }
    let addresses = addresses(cluster, &pods, &node_names, &endpoints, external_ip)?;
    let nodes = node_names
        .iter()
        .map(|&n| {
            let (ip, generated_address) = addresses[n];
            let host_network_pods: Vec<String> = pods
                .iter()
                .filter(|p| p.host_network && p.node_name.as_deref() == Some(n))
                .map(|p| p.key())
                .collect();
            let netns = format!("{name}-node-{n}");
            LabNode {
                name: Some(n.to_string()),
                endpoint: Some(LabEndpoint {
                    key: ip.to_string(),
                    kind: EndpointKind::Node,
                    node: Some(n.to_string()),
                    netns: netns.clone(),
                    ip,
                    ports: all_ports.clone(),
                }),
                netns,
                generated_address,
                host_network_pods,
            }
        })
        .collect();
    Ok(Layout {
        nodes,
        fabric: Some(format!("{name}-fab")),
        pods: endpoints,
        external,
    })
}

/// The distinct container ports of a pod.
fn ports(p: &palisade_model::Pod) -> Vec<(u16, Protocol)> {
    let mut v: Vec<(u16, Protocol)> = p.ports.iter().map(|c| (c.port.get(), c.protocol)).collect();
    v.sort();
    v.dedup();
    v
}

/// A node name must be a DNS subdomain (it becomes part of a namespace's file name).
fn check_node_name(n: &str) -> Result<(), LabError> {
    let ok = !n.is_empty()
        && n.len() <= 200
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(LabError::Layout(format!(
            "node name {n:?}: the lab wants lowercase letters, digits, '-' and '.' (at most 200)"
        )))
    }
}

/// Each node's IPv4 address, and whether the lab made it up: the Node's first IPv4
/// `InternalIP`, else the address of a host-network pod on it (which is its node's), else
/// the next free address from [`GENERATED_BASE`].
fn addresses<'a>(
    cluster: &Cluster,
    pods: &[&palisade_model::Pod],
    node_names: &BTreeSet<&'a str>,
    endpoints: &[LabEndpoint],
    external_ip: IpAddr,
) -> Result<BTreeMap<&'a str, (IpAddr, bool)>, LabError> {
    let mut out: BTreeMap<&str, (IpAddr, bool)> = BTreeMap::new();
    for &n in node_names {
        let internal = cluster
            .nodes
            .iter()
            .find(|node| node.name == n)
            .and_then(|node| node.addresses.iter().find(|ip| ip.is_ipv4()).copied());
        let host_pod = pods
            .iter()
            .filter(|p| p.host_network && p.node_name.as_deref() == Some(n))
            .find_map(|p| p.ips.iter().find(|ip| ip.is_ipv4()).map(|ip| (p, *ip)));
        if let (Some(ip), Some((p, pod_ip))) = (internal, host_pod)
            && ip != pod_ip
        {
            return Err(LabError::Layout(format!(
                "host-network pod {} ({}:{}) has the address {pod_ip}, but its node {n} has the \
                 InternalIP {ip}: the lab puts host-network pods at their node's address",
                p.key(),
                p.origin.file,
                p.origin.line
            )));
        }
        if let Some(ip) = internal.or(host_pod.map(|(_, ip)| ip)) {
            out.insert(n, (ip, false));
        }
    }
    // Every address in use must belong to one endpoint only.
    let mut taken: BTreeMap<IpAddr, String> = BTreeMap::new();
    taken.insert(external_ip, "the external host".into());
    for e in endpoints {
        if let Some(other) = taken.insert(e.ip, format!("pod {}", e.key)) {
            return Err(LabError::Layout(format!(
                "pod {} and {other} both have the address {}: the lab routes each address to \
                 one namespace",
                e.key, e.ip
            )));
        }
    }
    for (n, (ip, _)) in &out {
        if let Some(other) = taken.insert(*ip, format!("node {n}")) {
            return Err(LabError::Layout(format!(
                "node {n} and {other} both have the address {ip}"
            )));
        }
    }
    // Addresses of nodes without pods in the lab are kept clear too.
    let reserved: BTreeSet<IpAddr> = cluster
        .nodes
        .iter()
        .flat_map(|n| n.addresses.iter().copied())
        .chain(cluster.pods.iter().flat_map(|p| p.ips.iter().copied()))
        .chain(taken.keys().copied())
        .collect();
    let mut next = u32::from(GENERATED_BASE);
    for &n in node_names {
        if out.contains_key(n) {
            continue;
        }
        let ip = loop {
            let ip = IpAddr::V4(Ipv4Addr::from(next));
            next += 1;
            if !reserved.contains(&ip) {
                break ip;
            }
        };
        out.insert(n, (ip, true));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(yaml: &str) -> Cluster {
        palisade_model::load_sources([("test.yaml", yaml)], Default::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .cluster
    }

    fn pod(ns: &str, name: &str, node: Option<&str>, ip: Option<&str>, host: bool) -> String {
        let node = node.map_or(String::new(), |n| format!("  nodeName: {n}\n"));
        let status = ip.map_or(String::new(), |ip| format!("status:\n  podIP: {ip}\n"));
        format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
             spec:\n{node}  hostNetwork: {host}\n  containers:\n  - name: c\n    ports:\n    \
             - containerPort: 80\n{status}"
        )
    }

    fn node(name: &str, ip: Option<&str>) -> String {
        let status = ip.map_or(String::new(), |ip| {
            format!("status:\n  addresses:\n  - type: InternalIP\n    address: {ip}\n")
        });
        format!("---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n{status}")
    }

    #[test]
    fn one_node_or_none_keeps_the_single_node_layout() {
        for (yaml, why) in [
            (
                pod("x", "a", None, Some("10.0.0.1"), false)
                    + &pod("x", "b", None, Some("10.0.0.2"), false),
                "no nodeName",
            ),
            (
                pod("x", "a", Some("n1"), Some("10.0.0.1"), false)
                    + &pod("x", "b", Some("n1"), Some("10.0.0.2"), false)
                    + &pod("x", "h", Some("n1"), None, true),
                "one node, a host-network pod",
            ),
        ] {
            let l = layout(&cluster(&yaml), "t").unwrap_or_else(|e| panic!("{why}: {e}"));
            assert_eq!(l.nodes.len(), 1, "{why}");
            assert_eq!(l.nodes[0].netns, "t-node", "{why}");
            assert_eq!(l.nodes[0].endpoint, None, "{why}");
            assert_eq!(l.fabric, None, "{why}");
            let keys: Vec<&str> = l.pods.iter().map(|p| p.key.as_str()).collect();
            assert_eq!(keys, ["x/a", "x/b"], "{why}");
            assert!(l.pods.iter().all(|p| p.node.is_none()), "{why}");
        }
    }

    #[test]
    fn pods_on_several_nodes_get_one_namespace_and_address_per_node() {
        let yaml = node("n1", Some("192.168.1.1"))
            + &node("n2", None)
            + &pod("x", "a", Some("n1"), Some("10.0.0.1"), false)
            + &pod("x", "b", Some("n2"), Some("10.0.0.2"), false)
            + &pod("x", "c", Some("n3"), Some("10.0.0.3"), false)
            + &pod("x", "h", Some("n3"), Some("192.168.1.3"), true)
            + &pod("x", "g", Some("n3"), None, true);
        let l = layout(&cluster(&yaml), "t").unwrap_or_else(|e| panic!("{e}"));
        let nodes: Vec<(&str, String, bool, Vec<String>)> = l
            .nodes
            .iter()
            .map(|n| {
                let ip = n.ip().map_or_else(String::new, |ip| ip.to_string());
                (
                    n.netns.as_str(),
                    ip,
                    n.generated_address,
                    n.host_network_pods.clone(),
                )
            })
            .collect();
        assert_eq!(
            nodes,
            [
                ("t-node-n1", "192.168.1.1".into(), false, vec![]),
                ("t-node-n2", "198.18.0.1".into(), true, vec![]),
                (
                    "t-node-n3",
                    "192.168.1.3".into(),
                    false,
                    vec!["x/g".into(), "x/h".into()]
                ),
            ],
            "InternalIP, generated, a host-network pod's address"
        );
        assert_eq!(l.fabric.as_deref(), Some("t-fab"));
        let placed: Vec<(&str, Option<&str>)> = l
            .pods
            .iter()
            .map(|p| (p.key.as_str(), p.node.as_deref()))
            .collect();
        assert_eq!(
            placed,
            [
                ("x/a", Some("n1")),
                ("x/b", Some("n2")),
                ("x/c", Some("n3"))
            ]
        );
    }

    #[test]
    fn a_generated_address_avoids_every_address_in_use() {
        let yaml = node("n1", Some("198.18.0.1"))
            + &node("n2", None)
            + &pod("x", "a", Some("n1"), Some("198.18.0.2"), false)
            + &pod("x", "b", Some("n2"), Some("10.0.0.2"), false);
        let l = layout(&cluster(&yaml), "t").unwrap_or_else(|e| panic!("{e}"));
        let n2 = l.nodes[1].ip().map(|ip| ip.to_string());
        assert_eq!(n2.as_deref(), Some("198.18.0.3"));
    }

    #[test]
    fn clusters_the_lab_cannot_build_are_refused_with_the_reason() {
        for (yaml, want) in [
            (
                pod("x", "a", Some("n1"), Some("10.0.0.1"), false)
                    + &pod("x", "b", None, Some("10.0.0.2"), false)
                    + &pod("x", "c", Some("n2"), Some("10.0.0.3"), false),
                "pod x/b (test.yaml:",
            ),
            (
                node("n1", Some("192.168.1.1"))
                    + &pod("x", "a", Some("n1"), Some("10.0.0.1"), false)
                    + &pod("x", "h", Some("n1"), Some("192.168.9.9"), true)
                    + &pod("x", "c", Some("n2"), Some("10.0.0.3"), false),
                "host-network pod x/h",
            ),
            (
                node("n1", Some("10.0.0.3"))
                    + &pod("x", "a", Some("n1"), Some("10.0.0.1"), false)
                    + &pod("x", "c", Some("n2"), Some("10.0.0.3"), false),
                "node n1 and pod x/c both have the address 10.0.0.3",
            ),
            (
                pod("x", "a", Some("n1"), Some("10.0.0.1"), false)
                    + &pod("x", "c", Some("n2"), Some("10.0.0.1"), false),
                "both have the address 10.0.0.1",
            ),
            (
                pod("x", "a", Some("N_1"), Some("10.0.0.1"), false)
                    + &pod("x", "c", Some("n2"), Some("10.0.0.3"), false),
                "node name \"N_1\"",
            ),
        ] {
            match layout(&cluster(&yaml), "t") {
                Err(LabError::Layout(msg)) => assert!(msg.contains(want), "{msg}\nwant {want}"),
                other => panic!("want an error with {want:?}, got {other:?}"),
            }
        }
    }
}
