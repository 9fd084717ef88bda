//! Compiling after a change from what the previous compile built: the programs of the
//! pods the change did not touch ([`Touched`]) are kept, only the classes of the pods it
//! reshaped are asked of the engine, the kept programs whose rules' peers gained or lost
//! pods get those peers anew ([`palisade_engine::NewPeers`]), those whose admin and
//! baseline tiers alone changed (an admin policy edited: the classes stay) get those tiers
//! anew, and the chains of every class whose chains stay as they were are replayed
//! instead of built (for a class whose peers moved, with the new elements of its named
//! sets).
//!
//! The full compile stays the reference and the fallback: an incremental compile gives
//! the ruleset [`crate::compile_after`] gives for the same engine (property-tested), and
//! whenever it cannot be sure it will (a change that touched everything, another node, the first or last policy naming a port (the classes change), a program
//! outside `Touched` that changed anyway, two classes with one digest), it compiles in
//! full.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use std::collections::BTreeSet;
use std::net::IpAddr;

use palisade_model::Direction;

use palisade_engine::{
    AddressCache, ConcreteRule, Engine, FastMap, NewPeers, PodId, SideProgram, Touched,
};

use crate::both::both;
use crate::compile::{
    Built, Classes, CompileError, Logs, Naming, Pods, SIDES, StayNamed, assemble,
};
use crate::ir::Ruleset;
use crate::peer_cache::PeerCache;

/// A compiled ruleset and what the next compile reuses of it.
#[derive(Debug, Clone)]
pub struct Compiled {
    ruleset: Arc<Ruleset>,
    memo: Option<Memo>,
    /// What the previous compile kept, taken and brought up to date by this one: freed by
    /// [`Compiled::tidy`], off the way to the kernel, not by the compile.
    spent: Arc<Mutex<Option<Memo>>>,
}

/// How a ruleset was compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// From the previous compile, building only what changed.
    Incremental,
    /// In full, for this reason.
    Full(&'static str),
}

/// What a compile leaves for the next one.
#[derive(Debug, Clone)]
struct Memo {
    /// The node compiled for.
    node: Option<String>,
    /// How many pods the engine had (pod ids stay valid only while none comes or goes).
    cluster_pods: usize,
    /// Whether container ports told classes apart ([`Engine::classes_by_ports`]).
    classes_by_ports: bool,
    pods: Arc<Pods>,
    /// Egress, ingress: every class with its program and what building its chains did.
    sides: [Classes; 2],
    /// Per side, each class by its id.
    by_id: [HashMap<u64, usize>; 2],
    /// The addresses of the engine's pod sets, and the prefixes and names of the peers of
    /// this compile's programs, for the next.
    addresses: Arc<AddressCache>,
    peers: Arc<PeerCache>,
    /// The log ids of this compile's ruleset, indexed, for the next compile to take (one
    /// does; another seeds them from the ruleset again).
    logs: Arc<Mutex<Option<Logs>>>,
    /// How this compile named its sides: sides named apart that had to be named in order
    /// (relative peers that differ between the sides, say) are named in order from then
    /// on, until a full compile tries again.
    naming: Naming,
}

impl Compiled {
    /// Compiles the pods of `node` in full, keeping the log ids of `previous`.
    pub fn full(
        engine: &Engine,
        node: Option<&str>,
        previous: Option<&Ruleset>,
    ) -> Result<Compiled, CompileError> {
        let pods = Pods::of(engine, node)?;
        let addresses = Arc::new(AddressCache::default());
        let sides = Classes::all(engine, &pods.list, &addresses);
        let logs = Logs::seeded(previous.map_or(&[][..], |r| &r.logs));
        let peers = Arc::new(PeerCache::default());
        let (ruleset, built, logs, naming) = assemble(
            engine,
            &pods,
            &sides,
            None,
            logs,
            &peers,
            Naming::SidesApart,
        );
        let kept = Kept {
            addresses,
            peers,
            logs,
            naming,
        };
        let memo = Memo::new(node, engine, Arc::new(pods), sides, built, kept);
        Ok(Compiled {
            ruleset: Arc::new(ruleset),
            memo,
            spent: Arc::default(),
        })
    }

    /// The ruleset.
    pub fn ruleset(&self) -> &Arc<Ruleset> {
        &self.ruleset
    }

    /// Frees what the previous compile kept, and forgets what this compile kept for the
    /// next that only earlier compiles needed (the addresses and prefixes of peer sets no
    /// program names any more). Not needed for correctness; it bounds the memory of a long
    /// run of changes, and is best called off the way to the kernel (it frees those sets).
    pub fn tidy(&self) {
        drop(
            self.spent
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
        if let Some(memo) = &self.memo {
            memo.addresses.prune();
            memo.peers.prune();
        }
    }

    /// Compiles `engine`, which is this compile's engine with changes that touched
    /// `touched`, reusing what they left alone; the ruleset equals
    /// [`crate::compile_after`]`(engine, node, self.ruleset())`. What this compile kept
    /// for the next is taken (brought up to date in place, not copied): a second `next`
    /// from it compiles in full.
    pub fn next(
        &mut self,
        engine: &Engine,
        node: Option<&str>,
        touched: &Touched,
    ) -> Result<(Compiled, Path), CompileError> {
        match self.incremental(engine, node, touched) {
            Ok(compiled) => Ok((compiled, Path::Incremental)),
            Err(why) => {
                let compiled = Compiled::full(engine, node, Some(&self.ruleset))?;
                Ok((compiled, Path::Full(why)))
            }
        }
    }

    /// The incremental compile, or why it cannot be done.
    fn incremental(
        &mut self,
        engine: &Engine,
        node: Option<&str>,
        touched: &Touched,
    ) -> Result<Compiled, &'static str> {
        let mut memo = self.memo.take().ok_or("no reusable previous compile")?;
        if touched.all {
            return Err("the change touched every pod");
        }
        if !touched.ids.is_empty() {
            // The memo's pod list holds ids from before the change.
            return Err("pods were removed or renumbered");
        }
        if memo.node.as_deref() != node {
            return Err("another node");
        }
        if engine.cluster().pods.len() != memo.cluster_pods {
            return Err("pods came or went");
        }
        if engine.classes_by_ports() != memo.classes_by_ports {
            return Err("named ports came or went (every pod's class changes)");
        }
        let list = &memo.pods.list;
        // Pods whose admin and baseline tiers alone changed keep their classes (their
        // labels did not change): those classes' programs get the tiers as they are now.
        let retiered: Vec<usize> = (0..list.len())
            .filter(|&k| touched.admin_tiers_only(list[k]))
            .collect();
        let touched_k: Vec<usize> = (0..list.len())
            .filter(|&k| touched.reshaped(list[k]) && !touched.admin_tiers_only(list[k]))
            .collect();
        let ids: Vec<u64> = touched_k
            .iter()
            .map(|&k| engine.class_id(list[k]))
            .collect();
        let mut is_touched = vec![false; list.len()];
        for &k in &touched_k {
            is_touched[k] = true;
        }
        let peers = &*memo.peers;
        let (by_id, addresses) = (&memo.by_id, &memo.addresses);
        let [old_egress, old_ingress] = &mut memo.sides;
        let side = |d: usize, old: &mut Classes| {
            // A reshaped pod whose class a pod left alone still has takes that class's
            // program (brought up to date): pods of one class have one program. Only the
            // others are asked of the engine.
            let mut left_alone = HashSet::new();
            for (k, &class) in old.class_of.iter().enumerate() {
                if !is_touched[k] {
                    left_alone.insert(old.ids[class]);
                }
            }
            let asked: Vec<usize> = (0..touched_k.len())
                .filter(|&i| !left_alone.contains(&ids[i]))
                .collect();
            let pods: Vec<PodId> = asked.iter().map(|&i| list[touched_k[i]]).collect();
            // One cache for the fresh classes and the moved peers: a set both need is
            // computed once, and comparing the two programs finds one `Arc`.
            let new_peers = engine.new_peers(touched, addresses);
            let fresh = Classes::from(new_peers.side_classes(&pods, SIDES[d]));
            let retiered: HashMap<u64, PodId> = (retiered.iter())
                .map(|&k| (old.ids[old.class_of[k]], list[k]))
                .collect();
            let reshaped = Reshaped {
                k: &touched_k,
                ids: &ids,
                asked: &asked,
                retiered: &retiered,
                dir: SIDES[d],
            };
            merge(old, &by_id[d], &reshaped, &fresh, &new_peers, peers)
        };
        let (egress, ingress) = both(|| side(0, old_egress), || side(1, old_ingress));
        let sides = [egress?, ingress?];
        let exempt = [
            self.ruleset.egress_exempt.clone(),
            self.ruleset.ingress_exempt.clone(),
        ];
        let logs = memo
            .take_logs()
            .unwrap_or_else(|| Logs::seeded(&self.ruleset.logs));
        let (ruleset, built, logs, naming) = assemble(
            engine,
            &memo.pods,
            &sides,
            Some(exempt),
            logs,
            peers,
            memo.naming,
        );
        let kept = Kept {
            addresses: Arc::clone(&memo.addresses),
            peers: Arc::clone(&memo.peers),
            logs,
            naming,
        };
        let next = Memo::new(node, engine, Arc::clone(&memo.pods), sides, built, kept);
        Ok(Compiled {
            ruleset: Arc::new(ruleset),
            memo: next,
            spent: Arc::new(Mutex::new(Some(memo))),
        })
    }
}

impl Memo {
    /// The memo of a compile, or `None` when two classes of a side share an id (the
    /// classes could not be told apart by it).
    fn new(
        node: Option<&str>,
        engine: &Engine,
        pods: Arc<Pods>,
        mut sides: [Classes; 2],
        built: [Vec<Arc<crate::compile::Built>>; 2],
        kept: Kept,
    ) -> Option<Memo> {
        let mut by_id: [HashMap<u64, usize>; 2] = Default::default();
        for ((side, built), by_id) in sides.iter_mut().zip(built).zip(&mut by_id) {
            side.built = built.into_iter().map(Some).collect();
            *by_id = side
                .ids
                .iter()
                .enumerate()
                .map(|(c, &id)| (id, c))
                .collect();
            if by_id.len() != side.ids.len() {
                return None;
            }
        }
        Some(Memo {
            node: node.map(str::to_string),
            cluster_pods: engine.cluster().pods.len(),
            classes_by_ports: engine.classes_by_ports(),
            pods,
            sides,
            by_id,
            addresses: kept.addresses,
            peers: kept.peers,
            logs: Arc::new(Mutex::new(Some(kept.logs))),
            naming: kept.naming,
        })
    }

    /// The log ids of this compile, unless another compile took them.
    fn take_logs(&self) -> Option<Logs> {
        self.logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// What a compile keeps for the next besides its classes.
struct Kept {
    addresses: Arc<AddressCache>,
    peers: Arc<PeerCache>,
    logs: Logs,
    naming: Naming,
}

/// The pods a change reshaped: their places in the compiled pods, their class ids now,
/// and which of them (places in `k`) the fresh classes were computed for; and the classes
/// whose admin and baseline tiers alone changed, by id, each with one of its pods.
struct Reshaped<'a> {
    k: &'a [usize],
    ids: &'a [u64],
    asked: &'a [usize],
    retiered: &'a HashMap<u64, PodId>,
    /// The side.
    dir: Direction,
}

/// One side's classes after a change: the old classes of the pods it did not reshape
/// (their moved peers brought up to date, and their admin and baseline tiers where those
/// alone changed), the fresh classes (of the reshaped pods only)
/// for the reshaped ones, numbered in pod order as the full compile numbers them. A fresh
/// class whose program equals the old one of its id brought up to date keeps that
/// program and what building it did. An error when a pod left out of the fresh classes
/// has another program now than its old one brought up to date (the change reshaped more
/// than it said), or two fresh classes share an id.
fn merge(
    old: &mut Classes,
    old_by_id: &HashMap<u64, usize>,
    touched: &Reshaped<'_>,
    fresh: &Classes,
    new_peers: &NewPeers<'_>,
    nets: &PeerCache,
) -> Result<Classes, &'static str> {
    let mut id_of: Vec<u64> = old.class_of.iter().map(|&c| old.ids[c]).collect();
    let mut is_touched = vec![false; id_of.len()];
    for (&k, &id) in touched.k.iter().zip(touched.ids) {
        id_of[k] = id;
        is_touched[k] = true;
    }
    let mut fresh_by_id: HashMap<u64, usize> = HashMap::new();
    for (j, &i) in touched.asked.iter().enumerate() {
        let class = fresh.class_of[j];
        let id = fresh.ids[class];
        if id != touched.ids[i] || *fresh_by_id.entry(id).or_insert(class) != class {
            return Err("two classes share an id");
        }
    }
    let mut out = Classes::default();
    // Per class of `out`: whether its program is the old one (brought up to date).
    let mut kept: Vec<bool> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    let mut same = SameSets::default();
    let mut stay_named = StayNamed::default();
    for (k, &id) in id_of.iter().enumerate() {
        let class = match index.get(&id) {
            Some(&c) => c,
            None => {
                let now = old_by_id.get(&id).map(|&o| {
                    let (program, built) = up_to_date(old, o, new_peers, nets, &mut stay_named)?;
                    let Some(&pod) = touched.retiered.get(&id) else {
                        return Ok((program, built));
                    };
                    let now = new_peers.with_admin_tiers(&program, pod, touched.dir);
                    Ok(if same.programs(&now, &program) {
                        (program, built)
                    } else {
                        (Arc::new(now), None)
                    })
                });
                let (program, built, is_kept) = match (fresh_by_id.get(&id), now) {
                    (Some(&f), Some(Ok((p, b)))) if same.programs(&fresh.programs[f], &p) => {
                        (p, b, true)
                    }
                    (Some(&f), _) => (fresh.programs[f].clone(), None, false),
                    (None, Some(Ok((p, b)))) => (p, b, true),
                    (None, Some(Err(why))) => return Err(why),
                    (None, None) => return Err("an untouched pod's class is gone"),
                };
                out.programs.push(program);
                out.ids.push(id);
                out.built.push(built);
                kept.push(is_kept);
                index.insert(id, out.programs.len() - 1);
                out.programs.len() - 1
            }
        };
        // A pod not reshaped keeps its program: its class must be the old one.
        if !is_touched[k] && !kept[class] {
            return Err("a program outside the touched pods changed");
        }
        out.class_of.push(class);
    }
    Ok(out)
}

/// Old class `o`'s program with its moved peers as they are now (brought up to date in
/// place), and what building its chains does then, unless its chains change (it is built
/// again).
fn up_to_date(
    old: &mut Classes,
    o: usize,
    new_peers: &NewPeers<'_>,
    nets: &PeerCache,
    stay_named: &mut StayNamed,
) -> Result<(Arc<SideProgram>, Option<Arc<Built>>), &'static str> {
    let moved = match new_peers.moved(&old.programs[o]) {
        Ok(moved) if moved.is_empty() => {
            return Ok((old.programs[o].clone(), old.built[o].clone()));
        }
        Ok(moved) => moved,
        Err(_) => return Err("a rule entered or left a program outside the touched pods"),
    };
    let mut pairs = moved.apply(Arc::make_mut(&mut old.programs[o]));
    // A rule whose addresses came out the same holds no moved set.
    pairs.retain(|(was, is)| !Arc::ptr_eq(&was.addrs, &is.peers.addrs));
    let built = old.built[o]
        .as_ref()
        .and_then(|b| b.with_new_peers(&pairs, nets, stay_named))
        .map(Arc::new);
    Ok((old.programs[o].clone(), built))
}

/// Program equality with each pair of address sets compared once: the programs of one
/// compile share their sets (`Arc`s), and sets of thousands of addresses recur in
/// hundreds of programs.
#[derive(Default)]
struct SameSets {
    seen: FastMap<(usize, usize), bool>,
}

impl SameSets {
    /// Whether `a` and `b` are equal (as `==` says).
    fn programs(&mut self, a: &SideProgram, b: &SideProgram) -> bool {
        a.exempt == b.exempt
            && a.isolated == b.isolated
            && a.isolating == b.isolating
            && a.shared_address == b.shared_address
            && self.rules(&a.admin, &b.admin)
            && self.rules(&a.network, &b.network)
            && self.rules(&a.baseline, &b.baseline)
    }

    fn rules(&mut self, a: &[ConcreteRule], b: &[ConcreteRule]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| self.rule(x, y))
    }

    fn rule(&mut self, a: &ConcreteRule, b: &ConcreteRule) -> bool {
        let ports = match (&a.ports, &b.ports) {
            (None, None) => true,
            (Some(x), Some(y)) => {
                x.len() == y.len()
                    && x.iter().zip(y.iter()).all(|(p, q)| {
                        p.protocol == q.protocol
                            && p.range == q.range
                            && match (&p.only_to, &q.only_to) {
                                (None, None) => true,
                                (Some(s), Some(t)) => self.sets(s, t),
                                _ => false,
                            }
                    })
            }
            _ => false,
        };
        ports
            && a.rule == b.rule
            && a.peers.any == b.peers.any
            && a.peers.blocks == b.peers.blocks
            && a.peers.domains == b.peers.domains
            && self.sets(&a.peers.addrs, &b.peers.addrs)
    }

    fn sets(&mut self, a: &Arc<BTreeSet<IpAddr>>, b: &Arc<BTreeSet<IpAddr>>) -> bool {
        if Arc::ptr_eq(a, b) {
            return true;
        }
        let key = (Arc::as_ptr(a) as usize, Arc::as_ptr(b) as usize);
        *self.seen.entry(key).or_insert_with(|| a == b)
    }
}
