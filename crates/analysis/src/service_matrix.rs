//! Who reaches each Service port: for every source pod and every Service port, how many of
//! the port's endpoints the source may connect to through the Service.
//!
//! Endpoints are resolved once per Service and family ([`Engine::service_endpoints`]). Sources
//! that no policy tells apart (the matrix classes, split by node where the node-local
//! exemption matters) share one evaluation of each port, by the class's representative.
//! That holds for hairpin too: a pod reaching itself through a Service is subject to policy
//! ([`Engine::evaluate_through_service`]), so its connection to itself is decided as the
//! representative's connection to it, or to the representative itself.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use palisade_engine::{Endpoint, EndpointKind, Flow, PodId, PortEndpoints, Reach, ServiceEndpoint};
use palisade_model::{ServicePort, ServiceType};

use crate::Analysis;

/// One column of the Service matrix: a port of a Service (or the whole Service when it has
/// no port), with its endpoints in each family.
#[derive(Debug, Clone)]
pub struct ServiceColumn {
    /// The Service: an index into the cluster's `services`.
    pub service: usize,
    /// The port; `None` for a Service without ports.
    pub port: Option<ServicePort>,
    /// Why no source's connection to it can be decided, if none can.
    pub not_evaluable: Option<NotEvaluable>,
    /// The port's endpoints in IPv4 (`[0]`) and IPv6 (`[1]`).
    pub endpoints: [Vec<ServiceEndpoint>; 2],
}

/// Why a cell of the Service matrix is not decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotEvaluable {
    /// An ExternalName Service: a DNS alias, resolved outside the cluster's policy.
    ExternalName,
    /// A Service without ports: clients pick the port on the endpoint themselves.
    NoPorts,
    /// The source has no address of the family the Service serves it in (`true`: IPv6).
    NoAddress(bool),
}

impl NotEvaluable {
    /// Why, in a few words, as reports print it.
    pub fn reason(self) -> &'static str {
        match self {
            NotEvaluable::ExternalName => "ExternalName Service: a DNS alias, not evaluated",
            NotEvaluable::NoPorts => "the Service has no ports",
            NotEvaluable::NoAddress(false) => "the source has no IPv4 address",
            NotEvaluable::NoAddress(true) => "the source has no IPv6 address",
        }
    }
}

/// A decided cell: how many of the port's endpoints the source reaches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortReach {
    /// All, some or none (none also when the port has no endpoint).
    pub reach: Reach,
    /// Endpoints the source may connect to.
    pub allowed: usize,
    /// Endpoints of the port in the family used (0: the port has no endpoint).
    pub total: usize,
    /// For `some`, the endpoints the source may not connect to, in endpoint order (for
    /// `none` every endpoint is denied, and none is listed).
    pub denied: Vec<ServiceEndpoint>,
    /// Whether the source is itself one of the endpoints (its connection to itself through
    /// the Service is subject to policy).
    pub hairpin: bool,
    /// The family used: `true` for IPv6.
    pub v6: bool,
}

/// One cell of the Service matrix.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ServiceCell {
    /// Decided.
    Decided(PortReach),
    /// Not decided, and why.
    NotEvaluable(NotEvaluable),
}

/// The cells for some sources × some Service ports.
#[derive(Debug, Clone)]
pub struct ServiceMatrix {
    /// The rows: source pods, in the order given.
    pub sources: Vec<PodId>,
    /// The columns, Service by Service in the order given, ports in the Service's order.
    pub columns: Vec<ServiceColumn>,
    /// `[row * columns + column]`.
    cells: Vec<ServiceCell>,
}

impl ServiceMatrix {
    /// The cell of `sources[row]` and `columns[col]`.
    pub fn cell(&self, row: usize, col: usize) -> &ServiceCell {
        &self.cells[row * self.columns.len() + col]
    }
}

impl Analysis<'_> {
    /// The columns for `services` (indices into the cluster's `services`): one per port,
    /// with its endpoints resolved in both families.
    pub fn service_columns(&self, services: &[usize]) -> Vec<ServiceColumn> {
        let mut out = Vec::new();
        for &s in services {
            let svc = &self.engine.cluster().services[s];
            let not_evaluable = if svc.service_type == ServiceType::ExternalName {
                Some(NotEvaluable::ExternalName)
            } else if svc.ports.is_empty() {
                Some(NotEvaluable::NoPorts)
            } else {
                None
            };
            if svc.ports.is_empty() {
                // A column for the Service itself, so that it is listed.
                out.push(ServiceColumn {
                    service: s,
                    port: None,
                    not_evaluable,
                    endpoints: [Vec::new(), Vec::new()],
                });
                continue;
            }
            let resolve = |v6: bool| -> Vec<PortEndpoints> {
                match not_evaluable {
                    Some(_) => Vec::new(),
                    None => self.engine.service_endpoints(svc, v6),
                }
            };
            let (mut v4, mut v6) = (resolve(false).into_iter(), resolve(true).into_iter());
            for port in &svc.ports {
                let next = |it: &mut std::vec::IntoIter<PortEndpoints>| {
                    it.next().map(|p| p.endpoints).unwrap_or_default()
                };
                out.push(ServiceColumn {
                    service: s,
                    port: Some(port.clone()),
                    not_evaluable,
                    endpoints: [next(&mut v4), next(&mut v6)],
                });
            }
        }
        out
    }

    /// The Service matrix: every source of `sources` to every port of `services` (indices
    /// into the cluster's `services`).
    pub fn service_matrix(&self, sources: &[PodId], services: &[usize]) -> ServiceMatrix {
        let columns = self.service_columns(services);
        let classes = self.classes_by_node();
        let mut class_of: HashMap<PodId, usize> = HashMap::new();
        for (c, members) in classes.iter().enumerate() {
            for &p in members {
                class_of.insert(p, c);
            }
        }
        // Per (class, column, family): the class representative's verdict per endpoint.
        let mut shared: HashMap<(usize, usize, bool), Vec<bool>> = HashMap::new();
        let mut cells = Vec::with_capacity(sources.len() * columns.len());
        for &pod in sources {
            for (ci, col) in columns.iter().enumerate() {
                let cell = match col.not_evaluable {
                    Some(why) => ServiceCell::NotEvaluable(why),
                    None => {
                        let class = class_of.get(&pod).map(|&c| (c, &classes[c][..]));
                        self.service_cell(pod, class, ci, col, &mut shared)
                    }
                };
                cells.push(cell);
            }
        }
        ServiceMatrix {
            sources: sources.to_vec(),
            columns,
            cells,
        }
    }

    /// One decided (or undecidable) cell; `class` is the source's class and its members.
    fn service_cell(
        &self,
        pod: PodId,
        class: Option<(usize, &[PodId])>,
        ci: usize,
        col: &ServiceColumn,
        shared: &mut HashMap<(usize, usize, bool), Vec<bool>>,
    ) -> ServiceCell {
        let svc = &self.engine.cluster().services[col.service];
        let Some(primary) = self.engine.endpoint_for_pod(pod, None) else {
            return ServiceCell::NotEvaluable(NotEvaluable::NoAddress(false));
        };
        let v6 = self.engine.service_family(svc, primary);
        let Some(src) = self.family_endpoint(pod, v6) else {
            return ServiceCell::NotEvaluable(NotEvaluable::NoAddress(v6));
        };
        let Some(port) = &col.port else {
            return ServiceCell::NotEvaluable(NotEvaluable::NoPorts);
        };
        let eps = &col.endpoints[usize::from(v6)];
        let decide = |src: Endpoint, e: &ServiceEndpoint| -> bool {
            self.engine
                .evaluate_through_service(&Flow {
                    src,
                    dst: e.at,
                    protocol: port.protocol,
                    port: e.port.get(),
                })
                .allowed
        };
        // The class's representative: its first member with an address of the family.
        let shared_verdicts = match class {
            Some((c, members)) => match shared.entry((c, ci, v6)) {
                Entry::Occupied(known) => Some(&*known.into_mut()),
                Entry::Vacant(slot) => members
                    .iter()
                    .find_map(|&m| self.family_endpoint(m, v6))
                    .map(|rep| &*slot.insert(eps.iter().map(|e| decide(rep, e)).collect())),
            },
            None => None,
        };
        let mut denied = Vec::new();
        for (i, e) in eps.iter().enumerate() {
            let ok = match shared_verdicts {
                Some(verdicts) => verdicts[i],
                None => decide(src, e),
            };
            if !ok {
                denied.push(*e);
            }
        }
        let hairpin = eps.iter().any(|e| e.at.kind == EndpointKind::Pod(pod));
        let total = eps.len();
        let allowed = total - denied.len();
        let reach = Reach::of(allowed, total);
        if reach != Reach::Some {
            denied = Vec::new();
        }
        ServiceCell::Decided(PortReach {
            reach,
            allowed,
            total,
            denied,
            hairpin,
            v6,
        })
    }

    /// A pod's endpoint in family `v6`, if it has an address of that family.
    fn family_endpoint(&self, pod: PodId, v6: bool) -> Option<Endpoint> {
        self.engine
            .endpoint_for_pod(pod, Some(v6))
            .filter(|e| e.ip.is_ipv6() == v6)
    }
}
