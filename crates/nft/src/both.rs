//! Two pieces of work at once, started at once.

use std::sync::{Mutex, PoisonError};

/// `a()` on this thread and `b()` on a thread of its own, both started now; or one after
/// the other when no thread can be started.
///
/// The compile's two sides are split so rather than on rayon's pool: a relabel's compile
/// takes a few milliseconds, and on a virtual machine a pool worker that had gone to sleep
/// was often woken too late to take the second side before the first was done (one
/// change in ten ran both sides on one thread).
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
        let ran = match spawned {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => None,
        };
        // The thread ran `b` when it started, else `b` is still in its slot.
        match ran.or_else(|| take().map(|b| b())) {
            Some(b) => (a, b),
            None => unreachable!("b is run by the thread or here"),
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
        let other = both(
            || std::thread::current().id(),
            || std::thread::current().id(),
        );
        assert_ne!(other.0, other.1, "b runs on a thread of its own");
    }
}
