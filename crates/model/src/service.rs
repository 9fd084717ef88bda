//! Services and EndpointSlices: the destinations a client names instead of a pod address.

use std::net::IpAddr;

use crate::objects::Origin;
use crate::types::{Labels, Port, Protocol};

/// `spec.type` of a Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ServiceType {
    /// `ClusterIP` (the default).
    #[default]
    ClusterIp,
    /// `NodePort`: the cluster IP, and a port on every node.
    NodePort,
    /// `LoadBalancer`: a node port, and the load balancer's addresses.
    LoadBalancer,
    /// `ExternalName`: a DNS alias, with no address or endpoints Palisade can evaluate.
    ExternalName,
}

impl ServiceType {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIp => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
            ServiceType::ExternalName => "ExternalName",
        }
    }

    /// Whether the Service is reachable from outside the cluster through the nodes.
    pub fn exposed(self) -> bool {
        matches!(self, ServiceType::NodePort | ServiceType::LoadBalancer)
    }
}

/// `spec.externalTrafficPolicy`: which source address an endpoint sees for traffic that
/// came in through a node port or a load balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ExternalTrafficPolicy {
    /// `Cluster` (the default): the connection is masqueraded, so the endpoint sees the
    /// address of the node that received it.
    #[default]
    Cluster,
    /// `Local`: only endpoints on the receiving node serve, and they see the client's address.
    Local,
}

impl ExternalTrafficPolicy {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ExternalTrafficPolicy::Cluster => "Cluster",
            ExternalTrafficPolicy::Local => "Local",
        }
    }
}

/// Where a Service port's traffic goes on an endpoint pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TargetPort {
    /// A port number (the Service port itself when `targetPort` is absent).
    Number(Port),
    /// A container port name, resolved per pod (so one Service port may land on different
    /// numbers on different pods).
    Name(String),
}

impl std::fmt::Display for TargetPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetPort::Number(p) => write!(f, "{p}"),
            TargetPort::Name(n) => f.write_str(n),
        }
    }
}

/// One entry of `spec.ports`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServicePort {
    /// The name (required when the Service has more than one port).
    pub name: Option<String>,
    /// The protocol (TCP when not given).
    pub protocol: Protocol,
    /// The port on the Service's addresses.
    pub port: Port,
    /// Where it goes on an endpoint.
    pub target_port: TargetPort,
    /// The port on every node, for NodePort and LoadBalancer Services that have one.
    pub node_port: Option<Port>,
}

impl ServicePort {
    /// `name` (or the number when unnamed), the way a user picks the port: `http`, `80`.
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => n.clone(),
            None => self.port.to_string(),
        }
    }
}

/// A Service (`v1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.type`.
    pub service_type: ServiceType,
    /// `spec.clusterIPs` (or `spec.clusterIP`): empty for a headless Service (`None`) and
    /// for one whose address the API server has not allocated yet (a manifest).
    pub cluster_ips: Vec<IpAddr>,
    /// `spec.clusterIP: None`.
    pub headless: bool,
    /// The address families endpoints are taken in (`spec.ipFamilies`, else those of the
    /// cluster IPs, else IPv4); `true` = IPv6.
    pub families_v6: Vec<bool>,
    /// `spec.selector`: `None` when the Service has none (its endpoints are managed by
    /// hand, through EndpointSlices).
    pub selector: Option<Labels>,
    /// `spec.ports`.
    pub ports: Vec<ServicePort>,
    /// `spec.externalTrafficPolicy` (NodePort and LoadBalancer Services).
    pub external_traffic_policy: ExternalTrafficPolicy,
    /// `spec.externalIPs` and `status.loadBalancer.ingress[].ip`.
    pub external_ips: Vec<IpAddr>,
    /// `spec.externalName`, for an ExternalName Service.
    pub external_name: Option<String>,
    /// Where it was read.
    pub origin: Origin,
}

impl Service {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// `addressType` of an EndpointSlice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressType {
    /// IPv4 addresses.
    Ipv4,
    /// IPv6 addresses.
    Ipv6,
    /// Domain names (deprecated upstream; kube-proxy ignores these slices, and so does Palisade).
    Fqdn,
}

/// One endpoint of an EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceEndpoint {
    /// `addresses`; kube-proxy sends traffic to the first only.
    pub addresses: Vec<IpAddr>,
    /// `conditions.ready` (absent means ready).
    pub ready: bool,
    /// `targetRef` when it names a Pod: its namespace and name.
    pub pod: Option<(String, String)>,
    /// `nodeName`.
    pub node_name: Option<String>,
}

/// One entry of an EndpointSlice's `ports`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlicePort {
    /// The name, matching the Service port's name (empty for an unnamed one).
    pub name: String,
    /// The protocol.
    pub protocol: Protocol,
    /// The port on the endpoints (`None`: unset, which kube-proxy cannot use).
    pub port: Option<Port>,
}

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// An EndpointSlice (`discovery.k8s.io/v1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSlice {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The Service it belongs to (label [`SERVICE_NAME_LABEL`]).
    pub service: Option<String>,
    /// `addressType`.
    pub address_type: AddressType,
    /// `endpoints`.
    pub endpoints: Vec<SliceEndpoint>,
    /// `ports`.
    pub ports: Vec<SlicePort>,
    /// Where it was read.
    pub origin: Origin,
}
