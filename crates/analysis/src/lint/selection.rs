//! Checks on what selectors, named ports and CIDRs resolve to: subjects and peers that
//! select nothing, named ports no container declares, CIDRs that contain pod addresses.

use std::collections::BTreeMap;

use ipnet::IpNet;
use palisade_engine::{BitSet, NsScope, Semantics};
use palisade_model::{
    AdminPeer, AdminPort, Direction, NamespaceMatch, NetworkPolicyPeer, PortSpec, Protocol,
    Selector, Subject,
};

use super::{Code, Finding, Severity, peers_key, rules_path, some};
use crate::Analysis;

const DIRECTIONS: [Direction; 2] = [Direction::Ingress, Direction::Egress];

impl Analysis<'_> {
    pub(crate) fn lint_selection(&self, out: &mut Vec<Finding>) {
        self.lint_np_selection(out);
        self.lint_admin_selection(out);
    }

    /// Names of the namespaces `sel` selects.
    fn namespaces_selected(&self, sel: &Selector) -> Vec<String> {
        self.engine
            .cluster()
            .namespaces
            .iter()
            .filter(|n| sel.matches(&n.labels))
            .map(|n| n.name.clone())
            .collect()
    }

    /// Why a pod selection in the namespaces `sel` selects is empty, naming the selector
    /// at fault (`None` when it is not empty).
    fn why_empty(&self, namespace_field: &str, ns: &Selector, pods: &Selector) -> Option<String> {
        let names = self.namespaces_selected(ns);
        if names.is_empty() {
            return Some(format!(
                "{namespace_field} {ns} matches no namespace (no namespace carries these labels)"
            ));
        }
        self.engine.select_pods(NsScope::Selected(ns), pods)
            .is_empty()
            .then(|| {
                format!(
                    "podSelector {pods} matches no pod in the namespaces {namespace_field} selects ({})",
                    some(&names, 3)
                )
            })
    }

    /// The fix of a peer whose selectors select nothing, naming the labels namespaces carry.
    fn selector_fix(&self) -> String {
        let mut count: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for ns in &self.engine.cluster().namespaces {
            for (k, v) in &ns.labels {
                if k != palisade_model::NAMESPACE_NAME_LABEL {
                    *count.entry((k.as_str(), v.as_str())).or_default() += 1;
                }
            }
        }
        let mut by: Vec<((&str, &str), usize)> = count.into_iter().collect();
        by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let shown: Vec<String> = by.iter().map(|((k, v), _)| format!("{k}={v}")).collect();
        let names: Vec<String> = self
            .engine
            .cluster()
            .namespaces
            .iter()
            .map(|n| n.name.clone())
            .collect();
        let mut fix = format!(
            "correct the selector's labels: namespaces carry kubernetes.io/metadata.name=<name> ({})",
            some(&names, 4)
        );
        if !shown.is_empty() {
            fix.push_str(&format!(" and {}", some(&shown, 6)));
        }
        fix
    }

    /// `the pods of namespace x carry app=web (3 pods), tier=db (1 pod)`: the labels a
    /// selector could use there, most common first (at most six; the hashes controllers
    /// add are left out).
    fn labels_there(&self, namespace: &str) -> String {
        let mut count: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        let mut pods = 0;
        for p in self
            .engine
            .cluster()
            .pods
            .iter()
            .filter(|p| p.namespace == namespace)
        {
            pods += 1;
            for (k, v) in &p.labels {
                if !matches!(k.as_str(), "pod-template-hash" | "controller-revision-hash") {
                    *count.entry((k.as_str(), v.as_str())).or_default() += 1;
                }
            }
        }
        if pods == 0 {
            return format!("namespace {namespace} has no pods");
        }
        if count.is_empty() {
            return format!("the pods of namespace {namespace} carry no labels");
        }
        let mut by: Vec<((&str, &str), usize)> = count.into_iter().collect();
        by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let shown: Vec<String> = by
            .iter()
            .map(|((k, v), n)| format!("{k}={v} ({n} pod{})", if *n == 1 { "" } else { "s" }))
            .collect();
        format!(
            "the pods of namespace {namespace} carry {}",
            some(&shown, 6)
        )
    }

    fn lint_np_selection(&self, out: &mut Vec<Finding>) {
        for (k, np) in self.engine.cluster().network_policies.iter().enumerate() {
            if self.engine.network_policies()[k].subject.is_empty() {
                let ns_has_pods = self
                    .engine
                    .namespace_id(&np.namespace)
                    .and_then(|i| self.engine.namespace_pods(i))
                    .is_some_and(|s| !s.is_empty());
                let why = if ns_has_pods {
                    format!(
                        "podSelector {} selects no pod of namespace {}",
                        np.pod_selector, np.namespace
                    )
                } else {
                    format!("namespace {} has no pods", np.namespace)
                };
                out.push(
                    Finding::network(Code::EmptySubject, np, "spec.podSelector".into()).says(
                        format!("{why}: the policy applies to nothing"),
                        format!(
                            "correct the podSelector's labels ({}), or delete the policy",
                            self.labels_there(&np.namespace)
                        ),
                    ),
                );
            }
            for dir in DIRECTIONS {
                // "policyTypes": a direction it does not list is not isolated, and its rules
                // are not consulted (ingress in the legacy model counts every selecting policy).
                let legacy_ingress = self.engine.options().semantics == Semantics::Legacy
                    && dir == Direction::Ingress;
                if !np.rules(dir).is_empty() && !np.policy_types.has(dir) && !legacy_ingress {
                    out.push(
                        Finding::network(Code::IgnoredRules, np, "spec.policyTypes".into()).says(
                            format!(
                                "the policy has {} {} rule(s) but policyTypes does not list {}: they are ignored",
                                np.rules(dir).len(),
                                dir.as_str().to_lowercase(),
                                dir.as_str()
                            ),
                            format!(
                                "add {} to policyTypes (this isolates the selected pods for it), or delete the rules",
                                dir.as_str()
                            ),
                        ),
                    );
                }
                for (i, rule) in np.rules(dir).iter().enumerate() {
                    let path = format!("{}[{i}]", rules_path(dir));
                    for (j, peer) in rule.peers.iter().flatten().enumerate() {
                        let at = format!("{path}.{}[{j}]", peers_key(dir));
                        self.lint_np_peer(np, dir, &at, peer, out);
                    }
                    for (j, port) in rule.ports.iter().flatten().enumerate() {
                        let PortSpec::Named(name) = &port.port else {
                            continue;
                        };
                        let against = match dir {
                            // "In an ingress rule they resolve against the destination (the selected) pod's container ports"
                            Direction::Ingress => self.engine.network_policies()[k].subject.clone(),
                            // "in an egress rule against the destination peer pod"
                            Direction::Egress => self.np_peer_pods(np, rule),
                        };
                        if !self.declares(&against, name, Some(port.protocol)) {
                            out.push(self.unresolved(
                                Finding::network(
                                    Code::UnresolvedNamedPort,
                                    np,
                                    format!("{path}.ports[{j}].port"),
                                ),
                                name,
                                Some(port.protocol),
                                dir,
                            ));
                        }
                    }
                }
            }
        }
    }

    fn lint_np_peer(
        &self,
        np: &palisade_model::NetworkPolicy,
        dir: Direction,
        at: &str,
        peer: &NetworkPolicyPeer,
        out: &mut Vec<Finding>,
    ) {
        match peer {
            NetworkPolicyPeer::Pods {
                namespaces: Some(ns),
                pods,
            } => {
                if let Some(why) = self.why_empty("namespaceSelector", ns, pods) {
                    let field = if self.namespaces_selected(ns).is_empty() {
                        "namespaceSelector"
                    } else {
                        "podSelector"
                    };
                    out.push(
                        Finding::network(Code::EmptyPeer, np, format!("{at}.{field}")).says(
                            format!("{why}: this peer allows nothing"),
                            self.selector_fix(),
                        ),
                    );
                }
            }
            NetworkPolicyPeer::Pods {
                namespaces: None,
                pods,
            } => {
                if self
                    .engine
                    .select_pods(NsScope::Named(&np.namespace), pods)
                    .is_empty()
                {
                    out.push(
                        Finding::network(Code::EmptyPeer, np, format!("{at}.podSelector")).says(
                            format!(
                                "podSelector {pods} matches no pod of namespace {}: this peer allows nothing",
                                np.namespace
                            ),
                            format!(
                                "correct the selector's labels ({}); to select pods of other namespaces add a namespaceSelector",
                                self.labels_there(&np.namespace)
                            ),
                        ),
                    );
                }
            }
            NetworkPolicyPeer::IpBlock(b) => {
                let pods = self.pods_in(|ip| b.contains(ip));
                if !pods.is_empty() {
                    out.push(self.contains_pods(
                        Finding::network(Code::CidrContainsPods, np, format!("{at}.ipBlock.cidr")),
                        &format!("ipBlock {}", b.cidr),
                        b.cidr,
                        &pods,
                        dir,
                        "add the pod network to except, and select pods with podSelector/namespaceSelector",
                    ));
                }
            }
        }
    }

    /// The pods an egress NetworkPolicy rule's peers cover (every pod with no peers).
    fn np_peer_pods(
        &self,
        np: &palisade_model::NetworkPolicy,
        rule: &palisade_model::NetworkPolicyRule,
    ) -> BitSet {
        let Some(peers) = rule.peers.as_ref().filter(|p| !p.is_empty()) else {
            return self.engine.subjects().clone();
        };
        let mut set = BitSet::default();
        for peer in peers {
            match peer {
                NetworkPolicyPeer::Pods { namespaces, pods } => {
                    let scope = match namespaces {
                        Some(ns) => NsScope::Selected(ns),
                        None => NsScope::Named(&np.namespace),
                    };
                    set.union(&self.engine.select_pods(scope, pods));
                }
                NetworkPolicyPeer::IpBlock(b) => set.union(&self.pod_set_in(|ip| b.contains(ip))),
            }
        }
        set
    }

    /// Pods (not host-network) with an address for which `inside` holds.
    fn pod_set_in(&self, inside: impl Fn(&std::net::IpAddr) -> bool) -> BitSet {
        let mut set = BitSet::default();
        for p in self.engine.subjects().iter() {
            if self.engine.cluster().pods[p].ips.iter().any(&inside) {
                set.insert(p);
            }
        }
        set
    }

    /// `ns/pod address` of every pod with an address for which `inside` holds.
    fn pods_in(&self, inside: impl Fn(&std::net::IpAddr) -> bool) -> Vec<String> {
        self.pod_set_in(&inside)
            .iter()
            .filter_map(|p| {
                let pod = &self.engine.cluster().pods[p];
                let ip = pod.ips.iter().find(|ip| inside(ip))?;
                Some(format!("{} {ip}", pod.key()))
            })
            .collect()
    }

    /// Whether a pod of `pods` declares the container port `name` (of `protocol`, if given).
    fn declares(&self, pods: &BitSet, name: &str, protocol: Option<Protocol>) -> bool {
        pods.iter().any(|p| {
            self.engine.cluster().pods[p].ports.iter().any(|cp| {
                cp.name.as_deref() == Some(name) && protocol.is_none_or(|x| x == cp.protocol)
            })
        })
    }

    fn unresolved(
        &self,
        f: Finding,
        name: &str,
        protocol: Option<Protocol>,
        dir: Direction,
    ) -> Finding {
        let proto = protocol.map_or(String::new(), |p| format!(" ({p})"));
        let whose = match dir {
            Direction::Ingress => "the pods the policy selects",
            Direction::Egress => "the destination pods the rule's peers cover",
        };
        f.says(
            format!("named port {name:?}{proto} is declared by none of {whose}: this port entry matches nothing"),
            "name the port as the containers declare it (spec.containers[].ports[].name), or use the number",
        )
    }

    fn contains_pods(
        &self,
        f: Finding,
        what: &str,
        cidr: IpNet,
        pods: &[String],
        dir: Direction,
        fix: &str,
    ) -> Finding {
        let side = match dir {
            Direction::Ingress => "from",
            Direction::Egress => "to",
        };
        let f = f.says(
            format!(
                "{what} contains the addresses of {} pod(s) ({}): connections {side} those pods match it too, whatever their labels",
                pods.len(),
                some(pods, 3)
            ),
            fix,
        );
        // A /0 is "everything", pods included, more often on purpose.
        if cidr.prefix_len() == 0 {
            f.severity(Severity::Info)
        } else {
            f
        }
    }

    fn lint_admin_selection(&self, out: &mut Vec<Finding>) {
        for (k, p) in self.engine.cluster().admin_policies.iter().enumerate() {
            if self.engine.admin_policies()[k].subject.is_empty() {
                let (field, why) = match &p.subject {
                    Subject::Namespaces(ns) => (
                        "spec.subject.namespaces",
                        if self.namespaces_selected(ns).is_empty() {
                            format!("namespaces {ns} matches no namespace")
                        } else {
                            format!("the namespaces {ns} selects have no pods")
                        },
                    ),
                    Subject::Pods { namespaces, pods } => (
                        "spec.subject.pods",
                        self.why_empty("namespaceSelector", namespaces, pods)
                            .unwrap_or_default(),
                    ),
                };
                out.push(Finding::admin(Code::EmptySubject, p, field.into()).says(
                    format!("{why}: the policy applies to nothing"),
                    "correct the subject's selectors, or delete the policy",
                ));
            }
            for dir in DIRECTIONS {
                for (i, rule) in p.rules(dir).iter().enumerate() {
                    let path = format!("{}[{i}]", rules_path(dir));
                    for (j, peer) in rule.peers.iter().enumerate() {
                        let at = format!("{path}.{}[{j}]", peers_key(dir));
                        self.lint_admin_peer(p, dir, &at, peer, out);
                    }
                    let ports_key = if p.kind == palisade_model::PolicyKind::ClusterNetworkPolicy {
                        "protocols"
                    } else {
                        "ports"
                    };
                    for port in rule.ports.iter().flatten() {
                        let AdminPort::Named(name) = port else {
                            continue;
                        };
                        let against = match dir {
                            Direction::Ingress => self.engine.admin_policies()[k].subject.clone(),
                            Direction::Egress => self.admin_peer_pods(&rule.peers),
                        };
                        if !self.declares(&against, name, None) {
                            out.push(self.unresolved(
                                Finding::admin(
                                    Code::UnresolvedNamedPort,
                                    p,
                                    format!("{path}.{ports_key}"),
                                ),
                                name,
                                None,
                                dir,
                            ));
                        }
                    }
                }
            }
        }
    }

    /// The pods admin peers can cover (relations to the subject are taken as any pod).
    fn admin_peer_pods(&self, peers: &[AdminPeer]) -> BitSet {
        let mut set = BitSet::default();
        for peer in peers {
            match peer {
                AdminPeer::Namespaces(NamespaceMatch::Selector(ns)) => set.union(
                    &self
                        .engine
                        .select_pods(NsScope::Selected(ns), &Selector::everything()),
                ),
                AdminPeer::Pods {
                    namespaces: NamespaceMatch::Selector(ns),
                    pods,
                } => set.union(&self.engine.select_pods(NsScope::Selected(ns), pods)),
                AdminPeer::Namespaces(_) | AdminPeer::Pods { .. } => {
                    set.union(self.engine.subjects())
                }
                AdminPeer::Networks(nets) => {
                    set.union(&self.pod_set_in(|ip| nets.iter().any(|n| n.contains(ip))))
                }
                AdminPeer::DomainNames(patterns) => {
                    let nets = self.engine.domain_nets(patterns).unwrap_or_default();
                    set.union(&self.pod_set_in(|ip| nets.iter().any(|n| n.contains(ip))))
                }
                AdminPeer::Nodes(_) | AdminPeer::Unsupported(_) => {}
            }
        }
        set
    }

    fn lint_admin_peer(
        &self,
        p: &palisade_model::AdminPolicy,
        dir: Direction,
        at: &str,
        peer: &AdminPeer,
        out: &mut Vec<Finding>,
    ) {
        let empty = |field: String, why: String| {
            Finding::admin(Code::EmptyPeer, p, field).says(
                format!("{why}: this peer matches nothing"),
                self.selector_fix(),
            )
        };
        match peer {
            AdminPeer::Namespaces(NamespaceMatch::Selector(ns))
                if self.namespaces_selected(ns).is_empty() =>
            {
                out.push(empty(
                    format!("{at}.namespaces"),
                    format!("namespaces {ns} matches no namespace"),
                ));
            }
            AdminPeer::Pods {
                namespaces: NamespaceMatch::Selector(ns),
                pods,
            } => {
                if let Some(why) = self.why_empty("namespaceSelector", ns, pods) {
                    out.push(empty(format!("{at}.pods"), why));
                }
            }
            AdminPeer::Nodes(sel)
                if !self.engine.cluster().nodes.is_empty()
                    && !self
                        .engine
                        .cluster()
                        .nodes
                        .iter()
                        .any(|n| sel.matches(&n.labels)) =>
            {
                out.push(empty(
                    format!("{at}.nodes"),
                    format!("nodeSelector {sel} matches no node"),
                ));
            }
            AdminPeer::Networks(nets) => {
                for (n, net) in nets.iter().enumerate() {
                    let pods = self.pods_in(|ip| net.contains(ip));
                    if !pods.is_empty() {
                        out.push(self.contains_pods(
                            Finding::admin(Code::CidrContainsPods, p, format!("{at}.networks[{n}]")),
                            &format!("networks CIDR {net}"),
                            *net,
                            &pods,
                            dir,
                            "if you meant traffic leaving the cluster, list narrower CIDRs that leave out the pod network",
                        ));
                    }
                }
            }
            _ => {}
        }
    }
}
