//! `v1` Service and `discovery.k8s.io/v1` EndpointSlice, validated as the API server does.

use std::collections::HashSet;
use std::net::IpAddr;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::core::parse_ip;
use super::{decode, required_name};
use crate::diag::{Ctx, Severity, index, join};
use crate::objects::Origin;
use crate::service::{
    AddressType, EndpointSlice, ExternalTrafficPolicy, SERVICE_NAME_LABEL, Service, ServicePort,
    ServiceType, SliceEndpoint, SlicePort, TargetPort,
};
use crate::types::Port;
use crate::validate;

/// The most addresses one endpoint may have, and ports and endpoints one slice may have.
const MAX_ENDPOINT_ADDRESSES: usize = 100;
const MAX_SLICE_PORTS: usize = 100;
const MAX_SLICE_ENDPOINTS: usize = 1000;

/// A namespaced object's namespace (`default` when absent), validated.
fn namespace_of(ctx: &mut Ctx<'_>, namespace: Option<&String>) -> String {
    let namespace = namespace.cloned().unwrap_or_else(|| "default".into());
    if let Some(e) = validate::dns_label(&namespace) {
        ctx.error("metadata.namespace", e);
    }
    namespace
}

pub(crate) fn service(ctx: &mut Ctx<'_>, value: &Value, origin: Origin) -> Option<Service> {
    let svc: core::Service = decode(ctx, value, Severity::Notice)?;
    let name = required_name(ctx, svc.metadata.name.as_ref())?;
    let namespace = namespace_of(ctx, svc.metadata.namespace.as_ref());
    ctx.object = format!("Service {namespace}/{name}");
    // A DNS-1123 label: the API server accepts a leading digit (relaxed Service name
    // validation, on by default since Kubernetes 1.34).
    if let Some(e) = validate::dns_label(&name) {
        ctx.error("metadata.name", e);
    }
    let spec = svc.spec.unwrap_or_default();
    let service_type = match spec.type_.as_deref() {
        None | Some("ClusterIP") => ServiceType::ClusterIp,
        Some("NodePort") => ServiceType::NodePort,
        Some("LoadBalancer") => ServiceType::LoadBalancer,
        Some("ExternalName") => ServiceType::ExternalName,
        Some(other) => {
            ctx.error(
                "spec.type",
                format!(
                    "Unsupported value: {other:?}: supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
                ),
            );
            return None;
        }
    };
    let (cluster_ips, headless) = cluster_ips(ctx, &spec, service_type);
    let external_name = external_name(ctx, &spec, service_type);
    let ports = service_ports(ctx, &spec, service_type, headless);
    let selector = spec.selector.clone().filter(|s| !s.is_empty());
    if let Some(s) = &selector {
        validate::labels(ctx, "spec.selector", s);
    }
    let external_traffic_policy = match (spec.external_traffic_policy.as_deref(), service_type) {
        (None | Some(""), _) => ExternalTrafficPolicy::Cluster,
        (Some(p), t) if !t.exposed() => {
            ctx.error(
                "spec.externalTrafficPolicy",
                format!("Invalid value: {p:?}: may only be set for externally-accessible services"),
            );
            ExternalTrafficPolicy::Cluster
        }
        (Some("Cluster"), _) => ExternalTrafficPolicy::Cluster,
        (Some("Local"), _) => ExternalTrafficPolicy::Local,
        (Some(p), _) => {
            ctx.error(
                "spec.externalTrafficPolicy",
                format!("Unsupported value: {p:?}: supported values: \"Cluster\", \"Local\""),
            );
            ExternalTrafficPolicy::Cluster
        }
    };
    let mut external_ips = Vec::new();
    for (i, ip) in spec.external_ips.iter().flatten().enumerate() {
        external_ips.extend(parse_ip(ctx, &index("spec.externalIPs", i), ip));
    }
    let ingress = svc
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress)
        .unwrap_or_default();
    for (i, lb) in ingress.iter().enumerate() {
        if let Some(ip) = lb.ip.as_deref().filter(|ip| !ip.is_empty()) {
            let path = join(&index("status.loadBalancer.ingress", i), "ip");
            external_ips.extend(parse_ip(ctx, &path, ip));
        }
    }
    let families_v6 = ip_families(ctx, &spec, &cluster_ips);
    Some(Service {
        namespace,
        name,
        service_type,
        cluster_ips,
        headless,
        families_v6,
        selector,
        ports,
        external_traffic_policy,
        external_ips,
        external_name,
        origin,
    })
}

/// `spec.clusterIP` and `spec.clusterIPs`: the addresses, and whether the Service is headless.
fn cluster_ips(
    ctx: &mut Ctx<'_>,
    spec: &core::ServiceSpec,
    service_type: ServiceType,
) -> (Vec<IpAddr>, bool) {
    let single = spec.cluster_ip.as_deref().filter(|s| !s.is_empty());
    let list = spec.cluster_ips.as_deref().unwrap_or_default();
    if let (Some(first), Some(ip)) = (list.first(), single)
        && first != ip
    {
        ctx.error(
            "spec.clusterIPs[0]",
            format!("Invalid value: {first:?}: must match `clusterIP` ({ip:?})"),
        );
    }
    let texts: Vec<(String, &str)> = if list.is_empty() {
        single
            .map(|s| ("spec.clusterIP".to_string(), s))
            .into_iter()
            .collect()
    } else {
        list.iter()
            .enumerate()
            .map(|(i, s)| (index("spec.clusterIPs", i), s.as_str()))
            .collect()
    };
    let headless = texts.first().is_some_and(|(_, s)| *s == "None");
    if service_type == ServiceType::ExternalName {
        if let Some((path, s)) = texts.first() {
            ctx.error(
                path,
                format!("Invalid value: {s:?}: may not be set for ExternalName services"),
            );
        }
        return (Vec::new(), false);
    }
    if let (true, Some((path, _))) = (headless, texts.first()) {
        if service_type.exposed() {
            ctx.error(
                path,
                format!(
                    "Invalid value: \"None\": may not be set to 'None' for {} services",
                    service_type.as_str()
                ),
            );
        }
        if texts.len() > 1 {
            ctx.error(
                "spec.clusterIPs",
                "Invalid value: must not have more than one value when clusterIPs[0] is 'None'",
            );
        }
        return (Vec::new(), true);
    }
    let mut ips: Vec<IpAddr> = Vec::new();
    for (path, s) in &texts {
        let Some(ip) = parse_ip(ctx, path, s) else {
            continue;
        };
        if ips.iter().any(|seen| seen.is_ipv4() == ip.is_ipv4()) {
            ctx.error(
                "spec.clusterIPs",
                "Invalid value: may specify no more than one IP for each IP family",
            );
        }
        ips.push(ip);
    }
    if ips.len() > 2 {
        ctx.error(
            "spec.clusterIPs",
            "Too many: may not have more than 2 items",
        );
    }
    (ips, false)
}

/// `spec.externalName`: required (a DNS subdomain) for an ExternalName Service only.
fn external_name(
    ctx: &mut Ctx<'_>,
    spec: &core::ServiceSpec,
    service_type: ServiceType,
) -> Option<String> {
    let name = spec.external_name.as_deref().filter(|s| !s.is_empty());
    if service_type != ServiceType::ExternalName {
        return None;
    }
    match name {
        None => ctx.error("spec.externalName", "Required value"),
        Some(n) => {
            if let Some(e) = validate::dns_subdomain(n.trim_end_matches('.')) {
                ctx.error("spec.externalName", e);
            }
        }
    }
    name.map(str::to_string)
}

/// `spec.ipFamilies`, else the families of the cluster IPs, else IPv4.
fn ip_families(ctx: &mut Ctx<'_>, spec: &core::ServiceSpec, cluster_ips: &[IpAddr]) -> Vec<bool> {
    let mut families = Vec::new();
    for (i, f) in spec.ip_families.iter().flatten().enumerate() {
        let path = index("spec.ipFamilies", i);
        let v6 = match f.as_str() {
            "IPv4" => false,
            "IPv6" => true,
            other => {
                ctx.error(
                    &path,
                    format!("Unsupported value: {other:?}: supported values: \"IPv4\", \"IPv6\""),
                );
                continue;
            }
        };
        if families.contains(&v6) {
            ctx.error(&path, format!("Duplicate value: {f:?}"));
            continue;
        }
        families.push(v6);
    }
    for (i, ip) in cluster_ips.iter().enumerate() {
        match families.get(i) {
            Some(&v6) if v6 != ip.is_ipv6() => ctx.error(
                &index("spec.clusterIPs", i),
                format!("Invalid value: \"{ip}\": expected an address of the family spec.ipFamilies[{i}]"),
            ),
            Some(_) => {}
            None => families.push(ip.is_ipv6()),
        }
    }
    if families.is_empty() {
        families.push(false);
    }
    families
}

/// `spec.ports`, validated: names (required and unique when there are several),
/// numbers, protocols, target ports, node ports, and no two entries of one port and protocol.
fn service_ports(
    ctx: &mut Ctx<'_>,
    spec: &core::ServiceSpec,
    service_type: ServiceType,
    headless: bool,
) -> Vec<ServicePort> {
    let list = spec.ports.as_deref().unwrap_or_default();
    if list.is_empty() && service_type != ServiceType::ExternalName && !headless {
        ctx.error("spec.ports", "Required value");
    }
    let mut names = HashSet::new();
    let mut seen = HashSet::new();
    let mut node_ports = HashSet::new();
    let mut out = Vec::new();
    for (i, p) in list.iter().enumerate() {
        let path = index("spec.ports", i);
        let name = p.name.clone().filter(|n| !n.is_empty());
        match &name {
            None if list.len() > 1 => ctx.error(&join(&path, "name"), "Required value"),
            None => {}
            Some(n) => {
                if let Some(e) = validate::dns_label(n) {
                    ctx.error(&join(&path, "name"), e);
                }
                if !names.insert(n.clone()) {
                    ctx.error(&join(&path, "name"), format!("Duplicate value: {n:?}"));
                }
            }
        }
        let port = validate::port(ctx, &join(&path, "port"), p.port.into());
        let protocol = validate::protocol(ctx, &join(&path, "protocol"), p.protocol.as_deref());
        if let Some(port) = port
            && !seen.insert((port, protocol))
        {
            ctx.error(
                &path,
                format!("Duplicate value: {{port: {port}, protocol: {protocol}}}"),
            );
        }
        let target_port = match &p.target_port {
            None | Some(IntOrString::Int(0)) => port.map(TargetPort::Number),
            Some(IntOrString::Int(n)) => {
                validate::port(ctx, &join(&path, "targetPort"), (*n).into()).map(TargetPort::Number)
            }
            Some(IntOrString::String(s)) => match validate::port_name(s) {
                Some(e) => {
                    ctx.error(&join(&path, "targetPort"), e);
                    None
                }
                None => Some(TargetPort::Name(s.clone())),
            },
        };
        let node_port = match p.node_port {
            None | Some(0) => None,
            Some(n) if !service_type.exposed() => {
                ctx.error(
                    &join(&path, "nodePort"),
                    format!(
                        "Forbidden: may not be used when `type` is '{}' (value {n})",
                        service_type.as_str()
                    ),
                );
                None
            }
            Some(n) => {
                let np = validate::port(ctx, &join(&path, "nodePort"), n.into());
                if let Some(np) = np
                    && !node_ports.insert((np, protocol))
                {
                    ctx.error(&join(&path, "nodePort"), format!("Duplicate value: {n}"));
                }
                np
            }
        };
        if let (Some(port), Some(target_port)) = (port, target_port) {
            out.push(ServicePort {
                name,
                protocol,
                port,
                target_port,
                node_port,
            });
        }
    }
    out
}

pub(crate) fn endpoint_slice(
    ctx: &mut Ctx<'_>,
    value: &Value,
    origin: Origin,
) -> Option<EndpointSlice> {
    let slice: discovery::EndpointSlice = decode(ctx, value, Severity::Notice)?;
    let name = required_name(ctx, slice.metadata.name.as_ref())?;
    let namespace = namespace_of(ctx, slice.metadata.namespace.as_ref());
    ctx.object = format!("EndpointSlice {namespace}/{name}");
    if let Some(e) = validate::dns_subdomain(&name) {
        ctx.error("metadata.name", e);
    }
    let labels = slice.metadata.labels.unwrap_or_default();
    validate::labels(ctx, "metadata.labels", &labels);
    let address_type = match slice.address_type.as_str() {
        "IPv4" => AddressType::Ipv4,
        "IPv6" => AddressType::Ipv6,
        "FQDN" => AddressType::Fqdn,
        "" => {
            ctx.error("addressType", "Required value");
            return None;
        }
        other => {
            ctx.error(
                "addressType",
                format!(
                    "Unsupported value: {other:?}: supported values: \"FQDN\", \"IPv4\", \"IPv6\""
                ),
            );
            return None;
        }
    };
    if slice.endpoints.len() > MAX_SLICE_ENDPOINTS {
        ctx.error(
            "endpoints",
            format!(
                "Too many: {}: must have at most {MAX_SLICE_ENDPOINTS} items",
                slice.endpoints.len()
            ),
        );
    }
    let endpoints = slice
        .endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| slice_endpoint(ctx, &index("endpoints", i), e, address_type))
        .collect();
    let ports = slice_ports(ctx, slice.ports.as_deref().unwrap_or_default());
    Some(EndpointSlice {
        namespace,
        name,
        service: labels.get(SERVICE_NAME_LABEL).cloned(),
        address_type,
        endpoints,
        ports,
        origin,
    })
}

fn slice_endpoint(
    ctx: &mut Ctx<'_>,
    path: &str,
    e: &discovery::Endpoint,
    address_type: AddressType,
) -> SliceEndpoint {
    let at = join(path, "addresses");
    if e.addresses.is_empty() {
        ctx.error(&at, "Required value: must contain at least 1 address");
    } else if e.addresses.len() > MAX_ENDPOINT_ADDRESSES {
        ctx.error(
            &at,
            format!(
                "Too many: {}: must have at most {MAX_ENDPOINT_ADDRESSES} items",
                e.addresses.len()
            ),
        );
    }
    let mut addresses = Vec::new();
    for (i, a) in e.addresses.iter().enumerate() {
        let p = index(&at, i);
        match address_type {
            AddressType::Fqdn => {
                if let Some(err) = validate::dns_subdomain(a) {
                    ctx.error(&p, err);
                }
            }
            AddressType::Ipv4 | AddressType::Ipv6 => {
                let Some(ip) = parse_ip(ctx, &p, a) else {
                    continue;
                };
                let want_v6 = address_type == AddressType::Ipv6;
                if ip.is_ipv6() != want_v6 {
                    let family = if want_v6 { "IPv6" } else { "IPv4" };
                    ctx.error(
                        &p,
                        format!("Invalid value: {a:?}: must be a valid {family} address"),
                    );
                    continue;
                }
                addresses.push(ip);
            }
        }
    }
    let node_name = e.node_name.clone().filter(|n| !n.is_empty());
    if let Some(n) = &node_name
        && let Some(err) = validate::dns_subdomain(n)
    {
        ctx.error(&join(path, "nodeName"), err);
    }
    let pod = e
        .target_ref
        .as_ref()
        .filter(|r| r.kind.as_deref() == Some("Pod"))
        .and_then(|r| Some((r.namespace.clone().unwrap_or_default(), r.name.clone()?)));
    SliceEndpoint {
        addresses,
        ready: e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true),
        pod,
        node_name,
    }
}

fn slice_ports(ctx: &mut Ctx<'_>, list: &[discovery::EndpointPort]) -> Vec<SlicePort> {
    if list.len() > MAX_SLICE_PORTS {
        ctx.error(
            "ports",
            format!(
                "Too many: {}: must have at most {MAX_SLICE_PORTS} items",
                list.len()
            ),
        );
    }
    let mut names = HashSet::new();
    let mut out = Vec::new();
    for (i, p) in list.iter().enumerate() {
        let path = index("ports", i);
        let name = p.name.clone().unwrap_or_default();
        if !name.is_empty()
            && let Some(e) = validate::dns_label(&name)
        {
            ctx.error(&join(&path, "name"), e);
        }
        if !names.insert(name.clone()) {
            ctx.error(&join(&path, "name"), format!("Duplicate value: {name:?}"));
        }
        // Defaulted to TCP, as the API server does.
        let protocol = validate::protocol(ctx, &join(&path, "protocol"), p.protocol.as_deref());
        // The API server stores any number here; one outside 1-65535 is no port kube-proxy
        // can send to, like an unset one.
        let port = p.port.and_then(|n| {
            let port = Port::new(n.into());
            if port.is_none() {
                ctx.notice(
                    &join(&path, "port"),
                    format!("{n} is not a port number; no traffic is sent to this port"),
                );
            }
            port
        });
        out.push(SlicePort {
            name,
            protocol,
            port,
        });
    }
    out
}
