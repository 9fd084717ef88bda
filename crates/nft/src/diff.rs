//! The change that turns one loaded ruleset into another, touching only what changed, as
//! as one `nft -f` script (the kernel half also divides it into a preparation script and
//! one netlink batch: `kernel/split.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::ir::{AddrRange, Chain, NamedSet, Ruleset};
use crate::render::{TABLE, add_rules, elements_text, exempt_sets, set_body, verdict_maps};

/// What an update changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UpdateStats {
    /// Chains rewritten, added or removed.
    pub chains: usize,
    /// Set, map and exemption elements added or removed.
    pub elements: usize,
    /// Tracked connections deleted because the new ruleset forbids them.
    pub connections_cut: usize,
    /// The switch-over was one netlink transaction (after an `nft -f` that created the
    /// new sets, and the new chains that netlink could not carry, if any), not one
    /// `nft -f` of the whole change.
    pub netlink: bool,
    /// Time spent creating new sets (and chains) with `nft -f` before the switch-over.
    pub prepare: Duration,
    /// Time the switch-over transaction took (the whole `nft -f`, or the netlink batch).
    pub switch: Duration,
}

/// Elements of one existing set or map that go and come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ElementChange<T> {
    /// The set's or map's name.
    pub name: String,
    /// Deleted first, so that no added interval overlaps one on its way out.
    pub removed: Vec<T>,
    /// Then added.
    pub added: Vec<T>,
}

/// Everything that differs between two rulesets with the same node addresses.
#[derive(Debug, Default)]
pub(crate) struct Delta<'r> {
    /// Sets only the new ruleset has (created with their elements).
    pub new_sets: Vec<&'r NamedSet>,
    /// Address sets both have whose elements changed, with the set as it becomes.
    pub set_elements: Vec<(&'r NamedSet, ElementChange<AddrRange>)>,
    /// Chains only the new ruleset has.
    pub new_chains: Vec<&'r Chain>,
    /// Chains both have whose rules changed, as they become.
    pub rewritten: Vec<&'r Chain>,
    /// Dispatch map elements (address → the class chain it jumps to).
    pub maps: Vec<ElementChange<(IpAddr, Arc<str>)>>,
    /// Exemption pairs.
    pub exempt: Vec<ElementChange<(IpAddr, IpAddr)>>,
    /// Chains only the old ruleset has.
    pub gone_chains: Vec<&'r str>,
    /// Sets only the old ruleset has.
    pub gone_sets: Vec<&'r str>,
}

impl<'r> Delta<'r> {
    /// What turns `old` into `new`.
    pub fn new(old: &'r Ruleset, new: &'r Ruleset) -> Self {
        let mut d = Delta::default();
        for pair in by_name(&old.sets, &new.sets, |x| &x.name) {
            match pair {
                (None, Some(set)) => d.new_sets.push(set),
                (Some(was), Some(set)) => {
                    if set.learned.is_none() && was.elements != set.elements {
                        let change = element_change(&set.name, &was.ranges(), &set.ranges());
                        d.set_elements.push((set, change));
                    }
                }
                (Some(was), None) => d.gone_sets.push(&was.name),
                (None, None) => {}
            }
        }
        for pair in by_name(&old.chains, &new.chains, |c| &c.name) {
            match pair {
                (None, Some(chain)) => d.new_chains.push(chain),
                (Some(was), Some(chain)) if was != chain => d.rewritten.push(chain),
                (Some(was), None) => d.gone_chains.push(&was.name),
                _ => {}
            }
        }
        for ((name, v6, o), (_, _, n)) in verdict_maps(old).into_iter().zip(verdict_maps(new)) {
            if o == n {
                continue;
            }
            let change = map_change(name.to_string(), v6, o, n);
            if !change.is_empty() {
                d.maps.push(change);
            }
        }
        for ((name, v6, o), (_, _, n)) in exempt_sets(old).into_iter().zip(exempt_sets(new)) {
            if o == n {
                continue;
            }
            let pick =
                |pairs: &'r [(IpAddr, IpAddr)]| pairs.iter().filter(move |p| p.0.is_ipv6() == v6);
            let change = element_change(name, pick(o), pick(n));
            if !change.is_empty() {
                d.exempt.push(change);
            }
        }
        d
    }

    /// Nothing changes.
    pub fn is_empty(&self) -> bool {
        self.stats() == UpdateStats::default()
    }

    /// Chains written and elements changed.
    pub fn stats(&self) -> UpdateStats {
        let elements = self
            .set_elements
            .iter()
            .map(|(_, c)| c.len())
            .chain(self.maps.iter().map(ElementChange::len))
            .chain(self.exempt.iter().map(ElementChange::len))
            .sum();
        UpdateStats {
            chains: self.new_chains.len() + self.rewritten.len() + self.gone_chains.len(),
            elements,
            ..UpdateStats::default()
        }
    }

    /// The whole change as one `nft -f` script (one transaction, so no packet ever sees a
    /// mix): sets and chains added, elements changed in place, changed chains flushed and
    /// refilled, and what is no longer used deleted last.
    pub fn script(&self) -> String {
        let mut s = String::new();
        for set in &self.new_sets {
            add_set(&mut s, set);
        }
        for (_, change) in &self.set_elements {
            element_lines(&mut s, change, elements_text);
        }
        for chain in &self.new_chains {
            let _ = writeln!(s, "add chain {TABLE} {}", chain.name);
        }
        for chain in &self.new_chains {
            add_rules(&mut s, chain);
        }
        for chain in &self.rewritten {
            let _ = writeln!(s, "flush chain {TABLE} {}", chain.name);
            add_rules(&mut s, chain);
        }
        for change in &self.maps {
            if !change.removed.is_empty() {
                let keys = join(change.removed.iter().map(|(ip, _)| ip.to_string()));
                let _ = writeln!(s, "delete element {TABLE} {} {{ {keys} }}", change.name);
            }
            if !change.added.is_empty() {
                let elems = join(
                    change
                        .added
                        .iter()
                        .map(|(ip, c)| format!("{ip} : jump {c}")),
                );
                let _ = writeln!(s, "add element {TABLE} {} {{ {elems} }}", change.name);
            }
        }
        for change in &self.exempt {
            element_lines(&mut s, change, |pairs| {
                join(pairs.iter().map(|(a, b)| format!("{a} . {b}")))
            });
        }
        // Flush them all before deleting any: a deleted chain may still jump to another.
        for name in &self.gone_chains {
            let _ = writeln!(s, "flush chain {TABLE} {name}");
        }
        for name in &self.gone_chains {
            let _ = writeln!(s, "delete chain {TABLE} {name}");
        }
        for name in &self.gone_sets {
            let _ = writeln!(s, "delete set {TABLE} {name}");
        }
        s
    }
}

/// The items of two lists paired by name, in name order: each name of either list once,
/// with its item in `old` and in `new`. A compiled ruleset's chains and sets are sorted by
/// name, each name once: those are paired in one pass; other lists through a map (the
/// last item of a repeated name).
fn by_name<'r, T>(
    old: &'r [T],
    new: &'r [T],
    name: impl Fn(&T) -> &str,
) -> Vec<(Option<&'r T>, Option<&'r T>)> {
    let sorted = |l: &[T]| l.windows(2).all(|w| name(&w[0]) < name(&w[1]));
    if !(sorted(old) && sorted(new)) {
        let mut pairs: BTreeMap<&str, (Option<&T>, Option<&T>)> = BTreeMap::new();
        for x in old {
            pairs.entry(name(x)).or_default().0 = Some(x);
        }
        for x in new {
            pairs.entry(name(x)).or_default().1 = Some(x);
        }
        return pairs.into_values().collect();
    }
    let mut pairs = Vec::with_capacity(old.len().max(new.len()));
    let (mut o, mut n) = (old.iter().peekable(), new.iter().peekable());
    loop {
        let pair = match (o.peek(), n.peek()) {
            (Some(&x), Some(&y)) => match name(x).cmp(name(y)) {
                std::cmp::Ordering::Less => (o.next(), None),
                std::cmp::Ordering::Greater => (None, n.next()),
                std::cmp::Ordering::Equal => (o.next(), n.next()),
            },
            (Some(_), None) => (o.next(), None),
            (None, Some(_)) => (None, n.next()),
            (None, None) => return pairs,
        };
        pairs.push(pair);
    }
}

/// The transaction that turns `old` into `new` (with the same node addresses) as one
/// `nft -f` script, and what it changes. Chains are named by what they hold and sets by
/// what they stand for, so a pod moving to an existing class is one map element per
/// address (and the elements of the peer sets it joins or leaves), and a policy change is
/// the chains of the classes it selects.
pub fn update_script(old: &Ruleset, new: &Ruleset) -> (String, UpdateStats) {
    let delta = Delta::new(old, new);
    (delta.script(), delta.stats())
}

impl<T> ElementChange<T> {
    fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }

    fn len(&self) -> usize {
        self.removed.len() + self.added.len()
    }
}

/// The elements of `old` not in `new` and those of `new` not in `old`, each sorted.
fn element_change<'a, T: Ord + Clone + 'a>(
    name: &str,
    old: impl IntoIterator<Item = &'a T>,
    new: impl IntoIterator<Item = &'a T>,
) -> ElementChange<T> {
    let (o, n): (BTreeSet<&T>, BTreeSet<&T>) =
        (old.into_iter().collect(), new.into_iter().collect());
    ElementChange {
        name: name.to_string(),
        removed: o.difference(&n).map(|&x| x.clone()).collect(),
        added: n.difference(&o).map(|&x| x.clone()).collect(),
    }
}

/// The `v6` (else IPv4) keys of a dispatch map whose target changed: removed and added again.
/// One walk over both maps in address order (a compile writes them sorted, and each
/// address once).
fn map_change(
    name: String,
    v6: bool,
    old: &[(IpAddr, Arc<str>)],
    new: &[(IpAddr, Arc<str>)],
) -> ElementChange<(IpAddr, Arc<str>)> {
    fn of_family(list: &[(IpAddr, Arc<str>)], v6: bool) -> Vec<&(IpAddr, Arc<str>)> {
        let mut l: Vec<&(IpAddr, Arc<str>)> =
            list.iter().filter(|(ip, _)| ip.is_ipv6() == v6).collect();
        if !l.is_sorted() {
            l.sort();
        }
        l
    }
    let (old, new) = (of_family(old, v6), of_family(new, v6));
    let mut change = ElementChange {
        name,
        removed: Vec::new(),
        added: Vec::new(),
    };
    let (mut o, mut n) = (old.into_iter().peekable(), new.into_iter().peekable());
    loop {
        match (o.peek(), n.peek()) {
            (Some(&was), Some(&is)) if was.0 == is.0 => {
                if was.1 != is.1 {
                    change.removed.push(was.clone());
                    change.added.push(is.clone());
                }
                o.next();
                n.next();
            }
            (Some(&was), Some(&is)) if was.0 < is.0 => {
                change.removed.push(was.clone());
                o.next();
            }
            (_, Some(&is)) => {
                change.added.push(is.clone());
                n.next();
            }
            (Some(&was), None) => {
                change.removed.push(was.clone());
                o.next();
            }
            (None, None) => return change,
        }
    }
}

fn join(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join(", ")
}

pub(crate) fn add_set(s: &mut String, set: &NamedSet) {
    let _ = writeln!(
        s,
        "add set {TABLE} {} {{ {} }}",
        set.name,
        set_body(set, "; ")
    );
}

/// `delete element` then `add element` lines for a change, each only when non-empty.
fn element_lines<T>(s: &mut String, change: &ElementChange<T>, text: impl Fn(&[T]) -> String) {
    for (verb, items) in [("delete", &change.removed), ("add", &change.added)] {
        if !items.is_empty() {
            let _ = writeln!(
                s,
                "{verb} element {TABLE} {} {{ {} }}",
                change.name,
                text(items)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(list: &[(&str, &str)]) -> Vec<(IpAddr, Arc<str>)> {
        list.iter()
            .map(|(ip, c)| (ip.parse().expect("an address"), Arc::from(*c)))
            .collect()
    }

    #[test]
    fn lists_pair_by_name_whether_sorted_or_not() {
        let pairs = |old: &[&'static str], new: &[&'static str]| {
            by_name(old, new, |x| x)
                .into_iter()
                .map(|(o, n)| (o.copied(), n.copied()))
                .collect::<Vec<_>>()
        };
        let expected = vec![
            (Some("a"), None),
            (Some("b"), Some("b")),
            (None, Some("c")),
            (Some("d"), Some("d")),
            (None, Some("e")),
        ];
        assert_eq!(pairs(&["a", "b", "d"], &["b", "c", "d", "e"]), expected);
        assert_eq!(pairs(&["d", "a", "b"], &["e", "b", "c", "d"]), expected);
        assert_eq!(
            pairs(&["a", "b", "b", "d"], &["b", "c", "d", "e"]),
            expected
        );
        assert_eq!(pairs(&[], &[]), vec![]);
    }

    #[test]
    fn a_dispatch_map_change_names_the_keys_that_went_came_or_moved() {
        let old = entries(&[
            ("10.0.0.1", "ea"),
            ("10.0.0.2", "eb"),
            ("fd00::1", "ec"),
            ("10.0.0.3", "ec"),
        ]);
        let new = entries(&[
            ("10.0.0.4", "ed"),
            ("10.0.0.2", "ee"),
            ("10.0.0.3", "ec"),
            ("fd00::1", "ed"),
        ]);
        let v4 = map_change("m".into(), false, &old, &new);
        assert_eq!(
            v4.removed,
            entries(&[("10.0.0.1", "ea"), ("10.0.0.2", "eb")])
        );
        assert_eq!(v4.added, entries(&[("10.0.0.2", "ee"), ("10.0.0.4", "ed")]));
        let v6 = map_change("m".into(), true, &old, &new);
        assert_eq!(v6.removed, entries(&[("fd00::1", "ec")]));
        assert_eq!(v6.added, entries(&[("fd00::1", "ed")]));
        let same = map_change("m".into(), false, &new, &new);
        assert!(same.removed.is_empty() && same.added.is_empty());
    }
}
