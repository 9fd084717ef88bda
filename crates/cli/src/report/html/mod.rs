//! `matrix -o html`: one self-contained page (inline CSS and script, no external URL): a
//! heatmap of pods grouped by namespace, filters by namespace, protocol and port, and on
//! click each cell's explanation as `explain` prints it: each side's walk through every tier,
//! each policy's outcome, and each rule that did not match and why. Above [`MAX_PODS`]
//! sources or destinations the rows and columns are classes of pods no policy tells apart,
//! and the page says so.
//!
//! The page stays small and quick at cluster scale: every distinct side verdict is written
//! once (`sides`), every distinct cell (verdict, the two sides, whether it depends on an
//! address) once (`kinds`), and each row of each probe is one run-length-encoded string of
//! kind indices that the script decodes only when it shows the row; rows are put in the
//! document a chunk at a time, as the reader scrolls. The walks come in parts (see
//! [`walks`]) that the script puts together for the cell clicked.

mod services;
mod tables;
mod walks;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use palisade_analysis::{Analysis, Matrix, Probe, WalkShape};
use palisade_engine::{EndpointKind, Engine, PodId, SideVerdict};
use rayon::prelude::*;
use serde_json::{Value, json};

pub use self::services::services;
use self::tables::{Interner, NA, encode_row};
use super::view::View;

/// Most pods shown one per row or column; above, rows and columns are classes.
pub const MAX_PODS: usize = 200;

const STYLE: &str = include_str!("page.css");
const WALKS_SCRIPT: &str = include_str!("walks.js");
const SCRIPT: &str = include_str!("page.js");

/// A row or column of the page: one pod, or a class of pods.
struct Axis {
    name: String,
    namespace: String,
    /// The pods evaluated for it: the pod, or two members of the class (one if it has one).
    pods: Vec<PodId>,
    count: usize,
}

/// The pods or classes of `idx` (matrix rows).
fn axis(engine: &Engine, m: &Matrix, idx: &[usize], classes: bool) -> Vec<Axis> {
    let pods = &engine.cluster().pods;
    if !classes {
        return idx
            .iter()
            .map(|&i| Axis {
                name: pods[m.pods[i]].key(),
                namespace: pods[m.pods[i]].namespace.clone(),
                pods: vec![m.pods[i]],
                count: 1,
            })
            .collect();
    }
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &i in idx {
        members.entry(m.class_of[i]).or_default().push(i);
    }
    let mut out: Vec<Axis> = members
        .into_values()
        .map(|rows| {
            let first = &pods[m.pods[rows[0]]];
            let labels: Vec<String> = first
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            Axis {
                name: format!(
                    "{} {{{}}} ({} pods)",
                    first.namespace,
                    labels.join(","),
                    rows.len()
                ),
                namespace: first.namespace.clone(),
                pods: rows.iter().take(2).map(|&r| m.pods[r]).collect(),
                count: rows.len(),
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

/// The two pods a cell stands for: distinct members when a class meets itself.
fn pair(from: &Axis, to: &Axis) -> (PodId, PodId) {
    if from.pods[0] == to.pods[0] && to.pods.len() > 1 {
        (from.pods[0], to.pods[1])
    } else {
        (from.pods[0], to.pods[0])
    }
}

/// A side as the panel shows it: the verdict, and which parts of its walk are shown.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Side {
    verdict: SideVerdict,
    shape: WalkShape,
}

/// A distinct cell: allowed, the egress and ingress sides (indices into the side table),
/// and whether the verdict depends on the address a workload will get.
type Kind = (bool, u32, u32, bool);

/// Distinct sides and kinds, each numbered in order of first appearance.
#[derive(Default)]
struct Tables {
    sides: Interner<Side>,
    kinds: Interner<Kind>,
}

/// The cells of `rows` (indices into `axes.0`) for every probe: kind indices into a
/// table of this chunk's own; `out[probe][row][column]`.
fn chunk(
    engine: &Engine,
    axes: (&[Axis], &[Axis]),
    rows: std::ops::Range<usize>,
    probes: &[Probe],
    applies: &[Vec<bool>],
) -> (Tables, Vec<Vec<Vec<u32>>>) {
    let (row_axes, col_axes) = axes;
    let mut t = Tables::default();
    let out = probes
        .iter()
        .enumerate()
        .map(|(pi, &probe)| {
            rows.clone()
                .map(|r| {
                    col_axes
                        .iter()
                        .enumerate()
                        .map(|(ci, c)| {
                            let (a, b) = pair(&row_axes[r], c);
                            let Some(flow) = Analysis::new(engine)
                                .pod_flow(a, b, probe)
                                .filter(|_| applies[pi][ci])
                            else {
                                return NA;
                            };
                            let depends = engine.depends_on_address(&flow);
                            let v = engine.evaluate(&flow);
                            let mut side = |verdict: SideVerdict, at: EndpointKind| {
                                let shape = WalkShape::of(at, &verdict);
                                t.sides.id(&Side { verdict, shape })
                            };
                            let e = side(v.egress, flow.src.kind);
                            let i = side(v.ingress, flow.dst.kind);
                            t.kinds.id(&(v.allowed, e, i, depends))
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    (t, out)
}

/// `[verdict line, walked, stops at the Admin tier, lists the isolating NetworkPolicies'
/// rules]`: what the script needs of a side besides its subject's walk parts.
fn side_json(side: &Side, texts: &mut Interner<String>) -> [u32; 4] {
    let shape = side.shape;
    [
        texts.id(&format!("  => {}", side.verdict)),
        u32::from(shape.walked),
        u32::from(shape.stops_at_admin),
        u32::from(shape.lists_network_rules),
    ]
}

/// The page's data as one JSON object: axes, probes, the walk and kind tables, and each
/// probe's rows as encoded strings.
fn data(engine: &Engine, m: &Matrix, v: &View<'_>) -> Value {
    let classes = v.rows.len() > MAX_PODS || v.cols.len() > MAX_PODS;
    let rows = axis(engine, m, &v.rows, classes);
    let cols = axis(engine, m, &v.cols, classes);
    let col_index: HashMap<PodId, usize> = v.cols.iter().map(|&i| (m.pods[i], i)).collect();
    let applies: Vec<Vec<bool>> = (0..v.probes.len())
        .map(|pi| {
            cols.iter()
                .map(|c| {
                    !c.pods
                        .iter()
                        .any(|p| col_index.get(p).is_some_and(|&t| !(v.applies)(pi, t)))
                })
                .collect()
        })
        .collect();
    let probes: Vec<Probe> = v.probes.iter().map(|p| p.probe).collect();
    // One chunk of rows per worker of rayon's pool (at most 8), merged in row order.
    let threads = rayon::current_num_threads().clamp(1, 8);
    let per = rows.len().div_ceil(threads).max(1);
    let chunks: Vec<(Tables, Vec<Vec<Vec<u32>>>)> = (0..rows.len())
        .step_by(per)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|start| {
            let range = start..(start + per).min(rows.len());
            chunk(engine, (&rows, &cols), range, &probes, &applies)
        })
        .collect();
    // Merge the chunks' tables, renumbering their sides and kinds, and encode the rows.
    let mut all = Tables::default();
    let mut encoded: Vec<Vec<String>> = vec![Vec::with_capacity(rows.len()); probes.len()];
    for (t, cells) in chunks {
        let side_map: Vec<u32> = t.sides.items.iter().map(|s| all.sides.id(s)).collect();
        let kind_map: Vec<u32> = t
            .kinds
            .items
            .iter()
            .map(|&(a, e, i, d)| {
                all.kinds
                    .id(&(a, side_map[e as usize], side_map[i as usize], d))
            })
            .collect();
        for (pi, grid) in cells.into_iter().enumerate() {
            for mut line in grid {
                for c in line.iter_mut().filter(|c| **c != NA) {
                    *c = kind_map[*c as usize];
                }
                let mut s = String::new();
                encode_row(&line, &mut s);
                encoded[pi].push(s);
            }
        }
    }
    let mut texts = Interner::default();
    let sides: Vec<[u32; 4]> = all
        .sides
        .items
        .iter()
        .map(|s| side_json(s, &mut texts))
        .collect();
    let w = walks::walks(engine, (&rows, &cols), &probes, &mut texts);
    let axis_json = |a: &[Axis], subjects: &[u32]| -> Vec<Value> {
        a.iter()
            .zip(subjects)
            .map(|(x, &subject)| {
                let pod = |i: usize| x.pods.get(i).map(|&p| engine.cluster().pods[p].key());
                json!({"name": x.name, "namespace": x.namespace, "pods": x.count, "pod": pod(0), "pod2": pod(1), "subject": subject})
            })
            .collect()
    };
    let note = if classes {
        format!(
            "{} sources and {} destinations: more than {MAX_PODS}, so each row and column is a class of pods that no policy tells apart (same namespace and labels, same side of every CIDR); a class's cell is the verdict between two of its pods.",
            v.rows.len(),
            v.cols.len()
        )
    } else {
        format!(
            "{} sources, {} destinations: one row and column per pod.",
            v.rows.len(),
            v.cols.len()
        )
    };
    let kinds: Vec<[u32; 4]> = all
        .kinds
        .items
        .iter()
        .map(|&(a, e, i, d)| [u32::from(a), e, i, u32::from(d)])
        .collect();
    json!({
        "level": if classes { "classes" } else { "pods" },
        "note": note,
        "probes": v.probes.iter().map(|p| json!({"label": p.label(), "protocol": p.probe.protocol.as_str(), "port": p.probe.port})).collect::<Vec<_>>(),
        "rows": axis_json(&rows, &w.row_subject),
        "cols": axis_json(&cols, &w.col_subject),
        "kinds": kinds,
        "cells": encoded,
        "sides": sides,
        "subjects": w.subjects.items.iter().map(|s| json!([s.admin_line, s.admin, s.network_line, u32::from(s.isolated), s.network, s.baseline_line, s.baseline])).collect::<Vec<_>>(),
        "tables": w.tables,
        "steps": w.steps,
        "notReached": w.not_reached,
        "texts": texts.items,
    })
}

/// JSON that can sit inside a `<script>` element: every `<` escaped.
fn script_safe(v: &Value) -> String {
    v.to_string().replace('<', "\\u003c")
}

/// Writes the page.
pub fn html(
    out: &mut impl Write,
    engine: &Engine,
    m: &Matrix,
    v: &View<'_>,
) -> std::io::Result<()> {
    let data = script_safe(&data(engine, m, v));
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Palisade connectivity matrix</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<h1>Palisade connectivity matrix</h1>\n<p id=\"note\"></p>\n<form id=\"filters\">\n<label>from namespace <select id=\"from-ns\"></select></label>\n<label>to namespace <select id=\"to-ns\"></select></label>\n<label>protocol <select id=\"protocol\"></select></label>\n<label>port <select id=\"port\"></select></label>\n</form>\n<p class=\"legend\"><span class=\"cell allowed\"></span> allowed <span class=\"cell denied\"></span> denied <span class=\"cell na\"></span> not a port of the destination; ? depends on the address a workload will get. Rows: from; columns: to. Click a cell for its explanation.</p>\n<div id=\"layout\"><div id=\"grid\"><table id=\"matrix\"></table><p id=\"more\"></p></div>\n<aside id=\"explanation\"><p>Click a cell.</p></aside></div>\n<script type=\"application/json\" id=\"data\">{}</script>\n<script>\n{WALKS_SCRIPT}</script>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n",
        data
    )?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_data_cannot_close_the_element() {
        let v = json!({"name": "</script><b>"});
        let s = script_safe(&v);
        assert!(!s.contains('<'), "{s}");
        assert_eq!(
            serde_json::from_str::<Value>(&s).unwrap(),
            v,
            "still the same JSON"
        );
    }

    #[test]
    fn page_assets_name_no_external_url() {
        for asset in [STYLE, WALKS_SCRIPT, SCRIPT] {
            assert!(
                !asset.contains("http://") && !asset.contains("https://"),
                "self-contained"
            );
            assert!(
                !asset.contains("@import") && !asset.contains("url("),
                "no fetched resource"
            );
        }
    }

    /// Every cell's panel, as the page's script puts it together, against `explain` for the
    /// same two pods: both sides, line for line.
    fn panel_reads_as_explain(inputs: &[(String, String)], probes: &[Probe]) {
        let mut cases = Vec::new();
        let dir = std::env::temp_dir().join(format!(
            "palisade-html-panel-{}-{}",
            std::process::id(),
            inputs.len()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        for (n, (name, yaml)) in inputs.iter().enumerate() {
            let loaded = palisade_model::load_sources(
                [(name.as_str(), yaml.as_str())],
                palisade_model::LoadOptions::default(),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            let engine = Engine::new(loaded.cluster, palisade_engine::Options::default());
            let analysis = Analysis::new(&engine);
            let m = analysis.matrix(probes);
            let names: Vec<String> = m
                .pods
                .iter()
                .map(|&p| engine.cluster().pods[p].key())
                .collect();
            let all: Vec<usize> = (0..names.len()).collect();
            let (yes, no) = (
                |_: usize, _: usize, _: usize| true,
                |_: usize, _: usize| true,
            );
            let v = View {
                names: &names,
                rows: all.clone(),
                cols: all.clone(),
                probes: probes
                    .iter()
                    .map(|&probe| super::super::view::ProbeCol { probe, name: None })
                    .collect(),
                allowed: &yes,
                applies: &no,
                depends: &yes,
            };
            let data = data(&engine, &m, &v);
            let file = dir.join(format!("{n}.json"));
            std::fs::write(&file, data.to_string()).unwrap();
            let classes = all.len() > MAX_PODS;
            let rows = axis(&engine, &m, &all, classes);
            let mut want = Vec::new();
            for (p, &probe) in probes.iter().enumerate() {
                for (r, row) in rows.iter().enumerate() {
                    for (c, col) in rows.iter().enumerate() {
                        let (a, b) = pair(row, col);
                        let Some(flow) = analysis.pod_flow(a, b, probe) else {
                            continue;
                        };
                        let text = analysis.explain(&flow).to_string();
                        let sides: Vec<String> = text
                            .split("\n\n")
                            .skip(1)
                            .map(|s| s.split_once('\n').unwrap().1.trim_end().to_owned())
                            .collect();
                        want.push(((p, r, c), sides));
                    }
                }
            }
            cases.push((name.clone(), file, want));
        }
        let script = format!(
            "const walks = require({:?});\nconst fs = require('fs');\nfor (const file of process.argv.slice(1)) {{\n  const data = JSON.parse(fs.readFileSync(file, 'utf8'));\n  const w = walks(data);\n  const out = [];\n  data.probes.forEach((_, p) => data.rows.forEach((_, r) => data.cols.forEach((_, c) => {{\n    if (w.row(p, r)[c] !== w.NA) out.push([p, r, c, w.sideText(p, r, c, true), w.sideText(p, r, c, false)]);\n  }})));\n  console.log(JSON.stringify(out));\n}}\n",
            concat!(env!("CARGO_MANIFEST_DIR"), "/src/report/html/walks.js")
        );
        let o = std::process::Command::new("node")
            .arg("-e")
            .arg(script)
            .args(cases.iter().map(|c| &c.1))
            .output()
            .expect("Node.js runs the page's script in this test (apt-get install nodejs; .ci/run installs it)");
        assert!(
            o.status.success(),
            "node: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::remove_dir_all(&dir).ok();
        let stdout = String::from_utf8(o.stdout).unwrap();
        let outputs: Vec<&str> = stdout.lines().collect();
        assert_eq!(outputs.len(), cases.len());
        let mut compared = 0;
        for ((name, _, want), got) in cases.iter().zip(outputs) {
            let got: Vec<(usize, usize, usize, String, String)> =
                serde_json::from_str(got).unwrap();
            assert_eq!(got.len(), want.len(), "{name}: the same cells");
            for ((cell, sides), (p, r, c, egress, ingress)) in want.iter().zip(&got) {
                assert_eq!(*cell, (*p, *r, *c), "{name}");
                assert_eq!(&sides[0], egress, "{name}: egress of cell {cell:?}");
                assert_eq!(&sides[1], ingress, "{name}: ingress of cell {cell:?}");
                compared += 1;
            }
        }
        assert!(compared > 0);
    }

    fn probes() -> Vec<Probe> {
        use palisade_model::Protocol::{Tcp, Udp};
        [(Tcp, 80), (Tcp, 81), (Udp, 80), (Tcp, 443), (Tcp, 8080)]
            .map(|(protocol, port)| Probe { protocol, port })
            .to_vec()
    }

    fn read(path: &std::path::Path) -> String {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn panel_reads_as_explain_on_every_lab_policy_set() {
        let fixtures =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../lab/tests/fixtures");
        let mut sets: Vec<_> = std::fs::read_dir(fixtures.join("sets"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        sets.sort();
        let mut inputs = Vec::new();
        for cluster in ["xyz-two-nodes.yaml", "xyz-three-nodes.yaml"] {
            let cluster = read(&fixtures.join("clusters").join(cluster));
            for set in &sets {
                inputs.push((
                    set.display().to_string(),
                    format!("{cluster}\n---\n{}", read(set)),
                ));
            }
        }
        assert!(inputs.len() > 60, "{} inputs", inputs.len());
        panel_reads_as_explain(&inputs, &probes());
    }

    #[test]
    fn panel_reads_as_explain_on_generated_clusters_and_classes() {
        let mut inputs = Vec::new();
        // 120 pods: one row per pod; 260: rows and columns are classes.
        for (pods, policies, seed) in [(120, 40, 1), (260, 60, 2)] {
            let g = palisade_gen::generate(&palisade_gen::Spec {
                pods,
                policies,
                seed,
                admin: true,
            });
            inputs.push((
                format!("gen-{pods}"),
                format!("{}\n---\n{}", g.cluster_yaml(), g.policies_yaml()),
            ));
        }
        panel_reads_as_explain(&inputs, &probes());
    }

    #[test]
    fn panel_reads_as_explain_on_dual_stack_pods() {
        let yaml = r#"
apiVersion: v1
kind: Namespace
metadata: {name: x, labels: {tenant: t1}}
---
apiVersion: v1
kind: Namespace
metadata: {name: z, labels: {tenant: t2}}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x, labels: {app: a}}
spec: {containers: [{name: c, ports: [{containerPort: 8080, name: web}]}]}
status: {podIP: 10.0.0.1, podIPs: [{ip: 10.0.0.1}, {ip: "fd00::1"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: x, labels: {app: b}}
spec: {containers: [{name: c, ports: [{containerPort: 80, name: web}]}]}
status: {podIP: "fd00::2", podIPs: [{ip: "fd00::2"}, {ip: 10.0.0.2}]}
---
apiVersion: v1
kind: Pod
metadata: {name: c, namespace: z, labels: {app: a}}
status: {podIP: "fd00::3", podIPs: [{ip: "fd00::3"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: d, namespace: z, labels: {app: d}}
status: {podIP: 10.0.0.4}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: tenants}
spec:
  priority: 5
  subject: {namespaces: {}}
  ingress:
  - {name: web, action: Allow, from: [{namespaces: {sameLabels: [tenant]}}], ports: [{namedPort: web}]}
  - {name: other, action: Deny, from: [{namespaces: {notSameLabels: [tenant]}}]}
  egress:
  - {name: v4-only, action: Deny, to: [{networks: [10.0.0.0/30]}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b, namespace: x}
spec:
  podSelector: {matchLabels: {app: b}}
  ingress:
  - from: [{ipBlock: {cidr: "fd00::/64", except: ["fd00::1/128"]}}]
    ports: [{port: web}]
"#;
        panel_reads_as_explain(&[("dual".into(), yaml.into())], &probes());
    }
}
