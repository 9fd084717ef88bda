//! The matrix a row at a time: for one subject class, per probe, the peer classes its side
//! allows (egress at a source, ingress at a destination), as set operations over the
//! classes each rule's peers and ports cover, tier by tier: admin rules in order narrow the
//! undecided classes, then NetworkPolicy isolation and allow sets, then baseline, then the
//! default. [`Engine::evaluate`] is the same decision for one flow; the two are tested
//! against each other on random clusters.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use palisade_engine::rule_parts::{PortEntry, admin_port_entry, np_port_entry};
use palisade_engine::{
    AdminPeerC, BitSet, EndpointKind, Engine, FastMap, FastSet, NpPeer, NpRule, PodId,
    intersect_transposed,
};
use palisade_model::{Action, AdminPort, Direction, IpBlock, NamespaceMatch, PortSpec, Protocol};

use crate::probes::Probe;

/// Which address of a peer class a rule sees: its own as a source, or the one of the
/// source's family as a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Role {
    Source = 0,
    DestinationV4 = 1,
    DestinationV6 = 2,
}

/// The classes a rule peer covers.
#[derive(Debug)]
enum PeerSet<'e> {
    /// The same classes for every subject and address family.
    Fixed(Arc<BitSet>),
    /// By the address the rule sees ([`Role`]); shared by equal CIDR lists.
    ByRole(Arc<[BitSet; 3]>),
    /// Classes whose pods match, when their namespace relates to the subject's.
    Related {
        pods: BitSet,
        namespaces: &'e NamespaceMatch,
    },
}

/// A rule's peers: `None` covers every class.
type RulePeers<'e> = Option<Vec<PeerSet<'e>>>;

/// What an admin tier leaves, per probe: the classes an Allow decided, and those the next
/// tiers decide (no rule decided them, or a Pass sent them on).
struct AdminOutcome {
    allowed: Vec<BitSet>,
    open: Vec<BitSet>,
}

/// A rule's ports against one probe, decided for every subject at once.
enum PortHit {
    No,
    All,
    /// Ingress named ports: they match when the subject class declares one (is in the set).
    IfSubjectIn(Arc<BitSet>),
    /// Egress named ports: towards the destination classes that declare one.
    To(Arc<BitSet>),
}

impl PortHit {
    /// For subject class `s`: `None` when the ports do not match, else the destination
    /// classes they are limited to (`None`: every class).
    fn for_subject(&self, s: usize) -> Option<Option<&BitSet>> {
        match self {
            PortHit::No => None,
            PortHit::All => Some(None),
            PortHit::IfSubjectIn(classes) => classes.contains(s).then_some(None),
            PortHit::To(classes) => Some(Some(classes)),
        }
    }
}

/// Reusable sets of one worker.
struct Scratch {
    peers: BitSet,
    /// Per probe, the NetworkPolicy tier of the class at hand.
    network: Vec<BitSet>,
    /// The tier's peers taken whole on several probes, by the probes (a bit each).
    patterns: Vec<(u64, BitSet)>,
}

/// The classes of a matrix, compiled for row evaluation.
pub(crate) struct Rows<'e> {
    engine: &'e Engine,
    /// Each class's representative pod.
    reps: &'e [PodId],
    kinds: Vec<EndpointKind>,
    /// Per class: its address as a source, and as a destination of an IPv4 / IPv6 source.
    addrs: [Vec<IpAddr>; 3],
    probes: &'e [Probe],
    /// `[policy][direction][rule]`.
    np_peers: Vec<[Vec<RulePeers<'e>>; 2]>,
    admin_peers: Vec<[Vec<Vec<PeerSet<'e>>>; 2]>,
    /// Per (port name, protocol it must have) and probe: the pod classes that declare it.
    named: HashMap<(&'e str, Option<Protocol>), Vec<Arc<BitSet>>>,
    /// `[policy][direction][rule][probe]`: whether a NetworkPolicy rule's ports match.
    np_ports: Vec<[Vec<Vec<PortHit>>; 2]>,
    /// The same for the admin policies' rules.
    admin_ports: Vec<[Vec<Vec<PortHit>>; 2]>,
    full: BitSet,
}

fn dir_index(dir: Direction) -> usize {
    match dir {
        Direction::Ingress => 0,
        Direction::Egress => 1,
    }
}

impl<'e> Rows<'e> {
    /// Compiles every rule's peers into class sets. `reps[c]` stands for class `c`; every
    /// representative has an endpoint.
    pub fn new(engine: &'e Engine, reps: &'e [PodId], probes: &'e [Probe]) -> Rows<'e> {
        let n = reps.len();
        let ep = |c: usize, family: Option<bool>| engine.endpoint_for_pod(reps[c], family);
        let mut kinds = Vec::with_capacity(n);
        let mut addrs: [Vec<IpAddr>; 3] = Default::default();
        for c in 0..n {
            let unspecified = IpAddr::from([0u8; 4]);
            let src = ep(c, None);
            kinds.push(src.map_or(EndpointKind::External, |e| e.kind));
            addrs[0].push(src.map_or(unspecified, |e| e.ip));
            addrs[1].push(ep(c, Some(false)).map_or(unspecified, |e| e.ip));
            addrs[2].push(ep(c, Some(true)).map_or(unspecified, |e| e.ip));
        }
        let mut rows = Rows {
            engine,
            reps,
            kinds,
            addrs,
            probes,
            np_peers: Vec::new(),
            admin_peers: Vec::new(),
            named: HashMap::new(),
            np_ports: Vec::new(),
            admin_ports: Vec::new(),
            full: BitSet::full(n),
        };
        rows.compile_peers();
        rows.compile_named_ports();
        rows.compile_ports();
        rows
    }

    fn len(&self) -> usize {
        self.reps.len()
    }

    fn compile_peers(&mut self) {
        use rayon::prelude::*;
        let e = self.engine;
        let n = self.len();
        // Pod sets become class sets through the representatives.
        let mut class_of_rep = vec![u32::MAX; e.cluster().pods.len()];
        let mut rep_mask = BitSet::new(e.cluster().pods.len());
        for (c, &rep) in self.reps.iter().enumerate() {
            if matches!(self.kinds[c], EndpointKind::Pod(_)) {
                class_of_rep[rep] = c as u32;
                rep_mask.insert(rep);
            }
        }
        // Every distinct pod set, ipBlock and CIDR list the peers name, each made a class
        // set once, in parallel. Peers with the same selectors share one pod set (see
        // `PeerSets`), which the engine keeps: it is known by its address.
        let mut pod_sets: FastMap<usize, &'e Arc<BitSet>> = FastMap::default();
        let mut blocks: FastSet<&'e IpBlock> = FastSet::default();
        let mut networks: FastSet<&'e [IpNet]> = FastSet::default();
        let np_rules = e
            .network_policies()
            .iter()
            .flat_map(|np| [&np.ingress, &np.egress]);
        for peer in np_rules.flatten().flat_map(|r| r.peers.iter().flatten()) {
            match peer {
                NpPeer::Pods(set) => {
                    pod_sets.insert(Arc::as_ptr(set) as usize, set);
                }
                NpPeer::IpBlock(b) => {
                    blocks.insert(b);
                }
            }
        }
        let admin_rules = e
            .admin_policies()
            .iter()
            .flat_map(|a| [&a.ingress, &a.egress]);
        for peer in admin_rules.flatten().flat_map(|r| &r.peers) {
            match peer {
                AdminPeerC::Pods(set) => {
                    pod_sets.insert(Arc::as_ptr(set) as usize, set);
                }
                AdminPeerC::Networks(nets) => {
                    networks.insert(nets);
                }
                _ => {}
            }
        }
        let pod_sets: FastMap<usize, Arc<BitSet>> = (pod_sets.into_iter().collect::<Vec<_>>())
            .into_par_iter()
            .map(|(at, set)| {
                let mut out = BitSet::new(n);
                for pod in set.iter_within(&rep_mask, 0..usize::MAX) {
                    out.insert(class_of_rep[pod] as usize);
                }
                (at, Arc::new(out))
            })
            .collect();
        let by_role = |inside: &(dyn Fn(&IpAddr) -> bool + Sync)| -> Arc<[BitSet; 3]> {
            Arc::new(std::array::from_fn(|role| {
                let mut s = BitSet::new(n);
                for (c, ip) in self.addrs[role].iter().enumerate() {
                    if inside(ip) {
                        s.insert(c);
                    }
                }
                s
            }))
        };
        let blocks: FastMap<&'e IpBlock, Arc<[BitSet; 3]>> = (blocks.into_iter())
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|b| (b, by_role(&|ip| b.contains(ip))))
            .collect();
        let networks: FastMap<&'e [IpNet], Arc<[BitSet; 3]>> = (networks.into_iter())
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|nets| (nets, by_role(&|ip| nets.iter().any(|net| net.contains(ip)))))
            .collect();
        let pods =
            |set: &Arc<BitSet>| PeerSet::Fixed(pod_sets[&(Arc::as_ptr(set) as usize)].clone());
        let np_rules = |rules: &'e [NpRule]| -> Vec<RulePeers<'e>> {
            (rules.iter())
                .map(|r| {
                    r.peers.as_ref().map(|peers| {
                        (peers.iter())
                            .map(|p| match p {
                                NpPeer::Pods(set) => pods(set),
                                NpPeer::IpBlock(b) => PeerSet::ByRole(blocks[b].clone()),
                            })
                            .collect()
                    })
                })
                .collect()
        };
        let np_peers = (e.network_policies().par_iter())
            .map(|np| [np_rules(&np.ingress), np_rules(&np.egress)])
            .collect();
        let admin_peer = |p: &'e AdminPeerC| -> Option<PeerSet<'e>> {
            Some(match p {
                AdminPeerC::Pods(set) => pods(set),
                AdminPeerC::Related { namespaces, pods } => {
                    let mut s = BitSet::new(n);
                    for (c, &rep) in self.reps.iter().enumerate() {
                        if matches!(self.kinds[c], EndpointKind::Pod(_))
                            && pods.matches(&e.cluster().pods[rep].labels)
                        {
                            s.insert(c);
                        }
                    }
                    PeerSet::Related {
                        pods: s,
                        namespaces,
                    }
                }
                AdminPeerC::Nodes(sel) => {
                    let mut s = BitSet::new(n);
                    for (c, kind) in self.kinds.iter().enumerate() {
                        if matches!(kind, EndpointKind::Host(Some(node)) if sel.matches(&e.cluster().nodes[*node].labels))
                        {
                            s.insert(c);
                        }
                    }
                    PeerSet::Fixed(Arc::new(s))
                }
                AdminPeerC::Networks(nets) => PeerSet::ByRole(networks[nets.as_slice()].clone()),
                AdminPeerC::Unsupported => return None,
            })
        };
        let admin_peers = (e.admin_policies().par_iter())
            .map(|a| {
                [&a.ingress, &a.egress].map(|rules| {
                    (rules.iter())
                        .map(|r| r.peers.iter().filter_map(admin_peer).collect())
                        .collect()
                })
            })
            .collect();
        self.np_peers = np_peers;
        self.admin_peers = admin_peers;
    }

    /// "Named ports ... in an ingress rule they resolve against the destination (the
    /// selected) pod's container ports; in an egress rule against the destination peer pod.
    /// Name and protocol must both match."
    fn compile_named_ports(&mut self) {
        let e = self.engine;
        let mut names: Vec<(&'e str, Option<Protocol>)> = Vec::new();
        for np in &e.cluster().network_policies {
            for r in np.ingress.iter().chain(&np.egress) {
                for p in r.ports.iter().flatten() {
                    if let PortSpec::Named(name) = &p.port {
                        names.push((name, Some(p.protocol)));
                    }
                }
            }
        }
        for a in &e.cluster().admin_policies {
            for r in a.ingress.iter().chain(&a.egress) {
                for p in r.ports.iter().flatten() {
                    if let AdminPort::Named(name) = p {
                        names.push((name, None));
                    }
                }
            }
        }
        names.sort_unstable();
        names.dedup();
        let n = self.len();
        for (name, protocol) in names {
            let sets = self
                .probes
                .iter()
                .map(|probe| {
                    let mut s = BitSet::new(n);
                    for (c, kind) in self.kinds.iter().enumerate() {
                        let EndpointKind::Pod(pod) = *kind else {
                            continue;
                        };
                        if e.cluster().pods[pod].ports.iter().any(|cp| {
                            cp.name.as_deref() == Some(name)
                                && protocol.is_none_or(|p| p == cp.protocol)
                                && cp.protocol == probe.protocol
                                && cp.port.get() == probe.port
                        }) {
                            s.insert(c);
                        }
                    }
                    Arc::new(s)
                })
                .collect();
            self.named.insert((name, protocol), sets);
        }
    }

    /// The classes a named port matches on probe `p` as a destination.
    fn named(&self, name: &'e str, protocol: Option<Protocol>, p: usize) -> Option<&Arc<BitSet>> {
        self.named.get(&(name, protocol)).and_then(|v| v.get(p))
    }

    /// Decides every rule's ports against every probe, once for all subjects.
    fn compile_ports(&mut self) {
        use rayon::prelude::*;
        let e = self.engine;
        // Per rule and probe; `entries` gives a rule's port entries against a probe
        // (`None`: the rule has no ports, and matches every one).
        let hits = |dir: Direction, entries: &dyn Fn(Probe) -> Option<Vec<PortEntry<'e>>>| {
            (0..self.probes.len())
                .map(|p| self.port_hit(entries(self.probes[p]), dir, p))
                .collect::<Vec<_>>()
        };
        let np_ports = (e.network_policies().par_iter())
            .map(|np| {
                [Direction::Ingress, Direction::Egress].map(|dir| {
                    (np.rules(dir).iter())
                        .map(|rule| {
                            hits(dir, &|probe| {
                                let ports = rule.ports.as_deref()?;
                                let entry = |np| np_port_entry(np, probe.protocol, probe.port);
                                Some(ports.iter().map(entry).collect())
                            })
                        })
                        .collect()
                })
            })
            .collect();
        let admin_ports = (e.cluster().admin_policies.par_iter())
            .map(|a| {
                [Direction::Ingress, Direction::Egress].map(|dir| {
                    (a.rules(dir).iter())
                        .map(|rule| {
                            hits(dir, &|probe| {
                                let ports = rule.ports.as_deref()?;
                                let entry = |a| admin_port_entry(a, probe.protocol, probe.port);
                                Some(ports.iter().map(entry).collect())
                            })
                        })
                        .collect()
                })
            })
            .collect();
        self.np_ports = np_ports;
        self.admin_ports = admin_ports;
    }

    /// Whether a rule's port entries against probe `p` (`None`: the rule has no ports and
    /// matches all) match it, each decided by the numbers or a named port: "Named ports
    /// ... in an ingress rule they resolve against the destination (the selected) pod's
    /// container ports; in an egress rule against the destination peer pod".
    fn port_hit(&self, entries: Option<Vec<PortEntry<'e>>>, dir: Direction, p: usize) -> PortHit {
        let Some(entries) = entries else {
            return PortHit::All;
        };
        let mut named: Vec<&Arc<BitSet>> = Vec::new();
        for entry in entries {
            match entry {
                PortEntry::Numeric(None) => return PortHit::All,
                PortEntry::Numeric(Some(_)) => {}
                PortEntry::Named { name, protocol } => named.extend(self.named(name, protocol, p)),
            }
        }
        let classes = match named.as_slice() {
            [] => return PortHit::No,
            [one] => Arc::clone(one),
            many => {
                let mut all = BitSet::default();
                for set in many {
                    all.union(set);
                }
                Arc::new(all)
            }
        };
        match dir {
            Direction::Ingress => PortHit::IfSubjectIn(classes),
            Direction::Egress => PortHit::To(classes),
        }
    }

    /// Sets for one worker to reuse from class to class.
    fn scratch(&self) -> Scratch {
        let n = self.len();
        Scratch {
            peers: BitSet::new(n),
            network: vec![BitSet::new(n); self.probes.len()],
            patterns: Vec::new(),
        }
    }

    /// Per probe, the rows `[probe][class]` of the peer classes each class's side allows in `dir`.
    pub fn sides(&self, dir: Direction) -> Vec<Vec<BitSet>> {
        use rayon::prelude::*;
        let n = self.len();
        let scratch = || self.scratch();
        // Classes with equal admin lists whose rules decide alike for every subject meet
        // the admin tier alike: it is walked once for each such list and role.
        let (shared, outcomes) = self.shared_admin_tiers(dir);
        let outcomes: Vec<AdminOutcome> = outcomes
            .par_iter()
            .map_init(scratch, |scratch, &s| self.admin_outcome(s, dir, scratch))
            .collect();
        let per_class: Vec<Vec<BitSet>> = (0..n)
            .into_par_iter()
            .map_init(scratch, |scratch, c| {
                self.side(c, dir, shared[c].map(|o| &outcomes[o]), scratch)
            })
            .collect();
        let mut out: Vec<Vec<BitSet>> = (0..self.probes.len())
            .map(|_| Vec::with_capacity(n))
            .collect();
        for rows in per_class {
            for (p, row) in rows.into_iter().enumerate() {
                out[p].push(row);
            }
        }
        out
    }

    /// Per class, the index of the admin-tier outcome it shares with the classes of equal
    /// admin lists and role, when every policy of its list decides alike for every subject;
    /// and per outcome, the class that stands for it.
    fn shared_admin_tiers(&self, dir: Direction) -> (Vec<Option<usize>>, Vec<usize>) {
        let e = self.engine;
        let alike: Vec<bool> = (0..e.admin_policies().len() as u32)
            .map(|i| e.admin_rules_alike(i, dir))
            .collect();
        let mut index: FastMap<(&'e [u32], Role), usize> = FastMap::default();
        let mut stands_for = Vec::new();
        let shared = (0..self.len())
            .map(|s| {
                let rep = self.reps[s];
                if !matches!(self.kinds[s], EndpointKind::Pod(_)) || e.shared_address(rep).is_some()
                {
                    return None;
                }
                let admin: &'e [u32] = &e.policies(rep, dir).admin;
                if !admin.iter().all(|&i| alike[i as usize]) {
                    return None;
                }
                let key = (admin, self.role(s, dir));
                Some(*index.entry(key).or_insert_with(|| {
                    stands_for.push(s);
                    stands_for.len() - 1
                }))
            })
            .collect();
        (shared, stands_for)
    }

    /// Which address of a peer class the rules of class `s`'s side see in `dir`.
    fn role(&self, s: usize, dir: Direction) -> Role {
        match dir {
            Direction::Ingress => Role::Source,
            Direction::Egress if self.addrs[0][s].is_ipv6() => Role::DestinationV6,
            Direction::Egress => Role::DestinationV4,
        }
    }

    /// Class `s`'s admin tier in `dir`, from every class undecided.
    fn admin_outcome(&self, s: usize, dir: Direction, scratch: &mut Scratch) -> AdminOutcome {
        let n = self.len();
        let probes = self.probes.len();
        let mut undecided = vec![self.full.clone(); probes];
        let mut allowed = vec![BitSet::new(n); probes];
        let mut passed = vec![BitSet::new(n); probes];
        self.admin_tier(
            &self.engine.policies(self.reps[s], dir).admin,
            (s, dir, self.role(s, dir)),
            scratch,
            &mut undecided,
            (&mut allowed, &mut passed),
        );
        // The next tiers decide the classes a Pass sent on and those no rule decided.
        for (passed, undecided) in passed.iter_mut().zip(&undecided) {
            passed.union(undecided);
        }
        AdminOutcome {
            allowed,
            open: passed,
        }
    }

    /// `[probe][from class]`: the destination classes each source class reaches.
    pub fn verdicts(&self) -> Vec<Vec<BitSet>> {
        let egress = self.sides(Direction::Egress);
        let ingress = self.sides(Direction::Ingress);
        egress
            .into_iter()
            .zip(ingress)
            .map(|(mut out, ingress)| {
                intersect_transposed(&mut out, &ingress);
                out
            })
            .collect()
    }

    /// Class `s`'s side in `dir`, per probe: the peer classes it allows; `admin` is its
    /// admin tier's outcome when another class's stands for it.
    fn side(
        &self,
        s: usize,
        dir: Direction,
        admin: Option<&AdminOutcome>,
        scratch: &mut Scratch,
    ) -> Vec<BitSet> {
        let e = self.engine;
        let rep = self.reps[s];
        let probes = self.probes.len();
        let n = self.len();
        if !matches!(self.kinds[s], EndpointKind::Pod(_)) {
            // Host endpoints are never policy subjects.
            return vec![self.full.clone(); probes];
        }
        if e.shared_address(rep).is_some() {
            return vec![BitSet::new(n); probes];
        }
        let role = self.role(s, dir);
        let lists = e.policies(rep, dir);
        // Tier 1: first matching admin rule decides; Pass goes on to NetworkPolicies.
        let own;
        let admin = match admin {
            Some(shared) => shared,
            None => {
                own = self.admin_outcome(s, dir, scratch);
                &own
            }
        };
        let mut allowed = admin.allowed.clone();
        // Tier 2: an isolated pod allows what some rule of a counting policy allows.
        if e.isolated(rep, dir) {
            let np = self.network_tier(s, dir, role, scratch);
            for ((a, open), np) in allowed.iter_mut().zip(&admin.open).zip(np) {
                a.union_of_intersection(open, np);
            }
        } else {
            // Tier 3: baseline; Pass falls through to the default, like no match.
            let mut undecided = admin.open.clone();
            let mut by_default = vec![BitSet::new(n); probes];
            self.admin_tier(
                &lists.baseline,
                (s, dir, role),
                scratch,
                &mut undecided,
                (&mut allowed, &mut by_default),
            );
            // Tier 4: allowed.
            for ((a, u), d) in allowed.iter_mut().zip(&undecided).zip(&by_default) {
                a.union(u);
                a.union(d);
            }
        }
        // The node-local exemption is not a class's: `Matrix::node_local` applies it per pod.
        allowed
    }

    /// An admin tier (admin or baseline) over the still `undecided` classes: a matching
    /// Allow adds to `allowed`, a Pass to `passed`, a Deny to neither; all leave `undecided`.
    fn admin_tier(
        &self,
        policies: &[u32],
        (s, dir, role): (usize, Direction, Role),
        scratch: &mut Scratch,
        undecided: &mut [BitSet],
        (allowed, passed): (&mut [BitSet], &mut [BitSet]),
    ) {
        let e = self.engine;
        let buf = &mut scratch.peers;
        // Per probe: whether some class is still undecided (kept as rules decide classes,
        // so that a rule that cannot decide anything costs no set operation).
        let mut open: Vec<bool> = undecided.iter().map(|u| !u.is_empty()).collect();
        let mut left = open.iter().filter(|o| **o).count();
        for &i in policies {
            let rules = e.cluster().admin_policies[i as usize].rules(dir);
            let compiled = match dir {
                Direction::Ingress => &e.admin_policies()[i as usize].ingress,
                Direction::Egress => &e.admin_policies()[i as usize].egress,
            };
            let sets = &self.admin_peers[i as usize][dir_index(dir)];
            let hits = &self.admin_ports[i as usize][dir_index(dir)];
            for (((rule, c), sets), hits) in rules.iter().zip(compiled).zip(sets).zip(hits) {
                if left == 0 {
                    return;
                }
                // "For Deny and Pass rules, fail closed means: treat the rule as a 'Deny all' rule".
                if rule.action != Action::Allow && c.fail_closed {
                    undecided.iter_mut().for_each(BitSet::clear);
                    return;
                }
                if !(0..open.len()).any(|p| open[p] && hits[p].for_subject(s).is_some()) {
                    continue;
                }
                let peers = self.peers_of(sets, s, role, buf);
                if peers.is_empty() {
                    continue;
                }
                for p in 0..self.probes.len() {
                    if !open[p] {
                        continue;
                    }
                    let Some(to) = hits[p].for_subject(s) else {
                        continue;
                    };
                    let into = match rule.action {
                        Action::Allow => Some(&mut allowed[p]),
                        Action::Pass => Some(&mut passed[p]),
                        Action::Deny => None,
                    };
                    if undecided[p].move_common(peers, to, into) && undecided[p].is_empty() {
                        open[p] = false;
                        left -= 1;
                    }
                }
            }
        }
    }

    /// The classes a rule's peer sets cover for subject class `s`: the one set itself when
    /// it is the same for every subject, else their union in `buf`.
    fn peers_of<'a>(
        &'a self,
        sets: &'a [PeerSet<'e>],
        s: usize,
        role: Role,
        buf: &'a mut BitSet,
    ) -> &'a BitSet {
        match sets {
            [PeerSet::Fixed(classes)] => classes,
            [PeerSet::ByRole(by)] => &by[role as usize],
            sets => {
                buf.clear();
                for set in sets {
                    self.add_peer(set, s, role, buf);
                }
                buf
            }
        }
    }

    /// Per probe, the peer classes some rule of a NetworkPolicy counting for class `s` in
    /// `dir` allows.
    fn network_tier<'a>(
        &self,
        s: usize,
        dir: Direction,
        role: Role,
        scratch: &'a mut Scratch,
    ) -> &'a [BitSet] {
        let e = self.engine;
        let Scratch {
            peers: buf,
            network: out,
            patterns,
            ..
        } = scratch;
        out.iter_mut().for_each(BitSet::clear);
        // Rules that take their peers whole on several probes are joined once per pattern
        // of probes (a bit per probe), and each probe takes the patterns holding it at the
        // end: a rule without ports costs one union, not one per probe.
        let mut used = 0;
        for i in e.counting_nps(self.reps[s], dir) {
            let sets = &self.np_peers[i as usize][dir_index(dir)];
            let hits = &self.np_ports[i as usize][dir_index(dir)];
            for (sets, hits) in sets.iter().zip(hits) {
                if !hits.iter().any(|h| h.for_subject(s).is_some()) {
                    continue;
                }
                let peers: &BitSet = match sets {
                    None => &self.full,
                    Some(sets) => self.peers_of(sets, s, role, buf),
                };
                if peers.is_empty() {
                    continue;
                }
                let mut whole = 0u64;
                for (p, (o, h)) in out.iter_mut().zip(hits).enumerate() {
                    match h.for_subject(s) {
                        Some(Some(to)) => o.union_of_intersection(peers, to),
                        Some(None) if p < 64 => whole |= 1 << p,
                        Some(None) => o.union(peers),
                        None => {}
                    }
                }
                if whole.count_ones() == 1 {
                    out[whole.trailing_zeros() as usize].union(peers);
                } else if whole != 0 {
                    let at = match patterns[..used].iter().position(|(m, _)| *m == whole) {
                        Some(at) => at,
                        None => {
                            if used == patterns.len() {
                                patterns.push((whole, BitSet::default()));
                            }
                            patterns[used].0 = whole;
                            patterns[used].1.clear();
                            used += 1;
                            used - 1
                        }
                    };
                    patterns[at].1.union(peers);
                }
            }
        }
        for (whole, peers) in &patterns[..used] {
            for (p, o) in out.iter_mut().enumerate().take(64) {
                if whole & (1 << p) != 0 {
                    o.union(peers);
                }
            }
        }
        out
    }

    /// Adds the classes `set` covers for subject class `s`.
    fn add_peer(&self, set: &PeerSet<'_>, s: usize, role: Role, out: &mut BitSet) {
        match set {
            PeerSet::Fixed(classes) => out.union(classes),
            PeerSet::ByRole(by) => out.union(&by[role as usize]),
            PeerSet::Related { pods, namespaces } => {
                for c in pods.iter() {
                    if self
                        .engine
                        .namespace_related(namespaces, self.reps[s], self.reps[c])
                    {
                        out.insert(c);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

    use super::*;

    /// A worker's buffers carry nothing from one class to the next: from1's egress rule
    /// (every probe, towards to1) is not from2's (towards to2).
    #[test]
    fn the_network_tier_of_a_class_owes_nothing_to_the_one_before() {
        let pod = |name: &str, ip: &str| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: a, labels: {{app: {name}}}}}\nstatus: {{podIP: {ip}}}\n---\n"
            )
        };
        let np = |name: &str, to: &str| {
            format!(
                "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: {name}, namespace: a}}\nspec: {{podSelector: {{matchLabels: {{app: {name}}}}}, policyTypes: [Egress], egress: [{{to: [{{podSelector: {{matchLabels: {{app: {to}}}}}}}]}}]}}\n---\n"
            )
        };
        let text = [
            pod("from1", "10.0.0.1"),
            pod("from2", "10.0.0.2"),
            pod("to1", "10.0.0.3"),
            pod("to2", "10.0.0.4"),
            np("from1", "to1"),
            np("from2", "to2"),
        ]
        .concat();
        let engine = Engine::new(
            palisade_model::load_str(&text).unwrap().cluster,
            palisade_engine::Options::default(),
        );
        let reps: Vec<PodId> = ["from1", "from2", "to1", "to2"]
            .map(|n| engine.pod_id("a", n).unwrap())
            .to_vec();
        let probes = [80, 81].map(|port| Probe {
            protocol: Protocol::Tcp,
            port,
        });
        let rows = Rows::new(&engine, &reps, &probes);
        let (from1, from2) = (0, 1);
        let role = rows.role(from2, Direction::Egress);
        let alone = rows
            .network_tier(from2, Direction::Egress, role, &mut rows.scratch())
            .to_vec();
        let mut scratch = rows.scratch();
        rows.network_tier(from1, Direction::Egress, role, &mut scratch);
        let after = rows.network_tier(from2, Direction::Egress, role, &mut scratch);
        assert_eq!(after, alone.as_slice());
        assert_eq!(
            alone[0].iter().collect::<Vec<_>>(),
            [3],
            "from2 reaches to2 only"
        );
    }
}
