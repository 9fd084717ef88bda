//! Side programs brought up to date after changes that only moved pods in or out of some
//! rules' peers ([`Touched::peers`]): the rules stay, their peer addresses are recomputed.
//! A data plane that compiled the old programs then changes only those addresses.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use palisade_model::Direction;

use crate::address_cache::AddressCache;
use crate::concrete::{ConcreteRule, PeerAddrs, ProgramCache, Rules, SideClasses, SideProgram};
use crate::fast_map::FastMap;
use crate::state::{AdminPeerC, Engine, NpPeer, PodId, PolicySlot};
use crate::update::{PeerRule, Touched};
use crate::verdict::PolicyInfo;

/// A program whose rules changed in more than their peer addresses: a rule's peers became
/// empty (the rule leaves the program), or its peers depend on the subject. The program
/// must be computed anew ([`Engine::side_classes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reshaped;

impl std::fmt::Display for Reshaped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a rule changed in more than its peer addresses")
    }
}

impl std::error::Error for Reshaped {}

/// The tiers of one program whose rules' peers moved, brought up to date
/// ([`NewPeers::moved`]).
#[derive(Debug, Default)]
pub struct Moved {
    /// Per tier (admin, network, baseline), when a rule of it moved.
    tiers: [Option<TierNow>; 3],
}

/// One tier brought up to date: the tier before and now, and the places of its rules
/// whose peers moved.
#[derive(Debug, Clone)]
struct TierNow {
    was: Rules,
    now: Rules,
    moved: Arc<[usize]>,
}

impl Moved {
    /// Whether no rule of the program moved.
    pub fn is_empty(&self) -> bool {
        self.tiers.iter().all(Option::is_none)
    }

    /// Gives `program` (the program the moved rules were found in) its tiers as they are
    /// now; returns each moved rule's peers before with the rule as it is now.
    pub fn apply(&self, program: &mut SideProgram) -> Vec<(&PeerAddrs, &ConcreteRule)> {
        let tiers = [
            &mut program.admin,
            &mut program.network,
            &mut program.baseline,
        ];
        for (tier, now) in tiers.into_iter().zip(&self.tiers) {
            if let Some(now) = now {
                debug_assert!(Arc::ptr_eq(tier, &now.was), "another program's tiers");
                *tier = Arc::clone(&now.now);
            }
        }
        (self.tiers.iter().flatten())
            .flat_map(|t| t.moved.iter().map(move |&i| (&t.was[i].peers, &t.now[i])))
            .collect()
    }
}

/// The peers of [`Touched::peers`] as they are now, for programs computed before.
pub struct NewPeers<'e> {
    engine: &'e Engine,
    /// The moved rules by their policy's name, with the policy's place in the engine.
    by_name: HashMap<&'e str, Vec<(&'e PeerRule, PolicySlot)>>,
    cache: ProgramCache,
    /// What [`NewPeers::program`] found of each rule it met, by the identity of the
    /// rule's policy record (held here, so that its address is not reused), direction
    /// and index: the programs of many classes hold the same rules.
    met: RefCell<Met>,
}

/// See [`NewPeers::met`].
#[derive(Default)]
struct Met {
    /// Per policy record: whether a moved rule has its name.
    named: FastMap<usize, (Arc<PolicyInfo>, bool)>,
    /// Per rule of such a policy: its peers now, when it moved.
    peers: FastMap<RuleId, (Arc<PolicyInfo>, Option<PeerAddrs>)>,
    /// Per tier (by identity, held here; the programs of one compile share equal tiers):
    /// the tier brought up to date, when a rule of it moved.
    tiers: FastMap<usize, (Rules, Option<TierNow>)>,
}

/// A rule of a policy record: the record's address, the direction and the index.
type RuleId = (usize, Direction, u32);

impl Engine {
    /// The peers the changes that touched `touched` moved pods in or out of, for
    /// [`NewPeers::program`], with the addresses of pod sets kept in `cache` (and those it
    /// has taken from it).
    pub fn new_peers<'e>(
        &'e self,
        touched: &'e Touched,
        cache: &Arc<AddressCache>,
    ) -> NewPeers<'e> {
        let mut by_name: HashMap<&str, Vec<(&PeerRule, PolicySlot)>> = HashMap::new();
        if !touched.peers.is_empty() {
            let slots = || {
                (self.nps.iter().enumerate())
                    .map(|(i, p)| (&p.info, PolicySlot::Network(i as u32)))
                    .chain(
                        (self.admins.iter().enumerate())
                            .map(|(i, p)| (&p.info, PolicySlot::Admin(i as u32))),
                    )
            };
            // The moved rules' policies by identity (the engine's own record of each, which
            // the rule holds: its address is not reused), then by name for any replaced since.
            let moved: HashSet<*const PolicyInfo> = touched
                .peers
                .iter()
                .map(|r| Arc::as_ptr(&r.policy))
                .collect();
            let by_identity: HashMap<*const PolicyInfo, PolicySlot> = slots()
                .filter(|(info, _)| moved.contains(&Arc::as_ptr(info)))
                .map(|(info, slot)| (Arc::as_ptr(info), slot))
                .collect();
            let mut by_reference = None;
            for rule in &touched.peers {
                let slot = match by_identity.get(&Arc::as_ptr(&rule.policy)) {
                    Some(&slot) => Some(slot),
                    None => by_reference
                        .get_or_insert_with(|| {
                            slots()
                                .map(|(info, slot)| (&info.reference, slot))
                                .collect::<HashMap<_, _>>()
                        })
                        .get(&rule.policy.reference)
                        .copied(),
                };
                // A policy removed since has no subjects left whose programs name it.
                if let Some(slot) = slot {
                    by_name
                        .entry(rule.policy.reference.name.as_str())
                        .or_default()
                        .push((rule, slot));
                }
            }
        }
        NewPeers {
            engine: self,
            by_name,
            cache: ProgramCache::sharing(self, cache).renewed(&touched.renewed),
            met: RefCell::default(),
        }
    }

    /// Whether rule `index` of `slot` in `direction` covers some address whether or not
    /// `pod` is among its peers (so `pod` joining or leaving cannot make it appear in or
    /// vanish from its subjects' programs). False when unsure. `owners` remembers which
    /// pods were found to own an address, for the next call about the same change (the
    /// first other member of many sets is one of a few pods).
    pub(crate) fn peers_hold_more_than(
        &self,
        slot: PolicySlot,
        direction: Direction,
        index: usize,
        pod: PodId,
        owners: &mut Vec<(PodId, bool)>,
    ) -> bool {
        let mut owns_some = |q: PodId| {
            if let Some(&(_, owns)) = owners.iter().find(|(p, _)| *p == q) {
                return owns;
            }
            let owns = (self.cluster.pods[q].ips.iter()).any(|ip| self.owns(q, ip));
            if owners.len() < 16 {
                owners.push((q, owns));
            }
            owns
        };
        let mut another =
            |set: &crate::bitset::BitSet| set.pods().any(|q| q != pod && owns_some(q));
        match slot {
            PolicySlot::Network(i) => {
                let rule = &self.nps[i as usize].rules(direction)[index];
                rule.peers.iter().flatten().any(|p| match p {
                    NpPeer::IpBlock(_) => true,
                    NpPeer::Pods(s) => another(s),
                })
            }
            PolicySlot::Admin(i) => {
                let rule = &self.admins[i as usize].rules(direction)[index];
                let fixed = rule.peers.iter().all(|p| {
                    matches!(
                        p,
                        AdminPeerC::Pods(_) | AdminPeerC::Networks(_) | AdminPeerC::Unsupported
                    )
                });
                fixed
                    && rule.peers.iter().any(|p| match p {
                        AdminPeerC::Networks(nets) => !nets.is_empty(),
                        AdminPeerC::Pods(s) => another(s),
                        _ => false,
                    })
            }
        }
    }
}

impl NewPeers<'_> {
    /// [`Engine::side_classes`] of the engine these peers are of, sharing their address
    /// sets: a rule's peers in a fresh program and in a program brought up to date by
    /// [`NewPeers::program`] are one `Arc`, computed once.
    pub fn side_classes(&self, pods: &[PodId], dir: Direction) -> SideClasses {
        self.engine.side_classes_with(pods, dir, &self.cache)
    }

    /// `program`, the class program of `pod` in `dir` up to its admin and baseline tiers
    /// ([`Touched::admin_tiers_only`]), with those tiers as they are now.
    pub fn with_admin_tiers(
        &self,
        program: &SideProgram,
        pod: PodId,
        dir: Direction,
    ) -> SideProgram {
        self.engine.with_admin_tiers(program, pod, dir, &self.cache)
    }

    /// `program`, computed before the changes, with the moved rules' peers as they are
    /// now; `None` when it has none of them.
    pub fn program(&self, program: &SideProgram) -> Result<Option<SideProgram>, Reshaped> {
        let moved = self.moved(program)?;
        if moved.is_empty() {
            return Ok(None);
        }
        let mut now = program.clone();
        moved.apply(&mut now);
        Ok(Some(now))
    }

    /// The tiers of `program`, computed before the changes, that hold rules whose peers
    /// moved, as they are now: [`Moved::apply`] gives them to the program in place, which
    /// [`NewPeers::program`] does on a copy. A tier many programs share is brought up to
    /// date once.
    pub fn moved(&self, program: &SideProgram) -> Result<Moved, Reshaped> {
        let mut out = Moved::default();
        if self.by_name.is_empty() {
            return Ok(out);
        }
        let tiers = [&program.admin, &program.network, &program.baseline];
        for (tier, now) in tiers.into_iter().zip(&mut out.tiers) {
            *now = self.tier(tier)?;
        }
        Ok(out)
    }

    /// `tier` as it is now, when a rule of it moved.
    fn tier(&self, tier: &Rules) -> Result<Option<TierNow>, Reshaped> {
        if tier.is_empty() {
            return Ok(None);
        }
        let key = Arc::as_ptr(tier).cast::<ConcreteRule>() as usize;
        if let Some((_, now)) = self.met.borrow().tiers.get(&key) {
            return Ok(now.clone());
        }
        let mut moved: Vec<(usize, PeerAddrs)> = Vec::new();
        // Rules of one policy come together: it is looked up once per run of them.
        let mut last: Option<(*const PolicyInfo, bool)> = None;
        let mut met = self.met.borrow_mut();
        for (i, r) in tier.iter().enumerate() {
            let policy = &r.rule.policy;
            let named = match last {
                Some((p, named)) if p == Arc::as_ptr(policy) => named,
                _ => {
                    let (_, named) = *met
                        .named
                        .entry(Arc::as_ptr(policy) as usize)
                        .or_insert_with(|| {
                            let name = policy.reference.name.as_str();
                            (Arc::clone(policy), self.by_name.contains_key(name))
                        });
                    last = Some((Arc::as_ptr(policy), named));
                    named
                }
            };
            if !named {
                continue;
            }
            let key = (Arc::as_ptr(policy) as usize, r.rule.direction, r.rule.index);
            let now = match met.peers.get(&key) {
                Some((_, now)) => now.clone(),
                None => {
                    let now = self.peers(r)?;
                    met.peers.insert(key, (Arc::clone(policy), now.clone()));
                    now
                }
            };
            if let Some(peers) = now {
                moved.push((i, peers));
            }
        }
        let now = (!moved.is_empty()).then(|| {
            let mut rules = tier.to_vec();
            let places = moved.iter().map(|&(i, _)| i).collect();
            for (i, peers) in moved {
                rules[i].peers = peers;
            }
            TierNow {
                was: Arc::clone(tier),
                now: rules.into(),
                moved: places,
            }
        });
        met.tiers.insert(key, (Arc::clone(tier), now.clone()));
        Ok(now)
    }

    /// The peers of `r` now, when it is a moved rule.
    fn peers(&self, r: &ConcreteRule) -> Result<Option<PeerAddrs>, Reshaped> {
        let m = &r.rule;
        let Some(candidates) = self.by_name.get(m.policy.reference.name.as_str()) else {
            return Ok(None);
        };
        let found = candidates.iter().find(|(rule, _)| {
            rule.policy.reference == m.policy.reference
                && rule.direction == m.direction
                && rule.index == m.index
        });
        let Some(&(_, slot)) = found else {
            return Ok(None);
        };
        if m.fail_closed {
            return Ok(None); // a fail-closed rule matches every peer, whoever they are
        }
        let (e, dir, index) = (self.engine, m.direction, m.index as usize);
        let peers = match slot {
            PolicySlot::Network(i) => {
                let rule = &e.nps[i as usize].rules(dir)[index];
                e.np_peers(i, dir, index, rule, &self.cache)
            }
            PolicySlot::Admin(i) => {
                let rule = &e.admins[i as usize].rules(dir)[index];
                if rule
                    .peers
                    .iter()
                    .any(|p| matches!(p, AdminPeerC::Related { .. }))
                {
                    return Err(Reshaped);
                }
                e.admin_peers(i, dir, index, None, &self.cache)
            }
        };
        if peers.is_empty() {
            return Err(Reshaped);
        }
        Ok(Some(peers))
    }
}
