//! Many values grouped into classes of equal ones, the work spread over every core.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, RandomState};

use rayon::prelude::*;

use crate::FastHasher;

/// For each of `n` keys (`key(i)` is the `i`th), the index of the first key equal to it
/// (its own index if it is the first).
pub fn first_equal<K, F>(n: usize, key: F) -> Vec<usize>
where
    K: Hash + Eq + Send + Sync,
    F: Fn(usize) -> K + Sync,
{
    first_equal_with(&RandomState::new(), n, key)
}

/// [`first_equal`] with [`crate::FastHasher`], for keys no outside party chooses (see
/// [`crate::FastMap`]): the analyses of a user's own files, where colliding keys could
/// only slow the run that made them.
pub fn first_equal_fast<K, F>(n: usize, key: F) -> Vec<usize>
where
    K: Hash + Eq + Send + Sync,
    F: Fn(usize) -> K + Sync,
{
    first_equal_with(&BuildHasherDefault::<FastHasher>::default(), n, key)
}

/// [`first_equal`] hashing with `state`. The keys are made and hashed in parallel, and
/// grouped by hash; that keys of one hash are equal is then checked in parallel, and only
/// when some are not (a collision) are they grouped again, comparing keys one by one.
fn first_equal_with<S, K, F>(state: &S, n: usize, key: F) -> Vec<usize>
where
    S: BuildHasher + Sync,
    K: Hash + Eq + Send + Sync,
    F: Fn(usize) -> K + Sync,
{
    let keys: Vec<(K, u64)> = (0..n)
        .into_par_iter()
        .map(|i| {
            let k = key(i);
            let hash = state.hash_one(&k);
            (k, hash)
        })
        .collect();
    let mut by_hash: HashMap<u64, usize> = HashMap::with_capacity(n.min(1 << 16));
    let firsts: Vec<usize> = (keys.iter().enumerate())
        .map(|(i, (_, hash))| *by_hash.entry(*hash).or_insert(i))
        .collect();
    if (firsts.par_iter().enumerate()).all(|(i, &f)| keys[i].0 == keys[f].0) {
        return firsts;
    }
    let mut by_hash: HashMap<u64, Vec<usize>> = HashMap::new();
    (keys.iter().enumerate())
        .map(|(i, (key, hash))| {
            let same = by_hash.entry(*hash).or_default();
            match same.iter().find(|&&f| keys[f].0 == *key) {
                Some(&f) => f,
                None => {
                    same.push(i);
                    i
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasherDefault, Hasher};

    use super::{first_equal, first_equal_with};

    #[test]
    fn each_key_names_the_first_equal_one() {
        let keys = ["a", "b", "a", "c", "b", "a"];
        assert_eq!(first_equal(keys.len(), |i| keys[i]), vec![0, 1, 0, 3, 1, 0]);
        assert!(first_equal(0, |i| keys[i]).is_empty());
    }

    /// Every key hashes alike.
    #[derive(Default)]
    struct Colliding;

    impl Hasher for Colliding {
        fn finish(&self) -> u64 {
            7
        }
        fn write(&mut self, _: &[u8]) {}
    }

    #[test]
    fn keys_whose_hashes_collide_are_told_apart() {
        let keys = ["a", "b", "a", "c", "b", "a"];
        let state = BuildHasherDefault::<Colliding>::default();
        assert_eq!(
            first_equal_with(&state, keys.len(), |i| keys[i]),
            vec![0, 1, 0, 3, 1, 0]
        );
    }
}
