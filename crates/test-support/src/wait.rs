//! Waiting for a condition, with a timeout that says what was awaited.

use std::time::{Duration, Instant};

/// How often [`wait_until`] asks again.
const POLL: Duration = Duration::from_millis(10);

/// Asks `f` every 10 ms until it returns `Some`, and returns that value with the time it
/// took; after `timeout`, panics with `what()` (built only then, so it can carry a log).
pub fn wait_until<T>(
    timeout: Duration,
    what: impl FnOnce() -> String,
    mut f: impl FnMut() -> Option<T>,
) -> (T, Duration) {
    let start = Instant::now();
    loop {
        if let Some(value) = f() {
            return (value, start.elapsed());
        }
        if start.elapsed() >= timeout {
            panic!("{}: not within {timeout:?}", what());
        }
        std::thread::sleep(POLL);
    }
}
