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
/// use workqueue::CancellationToken;
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;

    fn seen_counts(pieces: usize, workers: usize, chunk: usize) -> Vec<u32> {
        let seen: Vec<AtomicU32> = (0..pieces).map(|_| AtomicU32::new(0)).collect();
        parallelize_until(None, workers, pieces, chunk, |i| {
            seen[i].fetch_add(1, Ordering::Relaxed);
        });
        seen.into_iter().map(AtomicU32::into_inner).collect()
    }

    #[test]
    fn every_piece_runs_exactly_once_for_each_chunking() {
        for (pieces, workers, chunk) in [
            (1000, 10, 1),
            (1000, 10, 10),
            (1000, 10, 100),
            (999, 10, 13),
        ] {
            let counts = seen_counts(pieces, workers, chunk);
            assert!(
                counts.iter().all(|c| *c == 1),
                "({pieces}, {workers}, {chunk}): some piece not run exactly once"
            );
        }
    }

    #[test]
    fn zero_pieces_returns_immediately_and_zero_chunk_size_means_one() {
        parallelize_until(None, 4, 0, 1, |_| unreachable!("no piece"));
        assert!(seen_counts(10, 3, 0).iter().all(|c| *c == 1));
    }

    #[test]
    fn cancellation_stops_workers_before_further_chunks() {
        let token = CancellationToken::new();
        let ran = AtomicUsize::new(0);
        parallelize_until(Some(&token), 1, 100, 10, |i| {
            ran.fetch_add(1, Ordering::Relaxed);
            if i == 15 {
                token.cancel();
            }
        });
        assert_eq!(
            ran.into_inner(),
            20,
            "the chunk in progress finishes, no further chunk starts"
        );
    }

    #[test]
    fn a_panicking_piece_stops_its_worker_only_and_is_resumed_on_the_caller() {
        let ran = AtomicUsize::new(0);
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            parallelize_until(None, 2, 100, 1, |i| {
                if i == 0 {
                    panic!("piece 0 failed");
                }
                ran.fetch_add(1, Ordering::Relaxed);
            });
        }));
        let payload = result.expect_err("the panic reaches the caller");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"piece 0 failed"));
        assert_eq!(
            ran.into_inner(),
            99,
            "the other worker ran every remaining piece"
        );
    }
}
