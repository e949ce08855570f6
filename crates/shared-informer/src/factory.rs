//! [`SharedInformerFactory`]: one informer (one list+watch) per resource, however many consumers
//! ask (client-go's `SharedInformerFactory`, contract D13), including metadata-only informers
//! (client-go's `metadatainformer`, D14).

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use reflector::store_index::{
    meta_namespace_key, DynamicObject, Indexers, KeyFn, Object, PartialObjectMetadata, Selector,
    ShardSelector,
};
use reflector::{
    Client, ClusterConfig, ConfigError, Decode, Encoding, HttpListerWatcher, ReflectorMetrics,
    ReflectorOptions, Resource,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::informer::{InformerOptions, InformerQueue, SharedIndexInformer};
use crate::informer_name::InformerName;
use crate::pacing::Pacing;
use crate::synced::{wait_for_cache_sync, HasSynced, SyncReport};

/// A resource as kubectl names it with its version: `pods.v1`, `widgets.v1.example.com`.
fn resource_label(resource: &Resource) -> String {
    if resource.group.is_empty() {
        format!("{}.{}", resource.plural, resource.version)
    } else {
        format!(
            "{}.{}.{}",
            resource.plural, resource.version, resource.group
        )
    }
}

/// What the factory needs of an informer whose object type it has forgotten.
trait AnyInformer: HasSynced {
    fn start(&self, runtime: &tokio::runtime::Handle, cancel: CancellationToken) -> JoinHandle<()>;
    fn as_any(&self) -> &dyn Any;
}

impl<K> AnyInformer for SharedIndexInformer<K, HttpListerWatcher<K>>
where
    K: Object + Decode,
{
    fn start(&self, runtime: &tokio::runtime::Handle, cancel: CancellationToken) -> JoinHandle<()> {
        let informer = self.clone();
        runtime.spawn(async move { informer.run(cancel).await })
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct Entry {
    informer: Arc<dyn AnyInformer>,
    task: Option<JoinHandle<()>>,
}

/// Where the factory's client comes from.
// One per factory, so the size difference of the variants costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
enum Connection {
    /// Not built yet: built from this configuration on first use.
    Config(ClusterConfig),
    Client(Client),
}

struct State {
    /// Keyed by the resource's path and the Rust type, so the same resource as two types (say
    /// `CompactObject` and `DynamicObject`) gets two informers.
    informers: BTreeMap<(String, &'static str), Entry>,
    /// The one client every informer of this factory lists and watches through: one connection
    /// pool, one credential cache (an exec plugin runs once, not once per informer), one rate
    /// limiter. Built from the configuration with the first informer.
    connection: Connection,
    shutting_down: bool,
}

/// Creates informers that share one list+watch per resource and object type, with factory-wide
/// namespace, label and field selectors, and default and per-resource resync periods. Every
/// informer of a factory goes through one [`Client`]: one connection pool, one credential cache,
/// one rate limiter.
///
/// ```no_run
/// # async fn demo(config: reflector::ClusterConfig) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use shared_informer::SharedInformerFactory;
/// use shared_informer::reflector::Resource;
/// use shared_informer::reflector::store_index::CompactObject;
/// use shared_informer::CancellationToken;
///
/// let factory = SharedInformerFactory::new(config).default_resync(Duration::from_secs(600));
/// let pods = factory.informer::<CompactObject>(Resource::namespaced("", "v1", "pods"))?;
/// let same = factory.informer::<CompactObject>(Resource::namespaced("", "v1", "pods"))?;
/// // One informer, not two: both handles reach the very same cache.
/// assert!(std::ptr::eq(pods.indexer(), same.indexer()));
/// let cancel = CancellationToken::new();
/// factory.start(&cancel);
/// let report = factory.wait_for_cache_sync(Duration::from_secs(30)).await;
/// assert!(report.all_synced(), "{report}");
/// cancel.cancel();
/// factory.shutdown().await;
/// # Ok(()) }
/// ```
pub struct SharedInformerFactory {
    namespace: Option<String>,
    label_selector: Option<Selector>,
    field_selector: Option<String>,
    shard_selector: Option<ShardSelector>,
    default_resync: Duration,
    resync_overrides: HashMap<String, Duration>,
    reflector: ReflectorOptions,
    queue: InformerQueue,
    pacing: Option<Pacing>,
    informer_name: Option<InformerName>,
    encoding: Encoding,
    drop_managed_fields: bool,
    /// The key functions given per object type, each a `KeyFn<K>` under `K`'s `TypeId`.
    key_fns: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
    state: Mutex<State>,
}

impl SharedInformerFactory {
    /// A factory for the cluster `config` points at, watching all namespaces.
    pub fn new(config: ClusterConfig) -> Self {
        Self::with_connection(Connection::Config(config))
    }

    /// A factory whose informers use `client`: share it with the code that writes to the same
    /// cluster.
    pub fn with_client(client: Client) -> Self {
        Self::with_connection(Connection::Client(client))
    }

    fn with_connection(connection: Connection) -> Self {
        SharedInformerFactory {
            namespace: None,
            label_selector: None,
            field_selector: None,
            shard_selector: None,
            default_resync: Duration::ZERO,
            resync_overrides: HashMap::new(),
            reflector: ReflectorOptions::default(),
            queue: InformerQueue::default(),
            pacing: Some(Pacing::default()),
            informer_name: None,
            encoding: Encoding::Auto,
            drop_managed_fields: false,
            key_fns: HashMap::new(),
            state: Mutex::new(State {
                informers: BTreeMap::new(),
                connection,
                shutting_down: false,
            }),
        }
    }

    /// The client every informer of this factory uses, built from the configuration on first
    /// use.
    pub fn client(&self) -> Result<Client, ConfigError> {
        Self::client_in(&mut self.state.lock())
    }

    fn client_in(state: &mut State) -> Result<Client, ConfigError> {
        let client = match &state.connection {
            Connection::Client(client) => return Ok(client.clone()),
            Connection::Config(config) => Client::new(config)?,
        };
        state.connection = Connection::Client(client.clone());
        Ok(client)
    }

    /// Watch one namespace only.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Apply this label selector to every list and watch (see
    /// [`HttpListerWatcher::label_selector`]).
    pub fn label_selector(mut self, selector: Selector) -> Self {
        self.label_selector = Some(selector);
        self
    }

    /// Apply this field selector to every list and watch.
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Apply this shard selector to every list and watch: each informer's cache holds only the
    /// objects whose uid (or namespace) hashes into its ranges, whether or not the server
    /// applies it (see [`HttpListerWatcher::shard_selector`]), metadata informers included.
    pub fn shard_selector(mut self, selector: ShardSelector) -> Self {
        self.shard_selector = Some(selector);
        self
    }

    /// Default resync period of the informers (zero: never).
    pub fn default_resync(mut self, period: Duration) -> Self {
        self.default_resync = period;
        self
    }

    /// Resync period for one resource (by its plural, e.g. `pods`), overriding the default.
    pub fn resync_for(mut self, plural: impl Into<String>, period: Duration) -> Self {
        self.resync_overrides.insert(plural.into(), period);
        self
    }

    /// Options for every informer's reflector (page size, watch-list mode, backoff).
    pub fn reflector_options(mut self, options: ReflectorOptions) -> Self {
        self.reflector = options;
        self
    }

    /// How far every informer reads ahead of its cache and handlers (default: paced; `None` for
    /// client-go's unbounded buffers; see [`Pacing`]).
    pub fn pacing(mut self, pacing: Option<Pacing>) -> Self {
        self.pacing = pacing;
        self
    }

    /// Names every informer of this factory under `name` (client-go's `WithInformerName`): each
    /// gets `name.with_resource(…)` for its resource (`pods.v1`, `widgets.v1.example.com`), so
    /// its logs and stats read `name/pods (Type)`, and only the first informer of each resource
    /// under that name is reserved for publishing metrics (D13.4).
    ///
    /// ```
    /// # fn demo(config: shared_informer::reflector::ClusterConfig) -> Result<(), Box<dyn std::error::Error>> {
    /// use shared_informer::{InformerName, SharedInformerFactory};
    /// let factory = SharedInformerFactory::new(config)
    ///     .informer_name(InformerName::reserve("my-controller")?);
    /// # Ok(()) }
    /// ```
    pub fn informer_name(mut self, name: InformerName) -> Self {
        self.informer_name = Some(name);
        self
    }

    /// The wire encoding every informer's lists and watches ask for (default
    /// [`Encoding::Auto`]: protobuf for typed protobuf objects, JSON otherwise). With
    /// [`Encoding::Protobuf`], `CompactObject` informers of built-in kinds hold protobuf too
    /// (read their metadata, or decode them with `decode_pb`), and `k8s_openapi` informers read
    /// it into their types (reflector feature `protobuf-json`; half the bytes, more client CPU);
    /// custom resources stay JSON, as the server answers them. See `docs/protobuf.md`.
    ///
    /// ```
    /// # fn demo(config: shared_informer::reflector::ClusterConfig) {
    /// use shared_informer::reflector::Encoding;
    /// use shared_informer::SharedInformerFactory;
    /// let factory = SharedInformerFactory::new(config).encoding(Encoding::Protobuf);
    /// # let _ = factory; }
    /// ```
    pub fn encoding(mut self, encoding: Encoding) -> Self {
        self.encoding = encoding;
        self
    }

    /// No informer of this factory caches or hands out `metadata.managedFields`: every list and
    /// watch asks the server to leave them out, and every object drops what the server sends
    /// anyway as soon as it is decoded (see
    /// [`HttpListerWatcher::drop_managed_fields`]), as controller-runtime users strip them with a
    /// transform. For every object type of the crates (`k8s_openapi` types, `DynamicObject`,
    /// `PartialObjectMetadata`, `CompactObject`, `Pb<T>`, `PbView<T>`); a type of your own drops
    /// them by implementing [`Object::drop_managed_fields`]. A cache of typed `Pod`s of the
    /// benchmarks' shape is 13% lighter without them (docs/performance.md, *Memory per cached
    /// object*).
    ///
    /// ```
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use shared_informer::reflector::store_index::{DynamicObject, Object};
    /// use shared_informer::reflector::{ClusterConfig, Resource};
    /// use shared_informer::{CancellationToken, SharedInformerFactory};
    ///
    /// let server = sim_apiserver::SimServer::start().await?;
    /// server.create(
    ///     "configmaps",
    ///     Some("default"),
    ///     serde_json::json!({
    ///         "metadata": {"name": "c",
    ///                      "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
    ///         "data": {"k": "v"}
    ///     }),
    /// )?;
    /// let factory = SharedInformerFactory::new(ClusterConfig::new(&server.url())?).drop_managed_fields();
    /// let configmaps = factory.dynamic(Resource::namespaced("", "v1", "configmaps"))?;
    /// let cancel = CancellationToken::new();
    /// factory.start(&cancel);
    /// factory.wait_for_cache_sync(Duration::from_secs(10)).await;
    /// let cached = configmaps.lister().namespaced("default").get("c").expect("cached");
    /// assert_eq!(cached.metadata.managed_fields, None);
    /// assert_eq!(cached.data["data"]["k"], "v");
    /// cancel.cancel();
    /// factory.shutdown().await;
    /// # Ok(()) }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(demo()).unwrap();
    /// ```
    pub fn drop_managed_fields(mut self) -> Self {
        self.drop_managed_fields = true;
        self
    }

    /// The key function of every informer of objects of type `K` (see
    /// [`InformerOptions::key_fn`]); informers of other types keep `namespace/name`, and an
    /// informer created before keeps its own.
    ///
    /// ```
    /// # fn demo(config: shared_informer::reflector::ClusterConfig) {
    /// use std::sync::Arc;
    /// use shared_informer::SharedInformerFactory;
    /// use shared_informer::reflector::store_index::{CompactObject, KeyError, KeyFn, Object, ObjectKey};
    ///
    /// // Pods filed by UID, so a pod deleted and created again under its name is another key.
    /// let by_uid: KeyFn<CompactObject> = Arc::new(|pod: &CompactObject| {
    ///     pod.uid().map(ObjectKey::from).ok_or_else(|| KeyError::Custom("no uid".into()))
    /// });
    /// let factory = SharedInformerFactory::new(config).key_fn(by_uid);
    /// # let _ = factory; }
    /// ```
    pub fn key_fn<K: Object>(mut self, key_fn: KeyFn<K>) -> Self {
        self.key_fns.insert(TypeId::of::<K>(), Box::new(key_fn));
        self
    }

    /// The key function given for `K`, else `namespace/name`.
    fn key_fn_of<K: Object>(&self) -> KeyFn<K> {
        self.key_fns
            .get(&TypeId::of::<K>())
            .and_then(|f| f.downcast_ref::<KeyFn<K>>())
            .cloned()
            .unwrap_or_else(|| Arc::new(|obj: &K| meta_namespace_key(obj)))
    }

    /// The queue every informer runs on (default: in order; see [`InformerQueue`]).
    pub fn queue(mut self, queue: InformerQueue) -> Self {
        self.queue = queue;
        self
    }

    /// The informer for `resource` as `K`, created on first request; the same instance afterwards.
    /// It has the namespace index (D13.3).
    pub fn informer<K>(&self, resource: Resource) -> Result<SharedIndexInformer<K>, ConfigError>
    where
        K: Object + Decode,
    {
        let key = (resource.path(None), std::any::type_name::<K>());
        let mut state = self.state.lock();
        if let Some(entry) = state.informers.get(&key) {
            if let Some(informer) = entry
                .informer
                .as_any()
                .downcast_ref::<SharedIndexInformer<K>>()
            {
                return Ok(informer.clone());
            }
        }
        let client = Self::client_in(&mut state)?;
        // The reflector's counters, shared with the lister-watcher, which counts the bytes.
        let metrics = Arc::<ReflectorMetrics>::default();
        let mut lw = HttpListerWatcher::<K>::with_client(client, resource.clone())
            .count_bytes_into(Arc::clone(&metrics))
            .encoding(self.encoding)
            .drop_managed_fields(self.drop_managed_fields);
        if let Some(ns) = &self.namespace {
            lw = lw.namespace(ns.clone());
        }
        if let Some(l) = &self.label_selector {
            lw = lw.label_selector(l.clone());
        }
        if let Some(f) = &self.field_selector {
            lw = lw.field_selector(f.clone());
        }
        if let Some(shard) = &self.shard_selector {
            lw = lw.shard_selector(shard.clone());
        }
        let plural = resource.plural.clone();
        let resync = self
            .resync_overrides
            .get(&plural)
            .copied()
            .unwrap_or(self.default_resync);
        let informer = SharedIndexInformer::with_reflector_metrics(
            lw,
            InformerOptions {
                name: plural,
                key_fn: self.key_fn_of::<K>(),
                resync_period: resync,
                indexers: Indexers::new().with_namespace_index(),
                reflector: self.reflector.clone(),
                queue: self.queue,
                pacing: self.pacing,
                informer_name: self
                    .informer_name
                    .as_ref()
                    .map(|n| n.with_resource(&resource_label(&resource))),
            },
            metrics,
        );
        state.informers.insert(
            key,
            Entry {
                informer: Arc::new(informer.clone()),
                task: None,
            },
        );
        Ok(informer)
    }

    /// The informer of a resource known only at run time, holding `DynamicObject`s.
    pub fn dynamic(
        &self,
        resource: Resource,
    ) -> Result<SharedIndexInformer<DynamicObject>, ConfigError> {
        self.informer::<DynamicObject>(resource)
    }

    /// The metadata-only informer of `resource` (client-go's `metadatainformer`, D14): it lists
    /// and watches the `PartialObjectMetadata` representation, so neither the network nor its
    /// cache carries the objects' spec and status, only their type meta and metadata (names,
    /// labels, annotations, owner references, resource versions). A server that does not know
    /// that representation answers with whole objects, of which only the metadata is kept. It is
    /// an informer of its own, beside any full informer of the same resource; its lister and
    /// handlers work as any informer's.
    ///
    /// ```no_run
    /// # async fn demo(config: reflector::ClusterConfig) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use shared_informer::SharedInformerFactory;
    /// use shared_informer::reflector::Resource;
    /// use shared_informer::reflector::store_index::{Object, Selector};
    /// use shared_informer::CancellationToken;
    ///
    /// let factory = SharedInformerFactory::new(config);
    /// let pods = factory.metadata_informer(Resource::namespaced("", "v1", "pods"))?;
    /// let cancel = CancellationToken::new();
    /// factory.start(&cancel);
    /// factory.wait_for_cache_sync(Duration::from_secs(30)).await;
    /// for pod in pods.lister().namespaced("default").list(&"app=web".parse::<Selector>()?) {
    ///     let owners = pod.metadata.owner_references.as_deref().unwrap_or_default();
    ///     println!("{} owned by {:?}", pod.name(), owners.iter().map(|o| &o.name).collect::<Vec<_>>());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn metadata_informer(
        &self,
        resource: Resource,
    ) -> Result<SharedIndexInformer<PartialObjectMetadata>, ConfigError> {
        self.informer::<PartialObjectMetadata>(resource)
    }

    /// Starts every informer created and not yet started (safe to call again after creating more),
    /// on the current tokio runtime. Does nothing after [`shutdown`](Self::shutdown).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as `tokio::spawn` does; [`start_on`](Self::start_on) names one.
    pub fn start(&self, cancel: &CancellationToken) {
        self.start_on(&tokio::runtime::Handle::current(), cancel);
    }

    /// [`start`](Self::start), running the informers on `runtime`: their reading, decoding,
    /// handlers and everything they spawn. On an [`InformerThread`](crate::InformerThread)'s
    /// runtime each event is read, decoded and handled on that one thread, with one thread
    /// wake-up per event (what that changes, and when to choose it: [`crate::threading`]).
    ///
    /// ```no_run
    /// # async fn demo(config: reflector::ClusterConfig) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use shared_informer::{InformerThread, SharedInformerFactory};
    /// use shared_informer::reflector::Resource;
    /// use shared_informer::reflector::store_index::CompactObject;
    /// use shared_informer::CancellationToken;
    ///
    /// let factory = SharedInformerFactory::new(config);
    /// let pods = factory.informer::<CompactObject>(Resource::namespaced("", "v1", "pods"))?;
    /// let thread = InformerThread::spawn("informers")?;
    /// let cancel = CancellationToken::new();
    /// factory.start_on(thread.handle(), &cancel);
    /// factory.wait_for_cache_sync(Duration::from_secs(30)).await;
    /// println!("{} pods", pods.indexer().len());
    /// cancel.cancel();
    /// factory.shutdown().await;
    /// drop(thread);
    /// # Ok(()) }
    /// ```
    pub fn start_on(&self, runtime: &tokio::runtime::Handle, cancel: &CancellationToken) {
        let mut state = self.state.lock();
        if state.shutting_down {
            return;
        }
        for entry in state.informers.values_mut() {
            if entry.task.is_none() {
                entry.task = Some(entry.informer.start(runtime, cancel.clone()));
            }
        }
    }

    /// Waits until every informer started so far has synced (or stopped without syncing), or
    /// `timeout`, with [`wait_for_cache_sync`](crate::wait_for_cache_sync); the report names each
    /// started resource `path as type`.
    ///
    /// Unlike client-go's `WaitForCacheSync`, which polls every 100 ms, this waits on each
    /// informer's own synced signal, so it returns the moment the last one syncs.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> SyncReport {
        let started: Vec<(String, Arc<dyn AnyInformer>)> = self
            .state
            .lock()
            .informers
            .iter()
            .filter(|(_, e)| e.task.is_some())
            .map(|((path, ty), e)| (format!("{path} as {ty}"), Arc::clone(&e.informer)))
            .collect();
        wait_for_cache_sync(
            timeout,
            started
                .iter()
                .map(|(name, informer)| (name.as_str(), informer.as_ref() as &dyn HasSynced)),
        )
        .await
    }

    /// Marks the factory shutting down and waits for every started informer to stop. Cancel the
    /// token given to [`start`](Self::start) first.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the informers go on stopping if the future is dropped, but a later call no
    /// longer waits for those it had begun waiting for.
    pub async fn shutdown(&self) {
        let tasks: Vec<JoinHandle<()>> = {
            let mut state = self.state.lock();
            state.shutting_down = true;
            state
                .informers
                .values_mut()
                .filter_map(|e| e.task.take())
                .collect()
        };
        for task in tasks {
            let _ = task.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;

    use tokio::sync::watch;
    use tokio::time::Instant;

    use super::*;

    /// An informer whose sync the test decides.
    struct Scripted {
        synced: watch::Sender<Option<bool>>,
    }

    impl AnyInformer for Scripted {
        fn start(
            &self,
            runtime: &tokio::runtime::Handle,
            _cancel: CancellationToken,
        ) -> JoinHandle<()> {
            runtime.spawn(async {})
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    impl HasSynced for Scripted {
        fn has_synced(&self) -> bool {
            *self.synced.borrow() == Some(true)
        }
        fn wait_for_sync(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
            let mut rx = self.synced.subscribe();
            Box::pin(async move {
                rx.wait_for(Option::is_some)
                    .await
                    .is_ok_and(|s| *s == Some(true))
            })
        }
    }

    /// A factory holding started scripted informers, and their senders.
    fn factory_with(n: usize) -> (SharedInformerFactory, Vec<watch::Sender<Option<bool>>>) {
        let factory =
            SharedInformerFactory::new(ClusterConfig::new("http://127.0.0.1:9").expect("config"));
        let mut senders = Vec::new();
        for i in 0..n {
            let (synced, _) = watch::channel(None);
            senders.push(synced.clone());
            let informer: Arc<dyn AnyInformer> = Arc::new(Scripted { synced });
            let task =
                Some(informer.start(&tokio::runtime::Handle::current(), CancellationToken::new()));
            factory.state.lock().informers.insert(
                (format!("/api/v1/things{i}"), "Scripted"),
                Entry { informer, task },
            );
        }
        (factory, senders)
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_cache_sync_returns_when_the_last_informer_syncs_not_at_a_poll_tick() {
        let (factory, senders) = factory_with(2);
        let start = Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            senders[0].send_replace(Some(true));
            tokio::time::sleep(Duration::from_millis(220)).await;
            senders[1].send_replace(Some(true));
        });
        let report = factory.wait_for_cache_sync(Duration::from_secs(60)).await;
        assert_eq!(start.elapsed(), Duration::from_millis(250));
        assert_eq!(report.len(), 2);
        assert!(report.all_synced(), "{report}");
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_cache_sync_reports_a_stopped_or_slow_informer_as_not_synced() {
        let (factory, senders) = factory_with(3);
        let start = Instant::now();
        senders[0].send_replace(Some(true));
        // Stopped before syncing: no reason to wait for it.
        senders[1].send_replace(Some(false));
        // senders[2] never syncs: the timeout ends the wait.
        let report = factory.wait_for_cache_sync(Duration::from_secs(5)).await;
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        let synced: Vec<bool> = report.iter().map(|(_, s)| s).collect();
        assert_eq!(synced, [true, false, false]);
        assert_eq!(
            report.not_synced(),
            ["/api/v1/things1 as Scripted", "/api/v1/things2 as Scripted"]
        );
    }

    /// Every informer of a factory, metadata informers included, runs on the factory's queue, on
    /// each of the queues the informer tests run on.
    #[tokio::test]
    async fn every_informer_of_a_factory_runs_on_the_factory_queue() {
        let config = ClusterConfig::new("http://127.0.0.1:9").expect("config");
        let pods = Resource::namespaced("", "v1", "pods");
        let default = SharedInformerFactory::new(config.clone());
        assert_eq!(
            default
                .informer::<DynamicObject>(pods.clone())
                .unwrap()
                .queue(),
            InformerQueue::InOrder(crate::InOrder::default())
        );
        let queues = [
            InformerQueue::InOrder(crate::InOrder::default()),
            InformerQueue::InOrder(crate::InOrder {
                batch_size: 1,
                atomic: false,
                unlock_while_processing: false,
            }),
            InformerQueue::DeltaFifo,
        ];
        for queue in queues {
            let factory = SharedInformerFactory::new(config.clone()).queue(queue);
            let full = factory.informer::<DynamicObject>(pods.clone()).unwrap();
            let metadata = factory.metadata_informer(pods.clone()).unwrap();
            assert_eq!((full.queue(), metadata.queue()), (queue, queue));
        }
    }

    /// A key function given for one object type keys that type's informers, caches and queues
    /// alike; other types keep `namespace/name`.
    #[tokio::test]
    async fn a_key_function_given_for_a_type_keys_that_types_informers() {
        use reflector::store_index::{KeyError, ObjectKey};
        let config = ClusterConfig::new("http://127.0.0.1:9").expect("config");
        let pods = Resource::namespaced("", "v1", "pods");
        let by_uid: KeyFn<DynamicObject> = Arc::new(|o: &DynamicObject| {
            o.uid()
                .map(ObjectKey::from)
                .ok_or_else(|| KeyError::Custom("no uid".into()))
        });
        let factory = SharedInformerFactory::new(config).key_fn(by_uid);
        let mut pod = DynamicObject::new("v1", "Pod").within("ns").named("p");
        pod.metadata.uid = Some("u-1".into());
        let dynamic = factory.informer::<DynamicObject>(pods.clone()).unwrap();
        assert_eq!(dynamic.indexer().key_of(&pod).unwrap().as_str(), "u-1");
        let metadata = factory.metadata_informer(pods).unwrap();
        let partial: PartialObjectMetadata =
            serde_json::from_str(r#"{"metadata":{"name":"p","namespace":"ns","uid":"u-1"}}"#)
                .unwrap();
        assert_eq!(
            metadata.indexer().key_of(&partial).unwrap().as_str(),
            "ns/p"
        );
    }

    /// A named factory labels each informer with the name and its resource; only the first
    /// informer of a resource under the name is reserved for metrics, and releasing the name
    /// un-reserves them all.
    #[test]
    fn a_named_factory_names_its_informers_and_reserves_each_resource_once() {
        let config = ClusterConfig::new("http://127.0.0.1:9").expect("config");
        let registry = crate::InformerNameRegistry::new();
        let name = registry.reserve("test-controller").unwrap();
        let factory = SharedInformerFactory::new(config).informer_name(name.clone());
        let pods = factory
            .informer::<DynamicObject>(Resource::namespaced("", "v1", "pods"))
            .unwrap();
        let widgets = factory
            .informer::<DynamicObject>(Resource::namespaced("example.com", "v1", "widgets"))
            .unwrap();
        // The same resource as another type: a second informer of pods under the name.
        let pod_metadata = factory
            .metadata_informer(Resource::namespaced("", "v1", "pods"))
            .unwrap();
        assert_eq!(
            pods.id().to_string(),
            "test-controller/pods (DynamicObject)"
        );
        let named = |i: &crate::InformerId| {
            let n = i.informer_name().expect("named");
            (
                n.name().to_string(),
                n.resource().to_string(),
                n.is_reserved(),
            )
        };
        assert_eq!(
            named(pods.id()),
            ("test-controller".into(), "pods.v1".into(), true)
        );
        assert_eq!(
            named(widgets.id()),
            (
                "test-controller".into(),
                "widgets.v1.example.com".into(),
                true
            )
        );
        assert!(!named(pod_metadata.id()).2, "pods again: not reserved");
        assert_eq!(
            pods.stats().informer.informer_name(),
            pods.id().informer_name()
        );
        name.release();
        assert!(!named(pods.id()).2 && !named(widgets.id()).2);
        assert!(!registry.is_reserved("test-controller"));
        // An unnamed factory's informers carry no name.
        let unnamed = SharedInformerFactory::new(ClusterConfig::new("http://127.0.0.1:9").unwrap());
        let pods = unnamed
            .informer::<DynamicObject>(Resource::namespaced("", "v1", "pods"))
            .unwrap();
        assert!(pods.id().informer_name().is_none());
        assert_eq!(pods.id().to_string(), "pods (DynamicObject)");
    }
}
