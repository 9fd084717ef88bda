//! Talking to the kernel: `nft -f -` transactions and conntrack, optionally inside a
//! network namespace (`ip netns exec`).

use std::collections::BTreeMap;
use std::io::Write;
use std::net::IpAddr;
use std::process::{Command, Stdio};

use crate::NftError;
use crate::conntrack::cut_forbidden;
use crate::ir::Ruleset;
use crate::render::TABLE;

fn command(netns: Option<&str>, program: &str) -> Command {
    match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, program]);
            c
        }
        None => Command::new(program),
    }
}

/// Runs `nft <flags> -f -` with `script` on stdin.
fn run_nft(flags: &[&str], script: &str, netns: Option<&str>) -> Result<(), NftError> {
    let spawn_err = |e| NftError::Spawn("nft".into(), e);
    let mut child = command(netns, "nft")
        .args(flags)
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_err)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(script.as_bytes()).map_err(spawn_err)?;
    }
    let out = child.wait_with_output().map_err(spawn_err)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NftError::Rejected(
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }
}

fn nft(script: &str, netns: Option<&str>) -> Result<(), NftError> {
    run_nft(&[], script, netns)
}

/// Checks a script with `nft -c` (nothing is changed).
pub fn check(script: &str, netns: Option<&str>) -> Result<(), NftError> {
    run_nft(&["-c"], script, netns)
}

/// Replaces the table in one transaction.
pub fn apply(ruleset: &Ruleset, netns: Option<&str>) -> Result<(), NftError> {
    nft(&ruleset.render(), netns)
}

/// Removes the table (if present).
pub fn remove(netns: Option<&str>) -> Result<(), NftError> {
    nft(&format!("add table {TABLE}\ndelete table {TABLE}\n"), netns)
}

/// What an update changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UpdateStats {
    /// Chains rewritten, added or removed.
    pub chains: usize,
    /// Dispatch map elements added or removed.
    pub elements: usize,
    /// Tracked connections deleted because the new ruleset forbids them.
    pub connections_cut: usize,
}

/// The transaction that turns `old` into `new`: changed chains are flushed and refilled,
/// new ones added, map elements added and removed, unused chains deleted — one `nft -f`,
/// so no packet ever sees a mix.
pub fn update_script(old: &Ruleset, new: &Ruleset) -> (String, UpdateStats) {
    let mut s = String::new();
    let mut stats = UpdateStats::default();
    let olds: BTreeMap<&str, &crate::ir::Chain> =
        old.chains.iter().map(|c| (c.name.as_str(), c)).collect();
    let news: BTreeMap<&str, &crate::ir::Chain> =
        new.chains.iter().map(|c| (c.name.as_str(), c)).collect();
    // Sets are named by their content: add the new ones, delete the unused ones last.
    let old_sets: std::collections::BTreeSet<&str> =
        old.sets.iter().map(|x| x.name.as_str()).collect();
    let new_sets: std::collections::BTreeSet<&str> =
        new.sets.iter().map(|x| x.name.as_str()).collect();
    for set in new
        .sets
        .iter()
        .filter(|x| !old_sets.contains(x.name.as_str()))
    {
        s += &format!(
            "add set {TABLE} {} {{ {} }}\n",
            set.name,
            crate::render::set_body(set, "; ")
        );
    }
    for name in news.keys().filter(|n| !olds.contains_key(*n)) {
        s += &format!("add chain {TABLE} {name}\n");
    }
    for (name, chain) in &news {
        if olds.get(name) == Some(chain) {
            continue;
        }
        stats.chains += 1;
        s += &format!("flush chain {TABLE} {name}\n");
        // Render the chain's rules through the table renderer's rule text.
        let table = Ruleset {
            chains: vec![(*chain).clone()],
            ..Ruleset::default()
        }
        .render_table();
        for line in table
            .lines()
            .skip_while(|l| !l.trim_start().starts_with(&format!("chain {name} {{")))
            .skip(1)
        {
            let rule = line.trim();
            if rule == "}" {
                break;
            }
            s += &format!("add rule {TABLE} {name} {rule}\n");
        }
    }
    for (map_base, o, n) in [
        ("egress", &old.egress, &new.egress),
        ("ingress", &old.ingress, &new.ingress),
    ] {
        let om: BTreeMap<IpAddr, &String> = o.iter().map(|(ip, c)| (*ip, c)).collect();
        let nm: BTreeMap<IpAddr, &String> = n.iter().map(|(ip, c)| (*ip, c)).collect();
        for (ip, c) in &om {
            if nm.get(ip) != Some(c) {
                stats.elements += 1;
                s += &format!(
                    "delete element {TABLE} {map_base}{} {{ {ip} }}\n",
                    if ip.is_ipv6() { 6 } else { 4 }
                );
            }
        }
        for (ip, c) in &nm {
            if om.get(ip) != Some(c) {
                stats.elements += 1;
                s += &format!(
                    "add element {TABLE} {map_base}{} {{ {ip} : jump {c} }}\n",
                    if ip.is_ipv6() { 6 } else { 4 }
                );
            }
        }
    }
    for name in olds.keys().filter(|n| !news.contains_key(*n)) {
        stats.chains += 1;
        s += &format!("flush chain {TABLE} {name}\n");
    }
    for name in olds.keys().filter(|n| !news.contains_key(*n)) {
        s += &format!("delete chain {TABLE} {name}\n");
    }
    for name in old_sets.difference(&new_sets) {
        s += &format!("delete set {TABLE} {name}\n");
    }
    (s, stats)
}

/// Changes the loaded `old` ruleset into `new` in one transaction (a full replace when the
/// node's own addresses changed), then deletes the tracked connections `new` forbids.
pub fn update(old: &Ruleset, new: &Ruleset, netns: Option<&str>) -> Result<UpdateStats, NftError> {
    let mut stats = transition(old, new, netns)?;
    stats.connections_cut = cut_forbidden(new, netns)?;
    Ok(stats)
}

/// The transaction of [`update`] alone: `old` becomes `new` in the kernel, and tracked
/// connections are left as they are.
pub fn transition(
    old: &Ruleset,
    new: &Ruleset,
    netns: Option<&str>,
) -> Result<UpdateStats, NftError> {
    if old.host_addrs != new.host_addrs {
        apply(new, netns)?;
        return Ok(UpdateStats {
            chains: new.chains.len(),
            elements: new.egress.len() + new.ingress.len(),
            connections_cut: 0,
        });
    }
    let (script, stats) = update_script(old, new);
    if !script.is_empty() {
        nft(&script, netns)?;
    }
    Ok(stats)
}
