//! `networking.k8s.io/v1` and `extensions/v1beta1` NetworkPolicy, validated as
//! `ValidateNetworkPolicy` does and defaulted as the API server defaults it.

use k8s_openapi::api::networking::v1 as net;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::{decode, required_name};
use crate::diag::{Ctx, Severity, index, join};
use crate::objects::{
    IpBlock, NetworkPolicy, NetworkPolicyApi, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicyRule, Origin, PolicyTypes, PortSpec,
};
use crate::types::{PortRange, Selector};
use crate::validate;

pub(crate) fn network_policy(
    ctx: &mut Ctx<'_>,
    value: &Value,
    api: NetworkPolicyApi,
    origin: Origin,
) -> Option<NetworkPolicy> {
    // extensions/v1beta1 has the v1 shape; decode it as the API server converts it.
    let mut value = value.clone();
    value["apiVersion"] = Value::from("networking.k8s.io/v1");
    let np: net::NetworkPolicy = decode(ctx, &value, Severity::Error)?;
    let name = required_name(ctx, np.metadata.name.as_ref())?;
    let namespace = np
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    ctx.object = format!("NetworkPolicy {namespace}/{name}");
    if let Some(e) = validate::dns_subdomain(&name) {
        ctx.error("metadata.name", e);
    }
    if let Some(e) = validate::dns_label(&namespace) {
        ctx.error("metadata.namespace", e);
    }
    validate::labels(
        ctx,
        "metadata.labels",
        &np.metadata.labels.clone().unwrap_or_default(),
    );
    let spec = np.spec.unwrap_or_default();
    // "a missing or null podSelector selects every pod of the namespace"
    let pod_selector = match &spec.pod_selector {
        Some(s) => validate::selector(ctx, "spec.podSelector", s),
        None => Selector::everything(),
    };
    let ingress = spec
        .ingress
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            rule(
                ctx,
                &index("spec.ingress", i),
                "from",
                r.ports.as_deref(),
                r.from.as_deref(),
            )
        })
        .collect();
    let egress: Vec<_> = spec
        .egress
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            rule(
                ctx,
                &index("spec.egress", i),
                "to",
                r.ports.as_deref(),
                r.to.as_deref(),
            )
        })
        .collect();
    let policy_types = policy_types(ctx, spec.policy_types.as_deref(), !egress.is_empty());
    Some(NetworkPolicy {
        namespace,
        name,
        api,
        pod_selector,
        policy_types,
        ingress,
        egress,
        origin,
    })
}

/// `spec.policyTypes`, defaulted: "Ingress", plus "Egress" when the policy has egress rules.
fn policy_types(ctx: &mut Ctx<'_>, types: Option<&[String]>, has_egress: bool) -> PolicyTypes {
    let types = types.unwrap_or_default();
    if types.is_empty() {
        return PolicyTypes {
            ingress: true,
            egress: has_egress,
        };
    }
    if types.len() > 2 {
        ctx.error(
            "spec.policyTypes",
            format!("Too many: {}: must have at most 2 items", types.len()),
        );
    }
    let mut out = PolicyTypes::default();
    for (i, t) in types.iter().enumerate() {
        match t.as_str() {
            "Ingress" => out.ingress = true,
            "Egress" => out.egress = true,
            other => ctx.error(
                &index("spec.policyTypes", i),
                format!("Unsupported value: {other:?}: supported values: \"Ingress\", \"Egress\""),
            ),
        }
    }
    out
}

fn rule(
    ctx: &mut Ctx<'_>,
    path: &str,
    peers_field: &str,
    ports: Option<&[net::NetworkPolicyPort]>,
    peers: Option<&[net::NetworkPolicyPeer]>,
) -> NetworkPolicyRule {
    let ports = ports.map(|list| {
        list.iter()
            .enumerate()
            .filter_map(|(i, p)| port(ctx, &index(&join(path, "ports"), i), p))
            .collect()
    });
    let peers = peers.map(|list| {
        list.iter()
            .enumerate()
            .filter_map(|(i, p)| peer(ctx, &index(&join(path, peers_field), i), p))
            .collect()
    });
    NetworkPolicyRule { ports, peers }
}

/// `ValidateNetworkPolicyPort`, including the endPort rules of KEP-2079:
/// "If an EndPort is specified a Port must also be specified; If Port is a string (named
/// port) EndPort cannot be specified; EndPort must be equal or bigger than Port".
fn port(ctx: &mut Ctx<'_>, path: &str, p: &net::NetworkPolicyPort) -> Option<NetworkPolicyPort> {
    let protocol = validate::protocol(ctx, &join(path, "protocol"), p.protocol.as_deref());
    let spec = match (&p.port, p.end_port) {
        (None, None) => PortSpec::Any,
        (None, Some(_)) => {
            ctx.error(
                &join(path, "port"),
                "Required value: must be specified when `endPort` is specified",
            );
            return None;
        }
        (Some(IntOrString::Int(n)), end) => {
            let start = validate::port(ctx, &join(path, "port"), (*n).into())?;
            let end = match end {
                None => start,
                Some(e) => {
                    let end = validate::port(ctx, &join(path, "endPort"), e.into())?;
                    if end < start {
                        ctx.error(
                            &join(path, "endPort"),
                            format!("Invalid value: {e}: must be greater than or equal to `port`"),
                        );
                        return None;
                    }
                    end
                }
            };
            PortSpec::Range(PortRange { start, end })
        }
        (Some(IntOrString::String(name)), end) => {
            if end.is_some() {
                ctx.error(
                    &join(path, "endPort"),
                    "Forbidden: may not be specified when `port` is non-numeric",
                );
                return None;
            }
            if let Some(e) = validate::port_name(name) {
                ctx.error(&join(path, "port"), e);
                return None;
            }
            PortSpec::Named(name.clone())
        }
    };
    Some(NetworkPolicyPort {
        protocol,
        port: spec,
    })
}

/// `ValidateNetworkPolicyPeer`: at least one of the selectors, or an ipBlock alone.
fn peer(ctx: &mut Ctx<'_>, path: &str, p: &net::NetworkPolicyPeer) -> Option<NetworkPolicyPeer> {
    let count = [
        p.pod_selector.is_some(),
        p.namespace_selector.is_some(),
        p.ip_block.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if count == 0 {
        ctx.error(path, "Required value: must specify a peer");
        return None;
    }
    if count > 1 && p.ip_block.is_some() {
        ctx.error(
            path,
            "Forbidden: may not specify both ipBlock and another peer",
        );
        return None;
    }
    if let Some(b) = &p.ip_block {
        return ip_block(ctx, &join(path, "ipBlock"), b).map(NetworkPolicyPeer::IpBlock);
    }
    let namespaces = p
        .namespace_selector
        .as_ref()
        .map(|s| validate::selector(ctx, &join(path, "namespaceSelector"), s));
    let pods = match &p.pod_selector {
        Some(s) => validate::selector(ctx, &join(path, "podSelector"), s),
        None => Selector::everything(),
    };
    Some(NetworkPolicyPeer::Pods { namespaces, pods })
}

/// A notice for a CIDR in a form the API server no longer accepts in new values (it keeps
/// such values in objects stored before, and in updates that do not change them).
fn legacy_form(ctx: &mut Ctx<'_>, path: &str, written: &str, read: ipnet::IpNet) {
    if let Some(why) = validate::legacy_cidr_form(written) {
        ctx.notice(
            path,
            format!(
                "{written:?} has {why}: read as {read}, as the API server reads objects stored before Kubernetes 1.33; it refuses this form in new values"
            ),
        );
    }
}

/// `ValidateIPBlock`: a valid `cidr`; every `except` a valid CIDR and a strict subset of `cidr`.
fn ip_block(ctx: &mut Ctx<'_>, path: &str, b: &net::IPBlock) -> Option<IpBlock> {
    let cidr_path = join(path, "cidr");
    if b.cidr.is_empty() {
        ctx.error(&cidr_path, "Required value");
        return None;
    }
    let cidr = match validate::parse_cidr(&b.cidr) {
        Ok(c) => {
            legacy_form(ctx, &cidr_path, &b.cidr, c);
            c
        }
        Err(e) => {
            ctx.error(&cidr_path, e);
            return None;
        }
    };
    let mut except = Vec::new();
    let mut ok = true;
    for (i, e) in b.except.iter().flatten().enumerate() {
        let p = index(&join(path, "except"), i);
        match validate::parse_cidr(e) {
            Err(msg) => {
                ctx.error(&p, msg);
                ok = false;
            }
            Ok(net) => {
                legacy_form(ctx, &p, e, net);
                let written_ip = validate::cidr_ip(e);
                let inside = written_ip.is_some_and(|ip| cidr.contains(&ip))
                    && cidr.prefix_len() < net.prefix_len();
                if !inside {
                    ctx.error(
                        &p,
                        format!("Invalid value: {e:?}: must be a strict subset of `cidr`"),
                    );
                    ok = false;
                }
                except.push(net);
            }
        }
    }
    ok.then_some(IpBlock { cidr, except })
}
