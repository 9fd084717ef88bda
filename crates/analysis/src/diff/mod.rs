//! Semantic diff: every connection two states (policies and/or cluster objects) decide
//! differently, with the verdicts — and so the policies responsible — on each side.
//!
//! The comparison is exact, not sampled. Its ends ([`Actor`]) are every pod with an address
//! in either state (matched by namespace and name), every node's own addresses, and the
//! outside of the cluster cut into [`Region`]s by the CIDRs of both states. Each pair of
//! ends is compared in every address family both hold, on every port of every protocol
//! (runs of ports that no policy of either state tells apart, [`Analysis::port_segments`]).
//! An end present in one state only has no connections in the other, so a pod added gains
//! what it may reach and what may reach it.
//!
//! Pods that fall in the same matrix class in both states, with the same address families,
//! form a *group* and are compared once per pair of groups; the node-local exemption (a
//! node's own address reaches the pods on that node) splits a group only where a node is
//! the source.
//!
//! When only policies differ (the pods, namespaces, nodes and options are the same), a side
//! can decide differently only at a pod that some differing policy selects, in either state:
//! a pair of groups with no such pod at either end is not compared. A changed Service or
//! EndpointSlice is not a policy: it turns this off.
//!
//! Services are compared apart from pods ([`ServiceDiff`]): per source and Service port,
//! how many of its endpoints the source reaches before and after.

mod outside;
mod report;
mod services;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub use outside::Region;
use palisade_engine::{BitSet, Endpoint, EndpointKind, Engine, PodId, Verdict};
use palisade_model::{PortRange, Protocol};
pub use report::{Filter, Line, Responsible};
pub use services::{Reached, ServiceChange, ServiceDiff};

use crate::Analysis;
use crate::ports::PortSegment;

/// Whether a connection appears or disappears.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangeKind {
    /// Denied (or absent) before, allowed after.
    Gained,
    /// Allowed before, denied (or absent) after.
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

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// Both families.
    pub const ALL: [Family; 2] = [Family::V4, Family::V6];

    /// The family of an address.
    pub fn of(ip: std::net::IpAddr) -> Family {
        if ip.is_ipv6() { Family::V6 } else { Family::V4 }
    }

    /// `IPv4` or `IPv6`.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

/// One end of the connections compared, present in one state or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A pod with an address, by `namespace/name`.
    Pod {
        /// `namespace/name`.
        key: String,
        /// Its id in the old state, when it has an address there.
        old: Option<PodId>,
        /// Its id in the new state.
        new: Option<PodId>,
    },
    /// A node's own addresses.
    Node {
        /// The node's name.
        name: String,
        /// Its index in the old state, when it has an address there.
        old: Option<usize>,
        /// Its index in the new state.
        new: Option<usize>,
    },
    /// Addresses outside the cluster that no policy of either state tells apart.
    Outside(Region),
}

impl Actor {
    /// `namespace/name`, `node/NAME`, or the region (`0.0.0.0/0 except 10.0.0.0/8`).
    pub fn name(&self) -> String {
        match self {
            Actor::Pod { key, .. } => key.clone(),
            Actor::Node { name, .. } => format!("node/{name}"),
            Actor::Outside(r) => r.to_string(),
        }
    }

    /// Its endpoint in one state (`new` false: the old one) in `family`, if it has one.
    fn endpoint(&self, e: &Engine, new: bool, family: Family) -> Option<Endpoint> {
        let v6 = family == Family::V6;
        let ep = match self {
            Actor::Pod { old, new: n, .. } => {
                e.endpoint_for_pod(if new { (*n)? } else { (*old)? }, Some(v6))?
            }
            Actor::Node { old, new: n, .. } => {
                let node = if new { (*n)? } else { (*old)? };
                let ip = e.cluster().nodes[node].addresses.iter().find(|ip| {
                    ip.is_ipv6() == v6
                        && matches!(e.endpoint_for_ip(**ip).kind, EndpointKind::Host(Some(k)) if k == node)
                })?;
                e.endpoint_for_ip(*ip)
            }
            Actor::Outside(r) => e.endpoint_for_ip(r.sample),
        };
        (Family::of(ep.ip) == family).then_some(ep)
    }
}

/// Connections decided alike in each state: from every actor of `from` to every other actor
/// of `to` (or, when `reflexive`, between the replicas of the one workload in both).
#[derive(Debug, Clone)]
pub struct Cell {
    /// Source actors (indexes into [`Diff::actors`]).
    pub from: Vec<usize>,
    /// Destination actors.
    pub to: Vec<usize>,
    /// The cell stands for a workload's replicas reaching each other.
    pub reflexive: bool,
    /// How many (source, destination) pairs the cell holds.
    pub pairs: usize,
}

/// Ports of one protocol and family on which the connections of a cell changed alike.
#[derive(Debug, Clone)]
pub struct ChangeGroup {
    /// Gained or lost.
    pub change: ChangeKind,
    /// The connections (index into [`Diff::cells`]).
    pub cell: usize,
    /// Address family.
    pub family: Family,
    /// Protocol.
    pub protocol: Protocol,
    /// The ports, inclusive.
    pub ports: PortRange,
    /// The verdict in the old state; `None` when an end is not there. Shared by the groups
    /// that have the same one.
    pub before: Option<Arc<Verdict>>,
    /// The verdict in the new state; `None` when an end is not there.
    pub after: Option<Arc<Verdict>>,
}

/// The semantic difference between two states.
#[derive(Debug, Clone)]
pub struct Diff {
    /// The ends compared: pods, nodes, outside regions.
    pub actors: Vec<Actor>,
    /// The connections, in cells of pairs decided alike.
    pub cells: Vec<Cell>,
    /// The changes, by cell, family, protocol and port.
    pub groups: Vec<ChangeGroup>,
    /// The address families some end holds.
    pub families: Vec<Family>,
    /// Pods with an address only in the new state (`namespace/name`).
    pub pods_added: Vec<String>,
    /// Pods with an address only in the old state.
    pub pods_removed: Vec<String>,
    /// Nodes with an address only in the new state.
    pub nodes_added: Vec<String>,
    /// Nodes with an address only in the old state.
    pub nodes_removed: Vec<String>,
    /// Service reach that changed; `None` when neither state has a Service.
    pub services: Option<ServiceDiff>,
}

impl Diff {
    /// Whether no connection changed and no pod or node came or went.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
            && self.pods_added.is_empty()
            && self.pods_removed.is_empty()
            && self.nodes_added.is_empty()
            && self.nodes_removed.is_empty()
            && self.services.as_ref().is_none_or(ServiceDiff::is_empty)
    }

    /// Every changed connection: (group, source, destination).
    pub fn changes(&self) -> impl Iterator<Item = (&ChangeGroup, &Actor, &Actor)> {
        self.groups.iter().flat_map(move |g| {
            let cell = &self.cells[g.cell];
            cell.from.iter().flat_map(move |&a| {
                cell.to
                    .iter()
                    .filter(move |&&b| cell.reflexive || b != a)
                    .map(move |&b| (g, &self.actors[a], &self.actors[b]))
            })
        })
    }

    /// How many (source, destination) pairs gained and lost a connection on some port.
    pub fn counts(&self) -> (usize, usize) {
        let seen: BTreeSet<(ChangeKind, usize)> =
            self.groups.iter().map(|g| (g.change, g.cell)).collect();
        seen.iter().fold((0, 0), |(g, l), &(k, c)| match k {
            ChangeKind::Gained => (g + self.cells[c].pairs, l),
            ChangeKind::Lost => (g, l + self.cells[c].pairs),
        })
    }
}

/// A group of actors no policy of either state tells apart.
struct Group {
    members: Vec<usize>,
    /// Some member is a policy subject (a pod that is not host-network) in some state.
    subject: bool,
    /// Per state: the node whose own address the members are (nodes, host-network pods).
    host: [Option<usize>; 2],
}

/// Every connection `old` and `new` decide differently.
pub fn diff(old: &Engine, new: &Engine) -> Diff {
    let (actors, groups, lists) = actors(old, new);
    let families: Vec<Family> = Family::ALL
        .into_iter()
        .filter(|&f| {
            actors.iter().any(|a| {
                !matches!(a, Actor::Outside(_))
                    && (a.endpoint(old, false, f).is_some() || a.endpoint(new, true, f).is_some())
            })
        })
        .collect();
    // Outside regions of a family no pod or node holds meet nothing.
    let (actors, groups) = without_outside_of(actors, groups, &families);
    let affected = affected(old, new, &actors);
    let touched = touched(&groups, affected.as_deref());
    let changed = compare_all((old, new), (&actors, &groups), &families, &touched);
    let services = services::diff_services((old, new), (&actors, &groups), affected.as_deref());
    let mut cells = Vec::with_capacity(changed.len());
    let mut out = Vec::with_capacity(changed.iter().map(|(_, c)| c.len()).sum());
    for (cell, changes) in changed {
        let at = cells.len();
        cells.push(cell);
        out.extend(changes.into_iter().map(|mut g| {
            g.cell = at;
            g
        }));
    }
    Diff {
        actors,
        cells,
        groups: out,
        families,
        pods_added: lists.0,
        pods_removed: lists.1,
        nodes_added: lists.2,
        nodes_removed: lists.3,
        services,
    }
}

/// `actors` and `groups` less the outside regions of families not in `families`.
fn without_outside_of(
    actors: Vec<Actor>,
    groups: Vec<Group>,
    families: &[Family],
) -> (Vec<Actor>, Vec<Group>) {
    let keep: Vec<bool> = actors
        .iter()
        .map(|a| match a {
            Actor::Outside(r) => families.contains(&Family::of(r.sample)),
            _ => true,
        })
        .collect();
    let mut renumber = Vec::with_capacity(actors.len());
    let mut next = 0;
    for &k in &keep {
        renumber.push(next);
        next += usize::from(k);
    }
    let groups = groups
        .into_iter()
        .filter(|g| g.members.iter().all(|&m| keep[m]))
        .map(|g| Group {
            members: g.members.iter().map(|&m| renumber[m]).collect(),
            ..g
        })
        .collect();
    let actors = actors
        .into_iter()
        .zip(keep)
        .filter_map(|(a, k)| k.then_some(a))
        .collect();
    (actors, groups)
}

/// Pods, nodes and pods added/removed, nodes added/removed.
type Lists = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);

/// The actors of both states and their groups.
fn actors(old: &Engine, new: &Engine) -> (Vec<Actor>, Vec<Group>, Lists) {
    let (mo, mn) = (
        Analysis::new(old).matrix(&[]),
        Analysis::new(new).matrix(&[]),
    );
    let keyed = |e: &Engine, m: &crate::matrix::Matrix| -> BTreeMap<String, (PodId, usize)> {
        m.pods
            .iter()
            .zip(&m.class_of)
            .map(|(&p, &c)| (e.cluster().pods[p].key(), (p, c)))
            .collect()
    };
    let (ko, kn) = (keyed(old, &mo), keyed(new, &mn));
    let keys: BTreeSet<&String> = ko.keys().chain(kn.keys()).collect();
    let mut actors = Vec::new();
    let mut lists: Lists = Default::default();
    // Pods: grouped by (old class, new class, families in each state).
    type PodKey = (Option<usize>, Option<usize>, Vec<bool>);
    let mut index: HashMap<PodKey, usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    for key in keys {
        let (o, n) = (ko.get(key), kn.get(key));
        match (o, n) {
            (None, Some(_)) => lists.0.push(key.clone()),
            (Some(_), None) => lists.1.push(key.clone()),
            _ => {}
        }
        let actor = Actor::Pod {
            key: key.clone(),
            old: o.map(|x| x.0),
            new: n.map(|x| x.0),
        };
        let fams: Vec<bool> = Family::ALL
            .iter()
            .flat_map(|&f| {
                [
                    actor.endpoint(old, false, f).is_some(),
                    actor.endpoint(new, true, f).is_some(),
                ]
            })
            .collect();
        let at = actors.len();
        let next = groups.len();
        let g = *index
            .entry((o.map(|x| x.1), n.map(|x| x.1), fams))
            .or_insert(next);
        if g == next {
            let kind = |e: &Engine, p: Option<&(PodId, usize)>| {
                p.and_then(|&(p, _)| e.endpoint_for_pod(p, None))
                    .map(|ep| ep.kind)
            };
            let (eo, en) = (kind(old, o), kind(new, n));
            let host = |k: Option<EndpointKind>| match k {
                Some(EndpointKind::Host(node)) => node,
                _ => None,
            };
            groups.push(Group {
                members: Vec::new(),
                subject: matches!(eo, Some(EndpointKind::Pod(_)))
                    || matches!(en, Some(EndpointKind::Pod(_))),
                host: [host(eo), host(en)],
            });
        }
        groups[g].members.push(at);
        actors.push(actor);
    }
    // Nodes: one group each (the node-local exemption tells every node apart).
    let names = |e: &Engine| -> BTreeMap<String, usize> {
        e.cluster()
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.addresses.is_empty())
            .map(|(i, n)| (n.name.clone(), i))
            .collect()
    };
    let (no, nn) = (names(old), names(new));
    let nodes: BTreeSet<&String> = no.keys().chain(nn.keys()).collect();
    for name in nodes {
        let (o, n) = (no.get(name).copied(), nn.get(name).copied());
        match (o, n) {
            (None, Some(_)) => lists.2.push(name.clone()),
            (Some(_), None) => lists.3.push(name.clone()),
            _ => {}
        }
        groups.push(Group {
            members: vec![actors.len()],
            subject: false,
            host: [o, n],
        });
        actors.push(Actor::Node {
            name: name.clone(),
            old: o,
            new: n,
        });
    }
    // The outside: one group per region.
    for r in outside::regions(old, new) {
        groups.push(Group {
            members: vec![actors.len()],
            subject: false,
            host: [None, None],
        });
        actors.push(Actor::Outside(r));
    }
    (actors, groups, lists)
}

/// A cell with the representative (source, destination) actors that decide it.
type Plan = (Cell, (usize, usize));

/// Per actor, whether its side verdicts may differ between the states, when only policies
/// differ: the pods that a differing policy (added, removed or changed in anything but where
/// it was read) selects in either state. `None` when anything else differs (Services and
/// EndpointSlices included): then every actor may.
fn affected(old: &Engine, new: &Engine, actors: &[Actor]) -> Option<Vec<bool>> {
    let (a, b) = (&old.cluster(), &new.cluster());
    let same = old.options() == new.options()
        && same_but_origin(&a.pods, &b.pods, |p| p.origin = Default::default())
        && same_but_origin(&a.namespaces, &b.namespaces, |n| n.origin = None)
        && same_but_origin(&a.nodes, &b.nodes, |n| n.origin = Default::default())
        && same_but_origin(&a.services, &b.services, |s| s.origin = Default::default())
        && same_but_origin(&a.endpoint_slices, &b.endpoint_slices, |s| {
            s.origin = Default::default()
        });
    if !same {
        return None;
    }
    let selected = |e: &Engine, other: &Engine| {
        let mut out = BitSet::new(e.cluster().pods.len());
        let nps = |c: &palisade_model::Cluster| -> HashMap<(String, String), palisade_model::NetworkPolicy> {
            c.network_policies
                .iter()
                .map(|p| {
                    let mut p = p.clone();
                    p.origin = Default::default();
                    ((p.namespace.clone(), p.name.clone()), p)
                })
                .collect()
        };
        let theirs = nps(other.cluster());
        for (i, p) in e.cluster().network_policies.iter().enumerate() {
            let mut mine = p.clone();
            mine.origin = Default::default();
            if theirs.get(&(p.namespace.clone(), p.name.clone())) != Some(&mine) {
                out.union(&e.network_policies()[i].subject);
            }
        }
        let admins = |c: &palisade_model::Cluster| -> HashMap<palisade_model::PolicyRef, palisade_model::AdminPolicy> {
            c.admin_policies
                .iter()
                .map(|p| {
                    let mut p = p.clone();
                    p.origin = Default::default();
                    (p.reference(), p)
                })
                .collect()
        };
        let theirs = admins(other.cluster());
        for (i, p) in e.cluster().admin_policies.iter().enumerate() {
            let mut mine = p.clone();
            mine.origin = Default::default();
            if theirs.get(&p.reference()) != Some(&mine) {
                out.union(&e.admin_policies()[i].subject);
            }
        }
        out
    };
    let (so, sn) = (selected(old, new), selected(new, old));
    Some(
        actors
            .iter()
            .map(|a| match a {
                Actor::Pod { old: o, new: n, .. } => {
                    o.is_some_and(|p| so.contains(p)) || n.is_some_and(|p| sn.contains(p))
                }
                Actor::Node { .. } | Actor::Outside(_) => false,
            })
            .collect(),
    )
}

/// Whether `a` and `b` hold the same objects once `strip` forgets where each was read.
fn same_but_origin<T: Clone + PartialEq>(a: &[T], b: &[T], strip: impl Fn(&mut T)) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            let (mut x, mut y) = (x.clone(), y.clone());
            strip(&mut x);
            strip(&mut y);
            x == y
        })
}

/// Per group, whether a pair with it at one end is compared: when `affected` is given, only
/// groups holding an affected actor.
fn touched(groups: &[Group], affected: Option<&[bool]>) -> Vec<bool> {
    groups
        .iter()
        .map(|g| affected.is_none_or(|a| g.members.iter().any(|&m| a[m])))
        .collect()
}

/// The cells from source group `gi`: to every group, where one side holds a policy subject
/// and one is touched, the destination group split where a node-local exemption applies to
/// some of its members only.
fn cells_from(
    (old, new): (&Engine, &Engine),
    (actors, groups): (&[Actor], &[Group]),
    touched: &[bool],
    gi: usize,
) -> Vec<Plan> {
    let node_local = [
        old.options().allow_node_local,
        new.options().allow_node_local,
    ];
    let pod_node = |e: &Engine, p: Option<PodId>| p.and_then(|p| e.pod_node(p));
    let src = &groups[gi];
    let mut out = Vec::new();
    for (gj, dst) in groups.iter().enumerate() {
        if !src.subject && !dst.subject || !touched[gi] && !touched[gj] {
            continue;
        }
        // Destination members by whether they sit on the source's node, in each state.
        let mut parts: BTreeMap<[bool; 2], Vec<usize>> = BTreeMap::new();
        for &m in &dst.members {
            let on = |state: usize, e: &Engine| {
                let Actor::Pod { old: o, new: n, .. } = &actors[m] else {
                    return false;
                };
                let p = if state == 0 { *o } else { *n };
                node_local[state] && src.host[state].is_some() && pod_node(e, p) == src.host[state]
            };
            parts.entry([on(0, old), on(1, new)]).or_default().push(m);
        }
        for part in parts.into_values() {
            out.extend(plan(old, new, actors, &src.members, part, gi == gj));
        }
    }
    out
}

/// The cell from `from` to `to` and its representatives; `None` when it holds no pair.
fn plan(
    old: &Engine,
    new: &Engine,
    actors: &[Actor],
    from: &[usize],
    to: Vec<usize>,
    same_group: bool,
) -> Option<Plan> {
    let overlap = if same_group {
        to.iter().filter(|m| from.contains(m)).count()
    } else {
        0
    };
    let pairs = from.len() * to.len() - overlap;
    if pairs > 0 {
        let (a, b) = from
            .iter()
            .flat_map(|&a| to.iter().map(move |&b| (a, b)))
            .find(|(a, b)| a != b)?;
        return Some((
            Cell {
                from: from.to_vec(),
                to,
                reflexive: false,
                pairs,
            },
            (a, b),
        ));
    }
    // One pod alone: only a workload's representative meets itself (its replicas).
    let a = *from.first()?;
    let workload = |e: &Engine, p: Option<PodId>| {
        p.is_some_and(|p| palisade_model::workload_of(&e.cluster().pods[p]).is_some())
    };
    match &actors[a] {
        Actor::Pod { old: o, new: n, .. } if workload(old, *o) || workload(new, *n) => Some((
            Cell {
                from: vec![a],
                to: vec![a],
                reflexive: true,
                pairs: 1,
            },
            (a, a),
        )),
        _ => None,
    }
}

/// A cell whose connections changed, with its changes.
type Changed = (Cell, Vec<ChangeGroup>);

/// The cells whose connections changed, with their changes, in source group order: each
/// source group's cells are planned and compared on one of the available cores, and only
/// the changed ones are kept.
fn compare_all(
    (old, new): (&Engine, &Engine),
    (actors, groups): (&[Actor], &[Group]),
    families: &[Family],
    touched: &[bool],
) -> Vec<Changed> {
    use rayon::prelude::*;
    let cuts = [
        Analysis::new(old).policy_port_cuts(),
        Analysis::new(new).policy_port_cuts(),
    ];
    let cuts = &cuts;
    let by_group: Vec<Vec<Changed>> = (0..groups.len())
        .into_par_iter()
        .map_init(Verdicts::default, |verdicts, gi| {
            cells_from((old, new), (actors, groups), touched, gi)
                .into_iter()
                .filter_map(|(cell, reps)| {
                    let changes = compare((old, new), cuts, (actors, families), reps, verdicts);
                    (!changes.is_empty()).then_some((cell, changes))
                })
                .collect()
        })
        .collect();
    by_group.into_iter().flatten().collect()
}

/// Verdicts shared by the change groups that have equal ones.
#[derive(Default)]
struct Verdicts(HashMap<Verdict, Arc<Verdict>>);

impl Verdicts {
    fn share(&mut self, v: Option<&Verdict>) -> Option<Arc<Verdict>> {
        let v = v?;
        if let Some(shared) = self.0.get(v) {
            return Some(shared.clone());
        }
        let shared = Arc::new(v.clone());
        self.0.insert(v.clone(), shared.clone());
        Some(shared)
    }
}

/// The changes from actor `a` to actor `b` over every family, protocol and port (the cell
/// index is filled in by the caller).
fn compare(
    (old, new): (&Engine, &Engine),
    cuts: &[BTreeSet<u32>; 2],
    (actors, families): (&[Actor], &[Family]),
    (a, b): (usize, usize),
    verdicts: &mut Verdicts,
) -> Vec<ChangeGroup> {
    let mut out = Vec::new();
    for &family in families {
        let ends = |e: &Engine, new: bool| {
            Some((
                actors[a].endpoint(e, new, family)?,
                actors[b].endpoint(e, new, family)?,
            ))
        };
        let (eo, en) = (ends(old, false), ends(new, true));
        if eo.is_none() && en.is_none() {
            continue;
        }
        for protocol in Protocol::ALL {
            let segments = |e: &Engine, cuts, ends: Option<(Endpoint, Endpoint)>| {
                ends.map(|(x, y)| {
                    Analysis::new(e).port_segments_cut(x, y, protocol, every_port(), cuts)
                })
                .unwrap_or_default()
            };
            let (so, sn) = (segments(old, &cuts[0], eo), segments(new, &cuts[1], en));
            align(&so, &sn, |ports, before, after| {
                let allowed = |v: Option<&Verdict>| v.is_some_and(|v| v.allowed);
                let change = match (allowed(before), allowed(after)) {
                    (false, true) => ChangeKind::Gained,
                    (true, false) => ChangeKind::Lost,
                    _ => return,
                };
                if let Some(last) = out.last_mut()
                    && extends(last, change, family, protocol, &ports, before, after)
                {
                    last.ports.end = ports.end;
                    return;
                }
                out.push(ChangeGroup {
                    change,
                    cell: 0,
                    family,
                    protocol,
                    ports,
                    before: verdicts.share(before),
                    after: verdicts.share(after),
                });
            });
        }
    }
    out
}

/// Whether `ports` continue `last` with the same change and verdicts.
fn extends(
    last: &ChangeGroup,
    change: ChangeKind,
    family: Family,
    protocol: Protocol,
    ports: &PortRange,
    before: Option<&Verdict>,
    after: Option<&Verdict>,
) -> bool {
    last.change == change
        && last.family == family
        && last.protocol == protocol
        && u32::from(last.ports.end.get()) + 1 == u32::from(ports.start.get())
        && last.before.as_deref() == before
        && last.after.as_deref() == after
}

/// Walks the runs of ports on which both lists of segments (each empty, or covering every
/// port) are constant, with the verdict of each (`None` for an empty list).
fn align(
    old: &[PortSegment],
    new: &[PortSegment],
    mut each: impl FnMut(PortRange, Option<&Verdict>, Option<&Verdict>),
) {
    let starts: BTreeSet<u16> = old
        .iter()
        .chain(new)
        .map(|s| s.range.start.get())
        .chain([1])
        .collect();
    let starts: Vec<u16> = starts.into_iter().collect();
    fn at(segs: &[PortSegment], port: u16) -> Option<&Verdict> {
        segs.iter()
            .find(|s| s.range.start.get() <= port && port <= s.range.end.get())
            .map(|s| &s.verdict)
    }
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(65535, |n| n - 1);
        let (Some(start_port), Some(end_port)) = (
            palisade_model::Port::new(i64::from(start)),
            palisade_model::Port::new(i64::from(end)),
        ) else {
            continue;
        };
        each(
            PortRange {
                start: start_port,
                end: end_port,
            },
            at(old, start),
            at(new, start),
        );
    }
}

/// Every port of a protocol.
fn every_port() -> PortRange {
    let port = |n| palisade_model::Port::new(n).unwrap_or_else(|| unreachable!("{n} is a port"));
    PortRange {
        start: port(1),
        end: port(65535),
    }
}
