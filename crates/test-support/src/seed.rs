//! Proptest seeds: fixed in CI, new (and printed) elsewhere, overridable.

use std::io::Write;
use std::sync::OnceLock;

use proptest::test_runner::{Config, RngSeed};

/// The override: `PROPTEST_SEED`, else proptest's own `PROPTEST_RNG_SEED`.
fn override_seed() -> Option<u64> {
    ["PROPTEST_SEED", "PROPTEST_RNG_SEED"]
        .iter()
        .find_map(|var| std::env::var(var).ok()?.trim().parse().ok())
}

/// One new seed per test process outside CI, printed once so a failure can be replayed.
fn fresh_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        use std::hash::{BuildHasher, RandomState};
        let seed = RandomState::new().hash_one(std::time::SystemTime::now());
        // Straight to stderr, past the harness's capture, so it is seen with the failure.
        let _ = writeln!(
            std::io::stderr(),
            "proptest seed {seed} (replay with PROPTEST_SEED={seed})"
        );
        seed
    })
}

/// The seed a property test uses: the override if set, `ci_seed` under `CI=true`, else a
/// new printed one.
pub fn seed(ci_seed: u64) -> u64 {
    override_seed().unwrap_or_else(|| {
        if crate::in_ci() {
            ci_seed
        } else {
            fresh_seed()
        }
    })
}

/// A proptest configuration of `cases` cases seeded by [`seed`]`(ci_seed)`.
pub fn proptest_config(cases: u32, ci_seed: u64) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(seed(ci_seed)),
        ..Config::default()
    }
}
