//! Which port is whose: pods are placed on the ports holding their addresses, and a port
//! that cannot be given one pod's groups is found, to be closed.
//!
//! A port can be placed when exactly one pod has addresses on it and that pod has
//! addresses on no other port. A port holding addresses of two pods would carry both pods'
//! groups (each allowing what the other is not allowed), and a pod whose address two ports
//! hold cannot be told apart from the other port's owner by its traffic: such ports are
//! **unplaceable**, and the plan takes every group from them, which allows at most what
//! every pod involved is allowed (nothing). Ports that carry another cluster's groups in
//! the same project are that cluster's, and are not considered at all.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use palisade_neutron::{PortBinding, Translation};
use serde::Serialize;

use crate::plan::Unmatched;
use crate::state::{Observed, Ownership, PortState};

/// A port that cannot be placed, and the pods it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unplaceable {
    /// The port's id.
    pub port_id: String,
    /// The pods (`namespace/name`) with an address on it or on a port sharing one.
    pub pods: Vec<String>,
    /// Why.
    pub reason: String,
    /// The groups it carries now (ids).
    #[serde(skip)]
    pub security_groups: Vec<String>,
}

/// Where every pod goes.
pub struct Placement<'a> {
    /// Pods with their port.
    pub placed: Vec<(&'a PortBinding, &'a PortState)>,
    /// Pods no port has an address of.
    pub unmatched: Vec<Unmatched>,
    /// Ports that cannot be placed.
    pub unplaceable: Vec<Unplaceable>,
    /// Ports that hold no pod's address.
    pub orphans: Vec<&'a PortState>,
}

/// Places the pods of `desired` on the ports of `observed`.
pub fn place<'a>(desired: &'a Translation, observed: &'a Observed) -> Placement<'a> {
    let others: BTreeSet<&str> = observed
        .foreign
        .iter()
        .filter(|(_, whose)| *whose == Ownership::OtherCluster)
        .map(|(g, _)| g.id.as_str())
        .collect();
    let ports: Vec<&PortState> = observed
        .ports
        .iter()
        .filter(|p| {
            !p.security_groups
                .iter()
                .any(|g| others.contains(g.as_str()))
        })
        .collect();
    let mut by_ip: HashMap<IpAddr, Vec<usize>> = HashMap::new();
    for (i, p) in ports.iter().enumerate() {
        for ip in &p.fixed_ips {
            by_ip.entry(*ip).or_default().push(i);
        }
    }
    // The ports of each pod, and the pods of each port.
    let mut pods_of: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    let mut ports_of: Vec<BTreeSet<usize>> = Vec::with_capacity(desired.ports.len());
    for (b, binding) in desired.ports.iter().enumerate() {
        let found: BTreeSet<usize> = binding
            .fixed_ips
            .iter()
            .flat_map(|ip| by_ip.get(ip).into_iter().flatten().copied())
            .collect();
        for &p in &found {
            pods_of.entry(p).or_default().insert(b);
        }
        ports_of.push(found);
    }
    let reason = |p: usize| -> Option<String> {
        let pods = &pods_of[&p];
        if pods.len() > 1 {
            let names: Vec<&str> = pods
                .iter()
                .map(|&b| desired.ports[b].pod.as_str())
                .collect();
            return Some(format!("it holds addresses of {}", names.join(" and ")));
        }
        let b = *pods.first()?;
        (ports_of[b].len() > 1).then(|| {
            let ids: Vec<&str> = ports_of[b].iter().map(|&q| ports[q].id.as_str()).collect();
            format!(
                "pod {}'s addresses are held by ports {}",
                desired.ports[b].pod,
                ids.join(", ")
            )
        })
    };
    let mut out = Placement {
        placed: Vec::new(),
        unmatched: Vec::new(),
        unplaceable: Vec::new(),
        orphans: Vec::new(),
    };
    let mut blocked: BTreeSet<usize> = BTreeSet::new();
    for &p in pods_of.keys() {
        if let Some(reason) = reason(p) {
            blocked.extend(pods_of[&p].iter().copied());
            out.unplaceable.push(Unplaceable {
                port_id: ports[p].id.clone(),
                pods: pods_of[&p]
                    .iter()
                    .map(|&b| desired.ports[b].pod.clone())
                    .collect(),
                reason,
                security_groups: ports[p].security_groups.clone(),
            });
        }
    }
    for (b, binding) in desired.ports.iter().enumerate() {
        match ports_of[b].first() {
            None => out.unmatched.push(Unmatched {
                pod: binding.pod.clone(),
                reason: match binding.fixed_ips.first() {
                    Some(ip) => format!("no Neutron port has the address {ip}"),
                    None => "it has no address".into(),
                },
            }),
            Some(&p) if !blocked.contains(&b) => out.placed.push((binding, ports[p])),
            Some(_) => {}
        }
    }
    out.orphans = (0..ports.len())
        .filter(|p| !pods_of.contains_key(p))
        .map(|p| ports[p])
        .collect();
    out
}
