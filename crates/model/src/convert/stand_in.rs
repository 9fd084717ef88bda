//! Fail-closed stand-ins for invalid policies: when a policy cannot be read but its subject
//! can, a live enforcer isolates that subject in the directions the policy names instead
//! of dropping the policy (which would fail open).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::admin;
use crate::diag::Ctx;
use crate::object::Kind;
use crate::objects::{
    Action, AdminPeer, AdminPolicy, AdminRule, AdminTier, NetworkPolicy, NetworkPolicyApi, Origin,
    PolicyTypes,
};
use crate::types::{PolicyKind, Selector};
use crate::validate;
use crate::yaml::LineMap;

/// What an invalid policy whose subject is readable stands for until it is fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StandIn {
    /// A NetworkPolicy with the same subject and directions and no rules (isolation).
    NetworkPolicy(NetworkPolicy),
    /// An admin policy with the same kind, name, tier, priority and subject whose only
    /// rule in each named direction denies everything.
    Admin(AdminPolicy),
}

/// The stand-in for an invalid object of `kind`, when it is a policy whose name and
/// subject can be read.
pub(crate) fn stand_in(
    kind: &str,
    value: &Value,
    lines: &LineMap,
    origin: &Origin,
) -> Option<StandIn> {
    let name = value.pointer("/metadata/name")?.as_str()?.to_string();
    let spec = value.get("spec").unwrap_or(&Value::Null);
    let names = |dir: &str| spec.get(dir).is_some();
    let mut ctx = Ctx::new(origin.clone(), lines, String::new());
    match Kind::from_name(kind)?.policy_kind()? {
        PolicyKind::NetworkPolicy => {
            let namespace = match value.pointer("/metadata/namespace") {
                None => "default".to_string(),
                Some(ns) => ns.as_str()?.to_string(),
            };
            let pod_selector = match spec.get("podSelector") {
                None | Some(Value::Null) => Selector::everything(),
                Some(v) => {
                    let s: LabelSelector = serde_json::from_value(v.clone()).ok()?;
                    validate::selector(&mut ctx, "spec.podSelector", &s)
                }
            };
            let types = spec.get("policyTypes").map(Value::to_string);
            let mentions = |t: &str| types.as_deref().is_some_and(|s| s.contains(t));
            let policy_types = PolicyTypes {
                ingress: types.is_none() || mentions("Ingress") || names("ingress"),
                egress: mentions("Egress") || names("egress"),
            };
            ctx.diags.is_empty().then(|| {
                StandIn::NetworkPolicy(NetworkPolicy {
                    namespace,
                    name,
                    api: NetworkPolicyApi::V1,
                    pod_selector,
                    policy_types,
                    ingress: Vec::new(),
                    egress: Vec::new(),
                    origin: origin.clone(),
                })
            })
        }
        kind @ (PolicyKind::AdminNetworkPolicy
        | PolicyKind::BaselineAdminNetworkPolicy
        | PolicyKind::ClusterNetworkPolicy) => {
            let subject = admin::subject(&mut ctx, kind, "spec.subject", spec.get("subject"))?;
            if !ctx.diags.is_empty() {
                return None;
            }
            let tier = match (kind, spec.get("tier").and_then(Value::as_str)) {
                (PolicyKind::BaselineAdminNetworkPolicy, _) | (_, Some("Baseline")) => {
                    AdminTier::Baseline
                }
                _ => AdminTier::Admin,
            };
            // An unreadable priority takes the strongest one: the stand-in only denies.
            let priority = spec
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .filter(|p| (0..=1000).contains(p))
                .unwrap_or(0);
            let deny_all = |dir: &str| {
                if names(dir) {
                    vec![AdminRule {
                        name: Some("invalid-policy-deny-all".into()),
                        action: Action::Deny,
                        peers: vec![AdminPeer::Unsupported(vec!["invalid policy".into()])],
                        ports: None,
                    }]
                } else {
                    Vec::new()
                }
            };
            Some(StandIn::Admin(AdminPolicy {
                kind,
                name,
                tier,
                priority,
                subject,
                ingress: deny_all("ingress"),
                egress: deny_all("egress"),
                origin: origin.clone(),
            }))
        }
        _ => None,
    }
}
