//! [`Reflector`]: client-go's ListAndWatch loop (contract section C).
//!
//! ```text
//! run ─┬─► list_and_watch ─┬─ watch-list stream (C13) ──────────────┐
//!      │                   └─ list (C4–C7) → store.replace(items, rv) │
//!      │                                                         watch loop (C8–C11)
//!      │                        events → store.add/update/delete, last-synced RV advances
//!      │                        normal close → re-watch at the last-synced RV
//!      │                        410 / other error / very short watch → return → relist
//!      └─◄ error handler (C14), one backoff delay (C2), again ◄──────────┘
//! ```
//!
//! The last-synced resource version is the only state carried between watches and lists; it is
//! readable at any time through [`Reflector::last_sync_resource_version`].

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use delta_fifo::store_index::{Object, ObjectKey, ResourceVersion};
use delta_fifo::Store;
use futures::{FutureExt as _, StreamExt as _};
use parking_lot::Mutex;
use rand::Rng as _;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::backoff::{Backoff, BackoffConfig};
use crate::client::{ListOptions, ResourceVersionMatch, WatchOptions};
use crate::decode_lane::ReadingScope;
use crate::error::{ReflectorError, WatchEventType};
use crate::list::{list_all, PageLimits, DEFAULT_MAX_LIST_PAGES, DEFAULT_PAGE_SIZE};
use crate::lister_watcher::{ListerWatcher, WatchStream};
use crate::metrics::{ReflectorMetrics, ReflectorStats};
use crate::reclaim::{self, Reclaim};
use crate::wire::decoder::WatchEvent;

/// Decides, at each resync tick, whether to resync now (contract C12.1).
pub type ShouldResync = Arc<dyn Fn() -> bool + Send + Sync>;
/// Receives every error `list_and_watch` returns (contract C14), and every error the loop retries in
/// place; the reflector logs each one as well.
pub type WatchErrorHandler = Arc<dyn Fn(&ReflectorError) + Send + Sync>;

/// Reflector options (contract C1.1); `Default` gives client-go's defaults.
#[derive(Debug, Clone)]
pub struct ReflectorOptions {
    /// Name used in logs and errors.
    pub name: String,
    /// What errors and logs call the listed objects (default: the lister-watcher's
    /// [`resource`](ListerWatcher::resource) as kubectl names it, `pods` or
    /// `widgets.example.com`; else the expected GVK; else the Rust type name).
    pub type_description: Option<String>,
    /// Resync period (0: never).
    pub resync_period: Duration,
    /// Minimum watch timeout; values under 5 minutes are ignored (contract C8.2).
    pub min_watch_timeout: Duration,
    /// List page size (0: contract C5.2's choice).
    pub page_size: u32,
    /// Backoff between attempts.
    pub backoff: BackoffConfig,
    /// How long watch errors with 500 Internal Error are retried without relisting (0: never).
    pub max_internal_error_retry_duration: Duration,
    /// Sync through a watch-list (`sendInitialEvents`) before falling back to a list (contract
    /// C13). Default: on, as in client-go since 1.35 (C1.3): against kube-apiserver it streams
    /// the initial state event by event, where a first list is answered whole in one body;
    /// `false` lists first.
    pub watch_list: bool,
    /// Skip watch events whose `(apiVersion, kind)` differ from this; list pages must then be of
    /// kind `<kind>List`. Objects and lists of the representation the lister-watcher asks for
    /// ([`ListerWatcher::representation`], `PartialObjectMetadata` and its list) pass too.
    pub expected_gvk: Option<(String, String)>,
    /// Most pages of one list (default [`DEFAULT_MAX_LIST_PAGES`]); a list that needs more, or
    /// whose server repeats a `continue` token, fails and is retried after a backoff delay.
    pub max_list_pages: u32,
}

impl Default for ReflectorOptions {
    fn default() -> Self {
        ReflectorOptions {
            name: "reflector".into(),
            type_description: None,
            resync_period: Duration::ZERO,
            min_watch_timeout: Duration::from_secs(300),
            page_size: 0,
            backoff: BackoffConfig::default(),
            max_internal_error_retry_duration: Duration::ZERO,
            watch_list: true,
            expected_gvk: None,
            max_list_pages: DEFAULT_MAX_LIST_PAGES,
        }
    }
}

#[derive(Debug, Default)]
struct SyncState {
    last_sync_rv: ResourceVersion,
    rv_unavailable: bool,
    paginated_result: bool,
    listed_once: bool,
}

/// Contract C11.4: retrying 500s on a watch without relisting, within a time window.
#[derive(Debug)]
struct RetryWindow {
    max: Duration,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl RetryWindow {
    const RESET_PERIOD: Duration = Duration::from_secs(60);

    fn should_retry(&mut self) -> bool {
        if self.max.is_zero() {
            return false;
        }
        let now = Instant::now();
        if self
            .last
            .is_some_and(|l| now.duration_since(l) >= Self::RESET_PERIOD)
        {
            self.first = None;
        }
        let first = *self.first.get_or_insert(now);
        self.last = Some(now);
        if now.duration_since(first) <= self.max {
            true
        } else {
            self.first = None;
            self.last = None;
            false
        }
    }
}

/// How one watch stream ended.
enum WatchEnd {
    Cancelled,
    Closed { events: u64 },
    Error(ReflectorError),
    Resync(delta_fifo::FifoError),
}

/// Lists and watches one resource into a [`Store`] (normally the informer's queue).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use reflector::{ClusterConfig, HttpListerWatcher, Reflector, ReflectorOptions, Resource};
/// use reflector::store_index::DynamicObject;
/// # struct Queue;
/// # impl reflector::delta_fifo::Store<DynamicObject> for Queue {
/// #   fn add(&self, _: Arc<DynamicObject>) -> Result<(), reflector::delta_fifo::FifoError> { Ok(()) }
/// #   fn update(&self, _: Arc<DynamicObject>) -> Result<(), reflector::delta_fifo::FifoError> { Ok(()) }
/// #   fn delete(&self, _: Arc<DynamicObject>) -> Result<(), reflector::delta_fifo::FifoError> { Ok(()) }
/// #   fn replace(&self, _: Vec<Arc<DynamicObject>>, _: &reflector::store_index::ResourceVersion) -> Result<(), reflector::delta_fifo::FifoError> { Ok(()) }
/// #   fn resync(&self) -> Result<(), reflector::delta_fifo::FifoError> { Ok(()) }
/// # }
/// let config = ClusterConfig::from_kubeconfig(None)?;
/// let lw = HttpListerWatcher::new(&config, Resource::namespaced("", "v1", "pods"))?;
/// let reflector = Reflector::new(lw, Queue, ReflectorOptions::default());
/// let cancel = reflector::CancellationToken::new();
/// reflector.run(cancel.clone()).await;
/// # Ok(()) }
/// ```
pub struct Reflector<K, L, S> {
    lw: L,
    store: S,
    options: ReflectorOptions,
    type_description: String,
    should_resync: Option<ShouldResync>,
    error_handler: Mutex<Option<WatchErrorHandler>>,
    state: Mutex<SyncState>,
    backoff: Mutex<Backoff>,
    retry: Mutex<RetryWindow>,
    metrics: Arc<ReflectorMetrics>,
    /// Where the objects its store's consumers are done with come back to be dropped while a
    /// watch is read (`reclaim.rs`).
    reclaim: Option<Arc<Reclaim<K>>>,
    /// Its decode lane, the task's while it calls the lister-watcher (`decode_lane.rs`, M5).
    reading: Arc<ReadingScope>,
    _k: PhantomData<fn() -> K>,
}

impl<K, L, S> std::fmt::Debug for Reflector<K, L, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reflector")
            .field("name", &self.options.name)
            .field("type", &self.type_description)
            .finish()
    }
}

/// The resource version a watch event's object moves the last-synced one to: its own (`""` when
/// its metadata has none, as client-go reads it), or none at all for an object without metadata
/// that reports none, which says nothing of where the watch is (a transform's value without
/// metadata: `TransformingListerWatcher` follows it with a bookmark of its source's).
fn event_resource_version<K: Object>(obj: &K) -> Option<ResourceVersion> {
    match obj.resource_version() {
        Some(rv) => Some(ResourceVersion::from(rv)),
        None if obj.has_meta() => Some(ResourceVersion::default()),
        None => None,
    }
}

fn log_error(name: &str, err: &ReflectorError) {
    if err.is_expired() {
        tracing::debug!(reflector = name, error = %err, "watch of resource expired");
    } else {
        tracing::error!(reflector = name, error = %err, "list and watch failed");
    }
}

impl<K, L, S> Reflector<K, L, S>
where
    K: Object,
    L: ListerWatcher<K>,
    S: Store<K>,
{
    /// A reflector feeding `store` from `lw`.
    pub fn new(lw: L, store: S, options: ReflectorOptions) -> Self {
        // What errors and logs call the listed objects: what the user chose, else the resource
        // as kubectl names it (`widgets.example.com`), else the GVK; the Rust type only as a
        // last resort, since `store_index::dynamic::DynamicObject` says nothing of what failed.
        let type_description = options
            .type_description
            .clone()
            .or_else(|| lw.resource().map(|r| r.to_string()))
            .or_else(|| {
                options
                    .expected_gvk
                    .as_ref()
                    .map(|(av, kind)| format!("{av}, Kind={kind}"))
            })
            .unwrap_or_else(|| std::any::type_name::<K>().to_string());
        Reflector {
            backoff: Mutex::new(Backoff::new(options.backoff.clone())),
            retry: Mutex::new(RetryWindow {
                max: options.max_internal_error_retry_duration,
                first: None,
                last: None,
            }),
            lw,
            store,
            type_description,
            should_resync: None,
            error_handler: Mutex::new(None),
            state: Mutex::new(SyncState::default()),
            metrics: Arc::new(ReflectorMetrics::default()),
            reclaim: None,
            reading: ReadingScope::new(),
            options,
            _k: PhantomData,
        }
    }

    /// Silence after which a watch-list stream still waiting for its end bookmark is logged.
    const WATCH_LIST_SILENCE_WARNING: Duration = Duration::from_secs(10);

    /// Most events applied in a row before cancellation and the resync timer are checked again.
    const EVENT_BATCH: usize = 64;

    /// Events applied between two voluntary yields to the runtime. While a watch stream always has
    /// data ready, this task would otherwise keep its worker thread for a whole coop budget, and
    /// the tasks it wakes (the queue's consumer, the handlers) would wait in that worker's
    /// unstealable next-task slot instead of running beside it on another thread; the backlog grows
    /// and so does memory. Yielding puts this task at the back of the run queue, where an idle
    /// worker can take it, so producer and consumers run in parallel.
    const YIELD_EVERY: usize = 64;

    /// Sets the should-resync hook (contract C12.1).
    pub fn with_should_resync(mut self, hook: ShouldResync) -> Self {
        self.should_resync = Some(hook);
        self
    }

    /// Uses these counters (shared with a lister-watcher that counts bytes).
    pub fn with_metrics(mut self, metrics: Arc<ReflectorMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Drops the objects given back to `reclaim` before each run of events the watch loop
    /// applies and when the watch ends, where the objects were allocated: on this reflector's
    /// decode lane when its lister-watcher's list pages or watch events were decoded there (as
    /// [`HttpListerWatcher`](crate::HttpListerWatcher) does, and [`decode_watch_body`](crate::decode_watch_body),
    /// however the lister-watcher is wrapped), else on the task reading the watch (see
    /// [`Reclaim`]).
    pub fn with_reclaim(mut self, reclaim: Arc<Reclaim<K>>) -> Self {
        self.reclaim = Some(reclaim);
        self
    }

    /// Replaces the watch error handler (last set wins).
    pub fn set_watch_error_handler(&self, handler: WatchErrorHandler) {
        *self.error_handler.lock() = Some(handler);
    }

    /// The resource version of the last list or watch event applied to the store.
    pub fn last_sync_resource_version(&self) -> ResourceVersion {
        self.state.lock().last_sync_rv.clone()
    }

    /// The store this reflector writes into.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The counters.
    pub fn metrics(&self) -> ReflectorStats {
        self.metrics.snapshot()
    }

    /// The shared counters (lister-watchers may add the bytes they receive).
    pub fn metrics_handle(&self) -> Arc<ReflectorMetrics> {
        self.metrics.clone()
    }

    /// Runs list-and-watch until `cancel` fires (contract C2.1): after every return, the error
    /// (if any) goes to the error handler, then one backoff delay is waited.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future stops the list and watch where they are. The store keeps
    /// what it was given (a list reaches it whole through `replace`, or not at all), and a later
    /// `run` starts with a fresh list. Prefer `cancel`, which ends the watch cleanly.
    pub async fn run(&self, cancel: CancellationToken) {
        let span = tracing::info_span!("reflector", name = %self.options.name, r#type = %self.type_description);
        async {
            tracing::debug!("starting reflector");
            while !cancel.is_cancelled() {
                if let Err(e) = self.list_and_watch(&cancel).await {
                    self.report(&e);
                }
                if !self.backoff_wait(&cancel).await {
                    break;
                }
            }
            tracing::debug!("reflector stopped");
        }
        .instrument(span)
        .await
    }

    /// Puts an object of a watch-list stream into the temporary snapshot, through the store's
    /// transformer as client-go's temporary store does (contract C13.2, C13.6).
    /// Keyed by the store's own key function, so the snapshot holds what the store would: objects
    /// without metadata under a custom key function included. A key the store cannot compute
    /// fails the attempt, as it would fail the `replace` of a list (C7.1).
    fn stage(&self, temp: &mut BTreeMap<ObjectKey, Arc<K>>, obj: K) -> Result<(), ReflectorError> {
        let key = self.store.key(&obj).map_err(ReflectorError::SyncList)?;
        match self.store.transform(Arc::new(obj)) {
            Ok(obj) => {
                temp.insert(key, obj);
            }
            Err(error) => {
                tracing::warn!(%key, %error, "transforming a watch-list object failed; skipped")
            }
        }
        Ok(())
    }

    /// Logs `error` and hands it to the watch error handler, if one is set. Called for every error
    /// `list_and_watch` returns (contract C14), and also for the errors the loop retries in place
    /// (a watch-list retry, a watch that went idle, a watch ended by an error before a relist), so
    /// that a misbehaving server always shows, in the logs and to the application.
    ///
    /// Unlike client-go, setting a handler does not silence the log line: the handler is for the
    /// application's own decisions and metrics, the log for whoever reads the logs.
    fn report(&self, error: &ReflectorError) {
        log_error(&self.options.name, error);
        let handler = self.error_handler.lock().clone();
        if let Some(h) = handler {
            h(error);
        }
    }

    /// Waits one backoff delay; `false` when cancelled meanwhile.
    async fn backoff_wait(&self, cancel: &CancellationToken) -> bool {
        let delay = self.backoff.lock().next_delay();
        self.metrics.add_backoff_waits(1);
        tokio::select! {
            _ = cancel.cancelled() => false,
            _ = tokio::time::sleep(delay) => true,
        }
    }

    /// One list (or watch-list) and the watches that follow it (contract C3). Cancellation
    /// returns `Ok`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`run`](Self::run).
    pub async fn list_and_watch(&self, cancel: &CancellationToken) -> Result<(), ReflectorError> {
        let mut initial = None;
        if self.options.watch_list && self.lw.supports_watch_list() {
            match self.watch_list(cancel).await {
                Ok(Some(stream)) => initial = Some(stream),
                Ok(None) => return Ok(()),
                Err(e) => {
                    tracing::warn!(error = %e, "watch-list failed, falling back to a list");
                }
            }
        }
        if initial.is_none() && !self.list(cancel).await? {
            return Ok(());
        }
        self.watch_loop(initial, cancel).await
    }

    fn page_size(&self, rv: &ResourceVersion) -> u32 {
        let state = self.state.lock();
        if self.options.page_size != 0 {
            self.options.page_size
        } else if state.paginated_result {
            DEFAULT_PAGE_SIZE
        } else if !rv.is_empty() && *rv != "0" {
            0
        } else {
            DEFAULT_PAGE_SIZE
        }
    }

    fn relist_resource_version(&self) -> ResourceVersion {
        let state = self.state.lock();
        if state.rv_unavailable {
            ResourceVersion::default()
        } else if state.last_sync_rv.is_empty() {
            "0".into()
        } else {
            state.last_sync_rv.clone()
        }
    }

    async fn list_at(
        &self,
        rv: &ResourceVersion,
        limit: u32,
        cancel: &CancellationToken,
    ) -> Option<Result<crate::list::FullList<K>, ReflectorError>> {
        let options = ListOptions {
            resource_version: Some(rv.clone()),
            limit,
            ..Default::default()
        };
        let metrics = &self.metrics;
        let limits = PageLimits {
            max_pages: self.options.max_list_pages,
            expected_kind: self
                .options
                .expected_gvk
                .as_ref()
                .map(|(_, kind)| format!("{kind}List")),
            representation: self.lw.representation(),
        };
        let listing = self
            .reading
            .enter(list_all(&self.lw, options, &limits, |n| {
                metrics.add_pages(1);
                metrics.add_listed_items(n as u64);
            }));
        tokio::select! {
            _ = cancel.cancelled() => None,
            r = listing => Some(r),
        }
    }

    /// Lists and replaces the store's content (contract C4–C7). `Ok(false)`: cancelled.
    async fn list(&self, cancel: &CancellationToken) -> Result<bool, ReflectorError> {
        let rv = self.relist_resource_version();
        let limit = self.page_size(&rv);
        {
            let mut state = self.state.lock();
            if state.listed_once {
                self.metrics.add_relists(1);
            }
            state.listed_once = true;
        }
        self.metrics.add_lists(1);
        let span = tracing::debug_span!("list", resource_version = %rv, limit);
        let Some(mut result) = self.list_at(&rv, limit, cancel).instrument(span).await else {
            return Ok(false);
        };
        if let Err(e) = &result {
            if e.is_expired() || e.is_too_large_resource_version() {
                if e.is_expired() {
                    self.metrics.add_expired(1);
                }
                tracing::debug!(error = %e, "list at resource version {rv:?} refused; listing at the latest");
                self.state.lock().rv_unavailable = true;
                match self
                    .list_at(&ResourceVersion::default(), limit, cancel)
                    .await
                {
                    None => return Ok(false),
                    Some(r) => result = r,
                }
            }
        }
        let full = result.map_err(|e| ReflectorError::ListFailed {
            type_description: self.type_description.clone(),
            source: Box::new(e),
        })?;
        {
            let mut state = self.state.lock();
            if rv == "0" && full.paginated {
                state.paginated_result = true;
            }
            state.rv_unavailable = false;
        }
        self.store
            .replace(full.items, &full.resource_version)
            .map_err(ReflectorError::SyncList)?;
        self.state.lock().last_sync_rv = full.resource_version;
        Ok(true)
    }

    fn watch_timeout(&self) -> u32 {
        let min = self.options.min_watch_timeout.max(Duration::from_secs(300));
        let u: f64 = rand::rng().random();
        (min.as_secs_f64() * (1.0 + u)) as u32
    }

    /// Opens a watch; `Ok(None)` when cancelled.
    async fn open_watch(
        &self,
        options: WatchOptions,
        cancel: &CancellationToken,
    ) -> Result<Option<WatchStream<K>>, ReflectorError> {
        self.metrics.add_watches(1);
        tokio::select! {
            _ = cancel.cancelled() => Ok(None),
            r = self.reading.enter(self.lw.watch(options)) => r.map(Some),
        }
    }

    /// Contract C8–C11: watch, re-watch, until cancelled or a relist is needed.
    async fn watch_loop(
        &self,
        mut initial: Option<WatchStream<K>>,
        cancel: &CancellationToken,
    ) -> Result<(), ReflectorError> {
        let period = self.options.resync_period;
        let mut resync: Option<Pin<Box<Sleep>>> =
            (!period.is_zero()).then(|| Box::pin(tokio::time::sleep(period)));
        loop {
            if cancel.is_cancelled() {
                return Ok(());
            }
            let started = Instant::now();
            let (stream, suppress_added_rv) = match initial.take() {
                Some(s) => (s, false),
                None => {
                    let rv = self.last_sync_resource_version();
                    let options = WatchOptions {
                        resource_version: Some(rv.clone()),
                        allow_watch_bookmarks: true,
                        timeout_seconds: Some(self.watch_timeout()),
                        ..Default::default()
                    };
                    match self.open_watch(options, cancel).await {
                        Ok(Some(s)) => (s, rv.is_empty() || rv == "0"),
                        Ok(None) => return Ok(()),
                        Err(e) if e.is_connection_refused() || e.is_too_many_requests() => {
                            tracing::debug!(error = %e, "watch refused; retrying after backoff");
                            if !self.backoff_wait(cancel).await {
                                return Ok(());
                            }
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                }
            };
            let span = tracing::debug_span!("watch", from = %self.last_sync_resource_version());
            match self
                .handle_watch(stream, suppress_added_rv, &mut resync, cancel)
                .instrument(span)
                .await
            {
                WatchEnd::Cancelled => return Ok(()),
                WatchEnd::Closed { events } => {
                    if events == 0 && started.elapsed() < Duration::from_secs(1) {
                        let e = ReflectorError::VeryShortWatch {
                            name: self.options.name.clone(),
                        };
                        tracing::warn!(error = %e, "relisting");
                        return Ok(());
                    }
                    tracing::debug!(events, "watch closed; re-watching");
                    // A server that keeps closing watches early must not starve the runtime.
                    tokio::task::yield_now().await;
                }
                WatchEnd::Error(e) => {
                    if e.is_expired() {
                        self.metrics.add_expired(1);
                        tracing::debug!(error = %e, "watch expired; relisting");
                        return Ok(());
                    }
                    if e.is_too_many_requests() {
                        if !self.backoff_wait(cancel).await {
                            return Ok(());
                        }
                        continue;
                    }
                    if e.is_internal_error() && self.retry.lock().should_retry() {
                        // client-go re-watches at once here; a server answering every watch
                        // with a 500 would then be hammered for the whole retry window.
                        tracing::debug!(error = %e, "internal error on watch; re-watching after a backoff delay");
                        if !self.backoff_wait(cancel).await {
                            return Ok(());
                        }
                        continue;
                    }
                    if matches!(e, ReflectorError::WatchIdle(_)) {
                        // The connection is presumed dead, not the resource version: resume.
                        tracing::debug!("watch idle; re-watching after a backoff delay");
                        self.report(&e);
                        if !self.backoff_wait(cancel).await {
                            return Ok(());
                        }
                        continue;
                    }
                    tracing::debug!("watch ended with an error; relisting");
                    self.report(&e);
                    return Ok(());
                }
                WatchEnd::Resync(e) => {
                    tracing::warn!(error = %e, "resync failed; relisting");
                    return Ok(());
                }
            }
        }
    }

    async fn handle_watch(
        &self,
        mut stream: WatchStream<K>,
        suppress_added_rv: bool,
        resync: &mut Option<Pin<Box<Sleep>>>,
        cancel: &CancellationToken,
    ) -> WatchEnd {
        let mut events = 0u64;
        let mut propagate = !suppress_added_rv;
        let mut since_yield = 0;
        let cancelled = cancel.cancelled();
        tokio::pin!(cancelled);
        // G2: what consumers give back is kept only while this watch is read.
        // M1, M5: on the lane this reflector's objects were decoded on, if any.
        let mut reading = self
            .reclaim
            .as_deref()
            .map(|reclaim| reclaim.reading(self.reading.lane_used()));
        loop {
            if let Some(reading) = reading.as_mut() {
                reading.drop_kept();
            }
            // P2: while the store is full, leave the next events in the connection.
            if !self.store.has_room() {
                tokio::select! {
                    biased;
                    _ = &mut cancelled => return WatchEnd::Cancelled,
                    _ = self.store.wait_for_room() => {}
                    // G2: handlers catching up give objects back meanwhile; drop them (loop top).
                    _ = reclaim::kept_some(reading.as_ref()) => continue,
                }
            }
            let tick = async {
                match resync.as_mut() {
                    Some(s) => s.as_mut().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = &mut cancelled => return WatchEnd::Cancelled,
                _ = tick => {
                    if self.should_resync.as_ref().is_none_or(|f| f()) {
                        tracing::trace!("resync");
                        if let Err(e) = self.store.resync() {
                            return WatchEnd::Resync(e);
                        }
                    }
                    if let Some(s) = resync.as_mut() {
                        s.as_mut().reset(Instant::now() + self.options.resync_period);
                    }
                }
                first = stream.next() => {
                    // Events already decoded are applied without going back through the select
                    // (a bounded batch, so cancellation and resync stay prompt).
                    let mut item = first;
                    let mut budget = Self::EVENT_BATCH;
                    loop {
                        match item {
                            None => return WatchEnd::Closed { events },
                            Some(Err(e)) => return WatchEnd::Error(e),
                            Some(Ok(event)) => {
                                if let Err(e) = self.apply(event, &mut propagate) {
                                    return WatchEnd::Error(e);
                                }
                                events += 1;
                            }
                        }
                        budget -= 1;
                        if budget == 0 {
                            break;
                        }
                        match stream.next().now_or_never() {
                            Some(next) => item = next,
                            None => break,
                        }
                    }
                    since_yield += Self::EVENT_BATCH - budget;
                    if since_yield >= Self::YIELD_EVERY {
                        since_yield = 0;
                        tokio::task::yield_now().await;
                    }
                }
                // G2, last as events come first: woken to drop what handlers gave back while no
                // event comes (loop top).
                _ = reclaim::kept_some(reading.as_ref()) => {}
            }
        }
    }

    /// Whether the object is to be skipped (contract C10.1 steps 3–4). An object of the
    /// representation the lister-watcher asked for (`PartialObjectMetadata`) is of the expected
    /// type. An object without metadata is not skipped: the store's key function decides
    /// whether it can be filed (a transform may make values without metadata, keyed by a key
    /// function of their own), and a refusal is an error the handler hears of, never a silent
    /// gap.
    fn skip(&self, obj: &K) -> bool {
        if let Some((av, kind)) = &self.options.expected_gvk {
            let expected =
                obj.api_version() == Some(av.as_str()) && obj.kind() == Some(kind.as_str());
            let of_representation =
                self.lw
                    .representation()
                    .object_type()
                    .is_some_and(|(av, kind)| {
                        obj.api_version() == Some(av) && obj.kind() == Some(kind)
                    });
            if !expected && !of_representation {
                tracing::debug!(kind = ?obj.kind(), "skipping object of unexpected kind");
                return true;
            }
        }
        let table = obj.kind() == Some("Table")
            && matches!(
                obj.api_version(),
                Some("meta.k8s.io/v1" | "meta.k8s.io/v1beta1")
            );
        table
    }

    /// Applies one event to the store (contract C10).
    fn apply(&self, event: WatchEvent<K>, propagate: &mut bool) -> Result<(), ReflectorError> {
        let rv = match event {
            WatchEvent::Error(status) => {
                self.metrics.add_errors(1);
                return Err(ReflectorError::api(status));
            }
            WatchEvent::Bookmark(b) => {
                self.metrics.add_bookmarks(1);
                *propagate = true;
                Some(b.resource_version)
            }
            WatchEvent::Added(obj) | WatchEvent::Modified(obj) | WatchEvent::Deleted(obj)
                if self.skip(&obj) =>
            {
                return Ok(());
            }
            WatchEvent::Added(obj) => {
                self.metrics.add_added(1);
                let rv = event_resource_version(&obj);
                if let Err(e) = self.store.add(Arc::new(obj)) {
                    self.refused(WatchEventType::Added, e);
                }
                rv
            }
            WatchEvent::Modified(obj) => {
                self.metrics.add_modified(1);
                *propagate = true;
                let rv = event_resource_version(&obj);
                if let Err(e) = self.store.update(Arc::new(obj)) {
                    self.refused(WatchEventType::Modified, e);
                }
                rv
            }
            WatchEvent::Deleted(obj) => {
                self.metrics.add_deleted(1);
                *propagate = true;
                let rv = event_resource_version(&obj);
                if let Err(e) = self.store.delete(Arc::new(obj)) {
                    self.refused(WatchEventType::Deleted, e);
                }
                rv
            }
        };
        if let Some(rv) = rv.filter(|_| *propagate) {
            self.state.lock().last_sync_rv.clone_from(&rv);
            self.store.update_resource_version(&rv);
        }
        Ok(())
    }

    /// The store refused a watch event's object (C10.1): logged, and handed to the watch error
    /// handler, so that an application learns of a gap in its cache (a key its store cannot
    /// compute, say) without reading logs; the watch goes on.
    fn refused(&self, event: WatchEventType, source: delta_fifo::FifoError) {
        let error = ReflectorError::StoreRefused { event, source };
        tracing::error!(reflector = %self.options.name, %error, "watch event not applied");
        let handler = self.error_handler.lock().clone();
        if let Some(h) = handler {
            h(&error);
        }
    }

    /// Watch-list streaming (contract C13): `Ok(Some(stream))` once the initial state is in the
    /// store, the stream staying open; `Ok(None)` when cancelled; an error means fall back to list.
    ///
    /// Every retry waits one backoff delay first, also where client-go retries at once (a 410 or a
    /// too-large resource version, a stream closed before its end bookmark): a server that answers
    /// every attempt that way must not be hammered. A stream closed before its end bookmark after
    /// bringing events starts the backoff again from its first delay (C13.4).
    async fn watch_list(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Option<WatchStream<K>>, ReflectorError> {
        loop {
            if cancel.is_cancelled() {
                return Ok(None);
            }
            let started = Instant::now();
            let attempt = match self.open_watch(self.watch_list_options(), cancel).await {
                Ok(None) => return Ok(None),
                Ok(Some(stream)) => self.initial_events(stream, started, cancel).await,
                Err(e) => InitialEvents::Failed(e),
            };
            match attempt {
                InitialEvents::Cancelled => return Ok(None),
                InitialEvents::Complete(stream) => return Ok(Some(stream)),
                InitialEvents::Incomplete { events } => {
                    // Not an error to report (C13.4), but a sync that starts again: a warning,
                    // so that a sync slowed down by it says why.
                    self.metrics.add_watch_lists_incomplete(1);
                    if events > 0 {
                        // A stream that brought events was progress, not a failing server: the
                        // retry waits the first backoff delay, not a longer one each time
                        // (C13.4), or a collection whose streams the server keeps cutting would
                        // wait up to a minute between attempts.
                        self.backoff.lock().reset();
                    }
                    tracing::warn!(
                        reflector = %self.options.name,
                        events,
                        after_ms = started.elapsed().as_millis() as u64,
                        "the server closed a watch-list stream before its initial-events-end \
                         bookmark; nothing of it is applied, and a new watch-list starts after a \
                         backoff delay (kube-apiserver's watch cache closes a watcher that falls \
                         behind while the resource is written)"
                    );
                }
                InitialEvents::Failed(e) => {
                    let at_latest = self.state.lock().rv_unavailable;
                    if !self.watch_list_retriable(&e) {
                        return Err(e);
                    }
                    if at_latest && (e.is_expired() || e.is_too_large_resource_version()) {
                        // Refused even for the latest state: the server is misbehaving, and this
                        // would loop; say so louder than an ordinary expiry.
                        tracing::warn!(error = %e, "the server refused a watch-list at the latest resource version; retrying after a backoff delay");
                    } else {
                        tracing::debug!(
                            "watch-list attempt failed; retrying after a backoff delay"
                        );
                    }
                    self.report(&e);
                }
            }
            if !self.backoff_wait(cancel).await {
                return Ok(None);
            }
        }
    }

    /// The options of a watch-list request (contract C13.1).
    fn watch_list_options(&self) -> WatchOptions {
        let rv = {
            let state = self.state.lock();
            if state.rv_unavailable {
                ResourceVersion::default()
            } else {
                state.last_sync_rv.clone()
            }
        };
        WatchOptions {
            resource_version: Some(rv),
            resource_version_match: Some(ResourceVersionMatch::NotOlderThan),
            allow_watch_bookmarks: true,
            send_initial_events: Some(true),
            timeout_seconds: Some(self.watch_timeout()),
            ..Default::default()
        }
    }

    /// Whether a failed watch-list attempt is tried again (contract C13.5); a 410 or a too-large
    /// resource version first marks the last-synced one unavailable, so the next attempt asks for
    /// the latest state.
    fn watch_list_retriable(&self, e: &ReflectorError) -> bool {
        if e.is_connection_refused() || e.is_too_many_requests() {
            true
        } else if e.is_expired() || e.is_too_large_resource_version() {
            self.state.lock().rv_unavailable = true;
            true
        } else {
            false
        }
    }

    /// Reads a watch-list stream's initial events into a temporary snapshot (contract C13.2) and,
    /// at the end bookmark, replaces the store's content with it (C13.3). Nothing of an attempt
    /// that does not reach the bookmark reaches the store (C13.4).
    async fn initial_events(
        &self,
        mut stream: WatchStream<K>,
        started: Instant,
        cancel: &CancellationToken,
    ) -> InitialEvents<K> {
        let mut temp: BTreeMap<ObjectKey, Arc<K>> = BTreeMap::new();
        let mut seen_non_added = false;
        let mut snapshot_rv = ResourceVersion::default();
        let mut events = 0u64;
        loop {
            let item = tokio::select! {
                _ = cancel.cancelled() => return InitialEvents::Cancelled,
                item = stream.next() => item,
                // Diagnostic only (contract C13.7): the stream keeps going.
                _ = tokio::time::sleep(Self::WATCH_LIST_SILENCE_WARNING) => {
                    tracing::warn!(events, "still waiting for the initial-events-end bookmark of a watch-list stream");
                    continue;
                }
            };
            let event = match item {
                None if events == 0 && started.elapsed() < Duration::from_secs(1) => {
                    return InitialEvents::Failed(ReflectorError::VeryShortWatch {
                        name: self.options.name.clone(),
                    });
                }
                None => return InitialEvents::Incomplete { events },
                Some(Err(e)) => return InitialEvents::Failed(e),
                Some(Ok(WatchEvent::Error(s))) => {
                    return InitialEvents::Failed(ReflectorError::api(s))
                }
                Some(Ok(ev)) => ev,
            };
            events += 1;
            let (rv, end) = match event {
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)
                    if self.skip(&o) =>
                {
                    continue;
                }
                WatchEvent::Added(o) => {
                    let rv = ResourceVersion::from(o.resource_version().unwrap_or(""));
                    if let Err(e) = self.stage(&mut temp, o) {
                        return InitialEvents::Failed(e);
                    }
                    (rv, false)
                }
                WatchEvent::Modified(o) => {
                    seen_non_added = true;
                    let rv = ResourceVersion::from(o.resource_version().unwrap_or(""));
                    if let Err(e) = self.stage(&mut temp, o) {
                        return InitialEvents::Failed(e);
                    }
                    (rv, false)
                }
                WatchEvent::Deleted(o) => {
                    seen_non_added = true;
                    let rv = ResourceVersion::from(o.resource_version().unwrap_or(""));
                    match self.store.key(&o) {
                        Ok(key) => temp.remove(&key),
                        Err(e) => return InitialEvents::Failed(ReflectorError::SyncList(e)),
                    };
                    (rv, false)
                }
                WatchEvent::Bookmark(b) => {
                    seen_non_added = true;
                    (b.resource_version, b.initial_events_end)
                }
                WatchEvent::Error(_) => continue,
            };
            if seen_non_added {
                snapshot_rv = rv;
            }
            if end {
                self.state.lock().rv_unavailable = false;
                let items = temp.into_values().collect();
                if let Err(e) = self.store.replace(items, &snapshot_rv) {
                    return InitialEvents::Failed(ReflectorError::SyncList(e));
                }
                self.store.update_resource_version(&snapshot_rv);
                self.state.lock().last_sync_rv = snapshot_rv;
                return InitialEvents::Complete(stream);
            }
        }
    }
}

/// How one watch-list attempt ended.
enum InitialEvents<K> {
    Cancelled,
    /// The initial state is in the store; the stream goes on with live events.
    Complete(WatchStream<K>),
    /// The stream closed before the end bookmark, after `events` events.
    Incomplete {
        events: u64,
    },
    Failed(ReflectorError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn internal_error_retry_window_allows_31_retries_in_30_seconds() {
        let mut w = RetryWindow {
            max: Duration::from_secs(30),
            first: None,
            last: None,
        };
        let mut n = 0;
        while w.should_retry() {
            n += 1;
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        assert_eq!(n, 31);
    }

    #[tokio::test(start_paused = true)]
    async fn internal_error_retry_window_restarts_after_a_one_minute_gap() {
        let mut w = RetryWindow {
            max: Duration::from_secs(30),
            first: None,
            last: None,
        };
        let mut n = 0;
        while w.should_retry() {
            n += 1;
            // The 10th attempt comes a minute after the 9th.
            let step = if n == 9 { 60 } else { 1 };
            tokio::time::advance(Duration::from_secs(step)).await;
        }
        assert_eq!(n, 40);
    }

    #[tokio::test(start_paused = true)]
    async fn internal_error_retry_window_of_zero_never_retries_and_one_second_allows_two() {
        let mut w = RetryWindow {
            max: Duration::ZERO,
            first: None,
            last: None,
        };
        assert!(!w.should_retry());
        let mut w = RetryWindow {
            max: Duration::from_secs(1),
            first: None,
            last: None,
        };
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(w.should_retry());
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        assert_eq!(got, [true, true, false]);
    }
}
