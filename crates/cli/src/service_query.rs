//! `--to` naming a Service (`svc/NS/NAME[:PORT]`, or a Service address): the endpoints a
//! client's connection may land on, each decided, and what the client experiences.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};

use palisade_engine::{Endpoint, EndpointVerdict, Engine, PortEndpoints, Reach, picks_port};
use palisade_model::{Service, ServiceType};

use crate::common::{FlowArgs, endpoint, named, show};
use crate::error::CliError;
use crate::report::ports::PortArg;

/// What `--to` names once its `:PORT` suffix is split off.
enum Target<'a> {
    /// A Service, with the port asked in `--to` (a number or a port name), if any.
    Service(&'a str, &'a str, Option<&'a str>),
    /// An address with a port: a Service address, or any other endpoint.
    Address(IpAddr, u16),
    /// Anything else (`NS/POD`, an address alone).
    Other,
}

fn target(to: &str) -> Target<'_> {
    if let Some(rest) = to.strip_prefix("svc/") {
        let (name, port) = match rest.rsplit_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (rest, None),
        };
        return match name.split_once('/') {
            Some((ns, n)) => Target::Service(ns, n, port),
            None => Target::Service("", name, port),
        };
    }
    match to.parse::<SocketAddr>() {
        Ok(sa) => Target::Address(sa.ip(), sa.port()),
        Err(_) => Target::Other,
    }
}

impl FlowArgs {
    /// The arguments with an `ADDRESS:PORT` destination split into `--to ADDRESS --port
    /// PORT` (a usage error when `--port` is given too).
    pub fn split_address_port(&self) -> Result<FlowArgs, CliError> {
        let Target::Address(ip, port) = target(&self.to) else {
            return Ok(self.clone());
        };
        if self.port.is_some() {
            return Err(CliError::Usage(format!(
                "--to {} names a port, and so does --port: give one",
                self.to
            )));
        }
        let port = port
            .to_string()
            .parse::<PortArg>()
            .map_err(|e| CliError::Usage(format!("--to {}: {e}", self.to)))?;
        Ok(FlowArgs {
            to: ip.to_string(),
            port: Some(port),
            ..self.clone()
        })
    }

    /// The Service question `--to` asks, if it names a Service (`svc/NS/NAME[:PORT]`) or a
    /// Service address (with `--port`, or `:PORT`). Call on [`FlowArgs::split_address_port`]'s result.
    pub fn service_query<'e>(
        &self,
        engine: &'e Engine,
    ) -> Result<Option<ServiceQuery<'e>>, CliError> {
        let (svc, port_spec) = match target(&self.to) {
            Target::Service(ns, name, port) => {
                if ns.is_empty() || name.is_empty() {
                    return Err(CliError::Usage(format!(
                        "--to {}: a Service is svc/NAMESPACE/NAME[:PORT]",
                        self.to
                    )));
                }
                let svc = engine.service(ns, name).ok_or_else(|| {
                    CliError::Usage(format!("no Service {ns}/{name} in the input"))
                })?;
                if port.is_some() && self.port.is_some() {
                    return Err(CliError::Usage(format!(
                        "--to {} names a port, and so does --port: give one",
                        self.to
                    )));
                }
                (svc, port.map(str::to_string))
            }
            _ => {
                let Some(svc) = self
                    .to
                    .parse::<IpAddr>()
                    .ok()
                    .and_then(|ip| engine.service_at(ip))
                else {
                    return Ok(None);
                };
                (svc, None)
            }
        };
        let port_spec = match (port_spec, &self.port) {
            (Some(p), _) => Some(p),
            (None, None) => None,
            (None, Some(PortArg::Number(n))) => Some(n.to_string()),
            (None, Some(PortArg::Named(n))) => Some(n.clone()),
            (None, Some(PortArg::Range(r))) => {
                return Err(CliError::Usage(format!(
                    "--port {r}: a Service is asked about one of its ports (a number or a name), or all of them without --port"
                )));
            }
        };
        if svc.service_type == ServiceType::ExternalName {
            return Err(CliError::Usage(format!(
                "svc/{} is an ExternalName Service (an alias of {}): its connections go to that name's addresses, outside what the Service says; ask about an address with --to ADDRESS",
                svc.key(),
                svc.external_name.as_deref().unwrap_or("?")
            )));
        }
        let picked: Vec<usize> = (svc.ports.iter().enumerate())
            .filter(|(_, p)| match &port_spec {
                Some(spec) => picks_port(p, spec, self.protocol),
                None => self.protocol.is_none_or(|want| p.protocol == want),
            })
            .map(|(i, _)| i)
            .collect();
        if picked.is_empty() {
            let ports: Vec<String> = svc
                .ports
                .iter()
                .map(|p| format!("{} ({} {})", p.label(), p.protocol, p.port))
                .collect();
            return Err(CliError::Usage(format!(
                "svc/{} has no port {}{} (its ports: {})",
                svc.key(),
                port_spec.as_deref().unwrap_or("of that protocol"),
                self.protocol
                    .map(|p| format!(" with protocol {p}"))
                    .unwrap_or_default(),
                if ports.is_empty() {
                    "none".to_string()
                } else {
                    ports.join(", ")
                }
            )));
        }
        let first = endpoint(engine, &self.from, None)?;
        let v6 = engine.service_family(svc, first);
        let src = endpoint(engine, &self.from, Some(v6))?;
        if src.ip.is_ipv6() != v6 {
            return Err(CliError::Usage(format!(
                "{} has no address of the family svc/{} serves",
                self.from,
                svc.key()
            )));
        }
        let all = engine.service_endpoints(svc, v6);
        let ports = picked.into_iter().map(|i| all[i].clone()).collect();
        Ok(Some(ServiceQuery {
            src,
            service: svc,
            ports,
        }))
    }
}

/// A client's question about a Service: the ports asked, each with its endpoints.
pub struct ServiceQuery<'e> {
    /// The client.
    pub src: Endpoint,
    /// The Service.
    pub service: &'e Service,
    /// The ports asked about, with their endpoints in the client's family.
    pub ports: Vec<PortEndpoints>,
}

/// One Service port's answer.
pub struct PortAnswer<'q> {
    /// The port and its endpoints.
    pub port: &'q PortEndpoints,
    /// Each endpoint, decided.
    pub verdicts: Vec<EndpointVerdict>,
}

impl PortAnswer<'_> {
    /// How many endpoints admit the client.
    pub fn allowed(&self) -> usize {
        self.verdicts.iter().filter(|v| v.verdict.allowed).count()
    }

    /// All, some or none of the endpoints.
    pub fn reach(&self) -> Reach {
        Reach::of(self.allowed(), self.verdicts.len())
    }

    /// `svc/NS/NAME:PORT (TCP 80)`.
    pub fn title(&self, svc: &Service) -> String {
        let p = &self.port.port;
        format!(
            "svc/{}:{} ({} {})",
            svc.key(),
            p.label(),
            p.protocol,
            p.port
        )
    }

    /// What a client experiences, in one line.
    pub fn clients(&self) -> String {
        let total = self.verdicts.len();
        let denied = total - self.allowed();
        match self.reach() {
            _ if total == 0 => {
                "no ready endpoint for this port: every connection fails (not a policy decision)"
                    .to_string()
            }
            Reach::All => format!(
                "every connection is allowed, whichever of the {total} endpoint(s) it lands on"
            ),
            Reach::None => format!("every connection is denied (all {total} endpoint(s) deny it)"),
            Reach::Some => format!(
                "some connections fail: each connection lands on one of {total} endpoints, and {denied} of them {}",
                if denied == 1 { "denies it" } else { "deny it" }
            ),
        }
    }

    /// The JSON of the port: `port`, `name`, `protocol`, `reach`, `allowed`, `endpoints` (each
    /// endpoint's `to`, target `port`, `hairpin` and `extra`'s fields), and `leftOut`.
    pub fn json(
        &self,
        engine: &Engine,
        mut extra: impl FnMut(&EndpointVerdict) -> Result<serde_json::Value, CliError>,
    ) -> Result<serde_json::Value, CliError> {
        let p = &self.port.port;
        let endpoints = self
            .verdicts
            .iter()
            .map(|v| {
                let mut e = serde_json::json!({
                    "to": named(engine, v.endpoint.at),
                    "port": v.endpoint.port.get(),
                    "hairpin": v.hairpin,
                });
                if let (Some(m), serde_json::Value::Object(more)) = (e.as_object_mut(), extra(v)?) {
                    m.extend(more);
                }
                Ok(e)
            })
            .collect::<Result<Vec<_>, CliError>>()?;
        let left_out: Vec<serde_json::Value> = self
            .port
            .left_out
            .iter()
            .map(|(pod, why)| {
                serde_json::json!({"pod": engine.cluster().pods[*pod].key(), "why": why})
            })
            .collect();
        Ok(serde_json::json!({
            "name": p.name,
            "port": p.port.get(),
            "protocol": p.protocol.as_str(),
            "targetPort": p.target_port.to_string(),
            "reach": self.reach().as_str(),
            "allowed": self.allowed(),
            "endpoints": endpoints,
            "leftOut": left_out,
        }))
    }
}

impl<'e> ServiceQuery<'e> {
    /// Every asked port, decided at each endpoint.
    pub fn answers(&self, engine: &Engine) -> Vec<PortAnswer<'_>> {
        self.ports
            .iter()
            .map(|port| PortAnswer {
                port,
                verdicts: engine.evaluate_service_port(self.src, port),
            })
            .collect()
    }

    /// The head of a port's answer: `svc/shop/orders:http (TCP 80) from shop/web-0
    /// (10.0.0.1): 2 of 3 endpoints reachable (derived from the selector)`.
    pub fn head(&self, engine: &Engine, answer: &PortAnswer<'_>) -> String {
        let source = match engine.endpoint_source(self.service) {
            palisade_engine::EndpointSource::Slices => "from its EndpointSlices",
            palisade_engine::EndpointSource::Derived => "derived from its selector",
            palisade_engine::EndpointSource::None => "it has no selector and no EndpointSlice",
        };
        format!(
            "{} from {}: {} of {} endpoint(s) reachable ({source})",
            answer.title(self.service),
            show(&named(engine, self.src)),
            answer.allowed(),
            answer.verdicts.len()
        )
    }

    /// The lines about the pods the selector matches that do not serve the port.
    pub fn write_left_out(
        &self,
        out: &mut impl Write,
        engine: &Engine,
        answer: &PortAnswer<'_>,
    ) -> Result<(), CliError> {
        for (pod, why) in &answer.port.left_out {
            writeln!(
                out,
                "  not an endpoint: {} ({why})",
                engine.cluster().pods[*pod].key()
            )?;
        }
        Ok(())
    }

    /// The JSON head: `from` and `service`.
    pub fn json_head(&self, engine: &Engine) -> serde_json::Value {
        serde_json::json!({
            "from": named(engine, self.src),
            "service": self.service.key(),
            "endpointsFrom": engine.endpoint_source(self.service).as_str(),
        })
    }
}

/// `ALLOWED: shop/orders-0 (10.1.0.5) TCP/8080`, marked when the client is the endpoint.
pub fn endpoint_line(engine: &Engine, v: &EndpointVerdict) -> String {
    let word = if v.verdict.allowed {
        "ALLOWED"
    } else {
        "DENIED"
    };
    let hairpin = if v.hairpin {
        " (the client itself, through the Service address: subject to policy)"
    } else {
        ""
    };
    format!(
        "{word}: {} {}/{}{hairpin}",
        show(&named(engine, v.endpoint.at)),
        v.flow.protocol,
        v.flow.port
    )
}
