//! A growable set of small integers (pod ids), with the set algebra selectors need.

/// A set of ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    /// An empty set with room for ids `0..len` (it grows on insert).
    pub fn new(len: usize) -> BitSet {
        BitSet {
            words: vec![0; len.div_ceil(64)],
        }
    }

    /// The set `0..len`.
    pub fn full(len: usize) -> BitSet {
        let mut s = BitSet {
            words: vec![u64::MAX; len / 64],
        };
        if !len.is_multiple_of(64) {
            s.words.push((1u64 << (len % 64)) - 1);
        }
        s
    }

    /// Adds `i`.
    pub fn insert(&mut self, i: usize) {
        let w = i / 64;
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (i % 64);
    }

    /// Removes `i`.
    pub fn remove(&mut self, i: usize) {
        if let Some(w) = self.words.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }

    /// Sets whether `i` is in the set.
    pub fn set(&mut self, i: usize, present: bool) {
        if present {
            self.insert(i)
        } else {
            self.remove(i)
        }
    }

    /// Whether `i` is in the set.
    pub fn contains(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Moves membership of `from` to `to` (`from` ends up absent): renumbering after a removal.
    pub fn renumber(&mut self, from: usize, to: usize) {
        let present = self.contains(from);
        self.remove(from);
        self.set(to, present);
    }

    /// Keeps only members also in `other`.
    pub fn intersect(&mut self, other: &BitSet) {
        for (i, w) in self.words.iter_mut().enumerate() {
            *w &= other.words.get(i).copied().unwrap_or(0);
        }
    }

    /// Adds every member of `other`.
    pub fn union(&mut self, other: &BitSet) {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (w, o) in self.words.iter_mut().zip(&other.words) {
            *w |= o;
        }
    }

    /// Removes every member of `other`.
    pub fn subtract(&mut self, other: &BitSet) {
        for (w, o) in self.words.iter_mut().zip(&other.words) {
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
        self.words.clear();
        self.words.extend_from_slice(&other.words);
    }

    /// Adds every member of `a` that is also in `b`.
    pub fn union_of_intersection(&mut self, a: &BitSet, b: &BitSet) {
        let n = a.words.len().min(b.words.len());
        if n > self.words.len() {
            self.words.resize(n, 0);
        }
        for ((w, x), y) in self.words.iter_mut().zip(&a.words).zip(&b.words) {
            *w |= x & y;
        }
    }

    /// The members as 64-bit words, member `i` at bit `i % 64` of word `i / 64`.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The set whose members are given by `words` (as [`BitSet::words`] gives them).
    pub fn from_words(words: Vec<u64>) -> BitSet {
        BitSet { words }
    }

    /// The members, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(wi * 64 + b)
            })
        })
    }
}

/// The transpose of the `n`×`n` bit matrix whose row `i` is `rows[i]`: row `j` of the
/// result holds `i` when `rows[i]` holds `j`.
pub fn transpose(rows: &[BitSet], n: usize) -> Vec<BitSet> {
    let w = n.div_ceil(64);
    let mut out = vec![vec![0u64; w]; n];
    let mut block = [0u64; 64];
    for bi in 0..w {
        for bj in 0..w {
            for (k, b) in block.iter_mut().enumerate() {
                *b = rows
                    .get(bi * 64 + k)
                    .and_then(|r| r.words.get(bj))
                    .copied()
                    .unwrap_or(0);
            }
            transpose64(&mut block);
            for (k, b) in block.iter().enumerate() {
                if let Some(row) = out.get_mut(bj * 64 + k) {
                    row[bi] = *b;
                }
            }
        }
    }
    out.into_iter().map(BitSet::from_words).collect()
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
    fn transpose_swaps_rows_and_columns() {
        for n in [1, 63, 64, 65, 130] {
            let mut rows = vec![BitSet::new(n); n];
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            for (i, row) in rows.iter_mut().enumerate() {
                for j in 0..n {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x.is_multiple_of(3) || i == j {
                        row.insert(j);
                    }
                }
            }
            let t = transpose(&rows, n);
            for (i, row) in rows.iter().enumerate() {
                for (j, col) in t.iter().enumerate() {
                    assert_eq!(col.contains(i), row.contains(j), "n={n} ({i}, {j})");
                }
            }
        }
    }

    #[test]
    fn algebra() {
        let mut s = BitSet::new(130);
        for i in [0, 63, 64, 129] {
            s.insert(i);
        }
        assert!(s.contains(64) && !s.contains(65) && !s.contains(1000));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 63, 64, 129]);
        let mut f = BitSet::full(130);
        f.subtract(&s);
        assert_eq!(f.iter().count(), 126);
        f.intersect(&s);
        assert!(f.is_empty());
        s.renumber(129, 1);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 63, 64]);
        s.insert(300);
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
