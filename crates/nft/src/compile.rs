//! The engine's side programs for the pods of one node → a [`Ruleset`].
//!
//! Pods that every policy treats alike (the engine's side classes) share chains: each class
//! has one small chain with a stable name (`e…`/`i…` from the class's digest) that jumps to
//! the class's program, and the program's chains are named by a digest of their content, so
//! classes with equal programs share them and an unchanged chain keeps its name.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use palisade_engine::{
    AddressCache, ConcreteRule, Decision, EndpointKind, Engine, FastMap, FastSet, PeerAddrs, PodId,
    PolicyInfo, Rules, SideClasses, SideProgram, Tier,
};
use palisade_model::{Action, Direction, Protocol};

use crate::both::both;
use crate::chain_names::content_name;
use crate::ir::{Chain, Field, LoggedDecision, Match, NamedSet, Rule, Ruleset, Verdict};
use crate::peer_cache::PeerCache;
use crate::peer_names::PeerSpecs;
use crate::shadow;

/// Why compiling a ruleset failed.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// `--node` names no node of the input.
    #[error("no node {0:?} in the input")]
    UnknownNode(String),
}

/// Compiles the pods of `node` (every pod when `None`) into a ruleset.
pub fn compile(engine: &Engine, node: Option<&str>) -> Result<Ruleset, CompileError> {
    compile_after(engine, node, &Ruleset::default())
}

/// [`compile`], keeping the log ids `previous` gave to the decisions it has (new decisions
/// get new ids after them; ids no rule uses any more stay in `logs`, so a log line from
/// before the update still reads right): chains whose rules did not change keep their
/// text, so an [`crate::update`] from `previous` touches only what changed.
pub fn compile_after(
    engine: &Engine,
    node: Option<&str>,
    previous: &Ruleset,
) -> Result<Ruleset, CompileError> {
    let pods = Pods::of(engine, node)?;
    let sides = Classes::all(engine, &pods.list, &Arc::default());
    let peers = PeerCache::default();
    let logs = Logs::seeded(&previous.logs);
    Ok(assemble(engine, &pods, &sides, None, logs, &peers, Naming::InOrder).0)
}

/// The pods a compile covers: the node's pods with an address and a network of their own,
/// in key order, and each address with the pod whose chains decide it.
#[derive(Debug, Clone)]
pub(crate) struct Pods {
    /// The pods, sorted by key (an index into this list is what `dispatch` and
    /// [`Classes::class_of`] speak of).
    pub(crate) list: Vec<PodId>,
    /// Each address with the index of the pod deciding it (see [`dispatch`]).
    pub(crate) dispatch: Vec<(IpAddr, usize)>,
    /// The node's own addresses.
    pub(crate) host_addrs: Vec<IpAddr>,
}

impl Pods {
    /// The pods of `node` (every pod when `None`).
    pub(crate) fn of(engine: &Engine, node: Option<&str>) -> Result<Pods, CompileError> {
        let cluster = engine.cluster();
        if let Some(n) = node
            && engine.node_id(n).is_none()
        {
            return Err(CompileError::UnknownNode(n.to_string()));
        }
        let host_addrs = cluster
            .nodes
            .iter()
            .filter(|n| node.is_none_or(|want| n.name == want))
            .flat_map(|n| n.addresses.iter().copied())
            .collect();
        let mut list: Vec<PodId> = engine
            .pod_ids()
            .filter(|&p| {
                let pod = &cluster.pods[p];
                !pod.host_network
                    && !pod.ips.is_empty()
                    && node.is_none_or(|n| pod.node_name.as_deref() == Some(n))
            })
            .collect();
        list.sort_by_cached_key(|&p| cluster.pods[p].key());
        let dispatch = dispatch(engine, &list);
        Ok(Pods {
            list,
            dispatch,
            host_addrs,
        })
    }
}

/// One side's classes as [`assemble`] takes them: the engine's [`SideClasses`], each
/// program shared, and for a class whose chains an earlier compile built, what building
/// them did (replayed instead of built again).
#[derive(Debug, Clone, Default)]
pub(crate) struct Classes {
    /// One program per class.
    pub(crate) programs: Vec<Arc<SideProgram>>,
    /// Per class, the engine's digest of what its members share (its chain's name).
    pub(crate) ids: Vec<u64>,
    /// The class of each pod of [`Pods::list`].
    pub(crate) class_of: Vec<usize>,
    /// Per class, what building its chains did before, if known.
    pub(crate) built: Vec<Option<Arc<Built>>>,
}

impl Classes {
    /// The engine's classes of `pods`, egress then ingress, nothing built yet, with the
    /// addresses of pod sets kept in `addresses`.
    pub(crate) fn all(
        engine: &Engine,
        pods: &[PodId],
        addresses: &Arc<AddressCache>,
    ) -> [Classes; 2] {
        // The two sides are independent: one task each on rayon's pool.
        let (egress, ingress) = rayon::join(
            || engine.side_classes_cached(pods, Direction::Egress, addresses),
            || engine.side_classes_cached(pods, Direction::Ingress, addresses),
        );
        [egress, ingress].map(Classes::from)
    }
}

impl From<SideClasses> for Classes {
    fn from(c: SideClasses) -> Classes {
        Classes {
            built: vec![None; c.programs.len()],
            programs: c.programs.into_iter().map(Arc::new).collect(),
            ids: c.ids,
            class_of: c.class_of,
        }
    }
}

/// The two sides in the order [`assemble`] takes them.
pub(crate) const SIDES: [Direction; 2] = [Direction::Egress, Direction::Ingress];

/// How [`assemble`] names the two sides' sets and chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Naming {
    /// Egress then ingress through one namer: the reference.
    InOrder,
    /// Each side through a namer of its own, in parallel, then joined; when the two sides
    /// gave one name to different contents (or handed out a log id), named in order
    /// instead. The result is the same: see [`Builder::join`].
    SidesApart,
}

/// The ruleset of `pods` whose sides fall into `sides` (egress, ingress), keeping the log
/// ids `logs` has handed out; with `exempt` (egress, ingress), the exemption pairs are
/// taken as given instead of asked of the engine. Also returns, per side and class, what
/// building the class's chains did, the log ids as the ruleset has them, and whether the
/// sides were named apart.
///
/// A class with a [`Classes::built`] record is replayed: the sets and chains it named are
/// named again in the same order, and when every name comes out as recorded (it does unless
/// a name's owner changed), its chains are taken as recorded; otherwise it is built. The
/// result is the same either way: the record is what building the same program does.
pub(crate) fn assemble(
    engine: &Engine,
    pods: &Pods,
    sides: &[Classes; 2],
    exempt: Option<[Vec<(IpAddr, IpAddr)>; 2]>,
    mut logs: Logs,
    peers: &PeerCache,
    naming: Naming,
) -> (Ruleset, [Vec<Arc<Built>>; 2], Logs, Naming) {
    let cluster = engine.cluster();
    // Log ids in pod order (each pod's egress side, then its ingress side), so that they
    // do not depend on how the pods fall into classes. A class built before has its ids
    // already: `logs` carries them.
    let mut seen = [
        vec![false; sides[0].programs.len()],
        vec![false; sides[1].programs.len()],
    ];
    let mut tiers = FastSet::default();
    for k in 0..pods.list.len() {
        for ((dir, classes), seen) in SIDES.iter().zip(sides).zip(&mut seen) {
            let class = classes.class_of[k];
            if !std::mem::replace(&mut seen[class], true) && classes.built[class].is_none() {
                logs.assign(*dir, &classes.programs[class], &mut tiers);
            }
        }
    }
    let apart = match naming {
        Naming::SidesApart => {
            // One side in a builder of its own.
            let alone = |d: usize| {
                let mut b = Builder::new(cluster, peers, logs.clone());
                let named = b.name_side(SIDES[d], &sides[d]);
                (b, named)
            };
            let (egress, ingress) = both(|| alone(0), || alone(1));
            let ids = logs.entries.len();
            egress
                .0
                .join(ingress.0, ids)
                .map(|b| (b, [egress.1, ingress.1]))
        }
        Naming::InOrder => None,
    };
    let naming = if apart.is_some() {
        Naming::SidesApart
    } else {
        Naming::InOrder
    };
    let (b, named) = apart.unwrap_or_else(|| {
        let mut b = Builder::new(cluster, peers, logs);
        let egress = b.name_side(SIDES[0], &sides[0]);
        let ingress = b.name_side(SIDES[1], &sides[1]);
        (b, [egress, ingress])
    });
    let mut rs = Ruleset {
        host_addrs: pods.host_addrs.clone(),
        ..Ruleset::default()
    };
    let mut built: [Vec<Arc<Built>>; 2] = [Vec::new(), Vec::new()];
    let mut exempt = exempt.map(|[e, i]| [Some(e), Some(i)]).unwrap_or_default();
    for ((((dir, classes), built), given), (class_chains, records)) in SIDES
        .iter()
        .zip(sides)
        .zip(&mut built)
        .zip(&mut exempt)
        .zip(named)
    {
        let dir = *dir;
        *built = records;
        let (map, exempt) = if dir == Direction::Egress {
            (&mut rs.egress, &mut rs.egress_exempt)
        } else {
            (&mut rs.ingress, &mut rs.ingress_exempt)
        };
        map.reserve(pods.dispatch.len());
        for &(ip, k) in &pods.dispatch {
            map.push((ip, Arc::clone(&class_chains[classes.class_of[k]])));
        }
        match given.take() {
            Some(pairs) => *exempt = pairs,
            None => {
                for &(ip, k) in &pods.dispatch {
                    for peer in engine.side_exempt(pods.list[k], dir) {
                        // "A pod reaching itself through a Service address is subject to
                        // policy; through its own address it is not": the latter never leaves
                        // the pod, so a packet from a pod to itself at a node's hook is the
                        // former (hairpin after DNAT) and is not exempt.
                        if peer.is_ipv6() == ip.is_ipv6() && peer != ip {
                            exempt.push((ip, peer));
                        }
                    }
                }
            }
        }
    }
    rs.chains = b.chains.into_values().collect();
    rs.chains.sort_unstable_by(|x, y| x.name.cmp(&y.name));
    // Sets only shadowed rules used are not written.
    let used = UsedSets::of(&rs.chains);
    rs.sets = (b.interner.sets.into_iter())
        .filter(|(name, _)| used.contains(name))
        .map(|(name, s)| NamedSet {
            name,
            v6: s.v6,
            interval: s.interval,
            elements: s.nets,
            learned: None,
        })
        .collect();
    rs.sets.extend(learned_sets(sides, &used));
    rs.sets.sort_unstable_by(|x, y| x.name.cmp(&y.name));
    rs.logs = b.logs.entries.clone();
    (rs, built, b.logs, naming)
}

/// Each address of the compiled pods with the pod (index into `pods`) whose chains decide
/// it: the pod the engine says owns it, else (an address shared with a pod of another node)
/// the first compiled pod that has it. Every address appears once (nft refuses duplicate
/// map keys); sorted.
fn dispatch(engine: &Engine, pods: &[PodId]) -> Vec<(IpAddr, usize)> {
    let mut by_ip: BTreeMap<IpAddr, usize> = BTreeMap::new();
    for (k, &p) in pods.iter().enumerate() {
        for &ip in &engine.cluster().pods[p].ips {
            let owner = engine.endpoint_for_ip(ip).kind == EndpointKind::Pod(p);
            if owner {
                by_ip.insert(ip, k);
            } else {
                by_ip.entry(ip).or_insert(k);
            }
        }
    }
    by_ip.into_iter().collect()
}

/// One side named ([`Builder::name_side`]): per class, the name of its own chain and what
/// building its chains did.
type SideNamed = (Vec<Arc<str>>, Vec<Arc<Built>>);

/// Chains, sets and log ids under construction.
struct Builder<'c> {
    logs: Logs,
    interner: Interner<'c>,
    chains: HashMap<String, Chain>,
    /// Per chain rules (by identity, held here), a chain restored with them in this build:
    /// a content chain many classes share is looked up by name once, not once per class.
    restored: FastMap<usize, Chain>,
    cluster: &'c palisade_model::Cluster,
    /// The policies by name, made when a class is built (a replay needs none).
    specs: Option<PeerSpecs<'c>>,
    /// The content chains stored while a class is built, in order.
    record: Option<Vec<Chain>>,
}

/// What building one class's chains did: the sets it named and the content chains it
/// stored, in order, and the rules of the class's own chain. Doing the same again gives
/// the same chains, so a later compile replays it instead of building the class again.
#[derive(Debug, Default)]
pub(crate) struct Built {
    /// The rules of the class's own chain.
    entry: Arc<Vec<Rule>>,
    /// Every named set its rules use, as asked of the interner.
    sets: Vec<Arc<SetUse>>,
    /// Every content chain it stored, after shadowed rules were dropped.
    chains: Arc<Vec<Chain>>,
}

impl Built {
    /// What building the class does once some of its rules' peers hold other addresses
    /// (`moved`: each such rule's peers before, and the rule now), if its chains stay as
    /// they are: every moved peer list is, in each family, a named set before and after, or
    /// absent before and after. `None` when a chain changes (a list is written inline,
    /// before or after, or a family comes or goes): the class must be built.
    pub(crate) fn with_new_peers(
        &self,
        moved: &[(&PeerAddrs, &ConcreteRule)],
        nets: &PeerCache,
        stay_named: &mut StayNamed,
    ) -> Option<Built> {
        // Each moved rule's addresses before and now, by the address of the addresses
        // before (the first moved rule with them, as listed, for equal ones).
        let mut now: Vec<(usize, &Addrs)> = Vec::with_capacity(moved.len());
        for &(was, is) in moved {
            if !stay_named.check(was, is, nets) {
                return None;
            }
            now.push((Arc::as_ptr(&was.addrs) as usize, &is.peers.addrs));
        }
        now.sort_by_key(|&(was, _)| was);
        let mut sets = Vec::with_capacity(self.sets.len());
        for set in &self.sets {
            let was = Arc::as_ptr(&set.source.addrs) as usize;
            match now.get(now.partition_point(|&(w, _)| w < was)) {
                Some(&(w, addrs)) if w == was => sets.push(stay_named.set_now(set, addrs, nets)?),
                _ => sets.push(Arc::clone(set)),
            }
        }
        Some(Built {
            entry: self.entry.clone(),
            sets,
            chains: self.chains.clone(),
        })
    }
}

/// A rule's peer addresses, shared.
type Addrs = Arc<BTreeSet<IpAddr>>;

/// Whether a rule whose peers moved is, in each family, a named set before and after or
/// absent before and after (so that the chains naming it stay as they are), per rule and
/// pair of address sets, and what each named set it used holds now: the classes of one
/// compile share their moved rules and their set uses. Holds the rules and set uses it
/// was asked about, so that the addresses it is keyed by are not reused.
#[derive(Default)]
pub(crate) struct StayNamed {
    seen: FastMap<(usize, usize, usize, Direction, u32), bool>,
    held: Vec<(Addrs, Addrs, Arc<PolicyInfo>)>,
    /// Per set use and new addresses: the set use with the elements they give.
    sets: FastMap<(usize, usize), SetNow>,
}

/// The set use and the new addresses a [`StayNamed::sets`] entry is keyed by, and the set
/// use with the elements they give (`None` when those are written inline).
type SetNow = (Arc<SetUse>, Addrs, Option<Arc<SetUse>>);

impl StayNamed {
    fn check(&mut self, was: &PeerAddrs, is: &ConcreteRule, nets: &PeerCache) -> bool {
        let key = (
            Arc::as_ptr(&was.addrs) as usize,
            Arc::as_ptr(&is.peers.addrs) as usize,
            Arc::as_ptr(&is.rule.policy) as usize,
            is.rule.direction,
            is.rule.index,
        );
        if let Some(&stays) = self.seen.get(&key) {
            return stays;
        }
        let (was_source, is_source) = (SetSource::from(was), SetSource::from(&is.peers));
        let (before, after) = (nets.of(&was_source), nets.of(&is_source));
        let stays = [false, true].into_iter().all(|v6| {
            let (b, a) = (&before[usize::from(v6)], &after[usize::from(v6)]);
            b.is_empty() && a.is_empty()
                || was_source.named(v6, b.len()) && is_source.named(v6, a.len())
        });
        self.seen.insert(key, stays);
        self.held.push((
            was.addrs.clone(),
            is.peers.addrs.clone(),
            Arc::clone(&is.rule.policy),
        ));
        stays
    }

    /// `set` (a named set of a moved rule) with the elements `addrs` give it now; `None`
    /// when they are few enough to be written inline (its chains change). Found once per
    /// set use: the classes whose records share it share the result.
    fn set_now(
        &mut self,
        set: &Arc<SetUse>,
        addrs: &Addrs,
        nets: &PeerCache,
    ) -> Option<Arc<SetUse>> {
        let key = (Arc::as_ptr(set) as usize, Arc::as_ptr(addrs) as usize);
        if let Some((_, _, now)) = self.sets.get(&key) {
            return now.clone();
        }
        let source = SetSource {
            addrs: addrs.clone(),
            blocks: set.source.blocks.clone(),
        };
        let elements = nets.of(&source)[usize::from(set.v6)].clone();
        let now = source.named(set.v6, elements.len()).then(|| {
            Arc::new(SetUse {
                nets: elements,
                source,
                base: Arc::clone(&set.base),
                name: Arc::clone(&set.name),
                ..**set
            })
        });
        self.sets
            .insert(key, (Arc::clone(set), addrs.clone(), now.clone()));
        now
    }
}

/// One named set a class's rules use: what the interner was asked, and the name it gave.
#[derive(Debug)]
struct SetUse {
    v6: bool,
    interval: bool,
    nets: Arc<Vec<IpNet>>,
    /// What the elements were made of.
    source: SetSource,
    /// The name the set's peers give it ([`Interner::base_name`]); shared, so that a
    /// record is cheap to copy.
    base: Arc<str>,
    name: Arc<str>,
    /// Whether `name` is `base`.
    as_base: bool,
}

/// What a set of peer addresses is made of: a rule's peer addresses and CIDRs (or the
/// pods a named port resolves on).
#[derive(Debug, Clone)]
pub(crate) struct SetSource {
    pub(crate) addrs: Arc<BTreeSet<IpAddr>>,
    /// CIDRs, each minus its exceptions.
    pub(crate) blocks: Vec<(IpNet, Vec<IpNet>)>,
}

impl From<&PeerAddrs> for SetSource {
    fn from(p: &PeerAddrs) -> SetSource {
        SetSource {
            addrs: p.addrs.clone(),
            blocks: p.blocks.clone(),
        }
    }
}

impl SetSource {
    /// Whether the `v6` (else IPv4) prefixes of this source, `prefixes` of them, are
    /// written inline in the rule rather than as a named set: only a few CIDRs with no
    /// pod among them. Pod addresses are always a named set, so that a pod coming or
    /// going changes the set's elements, never the chains that use it.
    fn inline(&self, v6: bool, prefixes: usize) -> bool {
        // IPv4 addresses sort before IPv6 ones.
        let pods = if v6 {
            self.addrs.last().is_some_and(IpAddr::is_ipv6)
        } else {
            self.addrs.first().is_some_and(IpAddr::is_ipv4)
        };
        prefixes <= INLINE_MAX && !pods
    }

    /// Whether the `v6` (else IPv4) prefixes, `prefixes` of them, are a named set: some,
    /// and not [`SetSource::inline`].
    fn named(&self, v6: bool, prefixes: usize) -> bool {
        prefixes > 0 && !self.inline(v6, prefixes)
    }

    /// The prefixes, IPv4 then IPv6, merged (an interval set holds no overlapping
    /// elements, and consecutive pod addresses become one prefix).
    pub(crate) fn families(&self) -> [Vec<IpNet>; 2] {
        let mut nets: Vec<IpNet> = self.addrs.iter().map(|&ip| IpNet::from(ip)).collect();
        for (cidr, except) in &self.blocks {
            nets.extend(subtract(*cidr, except));
        }
        let (v4, v6): (Vec<IpNet>, Vec<IpNet>) =
            nets.into_iter().partition(|n| matches!(n, IpNet::V4(_)));
        [IpNet::aggregate(&v4), IpNet::aggregate(&v6)]
    }
}

impl<'c> Builder<'c> {
    /// A builder that has named nothing yet.
    fn new(cluster: &'c palisade_model::Cluster, peers: &'c PeerCache, logs: Logs) -> Self {
        Builder {
            logs,
            interner: Interner {
                by_set: FastMap::default(),
                sets: HashMap::new(),
                renamed: FastMap::default(),
                record: None,
                peers,
            },
            chains: HashMap::new(),
            restored: FastMap::default(),
            cluster,
            specs: None,
            record: None,
        }
    }

    /// Names the chains of every class of one side, in order (replayed or built): each
    /// class's own chain name, and what building each did.
    fn name_side(&mut self, dir: Direction, classes: &Classes) -> SideNamed {
        let letter = if dir == Direction::Egress { 'e' } else { 'i' };
        let mut class_chains: Vec<Arc<str>> = Vec::with_capacity(classes.programs.len());
        let mut built = Vec::with_capacity(classes.programs.len());
        for (class, program) in classes.programs.iter().enumerate() {
            let record = match &classes.built[class] {
                Some(before) if self.replay(before) => before.clone(),
                _ => Arc::new(self.side_recorded(dir, program)),
            };
            let id = classes.ids[class];
            let name = format!("{letter}{:012x}", id & 0xffff_ffff_ffff);
            class_chains.push(self.named_chain(name, Arc::clone(&record.entry)).into());
            built.push(record);
        }
        (class_chains, built)
    }

    /// The egress side's builder (`self`) joined with the ingress side's, named apart from
    /// the same log ids (`ids` of them), as one builder that named egress then ingress
    /// would be; `None` when it might not be.
    ///
    /// Naming in order differs only where an ingress name meets one egress gave: where
    /// both gave a name to equal contents, the name is the same in order (the name holds
    /// what it would be given again); where they gave it to different contents, naming in
    /// order would have named the ingress one otherwise (and `None`). Names of class
    /// chains (`e…`, `i…`) never meet. A log id handed out while naming depends on the
    /// order too (`None`).
    fn join(mut self, ingress: Builder<'c>, ids: usize) -> Option<Builder<'c>> {
        let same_chain =
            |x: &Chain, y: &Chain| Arc::ptr_eq(&x.rules, &y.rules) || x.rules == y.rules;
        let same_set = |x: &SetElements, y: &SetElements| {
            (x.v6, x.interval) == (y.v6, y.interval)
                && (Arc::ptr_eq(&x.nets, &y.nets) || x.nets == y.nets)
        };
        let joined = self.logs.entries.len() == ids
            && ingress.logs.entries.len() == ids
            && union_by_name(&mut self.chains, ingress.chains, same_chain)
            && union_by_name(&mut self.interner.sets, ingress.interner.sets, same_set);
        joined.then_some(self)
    }
}

/// Adds `from`'s entries to `into`: true when every name both hold has the same value in
/// each (as `same` says).
fn union_by_name<V>(
    into: &mut HashMap<String, V>,
    from: HashMap<String, V>,
    same: impl Fn(&V, &V) -> bool,
) -> bool {
    for (name, value) in from {
        match into.get(&name) {
            Some(held) if !same(held, &value) => return false,
            Some(_) => {}
            None => {
                into.insert(name, value);
            }
        }
    }
    true
}

impl Builder<'_> {
    /// Builds a class's chains ([`Builder::side`]), recording what it did.
    fn side_recorded(&mut self, dir: Direction, prog: &SideProgram) -> Built {
        self.record = Some(Vec::new());
        self.interner.record = Some(Vec::new());
        let entry = self.side(dir, prog);
        Built {
            entry: Arc::new(entry),
            sets: self.interner.record.take().unwrap_or_default(),
            chains: Arc::new(self.record.take().unwrap_or_default()),
        }
    }

    /// Does again what building a class did; false (and the class must be built) when a
    /// name comes out otherwise than recorded. What a failed replay stored is what
    /// building the class stores too, up to the name that differed.
    fn replay(&mut self, built: &Built) -> bool {
        // The names of sets do not depend on chains, nor those of chains on other chains
        // than the ones with their digest: sets first, then chains, as building did.
        for s in &built.sets {
            if !self.interner.renamed(s) {
                return false;
            }
        }
        for c in built.chains.iter() {
            if !self.restored_chain(c) {
                return false;
            }
        }
        true
    }

    /// Stores a chain of the reachable ones of `rules` under `prefix` and a digest of them
    /// as IR (a chain with the same rules is stored once); returns its name.
    fn content_chain(&mut self, prefix: char, rules: Vec<Rule>) -> String {
        let rules = Arc::new(shadow::reachable(rules));
        let name = content_name(prefix, &rules);
        let name = self.store_chain(name, rules);
        if let Some(record) = &mut self.record {
            // The rules the name holds (equal to these): one `Arc` per chain, which a
            // replay compares by identity.
            let rules = self.chains[&name].rules.clone();
            record.push(Chain {
                name: name.clone(),
                rules,
            });
        }
        name
    }

    /// Stores a recorded chain again: true when storing its rules under their digest
    /// gives the recorded name (the common case, a name free or holding these rules, is
    /// checked without a copy).
    fn restored_chain(&mut self, c: &Chain) -> bool {
        // Restoring a chain again under a name it was restored under changes nothing
        // (names are only ever added), so it comes out the same.
        let key = Arc::as_ptr(&c.rules) as usize;
        if self
            .restored
            .get(&key)
            .is_some_and(|done| done.name == c.name)
        {
            return true;
        }
        let restored = self.restore_chain(c);
        if restored {
            self.restored.entry(key).or_insert_with(|| c.clone());
        }
        restored
    }

    /// [`Builder::restored_chain`], without its memory.
    fn restore_chain(&mut self, c: &Chain) -> bool {
        match self.chains.get(&c.name) {
            Some(held)
                if (Arc::ptr_eq(&held.rules, &c.rules) || held.rules == c.rules)
                    && !c.name.ends_with('x') =>
            {
                true
            }
            None if !c.name.ends_with('x') => {
                self.chains.insert(c.name.clone(), c.clone());
                true
            }
            _ => {
                let digest = c.name.trim_end_matches('x').to_string();
                self.store_chain(digest, Arc::clone(&c.rules)) == c.name
            }
        }
    }

    /// Stores `rules` as the chain named `name` (its content digest) unless a chain of
    /// that name has them already; returns the name used.
    fn store_chain(&mut self, mut name: String, rules: Arc<Vec<Rule>>) -> String {
        loop {
            match self.chains.get(&name) {
                Some(c) if c.rules == rules => return name,
                Some(_) => name.push('x'), // a digest collision: still unique, still not user text
                None => break,
            }
        }
        self.chains.insert(
            name.clone(),
            Chain {
                name: name.clone(),
                rules,
            },
        );
        name
    }

    /// The text the set of `r`'s peers is named after.
    fn peers_named(&mut self, r: &ConcreteRule) -> String {
        let (cluster, specs) = (self.cluster, &mut self.specs);
        self.interner.peers.text(r, || {
            specs.get_or_insert_with(|| PeerSpecs::new(cluster)).of(r)
        })
    }

    /// Stores a class's own chain, `name`, with the entry `rules` [`Builder::side`] gave;
    /// returns its name.
    fn named_chain(&mut self, mut name: String, rules: Arc<Vec<Rule>>) -> String {
        while self.chains.contains_key(&name) {
            name.push('x'); // two classes with one digest
        }
        self.chains.insert(
            name.clone(),
            Chain {
                name: name.clone(),
                rules,
            },
        );
        name
    }

    /// The chains of one side program: the admin tier (`a…`, with the connection-start
    /// check; allow = `accept`, deny = `drop`, pass = `return`), NetworkPolicy isolation
    /// (`n…`: allow-list, then `drop`) and the baseline (`b…`). Returns the rules of the
    /// class's entry chain: `jump a…` then `goto n…`.
    ///
    /// A pass returns to the entry chain, which continues in `n…`, so that however many
    /// pass rules an admin chain has, one rule reaches `n…`: the kernel's loop check walks
    /// a chain once for every rule and map element that reaches it.
    fn side(&mut self, dir: Direction, prog: &SideProgram) -> Vec<Rule> {
        let entry = |verdict| Rule {
            matches: vec![],
            verdict,
            log: None,
        };
        let peer = if dir == Direction::Egress {
            Field::Daddr
        } else {
            Field::Saddr
        };
        // Only connection starts reach a side chain (established ones are accepted first);
        // a TCP one must be a SYN, or a cut connection's next packet would open it again.
        let mut main = vec![Rule {
            matches: vec![Match::TcpWithoutSyn],
            verdict: Verdict::Drop,
            log: None,
        }];
        if let Some(ip) = prog.shared_address {
            // No policy can be enforced for an address two pods share: fail closed.
            let log = self
                .logs
                .id(dir, Tier::FailClosed, Decision::SharedAddress(ip));
            main.push(Rule {
                matches: vec![],
                verdict: Verdict::Drop,
                log: Some(log),
            });
            return vec![entry(Verdict::Goto(self.content_chain('a', main)))];
        }
        let mut bl_rules = Vec::new();
        for r in prog.baseline.iter() {
            let (verdict, log) = match r.rule.action {
                Action::Deny => (Verdict::Drop, Some(self.logs.rule(Tier::Baseline, &r.rule))),
                // Allow, and a baseline Pass (which falls through to the default: allowed)
                _ => (Verdict::Return, None),
            };
            let what = self.peers_named(r);
            expand(
                r,
                peer,
                verdict,
                log,
                &what,
                &mut self.interner,
                &mut bl_rules,
            );
        }
        let bl = self.content_chain('b', bl_rules);
        let mut np_rules = Vec::new();
        if prog.isolated {
            for r in prog.network.iter() {
                let what = self.peers_named(r);
                expand(
                    r,
                    peer,
                    Verdict::Return,
                    None,
                    &what,
                    &mut self.interner,
                    &mut np_rules,
                );
            }
            let log = self.logs.id(
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
                verdict: Verdict::Goto(bl),
                log: None,
            });
        }
        let np = self.content_chain('n', np_rules);
        for r in prog.admin.iter() {
            let verdict = match r.rule.action {
                Action::Allow => Verdict::Accept,
                Action::Deny => Verdict::Drop,
                Action::Pass => Verdict::Return,
            };
            let log = Some(self.logs.rule(Tier::Admin, &r.rule));
            let what = self.peers_named(r);
            expand(r, peer, verdict, log, &what, &mut self.interner, &mut main);
        }
        let admin = self.content_chain('a', main);
        vec![entry(Verdict::Jump(admin)), entry(Verdict::Goto(np))]
    }
}

/// The name of the set of addresses learned for a `domainNames` peer with `patterns`, per
/// family: `d4`/`d6` and a digest of the patterns (normalized, sorted), so every rule with
/// the same names shares one set, whichever policy it is in.
pub fn learned_set_name(patterns: &[palisade_model::DomainPattern], v6: bool) -> String {
    let mut keys: Vec<String> = patterns
        .iter()
        .map(|p| {
            if p.wildcard {
                format!("*.{}", p.base)
            } else {
                p.base.clone()
            }
        })
        .collect();
    keys.sort();
    keys.dedup();
    format!(
        "{LEARNED_PREFIX}{}{}",
        if v6 { 6 } else { 4 },
        digest(&keys.join(","))
    )
}

/// What the name of every learned set starts with.
const LEARNED_PREFIX: &str = "d";

/// The names of the sets some rule of a ruleset's chains matches against, sorted.
struct UsedSets<'r>(Vec<&'r str>);

impl<'r> UsedSets<'r> {
    fn of(chains: &'r [Chain]) -> UsedSets<'r> {
        let mut names: Vec<&str> = (chains.iter())
            .flat_map(|c| c.rules.iter())
            .flat_map(|r| &r.matches)
            .filter_map(|m| match m {
                Match::Set { set, .. } => Some(set.as_str()),
                _ => None,
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        UsedSets(names)
    }

    fn contains(&self, name: &str) -> bool {
        self.0.binary_search(&name).is_ok()
    }

    /// Whether some used name starts with `prefix`.
    fn any_with_prefix(&self, prefix: &str) -> bool {
        let at = self.0.partition_point(|n| *n < prefix);
        self.0.get(at).is_some_and(|n| n.starts_with(prefix))
    }
}

/// The learned sets the rules of `sides` name, each once, with the patterns it stands for.
fn learned_sets(sides: &[Classes; 2], used: &UsedSets<'_>) -> Vec<NamedSet> {
    let mut out: BTreeMap<String, NamedSet> = BTreeMap::new();
    if !used.any_with_prefix(LEARNED_PREFIX) {
        return Vec::new(); // no rule matches learned addresses: no program need be read
    }
    let programs = sides.iter().flat_map(|c| &c.programs);
    for d in programs
        .flat_map(|p| p.admin.iter())
        .flat_map(|r| &r.peers.domains)
    {
        for v6 in [false, true] {
            let name = learned_set_name(&d.patterns, v6);
            if used.contains(name.as_str()) && !out.contains_key(&name) {
                let set = NamedSet {
                    name: name.clone(),
                    v6,
                    interval: false,
                    elements: Arc::default(),
                    learned: Some(d.patterns.clone()),
                };
                out.insert(name, set);
            }
        }
    }
    out.into_values().collect()
}

/// CIDR lists longer than this become named sets shared across chains (pod addresses
/// always do: [`SetSource::inline`]).
const INLINE_MAX: usize = 4;

/// 12 hex digits of a digest.
fn digest(text: &str) -> String {
    format!(
        "{:012x}",
        palisade_model::digest::fnv64(text) & 0xffff_ffff_ffff
    )
}

/// A shared address set (by identity: every set seen stays alive while the interner is
/// used, so an address is never reused) and whether it is matched as the source.
type SetKey = (usize, bool);

/// The matches for a set's addresses, one per family present.
type FamilyMatches = Vec<(bool, Match)>;

/// What a set's addresses were matched as for one thing they stood for: that thing's
/// text, the matches and the named sets they use.
type MadeFor = (String, FamilyMatches, Vec<Arc<SetUse>>);

/// Address matches: computed once per shared address set (by identity), stored as named
/// sets when long. A named set is named after what it stands for (a rule's peers, or the
/// pods a named port resolves on), not after its content: when a pod joins or leaves it,
/// its elements change in place and the chains that use it stay as they are.
struct Interner<'n> {
    /// Per shared set, the matches made of it for each thing it stood for (rules with
    /// different peers may share a set of addresses; each names its own), with the named
    /// sets they use: every class whose rules make the same matches records the same set
    /// uses, which later compiles then bring up to date once.
    by_set: FastMap<SetKey, Vec<MadeFor>>,
    sets: HashMap<String, SetElements>,
    /// Per set elements (by identity, held here), a set use named again with them in this
    /// build.
    renamed: FastMap<usize, Arc<SetUse>>,
    /// The sets named while a class is built, in order.
    record: Option<Vec<Arc<SetUse>>>,
    /// What is known of the peers: each source's prefixes, each rule's peer text.
    peers: &'n PeerCache,
}

/// A named set under construction: its elements are shared with the records that name it,
/// so that a replay compares them by identity first.
struct SetElements {
    v6: bool,
    interval: bool,
    nets: Arc<Vec<IpNet>>,
}

impl Interner<'_> {
    /// `ip saddr|daddr` matches for `addrs` (the set `what` stands for), one per family
    /// present.
    fn matches(
        &mut self,
        addrs: &Arc<BTreeSet<IpAddr>>,
        field: Field,
        what: &str,
    ) -> Vec<(bool, Match)> {
        let key = (Arc::as_ptr(addrs) as usize, field == Field::Saddr);
        let mut seen = self.by_set.get(&key).into_iter().flatten();
        // Matches made earlier for `what`: their sets are named as they were (names are
        // only ever added within a build), so the uses recorded then are recorded again.
        if let Some((_, hit, uses)) = seen.find(|(w, _, _)| w == what) {
            let (hit, uses) = (hit.clone(), uses.clone());
            self.record(&uses);
            return hit;
        }
        let source = SetSource {
            addrs: addrs.clone(),
            blocks: Vec::new(),
        };
        let (out, uses) = self.family_matches(&source, field, what);
        self.record(&uses);
        self.by_set
            .entry(key)
            .or_default()
            .push((what.to_string(), out.clone(), uses));
        out
    }

    /// Records `uses` as named by the class being built, if one is recorded.
    fn record(&mut self, uses: &[Arc<SetUse>]) {
        if let Some(record) = &mut self.record {
            record.extend(uses.iter().cloned());
        }
    }

    /// `ip saddr|daddr` matches for the prefixes of `source`, one per family present:
    /// inline when short, else a named set (an interval set).
    fn prefixes(&mut self, source: &SetSource, field: Field, what: &str) -> FamilyMatches {
        let (out, uses) = self.family_matches(source, field, what);
        self.record(&uses);
        out
    }

    /// [`Interner::prefixes`], with the named sets the matches use, unrecorded.
    fn family_matches(
        &mut self,
        source: &SetSource,
        field: Field,
        what: &str,
    ) -> (FamilyMatches, Vec<Arc<SetUse>>) {
        let (mut out, mut uses) = (Vec::new(), Vec::new());
        let [v4, v6] = self.peers.of(source);
        for (v6, nets) in [(false, v4), (true, v6)] {
            if nets.is_empty() {
                continue;
            }
            if source.inline(v6, nets.len()) {
                out.push((
                    v6,
                    Match::Addr {
                        field,
                        v6,
                        nets: nets.to_vec(),
                        negate: false,
                    },
                ));
                continue;
            }
            let set = self.named(v6, true, nets, what, source);
            out.push((
                v6,
                Match::Set {
                    field,
                    v6,
                    set: set.name.to_string(),
                    negate: false,
                },
            ));
            uses.push(set);
        }
        (out, uses)
    }

    /// The name of the set of `nets` standing for `what`: `s4`/`s6`, `i` for an interval
    /// set, and a digest of `what`; when that name already holds other addresses (peers
    /// relative to the subject's namespace differ between classes), a digest of the
    /// addresses is appended.
    fn named(
        &mut self,
        v6: bool,
        interval: bool,
        nets: Arc<Vec<IpNet>>,
        what: &str,
        source: &SetSource,
    ) -> Arc<SetUse> {
        let base = Interner::base_name(v6, interval, what);
        let (name, nets) = self.name_from(&base, v6, interval, nets);
        Arc::new(SetUse {
            v6,
            interval,
            nets,
            source: source.clone(),
            as_base: name == base,
            base: base.into(),
            name: name.as_str().into(),
        })
    }

    /// `s4`/`s6`, `i` for an interval set, and a digest of what the set stands for.
    fn base_name(v6: bool, interval: bool, what: &str) -> String {
        format!(
            "s{}{}{}",
            if v6 { 6 } else { 4 },
            if interval { "i" } else { "" },
            digest(what)
        )
    }

    /// [`Interner::named`] from the base name, with the elements the name holds (`nets`,
    /// or equal elements named before: one `Arc` per name).
    fn name_from(
        &mut self,
        base: &str,
        v6: bool,
        interval: bool,
        nets: Arc<Vec<IpNet>>,
    ) -> (String, Arc<Vec<IpNet>>) {
        let holds_other = |s: &SetElements| !Arc::ptr_eq(&s.nets, &nets) && *s.nets != *nets;
        let mut name = base.to_string();
        if self.sets.get(&name).is_some_and(holds_other) {
            let text: Vec<String> = nets.iter().map(ToString::to_string).collect();
            name = format!("{base}_{}", digest(&text.join(",")));
        }
        while self.sets.get(&name).is_some_and(holds_other) {
            name.push('x'); // a digest collision: still unique, still not user text
        }
        let held = self
            .sets
            .entry(name.clone())
            .or_insert(SetElements { v6, interval, nets });
        (name, held.nets.clone())
    }

    /// Names a recorded set again: true when the name comes out as recorded (the common
    /// case, the base name holding these very elements, is checked without a copy).
    fn renamed(&mut self, s: &Arc<SetUse>) -> bool {
        // Naming a set again as it was named in this build changes nothing (names are only
        // ever added), so it comes out the same: a set many classes use is looked up by
        // name once, not once per class.
        let key = Arc::as_ptr(&s.nets) as usize;
        let same = |done: &Arc<SetUse>| {
            Arc::ptr_eq(done, s)
                || (done.v6, done.interval, done.as_base) == (s.v6, s.interval, s.as_base)
                    && done.name == s.name
                    && done.base == s.base
        };
        if self.renamed.get(&key).is_some_and(same) {
            return true;
        }
        let renamed = if s.as_base
            && let Some(held) = self.sets.get(&*s.base)
        {
            Arc::ptr_eq(&held.nets, &s.nets) || *held.nets == *s.nets
        } else {
            *self.name_from(&s.base, s.v6, s.interval, s.nets.clone()).0 == *s.name
        };
        if renamed {
            self.renamed.entry(key).or_insert_with(|| Arc::clone(s));
        }
        renamed
    }
}

/// `net` without the addresses of `except`, as prefixes.
fn subtract(net: IpNet, except: &[IpNet]) -> Vec<IpNet> {
    if except.iter().any(|e| e.contains(&net)) {
        return Vec::new();
    }
    if !except.iter().any(|e| net.contains(e)) {
        return vec![net];
    }
    match net.subnets(net.prefix_len() + 1) {
        Ok(halves) => halves.flat_map(|h| subtract(h, except)).collect(),
        Err(_) => Vec::new(), // a host prefix an exception contains: handled above
    }
}

/// The log ids handed out so far: one per distinct decision.
#[derive(Debug, Default, Clone)]
pub(crate) struct Logs {
    entries: Vec<LoggedDecision>,
    index: HashMap<LoggedDecision, u32>,
}

impl Logs {
    /// Hands out the ids of a side program's logged decisions, in the order its chains
    /// meet them: the admin tier, isolation, the baseline. `tiers` holds the tiers (by
    /// identity, held by the programs meanwhile) whose decisions have ids already: the
    /// programs of a compile share their tiers.
    fn assign(&mut self, dir: Direction, prog: &SideProgram, tiers: &mut FastSet<usize>) {
        if let Some(ip) = prog.shared_address {
            self.id(dir, Tier::FailClosed, Decision::SharedAddress(ip));
            return;
        }
        let first = |tier: &Rules, tiers: &mut FastSet<usize>| {
            tiers.insert(Arc::as_ptr(tier).cast::<ConcreteRule>() as usize)
        };
        if first(&prog.admin, tiers) {
            for r in prog.admin.iter() {
                self.rule(Tier::Admin, &r.rule);
            }
        }
        if prog.isolated {
            self.id(
                dir,
                Tier::NetworkPolicy,
                Decision::Isolated(prog.isolating.clone()),
            );
        }
        if first(&prog.baseline, tiers) {
            for r in (prog.baseline.iter()).filter(|r| r.rule.action == Action::Deny) {
                self.rule(Tier::Baseline, &r.rule);
            }
        }
    }

    /// The ids of a previous ruleset, kept.
    pub(crate) fn seeded(previous: &[LoggedDecision]) -> Logs {
        Logs {
            entries: previous.to_vec(),
            index: previous
                .iter()
                .enumerate()
                .map(|(i, d)| (d.clone(), i as u32))
                .collect(),
        }
    }

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

/// Ports of one protocol (or all), towards some addresses (or any): ranges, `None` = all.
type PortGroup = (
    Option<Protocol>,
    Option<Arc<BTreeSet<IpAddr>>>,
    Vec<Option<(u16, u16)>>,
);

/// One concrete rule as nft rules: (peer addresses, one match per family) × (port groups).
#[allow(clippy::too_many_arguments)] // one rule's parts, each used once
fn expand(
    r: &ConcreteRule,
    peer: Field,
    verdict: Verdict,
    log: Option<u32>,
    what: &str,
    interner: &mut Interner,
    out: &mut Vec<Rule>,
) {
    // Peer pieces: (family or None for any, matches). Addresses and CIDRs (minus their
    // exceptions) are one union of prefixes: one match (an interval set) per family.
    let mut pieces: Vec<(Option<bool>, Vec<Match>)> = Vec::new();
    if r.peers.any {
        pieces.push((None, vec![]));
    } else if r.peers.blocks.is_empty() {
        for (v6, m) in interner.matches(&r.peers.addrs, peer, what) {
            pieces.push((Some(v6), vec![m]));
        }
    } else {
        for (v6, m) in interner.prefixes(&(&r.peers).into(), peer, what) {
            pieces.push((Some(v6), vec![m]));
        }
    }
    // Port groups: (protocol, only-to addresses) → ranges; a None range means every port.
    let mut groups: Vec<PortGroup> = Vec::new();
    match &r.ports {
        None => groups.push((None, None, vec![None])),
        Some(alts) => {
            for a in alts.iter() {
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
    // Names learned at run time: one set per family, of the addresses they resolve to.
    for d in &r.peers.domains {
        for v6 in [false, true] {
            let set = learned_set_name(&d.patterns, v6);
            pieces.push((
                Some(v6),
                vec![Match::Set {
                    field: peer,
                    v6,
                    set,
                    negate: false,
                }],
            ));
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
                    let what = format!("port {protocol:?} {ranges:?}");
                    for (v6, m) in interner.matches(to, Field::Daddr, &what) {
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

#[cfg(test)]
mod tests {
    use super::{Classes, Logs, Pods, SIDES, subtract};
    use ipnet::IpNet;
    use palisade_engine::{Engine, FastSet, Options};
    use std::sync::Arc;

    /// Skipping the tiers whose decisions have ids already hands out the ids a walk of
    /// every tier hands out, in the same order, and skips some.
    #[test]
    fn log_ids_skip_shared_tiers_and_stay_the_same() {
        let g = palisade_gen::generate(&palisade_gen::Spec {
            pods: 200,
            policies: 40,
            seed: 7,
            admin: true,
        });
        let engine = Engine::new(
            g.load().unwrap_or_else(|e| panic!("{e}")),
            Options::default(),
        );
        let pods = Pods::of(&engine, None).unwrap_or_else(|e| panic!("{e}"));
        let sides = Classes::all(&engine, &pods.list, &Arc::default());
        let (mut skipping, mut walking) = (Logs::default(), Logs::default());
        let mut tiers = FastSet::default();
        let mut programs = 0;
        for (dir, classes) in SIDES.iter().zip(&sides) {
            for program in &classes.programs {
                skipping.assign(*dir, program, &mut tiers);
                walking.assign(*dir, program, &mut FastSet::default());
                programs += 1;
            }
        }
        assert_eq!(skipping.entries, walking.entries);
        assert!(!walking.entries.is_empty());
        assert!(tiers.len() < 2 * programs, "no tier was shared");
    }

    fn nets(s: &[&str]) -> Vec<IpNet> {
        s.iter()
            .map(|n| n.parse().unwrap_or_else(|e| panic!("{n}: {e}")))
            .collect()
    }

    #[test]
    fn subtracting_exceptions_leaves_exactly_the_rest() {
        let got = subtract(nets(&["10.0.0.0/8"])[0], &nets(&["10.1.0.0/16"]));
        assert_eq!(got.len(), 8, "{got:?}");
        for ip in [
            "10.0.0.1",
            "10.2.0.0",
            "10.255.255.255",
            "10.1.0.0",
            "10.1.255.255",
        ] {
            let ip: std::net::IpAddr = ip.parse().unwrap_or_else(|e| panic!("{e}"));
            let inside = got.iter().any(|n| n.contains(&ip));
            let want = !nets(&["10.1.0.0/16"])[0].contains(&ip);
            assert_eq!(inside, want, "{ip}");
        }
        assert!(subtract(nets(&["10.0.0.0/24"])[0], &nets(&["10.0.0.0/16"])).is_empty());
        assert_eq!(
            subtract(nets(&["10.0.0.0/24"])[0], &nets(&["192.168.0.0/16"])),
            nets(&["10.0.0.0/24"])
        );
        assert!(subtract(nets(&["10.0.0.1/32"])[0], &nets(&["10.0.0.1/32"])).is_empty());
    }
}
