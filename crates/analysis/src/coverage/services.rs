//! Exposure through Services: the NodePort and LoadBalancer Services (and Services with
//! external IPs) that carry connections from outside the cluster, and which of their
//! endpoints admit them.
//!
//! What an endpoint's ingress is decided for depends on `externalTrafficPolicy`
//! ([`Engine::node_port_source`]): with `Cluster`, a connection received by another node is
//! masqueraded to that node's address, and one received by the endpoint's own node is
//! decided for the client's address (the filter runs before the masquerade); with `Local`
//! only the endpoint's own node serves it, with the client's address. An outside client is
//! every region the policies' CIDRs cut the outside into.

use std::net::IpAddr;

use palisade_engine::{Endpoint, EndpointKind, Reach, ServiceEndpoint};
use palisade_model::{ExternalTrafficPolicy, Origin, Service, ServicePort, ServiceType};
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::Analysis;
use crate::universe::Universe;

/// The source address an endpoint sees for a connection that came in from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeenSource {
    /// `externalTrafficPolicy: Cluster`: the address of the node that received it, when
    /// that is not the endpoint's own node; the client's own address when it is.
    Node,
    /// The client's own address (`externalTrafficPolicy: Local`).
    Client,
}

impl SeenSource {
    /// `node` or `client`.
    pub fn as_str(self) -> &'static str {
        match self {
            SeenSource::Node => "node",
            SeenSource::Client => "client",
        }
    }
}

/// Whether one endpoint admits the outside connections of a Service port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointAdmission {
    /// `namespace/pod:port`, or `address:port`.
    pub endpoint: String,
    /// Of the source addresses it may see, how many it admits; `None` when they are not
    /// known (traffic policy `Cluster` and no node with an address of the family).
    pub reach: Option<Reach>,
    /// The source addresses it admits (node addresses, or outside representatives).
    pub admitted: Vec<IpAddr>,
    /// How many source addresses were tried.
    pub tried: usize,
}

/// One exposed Service port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExposedServicePort {
    /// The Service port.
    pub port: ServicePort,
    /// Where outside clients connect: `node port 30080`, `203.0.113.7:80`.
    pub via: Vec<String>,
    /// Its endpoints, each with what it admits.
    pub endpoints: Vec<EndpointAdmission>,
}

/// A Service that carries connections from outside the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceExposure {
    /// `namespace/name`.
    pub service: String,
    /// `spec.type`.
    pub service_type: ServiceType,
    /// `spec.externalTrafficPolicy`.
    pub traffic_policy: ExternalTrafficPolicy,
    /// What address its endpoints see.
    pub seen: SeenSource,
    /// Its exposed ports.
    pub ports: Vec<ExposedServicePort>,
    /// Where the Service was read.
    pub origin: Origin,
}

impl ServiceExposure {
    /// The sentence saying which source address the endpoints decide on.
    pub fn seen_text(&self) -> &'static str {
        match self.seen {
            SeenSource::Node => {
                "externalTrafficPolicy Cluster: through another node the connection is masqueraded and decided for that node's address; through the endpoint's own node it is decided for the client's address"
            }
            SeenSource::Client => {
                "externalTrafficPolicy Local: the endpoint sees the client's own address"
            }
        }
    }
}

/// Where outside clients reach `port` of `svc`.
fn via(svc: &Service, port: &ServicePort) -> Vec<String> {
    let mut out = Vec::new();
    if svc.service_type.exposed()
        && let Some(n) = port.node_port
    {
        out.push(format!("node port {n}"));
    }
    out.extend(svc.external_ips.iter().map(|ip| match ip {
        IpAddr::V6(_) => format!("[{ip}]:{}", port.port),
        IpAddr::V4(_) => format!("{ip}:{}", port.port),
    }));
    out
}

impl Analysis<'_> {
    /// The Services that carry connections from outside the cluster, in namespace/name
    /// order.
    pub(super) fn service_exposure(&self, universe: &Universe) -> Vec<ServiceExposure> {
        let mut services: Vec<&Service> = self
            .engine
            .cluster()
            .services
            .iter()
            .filter(|s| s.service_type != ServiceType::ExternalName)
            .filter(|s| s.service_type.exposed() || !s.external_ips.is_empty())
            .collect();
        services.sort_by_key(|s| (&s.namespace, &s.name));
        services
            .into_iter()
            .map(|svc| self.exposure_of(universe, svc))
            .filter(|e| !e.ports.is_empty())
            .collect()
    }

    fn exposure_of(&self, universe: &Universe, svc: &Service) -> ServiceExposure {
        let seen = match svc.external_traffic_policy {
            ExternalTrafficPolicy::Cluster => SeenSource::Node,
            ExternalTrafficPolicy::Local => SeenSource::Client,
        };
        let mut ports: Vec<ExposedServicePort> = svc
            .ports
            .iter()
            .filter(|p| !via(svc, p).is_empty())
            .map(|p| ExposedServicePort {
                port: p.clone(),
                via: via(svc, p),
                endpoints: Vec::new(),
            })
            .collect();
        for &v6 in &svc.families_v6 {
            for each in self.engine.service_endpoints(svc, v6) {
                let Some(out) = ports.iter_mut().find(|p| p.port == each.port) else {
                    continue;
                };
                for e in &each.endpoints {
                    let sources = self.seen_sources(universe, svc, e, v6);
                    let mut admitted = Vec::new();
                    for src in &sources {
                        let one = palisade_engine::PortEndpoints {
                            port: each.port.clone(),
                            endpoints: vec![*e],
                            left_out: Vec::new(),
                        };
                        if self
                            .engine
                            .evaluate_service_port(*src, &one)
                            .iter()
                            .all(|v| v.verdict.allowed)
                        {
                            admitted.push(src.ip);
                        }
                    }
                    let at = match e.at.kind {
                        EndpointKind::Pod(id) => self.engine.cluster().pods[id].key(),
                        _ => e.at.ip.to_string(),
                    };
                    out.endpoints.push(EndpointAdmission {
                        endpoint: format!("{at}:{}", e.port),
                        reach: (!sources.is_empty())
                            .then(|| Reach::of(admitted.len(), sources.len())),
                        admitted,
                        tried: sources.len(),
                    });
                }
            }
        }
        ServiceExposure {
            service: svc.key(),
            service_type: svc.service_type,
            traffic_policy: svc.external_traffic_policy,
            seen,
            ports,
            origin: svc.origin.clone(),
        }
    }

    /// The sources an endpoint's ingress may be decided for in one family, over every node
    /// that receives the Service's outside connections ([`Engine::node_port_source`]): the
    /// outside representatives, and with `Cluster` the other nodes' addresses. Where the
    /// endpoint's node is not known, every node's address and every outside client.
    fn seen_sources(
        &self,
        universe: &Universe,
        svc: &Service,
        endpoint: &ServiceEndpoint,
        v6: bool,
    ) -> Vec<Endpoint> {
        let clients: Vec<Endpoint> = universe
            .peers
            .iter()
            .filter(|p| p.kind == EndpointKind::External && p.ip.is_ipv6() == v6)
            .copied()
            .collect();
        let Some(own) = self.engine.endpoint_node(endpoint) else {
            return (0..self.engine.cluster().nodes.len())
                .filter_map(|n| self.node_address(n, v6))
                .chain(clients)
                .collect();
        };
        let mut out = Vec::new();
        for via in 0..self.engine.cluster().nodes.len() {
            let mut from = |client: Endpoint| {
                if let Some(src) =
                    self.engine
                        .node_port_source(svc.external_traffic_policy, via, client, endpoint)
                    && !out.contains(&src)
                {
                    out.push(src);
                }
            };
            match via == own {
                true => clients.iter().for_each(|c| from(*c)),
                // Any client stands for all: the source is the node's address.
                false => {
                    if let Some(c) = clients.first() {
                        from(*c);
                    }
                }
            }
        }
        out
    }

    /// Node `n`'s own address of the family, as an endpoint.
    fn node_address(&self, n: usize, v6: bool) -> Option<Endpoint> {
        let ip = self.engine.cluster().nodes[n]
            .addresses
            .iter()
            .find(|ip| ip.is_ipv6() == v6)?;
        let e = self.engine.endpoint_for_ip(*ip);
        matches!(e.kind, EndpointKind::Host(_)).then_some(e)
    }
}

/// `{"endpoint", "reach", "admitted", "tried"}`.
impl Serialize for EndpointAdmission {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("endpoint", &self.endpoint)?;
        m.serialize_entry("reach", &self.reach.map(Reach::as_str))?;
        m.serialize_entry("admitted", &self.admitted)?;
        m.serialize_entry("tried", &self.tried)?;
        m.end()
    }
}

/// `{"port", "name", "protocol", "nodePort", "via", "endpoints"}`.
impl Serialize for ExposedServicePort {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("port", &self.port.port.get())?;
        m.serialize_entry("name", &self.port.name)?;
        m.serialize_entry("protocol", self.port.protocol.as_str())?;
        m.serialize_entry("nodePort", &self.port.node_port.map(|p| p.get()))?;
        m.serialize_entry("via", &self.via)?;
        m.serialize_entry("endpoints", &self.endpoints)?;
        m.end()
    }
}

/// `{"service", "type", "externalTrafficPolicy", "endpointsSee", "ports", "origin"}`.
impl Serialize for ServiceExposure {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("service", &self.service)?;
        m.serialize_entry("type", self.service_type.as_str())?;
        m.serialize_entry("externalTrafficPolicy", self.traffic_policy.as_str())?;
        m.serialize_entry("endpointsSee", self.seen.as_str())?;
        m.serialize_entry("ports", &self.ports)?;
        m.serialize_entry(
            "origin",
            &serde_json::json!({"file": &*self.origin.file, "line": self.origin.line}),
        )?;
        m.end()
    }
}
