//! `matrix -o summary`: pods grouped into classes no policy tells apart, why classes with
//! the same labels differ, and per probe which classes each class reaches.

use std::collections::BTreeMap;
use std::io::Write;

use palisade_engine::{Engine, Matrix};

use super::view::View;

/// The classes of `m` that hold a pod of `idx` (matrix rows), in class order, each with its
/// members among `idx`.
fn classes_of(m: &Matrix, idx: &[usize]) -> BTreeMap<usize, Vec<usize>> {
    let mut out: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &i in idx {
        out.entry(m.class_of[i]).or_default().push(i);
    }
    out
}

/// `namespace x {app=a}`.
fn describe(engine: &Engine, m: &Matrix, row: usize) -> (String, String) {
    let pod = &engine.cluster().pods[m.pods[row]];
    let labels: Vec<String> = pod.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    (pod.namespace.clone(), labels.join(","))
}

/// Classes, why same-labelled classes differ, then per probe which classes each reaches.
pub fn summary(
    out: &mut impl Write,
    engine: &Engine,
    m: &Matrix,
    v: &View<'_>,
) -> std::io::Result<()> {
    let mut all: Vec<usize> = v.rows.iter().chain(&v.cols).copied().collect();
    all.sort_unstable();
    all.dedup();
    let members = classes_of(m, &all);
    writeln!(
        out,
        "{} pods in {} classes (pods no policy can tell apart)",
        all.len(),
        members.len()
    )?;
    let mut by_labels: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (&c, rows) in &members {
        let (ns, labels) = describe(engine, m, rows[0]);
        let example: Vec<&str> = rows.iter().take(3).map(|&r| v.names[r].as_str()).collect();
        let more = if rows.len() > 3 {
            format!(", ... ({} pods)", rows.len())
        } else {
            String::new()
        };
        writeln!(
            out,
            "C{c}: namespace {ns} {{{labels}}}: {}{more}",
            example.join(", ")
        )?;
        by_labels.entry((ns, labels)).or_default().push(c);
    }
    for ((ns, labels), classes) in by_labels.iter().filter(|(_, c)| c.len() > 1) {
        writeln!(out, "\nclasses with namespace {ns} {{{labels}}} differ:")?;
        let first = members[&classes[0]][0];
        for &c in &classes[1..] {
            let other = members[&c][0];
            let why: Vec<String> = engine
                .distinctions(m.pods[first], m.pods[other])
                .iter()
                .map(ToString::to_string)
                .collect();
            writeln!(
                out,
                "  C{} ({}) vs C{c} ({}): {}",
                classes[0],
                v.names[first],
                v.names[other],
                why.join("; ")
            )?;
        }
    }
    let from_classes = classes_of(m, &v.rows);
    let to_classes = classes_of(m, &v.cols);
    let to_count: usize = to_classes.values().map(Vec::len).sum();
    for (pi, probe) in v.probes.iter().enumerate() {
        writeln!(out, "\n{}:", probe.label())?;
        for (&from, rows) in &from_classes {
            let reach: Vec<usize> = to_classes
                .keys()
                .copied()
                .filter(|&to| m.class_allowed(pi, from, to))
                .collect();
            let pods: usize = reach.iter().map(|to| to_classes[to].len()).sum();
            let list = if reach.len() == to_classes.len() {
                "all classes".to_string()
            } else if reach.is_empty() {
                "no class".to_string()
            } else {
                reach
                    .iter()
                    .map(|c| format!("C{c}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            writeln!(
                out,
                "  C{from} ({} pods) -> {pods} of {to_count} pods: {list}",
                rows.len()
            )?;
        }
    }
    out.flush()
}
