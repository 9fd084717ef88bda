//! `matrix -o html`: one self-contained page (inline CSS and script, no external URL): a
//! heatmap of pods grouped by namespace, filters by namespace, protocol and port, and each
//! cell's verdict with its provenance on click. Above [`MAX_PODS`] sources or destinations
//! the rows and columns are classes of pods no policy tells apart, and the page says so.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use palisade_engine::{Engine, Matrix, PodId};
use serde_json::{Value, json};

use super::view::View;

/// Most pods shown one per row or column; above, rows and columns are classes.
pub const MAX_PODS: usize = 200;

const STYLE: &str = include_str!("html/page.css");
const SCRIPT: &str = include_str!("html/page.js");

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

/// Each cell's verdict index, `[probe][row][column]` (-1: the probe is a named port the
/// destination does not declare).
type Cells = Vec<Vec<Vec<i64>>>;

/// The page's data: axes, probes, the distinct verdicts, and the cells whose verdict
/// depends on the address a workload will get (`[probe, row, column]`); and apart, each
/// cell's verdict index (kept out of the JSON tree: millions of numbers at cluster scale).
fn data(engine: &Engine, m: &Matrix, v: &View<'_>) -> (Value, Cells) {
    let classes = v.rows.len() > MAX_PODS || v.cols.len() > MAX_PODS;
    let rows = axis(engine, m, &v.rows, classes);
    let cols = axis(engine, m, &v.cols, classes);
    let col_index: HashMap<PodId, usize> = v.cols.iter().map(|&i| (m.pods[i], i)).collect();
    let mut verdicts: Vec<Value> = Vec::new();
    let mut index: HashMap<palisade_engine::Verdict, usize> = HashMap::new();
    let mut cells: Vec<Vec<Vec<i64>>> = Vec::with_capacity(v.probes.len());
    let mut depends: Vec<[usize; 3]> = Vec::new();
    for (pi, probe) in v.probes.iter().enumerate() {
        let mut grid = Vec::with_capacity(rows.len());
        for r in &rows {
            let mut line = Vec::with_capacity(cols.len());
            for c in &cols {
                let applies = !c
                    .pods
                    .iter()
                    .any(|p| col_index.get(p).is_some_and(|&t| !(v.applies)(pi, t)));
                let (a, b) = pair(r, c);
                let Some(flow) = engine.pod_flow(a, b, probe.probe).filter(|_| applies) else {
                    line.push(-1);
                    continue;
                };
                if engine.depends_on_address(&flow) {
                    depends.push([pi, grid.len(), line.len()]);
                }
                // Verdicts are compared as values and serialized once each.
                let verdict = engine.evaluate(&flow);
                let next = verdicts.len();
                let i = match index.get(&verdict) {
                    Some(&i) => i,
                    None => {
                        verdicts.push(serde_json::to_value(&verdict).unwrap_or(Value::Null));
                        index.insert(verdict, next);
                        next
                    }
                };
                line.push(i as i64);
            }
            grid.push(line);
        }
        cells.push(grid);
    }
    let axis_json = |a: &[Axis]| -> Vec<Value> {
        a.iter()
            .map(|x| json!({"name": x.name, "namespace": x.namespace, "pods": x.count}))
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
    let meta = json!({
        "level": if classes { "classes" } else { "pods" },
        "note": note,
        "probes": v.probes.iter().map(|p| json!({"label": p.label(), "protocol": p.probe.protocol.as_str(), "port": p.probe.port})).collect::<Vec<_>>(),
        "rows": axis_json(&rows),
        "cols": axis_json(&cols),
        "verdicts": verdicts,
        "depends": depends,
    });
    (meta, cells)
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
    let (meta, cells) = data(engine, m, v);
    // The cells are numbers only: nothing in them can close the script element.
    let mut data = script_safe(&meta);
    data.pop();
    data.push_str(",\"cells\":");
    data.push_str(&serde_json::to_string(&cells).unwrap_or_else(|_| "[]".into()));
    data.push('}');
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Palisade connectivity matrix</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<h1>Palisade connectivity matrix</h1>\n<p id=\"note\"></p>\n<form id=\"filters\">\n<label>from namespace <select id=\"from-ns\"></select></label>\n<label>to namespace <select id=\"to-ns\"></select></label>\n<label>protocol <select id=\"protocol\"></select></label>\n<label>port <select id=\"port\"></select></label>\n</form>\n<p class=\"legend\"><span class=\"cell allowed\"></span> allowed <span class=\"cell denied\"></span> denied <span class=\"cell na\"></span> not a port of the destination; ? depends on the address a workload will get. Rows: from; columns: to. Click a cell for its explanation.</p>\n<div id=\"layout\"><div id=\"grid\"><table id=\"matrix\"></table></div>\n<aside id=\"explanation\"><p>Click a cell.</p></aside></div>\n<script type=\"application/json\" id=\"data\">{}</script>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n",
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
        for asset in [STYLE, SCRIPT] {
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
}
