//! NetworkPolicies → security groups and port bindings, exactly per docs/semantics.md.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use ipnet::IpNet;
use palisade_engine::{
    BitSet, Engine, NamedPorts, PodId, ResolvedPeer, ResolvedPolicy, ResolvedRule, Semantics,
};
use palisade_model::{
    Direction, NetworkPolicy, NetworkPolicyPort, Pod, Port, PortRange, PortSpec, Protocol,
};

use crate::cidr::subtract;
use crate::groups::{
    AddressGroup, Ethertype, PortBinding, Remote, RuleDirection, SecurityGroup, SgRule, Traffic,
    Translation,
};
use crate::naming::{Part, node_group, policy_digest, policy_group_with};

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
    /// One address group per selector peer holding the selected pods' addresses,
    /// referenced by `remote_address_group_id` (fewer rules, no memberships). Off by
    /// default: Neutron's firewall drivers ignored such rules before a 2024 fix and
    /// admitted more than configured. Egress named ports use prefixes, as above.
    AddressGroups,
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
    /// Two different groups would get the same name (shortened names whose digests collide);
    /// merging them would give each group's ports the other's rules.
    #[error(
        "security group name {name:?} would be shared by {first} and {second}; rename one of them"
    )]
    GroupNameCollision {
        /// The name.
        name: String,
        /// What claimed it first.
        first: String,
        /// What claimed it second.
        second: String,
    },
}

/// Group every port without ingress isolation carries.
pub const OPEN_INGRESS: &str = "palisade-open-ingress";
/// Group every port without egress isolation carries.
pub const OPEN_EGRESS: &str = "palisade-open-egress";

/// The remote side of one rule, with the address families of a group's members.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Any,
    Prefix(IpNet),
    Group(String, BTreeSet<Ethertype>),
    AddressGroup(String, BTreeSet<Ethertype>),
}

/// Translates the engine's NetworkPolicies into security groups and port bindings.
/// Returns warnings (e.g. admin policies ignored) with the translation.
pub fn translate(
    engine: &Engine,
    options: &TranslateOptions,
) -> Result<(Translation, Vec<String>), NeutronError> {
    translate_with(engine, options, policy_digest)
}

/// [`translate`] with the digest of shortened group names given (tests use colliding ones).
fn translate_with(
    engine: &Engine,
    options: &TranslateOptions,
    digest: fn(&str, &str) -> u64,
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
        named_ports: engine.named_ports(),
        digest,
        groups: BTreeMap::new(),
        address_groups: BTreeMap::new(),
        owners: HashMap::new(),
        bindings: BTreeMap::new(),
    };
    for (i, np) in engine.resolved_network_policies().enumerate() {
        t.policy(i, np)?;
    }
    t.open_and_node_groups()?;
    let security_groups = std::mem::take(&mut t.groups)
        .into_values()
        .map(dedupe)
        .collect();
    let ports = std::mem::take(&mut t.bindings)
        .into_iter()
        .map(|(pod, security_groups)| {
            let p = &cluster.pods[pod];
            PortBinding {
                pod: p.key(),
                fixed_ips: p.ips.clone(),
                security_groups,
            }
        })
        .collect();
    Ok((
        Translation {
            security_groups,
            ports,
            address_groups: t.address_groups.into_values().collect(),
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
    named_ports: NamedPorts,
    digest: fn(&str, &str) -> u64,
    groups: BTreeMap<String, SecurityGroup>,
    address_groups: BTreeMap<String, AddressGroup>,
    /// What each group name stands for (a policy group with its parts, a node, an open
    /// group): a second claimant is a collision.
    owners: HashMap<String, String>,
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

    /// The port pods of a resolved pod set, ascending.
    fn port_pods<'s>(&'s self, set: &'s BitSet) -> impl Iterator<Item = PodId> + 's {
        set.pods().filter(|&i| self.is_port(i))
    }

    /// The name of one of `np`'s groups (`parts` empty: its own).
    fn group_name(&self, np: &NetworkPolicy, parts: &[Part]) -> String {
        let digest = (self.digest)(&np.namespace, &np.name);
        policy_group_with(&np.namespace, &np.name, parts, digest)
    }

    /// Records that `owner` is group `name`'s; a different second owner is a collision.
    fn claim(&mut self, name: &str, owner: String) -> Result<(), NeutronError> {
        match self.owners.entry(name.to_string()) {
            Entry::Vacant(v) => {
                v.insert(owner);
                Ok(())
            }
            Entry::Occupied(o) if *o.get() == owner => Ok(()),
            Entry::Occupied(o) => Err(NeutronError::GroupNameCollision {
                name: name.to_string(),
                first: o.get().clone(),
                second: owner,
            }),
        }
    }

    /// Adds a group under a name [`Translator::claim`]ed for it.
    fn add_group(&mut self, group: SecurityGroup, owner: String) -> Result<(), NeutronError> {
        self.claim(&group.name, owner)?;
        self.groups.insert(group.name.clone(), group);
        Ok(())
    }

    /// The number of the container port `name` with `protocol` on `pod`, if it has one.
    fn resolve(&self, pod: PodId, name: &str, protocol: Protocol) -> Option<Port> {
        self.named_ports.on(pod, name, protocol)
    }

    fn policy(&mut self, index: usize, resolved: ResolvedPolicy<'e>) -> Result<(), NeutronError> {
        let np = resolved.policy;
        let subjects: Vec<PodId> = self.port_pods(resolved.subject).collect();
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
        let mut classes: BTreeMap<Vec<Option<Port>>, Vec<PodId>> = BTreeMap::new();
        for &s in &subjects {
            let key = named.iter().map(|(n, p)| self.resolve(s, n, *p)).collect();
            classes.entry(key).or_default().push(s);
        }
        if classes.is_empty() {
            classes.insert(vec![None; named.len()], Vec::new());
        }
        let tag = format!(
            "np-{:016x}",
            palisade_model::digest::fnv64(&format!("{}/{}", np.namespace, np.name))
        );
        let many = classes.len() > 1;
        for (n, (resolution, members)) in classes.into_iter().enumerate() {
            let class: &[Part] = if many { &[Part::Class(n)] } else { &[] };
            let name = self.group_name(np, class);
            let lookup: HashMap<(String, Protocol), Option<Port>> =
                named.iter().cloned().zip(resolution).collect();
            let mut rules = Vec::new();
            if np.policy_types.ingress {
                for (r, rule) in resolved.rules(Direction::Ingress).enumerate() {
                    let desc = format!(
                        "NetworkPolicy {}/{} ingress rule {r}",
                        np.namespace, np.name
                    );
                    self.ingress_rule(np, class, r, &rule, &lookup, &desc, &mut rules)?;
                }
            }
            if np.policy_types.egress {
                for (r, rule) in resolved.rules(Direction::Egress).enumerate() {
                    let desc =
                        format!("NetworkPolicy {}/{} egress rule {r}", np.namespace, np.name);
                    self.egress_rule(np, class, r, &rule, &desc, &mut rules)?;
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
            let group = SecurityGroup {
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
            };
            self.add_group(group, policy_owner(np, class))?;
            for m in members {
                self.bindings.entry(m).or_default().insert(name.clone());
            }
        }
        Ok(())
    }

    /// Remotes for the peers of a rule (`None` peers = any remote), each with the pod it
    /// stands for when it stands for one.
    fn remotes(
        &mut self,
        np: &NetworkPolicy,
        class: &[Part],
        dir: Direction,
        r: usize,
        peers: Option<&[ResolvedPeer<'_>]>,
    ) -> Result<Vec<(Target, Option<PodId>)>, NeutronError> {
        let Some(peers) = peers else {
            return Ok(vec![(Target::Any, None)]);
        };
        let mut out = Vec::new();
        for (i, peer) in peers.iter().enumerate() {
            match peer {
                ResolvedPeer::IpBlock(b) => {
                    out.extend(
                        subtract(b.cidr, &b.except)
                            .into_iter()
                            .map(|n| (Target::Prefix(n), None)),
                    );
                }
                ResolvedPeer::Pods(set) => {
                    let selected: Vec<PodId> = self.port_pods(set).collect();
                    match self.options.peer_mode {
                        PeerMode::Prefixes => {
                            for pod in selected {
                                for ip in &self.pods()[pod].ips {
                                    out.push((Target::Prefix(IpNet::from(*ip)), Some(pod)));
                                }
                            }
                        }
                        PeerMode::RemoteGroups if !selected.is_empty() => {
                            let parts: Vec<Part> = class
                                .iter()
                                .copied()
                                .chain([Part::Peer {
                                    egress: dir == Direction::Egress,
                                    rule: r,
                                    peer: i,
                                }])
                                .collect();
                            let name = self.group_name(np, &parts);
                            let dir = match dir {
                                Direction::Ingress => "ingress",
                                Direction::Egress => "egress",
                            };
                            let families: BTreeSet<Ethertype> = selected
                                .iter()
                                .flat_map(|&p| self.pods()[p].ips.iter().map(Ethertype::of))
                                .collect();
                            let group = SecurityGroup {
                                name: name.clone(),
                                tags: vec!["palisade".into(), "peer".into()],
                                description: format!(
                                    "members: the pods {dir} rule {r} peer {i} of NetworkPolicy {}/{} selects",
                                    np.namespace, np.name
                                ),
                                security_group_rules: Vec::new(),
                            };
                            self.add_group(group, policy_owner(np, &parts))?;
                            for &pod in &selected {
                                self.bindings.entry(pod).or_default().insert(name.clone());
                            }
                            out.push((Target::Group(name, families), None));
                            // Per-pod entries too, for named ports that need each pod's number.
                            for pod in selected {
                                out.push((Target::Any, Some(pod)));
                            }
                        }
                        PeerMode::AddressGroups if !selected.is_empty() => {
                            let parts: Vec<Part> = class
                                .iter()
                                .copied()
                                .chain([Part::Peer {
                                    egress: dir == Direction::Egress,
                                    rule: r,
                                    peer: i,
                                }])
                                .collect();
                            let name = self.group_name(np, &parts);
                            let mut addresses: Vec<IpNet> = selected
                                .iter()
                                .flat_map(|&p| self.pods()[p].ips.iter().map(|ip| IpNet::from(*ip)))
                                .collect();
                            addresses.sort();
                            addresses.dedup();
                            let families: BTreeSet<Ethertype> =
                                addresses.iter().map(|n| Ethertype::of(&n.addr())).collect();
                            let dir = match dir {
                                Direction::Ingress => "ingress",
                                Direction::Egress => "egress",
                            };
                            self.claim(&name, policy_owner(np, &parts))?;
                            self.address_groups.insert(
                                name.clone(),
                                AddressGroup {
                                    name: name.clone(),
                                    description: format!(
                                        "addresses of the pods {dir} rule {r} peer {i} of NetworkPolicy {}/{} selects",
                                        np.namespace, np.name
                                    ),
                                    addresses,
                                },
                            );
                            out.push((Target::AddressGroup(name, families), None));
                            for pod in selected {
                                out.push((Target::Any, Some(pod)));
                            }
                        }
                        // A peer that selects nothing yet produces no rule.
                        PeerMode::RemoteGroups | PeerMode::AddressGroups => {}
                    }
                }
            }
        }
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)] // one rule in its policy's context: all needed
    fn ingress_rule(
        &mut self,
        np: &NetworkPolicy,
        class: &[Part],
        r: usize,
        rule: &ResolvedRule<'_>,
        named: &HashMap<(String, Protocol), Option<Port>>,
        desc: &str,
        out: &mut Vec<SgRule>,
    ) -> Result<(), NeutronError> {
        let ports = port_matches(rule.ports, |n, p| {
            named.get(&(n.to_string(), p)).copied().flatten()
        });
        let remotes = self.remotes(np, class, Direction::Ingress, r, rule.peers.as_deref())?;
        for (remote, pod_only) in &remotes {
            if pod_only.is_some() && *remote == Target::Any {
                continue; // per-pod entries exist only for egress named ports
            }
            for traffic in &ports {
                push(out, RuleDirection::Ingress, remote, *traffic, desc);
            }
        }
        Ok(())
    }

    fn egress_rule(
        &mut self,
        np: &NetworkPolicy,
        class: &[Part],
        r: usize,
        rule: &ResolvedRule<'_>,
        desc: &str,
        out: &mut Vec<SgRule>,
    ) -> Result<(), NeutronError> {
        let remotes = self.remotes(np, class, Direction::Egress, r, rule.peers.as_deref())?;
        // Numeric and protocol-wide ports: the same for every destination (named ports
        // resolve to nothing here).
        let ports = port_matches(rule.ports, |_, _| None);
        for (remote, pod_only) in &remotes {
            if pod_only.is_some() && *remote == Target::Any {
                continue;
            }
            for traffic in &ports {
                push(out, RuleDirection::Egress, remote, *traffic, desc);
            }
        }
        // Named ports resolve against each destination pod: per-pod prefixes. The
        // destinations are the pods the peers cover (every pod when there are no peers, the
        // selected pods, the pods whose address an ipBlock contains) that declare one of
        // the rule's named ports.
        let named: Vec<(&str, Protocol)> = rule
            .ports
            .into_iter()
            .flatten()
            .filter_map(|p| match &p.port {
                PortSpec::Named(n) => Some((n.as_str(), p.protocol)),
                _ => None,
            })
            .collect();
        if named.is_empty() {
            return Ok(());
        }
        let mut destinations: Vec<PodId> = named
            .iter()
            .flat_map(|&(n, p)| self.named_ports.pods(n, p).iter().map(|&(pod, _)| pod))
            .filter(|&pod| self.is_port(pod) && covers(rule, &self.pods()[pod], pod))
            .collect();
        destinations.sort_unstable();
        destinations.dedup();
        for pod in destinations {
            for &(n, protocol) in &named {
                if let Some(x) = self.resolve(pod, n, protocol) {
                    for ip in &self.pods()[pod].ips {
                        push(
                            out,
                            RuleDirection::Egress,
                            &Target::Prefix(IpNet::from(*ip)),
                            Traffic::Protocol(protocol, Some(PortRange::single(x))),
                            desc,
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// The open groups for directions a pod is not isolated in, and the node-local groups.
    fn open_and_node_groups(&mut self) -> Result<(), NeutronError> {
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
                    traffic: Traffic::Any,
                    remote: Remote::Any,
                    description: format!("not isolated for {what}"),
                })
                .collect(),
        };
        let cluster = self.engine.cluster();
        let mut used_open = (false, false);
        let ports: Vec<PodId> = self.engine.pod_ids().filter(|&i| self.is_port(i)).collect();
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
                    .and_then(|n| self.engine.node_id(n))
                    .map(|n| &cluster.nodes[n])
                && !node.addresses.is_empty()
            {
                let name = node_group(&node.name);
                b.insert(name.clone());
                if !self.groups.contains_key(&name) {
                    let group = SecurityGroup {
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
                                traffic: Traffic::Any,
                                remote: Remote::Prefix(IpNet::from(*ip)),
                                description: format!("node-local: from node {}", node.name),
                            })
                            .collect(),
                    };
                    self.add_group(group, format!("the node-local group of node {}", node.name))?;
                }
            }
        }
        if used_open.0 {
            let group = open(OPEN_INGRESS, RuleDirection::Ingress, "ingress");
            self.add_group(group, "the open ingress group".into())?;
        }
        if used_open.1 {
            let group = open(OPEN_EGRESS, RuleDirection::Egress, "egress");
            self.add_group(group, "the open egress group".into())?;
        }
        Ok(())
    }
}

/// Who owns one of `np`'s groups, for [`NeutronError::GroupNameCollision`].
fn policy_owner(np: &NetworkPolicy, parts: &[Part]) -> String {
    let which = parts.iter().fold(String::new(), |mut s, p| {
        s.push_str(&match p {
            Part::Class(n) => format!(", named-port class {n}"),
            Part::Peer { egress, rule, peer } => format!(
                ", {} rule {rule} peer {peer}",
                if *egress { "egress" } else { "ingress" }
            ),
        });
        s
    });
    format!("NetworkPolicy {}/{}{which}", np.namespace, np.name)
}

/// The port matches of a rule's ports (`None`: every port); `named` gives each named
/// port's number, if it has one.
fn port_matches(
    ports: Option<&[NetworkPolicyPort]>,
    named: impl Fn(&str, Protocol) -> Option<Port>,
) -> Vec<Traffic> {
    match ports {
        // "an empty ports list is the same as an absent one" (the engine gives `None`)
        None => vec![Traffic::Any],
        Some(v) => v
            .iter()
            .filter_map(|p| match &p.port {
                PortSpec::Any => Some(Traffic::Protocol(p.protocol, None)),
                PortSpec::Range(r) => Some(Traffic::Protocol(p.protocol, Some(*r))),
                PortSpec::Named(n) => named(n, p.protocol)
                    .map(|x| Traffic::Protocol(p.protocol, Some(PortRange::single(x)))),
            })
            .collect(),
    }
}

/// Whether a rule's peers cover pod `id` as a destination: no peers, a selector peer that
/// selects it, or an ipBlock that contains one of its addresses.
fn covers(rule: &ResolvedRule<'_>, pod: &Pod, id: PodId) -> bool {
    rule.peers.as_ref().is_none_or(|peers| {
        peers.iter().any(|peer| match peer {
            ResolvedPeer::Pods(set) => set.contains(id),
            ResolvedPeer::IpBlock(b) => pod
                .ips
                .iter()
                .any(|ip| b.cidr.contains(ip) && !b.except.iter().any(|e| e.contains(ip))),
        })
    })
}

/// Adds the rule(s) for one remote and one port match (one per address family for
/// remotes that have no address of their own).
fn push(
    out: &mut Vec<SgRule>,
    direction: RuleDirection,
    remote: &Target,
    traffic: Traffic,
    desc: &str,
) {
    let families: Vec<Ethertype> = match remote {
        Target::Prefix(n) => vec![Ethertype::of(&n.addr())],
        Target::Group(_, f) | Target::AddressGroup(_, f) => f.iter().copied().collect(),
        Target::Any => vec![Ethertype::IPv4, Ethertype::IPv6],
    };
    let remote = match remote {
        Target::Any => Remote::Any,
        Target::Prefix(n) => Remote::Prefix(*n),
        Target::Group(g, _) => Remote::Group(g.clone()),
        Target::AddressGroup(g, _) => Remote::AddressGroup(g.clone()),
    };
    for ethertype in families {
        out.push(SgRule {
            direction,
            ethertype,
            traffic,
            remote: remote.clone(),
            description: desc.to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_engine::Options;

    /// Two policies whose names differ only after the point where shortened names are cut.
    fn engine() -> Engine {
        let long = |last: &str| {
            let labels = ["a".repeat(63), "b".repeat(63), "c".repeat(63)];
            format!("{}.{}{last}", labels.join("."), "d".repeat(60))
        };
        let policy = |name: String| {
            format!(
                "---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: {name}, namespace: default}}\nspec: {{podSelector: {{}}}}\n"
            )
        };
        let yaml = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: default}}\nstatus: {{podIP: 10.0.0.1}}\n{}{}",
            policy(long("1")),
            policy(long("2"))
        );
        let loaded = palisade_model::load_str(&yaml).unwrap();
        Engine::new(loaded.cluster, Options::default())
    }

    #[test]
    fn colliding_digests_are_refused_not_merged() {
        let e = engine();
        let options = TranslateOptions::default();
        let (t, _) = translate_with(&e, &options, policy_digest).unwrap();
        assert_eq!(
            t.security_groups.len(),
            3,
            "two policy groups and the open egress group"
        );
        let err = translate_with(&e, &options, |_, _| 0).unwrap_err();
        assert!(
            matches!(&err, NeutronError::GroupNameCollision { first, second, .. }
                if first.ends_with("d1") && second.ends_with("d2")),
            "{err}"
        );
    }
}
