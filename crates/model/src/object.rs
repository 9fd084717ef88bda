//! One shape for an object from source to engine: [`Object`] (a decoded object of any kind
//! the engine reads), [`ObjectKey`] (what identifies it across versions) and [`Kind`] (the
//! one enum of those kinds).

use std::fmt;

use crate::{
    AdminPolicy, Cluster, EndpointSlice, Invalid, Namespace, NetworkPolicy, Node, Origin, Pod,
    PolicyKind, Service,
};

/// Every kind of object the engine reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `v1` Namespace.
    Namespace,
    /// `v1` Pod.
    Pod,
    /// `v1` Node.
    Node,
    /// NetworkPolicy (`networking.k8s.io/v1`, `extensions/v1beta1`).
    NetworkPolicy,
    /// `policy.networking.k8s.io/v1alpha1` AdminNetworkPolicy.
    AdminNetworkPolicy,
    /// `policy.networking.k8s.io/v1alpha2` ClusterNetworkPolicy.
    ClusterNetworkPolicy,
    /// `policy.networking.k8s.io/v1alpha1` BaselineAdminNetworkPolicy.
    BaselineAdminNetworkPolicy,
    /// `v1` Service.
    Service,
    /// `discovery.k8s.io/v1` EndpointSlice.
    EndpointSlice,
}

impl Kind {
    /// The Kubernetes kind name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::Pod => "Pod",
            Kind::Node => "Node",
            Kind::NetworkPolicy => "NetworkPolicy",
            Kind::AdminNetworkPolicy => "AdminNetworkPolicy",
            Kind::ClusterNetworkPolicy => "ClusterNetworkPolicy",
            Kind::BaselineAdminNetworkPolicy => "BaselineAdminNetworkPolicy",
            Kind::Service => "Service",
            Kind::EndpointSlice => "EndpointSlice",
        }
    }

    /// The kind a Kubernetes kind name stands for (`None`: not one the engine reads).
    pub fn from_name(name: &str) -> Option<Kind> {
        Some(match name {
            "Namespace" => Kind::Namespace,
            "Pod" => Kind::Pod,
            "Node" => Kind::Node,
            "NetworkPolicy" => Kind::NetworkPolicy,
            "AdminNetworkPolicy" => Kind::AdminNetworkPolicy,
            "ClusterNetworkPolicy" => Kind::ClusterNetworkPolicy,
            "BaselineAdminNetworkPolicy" => Kind::BaselineAdminNetworkPolicy,
            "Service" => Kind::Service,
            "EndpointSlice" => Kind::EndpointSlice,
            _ => return None,
        })
    }

    /// The kind of an admin policy.
    pub fn of_admin(kind: PolicyKind) -> Kind {
        match kind {
            PolicyKind::AdminNetworkPolicy => Kind::AdminNetworkPolicy,
            PolicyKind::ClusterNetworkPolicy => Kind::ClusterNetworkPolicy,
            PolicyKind::BaselineAdminNetworkPolicy => Kind::BaselineAdminNetworkPolicy,
            // Neither is an admin policy; both are read as NetworkPolicy-tier policies.
            PolicyKind::NetworkPolicy | PolicyKind::NamespaceDefaultDeny => Kind::NetworkPolicy,
        }
    }

    /// The policy kind, for the kinds that are policies.
    pub fn policy_kind(self) -> Option<PolicyKind> {
        match self {
            Kind::NetworkPolicy => Some(PolicyKind::NetworkPolicy),
            Kind::AdminNetworkPolicy => Some(PolicyKind::AdminNetworkPolicy),
            Kind::ClusterNetworkPolicy => Some(PolicyKind::ClusterNetworkPolicy),
            Kind::BaselineAdminNetworkPolicy => Some(PolicyKind::BaselineAdminNetworkPolicy),
            Kind::Namespace | Kind::Pod | Kind::Node | Kind::Service | Kind::EndpointSlice => None,
        }
    }

    /// Whether objects of this kind live in a namespace.
    pub fn namespaced(self) -> bool {
        matches!(
            self,
            Kind::Pod | Kind::NetworkPolicy | Kind::Service | Kind::EndpointSlice
        )
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What identifies an object across versions: kind, namespace (namespaced kinds only),
/// name, and whether it is a staged policy (a staged policy and an enforced one of the same
/// name are two objects). Ordered by kind, then namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The kind.
    pub kind: Kind,
    /// The namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
    /// Whether the object is a staged policy (`palisade.dev/staged: "true"`).
    pub staged: bool,
}

impl ObjectKey {
    /// The key of an enforced object (a namespace is kept only for namespaced kinds).
    pub fn new(kind: Kind, namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            kind,
            namespace: namespace.filter(|_| kind.namespaced()).map(str::to_string),
            name: name.to_string(),
            staged: false,
        }
    }

    /// The staged twin of a policy key (itself for other kinds).
    pub fn as_staged(&self) -> ObjectKey {
        ObjectKey {
            staged: self.staged || self.kind.policy_kind().is_some(),
            ..self.clone()
        }
    }
}

impl fmt::Display for ObjectKey {
    /// `Kind namespace/name` (`Kind name` for cluster-scoped kinds), `(staged)` after a
    /// staged policy: the form diagnostics use.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name)?,
            None => write!(f, "{} {}", self.kind, self.name)?,
        }
        if self.staged {
            f.write_str(" (staged)")?;
        }
        Ok(())
    }
}

/// One decoded object of a kind the engine reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    /// A Namespace.
    Namespace(Namespace),
    /// A Pod.
    Pod(Pod),
    /// A Node.
    Node(Node),
    /// A NetworkPolicy.
    NetworkPolicy(NetworkPolicy),
    /// An admin policy.
    Admin(AdminPolicy),
    /// A Service.
    Service(Service),
    /// An EndpointSlice.
    EndpointSlice(EndpointSlice),
}

impl Object {
    /// The object's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Object::Namespace(_) => Kind::Namespace,
            Object::Pod(_) => Kind::Pod,
            Object::Node(_) => Kind::Node,
            Object::NetworkPolicy(_) => Kind::NetworkPolicy,
            Object::Admin(o) => Kind::of_admin(o.kind),
            Object::Service(_) => Kind::Service,
            Object::EndpointSlice(_) => Kind::EndpointSlice,
        }
    }

    /// The object's key (`staged`: whether it was read as a staged policy).
    pub fn key(&self, staged: bool) -> ObjectKey {
        let (namespace, name) = match self {
            Object::Namespace(o) => (None, &o.name),
            Object::Pod(o) => (Some(&*o.namespace), &o.name),
            Object::Node(o) => (None, &o.name),
            Object::NetworkPolicy(o) => (Some(&*o.namespace), &o.name),
            Object::Admin(o) => (None, &o.name),
            Object::Service(o) => (Some(&*o.namespace), &o.name),
            Object::EndpointSlice(o) => (Some(&*o.namespace), &o.name),
        };
        ObjectKey {
            staged: staged && self.kind().policy_kind().is_some(),
            ..ObjectKey::new(self.kind(), namespace, name)
        }
    }

    /// Where the object was read (`None` for a namespace no manifest declares).
    pub fn origin(&self) -> Option<&Origin> {
        match self {
            Object::Namespace(o) => o.origin.as_ref(),
            Object::Pod(o) => Some(&o.origin),
            Object::Node(o) => Some(&o.origin),
            Object::NetworkPolicy(o) => Some(&o.origin),
            Object::Admin(o) => Some(&o.origin),
            Object::Service(o) => Some(&o.origin),
            Object::EndpointSlice(o) => Some(&o.origin),
        }
    }
}

impl Invalid {
    /// The key of an invalid object, when its kind is one the engine reads and its name can
    /// be read (its namespace defaults to `default`). Staged or not cannot be trusted from
    /// an invalid object: the key is the enforced one, which fails closed.
    pub fn key(&self) -> Option<ObjectKey> {
        let kind = Kind::from_name(&self.kind)?;
        let name = self.name.as_deref()?;
        let namespace = self.namespace.as_deref().unwrap_or("default");
        Some(ObjectKey::new(kind, Some(namespace), name))
    }
}

impl Cluster {
    /// Every object, each with whether it is a staged policy: namespaces, pods, nodes,
    /// NetworkPolicies, admin policies, Services, EndpointSlices, then the staged policies.
    pub fn into_objects(self) -> impl Iterator<Item = (Object, bool)> {
        let staged = self.staged;
        (self.namespaces.into_iter().map(Object::Namespace))
            .chain(self.pods.into_iter().map(Object::Pod))
            .chain(self.nodes.into_iter().map(Object::Node))
            .chain(self.network_policies.into_iter().map(Object::NetworkPolicy))
            .chain(self.admin_policies.into_iter().map(Object::Admin))
            .chain(self.services.into_iter().map(Object::Service))
            .chain(self.endpoint_slices.into_iter().map(Object::EndpointSlice))
            .map(|o| (o, false))
            .chain(
                (staged
                    .network_policies
                    .into_iter()
                    .map(Object::NetworkPolicy))
                .chain(staged.admin_policies.into_iter().map(Object::Admin))
                .map(|o| (o, true)),
            )
    }

    /// Adds one object (`staged`: as a staged policy; ignored for other kinds).
    pub fn push(&mut self, object: Object, staged: bool) {
        match object {
            Object::Namespace(o) => self.namespaces.push(o),
            Object::Pod(o) => self.pods.push(o),
            Object::Node(o) => self.nodes.push(o),
            Object::NetworkPolicy(o) if staged => self.staged.network_policies.push(o),
            Object::NetworkPolicy(o) => self.network_policies.push(o),
            Object::Admin(o) if staged => self.staged.admin_policies.push(o),
            Object::Admin(o) => self.admin_policies.push(o),
            Object::Service(o) => self.services.push(o),
            Object::EndpointSlice(o) => self.endpoint_slices.push(o),
        }
    }
}
