//! `matrix --services`: Service ports as columns, each cell how many of the port's endpoints
//! a source reaches, in every output format, with the focus flags; and the engine's grouped
//! evaluation against deciding every endpoint for every source one by one.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::collections::BTreeMap;

use common::{palisade_stdin, stderr, stdout};
use palisade_analysis::{Analysis, ServiceCell};
use palisade_engine::{Engine, Options, PodId};
use serde_json::Value;

/// x/client may reach every pod; x/other may send to port 8080 only; y/web-3 admits only
/// app=client. Service y/web's named targetPort lands on 8080, 8081 and 8080; y/empty has no
/// endpoint; x/ext is an ExternalName; z/six is IPv6 only, served by the IPv6-only z/six-1,
/// and z/dual has both families.
const CLUSTER: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: x}
---
apiVersion: v1
kind: Namespace
metadata: {name: "y"}
---
apiVersion: v1
kind: Namespace
metadata: {name: z}
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: x, labels: {app: client}}
spec: {containers: [{name: c, image: i}]}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: other, namespace: x, labels: {app: other}}
spec: {containers: [{name: c, image: i}]}
status: {podIP: 10.0.0.2}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: "y", labels: {app: web}}
spec: {containers: [{name: c, image: i, ports: [{name: http, containerPort: 8080}]}]}
status: {podIP: 10.0.1.1}
---
apiVersion: v1
kind: Pod
metadata: {name: web-2, namespace: "y", labels: {app: web}}
spec: {containers: [{name: c, image: i, ports: [{name: http, containerPort: 8081}]}]}
status: {podIP: 10.0.1.2}
---
apiVersion: v1
kind: Pod
metadata: {name: web-3, namespace: "y", labels: {app: web, tier: locked}}
spec: {containers: [{name: c, image: i, ports: [{name: http, containerPort: 8080}]}]}
status: {podIP: 10.0.1.3}
---
apiVersion: v1
kind: Pod
metadata: {name: dual, namespace: z, labels: {app: dual}}
spec: {containers: [{name: c, image: i}]}
status: {podIPs: [{ip: 10.0.2.1}, {ip: 'fd00::21'}]}
---
apiVersion: v1
kind: Pod
metadata: {name: six-1, namespace: z, labels: {app: six}}
spec: {containers: [{name: c, image: i}]}
status: {podIPs: [{ip: 'fd00::22'}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: lock, namespace: "y"}
spec:
  podSelector: {matchLabels: {tier: locked}}
  policyTypes: [Ingress]
  ingress:
  - from: [{namespaceSelector: {}, podSelector: {matchLabels: {app: client}}}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: only-8080, namespace: x}
spec:
  podSelector: {matchLabels: {app: other}}
  policyTypes: [Egress]
  egress:
  - ports: [{port: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: "y"}
spec:
  clusterIP: 10.96.0.10
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: empty, namespace: "y"}
spec:
  selector: {app: nothing}
  ports: [{port: 443}]
---
apiVersion: v1
kind: Service
metadata: {name: ext, namespace: x}
spec:
  type: ExternalName
  externalName: example.com
  ports: [{port: 443}]
---
apiVersion: v1
kind: Service
metadata: {name: six, namespace: z}
spec:
  ipFamilies: [IPv6]
  selector: {app: six}
  ports: [{port: 80}]
"#;

/// `palisade matrix -f - --services ARGS` on [`CLUSTER`], which must succeed.
fn matrix(args: &[&str]) -> String {
    let o = palisade_stdin(
        &[&["matrix", "-f", "-", "--services"][..], args].concat(),
        CLUSTER,
    );
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// The jsonl cells by (from, to).
fn cells(args: &[&str]) -> BTreeMap<(String, String), Value> {
    matrix(&[&["-o", "jsonl"][..], args].concat())
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            let key = (
                v["from"].as_str().unwrap().to_string(),
                v["to"].as_str().unwrap().to_string(),
            );
            (key, v)
        })
        .collect()
}

fn cell<'a>(cells: &'a BTreeMap<(String, String), Value>, from: &str, to: &str) -> &'a Value {
    cells
        .get(&(from.to_string(), to.to_string()))
        .unwrap_or_else(|| panic!("no cell {from} -> {to}"))
}

/// `(pod, port)` of each denied endpoint of a cell.
fn denied(v: &Value) -> Vec<(String, u64)> {
    v["denied"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["pod"].as_str().unwrap().to_string(),
                        e["port"].as_u64().unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn cells_count_the_endpoints_each_source_reaches() {
    let c = cells(&[]);
    let web = "svc/y/web:http";
    let v = cell(&c, "x/client", web);
    assert_eq!(
        (&v["reach"], &v["allowed"], &v["endpoints"]),
        (&"all".into(), &3.into(), &3.into()),
        "{v}"
    );
    assert!(
        v.get("denied").is_none() && v.get("hairpin").is_none(),
        "{v}"
    );

    // The named target port is 8081 on web-2: outside x/other's egress, unlike web-1's 8080.
    let v = cell(&c, "x/other", web);
    assert_eq!(
        (&v["reach"], &v["allowed"]),
        (&"some".into(), &1.into()),
        "{v}"
    );
    assert_eq!(
        denied(v),
        [("y/web-2".to_string(), 8081), ("y/web-3".to_string(), 8080)],
        "{v}"
    );

    // Hairpin: web-3 reaching itself through the Service is subject to its own policy.
    let v = cell(&c, "y/web-3", web);
    assert_eq!(
        (&v["reach"], &v["allowed"], &v["hairpin"]),
        (&"some".into(), &2.into(), &true.into()),
        "{v}"
    );
    assert_eq!(denied(v), [("y/web-3".to_string(), 8080)], "{v}");
    let v = cell(&c, "y/web-1", web);
    assert_eq!(
        (&v["reach"], &v["hairpin"]),
        (&"some".into(), &true.into()),
        "{v}"
    );

    let v = cell(&c, "x/client", "svc/y/empty:443");
    assert_eq!(
        (&v["reach"], &v["endpoints"], &v["noEndpoints"]),
        (&"none".into(), &0.into(), &true.into()),
        "{v}"
    );

    for from in ["x/client", "y/web-3", "z/six-1"] {
        let v = cell(&c, from, "svc/x/ext:443");
        assert_eq!(
            v["reach"],
            Value::Null,
            "never reachable or unreachable: {v}"
        );
        assert!(
            v["notEvaluable"].as_str().unwrap().contains("ExternalName"),
            "{v}"
        );
        assert!(v.get("allowed").is_none(), "{v}");
    }

    // An IPv6-only Service: dual-stack z/dual reaches it in IPv6, IPv4-only x/client cannot.
    let v = cell(&c, "z/dual", "svc/z/six:80");
    assert_eq!(
        (&v["reach"], &v["allowed"]),
        (&"all".into(), &1.into()),
        "{v}"
    );
    let v = cell(&c, "x/client", "svc/z/six:80");
    assert_eq!(v["reach"], Value::Null, "{v}");
    assert!(
        v["notEvaluable"]
            .as_str()
            .unwrap()
            .contains("no IPv6 address"),
        "{v}"
    );
}

#[test]
fn jsonl_keys_come_in_the_documented_order_and_json_holds_the_same_cells() {
    let out = matrix(&["-o", "jsonl", "--from", "x/other", "--to", "svc/y/web"]);
    assert_eq!(
        out,
        "{\"from\":\"x/other\",\"to\":\"svc/y/web:http\",\"protocol\":\"TCP\",\"port\":80,\"reach\":\"some\",\"allowed\":1,\"endpoints\":3,\"denied\":[{\"address\":\"10.0.1.2\",\"pod\":\"y/web-2\",\"port\":8081},{\"address\":\"10.0.1.3\",\"pod\":\"y/web-3\",\"port\":8080}]}\n"
    );
    let json: Value = serde_json::from_str(&matrix(&["-o", "json"])).unwrap();
    let lines: Vec<Value> = cells(&[]).into_values().collect();
    let mut array = json.as_array().unwrap().clone();
    array.sort_by_key(|v| (v["from"].to_string(), v["to"].to_string()));
    assert_eq!(array, lines);
}

#[test]
fn csv_table_and_markdown_show_the_same_words() {
    let csv = matrix(&["-o", "csv"]);
    assert!(
        csv.starts_with("from,to,protocol,port,reach,allowed,endpoints,denied\n"),
        "{csv}"
    );
    for line in [
        "x/other,svc/y/web:http,TCP,80,some,1,3,y/web-2 10.0.1.2:8081 y/web-3 10.0.1.3:8080\n",
        "x/client,svc/y/empty:443,TCP,443,none,0,0,\n",
        "x/client,svc/x/ext:443,TCP,443,n/a,,,\n",
    ] {
        assert!(csv.contains(line), "{line}in\n{csv}");
    }
    // Columns: svc/x/ext:443, svc/y/empty:443, svc/y/web:http, svc/z/six:80.
    let table = matrix(&["-o", "table"]);
    let rows: BTreeMap<&str, Vec<&str>> = table
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let first = words.next()?;
            first.contains('/').then(|| (first, words.collect()))
        })
        .filter(|(_, w): &(&str, Vec<&str>)| w.len() == 4)
        .collect();
    assert_eq!(rows["x/client"], ["n/a", "-", "all", "n/a"], "{table}");
    assert_eq!(rows["x/other"], ["n/a", "-", "some", "n/a"], "{table}");
    assert_eq!(rows["z/dual"], ["n/a", "-", "some", "all"], "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.trim_end().ends_with("3    3    p    0")),
        "headers downwards:\n{table}"
    );
    let md = matrix(&["-o", "md"]);
    assert!(
        md.contains(
            "| from \\ to | svc/x/ext:443 | svc/y/empty:443 | svc/y/web:http | svc/z/six:80 |\n"
        ),
        "{md}"
    );
    assert!(md.contains("| x/other | n/a | - | some | n/a |\n"), "{md}");
}

#[test]
fn summary_dot_and_html_render_the_services() {
    let summary = matrix(&["-o", "summary"]);
    assert!(
        summary.contains("classes (pods no policy can tell apart, numbered as in the pod summary)"),
        "{summary}"
    );
    assert!(
        summary.contains("\nsvc/y/web:http (TCP/80):\n"),
        "{summary}"
    );
    assert!(
        summary.contains("(1 pod) -> some (1 of 3 endpoints; denied: y/web-2 10.0.1.2:8081, y/web-3 10.0.1.3:8080)\n"),
        "{summary}"
    );
    assert!(
        summary.contains("svc/x/ext:443 (TCP/443), an alias of example.com:\n"),
        "{summary}"
    );
    assert!(
        summary.contains("-> none: the port has no endpoint\n"),
        "{summary}"
    );
    // The pod summary numbers the same classes.
    let o = palisade_stdin(&["matrix", "-f", "-", "-o", "summary"], CLUSTER);
    let pods = stdout(&o);
    let class_line = |s: &str| {
        s.lines()
            .find(|l| l.contains("{app=other}"))
            .map(str::to_string)
    };
    assert_eq!(class_line(&summary), class_line(&pods), "{pods}");

    let dot = matrix(&["-o", "dot"]);
    assert!(dot.starts_with("// palisade matrix --services"), "{dot}");
    assert!(
        dot.contains("[label=\"svc/x/ext\", shape=ellipse, style=dashed];"),
        "{dot}"
    );
    assert!(dot.contains("[label=\"http (some)\"];"), "{dot}");
    assert!(
        dot.contains("[label=\"http\"];"),
        "x/client reaches every endpoint:\n{dot}"
    );

    let html = matrix(&["-o", "html"]);
    assert!(
        html.contains("<title>Palisade Service matrix</title>"),
        "{html}"
    );
    assert!(html.contains("<th>svc/y/web:http</th>"), "{html}");
    assert!(
        html.contains("<td class=\"some\" title=\"x/other -&gt; svc/y/web:http: some (1 of 3 endpoints)\ndenied: y/web-2 10.0.1.2:8081\ndenied: y/web-3 10.0.1.3:8080\" data-reach=\"some\"></td>"),
        "{html}"
    );
    let o = palisade_stdin(&["matrix", "-f", "-", "-o", "html"], CLUSTER);
    assert!(
        stdout(&o).contains("<title>Palisade connectivity matrix</title>"),
        "without --services, the pod page"
    );
}

#[test]
fn focus_flags_pick_sources_and_services() {
    let keys = |args: &[&str]| -> (Vec<String>, Vec<String>) {
        let c = cells(args);
        let mut from: Vec<String> = c.keys().map(|k| k.0.clone()).collect();
        let mut to: Vec<String> = c.keys().map(|k| k.1.clone()).collect();
        from.dedup();
        to.sort();
        to.dedup();
        (from, to)
    };
    let all_pods: Vec<String> = [
        "x/client", "x/other", "y/web-1", "y/web-2", "y/web-3", "z/dual", "z/six-1",
    ]
    .map(String::from)
    .to_vec();
    let (from, to) = keys(&["--to", "svc/y/web"]);
    assert_eq!(
        (from.as_slice(), to.as_slice()),
        (&all_pods[..], &["svc/y/web:http".to_string()][..]),
    );
    let (from, to) = keys(&["--namespace", "y"]);
    assert_eq!(from, ["y/web-1", "y/web-2", "y/web-3"]);
    assert_eq!(to, ["svc/y/empty:443", "svc/y/web:http"]);
    let (from, to) = keys(&["--namespace", "y", "--direction", "ingress"]);
    assert_eq!((from.as_slice(), to.len()), (&all_pods[..], 2));
    let (from, to) = keys(&["--namespace", "x", "--direction", "egress"]);
    assert_eq!(
        (from, to.len()),
        (vec!["x/client".to_string(), "x/other".to_string()], 4)
    );
    let (_, to) = keys(&["--ports", "http,443", "--to", "y"]);
    assert_eq!(to, ["svc/y/empty:443", "svc/y/web:http"]);

    for (args, want) in [
        (
            &["--to", "svc/y/nothing"][..],
            "--to y/nothing: matches no Service",
        ),
        (&["--protocols", "UDP"][..], "pick no port"),
        (
            &["--namespace", "q"][..],
            "no pod with an address and no Service",
        ),
    ] {
        let o = palisade_stdin(
            &[&["matrix", "-f", "-", "--services"][..], args].concat(),
            CLUSTER,
        );
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
}

/// Services for a generated cluster, from its pods' labels: per namespace, one per label
/// some pod carries (up to four), with a named target port that lands on different numbers
/// (`http` is 80 or 81 by deployment), a UDP port, a numbered one; and one ExternalName.
fn services_for(cluster: &palisade_model::Cluster) -> String {
    let mut by_ns: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for p in &cluster.pods {
        let labels = by_ns.entry(p.namespace.as_str()).or_default();
        for (k, v) in &p.labels {
            if labels.len() < 4 && !labels.contains(&(k.as_str(), v.as_str())) {
                labels.push((k.as_str(), v.as_str()));
            }
        }
    }
    let mut out = String::new();
    for (ns, labels) in by_ns {
        for (i, (k, v)) in labels.into_iter().enumerate() {
            out.push_str(&format!(
                "---\napiVersion: v1\nkind: Service\nmetadata: {{name: s{i}, namespace: {ns:?}}}\nspec:\n  selector: {{{k:?}: {v:?}}}\n  ports:\n  - {{name: http, port: 8000, targetPort: http}}\n  - {{name: dns, port: 53, protocol: UDP, targetPort: dns}}\n  - {{name: metrics, port: 9090}}\n"
            ));
        }
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: alias, namespace: {ns:?}}}\nspec: {{type: ExternalName, externalName: example.com}}\n"
        ));
    }
    out
}

/// Checks every cell of the Service matrix of `engine` (every source, every Service) against
/// deciding each endpoint for the source one by one with `evaluate_service_port`; returns how
/// many decided cells it checked.
fn check_one_by_one(engine: &Engine, what: &str) -> usize {
    let mut checked = 0;
    let sources: Vec<PodId> = Analysis::new(engine)
        .addressable_pods()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let all: Vec<usize> = (0..engine.cluster().services.len()).collect();
    let m = Analysis::new(engine).service_matrix(&sources, &all);
    for (row, &pod) in sources.iter().enumerate() {
        let primary = engine.endpoint_for_pod(pod, None).unwrap();
        for (col, column) in m.columns.iter().enumerate() {
            let svc = &engine.cluster().services[column.service];
            let got = m.cell(row, col);
            let at = format!(
                "{what}: {} -> {}",
                engine.cluster().pods[pod].key(),
                svc.key()
            );
            let v6 = engine.service_family(svc, primary);
            let src = engine
                .endpoint_for_pod(pod, Some(v6))
                .filter(|e| e.ip.is_ipv6() == v6);
            let (Some(port), None, Some(src)) = (&column.port, &svc.external_name, src) else {
                assert!(matches!(got, ServiceCell::NotEvaluable(_)), "{at}: {got:?}");
                continue;
            };
            let ports = engine.service_endpoints(svc, v6);
            let endpoints = ports.iter().find(|p| &p.port == port).unwrap();
            let verdicts = engine.evaluate_service_port(src, endpoints);
            let denied: Vec<_> = verdicts
                .iter()
                .filter(|v| !v.verdict.allowed)
                .map(|v| v.endpoint)
                .collect();
            let allowed = verdicts.len() - denied.len();
            // Denied endpoints are listed for `some` only.
            let listed = match allowed > 0 && !denied.is_empty() {
                true => denied,
                false => Vec::new(),
            };
            let ServiceCell::Decided(r) = got else {
                panic!("{at}: {got:?}");
            };
            assert_eq!(
                (&r.denied, r.allowed, r.total, r.hairpin),
                (
                    &listed,
                    allowed,
                    verdicts.len(),
                    verdicts.iter().any(|v| v.hairpin)
                ),
                "{at}:{}",
                port.label()
            );
            checked += 1;
        }
    }
    checked
}

/// The engine's grouped cells equal deciding every endpoint for every source one by one
/// with `evaluate_service_port`, on generated clusters with and without admin tiers and
/// with pods that policies tell apart one by one.
#[test]
fn grouped_cells_agree_with_every_endpoint_decided_one_by_one() {
    let mut checked = 0;
    for seed in 1..=6u64 {
        let spec = palisade_gen::Spec {
            pods: 60,
            policies: 25,
            seed,
            admin: seed % 2 == 0,
        };
        let labels = if seed % 3 == 0 {
            palisade_gen::PodLabels::Distinct
        } else {
            palisade_gen::PodLabels::Deployment
        };
        let g = palisade_gen::generate_with(&spec, labels);
        let base = g.load().unwrap();
        let services = services_for(&base);
        let (c, p) = (g.cluster_yaml(), g.policies_yaml());
        let loaded = palisade_model::load_sources(
            [
                ("cluster.yaml", c.as_str()),
                ("policies.yaml", p.as_str()),
                ("services.yaml", services.as_str()),
            ],
            Default::default(),
        )
        .unwrap();
        let engine = Engine::new(loaded.cluster, Options::default());
        checked += check_one_by_one(&engine, &format!("seed {seed}"));
    }
    assert!(checked > 3_000, "{checked} cells checked");
}

/// Host-network pods with the same labels on two nodes: the one on web-3's node reaches it by
/// the node-local exemption, the other does not, so they may not share verdicts.
const HOSTS: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: node-1}
status: {addresses: [{type: InternalIP, address: 192.168.0.1}]}
---
apiVersion: v1
kind: Node
metadata: {name: node-2}
status: {addresses: [{type: InternalIP, address: 192.168.0.2}]}
---
apiVersion: v1
kind: Pod
metadata: {name: host-1, namespace: x, labels: {app: host}}
spec: {nodeName: node-1, hostNetwork: true, containers: [{name: c, image: i}]}
status: {podIP: 192.168.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: host-2, namespace: x, labels: {app: host}}
spec: {nodeName: node-2, hostNetwork: true, containers: [{name: c, image: i}]}
status: {podIP: 192.168.0.2}
"#;

/// The fixture's cells, and host-network sources split by node, against deciding each
/// endpoint one by one.
#[test]
fn fixture_and_host_network_cells_agree_with_one_by_one() {
    let web3_on_node_1 = CLUSTER.replace(
        "metadata: {name: web-3, namespace: \"y\", labels: {app: web, tier: locked}}\nspec: {",
        "metadata: {name: web-3, namespace: \"y\", labels: {app: web, tier: locked}}\nspec: {nodeName: node-1, ",
    );
    assert_ne!(web3_on_node_1, CLUSTER);
    let loaded = palisade_model::load_sources(
        [
            ("cluster.yaml", web3_on_node_1.as_str()),
            ("hosts.yaml", HOSTS),
        ],
        Default::default(),
    )
    .unwrap();
    let engine = Engine::new(loaded.cluster, Options::default());
    let checked = check_one_by_one(&engine, "fixture");
    assert!(checked > 15, "{checked} cells checked");
    let sources: Vec<PodId> = Analysis::new(&engine)
        .addressable_pods()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let web = engine
        .cluster()
        .services
        .iter()
        .position(|s| s.name == "web")
        .unwrap();
    let m = Analysis::new(&engine).service_matrix(&sources, &[web]);
    let reach = |name: &str| {
        let row = sources
            .iter()
            .position(|&p| engine.cluster().pods[p].name == name)
            .unwrap();
        match m.cell(row, 0) {
            ServiceCell::Decided(r) => r.allowed,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        (reach("host-1"), reach("host-2")),
        (3, 2),
        "node-local reaches web-3"
    );
}
