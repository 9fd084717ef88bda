//! Waiting for a condition, with a timeout that says what was awaited.

use std::time::{Duration, Instant};

/// Polls `f` every 50 ms until it returns `Some`, and returns that value with the time it
/// took; panics naming `what` after `timeout`.
pub fn wait_until<T>(
    timeout: Duration,
    what: &str,
    mut f: impl FnMut() -> Option<T>,
) -> (T, Duration) {
    let start = Instant::now();
    loop {
        if let Some(value) = f() {
            return (value, start.elapsed());
        }
        assert!(
            start.elapsed() < timeout,
            "{what}: not within {:.1} s",
            timeout.as_secs_f64()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
