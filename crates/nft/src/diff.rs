//! The transaction that turns one loaded ruleset into another, touching only what changed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::net::IpAddr;

use crate::apply::UpdateStats;
use ipnet::IpNet;

use crate::ir::{Chain, NamedSet, Ruleset};
use crate::render::{TABLE, elements_text, exempt_sets, rule_text, set_body};

/// The transaction that turns `old` into `new` (with the same node addresses): sets and
/// chains `new` adds are created, chains whose rules changed are flushed and refilled, map
/// and exemption elements that changed are deleted and added, and what `new` no longer
/// uses is deleted last — one `nft -f`, so no packet ever sees a mix. Chains and sets are
/// named by what they hold and sets by what they stand for, so a pod moving to an existing
/// class is one map element per address (and the elements of the peer sets it joins or
/// leaves), and a policy change is the chains of the classes it selects.
pub fn update_script(old: &Ruleset, new: &Ruleset) -> (String, UpdateStats) {
    let mut s = String::new();
    let mut stats = UpdateStats::default();
    let olds: BTreeMap<&str, &Chain> = old.chains.iter().map(|c| (c.name.as_str(), c)).collect();
    let news: BTreeMap<&str, &Chain> = new.chains.iter().map(|c| (c.name.as_str(), c)).collect();
    let old_sets: BTreeSet<&str> = old.sets.iter().map(|x| x.name.as_str()).collect();
    let new_sets: BTreeSet<&str> = new.sets.iter().map(|x| x.name.as_str()).collect();
    for set in new
        .sets
        .iter()
        .filter(|x| !old_sets.contains(x.name.as_str()))
    {
        let _ = writeln!(
            s,
            "add set {TABLE} {} {{ {} }}",
            set.name,
            set_body(set, "; ")
        );
    }
    // Sets both have: elements changed in place (deleted first, so that no added prefix
    // overlaps one on its way out).
    let old_by_name: BTreeMap<&str, &NamedSet> =
        old.sets.iter().map(|x| (x.name.as_str(), x)).collect();
    for set in &new.sets {
        let Some(was) = old_by_name.get(set.name.as_str()) else {
            continue;
        };
        let (o, n): (BTreeSet<&IpNet>, BTreeSet<&IpNet>) =
            (was.elements.iter().collect(), set.elements.iter().collect());
        for (verb, nets) in [("delete", o.difference(&n)), ("add", n.difference(&o))] {
            let nets: Vec<&IpNet> = nets.copied().collect();
            if !nets.is_empty() {
                stats.elements += nets.len();
                let _ = writeln!(
                    s,
                    "{verb} element {TABLE} {} {{ {} }}",
                    set.name,
                    elements_text(nets)
                );
            }
        }
    }
    for name in news.keys().filter(|n| !olds.contains_key(*n)) {
        let _ = writeln!(s, "add chain {TABLE} {name}");
    }
    for (name, chain) in &news {
        match olds.get(name) {
            Some(was) if was == chain => continue,
            Some(_) => {
                let _ = writeln!(s, "flush chain {TABLE} {name}");
            }
            None => {}
        }
        stats.chains += 1;
        for rule in &chain.rules {
            let _ = writeln!(s, "add rule {TABLE} {name} {}", rule_text(rule));
        }
    }
    for (map_base, o, n) in [
        ("egress", &old.egress, &new.egress),
        ("ingress", &old.ingress, &new.ingress),
    ] {
        let om: BTreeMap<IpAddr, &String> = o.iter().map(|(ip, c)| (*ip, c)).collect();
        let nm: BTreeMap<IpAddr, &String> = n.iter().map(|(ip, c)| (*ip, c)).collect();
        let family = |ip: &IpAddr| if ip.is_ipv6() { 6 } else { 4 };
        for (ip, c) in &om {
            if nm.get(ip) != Some(c) {
                stats.elements += 1;
                let _ = writeln!(
                    s,
                    "delete element {TABLE} {map_base}{} {{ {ip} }}",
                    family(ip)
                );
            }
        }
        for (ip, c) in &nm {
            if om.get(ip) != Some(c) {
                stats.elements += 1;
                let _ = writeln!(
                    s,
                    "add element {TABLE} {map_base}{} {{ {ip} : jump {c} }}",
                    family(ip)
                );
            }
        }
    }
    for ((name, v6, o), (_, _, n)) in exempt_sets(old).into_iter().zip(exempt_sets(new)) {
        let of: BTreeSet<&(IpAddr, IpAddr)> = o.iter().filter(|p| p.0.is_ipv6() == v6).collect();
        let nf: BTreeSet<&(IpAddr, IpAddr)> = n.iter().filter(|p| p.0.is_ipv6() == v6).collect();
        for (verb, pairs) in [("delete", of.difference(&nf)), ("add", nf.difference(&of))] {
            let pairs: Vec<String> = pairs.map(|(a, b)| format!("{a} . {b}")).collect();
            if !pairs.is_empty() {
                stats.elements += pairs.len();
                let _ = writeln!(
                    s,
                    "{verb} element {TABLE} {name} {{ {} }}",
                    pairs.join(", ")
                );
            }
        }
    }
    let gone: Vec<&&str> = olds.keys().filter(|n| !news.contains_key(*n)).collect();
    // Flush them all before deleting any: a deleted chain may still jump to another.
    for name in &gone {
        stats.chains += 1;
        let _ = writeln!(s, "flush chain {TABLE} {name}");
    }
    for name in &gone {
        let _ = writeln!(s, "delete chain {TABLE} {name}");
    }
    for name in old_sets.difference(&new_sets) {
        let _ = writeln!(s, "delete set {TABLE} {name}");
    }
    (s, stats)
}
