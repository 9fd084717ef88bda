//! Hash maps keyed by identity: the address in memory of something the map's user holds
//! (an `Arc`'s pointer), with small integers beside it. Such keys need no protection
//! against chosen collisions (no input chooses where a value lands in memory), so they
//! are hashed with one multiplication instead of the standard library's SipHash, which
//! dominated the lookups a compile makes per class and rule.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by identity (see the module documentation).
pub type PtrMap<K, V> = HashMap<K, V, BuildHasherDefault<PtrHasher>>;

/// A set of identities (see the module documentation).
pub type PtrSet<K> = HashSet<K, BuildHasherDefault<PtrHasher>>;

/// The hasher of [`PtrMap`]: each integer written is mixed in with a multiplication by
/// an odd constant (the golden ratio's, as Fibonacci hashing uses) and a rotation, so
/// that aligned addresses, whose low bits are zero, still spread over the buckets.
#[derive(Debug, Default, Clone, Copy)]
pub struct PtrHasher(u64);

impl PtrHasher {
    fn mix(&mut self, word: u64) {
        self.0 = (self.0 ^ word)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(26);
    }
}

impl Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    /// Any other key type still hashes correctly, a byte at a time.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.mix(u64::from(b));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.mix(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
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
        let build = BuildHasherDefault::<PtrHasher>::default();
        let buckets: HashSet<u64> = (0..4096usize)
            .map(|i| build.hash_one(0x7f00_0000_0000usize + 64 * i) & 0xfff)
            .collect();
        assert!(buckets.len() > 2500, "{} of 4096 buckets", buckets.len());
    }

    #[test]
    fn a_map_by_identity_tells_equal_values_apart() {
        let (a, b) = (Arc::new(1), Arc::new(1));
        let mut m: PtrMap<(usize, u32), &str> = PtrMap::default();
        m.insert((Arc::as_ptr(&a) as usize, 0), "a");
        m.insert((Arc::as_ptr(&b) as usize, 0), "b");
        m.insert((Arc::as_ptr(&a) as usize, 1), "a1");
        assert_eq!(m.len(), 3);
        assert_eq!(m[&(Arc::as_ptr(&b) as usize, 0)], "b");
    }
}
