//! Two pieces of work at once, started at once.

use std::sync::{Mutex, PoisonError};

/// `a()` on this thread and `b()` on a thread of its own, both started now; `b()` on this
/// thread after `a()` when the other has not started it by then, or when no thread can be
/// started.
///
/// The compile's two sides are split so rather than on rayon's pool: a relabel's compile
/// takes a few milliseconds, and on a virtual machine a pool worker that had gone to sleep
/// was often woken too late to take the second side before the first was done (one
/// change in ten ran both sides on one thread). A new thread can start late too; then
/// this thread does not wait for it to start before `b()` is begun.
pub(crate) fn both<A: Send, B: Send>(
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    let slot = Mutex::new(Some(b));
    let take = || slot.lock().unwrap_or_else(PoisonError::into_inner).take();
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("palisade-side".into())
            .spawn_scoped(scope, || take().map(|b| b()));
        let a = a();
        // `b` is still in its slot when the thread has not started it (or there is none).
        let here = take().map(|b| b());
        let there = match spawned {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => None,
        };
        match here.or(there) {
            Some(b) => (a, b),
            None => unreachable!("b is taken once, by the thread or here"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::both;

    #[test]
    fn both_run_once_and_their_results_come_back_in_order() {
        let (a, b) = both(|| 1 + 1, || "b".to_string());
        assert_eq!((a, b.as_str()), (2, "b"));
    }

    #[test]
    fn b_runs_on_its_thread_when_a_outlasts_the_start_and_once_in_every_run() {
        // `a` outlasts any thread start: `b` ran on the thread.
        let slow_a = both(
            || std::thread::sleep(std::time::Duration::from_millis(200)),
            || std::thread::current().id(),
        );
        assert_ne!(slow_a.1, std::thread::current().id());
        // Every run gives `b` once, wherever it ran.
        let runs = std::sync::atomic::AtomicUsize::new(0);
        for _ in 0..200 {
            let ((), ()) = both(
                || (),
                || {
                    runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                },
            );
        }
        assert_eq!(runs.into_inner(), 200);
    }
}
