//! Service reachability in a diff: for each source and Service port, how many of the port's
//! endpoints the source may reach ([`Reach`]) in each state, and a change where that differs.
//!
//! A Service port is named by its Service (`namespace/name`), its label and its protocol in
//! both states; a Service or port present in one state only reaches nothing in the other.
//! The endpoints are the engine's ([`Engine::service_endpoints`]), so a changed selector,
//! `targetPort`, EndpointSlice or pod is seen through them. Headless and ExternalName
//! Services have no Service address to connect through and are left out: clients of a
//! headless Service reach its pods by their own addresses, which the pod diff covers.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use palisade_engine::{EndpointKind, Engine, Reach};
use palisade_model::{Protocol, Service, ServiceType};

use super::{Actor, Family, Group};

/// What one source reaches through one Service port in one state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reached {
    /// Of all endpoints, some, or none.
    pub reach: Reach,
    /// The endpoints it may reach (`namespace/pod:port`, or `address:port`).
    pub allowed: Vec<String>,
    /// How many endpoints the port has.
    pub total: usize,
}

impl Reached {
    /// `all (3)`, `some (1 of 3)`, `none (0 of 3)`.
    pub fn summary(&self) -> String {
        match self.reach {
            Reach::All => format!("all ({})", self.total),
            _ => format!(
                "{} ({} of {})",
                self.reach.as_str(),
                self.allowed.len(),
                self.total
            ),
        }
    }
}

/// Sources whose reach through one Service port changed alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceChange {
    /// The Service, `namespace/name`.
    pub service: String,
    /// The port's label (its name, or its number when unnamed).
    pub port: String,
    /// The port's number on the Service address (in the new state when it has the port).
    pub number: u16,
    /// The port's protocol.
    pub protocol: Protocol,
    /// The address family.
    pub family: Family,
    /// Source actors (indexes into [`super::Diff::actors`]).
    pub from: Vec<usize>,
    /// Before; `None` when the Service, the port or the source is not there.
    pub before: Option<Reached>,
    /// After.
    pub after: Option<Reached>,
}

impl ServiceChange {
    /// `gained` when the source reaches more of the endpoints after (all rather than
    /// some, some rather than none, else more of them), `lost` when fewer, `moved` when
    /// as many but others.
    pub fn kind(&self) -> &'static str {
        let rank = |r: &Option<Reached>| {
            let reach = r.as_ref().map_or(0, |r| match r.reach {
                Reach::None => 0,
                Reach::Some => 1,
                Reach::All => 2,
            });
            (reach, r.as_ref().map_or(0, |r| r.allowed.len()))
        };
        match rank(&self.before).cmp(&rank(&self.after)) {
            std::cmp::Ordering::Less => "gained",
            std::cmp::Ordering::Greater => "lost",
            std::cmp::Ordering::Equal => "moved",
        }
    }
}

/// Service changes, and Services that came or went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceDiff {
    /// The changes, by Service, port, family, then sources.
    pub changes: Vec<ServiceChange>,
    /// Services only in the new state (`namespace/name`).
    pub added: Vec<String>,
    /// Services only in the old state.
    pub removed: Vec<String>,
}

impl ServiceDiff {
    /// Whether no reach changed and no Service came or went.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }
}

impl ServiceDiff {
    /// The changes on the Service ports `filter` keeps (by protocol and Service port
    /// number); Services added and removed stay.
    pub(super) fn narrowed(&self, filter: &super::Filter) -> ServiceDiff {
        let keep = |c: &ServiceChange| {
            (filter.protocols.is_empty() || filter.protocols.contains(&c.protocol))
                && (filter.ports.is_empty()
                    || filter
                        .ports
                        .iter()
                        .any(|r| r.start.get() <= c.number && c.number <= r.end.get()))
        };
        ServiceDiff {
            changes: self.changes.iter().filter(|c| keep(c)).cloned().collect(),
            added: self.added.clone(),
            removed: self.removed.clone(),
        }
    }
}

/// Whether `svc` has an address a client connects through.
fn addressed(svc: &Service) -> bool {
    svc.service_type != ServiceType::ExternalName && !svc.headless
}

/// Sources (actor indexes) with the same reach before and after.
type Row = (Option<Reached>, Option<Reached>, Vec<usize>);

/// A Service port across both states: Service key, port label, protocol.
type PortKey = (String, String, Protocol);

/// The Service changes between `old` and `new`, for the `actors` of the pod diff (one
/// computation per group whose members no policy tells apart). `affected`, when only
/// policies differ, says which actors' side verdicts may differ: a source whose verdicts
/// cannot differ, towards endpoints whose verdicts cannot either, is skipped.
pub(super) fn diff_services(
    (old, new): (&Engine, &Engine),
    (actors, groups): (&[Actor], &[Group]),
    affected: Option<&[bool]>,
) -> Option<ServiceDiff> {
    let (so, sn) = (&old.cluster().services, &new.cluster().services);
    if so.is_empty() && sn.is_empty() {
        return None;
    }
    let keys = |v: &[Service]| -> BTreeSet<String> { v.iter().map(Service::key).collect() };
    let (ko, kn) = (keys(so), keys(sn));
    let mut out = ServiceDiff {
        added: kn.difference(&ko).cloned().collect(),
        removed: ko.difference(&kn).cloned().collect(),
        changes: Vec::new(),
    };
    fn ports(e: &Engine) -> BTreeMap<PortKey, (&Service, usize)> {
        e.cluster()
            .services
            .iter()
            .filter(|s| addressed(s))
            .flat_map(|s| {
                s.ports
                    .iter()
                    .enumerate()
                    .map(move |(i, p)| ((s.key(), p.label(), p.protocol), (s, i)))
            })
            .collect()
    }
    let (po, pn) = (ports(old), ports(new));
    let all: BTreeSet<&PortKey> = po.keys().chain(pn.keys()).collect();
    let by_key: HashMap<&str, usize> = actors
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match a {
            Actor::Pod { key, .. } => Some((key.as_str(), i)),
            _ => None,
        })
        .collect();
    for key in all {
        let (o, n) = (po.get(key).copied(), pn.get(key).copied());
        let number = n.or(o).map_or(0, |(s, i)| s.ports[i].port.get());
        for family in Family::ALL {
            let v6 = family == Family::V6;
            let ends = |e: &Engine, at: Option<(&Service, usize)>| {
                at.filter(|(s, _)| s.families_v6.contains(&v6))
                    .and_then(|(s, i)| e.service_endpoints(s, v6).into_iter().nth(i))
            };
            let (eo, en) = (ends(old, o), ends(new, n));
            if eo.is_none() && en.is_none() {
                continue;
            }
            let touched = |e: &Engine, p: &Option<palisade_engine::PortEndpoints>| {
                p.iter()
                    .flat_map(|p| &p.endpoints)
                    .any(|x| match x.at.kind {
                        EndpointKind::Pod(id) => by_key
                            .get(e.cluster().pods[id].key().as_str())
                            .is_some_and(|&a| affected.is_none_or(|f| f[a])),
                        _ => affected.is_none(),
                    })
            };
            let endpoints_touched = affected.is_none() || touched(old, &eo) || touched(new, &en);
            let mut rows: Vec<Row> = Vec::new();
            for g in groups {
                let reps: &[usize] = if g.host == [None, None] {
                    &g.members[..g.members.len().min(1)]
                } else {
                    &g.members
                };
                for &r in reps {
                    if !endpoints_touched && affected.is_some_and(|f| !f[r]) {
                        continue;
                    }
                    let reached = |e: &Engine, is_new: bool, p: &Option<_>| {
                        reached(e, actors[r].endpoint(e, is_new, family)?, p.as_ref()?)
                    };
                    let (before, after) = (reached(old, false, &eo), reached(new, true, &en));
                    if !changed(before.as_ref(), after.as_ref()) {
                        continue;
                    }
                    let members = if reps.len() == 1 && g.members.len() > 1 {
                        g.members.clone()
                    } else {
                        vec![r]
                    };
                    match rows.iter_mut().find(|r| r.0 == before && r.1 == after) {
                        Some(row) => row.2.extend(members),
                        None => rows.push((before, after, members)),
                    }
                }
            }
            for (before, after, mut from) in rows {
                from.sort_unstable();
                out.changes.push(ServiceChange {
                    service: key.0.clone(),
                    port: key.1.clone(),
                    number,
                    protocol: key.2,
                    family,
                    from,
                    before,
                    after,
                });
            }
        }
    }
    Some(out)
}

/// What a client at `src` reaches through one Service port.
fn reached(
    e: &Engine,
    src: palisade_engine::Endpoint,
    port: &palisade_engine::PortEndpoints,
) -> Option<Reached> {
    let verdicts = e.evaluate_service_port(src, port);
    let allowed: Vec<String> = verdicts
        .iter()
        .filter(|v| v.verdict.allowed)
        .map(|v| {
            let at = match v.endpoint.at.kind {
                EndpointKind::Pod(id) => e.cluster().pods[id].key(),
                _ => v.endpoint.at.ip.to_string(),
            };
            format!("{at}:{}", v.endpoint.port)
        })
        .collect();
    Some(Reached {
        reach: Reach::of(allowed.len(), verdicts.len()),
        allowed,
        total: verdicts.len(),
    })
}

/// Whether a source's reach differs: in kind (a Service or port absent reaches nothing), or
/// in which endpoints it reaches (the Service now sends it to other pods or ports).
fn changed(before: Option<&Reached>, after: Option<&Reached>) -> bool {
    let reach = |r: Option<&Reached>| r.map_or(Reach::None, |r| r.reach);
    let allowed_before = before.map_or(&[][..], |r| r.allowed.as_slice());
    let allowed_after = after.map_or(&[][..], |r| r.allowed.as_slice());
    reach(before) != reach(after) || allowed_before != allowed_after
}
