//! What a compile learns about peers and keeps for the next compile: the prefixes of each
//! peer source and the text each rule's peer set is named after. Shared by the threads of
//! a compile. A class built again after a change finds what did not move, and every user
//! of a source gets one `Arc` (a replay compares them by identity).

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ipnet::IpNet;
use palisade_engine::{ConcreteRule, PolicyInfo};
use palisade_model::Direction;

use crate::compile::SetSource;

/// See the module documentation. Entries are found by the identity of what they were made
/// of (its address in memory), which the cache holds, so that an address is never reused
/// for something else while the entry lives.
#[derive(Debug, Default)]
pub(crate) struct PeerCache {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// [`SetSource::families`] by the source's addresses and its CIDRs.
    prefixes: HashMap<SourceKey, Prefixes>,
    /// The text a rule's peer set is named after, by the rule's policy (as compiled:
    /// another version of the policy is another record), direction and index.
    texts: HashMap<(usize, Direction, u32), Text>,
}

/// A [`SetSource`] by the identity of its addresses (their address in memory) and its
/// CIDRs.
type SourceKey = (usize, Vec<(IpNet, Vec<IpNet>)>);

/// A source's prefixes per family, with the addresses they were made of.
#[derive(Debug)]
struct Prefixes {
    addrs: Arc<BTreeSet<IpAddr>>,
    nets: [Arc<Vec<IpNet>>; 2],
}

/// A rule's peer text, with the policy record it was made from.
#[derive(Debug)]
struct Text {
    policy: Arc<PolicyInfo>,
    text: String,
}

impl PeerCache {
    /// The prefixes of `source`, IPv4 then IPv6.
    pub(crate) fn of(&self, source: &SetSource) -> [Arc<Vec<IpNet>>; 2] {
        let key = (Arc::as_ptr(&source.addrs) as usize, source.blocks.clone());
        if let Some(hit) = self.lock().prefixes.get(&key) {
            return hit.nets.clone();
        }
        // Computed unlocked: another thread may compute the same source meanwhile, and
        // the first stored wins, so that every user shares one `Arc`.
        let nets = source.families().map(Arc::new);
        let mut inner = self.lock();
        let entry = inner.prefixes.entry(key).or_insert_with(|| Prefixes {
            addrs: source.addrs.clone(),
            nets,
        });
        entry.nets.clone()
    }

    /// The text `r`'s peer set is named after (`compute`d when not known).
    pub(crate) fn text(&self, r: &ConcreteRule, compute: impl FnOnce() -> String) -> String {
        let m = &r.rule;
        let key = (Arc::as_ptr(&m.policy) as usize, m.direction, m.index);
        if let Some(hit) = self.lock().texts.get(&key) {
            return hit.text.clone();
        }
        let text = compute();
        self.lock().texts.entry(key).or_insert_with(|| Text {
            policy: Arc::clone(&m.policy),
            text: text.clone(),
        });
        text
    }

    /// Forgets what was made of things nothing but this cache holds any more (no program
    /// names them).
    pub(crate) fn prune(&self) {
        let mut inner = self.lock();
        inner
            .prefixes
            .retain(|_, p| Arc::strong_count(&p.addrs) > 1);
        inner.texts.retain(|_, t| Arc::strong_count(&t.policy) > 1);
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every entry is complete when stored: a holder that panicked left none half made.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

    use palisade_engine::{Engine, Options, PodId};

    use super::*;

    /// `prune` forgets the prefixes and texts of what nothing else holds any more (the
    /// programs of earlier compiles) and keeps the rest.
    #[test]
    fn prune_forgets_what_only_the_cache_holds() {
        let g = palisade_gen::generate(&palisade_gen::Spec {
            pods: 100,
            policies: 20,
            seed: 1,
            admin: true,
        });
        let engine = Engine::new(g.load().unwrap(), Options::default());
        let cache = PeerCache::default();
        let rules = |pod: usize| {
            let p = engine.side_program(PodId::new(pod), Direction::Ingress);
            p.admin
                .iter()
                .chain(p.network.iter())
                .cloned()
                .collect::<Vec<_>>()
        };
        let held = rules(0);
        let gone = rules(1);
        assert!(!held.is_empty() && !gone.is_empty());
        for r in held.iter().chain(&gone) {
            cache.of(&(&r.peers).into());
            cache.text(r, || "peers".to_string());
        }
        // The engine holds the policies' records too: with it gone, the held rules are the
        // only other holders left.
        drop(gone);
        drop(engine);
        cache.prune();
        let inner = cache.lock();
        assert!(!inner.prefixes.is_empty() && !inner.texts.is_empty());
        for p in inner.prefixes.values() {
            assert!(held.iter().any(|r| Arc::ptr_eq(&r.peers.addrs, &p.addrs)));
        }
        for t in inner.texts.values() {
            assert!(held.iter().any(|r| Arc::ptr_eq(&r.rule.policy, &t.policy)));
        }
    }
}
