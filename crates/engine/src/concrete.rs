//! Each pod's decision procedure for one direction, in concrete addresses and ports: what a
//! data plane (nftables) compiles. [`Engine::side_program`] and [`Engine::evaluate`] agree
//! by construction and by a differential test in the nft crate.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use palisade_model::{Action, AdminPeer, AdminPort, Direction, PortSpec, Protocol};

use crate::address_cache::AddressCache;
use crate::bitset::BitSet;
use crate::fast_map::{FastHasher, FastMap};
use crate::state::{AdminPeerC, Engine, NpPeer, NpRule, Owner, PodId, PolicySlot};
use crate::update::RenewedSet;
use crate::verdict::{PolicyInfo, RuleMatch};

/// The addresses a rule's peers cover (for one subject pod).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerAddrs {
    /// Every address.
    pub any: bool,
    /// Single addresses (pods, nodes).
    pub addrs: Arc<BTreeSet<IpAddr>>,
    /// CIDRs, each minus its exceptions.
    pub blocks: Vec<(IpNet, Vec<IpNet>)>,
    /// `domainNames` peers without a DNS map: the addresses their names resolve to are
    /// learned at run time (by the node agent), so [`PeerAddrs::contains`] knows none of
    /// them and a data plane matches them against a set it fills.
    pub domains: Vec<LearnedDomains>,
}

/// The patterns of one `domainNames` peer whose addresses are learned at run time.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LearnedDomains {
    /// The peer's patterns, as written and in order.
    pub patterns: Arc<Vec<palisade_model::DomainPattern>>,
}

impl PeerAddrs {
    pub(crate) fn any() -> PeerAddrs {
        PeerAddrs {
            any: true,
            ..PeerAddrs::default()
        }
    }
    /// Whether no address is covered.
    pub fn is_empty(&self) -> bool {
        !self.any && self.addrs.is_empty() && self.blocks.is_empty() && self.domains.is_empty()
    }
    /// Whether `ip` is covered (addresses learned for [`PeerAddrs::domains`] are not known
    /// here: they never are).
    pub fn contains(&self, ip: &IpAddr) -> bool {
        self.any
            || self.addrs.contains(ip)
            || self
                .blocks
                .iter()
                .any(|(c, ex)| c.contains(ip) && !ex.iter().any(|e| e.contains(ip)))
    }
}

/// One way a rule's ports can match: a protocol (or any), a range (or any), and — for a
/// named port resolved against a destination pod — that pod's addresses.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PortAlt {
    /// Protocol; `None` = every protocol (and port).
    pub protocol: Option<Protocol>,
    /// Inclusive range; `None` = every port of the protocol.
    pub range: Option<(u16, u16)>,
    /// Only towards these destination addresses (egress named ports).
    pub only_to: Option<Arc<BTreeSet<IpAddr>>>,
}

/// One rule in concrete terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConcreteRule {
    /// Which rule, and what a match does (a fail-closed rule is a Deny matching everything).
    pub rule: RuleMatch,
    /// The peer addresses (the source for ingress, the destination for egress).
    pub peers: PeerAddrs,
    /// Port alternatives; `None` = every protocol and port (shared: programs are copied
    /// when their peers move, their ports do not).
    pub ports: Option<Arc<[PortAlt]>>,
}

impl ConcreteRule {
    /// Whether a connection with this peer address, destination and port matches.
    pub fn matches(&self, peer: &IpAddr, dst: &IpAddr, protocol: Protocol, port: u16) -> bool {
        self.peers.contains(peer)
            && self.ports.as_ref().is_none_or(|alts| {
                alts.iter().any(|a| {
                    a.protocol.is_none_or(|p| p == protocol)
                        && a.range.is_none_or(|(lo, hi)| (lo..=hi).contains(&port))
                        && a.only_to.as_ref().is_none_or(|to| to.contains(dst))
                })
            })
    }
}

/// The rules of one tier of a side program, in order. Shared: the programs of one compile
/// that have equal tiers hold one (see [`Engine::side_classes`]), and a program brought
/// up to date copies only the tiers that changed.
pub type Rules = Arc<[ConcreteRule]>;

/// How one pod decides one direction, in concrete terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideProgram {
    /// Peers that are always allowed: the pod's own addresses, and for ingress the
    /// addresses of its node (node-local traffic, when allowed).
    pub exempt: BTreeSet<IpAddr>,
    /// Admin tier rules in order (Allow / Deny / Pass).
    pub admin: Rules,
    /// Whether NetworkPolicies isolate the pod in this direction.
    pub isolated: bool,
    /// The isolating policies (for explanations).
    pub isolating: Arc<[Arc<PolicyInfo>]>,
    /// NetworkPolicy allow rules (when isolated).
    pub network: Rules,
    /// Baseline tier rules in order.
    pub baseline: Rules,
    /// The pod shares this address with another pod: everything but `exempt` is denied
    /// (and the tiers are empty).
    pub shared_address: Option<IpAddr>,
}

impl Engine {
    /// The pod's decision procedure for `dir` in addresses and ports.
    pub fn side_program(&self, pod: PodId, dir: Direction) -> SideProgram {
        self.side_program_with(pod, dir, &ProgramCache::default())
    }

    /// The decision procedures of many pods: address sets that do not depend on the pod
    /// are computed once and shared (`Arc`), so a peer selecting every pod costs its
    /// addresses once, not once per subject.
    pub fn side_programs(&self, pods: &[PodId], dir: Direction) -> Vec<SideProgram> {
        let cache = ProgramCache::default();
        pods.iter()
            .map(|&p| self.side_program_with(p, dir, &cache))
            .collect()
    }

    /// The decision procedures of many pods, once per class of pods that every policy
    /// treats alike (same namespace, labels, container ports when a policy names a port,
    /// shared address and network mode): `class_of[i]` is the class of `pods[i]`, and each class's program is
    /// every member's [`Engine::side_program`] with an empty `exempt` (the members differ
    /// only there: see [`Engine::side_exempt`]).
    pub fn side_classes(&self, pods: &[PodId], dir: Direction) -> SideClasses {
        self.side_classes_with(pods, dir, &ProgramCache::default())
    }

    /// [`Engine::side_classes`], with the addresses of pod sets kept in `cache` (and
    /// those it has taken from it).
    pub fn side_classes_cached(
        &self,
        pods: &[PodId],
        dir: Direction,
        cache: &Arc<AddressCache>,
    ) -> SideClasses {
        self.side_classes_with(pods, dir, &ProgramCache::sharing(self, cache))
    }

    /// [`Engine::side_classes`] with the address sets of `cache` (computed for this
    /// engine as it is) reused and the new ones left in it.
    pub(crate) fn side_classes_with(
        &self,
        pods: &[PodId],
        dir: Direction,
        cache: &ProgramCache,
    ) -> SideClasses {
        let named = self.uses_named_ports();
        let mut index: HashMap<ClassKey<'_>, usize> = HashMap::new();
        let mut out = SideClasses::default();
        for &pod in pods {
            let key = self.class_key(pod, named);
            let next = out.programs.len();
            let class = *index.entry(key.clone()).or_insert(next);
            if class == next {
                let mut program = self.side_program_with(pod, dir, cache);
                program.exempt.clear();
                for tier in [
                    &mut program.admin,
                    &mut program.network,
                    &mut program.baseline,
                ] {
                    *tier = cache.shared_tier(std::mem::take(tier));
                }
                out.programs.push(program);
                out.ids.push(self.class_digest(pod, &key));
            }
            out.class_of.push(class);
        }
        out
    }

    /// The id [`Engine::side_classes`] gives the class of `pod`: pods with one id have one
    /// program (up to their exemptions).
    pub fn class_id(&self, pod: PodId) -> u64 {
        let key = self.class_key(pod, self.uses_named_ports());
        self.class_digest(pod, &key)
    }

    fn class_key(&self, pod: PodId, named: bool) -> ClassKey<'_> {
        let p = &self.cluster.pods[pod];
        ClassKey {
            namespace: self.pod_ns[pod],
            labels: &p.labels,
            ports: if named { Some(&p.ports) } else { None },
            shared_address: self.shared_address(pod),
            host_network: p.host_network,
        }
    }

    fn class_digest(&self, pod: PodId, key: &ClassKey<'_>) -> u64 {
        palisade_model::digest::fnv64(&format!(
            "{}\n{:?}\n{:?}\n{:?}\n{}",
            self.cluster.pods[pod].namespace,
            key.labels,
            key.ports,
            key.shared_address,
            key.host_network
        ))
    }

    /// The peers `pod` always allows in `dir`: its own addresses, and for ingress (when
    /// node-local traffic is allowed and the pod shares no address) its node's addresses.
    pub fn side_exempt(&self, pod: PodId, dir: Direction) -> BTreeSet<IpAddr> {
        let p = &self.cluster.pods[pod];
        let mut exempt: BTreeSet<IpAddr> = p.ips.iter().copied().collect();
        if self.shared_address(pod).is_none()
            && dir == Direction::Ingress
            && self.options.allow_node_local
            && let Some(n) = self.pod_node[pod]
        {
            exempt.extend(
                self.cluster.nodes[n]
                    .addresses
                    .iter()
                    .filter(|ip| self.ip_owner.get(ip) == Some(&Owner::Node(n))),
            );
        }
        exempt
    }

    fn side_program_with(&self, pod: PodId, dir: Direction, cache: &ProgramCache) -> SideProgram {
        let exempt = self.side_exempt(pod, dir);
        if let Some(ip) = self.shared_address(pod) {
            return SideProgram {
                exempt,
                admin: Rules::default(),
                isolated: false,
                isolating: Arc::from([]),
                network: Rules::default(),
                baseline: Rules::default(),
                shared_address: Some(ip),
            };
        }
        let lists = self.policies(pod, dir);
        let admin = self.admin_tier(&lists.admin, pod, dir, cache);
        let baseline = self.admin_tier(&lists.baseline, pod, dir, cache);
        let isolated = self.isolated(pod, dir);
        let isolating = if isolated {
            self.isolating(pod, dir)
        } else {
            Arc::from([])
        };
        let network = if isolated {
            self.counting_nps(pod, dir)
                .flat_map(|i| self.np_rules(i, pod, dir, cache))
                .collect()
        } else {
            Rules::default()
        };
        SideProgram {
            exempt,
            admin,
            isolated,
            isolating,
            network,
            baseline,
            shared_address: None,
        }
    }

    /// `program` (of `pod`'s class in `dir`) with its admin and baseline tiers as they are
    /// now.
    pub(crate) fn with_admin_tiers(
        &self,
        program: &SideProgram,
        pod: PodId,
        dir: Direction,
        cache: &ProgramCache,
    ) -> SideProgram {
        if self.shared_address(pod).is_some() {
            // Its programs have no tiers (see `side_program_with`).
            return program.clone();
        }
        let lists = self.policies(pod, dir);
        SideProgram {
            admin: cache.shared_tier(self.admin_tier(&lists.admin, pod, dir, cache)),
            baseline: cache.shared_tier(self.admin_tier(&lists.baseline, pod, dir, cache)),
            ..program.clone()
        }
    }

    /// The concrete rules of the admin or baseline policies `list` for `pod` in `dir`, built
    /// once per list with `cache` when each policy of it has the same rules for every
    /// subject ([`Engine::admin_rules_alike`]).
    fn admin_tier(&self, list: &[u32], pod: PodId, dir: Direction, cache: &ProgramCache) -> Rules {
        let build = || {
            (list.iter())
                .flat_map(|&i| self.admin_rules(i, pod, dir, cache))
                .collect()
        };
        // Only lists alike for every subject are kept: a list found is one of them.
        let tiers = &cache.admin_tiers[dir as usize];
        if let Some(tier) = tiers.borrow().get(list) {
            return Arc::clone(tier);
        }
        let tier: Rules = build();
        if list.iter().all(|&i| self.admin_rules_alike(i, dir)) {
            tiers.borrow_mut().insert(list.to_vec(), Arc::clone(&tier));
        }
        tier
    }

    /// Whether admin policy `i` has the same rules in `dir` for every subject pod: none
    /// of its peers is relative to the subject's namespace (`sameLabels`, `notSameLabels`),
    /// and in ingress none of its ports is named (a named port resolves against the
    /// subject's container ports there, against the peer's in egress).
    pub fn admin_rules_alike(&self, i: u32, dir: Direction) -> bool {
        let compiled = self.admins[i as usize].rules(dir);
        let rules = self.cluster.admin_policies[i as usize].rules(dir);
        let relative = (compiled.iter().flat_map(|r| &r.peers))
            .any(|p| matches!(p, AdminPeerC::Related { .. }));
        let named = || {
            (rules.iter().flat_map(|r| r.ports.iter().flatten()))
                .any(|p| matches!(p, AdminPort::Named(_)))
        };
        !relative && (dir == Direction::Egress || !named())
    }

    /// Addresses owned by the pods of a set.
    fn pod_addrs<'s>(
        &'s self,
        pods: impl Iterator<Item = PodId> + 's,
        cache: &'s ProgramCache,
    ) -> impl Iterator<Item = IpAddr> + 's {
        let owns_all = cache.owns_all.get_or_init(|| match &cache.shared {
            Some(shared) => shared.owns_all(|| self.owns_all()),
            None => Arc::new(self.owns_all()),
        });
        pods.flat_map(move |i| {
            let all = owns_all.get(i.index()).copied().unwrap_or(false);
            self.cluster.pods[i]
                .ips
                .iter()
                .filter(move |ip| all || self.owns(i, ip))
                .copied()
        })
    }

    /// The addresses owned by the pods of `sets` (a rule's pod peers), computed once per
    /// union of sets.
    fn union_addrs<'a>(
        &self,
        sets: impl Iterator<Item = &'a Arc<BitSet>>,
        cache: &ProgramCache,
    ) -> Arc<BTreeSet<IpAddr>> {
        let mut sets: Vec<&Arc<BitSet>> = sets.collect();
        sets.sort_by_key(|s| Arc::as_ptr(s));
        sets.dedup_by_key(|s| Arc::as_ptr(s));
        let key: Vec<usize> = sets.iter().map(|s| Arc::as_ptr(s) as usize).collect();
        if let Some(hit) = cache.unions.borrow().get(&key) {
            return hit.clone();
        }
        let compute = || {
            self.union_from_earlier(&sets, cache).unwrap_or_else(|| {
                address_set(
                    sets.iter()
                        .flat_map(|s| self.pod_addrs(s.pods(), cache))
                        .collect(),
                )
            })
        };
        let addrs = match &cache.shared {
            Some(shared) => shared.union(&sets, compute),
            None => compute(),
        };
        cache.unions.borrow_mut().insert(key, addrs.clone());
        addrs
    }

    /// The addresses of the union of `sets` (sorted and deduplicated), from the union of
    /// the sets they were copied from ([`ProgramCache::renewed`]) when that one is known:
    /// its addresses plus or minus those of the pods that joined or left. An address is
    /// in a union when its owner is in one of the sets, so a pod in none of them now takes
    /// its addresses out, and no other pod's.
    fn union_from_earlier(
        &self,
        sets: &[&Arc<BitSet>],
        cache: &ProgramCache,
    ) -> Option<Arc<BTreeSet<IpAddr>>> {
        let shared = cache.shared.as_ref()?;
        if cache.renewed.is_empty() {
            return None;
        }
        let mut pods: Vec<PodId> = Vec::new();
        let mut was: Vec<&Arc<BitSet>> = Vec::with_capacity(sets.len());
        for &set in sets {
            let mut s = set;
            // Back through every copy (each copy is newer than its original: no cycle).
            while let Some(r) = cache.renewed.iter().find(|r| Arc::ptr_eq(&r.now, s)) {
                s = &r.was;
                pods.push(r.pod);
            }
            was.push(s);
        }
        if pods.is_empty() {
            return None;
        }
        was.sort_by_key(|s| Arc::as_ptr(s));
        was.dedup_by_key(|s| Arc::as_ptr(s));
        let earlier = shared.known_union(&was)?;
        let mut addrs = BTreeSet::clone(&earlier);
        pods.sort_unstable();
        pods.dedup();
        for pod in pods {
            let member = sets.iter().any(|s| s.contains(pod));
            for ip in self.pod_addrs(std::iter::once(pod), cache) {
                if member {
                    addrs.insert(ip);
                } else {
                    addrs.remove(&ip);
                }
            }
        }
        Some(Arc::new(addrs))
    }

    /// Whether pod `i` owns `ip` (no node, and no earlier pod, has it).
    pub(crate) fn owns(&self, i: PodId, ip: &IpAddr) -> bool {
        self.ip_owner.get(ip) == Some(&Owner::Pod(i))
    }

    /// Destination-pod resolutions of a named port: one alternative per (protocol, number),
    /// towards the addresses of every pod that resolves it so.
    fn named_everywhere(
        &self,
        name: &str,
        protocol: Option<Protocol>,
        cache: &ProgramCache,
    ) -> Vec<PortAlt> {
        let key = (name.to_string(), protocol);
        if let Some(hit) = cache.named.borrow().get(&key) {
            return hit.clone();
        }
        let alts = match &cache.shared {
            Some(shared) => shared.named(&key, || self.resolve_named(name, protocol, cache)),
            None => self.resolve_named(name, protocol, cache),
        };
        cache.named.borrow_mut().insert(key, alts.clone());
        alts
    }

    /// [`Engine::named_everywhere`], computed.
    fn resolve_named(
        &self,
        name: &str,
        protocol: Option<Protocol>,
        cache: &ProgramCache,
    ) -> Vec<PortAlt> {
        let mut by_number: std::collections::BTreeMap<(Protocol, u16), BTreeSet<IpAddr>> =
            std::collections::BTreeMap::new();
        for i in self.subjects.pods() {
            for cp in &self.cluster.pods[i].ports {
                if cp.name.as_deref() == Some(name) && protocol.is_none_or(|p| p == cp.protocol) {
                    by_number
                        .entry((cp.protocol, cp.port.get()))
                        .or_default()
                        .extend(self.pod_addrs(std::iter::once(i), cache));
                }
            }
        }
        by_number
            .into_iter()
            .filter(|(_, to)| !to.is_empty())
            .map(|((p, n), to)| PortAlt {
                protocol: Some(p),
                range: Some((n, n)),
                only_to: Some(Arc::new(to)),
            })
            .collect()
    }

    /// A named port resolved for a flow whose destination pod is `subject` (ingress).
    fn named_on(&self, subject: PodId, name: &str, protocol: Option<Protocol>) -> Vec<PortAlt> {
        self.cluster.pods[subject]
            .ports
            .iter()
            .filter(|cp| {
                cp.name.as_deref() == Some(name) && protocol.is_none_or(|p| p == cp.protocol)
            })
            .map(|cp| PortAlt {
                protocol: Some(cp.protocol),
                range: Some((cp.port.get(), cp.port.get())),
                only_to: None,
            })
            .collect()
    }

    /// The addresses of NetworkPolicy `i`'s rule `index` in `dir` (`c`): they do not
    /// depend on the subject pod, so they are computed once per cache.
    pub(crate) fn np_peers(
        &self,
        i: u32,
        dir: Direction,
        index: usize,
        c: &NpRule,
        cache: &ProgramCache,
    ) -> PeerAddrs {
        cache.peers(PolicySlot::Network(i), dir, index, None, || {
            match &c.peers {
                None => PeerAddrs::any(),
                Some(list) => {
                    let pods = list.iter().filter_map(|peer| match peer {
                        NpPeer::Pods(set) => Some(set),
                        NpPeer::IpBlock(_) => None,
                    });
                    let blocks = list.iter().filter_map(|peer| match peer {
                        NpPeer::IpBlock(b) => Some((b.cidr, b.except.clone())),
                        NpPeer::Pods(_) => None,
                    });
                    PeerAddrs {
                        any: false,
                        addrs: self.union_addrs(pods, cache),
                        blocks: blocks.collect(),
                        domains: Vec::new(),
                    }
                }
            }
        })
    }

    fn np_rules(
        &self,
        i: u32,
        pod: PodId,
        dir: Direction,
        cache: &ProgramCache,
    ) -> Vec<ConcreteRule> {
        let model = &self.cluster.network_policies[i as usize];
        let compiled = self.nps[i as usize].rules(dir);
        compiled
            .iter()
            .zip(model.rules(dir))
            .enumerate()
            .filter_map(|(index, (c, _m)): (usize, (&NpRule, _))| {
                let peers = self.np_peers(i, dir, index, c, cache);
                let ports = c.ports.as_ref().map(|entries| {
                    entries
                        .iter()
                        .flat_map(|e| match &e.port {
                            PortSpec::Any => vec![PortAlt {
                                protocol: Some(e.protocol),
                                range: None,
                                only_to: None,
                            }],
                            PortSpec::Range(r) => vec![PortAlt {
                                protocol: Some(e.protocol),
                                range: Some((r.start.get(), r.end.get())),
                                only_to: None,
                            }],
                            PortSpec::Named(n) => match dir {
                                Direction::Ingress => self.named_on(pod, n, Some(e.protocol)),
                                Direction::Egress => {
                                    self.named_everywhere(n, Some(e.protocol), cache)
                                }
                            },
                        })
                        .collect::<Vec<_>>()
                });
                let rule = RuleMatch {
                    policy: self.nps[i as usize].info.clone(),
                    direction: dir,
                    index: index as u32,
                    action: Action::Allow,
                    fail_closed: false,
                };
                let useless = peers.is_empty() || ports.as_ref().is_some_and(Vec::is_empty);
                (!useless).then(|| ConcreteRule {
                    rule,
                    peers,
                    ports: ports.map(Arc::from),
                })
            })
            .collect()
    }

    /// The addresses of admin policy `i`'s rule `index` in `dir` for `subject` (only
    /// peers relative to the subject's namespace look at it: without a subject they hold
    /// no pod). Shared by the subjects (of a namespace, for relative peers) of one cache.
    pub(crate) fn admin_peers(
        &self,
        i: u32,
        dir: Direction,
        index: usize,
        subject: Option<PodId>,
        cache: &ProgramCache,
    ) -> PeerAddrs {
        let rule = &self.cluster.admin_policies[i as usize].rules(dir)[index];
        let c = &self.admins[i as usize].rules(dir)[index];
        let related = c
            .peers
            .iter()
            .any(|p| matches!(p, AdminPeerC::Related { .. }));
        let compute =
            || {
                if c.peers
                    .iter()
                    .all(|p| !matches!(p, AdminPeerC::Related { .. } | AdminPeerC::Nodes(_)))
                {
                    let pods = c.peers.iter().filter_map(|peer| match peer {
                        AdminPeerC::Pods(set) => Some(set),
                        _ => None,
                    });
                    let blocks = c.peers.iter().filter_map(|peer| match peer {
                        AdminPeerC::Networks(nets) => Some(nets.iter().map(|n| (*n, Vec::new()))),
                        _ => None,
                    });
                    return PeerAddrs {
                        any: false,
                        addrs: self.union_addrs(pods, cache),
                        blocks: blocks.flatten().collect(),
                        domains: Vec::new(),
                    };
                }
                let mut addrs = Vec::new();
                let mut blocks = Vec::new();
                for (peer, model_peer) in c.peers.iter().zip(&rule.peers) {
                    match peer {
                        AdminPeerC::Pods(set) => addrs.extend(self.pod_addrs(set.pods(), cache)),
                        AdminPeerC::Related { .. } => {
                            let members = self.subjects.pods().filter(|&q| {
                                subject.is_some_and(|s| self.related_peer_has(model_peer, s, q))
                            });
                            addrs.extend(self.pod_addrs(members, cache));
                        }
                        AdminPeerC::Nodes(sel) => {
                            for (n, node) in self.cluster.nodes.iter().enumerate() {
                                if sel.matches(&node.labels) {
                                    addrs.extend(node.addresses.iter().filter(|ip| {
                                        self.ip_owner.get(ip) == Some(&Owner::Node(n))
                                    }));
                                }
                            }
                        }
                        AdminPeerC::Networks(nets) => {
                            blocks.extend(nets.iter().map(|n| (*n, Vec::new())))
                        }
                        AdminPeerC::Unsupported => {}
                    }
                }
                PeerAddrs {
                    any: false,
                    addrs: address_set(addrs),
                    blocks,
                    domains: Vec::new(),
                }
            };
        // Peers relative to the subject's namespace are per namespace; the others are
        // shared.
        let namespace = subject.filter(|_| related).map(|s| self.pod_ns[s]);
        let compute = || {
            let mut peers = compute();
            if self.cluster.dns.is_none() {
                peers.domains = learned_domains(&rule.peers);
            }
            peers
        };
        cache.peers(PolicySlot::Admin(i), dir, index, namespace, compute)
    }

    fn admin_rules(
        &self,
        i: u32,
        subject: PodId,
        dir: Direction,
        cache: &ProgramCache,
    ) -> Vec<ConcreteRule> {
        let policy = &self.cluster.admin_policies[i as usize];
        let compiled = self.admins[i as usize].rules(dir);
        let mut out = Vec::new();
        for (index, (rule, c)) in policy.rules(dir).iter().zip(compiled).enumerate() {
            let fail_closed = c.fail_closed;
            let mut m = RuleMatch {
                policy: self.admins[i as usize].info.clone(),
                direction: dir,
                index: index as u32,
                action: rule.action,
                fail_closed: false,
            };
            // "For Deny and Pass rules, fail closed means: treat the rule as a 'Deny all' rule".
            if fail_closed && rule.action != Action::Allow {
                m.action = Action::Deny;
                m.fail_closed = true;
                out.push(ConcreteRule {
                    rule: m,
                    peers: PeerAddrs::any(),
                    ports: None,
                });
                continue;
            }
            let peers = self.admin_peers(i, dir, index, Some(subject), cache);
            let ports = rule.ports.as_ref().map(|entries| {
                entries
                    .iter()
                    .flat_map(|e| match e {
                        AdminPort::Ports { protocol, range } => {
                            vec![PortAlt {
                                protocol: Some(*protocol),
                                range: range.map(|r| (r.start.get(), r.end.get())),
                                only_to: None,
                            }]
                        }
                        AdminPort::Named(n) => match dir {
                            Direction::Ingress => self.named_on(subject, n, None),
                            Direction::Egress => self.named_everywhere(n, None, cache),
                        },
                    })
                    .collect::<Vec<_>>()
            });
            if peers.is_empty() || ports.as_ref().is_some_and(Vec::is_empty) {
                continue;
            }
            out.push(ConcreteRule {
                rule: m,
                peers,
                ports: ports.map(Arc::from),
            });
        }
        out
    }

    /// Whether pod `q` is in a namespace-relative admin peer of `subject`.
    fn related_peer_has(&self, peer: &AdminPeer, subject: PodId, q: PodId) -> bool {
        match peer {
            AdminPeer::Namespaces(m) => self.namespace_related(m, subject, q),
            AdminPeer::Pods { namespaces, pods } => {
                self.namespace_related(namespaces, subject, q)
                    && pods.matches(&self.cluster.pods[q].labels)
            }
            _ => false,
        }
    }
}

/// The `domainNames` peers among `peers`, one entry per distinct pattern list.
fn learned_domains(peers: &[AdminPeer]) -> Vec<LearnedDomains> {
    let mut out: Vec<LearnedDomains> = peers
        .iter()
        .filter_map(|p| match p {
            AdminPeer::DomainNames(patterns) => Some(LearnedDomains {
                patterns: Arc::new(patterns.clone()),
            }),
            _ => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Side programs by class: see [`Engine::side_classes`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SideClasses {
    /// One program per class (with an empty `exempt`).
    pub programs: Vec<SideProgram>,
    /// The class of each pod, in the order the pods were given.
    pub class_of: Vec<usize>,
    /// Per class, a digest of what its members have in common (namespace, labels, and the
    /// container ports when they count): the same while the class exists, whatever else
    /// changes.
    pub ids: Vec<u64>,
}

/// What a pod's side program depends on besides its exemptions.
#[derive(Clone, PartialEq, Eq, Hash)]
struct ClassKey<'a> {
    namespace: usize,
    labels: &'a palisade_model::Labels,
    ports: Option<&'a Vec<palisade_model::ContainerPort>>,
    shared_address: Option<IpAddr>,
    /// Host-network pods are no policy's subjects.
    host_network: bool,
}

/// A rule's peers: policy, direction, rule index, and for rules with peers relative to the
/// subject's namespace, that namespace.
type RuleKey = (PolicySlot, Direction, usize, Option<usize>);

/// A named port and the protocol it must have (`None`: any).
pub(crate) type NamedKey = (String, Option<Protocol>);

/// Address sets that do not depend on the subject pod, computed once per compile (and
/// the unions of pod sets once per [`AddressCache`], when it has one).
#[derive(Default)]
pub(crate) struct ProgramCache {
    /// Per pod, whether it owns every one of its addresses (most do: then its addresses
    /// need no lookup in the owner table).
    owns_all: OnceCell<Arc<Vec<bool>>>,
    /// Unions of pod sets and `owns_all` kept beyond this cache.
    shared: Option<Arc<AddressCache>>,
    /// Sets copied since `shared`'s unions were computed, whose unions are brought up to
    /// date from those.
    renewed: Vec<RenewedSet>,
    rules: RefCell<HashMap<RuleKey, PeerAddrs>>,
    named: RefCell<HashMap<NamedKey, Vec<PortAlt>>>,
    /// The addresses of a union of shared pod sets, by the sets (their addresses: the
    /// engine holds every set while a cache is in use): rules of many policies repeat a
    /// few peers.
    unions: RefCell<HashMap<Vec<usize>, Arc<BTreeSet<IpAddr>>>>,
    /// The tiers of the programs made with this cache, by a hash of their rules' identity:
    /// equal tiers are kept once.
    tiers: RefCell<FastMap<u64, Vec<Rules>>>,
    /// Per direction (ingress, egress), the admin or baseline tier of each list of
    /// policies whose rules are alike for every subject.
    admin_tiers: [RefCell<FastMap<Vec<u32>, Rules>>; 2],
}

impl ProgramCache {
    /// `tier`, or an equal tier a program made with this cache holds already.
    fn shared_tier(&self, tier: Rules) -> Rules {
        if tier.is_empty() {
            return tier;
        }
        let mut h = FastHasher::default();
        for r in tier.iter() {
            (Arc::as_ptr(&r.rule.policy) as usize).hash(&mut h);
            r.rule.index.hash(&mut h);
            (Arc::as_ptr(&r.peers.addrs) as usize).hash(&mut h);
        }
        let mut tiers = self.tiers.borrow_mut();
        let same = tiers.entry(h.finish()).or_default();
        match same.iter().find(|t| ***t == *tier) {
            Some(t) => Arc::clone(t),
            None => {
                same.push(Arc::clone(&tier));
                tier
            }
        }
    }

    /// A cache that keeps its unions of pod sets in `shared` too, for `engine`.
    pub(crate) fn sharing(engine: &Engine, shared: &Arc<AddressCache>) -> ProgramCache {
        shared.sync(engine);
        ProgramCache {
            shared: Some(Arc::clone(shared)),
            ..ProgramCache::default()
        }
    }

    /// This cache, bringing unions of the sets `renewed` copied up to date from the unions
    /// of the sets they were copied from.
    pub(crate) fn renewed(self, renewed: &[RenewedSet]) -> ProgramCache {
        ProgramCache {
            renewed: renewed.to_vec(),
            ..self
        }
    }

    fn peers(
        &self,
        policy: PolicySlot,
        dir: Direction,
        rule: usize,
        namespace: Option<usize>,
        compute: impl FnOnce() -> PeerAddrs,
    ) -> PeerAddrs {
        let key = (policy, dir, rule, namespace);
        if let Some(hit) = self.rules.borrow().get(&key) {
            return hit.clone();
        }
        let value = compute();
        self.rules.borrow_mut().insert(key, value.clone());
        value
    }
}

/// A set of addresses built at once (sorted first: a bulk build, not one insert each).
fn address_set(mut addrs: Vec<IpAddr>) -> Arc<BTreeSet<IpAddr>> {
    addrs.sort_unstable();
    addrs.dedup();
    Arc::new(addrs.into_iter().collect())
}
