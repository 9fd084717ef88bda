//! A growable set of small integers (pod ids), with the set algebra selectors need.

/// A set of ids.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
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

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
