//! NetworkPolicies → security groups and port bindings, exactly per docs/semantics.md.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use ipnet::IpNet;
use palisade_engine::{Engine, PodId, Semantics};
use palisade_model::{
    Direction, NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicyRule, Pod,
    PortSpec, Protocol,
};

use crate::cidr::subtract;
use crate::groups::{Ethertype, PortBinding, RuleDirection, SecurityGroup, SgRule, Translation};

/// How pod and namespace selector peers become rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PeerMode {
    /// One `/32` (`/128`) `remote_ip_prefix` rule per selected pod address (default: exact
    /// for every port number, no extra group memberships).
    #[default]
    Prefixes,
    /// One member-only group per selector peer, referenced by `remote_group_id` (the
    /// Kuryr spec's design; fewer rules, more memberships). Egress named ports still use
    /// prefixes, because the port number depends on each destination pod.
    RemoteGroups,
}

/// Translation options.
#[derive(Debug, Clone, Copy, Default)]
pub struct TranslateOptions {
    /// Selector peers as prefixes or remote groups.
    pub peer_mode: PeerMode,
    /// Translate although admin policies exist (they are then not enforced).
    pub ignore_admin_policies: bool,
}

/// Why a translation is refused.
#[derive(Debug, thiserror::Error)]
pub enum NeutronError {
    /// Allow-only security groups cannot express deny, pass or priorities.
    #[error("security groups cannot express AdminNetworkPolicy, BaselineAdminNetworkPolicy or ClusterNetworkPolicy (allow-only unions have no deny, pass or priority); the input has: {}. Use --ignore-admin-policies to translate the NetworkPolicies alone", .0.join(", "))]
    AdminPolicies(Vec<String>),
    /// Only released semantics are translated.
    #[error(
        "the Neutron translation implements the standard (released) semantics only, not --semantics legacy"
    )]
    LegacySemantics,
}

/// Group every port without ingress isolation carries.
pub const OPEN_INGRESS: &str = "palisade-open-ingress";
/// Group every port without egress isolation carries.
pub const OPEN_EGRESS: &str = "palisade-open-egress";

/// A port match of one rule: every protocol, or one protocol and an optional range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum PortMatch {
    All,
    Proto(Protocol, Option<(u16, u16)>),
}

/// The remote side of one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Remote {
    Any,
    Prefix(IpNet),
    Group(String, BTreeSet<Ethertype>),
}

/// Translates the engine's NetworkPolicies into security groups and port bindings.
/// Returns warnings (e.g. admin policies ignored) with the translation.
pub fn translate(
    engine: &Engine,
    options: &TranslateOptions,
) -> Result<(Translation, Vec<String>), NeutronError> {
    let cluster = engine.cluster();
    let mut warnings = Vec::new();
    if !cluster.admin_policies.is_empty() {
        let names: Vec<String> = cluster
            .admin_policies
            .iter()
            .map(|p| p.reference().to_string())
            .collect();
        if !options.ignore_admin_policies {
            return Err(NeutronError::AdminPolicies(names));
        }
        warnings.push(format!(
            "ignoring {} (not expressible as security groups): {}",
            names.len(),
            names.join(", ")
        ));
    }
    if engine.options().semantics == Semantics::Legacy {
        return Err(NeutronError::LegacySemantics);
    }
    let mut t = Translator {
        engine,
        options: *options,
        groups: BTreeMap::new(),
        bindings: BTreeMap::new(),
    };
    for (i, np) in cluster.network_policies.iter().enumerate() {
        t.policy(i, np);
    }
    t.open_and_node_groups();
    let security_groups = t.groups.into_values().map(dedupe).collect();
    let ports = t
        .bindings
        .into_iter()
        .map(|(pod, security_groups)| {
            let p = &cluster.pods[pod];
            PortBinding {
                pod: p.key(),
                fixed_ips: p.ips.iter().map(IpAddr::to_string).collect(),
                security_groups,
            }
        })
        .collect();
    Ok((
        Translation {
            security_groups,
            ports,
        },
        warnings,
    ))
}

fn dedupe(mut g: SecurityGroup) -> SecurityGroup {
    // Keep the order rules were written in (policy order, then address order).
    let mut seen = BTreeSet::new();
    g.security_group_rules.retain(|r| seen.insert(r.key()));
    g
}

struct Translator<'e> {
    engine: &'e Engine,
    options: TranslateOptions,
    groups: BTreeMap<String, SecurityGroup>,
    bindings: BTreeMap<PodId, BTreeSet<String>>,
}

impl<'e> Translator<'e> {
    fn pods(&self) -> &'e [Pod] {
        &self.engine.cluster().pods
    }

    /// Pods that are Neutron ports: not host-network, with an address.
    fn is_port(&self, i: PodId) -> bool {
        let p = &self.pods()[i];
        !p.host_network && !p.ips.is_empty()
    }

    fn ns_labels(&self, ns: &str) -> Option<&'e palisade_model::Labels> {
        self.engine
            .cluster()
            .namespaces
            .iter()
            .find(|n| n.name == ns)
            .map(|n| &n.labels)
    }

    /// Port pods a NetworkPolicy peer selects.
    fn peer_pods(
        &self,
        np: &NetworkPolicy,
        namespaces: &Option<palisade_model::Selector>,
        pods: &palisade_model::Selector,
    ) -> Vec<PodId> {
        (0..self.pods().len())
            .filter(|&i| self.is_port(i))
            .filter(|&i| {
                let p = &self.pods()[i];
                let ns_ok = match namespaces {
                    None => p.namespace == np.namespace,
                    Some(sel) => self.ns_labels(&p.namespace).is_some_and(|l| sel.matches(l)),
                };
                ns_ok && pods.matches(&p.labels)
            })
            .collect()
    }

    /// The number of the container port `name` with `protocol` on `pod`, if it has one.
    fn resolve(&self, pod: PodId, name: &str, protocol: Protocol) -> Option<u16> {
        self.pods()[pod]
            .ports
            .iter()
            .find(|c| c.name.as_deref() == Some(name) && c.protocol == protocol)
            .map(|c| c.port.get())
    }

    fn policy(&mut self, index: usize, np: &'e NetworkPolicy) {
        let cluster = self.engine.cluster();
        let subjects: Vec<PodId> = (0..cluster.pods.len())
            .filter(|&i| self.is_port(i))
            .filter(|&i| {
                cluster.pods[i].namespace == np.namespace
                    && np.pod_selector.matches(&cluster.pods[i].labels)
            })
            .collect();
        // Ingress named ports resolve against each selected pod: pods that resolve them
        // differently need different groups.
        let named: BTreeSet<(String, Protocol)> = if np.policy_types.ingress {
            np.ingress
                .iter()
                .flat_map(|r| r.ports.iter().flatten())
                .filter_map(|p| match &p.port {
                    PortSpec::Named(n) => Some((n.clone(), p.protocol)),
                    _ => None,
                })
                .collect()
        } else {
            BTreeSet::new()
        };
        let mut classes: BTreeMap<Vec<Option<u16>>, Vec<PodId>> = BTreeMap::new();
        for &s in &subjects {
            let key = named.iter().map(|(n, p)| self.resolve(s, n, *p)).collect();
            classes.entry(key).or_default().push(s);
        }
        if classes.is_empty() {
            classes.insert(vec![None; named.len()], Vec::new());
        }
        let base = format!("np-{}-{}", np.namespace, np.name);
        let tag = format!(
            "np-{:016x}",
            palisade_model::digest::fnv64(&format!("{}/{}", np.namespace, np.name))
        );
        let many = classes.len() > 1;
        for (n, (resolution, members)) in classes.into_iter().enumerate() {
            let name = if many {
                format!("{base}-c{n}")
            } else {
                base.clone()
            };
            let lookup: HashMap<(String, Protocol), Option<u16>> =
                named.iter().cloned().zip(resolution).collect();
            let mut rules = Vec::new();
            if np.policy_types.ingress {
                for (r, rule) in np.ingress.iter().enumerate() {
                    let desc = format!(
                        "NetworkPolicy {}/{} ingress rule {r}",
                        np.namespace, np.name
                    );
                    self.ingress_rule(np, &name, r, rule, &lookup, &desc, &mut rules);
                }
            }
            if np.policy_types.egress {
                for (r, rule) in np.egress.iter().enumerate() {
                    let desc =
                        format!("NetworkPolicy {}/{} egress rule {r}", np.namespace, np.name);
                    self.egress_rule(np, &name, r, rule, &desc, &mut rules);
                }
            }
            let types: Vec<&str> = [
                ("Ingress", np.policy_types.ingress),
                ("Egress", np.policy_types.egress),
            ]
            .iter()
            .filter(|(_, on)| *on)
            .map(|(t, _)| *t)
            .collect();
            self.groups.insert(
                name.clone(),
                SecurityGroup {
                    name: name.clone(),
                    tags: vec!["palisade".into(), tag.clone()],
                    description: format!(
                        "NetworkPolicy {}/{} (#{index}; isolates {}): allows what its {} rules allow",
                        np.namespace,
                        np.name,
                        types.join("+"),
                        types.join("/").to_lowercase()
                    ),
                    security_group_rules: rules,
                },
            );
            for m in members {
                self.bindings.entry(m).or_default().insert(name.clone());
            }
        }
    }

    /// The port matches of a rule; `named` gives each named port's number (if any).
    fn port_matches(
        &self,
        rule: &NetworkPolicyRule,
        named: impl Fn(&str, Protocol) -> Option<u16>,
    ) -> Vec<PortMatch> {
        match &rule.ports {
            // "an empty ports list is the same as an absent one"
            None => vec![PortMatch::All],
            Some(v) if v.is_empty() => vec![PortMatch::All],
            Some(v) => v
                .iter()
                .filter_map(|p: &NetworkPolicyPort| match &p.port {
                    PortSpec::Any => Some(PortMatch::Proto(p.protocol, None)),
                    PortSpec::Range(r) => Some(PortMatch::Proto(
                        p.protocol,
                        Some((r.start.get(), r.end.get())),
                    )),
                    PortSpec::Named(n) => {
                        named(n, p.protocol).map(|x| PortMatch::Proto(p.protocol, Some((x, x))))
                    }
                })
                .collect(),
        }
    }

    /// Remotes for the peers of a rule (`None` peers = any remote).
    fn remotes(
        &mut self,
        np: &NetworkPolicy,
        group: &str,
        dir: &str,
        r: usize,
        peers: &Option<Vec<NetworkPolicyPeer>>,
    ) -> Vec<(Remote, Option<PodId>)> {
        let Some(peers) = peers.as_ref().filter(|p| !p.is_empty()) else {
            return vec![(Remote::Any, None)];
        };
        let mut out = Vec::new();
        for (i, peer) in peers.iter().enumerate() {
            match peer {
                NetworkPolicyPeer::IpBlock(b) => {
                    out.extend(
                        subtract(b.cidr, &b.except)
                            .into_iter()
                            .map(|n| (Remote::Prefix(n), None)),
                    );
                }
                NetworkPolicyPeer::Pods { namespaces, pods } => {
                    let selected = self.peer_pods(np, namespaces, pods);
                    match self.options.peer_mode {
                        PeerMode::Prefixes => {
                            for pod in selected {
                                for ip in &self.pods()[pod].ips {
                                    out.push((Remote::Prefix(IpNet::from(*ip)), Some(pod)));
                                }
                            }
                        }
                        PeerMode::RemoteGroups if !selected.is_empty() => {
                            let name = format!("{group}-{dir}{r}-peer{i}");
                            let families: BTreeSet<Ethertype> = selected
                                .iter()
                                .flat_map(|&p| self.pods()[p].ips.iter().map(Ethertype::of))
                                .collect();
                            self.groups.insert(name.clone(), SecurityGroup {
                                name: name.clone(),
                                tags: vec!["palisade".into(), "peer".into()],
                                description: format!("members: the pods {dir} rule {r} peer {i} of NetworkPolicy {}/{} selects", np.namespace, np.name),
                                security_group_rules: Vec::new(),
                            });
                            for &pod in &selected {
                                self.bindings.entry(pod).or_default().insert(name.clone());
                            }
                            out.push((Remote::Group(name, families), None));
                            // Per-pod prefixes too, for named ports that need each pod's number.
                            for pod in selected {
                                out.push((Remote::Any, Some(pod)));
                            }
                        }
                        // A peer that selects nothing yet produces no rule.
                        PeerMode::RemoteGroups => {}
                    }
                }
            }
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn ingress_rule(
        &mut self,
        np: &NetworkPolicy,
        group: &str,
        r: usize,
        rule: &NetworkPolicyRule,
        named: &HashMap<(String, Protocol), Option<u16>>,
        desc: &str,
        out: &mut Vec<SgRule>,
    ) {
        let ports = self.port_matches(rule, |n, p| {
            named.get(&(n.to_string(), p)).copied().flatten()
        });
        let remotes = self.remotes(np, group, "in", r, &rule.peers);
        for (remote, pod_only) in &remotes {
            if pod_only.is_some() && *remote == Remote::Any {
                continue; // per-pod entries exist only for egress named ports
            }
            for pm in &ports {
                push(out, RuleDirection::Ingress, remote, *pm, desc);
            }
        }
    }

    fn egress_rule(
        &mut self,
        np: &NetworkPolicy,
        group: &str,
        r: usize,
        rule: &NetworkPolicyRule,
        desc: &str,
        out: &mut Vec<SgRule>,
    ) {
        let has_named = rule
            .ports
            .iter()
            .flatten()
            .any(|p| matches!(p.port, PortSpec::Named(_)));
        let unnamed = NetworkPolicyRule {
            peers: rule.peers.clone(),
            ports: rule.ports.clone().map(|v| {
                v.into_iter()
                    .filter(|p| !matches!(p.port, PortSpec::Named(_)))
                    .collect()
            }),
        };
        let remotes = self.remotes(np, group, "eg", r, &rule.peers);
        // Numeric and protocol-wide ports: the same for every destination.
        if !(has_named && unnamed.ports.as_ref().is_some_and(Vec::is_empty)) {
            let ports = self.port_matches(&unnamed, |_, _| None);
            for (remote, pod_only) in &remotes {
                if pod_only.is_some() && *remote == Remote::Any {
                    continue;
                }
                for pm in &ports {
                    push(out, RuleDirection::Egress, remote, *pm, desc);
                }
            }
        }
        if !has_named {
            return;
        }
        // Named ports resolve against each destination pod: per-pod prefixes. The
        // destinations are the pods the peers cover: every pod (no peers), the selected pods,
        // and the pods whose address an ipBlock contains.
        let named: Vec<&NetworkPolicyPort> = rule
            .ports
            .iter()
            .flatten()
            .filter(|p| matches!(p.port, PortSpec::Named(_)))
            .collect();
        let destinations: Vec<PodId> = (0..self.pods().len())
            .filter(|&i| self.is_port(i))
            .filter(|&i| {
                remotes.iter().any(|(r, marker)| match r {
                    Remote::Any => marker.is_none_or(|m| m == i),
                    Remote::Prefix(n) => {
                        marker.is_none_or(|m| m == i)
                            && self.pods()[i].ips.iter().any(|ip| n.contains(ip))
                    }
                    Remote::Group(..) => false, // its members come as per-pod markers
                })
            })
            .collect();
        for pod in destinations {
            for p in &named {
                let PortSpec::Named(n) = &p.port else {
                    continue;
                };
                if let Some(x) = self.resolve(pod, n, p.protocol) {
                    for ip in &self.pods()[pod].ips {
                        push(
                            out,
                            RuleDirection::Egress,
                            &Remote::Prefix(IpNet::from(*ip)),
                            PortMatch::Proto(p.protocol, Some((x, x))),
                            desc,
                        );
                    }
                }
            }
        }
    }

    /// The open groups for directions a pod is not isolated in, and the node-local groups.
    fn open_and_node_groups(&mut self) {
        let open = |name: &str, dir: RuleDirection, what: &str| SecurityGroup {
            name: name.into(),
            tags: vec!["palisade".into(), "open".into()],
            description: format!(
                "allows all {what} traffic: for pods no NetworkPolicy isolates for {what}"
            ),
            security_group_rules: [Ethertype::IPv4, Ethertype::IPv6]
                .into_iter()
                .map(|ethertype| SgRule {
                    direction: dir,
                    ethertype,
                    protocol: None,
                    port_range_min: None,
                    port_range_max: None,
                    remote_ip_prefix: None,
                    remote_group_id: None,
                    description: format!("not isolated for {what}"),
                })
                .collect(),
        };
        let cluster = self.engine.cluster();
        let mut used_open = (false, false);
        let ports: Vec<PodId> = (0..cluster.pods.len())
            .filter(|&i| self.is_port(i))
            .collect();
        for pod in ports {
            let b = self.bindings.entry(pod).or_default();
            if !self.engine.isolated(pod, Direction::Ingress) {
                b.insert(OPEN_INGRESS.into());
                used_open.0 = true;
            }
            if !self.engine.isolated(pod, Direction::Egress) {
                b.insert(OPEN_EGRESS.into());
                used_open.1 = true;
            }
            // "Traffic from a node's own host IP to a pod on that node is allowed."
            if self.engine.options().allow_node_local
                && let Some(node) = cluster.pods[pod]
                    .node_name
                    .as_ref()
                    .and_then(|n| cluster.nodes.iter().find(|x| &x.name == n))
                && !node.addresses.is_empty()
            {
                let name = format!("palisade-node-{}", node.name);
                b.insert(name.clone());
                self.groups
                    .entry(name.clone())
                    .or_insert_with(|| SecurityGroup {
                        name,
                        tags: vec!["palisade".into(), "node-local".into()],
                        description: format!(
                            "traffic from node {} to its own pods (kubelet probes)",
                            node.name
                        ),
                        security_group_rules: node
                            .addresses
                            .iter()
                            .map(|ip| SgRule {
                                direction: RuleDirection::Ingress,
                                ethertype: Ethertype::of(ip),
                                protocol: None,
                                port_range_min: None,
                                port_range_max: None,
                                remote_ip_prefix: Some(IpNet::from(*ip).to_string()),
                                remote_group_id: None,
                                description: format!("node-local: from node {}", node.name),
                            })
                            .collect(),
                    });
            }
        }
        if used_open.0 {
            self.groups.insert(
                OPEN_INGRESS.into(),
                open(OPEN_INGRESS, RuleDirection::Ingress, "ingress"),
            );
        }
        if used_open.1 {
            self.groups.insert(
                OPEN_EGRESS.into(),
                open(OPEN_EGRESS, RuleDirection::Egress, "egress"),
            );
        }
    }
}

/// Adds the rule(s) for one remote and one port match (one per address family for
/// remotes that have no address of their own).
fn push(
    out: &mut Vec<SgRule>,
    direction: RuleDirection,
    remote: &Remote,
    pm: PortMatch,
    desc: &str,
) {
    let (protocol, range) = match pm {
        PortMatch::All => (None, None),
        PortMatch::Proto(p, r) => (Some(p.as_str().to_lowercase()), r),
    };
    let families: Vec<Ethertype> = match remote {
        Remote::Prefix(n) => vec![Ethertype::of(&n.addr())],
        Remote::Group(_, f) => f.iter().copied().collect(),
        Remote::Any => vec![Ethertype::IPv4, Ethertype::IPv6],
    };
    for ethertype in families {
        out.push(SgRule {
            direction,
            ethertype,
            protocol: protocol.clone(),
            port_range_min: range.map(|r| r.0),
            port_range_max: range.map(|r| r.1),
            remote_ip_prefix: match remote {
                Remote::Prefix(n) => Some(n.to_string()),
                _ => None,
            },
            remote_group_id: match remote {
                Remote::Group(g, _) => Some(g.clone()),
                _ => None,
            },
            description: desc.to_string(),
        });
    }
}
