//! [`Recomputed`]: a value computed when first asked for and computed again, when next asked
//! for, after each [`notify`](Recomputed::notify) (client-go's `synctrack.Lazy`; not a
//! compute-once cell such as `std::sync::LazyLock`, hence its name here).
//!
//! Controllers use it for a value derived from a cache that is costly to derive and read more
//! often than the cache changes: a handler calls `notify` on every change (cheap, no
//! computation), readers call `get` and pay for one evaluation per change at most.
//!
//! The value lives in an *entry*; `notify` swaps in a fresh, empty entry, so a reader that
//! started on the old entry finishes with the old value while later readers evaluate anew.
//! Within one entry, readers that find it empty wait for one evaluation and share its value.
//! An error is not kept: the next `get` evaluates again.

use std::fmt;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

/// The function a [`Recomputed`] evaluates.
type Evaluate<T, E> = Arc<dyn Fn() -> Result<T, E> + Send + Sync>;

/// One generation of the value: empty until evaluated successfully.
struct Entry<T> {
    /// Held while evaluating, so the readers of one generation evaluate once.
    value: Mutex<Option<T>>,
}

/// A lazily evaluated value, re-evaluated after each [`notify`](Self::notify) (see the module
/// documentation).
///
/// Invariant: between two `notify` calls, successful evaluations happen at most once, and every
/// `get` that starts after a `notify` returns a value evaluated after that `notify` (or its
/// error).
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use shared_informer::Recomputed;
///
/// let evaluations = Arc::new(AtomicUsize::new(0));
/// let value = Recomputed::new({
///     let evaluations = evaluations.clone();
///     move || Ok::<_, std::convert::Infallible>(evaluations.fetch_add(1, Ordering::SeqCst) + 1)
/// });
/// assert_eq!(value.get(), Ok(1));
/// assert_eq!(value.get(), Ok(1), "kept until notified");
/// value.notify();
/// assert_eq!(value.get(), Ok(2));
/// ```
pub struct Recomputed<T, E> {
    evaluate: Evaluate<T, E>,
    current: RwLock<Arc<Entry<T>>>,
}

impl<T, E> fmt::Debug for Recomputed<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let evaluated = self.current.read().value.try_lock().map(|v| v.is_some());
        f.debug_struct("Recomputed")
            .field("evaluated", &evaluated)
            .finish()
    }
}

impl<T: Clone, E> Recomputed<T, E> {
    /// A value computed by `evaluate` when first asked for.
    pub fn new(evaluate: impl Fn() -> Result<T, E> + Send + Sync + 'static) -> Self {
        Recomputed {
            evaluate: Arc::new(evaluate),
            current: RwLock::new(Arc::new(Entry {
                value: Mutex::new(None),
            })),
        }
    }

    /// Something changed: the next [`get`](Self::get) evaluates again. Cheap; evaluates nothing.
    pub fn notify(&self) {
        *self.current.write() = Arc::new(Entry {
            value: Mutex::new(None),
        });
    }

    /// The value: the kept one, or a new evaluation if there is none since the last
    /// [`notify`](Self::notify). Callers that find no value wait for the one evaluation in
    /// progress; an error is returned to the caller whose evaluation failed and not kept.
    ///
    /// Evaluation runs on the caller's thread while it holds the entry's lock: keep it free of
    /// calls back into this `Recomputed`.
    pub fn get(&self) -> Result<T, E> {
        let entry = Arc::clone(&self.current.read());
        let mut value = entry.value.lock();
        if let Some(value) = &*value {
            return Ok(value.clone());
        }
        let evaluated = (self.evaluate)()?;
        *value = Some(evaluated.clone());
        Ok(evaluated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting(fail_first: usize) -> (Recomputed<usize, String>, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let value = Recomputed::new({
            let calls = calls.clone();
            move || {
                let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                if n <= fail_first {
                    Err(format!("failure {n}"))
                } else {
                    Ok(n)
                }
            }
        });
        (value, calls)
    }

    #[test]
    fn evaluates_once_per_notify_and_only_when_asked() {
        let (value, calls) = counting(0);
        value.notify();
        value.notify();
        assert_eq!(calls.load(Ordering::SeqCst), 0, "notify evaluates nothing");
        assert_eq!(value.get(), Ok(1));
        assert_eq!(value.get(), Ok(1));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        value.notify();
        assert_eq!(value.get(), Ok(2));
        assert_eq!(value.get(), Ok(2));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn an_error_is_not_kept() {
        let (value, calls) = counting(2);
        assert_eq!(value.get(), Err("failure 1".to_string()));
        assert_eq!(value.get(), Err("failure 2".to_string()));
        assert_eq!(value.get(), Ok(3));
        assert_eq!(value.get(), Ok(3));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn concurrent_readers_of_one_generation_share_one_evaluation() {
        let (value, calls) = counting(0);
        let value = Arc::new(value);
        let readers: Vec<_> = (0..8)
            .map(|_| {
                let value = value.clone();
                std::thread::spawn(move || value.get())
            })
            .collect();
        for reader in readers {
            assert_eq!(reader.join().unwrap(), Ok(1));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
