//! The engine's indexed state: the cluster's objects, resolved selectors, and per-pod,
//! per-direction lists of the policies that apply, in evaluation order.

use std::collections::HashMap;
use std::net::IpAddr;

use palisade_model::{
    AdminPeer, AdminPolicy, AdminRule, AdminTier, Cluster, Direction, NamespaceMatch,
    NetworkPolicy, NetworkPolicyApi, NetworkPolicyPeer, PolicyRef, Selector, Subject,
};

use crate::bitset::BitSet;
use crate::verdict::PolicyId;

/// Which isolation model NetworkPolicies follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Semantics {
    /// Released Kubernetes (networking.k8s.io/v1): a pod selected by a policy of a
    /// direction is isolated in that direction; the legacy annotation also isolates ingress.
    #[default]
    Standard,
    /// The original v1beta1 proposal: only pods of namespaces annotated DefaultDeny are
    /// isolated (ingress by the annotation, egress by policies); other namespaces are open.
    Legacy,
}

/// Evaluation options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// NetworkPolicy isolation model.
    pub semantics: Semantics,
    /// Allow traffic from a node's host address to the pods on that node.
    pub allow_node_local: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            semantics: Semantics::Standard,
            allow_node_local: true,
        }
    }
}

/// Pod index in the cluster's (sorted) pod list.
pub type PodId = usize;

/// A peer of a NetworkPolicy rule, with its pods resolved.
#[derive(Debug, Clone)]
pub(crate) enum NpPeer {
    Pods(BitSet),
    IpBlock(palisade_model::IpBlock),
}

/// A NetworkPolicy rule's peers or ports: `None` matches everything, `Some(empty)` nothing.
#[derive(Debug, Clone)]
pub(crate) struct NpRule {
    pub peers: Option<Vec<NpPeer>>,
    pub ports: Option<Vec<palisade_model::NetworkPolicyPort>>,
}

#[derive(Debug, Clone)]
pub(crate) struct CompiledNp {
    pub ingress: Vec<NpRule>,
    pub egress: Vec<NpRule>,
}

/// An admin peer with static selectors resolved to pod sets.
#[derive(Debug, Clone)]
pub(crate) enum AdminPeerC {
    /// Pods picked statically (selector namespace match).
    Pods(BitSet),
    /// Pods whose namespace relation to the subject is checked per flow.
    Related {
        namespaces: NamespaceMatch,
        pods: Selector,
    },
    Nodes(Selector),
    Networks(Vec<ipnet::IpNet>),
    Unsupported,
}

#[derive(Debug, Clone)]
pub(crate) struct AdminRuleC {
    pub peers: Vec<AdminPeerC>,
}

#[derive(Debug, Clone)]
pub(crate) struct CompiledAdmin {
    pub ingress: Vec<AdminRuleC>,
    pub egress: Vec<AdminRuleC>,
}

/// Policies applying to one pod in one direction, in evaluation order.
#[derive(Debug, Clone, Default)]
pub(crate) struct PodPolicies {
    pub admin: Vec<u32>,
    pub network: Vec<u32>,
    pub baseline: Vec<u32>,
    /// Isolated by the namespace's legacy DefaultDeny annotation (ingress only).
    pub annotation: bool,
}

/// What an address belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Pod(PodId),
    Node(usize),
}

/// The compiled, indexed cluster: answer [`crate::Engine::evaluate`] from it.
#[derive(Debug, Clone)]
pub struct Engine {
    pub(crate) cluster: Cluster,
    pub(crate) options: Options,
    pub(crate) pod_ns: Vec<usize>,
    pub(crate) pod_node: Vec<Option<usize>>,
    pub(crate) ns_index: HashMap<String, usize>,
    pub(crate) node_index: HashMap<String, usize>,
    pub(crate) pod_index: HashMap<(String, String), PodId>,
    pub(crate) ip_owner: HashMap<IpAddr, Owner>,
    pub(crate) nps: Vec<CompiledNp>,
    pub(crate) admins: Vec<CompiledAdmin>,
    pub(crate) ingress: Vec<PodPolicies>,
    pub(crate) egress: Vec<PodPolicies>,
}

impl Engine {
    /// Compiles a cluster.
    pub fn new(cluster: Cluster, options: Options) -> Engine {
        let ns_index: HashMap<String, usize> = cluster
            .namespaces
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let node_index: HashMap<String, usize> = cluster
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let pod_index = cluster
            .pods
            .iter()
            .enumerate()
            .map(|(i, p)| ((p.namespace.clone(), p.name.clone()), i))
            .collect();
        let pod_ns = cluster
            .pods
            .iter()
            .map(|p| ns_index.get(&p.namespace).copied().unwrap_or(usize::MAX))
            .collect();
        let pod_node = cluster
            .pods
            .iter()
            .map(|p| {
                p.node_name
                    .as_ref()
                    .and_then(|n| node_index.get(n).copied())
            })
            .collect();
        let mut ip_owner = HashMap::new();
        for (i, n) in cluster.nodes.iter().enumerate() {
            for ip in &n.addresses {
                ip_owner.insert(*ip, Owner::Node(i));
            }
        }
        for (i, p) in cluster.pods.iter().enumerate() {
            if !p.host_network {
                for ip in &p.ips {
                    ip_owner.entry(*ip).or_insert(Owner::Pod(i));
                }
            }
        }
        let mut engine = Engine {
            cluster,
            options,
            pod_ns,
            pod_node,
            ns_index,
            node_index,
            pod_index,
            ip_owner,
            nps: Vec::new(),
            admins: Vec::new(),
            ingress: Vec::new(),
            egress: Vec::new(),
        };
        engine.nps = engine
            .cluster
            .network_policies
            .iter()
            .map(|np| engine.compile_np(np))
            .collect();
        engine.admins = engine
            .cluster
            .admin_policies
            .iter()
            .map(|p| engine.compile_admin(p))
            .collect();
        engine.index_pods();
        engine
    }

    /// The options it was built with.
    pub fn options(&self) -> Options {
        self.options
    }

    /// The cluster it was built from.
    pub fn cluster(&self) -> &palisade_model::Cluster {
        &self.cluster
    }

    /// Looks a pod up by namespace and name.
    pub fn pod_id(&self, namespace: &str, name: &str) -> Option<PodId> {
        self.pod_index
            .get(&(namespace.to_string(), name.to_string()))
            .copied()
    }

    /// Looks a namespace up by name.
    pub fn namespace_id(&self, name: &str) -> Option<usize> {
        self.ns_index.get(name).copied()
    }

    /// Looks a node up by name.
    pub fn node_id(&self, name: &str) -> Option<usize> {
        self.node_index.get(name).copied()
    }

    /// The kind, namespace and name of a policy.
    pub fn policy_ref(&self, id: PolicyId) -> PolicyRef {
        match id {
            PolicyId::Network(i) => self.cluster.network_policies[i as usize].reference(),
            PolicyId::Admin(i) => self.cluster.admin_policies[i as usize].reference(),
            PolicyId::NamespaceAnnotation(i) => {
                let ns = &self.cluster.namespaces[i as usize].name;
                PolicyRef {
                    kind: palisade_model::PolicyKind::NamespaceDefaultDeny,
                    namespace: Some(ns.clone()),
                    name: ns.clone(),
                }
            }
        }
    }

    /// Whether the pod can be a policy subject (it is not host-network).
    pub(crate) fn is_subject(&self, pod: PodId) -> bool {
        !self.cluster.pods[pod].host_network
    }

    fn pods_where(&self, pred: impl Fn(PodId) -> bool) -> BitSet {
        let mut set = BitSet::new(self.cluster.pods.len());
        for i in 0..self.cluster.pods.len() {
            if self.is_subject(i) && pred(i) {
                set.insert(i);
            }
        }
        set
    }

    fn ns_labels(&self, pod: PodId) -> Option<&palisade_model::Labels> {
        self.cluster
            .namespaces
            .get(self.pod_ns[pod])
            .map(|n| &n.labels)
    }

    fn compile_np(&self, np: &NetworkPolicy) -> CompiledNp {
        let legacy_lists = self.options.semantics == Semantics::Legacy
            && np.api == NetworkPolicyApi::ExtensionsV1beta1;
        let rules = |dir| {
            np.rules(dir)
                .iter()
                .map(|r| {
                    // networking.k8s.io/v1: "an empty list is the same as an absent one";
                    // the original v1beta1 proposal: "If this field is empty, this rule matches no ..."
                    let keep_empty = |n: usize| legacy_lists || n > 0;
                    let peers = r
                        .peers
                        .as_ref()
                        .filter(|p| keep_empty(p.len()))
                        .map(|peers| peers.iter().map(|p| self.compile_np_peer(np, p)).collect());
                    let ports = r.ports.clone().filter(|p| keep_empty(p.len()));
                    NpRule { peers, ports }
                })
                .collect()
        };
        CompiledNp {
            ingress: rules(Direction::Ingress),
            egress: rules(Direction::Egress),
        }
    }

    fn compile_np_peer(&self, np: &NetworkPolicy, peer: &NetworkPolicyPeer) -> NpPeer {
        match peer {
            NetworkPolicyPeer::IpBlock(b) => NpPeer::IpBlock(b.clone()),
            NetworkPolicyPeer::Pods { namespaces, pods } => NpPeer::Pods(self.pods_where(|i| {
                let p = &self.cluster.pods[i];
                let ns_ok = match namespaces {
                    None => p.namespace == np.namespace,
                    Some(sel) => self.ns_labels(i).is_some_and(|l| sel.matches(l)),
                };
                ns_ok && pods.matches(&p.labels)
            })),
        }
    }

    fn compile_admin(&self, policy: &AdminPolicy) -> CompiledAdmin {
        let rules = |rules: &[AdminRule]| {
            rules
                .iter()
                .map(|r| AdminRuleC {
                    peers: r.peers.iter().map(|p| self.compile_admin_peer(p)).collect(),
                })
                .collect()
        };
        CompiledAdmin {
            ingress: rules(&policy.ingress),
            egress: rules(&policy.egress),
        }
    }

    fn compile_admin_peer(&self, peer: &AdminPeer) -> AdminPeerC {
        let static_pods = |ns: &Selector, pods: &Selector| {
            self.pods_where(|i| {
                self.ns_labels(i).is_some_and(|l| ns.matches(l))
                    && pods.matches(&self.cluster.pods[i].labels)
            })
        };
        match peer {
            AdminPeer::Namespaces(NamespaceMatch::Selector(ns)) => {
                AdminPeerC::Pods(static_pods(ns, &Selector::everything()))
            }
            AdminPeer::Pods {
                namespaces: NamespaceMatch::Selector(ns),
                pods,
            } => AdminPeerC::Pods(static_pods(ns, pods)),
            AdminPeer::Namespaces(m) => AdminPeerC::Related {
                namespaces: m.clone(),
                pods: Selector::everything(),
            },
            AdminPeer::Pods { namespaces, pods } => AdminPeerC::Related {
                namespaces: namespaces.clone(),
                pods: pods.clone(),
            },
            AdminPeer::Nodes(sel) => AdminPeerC::Nodes(sel.clone()),
            AdminPeer::Networks(nets) => AdminPeerC::Networks(nets.clone()),
            AdminPeer::Unsupported(_) => AdminPeerC::Unsupported,
        }
    }

    fn subject_selects(&self, subject: &Subject, pod: PodId) -> bool {
        let p = &self.cluster.pods[pod];
        let ns_ok = |sel: &Selector| self.ns_labels(pod).is_some_and(|l| sel.matches(l));
        match subject {
            Subject::Namespaces(ns) => ns_ok(ns),
            Subject::Pods { namespaces, pods } => ns_ok(namespaces) && pods.matches(&p.labels),
        }
    }

    /// Builds every pod's ordered policy lists.
    fn index_pods(&mut self) {
        let n = self.cluster.pods.len();
        let mut ingress = vec![PodPolicies::default(); n];
        let mut egress = vec![PodPolicies::default(); n];
        let mut order: Vec<usize> = (0..self.cluster.admin_policies.len()).collect();
        order.sort_by_key(|&i| {
            let p = &self.cluster.admin_policies[i];
            (p.tier, p.priority, p.kind, p.name.clone())
        });
        for pod in 0..n {
            if !self.is_subject(pod) {
                continue;
            }
            for &i in &order {
                let p = &self.cluster.admin_policies[i];
                if !self.subject_selects(&p.subject, pod) {
                    continue;
                }
                for (lists, dir) in [
                    (&mut ingress, Direction::Ingress),
                    (&mut egress, Direction::Egress),
                ] {
                    if p.rules(dir).is_empty() {
                        continue;
                    }
                    let l = &mut lists[pod];
                    match p.tier {
                        AdminTier::Admin => l.admin.push(i as u32),
                        AdminTier::Baseline => l.baseline.push(i as u32),
                    }
                }
            }
            let ns_name = &self.cluster.pods[pod].namespace;
            for (i, np) in self.cluster.network_policies.iter().enumerate() {
                if &np.namespace != ns_name
                    || !np.pod_selector.matches(&self.cluster.pods[pod].labels)
                {
                    continue;
                }
                ingress[pod].network.push(i as u32);
                egress[pod].network.push(i as u32);
            }
            ingress[pod].annotation = self
                .cluster
                .namespaces
                .get(self.pod_ns[pod])
                .is_some_and(|ns| ns.default_deny_ingress);
        }
        self.ingress = ingress;
        self.egress = egress;
    }

    pub(crate) fn policies(&self, pod: PodId, dir: Direction) -> &PodPolicies {
        match dir {
            Direction::Ingress => &self.ingress[pod],
            Direction::Egress => &self.egress[pod],
        }
    }
}
