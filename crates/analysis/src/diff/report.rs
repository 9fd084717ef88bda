//! The diff for reading: changes narrowed to the ports asked, merged into lines of the same
//! change, ports and explanations, and named the way people name pods and addresses.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use palisade_engine::{Decision, SideVerdict, Tier, Verdict};
use palisade_model::{PortRange, Protocol};

use super::{Actor, ChangeGroup, ChangeKind, Diff, Family};

/// What decided a verdict, in a few words: the denying sides of a denial, the deciding
/// policies of an allowance (`allowed by default` when no policy decided).
pub struct Responsible<'a>(pub &'a Verdict);

impl fmt::Display for Responsible<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        let sides = [("egress", &v.egress), ("ingress", &v.ingress)];
        let decisive: Vec<&(&str, &SideVerdict)> = sides
            .iter()
            .filter(|(_, s)| {
                if v.allowed {
                    matches!(s.tier, Tier::Admin | Tier::NetworkPolicy | Tier::Baseline)
                } else {
                    !s.allowed
                }
            })
            .collect();
        if decisive.is_empty() {
            return f.write_str(if v.allowed {
                "allowed: no policy decided"
            } else {
                "denied"
            });
        }
        for (i, (dir, side)) in decisive.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{dir} ")?;
            match &side.decision {
                Decision::Rule(m) => write!(
                    f,
                    "{} by {}",
                    if side.allowed { "allowed" } else { "denied" },
                    m
                )?,
                d => write!(f, "{}", SideShort(side, d))?,
            }
        }
        Ok(())
    }
}

struct SideShort<'a>(&'a SideVerdict, &'a Decision);

impl fmt::Display for SideShort<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}",
            if self.0.allowed { "allowed" } else { "denied" },
            self.1
        )
    }
}

/// What decided in one state: [`Responsible`], or that an end of the connection is not there.
fn responsible(v: Option<&Verdict>) -> String {
    match v {
        Some(v) => Responsible(v).to_string(),
        None => "not there (an end is absent, or has no address of this family)".into(),
    }
}

/// The ports a report is narrowed to; empty lists mean every protocol, every port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Protocols.
    pub protocols: Vec<Protocol>,
    /// Port ranges.
    pub ports: Vec<PortRange>,
}

impl Filter {
    /// The parts of `g`'s ports this filter keeps.
    fn keep(&self, g: &ChangeGroup) -> Vec<PortRange> {
        if !self.protocols.is_empty() && !self.protocols.contains(&g.protocol) {
            return Vec::new();
        }
        if self.ports.is_empty() {
            return vec![g.ports];
        }
        self.ports
            .iter()
            .filter_map(|r| {
                let start = r.start.max(g.ports.start);
                let end = r.end.min(g.ports.end);
                (start <= end).then_some(PortRange { start, end })
            })
            .collect()
    }
}

/// Changes merged for reading: source and destination ends whose connections changed alike,
/// on the same ports, with the same explanations before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Gained or lost.
    pub change: ChangeKind,
    /// Source actors (indexes into [`Diff::actors`]).
    pub from: Vec<usize>,
    /// Destination actors (every pair but an end with itself changed).
    pub to: Vec<usize>,
    /// The ports, by family and protocol.
    pub ports: Vec<(Family, Protocol, PortRange)>,
    /// Changed (source, destination) pairs.
    pub pairs: usize,
    /// What decided before ([`Responsible`]).
    pub before: String,
    /// What decides after.
    pub after: String,
}

/// The change, ports and explanations a line shares.
type Shared = (
    ChangeKind,
    String,
    String,
    Vec<(Family, Protocol, PortRange)>,
);

impl Diff {
    /// This diff with only the changes on the ports of `filter` (cut to them).
    pub fn narrowed(&self, filter: &Filter) -> std::borrow::Cow<'_, Diff> {
        if filter == &Filter::default() {
            return std::borrow::Cow::Borrowed(self);
        }
        // Overlapping ranges asked would report a port twice: merge them first.
        let mut ranges = filter.ports.clone();
        ranges.sort();
        let mut merged: Vec<PortRange> = Vec::new();
        for r in ranges {
            match merged.last_mut() {
                Some(last) if u32::from(r.start.get()) <= u32::from(last.end.get()) + 1 => {
                    last.end = last.end.max(r.end);
                }
                _ => merged.push(r),
            }
        }
        let filter = &Filter {
            protocols: filter.protocols.clone(),
            ports: merged,
        };
        let groups = self
            .groups
            .iter()
            .flat_map(|g| {
                filter
                    .keep(g)
                    .into_iter()
                    .map(|ports| ChangeGroup { ports, ..g.clone() })
            })
            .collect();
        std::borrow::Cow::Owned(Diff {
            groups,
            actors: self.actors.clone(),
            cells: self.cells.clone(),
            families: self.families.clone(),
            pods_added: self.pods_added.clone(),
            pods_removed: self.pods_removed.clone(),
            nodes_added: self.nodes_added.clone(),
            nodes_removed: self.nodes_removed.clone(),
            services: self.services.as_ref().map(|s| s.narrowed(filter)),
        })
    }

    /// The changes merged into lines (see [`Line`]): lost before gained, then by what
    /// decides after (the policy responsible).
    pub fn lines(&self) -> Vec<Line> {
        // 1. Per cell and explanations, its ports.
        let mut per_cell: BTreeMap<(usize, ChangeKind, String, String), Vec<_>> = BTreeMap::new();
        for g in &self.groups {
            per_cell
                .entry((
                    g.cell,
                    g.change,
                    responsible(g.before.as_deref()),
                    responsible(g.after.as_deref()),
                ))
                .or_default()
                .push((g.family, g.protocol, g.ports));
        }
        // 2. Per source set, its destinations sharing everything else.
        let mut rows: BTreeMap<(Shared, Vec<usize>), (BTreeSet<usize>, usize)> = BTreeMap::new();
        for ((cell, change, before, after), mut ports) in per_cell {
            ports.sort();
            let c = &self.cells[cell];
            let row = rows
                .entry(((change, after, before, ports), c.from.clone()))
                .or_default();
            row.0.extend(c.to.iter().copied());
            row.1 += c.pairs;
        }
        // 3. Sources with the same destinations become one line. A line may also be a
        // square (sources = destinations, an end with itself left out, as it never
        // changes): one-actor sources whose destinations are the others of the same set.
        type Lines = BTreeMap<(Shared, BTreeSet<usize>), (Vec<usize>, usize)>;
        let mut squares: Lines = BTreeMap::new();
        for ((shared, from), (to, pairs)) in &rows {
            if let [one] = from.as_slice()
                && !to.contains(one)
            {
                let mut with_self = to.clone();
                with_self.insert(*one);
                let line = squares.entry((shared.clone(), with_self)).or_default();
                line.0.push(*one);
                line.1 += pairs;
            }
        }
        squares.retain(|(_, set), (from, _)| from.len() > 1 && from.len() == set.len());
        let squared: BTreeSet<(Shared, usize)> = squares
            .iter()
            .flat_map(|((shared, _), (from, _))| from.iter().map(|&f| (shared.clone(), f)))
            .collect();
        let mut lines = squares;
        for ((shared, from), (to, pairs)) in rows {
            if let [one] = from.as_slice()
                && squared.contains(&(shared.clone(), *one))
            {
                continue;
            }
            let line = lines.entry((shared, to)).or_default();
            line.0.extend(from);
            line.1 += pairs;
        }
        let mut out: Vec<Line> = lines
            .into_iter()
            .map(
                |(((change, after, before, ports), to), (mut from, pairs))| {
                    from.sort_unstable();
                    Line {
                        change,
                        from,
                        to: to.into_iter().collect(),
                        ports,
                        pairs,
                        before,
                        after,
                    }
                },
            )
            .collect();
        out.sort_by(|a, b| {
            (std::cmp::Reverse(a.change), &a.after, &a.before).cmp(&(
                std::cmp::Reverse(b.change),
                &b.after,
                &b.before,
            ))
        });
        out
    }

    /// `TCP 22, 80-81; UDP 53`, with the family when the ends hold both and the line is
    /// about one (`TCP 22 (IPv6)`), or per family when they differ.
    pub fn ports_text(&self, ports: &[(Family, Protocol, PortRange)]) -> String {
        let per_family = |f: Family| -> String {
            let mut by_protocol: BTreeMap<&str, Vec<String>> = BTreeMap::new();
            for (fam, p, r) in ports {
                if *fam == f {
                    by_protocol
                        .entry(p.as_str())
                        .or_default()
                        .push(r.to_string());
                }
            }
            let parts: Vec<String> = Protocol::ALL
                .iter()
                .filter_map(|p| {
                    by_protocol
                        .get(p.as_str())
                        .map(|r| format!("{p} {}", r.join(", ")))
                })
                .collect();
            parts.join("; ")
        };
        let [v4, v6] = Family::ALL.map(per_family);
        match (v4.is_empty(), v6.is_empty()) {
            (false, true) if self.families.len() > 1 => format!("{v4} (IPv4)"),
            (true, false) if self.families.len() > 1 => format!("{v6} (IPv6)"),
            (false, true) => v4,
            (true, false) => v6,
            _ if v4 == v6 => v4,
            _ => format!("IPv4: {v4}; IPv6: {v6}"),
        }
    }

    /// `x/*, y/{a,b}, node/n1, 0.0.0.0/0 except 10.0.0.0/8`: pods by namespace (`*` when
    /// every pod of the namespace the diff knows is there), then nodes and outside regions.
    pub fn describe(&self, actors: &[usize]) -> String {
        let mut by_ns: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut others = Vec::new();
        for &a in actors {
            match &self.actors[a] {
                Actor::Pod { key, .. } => {
                    let (ns, name) = key.split_once('/').unwrap_or(("", key));
                    by_ns.entry(ns).or_default().push(name);
                }
                other => others.push(other.name()),
            }
        }
        let mut in_ns: HashMap<&str, usize> = HashMap::new();
        for a in &self.actors {
            if let Actor::Pod { key, .. } = a {
                *in_ns
                    .entry(key.split_once('/').map_or("", |x| x.0))
                    .or_default() += 1;
            }
        }
        let mut parts = Vec::new();
        for (ns, mut names) in by_ns {
            names.sort();
            parts.push(match names.as_slice() {
                _ if in_ns.get(ns) == Some(&names.len()) && names.len() > 1 => format!("{ns}/*"),
                [one] => format!("{ns}/{one}"),
                _ if names.len() > 4 => {
                    format!("{ns}/{{{},…}} ({} pods)", names[..3].join(","), names.len())
                }
                _ => format!("{ns}/{{{}}}", names.join(",")),
            });
        }
        parts.extend(others);
        parts.join(", ")
    }
}
