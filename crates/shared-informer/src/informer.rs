//! [`SharedIndexInformer`]: reflector → queue → indexer + handlers (client-go's
//! `sharedIndexInformer` and its controller loop). The queue is the in-order [`RealFifo`] by
//! default (atomic relists, batched pops, unlocked while processing) or the [`DeltaFifo`]
//! ([`InformerQueue`]); `handle_popped` applies whatever one pop hands out — one key's deltas, a
//! batch, a whole relist, a resync or a bookmark — to the indexer, then notifies.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use reflector::delta_fifo::{
    Atomic, Delta, DeltaFifo, DeltaFifoOptions, DeltaType, FifoError, Popped, ProcessError, Queue,
    RealFifo, RealFifoOptions, Transformer, DEFAULT_BATCH_SIZE,
};
use reflector::store_index::{
    meta_namespace_key, BoxError, DeletedFinalStateUnknown, Indexer, Indexers, KeyError, KeyFn,
    Lister, Object, ReadOnlyIndexer, ResourceVersion, Transaction, TransactionError,
};
use reflector::{
    HttpListerWatcher, ListerWatcher, Reclaim, Reflector, ReflectorMetrics, ReflectorOptions,
    ReflectorStats, WatchErrorHandler,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::error::InformerError;
use crate::handler::{Notification, ResourceEventHandler};
use crate::informer_id::InformerId;
use crate::informer_name::InformerNameAndResource;
use crate::listener::{determine_resync_period, Listener, ResyncSchedule};
use crate::pacing::{PacedQueue, Pacing};
use crate::processor::{Outbox, Processor};
use crate::registration::HandlerRegistration;
use crate::synced::{HasSynced, SyncLatch};

/// The smallest resync period a handler may ask for (D5.3 rule 2).
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// Options of one handler registration
/// ([`SharedIndexInformer::add_event_handler_with_options`], client-go's `HandlerOptions`).
///
/// client-go's options carry a logger for the handler; here the handler's logs are `tracing`
/// events, and what the logger's name gave them is the registration's [`name`](Self::name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HandlerOptions {
    /// The handler's resync period (D5.3); `None`: the informer's default. `Some(ZERO)`: never.
    pub resync_period: Option<Duration>,
    /// A name for the handler, appended to its registration's name
    /// (`pods (DynamicObject)#2/<name>`), so its logs, stats and sync reports say which one it
    /// is; `None`: the number alone.
    pub name: Option<String>,
}

impl HandlerOptions {
    /// No resync period of its own, no name.
    pub fn new() -> Self {
        Self::default()
    }

    /// Its own resync period (zero: never).
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// A name for its logs, stats and sync reports.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// Options of a [`SharedIndexInformer`].
pub struct InformerOptions<K> {
    /// Name used, with the object type, in logs and stats (the informer's [`InformerId`]).
    pub name: String,
    /// The key each object is filed under, in the queue and the cache alike (client-go's store
    /// key function); default `namespace/name` ([`meta_namespace_key`]). A transform that makes
    /// values without metadata ([`TransformingListerWatcher`](crate::TransformingListerWatcher))
    /// needs one of its own: the default refuses them (`object has no meta`, a
    /// [`KeyError::NoMeta`](reflector::store_index::KeyError::NoMeta) that the watch error
    /// handler receives, the list retried after the reflector's backoff), and so does the
    /// namespace index, which such a cache leaves out of its `indexers`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shared_informer::{InformerOptions, SharedIndexInformer, TransformingListerWatcher};
    /// use shared_informer::reflector::store_index::{BoxError, DynamicObject, Indexers, KeyFn, Object, ObjectKey};
    /// # use shared_informer::reflector::{ListOptions, ListerWatcher, ObjectList, ReflectorError, WatchOptions, WatchStream};
    /// # struct Never;
    /// # impl ListerWatcher<DynamicObject> for Never {
    /// #     async fn list(&self, _: ListOptions) -> Result<ObjectList<DynamicObject>, ReflectorError> { std::future::pending().await }
    /// #     async fn watch(&self, _: WatchOptions) -> Result<WatchStream<DynamicObject>, ReflectorError> { std::future::pending().await }
    /// # }
    ///
    /// /// What is cached of a node: its name and whether it is schedulable; no metadata.
    /// struct NodeState { name: String, schedulable: bool }
    /// impl Object for NodeState {}
    ///
    /// let lw = TransformingListerWatcher::new(Never, |node: DynamicObject| {
    ///     let unschedulable = node.data.get("spec").and_then(|s| s["unschedulable"].as_bool());
    ///     Ok::<_, BoxError>(NodeState { name: node.name().to_string(), schedulable: unschedulable != Some(true) })
    /// });
    /// let key_fn: KeyFn<NodeState> = Arc::new(|n: &NodeState| Ok(ObjectKey::from(n.name.as_str())));
    /// let nodes = SharedIndexInformer::new(
    ///     lw,
    ///     InformerOptions { key_fn, indexers: Indexers::new(), ..Default::default() },
    /// );
    /// # let _ = nodes;
    /// ```
    pub key_fn: KeyFn<K>,
    /// Default resync period of handlers (zero: never resync).
    pub resync_period: Duration,
    /// Indexes of the cache (add the namespace index with `Indexers::new().with_namespace_index()`).
    pub indexers: Indexers<K>,
    /// Options of the reflector (its `resync_period` is set by the informer).
    pub reflector: ReflectorOptions,
    /// The queue between the reflector and the cache (default: in order, as client-go's
    /// informers are since 1.33).
    pub queue: InformerQueue,
    /// How far the informer reads ahead of its cache and its handlers (default: paced, see
    /// [`Pacing`]); `None` for client-go's unbounded buffers.
    pub pacing: Option<Pacing>,
    /// Its identity under a reserved [`InformerName`](crate::InformerName) (client-go's
    /// `InformerNameAndResource`), shown before its name in logs and stats
    /// (`kcm/pods (DynamicObject)`), and telling whether its metrics are to be published
    /// ([`InformerId::informer_name`]). Default: none. A factory with a name sets it.
    pub informer_name: Option<InformerNameAndResource>,
}

impl<K: Object> Default for InformerOptions<K> {
    fn default() -> Self {
        InformerOptions {
            name: "informer".into(),
            key_fn: Arc::new(|obj: &K| meta_namespace_key(obj)),
            resync_period: Duration::ZERO,
            indexers: Indexers::new().with_namespace_index(),
            reflector: ReflectorOptions::default(),
            queue: InformerQueue::default(),
            pacing: Some(Pacing::default()),
            informer_name: None,
        }
    }
}

/// Which queue an informer runs on.
///
/// - [`InformerQueue::InOrder`] (the default, client-go's `InOrderInformers`): a
///   [`RealFifo`]. Every change reaches the cache and the handlers in the order the server sent
///   it, each one (two updates of a key are two notifications); deltas of distinct keys are
///   applied in batches; a relist is applied to the cache at once (atomic mode), so no reader
///   ever sees half of it.
/// - [`InformerQueue::DeltaFifo`]: the [`DeltaFifo`] the classic informer design describes.
///   Changes to one key queued while the informer is busy are handed over together, in the order
///   the key was first queued; a relist reaches the cache key by key. Choose it to keep the
///   behaviour of client-go before 1.33, or when fewer notifications under load matter more than
///   seeing each change.
///
/// Either way the cache ends up equal to the server, deletions are never lost (tombstones),
/// and each key's notifications come in the order of its changes.
///
/// ```
/// use shared_informer::{InformerOptions, InformerQueue, InOrder};
/// use shared_informer::reflector::store_index::DynamicObject;
///
/// let classic = InformerOptions::<DynamicObject> { queue: InformerQueue::DeltaFifo, ..Default::default() };
/// let small_batches = InformerOptions::<DynamicObject> {
///     queue: InformerQueue::InOrder(InOrder { batch_size: 50, ..InOrder::default() }),
///     ..Default::default()
/// };
/// # let _ = (classic, small_batches);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InformerQueue {
    /// The in-order [`RealFifo`].
    InOrder(InOrder),
    /// The classic [`DeltaFifo`].
    DeltaFifo,
}

impl Default for InformerQueue {
    fn default() -> Self {
        InformerQueue::InOrder(InOrder::default())
    }
}

/// Options of the in-order queue; the defaults are client-go 1.36's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InOrder {
    /// The most deltas of distinct keys applied to the cache in one transaction (default
    /// [`DEFAULT_BATCH_SIZE`], 1000; 1 turns batching off).
    pub batch_size: usize,
    /// Relists and resyncs as single entries applied at once (client-go's `AtomicFIFO`, default
    /// on); off, a relist is queued as tombstones and `Replaced` deltas.
    pub atomic: bool,
    /// With `atomic`, let the reflector keep queueing while the informer applies an entry to the
    /// cache (client-go's `UnlockWhileProcessingFIFO`, default on).
    pub unlock_while_processing: bool,
}

impl Default for InOrder {
    fn default() -> Self {
        InOrder {
            batch_size: DEFAULT_BATCH_SIZE,
            atomic: true,
            unlock_while_processing: true,
        }
    }
}

struct Lifecycle<L> {
    lw: Option<L>,
    started: bool,
    stopped: bool,
    /// How often the reflector asks whether a listener is due for a resync (D5).
    check_period: Duration,
    default_resync: Duration,
    error_handler: Option<WatchErrorHandler>,
}

struct Inner<K, L> {
    id: InformerId,
    /// The queue's key function, the cache's too (`InformerOptions::key_fn`).
    key_fn: KeyFn<K>,
    indexer: Indexer<K>,
    /// What users get of the cache: the informer alone writes it.
    view: ReadOnlyIndexer<K>,
    processor: Processor<K>,
    lifecycle: Mutex<Lifecycle<L>>,
    transform: Mutex<Option<Transformer<K>>>,
    reflector_options: ReflectorOptions,
    queue_kind: InformerQueue,
    pacing: Option<Pacing>,
    /// Serialises delta processing with handler registration, so a late handler's replay of the
    /// cache is never interleaved with a notification (D6.1).
    block_deltas: Mutex<()>,
    /// The informer's HasSynced; stopped without syncing when `run` ends first.
    synced: Arc<SyncLatch>,
    /// The resource version the reflector of the running (or last) `run` last synced to, as its
    /// queue records it.
    reflector_rv: OnceLock<Box<dyn Fn() -> ResourceVersion + Send + Sync>>,
    /// The counters of the reflector of `run` (zero before it).
    reflector_metrics: Arc<ReflectorMetrics>,
    /// The objects handlers are done with go back to the reflector's watch reader, to be dropped
    /// beside the allocations of the objects it decodes (`reflector::Reclaim`).
    reclaim: Arc<Reclaim<K>>,
    next_listener_id: AtomicU64,
}

/// A cache of one resource kept in sync by list and watch, shared by any number of event handlers
/// (client-go's `SharedIndexInformer`).
///
/// ```no_run
/// # async fn demo(config: reflector::ClusterConfig) -> Result<(), Box<dyn std::error::Error>> {
/// use shared_informer::{EventHandlerFns, InformerOptions, SharedIndexInformer};
/// use shared_informer::reflector::{HttpListerWatcher, Resource};
/// use shared_informer::reflector::store_index::{DynamicObject, Object};
/// use shared_informer::CancellationToken;
///
/// let lw = HttpListerWatcher::<DynamicObject>::new(&config, Resource::namespaced("", "v1", "pods"))?;
/// let informer = SharedIndexInformer::new(lw, InformerOptions::default());
/// let registration = informer.add_event_handler(
///     EventHandlerFns::new().on_add(|pod: &std::sync::Arc<DynamicObject>, _| println!("{}", pod.name())),
/// )?;
/// let cancel = CancellationToken::new();
/// tokio::spawn({ let informer = informer.clone(); let cancel = cancel.clone(); async move { informer.run(cancel).await } });
/// informer.wait_for_sync().await;
/// println!("{} pods cached; handler synced: {}", informer.indexer().len(), registration.has_synced());
/// # Ok(()) }
/// ```
pub struct SharedIndexInformer<K, L = HttpListerWatcher<K>> {
    inner: Arc<Inner<K, L>>,
}

impl<K, L> Clone for SharedIndexInformer<K, L> {
    fn clone(&self) -> Self {
        SharedIndexInformer {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K, L> SharedIndexInformer<K, L>
where
    K: Object,
    L: ListerWatcher<K>,
{
    /// An informer that will list and watch through `lw` once [`run`](Self::run).
    pub fn new(lw: L, options: InformerOptions<K>) -> Self {
        Self::with_reflector_metrics(lw, options, Arc::default())
    }

    /// [`new`](Self::new), its reflector counting into `metrics`, which the lister-watcher may
    /// share (the factory's count the body bytes they receive into it).
    pub(crate) fn with_reflector_metrics(
        lw: L,
        options: InformerOptions<K>,
        metrics: Arc<ReflectorMetrics>,
    ) -> Self {
        let indexer = Indexer::with_key_fn(Arc::clone(&options.key_fn), options.indexers);
        let reclaim = Arc::new(Reclaim::new());
        SharedIndexInformer {
            inner: Arc::new(Inner {
                id: InformerId::new::<K>(options.name, options.informer_name),
                key_fn: options.key_fn,
                view: ReadOnlyIndexer::new(indexer.clone()),
                indexer,
                processor: Processor::new(Arc::clone(&reclaim)),
                lifecycle: Mutex::new(Lifecycle {
                    lw: Some(lw),
                    started: false,
                    stopped: false,
                    check_period: options.resync_period,
                    default_resync: options.resync_period,
                    error_handler: None,
                }),
                transform: Mutex::new(None),
                reflector_options: options.reflector,
                queue_kind: options.queue,
                pacing: options.pacing,
                block_deltas: Mutex::new(()),
                synced: Arc::default(),
                reflector_rv: OnceLock::new(),
                reflector_metrics: metrics,
                reclaim,
                next_listener_id: AtomicU64::new(1),
            }),
        }
    }

    /// The informer's name.
    pub fn name(&self) -> &str {
        &self.inner.id.name
    }

    /// The informer's identity (name and object type), as its logs and handler names use it.
    pub fn id(&self) -> &InformerId {
        &self.inner.id
    }

    /// The cache, read-only (the informer alone writes it). The same objects before, during and
    /// after `run`.
    pub fn indexer(&self) -> &ReadOnlyIndexer<K> {
        &self.inner.view
    }

    /// A lister over the cache.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.inner.view.clone())
    }

    /// Whether the initial list has been fully applied to the cache (says nothing about handlers;
    /// see [`HandlerRegistration::has_synced`]).
    pub fn has_synced(&self) -> bool {
        self.inner.synced.is_synced()
    }

    /// Waits until [`has_synced`](Self::has_synced); returns false if the informer stopped first.
    /// To wait for several informers or registrations with a deadline, see
    /// [`wait_for_cache_sync`](crate::wait_for_cache_sync).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn wait_for_sync(&self) -> bool {
        self.inner.synced.wait().await
    }

    /// The resource version the reflector last synced to (its last list's, then each watch
    /// event's and bookmark's), whether or not the cache has caught up; `""` before `run`.
    pub fn last_sync_resource_version(&self) -> ResourceVersion {
        self.inner
            .reflector_rv
            .get()
            .map(|rv| rv())
            .unwrap_or_default()
    }

    /// The resource version the cache itself has reached (contract A6): the last applied
    /// relist's, bookmark's or object's; `""` before the first. Behind
    /// [`last_sync_resource_version`](Self::last_sync_resource_version) while changes are queued.
    pub fn last_store_sync_resource_version(&self) -> ResourceVersion {
        self.inner.indexer.resource_version()
    }

    /// The queue this informer runs on.
    pub fn queue(&self) -> InformerQueue {
        self.inner.queue_kind
    }

    /// Whether `run` has been called.
    pub fn is_started(&self) -> bool {
        self.inner.lifecycle.lock().started
    }

    /// Whether the informer has stopped (terminal).
    pub fn is_stopped(&self) -> bool {
        self.inner.lifecycle.lock().stopped
    }

    /// Sets a transform applied to every object before it is cached (for example dropping
    /// `managedFields`). Only before start.
    pub fn set_transform(
        &self,
        f: impl Fn(Arc<K>) -> Result<Arc<K>, BoxError> + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        let lifecycle = self.inner.lifecycle.lock();
        if lifecycle.started {
            return Err(InformerError::AlreadyStarted);
        }
        *self.inner.transform.lock() = Some(Arc::new(f));
        Ok(())
    }

    /// Replaces the reflector's watch error handler (last call wins). Only before start.
    pub fn set_watch_error_handler(&self, handler: WatchErrorHandler) -> Result<(), InformerError> {
        let mut lifecycle = self.inner.lifecycle.lock();
        if lifecycle.started {
            return Err(InformerError::AlreadyStarted);
        }
        lifecycle.error_handler = Some(handler);
        Ok(())
    }

    /// Adds indexes; existing objects are indexed at once. Allowed before and after start, not after
    /// stop.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), InformerError> {
        if self.is_stopped() {
            return Err(InformerError::IndexerAfterStop);
        }
        Ok(self.inner.indexer.add_indexers(indexers)?)
    }

    /// Registers a handler with the informer's default resync period.
    pub fn add_event_handler(
        &self,
        handler: impl ResourceEventHandler<K>,
    ) -> Result<HandlerRegistration<K>, InformerError> {
        self.add_event_handler_with_options(handler, HandlerOptions::default())
    }

    /// Registers a handler with its own resync period (contract D5.3). A handler added after start
    /// first receives the whole cache as adds marked `is_in_initial_list` (D6).
    pub fn add_event_handler_with_resync(
        &self,
        handler: impl ResourceEventHandler<K>,
        resync: Duration,
    ) -> Result<HandlerRegistration<K>, InformerError> {
        self.add_event_handler_with_options(handler, HandlerOptions::new().resync_period(resync))
    }

    /// Registers a handler with [`HandlerOptions`] (client-go's `AddEventHandlerWithOptions`):
    /// its resync period (the informer's default when unset, D5.3) and a name that its logs,
    /// stats and sync reports carry (D5.6). A handler added after start first receives the whole
    /// cache as adds marked `is_in_initial_list` (D6).
    ///
    /// ```
    /// use std::time::Duration;
    /// use shared_informer::{EventHandlerFns, HandlerOptions, InformerOptions, SharedIndexInformer};
    /// use shared_informer::reflector::store_index::DynamicObject;
    /// # use shared_informer::reflector::{ListOptions, ListerWatcher, ObjectList, ReflectorError, WatchOptions, WatchStream};
    /// # struct Never;
    /// # impl ListerWatcher<DynamicObject> for Never {
    /// #     async fn list(&self, _: ListOptions) -> Result<ObjectList<DynamicObject>, ReflectorError> { std::future::pending().await }
    /// #     async fn watch(&self, _: WatchOptions) -> Result<WatchStream<DynamicObject>, ReflectorError> { std::future::pending().await }
    /// # }
    /// let pods = SharedIndexInformer::<DynamicObject, _>::new(
    ///     Never,
    ///     InformerOptions {
    ///         name: "pods".into(),
    ///         resync_period: Duration::from_secs(30),
    ///         ..Default::default()
    ///     },
    /// );
    /// let registration = pods.add_event_handler_with_options(
    ///     EventHandlerFns::new(),
    ///     HandlerOptions::new().name("node-controller").resync_period(Duration::from_secs(60)),
    /// )?;
    /// assert_eq!(registration.name(), "pods (DynamicObject)#1/node-controller");
    /// assert_eq!(registration.resync_period(), Duration::from_secs(60));
    /// # Ok::<(), shared_informer::InformerError>(())
    /// ```
    pub fn add_event_handler_with_options(
        &self,
        handler: impl ResourceEventHandler<K>,
        options: HandlerOptions,
    ) -> Result<HandlerRegistration<K>, InformerError> {
        let resync = match options.resync_period {
            Some(period) => period,
            None => self.inner.lifecycle.lock().default_resync,
        };
        let id = self.inner.next_listener_id.fetch_add(1, Ordering::Relaxed);
        // The identity in the name: handler logs and sync reports say whose handler it is (D15),
        // and the caller's name for it, if given, which one (D5.6).
        let name = match &options.name {
            Some(given) => format!("{}#{id}/{given}", self.inner.id),
            None => format!("{}#{id}", self.inner.id),
        };
        let mut lifecycle = self.inner.lifecycle.lock();
        if lifecycle.stopped {
            return Err(InformerError::HandlerAfterStop(name));
        }
        let mut requested = resync;
        if !requested.is_zero() {
            requested = requested.max(MINIMUM_RESYNC_PERIOD);
            if requested < lifecycle.check_period {
                if lifecycle.started {
                    tracing::warn!(informer = %self.inner.id, ?requested, check = ?lifecycle.check_period, "resync period raised to the informer's check period");
                    requested = lifecycle.check_period;
                } else {
                    lifecycle.check_period = requested;
                    self.inner.processor.resync_check_period_changed(requested);
                }
            }
        }
        let period = determine_resync_period(requested, lifecycle.check_period);
        let listener = Arc::new(Listener::new(
            id,
            name,
            Arc::new(handler),
            ResyncSchedule {
                requested,
                period,
                next_resync: Instant::now() + period,
                syncing: true,
            },
            Arc::clone(&self.inner.synced),
            self.inner.pacing.as_ref().map(Pacing::handler_low_water),
            Arc::clone(&self.inner.reclaim),
        ));
        let started = lifecycle.started;
        drop(lifecycle);

        if started {
            let _block = self.inner.block_deltas.lock();
            self.inner.processor.add(Arc::clone(&listener));
            let replay = self
                .inner
                .indexer
                .list()
                .into_iter()
                .map(|obj| Notification::Add {
                    obj,
                    is_in_initial_list: true,
                })
                .collect();
            listener.send_all(replay);
        } else {
            self.inner.processor.add(Arc::clone(&listener));
        }
        Ok(HandlerRegistration::new(listener, self.inner.id.clone()))
    }

    /// Removes a registration: no new notifications, buffered ones dropped; a call in progress may
    /// still finish. Removing an unknown or foreign registration is a no-op (D8.1).
    pub fn remove_event_handler(&self, registration: &HandlerRegistration<K>) {
        if registration.informer_id() != &self.inner.id {
            return;
        }
        self.inner.processor.remove(registration.id());
    }

    /// Removes a registration and waits until its handler's current call (if any) has finished
    /// (D8.3). Must not be called from inside that handler.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe once polled: the registration is removed in the first poll; a dropped future only
    /// stops waiting for the handler's current call.
    pub async fn shutdown_event_handler(&self, registration: &HandlerRegistration<K>) {
        self.remove_event_handler(registration);
        registration.listener().shutdown().await;
    }

    /// Lists and watches until `cancel` fires, keeping the cache and handlers up to date; then
    /// stops for good. Calling it again (or concurrently) returns at once.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future stops the list and watch at once, without the orderly stop
    /// `cancel` gives (handlers stopped, the informer marked stopped), and the informer cannot be run
    /// again. Stop it with `cancel`.
    pub async fn run(&self, cancel: CancellationToken) {
        let span = tracing::info_span!("informer", informer = %self.inner.id);
        self.run_inner(cancel).instrument(span).await
    }

    async fn run_inner(&self, cancel: CancellationToken) {
        let (lw, check_period, error_handler) = {
            let mut lifecycle = self.inner.lifecycle.lock();
            if lifecycle.started {
                tracing::warn!(informer = %self.inner.id, "informer already started");
                return;
            }
            let Some(lw) = lifecycle.lw.take() else {
                return;
            };
            lifecycle.started = true;
            (lw, lifecycle.check_period, lifecycle.error_handler.clone())
        };

        let transform = self.inner.transform.lock().clone();
        let name = self.inner.id.name.clone();
        match self.inner.queue_kind {
            InformerQueue::DeltaFifo => {
                let mut options = DeltaFifoOptions::new()
                    .key_fn(Arc::clone(&self.inner.key_fn))
                    .known_objects(self.inner.indexer.clone())
                    .emit_replaced(true)
                    .name(name);
                if let Some(t) = transform {
                    options = options.transformer_arc(t);
                }
                let fifo = DeltaFifo::new(options);
                self.run_on(fifo, 1, lw, check_period, error_handler, cancel)
                    .await
            }
            InformerQueue::InOrder(in_order) => {
                let mut options = if in_order.atomic {
                    RealFifoOptions::atomic(Atomic {
                        // The cache learns the RV the reflector reached (A6).
                        emit_bookmarks: true,
                        unlock_while_processing: in_order.unlock_while_processing,
                    })
                } else {
                    RealFifoOptions::new(self.inner.indexer.clone())
                };
                options = options.name(name).key_fn(Arc::clone(&self.inner.key_fn));
                if let Some(t) = transform {
                    options = options.transformer_arc(t);
                }
                let fifo = RealFifo::new(options);
                let batch = in_order.batch_size.max(1);
                self.run_on(fifo, batch, lw, check_period, error_handler, cancel)
                    .await
            }
        }
    }

    /// The informer's loop on queue `fifo`, popping up to `batch` deltas at a time.
    async fn run_on<Q: Queue<K>>(
        &self,
        fifo: Q,
        batch: usize,
        lw: L,
        check_period: Duration,
        error_handler: Option<WatchErrorHandler>,
        cancel: CancellationToken,
    ) {
        let reflector_options = ReflectorOptions {
            resync_period: check_period,
            name: self.inner.id.name.clone(),
            ..self.inner.reflector_options.clone()
        };
        // Weak: the reflector's task holds the hook while it runs, and a strong reference back to
        // the informer would keep a stopped informer and its whole cache alive as long as the
        // reflector lives.
        let should_resync = {
            let inner = Arc::downgrade(&self.inner);
            Arc::new(move || {
                inner
                    .upgrade()
                    .is_some_and(|inner| inner.processor.should_resync())
            })
        };
        let paced = PacedQueue::new(fifo.clone(), self.inner.pacing.as_ref());
        let reflector = Arc::new(
            Reflector::new(lw, paced.clone(), reflector_options)
                .with_should_resync(should_resync)
                .with_metrics(Arc::clone(&self.inner.reflector_metrics))
                .with_reclaim(Arc::clone(&self.inner.reclaim)),
        );
        reflector.set_watch_error_handler(self.watch_error_handler(error_handler));
        let _ = self.inner.reflector_rv.set({
            let fifo = fifo.clone();
            Box::new(move || fifo.last_sync_resource_version())
        });
        self.inner.processor.run(tokio::runtime::Handle::current());
        tracing::debug!(
            handlers = self.inner.processor.listeners().len(),
            ?check_period,
            "informer started"
        );

        let synced_watch = {
            let fifo = fifo.clone();
            let inner = Arc::clone(&self.inner);
            tokio::spawn(async move {
                if !fifo.wait_for_sync().await {
                    return; // closed before it synced: the informer never syncs
                }
                inner.synced.set_synced();
                // Handlers with no initial add left to handle sync now.
                for listener in inner.processor.listeners() {
                    listener.check_synced();
                }
            })
        };
        let reflector_task = {
            let reflector = Arc::clone(&reflector);
            let cancel = cancel.clone();
            // In the informer's span, so the reflector's logs carry the informer's identity.
            tokio::spawn(async move { reflector.run(cancel).await }.in_current_span())
        };

        // The objects of each pop's deltas: the queue drops its references when the pop ends,
        // and for a version already replaced (several deltas of one key), or deleted and already
        // handled, that is the last one. They go to the reclaim instead, to be dropped by the
        // watch reader (`reflector::Reclaim`).
        let mut spent: Vec<Arc<K>> = Vec::new();
        loop {
            let popped = tokio::select! {
                _ = cancel.cancelled() => break,
                r = fifo.pop_entry(batch, |popped, initial| {
                    popped_objects(&popped, &mut spent);
                    self.handle_popped(popped, initial)
                }) => r,
            };
            self.inner.reclaim.give_all(&mut spent);
            match popped {
                Ok(_) => {}
                Err(FifoError::Closed) => break,
                Err(e) => {
                    tracing::warn!(informer = %self.inner.id, error = %e, "processing deltas failed")
                }
            }
            if !self.wait_for_handlers(&cancel).await {
                break;
            }
            paced.taken();
        }
        fifo.close();
        paced.taken();
        let _ = reflector_task.await;
        synced_watch.abort();
        self.inner.lifecycle.lock().stopped = true;
        self.inner.processor.stop().await;
        self.inner.synced.set_stopped();
        tracing::debug!("informer stopped");
    }

    /// The reflector's error handler: the user's, if set, after a warning, once per informer,
    /// that says what to do about objects without metadata (each error is logged by the
    /// reflector as well).
    fn watch_error_handler(&self, user: Option<WatchErrorHandler>) -> WatchErrorHandler {
        let id = self.inner.id.clone();
        let warned = std::sync::atomic::AtomicBool::new(false);
        Arc::new(move |error| {
            if error.key_error() == Some(&KeyError::NoMeta) && !warned.swap(true, Ordering::Relaxed)
            {
                tracing::warn!(informer = %id, %error, "objects without metadata cannot be keyed by namespace and name: give the informer a key function of its own (InformerOptions::key_fn)");
            }
            if let Some(user) = &user {
                user(error);
            }
        })
    }

    /// P3, P4: waits for the handlers over their high water to drain to half of it, for at most
    /// `max_handler_wait` in all; those still over it then are left to lag. False if cancelled.
    async fn wait_for_handlers(&self, cancel: &CancellationToken) -> bool {
        let Some(pacing) = &self.inner.pacing else {
            return true;
        };
        let behind = self
            .inner
            .processor
            .over_high_water(pacing.handler_high_water);
        if behind.is_empty() {
            return true;
        }
        let started = Instant::now();
        let deadline = tokio::time::sleep_until(started + pacing.max_handler_wait);
        tokio::pin!(deadline);
        for listener in behind {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return false,
                _ = listener.wait_for_low_water() => {}
                _ = &mut deadline => listener.mark_lagging(started.elapsed()),
            }
        }
        true
    }

    /// Applies a popped entry to the cache, then notifies (D2, D3): the store is written before
    /// any handler hears of the change; store presence, not the delta type, chooses add or update.
    fn handle_popped(
        &self,
        popped: Popped<'_, K>,
        is_in_initial_list: bool,
    ) -> Result<(), ProcessError> {
        let _block = self.inner.block_deltas.lock();
        // What this pop does to the cache, handlers hear of as one batch each, even when a
        // delta fails part-way: the changes made before it stand.
        let mut out = Outbox::default();
        let result = match popped {
            Popped::Deltas(deltas) => deltas
                .iter()
                .try_for_each(|delta| self.apply_delta(delta, is_in_initial_list, &mut out)),
            Popped::Batch(batch) => self.apply_batch(batch, is_in_initial_list, &mut out),
            Popped::ReplacedAll {
                objects,
                resource_version,
            } => self.apply_replaced_all(objects, resource_version, is_in_initial_list, &mut out),
            Popped::SyncAll => {
                // D2.5: every cached object is resynced as an update to itself.
                for obj in self.inner.indexer.list() {
                    notify_update(&mut out, Arc::clone(&obj), obj);
                }
                Ok(())
            }
            Popped::Bookmark(resource_version) => {
                self.inner.indexer.bookmark(resource_version.clone());
                Ok(())
            }
        };
        self.inner.processor.deliver(out);
        result
    }

    /// One delta (D2).
    fn apply_delta(
        &self,
        delta: &Delta<K>,
        is_in_initial_list: bool,
        out: &mut Outbox<K>,
    ) -> Result<(), ProcessError> {
        let indexer = &self.inner.indexer;
        match delta.kind {
            DeltaType::Deleted => {
                indexer
                    .delete(delta.object.clone())
                    .map_err(ProcessError::failed)?;
                out.push(Notification::Delete(delta.object.clone()), false);
            }
            DeltaType::Added | DeltaType::Updated | DeltaType::Replaced | DeltaType::Sync => {
                let Some(obj) = delta.object() else {
                    return Ok(());
                };
                match indexer
                    .upsert(Arc::clone(obj))
                    .map_err(ProcessError::failed)?
                {
                    Some(old) => notify_update(out, old, Arc::clone(obj)),
                    None => notify_add(out, Arc::clone(obj), is_in_initial_list),
                }
            }
        }
        Ok(())
    }

    /// Deltas of distinct keys (D2.6): applied to the cache in one transaction, so a reader sees
    /// all of the batch or none of it; then handlers hear of each operation that was applied.
    /// Operations the cache refused are skipped and reported as the batch's error.
    fn apply_batch(
        &self,
        batch: &[Delta<K>],
        is_in_initial_list: bool,
        out: &mut Outbox<K>,
    ) -> Result<(), ProcessError> {
        let ops = batch.iter().map(|d| match (d.kind, d.object()) {
            (DeltaType::Deleted, _) | (_, None) => Transaction::delete(d.object.clone()),
            (_, Some(obj)) => Transaction::update(Arc::clone(obj)),
        });
        // What each operation replaced decides add or update, in the same lock as the writes.
        let (mut before, outcome) = self.inner.indexer.transaction_with_previous(ops);
        let (applied, error): (Vec<usize>, Option<TransactionError>) = match outcome {
            Ok(()) => ((0..batch.len()).collect(), None),
            Err(e) => (e.successful_indices.clone(), Some(e)),
        };
        for i in applied {
            let delta = &batch[i];
            match (delta.kind, delta.object()) {
                (DeltaType::Deleted, _) => {
                    out.push(Notification::Delete(delta.object.clone()), false)
                }
                (_, Some(obj)) => match before[i].take() {
                    Some(old) => notify_update(out, old, Arc::clone(obj)),
                    None => notify_add(out, Arc::clone(obj), is_in_initial_list),
                },
                // A tombstone without an object outside a deletion does not occur.
                (_, None) => {}
            }
        }
        match error {
            None => Ok(()),
            Some(e) => Err(ProcessError::failed(e)),
        }
    }

    /// A whole relist (D2.5): the deletions and old/new pairs are worked out against the cache,
    /// the cache is replaced at once (no reader sees half of it), then handlers hear of every
    /// deletion, then of every listed object in list order.
    fn apply_replaced_all(
        &self,
        objects: &[Arc<K>],
        resource_version: &ResourceVersion,
        is_in_initial_list: bool,
        out: &mut Outbox<K>,
    ) -> Result<(), ProcessError> {
        // One lock: the list goes in, and what it replaced and removed comes out.
        let (previous, removed) = self
            .inner
            .indexer
            .replace_with_previous(objects.iter().cloned(), resource_version.clone())
            .map_err(ProcessError::failed)?;
        for (key, obj) in removed {
            let tombstone = DeletedFinalStateUnknown {
                key,
                obj: Some(obj),
            };
            out.push(Notification::Delete(tombstone.into()), false);
        }
        for (obj, old) in objects.iter().zip(previous) {
            match old {
                Some(old) => notify_update(out, old, Arc::clone(obj)),
                None => notify_add(out, Arc::clone(obj), is_in_initial_list),
            }
        }
        Ok(())
    }

    /// The registered handlers' counters, for observability, each labelled with this informer's
    /// identity (D15).
    pub fn handler_stats(&self) -> Vec<HandlerStats> {
        self.stats().handlers
    }

    /// The informer's counters, labelled with its identity (D15): its reflector's (what it asked
    /// the server and received; zero before `run`) and its handlers'.
    ///
    /// ```
    /// use shared_informer::{InformerOptions, SharedIndexInformer};
    /// use shared_informer::reflector::store_index::DynamicObject;
    /// # use shared_informer::reflector::{ListOptions, ListerWatcher, ObjectList, ReflectorError, WatchOptions, WatchStream};
    /// # struct Never;
    /// # impl ListerWatcher<DynamicObject> for Never {
    /// #     async fn list(&self, _: ListOptions) -> Result<ObjectList<DynamicObject>, ReflectorError> { std::future::pending().await }
    /// #     async fn watch(&self, _: WatchOptions) -> Result<WatchStream<DynamicObject>, ReflectorError> { std::future::pending().await }
    /// # }
    /// let pods = SharedIndexInformer::<DynamicObject, _>::new(
    ///     Never,
    ///     InformerOptions { name: "pods".into(), ..Default::default() },
    /// );
    /// let stats = pods.stats();
    /// assert_eq!(stats.informer.to_string(), "pods (DynamicObject)");
    /// assert_eq!(stats.reflector.lists, 0);
    /// ```
    pub fn stats(&self) -> InformerStats {
        InformerStats {
            informer: self.inner.id.clone(),
            reflector: self.inner.reflector_metrics.snapshot(),
            handlers: self
                .inner
                .processor
                .listeners()
                .iter()
                .map(|l| HandlerStats {
                    informer: self.inner.id.clone(),
                    name: l.name.clone(),
                    pending: l.pending(),
                    processed: l.processed(),
                    panics: l.panics(),
                    lagging: l.is_lagging(),
                })
                .collect(),
        }
    }
}

/// An informer's counters at one moment ([`SharedIndexInformer::stats`]), labelled with its
/// identity as client-go labels a reflector's and a queue's metrics with their name (D15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InformerStats {
    /// Whose counters these are: the informer's name and object type.
    pub informer: InformerId,
    /// Its reflector's: lists, pages, watches, events by type, relists, 410s, backoff waits (bytes
    /// only where the lister-watcher counts them).
    pub reflector: ReflectorStats,
    /// Its handlers', as [`SharedIndexInformer::handler_stats`] gives them.
    pub handlers: Vec<HandlerStats>,
}

fn notify_add<K>(out: &mut Outbox<K>, obj: Arc<K>, is_in_initial_list: bool) {
    out.push(
        Notification::Add {
            obj,
            is_in_initial_list,
        },
        false,
    );
}

/// An update; resync-class (D3.2) when both sides have metadata and equal RVs.
fn notify_update<K: Object>(out: &mut Outbox<K>, old: Arc<K>, new: Arc<K>) {
    let resync_class = match (old.resource_version(), new.resource_version()) {
        (Some(a), Some(b)) => old.has_meta() && new.has_meta() && a == b,
        _ => false,
    };
    out.push(Notification::Update { old, new }, resync_class);
}

impl<K: Object, L: ListerWatcher<K>> HasSynced for SharedIndexInformer<K, L> {
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }

    fn wait_for_sync(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(self.inner.synced.wait())
    }
}

/// One registered handler's counters ([`SharedIndexInformer::handler_stats`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerStats {
    /// The informer the handler is registered with (D15).
    pub informer: InformerId,
    /// The registration's name: the informer's identity and a number, `pods (DynamicObject)#2`.
    pub name: String,
    /// Notifications queued and not yet handled.
    pub pending: i64,
    /// Notifications handled (including those whose handler panicked).
    pub processed: u64,
    /// Notifications whose handler panicked.
    pub panics: u64,
    /// The informer has stopped waiting for this handler until it catches up (see [`Pacing`]).
    pub lagging: bool,
}

/// Clones the references a pop's deltas hold into `out` (a relist's objects, which are all in
/// the cache after it, excepted).
fn popped_objects<K>(popped: &Popped<'_, K>, out: &mut Vec<Arc<K>>) {
    let deltas: &[Delta<K>] = match popped {
        Popped::Deltas(deltas) => deltas.as_slice(),
        Popped::Batch(batch) => batch,
        Popped::ReplacedAll { .. } | Popped::SyncAll | Popped::Bookmark(_) => return,
    };
    out.extend(
        deltas
            .iter()
            .filter_map(|delta| delta.object.object().cloned()),
    );
}
