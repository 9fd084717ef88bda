//! A growable set of small integers (pod ids, class indexes), with the set algebra
//! selectors need.

use std::hash::{Hash, Hasher};
use std::ops::Range;

use crate::state::PodId;

/// A set of ids: a run of 64-bit words, starting at word `start`, so that a set of ids
/// close together (the pods of one namespace) costs memory for its own range only.
#[derive(Debug, Clone, Default)]
pub struct BitSet {
    /// Index of the word `words[0]` stands for.
    start: usize,
    words: Vec<u64>,
}

impl BitSet {
    /// An empty set with room for ids `0..len` (it grows on insert).
    pub fn new(len: usize) -> BitSet {
        BitSet {
            start: 0,
            words: vec![0; len.div_ceil(64)],
        }
    }

    /// The set `0..len`.
    pub fn full(len: usize) -> BitSet {
        let mut s = BitSet {
            start: 0,
            words: vec![u64::MAX; len / 64],
        };
        if !len.is_multiple_of(64) {
            s.words.push((1u64 << (len % 64)) - 1);
        }
        s
    }

    /// Word `w` of the set (ids `64 * w ..`), zero outside the stored run.
    fn word(&self, w: usize) -> u64 {
        w.checked_sub(self.start)
            .and_then(|i| self.words.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// One past the last word of the stored run.
    fn end(&self) -> usize {
        self.start + self.words.len()
    }

    /// Stores words `from..to` at least (zeros where new).
    fn cover(&mut self, from: usize, to: usize) {
        if from >= to {
            return;
        }
        if self.words.is_empty() {
            self.start = from;
            self.words.resize(to - from, 0);
            return;
        }
        if from < self.start {
            let grow = self.start - from;
            self.words.splice(0..0, std::iter::repeat_n(0, grow));
            self.start = from;
        }
        if to > self.end() {
            let len = to - self.start;
            self.words.resize(len, 0);
        }
    }

    /// The stored words that are not zero at either end: (index of the first, the words).
    fn trimmed(&self) -> (usize, &[u64]) {
        let Some(first) = self.words.iter().position(|w| *w != 0) else {
            return (0, &[]);
        };
        let last = self.words.iter().rposition(|w| *w != 0).unwrap_or(first);
        (self.start + first, &self.words[first..=last])
    }

    /// Adds `i`.
    pub fn insert(&mut self, i: impl Into<usize>) {
        let i = i.into();
        let w = i / 64;
        self.cover(w, w + 1);
        self.words[w - self.start] |= 1 << (i % 64);
    }

    /// Removes `i`.
    pub fn remove(&mut self, i: impl Into<usize>) {
        let i = i.into();
        if let Some(w) = (i / 64)
            .checked_sub(self.start)
            .and_then(|w| self.words.get_mut(w))
        {
            *w &= !(1 << (i % 64));
        }
    }

    /// Sets whether `i` is in the set.
    pub fn set(&mut self, i: impl Into<usize>, present: bool) {
        let i = i.into();
        if present {
            self.insert(i)
        } else {
            self.remove(i)
        }
    }

    /// Whether `i` is in the set.
    pub fn contains(&self, i: impl Into<usize>) -> bool {
        let i = i.into();
        self.word(i / 64) & (1 << (i % 64)) != 0
    }

    /// Moves membership of `from` to `to` (`from` ends up absent): renumbering after a removal.
    pub fn renumber(&mut self, from: impl Into<usize>, to: impl Into<usize>) {
        let (from, to) = (from.into(), to.into());
        let present = self.contains(from);
        self.remove(from);
        self.set(to, present);
    }

    /// The stored words `self` and `other` both have: the same range of word indexes, as
    /// positions in each one's words (empty when they have none in common).
    fn overlap(&self, other: &BitSet) -> (Range<usize>, Range<usize>) {
        let from = self.start.max(other.start);
        let to = self.end().min(other.end());
        if from >= to {
            return (0..0, 0..0);
        }
        (
            from - self.start..to - self.start,
            from - other.start..to - other.start,
        )
    }

    /// Keeps only the members also in `other`.
    pub fn intersect(&mut self, other: &BitSet) {
        let (mine, theirs) = self.overlap(other);
        for (w, o) in self.words[mine.clone()]
            .iter_mut()
            .zip(&other.words[theirs])
        {
            *w &= o;
        }
        self.words[..mine.start].fill(0);
        self.words[mine.end..].fill(0);
    }

    /// Adds every member of `other`.
    pub fn union(&mut self, other: &BitSet) {
        if other.start < self.start || other.end() > self.end() {
            let (from, words) = other.trimmed();
            if words.is_empty() {
                return;
            }
            self.cover(from, from + words.len());
        }
        let (mine, theirs) = self.overlap(other);
        for (w, o) in self.words[mine].iter_mut().zip(&other.words[theirs]) {
            *w |= o;
        }
    }

    /// Removes every member of `other`.
    pub fn subtract(&mut self, other: &BitSet) {
        let (mine, theirs) = self.overlap(other);
        for (w, o) in self.words[mine].iter_mut().zip(&other.words[theirs]) {
            *w &= !o;
        }
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// How many members it has.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Removes every member.
    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    /// Makes it a copy of `other` (reusing its storage).
    pub fn assign(&mut self, other: &BitSet) {
        self.start = other.start;
        self.words.clear();
        self.words.extend_from_slice(&other.words);
    }

    /// Adds every member of `a` that is also in `b`.
    pub fn union_of_intersection(&mut self, a: &BitSet, b: &BitSet) {
        let (in_a, in_b) = a.overlap(b);
        if in_a.is_empty() {
            return;
        }
        let from = a.start + in_a.start;
        self.cover(from, from + in_a.len());
        let at = from - self.start;
        let mine = &mut self.words[at..at + in_a.len()];
        for ((w, x), y) in mine.iter_mut().zip(&a.words[in_a]).zip(&b.words[in_b]) {
            *w |= x & y;
        }
    }

    /// Removes the members that are also in `a` and in `b` (when given), adding them to
    /// `to` (when given); one pass where assign, intersect, subtract and union take four.
    /// Returns whether any member moved.
    pub fn move_common(&mut self, a: &BitSet, b: Option<&BitSet>, to: Option<&mut BitSet>) -> bool {
        let (mine, theirs) = self.overlap(a);
        if mine.is_empty() {
            return false;
        }
        let first = self.start + mine.start;
        let mut moved = false;
        let mut to = to;
        if let Some(to) = to.as_deref_mut() {
            to.cover(first, first + mine.len());
        }
        let words = self.words[mine].iter_mut().zip(&a.words[theirs]);
        for (k, (w, x)) in words.enumerate() {
            let mut m = *w & x;
            if let Some(b) = b {
                m &= b.word(first + k);
            }
            if m == 0 {
                continue;
            }
            moved = true;
            *w &= !m;
            if let Some(to) = to.as_deref_mut() {
                to.words[first + k - to.start] |= m;
            }
        }
        moved
    }

    /// The set whose members are given by `words`, member `i` at bit `i % 64` of word
    /// `i / 64`.
    pub fn from_words(words: Vec<u64>) -> BitSet {
        BitSet { start: 0, words }
    }

    /// The members, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let start = self.start;
        self.words
            .iter()
            .enumerate()
            .flat_map(move |(i, &bits)| word_members(start + i, bits))
    }

    /// The runs of consecutive members, ascending, each as the range it covers: a full word
    /// is passed over at once.
    pub fn runs(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        let words = &self.words;
        let at = move |i: usize| (self.start + i) * 64;
        // Word `i`, with the bits of runs already returned cleared.
        let mut i = 0;
        let mut bits = words.first().copied().unwrap_or(0);
        std::iter::from_fn(move || {
            while bits == 0 {
                i += 1;
                bits = *words.get(i)?;
            }
            let from = bits.trailing_zeros();
            let start = at(i) + from as usize;
            let to = from + (bits >> from).trailing_ones();
            if to < 64 {
                bits &= u64::MAX << to;
                return Some(start..at(i) + to as usize);
            }
            loop {
                i += 1;
                let Some(&word) = words.get(i) else {
                    bits = 0;
                    return Some(start..at(i));
                };
                let ones = word.trailing_ones();
                if ones < 64 {
                    bits = word & (u64::MAX << ones);
                    return Some(start..at(i) + ones as usize);
                }
            }
        })
    }

    /// The members of a set of pods, ascending.
    pub fn pods(&self) -> impl Iterator<Item = PodId> + '_ {
        self.iter().map(PodId::new)
    }

    /// The members that `mask` also has, in words `words` (ids `64 * words.start ..
    /// 64 * words.end`), ascending.
    pub fn iter_within<'a>(
        &'a self,
        mask: &'a BitSet,
        words: Range<usize>,
    ) -> impl Iterator<Item = usize> + 'a {
        let from = words.start.max(self.start);
        let to = words.end.min(self.end()).max(from);
        (from..to).flat_map(move |w| word_members(w, self.word(w) & mask.word(w)))
    }
}

/// The ids that `bits`, word `w` of a set, holds, ascending.
fn word_members(w: usize, mut bits: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if bits == 0 {
            return None;
        }
        let b = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        Some(w * 64 + b)
    })
}

/// Sets are equal when they have the same members, however their words are stored.
impl PartialEq for BitSet {
    fn eq(&self, other: &BitSet) -> bool {
        self.trimmed() == other.trimmed()
    }
}

impl Eq for BitSet {}

impl Hash for BitSet {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.trimmed().hash(state);
    }
}

/// Keeps in each row `rows[i]` only the members `j` whose column `cols[j]` holds `i`: the
/// rows intersected with the transpose of the columns, without building it.
pub fn intersect_transposed(rows: &mut [BitSet], cols: &[BitSet]) {
    use rayon::prelude::*;
    /// Blocks of 64 rows taken together: each column's words for them share a cache line.
    const BLOCKS: usize = 8;
    // Groups of blocks in parallel. Of each 64×64 block of the columns, transposed in
    // place, word `k` masks row `k` of the block of rows.
    rows.par_chunks_mut(64 * BLOCKS)
        .enumerate()
        .for_each(|(group, rows)| {
            let first = group * BLOCKS;
            let words = rows.iter().map(BitSet::end).max().unwrap_or(0);
            let mut blocks = [[0u64; 64]; BLOCKS];
            for w in 0..words {
                for k in 0..64 {
                    let col = cols.get(w * 64 + k);
                    for (q, block) in blocks.iter_mut().enumerate() {
                        block[k] = col.map_or(0, |c| c.word(first + q));
                    }
                }
                for (block, rows) in blocks.iter_mut().zip(rows.chunks_mut(64)) {
                    transpose64(block);
                    for (row, mask) in rows.iter_mut().zip(block.iter()) {
                        let at = w.checked_sub(row.start);
                        if let Some(word) = at.and_then(|i| row.words.get_mut(i)) {
                            *word &= mask;
                        }
                    }
                }
            }
        });
}

/// Transposes a 64×64 bit block in place (bit `c` of word `r` moves to bit `r` of word `c`).
fn transpose64(a: &mut [u64; 64]) {
    let mut j = 32;
    let mut m: u64 = 0x0000_0000_FFFF_FFFF;
    while j != 0 {
        let mut k = 0;
        while k < 64 {
            let t = ((a[k] >> j) ^ a[k + j]) & m;
            a[k] ^= t << j;
            a[k + j] ^= t;
            k = (k + j + 1) & !j;
        }
        j >>= 1;
        m ^= m << j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersecting_with_the_transpose_keeps_the_pairs_both_hold() {
        for n in [1, 63, 64, 65, 130] {
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut random = |offset: usize| -> Vec<BitSet> {
                (0..n)
                    .map(|i| {
                        let mut row = BitSet::default();
                        for j in 0..n {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            if x.is_multiple_of(3) || (i + offset) % n == j {
                                row.insert(j);
                            }
                        }
                        row
                    })
                    .collect()
            };
            let (before, cols) = (random(0), random(1));
            let mut rows = before.clone();
            intersect_transposed(&mut rows, &cols);
            for (i, (row, before)) in rows.iter().zip(&before).enumerate() {
                for (j, col) in cols.iter().enumerate() {
                    assert_eq!(
                        row.contains(j),
                        before.contains(j) && col.contains(i),
                        "n={n} ({i}, {j})"
                    );
                }
            }
        }
    }

    #[test]
    fn runs_are_maximal_and_cover_the_members() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for round in 0..2000 {
            let mut set = BitSet::default();
            let mut at = (x % 300) as usize;
            // Runs of random lengths (often whole words and more) with random gaps.
            while at < 1000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let len = (x % 200) as usize;
                for i in at..at + len {
                    set.insert(i);
                }
                at += len + 1 + (x >> 20) as usize % 70;
            }
            if round % 3 == 0 {
                set.remove(at / 2);
            }
            let runs: Vec<Range<usize>> = set.runs().collect();
            let members: Vec<usize> = set.iter().collect();
            assert_eq!(runs.iter().cloned().flatten().collect::<Vec<_>>(), members);
            for pair in runs.windows(2) {
                assert!(pair[0].end < pair[1].start, "round {round}: {pair:?}");
            }
            assert!(runs.iter().all(|r| !r.is_empty()), "round {round}");
        }
    }

    /// Every operation against a model (a sorted set of ids) on random sets that start
    /// anywhere, including empty ones and ones stored with zero words at either end.
    #[test]
    fn operations_agree_with_a_model_wherever_the_words_start() {
        use std::collections::BTreeSet;
        use std::hash::{BuildHasher, RandomState};
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let random = |next: &mut dyn FnMut() -> u64| -> (BitSet, BTreeSet<usize>) {
            let base = (next() % 8) as usize * 64 + (next() % 64) as usize;
            let span = (next() % 300) as usize;
            let mut set = if next().is_multiple_of(4) {
                BitSet::new((next() % 1000) as usize)
            } else {
                BitSet::default()
            };
            let mut model = BTreeSet::new();
            for _ in 0..(next() % 40) {
                let i = base + (next() as usize % (span + 1));
                set.insert(i);
                model.insert(i);
            }
            if let Some(&i) = model.iter().next().filter(|_| next().is_multiple_of(3)) {
                set.remove(i);
                model.remove(&i);
            }
            (set, model)
        };
        let hasher = RandomState::new();
        for round in 0..3000 {
            let (a, ma) = random(&mut next);
            let (b, mb) = random(&mut next);
            let members = |s: &BitSet| s.iter().collect::<BTreeSet<_>>();
            assert_eq!(members(&a), ma, "round {round}");
            let from_runs: BTreeSet<usize> = a.runs().flatten().collect();
            assert_eq!(from_runs, ma, "runs, round {round}");
            assert_eq!(a.len(), ma.len());
            assert_eq!(a.is_empty(), ma.is_empty());
            for i in 0..700 {
                assert_eq!(a.contains(i), ma.contains(&i), "round {round}, {i}");
            }
            let mut u = a.clone();
            u.union(&b);
            assert_eq!(members(&u), &ma | &mb, "union, round {round}");
            let mut n = a.clone();
            n.intersect(&b);
            assert_eq!(members(&n), &ma & &mb, "intersect, round {round}");
            let mut d = a.clone();
            d.subtract(&b);
            assert_eq!(members(&d), &ma - &mb, "subtract, round {round}");
            let (c, mc) = random(&mut next);
            let mut ui = c.clone();
            ui.union_of_intersection(&a, &b);
            assert_eq!(
                members(&ui),
                &mc | &(&ma & &mb),
                "union_of_intersection, round {round}"
            );
            for with_b in [false, true] {
                let (mut from, mut into) = (c.clone(), a.clone());
                let common = if with_b {
                    &(&mc & &ma) & &mb
                } else {
                    &mc & &ma
                };
                let moved = from.move_common(&a, with_b.then_some(&b), Some(&mut into));
                assert_eq!(moved, !common.is_empty(), "move_common, round {round}");
                assert_eq!(members(&from), &mc - &common, "move_common, round {round}");
                assert_eq!(members(&into), &ma | &common, "move_common, round {round}");
                let mut alone = c.clone();
                alone.move_common(&a, with_b.then_some(&b), None);
                assert_eq!(alone, from, "move_common without `to`, round {round}");
            }
            let window = (next() % 10) as usize..(next() % 10) as usize;
            let within: BTreeSet<usize> = (&ma & &mb)
                .into_iter()
                .filter(|i| window.contains(&(i / 64)))
                .collect();
            assert_eq!(
                a.iter_within(&b, window.clone()).collect::<BTreeSet<_>>(),
                within,
                "iter_within {window:?}, round {round}"
            );
            let mut copy = BitSet::new(5);
            copy.assign(&b);
            assert_eq!(copy, b);
            // Equal members, equal sets and hashes, however stored.
            let mut rebuilt = BitSet::new(1000);
            for &i in &ma {
                rebuilt.insert(i);
            }
            assert_eq!(rebuilt, a);
            assert_eq!(hasher.hash_one(&rebuilt), hasher.hash_one(&a));
            assert_eq!(a == b, ma == mb);
        }
    }

    #[test]
    fn algebra() {
        let mut s = BitSet::new(130);
        for i in [0usize, 63, 64, 129] {
            s.insert(i);
        }
        assert!(s.contains(64usize) && !s.contains(65usize) && !s.contains(1000usize));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 63, 64, 129]);
        let mut f = BitSet::full(130);
        f.subtract(&s);
        assert_eq!(f.iter().count(), 126);
        f.intersect(&s);
        assert!(f.is_empty());
        s.renumber(129usize, 1usize);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 63, 64]);
        s.insert(300usize);
        let mut u = BitSet::new(0);
        u.union(&s);
        assert_eq!(u, s);
        assert_eq!(u.len(), 5);
        let mut v = BitSet::new(0);
        v.union_of_intersection(&u, &BitSet::full(64));
        assert_eq!(v.iter().collect::<Vec<_>>(), vec![0, 1, 63]);
        v.assign(&s);
        assert_eq!(v, s);
        v.clear();
        assert!(v.is_empty());
    }
}
