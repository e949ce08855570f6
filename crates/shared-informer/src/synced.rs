//! HasSynced, one mechanism: a [`SyncLatch`] per informer and per handler registration, the
//! [`HasSynced`] trait over both, and [`wait_for_cache_sync`] to wait for any set of them with a
//! [`SyncReport`] saying which did not sync.
//!
//! A latch starts pending and ends either synced (for good: once synced, always synced, contract
//! D7) or stopped without syncing. Reading it is one atomic load; waiting on it is a `watch`
//! channel, so a waiter wakes the moment it changes, never at a poll tick.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reflector::CancellationToken;
use tokio::sync::watch;

/// Where a latch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Latch {
    Pending,
    Synced,
    /// Stopped before syncing.
    Stopped,
}

/// A synced flag that latches, and can be waited for.
#[derive(Debug)]
pub(crate) struct SyncLatch {
    /// The fast read of `state == Synced`.
    synced: AtomicBool,
    state: watch::Sender<Latch>,
}

impl Default for SyncLatch {
    fn default() -> Self {
        SyncLatch {
            synced: AtomicBool::new(false),
            state: watch::channel(Latch::Pending).0,
        }
    }
}

impl SyncLatch {
    /// Whether it has synced.
    pub(crate) fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Marks it synced, for good (a no-op once stopped).
    pub(crate) fn set_synced(&self) {
        self.state.send_if_modified(|s| {
            if *s == Latch::Pending {
                *s = Latch::Synced;
                self.synced.store(true, Ordering::Release);
                true
            } else {
                false
            }
        });
    }

    /// Marks it stopped, if it has not synced: waiters get `false`.
    pub(crate) fn set_stopped(&self) {
        self.state.send_if_modified(|s| {
            if *s == Latch::Pending {
                *s = Latch::Stopped;
                true
            } else {
                false
            }
        });
    }

    /// Waits until it has synced (`true`) or stopped first (`false`).
    pub(crate) async fn wait(&self) -> bool {
        let mut rx = self.state.subscribe();
        let state = match rx.wait_for(|s| *s != Latch::Pending).await {
            Ok(state) => *state,
            // The sender lives as long as `self`: unreachable, and "not synced" is the safe answer.
            Err(_) => Latch::Stopped,
        };
        state == Latch::Synced
    }
}

/// Something that syncs once: an informer (its initial list is in the cache) or a handler
/// registration (it has also handled every add of that list).
pub trait HasSynced: Send + Sync {
    /// Whether it has synced (stays true once true).
    fn has_synced(&self) -> bool;

    /// Resolves `true` once synced, or `false` if it stopped first.
    fn wait_synced(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;
}

/// What [`wait_for_cache_sync`] found: each checker by name, and whether it synced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    synced: BTreeMap<String, bool>,
}

impl SyncReport {
    /// Whether every checker synced.
    pub fn all_synced(&self) -> bool {
        self.synced.values().all(|s| *s)
    }

    /// The names of those that did not sync (stopped, or still syncing at the deadline).
    pub fn not_synced(&self) -> Vec<&str> {
        self.synced
            .iter()
            .filter(|(_, s)| !**s)
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// Each checker's name and whether it synced, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> {
        self.synced.iter().map(|(n, s)| (n.as_str(), *s))
    }

    /// How many checkers were waited for.
    pub fn len(&self) -> usize {
        self.synced.len()
    }

    /// Whether there were none.
    pub fn is_empty(&self) -> bool {
        self.synced.is_empty()
    }
}

impl fmt::Display for SyncReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.all_synced() {
            write!(f, "all {} synced", self.synced.len())
        } else {
            write!(f, "not synced: {}", self.not_synced().join(", "))
        }
    }
}

/// Waits until every named checker has synced or stopped, or `timeout` has passed, and reports
/// which synced (client-go's `WaitForNamedCacheSync`). Returns the moment the last one syncs.
///
/// ```
/// use std::time::Duration;
/// use shared_informer::{wait_for_cache_sync, InformerOptions, SharedIndexInformer};
/// # use shared_informer::reflector::{ListerWatcher, ListOptions, ObjectList, ReflectorError, WatchOptions, WatchStream};
/// # use shared_informer::reflector::store_index::DynamicObject;
/// # struct Never;
/// # impl ListerWatcher<DynamicObject> for Never {
/// #     async fn list(&self, _: ListOptions) -> Result<ObjectList<DynamicObject>, ReflectorError> { std::future::pending().await }
/// #     async fn watch(&self, _: WatchOptions) -> Result<WatchStream<DynamicObject>, ReflectorError> { std::future::pending().await }
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// // An informer whose server never answers its list never syncs.
/// let pods = SharedIndexInformer::new(Never, InformerOptions::default());
/// let report = wait_for_cache_sync(Duration::from_secs(5), [("pods", &pods as _)]).await;
/// assert!(!report.all_synced());
/// assert_eq!(report.not_synced(), ["pods"]);
/// # }
/// ```
pub async fn wait_for_cache_sync<'a>(
    timeout: Duration,
    checkers: impl IntoIterator<Item = (&'a str, &'a dyn HasSynced)>,
) -> SyncReport {
    let checkers: Vec<(&str, &dyn HasSynced)> = checkers.into_iter().collect();
    let all = futures::future::join_all(checkers.iter().map(|(_, c)| c.wait_synced()));
    if tokio::time::timeout(timeout, all).await.is_err() {
        tracing::warn!(?timeout, "caches not synced in time");
    }
    SyncReport {
        synced: checkers
            .iter()
            .map(|(name, c)| (name.to_string(), c.has_synced()))
            .collect(),
    }
}

/// Waits until every named checker has synced, or `cancel` fires (client-go's `WaitFor`,
/// D11.2): event-driven, no polling. On cancellation a last look is taken, so a checker that
/// synced at that very moment counts. With a non-empty `what`, logs `Waiting for <what>`, then
/// `Done waiting for <what>`, or `Timed out waiting for <what>` naming (sorted) the checkers that
/// did not sync. No checker: synced at once.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use shared_informer::{wait_for, CancellationToken};
/// let cancel = CancellationToken::new();
/// let report = wait_for(&cancel, "nothing", []).await;
/// assert!(report.all_synced() && report.is_empty());
/// # }
/// ```
pub async fn wait_for<'a>(
    cancel: &CancellationToken,
    what: &str,
    checkers: impl IntoIterator<Item = (&'a str, &'a dyn HasSynced)>,
) -> SyncReport {
    let checkers: Vec<(&str, &dyn HasSynced)> = checkers.into_iter().collect();
    if !what.is_empty() {
        tracing::info!(what, checkers = checkers.len(), "Waiting for {what}");
    }
    let all = futures::future::join_all(checkers.iter().map(|(_, c)| c.wait_synced()));
    let cancelled = tokio::select! {
        _ = all => false,
        _ = cancel.cancelled() => true,
    };
    let report = SyncReport {
        synced: checkers
            .iter()
            .map(|(name, c)| (name.to_string(), c.has_synced()))
            .collect(),
    };
    if !what.is_empty() {
        if report.all_synced() {
            tracing::info!(what, "Done waiting for {what}");
        } else {
            let cause = if cancelled {
                "cancelled"
            } else {
                "a checker stopped"
            };
            tracing::warn!(what, cause, not_synced = ?report.not_synced(), "Timed out waiting for {what}");
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checker whose latch the test drives.
    struct Latched(std::sync::Arc<SyncLatch>);

    impl HasSynced for Latched {
        fn has_synced(&self) -> bool {
            self.0.is_synced()
        }
        fn wait_synced(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
            Box::pin(self.0.wait())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_reports_by_name_and_ends_on_sync_or_cancel() {
        let (a, b) = (Latched(Default::default()), Latched(Default::default()));
        let cancel = CancellationToken::new();
        a.0.set_synced();
        let waiting = {
            let (a, b, cancel) = (&a, &b, cancel.clone());
            async move { wait_for(&cancel, "caches", [("b", b as _), ("a", a as _)]).await }
        };
        let (report, ()) = tokio::join!(waiting, async {
            tokio::task::yield_now().await;
            b.0.set_synced();
        });
        assert!(report.all_synced(), "{report}");
        let c = Latched(Default::default());
        let late = {
            let cancel = cancel.clone();
            async move {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                cancel.cancel();
            }
        };
        let (report, ()) = tokio::join!(
            wait_for(&cancel, "caches", [("c", &c as _), ("a", &a as _)]),
            late
        );
        assert_eq!(report.not_synced(), ["c"]);
        assert_eq!(report.to_string(), "not synced: c");
    }

    #[tokio::test(start_paused = true)]
    async fn a_latch_latches_and_a_stop_after_sync_changes_nothing() {
        let latch = SyncLatch::default();
        assert!(!latch.is_synced());
        latch.set_synced();
        latch.set_stopped();
        assert!(latch.is_synced());
        assert!(latch.wait().await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_learns_of_a_stop_before_sync() {
        let latch = std::sync::Arc::new(SyncLatch::default());
        let waiter = tokio::spawn({
            let latch = latch.clone();
            async move { latch.wait().await }
        });
        tokio::task::yield_now().await;
        latch.set_stopped();
        assert!(!waiter.await.unwrap());
        latch.set_synced();
        assert!(!latch.is_synced(), "stopped for good");
    }
}
