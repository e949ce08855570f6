//! The queues' property tests run on tokio's paused clock inside proptest's synchronous
//! closures; this is the one place that builds that runtime.

use std::future::Future;

/// Runs `f` to completion on a current-thread runtime whose clock starts paused: timers fire as
/// soon as every task waits, and nothing really sleeps.
pub(crate) fn block_on_paused<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
        .block_on(f)
}
