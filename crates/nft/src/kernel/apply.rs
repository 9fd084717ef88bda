//! Talking to the kernel: `nft -f -` transactions and conntrack, optionally inside a
//! network namespace (`ip netns exec`).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::diff::{Delta, UpdateStats};
use crate::ir::Ruleset;
use crate::kernel::batch::table_exists;
use crate::kernel::conntrack::cut_forbidden;
use crate::kernel::error::KernelError;
use crate::kernel::load::load_fresh;
use crate::render::TABLE;

pub(crate) fn command(netns: Option<&str>, program: &str) -> Command {
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
fn run_nft(flags: &[&str], script: &str, netns: Option<&str>) -> Result<(), KernelError> {
    let spawn_err = |e| KernelError::io("nft -f", e);
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
        Err(KernelError::rejected(
            "nft -f",
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }
}

fn nft(script: &str, netns: Option<&str>) -> Result<(), KernelError> {
    run_nft(&[], script, netns)
}

/// Runs an `nft -f` script (one transaction) in the node's namespace or `netns`.
pub(crate) fn run_script(script: &str, netns: Option<&str>) -> Result<(), KernelError> {
    nft(script, netns)
}

/// Checks a script with `nft -c` (nothing is changed).
pub fn check(script: &str, netns: Option<&str>) -> Result<(), KernelError> {
    run_nft(&["-c"], script, netns)
}

/// Loads `ruleset` as the table: where there is no table yet (one netlink request tells),
/// in stages ([`load_in_stages`]; measured faster than one transaction at every size, from
/// the 3-node example to 88,000 elements and rules); otherwise the table is replaced in one
/// `nft -f` transaction.
pub fn apply(ruleset: &Ruleset, netns: Option<&str>) -> Result<(), KernelError> {
    if table_exists(netns)? {
        nft(&ruleset.render(), netns)
    } else {
        load_in_stages(ruleset, netns)
    }
}

/// Loads `ruleset` into a namespace that has no `inet palisade` table, in netlink batches
/// that no packet sees until the last: the table, sets, maps and chains declared, every
/// element, every rule (the few rules netlink does not carry by `nft -f`), then the base
/// chains that hook the table in. A refused stage deletes the partial table again. Fails,
/// leaving it alone, where the table exists.
pub fn load_in_stages(ruleset: &Ruleset, netns: Option<&str>) -> Result<(), KernelError> {
    load_fresh(
        ruleset,
        |script| nft(script, netns),
        |batch| batch.send(netns),
    )
}

/// Deletes `table` (`family name`) in one transaction; nothing when it is not there.
pub(crate) fn delete_table(table: &str, netns: Option<&str>) -> Result<(), KernelError> {
    nft(&format!("add table {table}\ndelete table {table}\n"), netns)
}

/// Removes the table (if present).
pub fn remove(netns: Option<&str>) -> Result<(), KernelError> {
    delete_table(TABLE, netns)?;
    crate::kernel::dialed::remove_dial_log(netns)?;
    crate::kernel::dns::remove_dns_capture(netns)
}

/// Changes the loaded `old` ruleset into `new` in one transaction (a full replace when the
/// node's own addresses changed), then deletes the tracked connections `new` forbids.
pub fn update(
    old: &Ruleset,
    new: &Ruleset,
    netns: Option<&str>,
) -> Result<UpdateStats, KernelError> {
    let mut stats = transition(old, new, netns)?;
    stats.connections_cut = cut_forbidden(new, netns)?;
    Ok(stats)
}

/// The transaction of [`update`] alone: `old` becomes `new` in the kernel, and tracked
/// connections are left as they are.
///
/// When the change allows it (see `docs/nftables.md`), new sets are created first with
/// `nft -f` (nothing refers to them yet, so traffic is unaffected) and the switch-over,
/// new chains and their rules included, is one netlink transaction that needs no read of
/// the loaded table; else the whole change is one `nft -f` transaction.
pub fn transition(
    old: &Ruleset,
    new: &Ruleset,
    netns: Option<&str>,
) -> Result<UpdateStats, KernelError> {
    if old.host_addrs != new.host_addrs {
        apply(new, netns)?;
        return Ok(UpdateStats {
            chains: new.chains.len(),
            elements: new.egress.len() + new.ingress.len(),
            ..UpdateStats::default()
        });
    }
    let delta = Delta::new(old, new);
    let mut stats = delta.stats();
    if delta.is_empty() {
        return Ok(stats);
    }
    let Some(split) = delta.split() else {
        let t = Instant::now();
        nft(&delta.script(), netns)?;
        stats.switch = t.elapsed();
        return Ok(stats);
    };
    stats.netlink = true;
    let t = Instant::now();
    if !split.prepare.is_empty() {
        nft(&split.prepare, netns)?;
    }
    stats.prepare = t.elapsed();
    let t = Instant::now();
    if !split.batch.is_empty()
        && let Err(e) = split.batch.send(netns)
    {
        // Nothing refers to what the preparation created: take it away again.
        if !split.unprepare.is_empty() {
            let _ = nft(&split.unprepare, netns);
        }
        return Err(e);
    }
    stats.switch = t.elapsed();
    Ok(stats)
}
