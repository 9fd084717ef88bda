//! `matrix -o html`: one self-contained page (inline CSS and script, no external URL): a
//! heatmap of pods grouped by namespace, filters by namespace, protocol and port, and on
//! click each cell's verdict with its provenance and, for a side that isolation denied,
//! each rule of the isolating policies and why it did not match, as `explain` prints it. Above [`MAX_PODS`] sources or destinations the rows and columns are classes of
//! pods no policy tells apart, and the page says so.
//!
//! The page stays small and quick at cluster scale: every distinct side explanation is
//! written once (`walks`), every distinct cell (verdict, the two walks, whether it depends on an
//! address) once (`kinds`), and each row of each probe is one run-length-encoded string of
//! kind indices that the script decodes only when it shows the row; rows are put in the
//! document a chunk at a time, as the reader scrolls.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use palisade_engine::{Decision, Engine, Flow, Matrix, PodId, Probe, SideVerdict};
use palisade_model::Direction;
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

/// A distinct cell: allowed, the egress and ingress walks (indices into the walk table),
/// and whether the verdict depends on the address a workload will get.
type Kind = (bool, u32, u32, bool);

/// Distinct walks and kinds, each numbered in order of first appearance.
#[derive(Default)]
struct Tables {
    walks: Vec<String>,
    walk_index: HashMap<String, u32>,
    kinds: Vec<Kind>,
    kind_index: HashMap<Kind, u32>,
}

impl Tables {
    fn walk(&mut self, text: &str) -> u32 {
        if let Some(&i) = self.walk_index.get(text) {
            return i;
        }
        let i = self.walks.len() as u32;
        self.walks.push(text.to_owned());
        self.walk_index.insert(text.to_owned(), i);
        i
    }

    fn kind(&mut self, k: Kind) -> u32 {
        let next = self.kinds.len() as u32;
        *self.kind_index.entry(k).or_insert_with(|| {
            self.kinds.push(k);
            next
        })
    }
}

/// No cell: the probe is a named port the destination does not declare.
const NA: u32 = u32::MAX;

/// One side as the page explains it: when the NetworkPolicy tier denied it by isolation,
/// the isolating policies and each one's rules and why none matched; the policy that
/// decided, with its file and line; then the side's verdict, as `explain` ends it.
fn side_text(engine: &Engine, flow: &Flow, side: &SideVerdict, dir: Direction) -> String {
    let mut text = engine.isolation_why_not(flow, side, dir);
    if let Decision::Rule(m) = &side.decision {
        text.push_str(&format!(
            "  {} tier: {}\n",
            side.tier.as_str(),
            m.policy.with_origin()
        ));
    }
    text.push_str(&format!("  => {side}\n"));
    text.truncate(text.trim_end().len());
    text
}

/// The walk index of `side`: a side not decided by isolation reads the same for every
/// flow, so it is written once per distinct side.
fn side_walk(
    t: &mut Tables,
    plain: &mut HashMap<SideVerdict, u32>,
    engine: &Engine,
    flow: &Flow,
    side: &SideVerdict,
    dir: Direction,
) -> u32 {
    if !matches!(side.decision, Decision::Isolated(_)) {
        if let Some(&i) = plain.get(side) {
            return i;
        }
        let i = t.walk(&side_text(engine, flow, side, dir));
        plain.insert(side.clone(), i);
        return i;
    }
    t.walk(&side_text(engine, flow, side, dir))
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
    let mut plain: HashMap<SideVerdict, u32> = HashMap::new();
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
                            let Some(flow) =
                                engine.pod_flow(a, b, probe).filter(|_| applies[pi][ci])
                            else {
                                return NA;
                            };
                            let depends = engine.depends_on_address(&flow);
                            let v = engine.evaluate(&flow);
                            let mut walk =
                                |side, dir| side_walk(&mut t, &mut plain, engine, &flow, side, dir);
                            let e = walk(&v.egress, Direction::Egress);
                            let i = walk(&v.ingress, Direction::Ingress);
                            t.kind((v.allowed, e, i, depends))
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    (t, out)
}

/// `IDX` or `IDX*COUNT` (base 36), comma-separated; `-` for no cell.
fn encode_row(cells: &[u32], out: &mut String) {
    let mut i = 0;
    while i < cells.len() {
        let k = cells[i];
        let run = cells[i..].iter().take_while(|&&c| c == k).count();
        if i > 0 {
            out.push(',');
        }
        if k == NA {
            out.push('-');
        } else {
            push_base36(k as usize, out);
        }
        if run > 1 {
            out.push('*');
            push_base36(run, out);
        }
        i += run;
    }
}

fn push_base36(mut n: usize, out: &mut String) {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut buf = [0u8; 16];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = DIGITS[n % 36];
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.extend(buf[at..].iter().map(|&b| char::from(b)));
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
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8);
    let per = rows.len().div_ceil(threads).max(1);
    let chunks: Vec<(Tables, Vec<Vec<Vec<u32>>>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..rows.len())
            .step_by(per)
            .map(|start| {
                let range = start..(start + per).min(rows.len());
                let (rows, cols, probes, applies) = (&rows, &cols, &probes, &applies);
                s.spawn(move || chunk(engine, (rows, cols), range, probes, applies))
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    // Merge the chunks' tables, renumbering their kinds, and encode the rows.
    let mut all = Tables::default();
    let mut encoded: Vec<Vec<String>> = vec![Vec::with_capacity(rows.len()); probes.len()];
    for (t, cells) in chunks {
        let walk_map: Vec<u32> = t.walks.iter().map(|w| all.walk(w)).collect();
        let kind_map: Vec<u32> = t
            .kinds
            .iter()
            .map(|&(a, e, i, d)| all.kind((a, walk_map[e as usize], walk_map[i as usize], d)))
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
    let axis_json = |a: &[Axis]| -> Vec<Value> {
        a.iter()
            .map(|x| {
                let pod = x.pods.first().map(|&p| engine.cluster().pods[p].key());
                json!({"name": x.name, "namespace": x.namespace, "pods": x.count, "pod": pod})
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
        .iter()
        .map(|&(a, e, i, d)| [u32::from(a), e, i, u32::from(d)])
        .collect();
    json!({
        "level": if classes { "classes" } else { "pods" },
        "note": note,
        "probes": v.probes.iter().map(|p| json!({"label": p.label(), "protocol": p.probe.protocol.as_str(), "port": p.probe.port})).collect::<Vec<_>>(),
        "rows": axis_json(&rows),
        "cols": axis_json(&cols),
        "walks": all.walks,
        "kinds": kinds,
        "cells": encoded,
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
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Palisade connectivity matrix</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<h1>Palisade connectivity matrix</h1>\n<p id=\"note\"></p>\n<form id=\"filters\">\n<label>from namespace <select id=\"from-ns\"></select></label>\n<label>to namespace <select id=\"to-ns\"></select></label>\n<label>protocol <select id=\"protocol\"></select></label>\n<label>port <select id=\"port\"></select></label>\n</form>\n<p class=\"legend\"><span class=\"cell allowed\"></span> allowed <span class=\"cell denied\"></span> denied <span class=\"cell na\"></span> not a port of the destination; ? depends on the address a workload will get. Rows: from; columns: to. Click a cell for its explanation.</p>\n<div id=\"layout\"><div id=\"grid\"><table id=\"matrix\"></table><p id=\"more\"></p></div>\n<aside id=\"explanation\"><p>Click a cell.</p></aside></div>\n<script type=\"application/json\" id=\"data\">{}</script>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n",
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

    #[test]
    fn rows_are_run_length_encoded() {
        let cases: [(&[u32], &str); 4] = [
            (&[], ""),
            (&[0, 0, 0, 1], "0*3,1"),
            (&[35, 36, NA, NA], "z,10,-*2"),
            (&[7], "7"),
        ];
        for (cells, want) in cases {
            let mut s = String::new();
            encode_row(cells, &mut s);
            assert_eq!(s, want, "{cells:?}");
        }
    }
}
