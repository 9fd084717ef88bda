//! Semantic diff: the connections two states (policies and/or cluster objects) decide
//! differently, with the verdicts — and so the policies responsible — on each side.
//!
//! Both states are evaluated as matrices over the same probes; pods are matched by
//! namespace and name. Pods that fall in the same matrix class in both states form a
//! *joint class*, and a change is found, and reported, per pair of joint classes: a
//! cluster of 10,000 pods costs two matrices, not one evaluation per pod pair.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use crate::matrix::{Matrix, Probe};
use crate::state::{Engine, PodId};
use crate::verdict::{Decision, SideVerdict, Tier, Verdict};

/// Whether a connection appears or disappears.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangeKind {
    /// Denied before, allowed after.
    Gained,
    /// Allowed before, denied after.
    Lost,
}

impl ChangeKind {
    /// `gained` or `lost`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Gained => "gained",
            ChangeKind::Lost => "lost",
        }
    }
}

/// Pods matched across the two states: the same namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffPod {
    /// `namespace/name`.
    pub key: String,
    /// Its id in the old state.
    pub old: PodId,
    /// Its id in the new state.
    pub new: PodId,
}

/// Every connection from the pods of one joint class to those of another, on one probe,
/// that changed; each pair of distinct pods counts once.
#[derive(Debug, Clone)]
pub struct ChangeGroup {
    /// Gained or lost.
    pub change: ChangeKind,
    /// The probe.
    pub probe: Probe,
    /// Source joint class (index into [`Diff::classes`]).
    pub from: usize,
    /// Destination joint class.
    pub to: usize,
    /// The verdict of a representative connection in the old state.
    pub before: Verdict,
    /// The verdict of the same connection in the new state.
    pub after: Verdict,
}

/// The semantic difference between two states.
#[derive(Debug, Clone)]
pub struct Diff {
    /// The probes compared.
    pub probes: Vec<Probe>,
    /// Pods present (with an address) in both states, grouped into joint classes: pods no
    /// policy of either state tells apart. Each class is in namespace/name order.
    pub classes: Vec<Vec<DiffPod>>,
    /// The changes, by probe, then source and destination class.
    pub groups: Vec<ChangeGroup>,
    /// Pods with an address only in the new state (`namespace/name`).
    pub pods_added: Vec<String>,
    /// Pods with an address only in the old state.
    pub pods_removed: Vec<String>,
}

impl Diff {
    /// Whether the two states decide every compared connection alike and have the same pods.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.pods_added.is_empty() && self.pods_removed.is_empty()
    }

    /// Every changed connection: (group, source pod, destination pod).
    pub fn changes(&self) -> impl Iterator<Item = (&ChangeGroup, &DiffPod, &DiffPod)> {
        self.groups.iter().flat_map(move |g| {
            self.classes[g.from].iter().flat_map(move |a| {
                self.classes[g.to]
                    .iter()
                    .filter(move |b| b.key != a.key)
                    .map(move |b| (g, a, b))
            })
        })
    }

    /// How many connections a group stands for.
    pub fn size(&self, g: &ChangeGroup) -> usize {
        self.pair_size(g.from, g.to)
    }

    /// How many connections were gained and lost.
    pub fn counts(&self) -> (usize, usize) {
        self.groups.iter().fold((0, 0), |(g, l), x| match x.change {
            ChangeKind::Gained => (g + self.size(x), l),
            ChangeKind::Lost => (g, l + self.size(x)),
        })
    }
}

/// The probes `matrix` uses by default for two states: the container ports of the pods of
/// either, sorted by port then protocol.
pub fn default_probes(old: &Engine, new: &Engine) -> Vec<Probe> {
    let set: BTreeSet<(u16, palisade_model::Protocol)> = old
        .container_probes()
        .into_iter()
        .chain(new.container_probes())
        .map(|p| (p.port, p.protocol))
        .collect();
    set.into_iter()
        .map(|(port, protocol)| Probe { protocol, port })
        .collect()
}

/// The connections `old` and `new` decide differently on `probes`.
pub fn diff(old: &Engine, new: &Engine, probes: &[Probe]) -> Diff {
    let (mo, mn) = (old.matrix(probes), new.matrix(probes));
    let key = |e: &Engine, p: PodId| e.cluster().pods[p].key();
    let new_rows: HashMap<String, usize> = mn
        .pods
        .iter()
        .enumerate()
        .map(|(r, &p)| (key(new, p), r))
        .collect();
    let mut seen_new = vec![false; mn.pods.len()];
    let mut pods_removed = Vec::new();
    // (old row, new row) of each joint class's members.
    let mut index: HashMap<(usize, usize), usize> = HashMap::new();
    let mut members: Vec<Vec<(usize, usize)>> = Vec::new();
    for (ro, &p) in mo.pods.iter().enumerate() {
        let k = key(old, p);
        let Some(&rn) = new_rows.get(&k) else {
            pods_removed.push(k);
            continue;
        };
        seen_new[rn] = true;
        let next = members.len();
        let jc = *index
            .entry((mo.class_of[ro], mn.class_of[rn]))
            .or_insert(next);
        if jc == next {
            members.push(Vec::new());
        }
        members[jc].push((ro, rn));
    }
    let pods_added = mn
        .pods
        .iter()
        .zip(&seen_new)
        .filter(|(_, seen)| !**seen)
        .map(|(&p, _)| key(new, p))
        .collect();
    let groups = changed_groups(old, new, (&mo, &mn), &members);
    let classes = members
        .iter()
        .map(|m| {
            m.iter()
                .map(|&(ro, rn)| DiffPod {
                    key: key(old, mo.pods[ro]),
                    old: mo.pods[ro],
                    new: mn.pods[rn],
                })
                .collect()
        })
        .collect();
    Diff {
        probes: probes.to_vec(),
        classes,
        groups,
        pods_added,
        pods_removed,
    }
}

/// The joint-class pairs whose verdict differs, per probe, with representative verdicts.
fn changed_groups(
    old: &Engine,
    new: &Engine,
    (mo, mn): (&Matrix, &Matrix),
    members: &[Vec<(usize, usize)>],
) -> Vec<ChangeGroup> {
    let mut out = Vec::new();
    for (probe_at, probe) in mo.probes.iter().enumerate() {
        for (a, ma) in members.iter().enumerate() {
            for (b, mb) in members.iter().enumerate() {
                // A pair of distinct pods: (first of a, first of b), or the second of a
                // when a and b are one class.
                let (x, y) = match (a == b, ma.get(1)) {
                    (false, _) => (ma[0], mb[0]),
                    (true, Some(&second)) => (ma[0], second),
                    (true, None) => continue,
                };
                let before = mo.allowed(probe_at, x.0, y.0);
                let after = mn.allowed(probe_at, x.1, y.1);
                if before == after {
                    continue;
                }
                let verdict = |e: &Engine, m: &Matrix, from: usize, to: usize| {
                    e.pod_flow(m.pods[from], m.pods[to], *probe)
                        .map(|f| e.evaluate(&f))
                };
                let (Some(vb), Some(va)) = (verdict(old, mo, x.0, y.0), verdict(new, mn, x.1, y.1))
                else {
                    continue;
                };
                out.push(ChangeGroup {
                    change: if after {
                        ChangeKind::Gained
                    } else {
                        ChangeKind::Lost
                    },
                    probe: *probe,
                    from: a,
                    to: b,
                    before: vb,
                    after: va,
                });
            }
        }
    }
    out
}

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

/// Changes merged for reading: the source pods, destination pods and probes whose
/// connections changed alike, with the same explanations before and after.
#[derive(Debug, Clone)]
pub struct MergedChange {
    /// Gained or lost.
    pub change: ChangeKind,
    /// Source joint classes.
    pub from: Vec<usize>,
    /// Destination joint classes (every pair but a pod with itself changed).
    pub to: Vec<usize>,
    /// The probes, in order.
    pub probes: Vec<Probe>,
    /// Changed connections per probe.
    pub connections: usize,
    /// What decided before ([`Responsible`]).
    pub before: String,
    /// What decides after.
    pub after: String,
}

/// The change, probes and explanations a merged line shares.
type Shared = (ChangeKind, Vec<Probe>, String, String);

/// A change between two classes with its explanations before and after.
type PairKey = (ChangeKind, usize, usize, String, String);

impl Diff {
    /// The changes merged into lines (see [`MergedChange`]), lost before gained.
    pub fn merged(&self) -> Vec<MergedChange> {
        // 1. One entry per class pair and explanations, with its probes.
        let mut pairs: Vec<(PairKey, Vec<Probe>)> = Vec::new();
        let mut at: HashMap<PairKey, usize> = HashMap::new();
        for g in &self.groups {
            let k = (
                g.change,
                g.from,
                g.to,
                Responsible(&g.before).to_string(),
                Responsible(&g.after).to_string(),
            );
            match at.get(&k) {
                Some(&i) => pairs[i].1.push(g.probe),
                None => {
                    at.insert(k.clone(), pairs.len());
                    pairs.push((k, vec![g.probe]));
                }
            }
        }
        // 2. Per source class, its destinations sharing everything else.
        let mut rows: BTreeMap<(Shared, usize), (BTreeSet<usize>, usize)> = BTreeMap::new();
        for ((change, from, to, before, after), probes) in pairs {
            let size = self.pair_size(from, to);
            let row = rows
                .entry(((change, probes, before, after), from))
                .or_default();
            row.0.insert(to);
            row.1 += size;
        }
        // 3. Sources with the same destinations become one line. A line may also be a
        // square (sources = destinations, a pod with itself left out, as it never changes):
        // one-pod sources whose destinations are the others of the same set.
        type Lines = BTreeMap<(Shared, BTreeSet<usize>), (Vec<usize>, usize)>;
        let mut squares: Lines = BTreeMap::new();
        for ((shared, from), (to, size)) in &rows {
            if self.classes[*from].len() == 1 && !to.contains(from) {
                let mut with_self = to.clone();
                with_self.insert(*from);
                let line = squares.entry((shared.clone(), with_self)).or_default();
                line.0.push(*from);
                line.1 += size;
            }
        }
        squares.retain(|(_, set), (from, _)| from.len() > 1 && from.len() == set.len());
        let squared: BTreeSet<(Shared, usize)> = squares
            .iter()
            .flat_map(|((shared, _), (from, _))| from.iter().map(|&f| (shared.clone(), f)))
            .collect();
        let mut lines = squares;
        for ((shared, from), (to, size)) in rows {
            if squared.contains(&(shared.clone(), from)) {
                continue;
            }
            let line = lines.entry((shared, to)).or_default();
            line.0.push(from);
            line.1 += size;
        }
        let mut out: Vec<MergedChange> = lines
            .into_iter()
            .map(
                |(((change, probes, before, after), to), (from, connections))| MergedChange {
                    change,
                    from,
                    to: to.into_iter().collect(),
                    probes,
                    connections,
                    before,
                    after,
                },
            )
            .collect();
        out.sort_by_key(|m| std::cmp::Reverse(m.change));
        out
    }

    fn pair_size(&self, a: usize, b: usize) -> usize {
        let (x, y) = (self.classes[a].len(), self.classes[b].len());
        if a == b { x * (x - 1) } else { x * y }
    }

    /// `x/*, y/{a,b} [app=web]`: pods by namespace (`*` when every compared pod of the
    /// namespace is there), and their labels when they are one class; `old` is the old state.
    pub fn describe(&self, old: &Engine, classes: &[usize]) -> String {
        let mut by_ns: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for &c in classes {
            for p in &self.classes[c] {
                let (ns, name) = p.key.split_once('/').unwrap_or(("", &p.key));
                by_ns.entry(ns).or_default().push(name);
            }
        }
        let mut in_ns: HashMap<&str, usize> = HashMap::new();
        for p in self.classes.iter().flatten() {
            *in_ns
                .entry(p.key.split_once('/').map_or("", |x| x.0))
                .or_default() += 1;
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
        let mut s = parts.join(", ");
        if let [c] = classes
            && let Some(first) = self.classes[*c].first()
        {
            let labels = &old.cluster().pods[first.old].labels;
            if !labels.is_empty() {
                let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                s.push_str(&format!(" [{}]", l.join(",")));
            }
        }
        s
    }
}
