//! The addresses of the engine's shared pod sets, kept from one compile to the next and
//! shared by the threads of one: a data plane that compiles after every change asks for
//! the same peer sets again, and after a relabel only the sets the pod joined or left are
//! new.
//!
//! An entry is valid for as long as the engine's pods have the same ids, addresses, owners
//! of those addresses and container ports ([`Engine::address_epoch`]). Unions are found by
//! the content of their pod sets (hashed, then compared), not by the sets' identity: two
//! copies of one engine, brought up to date by the same changes, copy their sets apart.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::bitset::BitSet;
use crate::concrete::{NamedKey, PortAlt};
use crate::state::{Engine, PodId};

/// The addresses of unions of an engine's pod sets and where named ports resolve, kept
/// across compiles (see the module documentation). Pass one to
/// [`Engine::side_classes_cached`] and [`Engine::new_peers`] for every compile of one
/// engine as it changes; an engine whose addresses changed empties it first.
#[derive(Debug, Default)]
pub struct AddressCache {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The [`Engine::address_epoch`] the entries are of.
    epoch: Option<u64>,
    /// Per pod, whether it owns every one of its addresses.
    owns_all: Option<Arc<Vec<bool>>>,
    /// By a hash of the sets' contents ([`content_key`]).
    unions: HashMap<u64, Vec<Union>>,
    /// The destination-pod resolutions of named ports.
    named: HashMap<NamedKey, Vec<PortAlt>>,
}

#[derive(Debug)]
struct Union {
    /// The sets, distinct, in the order of [`content_key`].
    sets: Vec<Arc<BitSet>>,
    addrs: Arc<BTreeSet<IpAddr>>,
}

impl Union {
    fn is_of(&self, sets: &[&Arc<BitSet>]) -> bool {
        self.sets.len() == sets.len()
            && self
                .sets
                .iter()
                .zip(sets)
                .all(|(a, b)| Arc::ptr_eq(a, b) || a == *b)
    }
}

/// `sets` without repeated contents, ordered by a hash of each set's content, and a hash
/// of them all: equal unions of sets give equal keys whatever the sets' order and
/// identity.
fn content_key<'a>(sets: &[&'a Arc<BitSet>]) -> (u64, Vec<&'a Arc<BitSet>>) {
    let hash = |x: &dyn Fn(&mut DefaultHasher)| {
        let mut h = DefaultHasher::new();
        x(&mut h);
        h.finish()
    };
    let mut hashed: Vec<(u64, &Arc<BitSet>)> =
        sets.iter().map(|&s| (hash(&|h| s.hash(h)), s)).collect();
    hashed.sort_by_key(|(h, _)| *h);
    hashed.dedup_by(|(ha, a), (hb, b)| ha == hb && (Arc::ptr_eq(a, b) || a == b));
    let key = hash(&|h| hashed.iter().for_each(|(x, _)| x.hash(h)));
    (key, hashed.into_iter().map(|(_, s)| s).collect())
}

impl AddressCache {
    /// Empties the cache unless its entries are of `engine`'s addresses.
    pub(crate) fn sync(&self, engine: &Engine) {
        let mut inner = self.lock();
        if inner.epoch != Some(engine.address_epoch) {
            *inner = Inner {
                epoch: Some(engine.address_epoch),
                ..Inner::default()
            };
        }
    }

    /// Forgets the unions of sets no engine holds any more (only this cache does).
    pub fn prune(&self) {
        let mut inner = self.lock();
        for unions in inner.unions.values_mut() {
            unions.retain(|u| u.sets.iter().all(|s| Arc::strong_count(s) > 1));
        }
        inner.unions.retain(|_, unions| !unions.is_empty());
    }

    /// The addresses of the union of `sets`, if known.
    pub(crate) fn known_union(&self, sets: &[&Arc<BitSet>]) -> Option<Arc<BTreeSet<IpAddr>>> {
        let (key, sets) = content_key(sets);
        self.find(key, &sets)
    }

    /// The destination-pod resolutions of the named port `key`, `compute`d when not known.
    pub(crate) fn named(
        &self,
        key: &NamedKey,
        compute: impl FnOnce() -> Vec<PortAlt>,
    ) -> Vec<PortAlt> {
        if let Some(hit) = self.lock().named.get(key) {
            return hit.clone();
        }
        let alts = compute();
        let mut inner = self.lock();
        inner.named.entry(key.clone()).or_insert(alts).clone()
    }

    /// Per pod, whether it owns every one of its addresses (`compute` when not known).
    pub(crate) fn owns_all(&self, compute: impl FnOnce() -> Vec<bool>) -> Arc<Vec<bool>> {
        if let Some(known) = &self.lock().owns_all {
            return known.clone();
        }
        let computed = Arc::new(compute());
        self.lock().owns_all.get_or_insert(computed).clone()
    }

    /// The addresses of the union of `sets`, `compute`d when not known. Threads computing
    /// one union at once get the same `Arc`.
    pub(crate) fn union(
        &self,
        sets: &[&Arc<BitSet>],
        compute: impl FnOnce() -> Arc<BTreeSet<IpAddr>>,
    ) -> Arc<BTreeSet<IpAddr>> {
        let (key, sets) = content_key(sets);
        if let Some(hit) = self.find(key, &sets) {
            return hit;
        }
        let addrs = compute();
        let mut inner = self.lock();
        let unions = inner.unions.entry(key).or_default();
        if let Some(u) = unions.iter().find(|u| u.is_of(&sets)) {
            return u.addrs.clone();
        }
        unions.push(Union {
            sets: sets.into_iter().map(Arc::clone).collect(),
            addrs: addrs.clone(),
        });
        addrs
    }

    fn find(&self, key: u64, sets: &[&Arc<BitSet>]) -> Option<Arc<BTreeSet<IpAddr>>> {
        let inner = self.lock();
        let unions = inner.unions.get(&key)?;
        unions
            .iter()
            .find(|u| u.is_of(sets))
            .map(|u| u.addrs.clone())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every entry is complete when stored: a holder that panicked left none half made.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A fresh [`Engine::address_epoch`]: never given before in this process.
pub(crate) fn next_epoch() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Engine {
    /// Names the engine's pods, their ids, their addresses, which pod or node owns each
    /// address, and the pods' container ports: two engines (clones of one, changed since)
    /// with one epoch have the same. A change to any of them gives a new epoch.
    pub fn address_epoch(&self) -> u64 {
        self.address_epoch
    }

    /// Takes the [`Engine::address_epoch`] of `same`, an engine this one is a copy of (or
    /// `same` of this one) brought up to date by the same changes, in the same order, so
    /// that the two share what is cached for it. Checked in debug builds.
    pub fn share_address_epoch(&mut self, same: &Engine) {
        debug_assert!(self.cluster.pods == same.cluster.pods);
        debug_assert!(self.cluster.nodes == same.cluster.nodes);
        debug_assert!(self.ip_owner == same.ip_owner);
        self.address_epoch = same.address_epoch;
    }

    /// Per pod, whether it owns every one of its addresses (no node, and no earlier pod,
    /// has one of them).
    pub(crate) fn owns_all(&self) -> Vec<bool> {
        PodId::all(self.cluster.pods.len())
            .map(|i| self.cluster.pods[i].ips.iter().all(|ip| self.owns(i, ip)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

    use palisade_model::{Direction, Object, Pod};

    use super::*;
    use crate::{Change, Options};

    /// After a run of relabels, each moving a pod in or out of peer sets, `prune` leaves
    /// only the unions of sets an engine still holds (it would keep every set ever copied).
    #[test]
    fn prune_keeps_only_the_unions_of_sets_an_engine_holds() {
        let g = palisade_gen::generate(&palisade_gen::Spec {
            pods: 200,
            policies: 40,
            seed: 1,
            admin: true,
        });
        let mut engine = Engine::new(g.load().unwrap(), Options::default());
        let cache = Arc::new(AddressCache::default());
        let fill = |e: &Engine| {
            let pods: Vec<PodId> = e.pod_ids().collect();
            for d in [Direction::Ingress, Direction::Egress] {
                e.side_classes_cached(&pods, d, &cache);
            }
        };
        fill(&engine);
        let pods = engine.cluster().pods.clone();
        let mut moved = 0;
        for (i, pod) in pods.iter().enumerate().take(20) {
            // Each pod takes the labels of a pod of another deployment.
            let labels = pods[(i + 100) % pods.len()].labels.clone();
            // What the change touched is dropped before the prune, as the agent drops it
            // once compiled (it holds the sets the change copied).
            moved += engine
                .apply(Change::Upsert(Object::Pod(Pod {
                    labels,
                    ..pod.clone()
                })))
                .renewed
                .len();
            fill(&engine);
            cache.prune();
        }
        assert!(moved > 0, "the relabels moved no peer set");
        let inner = cache.lock();
        assert!(!inner.unions.is_empty());
        for u in inner.unions.values().flatten() {
            assert!(u.sets.iter().all(|s| Arc::strong_count(s) > 1));
        }
    }
}
