//! `matrix -o summary`: pods grouped into classes no policy tells apart, why classes with
//! the same labels differ, and per probe which classes each class reaches (classes that
//! reach the same classes on one line).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::Write;
use std::ops::Range;

use rayon::prelude::*;

use palisade_analysis::{Analysis, Matrix};
use palisade_engine::{BitSet, Engine, PodId};

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

/// A pod's namespace, and its labels as `k=v,k=v`.
pub(super) fn namespace_and_labels(pod: &palisade_model::Pod) -> (String, String) {
    let labels: Vec<String> = pod.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    (pod.namespace.clone(), labels.join(","))
}

/// `C3: namespace x {app=web}: x/a, x/b, x/c, ... (7 pods)`: class `c` by its first pod's
/// namespace and labels (`ns`, `labels`), and up to three of its members (`rows` of `names`).
pub(super) fn class_line(
    out: &mut impl Write,
    c: usize,
    (ns, labels): (&str, &str),
    rows: &[usize],
    names: &[String],
) -> std::io::Result<()> {
    let example: Vec<&str> = rows.iter().take(3).map(|&r| names[r].as_str()).collect();
    let more = if rows.len() > 3 {
        format!(", ... ({} pods)", rows.len())
    } else {
        String::new()
    };
    writeln!(
        out,
        "C{c}: namespace {ns} {{{labels}}}: {}{more}",
        example.join(", ")
    )
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
    if m.has_node_local() {
        writeln!(
            out,
            "node-local: a node's own address (its host-network pods) reaches every pod on that node, whatever the policies say (--no-node-local turns this off); the reach below is by policy"
        )?;
    }
    // Each class's namespace and labels, the classes in parallel.
    let classes: Vec<(&usize, &Vec<usize>)> = members.iter().collect();
    let described: Vec<(String, String)> = classes
        .par_iter()
        .map(|(_, rows)| namespace_and_labels(&engine.cluster().pods[m.pods[rows[0]]]))
        .collect();
    let mut by_labels: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for ((&c, rows), (ns, labels)) in classes.into_iter().zip(described) {
        class_line(out, c, (&ns, &labels), rows, v.names)?;
        by_labels.entry((ns, labels)).or_default().push(c);
    }
    let twins: Vec<(&(String, String), &Vec<usize>)> =
        by_labels.iter().filter(|(_, c)| c.len() > 1).collect();
    let pairs: Vec<(usize, usize)> = twins
        .iter()
        .flat_map(|(_, classes)| {
            let members = &members;
            let first = members[&classes[0]][0];
            classes[1..].iter().map(move |c| (first, members[c][0]))
        })
        .collect();
    let pods: Vec<(PodId, PodId)> = pairs.iter().map(|&(a, b)| (m.pods[a], m.pods[b])).collect();
    let mut why = Analysis::new(engine).distinctions_of(&pods).into_iter();
    let mut pairs = pairs.into_iter();
    for ((ns, labels), classes) in twins {
        writeln!(out, "\nclasses with namespace {ns} {{{labels}}} differ:")?;
        for &c in &classes[1..] {
            let (Some((first, other)), Some(why)) = (pairs.next(), why.next()) else {
                break;
            };
            let why: Vec<String> = why.iter().map(ToString::to_string).collect();
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
    let mut shown = BitSet::new(m.classes);
    let mut shown_pods = vec![0usize; m.classes];
    for (&c, rows) in &to_classes {
        shown.insert(c);
        shown_pods[c] = rows.len();
    }
    // The pods of the shown classes below each class: a run of classes' pods is a difference.
    let pods_below: Vec<usize> = std::iter::once(0)
        .chain(shown_pods.iter().scan(0, |sum, &pods| {
            *sum += pods;
            Some(*sum)
        }))
        .collect();
    // Each probe's section is written apart, the probes in parallel, then in probe order.
    let labels: Vec<String> = v.probes.iter().map(|p| p.label()).collect();
    let sections: Vec<String> = (labels.par_iter().enumerate())
        .map(|(pi, label)| {
            let mut text = format!("\n{label}:\n");
            for (sources, reach) in reach_groups(m, pi, &from_classes, &shown) {
                let pods: usize = (reach.runs())
                    .map(|run| pods_below[run.end] - pods_below[run.start])
                    .sum();
                let sources_pods: usize = sources.iter().map(|c| from_classes[c].len()).sum();
                text.push_str("  ");
                push_ranges(&mut text, sources.iter().copied());
                let _ = write!(
                    text,
                    " ({sources_pods} pods) -> {pods} of {to_count} pods: "
                );
                if reach.len() == to_classes.len() {
                    text.push_str("all classes");
                } else if reach.is_empty() {
                    text.push_str("no class");
                } else {
                    push_runs(&mut text, reach.runs());
                }
                text.push('\n');
            }
            text
        })
        .collect();
    for section in sections {
        out.write_all(section.as_bytes())?;
    }
    out.flush()
}

/// The source classes of `from` grouped by the classes of `shown` they reach on probe `pi`,
/// in the order of each group's first class.
fn reach_groups(
    m: &Matrix,
    pi: usize,
    from: &BTreeMap<usize, Vec<usize>>,
    shown: &BitSet,
) -> Vec<(Vec<usize>, BitSet)> {
    let mut index: HashMap<BitSet, usize> = HashMap::new();
    let mut groups: Vec<(Vec<usize>, BitSet)> = Vec::new();
    for &c in from.keys() {
        let mut reach = BitSet::new(m.classes);
        reach.union_of_intersection(m.class_row(pi, c), shown);
        let next = groups.len();
        let g = *index.entry(reach.clone()).or_insert(next);
        if g == next {
            groups.push((Vec::new(), reach));
        }
        groups[g].0.push(c);
    }
    groups
}

/// Ascending class numbers as `C1-C4 C7`.
pub(super) fn ranges(classes: impl Iterator<Item = usize>) -> String {
    let mut out = String::new();
    push_ranges(&mut out, classes);
    out
}

/// [`ranges`], appended to `out`.
fn push_ranges(out: &mut String, classes: impl Iterator<Item = usize>) {
    let mut classes = classes.peekable();
    let runs = std::iter::from_fn(|| {
        let start = classes.next()?;
        let mut end = start + 1;
        while classes.next_if_eq(&end).is_some() {
            end += 1;
        }
        Some(start..end)
    });
    push_runs(out, runs);
}

/// Ascending, non-adjacent runs of class numbers (`start..end`) as [`ranges`] writes them,
/// appended to `out`.
fn push_runs(out: &mut String, runs: impl Iterator<Item = Range<usize>>) {
    for (i, run) in runs.enumerate() {
        if i > 0 {
            out.push(' ');
        }
        push_class(out, run.start);
        match run.len() {
            0 | 1 => {}
            2 => {
                out.push(' ');
                push_class(out, run.start + 1);
            }
            _ => {
                out.push('-');
                push_class(out, run.end - 1);
            }
        }
    }
}

/// `C` and the class number, in decimal (the summary writes millions of them).
fn push_class(out: &mut String, c: usize) {
    out.push('C');
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = c;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[i..].iter().map(|&d| char::from(d)));
}

#[cfg(test)]
mod tests {
    use palisade_engine::BitSet;

    use super::{push_runs, ranges};

    fn set_of(classes: &[usize]) -> BitSet {
        let mut set = BitSet::default();
        for &c in classes {
            set.insert(c);
        }
        set
    }

    #[test]
    fn class_lists_as_ranges() {
        for (classes, want) in [
            (vec![], ""),
            (vec![3], "C3"),
            (vec![1, 2], "C1 C2"),
            (vec![0, 1, 2, 3, 7, 9, 10], "C0-C3 C7 C9 C10"),
        ] {
            assert_eq!(ranges(classes.clone().into_iter()), want, "{classes:?}");
            let set = set_of(&classes);
            let mut from_runs = String::new();
            push_runs(&mut from_runs, set.runs());
            assert_eq!(from_runs, want, "{classes:?} as a set's runs");
        }
        // Runs across whole words, as reach lines have them.
        let classes: Vec<usize> = (5..200).chain(256..320).chain([400]).collect();
        let set = set_of(&classes);
        let mut from_runs = String::new();
        push_runs(&mut from_runs, set.runs());
        assert_eq!(from_runs, ranges(classes.into_iter()));
        assert_eq!(from_runs, "C5-C199 C256-C319 C400");
    }
}
