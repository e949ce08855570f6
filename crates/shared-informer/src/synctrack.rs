//! [`SyncTracker`] and [[`AsyncTracker`]]: HasSynced for a handler that hands its work elsewhere
//! (client-go's `synctrack.SingleFileTracker` and `synctrack.AsyncTracker`): the first counts
//! items, for work done in order by one worker; the second tracks each item by key, for work
//! done by several workers in any order, where the same key may be finished twice.
//!
//! A registration syncs once its handler has *returned* from every initial-list add (D7). A
//! handler that only queues each object for a worker returns at once, so its registration syncs
//! before the work is done. The handler counts each initial item it hands off with
//! [`start`](SyncTracker::start), the worker calls [`finished`](SyncTracker::finished) when it is
//! done with one, and the tracker is synced once its upstream (normally that registration) has
//! synced and no started item is left.

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::error::SyncTrackerError;
use crate::synced::HasSynced;

/// What the tracker waits on; every change is sent, so a waiter wakes at once.
struct Tracked {
    /// Items started and not finished; never below zero (a `finished` that would take it there
    /// is refused and sets `spoiled` instead).
    pending: i64,
    /// A `finished` came without a matching `start`: the count is wrong, so the tracker never
    /// reports synced again (unless it already had, which latches, D7).
    spoiled: bool,
    upstream: Option<Arc<dyn HasSynced>>,
}

/// Per-registration HasSynced for work handed off by a handler (see the module documentation).
/// Cheap to clone: clones share one count.
///
/// Invariant: it is synced when its upstream has synced, the started items not yet finished are
/// none and no `finished` was ever refused; once it has reported synced (through `has_synced` or `wait_for_sync`), it stays
/// synced, as every [`HasSynced`] does, so items started later (not of the initial list) do not
/// unsync it.
///
/// ```
/// use std::future::Future;
/// use std::pin::Pin;
/// use shared_informer::{HasSynced, SyncTracker};
///
/// /// Stands for the handler's registration, which has handled the initial list.
/// struct RegistrationSynced;
/// impl HasSynced for RegistrationSynced {
///     fn has_synced(&self) -> bool { true }
///     fn wait_for_sync(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
///         Box::pin(async { true })
///     }
/// }
///
/// let tracker = SyncTracker::new();
/// // In the handler, for each initial add it queues for a worker:
/// tracker.start();
/// tracker.start();
/// // Once the handler is registered:
/// tracker.set_upstream(RegistrationSynced);
/// assert!(!tracker.has_synced(), "two items still with the worker");
/// // In the worker, for each item done:
/// tracker.finished()?;
/// tracker.finished()?;
/// assert!(tracker.has_synced());
/// # Ok::<(), shared_informer::SyncTrackerError>(())
/// ```
#[derive(Clone)]
pub struct SyncTracker {
    inner: Arc<Inner>,
}

struct Inner {
    state: watch::Sender<Tracked>,
    /// Reported synced once: stays synced.
    latched: AtomicBool,
}

impl Default for SyncTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for SyncTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.borrow();
        f.debug_struct("SyncTracker")
            .field("pending", &state.pending)
            .field("spoiled", &state.spoiled)
            .field("upstream_set", &state.upstream.is_some())
            .field("latched", &self.inner.latched.load(Ordering::Acquire))
            .finish()
    }
}

impl SyncTracker {
    /// A tracker with nothing started and no upstream yet (not synced until one is set).
    pub fn new() -> Self {
        SyncTracker {
            inner: Arc::new(Inner {
                state: watch::channel(Tracked {
                    pending: 0,
                    spoiled: false,
                    upstream: None,
                })
                .0,
                latched: AtomicBool::new(false),
            }),
        }
    }

    /// What must sync first: normally the registration of the handler that calls
    /// [`start`](Self::start). The last call wins.
    pub fn set_upstream(&self, upstream: impl HasSynced + 'static) {
        let upstream: Arc<dyn HasSynced> = Arc::new(upstream);
        self.inner
            .state
            .send_modify(|state| state.upstream = Some(upstream));
    }

    /// One more item handed off and not finished.
    pub fn start(&self) {
        self.inner.state.send_modify(|state| state.pending += 1);
    }

    /// One handed-off item is done.
    ///
    /// # Errors
    ///
    /// [`SyncTrackerError::FinishedWithoutStart`] when no started item is left to finish: the
    /// call is refused (the count stays at zero, never negative), logged as an error, and the
    /// tracker is spoiled for good: [`has_synced`](HasSynced::has_synced) stays false and waiters
    /// get `false`, because a count that went wrong once could report synced while work is still
    /// running. A tracker that had already reported synced stays synced (D7 latching).
    ///
    /// An unkeyed count only notices the mistake when it would go below zero: `start(a)`,
    /// `start(b)`, `finished(a)`, `finished(a)` is at zero after the fourth call and cannot tell
    /// that `b` is still running; the refusal comes with `b`'s own `finished`. When items have
    /// keys, [`AsyncTracker`] tracks each one and is not fooled.
    ///
    /// client-go panics here instead; a refused call is what this project does with a caller's
    /// mistake (a panic in a worker would end that worker's task and leave the tracker waiting
    /// on it, silently).
    pub fn finished(&self) -> Result<(), SyncTrackerError> {
        let mut refused = false;
        self.inner.state.send_modify(|state| {
            if state.pending > 0 {
                state.pending -= 1;
            } else {
                state.spoiled = true;
                refused = true;
            }
        });
        if refused {
            tracing::error!(
                "SyncTracker::finished without a matching start: refused; the tracker will not report synced"
            );
            return Err(SyncTrackerError::FinishedWithoutStart);
        }
        Ok(())
    }

    /// Whether a [`finished`](Self::finished) was refused: the tracker then never syncs.
    pub fn is_spoiled(&self) -> bool {
        self.inner.state.borrow().spoiled
    }

    /// Items started and not finished.
    pub fn pending(&self) -> i64 {
        self.inner.state.borrow().pending
    }

    fn latch(&self) -> bool {
        self.inner.latched.store(true, Ordering::Release);
        true
    }
}

impl HasSynced for SyncTracker {
    fn has_synced(&self) -> bool {
        if self.inner.latched.load(Ordering::Acquire) {
            return true;
        }
        let synced = {
            let state = self.inner.state.borrow();
            !state.spoiled
                && state.pending == 0
                && state.upstream.as_ref().is_some_and(|u| u.has_synced())
        };
        synced && self.latch()
    }

    fn wait_for_sync(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(async move {
            if self.inner.latched.load(Ordering::Acquire) {
                return true;
            }
            let mut rx = self.inner.state.subscribe();
            if !upstream_synced(&mut rx, |state| state.upstream.as_ref()).await {
                return false;
            }
            let spoiled = match rx
                .wait_for(|state| state.spoiled || state.pending == 0)
                .await
            {
                Ok(state) => state.spoiled,
                Err(_) => true,
            };
            !spoiled && self.latch()
        })
    }
}

/// The first half of both trackers' wait: for an upstream to be set, then for it to sync.
/// `false` if it stopped first, or if the tracker's state is gone.
async fn upstream_synced<S>(
    rx: &mut watch::Receiver<S>,
    upstream: impl Fn(&S) -> Option<&Arc<dyn HasSynced>>,
) -> bool {
    let set = match rx.wait_for(|state| upstream(state).is_some()).await {
        Ok(state) => upstream(&state).cloned(),
        Err(_) => None,
    };
    match set {
        Some(upstream) => upstream.wait_for_sync().await,
        None => false,
    }
}

/// What an [`AsyncTracker`] waits on.
struct Keyed<T> {
    /// Keys started and not finished.
    waiting: HashSet<T>,
    upstream: Option<Arc<dyn HasSynced>>,
}

/// Per-registration HasSynced for initial items handed to several workers, tracked by key
/// (client-go's `synctrack.AsyncTracker`). Cheap to clone: clones share one set.
///
/// Invariant: it is synced when its upstream has synced and no started key is left unfinished;
/// once it has reported synced it stays synced. Keys are a set: a key started twice is one
/// item, and finishing a key that is not waiting (never started, or finished already) does
/// nothing, so a worker may call [`finished`](Self::finished) for every key it processes
/// without knowing whether it was an initial one.
///
/// ```
/// use std::future::Future;
/// use std::pin::Pin;
/// use shared_informer::{AsyncTracker, HasSynced};
///
/// struct RegistrationSynced;
/// impl HasSynced for RegistrationSynced {
///     fn has_synced(&self) -> bool { true }
///     fn wait_for_sync(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
///         Box::pin(async { true })
///     }
/// }
///
/// let tracker = AsyncTracker::new();
/// tracker.start("default/a");
/// tracker.start("default/b");
/// tracker.set_upstream(RegistrationSynced);
/// tracker.finished(&"default/a");
/// tracker.finished(&"default/a"); // twice: still one key
/// assert!(!tracker.has_synced(), "b is still with a worker");
/// tracker.finished(&"default/b");
/// assert!(tracker.has_synced());
/// ```
pub struct AsyncTracker<T> {
    inner: Arc<AsyncInner<T>>,
}

struct AsyncInner<T> {
    state: watch::Sender<Keyed<T>>,
    /// Reported synced once: stays synced.
    latched: AtomicBool,
}

impl<T> Clone for AsyncTracker<T> {
    fn clone(&self) -> Self {
        AsyncTracker {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T: Eq + Hash + Send + Sync + 'static> Default for AsyncTracker<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for AsyncTracker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.borrow();
        f.debug_struct("AsyncTracker")
            .field("waiting", &state.waiting.len())
            .field("upstream_set", &state.upstream.is_some())
            .field("latched", &self.inner.latched.load(Ordering::Acquire))
            .finish()
    }
}

impl<T: Eq + Hash + Send + Sync + 'static> AsyncTracker<T> {
    /// A tracker with no key started and no upstream yet (not synced until one is set).
    pub fn new() -> Self {
        AsyncTracker {
            inner: Arc::new(AsyncInner {
                state: watch::channel(Keyed {
                    waiting: HashSet::new(),
                    upstream: None,
                })
                .0,
                latched: AtomicBool::new(false),
            }),
        }
    }

    /// What must sync first: normally the registration of the handler that calls
    /// [`start`](Self::start). The last call wins.
    pub fn set_upstream(&self, upstream: impl HasSynced + 'static) {
        let upstream: Arc<dyn HasSynced> = Arc::new(upstream);
        self.inner
            .state
            .send_modify(|state| state.upstream = Some(upstream));
    }

    /// An initial item with this key is handed off (before the handler returns).
    pub fn start(&self, key: T) {
        self.inner.state.send_modify(|state| {
            state.waiting.insert(key);
        });
    }

    /// The item with this key is done; a key not waiting is ignored.
    pub fn finished(&self, key: &T) {
        self.inner
            .state
            .send_if_modified(|state| state.waiting.remove(key));
    }

    /// How many keys are started and not finished.
    pub fn pending(&self) -> usize {
        self.inner.state.borrow().waiting.len()
    }

    fn latch(&self) -> bool {
        self.inner.latched.store(true, Ordering::Release);
        true
    }
}

impl<T: Eq + Hash + Send + Sync + 'static> HasSynced for AsyncTracker<T> {
    fn has_synced(&self) -> bool {
        if self.inner.latched.load(Ordering::Acquire) {
            return true;
        }
        let synced = {
            let state = self.inner.state.borrow();
            state.waiting.is_empty() && state.upstream.as_ref().is_some_and(|u| u.has_synced())
        };
        synced && self.latch()
    }

    fn wait_for_sync(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(async move {
            if self.inner.latched.load(Ordering::Acquire) {
                return true;
            }
            let mut rx = self.inner.state.subscribe();
            if !upstream_synced(&mut rx, |state| state.upstream.as_ref()).await {
                return false;
            }
            let drained = rx.wait_for(|state| state.waiting.is_empty()).await.is_ok();
            drained && self.latch()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synced::SyncLatch;

    /// An upstream the test syncs or stops.
    #[derive(Clone, Default)]
    struct Upstream(Arc<SyncLatch>);

    impl HasSynced for Upstream {
        fn has_synced(&self) -> bool {
            self.0.is_synced()
        }
        fn wait_for_sync(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
            Box::pin(self.0.wait())
        }
    }

    #[test]
    fn synced_once_the_upstream_has_and_every_started_item_finished() {
        let tracker = SyncTracker::new();
        assert!(!tracker.has_synced(), "no upstream yet");
        let upstream = Upstream::default();
        tracker.set_upstream(upstream.clone());
        assert!(!tracker.has_synced(), "upstream not synced");
        tracker.start();
        tracker.start();
        upstream.0.set_synced();
        assert!(!tracker.has_synced(), "two items pending");
        tracker.finished().unwrap();
        assert_eq!(tracker.pending(), 1);
        assert!(!tracker.has_synced(), "one item pending");
        tracker.finished().unwrap();
        assert!(tracker.has_synced());
        // Later work is not initial work: synced stays synced.
        tracker.start();
        assert!(tracker.has_synced());
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_wakes_when_the_last_item_finishes_and_learns_of_a_stopped_upstream() {
        let tracker = SyncTracker::new();
        tracker.start();
        let waiter = tokio::spawn({
            let tracker = tracker.clone();
            async move { tracker.wait_for_sync().await }
        });
        let upstream = Upstream::default();
        tracker.set_upstream(upstream.clone());
        upstream.0.set_synced();
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "one item is still pending");
        tracker.finished().unwrap();
        assert!(waiter.await.unwrap());

        let stopped = SyncTracker::new();
        let upstream = Upstream::default();
        stopped.set_upstream(upstream.clone());
        upstream.0.set_stopped();
        assert!(!stopped.wait_for_sync().await);
        assert!(!stopped.has_synced());
    }

    /// The sequence that fools a counting tracker: start(a), start(b), finished(a), finished(a),
    /// then b finishes. The count would go to -1 at b's finish: refused, never negative, and the
    /// tracker never syncs, neither for a reader nor for a waiter.
    #[tokio::test(start_paused = true)]
    async fn a_finish_without_a_start_is_refused_and_the_tracker_never_syncs() {
        let tracker = SyncTracker::new();
        let upstream = Upstream::default();
        tracker.set_upstream(upstream.clone());
        let waiter = tokio::spawn({
            let tracker = tracker.clone();
            async move { tracker.wait_for_sync().await }
        });
        tracker.start(); // a
        tracker.start(); // b
        tracker.finished().unwrap(); // a
        tracker.finished().unwrap(); // a again: the count cannot tell it from b
        assert_eq!(tracker.pending(), 0);
        assert_eq!(
            tracker.finished(), // b
            Err(SyncTrackerError::FinishedWithoutStart)
        );
        assert_eq!(tracker.pending(), 0, "never negative");
        assert!(tracker.is_spoiled());
        upstream.0.set_synced();
        assert!(
            !tracker.has_synced(),
            "a spoiled count never reports synced"
        );
        assert!(!waiter.await.unwrap(), "a waiter learns it will not sync");
        assert!(!tracker.wait_for_sync().await);
        // Later balanced work does not heal it.
        tracker.start();
        tracker.finished().unwrap();
        assert!(!tracker.has_synced());
        assert!(format!("{tracker:?}").contains("spoiled: true"));
    }

    #[test]
    fn a_finish_on_a_fresh_tracker_is_refused() {
        let tracker = SyncTracker::new();
        let err = tracker.finished().unwrap_err();
        assert_eq!(
            err.to_string(),
            "SyncTracker::finished called more often than start: the tracker will not report synced"
        );
        assert_eq!(tracker.pending(), 0);
    }

    /// The same sequence on the keyed tracker: a key finished twice is one key, so b still
    /// counts; a key never started is ignored.
    #[tokio::test(start_paused = true)]
    async fn the_keyed_tracker_is_not_fooled_by_a_key_finished_twice() {
        let tracker = AsyncTracker::new();
        let upstream = Upstream::default();
        tracker.set_upstream(upstream.clone());
        let waiter = tokio::spawn({
            let tracker = tracker.clone();
            async move { tracker.wait_for_sync().await }
        });
        tracker.start("a");
        tracker.start("b");
        tracker.finished(&"a");
        tracker.finished(&"a");
        tracker.finished(&"never-started");
        upstream.0.set_synced();
        assert_eq!(tracker.pending(), 1);
        assert!(!tracker.has_synced(), "b still runs");
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        tracker.finished(&"b");
        assert!(tracker.has_synced());
        assert!(waiter.await.unwrap());
        // Latched: a later key does not unsync it.
        tracker.start("c");
        assert!(tracker.has_synced());
    }

    #[tokio::test(start_paused = true)]
    async fn the_keyed_tracker_waits_for_its_upstream_and_learns_of_a_stop() {
        let tracker: AsyncTracker<u32> = AsyncTracker::new();
        assert!(!tracker.has_synced(), "no upstream yet");
        let upstream = Upstream::default();
        tracker.set_upstream(upstream.clone());
        assert!(
            !tracker.has_synced(),
            "nothing started, but the upstream has not synced"
        );
        upstream.0.set_stopped();
        assert!(!tracker.wait_for_sync().await);
        assert!(!tracker.has_synced());
    }
}
