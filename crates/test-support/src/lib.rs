//! Support for Palisade's tests; a dev-dependency only, never shipped.
//!
//! - [`require`]: the one check that a test's environment (root, a tool, a server) is
//!   there. Under `CI=true` a missing requirement fails the test; elsewhere the test prints
//!   `SKIPPED <test>: <reason>` past the harness's capture and returns.
//! - [`seed`]: proptest configurations with a fixed seed in CI, a new printed one elsewhere,
//!   and an override from `PROPTEST_SEED` (or proptest's own `PROPTEST_RNG_SEED`).
//! - [`wait`]: waiting for a condition with a timeout that names what was awaited.
//! - [`at_exit`]: stopping what a test binary started, when it exits.
//! - [`git`]: scratch git repositories.
//! - [`service_table`]: the validation table of Services and EndpointSlices.

pub mod at_exit;
pub mod git;
pub mod require;
pub mod seed;
pub mod service_table;
pub mod wait;

pub use at_exit::StopAtExit;
pub use require::{in_ci, is_root, require_env, require_root, unavailable};
pub use seed::proptest_config;
pub use wait::wait_until;
