//! The cluster objects Palisade understands, in validated, precise form.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::types::{Labels, PolicyKind, PolicyRef, Port, PortRange, Protocol, Selector};
use crate::yaml::LineMap;

/// Where an object was read from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Origin {
    /// File name (`<stdin>` for standard input).
    pub file: Arc<str>,
    /// 1-based line of the object's first line.
    pub line: usize,
    /// The lines of its fields and its lint-ignore annotation, kept from the one parse
    /// of its text for the kinds lint reports on (policies, Services) and for objects
    /// that carry the annotation; `None` otherwise.
    pub fields: Option<Arc<FieldLines>>,
}

/// What lint reads of an object's text besides its content.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FieldLines {
    /// The line of each field (empty when the object is on one line).
    pub lines: LineMap,
    /// The value of its [`LINT_IGNORE_ANNOTATION`], if it has one.
    pub lint_ignore: Option<String>,
}

/// `palisade.dev/lint-ignore: "PAL002,PAL008"` on an object suppresses those lint codes for it.
pub const LINT_IGNORE_ANNOTATION: &str = "palisade.dev/lint-ignore";

/// A traffic direction, seen from the policy subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// Traffic into the subject.
    Ingress,
    /// Traffic out of the subject.
    Egress,
}

impl Direction {
    /// `Ingress` or `Egress`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Ingress => "Ingress",
            Direction::Egress => "Egress",
        }
    }
}

/// A Namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// Name.
    pub name: String,
    /// Labels, including `kubernetes.io/metadata.name` as the API server sets it.
    pub labels: Labels,
    /// Whether the legacy `net.beta.kubernetes.io/network-policy` annotation asks for
    /// `{"ingress":{"isolation":"DefaultDeny"}}`.
    pub default_deny_ingress: bool,
    /// Where it was read (None for a namespace implied by the objects in it).
    pub origin: Option<Origin>,
}

impl Namespace {
    /// A namespace that objects live in but that was not declared: it is assumed to exist
    /// with only the `kubernetes.io/metadata.name` label.
    pub fn implied(name: &str) -> Namespace {
        let label = crate::convert::core::NAMESPACE_NAME_LABEL;
        Namespace {
            name: name.to_string(),
            labels: [(label.to_string(), name.to_string())].into(),
            default_deny_ingress: false,
            origin: None,
        }
    }
}

/// A container port a pod declares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContainerPort {
    /// The port's name, if it has one (an IANA_SVC_NAME).
    pub name: Option<String>,
    /// The number.
    pub port: Port,
    /// The protocol (TCP when not given).
    pub protocol: Protocol,
}

/// A Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: Labels,
    /// `spec.nodeName`.
    pub node_name: Option<String>,
    /// `spec.hostNetwork`.
    pub host_network: bool,
    /// `status.podIPs` (or `status.podIP`), primary first.
    pub ips: Vec<IpAddr>,
    /// Ports of all containers.
    pub ports: Vec<ContainerPort>,
    /// Whether the pod is ready to serve a Service: its `Ready` condition is `True`, or it
    /// reports no `Ready` condition at all (a manifest, or a workload's pod to be).
    pub ready: bool,
    /// Where it was read.
    pub origin: Origin,
}

impl Pod {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: Labels,
    /// `InternalIP` addresses from `status.addresses`.
    pub addresses: Vec<IpAddr>,
    /// Where it was read.
    pub origin: Origin,
}

/// The API version a NetworkPolicy was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NetworkPolicyApi {
    /// `networking.k8s.io/v1`.
    V1,
    /// `extensions/v1beta1` (the original proposal).
    ExtensionsV1beta1,
}

/// Which directions a NetworkPolicy isolates (`spec.policyTypes`, after API defaulting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PolicyTypes {
    /// `Ingress` is listed.
    pub ingress: bool,
    /// `Egress` is listed.
    pub egress: bool,
}

impl PolicyTypes {
    /// Whether `dir` is listed.
    pub fn has(&self, dir: Direction) -> bool {
        match dir {
            Direction::Ingress => self.ingress,
            Direction::Egress => self.egress,
        }
    }
}

/// A `networking.k8s.io/v1` or `extensions/v1beta1` NetworkPolicy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPolicy {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// API version it was written in.
    pub api: NetworkPolicyApi,
    /// `spec.podSelector` (absent or null = every pod of the namespace).
    pub pod_selector: Selector,
    /// `spec.policyTypes` after defaulting.
    pub policy_types: PolicyTypes,
    /// `spec.ingress`.
    pub ingress: Vec<NetworkPolicyRule>,
    /// `spec.egress`.
    pub egress: Vec<NetworkPolicyRule>,
    /// Where it was read.
    pub origin: Origin,
}

impl NetworkPolicy {
    /// This policy's reference.
    pub fn reference(&self) -> PolicyRef {
        PolicyRef {
            kind: PolicyKind::NetworkPolicy,
            namespace: Some(self.namespace.clone()),
            name: self.name.clone(),
        }
    }
    /// The rules of one direction.
    pub fn rules(&self, dir: Direction) -> &[NetworkPolicyRule] {
        match dir {
            Direction::Ingress => &self.ingress,
            Direction::Egress => &self.egress,
        }
    }
}

/// One NetworkPolicy ingress or egress rule. `None` lists were absent in the object;
/// `Some(vec![])` were present and empty (which matters only for the original v1beta1 model).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetworkPolicyRule {
    /// `ports`.
    pub ports: Option<Vec<NetworkPolicyPort>>,
    /// `from` (ingress) or `to` (egress).
    pub peers: Option<Vec<NetworkPolicyPeer>>,
}

/// A NetworkPolicy `ports` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NetworkPolicyPort {
    /// Protocol (TCP when not given).
    pub protocol: Protocol,
    /// The port(s).
    pub port: PortSpec,
}

/// The port part of a NetworkPolicy port entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PortSpec {
    /// No `port`: every port of the protocol.
    Any,
    /// A number, or `port`..=`endPort`.
    Range(PortRange),
    /// A named container port.
    Named(String),
}

/// A NetworkPolicy `from`/`to` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkPolicyPeer {
    /// `podSelector` and/or `namespaceSelector`.
    Pods {
        /// `namespaceSelector`; `None` = the policy's own namespace.
        namespaces: Option<Selector>,
        /// `podSelector`; absent = every pod.
        pods: Selector,
    },
    /// `ipBlock`.
    IpBlock(IpBlock),
}

/// An `ipBlock`: `cidr` minus every `except`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IpBlock {
    /// `cidr` (host bits cleared).
    pub cidr: IpNet,
    /// `except` (host bits cleared), each strictly inside `cidr`.
    pub except: Vec<IpNet>,
}

impl IpBlock {
    /// Whether `ip` is in the block.
    pub fn contains(&self, ip: &IpAddr) -> bool {
        self.cidr.contains(ip) && !self.except.iter().any(|e| e.contains(ip))
    }
}

/// The tier an admin policy belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AdminTier {
    /// Before NetworkPolicies.
    Admin,
    /// After NetworkPolicies.
    Baseline,
}

/// An admin rule's action (`Accept` of ClusterNetworkPolicy is `Allow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Allow / Accept.
    Allow,
    /// Deny.
    Deny,
    /// Pass to the next tier.
    Pass,
}

/// An AdminNetworkPolicy, BaselineAdminNetworkPolicy or ClusterNetworkPolicy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminPolicy {
    /// Which of the three kinds.
    pub kind: PolicyKind,
    /// Name.
    pub name: String,
    /// Tier.
    pub tier: AdminTier,
    /// Priority within its tier (0 for the BaselineAdminNetworkPolicy).
    pub priority: i32,
    /// Which pods it applies to.
    pub subject: Subject,
    /// Ingress rules, in precedence order.
    pub ingress: Vec<AdminRule>,
    /// Egress rules, in precedence order.
    pub egress: Vec<AdminRule>,
    /// Where it was read.
    pub origin: Origin,
}

impl AdminPolicy {
    /// This policy's reference.
    pub fn reference(&self) -> PolicyRef {
        PolicyRef {
            kind: self.kind,
            namespace: None,
            name: self.name.clone(),
        }
    }
    /// The rules of one direction.
    pub fn rules(&self, dir: Direction) -> &[AdminRule] {
        match dir {
            Direction::Ingress => &self.ingress,
            Direction::Egress => &self.egress,
        }
    }
    /// The action as this kind spells it.
    pub fn action_name(&self, action: Action) -> &'static str {
        match (action, self.kind) {
            (Action::Allow, PolicyKind::ClusterNetworkPolicy) => "Accept",
            (Action::Allow, _) => "Allow",
            (Action::Deny, _) => "Deny",
            (Action::Pass, _) => "Pass",
        }
    }
}

/// An admin policy subject (host-network pods are never selected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// Every pod in the selected namespaces.
    Namespaces(Selector),
    /// Selected pods in the selected namespaces.
    Pods {
        /// Namespace selector.
        namespaces: Selector,
        /// Pod selector.
        pods: Selector,
    },
}

/// One admin rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminRule {
    /// Optional rule name.
    pub name: Option<String>,
    /// What a match does.
    pub action: Action,
    /// `from`/`to`: the rule matches if any peer does.
    pub peers: Vec<AdminPeer>,
    /// `ports` / `protocols`; `None` = every port and protocol.
    pub ports: Option<Vec<AdminPort>>,
}

/// An admin rule peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminPeer {
    /// Every (non-host-network) pod of the matching namespaces.
    Namespaces(NamespaceMatch),
    /// Selected pods of the matching namespaces.
    Pods {
        /// Which namespaces.
        namespaces: NamespaceMatch,
        /// Which pods in them.
        pods: Selector,
    },
    /// The addresses of the selected nodes (egress only).
    Nodes(Selector),
    /// CIDRs (egress only); pod and node addresses included.
    Networks(Vec<IpNet>),
    /// Domain names (ClusterNetworkPolicy egress, Accept rules only): the addresses a DNS
    /// map gives for the names the patterns match; with no map, it fails closed.
    DomainNames(Vec<crate::dns::DomainPattern>),
    /// A peer whose only fields Palisade does not implement (fields of a newer API
    /// version); it fails closed. The field names are kept for the explanation.
    Unsupported(Vec<String>),
}

/// How an admin peer selects namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceMatch {
    /// A label selector.
    Selector(Selector),
    /// KEP `related: Self`: the subject pod's namespace.
    SelfNamespace,
    /// KEP `related: NotSelf`: every other namespace.
    NotSelfNamespace,
    /// KEP `sameLabels`: namespaces with the same values as the subject's namespace for all keys.
    SameLabels(Vec<String>),
    /// KEP `notSameLabels`: namespaces that `SameLabels` with these keys would not select.
    NotSameLabels(Vec<String>),
}

/// An admin rule port entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AdminPort {
    /// Ports of one protocol (`portNumber`, `portRange`, or a CNP protocol entry; a CNP
    /// protocol without `destinationPort` means every port).
    Ports {
        /// Protocol.
        protocol: Protocol,
        /// `None` = every port of the protocol.
        range: Option<PortRange>,
    },
    /// A named container port of the destination pod.
    Named(String),
}

/// Everything loaded: the cluster state and its policies.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// Namespaces (declared, and implied by the objects in them).
    pub namespaces: Vec<Namespace>,
    /// Pods.
    pub pods: Vec<Pod>,
    /// Nodes.
    pub nodes: Vec<Node>,
    /// NetworkPolicies.
    pub network_policies: Vec<NetworkPolicy>,
    /// AdminNetworkPolicies, BaselineAdminNetworkPolicies and ClusterNetworkPolicies.
    pub admin_policies: Vec<AdminPolicy>,
    /// Policies annotated [`STAGED_ANNOTATION`]: evaluated on request, never enforced.
    pub staged: Staged,
    /// Services.
    pub services: Vec<crate::Service>,
    /// EndpointSlices.
    pub endpoint_slices: Vec<crate::EndpointSlice>,
    /// The DNS answers `domainNames` peers are matched with offline (`--dns`); `None`: no
    /// map, and such peers fail closed.
    pub dns: Option<std::sync::Arc<crate::dns::DnsMap>>,
}

/// The annotation that stages a policy: with the value `"true"` the policy is evaluated
/// (to show what it would change) but not enforced.
pub const STAGED_ANNOTATION: &str = "palisade.dev/staged";

/// Staged policies, kept apart from the enforced ones.
#[derive(Debug, Clone, Default)]
pub struct Staged {
    /// Staged NetworkPolicies.
    pub network_policies: Vec<NetworkPolicy>,
    /// Staged admin policies.
    pub admin_policies: Vec<AdminPolicy>,
}

impl Staged {
    /// Whether no policy is staged.
    pub fn is_empty(&self) -> bool {
        self.network_policies.is_empty() && self.admin_policies.is_empty()
    }
}

/// Sorts `items` stably by the names `key` gives, comparing names gathered once: the
/// items, large and scattered in memory, are neither read again nor moved while sorting.
fn sort_by_names<T>(items: &mut Vec<T>, key: impl Fn(&T) -> (&str, &str)) {
    let mut order: Vec<(&str, &str, usize)> = (items.iter().enumerate())
        .map(|(i, item)| {
            let (a, b) = key(item);
            (a, b, i)
        })
        .collect();
    order.sort_unstable();
    if order.iter().enumerate().all(|(at, &(_, _, i))| at == i) {
        return;
    }
    let order: Vec<usize> = order.into_iter().map(|(_, _, i)| i).collect();
    let mut slots: Vec<Option<T>> = items.drain(..).map(Some).collect();
    items.extend(order.into_iter().filter_map(|i| slots[i].take()));
}

impl Cluster {
    /// Puts every list in its canonical order (namespace/name, kind/name), as loading does.
    pub fn sort(&mut self) {
        self.namespaces.sort_by(|a, b| a.name.cmp(&b.name));
        sort_by_names(&mut self.pods, |p| (&p.namespace, &p.name));
        self.nodes.sort_by(|a, b| a.name.cmp(&b.name));
        self.network_policies
            .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        self.admin_policies
            .sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
        self.services
            .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        self.endpoint_slices
            .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    }

    /// The cluster as it would be with the staged policies enforced too.
    pub fn with_staged(&self) -> Cluster {
        let mut c = self.clone();
        let staged = std::mem::take(&mut c.staged);
        c.network_policies.extend(staged.network_policies);
        c.admin_policies.extend(staged.admin_policies);
        c
    }

    /// Whether nothing at all was loaded.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
            && self.pods.is_empty()
            && self.nodes.is_empty()
            && self.network_policies.is_empty()
            && self.admin_policies.is_empty()
            && self.staged.is_empty()
            && self.services.is_empty()
            && self.endpoint_slices.is_empty()
    }

    /// The IPs that more than one non-host-network pod has, each with those pods in
    /// `pods` order (see [`duplicate_pod_ips`]).
    pub fn duplicate_pod_ips(&self) -> BTreeMap<IpAddr, Vec<&Pod>> {
        duplicate_pod_ips(&self.pods)
    }
}

/// The IPs that more than one non-host-network pod has, each with those pods in input
/// order. The API server accepts such pods, but a connection to or from a shared IP cannot
/// be attributed to one pod: the engine and the nftables backend fail closed for them
/// (docs/semantics.md, "Pods that share an IP"). Host-network pods share their node's IP
/// by design and are not counted.
pub fn duplicate_pod_ips<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
) -> BTreeMap<IpAddr, Vec<&'a Pod>> {
    // Every (address, position, pod), sorted: the holders of an address are adjacent, in
    // input order; only the shared addresses get a list.
    let mut held: Vec<(IpAddr, usize, &Pod)> = (pods.into_iter().enumerate())
        .filter(|(_, p)| !p.host_network)
        .flat_map(|(i, p)| p.ips.iter().map(move |ip| (*ip, i, p)))
        .collect();
    held.sort_unstable_by_key(|&(ip, i, _)| (ip, i));
    let mut by_ip: BTreeMap<IpAddr, Vec<&Pod>> = BTreeMap::new();
    for holders in held.chunk_by(|a, b| a.0 == b.0) {
        let mut pods: Vec<&Pod> = holders.iter().map(|&(_, _, p)| p).collect();
        // A pod that lists an address twice holds it once.
        pods.dedup_by(|a, b| std::ptr::eq(*a, *b));
        if pods.len() > 1 {
            by_ip.insert(holders[0].0, pods);
        }
    }
    by_ip
}
