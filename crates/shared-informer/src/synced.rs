//! HasSynced, one mechanism: a [`SyncLatch`] per informer and per handler registration, the
//! [`HasSynced`] trait over both, and [`wait_for_cache_sync`] / [`wait_for_context`] to wait for
//! any set of them with a [`SyncReport`] saying which did not sync and how the wait ended
//! ([`SyncOutcome`], with the [`StopCause`] of a [`WaitContext`] that ended it).
//!
//! A latch starts pending and ends either synced (for good: once synced, always synced, contract
//! D7) or stopped without syncing. Reading it is one atomic load; waiting on it is a `watch`
//! channel, so a waiter wakes the moment it changes, never at a poll tick.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use reflector::CancellationToken;
use tokio::sync::watch;
use tokio::time::Instant;

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
    ///
    /// # Cancel safety
    ///
    /// Implementations must only wait: dropping the future changes nothing (every implementation
    /// in this workspace is so).
    fn wait_for_sync(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;
}

/// Why a wait was cut short before every checker had synced (client-go reads it from the
/// context: `context.Cause`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum StopCause {
    /// The wait's deadline passed ([`WaitContext::with_timeout`], or the timeout of
    /// [`wait_for_cache_sync`]).
    DeadlineExceeded,
    /// The wait was cancelled, with no cause given ([`WaitContext::cancel`], or its token
    /// cancelled by whoever holds it).
    Cancelled,
    /// The wait was cancelled with this cause ([`WaitContext::cancel_with_cause`]).
    Custom(Arc<dyn std::error::Error + Send + Sync>),
}

/// Two causes are equal when they are the same kind; two custom causes when they are the very
/// same cause (one `Arc`), as Go compares error values.
impl PartialEq for StopCause {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (StopCause::DeadlineExceeded, StopCause::DeadlineExceeded)
            | (StopCause::Cancelled, StopCause::Cancelled) => true,
            (StopCause::Custom(a), StopCause::Custom(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for StopCause {}

impl fmt::Display for StopCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopCause::DeadlineExceeded => f.write_str("deadline exceeded"),
            StopCause::Cancelled => f.write_str("cancelled"),
            StopCause::Custom(cause) => write!(f, "{cause}"),
        }
    }
}

/// How a wait for sync ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SyncOutcome {
    /// Every checker synced (also when there were none).
    #[default]
    Synced,
    /// Every checker ended, and at least one stopped without syncing (its informer or
    /// registration stopped first).
    CheckerStopped,
    /// The wait was cut short, and at least one checker had not synced by then.
    Interrupted(StopCause),
}

impl fmt::Display for SyncOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncOutcome::Synced => f.write_str("synced"),
            SyncOutcome::CheckerStopped => f.write_str("a checker stopped before syncing"),
            SyncOutcome::Interrupted(cause) => write!(f, "{cause}"),
        }
    }
}

/// What a wait for sync may be cut short by: a cancellation token, an optional deadline, and an
/// optional cause given at cancellation (client-go's `context.Context` with `WithTimeout`,
/// `WithCancelCause`). Cheap to clone: clones share the token and the cause.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// use shared_informer::{CancellationToken, StopCause, WaitContext};
///
/// let ctx = WaitContext::new(CancellationToken::new()).with_timeout(Duration::from_secs(5));
/// assert_eq!(ctx.cause(), None);
/// assert_eq!(ctx.done().await, StopCause::DeadlineExceeded);
///
/// let ctx = WaitContext::new(CancellationToken::new());
/// ctx.cancel_with_cause("shutting down");
/// assert_eq!(ctx.done().await.to_string(), "shutting down");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct WaitContext {
    token: CancellationToken,
    deadline: Option<Instant>,
    /// The cause given by `cancel_with_cause`, set before the token is cancelled.
    cause: Arc<OnceLock<Arc<dyn std::error::Error + Send + Sync>>>,
    /// The first cause observed, so that a deadline passing after a cancellation (or the other
    /// way round) does not change the answer.
    ended: Arc<OnceLock<StopCause>>,
}

impl Default for WaitContext {
    fn default() -> Self {
        WaitContext::new(CancellationToken::new())
    }
}

impl WaitContext {
    /// A context ended by `token` only (no deadline).
    pub fn new(token: CancellationToken) -> Self {
        WaitContext {
            token,
            deadline: None,
            cause: Arc::default(),
            ended: Arc::default(),
        }
    }

    /// Also ends `timeout` from now (the earlier deadline wins).
    pub fn with_timeout(self, timeout: Duration) -> Self {
        let deadline = Instant::now() + timeout;
        self.with_deadline(deadline)
    }

    /// Also ends at `deadline` (the earlier deadline wins).
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(self.deadline.map_or(deadline, |d| d.min(deadline)));
        self
    }

    /// The token it watches.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Cancels it without a cause ([`StopCause::Cancelled`]).
    pub fn cancel(&self) {
        self.token.cancel();
    }

    /// Cancels it with `cause` ([`StopCause::Custom`]), unless it had ended already: the first
    /// cause stays.
    pub fn cancel_with_cause(&self, cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) {
        if !self.token.is_cancelled() && self.ended.get().is_none() {
            let _ = self.cause.set(Arc::from(cause.into()));
        }
        self.token.cancel();
    }

    /// Why it ended, or `None` while it has not.
    pub fn cause(&self) -> Option<StopCause> {
        if let Some(ended) = self.ended.get() {
            return Some(ended.clone());
        }
        let cause = if self.token.is_cancelled() {
            match self.cause.get() {
                Some(cause) => StopCause::Custom(Arc::clone(cause)),
                None => StopCause::Cancelled,
            }
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            StopCause::DeadlineExceeded
        } else {
            return None;
        };
        Some(self.ended.get_or_init(|| cause).clone())
    }

    /// Resolves when it ends, with why.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future loses nothing, and a later call answers the same.
    pub async fn done(&self) -> StopCause {
        if let Some(cause) = self.cause() {
            return cause;
        }
        match self.deadline {
            Some(deadline) => {
                tokio::select! {
                    _ = self.token.cancelled() => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                }
            }
            None => self.token.cancelled().await,
        }
        // One of the two has happened; `cause` names it (and keeps the first for good).
        self.cause().unwrap_or(StopCause::Cancelled)
    }
}

/// What [`wait_for_cache_sync`] and [`wait_for`] found: each checker by name, whether it synced,
/// and how the wait ended ([`outcome`](Self::outcome)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    synced: BTreeMap<String, bool>,
    outcome: SyncOutcome,
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

    /// How the wait ended: all synced, a checker stopped, or cut short (and by what).
    pub fn outcome(&self) -> &SyncOutcome {
        &self.outcome
    }
}

impl SyncReport {
    /// The report as a result (client-go's `WaitForCacheSync` error form): `Ok(self)` when every
    /// checker synced, else a [`CacheSyncError`] naming those that did not and why the wait
    /// ended.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use std::time::Duration;
    /// use shared_informer::{wait_for_cache_sync, InformerOptions, SharedIndexInformer};
    /// # use shared_informer::reflector::{ListerWatcher, ListOptions, ObjectList, ReflectorError, WatchOptions, WatchStream};
    /// # use shared_informer::reflector::store_index::DynamicObject;
    /// # struct Never;
    /// # impl ListerWatcher<DynamicObject> for Never {
    /// #     async fn list(&self, _: ListOptions) -> Result<ObjectList<DynamicObject>, ReflectorError> { std::future::pending().await }
    /// #     async fn watch(&self, _: WatchOptions) -> Result<WatchStream<DynamicObject>, ReflectorError> { std::future::pending().await }
    /// # }
    /// let pods = SharedIndexInformer::new(Never, InformerOptions::default());
    /// let err = wait_for_cache_sync(Duration::from_secs(5), [("pods", &pods as _)])
    ///     .await
    ///     .into_result()
    ///     .unwrap_err();
    /// assert_eq!(err.to_string(), "caches not synced: pods (deadline exceeded)");
    /// # }
    /// ```
    pub fn into_result(self) -> Result<SyncReport, CacheSyncError> {
        match self.error() {
            None => Ok(self),
            Some(e) => Err(e),
        }
    }

    /// The error form of the report, if a checker did not sync ([`into_result`](Self::into_result)
    /// without giving the report up).
    pub fn error(&self) -> Option<CacheSyncError> {
        if self.all_synced() {
            return None;
        }
        Some(CacheSyncError {
            not_synced: self.not_synced().into_iter().map(str::to_string).collect(),
            outcome: self.outcome.clone(),
        })
    }
}

/// Caches that did not sync ([`SyncReport::into_result`]): their names, sorted, and how the wait
/// ended. Its [`source`](std::error::Error::source) is the custom cause, if one ended the wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSyncError {
    not_synced: Vec<String>,
    outcome: SyncOutcome,
}

impl CacheSyncError {
    /// The names of the checkers that did not sync, sorted.
    pub fn not_synced(&self) -> &[String] {
        &self.not_synced
    }

    /// How the wait ended (never [`SyncOutcome::Synced`]).
    pub fn outcome(&self) -> &SyncOutcome {
        &self.outcome
    }
}

impl fmt::Display for CacheSyncError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "caches not synced: {} ({})",
            self.not_synced.join(", "),
            self.outcome
        )
    }
}

impl std::error::Error for CacheSyncError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.outcome {
            SyncOutcome::Interrupted(StopCause::Custom(cause)) => Some(&**cause as _),
            _ => None,
        }
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
/// which synced (client-go's `WaitForCacheSync`); the outcome of a timeout is
/// [`StopCause::DeadlineExceeded`]. Returns the moment the last one syncs. Logs nothing but a
/// warning when some did not sync; [`wait_for`] logs each step.
///
/// ```
/// use std::time::Duration;
/// use shared_informer::{wait_for_cache_sync, InformerOptions, SharedIndexInformer, StopCause, SyncOutcome};
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
/// assert_eq!(report.outcome(), &SyncOutcome::Interrupted(StopCause::DeadlineExceeded));
/// # }
/// ```
///
/// # Cancel safety
///
/// Cancel safe: it only observes the checkers; dropping it changes nothing.
pub async fn wait_for_cache_sync<'a>(
    timeout: Duration,
    checkers: impl IntoIterator<Item = (&'a str, &'a dyn HasSynced)>,
) -> SyncReport {
    let ctx = WaitContext::default().with_timeout(timeout);
    let report = wait_until(&ctx, "", checkers.into_iter().collect()).await;
    if !report.all_synced() {
        tracing::warn!(?timeout, outcome = %report.outcome, not_synced = ?report.not_synced(), "caches not synced");
    }
    report
}

/// Waits until every named checker has synced, or `cancel` fires (client-go's `WaitFor`,
/// D11.2): [`wait_for_context`] with a context of `cancel` alone.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use shared_informer::{wait_for, CancellationToken};
/// let cancel = CancellationToken::new();
/// let report = wait_for(&cancel, "nothing", []).await;
/// assert!(report.all_synced() && report.is_empty());
/// # }
/// ```
///
/// # Cancel safety
///
/// Cancel safe, as [`wait_for_context`].
pub async fn wait_for<'a>(
    cancel: &CancellationToken,
    what: &str,
    checkers: impl IntoIterator<Item = (&'a str, &'a dyn HasSynced)>,
) -> SyncReport {
    wait_for_context(&WaitContext::new(cancel.clone()), what, checkers).await
}

/// Waits until every named checker has synced, or `ctx` ends (client-go's `WaitFor` with a
/// context, D11.2): event-driven, no polling. When `ctx` ends a last look is taken, so a checker
/// that synced at that very moment counts. The report's [`outcome`](SyncReport::outcome) says
/// whether the deadline passed, the context was cancelled, or cancelled with which cause.
///
/// With a non-empty `what` it logs `Waiting for <what>` once, then `Done waiting for <what>`
/// once per checker *as each one syncs* (field `cache`: its name), and, if any did not sync,
/// `Timed out waiting for <what>` with the cause and the sorted names of those that did not. No
/// checker: synced at once, and nothing is logged after `Waiting for`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// use shared_informer::{wait_for_context, CancellationToken, StopCause, SyncOutcome, WaitContext};
/// # use shared_informer::{InformerOptions, SharedIndexInformer};
/// # use shared_informer::reflector::{ListerWatcher, ListOptions, ObjectList, ReflectorError, WatchOptions, WatchStream};
/// # use shared_informer::reflector::store_index::DynamicObject;
/// # struct Never;
/// # impl ListerWatcher<DynamicObject> for Never {
/// #     async fn list(&self, _: ListOptions) -> Result<ObjectList<DynamicObject>, ReflectorError> { std::future::pending().await }
/// #     async fn watch(&self, _: WatchOptions) -> Result<WatchStream<DynamicObject>, ReflectorError> { std::future::pending().await }
/// # }
/// # let pods = SharedIndexInformer::new(Never, InformerOptions::default());
/// let ctx = WaitContext::new(CancellationToken::new()).with_timeout(Duration::from_secs(30));
/// let report = wait_for_context(&ctx, "pod caches", [("pods", &pods as _)]).await;
/// assert_eq!(report.outcome(), &SyncOutcome::Interrupted(StopCause::DeadlineExceeded));
/// # }
/// ```
///
/// # Cancel safety
///
/// Cancel safe: it only observes the checkers and the context; dropping it changes nothing.
pub async fn wait_for_context<'a>(
    ctx: &WaitContext,
    what: &str,
    checkers: impl IntoIterator<Item = (&'a str, &'a dyn HasSynced)>,
) -> SyncReport {
    let checkers: Vec<(&str, &dyn HasSynced)> = checkers.into_iter().collect();
    if !what.is_empty() {
        tracing::info!(what, checkers = checkers.len(), "Waiting for {what}");
    }
    let report = wait_until(ctx, what, checkers).await;
    if !what.is_empty() && !report.all_synced() {
        tracing::warn!(what, cause = %report.outcome, not_synced = ?report.not_synced(), "Timed out waiting for {what}");
    }
    report
}

/// The one wait behind [`wait_for_context`] and [`wait_for_cache_sync`]: each checker's end is
/// taken as it comes (logged as `Done waiting` when `what` is not empty and it synced), until all
/// have ended or `ctx` ends.
async fn wait_until(
    ctx: &WaitContext,
    what: &str,
    checkers: Vec<(&str, &dyn HasSynced)>,
) -> SyncReport {
    let mut ends: FuturesUnordered<_> = checkers
        .iter()
        .map(|(name, checker)| async move { (*name, checker.wait_for_sync().await) })
        .collect();
    let mut synced: BTreeMap<String, bool> = BTreeMap::new();
    let mut interrupted = None;
    let record = |synced: &mut BTreeMap<String, bool>, name: &str, ok: bool| {
        if ok && !what.is_empty() {
            tracing::info!(what, cache = %name, "Done waiting for {what}");
        }
        synced.insert(name.to_string(), ok);
    };
    loop {
        tokio::select! {
            // A checker that ended at the same moment as the context counts.
            biased;
            end = ends.next() => match end {
                Some((name, ok)) => record(&mut synced, name, ok),
                None => break,
            },
            cause = ctx.done() => {
                interrupted = Some(cause);
                break;
            }
        }
    }
    drop(ends);
    if interrupted.is_some() {
        // The last look: one that synced as the context ended still counts.
        for (name, checker) in &checkers {
            if !synced.contains_key(*name) {
                let ok = checker.has_synced();
                record(&mut synced, name, ok);
            }
        }
    }
    let all = synced.values().all(|s| *s);
    let outcome = match interrupted {
        _ if all => SyncOutcome::Synced,
        Some(cause) => SyncOutcome::Interrupted(cause),
        None => SyncOutcome::CheckerStopped,
    };
    SyncReport { synced, outcome }
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
        fn wait_for_sync(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
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

    /// The log lines written while the guard lives (this thread only: the tests run on a
    /// current-thread runtime).
    fn capture_logs() -> (
        std::sync::Arc<parking_lot::Mutex<Vec<u8>>>,
        tracing::subscriber::DefaultGuard,
    ) {
        #[derive(Clone)]
        struct Sink(std::sync::Arc<parking_lot::Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = std::sync::Arc::<parking_lot::Mutex<Vec<u8>>>::default();
        let sink = Sink(buf.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .without_time()
            .with_target(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        (buf, tracing::subscriber::set_default(subscriber))
    }

    fn lines(buf: &parking_lot::Mutex<Vec<u8>>) -> Vec<String> {
        String::from_utf8_lossy(&buf.lock())
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn done_waiting_is_logged_once_per_cache_as_each_one_syncs() {
        let (buf, _guard) = capture_logs();
        let (a, b) = (Latched(Default::default()), Latched(Default::default()));
        let cancel = CancellationToken::new();
        let driver = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            b.0.set_synced();
            tokio::time::sleep(Duration::from_secs(1)).await;
            // b's line is written before a has synced: each when it finishes, not all at the end.
            let logged = lines(&buf);
            assert_eq!(
                logged.iter().filter(|l| l.contains("Done waiting")).count(),
                1,
                "{logged:?}"
            );
            assert!(
                logged
                    .iter()
                    .any(|l| l.contains("Done waiting for caches") && l.contains("cache=b")),
                "{logged:?}"
            );
            a.0.set_synced();
        };
        let (report, ()) = tokio::join!(
            wait_for(&cancel, "caches", [("a", &a as _), ("b", &b as _)]),
            driver
        );
        assert!(report.all_synced());
        assert_eq!(report.outcome(), &SyncOutcome::Synced);
        let logged = lines(&buf);
        let done: Vec<&String> = logged
            .iter()
            .filter(|l| l.contains("Done waiting"))
            .collect();
        assert_eq!(done.len(), 2, "one per cache, no summary line: {logged:?}");
        assert!(
            done[0].contains("cache=b") && done[1].contains("cache=a"),
            "{done:?}"
        );
        assert_eq!(
            logged.len(),
            3,
            "Waiting, then one Done per cache: {logged:?}"
        );
        assert!(logged[0].contains("Waiting for caches"));
    }

    #[tokio::test(start_paused = true)]
    async fn no_checkers_logs_nothing_after_waiting_and_no_what_logs_nothing() {
        let (buf, _guard) = capture_logs();
        let report = wait_for(&CancellationToken::new(), "nothing", []).await;
        assert!(report.all_synced() && report.is_empty());
        assert_eq!(report.outcome(), &SyncOutcome::Synced);
        let logged = lines(&buf);
        assert_eq!(logged.len(), 1, "{logged:?}");
        assert!(logged[0].contains("Waiting for nothing"));

        let a = Latched(Default::default());
        a.0.set_synced();
        let report = wait_for(&CancellationToken::new(), "", [("a", &a as _)]).await;
        assert!(report.all_synced());
        assert_eq!(lines(&buf).len(), 1, "an empty what logs nothing");
    }

    #[derive(Debug)]
    struct Upgrading;
    impl fmt::Display for Upgrading {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("controller upgrading")
        }
    }
    impl std::error::Error for Upgrading {}

    #[tokio::test(start_paused = true)]
    async fn the_outcome_tells_a_deadline_from_a_cancellation_from_a_custom_cause() {
        let (buf, _guard) = capture_logs();
        let (a, b) = (Latched(Default::default()), Latched(Default::default()));
        a.0.set_synced();
        let checkers = || [("a", &a as &dyn HasSynced), ("b", &b as _)];

        let deadline = WaitContext::default().with_timeout(Duration::from_secs(3));
        let report = wait_for_context(&deadline, "caches", checkers()).await;
        assert_eq!(
            report.outcome(),
            &SyncOutcome::Interrupted(StopCause::DeadlineExceeded)
        );
        assert_eq!(report.not_synced(), ["b"]);
        // Cancelling after the deadline does not change why it ended.
        deadline.cancel();
        assert_eq!(deadline.cause(), Some(StopCause::DeadlineExceeded));

        let cancelled = WaitContext::new(CancellationToken::new());
        let (report, ()) =
            tokio::join!(wait_for_context(&cancelled, "caches", checkers()), async {
                cancelled.token().cancel()
            });
        assert_eq!(
            report.outcome(),
            &SyncOutcome::Interrupted(StopCause::Cancelled)
        );

        let custom =
            WaitContext::new(CancellationToken::new()).with_timeout(Duration::from_secs(60));
        let (report, ()) = tokio::join!(wait_for_context(&custom, "caches", checkers()), async {
            custom.cancel_with_cause(Upgrading)
        });
        let SyncOutcome::Interrupted(StopCause::Custom(cause)) = report.outcome() else {
            panic!("{:?}", report.outcome());
        };
        assert!(cause.downcast_ref::<Upgrading>().is_some());
        assert_eq!(
            custom.cause(),
            Some(report.outcome().clone()).and_then(|o| match o {
                SyncOutcome::Interrupted(c) => Some(c),
                _ => None,
            })
        );

        let timed_out: Vec<String> = lines(&buf)
            .into_iter()
            .filter(|l| l.contains("Timed out waiting for caches"))
            .collect();
        assert_eq!(timed_out.len(), 3, "{timed_out:?}");
        assert!(
            timed_out[0].contains("cause=deadline exceeded"),
            "{timed_out:?}"
        );
        assert!(timed_out[1].contains("cause=cancelled"), "{timed_out:?}");
        assert!(
            timed_out[2].contains("cause=controller upgrading"),
            "{timed_out:?}"
        );
        assert!(
            timed_out.iter().all(|l| l.contains(r#"not_synced=["b"]"#)),
            "{timed_out:?}"
        );

        // Every checker ended, one without syncing: neither a deadline nor a cancellation.
        let stopped = Latched(Default::default());
        stopped.0.set_stopped();
        let report = wait_for(
            &CancellationToken::new(),
            "caches",
            [("a", &a as _), ("s", &stopped as _)],
        )
        .await;
        assert_eq!(report.outcome(), &SyncOutcome::CheckerStopped);
        assert_eq!(report.not_synced(), ["s"]);
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_cache_sync_reports_its_timeout_as_a_deadline() {
        let b = Latched(Default::default());
        let report = wait_for_cache_sync(Duration::from_secs(2), [("b", &b as _)]).await;
        assert_eq!(
            report.outcome(),
            &SyncOutcome::Interrupted(StopCause::DeadlineExceeded)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_error_form_names_the_caches_that_did_not_sync_and_why() {
        let (a, b, c) = (
            Latched(Default::default()),
            Latched(Default::default()),
            Latched(Default::default()),
        );
        a.0.set_synced();
        let checkers = || [("c", &c as &dyn HasSynced), ("a", &a as _), ("b", &b as _)];
        let err = wait_for_cache_sync(Duration::from_secs(1), checkers())
            .await
            .into_result()
            .unwrap_err();
        assert_eq!(err.not_synced(), ["b", "c"]);
        assert_eq!(
            err.to_string(),
            "caches not synced: b, c (deadline exceeded)"
        );
        assert!(std::error::Error::source(&err).is_none());

        let ctx = WaitContext::default();
        ctx.cancel_with_cause(Upgrading);
        let report = wait_for_context(&ctx, "", checkers()).await;
        let err = report.error().unwrap();
        assert_eq!(
            err.to_string(),
            "caches not synced: b, c (controller upgrading)"
        );
        let source = std::error::Error::source(&err).unwrap();
        assert!(source.downcast_ref::<Upgrading>().is_some());

        b.0.set_synced();
        c.0.set_stopped();
        let err = wait_for(&CancellationToken::new(), "", checkers())
            .await
            .into_result()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "caches not synced: c (a checker stopped before syncing)"
        );
        assert_eq!(err.outcome(), &SyncOutcome::CheckerStopped);

        let d = Latched(Default::default());
        d.0.set_synced();
        let report =
            wait_for_cache_sync(Duration::from_secs(1), [("a", &a as _), ("d", &d as _)]).await;
        assert_eq!(report.clone().into_result(), Ok(report));
    }
}
