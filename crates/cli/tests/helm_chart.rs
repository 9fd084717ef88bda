//! The Helm chart (`deploy/helm/palisade`) with the real `helm` (built by
//! `testenv/helm.sh`): `helm lint --strict`, `helm template` with each value reaching the
//! objects, bad values refused naming the value, the plain manifests of `deploy/` equal to
//! the chart's rendering object by object, and every rendering accepted by the real API
//! server (server-side dry run, strict field validation; the prometheus-operator CRDs
//! installed for the monitors). Without helm or the control plane the tests print why they
//! are skipped (and fail under `CI=true`).

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use palisade_testenv::{ControlPlane, Helm};
use serde_json::{Value, json};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/helm/palisade");

fn helm_run(helm: &Helm, args: &[&str]) -> Output {
    Command::new(helm.bin())
        .args(args)
        .current_dir(ROOT)
        // No user configuration or cache of this machine's helm.
        .env("HELM_CONFIG_HOME", "/nonexistent/helm-config")
        .env("HELM_CACHE_HOME", "/nonexistent/helm-cache")
        .env("HELM_DATA_HOME", "/nonexistent/helm-data")
        .output()
        .unwrap()
}

/// `helm template palisade CHART --namespace palisade-system --set VALUE...`.
fn render(helm: &Helm, values: &[&str]) -> String {
    let mut args = vec![
        "template",
        "palisade",
        CHART,
        "--namespace",
        "palisade-system",
    ];
    for v in values {
        args.extend(["--set", v]);
    }
    let o = helm_run(helm, &args);
    assert!(
        o.status.success(),
        "helm template {values:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The documents of a YAML stream, keyed by kind/namespace/name.
fn objects(text: &str) -> BTreeMap<String, Value> {
    palisade_model::yaml::parse_documents(text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .into_iter()
        .map(|d| d.value)
        .filter(|v| !v.is_null())
        .map(|v| {
            let key = format!(
                "{}/{}/{}",
                v["kind"].as_str().unwrap_or(""),
                v["metadata"]["namespace"].as_str().unwrap_or(""),
                v["metadata"]["name"].as_str().unwrap_or("")
            );
            (key, v)
        })
        .collect()
}

fn files(paths: &[&str]) -> String {
    paths
        .iter()
        .map(|p| std::fs::read_to_string(Path::new(ROOT).join(p)).unwrap())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

fn daemonset(rendered: &str, name: &str) -> Value {
    objects(rendered)
        .remove(&format!("DaemonSet/palisade-system/{name}"))
        .unwrap_or_else(|| panic!("no DaemonSet {name}"))
}

fn args(ds: &Value) -> Vec<String> {
    ds["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn helm_lint_passes_for_every_shape_of_the_chart() {
    let Some(helm) =
        palisade_testenv::require_helm("helm_lint_passes_for_every_shape_of_the_chart")
    else {
        return;
    };
    for values in [
        &[][..],
        &[
            "metrics.podMonitor.enabled=true",
            "metrics.serviceMonitor.enabled=true",
        ],
        &["agent.enabled=false", "cleanup.enabled=true"],
        &["namespace.create=true", "metrics.address="],
        &["reportStatus=true", "cleanup.enabled=true"],
    ] {
        let mut args = vec!["lint", "--strict", CHART];
        for v in values {
            args.extend(["--set", v]);
        }
        let o = helm_run(&helm, &args);
        assert!(
            o.status.success(),
            "helm lint {values:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn the_plain_manifests_are_the_chart_rendered() {
    let Some(helm) = palisade_testenv::require_helm("the_plain_manifests_are_the_chart_rendered")
    else {
        return;
    };
    let chart = objects(&render(&helm, &["namespace.create=true"]));
    let plain = objects(&files(&[
        "deploy/00-namespace.yaml",
        "deploy/01-serviceaccount.yaml",
        "deploy/02-rbac.yaml",
        "deploy/03-daemonset.yaml",
    ]));
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        plain.keys().collect::<Vec<_>>(),
        "run deploy/helm/render.sh"
    );
    for (key, object) in &chart {
        assert_eq!(object, &plain[key], "{key}: run deploy/helm/render.sh");
    }
    let chart = objects(&render(
        &helm,
        &["agent.enabled=false", "cleanup.enabled=true"],
    ));
    let plain = objects(&files(&["deploy/cleanup/palisade-cleanup.yaml"]));
    assert_eq!(
        chart, plain,
        "the cleanup DaemonSet: run deploy/helm/render.sh"
    );
}

#[test]
fn values_reach_the_daemonset() {
    let Some(helm) = palisade_testenv::require_helm("values_reach_the_daemonset") else {
        return;
    };
    let rendered = render(
        &helm,
        &[
            "image.repository=registry.example/palisade",
            "image.tag=9.9.9",
            "image.pullPolicy=Always",
            "nodeSelector.kubernetes\\.io/os=linux",
            "tolerations=null",
            "resources.limits.memory=1Gi",
            "logLevel=debug",
            "logFormat=text",
            "decisionLog.level=all",
            "decisionLog.ratePerSource=2.5",
            "domainNames.resolvers={10.96.0.10,169.254.20.10}",
            "domainNames.ttl=10-60",
            "domainNames.holdReplies=false",
            "metrics.address=::",
            "metrics.port=29464",
            "health.port=29465",
        ],
    );
    let ds = daemonset(&rendered, "palisade-agent");
    let pod = &ds["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "registry.example/palisade:9.9.9");
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    assert!(pod["tolerations"].is_null(), "{}", pod["tolerations"]);
    assert_eq!(c["resources"]["limits"]["memory"], "1Gi");
    assert_eq!(c["env"][1], json!({"name": "RUST_LOG", "value": "debug"}));
    assert_eq!(
        args(&ds),
        [
            "agent",
            "--source",
            "kube",
            "--node",
            "$(NODE_NAME)",
            "--listen",
            "127.0.0.1:29465",
            "--metrics-listen",
            "[::]:29464",
            "--log-format",
            "text",
            "--decision-log",
            "-",
            "--decision-log-level",
            "all",
            "--decision-log-rate",
            "2.5",
            "--dns-resolver",
            "10.96.0.10",
            "--dns-resolver",
            "169.254.20.10",
            "--dns-ttl",
            "10-60",
            "--dns-no-hold",
        ]
    );
    assert_eq!(
        c["securityContext"]["capabilities"]["add"],
        json!(["NET_ADMIN", "NET_RAW"])
    );
    assert_eq!(c["ports"][0]["containerPort"], 29464);
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], 29465);
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], 29465);

    // No decision log, no metrics listener: neither flag nor port.
    let rendered = render(&helm, &["decisionLog.enabled=false", "metrics.address="]);
    let ds = daemonset(&rendered, "palisade-agent");
    let a = args(&ds);
    assert!(!a.iter().any(|a| a.starts_with("--decision-log")), "{a:?}");
    assert!(!a.iter().any(|a| a == "--metrics-listen"), "{a:?}");
    assert!(ds["spec"]["template"]["spec"]["containers"][0]["ports"].is_null());
    // No resolvers: no DNS flag, and no raw sockets.
    assert!(!a.iter().any(|a| a.starts_with("--dns")), "{a:?}");
    assert_eq!(
        ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"],
        json!(["NET_ADMIN"])
    );

    // reportStatus: the flag, `update` on the two status subresources and nothing more,
    // and the cleanup step removing the node's conditions with the same identity.
    let rendered = render(&helm, &["reportStatus=true"]);
    assert!(args(&daemonset(&rendered, "palisade-agent")).contains(&"--report-status".to_string()));
    let role = &objects(&rendered)["ClusterRole//palisade-agent"];
    let rules = role["rules"].as_array().unwrap();
    assert_eq!(
        rules.last().unwrap(),
        &json!({"apiGroups": ["policy.networking.k8s.io"],
                "resources": ["adminnetworkpolicies/status", "clusternetworkpolicies/status"],
                "verbs": ["update"]})
    );
    let default_role = &objects(&render(&helm, &[]))["ClusterRole//palisade-agent"];
    assert_eq!(
        default_role["rules"].as_array().unwrap().len(),
        rules.len() - 1
    );
    let rendered = render(
        &helm,
        &[
            "agent.enabled=false",
            "cleanup.enabled=true",
            "reportStatus=true",
        ],
    );
    let all = objects(&rendered);
    assert!(
        all.contains_key("ClusterRole//palisade-agent"),
        "the cleanup needs the role"
    );
    assert!(!all.contains_key("DaemonSet/palisade-system/palisade-agent"));
    let cleanup = daemonset(&rendered, "palisade-cleanup");
    let pod = &cleanup["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "palisade-agent");
    assert_eq!(
        pod["initContainers"][0]["args"],
        json!([
            "agent",
            "--uninstall",
            "--report-status",
            "--node",
            "$(NODE_NAME)"
        ])
    );

    // The monitors select the agents' pods and their metrics port.
    let rendered = render(
        &helm,
        &[
            "metrics.podMonitor.enabled=true",
            "metrics.serviceMonitor.enabled=true",
        ],
    );
    let all = objects(&rendered);
    let labels =
        daemonset(&rendered, "palisade-agent")["spec"]["template"]["metadata"]["labels"].clone();
    let pm = &all["PodMonitor/palisade-system/palisade-agent"];
    assert_eq!(pm["spec"]["selector"]["matchLabels"], labels);
    assert_eq!(pm["spec"]["podMetricsEndpoints"][0]["port"], "metrics");
    let svc = &all["Service/palisade-system/palisade-agent-metrics"];
    assert_eq!(svc["spec"]["selector"], labels);
    assert_eq!(svc["spec"]["clusterIP"], "None");
    let sm = &all["ServiceMonitor/palisade-system/palisade-agent"];
    assert_eq!(
        sm["spec"]["selector"]["matchLabels"],
        svc["metadata"]["labels"]
    );
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
}

#[test]
fn bad_values_are_refused_naming_the_value() {
    let Some(helm) = palisade_testenv::require_helm("bad_values_are_refused_naming_the_value")
    else {
        return;
    };
    for (value, named) in [
        ("logFormat=xml", "/logFormat"),
        ("decisionLog.level=some", "/decisionLog/level"),
        (
            "decisionLog.ratePerSource=fast",
            "/decisionLog/ratePerSource",
        ),
        ("metrics.port=70000", "/metrics/port"),
        (
            "metrics.podMonitor.interval=often",
            "/metrics/podMonitor/interval",
        ),
        ("metrcs.port=1", "metrcs"),
    ] {
        let o = helm_run(&helm, &["template", "palisade", CHART, "--set", value]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{value} was accepted");
        assert!(err.contains(named), "{value}: {err}");
    }
}

#[test]
fn every_rendering_passes_the_api_servers_dry_run() {
    let test = "every_rendering_passes_the_api_servers_dry_run";
    let Some(helm) = palisade_testenv::require_helm(test) else {
        return;
    };
    let Some(bins) = palisade_testenv::require(test) else {
        return;
    };
    let cp = ControlPlane::start(&bins, None).expect("control plane");
    cp.kubectl_ok(&[
        "apply",
        "--server-side",
        "-f",
        &helm.crds().display().to_string(),
    ]);
    for kind in ["podmonitors", "servicemonitors"] {
        let start = std::time::Instant::now();
        while !cp.kubectl(&["get", kind, "-A"]).status.success() {
            assert!(start.elapsed().as_secs() < 60, "{kind} never served");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    // The namespace exists for real, so that the namespaced objects' dry run can succeed.
    cp.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &render(&helm, &["namespace.create=true", "agent.enabled=false"]),
    );
    for values in [
        &["namespace.create=true"][..],
        &[
            "metrics.podMonitor.enabled=true",
            "metrics.serviceMonitor.enabled=true",
        ],
        &["agent.enabled=false", "cleanup.enabled=true"],
        &[
            "metrics.address=::",
            "decisionLog.enabled=false",
            "nodeSelector.a=b",
        ],
    ] {
        let rendered = render(&helm, values);
        let o = cp.kubectl_stdin(
            &["apply", "--dry-run=server", "--validate=strict", "-f", "-"],
            &rendered,
        );
        assert!(
            o.status.success(),
            "{values:?}: {}\n{rendered}",
            String::from_utf8_lossy(&o.stderr)
        );
        let applied = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            applied.lines().count(),
            objects(&rendered).len(),
            "every object was checked: {applied}"
        );
    }
    // The dry run does check: a toleration operator the API does not know is refused.
    let rendered = render(&helm, &["tolerations[0].operator=Sometimes"]);
    let o = cp.kubectl_stdin(
        &["apply", "--dry-run=server", "--validate=strict", "-f", "-"],
        &rendered,
    );
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("tolerations"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
