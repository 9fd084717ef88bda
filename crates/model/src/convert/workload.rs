//! Workloads (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs) as
//! inputs: each stands for its pods by one representative pod, so a repository of
//! manifests can be analysed before anything is deployed.
//!
//! The representative is named `name[Kind]` (a name no real pod can have: brackets are not
//! allowed in DNS names), carries the template's labels, host-network mode and container
//! ports, and has no address: the engine evaluates it by selector logic alone.

use k8s_openapi::api::{apps::v1 as apps, batch::v1 as batch, core::v1 as core};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::{decode, required_name};
use crate::diag::{Ctx, Severity};
use crate::objects::{Origin, Pod};
use crate::validate;

/// A kind of workload whose pod template Palisade reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkloadKind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `apps/v1` DaemonSet.
    DaemonSet,
    /// `apps/v1` ReplicaSet.
    ReplicaSet,
    /// `batch/v1` Job.
    Job,
    /// `batch/v1` CronJob.
    CronJob,
}

impl WorkloadKind {
    /// The kind for an apiVersion and kind this module reads.
    pub(crate) fn of(api: &str, kind: &str) -> Option<WorkloadKind> {
        Some(match (api, kind) {
            ("apps/v1", "Deployment") => WorkloadKind::Deployment,
            ("apps/v1", "StatefulSet") => WorkloadKind::StatefulSet,
            ("apps/v1", "DaemonSet") => WorkloadKind::DaemonSet,
            ("apps/v1", "ReplicaSet") => WorkloadKind::ReplicaSet,
            ("batch/v1", "Job") => WorkloadKind::Job,
            ("batch/v1", "CronJob") => WorkloadKind::CronJob,
            _ => return None,
        })
    }

    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::DaemonSet => "DaemonSet",
            WorkloadKind::ReplicaSet => "ReplicaSet",
            WorkloadKind::Job => "Job",
            WorkloadKind::CronJob => "CronJob",
        }
    }

    /// The field path of the pod template's spec.
    fn template_spec_path(self) -> &'static str {
        match self {
            WorkloadKind::CronJob => "spec.jobTemplate.spec.template.spec",
            _ => "spec.template.spec",
        }
    }
}

/// The workload a representative pod stands for, from its name (`name[Kind]`); `None`
/// for a real pod.
pub fn workload_of(pod: &Pod) -> Option<WorkloadKind> {
    let inner = pod.name.strip_suffix(']')?;
    let (_, kind) = inner.rsplit_once('[')?;
    [
        WorkloadKind::Deployment,
        WorkloadKind::StatefulSet,
        WorkloadKind::DaemonSet,
        WorkloadKind::ReplicaSet,
        WorkloadKind::Job,
        WorkloadKind::CronJob,
    ]
    .into_iter()
    .find(|k| k.as_str() == kind)
}

/// The metadata and pod template of a workload object.
fn template(
    ctx: &mut Ctx<'_>,
    value: &Value,
    kind: WorkloadKind,
) -> Option<(ObjectMeta, Option<core::PodTemplateSpec>)> {
    // Fields outside the pod template cannot change connectivity: unknown ones are notices.
    let unknown = Severity::Notice;
    Some(match kind {
        WorkloadKind::Deployment => {
            let o: apps::Deployment = decode(ctx, value, unknown)?;
            (o.metadata, o.spec.map(|s| s.template))
        }
        WorkloadKind::StatefulSet => {
            let o: apps::StatefulSet = decode(ctx, value, unknown)?;
            (o.metadata, o.spec.map(|s| s.template))
        }
        WorkloadKind::DaemonSet => {
            let o: apps::DaemonSet = decode(ctx, value, unknown)?;
            (o.metadata, o.spec.map(|s| s.template))
        }
        WorkloadKind::ReplicaSet => {
            let o: apps::ReplicaSet = decode(ctx, value, unknown)?;
            (o.metadata, o.spec.and_then(|s| s.template))
        }
        WorkloadKind::Job => {
            let o: batch::Job = decode(ctx, value, unknown)?;
            (o.metadata, o.spec.map(|s| s.template))
        }
        WorkloadKind::CronJob => {
            let o: batch::CronJob = decode(ctx, value, unknown)?;
            (
                o.metadata,
                o.spec.and_then(|s| s.job_template.spec).map(|s| s.template),
            )
        }
    })
}

/// The representative pod of a workload: `namespace/name[Kind]`, the template's labels,
/// host-network mode and container ports, no node and no address.
pub(crate) fn workload(
    ctx: &mut Ctx<'_>,
    value: &Value,
    kind: WorkloadKind,
    origin: Origin,
) -> Option<Pod> {
    let (meta, template) = template(ctx, value, kind)?;
    let name = required_name(ctx, meta.name.as_ref())?;
    let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
    ctx.object = format!("{} {namespace}/{name}", kind.as_str());
    if let Some(e) = validate::dns_label(&namespace) {
        ctx.error("metadata.namespace", e);
    }
    let Some(template) = template else {
        ctx.error(
            kind.template_spec_path().trim_end_matches(".spec"),
            "Required value: a workload without a pod template stands for no pod",
        );
        return None;
    };
    let labels = template.metadata.and_then(|m| m.labels).unwrap_or_default();
    let template_path = kind.template_spec_path();
    let labels_path = format!(
        "{}.metadata.labels",
        template_path.trim_end_matches(".spec")
    );
    validate::labels(ctx, &labels_path, &labels);
    let spec = template.spec.unwrap_or_default();
    let ports = super::core::container_ports(ctx, &spec, template_path);
    Some(Pod {
        name: format!("{name}[{}]", kind.as_str()),
        namespace,
        labels,
        node_name: None,
        host_network: spec.host_network.unwrap_or(false),
        ips: Vec::new(),
        ports,
        ready: true,
        origin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_kind_stands_for_its_template() {
        let yaml = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: i, ports: [{containerPort: 8080, name: http}]}]}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: backup, namespace: shop}
spec:
  schedule: "0 * * * *"
  jobTemplate:
    spec:
      template:
        metadata: {labels: {app: backup}}
        spec: {restartPolicy: Never, containers: [{name: c, image: i}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {hostNetwork: true, containers: [{name: c, image: i}]}
"#;
        let loaded = crate::load_str(yaml).unwrap();
        let pods = &loaded.cluster.pods;
        let keys: Vec<String> = pods.iter().map(Pod::key).collect();
        assert_eq!(
            keys,
            [
                "kube-system/agent[DaemonSet]",
                "shop/backup[CronJob]",
                "shop/web[Deployment]"
            ]
        );
        let web = &pods[2];
        assert_eq!(web.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(web.ports[0].port.get(), 8080, "container ports kept");
        assert!(web.ips.is_empty(), "no address");
        assert_eq!(workload_of(web), Some(WorkloadKind::Deployment));
        assert!(pods[0].host_network, "the template's network mode");
        assert_eq!(workload_of(&pods[1]), Some(WorkloadKind::CronJob));
    }

    #[test]
    fn bad_template_fields_name_their_path() {
        let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - name: c\n        ports: [{containerPort: 70000}]\n";
        let err = crate::load_str(yaml).unwrap_err().to_string();
        let crate::LoadError::Invalid(diags) = crate::load_str(yaml).unwrap_err() else {
            panic!("{err}");
        };
        let d = &diags[0];
        assert_eq!(
            (d.line, d.field.as_str(), d.object.as_str()),
            (
                11,
                "spec.template.spec.containers[0].ports[0].containerPort",
                "Deployment default/web"
            ),
            "{d}"
        );
    }
}
