//! `--report-status`: on each AdminNetworkPolicy and ClusterNetworkPolicy, one condition per
//! node in `status.conditions` saying whether the policy is programmed there.
//!
//! The condition's type is `palisade.dev/Programmed-<node>` (one per node, as other
//! implementations write one per zone); `status: "True"`, reason `Programmed` once a
//! ruleset holding the policy's current version is in the kernel; `status: "False"`,
//! reason `Invalid`, while its current version is invalid and its last valid version (or
//! its fail-closed stand-in) is enforced instead. The condition is removed when the agent
//! stops enforcing the policy (it became staged) and by `agent --uninstall
//! --report-status`. Writes are `update`s of the status subresource (read, change our
//! condition only, write with the read's resourceVersion; a conflict rereads), so the other
//! nodes' conditions are kept.
//!
//! The reconciler publishes what it enforces after each committed transaction
//! ([`Desired`]); [`run`] brings the API server's conditions to it, retrying what fails.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use palisade_model::PolicyKind;
use serde_json::{Value, json};
use tokio::sync::watch;

/// The condition type prefix; the node's name follows.
pub const CONDITION_PREFIX: &str = "palisade.dev/Programmed-";

/// The longest condition message the API accepts.
const MAX_MESSAGE: usize = 32768;

/// How long to wait before retrying writes that failed.
const RETRY: Duration = Duration::from_secs(5);

/// What the agent says about one policy on its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Programmed {
    /// The policy's current version is in the kernel.
    Yes,
    /// The current version is invalid; the last valid version or the fail-closed stand-in
    /// is enforced instead (the message says what is wrong).
    Invalid(String),
}

/// One enforced policy: what to say, and the version in force (a new version is written
/// again, with the policy's new generation).
#[derive(Debug, Clone, PartialEq)]
pub struct Enforced {
    /// What the condition says.
    pub state: Programmed,
    /// The object in force.
    pub version: std::sync::Arc<palisade_follow::store::Object>,
}

/// The policies a node enforces, by (kind, name): what the API server should show.
pub type Desired = BTreeMap<(PolicyKind, String), Enforced>;

/// What the API server should show for the enforced admin policies of `store`.
pub fn desired(store: &palisade_follow::store::Store) -> Desired {
    store
        .enforced_admin()
        .filter(|(kind, ..)| reported(*kind))
        .map(|(kind, name, problem, version)| {
            let state = match problem {
                Some(d) => Programmed::Invalid(d.to_string()),
                None => Programmed::Yes,
            };
            let version = version.clone();
            ((kind, name.to_string()), Enforced { state, version })
        })
        .collect()
}

/// The condition type of `node`.
pub fn condition_type(node: &str) -> String {
    format!("{CONDITION_PREFIX}{node}")
}

/// The API resource of a reported kind (`None` for the kinds without a condition).
fn resource(kind: PolicyKind) -> Option<ApiResource> {
    let (version, plural) = match kind {
        PolicyKind::AdminNetworkPolicy => ("v1alpha1", "adminnetworkpolicies"),
        PolicyKind::ClusterNetworkPolicy => ("v1alpha2", "clusternetworkpolicies"),
        PolicyKind::BaselineAdminNetworkPolicy
        | PolicyKind::NetworkPolicy
        | PolicyKind::NamespaceDefaultDeny => return None,
    };
    Some(ApiResource {
        group: "policy.networking.k8s.io".into(),
        version: version.into(),
        api_version: format!("policy.networking.k8s.io/{version}"),
        kind: kind.as_str().into(),
        plural: plural.into(),
    })
}

/// Whether the reporter writes conditions on this kind.
pub fn reported(kind: PolicyKind) -> bool {
    resource(kind).is_some()
}

/// The time now as the API writes it (RFC 3339, seconds).
fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into())
}

/// `conditions` with this node's condition set to `state` (or removed, for `None`); `None`
/// when nothing changes. The transition time is kept while the status does not change.
fn updated(
    conditions: &[Value],
    node: &str,
    state: Option<&Programmed>,
    generation: Option<i64>,
) -> Option<Vec<Value>> {
    let ty = condition_type(node);
    let current = conditions.iter().find(|c| c["type"] == ty.as_str());
    let mut out: Vec<Value> = conditions
        .iter()
        .filter(|c| c["type"] != ty.as_str())
        .cloned()
        .collect();
    let Some(state) = state else {
        return current.map(|_| out);
    };
    let (status, reason, message) = match state {
        Programmed::Yes => (
            "True",
            "Programmed",
            format!("enforced by the Palisade agent on node {node}"),
        ),
        Programmed::Invalid(why) => (
            "False",
            "Invalid",
            format!(
                "the current version is invalid; the Palisade agent on node {node} enforces its last valid version, or denies what it isolates: {why}"
            ),
        ),
    };
    let mut message = message;
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    let same_status = current.is_some_and(|c| c["status"] == status);
    let transition = match current {
        Some(c) if same_status => c["lastTransitionTime"].clone(),
        _ => Value::String(now()),
    };
    let mut condition = json!({
        "type": ty,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    });
    if let Some(generation) = generation {
        condition["observedGeneration"] = generation.into();
    }
    if current == Some(&condition) {
        return None;
    }
    out.push(condition);
    Some(out)
}

/// What went wrong writing one policy's status.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The API call failed.
    #[error("{kind} {name}: {source}")]
    Api {
        /// The policy's kind.
        kind: &'static str,
        /// The policy's name.
        name: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
}

/// Sets (or removes, for `None`) this node's condition on one policy. A policy that no
/// longer exists needs nothing; a conflict (another node wrote meanwhile) rereads.
pub async fn write(
    client: &kube::Client,
    node: &str,
    kind: PolicyKind,
    name: &str,
    state: Option<&Programmed>,
) -> Result<(), StatusError> {
    let Some(resource) = resource(kind) else {
        return Ok(());
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let err = |source| StatusError::Api {
        kind: kind.as_str(),
        name: name.to_string(),
        source,
    };
    for _ in 0..5 {
        let Some(mut object) = api.get_opt(name).await.map_err(err)? else {
            return Ok(());
        };
        let conditions = object.data["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let Some(conditions) = updated(&conditions, node, state, object.metadata.generation) else {
            return Ok(());
        };
        if !object.data["status"].is_object() {
            object.data["status"] = json!({});
        }
        object.data["status"]["conditions"] = Value::Array(conditions);
        match api
            .replace_status(name, &PostParams::default(), &object)
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(e) => return Err(err(e)),
        }
    }
    Ok(())
}

/// Removes this node's condition from every reported policy: what `--uninstall` does.
pub async fn remove_all(client: &kube::Client, node: &str) -> Result<usize, StatusError> {
    let mut removed = 0;
    for kind in [
        PolicyKind::AdminNetworkPolicy,
        PolicyKind::ClusterNetworkPolicy,
    ] {
        let Some(resource) = resource(kind) else {
            continue;
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = match api.list(&Default::default()).await {
            Ok(list) => list,
            // A kind the cluster does not serve holds no condition.
            Err(kube::Error::Api(status)) if status.code == 404 => continue,
            Err(source) => {
                return Err(StatusError::Api {
                    kind: kind.as_str(),
                    name: String::new(),
                    source,
                });
            }
        };
        for object in list {
            let has = object.data["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == condition_type(node).as_str())
                });
            if let (true, Some(name)) = (has, object.metadata.name.as_deref()) {
                write(client, node, kind, name, None).await?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// Keeps the API server's conditions of `node` equal to what the reconciler publishes,
/// until the publisher is gone.
pub async fn run(client: kube::Client, node: String, mut desired: watch::Receiver<Desired>) {
    // What the API server shows, as far as this reporter wrote it.
    let mut shown: Desired = Desired::new();
    loop {
        let want = desired.borrow_and_update().clone();
        let mut failed = false;
        let gone: Vec<(PolicyKind, String)> = shown
            .keys()
            .filter(|k| !want.contains_key(k))
            .cloned()
            .collect();
        for key in gone {
            match write(&client, &node, key.0, &key.1, None).await {
                Ok(()) => {
                    shown.remove(&key);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "removing the status condition failed; retrying");
                    failed = true;
                }
            }
        }
        for (key, state) in &want {
            if shown.get(key) == Some(state) {
                continue;
            }
            match write(&client, &node, key.0, &key.1, Some(&state.state)).await {
                Ok(()) => {
                    shown.insert(key.clone(), state.clone());
                }
                Err(e) => {
                    tracing::warn!(error = %e, "writing the status condition failed; retrying");
                    failed = true;
                }
            }
        }
        if failed {
            // Retry after a pause, or sooner if the reconciler publishes again.
            let _ = tokio::time::timeout(RETRY, desired.changed()).await;
        } else if desired.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

    use super::*;

    #[test]
    fn only_this_nodes_condition_changes() {
        let other = json!({"type": "palisade.dev/Programmed-b", "status": "True",
            "reason": "Programmed", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"});
        let foreign = json!({"type": "Ready-In-Zone-x", "status": "True",
            "reason": "R", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"});
        let base = vec![other.clone(), foreign.clone()];
        let set = updated(&base, "a", Some(&Programmed::Yes), Some(3)).unwrap();
        assert_eq!(set.len(), 3);
        assert_eq!(
            set[..2],
            base[..],
            "the other conditions are kept as they were"
        );
        assert_eq!(set[2]["type"], "palisade.dev/Programmed-a");
        assert_eq!(set[2]["status"], "True");
        assert_eq!(set[2]["reason"], "Programmed");
        assert_eq!(set[2]["observedGeneration"], 3);
        // Writing the same again changes nothing.
        assert_eq!(updated(&set, "a", Some(&Programmed::Yes), Some(3)), None);
        // A new generation is written, keeping the transition time.
        let next = updated(&set, "a", Some(&Programmed::Yes), Some(4)).unwrap();
        assert_eq!(next[2]["lastTransitionTime"], set[2]["lastTransitionTime"]);
        assert_eq!(next[2]["observedGeneration"], 4);
        // Invalid: False with the reason.
        let invalid = updated(
            &set,
            "a",
            Some(&Programmed::Invalid("spec.priority".into())),
            Some(4),
        )
        .unwrap();
        assert_eq!(invalid[2]["status"], "False");
        assert_eq!(invalid[2]["reason"], "Invalid");
        assert!(
            invalid[2]["message"]
                .as_str()
                .unwrap()
                .ends_with("spec.priority")
        );
        // Removal takes only this node's condition.
        assert_eq!(updated(&set, "a", None, None).unwrap(), base);
        assert_eq!(updated(&base, "a", None, None), None, "nothing to remove");
    }

    #[test]
    fn only_admin_and_cluster_network_policies_are_reported() {
        assert!(reported(PolicyKind::AdminNetworkPolicy));
        assert!(reported(PolicyKind::ClusterNetworkPolicy));
        assert!(!reported(PolicyKind::BaselineAdminNetworkPolicy));
    }
}
