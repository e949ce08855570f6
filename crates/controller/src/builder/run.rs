//! What [`ControllerBuilder::run`] does: wire the informers into one queue, start the leases
//! the mode asks for, run the workers, and shut down in the order rule BD5 gives.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{
    meta_namespace_key, DynamicObject, Object, ObjectOrTombstone, PartialObjectMetadata,
    ReadOnlyIndexer,
};
use workqueue::shared_informer::reflector::{Api, Decode};
use workqueue::shared_informer::{EventHandlerFns, SharedIndexInformer, SharedInformerFactory};
use workqueue::{default_controller_rate_limiter, RateLimitingQueue};

use super::context::{Context, Fence, Shared};
use super::{BuilderError, ControllerBuilder, LeaderElection, Mapper, Mode, Predicate};
use crate::consistency::{ConsistencyStore, Readiness};
use crate::events::{ApiEventSink, BroadcasterConfig, EventBroadcaster, EventSource};
use crate::leader_election::{ApiLeaseLock, ElectionEnd, LeaderElectionConfig, LeaderElector};
use crate::owners::OwnerEnqueuer;
use crate::runner::{Action, Controller};
use crate::sharding::{ApiRingLeases, Ring, ShardGate, ShardedController, Sharder, SharderConfig};

pub(super) async fn run<K, S, R, RFut, E, P>(
    builder: ControllerBuilder<K>,
    reconcile: R,
    error_policy: P,
    state: S,
) -> Result<(), BuilderError>
where
    K: Object + Decode + Send + Sync + 'static,
    S: Send + Sync + 'static,
    R: Fn(Arc<K>, Context<K, S>) -> RFut + Send + Sync + 'static,
    RFut: Future<Output = Result<Action, E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
    P: Fn(Arc<K>, &E, &Context<K, S>) -> Action + Send + Sync + 'static,
{
    let stop = builder.shutdown.clone();
    let signals = builder
        .signals
        .then(|| tokio::spawn(on_signal(stop.clone())));
    // Informers, events and leases outlive the workers (BD5): their own token, fired last,
    // also when setting up fails half-way.
    let background = CancellationToken::new();
    let _background_stops = background.clone().drop_guard();
    let mut wired = Wired::new(&builder, &background)?;
    let shared = Arc::new(Shared {
        state,
        client: builder.client.clone(),
        resource: builder.resource.clone(),
        kind: builder.kind.clone(),
        manager: builder.name.clone(),
        recorder: wired.recorder.clone(),
        children: wired.children.clone(),
        consistency: builder.consistency.clone(),
    });
    let reconciler = Arc::new(Reconciler {
        reconcile,
        error_policy,
        timeout: builder.reconcile_timeout,
        shared,
    });
    let outcome = match wired.wait_for_sync(&stop, builder.sync_timeout).await {
        Err(error) => Err(error),
        Ok(()) if stop.is_cancelled() => Ok(()),
        Ok(()) => work(&builder, &mut wired, reconciler, &stop).await,
    };
    background.cancel();
    wired.shut_down(builder.shutdown_timeout).await;
    if let Some(signals) = signals {
        signals.abort();
    }
    outcome
}

/// Everything [`run`] started before the workers: informers, the event broadcaster, and when
/// sharded the ring and the sharder.
struct Wired<K> {
    queue: RateLimitingQueue<String>,
    main: SharedInformerFactory,
    all: SharedInformerFactory,
    primary: ReadOnlyIndexer<K>,
    informer: SharedIndexInformer<K>,
    children: Vec<(
        workqueue::shared_informer::reflector::Resource,
        ReadOnlyIndexer<PartialObjectMetadata>,
    )>,
    recorder: crate::events::EventRecorder,
    events: Option<JoinHandle<()>>,
    ring: Option<Ring<ApiRingLeases>>,
    tasks: Vec<JoinHandle<()>>,
    /// This replica's identity in every lease it holds (the builder's, or the default one,
    /// found once).
    identity: String,
}

impl<K: Object + Decode + Send + Sync + 'static> Wired<K> {
    fn new(b: &ControllerBuilder<K>, background: &CancellationToken) -> Result<Self, BuilderError> {
        let identity = b.identity.clone().unwrap_or_else(default_identity);
        let lease_ns = lease_namespace(b);
        let ring = match &b.mode {
            Mode::Sharded(name) => Some(Ring::new(
                name.clone(),
                LeaderElectionConfig::new(name.clone(), identity.clone()),
                ApiRingLeases::new(b.client.clone(), lease_ns.clone()),
            )?),
            _ => None,
        };
        let mut main = SharedInformerFactory::with_client(b.client.clone());
        let mut all = SharedInformerFactory::with_client(b.client.clone());
        if let Some(ns) = &b.namespace {
            main = main.namespace(ns.clone());
            all = all.namespace(ns.clone());
        }
        if let Some(ring) = &ring {
            let selector = ring
                .shard_selector()
                .parse()
                .map_err(|e| BuilderError::Ring(format!("{e}")))?;
            main = main.label_selector(selector);
        }
        let queue = new_queue(b);
        let primary = main.informer::<K>(b.resource.clone())?;
        primary.add_event_handler(primary_handler(queue.clone(), b.predicates.clone()))?;
        let mut children = Vec::new();
        let mut child_informers = Vec::new();
        for resource in &b.owns {
            let informer = main.metadata_informer(resource.clone())?;
            child_informers.push(informer.clone());
            let mut owners = OwnerEnqueuer::<PartialObjectMetadata, _>::new(
                queue.clone(),
                b.resource.group.clone(),
                b.kind.clone(),
            );
            if !b.resource.namespaced {
                owners = owners.cluster_scoped_owner();
            }
            informer.add_event_handler(owners)?;
            children.push((resource.clone(), informer.indexer().clone()));
        }
        for (resource, mapper) in &b.watches {
            let informer = all.informer::<DynamicObject>(resource.clone())?;
            informer.add_event_handler(mapped_handler(queue.clone(), mapper.clone()))?;
        }
        #[cfg(feature = "metrics")]
        if let Some(health) = &b.observed.health {
            let (primary, children) = (primary.clone(), child_informers.clone());
            health.add_check(format!("{}-caches", b.name), move || {
                primary.has_synced() && children.iter().all(|c| c.has_synced())
            });
        }
        let mut tasks = Vec::new();
        if let Some(ring) = &ring {
            tasks = start_sharding(b, ring, &all, &identity, &lease_ns, background)?;
        }
        let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
        let recorder = broadcaster.new_recorder(EventSource::new(b.name.clone()));
        let events = broadcaster.start(ApiEventSink::new(b.client.clone()), background.clone());
        main.start(background);
        all.start(background);
        Ok(Self {
            queue,
            main,
            all,
            primary: primary.indexer().clone(),
            informer: primary,
            children,
            recorder,
            events: Some(events),
            ring,
            tasks,
            identity,
        })
    }

    /// Waits until every cache synced, the sync timeout passed (an error), or shutdown began.
    async fn wait_for_sync(
        &self,
        stop: &CancellationToken,
        timeout: Duration,
    ) -> Result<(), BuilderError> {
        let both = async {
            let main = self.main.wait_for_cache_sync(timeout).await;
            if !main.all_synced() {
                return Err(BuilderError::CacheSync(main.to_string()));
            }
            let all = self.all.wait_for_cache_sync(timeout).await;
            if !all.all_synced() {
                return Err(BuilderError::CacheSync(all.to_string()));
            }
            Ok(())
        };
        tokio::select! {
            synced = both => synced,
            () = stop.cancelled() => Ok(()),
        }
    }

    /// BD5's last steps, after the workers: the leases released (their tasks were given the
    /// background token, fired by now), the events written, the informers stopped; each wait
    /// bounded by `bound`.
    async fn shut_down(&mut self, bound: Duration) {
        for task in self.tasks.drain(..) {
            if tokio::time::timeout(bound, task).await.is_err() {
                tracing::warn!(
                    ?bound,
                    "a lease was not released within the shutdown timeout"
                );
            }
        }
        if let Some(events) = self.events.take() {
            if tokio::time::timeout(bound, events).await.is_err() {
                tracing::warn!(
                    ?bound,
                    "pending events were not written within the shutdown timeout"
                );
            }
        }
        self.main.shutdown().await;
        self.all.shutdown().await;
    }
}

/// The ring's membership and the sharder candidate, both stopped by `background` (after the
/// workers, so the shard lease is held while the last reconciles write).
fn start_sharding<K>(
    b: &ControllerBuilder<K>,
    ring: &Ring<ApiRingLeases>,
    all: &SharedInformerFactory,
    identity: &str,
    lease_ns: &str,
    background: &CancellationToken,
) -> Result<Vec<JoinHandle<()>>, BuilderError> {
    let objects = all.metadata_informer(b.resource.clone())?;
    let mut sharder: Sharder<PartialObjectMetadata, _> = Sharder::new(
        ring.clone(),
        b.client.clone(),
        b.resource.clone(),
        b.kind.clone(),
        &objects,
        SharderConfig::default(),
    )?;
    for resource in &b.owns {
        let children = all.metadata_informer(resource.clone())?;
        sharder = sharder.with_children(resource.clone(), &children)?;
    }
    let members = tokio::spawn({
        let (ring, stop) = (ring.clone(), background.clone());
        async move {
            if let Err(error) = ring.run(ring.lock(), stop).await {
                tracing::error!(%error, "cannot hold the shard lease");
            }
        }
    });
    let lease = format!("{}-sharder", ring.name());
    let config = LeaderElectionConfig::new(lease.clone(), identity);
    let lock = ApiLeaseLock::new(b.client.clone(), lease_ns, lease, identity);
    let stop = background.clone();
    let elected = tokio::spawn(async move { sharder.run_elected(config, lock, stop).await });
    Ok(vec![members, elected])
}

/// Runs the workers in the builder's mode until shutdown (or a lost leadership).
async fn work<K, S, R, RFut, E, P>(
    b: &ControllerBuilder<K>,
    wired: &mut Wired<K>,
    reconciler: Arc<Reconciler<S, R, P>>,
    stop: &CancellationToken,
) -> Result<(), BuilderError>
where
    K: Object + Decode + Send + Sync + 'static,
    S: Send + Sync + 'static,
    R: Fn(Arc<K>, Context<K, S>) -> RFut + Send + Sync + 'static,
    RFut: Future<Output = Result<Action, E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
    P: Fn(Arc<K>, &E, &Context<K, S>) -> Action + Send + Sync + 'static,
{
    let (queue, cache, bound) = (
        wired.queue.clone(),
        wired.primary.clone(),
        b.shutdown_timeout,
    );
    let workers = Controller::new(queue.clone()).workers(b.workers);
    #[cfg(feature = "metrics")]
    let workers = match &b.observed.reconciles {
        Some(metrics) => workers.metrics(metrics.controller(&b.name)),
        None => workers,
    };
    let fresh = Freshness {
        informer: wired.informer.clone(),
        consistency: b.consistency.clone(),
    };
    let by_key = |fence: Fence<K>| {
        let (cache, reconciler, fresh) = (cache.clone(), reconciler.clone(), fresh.clone());
        move |key: String| {
            let (cache, reconciler, fence) = (cache.clone(), reconciler.clone(), fence.clone());
            let fresh = fresh.clone();
            async move {
                let Some(object) = cache.get_by_key(&key) else {
                    fresh.consistency.clear(&key);
                    return Ok(Action::Done); // BD1: gone
                };
                match fresh.check(&key, &object) {
                    Some(later) => Ok(later),
                    None => reconciler.call(object, fence).await,
                }
            }
        }
    };
    match (&b.mode, wired.ring.as_ref()) {
        (_, Some(ring)) => {
            let api = match &b.namespace {
                Some(ns) => Api::namespaced_with(b.client.clone(), b.resource.clone(), ns),
                None => Api::all_with(b.client.clone(), b.resource.clone()),
            };
            let gate = ShardGate::for_ring(api, ring, wired.primary.clone());
            let sharded = ShardedController::new(gate, queue).workers(b.workers);
            #[cfg(feature = "metrics")]
            let sharded = match &b.observed.reconciles {
                Some(metrics) => sharded.metrics(metrics.controller(&b.name)),
                None => sharded,
            };
            let reconcile = move |object: Arc<K>, writer| {
                let (reconciler, fresh) = (reconciler.clone(), fresh.clone());
                async move {
                    let key = meta_namespace_key(&*object).map(|k| k.as_str().to_string());
                    if let Some(later) = key.ok().and_then(|key| fresh.check(&key, &object)) {
                        return Ok(later);
                    }
                    reconciler
                        .call(object, Fence::Shard(Box::new(writer)))
                        .await
                }
            };
            bounded(stop, bound, sharded.run(stop.clone(), reconcile)).await;
            Ok(())
        }
        (Mode::Leader(election), None) => {
            let config = match election {
                LeaderElection::Named(name) => {
                    LeaderElectionConfig::new(name.clone(), wired.identity.clone())
                }
                LeaderElection::Config(config) => (**config).clone(),
            };
            let lock = ApiLeaseLock::new(
                b.client.clone(),
                &lease_namespace(b),
                config.name.clone(),
                config.identity.clone(),
            );
            #[cfg(feature = "metrics")]
            let status = b
                .observed
                .reconciles
                .as_ref()
                .map(|m| m.leader_election(&config.name));
            let elector = LeaderElector::new(config, lock)?;
            let end = elector
                .run_leading(stop.clone(), |leader, guard| async move {
                    #[cfg(feature = "metrics")]
                    if let Some(status) = &status {
                        status.set_leading(true);
                    }
                    let reconcile = by_key(Fence::Leader(guard));
                    bounded(&leader, bound, workers.run(leader.clone(), reconcile)).await;
                    #[cfg(feature = "metrics")]
                    if let Some(status) = &status {
                        status.set_leading(false);
                    }
                })
                .await;
            match end {
                ElectionEnd::Cancelled => Ok(()),
                ElectionEnd::LeadershipLost => Err(BuilderError::LeadershipLost),
            }
        }
        _ => {
            bounded(stop, bound, workers.run(stop.clone(), by_key(Fence::None))).await;
            Ok(())
        }
    }
}

/// BD7: whether the cache has shown this controller's last write of a key.
struct Freshness<K> {
    informer: SharedIndexInformer<K>,
    consistency: Arc<ConsistencyStore>,
}

impl<K> Clone for Freshness<K> {
    fn clone(&self) -> Self {
        Self {
            informer: self.informer.clone(),
            consistency: self.consistency.clone(),
        }
    }
}

/// How soon a key whose cache lags behind our own write is tried again.
pub(super) const STALE_RETRY: Duration = Duration::from_millis(100);

impl<K: Object + Decode + Send + Sync + 'static> Freshness<K> {
    /// `None` when `object` (the cached copy of `key`) may be reconciled; otherwise what to do
    /// with the key instead (BD7).
    fn check(&self, key: &str, object: &K) -> Option<Action> {
        let cache = self.informer.last_store_sync_resource_version();
        match self
            .consistency
            .ensure_ready(key, cache.as_str(), object.resource_version())
        {
            Readiness::Ready => None,
            Readiness::Stale { wrote, cache } => {
                tracing::debug!(key, %wrote, %cache, "the cache lags behind our own write: requeued");
                Some(Action::RequeueAfter(STALE_RETRY))
            }
        }
    }
}

/// The user's functions and what every call shares.
struct Reconciler<S, R, P> {
    reconcile: R,
    error_policy: P,
    timeout: Option<Duration>,
    shared: Arc<Shared<S>>,
}

/// Why a key is retried with backoff (BD2).
#[derive(Debug)]
enum Failure {
    /// The reconcile (or its error policy's `Retry`) failed with this error.
    Failed(String),
    /// The reconcile outlived the timeout.
    TimedOut(Duration),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Failed(error) => f.write_str(error),
            Failure::TimedOut(after) => write!(f, "the reconcile timed out after {after:?}"),
        }
    }
}

impl<S, R, P> Reconciler<S, R, P> {
    /// One reconcile of `object` (BD2).
    async fn call<K, RFut, E>(&self, object: Arc<K>, fence: Fence<K>) -> Result<Action, Failure>
    where
        K: Object + Decode,
        R: Fn(Arc<K>, Context<K, S>) -> RFut,
        RFut: Future<Output = Result<Action, E>>,
        E: fmt::Display,
        P: Fn(Arc<K>, &E, &Context<K, S>) -> Action,
    {
        let context = Context::new(self.shared.clone(), fence);
        let reconcile = (self.reconcile)(object.clone(), context.clone());
        let outcome = match self.timeout {
            Some(timeout) => match tokio::time::timeout(timeout, reconcile).await {
                Ok(outcome) => outcome,
                Err(_) => return Err(Failure::TimedOut(timeout)),
            },
            None => reconcile.await,
        };
        let error = match outcome {
            Ok(action) => return Ok(action),
            Err(error) => error,
        };
        match (self.error_policy)(object.clone(), &error, &context) {
            Action::Retry => Err(Failure::Failed(error.to_string())),
            action => {
                tracing::warn!(object = object.name(), %error, ?action, "reconcile failed; the error policy's action applies");
                Ok(action)
            }
        }
    }
}

/// Runs `work` until it ends, or until `bound` after `token` fired (BD5: reconciles still in
/// flight then are abandoned).
async fn bounded(token: &CancellationToken, bound: Duration, work: impl Future<Output = ()>) {
    let deadline = async {
        token.cancelled().await;
        tokio::time::sleep(bound).await;
    };
    tokio::select! {
        () = work => {}
        () = deadline => tracing::warn!(?bound, "reconciles still running after the shutdown timeout were abandoned"),
    }
}

/// BD3 for the primary resource.
fn primary_handler<K: Object>(
    queue: RateLimitingQueue<String>,
    predicates: Vec<Predicate<K>>,
) -> EventHandlerFns<K> {
    let on_update = queue.clone();
    EventHandlerFns::new()
        .on_add(move |object: &Arc<K>, _| enqueue(&queue, &**object))
        .on_update(move |old: &Arc<K>, new: &Arc<K>| {
            if predicates.iter().all(|p| p.accepts(old, new)) {
                enqueue(&on_update, &**new);
            }
        })
}

fn enqueue<K: Object>(queue: &RateLimitingQueue<String>, object: &K) {
    match meta_namespace_key(object) {
        Ok(key) => queue.add(key.as_str().to_string()),
        Err(error) => tracing::debug!(%error, "an object without a key is not reconciled"),
    }
}

/// BD3 for a watched resource: its mapper's keys, on every event.
fn mapped_handler(
    queue: RateLimitingQueue<String>,
    mapper: Mapper,
) -> EventHandlerFns<DynamicObject> {
    let add = {
        let (queue, mapper) = (queue.clone(), mapper.clone());
        move |object: &Arc<DynamicObject>, _: bool| {
            mapper(object).into_iter().for_each(|k| queue.add(k))
        }
    };
    let update = {
        let (queue, mapper) = (queue.clone(), mapper.clone());
        move |_: &Arc<DynamicObject>, object: &Arc<DynamicObject>| {
            mapper(object).into_iter().for_each(|k| queue.add(k))
        }
    };
    let delete = move |gone: &ObjectOrTombstone<DynamicObject>| {
        let last = match gone {
            ObjectOrTombstone::Object(object) => Some(object.clone()),
            ObjectOrTombstone::Tombstone(tombstone) => tombstone.obj.clone(),
        };
        if let Some(object) = last {
            mapper(&object).into_iter().for_each(|k| queue.add(k));
        }
    };
    EventHandlerFns::new()
        .on_add(add)
        .on_update(update)
        .on_delete(delete)
}

/// The controller's queue: client-go's default controller rate limiter, and its metrics under
/// the controller's name when asked for.
fn new_queue<K>(b: &ControllerBuilder<K>) -> RateLimitingQueue<String> {
    #[cfg(feature = "metrics")]
    if let Some(provider) = &b.observed.queue {
        let config = workqueue::QueueConfig::new()
            .name(b.name.clone())
            .metrics_provider(provider.clone());
        return RateLimitingQueue::with_config(default_controller_rate_limiter(), config);
    }
    let _ = b;
    RateLimitingQueue::new(default_controller_rate_limiter())
}

fn lease_namespace<K>(b: &ControllerBuilder<K>) -> String {
    b.lease_namespace
        .clone()
        .or_else(|| b.namespace.clone())
        .unwrap_or_else(|| "default".to_string())
}

/// `$POD_NAME`, else the host name, followed by the process id (two processes on one host
/// must never share an identity: both would think they hold the same lease).
fn default_identity() -> String {
    let non_empty = |s: String| {
        let s = s.trim().to_lowercase();
        (!s.is_empty()).then_some(s)
    };
    let host = std::env::var("POD_NAME")
        .ok()
        .and_then(non_empty)
        .or_else(|| std::env::var("HOSTNAME").ok().and_then(non_empty))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .and_then(non_empty)
        })
        .unwrap_or_else(|| "controller".to_string());
    format!("{host}-{}", std::process::id())
}

/// Fires `stop` on SIGTERM or ctrl-c; returns when `stop` fires otherwise.
async fn on_signal(stop: CancellationToken) {
    #[cfg(unix)]
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let terminated = async {
        #[cfg(unix)]
        if let Some(terminate) = terminate.as_mut() {
            terminate.recv().await;
            return;
        }
        std::future::pending::<()>().await
    };
    let interrupted = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await
        }
    };
    tokio::select! {
        () = terminated => tracing::info!("SIGTERM: shutting down"),
        () = interrupted => tracing::info!("interrupted: shutting down"),
        () = stop.cancelled() => return,
    }
    stop.cancel();
}
