//! `v1` Namespace, Pod and Node.

use std::net::IpAddr;

use k8s_openapi::api::core::v1 as core;
use serde_json::Value;

use super::{decode, required_name};
use crate::diag::{Ctx, Diagnostic, Severity, index, join};
use crate::objects::{ContainerPort, Namespace, Node, Origin, Pod};
use crate::validate;

/// The legacy v1beta1 isolation annotation.
pub const LEGACY_ISOLATION_ANNOTATION: &str = "net.beta.kubernetes.io/network-policy";
/// The label the API server puts on every namespace.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

pub(crate) fn namespace(ctx: &mut Ctx<'_>, value: &Value, origin: Origin) -> Option<Namespace> {
    let ns: core::Namespace = decode(ctx, value, Severity::Notice)?;
    let name = required_name(ctx, ns.metadata.name.as_ref())?;
    ctx.object = format!("Namespace {name}");
    if let Some(e) = validate::dns_label(&name) {
        ctx.error("metadata.name", e);
    }
    let mut labels = ns.metadata.labels.unwrap_or_default();
    validate::labels(ctx, "metadata.labels", &labels);
    // The API server sets this label on every namespace (since Kubernetes 1.21).
    labels.insert(NAMESPACE_NAME_LABEL.to_string(), name.clone());
    let annotation = ns
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LEGACY_ISOLATION_ANNOTATION));
    let default_deny_ingress = match annotation {
        None => false,
        Some(text) => legacy_default_deny(ctx, text),
    };
    Some(Namespace {
        name,
        labels,
        default_deny_ingress,
        origin: Some(origin),
    })
}

/// Reads `{"ingress":{"isolation":"DefaultDeny"}}`. The API server does not validate
/// annotation values; an unreadable one is reported and treated as no isolation.
fn legacy_default_deny(ctx: &mut Ctx<'_>, text: &str) -> bool {
    let field = format!("metadata.annotations[{LEGACY_ISOLATION_ANNOTATION}]");
    match serde_json::from_str::<Value>(text) {
        Ok(v) => match v.pointer("/ingress/isolation") {
            Some(Value::String(s)) if s == "DefaultDeny" => true,
            None | Some(Value::Null) => false,
            Some(other) => {
                ctx.notice(
                    &field,
                    format!("isolation {other} is not DefaultDeny; namespace not isolated"),
                );
                false
            }
        },
        Err(e) => {
            ctx.notice(
                &field,
                format!("not valid JSON ({e}); namespace not isolated"),
            );
            false
        }
    }
}

/// Parses an address at `path`, reporting it when it is not one.
pub(crate) fn parse_ip(ctx: &mut Ctx<'_>, path: &str, s: &str) -> Option<IpAddr> {
    let ip = s.parse().ok();
    if ip.is_none() {
        ctx.error(
            path,
            format!("Invalid value: {s:?}: must be a valid IP address"),
        );
    }
    ip
}

/// A pod's `status.hostIP` with its node: where a node's address can come from when the
/// input has no Node object for it.
#[derive(Debug, Clone)]
pub(crate) struct HostIp {
    pub node: String,
    pub ip: IpAddr,
    pub pod: String,
    pub origin: Origin,
}

/// A Pod, and its node's address from `status.hostIP` when it has a node and one.
pub(crate) fn pod(
    ctx: &mut Ctx<'_>,
    value: &Value,
    origin: Origin,
) -> Option<(Pod, Option<HostIp>)> {
    let pod: core::Pod = decode(ctx, value, Severity::Notice)?;
    let name = required_name(ctx, pod.metadata.name.as_ref())?;
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    ctx.object = format!("Pod {namespace}/{name}");
    if let Some(e) = validate::dns_subdomain(&name) {
        ctx.error("metadata.name", e);
    }
    if let Some(e) = validate::dns_label(&namespace) {
        ctx.error("metadata.namespace", e);
    }
    let labels = pod.metadata.labels.unwrap_or_default();
    validate::labels(ctx, "metadata.labels", &labels);
    let spec = pod.spec.unwrap_or_default();
    let ports = container_ports(ctx, &spec, "spec");
    let status = pod.status.unwrap_or_default();
    let mut ips = pod_ips(ctx, &status);
    // A completed pod keeps `status.podIP` in the API, but the network plugin released the
    // address and may already have given it to a new pod: it holds no address.
    if completed(&status) {
        ips.clear();
    }
    let node_name = spec.node_name.filter(|n| !n.is_empty());
    let host_ip = match (
        &node_name,
        status.host_ip.as_deref().filter(|ip| !ip.is_empty()),
    ) {
        (Some(node), Some(ip)) => parse_ip(ctx, "status.hostIP", ip).map(|ip| HostIp {
            node: node.clone(),
            ip,
            pod: format!("{namespace}/{name}"),
            origin: origin.clone(),
        }),
        _ => None,
    };
    let pod = Pod {
        namespace,
        name,
        labels,
        node_name,
        host_network: spec.host_network.unwrap_or(false),
        ips,
        ports,
        ready: ready(&status),
        origin,
    };
    Some((pod, host_ip))
}

/// Whether the pod may serve: its `Ready` condition is `True`, or it has none.
fn ready(status: &core::PodStatus) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .is_none_or(|c| c.status == "True")
}

/// Whether the pod has finished (`status.phase` `Succeeded` or `Failed`).
fn completed(status: &core::PodStatus) -> bool {
    matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"))
}

/// Nodes that pods run on (`spec.nodeName`) and report an address for (`status.hostIP`)
/// but that the input does not declare: "the node addresses come from the pods", so a
/// verdict does not change with whether Node objects were dumped. Their labels are
/// unknown (empty). One notice per node, a warning when its pods disagree on the address.
pub(crate) fn nodes_from_host_ips(
    declared: &[Node],
    host_ips: &[HostIp],
) -> (Vec<Node>, Vec<Diagnostic>) {
    let known: std::collections::HashSet<&str> = declared.iter().map(|n| n.name.as_str()).collect();
    let mut by_node: std::collections::BTreeMap<&str, Vec<&HostIp>> = Default::default();
    for h in host_ips.iter().filter(|h| !known.contains(h.node.as_str())) {
        by_node.entry(h.node.as_str()).or_default().push(h);
    }
    let mut nodes = Vec::new();
    let mut diags = Vec::new();
    for (name, seen) in by_node {
        let first = seen[0];
        diags.push(Diagnostic {
            severity: Severity::Notice,
            file: first.origin.file.clone(),
            line: first.origin.line,
            object: format!("Node {name}"),
            field: String::new(),
            message: format!(
                "not in the input; its address {} is taken from Pod {}'s status.hostIP (its labels are unknown)",
                first.ip, first.pod
            ),
        });
        if let Some(other) = seen.iter().find(|h| h.ip != first.ip) {
            diags.push(Diagnostic {
                severity: Severity::Warning,
                file: other.origin.file.clone(),
                line: other.origin.line,
                object: format!("Pod {}", other.pod),
                field: "status.hostIP".into(),
                message: format!(
                    "{} differs from {} that Pod {} reports for node {name}; using {}",
                    other.ip, first.ip, first.pod, first.ip
                ),
            });
        }
        nodes.push(Node {
            name: name.to_string(),
            labels: Default::default(),
            addresses: vec![first.ip],
            origin: first.origin.clone(),
        });
    }
    (nodes, diags)
}

/// The ports of every container of `spec` (at field path `path`), validated.
pub(crate) fn container_ports(
    ctx: &mut Ctx<'_>,
    spec: &core::PodSpec,
    path: &str,
) -> Vec<ContainerPort> {
    let mut ports = Vec::new();
    for (c, container) in spec.containers.iter().enumerate() {
        for (i, p) in container.ports.iter().flatten().enumerate() {
            let path = index(&join(&index(&join(path, "containers"), c), "ports"), i);
            let number =
                validate::port(ctx, &join(&path, "containerPort"), p.container_port.into());
            let protocol = validate::protocol(ctx, &join(&path, "protocol"), p.protocol.as_deref());
            if let Some(n) = &p.name
                && let Some(e) = validate::port_name(n)
            {
                ctx.error(&join(&path, "name"), e);
            }
            if let Some(port) = number {
                ports.push(ContainerPort {
                    name: p.name.clone(),
                    port,
                    protocol,
                });
            }
        }
    }
    ports
}

/// `status.podIPs` (or `status.podIP` alone), validated as the API server does: "If this
/// field is specified, the 0th entry must match the podIP field. Pods may be allocated at
/// most 1 value for each of IPv4 and IPv6."
fn pod_ips(ctx: &mut Ctx<'_>, status: &core::PodStatus) -> Vec<IpAddr> {
    let list = status.pod_ips.as_deref().unwrap_or_default();
    let single = status.pod_ip.as_deref().filter(|ip| !ip.is_empty());
    if list.is_empty() {
        return single
            .and_then(|ip| parse_ip(ctx, "status.podIP", ip))
            .into_iter()
            .collect();
    }
    if let Some(ip) = single
        && ip != list[0].ip
    {
        ctx.error(
            "status.podIP",
            format!(
                "Invalid value: {ip:?}: must match status.podIPs[0].ip ({:?})",
                list[0].ip
            ),
        );
    }
    let mut ips: Vec<IpAddr> = Vec::new();
    for (i, p) in list.iter().enumerate() {
        let path = join(&index("status.podIPs", i), "ip");
        let Some(ip) = parse_ip(ctx, &path, &p.ip) else {
            continue;
        };
        if ips.contains(&ip) {
            ctx.error(&path, format!("Duplicate value: {:?}", p.ip));
        } else if ips.iter().any(|seen| seen.is_ipv4() == ip.is_ipv4()) {
            ctx.error(
                "status.podIPs",
                "Invalid value: may specify no more than one IP for each IP family",
            );
        }
        ips.push(ip);
    }
    ips
}

pub(crate) fn node(ctx: &mut Ctx<'_>, value: &Value, origin: Origin) -> Option<Node> {
    let node: core::Node = decode(ctx, value, Severity::Notice)?;
    let name = required_name(ctx, node.metadata.name.as_ref())?;
    ctx.object = format!("Node {name}");
    if let Some(e) = validate::dns_subdomain(&name) {
        ctx.error("metadata.name", e);
    }
    let labels = node.metadata.labels.unwrap_or_default();
    validate::labels(ctx, "metadata.labels", &labels);
    let mut addresses = Vec::new();
    for (i, a) in node
        .status
        .and_then(|s| s.addresses)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if a.type_ == "InternalIP" {
            addresses.extend(parse_ip(
                ctx,
                &join(&index("status.addresses", i), "address"),
                &a.address,
            ));
        }
    }
    Some(Node {
        name,
        labels,
        addresses,
        origin,
    })
}
