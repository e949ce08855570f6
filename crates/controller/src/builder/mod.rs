//! The controller builder: a whole controller from a resource, a reconcile function and an
//! error policy, with leader election or sharding one call away.
//!
//! [`ControllerBuilder`] assembles what a controller otherwise wires by hand: the informers (the
//! primary resource's, metadata-only ones for the resources it [`owns`](ControllerBuilder::owns),
//! those it [`watches`](ControllerBuilder::watches)), their handlers into one rate-limited
//! queue, the workers, an event recorder writing Events, and, when asked, a leader lease or a
//! shard ring with its elected sharder. Its rules (BD1–BD7 in docs/semantics.md):
//!
//! - BD1: the reconcile is called with the cached object of a key, never for a key whose object
//!   is gone (deletion is handled by a [`finalizer`](crate::finalizer())), never for one key in
//!   two workers at once, and with at most [`workers`](ControllerBuilder::workers) reconciles at
//!   once (4 unless set);
//! - BD2: `Ok(action)` is applied as the runner applies it ([`Action`]); an `Err` goes to the
//!   error policy, whose action is applied instead (`Action::Retry`: the queue's backoff); a
//!   panic, or a reconcile that outlives the [reconcile timeout](ControllerBuilder::reconcile_timeout),
//!   is retried with backoff and never takes a worker down;
//! - BD3: adds of the primary resource always enqueue; its updates enqueue only when every
//!   [predicate] accepts them; a child's events enqueue its controlling owner, a
//!   watched object's its mapper's keys;
//! - BD4: every write through the [`Context`] is fenced in every mode (see [`context`]);
//! - BD5: on shutdown (SIGTERM, ctrl-c, or the [token](ControllerBuilder::shutdown_on)) no new
//!   key is taken, the reconciles in flight get the [shutdown timeout](ControllerBuilder::shutdown_timeout)
//!   to finish, then the leases are released (leader, shard and sharder leases), the pending
//!   events are written, and the informers stop; [`run`](ControllerBuilder::run) returns `Ok`;
//! - BD6: with leader election, the workers run only while this replica leads; a lost lease ends
//!   [`run`](ControllerBuilder::run) with [`BuilderError::LeadershipLost`] (exit and restart, as
//!   client-go's and controller-runtime's controllers do);
//! - BD7: the controller reads its own writes: a write of a primary object through the
//!   [`Context`] records the version the server answered ([`ConsistencyStore`]), and until the
//!   cache has shown it the key is requeued after a short delay instead of reconciled on the
//!   older copy (bounded: after the store's wait, 10 s, it is reconciled anyway).
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use controller::prelude::*;
//! use serde_json::json;
//!
//! async fn reconcile(widget: Arc<DynamicObject>, ctx: Context<DynamicObject, ()>) -> Result<Action, FenceError> {
//!     ctx.patch_status(&widget, &json!({"status": {"ready": true}})).await?;
//!     Ok(Action::Done)
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::new(&ClusterConfig::from_kubeconfig(None)?)?;
//! ControllerBuilder::new(client, Resource::namespaced("example.com", "v1", "widgets"), "Widget")
//!     .leader_election("widget-controller")
//!     .run(reconcile, |_widget, _error, _ctx| Action::RequeueAfter(Duration::from_secs(5)), ())
//!     .await?;
//! # Ok(()) }
//! ```

pub mod context;
pub mod predicate;
mod run;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{DynamicObject, Object};
use workqueue::shared_informer::reflector::{Client, ConfigError, Decode, Resource};
use workqueue::shared_informer::InformerError;

pub use context::Context;
pub use predicate::Predicate;

use crate::consistency::ConsistencyStore;
use crate::leader_election::{LeaderElectionConfig, LeaderElectionConfigError};
use crate::runner::Action;

/// Maps a watched object to the keys (`namespace/name`, or `name` for a cluster-scoped primary)
/// of the primary objects to reconcile.
pub(crate) type Mapper = Arc<dyn Fn(&DynamicObject) -> Vec<String> + Send + Sync>;

/// How the replicas of a controller share the work.
#[derive(Debug, Clone)]
enum Mode {
    /// Every replica reconciles (one replica, or work that tolerates concurrent replicas).
    Alone,
    /// One replica at a time, elected on a Lease.
    Leader(LeaderElection),
    /// Each replica reconciles its share, assigned over a ring of shard Leases.
    Sharded(String),
}

#[derive(Debug, Clone)]
enum LeaderElection {
    /// The Lease's name; the identity is the builder's.
    Named(String),
    /// A whole configuration (its own name and identity).
    Config(Box<LeaderElectionConfig>),
}

/// Why [`ControllerBuilder::run`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuilderError {
    /// An informer could not be created (for example no client could be built).
    #[error("cannot create an informer: {0}")]
    Config(#[from] ConfigError),
    /// A handler could not be registered on an informer.
    #[error("cannot register a handler: {0}")]
    Informer(#[from] InformerError),
    /// The caches did not sync within the sync timeout (the report names the informers).
    #[error("the caches did not sync in time: {0}")]
    CacheSync(String),
    /// The leader election (or the shard ring) configuration is invalid.
    #[error("invalid lease configuration: {0}")]
    LeaderElection(#[from] LeaderElectionConfigError),
    /// The ring's name does not make a valid label selector.
    #[error("invalid ring name: {0}")]
    Ring(String),
    /// This replica led and lost its lease: exit, so that a fresh process competes again.
    #[error("leadership was lost")]
    LeadershipLost,
}

/// A controller of one primary resource. See the [module documentation](self).
#[must_use = "a builder does nothing until `run` is awaited"]
pub struct ControllerBuilder<K> {
    client: Client,
    resource: Resource,
    kind: String,
    name: String,
    namespace: Option<String>,
    lease_namespace: Option<String>,
    identity: Option<String>,
    owns: Vec<Resource>,
    watches: Vec<(Resource, Mapper)>,
    predicates: Vec<Predicate<K>>,
    workers: usize,
    reconcile_timeout: Option<Duration>,
    shutdown_timeout: Duration,
    sync_timeout: Duration,
    mode: Mode,
    shutdown: CancellationToken,
    signals: bool,
    consistency: Arc<ConsistencyStore>,
    #[cfg(feature = "metrics")]
    observed: Observed,
}

/// What the builder records into (feature `metrics`).
#[cfg(feature = "metrics")]
#[derive(Clone, Default)]
pub(crate) struct Observed {
    pub(crate) reconciles: Option<crate::metrics::ControllerMetrics>,
    pub(crate) queue: Option<Arc<workqueue::PrometheusMetricsProvider>>,
    pub(crate) health: Option<crate::metrics::Health>,
}

impl<K> fmt::Debug for ControllerBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerBuilder")
            .field("resource", &self.resource)
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .field("owns", &self.owns)
            .field("watches", &self.watches.len())
            .field("predicates", &self.predicates.len())
            .field("workers", &self.workers)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// The workers of a builder unless [`ControllerBuilder::workers`] says otherwise.
pub const DEFAULT_WORKERS: usize = 4;
/// How long reconciles in flight may run on after shutdown begins, unless set.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the caches may take to sync, unless set (controller-runtime's default).
pub const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(120);

impl<K: Object + Decode> ControllerBuilder<K> {
    /// A controller of `resource`, whose objects are of `kind` (`Widget`: the kind owner
    /// references and events name), read and written through `client`. Its name (field manager,
    /// events' component) is the lowercase kind followed by `-controller`; it watches every
    /// namespace, runs alone (no lease), with [`DEFAULT_WORKERS`] workers.
    pub fn new(client: Client, resource: Resource, kind: impl Into<String>) -> Self {
        let kind = kind.into();
        Self {
            client,
            resource,
            name: format!("{}-controller", kind.to_lowercase()),
            kind,
            namespace: None,
            lease_namespace: None,
            identity: None,
            owns: Vec::new(),
            watches: Vec::new(),
            predicates: Vec::new(),
            workers: DEFAULT_WORKERS,
            reconcile_timeout: None,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            sync_timeout: DEFAULT_SYNC_TIMEOUT,
            mode: Mode::Alone,
            shutdown: CancellationToken::new(),
            signals: true,
            consistency: Arc::new(ConsistencyStore::new()),
            #[cfg(feature = "metrics")]
            observed: Observed::default(),
        }
    }

    /// The controller's name: its field manager and its events' reporting component.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Watch (and reconcile) one namespace only; its Leases live there too.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// The namespace of the leader, shard and sharder Leases (by default the watched namespace,
    /// or `default` when watching all).
    pub fn lease_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.lease_namespace = Some(namespace.into());
        self
    }

    /// This replica's identity in leases (by default `$POD_NAME`, else the host name, followed
    /// by the process id so that two processes on one host never share it).
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// Children in `resource` enqueue their controlling owner of this controller's kind (rule
    /// OW). They are cached as metadata only; sharded, they follow their owner's assignment.
    pub fn owns(mut self, resource: Resource) -> Self {
        self.owns.push(resource);
        self
    }

    /// Objects of `resource` enqueue the keys `mapper` gives for them (on add, update and
    /// delete).
    pub fn watches<I>(
        mut self,
        resource: Resource,
        mapper: impl Fn(&DynamicObject) -> I + Send + Sync + 'static,
    ) -> Self
    where
        I: IntoIterator<Item = String>,
    {
        let mapper: Mapper = Arc::new(move |obj| mapper(obj).into_iter().collect());
        self.watches.push((resource, mapper));
        self
    }

    /// Updates of the primary resource enqueue only when `predicate` (and every other one
    /// given) accepts them (see [`predicate`]).
    pub fn with_predicate(mut self, predicate: Predicate<K>) -> Self {
        self.predicates.push(predicate);
        self
    }

    /// At most `workers` reconciles at once (at least 1).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// A reconcile running longer is abandoned (its future dropped) and its key retried with
    /// backoff.
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.reconcile_timeout = Some(timeout);
        self
    }

    /// How long the reconciles in flight may run on once shutdown begins (BD5).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// How long the caches may take to sync before [`run`](Self::run) gives up.
    pub fn sync_timeout(mut self, timeout: Duration) -> Self {
        self.sync_timeout = timeout;
        self
    }

    /// Shut down when `token` fires, besides SIGTERM and ctrl-c.
    pub fn shutdown_on(mut self, token: CancellationToken) -> Self {
        self.shutdown = token;
        self
    }

    /// Do not listen to SIGTERM and ctrl-c (a test, or a program that handles them itself and
    /// uses [`shutdown_on`](Self::shutdown_on)).
    pub fn without_signal_handlers(mut self) -> Self {
        self.signals = false;
        self
    }

    /// The store of this controller's own writes (BD7), given to read its counters
    /// (`stale_sync_skips`, `gave_up`) or to change its bounds; by default a fresh
    /// [`ConsistencyStore::new`].
    pub fn consistency(mut self, store: Arc<ConsistencyStore>) -> Self {
        self.consistency = store;
        self
    }

    /// Records the reconciles under controller-runtime's names (`controller_runtime_reconcile_*`
    /// with `controller` = this controller's name; the leader status as
    /// `leader_election_master_status`) and the queue under client-go's (`workqueue_*` with
    /// `name` = this controller's name). Feature `metrics`; serve the registry they were
    /// registered in with [`crate::metrics::serve`].
    #[cfg(feature = "metrics")]
    pub fn metrics(
        mut self,
        reconciles: crate::metrics::ControllerMetrics,
        queue: Arc<workqueue::PrometheusMetricsProvider>,
    ) -> Self {
        self.observed.reconciles = Some(reconciles);
        self.observed.queue = Some(queue);
        self
    }

    /// Adds this controller's readiness to `health` (`/readyz`): ready once every cache of the
    /// controller has synced. Feature `metrics`.
    #[cfg(feature = "metrics")]
    pub fn health(mut self, health: crate::metrics::Health) -> Self {
        self.observed.health = Some(health);
        self
    }

    /// Run only while this replica holds the Lease `lease_name` (client-go's timings: 15 s
    /// lease, 10 s renew deadline, 2 s retry period).
    pub fn leader_election(mut self, lease_name: impl Into<String>) -> Self {
        self.mode = Mode::Leader(LeaderElection::Named(lease_name.into()));
        self
    }

    /// [`leader_election`](Self::leader_election) with a configuration of your own (its name is
    /// the Lease's, its identity this replica's).
    pub fn leader_election_config(mut self, config: LeaderElectionConfig) -> Self {
        self.mode = Mode::Leader(LeaderElection::Config(Box::new(config)));
        self
    }

    /// Share the objects with the other replicas of the ring `ring` (see
    /// [`sharding`](crate::sharding)): this replica holds a shard Lease, caches and reconciles
    /// only the objects (and children) labelled for it, and competes to be the ring's sharder,
    /// which assigns them.
    pub fn sharded(mut self, ring: impl Into<String>) -> Self {
        self.mode = Mode::Sharded(ring.into());
        self
    }

    /// Runs the controller until shutdown (BD5) or a lost leadership (BD6): `reconcile(object,
    /// context)` for each key whose object is cached; `error_policy(object, error, context)`
    /// for each `Err` it returns. `state` is shared by every reconcile through the [`Context`].
    ///
    /// # Errors
    ///
    /// When an informer or a lease cannot be set up, the caches do not sync in time, or
    /// leadership is lost.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future abandons the reconciles in flight and releases no
    /// lease (they run out on their own). Shut down with [`shutdown_on`](Self::shutdown_on)'s
    /// token or a signal.
    pub async fn run<S, R, RFut, E, P>(
        self,
        reconcile: R,
        error_policy: P,
        state: S,
    ) -> Result<(), BuilderError>
    where
        K: Send + Sync + 'static,
        S: Send + Sync + 'static,
        R: Fn(Arc<K>, Context<K, S>) -> RFut + Send + Sync + 'static,
        RFut: Future<Output = Result<Action, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
        P: Fn(Arc<K>, &E, &Context<K, S>) -> Action + Send + Sync + 'static,
    {
        run::run(self, reconcile, error_policy, state).await
    }
}
