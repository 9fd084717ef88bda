//! `matrix --services -o summary` and `-o dot`: the sources grouped into the classes of the
//! pod summary, and per Service port which classes reach all, some or none of its endpoints.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use palisade_analysis::{Matrix, ServiceCell};
use palisade_engine::PodId;

use super::dot::quote;
use super::service_view::ServiceView;
use super::summary::{class_line, namespace_and_labels, ranges};

/// The pod matrix class of each row of `v` (the classes `matrix -o summary` numbers).
fn class_of_rows(v: &ServiceView<'_>, m: &Matrix) -> Vec<usize> {
    let class: HashMap<PodId, usize> = m
        .pods
        .iter()
        .copied()
        .zip(m.class_of.iter().copied())
        .collect();
    v.matrix
        .sources
        .iter()
        .map(|p| class.get(p).copied().unwrap_or(usize::MAX))
        .collect()
}

/// The rows of each class, in class order.
fn members(class_of: &[usize]) -> BTreeMap<usize, Vec<usize>> {
    let mut out: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (r, &c) in class_of.iter().enumerate() {
        out.entry(c).or_default().push(r);
    }
    out
}

/// What a group of sources sees of one column, in words.
fn describe(v: &ServiceView<'_>, cell: &ServiceCell) -> String {
    match cell {
        ServiceCell::NotEvaluable(why) => format!("not evaluated: {}", why.reason()),
        ServiceCell::Decided(r) if r.total == 0 => "none: the port has no endpoint".into(),
        ServiceCell::Decided(r) => {
            let mut s = format!(
                "{} ({} of {} endpoints",
                r.reach.as_str(),
                r.allowed,
                r.total
            );
            if !r.denied.is_empty() {
                let denied: Vec<String> = r.denied.iter().map(|e| v.endpoint_name(e)).collect();
                s.push_str(&format!("; denied: {}", denied.join(", ")));
            }
            s.push(')');
            if r.hairpin {
                s.push_str(", itself an endpoint");
            }
            s
        }
    }
}

/// Classes (as the pod summary numbers them), then per Service port the groups of sources
/// that see it alike: whole classes as `C1-C3`, a class split by what its pods see (a pod
/// that is itself an endpoint) by pod names.
pub fn summary(out: &mut impl Write, v: &ServiceView<'_>, m: &Matrix) -> std::io::Result<()> {
    let class_of = class_of_rows(v, m);
    let members = members(&class_of);
    let pods = &v.engine.cluster().pods;
    writeln!(
        out,
        "{} sources in {} classes (pods no policy can tell apart, numbered as in the pod summary)",
        v.names.len(),
        members.len()
    )?;
    for (&c, rows) in &members {
        let pod = &pods[v.matrix.sources[rows[0]]];
        let (ns, labels) = namespace_and_labels(pod);
        class_line(out, c, (&ns, &labels), rows, &v.names)?;
    }
    for &col in &v.cols {
        let c = v.column(col);
        let svc = &v.engine.cluster().services[c.service];
        let mut head = match &c.port {
            Some(p) => format!("{} ({}/{})", v.column_name(col), p.protocol, p.port),
            None => v.column_name(col),
        };
        if let Some(name) = &svc.external_name {
            head.push_str(&format!(", an alias of {name}"));
        }
        writeln!(out, "\n{head}:")?;
        // Rows grouped by the cell they see, in the order of each group's first row.
        let mut index: HashMap<&ServiceCell, usize> = HashMap::new();
        let mut groups: Vec<(&ServiceCell, usize)> = Vec::new();
        let mut group_of = Vec::with_capacity(v.names.len());
        for r in 0..v.names.len() {
            let cell = v.matrix.cell(r, col);
            let next = groups.len();
            let g = *index.entry(cell).or_insert(next);
            if g == next {
                groups.push((cell, 0));
            }
            groups[g].1 += 1;
            group_of.push(g);
        }
        for (g, (cell, n)) in groups.into_iter().enumerate() {
            let mut whole: Vec<usize> = Vec::new();
            let mut single: Vec<&str> = Vec::new();
            for (&class, all) in &members {
                let inside = all.iter().filter(|&&r| group_of[r] == g);
                if all.iter().all(|&r| group_of[r] == g) {
                    whole.push(class);
                } else {
                    single.extend(inside.map(|&r| v.names[r].as_str()));
                }
            }
            let mut who = ranges(whole.into_iter());
            if !single.is_empty() {
                if !who.is_empty() {
                    who.push(' ');
                }
                who.push_str(&single.join(" "));
            }
            writeln!(
                out,
                "  {who} ({n} pod{}) -> {}",
                if n == 1 { "" } else { "s" },
                describe(v, cell)
            )?;
        }
    }
    out.flush()
}

/// A Graphviz digraph: a node per source class, a node per Service, an edge from a class to
/// a Service labelled with the ports whose endpoints some of its pods reach (`some` where not
/// every endpoint, or not every pod of the class).
pub fn dot(out: &mut impl Write, v: &ServiceView<'_>, m: &Matrix) -> std::io::Result<()> {
    let class_of = class_of_rows(v, m);
    let members = members(&class_of);
    let cluster = v.engine.cluster();
    writeln!(
        out,
        "// palisade matrix --services: which classes of pods reach which Service ports"
    )?;
    super::dot::graph_start(out, "palisade_services")?;
    for (&c, rows) in &members {
        let pod = &cluster.pods[v.matrix.sources[rows[0]]];
        let (labels, count) = super::dot::class_label(pod, &v.names, rows);
        writeln!(
            out,
            "  c{c} [label={}];",
            quote(&format!("{}\n{{{labels}}}\n{count}", pod.namespace))
        )?;
    }
    let mut services: Vec<usize> = v.cols.iter().map(|&c| v.column(c).service).collect();
    services.dedup();
    for &s in &services {
        let svc = &cluster.services[s];
        let shape = if svc.external_name.is_some() {
            ", style=dashed"
        } else {
            ""
        };
        writeln!(
            out,
            "  s{s} [label={}, shape=ellipse{shape}];",
            quote(&format!("svc/{}/{}", svc.namespace, svc.name))
        )?;
    }
    for (&c, rows) in &members {
        for &s in &services {
            let mut ports = Vec::new();
            for &col in v.cols.iter().filter(|&&col| v.column(col).service == s) {
                let reach: Vec<(usize, usize)> = rows
                    .iter()
                    .filter_map(|&r| match v.matrix.cell(r, col) {
                        ServiceCell::Decided(x) => Some((x.allowed, x.total)),
                        ServiceCell::NotEvaluable(_) => None,
                    })
                    .collect();
                if !reach.iter().any(|&(a, _)| a > 0) {
                    continue;
                }
                let every = reach.len() == rows.len() && reach.iter().all(|&(a, t)| a == t);
                let label = v
                    .column(col)
                    .port
                    .as_ref()
                    .map(|p| p.label())
                    .unwrap_or_default();
                ports.push(if every {
                    label
                } else {
                    format!("{label} (some)")
                });
            }
            if !ports.is_empty() {
                writeln!(out, "  c{c} -> s{s} [label={}];", quote(&ports.join("\n")))?;
            }
        }
    }
    writeln!(out, "}}")?;
    out.flush()
}
