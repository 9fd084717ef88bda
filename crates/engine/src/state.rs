//! The engine's indexed state: the cluster's objects, label indexes, every policy's subject
//! and peers resolved to pod sets, and per-pod, per-direction lists of the policies that
//! apply, in evaluation order.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use rayon::prelude::*;

use palisade_model::{
    AdminPeer, AdminPolicy, AdminRule, AdminTier, Cluster, Direction, NamespaceMatch,
    NetworkPolicy, NetworkPolicyApi, NetworkPolicyPeer, Selector, Subject,
};

use crate::bitset::BitSet;
use crate::index::LabelIndex;
use crate::verdict::PolicyInfo;

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

/// A pod's position in the engine's pod list: `engine.cluster().pods[id]`.
///
/// The pod list stays dense (ids `0..pods.len()`), so an id is stable across every change
/// but one: when a pod is removed, the last pod takes its id. [`crate::Engine::apply`]
/// reports the removal and the move in [`crate::Touched::ids`]; a caller that keeps ids
/// across changes follows them ([`crate::IdChange::follow`]) or drops what it holds.
/// Nothing else renumbers pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodId(u32);

impl PodId {
    /// The pod at position `index` of the pod list. Panics past `u32::MAX` pods, which no
    /// engine can hold in memory.
    #[inline]
    pub fn new(index: usize) -> PodId {
        PodId(u32::try_from(index).unwrap_or_else(|_| panic!("pod index {index} exceeds u32")))
    }

    /// Its position in the pod list.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The ids of a pod list of `len` pods, ascending.
    pub fn all(len: usize) -> impl DoubleEndedIterator<Item = PodId> + ExactSizeIterator {
        (0..len).map(PodId::new)
    }
}

impl From<PodId> for usize {
    #[inline]
    fn from(id: PodId) -> usize {
        id.index()
    }
}

impl std::fmt::Display for PodId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Per-pod vectors (the pod list, and the engine's and callers' vectors kept beside it) are
/// indexed by id.
impl<T> std::ops::Index<PodId> for Vec<T> {
    type Output = T;
    #[inline]
    fn index(&self, id: PodId) -> &T {
        &self[id.index()]
    }
}

impl<T> std::ops::IndexMut<PodId> for Vec<T> {
    #[inline]
    fn index_mut(&mut self, id: PodId) -> &mut T {
        &mut self[id.index()]
    }
}

impl<T> std::ops::Index<PodId> for [T] {
    type Output = T;
    #[inline]
    fn index(&self, id: PodId) -> &T {
        &self[id.index()]
    }
}

impl<T> std::ops::IndexMut<PodId> for [T] {
    #[inline]
    fn index_mut(&mut self, id: PodId) -> &mut T {
        &mut self[id.index()]
    }
}

/// A peer of a NetworkPolicy rule, with its pods resolved.
#[derive(Debug, Clone)]
pub enum NpPeer {
    /// The pods the peer selects; shared by every peer that selects the same pods.
    Pods(Arc<BitSet>),
    /// An `ipBlock` peer.
    IpBlock(palisade_model::IpBlock),
}

/// A NetworkPolicy rule's peers or ports: `None` matches everything, `Some(empty)` nothing.
#[derive(Debug, Clone)]
pub struct NpRule {
    /// The rule's peers (`from` or `to`).
    pub peers: Option<Vec<NpPeer>>,
    /// The rule's ports.
    pub ports: Option<Vec<palisade_model::NetworkPolicyPort>>,
}

/// A compiled policy's position in the engine's vectors: valid only until the next
/// [`crate::Engine::apply`], so it never leaves the engine (verdicts carry [`PolicyInfo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PolicySlot {
    /// Index into the NetworkPolicies.
    Network(u32),
    /// Index into the admin policies (ANP, BANP, CNP).
    Admin(u32),
}

/// The peer pod sets compiled so far, by the selectors that pick them: policies whose
/// peers have the same selectors (thousands of policies may repeat a few) share one set.
/// Policies compile in parallel: a set two of them make at once is kept once, the first
/// stored, and both take that one.
#[derive(Default)]
pub(crate) struct PeerSets(Mutex<HashMap<(ScopeKey, Selector), Arc<BitSet>>>);

impl PeerSets {
    /// The set stored under `key`, or `make`'s, made outside the lock and stored.
    fn get_or_make(&self, key: (ScopeKey, Selector), make: impl FnOnce() -> BitSet) -> Arc<BitSet> {
        let lock = || self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(set) = lock().get(&key) {
            return set.clone();
        }
        let set = Arc::new(make());
        lock().entry(key).or_insert(set).clone()
    }
}

/// An [`NsScope`] as a key.
#[derive(PartialEq, Eq, Hash)]
enum ScopeKey {
    Named(String),
    Selected(Selector),
}

/// A NetworkPolicy with its subject and peers resolved: a read-only view, kept current by
/// [`crate::Engine::apply`].
#[derive(Debug, Clone)]
pub struct CompiledNp {
    /// The policy as verdicts name it.
    pub info: Arc<PolicyInfo>,
    /// The pods it selects.
    pub subject: BitSet,
    /// Its ingress rules, in order.
    pub ingress: Vec<NpRule>,
    /// Its egress rules, in order.
    pub egress: Vec<NpRule>,
}

impl CompiledNp {
    /// Its compiled rules of `dir`.
    pub fn rules(&self, dir: Direction) -> &[NpRule] {
        match dir {
            Direction::Ingress => &self.ingress,
            Direction::Egress => &self.egress,
        }
    }
}

/// An admin peer with static selectors resolved to pod sets.
#[derive(Debug, Clone)]
pub enum AdminPeerC {
    /// Pods picked statically (selector namespace match); shared as [`NpPeer::Pods`] is.
    Pods(Arc<BitSet>),
    /// Pods whose namespace relation to the subject is checked per flow.
    Related {
        /// The namespace relation (`sameLabels`, `notSameLabels`, ...).
        namespaces: NamespaceMatch,
        /// The pod selector.
        pods: Selector,
    },
    /// The nodes a node selector selects.
    Nodes(Selector),
    /// CIDRs.
    Networks(Vec<ipnet::IpNet>),
    /// A peer with no field Palisade can evaluate.
    Unsupported,
}

/// An admin rule's peers, compiled.
#[derive(Debug, Clone)]
pub struct AdminRuleC {
    /// The rule's peers.
    pub peers: Vec<AdminPeerC>,
    /// Some peer is [`AdminPeerC::Unsupported`]: the rule fails closed (a Deny or Pass
    /// rule then matches every peer; an Allow rule only its other peers).
    pub fail_closed: bool,
}

/// An admin policy with its subject and peers resolved: a read-only view, kept current by
/// [`crate::Engine::apply`].
#[derive(Debug, Clone)]
pub struct CompiledAdmin {
    /// The policy as verdicts name it.
    pub info: Arc<PolicyInfo>,
    /// The pods it selects.
    pub subject: BitSet,
    /// Its ingress rules, in order.
    pub ingress: Vec<AdminRuleC>,
    /// Its egress rules, in order.
    pub egress: Vec<AdminRuleC>,
}

impl CompiledAdmin {
    /// Its compiled rules of `dir`.
    pub fn rules(&self, dir: Direction) -> &[AdminRuleC] {
        match dir {
            Direction::Ingress => &self.ingress,
            Direction::Egress => &self.egress,
        }
    }
}

/// Policies applying to one pod in one direction, in evaluation order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodPolicies {
    /// Admin-tier policies (ANP, CNP Admin), as indices into [`crate::Engine::admin_policies`].
    pub admin: Vec<u32>,
    /// NetworkPolicies, as indices into [`crate::Engine::network_policies`].
    pub network: Vec<u32>,
    /// Baseline-tier policies (BANP, CNP Baseline), as indices into
    /// [`crate::Engine::admin_policies`].
    pub baseline: Vec<u32>,
    /// Isolated by the namespace's legacy DefaultDeny annotation (ingress only).
    pub annotation: bool,
    /// The policies that isolate the pod in this direction when it is isolated (see
    /// [`Engine::isolating`]), shared by every verdict that names them.
    pub isolating: Isolating,
}

/// A list of isolating policies, shared by the verdicts that carry it.
pub type Isolating = Arc<[Arc<PolicyInfo>]>;

/// What an address belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// A pod's address.
    Pod(PodId),
    /// A node's address (by node index).
    Node(usize),
}

/// Who owns every address (nodes win over host-network pods; the first pod wins a
/// duplicate address), and which pods share an address, with the address.
fn address_owners(cluster: &Cluster) -> (HashMap<IpAddr, Owner>, HashMap<PodId, IpAddr>) {
    use std::collections::hash_map::Entry;
    let mut owner: HashMap<IpAddr, Owner> = HashMap::with_capacity(cluster.pods.len());
    for (i, n) in cluster.nodes.iter().enumerate() {
        for ip in &n.addresses {
            owner.insert(*ip, Owner::Node(i));
        }
    }
    let mut shared = HashMap::new();
    // The first pod to hold each address a node owns; the owner names it for the others.
    let mut first_on_node: HashMap<IpAddr, PodId> = HashMap::new();
    for (i, p) in PodId::all(cluster.pods.len()).zip(&cluster.pods) {
        if p.host_network {
            continue;
        }
        for ip in &p.ips {
            // Every later holder of an address shares it with the first.
            let first = match owner.entry(*ip) {
                Entry::Vacant(v) => *v.insert(Owner::Pod(i)),
                Entry::Occupied(o) => *o.get(),
            };
            let first = match first {
                Owner::Pod(first) => first,
                Owner::Node(_) => *first_on_node.entry(*ip).or_insert(i),
            };
            if first != i {
                shared.insert(first, *ip);
                shared.insert(i, *ip);
            }
        }
    }
    (owner, shared)
}

/// Name → position.
pub(crate) fn by_name<'a>(names: impl Iterator<Item = &'a String>) -> HashMap<String, usize> {
    names.enumerate().map(|(i, n)| (n.clone(), i)).collect()
}

/// Which namespaces a pod selection covers.
pub enum NsScope<'a> {
    /// One namespace, by name.
    Named(&'a str),
    /// The namespaces a selector selects.
    Selected(&'a Selector),
}

/// The compiled, indexed cluster: answer [`crate::Engine::evaluate`] from it; keep it
/// current with [`crate::Engine::apply`].
#[derive(Debug, Clone)]
pub struct Engine {
    pub(crate) cluster: Cluster,
    pub(crate) options: Options,
    pub(crate) ns_index: HashMap<String, usize>,
    pub(crate) node_index: HashMap<String, usize>,
    pub(crate) pod_index: HashMap<(String, String), PodId>,
    pub(crate) pod_ns: Vec<usize>,
    pub(crate) pod_node: Vec<Option<usize>>,
    pub(crate) ip_owner: HashMap<IpAddr, Owner>,
    /// Pods (not host-network) with an address that another such pod also has, and that address.
    pub(crate) shared_address: HashMap<PodId, IpAddr>,
    pub(crate) pod_labels: LabelIndex,
    pub(crate) ns_pods: Vec<BitSet>,
    /// Pods that can be policy subjects and selector peers (not host-network).
    pub(crate) subjects: BitSet,
    pub(crate) nps: Vec<CompiledNp>,
    pub(crate) admins: Vec<CompiledAdmin>,
    /// Admin policy indices in evaluation order.
    pub(crate) admin_order: Vec<u32>,
    pub(crate) ingress: Vec<Arc<PodPolicies>>,
    pub(crate) egress: Vec<Arc<PodPolicies>>,
    /// While a pod is upserted: the rules (policy, direction, index) whose peer sets it
    /// joined or left (see [`crate::Touched`]).
    pub(crate) peers_moved: Option<crate::update::PeerMoves>,
    /// The pod ids changed by the change being applied.
    pub(crate) id_changes: Vec<crate::update::IdChange>,
    /// See [`Engine::address_epoch`].
    pub(crate) address_epoch: u64,
}

impl Engine {
    /// Compiles a cluster.
    pub fn new(cluster: Cluster, options: Options) -> Engine {
        let mut e = Engine {
            cluster,
            options,
            ns_index: HashMap::new(),
            node_index: HashMap::new(),
            pod_index: HashMap::new(),
            pod_ns: Vec::new(),
            pod_node: Vec::new(),
            ip_owner: HashMap::new(),
            shared_address: HashMap::new(),
            pod_labels: LabelIndex::default(),
            ns_pods: Vec::new(),
            subjects: BitSet::default(),
            nps: Vec::new(),
            admins: Vec::new(),
            admin_order: Vec::new(),
            ingress: Vec::new(),
            egress: Vec::new(),
            peers_moved: None,
            id_changes: Vec::new(),
            address_epoch: crate::address_cache::next_epoch(),
        };
        e.index_namespaces_and_nodes();
        e.index_pods();
        let shared = PeerSets::default();
        e.nps = (e.cluster.network_policies.par_iter())
            .map(|np| e.compile_np(np, &shared))
            .collect();
        e.admins = (e.cluster.admin_policies.par_iter())
            .map(|p| e.compile_admin(p, &shared))
            .collect();
        e.sort_admins();
        e.build_lists();
        e
    }

    /// The options it was built with.
    pub fn options(&self) -> Options {
        self.options
    }

    /// The cluster it was built from (with every change applied since).
    pub fn cluster(&self) -> &Cluster {
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

    /// Whether the pod can be a policy subject (it is not host-network).
    pub fn is_subject(&self, pod: PodId) -> bool {
        !self.cluster.pods[pod].host_network
    }

    /// The pods that can be policy subjects ([`Engine::is_subject`]).
    pub fn subjects(&self) -> &BitSet {
        &self.subjects
    }

    /// The policies that apply to `pod` in `dir`, in evaluation order.
    pub fn policies(&self, pod: PodId, dir: Direction) -> &PodPolicies {
        match dir {
            Direction::Ingress => &self.ingress[pod],
            Direction::Egress => &self.egress[pod],
        }
    }

    /// The NetworkPolicies, compiled; [`PodPolicies::network`] indexes them.
    pub fn network_policies(&self) -> &[CompiledNp] {
        &self.nps
    }

    /// The admin policies (ANP, BANP, CNP), compiled; [`PodPolicies::admin`] and
    /// [`PodPolicies::baseline`] index them.
    pub fn admin_policies(&self) -> &[CompiledAdmin] {
        &self.admins
    }

    /// The admin-tier policies in evaluation order (by priority, then name).
    pub fn admin_order(&self) -> &[u32] {
        &self.admin_order
    }

    /// Whether any policy uses named ports (then container ports tell pods apart).
    pub fn uses_named_ports(&self) -> bool {
        self.cluster.network_policies.iter().any(|np| {
            np.ingress
                .iter()
                .chain(&np.egress)
                .flat_map(|r| r.ports.iter().flatten())
                .any(|p| matches!(p.port, palisade_model::PortSpec::Named(_)))
        }) || self.cluster.admin_policies.iter().any(|a| {
            a.ingress
                .iter()
                .chain(&a.egress)
                .flat_map(|r| r.ports.iter().flatten())
                .any(|p| matches!(p, palisade_model::AdminPort::Named(_)))
        })
    }

    /// Every pod's id, ascending.
    pub fn pod_ids(&self) -> impl DoubleEndedIterator<Item = PodId> + ExactSizeIterator + use<> {
        PodId::all(self.cluster.pods.len())
    }

    /// The namespace (index) of `pod`.
    pub fn pod_namespace(&self, pod: PodId) -> usize {
        self.pod_ns[pod]
    }

    /// The node (index) `pod` runs on, if the node is known.
    pub fn pod_node(&self, pod: PodId) -> Option<usize> {
        self.pod_node[pod]
    }

    /// The pods of namespace `ns`.
    pub fn namespace_pods(&self, ns: usize) -> Option<&BitSet> {
        self.ns_pods.get(ns)
    }

    /// How many addresses have an owner ([`Engine::address_owner`]).
    pub fn owned_address_count(&self) -> usize {
        self.ip_owner.len()
    }

    /// What owns `ip`: a pod (not host-network, its address not shared) or a node.
    pub fn address_owner(&self, ip: &IpAddr) -> Option<Owner> {
        self.ip_owner.get(ip).copied()
    }

    // ------------------------------------------------------------------ indexes

    pub(crate) fn index_namespaces_and_nodes(&mut self) {
        self.ns_index = by_name(self.cluster.namespaces.iter().map(|n| &n.name));
        self.node_index = by_name(self.cluster.nodes.iter().map(|n| &n.name));
        self.ns_pods
            .resize(self.cluster.namespaces.len(), BitSet::default());
    }

    /// Indexes every pod of the cluster, at construction. The label index, the addresses'
    /// owners and the name index do not depend on each other: they are built side by side.
    fn index_pods(&mut self) {
        let pods = &self.cluster.pods;
        let (labels, ((ip_owner, shared_address), (pod_index, places))) = rayon::join(
            || LabelIndex::of(PodId::all(pods.len()).zip(pods.iter().map(|p| &p.labels))),
            || {
                rayon::join(
                    || address_owners(&self.cluster),
                    || {
                        let index = (PodId::all(pods.len()).zip(pods))
                            .map(|(id, p)| ((p.namespace.clone(), p.name.clone()), id))
                            .collect::<HashMap<_, _>>();
                        let places: Vec<_> = pods.iter().map(|p| self.place(p)).collect();
                        (index, places)
                    },
                )
            },
        );
        self.pod_labels = labels;
        self.ip_owner = ip_owner;
        self.shared_address = shared_address;
        self.pod_index = pod_index;
        for (pod, (ns, node)) in PodId::all(places.len()).zip(places) {
            self.record_place(pod, ns, node);
        }
    }

    /// Adds pod `pod` (already in `cluster.pods`) to every pod index.
    pub(crate) fn index_pod(&mut self, pod: PodId) {
        let p = &self.cluster.pods[pod];
        let (ns, node) = self.place(p);
        self.pod_index
            .insert((p.namespace.clone(), p.name.clone()), pod);
        self.pod_labels.insert(pod, &p.labels);
        self.record_place(pod, ns, node);
    }

    /// The namespace (index, `usize::MAX` when unknown) and node (index, when known) of a pod.
    fn place(&self, p: &palisade_model::Pod) -> (usize, Option<usize>) {
        let ns = self
            .ns_index
            .get(&p.namespace)
            .copied()
            .unwrap_or(usize::MAX);
        let node = p
            .node_name
            .as_ref()
            .and_then(|n| self.node_index.get(n).copied());
        (ns, node)
    }

    /// Records pod `pod`'s namespace and node ([`Engine::place`]), and whether it can be a
    /// policy subject.
    fn record_place(&mut self, pod: PodId, ns: usize, node: Option<usize>) {
        if pod.index() >= self.pod_ns.len() {
            self.pod_ns.resize(pod.index() + 1, usize::MAX);
            self.pod_node.resize(pod.index() + 1, None);
        }
        self.pod_ns[pod] = ns;
        self.pod_node[pod] = node;
        if let Some(set) = self.ns_pods.get_mut(ns) {
            set.insert(pod);
        }
        self.subjects.set(pod, !self.cluster.pods[pod].host_network);
    }

    /// Removes pod `pod` from every pod index (it is still in `cluster.pods`).
    pub(crate) fn unindex_pod(&mut self, pod: PodId) {
        let p = &self.cluster.pods[pod];
        self.pod_index
            .remove(&(p.namespace.clone(), p.name.clone()));
        self.pod_labels.remove(pod, &p.labels);
        if let Some(set) = self.ns_pods.get_mut(self.pod_ns[pod]) {
            set.remove(pod);
        }
        self.subjects.remove(pod);
    }

    /// Recomputes which pod or node owns every address (nodes win over host-network pods;
    /// the first pod wins a duplicate address) and which pods share an address.
    pub(crate) fn rebuild_ip_owner(&mut self) {
        self.address_epoch = crate::address_cache::next_epoch();
        (self.ip_owner, self.shared_address) = address_owners(&self.cluster);
    }

    /// The address `pod` shares with another pod, if any: no policy can be enforced for it.
    pub fn shared_address(&self, pod: PodId) -> Option<IpAddr> {
        if self.shared_address.is_empty() {
            return None;
        }
        self.shared_address.get(&pod).copied()
    }

    fn ns_labels(&self, pod: PodId) -> Option<&palisade_model::Labels> {
        self.cluster
            .namespaces
            .get(self.pod_ns[pod])
            .map(|n| &n.labels)
    }

    /// Subject pods in the namespaces of `scope` that `pods` selects.
    pub fn select_pods(&self, scope: NsScope<'_>, pods: &Selector) -> BitSet {
        let mut in_ns = BitSet::default();
        match scope {
            NsScope::Named(name) => {
                if let Some(s) = self.ns_index.get(name).and_then(|&i| self.ns_pods.get(i)) {
                    in_ns.union(s);
                }
            }
            NsScope::Selected(sel) => {
                for (i, ns) in self.cluster.namespaces.iter().enumerate() {
                    if sel.matches(&ns.labels) {
                        in_ns.union(&self.ns_pods[i]);
                    }
                }
            }
        }
        in_ns.intersect(&self.subjects);
        if pods.is_empty() {
            return in_ns;
        }
        self.pod_labels.select_within(pods, in_ns)
    }

    /// [`Engine::select_pods`], shared with the peers compiled before that have the same
    /// selectors.
    fn shared_pods(&self, scope: NsScope<'_>, pods: &Selector, shared: &PeerSets) -> Arc<BitSet> {
        let key = match scope {
            NsScope::Named(name) => ScopeKey::Named(name.to_string()),
            NsScope::Selected(sel) => ScopeKey::Selected(sel.clone()),
        };
        shared.get_or_make((key, pods.clone()), || self.select_pods(scope, pods))
    }

    // ------------------------------------------------------------------ compiling policies

    pub(crate) fn compile_np(&self, np: &NetworkPolicy, shared: &PeerSets) -> CompiledNp {
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
                        .map(|peers| {
                            peers
                                .iter()
                                .map(|p| self.compile_np_peer(np, p, shared))
                                .collect()
                        });
                    let ports = r.ports.clone().filter(|p| keep_empty(p.len()));
                    NpRule { peers, ports }
                })
                .collect()
        };
        CompiledNp {
            info: Arc::new(PolicyInfo::network(np)),
            subject: self.select_pods(NsScope::Named(&np.namespace), &np.pod_selector),
            ingress: rules(Direction::Ingress),
            egress: rules(Direction::Egress),
        }
    }

    fn compile_np_peer(
        &self,
        np: &NetworkPolicy,
        peer: &NetworkPolicyPeer,
        shared: &PeerSets,
    ) -> NpPeer {
        match peer {
            NetworkPolicyPeer::IpBlock(b) => NpPeer::IpBlock(b.clone()),
            NetworkPolicyPeer::Pods { namespaces, pods } => NpPeer::Pods(match namespaces {
                None => self.shared_pods(NsScope::Named(&np.namespace), pods, shared),
                Some(sel) => self.shared_pods(NsScope::Selected(sel), pods, shared),
            }),
        }
    }

    pub(crate) fn compile_admin(&self, policy: &AdminPolicy, shared: &PeerSets) -> CompiledAdmin {
        let rules = |rules: &[AdminRule]| {
            rules
                .iter()
                .map(|r| {
                    let peers: Vec<AdminPeerC> = r
                        .peers
                        .iter()
                        .map(|p| self.compile_admin_peer(p, shared))
                        .collect();
                    let fail_closed = peers.iter().any(|p| matches!(p, AdminPeerC::Unsupported));
                    AdminRuleC { peers, fail_closed }
                })
                .collect()
        };
        let subject = match &policy.subject {
            Subject::Namespaces(ns) => {
                self.select_pods(NsScope::Selected(ns), &Selector::everything())
            }
            Subject::Pods { namespaces, pods } => {
                self.select_pods(NsScope::Selected(namespaces), pods)
            }
        };
        CompiledAdmin {
            info: Arc::new(PolicyInfo::admin(policy)),
            subject,
            ingress: rules(&policy.ingress),
            egress: rules(&policy.egress),
        }
    }

    fn compile_admin_peer(&self, peer: &AdminPeer, shared: &PeerSets) -> AdminPeerC {
        match peer {
            AdminPeer::Namespaces(NamespaceMatch::Selector(ns)) => AdminPeerC::Pods(
                self.shared_pods(NsScope::Selected(ns), &Selector::everything(), shared),
            ),
            AdminPeer::Pods {
                namespaces: NamespaceMatch::Selector(ns),
                pods,
            } => AdminPeerC::Pods(self.shared_pods(NsScope::Selected(ns), pods, shared)),
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
            AdminPeer::DomainNames(patterns) => match self.domain_nets(patterns) {
                Some(nets) => AdminPeerC::Networks(nets),
                None => AdminPeerC::Unsupported,
            },
            AdminPeer::Unsupported(_) => AdminPeerC::Unsupported,
        }
    }

    /// The addresses the DNS map gives for the names `patterns` match, as host networks;
    /// `None` without a map (the peer then fails closed).
    pub fn domain_nets(
        &self,
        patterns: &[palisade_model::DomainPattern],
    ) -> Option<Vec<ipnet::IpNet>> {
        let dns = self.cluster.dns.as_ref()?;
        let mut ips: Vec<IpAddr> = patterns
            .iter()
            .flat_map(|p| dns.resolve(p).map(|(_, ip)| ip))
            .collect();
        ips.sort();
        ips.dedup();
        Some(ips.into_iter().map(ipnet::IpNet::from).collect())
    }

    /// `pod` as selectors see it: the per-pod form of the compiled sets.
    pub(crate) fn selectable(&self, pod: PodId) -> Selectable<'_> {
        let p = &self.cluster.pods[pod];
        Selectable {
            subject: self.is_subject(pod),
            namespace: &p.namespace,
            ns_labels: self.ns_labels(pod),
            labels: &p.labels,
        }
    }

    // ------------------------------------------------------------------ per-pod lists

    /// The evaluation order of admin policies: tier, priority, kind, then name.
    pub(crate) fn sort_admins(&mut self) {
        let mut order: Vec<u32> = (0..self.cluster.admin_policies.len() as u32).collect();
        order.sort_by_key(|&i| {
            let p = &self.cluster.admin_policies[i as usize];
            (p.tier, p.priority, p.kind, p.name.clone())
        });
        self.admin_order = order;
    }

    /// Builds every pod's ordered policy lists from the compiled subjects. Pods of one
    /// namespace with the same labels and network mode are selected by the same policies:
    /// their lists are computed once, for the first of them, and shared.
    fn build_lists(&mut self) {
        let n = self.cluster.pods.len();
        let rep_of: Vec<PodId> = {
            let pods = &self.cluster.pods;
            crate::group::first_equal(n, |i| {
                (self.pod_ns[i], &pods[i].labels, pods[i].host_network)
            })
            .into_iter()
            .map(PodId::new)
            .collect()
        };
        let mut reps = BitSet::new(n);
        // Each representative's position among the representatives: lists are built for
        // them only, and every other pod shares its representative's.
        let mut slot = vec![u32::MAX; n];
        let mut rep_pods: Vec<PodId> = Vec::new();
        for (pod, &rep) in PodId::all(n).zip(&rep_of) {
            if pod == rep {
                reps.insert(pod);
                slot[pod] = rep_pods.len() as u32;
                rep_pods.push(pod);
            }
        }
        let mut ingress = vec![PodPolicies::default(); rep_pods.len()];
        let mut egress = vec![PodPolicies::default(); rep_pods.len()];
        // Per admin-tier policy, whether it has ingress and egress rules.
        let has: Vec<[bool; 2]> = (self.cluster.admin_policies.iter())
            .map(|p| [Direction::Ingress, Direction::Egress].map(|d| !p.rules(d).is_empty()))
            .collect();
        let admins: Vec<(u32, &BitSet, AdminTier)> = self
            .admin_order
            .iter()
            .map(|&i| {
                let tier = self.cluster.admin_policies[i as usize].tier;
                (i, &self.admins[i as usize].subject, tier)
            })
            .collect();
        // A block of 64 words (4,096 pods) at a time, so that the lists being appended to
        // stay in cache; of each subject set only the words it stores in the block. The
        // blocks' representatives hold runs of slots apart from each other's, so the blocks
        // are filled in parallel. Each policy goes into one list per representative (the
        // ingress side's), whatever its directions: the lists are split by direction
        // below.
        const BLOCK: usize = 64;
        // Per block: its first word, the slot of its first representative, their lists.
        let mut blocks: Vec<(usize, usize, &mut [PodPolicies])> = Vec::new();
        let mut rest = ingress.as_mut_slice();
        let mut base = 0;
        for first_word in (0..n.div_ceil(64)).step_by(BLOCK) {
            let end = rep_pods.partition_point(|p| p.index() < (first_word + BLOCK) * 64);
            let (lists, after) = std::mem::take(&mut rest).split_at_mut(end - base);
            blocks.push((first_word, base, lists));
            rest = after;
            base = end;
        }
        blocks
            .into_par_iter()
            .for_each(|(first_word, base, lists)| {
                let words = first_word..first_word + BLOCK;
                for &(i, subject, tier) in &admins {
                    for pod in subject.iter_within(&reps, words.clone()) {
                        let lists = &mut lists[slot[pod] as usize - base];
                        match tier {
                            AdminTier::Admin => lists.admin.push(i),
                            AdminTier::Baseline => lists.baseline.push(i),
                        }
                    }
                }
                for (i, np) in self.nps.iter().enumerate() {
                    for pod in np.subject.iter_within(&reps, words.clone()) {
                        lists[slot[pod] as usize - base].network.push(i as u32);
                    }
                }
            });
        (ingress.par_iter_mut().zip(&mut egress).zip(&rep_pods)).for_each(|((i, e), &pod)| {
            // A NetworkPolicy's subjects are the same in each direction.
            e.network.clone_from(&i.network);
            for (all, egress) in [
                (&mut i.admin, &mut e.admin),
                (&mut i.baseline, &mut e.baseline),
            ] {
                egress.extend(all.iter().filter(|&&p| has[p as usize][1]));
                all.retain(|&p| has[p as usize][0]);
            }
            i.annotation = self.annotated(pod);
        });
        // Every pod is given its representative's lists below; until then one empty list.
        let empty = Arc::new(PodPolicies::default());
        self.ingress = vec![empty.clone(); n];
        self.egress = vec![empty; n];
        for ((&pod, i), e) in rep_pods.iter().zip(ingress).zip(egress) {
            self.ingress[pod] = Arc::new(i);
            self.egress[pod] = Arc::new(e);
        }
        let isolating: Vec<[Isolating; 2]> = (rep_pods.par_iter())
            .map(|&pod| self.isolating_of(pod))
            .collect();
        for (&pod, isolating) in rep_pods.iter().zip(isolating) {
            self.set_isolating(pod, isolating);
        }
        for (pod, &rep) in PodId::all(n).zip(&rep_of) {
            if pod != rep {
                self.ingress[pod] = self.ingress[rep].clone();
                self.egress[pod] = self.egress[rep].clone();
            }
        }
    }

    /// Recomputes `pod`'s isolating policies from its lists (after they changed).
    pub(crate) fn refresh_isolating(&mut self, pod: PodId) {
        self.set_isolating(pod, self.isolating_of(pod));
    }

    /// `pod`'s isolating policies computed from its lists, ingress then egress.
    fn isolating_of(&self, pod: PodId) -> [Isolating; 2] {
        [Direction::Ingress, Direction::Egress].map(|dir| self.compute_isolating(pod, dir))
    }

    /// Gives `pod` these isolating policies, ingress then egress.
    fn set_isolating(&mut self, pod: PodId, [ingress, egress]: [Isolating; 2]) {
        Arc::make_mut(&mut self.ingress[pod]).isolating = ingress;
        Arc::make_mut(&mut self.egress[pod]).isolating = egress;
    }

    /// Whether `pod`'s namespace carries the legacy DefaultDeny annotation.
    fn annotated(&self, pod: PodId) -> bool {
        self.is_subject(pod)
            && self
                .cluster
                .namespaces
                .get(self.pod_ns[pod])
                .is_some_and(|ns| ns.default_deny_ingress)
    }

    /// Recomputes one pod's lists from the compiled subjects.
    pub(crate) fn rebuild_pod_lists(&mut self, pod: PodId) {
        let mut ingress = PodPolicies::default();
        let mut egress = PodPolicies::default();
        for &i in &self.admin_order {
            if !self.admins[i as usize].subject.contains(pod) {
                continue;
            }
            let p = &self.cluster.admin_policies[i as usize];
            for (l, dir) in [
                (&mut ingress, Direction::Ingress),
                (&mut egress, Direction::Egress),
            ] {
                if !p.rules(dir).is_empty() {
                    match p.tier {
                        AdminTier::Admin => l.admin.push(i),
                        AdminTier::Baseline => l.baseline.push(i),
                    }
                }
            }
        }
        for (i, np) in self.nps.iter().enumerate() {
            if np.subject.contains(pod) {
                ingress.network.push(i as u32);
                egress.network.push(i as u32);
            }
        }
        ingress.annotation = self.annotated(pod);
        if pod.index() >= self.ingress.len() {
            self.ingress.resize(pod.index() + 1, Arc::default());
            self.egress.resize(pod.index() + 1, Arc::default());
        }
        self.ingress[pod] = Arc::new(ingress);
        self.egress[pod] = Arc::new(egress);
        self.refresh_isolating(pod);
    }
}

/// One pod as selectors see it, looked up once: whether it is in a compiled subject or
/// static peer set is decided here (the per-pod form of [`Engine::compile_np`] and
/// [`Engine::compile_admin`]'s sets).
pub(crate) struct Selectable<'a> {
    /// It can be selected at all (not host-network).
    subject: bool,
    namespace: &'a str,
    ns_labels: Option<&'a palisade_model::Labels>,
    labels: &'a palisade_model::Labels,
}

impl Selectable<'_> {
    fn in_namespaces(&self, sel: &Selector) -> bool {
        self.ns_labels.is_some_and(|l| sel.matches(l))
    }

    /// Pushes whether the pod is in `np`'s subject, then in each of its peers (ingress
    /// rules, then egress, in order; an `ipBlock` holds no pod).
    pub(crate) fn np_memberships(&self, np: &NetworkPolicy, out: &mut Vec<bool>) {
        let own_namespace = self.subject && self.namespace == np.namespace;
        out.push(own_namespace && np.pod_selector.matches(self.labels));
        for r in np.ingress.iter().chain(&np.egress) {
            for peer in r.peers.iter().flatten() {
                out.push(match peer {
                    NetworkPolicyPeer::Pods { namespaces, pods } => {
                        let ns_ok = match namespaces {
                            None => own_namespace,
                            Some(sel) => self.subject && self.in_namespaces(sel),
                        };
                        ns_ok && pods.matches(self.labels)
                    }
                    NetworkPolicyPeer::IpBlock(_) => false,
                });
            }
        }
    }

    /// Whether an admin policy's subject selects the pod.
    pub(crate) fn in_admin_subject(&self, policy: &AdminPolicy) -> bool {
        self.subject
            && match &policy.subject {
                Subject::Namespaces(ns) => self.in_namespaces(ns),
                Subject::Pods { namespaces, pods } => {
                    self.in_namespaces(namespaces) && pods.matches(self.labels)
                }
            }
    }

    /// Whether the pod is in a statically resolved admin peer (`None` for a peer that is
    /// resolved per flow or holds no pod).
    pub(crate) fn in_admin_static_peer(&self, peer: &AdminPeer) -> Option<bool> {
        let (ns, pods) = match peer {
            AdminPeer::Namespaces(NamespaceMatch::Selector(ns)) => (ns, None),
            AdminPeer::Pods {
                namespaces: NamespaceMatch::Selector(ns),
                pods,
            } => (ns, Some(pods)),
            _ => return None,
        };
        Some(self.subject && self.in_namespaces(ns) && pods.is_none_or(|p| p.matches(self.labels)))
    }
}
