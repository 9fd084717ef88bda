//! Label indexes: which pods carry which label, so a selector resolves by set algebra
//! instead of a scan.

use std::collections::HashMap;

use palisade_model::{Labels, Selector, SelectorOp};

use crate::bitset::BitSet;
use crate::state::PodId;

/// Pods by label key and by key/value.
#[derive(Debug, Clone, Default)]
pub(crate) struct LabelIndex {
    by_key: HashMap<String, KeyIndex>,
    all: BitSet,
}

/// The pods carrying one label key: all of them, and by value.
#[derive(Debug, Clone, Default)]
struct KeyIndex {
    pods: BitSet,
    by_value: HashMap<String, BitSet>,
}

impl LabelIndex {
    /// The index of the pods given, with their labels.
    pub fn of<'a>(pods: impl Iterator<Item = (PodId, &'a Labels)>) -> LabelIndex {
        let mut index = LabelIndex::default();
        for (id, labels) in pods {
            index.insert(id, labels);
        }
        index
    }

    /// Indexes pod `id` with `labels`.
    pub fn insert(&mut self, id: PodId, labels: &Labels) {
        self.all.insert(id);
        for (k, v) in labels {
            // Keys and values are copied only the first time they are seen.
            let key = match self.by_key.get_mut(k.as_str()) {
                Some(key) => key,
                None => self.by_key.entry(k.clone()).or_default(),
            };
            key.pods.insert(id);
            match key.by_value.get_mut(v.as_str()) {
                Some(pods) => pods.insert(id),
                None => key.by_value.entry(v.clone()).or_default().insert(id),
            }
        }
    }

    /// Forgets pod `id`, which had `labels`.
    pub fn remove(&mut self, id: PodId, labels: &Labels) {
        self.all.remove(id);
        for (k, v) in labels {
            if let Some(key) = self.by_key.get_mut(k.as_str()) {
                key.pods.remove(id);
                if let Some(s) = key.by_value.get_mut(v.as_str()) {
                    s.remove(id);
                }
            }
        }
    }

    fn key(&self, k: &str) -> Option<&BitSet> {
        self.by_key.get(k).map(|key| &key.pods)
    }

    fn value(&self, k: &str, v: &str) -> Option<&BitSet> {
        self.by_key.get(k).and_then(|key| key.by_value.get(v))
    }

    fn any_value(&self, k: &str, values: &[String]) -> BitSet {
        let mut s = BitSet::default();
        for v in values {
            if let Some(x) = self.value(k, v) {
                s.union(x);
            }
        }
        s
    }

    /// The objects `sel` selects.
    #[cfg(test)]
    pub fn select(&self, sel: &Selector) -> BitSet {
        self.select_within(sel, self.all.clone())
    }

    /// The objects of `within` (indexed objects) that `sel` selects.
    pub fn select_within(&self, sel: &Selector, within: BitSet) -> BitSet {
        let mut s = within;
        for (k, v) in &sel.match_labels {
            match self.value(k, v) {
                Some(x) => s.intersect(x),
                None => return BitSet::default(),
            }
        }
        let empty = BitSet::default();
        for r in &sel.expressions {
            match &r.op {
                SelectorOp::In(values) => s.intersect(&self.any_value(&r.key, values)),
                SelectorOp::NotIn(values) => s.subtract(&self.any_value(&r.key, values)),
                SelectorOp::Exists => s.intersect(self.key(&r.key).unwrap_or(&empty)),
                SelectorOp::DoesNotExist => s.subtract(self.key(&r.key).unwrap_or(&empty)),
            }
        }
        s
    }

    /// Renumbers pod `from` as `to` (after `to` was removed), given its labels.
    pub fn renumber(&mut self, from: PodId, to: PodId, labels: &Labels) {
        self.remove(from, labels);
        self.insert(to, labels);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_model::Requirement;

    #[test]
    fn selects_like_selector_matches() {
        let objects: Vec<Labels> = vec![
            [("app".into(), "a".into())].into(),
            [("app".into(), "b".into()), ("tier".into(), "x".into())].into(),
            Labels::new(),
        ];
        let mut idx = LabelIndex::default();
        for (i, l) in objects.iter().enumerate() {
            idx.insert(PodId::new(i), l);
        }
        let sels = [
            Selector::everything(),
            Selector {
                match_labels: [("app".into(), "b".into())].into(),
                expressions: vec![],
            },
            Selector {
                match_labels: Default::default(),
                expressions: vec![Requirement {
                    key: "app".into(),
                    op: SelectorOp::NotIn(vec!["a".into()]),
                }],
            },
            Selector {
                match_labels: Default::default(),
                expressions: vec![Requirement {
                    key: "tier".into(),
                    op: SelectorOp::DoesNotExist,
                }],
            },
            Selector {
                match_labels: [("nope".into(), "x".into())].into(),
                expressions: vec![],
            },
        ];
        for sel in &sels {
            let want: Vec<usize> = (0..objects.len())
                .filter(|&i| sel.matches(&objects[i]))
                .collect();
            assert_eq!(idx.select(sel).iter().collect::<Vec<_>>(), want, "{sel}");
            let within = BitSet::from_words(vec![0b101]);
            let want_within: Vec<usize> = want.iter().copied().filter(|&i| i != 1).collect();
            assert_eq!(
                idx.select_within(sel, within).iter().collect::<Vec<_>>(),
                want_within,
                "{sel} within {{0, 2}}"
            );
        }
    }
}
