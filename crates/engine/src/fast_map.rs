//! Hash maps with a fast hasher, for keys no outside party chooses: identities (the address
//! in memory of something the map's user holds, such as an `Arc`'s pointer, with small
//! integers beside it) and a run's own values in a command that reads its user's files,
//! where colliding keys could only slow the run that made them. The standard library's
//! SipHash, which resists chosen collisions, stays the hasher of every other map: it
//! dominated the lookups a compile makes per class and rule.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A map with [`FastHasher`] (see the module documentation).
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// A set with [`FastHasher`] (see the module documentation).
pub type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

/// A word at a time, mixed in with a multiplication by an odd constant (the golden
/// ratio's, as Fibonacci hashing uses) and a rotation, so that aligned addresses, whose low
/// bits are zero, still spread over a table's buckets (it indexes by the low bits).
#[derive(Debug, Default, Clone, Copy)]
pub struct FastHasher(u64);

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0 ^ word)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(26);
    }
}

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    /// Eight bytes at a time; the last word also carries how many bytes it holds.
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(c);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;
    use std::sync::Arc;

    #[test]
    fn aligned_addresses_fill_the_buckets() {
        // 4,096 addresses 64 bytes apart: their hashes' low 12 bits (a 4,096-bucket
        // table's index) must take most values, not the few that alignment leaves.
        let build = BuildHasherDefault::<FastHasher>::default();
        let buckets: HashSet<u64> = (0..4096usize)
            .map(|i| build.hash_one(0x7f00_0000_0000usize + 64 * i) & 0xfff)
            .collect();
        assert!(buckets.len() > 2500, "{} of 4096 buckets", buckets.len());
    }

    #[test]
    fn a_map_by_identity_tells_equal_values_apart() {
        let (a, b) = (Arc::new(1), Arc::new(1));
        let mut m: FastMap<(usize, u32), &str> = FastMap::default();
        m.insert((Arc::as_ptr(&a) as usize, 0), "a");
        m.insert((Arc::as_ptr(&b) as usize, 0), "b");
        m.insert((Arc::as_ptr(&a) as usize, 1), "a1");
        assert_eq!(m.len(), 3);
        assert_eq!(m[&(Arc::as_ptr(&b) as usize, 0)], "b");
    }

    #[test]
    fn strings_that_differ_in_their_last_bytes_or_length_hash_apart() {
        let build = BuildHasherDefault::<FastHasher>::default();
        let hashes: HashSet<u64> = ["", "a", "a\0", "abcdefgh", "abcdefghi", "abcdefghj"]
            .iter()
            .map(|s| build.hash_one(s))
            .collect();
        assert_eq!(hashes.len(), 6);
    }
}
