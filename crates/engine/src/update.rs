//! Incremental updates: add, change or remove one object and update only what depends on
//! it. The result equals a full [`Engine::new`] on the changed cluster (property-tested).

use std::sync::Arc;

use palisade_model::{
    AdminPolicy, AdminTier, Change, Direction, EndpointSlice, Kind, Namespace, NetworkPolicy,
    Object, ObjectKey, Pod, Service,
};

use crate::bitset::BitSet;
use crate::state::{AdminPeerC, Engine, NpPeer, Owner, PeerSets, PodId, PodPolicies, PolicySlot};
use crate::verdict::PolicyInfo;

/// What one [`Engine::apply`] may have changed in the pods' side programs
/// ([`Engine::side_program`]): a data plane that compiled them before may keep the program
/// of every pod [`Touched::contains`] leaves out, and of the pods only
/// [`Touched::peer_subjects`] names it may keep everything but the addresses of the
/// rules in [`Touched::peers`] ([`Engine::new_peers`] gives those). Pod ids a caller
/// holds stay valid but for the removals and moves [`Touched::ids`] lists (a change that
/// removes a pod also says `all`).
#[derive(Debug, Clone, Default)]
pub struct Touched {
    /// Every pod's programs may have changed.
    pub all: bool,
    /// The pods whose programs may have changed in more than peer addresses (their own
    /// labels changed, a NetworkPolicy selecting them changed, or a peer set of theirs may
    /// have become empty or stopped being so).
    pub pods: BitSet,
    /// The pods whose admin and baseline tiers may have changed (an admin policy selecting
    /// them changed), their programs otherwise as they were unless [`Touched::pods`] holds
    /// them too. [`Touched::reshaped`] counts them.
    pub admin: BitSet,
    /// The rules whose peers gained or lost a pod (once each per change; a rule may repeat
    /// after [`Touched::merge`]).
    pub peers: Vec<PeerRule>,
    /// The subjects of the policies of [`Touched::peers`]: their programs may differ in
    /// those rules' peer addresses.
    pub peer_subjects: BitSet,
    /// The pod ids that changed meaning, in order: removing a pod frees its id, and the
    /// last pod takes it so that ids stay dense.
    pub ids: Vec<IdChange>,
    /// The peer sets of [`Touched::peers`] as copied when their pod joined or left them,
    /// in order: a data plane that kept the addresses of a set before brings them up to
    /// date from these instead of computing them anew.
    pub renewed: Vec<RenewedSet>,
}

/// A pod set of some rules' peers, copied because a pod joined or left it (the rules took
/// the copy; the set they had is unchanged).
#[derive(Debug, Clone)]
pub struct RenewedSet {
    pub(crate) was: Arc<BitSet>,
    pub(crate) now: Arc<BitSet>,
    /// The pod that joined or left.
    pub(crate) pod: PodId,
}

/// While a pod is upserted: the rules (policy, direction, index) whose peer sets it joined
/// or left, and those sets as copied.
#[derive(Debug, Clone, Default)]
pub(crate) struct PeerMoves {
    rules: Vec<(PolicySlot, Direction, usize)>,
    sets: Vec<RenewedSet>,
}

/// A change of what a pod id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdChange {
    /// The pod with this id was removed.
    Removed(PodId),
    /// The pod with id `from` now has id `to` (freed by a removal just before).
    Moved {
        /// The id the pod had.
        from: PodId,
        /// The id it has now.
        to: PodId,
    },
}

impl IdChange {
    /// What `id`, an id held before this change, names after it: the same pod's id, or
    /// `None` when that pod was removed.
    pub fn follow(self, id: PodId) -> Option<PodId> {
        match self {
            IdChange::Removed(gone) if gone == id => None,
            IdChange::Moved { from, to } if from == id => Some(to),
            _ => Some(id),
        }
    }
}

/// One rule of one policy, by the policy's name: stable while other policies come and go.
/// Rules are equal when the policy's reference (kind, namespace, name), direction and
/// index are.
#[derive(Debug, Clone)]
pub struct PeerRule {
    /// The policy, as verdicts name it (shared with the engine: no copy of its names).
    pub policy: Arc<PolicyInfo>,
    /// The rule's direction.
    pub direction: Direction,
    /// The rule's index among the policy's rules of that direction.
    pub index: u32,
}

impl PartialEq for PeerRule {
    fn eq(&self, other: &PeerRule) -> bool {
        (&self.policy.reference, self.direction, self.index)
            == (&other.policy.reference, other.direction, other.index)
    }
}

impl Eq for PeerRule {}

impl Touched {
    /// Every pod touched.
    pub fn everything() -> Touched {
        Touched {
            all: true,
            ..Touched::default()
        }
    }

    /// Whether `pod`'s programs may have changed.
    pub fn contains(&self, pod: PodId) -> bool {
        self.all
            || self.pods.contains(pod)
            || self.admin.contains(pod)
            || self.peer_subjects.contains(pod)
    }

    /// Whether `pod`'s programs may have changed in more than the peer addresses of
    /// [`Touched::peers`].
    pub fn reshaped(&self, pod: PodId) -> bool {
        self.all || self.pods.contains(pod) || self.admin.contains(pod)
    }

    /// Whether `pod`'s programs may have changed in their admin and baseline tiers (and
    /// the peer addresses of [`Touched::peers`]) only.
    pub fn admin_tiers_only(&self, pod: PodId) -> bool {
        !self.all && !self.pods.contains(pod) && self.admin.contains(pod)
    }

    /// What this and then `later` touched.
    pub fn merge(&mut self, later: &Touched) {
        self.all |= later.all;
        self.ids.extend_from_slice(&later.ids);
        if !self.all {
            self.pods.union(&later.pods);
            self.admin.union(&later.admin);
            self.peer_subjects.union(&later.peer_subjects);
            self.peers.extend(later.peers.iter().cloned());
            self.renewed.extend(later.renewed.iter().cloned());
        }
    }
}

/// Puts `item` at `at` (replacing what was there), or at the end.
fn replace_or_push<T>(list: &mut Vec<T>, at: Option<usize>, item: T) {
    match at {
        Some(i) => list[i] = item,
        None => list.push(item),
    }
}

impl Touched {
    /// The pods `pods` touched, nothing else.
    fn of(pods: BitSet) -> Touched {
        Touched {
            pods,
            ..Touched::default()
        }
    }

    /// The pods `pods`, whose admin and baseline tiers only an admin policy changed.
    fn admin_tiers_of(pods: BitSet) -> Touched {
        Touched {
            admin: pods,
            ..Touched::default()
        }
    }
}

impl Engine {
    /// Whether the pods' container ports tell side classes apart ([`Engine::side_classes`]:
    /// they do while some policy names a port). When this changes, pods change classes
    /// though no program changes, whatever [`Touched`] says.
    pub fn classes_by_ports(&self) -> bool {
        self.uses_named_ports()
    }

    /// Applies one change, updating only the state that depends on the changed object;
    /// returns the pods whose side programs it may have changed, and the pod ids it changed.
    pub fn apply(&mut self, change: Change) -> Touched {
        let mut touched = self.apply_change(change);
        touched.ids = std::mem::take(&mut self.id_changes);
        touched
    }

    /// [`Engine::apply`] but for the pod ids changed.
    fn apply_change(&mut self, change: Change) -> Touched {
        let everything = Touched::everything();
        match change {
            Change::Upsert(Object::Namespace(ns)) => self.upsert_namespace(ns),
            Change::Remove(ObjectKey {
                kind: Kind::Namespace,
                name,
                ..
            }) => self.remove_namespace(&name),
            Change::Upsert(Object::Pod(p)) => return self.upsert_pod_touched(p),
            Change::Remove(ObjectKey {
                kind: Kind::Pod,
                namespace,
                name,
                ..
            }) => {
                if let Some(id) = self.pod_id(namespace.as_deref().unwrap_or_default(), &name) {
                    self.remove_pod(id);
                }
            }
            Change::Upsert(Object::Node(n)) => {
                let at = self.cluster.nodes.iter().position(|x| x.name == n.name);
                replace_or_push(&mut self.cluster.nodes, at, n);
                self.reindex_nodes();
            }
            Change::Remove(ObjectKey {
                kind: Kind::Node,
                name,
                ..
            }) => {
                self.cluster.nodes.retain(|n| n.name != name);
                self.reindex_nodes();
            }
            Change::Upsert(Object::NetworkPolicy(np)) => {
                // The subjects before and after: no one else's programs name the policy.
                let mut pods = self
                    .cluster
                    .network_policies
                    .iter()
                    .position(|p| p.namespace == np.namespace && p.name == np.name)
                    .map(|i| self.nps[i].subject.clone())
                    .unwrap_or_default();
                self.upsert_np(np);
                if let Some(new) = self.nps.last() {
                    pods.union(&new.subject);
                }
                return Touched::of(pods);
            }
            Change::Remove(ObjectKey {
                kind: Kind::NetworkPolicy,
                namespace,
                name,
                ..
            }) => {
                let namespace = namespace.unwrap_or_default();
                if let Some(i) = self
                    .cluster
                    .network_policies
                    .iter()
                    .position(|p| p.namespace == namespace && p.name == name)
                {
                    let pods = self.nps[i].subject.clone();
                    self.remove_np(i);
                    return Touched::of(pods);
                }
                return Touched::default();
            }
            Change::Upsert(Object::Admin(p)) => {
                let mut pods = self
                    .cluster
                    .admin_policies
                    .iter()
                    .position(|x| x.kind == p.kind && x.name == p.name)
                    .map(|i| self.admin_removal_touches(i))
                    .unwrap_or_default();
                self.upsert_admin(p);
                if let Some(new) = self.admins.last() {
                    pods.union(&new.subject);
                }
                return Touched::admin_tiers_of(pods);
            }
            Change::Remove(ObjectKey {
                kind:
                    kind @ (Kind::AdminNetworkPolicy
                    | Kind::ClusterNetworkPolicy
                    | Kind::BaselineAdminNetworkPolicy),
                name,
                ..
            }) => {
                let kind = kind.policy_kind();
                if let Some(i) = self
                    .cluster
                    .admin_policies
                    .iter()
                    .position(|p| Some(p.kind) == kind && p.name == name)
                {
                    let pods = self.admin_removal_touches(i);
                    self.remove_admin(i);
                    return Touched::admin_tiers_of(pods);
                }
                return Touched::default();
            }
            // Policy is decided after DNAT: Services change no pod's programs.
            Change::Upsert(Object::Service(s)) => {
                let same = |x: &Service| x.namespace == s.namespace && x.name == s.name;
                let at = self.cluster.services.iter().position(same);
                replace_or_push(&mut self.cluster.services, at, s);
                return Touched::default();
            }
            Change::Remove(ObjectKey {
                kind: Kind::Service,
                namespace,
                name,
                ..
            }) => {
                let namespace = namespace.unwrap_or_default();
                (self.cluster.services).retain(|x| x.namespace != namespace || x.name != name);
                return Touched::default();
            }
            Change::Upsert(Object::EndpointSlice(s)) => {
                let same = |x: &EndpointSlice| x.namespace == s.namespace && x.name == s.name;
                let at = self.cluster.endpoint_slices.iter().position(same);
                replace_or_push(&mut self.cluster.endpoint_slices, at, s);
                return Touched::default();
            }
            Change::Remove(ObjectKey {
                kind: Kind::EndpointSlice,
                namespace,
                name,
                ..
            }) => {
                let namespace = namespace.unwrap_or_default();
                (self.cluster.endpoint_slices)
                    .retain(|x| x.namespace != namespace || x.name != name);
                return Touched::default();
            }
        }
        everything
    }

    /// [`Engine::upsert_pod`], saying what it touched: for a change of labels only (no
    /// shared address, no peers relative to the subject's namespace), the pod itself, and
    /// the rules whose peers it joined or left with their policies' subjects; otherwise
    /// everything.
    fn upsert_pod_touched(&mut self, p: Pod) -> Touched {
        let id = self.pod_id(&p.namespace, &p.name);
        let labels_only = id.is_some_and(|id| {
            let mut was = self.cluster.pods[id].clone();
            was.labels = p.labels.clone();
            was == p && !self.shared_address.contains_key(&id)
        }) && !self.has_related_peers();
        self.peers_moved = Some(PeerMoves::default());
        self.upsert_pod(p);
        let moved = self.peers_moved.take().unwrap_or_default();
        match id {
            Some(id) if labels_only && !self.shared_address.contains_key(&id) => {
                let mut touched = Touched::of(BitSet::default());
                touched.pods.insert(id);
                touched.renewed = moved.sets;
                let mut owners = Vec::new();
                for (slot, direction, index) in moved.rules {
                    self.note_moved_peer(&mut touched, (slot, direction, index), id, &mut owners);
                }
                touched
            }
            _ => Touched::everything(),
        }
    }

    /// Adds to `touched` one rule whose peers `pod` joined or left: its policy's subjects
    /// keep their programs' shape unless the rule's peers could have become empty or
    /// stopped being so (the rule then leaves or enters their programs). `owners` is
    /// [`Engine::peers_hold_more_than`]'s memory for this change.
    fn note_moved_peer(
        &self,
        touched: &mut Touched,
        (slot, direction, index): (PolicySlot, Direction, usize),
        pod: PodId,
        owners: &mut Vec<(PodId, bool)>,
    ) {
        let (info, subject) = match slot {
            PolicySlot::Network(i) => (&self.nps[i as usize].info, &self.nps[i as usize].subject),
            PolicySlot::Admin(i) => (
                &self.admins[i as usize].info,
                &self.admins[i as usize].subject,
            ),
        };
        if self.peers_hold_more_than(slot, direction, index, pod, owners) {
            touched.peer_subjects.union(subject);
        } else {
            touched.pods.union(subject);
        }
        touched.peers.push(PeerRule {
            policy: Arc::clone(info),
            direction,
            index: index as u32,
        });
    }

    /// The pods whose policy lists removing admin policy `i` rebuilds (which may reorder
    /// their isolating policies): its subjects, and those of the last policy, which takes
    /// its place.
    fn admin_removal_touches(&self, i: usize) -> BitSet {
        let mut pods = self.admins[i].subject.clone();
        if let Some(last) = self.admins.last() {
            pods.union(&last.subject);
        }
        pods
    }

    /// Whether some admin policy has peers relative to the subject's namespace (their
    /// members depend on every pod's labels).
    fn has_related_peers(&self) -> bool {
        self.admins.iter().any(|a| {
            a.ingress
                .iter()
                .chain(&a.egress)
                .flat_map(|r| &r.peers)
                .any(|p| matches!(p, AdminPeerC::Related { .. }))
        })
    }

    /// Applies `f` to every compiled pod set (subjects and static peers) that holds one of
    /// `pods`; a peer set that policies share is copied at its first change.
    fn change_sets_holding(&mut self, pods: &[PodId], mut f: impl FnMut(&mut BitSet)) {
        let holds = |s: &BitSet| pods.iter().any(|&p| s.contains(p));
        for np in &mut self.nps {
            if holds(&np.subject) {
                f(&mut np.subject);
            }
            for r in np.ingress.iter_mut().chain(np.egress.iter_mut()) {
                for p in r.peers.iter_mut().flatten() {
                    if let NpPeer::Pods(s) = p
                        && holds(s)
                    {
                        f(Arc::make_mut(s));
                    }
                }
            }
        }
        for a in &mut self.admins {
            if holds(&a.subject) {
                f(&mut a.subject);
            }
            for r in a.ingress.iter_mut().chain(a.egress.iter_mut()) {
                for p in &mut r.peers {
                    if let AdminPeerC::Pods(s) = p
                        && holds(s)
                    {
                        f(Arc::make_mut(s));
                    }
                }
            }
        }
    }

    /// Recomputes `pod`'s membership in every compiled set, then its policy lists. A peer
    /// set that rules share stays shared: it is copied once and every rule takes the copy.
    fn refresh_pod(&mut self, pod: PodId) {
        let member = self.selectable(pod);
        let mut bits: Vec<bool> = Vec::new();
        for np in &self.cluster.network_policies {
            member.np_memberships(np, &mut bits);
        }
        let mut admin_bits: Vec<bool> = Vec::new();
        for a in &self.cluster.admin_policies {
            admin_bits.push(member.in_admin_subject(a));
            for r in a.ingress.iter().chain(&a.egress) {
                admin_bits.extend(
                    r.peers
                        .iter()
                        .filter_map(|p| member.in_admin_static_peer(p)),
                );
            }
        }
        let (mut nb, mut ab) = (bits.into_iter(), admin_bits.into_iter());
        let mut moved: Vec<(PolicySlot, Direction, usize)> = Vec::new();
        let mut renewed = Renewed::default();
        for (i, (np, model)) in self
            .nps
            .iter_mut()
            .zip(&self.cluster.network_policies)
            .enumerate()
        {
            np.subject.set(pod, nb.next().unwrap_or(false));
            for (direction, compiled, rules) in [
                (Direction::Ingress, &mut np.ingress, &model.ingress),
                (Direction::Egress, &mut np.egress, &model.egress),
            ] {
                for (index, (c, m)) in compiled.iter_mut().zip(rules).enumerate() {
                    let n = m.peers.as_ref().map_or(0, Vec::len);
                    let bits: Vec<bool> = (0..n).map(|_| nb.next().unwrap_or(false)).collect();
                    let mut changed = false;
                    // compiled peers mirror the model's when present (None only for empty lists)
                    for (p, b) in c.peers.iter_mut().flatten().zip(bits) {
                        if let NpPeer::Pods(s) = p
                            && s.contains(pod) != b
                        {
                            renewed.set(s, pod, b);
                            changed = true;
                        }
                    }
                    if changed {
                        moved.push((PolicySlot::Network(i as u32), direction, index));
                    }
                }
            }
        }
        for (i, a) in self.admins.iter_mut().enumerate() {
            a.subject.set(pod, ab.next().unwrap_or(false));
            for (direction, rules) in [
                (Direction::Ingress, &mut a.ingress),
                (Direction::Egress, &mut a.egress),
            ] {
                for (index, r) in rules.iter_mut().enumerate() {
                    let mut changed = false;
                    for p in &mut r.peers {
                        if let AdminPeerC::Pods(s) = p {
                            let b = ab.next().unwrap_or(false);
                            if s.contains(pod) != b {
                                renewed.set(s, pod, b);
                                changed = true;
                            }
                        }
                    }
                    if changed {
                        moved.push((PolicySlot::Admin(i as u32), direction, index));
                    }
                }
            }
        }
        if let Some(m) = self.peers_moved.as_mut() {
            m.rules.extend(moved);
            m.sets
                .extend(renewed.copies.into_iter().map(|(_, copy)| copy));
        }
        self.rebuild_pod_lists(pod);
    }

    fn ensure_namespace(&mut self, name: &str) {
        if !self.ns_index.contains_key(name) {
            let labels = [(
                palisade_model::NAMESPACE_NAME_LABEL.to_string(),
                name.to_string(),
            )]
            .into();
            self.cluster.namespaces.push(Namespace {
                name: name.to_string(),
                labels,
                default_deny_ingress: false,
                origin: None,
            });
            self.ns_index
                .insert(name.to_string(), self.cluster.namespaces.len() - 1);
            self.ns_pods.push(BitSet::default());
        }
    }

    fn upsert_namespace(&mut self, ns: Namespace) {
        let i = match self.ns_index.get(&ns.name) {
            Some(&i) => {
                self.cluster.namespaces[i] = ns;
                i
            }
            None => {
                let name = ns.name.clone();
                self.cluster.namespaces.push(ns);
                self.ns_index
                    .insert(name, self.cluster.namespaces.len() - 1);
                self.ns_pods.push(BitSet::default());
                self.cluster.namespaces.len() - 1
            }
        };
        let members: Vec<PodId> = self.ns_pods[i].pods().collect();
        for pod in members {
            self.refresh_pod(pod);
        }
    }

    fn remove_namespace(&mut self, name: &str) {
        // Its NetworkPolicies go with it, also when the namespace was never declared (a
        // policy does not create its namespace; a pod does).
        while let Some(np) = self
            .cluster
            .network_policies
            .iter()
            .position(|p| p.namespace == name)
        {
            self.remove_np(np);
        }
        let Some(&i) = self.ns_index.get(name) else {
            return;
        };
        loop {
            let next = self.ns_pods[i].pods().next();
            let Some(pod) = next else { break };
            self.remove_pod(pod);
        }
        let last = self.cluster.namespaces.len() - 1;
        self.cluster.namespaces.swap_remove(i);
        self.ns_pods.swap_remove(i);
        self.ns_index.remove(name);
        if i != last {
            let moved = self.cluster.namespaces[i].name.clone();
            self.ns_index.insert(moved, i);
            for pod in self.ns_pods[i].pods().collect::<Vec<_>>() {
                self.pod_ns[pod] = i;
            }
        }
    }

    fn upsert_pod(&mut self, p: Pod) {
        self.ensure_namespace(&p.namespace);
        // Whether the change touches a shared address: the pod had one, or gets one below.
        let mut shared = false;
        let id = match self.pod_id(&p.namespace, &p.name) {
            Some(id) => {
                let was = &self.cluster.pods[id];
                if was.ips != p.ips || was.host_network != p.host_network || was.ports != p.ports {
                    self.address_epoch = crate::address_cache::next_epoch();
                }
                shared = self.shared_address.contains_key(&id);
                self.unindex_pod(id);
                self.forget_ips(id);
                self.cluster.pods[id] = p;
                id
            }
            None => {
                self.address_epoch = crate::address_cache::next_epoch();
                self.cluster.pods.push(p);
                PodId::new(self.cluster.pods.len() - 1)
            }
        };
        self.index_pod(id);
        let pod = &self.cluster.pods[id];
        if !pod.host_network {
            for ip in &pod.ips {
                let owner = *self.ip_owner.entry(*ip).or_insert(Owner::Pod(id));
                shared |= matches!(owner, Owner::Pod(o) if o != id);
            }
        }
        if shared {
            // An address shared before or after this change: recount every holder.
            self.rebuild_ip_owner();
        }
        self.refresh_pod(id);
    }

    fn forget_ips(&mut self, id: PodId) {
        for ip in &self.cluster.pods[id].ips {
            if self.ip_owner.get(ip) == Some(&Owner::Pod(id)) {
                self.ip_owner.remove(ip);
            }
        }
    }

    fn remove_pod(&mut self, id: PodId) {
        // Ids and the addresses' owners change.
        self.address_epoch = crate::address_cache::next_epoch();
        self.unindex_pod(id);
        self.forget_ips(id);
        self.change_sets_holding(&[id], |s| s.remove(id));
        let last = PodId::new(self.cluster.pods.len() - 1);
        self.id_changes.push(IdChange::Removed(id));
        // Shared addresses are keyed by pod: recount if this pod or the one renumbered had one.
        let shared =
            self.shared_address.contains_key(&id) || self.shared_address.contains_key(&last);
        if id != last {
            // The last pod takes the freed id.
            self.id_changes.push(IdChange::Moved { from: last, to: id });
            self.change_sets_holding(&[last], |s| s.renumber(last, id));
            let moved = self.cluster.pods[last].clone();
            self.pod_labels.renumber(last, id, &moved.labels);
            if let Some(s) = self.ns_pods.get_mut(self.pod_ns[last]) {
                s.renumber(last, id);
            }
            self.subjects.renumber(last, id);
            self.pod_index
                .insert((moved.namespace.clone(), moved.name.clone()), id);
            for ip in &moved.ips {
                if self.ip_owner.get(ip) == Some(&Owner::Pod(last)) {
                    self.ip_owner.insert(*ip, Owner::Pod(id));
                }
            }
            self.pod_ns[id] = self.pod_ns[last];
            self.pod_node[id] = self.pod_node[last];
            self.ingress.swap(id.index(), last.index());
            self.egress.swap(id.index(), last.index());
        }
        self.cluster.pods.swap_remove(id.index());
        self.pod_ns.truncate(last.index());
        self.pod_node.truncate(last.index());
        self.ingress.truncate(last.index());
        self.egress.truncate(last.index());
        if shared {
            self.rebuild_ip_owner();
        }
    }

    fn reindex_nodes(&mut self) {
        self.node_index = crate::state::by_name(self.cluster.nodes.iter().map(|n| &n.name));
        for (i, p) in self.cluster.pods.iter().enumerate() {
            self.pod_node[i] = p
                .node_name
                .as_ref()
                .and_then(|n| self.node_index.get(n).copied());
        }
        self.rebuild_ip_owner();
    }

    fn upsert_np(&mut self, np: NetworkPolicy) {
        if let Some(i) = self
            .cluster
            .network_policies
            .iter()
            .position(|p| p.namespace == np.namespace && p.name == np.name)
        {
            self.remove_np(i);
        }
        let compiled = self.compile_np(&np, &PeerSets::default());
        let i = self.nps.len() as u32;
        let pods: Vec<PodId> = compiled.subject.pods().collect();
        for &pod in &pods {
            Arc::make_mut(&mut self.ingress[pod]).network.push(i);
            Arc::make_mut(&mut self.egress[pod]).network.push(i);
        }
        self.cluster.network_policies.push(np);
        self.nps.push(compiled);
        for pod in pods {
            self.refresh_isolating(pod);
        }
    }

    fn remove_np(&mut self, i: usize) {
        let last = self.nps.len() - 1;
        let lists = |l: &mut PodPolicies, from: u32, to: Option<u32>| {
            drop_or_rename(&mut l.network, from, to);
        };
        let removed: Vec<PodId> = self.nps[i].subject.pods().collect();
        for &pod in &removed {
            lists(Arc::make_mut(&mut self.ingress[pod]), i as u32, None);
            lists(Arc::make_mut(&mut self.egress[pod]), i as u32, None);
        }
        if i != last {
            for pod in self.nps[last].subject.iter() {
                lists(
                    Arc::make_mut(&mut self.ingress[pod]),
                    last as u32,
                    Some(i as u32),
                );
                lists(
                    Arc::make_mut(&mut self.egress[pod]),
                    last as u32,
                    Some(i as u32),
                );
            }
        }
        self.nps.swap_remove(i);
        self.cluster.network_policies.swap_remove(i);
        // The renamed policy keeps its place in its pods' lists; the removed one's pods change.
        for pod in removed {
            self.refresh_isolating(pod);
        }
    }

    fn upsert_admin(&mut self, p: AdminPolicy) {
        if let Some(i) = self
            .cluster
            .admin_policies
            .iter()
            .position(|x| x.kind == p.kind && x.name == p.name)
        {
            self.remove_admin(i);
        }
        let compiled = self.compile_admin(&p, &PeerSets::default());
        let pods: Vec<PodId> = compiled.subject.pods().collect();
        let tier = p.tier;
        let has_rules = [Direction::Ingress, Direction::Egress].map(|d| !p.rules(d).is_empty());
        self.cluster.admin_policies.push(p);
        self.admins.push(compiled);
        self.sort_admins();
        // Into each subject pod's admin or baseline list, at its place in evaluation order
        // (the lists follow `admin_order`); the pods' other lists do not depend on it.
        let new = (self.admins.len() - 1) as u32;
        let mut rank = vec![0u32; self.admins.len()];
        for (at, &i) in self.admin_order.iter().enumerate() {
            rank[i as usize] = at as u32;
        }
        for pod in pods {
            for (lists, has) in [&mut self.ingress[pod], &mut self.egress[pod]]
                .into_iter()
                .zip(has_rules)
            {
                if !has {
                    continue;
                }
                let lists = Arc::make_mut(lists);
                let list = match tier {
                    AdminTier::Admin => &mut lists.admin,
                    AdminTier::Baseline => &mut lists.baseline,
                };
                let at = list.partition_point(|&x| rank[x as usize] < rank[new as usize]);
                list.insert(at, new);
            }
        }
    }

    fn remove_admin(&mut self, i: usize) {
        let last = self.admins.len() - 1;
        let removed: Vec<PodId> = self.admins[i].subject.pods().collect();
        let renamed: Vec<PodId> = if i == last {
            Vec::new()
        } else {
            self.admins[last].subject.pods().collect()
        };
        let (i, last) = (i as u32, last as u32);
        for (pods, from, to) in [(removed, i, None), (renamed, last, Some(i))] {
            for pod in pods {
                for lists in [&mut self.ingress[pod], &mut self.egress[pod]] {
                    // Copied (when shared) only where the policy is listed.
                    if lists.admin.contains(&from) || lists.baseline.contains(&from) {
                        let lists = Arc::make_mut(lists);
                        drop_or_rename(&mut lists.admin, from, to);
                        drop_or_rename(&mut lists.baseline, from, to);
                    }
                }
            }
        }
        self.admins.swap_remove(i as usize);
        self.cluster.admin_policies.swap_remove(i as usize);
        self.sort_admins();
    }
}

/// Drops policy `from` from a pod's list, or renames it `to`, keeping its place: a list
/// follows the policies' order, not their indices.
fn drop_or_rename(list: &mut Vec<u32>, from: u32, to: Option<u32>) {
    match to {
        None => list.retain(|&x| x != from),
        Some(to) => list
            .iter_mut()
            .filter(|x| **x == from)
            .for_each(|x| *x = to),
    }
}

/// The peer sets one pod's refresh copied, by the set they were copied from: rules that
/// shared a set share its copy (and a data plane computes its addresses once).
#[derive(Default)]
struct Renewed {
    /// Each copy with the pod's membership in it (its `was` is held, so that its address
    /// is not reused meanwhile).
    copies: Vec<(bool, RenewedSet)>,
}

impl Renewed {
    /// Sets `pod`'s membership in `set` to `member`: in place when no one else holds the
    /// set, else by taking the copy made for an earlier holder, or making it.
    fn set(&mut self, set: &mut Arc<BitSet>, pod: PodId, member: bool) {
        if let Some(bits) = Arc::get_mut(set) {
            bits.set(pod, member);
            return;
        }
        let copied = self
            .copies
            .iter()
            .find(|(m, r)| *m == member && Arc::ptr_eq(&r.was, set));
        let copy = match copied {
            Some((_, r)) => Arc::clone(&r.now),
            None => {
                let mut bits = BitSet::clone(set);
                bits.set(pod, member);
                let copy = Arc::new(bits);
                let renewed = RenewedSet {
                    was: Arc::clone(set),
                    now: Arc::clone(&copy),
                    pod,
                };
                self.copies.push((member, renewed));
                copy
            }
        };
        *set = copy;
    }
}
