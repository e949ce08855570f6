//! [`SyncTracker`]: HasSynced for a handler that hands its work elsewhere (client-go's
//! `synctrack.SingleFileTracker`).
//!
//! A registration syncs once its handler has *returned* from every initial-list add (D7). A
//! handler that only queues each object for a worker returns at once, so its registration syncs
//! before the work is done. The handler counts each initial item it hands off with
//! [`start`](SyncTracker::start), the worker calls [`finished`](SyncTracker::finished) when it is
//! done with one, and the tracker is synced once its upstream (normally that registration) has
//! synced and no started item is left.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::synced::HasSynced;

/// What the tracker waits on; every change is sent, so a waiter wakes at once.
struct Tracked {
    /// Items started and not finished.
    pending: i64,
    upstream: Option<Arc<dyn HasSynced>>,
}

/// Per-registration HasSynced for work handed off by a handler (see the module documentation).
/// Cheap to clone: clones share one count.
///
/// Invariant: it is synced when its upstream has synced and the started items not yet finished
/// are none; once it has reported synced (through `has_synced` or `wait_synced`), it stays
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
///     fn wait_synced(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
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
/// tracker.finished();
/// tracker.finished();
/// assert!(tracker.has_synced());
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
    pub fn finished(&self) {
        self.inner.state.send_modify(|state| state.pending -= 1);
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
            state.pending <= 0 && state.upstream.as_ref().is_some_and(|u| u.has_synced())
        };
        synced && self.latch()
    }

    fn wait_synced(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(async move {
            if self.inner.latched.load(Ordering::Acquire) {
                return true;
            }
            let mut rx = self.inner.state.subscribe();
            let upstream = match rx.wait_for(|state| state.upstream.is_some()).await {
                Ok(state) => state.upstream.clone(),
                Err(_) => None,
            };
            let Some(upstream) = upstream else {
                return false;
            };
            if !upstream.wait_synced().await {
                return false;
            }
            rx.wait_for(|state| state.pending <= 0).await.is_ok() && self.latch()
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
        fn wait_synced(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
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
        tracker.finished();
        assert_eq!(tracker.pending(), 1);
        assert!(!tracker.has_synced(), "one item pending");
        tracker.finished();
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
            async move { tracker.wait_synced().await }
        });
        let upstream = Upstream::default();
        tracker.set_upstream(upstream.clone());
        upstream.0.set_synced();
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "one item is still pending");
        tracker.finished();
        assert!(waiter.await.unwrap());

        let stopped = SyncTracker::new();
        let upstream = Upstream::default();
        stopped.set_upstream(upstream.clone());
        upstream.0.set_stopped();
        assert!(!stopped.wait_synced().await);
        assert!(!stopped.has_synced());
    }
}
