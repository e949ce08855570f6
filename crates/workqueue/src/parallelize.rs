//! Splitting a batch of CPU work over a few threads (E11, client-go's `ParallelizeUntil`).
//!
//! The work is synchronous and borrows from the caller, so it runs on scoped OS threads rather
//! than on the async runtime, where it would block the runtime's workers.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use workqueue::parallelize_until;
//!
//! let sum = AtomicUsize::new(0);
//! parallelize_until(None, 4, 100, 10, |i| {
//!     sum.fetch_add(i, Ordering::Relaxed);
//! });
//! assert_eq!(sum.into_inner(), 4950);
//! ```

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// Runs `work(i)` for every `i` in `0..pieces`, on at most `workers` threads, handing out the
/// pieces in chunks of `chunk_size` (at least 1) (E11.1).
///
/// Each piece runs exactly once unless `cancel` is cancelled: then workers start no further
/// chunk. Returns when every started chunk is finished. If `work` panics, that worker stops, the
/// others finish, and the first panic is then resumed on the caller's thread.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use tokio_util::sync::CancellationToken;
/// use workqueue::parallelize_until;
///
/// let token = CancellationToken::new();
/// token.cancel();
/// let ran = AtomicUsize::new(0);
/// parallelize_until(Some(&token), 2, 10, 1, |_| {
///     ran.fetch_add(1, Ordering::Relaxed);
/// });
/// assert_eq!(ran.into_inner(), 0);
/// ```
pub fn parallelize_until<F>(
    cancel: Option<&CancellationToken>,
    workers: usize,
    pieces: usize,
    chunk_size: usize,
    work: F,
) where
    F: Fn(usize) + Sync,
{
    if pieces == 0 {
        return;
    }
    let chunk_size = chunk_size.max(1);
    let chunks = pieces.div_ceil(chunk_size);
    let workers = workers.clamp(1, chunks);
    let next_chunk = AtomicUsize::new(0);
    let first_panic: Mutex<Option<Box<dyn Any + Send>>> = Mutex::new(None);
    let worker = || {
        let run = panic::catch_unwind(AssertUnwindSafe(|| loop {
            if cancel.is_some_and(CancellationToken::is_cancelled) {
                return;
            }
            let chunk = next_chunk.fetch_add(1, Ordering::Relaxed);
            if chunk >= chunks {
                return;
            }
            let start = chunk * chunk_size;
            for i in start..(start + chunk_size).min(pieces) {
                work(i);
            }
        }));
        if let Err(payload) = run {
            first_panic.lock().get_or_insert(payload);
        }
    };
    if workers == 1 {
        worker();
    } else {
        std::thread::scope(|scope| {
            for _ in 1..workers {
                scope.spawn(worker);
            }
            worker();
        });
    }
    if let Some(payload) = first_panic.into_inner() {
        panic::resume_unwind(payload);
    }
}
