//! Talking to the kernel: `nft -f -` transactions and conntrack, optionally inside a
//! network namespace (`ip netns exec`).

use std::io::Write;
use std::process::{Command, Stdio};

use palisade_model::Protocol;

use crate::NftError;
use crate::diff::update_script;
use crate::ir::Ruleset;
use crate::lookup::{NftVerdict, Packet};
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

/// Changes the loaded `old` ruleset into `new` in one transaction (a full replace when the
/// node's own addresses changed), then deletes the tracked connections `new` forbids.
pub fn update(old: &Ruleset, new: &Ruleset, netns: Option<&str>) -> Result<UpdateStats, NftError> {
    let mut stats = if old.host_addrs != new.host_addrs {
        apply(new, netns)?;
        UpdateStats {
            chains: new.chains.len(),
            elements: new.egress.len() + new.ingress.len(),
            connections_cut: 0,
        }
    } else {
        let (script, stats) = update_script(old, new);
        if !script.is_empty() {
            nft(&script, netns)?;
        }
        stats
    };
    stats.connections_cut = cut_forbidden(new, netns)?;
    Ok(stats)
}

/// Deletes every tracked connection whose first packet `ruleset` would now drop
/// ("the enforcer should terminate and block the existing connection").
pub fn cut_forbidden(ruleset: &Ruleset, netns: Option<&str>) -> Result<usize, NftError> {
    let out = command(netns, "conntrack")
        .args(["-L"])
        .output()
        .map_err(|e| NftError::Spawn("conntrack".into(), e))?;
    let mut cut = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(entry) = parse_conntrack(line) else {
            continue;
        };
        if let NftVerdict::Drop(_) = ruleset.lookup(&entry.packet) {
            let proto = entry.packet.protocol.as_str().to_lowercase();
            let status = command(netns, "conntrack")
                .args([
                    "-D",
                    "-p",
                    &proto,
                    "-s",
                    &entry.packet.src.to_string(),
                    "-d",
                    &entry.packet.dst.to_string(),
                ])
                .args([
                    "--sport",
                    &entry.sport.to_string(),
                    "--dport",
                    &entry.packet.dport.to_string(),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| NftError::Spawn("conntrack".into(), e))?;
            if status.success() {
                cut += 1;
            }
        }
    }
    Ok(cut)
}

struct Tracked {
    packet: Packet,
    sport: u16,
}

/// The original direction of one `conntrack -L` line.
fn parse_conntrack(line: &str) -> Option<Tracked> {
    let mut words = line.split_whitespace();
    let protocol = match words.next()? {
        "tcp" => Protocol::Tcp,
        "udp" => Protocol::Udp,
        "sctp" => Protocol::Sctp,
        _ => return None,
    };
    let field = |key: &str| line.split_whitespace().find_map(|w| w.strip_prefix(key));
    Some(Tracked {
        packet: Packet {
            src: field("src=")?.parse().ok()?,
            dst: field("dst=")?.parse().ok()?,
            protocol,
            dport: field("dport=")?.parse().ok()?,
        },
        sport: field("sport=")?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conntrack_lines() {
        let t = parse_conntrack("tcp      6 431999 ESTABLISHED src=10.0.0.10 dst=10.0.1.11 sport=40000 dport=80 src=10.0.1.11 dst=10.0.0.10 sport=80 dport=40000 [ASSURED] mark=0 use=1").unwrap();
        assert_eq!(
            (t.packet.src.to_string(), t.packet.dport, t.sport),
            ("10.0.0.10".into(), 80, 40000)
        );
        assert!(
            parse_conntrack("icmp     1 29 src=10.0.0.1 dst=10.0.0.2 type=8 code=0 id=1").is_none()
        );
    }
}
