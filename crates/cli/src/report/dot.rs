//! `matrix -o dot`: a Graphviz digraph of the allowed connections between classes of pods
//! (pods no policy tells apart: same namespace and labels, usually), grouped by namespace.

use std::collections::BTreeMap;
use std::io::Write;

use palisade_analysis::Matrix;
use palisade_engine::Engine;

use super::view::View;

/// A DOT string literal.
pub(super) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Most probe names an edge label lists before `...`.
const LABEL_PROBES: usize = 4;

/// The graph: a node per class (namespace, labels without controller hashes, pod count),
/// a cluster per namespace, an edge per pair of distinct classes with at least one allowed
/// probe, labelled with the allowed probes unless all are; the node-local exemption as the
/// graph's label.
pub fn dot(out: &mut impl Write, engine: &Engine, m: &Matrix, v: &View<'_>) -> std::io::Result<()> {
    let pods = &engine.cluster().pods;
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut from: BTreeMap<usize, ()> = BTreeMap::new();
    let mut to: BTreeMap<usize, ()> = BTreeMap::new();
    for &r in &v.rows {
        from.insert(m.class_of[r], ());
    }
    for &c in &v.cols {
        to.insert(m.class_of[c], ());
    }
    let mut shown: Vec<usize> = v.rows.iter().chain(&v.cols).copied().collect();
    shown.sort_unstable();
    shown.dedup();
    for &i in &shown {
        members.entry(m.class_of[i]).or_default().push(i);
    }
    let mut by_ns: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (&c, rows) in &members {
        by_ns
            .entry(pods[m.pods[rows[0]]].namespace.as_str())
            .or_default()
            .push(c);
    }
    writeln!(
        out,
        "// palisade matrix: allowed connections between classes of pods"
    )?;
    writeln!(out, "// (a class is a set of pods no policy tells apart)")?;
    graph_start(out, "palisade")?;
    if m.has_node_local() {
        writeln!(
            out,
            "  label={};",
            quote(
                "node-local: a node's own address (its host-network pods) reaches every pod on that node, whatever the policies say"
            )
        )?;
    }
    for (i, (ns, classes)) in by_ns.iter().enumerate() {
        writeln!(out, "  subgraph cluster_{i} {{")?;
        writeln!(out, "    label={};", quote(&format!("namespace {ns}")))?;
        for &c in classes {
            let rows = &members[&c];
            let pod = &pods[m.pods[rows[0]]];
            let (labels, count) = class_label(pod, v.names, rows);
            writeln!(
                out,
                "    c{c} [label={}];",
                quote(&format!("{{{labels}}}\n{count}"))
            )?;
        }
        writeln!(out, "  }}")?;
    }
    for &f in from.keys() {
        // A class reaching itself is a loop on every node of the graph: left out.
        for &t in to.keys().filter(|&&t| t != f) {
            let allowed: Vec<String> = v
                .probes
                .iter()
                .enumerate()
                .filter(|&(pi, _)| m.class_allowed(pi, f, t))
                .map(|(_, p)| p.label())
                .collect();
            if allowed.is_empty() {
                continue;
            }
            if allowed.len() == v.probes.len() {
                writeln!(out, "  c{f} -> c{t};")?;
            } else {
                let mut label = allowed[..allowed.len().min(LABEL_PROBES)].join("\n");
                if allowed.len() > LABEL_PROBES {
                    label.push_str(&format!("\n+{} more", allowed.len() - LABEL_PROBES));
                }
                writeln!(out, "  c{f} -> c{t} [label={}];", quote(&label))?;
            }
        }
    }
    writeln!(out, "}}")?;
    out.flush()
}

/// `digraph NAME {` and the layout and node and edge styles every Palisade graph uses.
pub(super) fn graph_start(out: &mut impl Write, name: &str) -> std::io::Result<()> {
    writeln!(out, "digraph {name} {{")?;
    writeln!(out, "  rankdir=LR;")?;
    writeln!(
        out,
        "  node [shape=box, style=rounded, fontname=\"sans-serif\"];"
    )?;
    writeln!(out, "  edge [fontname=\"sans-serif\", fontsize=10];")
}

/// A class's node label: its first pod's labels (without the hashes controllers add,
/// which tell nothing apart a reader cares about), and its pod, or how many with an example.
pub(super) fn class_label(
    pod: &palisade_model::Pod,
    names: &[String],
    rows: &[usize],
) -> (String, String) {
    let labels: Vec<String> = pod
        .labels
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "pod-template-hash" | "controller-revision-hash"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let count = match rows.len() {
        1 => names[rows[0]].clone(),
        n => format!("{n} pods, e.g. {}", names[rows[0]]),
    };
    (labels.join(","), count)
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quotes_escape() {
        assert_eq!(quote("a\"b\\c\nd"), r#""a\"b\\c\nd""#);
    }
}
