//! Services as destinations: where a connection to a Service address lands, and the verdict
//! at each endpoint.
//!
//! Policy is decided after kube-proxy's DNAT: a connection to a Service address and port is
//! the connection to the chosen endpoint at its target port. Endpoints come from the
//! Service's EndpointSlices; when the input has none for a Service with a selector (manifests
//! before deployment), they are derived as the endpoint-slice controller would: the ready
//! pods of the namespace that the selector matches, a named `targetPort` resolved on each
//! pod (name and protocol), so one Service port may land on different numbers.

use std::net::IpAddr;

use palisade_model::{AddressType, Port, Protocol, Service, ServicePort, TargetPort};

use crate::eval::{Endpoint, EndpointKind, Flow};
use crate::state::{Engine, PodId};
use crate::verdict::Verdict;

/// Where the endpoints of a Service came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EndpointSource {
    /// The Service's EndpointSlices in the input.
    Slices,
    /// Derived from the selector and the pods (the input has no EndpointSlice for it).
    Derived,
    /// Neither: the Service has no selector and no EndpointSlice.
    None,
}

impl EndpointSource {
    /// `slices`, `derived` or `none`, as reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            EndpointSource::Slices => "slices",
            EndpointSource::Derived => "derived",
            EndpointSource::None => "none",
        }
    }
}

/// One endpoint of one Service port: the address and port a connection is sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServiceEndpoint {
    /// What the address is (a pod, a host, or outside the cluster) and the address.
    pub at: Endpoint,
    /// The port on the endpoint (the target port).
    pub port: Port,
}

/// The endpoints of one Service port, in one address family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortEndpoints {
    /// The Service port.
    pub port: ServicePort,
    /// Its ready endpoints, in pod (or address) order.
    pub endpoints: Vec<ServiceEndpoint>,
    /// Pods the selector matches that do not serve this port: `(pod, why)` (a named
    /// target port the pod does not declare for the protocol; not ready).
    pub left_out: Vec<(PodId, &'static str)>,
}

/// A client's connection through a Service port to one endpoint, decided.
#[derive(Debug, Clone)]
pub struct EndpointVerdict {
    /// The endpoint.
    pub endpoint: ServiceEndpoint,
    /// The connection as policy sees it (after DNAT).
    pub flow: Flow,
    /// Whether the client is the endpoint itself (hairpin): subject to policy.
    pub hairpin: bool,
    /// The verdict.
    pub verdict: Verdict,
}

/// How many of a Service port's endpoints a client may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reach {
    /// Every endpoint (and there is at least one).
    All,
    /// Some but not all: some connections fail, depending on the endpoint chosen.
    Some,
    /// None (or the port has no endpoint).
    None,
}

impl Reach {
    /// Of `allowed` out of `total` endpoints.
    pub fn of(allowed: usize, total: usize) -> Reach {
        match allowed {
            0 => Reach::None,
            n if n == total => Reach::All,
            _ => Reach::Some,
        }
    }

    /// `all`, `some` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reach::All => "all",
            Reach::Some => "some",
            Reach::None => "none",
        }
    }
}

impl Engine {
    /// The Service `namespace/name`.
    pub fn service(&self, namespace: &str, name: &str) -> Option<&Service> {
        self.cluster
            .services
            .iter()
            .find(|s| s.namespace == namespace && s.name == name)
    }

    /// The Service a client reaches at `ip`: one whose cluster IP, external IP or load
    /// balancer address it is.
    pub fn service_at(&self, ip: IpAddr) -> Option<&Service> {
        self.cluster
            .services
            .iter()
            .find(|s| s.cluster_ips.contains(&ip) || s.external_ips.contains(&ip))
    }

    /// Where the endpoints of `svc` come from.
    pub fn endpoint_source(&self, svc: &Service) -> EndpointSource {
        if self.slices_of(svc).next().is_some() {
            EndpointSource::Slices
        } else if svc.selector.is_some() {
            EndpointSource::Derived
        } else {
            EndpointSource::None
        }
    }

    fn slices_of<'a>(
        &'a self,
        svc: &'a Service,
    ) -> impl Iterator<Item = &'a palisade_model::EndpointSlice> + 'a {
        self.cluster.endpoint_slices.iter().filter(move |s| {
            s.namespace == svc.namespace && s.service.as_deref() == Some(svc.name.as_str())
        })
    }

    /// The endpoints of every port of `svc` in one address family (`v6`). An ExternalName
    /// Service has none.
    pub fn service_endpoints(&self, svc: &Service, v6: bool) -> Vec<PortEndpoints> {
        let source = self.endpoint_source(svc);
        svc.ports
            .iter()
            .map(|port| match source {
                EndpointSource::Slices => self.slice_endpoints(svc, port, v6),
                EndpointSource::Derived => self.derived_endpoints(svc, port, v6),
                EndpointSource::None => PortEndpoints {
                    port: port.clone(),
                    endpoints: Vec::new(),
                    left_out: Vec::new(),
                },
            })
            .collect()
    }

    /// A port's endpoints from the EndpointSlices: the slice port of the same name and
    /// protocol, the first address of each ready endpoint (as kube-proxy uses them).
    fn slice_endpoints(&self, svc: &Service, port: &ServicePort, v6: bool) -> PortEndpoints {
        let want = if v6 {
            AddressType::Ipv6
        } else {
            AddressType::Ipv4
        };
        let name = port.name.as_deref().unwrap_or("");
        let mut endpoints = Vec::new();
        for slice in self.slices_of(svc).filter(|s| s.address_type == want) {
            let Some(target) = slice
                .ports
                .iter()
                .find(|p| p.name == name && p.protocol == port.protocol)
                .and_then(|p| p.port)
            else {
                continue;
            };
            for e in slice.endpoints.iter().filter(|e| e.ready) {
                if let Some(ip) = e.addresses.first() {
                    endpoints.push(ServiceEndpoint {
                        at: self.endpoint_for_ip(*ip),
                        port: target,
                    });
                }
            }
        }
        endpoints.sort_by_key(|e| (e.at.ip, e.port));
        endpoints.dedup();
        PortEndpoints {
            port: port.clone(),
            endpoints,
            left_out: Vec::new(),
        }
    }

    /// A port's endpoints derived from the selector, as the endpoint-slice controller
    /// would: ready pods of the namespace whose labels the selector matches, with an
    /// address of the family, the target port resolved on each.
    fn derived_endpoints(&self, svc: &Service, port: &ServicePort, v6: bool) -> PortEndpoints {
        let mut out = PortEndpoints {
            port: port.clone(),
            endpoints: Vec::new(),
            left_out: Vec::new(),
        };
        let (Some(selector), Some(ns)) = (&svc.selector, self.namespace_id(&svc.namespace)) else {
            return out;
        };
        for pod in self.ns_pods[ns].pods() {
            let p = &self.cluster.pods[pod];
            if !selector.iter().all(|(k, v)| p.labels.get(k) == Some(v)) {
                continue;
            }
            if !p.ready {
                out.left_out.push((pod, "not ready"));
                continue;
            }
            let Some(at) = self
                .endpoint_for_pod(pod, Some(v6))
                .filter(|e| e.ip.is_ipv6() == v6)
            else {
                continue;
            };
            let target = match &port.target_port {
                TargetPort::Number(n) => Some(*n),
                TargetPort::Name(name) => p
                    .ports
                    .iter()
                    .find(|c| c.name.as_deref() == Some(name) && c.protocol == port.protocol)
                    .map(|c| c.port),
            };
            match target {
                Some(port) => out.endpoints.push(ServiceEndpoint { at, port }),
                None => out
                    .left_out
                    .push((pod, "declares no container port of that name and protocol")),
            }
        }
        out
    }

    /// The address family a client at `src` reaches `svc` in: the client's own family
    /// when the Service serves it, else the Service's first.
    pub fn service_family(&self, svc: &Service, src: Endpoint) -> bool {
        let v6 = src.ip.is_ipv6();
        match svc.families_v6.contains(&v6) {
            true => v6,
            false => svc.families_v6.first().copied().unwrap_or(false),
        }
    }

    /// Decides a client's connection to every endpoint of one Service port. `src` must be
    /// in the family of `endpoints`.
    pub fn evaluate_service_port(
        &self,
        src: Endpoint,
        endpoints: &PortEndpoints,
    ) -> Vec<EndpointVerdict> {
        endpoints
            .endpoints
            .iter()
            .map(|e| {
                let flow = Flow {
                    src,
                    dst: e.at,
                    protocol: endpoints.port.protocol,
                    port: e.port.get(),
                };
                EndpointVerdict {
                    endpoint: *e,
                    hairpin: hairpin(&flow),
                    verdict: self.evaluate_through_service(&flow),
                    flow,
                }
            })
            .collect()
    }

    /// Decides a connection that reached its destination through a Service address: as
    /// [`Engine::evaluate`], except that a pod reaching itself this way (hairpin) is
    /// subject to policy like any other client.
    pub fn evaluate_through_service(&self, flow: &Flow) -> Verdict {
        match hairpin(flow) {
            true => self.evaluate_sides(flow),
            false => self.evaluate(flow),
        }
    }
}

impl Engine {
    /// The node an endpoint runs on, when known (a pod's node, or a node's own address).
    pub fn endpoint_node(&self, endpoint: &ServiceEndpoint) -> Option<usize> {
        match endpoint.at.kind {
            EndpointKind::Pod(p) => self.pod_node[p],
            EndpointKind::Host(n) => n,
            EndpointKind::External => None,
        }
    }

    /// The source the policy at `endpoint` decides a connection from `client` with, when
    /// the connection came in through a node port (or a load balancer) of a Service on
    /// node `via`; `None` when that endpoint does not serve it. With
    /// `externalTrafficPolicy: Local` only endpoints on `via` serve, and they see the
    /// client. With `Cluster` every endpoint serves: one on another node receives the
    /// connection masqueraded to `via`'s address; one on `via` itself is decided for the
    /// client's address, as the node's filter runs before the masquerade (the endpoint
    /// still sees `via`'s address).
    pub fn node_port_source(
        &self,
        policy: palisade_model::ExternalTrafficPolicy,
        via: usize,
        client: Endpoint,
        endpoint: &ServiceEndpoint,
    ) -> Option<Endpoint> {
        let local = self.endpoint_node(endpoint) == Some(via);
        match policy {
            palisade_model::ExternalTrafficPolicy::Local => local.then_some(client),
            palisade_model::ExternalTrafficPolicy::Cluster if local => Some(client),
            palisade_model::ExternalTrafficPolicy::Cluster => {
                let v6 = endpoint.at.ip.is_ipv6();
                let node = &self.cluster.nodes[via];
                let ip = node.addresses.iter().find(|ip| ip.is_ipv6() == v6)?;
                Some(self.endpoint_for_ip(*ip))
            }
        }
    }
}

/// Whether `flow` goes from a pod to itself.
fn hairpin(flow: &Flow) -> bool {
    matches!((flow.src.kind, flow.dst.kind), (EndpointKind::Pod(a), EndpointKind::Pod(b)) if a == b)
}

/// Whether `protocol`/`port` picks the Service port `p` (`spec` a number or a port name).
pub fn picks_port(p: &ServicePort, spec: &str, protocol: Option<Protocol>) -> bool {
    let by_name = p.name.as_deref() == Some(spec);
    let by_number = spec.parse::<u16>().is_ok_and(|n| p.port.get() == n);
    (by_name || by_number) && protocol.is_none_or(|want| p.protocol == want)
}
