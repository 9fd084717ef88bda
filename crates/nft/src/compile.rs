//! The engine's side programs for the pods of one node → a [`Ruleset`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use palisade_engine::{ConcreteRule, Decision, Engine, PodId, SideProgram, Tier};
use palisade_model::{Action, Direction, Protocol};

use crate::NftError;
use crate::ir::{Chain, Field, LoggedDecision, Match, Rule, Ruleset, Verdict};

/// Compiles the pods of `node` (every pod when `None`) into a ruleset.
pub fn compile(engine: &Engine, node: Option<&str>) -> Result<Ruleset, NftError> {
    let cluster = engine.cluster();
    if let Some(n) = node
        && engine.node_id(n).is_none()
    {
        return Err(NftError::UnknownNode(n.to_string()));
    }
    let host_addrs = cluster
        .nodes
        .iter()
        .filter(|n| node.is_none_or(|want| n.name == want))
        .flat_map(|n| n.addresses.iter().copied())
        .collect();
    let mut rs = Ruleset {
        host_addrs,
        ..Ruleset::default()
    };
    let mut pods: Vec<PodId> = (0..cluster.pods.len())
        .filter(|&p| {
            let pod = &cluster.pods[p];
            !pod.host_network
                && !pod.ips.is_empty()
                && node.is_none_or(|n| pod.node_name.as_deref() == Some(n))
        })
        .collect();
    pods.sort_by_key(|&p| cluster.pods[p].key());
    let mut logs = Logs::default();
    let mut seen = BTreeSet::new();
    let mut interner = Interner::default();
    // Programs for all pods at once share their address sets (see Engine::side_programs).
    let egress = engine.side_programs(&pods, Direction::Egress);
    let ingress = engine.side_programs(&pods, Direction::Ingress);
    for (k, &p) in pods.iter().enumerate() {
        let mut id = chain_id(&cluster.pods[p].key());
        while !seen.insert(id.clone()) {
            id.push('x'); // a digest collision: still unique, still not user text
        }
        for (dir, prefix) in [(Direction::Egress, "e"), (Direction::Ingress, "i")] {
            let name = format!("{prefix}{id}");
            let program = if dir == Direction::Egress {
                &egress[k]
            } else {
                &ingress[k]
            };
            side_chains(
                dir,
                &name,
                program,
                &mut logs,
                &mut interner,
                &mut rs.chains,
            );
            let dispatch = if dir == Direction::Egress {
                &mut rs.egress
            } else {
                &mut rs.ingress
            };
            // An address two pods share maps once (both pods' chains drop everything).
            for ip in &cluster.pods[p].ips {
                if engine.shared_address(p).is_none()
                    || !dispatch.iter().any(|(seen, _)| seen == ip)
                {
                    dispatch.push((*ip, name.clone()));
                }
            }
        }
    }
    rs.logs = logs.entries;
    rs.sets = interner.sets.into_values().collect();
    intern_sets(&mut rs);
    Ok(rs)
}

/// Address lists longer than this become named sets shared across chains.
const INLINE_MAX: usize = 4;

/// A named set's name: `s4`/`s6` and 12 hex digits of a digest of its elements.
fn set_name(v6: bool, nets: &[IpNet]) -> String {
    let h = nets
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("s{}{:012x}", if v6 { 6 } else { 4 }, h & 0xffff_ffff_ffff)
}

/// A shared address set (by identity) and whether it is matched as the source.
type SetKey = (*const BTreeSet<IpAddr>, bool);

/// Address-set matches, computed once per shared set (by identity) and stored as named
/// sets when long.
#[derive(Default)]
struct Interner {
    by_set: HashMap<SetKey, Vec<(bool, Match)>>,
    sets: BTreeMap<String, crate::ir::NamedSet>,
}

impl Interner {
    /// `ip saddr|daddr` matches for `addrs`, one per family present.
    fn matches(&mut self, addrs: &Arc<BTreeSet<IpAddr>>, field: Field) -> Vec<(bool, Match)> {
        let key = (Arc::as_ptr(addrs), field == Field::Saddr);
        if let Some(hit) = self.by_set.get(&key) {
            return hit.clone();
        }
        let mut out = Vec::new();
        for (v6, nets) in by_family(addrs.iter().copied()) {
            if nets.len() <= INLINE_MAX {
                out.push((
                    v6,
                    Match::Addr {
                        field,
                        v6,
                        nets,
                        negate: false,
                    },
                ));
            } else {
                let name = set_name(v6, &nets);
                self.sets
                    .entry(name.clone())
                    .or_insert_with(|| crate::ir::NamedSet {
                        name: name.clone(),
                        v6,
                        elements: nets,
                    });
                out.push((
                    v6,
                    Match::Set {
                        field,
                        v6,
                        set: name,
                        negate: false,
                    },
                ));
            }
        }
        self.by_set.insert(key, out.clone());
        out
    }
}

/// Moves long address lists into named sets, one per distinct content: a peer that selects
/// many pods is stored once, not once per subject pod's chain.
fn intern_sets(rs: &mut Ruleset) {
    let mut sets: BTreeMap<(bool, Vec<IpNet>), String> = rs
        .sets
        .drain(..)
        .map(|s| ((s.v6, s.elements), s.name))
        .collect();
    for chain in &mut rs.chains {
        for rule in &mut chain.rules {
            for m in &mut rule.matches {
                let Match::Addr {
                    field,
                    v6,
                    nets,
                    negate,
                } = m
                else {
                    continue;
                };
                if nets.len() <= INLINE_MAX {
                    continue;
                }
                let mut key = nets.clone();
                key.sort();
                key.dedup();
                let name = sets
                    .entry((*v6, key))
                    .or_insert_with_key(|(v6, k)| set_name(*v6, k))
                    .clone();
                *m = Match::Set {
                    field: *field,
                    v6: *v6,
                    set: name,
                    negate: *negate,
                };
            }
        }
    }
    rs.sets = sets
        .into_iter()
        .map(|((v6, elements), name)| crate::ir::NamedSet { name, v6, elements })
        .collect();
}

/// A chain name part from a pod's `namespace/name`: 12 hex digits of FNV-1a.
fn chain_id(key: &str) -> String {
    format!(
        "{:012x}",
        palisade_model::digest::fnv64(key) & 0xffff_ffff_ffff
    )
}

/// The log ids handed out so far: one per distinct decision.
#[derive(Default)]
struct Logs {
    entries: Vec<LoggedDecision>,
    index: HashMap<LoggedDecision, u32>,
}

impl Logs {
    /// The id of `decision`, taken in `tier` and `direction`.
    fn id(&mut self, direction: Direction, tier: Tier, decision: Decision) -> u32 {
        let entry = LoggedDecision {
            direction,
            tier,
            decision,
        };
        let next = self.entries.len() as u32;
        *self.index.entry(entry.clone()).or_insert_with(|| {
            self.entries.push(entry);
            next
        })
    }

    /// The id of a rule that decides in `tier`.
    fn rule(&mut self, tier: Tier, rule: &palisade_engine::RuleMatch) -> u32 {
        self.id(rule.direction, tier, Decision::Rule(rule.clone()))
    }
}

/// The three chains of one side: `<name>` (exemptions, admin tier), `<name>_np`
/// (NetworkPolicy isolation) and `<name>_bl` (baseline).
fn side_chains(
    dir: Direction,
    name: &str,
    prog: &SideProgram,
    logs: &mut Logs,
    interner: &mut Interner,
    out: &mut Vec<Chain>,
) {
    let peer = if dir == Direction::Egress {
        Field::Daddr
    } else {
        Field::Saddr
    };
    let (np, bl) = (format!("{name}_np"), format!("{name}_bl"));
    // Only connection starts reach a side chain (established ones are accepted first);
    // a TCP one must be a SYN, or a cut connection's next packet would open it again.
    let mut main = vec![Rule {
        matches: vec![Match::TcpWithoutSyn],
        verdict: Verdict::Drop,
        log: None,
    }];
    for (v6, nets) in by_family(prog.exempt.iter().copied()) {
        main.push(Rule {
            matches: vec![Match::Addr {
                field: peer,
                v6,
                nets,
                negate: false,
            }],
            verdict: Verdict::Return,
            log: None,
        });
    }
    if let Some(ip) = prog.shared_address {
        // No policy can be enforced for an address two pods share: fail closed.
        let log = logs.id(dir, Tier::FailClosed, Decision::SharedAddress(ip));
        main.push(Rule {
            matches: vec![],
            verdict: Verdict::Drop,
            log: Some(log),
        });
        out.push(Chain {
            name: name.to_string(),
            rules: main,
        });
        return;
    }
    for r in &prog.admin {
        let verdict = match r.rule.action {
            Action::Allow => Verdict::Return,
            Action::Deny => Verdict::Drop,
            Action::Pass => Verdict::Goto(np.clone()),
        };
        let log = Some(logs.rule(Tier::Admin, &r.rule));
        expand(r, peer, verdict, log, interner, &mut main);
    }
    main.push(Rule {
        matches: vec![],
        verdict: Verdict::Goto(np.clone()),
        log: None,
    });
    let mut np_rules = Vec::new();
    if prog.isolated {
        for r in &prog.network {
            expand(r, peer, Verdict::Return, None, interner, &mut np_rules);
        }
        let log = logs.id(
            dir,
            Tier::NetworkPolicy,
            Decision::Isolated(prog.isolating.clone()),
        );
        np_rules.push(Rule {
            matches: vec![],
            verdict: Verdict::Drop,
            log: Some(log),
        });
    } else {
        np_rules.push(Rule {
            matches: vec![],
            verdict: Verdict::Goto(bl.clone()),
            log: None,
        });
    }
    let mut bl_rules = Vec::new();
    for r in &prog.baseline {
        let (verdict, log) = match r.rule.action {
            Action::Deny => (Verdict::Drop, Some(logs.rule(Tier::Baseline, &r.rule))),
            // Allow, and a baseline Pass (which falls through to the default: allowed)
            _ => (Verdict::Return, None),
        };
        expand(r, peer, verdict, log, interner, &mut bl_rules);
    }
    out.push(Chain {
        name: name.to_string(),
        rules: main,
    });
    out.push(Chain {
        name: np,
        rules: np_rules,
    });
    out.push(Chain {
        name: bl,
        rules: bl_rules,
    });
}

/// Addresses as host prefixes, grouped by family (IPv4 first).
fn by_family(addrs: impl Iterator<Item = IpAddr>) -> Vec<(bool, Vec<IpNet>)> {
    let (v4, v6): (Vec<IpAddr>, Vec<IpAddr>) = addrs.partition(IpAddr::is_ipv4);
    [(false, v4), (true, v6)]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(f, v)| (f, v.into_iter().map(IpNet::from).collect()))
        .collect()
}

/// Ports of one protocol (or all), towards some addresses (or any): ranges, `None` = all.
type PortGroup = (
    Option<Protocol>,
    Option<Arc<BTreeSet<IpAddr>>>,
    Vec<Option<(u16, u16)>>,
);

/// One concrete rule as nft rules: (peer pieces) × (port groups), each of one family.
fn expand(
    r: &ConcreteRule,
    peer: Field,
    verdict: Verdict,
    log: Option<u32>,
    interner: &mut Interner,
    out: &mut Vec<Rule>,
) {
    // Peer pieces: (family or None for any, matches).
    let mut pieces: Vec<(Option<bool>, Vec<Match>)> = Vec::new();
    if r.peers.any {
        pieces.push((None, vec![]));
    } else {
        for (v6, m) in interner.matches(&r.peers.addrs, peer) {
            pieces.push((Some(v6), vec![m]));
        }
        for (cidr, except) in &r.peers.blocks {
            let v6 = cidr.addr().is_ipv6();
            let mut m = vec![Match::Addr {
                field: peer,
                v6,
                nets: vec![*cidr],
                negate: false,
            }];
            if !except.is_empty() {
                m.push(Match::Addr {
                    field: peer,
                    v6,
                    nets: except.clone(),
                    negate: true,
                });
            }
            pieces.push((Some(v6), m));
        }
    }
    // Port groups: (protocol, only-to addresses) → ranges; a None range means every port.
    let mut groups: Vec<PortGroup> = Vec::new();
    match &r.ports {
        None => groups.push((None, None, vec![None])),
        Some(alts) => {
            for a in alts {
                match groups
                    .iter_mut()
                    .find(|(p, t, _)| *p == a.protocol && *t == a.only_to)
                {
                    Some(g) => g.2.push(a.range),
                    None => groups.push((a.protocol, a.only_to.clone(), vec![a.range])),
                }
            }
        }
    }
    for (family, peer_matches) in &pieces {
        for (protocol, only_to, ranges) in &groups {
            let mut port_matches = Vec::new();
            if let Some(p) = protocol {
                port_matches.push(Match::Proto(*p));
                if ranges.iter().all(Option::is_some) {
                    port_matches.push(Match::DPort(ranges.iter().flatten().copied().collect()));
                }
            }
            match only_to {
                None => {
                    let mut matches = peer_matches.clone();
                    matches.extend(port_matches);
                    out.push(Rule {
                        matches,
                        verdict: verdict.clone(),
                        log,
                    });
                }
                Some(to) => {
                    for (v6, m) in interner.matches(to, Field::Daddr) {
                        if family.is_some_and(|f| f != v6) {
                            continue;
                        }
                        let mut matches = peer_matches.clone();
                        matches.push(m);
                        matches.extend(port_matches.clone());
                        out.push(Rule {
                            matches,
                            verdict: verdict.clone(),
                            log,
                        });
                    }
                }
            }
        }
    }
}
