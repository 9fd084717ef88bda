//! Incremental updates at the size of a small node: one pod relabel and one policy change
//! touch only what changed, and the kernel's table after the update equals a full apply of
//! the new ruleset.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::process::Command;

mod support;
use support::ct::Netns;

use palisade_engine::{Change, Engine, Options};
use palisade_model::{Kind, Object, ObjectKey, Protocol};
use palisade_nft::{
    Compiled, NftVerdict, Packet, Path, Ruleset, compile, compile_after, update_script,
};

fn engine() -> Engine {
    let g = palisade_gen::generate(&palisade_gen::Spec {
        pods: 200,
        policies: 40,
        seed: 7,
        admin: true,
    });
    Engine::new(g.load().unwrap(), Options::default())
}

/// A pod that can take the labels of another pod of its namespace (an existing class).
fn relabel(e: &Engine) -> Change {
    let pods = &e.cluster().pods;
    let (p, labels) = pods
        .iter()
        .enumerate()
        .find_map(|(i, p)| {
            pods[i + 1..]
                .iter()
                .find(|q| q.namespace == p.namespace && q.labels != p.labels)
                .map(|q| (p, q.labels.clone()))
        })
        .unwrap();
    let mut moved = p.clone();
    moved.labels = labels;
    Change::Upsert(Object::Pod(moved))
}

/// A NetworkPolicy with its last ingress rule removed.
fn policy_change(e: &Engine) -> Change {
    let np = e
        .cluster()
        .network_policies
        .iter()
        .find(|p| p.ingress.len() > 1)
        .unwrap();
    let mut changed = np.clone();
    changed.ingress.pop();
    Change::Upsert(Object::NetworkPolicy(changed))
}

/// Both rulesets decide every pod pair the same on a few ports.
fn same_decisions(a: &Ruleset, b: &Ruleset, e: &Engine) {
    let ips: Vec<_> = e
        .cluster()
        .pods
        .iter()
        .flat_map(|p| p.ips.clone())
        .collect();
    for &src in ips.iter().step_by(7) {
        for &dst in ips.iter().step_by(5) {
            for dport in [53, 80, 443, 8080] {
                for protocol in [Protocol::Tcp, Protocol::Udp] {
                    let p = Packet {
                        src,
                        dst,
                        protocol,
                        dport,
                    };
                    let (x, y) = (a.lookup(&p), b.lookup(&p));
                    assert_eq!(x == NftVerdict::Accept, y == NftVerdict::Accept, "{p:?}");
                }
            }
        }
    }
}

#[test]
fn a_relabel_to_an_existing_class_moves_only_that_pods_elements() {
    let mut e = engine();
    let old = compile(&e, None).unwrap();
    e.apply(relabel(&e));
    let new = compile_after(&e, None, &old).unwrap();
    same_decisions(&new, &compile(&e, None).unwrap(), &e);
    let (script, stats) = update_script(&old, &new);
    // Its address in each map (deleted and added), the elements of the peer sets it joins
    // or leaves (pod addresses are always named sets, so no rule changes), and at most
    // its class's own two chains, when the class is new on the node (its pods' container
    // ports may set it apart from the pod whose labels it took).
    let map_lines = script
        .lines()
        .filter(|l| l.contains(" egress4 ") || l.contains(" ingress4 "))
        .count();
    assert_eq!(map_lines, 4, "{script}");
    let written: Vec<&str> = script
        .lines()
        .filter_map(|l| l.strip_prefix("add rule inet palisade "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert!(
        stats.chains <= 2 && written.iter().all(|c| c.starts_with(['e', 'i'])),
        "{} chains written:\n{script}",
        stats.chains
    );
    assert!(
        !script.contains("delete element inet palisade egress_exempt")
            && !script.contains("delete element inet palisade ingress_exempt"),
        "the pod's exemptions do not change:\n{script}"
    );
}

/// After an incremental compile, every chain that stayed as it was, and most sets, are the
/// previous ruleset's own (shared, not copied), so the update's diff finds them equal by
/// identity.
#[test]
fn an_incremental_compile_shares_what_stayed_with_the_previous_ruleset() {
    let mut e = engine();
    let mut compiled = Compiled::full(&e, None, None).unwrap();
    let touched = e.apply(policy_change(&e));
    let (next, path) = compiled.next(&e, None, &touched).unwrap();
    assert_eq!(path, Path::Incremental);
    let (old, new) = (compiled.ruleset(), next.ruleset());
    let mut same = 0;
    for chain in &new.chains {
        if let Some(was) = old.chains.iter().find(|c| c.name == chain.name)
            && was.rules == chain.rules
        {
            assert!(
                std::sync::Arc::ptr_eq(&was.rules, &chain.rules),
                "{}",
                chain.name
            );
            same += 1;
        }
    }
    // A set that a class built again names too may hold a fresh copy of the same
    // elements (compared by content then); the others are shared.
    let (mut sets, mut shared) = (0, 0);
    for set in &new.sets {
        if let Some(was) = old.sets.iter().find(|s| s.name == set.name)
            && was.elements == set.elements
            && !set.elements.is_empty()
        {
            sets += 1;
            shared += usize::from(std::sync::Arc::ptr_eq(&was.elements, &set.elements));
        }
    }
    assert!(
        shared * 2 > sets,
        "{shared} of {sets} unchanged sets shared"
    );
    assert!(same > 10, "{same} unchanged chains");
}

/// `next` takes what the compile kept and brings it up to date in place: a second `next`
/// from the same compile cannot reuse it, and compiles in full, to the same ruleset.
#[test]
fn a_compile_is_continued_once() {
    let mut e = engine();
    let mut compiled = Compiled::full(&e, None, None).unwrap();
    let touched = e.apply(relabel(&e));
    let (first, path) = compiled.next(&e, None, &touched).unwrap();
    assert_eq!(path, Path::Incremental);
    let (second, path) = compiled.next(&e, None, &touched).unwrap();
    assert_eq!(path, Path::Full("no reusable previous compile"));
    assert!(**first.ruleset() == **second.ruleset());
    assert!(**second.ruleset() == compile_after(&e, None, compiled.ruleset()).unwrap());
}

#[test]
fn a_policy_change_rewrites_only_the_chains_of_the_classes_it_selects() {
    let mut e = engine();
    let old = compile(&e, None).unwrap();
    e.apply(policy_change(&e));
    let new = compile_after(&e, None, &old).unwrap();
    same_decisions(&new, &compile(&e, None).unwrap(), &e);
    let (script, stats) = update_script(&old, &new);
    assert_eq!(stats.elements, 0, "no pod moves:\n{script}");
    assert!(stats.chains > 0, "the change is in the ruleset");
    assert!(
        stats.chains * 4 < old.chains.len(),
        "{} of {} chains written:\n{script}",
        stats.chains,
        old.chains.len()
    );
}

/// The loaded table's text: chains and sets as sorted blocks, the elements of each set
/// sorted (a hash set lists in hash order), counters zeroed.
fn list(ns: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args([
            "netns", "exec", ns, "nft", "list", "table", "inet", "palisade",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let text = text
        .trim_end()
        .strip_suffix('}')
        .unwrap_or(&text)
        .trim_end();
    let mut blocks: Vec<String> = text.split("\n\n").map(normalize).collect();
    blocks.sort();
    blocks
}

/// One block with whitespace collapsed, counters zeroed and each `elements = { … }` list
/// sorted.
fn normalize(block: &str) -> String {
    let flat = block.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut words = flat.split(' ');
    let mut zeroed = Vec::new();
    while let Some(w) = words.next() {
        zeroed.push(w);
        if w == "packets" || w == "bytes" {
            zeroed.push("0");
            words.next();
        }
    }
    let mut rest = zeroed.join(" ");
    let mut out = String::new();
    while let Some(at) = rest.find("elements = { ") {
        let (head, tail) = rest.split_at(at + "elements = { ".len());
        out.push_str(head);
        let end = tail.find(" }").unwrap_or(tail.len());
        let mut elems: Vec<&str> = tail[..end].split(", ").collect();
        elems.sort_unstable();
        out.push_str(&elems.join(", "));
        rest = tail[end..].to_string();
    }
    out + &rest
}

/// A pod with a new name and address, in the namespace and with the labels of `like`.
fn new_pod(e: &Engine) -> Change {
    let like = &e.cluster().pods[0];
    let mut pod = like.clone();
    pod.name = format!("{}-added", like.name);
    pod.ips = vec![
        "10.250.0.7".parse().unwrap(),
        "fd00:250::7".parse().unwrap(),
    ];
    Change::Upsert(Object::Pod(pod))
}

#[test]
fn incremental_updates_leave_the_table_a_full_apply_leaves() {
    if !palisade_test_support::require_root(
        "incremental_updates_leave_the_table_a_full_apply_leaves",
    ) {
        return;
    }
    let ns = Netns::new("nfti");
    let mut e = engine();
    let first = compile(&e, None).unwrap();
    palisade_nft::apply(&first, Some(&ns.0)).unwrap();
    let np = e
        .cluster()
        .network_policies
        .iter()
        .find(|p| p.ingress.len() > 1)
        .unwrap()
        .clone();
    let pod = e.cluster().pods[3].clone();
    let changes = [
        ("relabel", relabel(&e)),
        ("policy edit", policy_change(&e)),
        ("new pod (IPv4 and IPv6)", new_pod(&e)),
        (
            "policy removed",
            Change::Remove(ObjectKey::new(
                Kind::NetworkPolicy,
                Some(&np.namespace),
                &np.name,
            )),
        ),
        (
            "pod removed",
            Change::Remove(ObjectKey::new(Kind::Pod, Some(&pod.namespace), &pod.name)),
        ),
        (
            "policy back",
            Change::Upsert(Object::NetworkPolicy(np.clone())),
        ),
        ("pod back", Change::Upsert(Object::Pod(pod.clone()))),
    ];
    let mut old = first;
    for (what, change) in changes {
        e.apply(change);
        let new = compile_after(&e, None, &old).unwrap();
        let stats = palisade_nft::update(&old, &new, Some(&ns.0)).unwrap();
        assert!(stats.netlink, "{what}: not switched over by netlink");
        let updated = list(&ns.0);
        palisade_nft::apply(&new, Some(&ns.0)).unwrap();
        let full = list(&ns.0);
        if updated != full {
            let only_update: Vec<_> = updated.iter().filter(|b| !full.contains(b)).collect();
            let only_full: Vec<_> = full.iter().filter(|b| !updated.contains(b)).collect();
            panic!(
                "{what}: incremental update differs from a full apply\nupdate only: {only_update:#?}\nfull only: {only_full:#?}"
            );
        }
        old = new;
    }
}

/// The incremental compile ([`Compiled::next`]) updating one kernel leaves the table a
/// full compile of the same engine leaves when loaded whole into another.
#[test]
fn the_incremental_compile_loads_as_the_full_compile() {
    if !palisade_test_support::require_root("the_incremental_compile_loads_as_the_full_compile") {
        return;
    }
    let (incremental, full) = (Netns::new("nftc"), Netns::new("nftf"));
    let mut e = engine();
    let mut compiled = Compiled::full(&e, None, None).unwrap();
    palisade_nft::apply(compiled.ruleset(), Some(&incremental.0)).unwrap();
    let np = e
        .cluster()
        .network_policies
        .iter()
        .find(|p| p.ingress.len() > 1)
        .unwrap()
        .clone();
    let changes = [
        ("relabel", relabel(&e)),
        ("policy edit", policy_change(&e)),
        (
            "policy removed",
            Change::Remove(ObjectKey::new(
                Kind::NetworkPolicy,
                Some(&np.namespace),
                &np.name,
            )),
        ),
        (
            "policy back",
            Change::Upsert(Object::NetworkPolicy(np.clone())),
        ),
        ("new pod", new_pod(&e)),
    ];
    let mut incremental_paths = 0;
    for (what, change) in changes {
        let touched = e.apply(change);
        let reference = compile_after(&e, None, compiled.ruleset()).unwrap();
        let (next, path) = compiled.next(&e, None, &touched).unwrap();
        incremental_paths += usize::from(path == Path::Incremental);
        palisade_nft::update(compiled.ruleset(), next.ruleset(), Some(&incremental.0)).unwrap();
        palisade_nft::apply(&reference, Some(&full.0)).unwrap();
        assert_eq!(list(&incremental.0), list(&full.0), "{what} ({path:?})");
        compiled = next;
    }
    assert!(
        incremental_paths >= 3,
        "{incremental_paths} incremental compiles"
    );
}

/// A hand-made ruleset: interval sets `s4`/`s6` and hash set `h4` with these elements,
/// every address of `s4` dispatched (egress) to chain `a` or `b`, and the pairs exempt.
fn edges(s4: &[&str], s6: &[&str], h4: &[&str], to_b: bool) -> Ruleset {
    let nets = |l: &[&str]| -> Vec<ipnet::IpNet> { l.iter().map(|s| s.parse().unwrap()).collect() };
    let set = |name: &str, v6, interval, l: &[&str]| palisade_nft::NamedSet {
        name: name.into(),
        v6,
        interval,
        elements: nets(l).into(),
        learned: None,
    };
    let chain = |name: &str| palisade_nft::Chain {
        name: name.into(),
        rules: vec![palisade_nft::Rule {
            matches: vec![],
            verdict: palisade_nft::Verdict::Return,
            log: None,
        }]
        .into(),
    };
    let hosts: Vec<std::net::IpAddr> = nets(h4).iter().map(|n| n.addr()).collect();
    let target = if to_b { "b" } else { "a" };
    Ruleset {
        sets: vec![
            set("s4", false, true, s4),
            set("s6", true, true, s6),
            set("h4", false, false, h4),
        ],
        chains: vec![chain("a"), chain("b")],
        egress: hosts.iter().map(|ip| (*ip, target.into())).collect(),
        ingress_exempt: hosts.iter().map(|ip| (*ip, hosts[0])).collect(),
        ..Ruleset::default()
    }
}

#[test]
fn element_updates_at_the_edges_of_the_address_space_equal_a_full_apply() {
    if !palisade_test_support::require_root(
        "element_updates_at_the_edges_of_the_address_space_equal_a_full_apply",
    ) {
        return;
    }
    let ns = Netns::new("nfte");
    let states = [
        edges(
            &["10.0.0.0/8", "192.168.1.1/32"],
            &["fd00::/8"],
            &["1.1.1.1/32", "2.2.2.2/32"],
            false,
        ),
        edges(&["0.0.0.0/0"], &["::/0"], &["3.3.3.3/32"], true),
        edges(
            &["0.0.0.0/8", "255.255.255.255/32"],
            &["::/8", "ffff::/16"],
            &["1.1.1.1/32"],
            false,
        ),
        edges(
            &["0.0.0.0/1", "128.0.0.0/1"],
            &["::1/128", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"],
            &["1.1.1.1/32", "3.3.3.3/32"],
            true,
        ),
        edges(
            &["128.0.0.0/1", "10.0.0.0/8"],
            &["::/0"],
            &["2.2.2.2/32"],
            false,
        ),
        edges(
            &["10.0.0.0/8", "192.168.1.1/32"],
            &["fd00::/8"],
            &["1.1.1.1/32", "2.2.2.2/32"],
            false,
        ),
    ];
    let mut old = states[0].clone();
    palisade_nft::apply(&old, Some(&ns.0)).unwrap();
    for (i, new) in states.iter().enumerate().skip(1) {
        let stats = palisade_nft::transition(&old, new, Some(&ns.0))
            .unwrap_or_else(|e| panic!("state {i}: {e}"));
        assert!(stats.netlink, "state {i}: not switched over by netlink");
        let updated = list(&ns.0);
        palisade_nft::apply(new, Some(&ns.0)).unwrap();
        assert_eq!(updated, list(&ns.0), "state {i}");
        old = new.clone();
    }
}

/// A ruleset whose rules have every form of match: lists of prefixes and ports (anonymous
/// sets in the kernel: adjacent ones merged, ranges to the ends of the key space, hosts
/// only), single prefixes, negations, both families.
fn lists() -> Ruleset {
    use palisade_nft::{Field, Match, Rule, Verdict};
    let nets = |l: &[&str]| -> Vec<ipnet::IpNet> { l.iter().map(|s| s.parse().unwrap()).collect() };
    let addr = |field, v6, l: &[&str], negate| Match::Addr {
        field,
        v6,
        nets: nets(l),
        negate,
    };
    let rule = |matches: Vec<Match>, log| Rule {
        matches,
        verdict: Verdict::Return,
        log,
    };
    let tcp = Match::Proto(Protocol::Tcp);
    let mut rs = edges(&["10.0.0.0/8"], &["fd00::/8"], &["1.1.1.1/32"], false);
    rs.chains[0].rules = std::sync::Arc::new(vec![
        rule(
            vec![addr(
                Field::Saddr,
                false,
                &[
                    "10.0.0.19/32",
                    "10.0.0.20/31",
                    "10.0.0.22/32",
                    "10.9.0.0/16",
                ],
                false,
            )],
            Some(1),
        ),
        rule(
            vec![
                addr(
                    Field::Daddr,
                    false,
                    &["0.0.0.0/8", "255.255.255.255/32"],
                    true,
                ),
                tcp.clone(),
                Match::DPort(vec![(0, 0), (80, 81), (65535, 65535)]),
            ],
            None,
        ),
        rule(
            vec![addr(
                Field::Saddr,
                true,
                &["fd00::1/128", "fd00::3/128"],
                false,
            )],
            None,
        ),
        rule(
            vec![
                addr(Field::Daddr, true, &["fd00::/64", "fe80::/10"], false),
                tcp.clone(),
                Match::DPort(vec![(443, 443), (8000, 65535)]),
            ],
            Some(2),
        ),
        rule(
            vec![
                addr(Field::Saddr, false, &["10.1.2.0/24"], true),
                Match::Proto(Protocol::Udp),
                Match::DPort(vec![(53, 53), (5353, 5353)]),
            ],
            None,
        ),
        rule(
            vec![
                addr(Field::Daddr, true, &["fd00:1::/32"], false),
                Match::TcpWithoutSyn,
            ],
            None,
        ),
        // Single prefixes that do not end on a byte boundary: masked.
        rule(
            vec![
                addr(Field::Saddr, false, &["10.1.37.24/29"], false),
                addr(Field::Daddr, false, &["172.16.0.0/12"], true),
            ],
            Some(3),
        ),
        rule(
            vec![addr(Field::Daddr, true, &["fd00:0:0:8::/61"], false)],
            None,
        ),
        rule(
            vec![addr(Field::Saddr, true, &["2001:db8::/33"], true)],
            None,
        ),
    ]);
    rs
}

#[test]
fn a_first_load_in_stages_leaves_the_table_one_transaction_leaves() {
    if !palisade_test_support::require_root(
        "a_first_load_in_stages_leaves_the_table_one_transaction_leaves",
    ) {
        return;
    }
    let e = engine();
    let rulesets = [
        compile(&e, None).unwrap(),
        edges(
            &["10.0.0.0/8", "192.168.1.1/32", "255.255.255.255/32"],
            &["fd00::/8", "::1/128"],
            &["1.1.1.1/32", "2.2.2.2/32"],
            false,
        ),
        edges(&["0.0.0.0/0"], &["::/0"], &["3.3.3.3/32"], true),
        lists(),
        Ruleset::default(),
    ];
    for rs in &rulesets {
        let (staged, whole) = (Netns::new("nfts"), Netns::new("nftw"));
        palisade_nft::load_in_stages(rs, Some(&staged.0)).unwrap();
        whole.nft_f(&rs.render());
        assert_eq!(list(&staged.0), list(&whole.0));
    }
    // Where the table exists, a load in stages is refused and leaves it as it was.
    let ns = Netns::new("nftx");
    ns.nft_f(&rulesets[1].render());
    let before = list(&ns.0);
    assert!(palisade_nft::load_in_stages(&rulesets[2], Some(&ns.0)).is_err());
    assert_eq!(list(&ns.0), before);
}

#[test]
fn a_refused_first_load_leaves_no_table() {
    if !palisade_test_support::require_root("a_refused_first_load_leaves_no_table") {
        return;
    }
    let mut rs = edges(&["10.0.0.0/8"], &[], &["1.1.1.1/32"], false);
    // A rule continuing in a chain that does not exist: refused at the rule stage, after
    // the sets and their elements were loaded.
    std::sync::Arc::make_mut(&mut rs.chains[1].rules)[0].verdict =
        palisade_nft::Verdict::Goto("missing".into());
    let ns = Netns::new("nftr");
    assert!(palisade_nft::load_in_stages(&rs, Some(&ns.0)).is_err());
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, "nft", "list", "tables"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "");
}
