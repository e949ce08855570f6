//! The replica's side of the hand-over: before a key is reconciled, its cached object is checked
//! to be this replica's, and a drain mark is acknowledged instead of reconciling.
//!
//! ```text
//!   informer (selector shard.sharding.informer-rs.io/<ring>=<me>) ──KeyEnqueuer──► queue
//!   ShardedController worker: ShardGate::admit(key)
//!       not cached / not labelled me ─► skip        drain label ─► ack: remove both labels
//!       mine ─► reconcile(object, FencedWriter)                     (fenced merge patch)
//! ```
//!
//! Rules (SH17–SH18 in docs/semantics.md):
//! - SH17: the acknowledgement of a drain runs as a step of the key in the work queue, so it
//!   waits for a reconcile of that key in flight to finish (the queue's one-worker-per-key
//!   rule), and it is the replica's last write to the object: it removes the assignment and
//!   drain labels with the seen resourceVersion as precondition; afterwards the object is no
//!   longer labelled for this replica, its cache drops it, and any write computed earlier is
//!   refused (SH8, SH9).
//! - SH18: a key is reconciled only when the cached object is labelled for this replica and not
//!   draining; otherwise the reconcile function is not called. A key refused because the
//!   replica's shard lease is not held is tried again after [`LAPSED_RETRY`] with its failures
//!   forgotten, so that it does not wait out an exponential backoff once the lease is back.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{Object, ReadOnlyIndexer};
use workqueue::shared_informer::reflector::{Api, Decode};
use workqueue::RateLimitingQueue;

use crate::runner::{Action, Controller};

use super::fence::{FenceError, FencedWriter};
use super::ring::{Ring, RingLeases};
use super::sharder::drain_label;

/// How long a key refused because this replica's shard lease is not held waits before it is
/// tried again (SH18).
pub const LAPSED_RETRY: Duration = Duration::from_secs(1);

/// How long a [`ShardedController`] may find its shard lease not held before it says so as an
/// error (once per lapse): a lease that never comes is a replica whose `Ring::run` is not
/// running, or cannot join, and reconciles nothing.
pub const LAPSE_WARNING: Duration = Duration::from_secs(30);

/// Since when keys have been refused for a lapsed lease, and whether that was said.
#[derive(Debug, Default)]
struct Lapse {
    since: Option<tokio::time::Instant>,
    reported: bool,
}

impl Lapse {
    fn held(&mut self) {
        *self = Lapse::default();
    }

    fn refused(&mut self, identity: &str) {
        let now = tokio::time::Instant::now();
        let since = *self.since.get_or_insert(now);
        if !self.reported && now.duration_since(since) >= LAPSE_WARNING {
            self.reported = true;
            tracing::error!(
                %identity,
                lapsed_for = ?now.duration_since(since),
                "the shard lease has not been held for this long: no key is reconciled (is the \
                 ring's `run` running, with this replica's lock?)"
            );
        }
    }
}

/// What [`ShardGate::admit`] decided for a key.
#[derive(Debug)]
#[non_exhaustive]
pub enum Admission<K> {
    /// The object is this replica's and not draining: reconcile it.
    Reconcile(Arc<K>),
    /// It was draining: the acknowledgement was written; do nothing more with it.
    Drained,
    /// It is cached but not labelled for this replica (a stale copy): skip it.
    NotOurs,
    /// It is not in the cache (deleted, or no longer this replica's).
    Gone,
}

/// The check a sharded replica runs before each reconcile (SH17, SH18).
pub struct ShardGate<K> {
    writer: FencedWriter<K>,
    cache: ReadOnlyIndexer<K>,
    drain: String,
}

impl<K> Clone for ShardGate<K> {
    fn clone(&self) -> Self {
        Self {
            writer: self.writer.clone(),
            cache: self.cache.clone(),
            drain: self.drain.clone(),
        }
    }
}

impl<K> fmt::Debug for ShardGate<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardGate")
            .field("writer", &self.writer)
            .field("drain", &self.drain)
            .finish_non_exhaustive()
    }
}

impl<K: Object + Decode> ShardGate<K> {
    /// The gate of `writer` (which names the ring's label and the replica) for ring `ring`,
    /// reading the replica's cache `cache` (an informer with [`super::shard_selector`]).
    pub fn new(writer: FencedWriter<K>, ring: &str, cache: ReadOnlyIndexer<K>) -> Self {
        Self {
            writer,
            cache,
            drain: drain_label(ring),
        }
    }

    /// The gate of `ring`'s replica, writing through `api`.
    pub fn for_ring<S: RingLeases>(api: Api<K>, ring: &Ring<S>, cache: ReadOnlyIndexer<K>) -> Self {
        Self::new(FencedWriter::for_ring(api, ring), ring.name(), cache)
    }

    /// The fenced writer reconciles write with.
    pub fn writer(&self) -> &FencedWriter<K> {
        &self.writer
    }

    /// Decides what to do with `key` from its cached object, acknowledging a drain (SH17,
    /// SH18). A conflict on the acknowledgement ([`FenceError::Fenced`]) means the object
    /// changed: retry the key on a fresher copy.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: at most one write, the acknowledgement of a drain, fenced by the version seen.
    /// Dropped, it may or may not have landed; the next admission reads the cache again.
    pub async fn admit(&self, key: &str) -> Result<Admission<K>, FenceError> {
        let Some(obj) = self.cache.get_by_key(key) else {
            return Ok(Admission::Gone);
        };
        match self.writer.check(&*obj) {
            Ok(_) => {}
            Err(FenceError::NotAssigned { .. }) => return Ok(Admission::NotOurs),
            Err(other) => return Err(other),
        }
        if obj.label(&self.drain).is_none() {
            return Ok(Admission::Reconcile(obj));
        }
        let ack = json!({"metadata": {"labels": {self.writer.label(): null, &self.drain: null}}});
        self.writer.merge_patch(&obj, &ack).await?;
        tracing::info!(key, "drain acknowledged: the object is handed over");
        Ok(Admission::Drained)
    }
}

/// Why a key of a [`ShardedController`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ShardedError<E> {
    /// The gate's check or acknowledgement failed.
    Fence(FenceError),
    /// The reconcile function failed.
    Reconcile(E),
}

impl<E: fmt::Display> fmt::Display for ShardedError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardedError::Fence(error) => write!(f, "shard gate: {error}"),
            ShardedError::Reconcile(error) => write!(f, "{error}"),
        }
    }
}

/// The [`Controller`] runner with a [`ShardGate`] before each reconcile: a sharded replica's
/// loop. Feed its queue with the keys of the replica's informer (`KeyEnqueuer`), whose
/// selector is [`super::shard_selector`].
pub struct ShardedController<K> {
    gate: ShardGate<K>,
    controller: Controller<String>,
}

impl<K> fmt::Debug for ShardedController<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardedController")
            .field("gate", &self.gate)
            .finish_non_exhaustive()
    }
}

impl<K: Object + Decode + Send + Sync + 'static> ShardedController<K> {
    /// Workers over `queue`, each key through `gate` first.
    pub fn new(gate: ShardGate<K>, queue: RateLimitingQueue<String>) -> Self {
        Self {
            gate,
            controller: Controller::new(queue),
        }
    }

    /// The number of workers (see [`Controller::workers`]).
    pub fn workers(mut self, workers: usize) -> Self {
        self.controller = self.controller.workers(workers);
        self
    }

    /// Records each reconcile into `metrics` (see [`Controller::metrics`]; feature `metrics`).
    #[cfg(feature = "metrics")]
    pub fn metrics(mut self, metrics: crate::metrics::ReconcileMetrics) -> Self {
        self.controller = self.controller.metrics(metrics);
        self
    }

    /// Runs until `cancel` fires (see [`Controller::run`]): `reconcile(object, writer)` is called
    /// for keys admitted by the gate, with the cached object and the fenced writer to write it
    /// with.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future abandons the reconciles in flight wherever they are.
    /// Stop it with `cancel`, which lets each finish.
    pub async fn run<F, Fut, E>(self, cancel: CancellationToken, reconcile: F)
    where
        F: Fn(Arc<K>, FencedWriter<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        let gate = self.gate;
        let reconcile = Arc::new(reconcile);
        let lapse = Arc::new(parking_lot::Mutex::new(Lapse::default()));
        self.controller
            .run(cancel, move |key: String| {
                let (gate, reconcile, lapse) = (gate.clone(), reconcile.clone(), lapse.clone());
                async move {
                    let admission = gate.admit(&key).await;
                    match &admission {
                        Err(FenceError::LeaseNotHeld { identity }) => {
                            lapse.lock().refused(identity)
                        }
                        _ => lapse.lock().held(),
                    }
                    match admission {
                        Ok(Admission::Reconcile(obj)) => reconcile(obj, gate.writer().clone())
                            .await
                            .map_err(ShardedError::Reconcile),
                        Ok(_) => Ok(Action::Done),
                        // The replica's state, not the key's: counted as the key's failure, it
                        // would back the key off exponentially and leave it waiting long after
                        // the lease is back (SH18).
                        Err(FenceError::LeaseNotHeld { .. }) => {
                            Ok(Action::RequeueAfter(LAPSED_RETRY))
                        }
                        Err(error) => Err(ShardedError::Fence(error)),
                    }
                }
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader_election::LeaseGuard;
    use crate::sharding::shard_label;
    use std::time::Duration;
    use tokio::time::Instant;
    use workqueue::shared_informer::reflector::store_index::{DynamicObject, Indexer, Indexers};
    use workqueue::shared_informer::reflector::{Client, ClusterConfig, Resource};

    /// A gate whose requests could go nowhere: every case here is decided before sending.
    fn gate(valid: bool, objects: &[DynamicObject]) -> ShardGate<DynamicObject> {
        let guard = LeaseGuard::new();
        if valid {
            guard.extend_to(Instant::now() + Duration::from_secs(3600));
        }
        gate_with(guard, objects)
    }

    fn gate_with(guard: LeaseGuard, objects: &[DynamicObject]) -> ShardGate<DynamicObject> {
        let client = Client::new(&ClusterConfig::new("http://127.0.0.1:1").unwrap()).unwrap();
        let api = Api::namespaced_with(client, Resource::namespaced("", "v1", "configmaps"), "ns");
        let indexer = Indexer::new(Indexers::new());
        for obj in objects {
            indexer.add(Arc::new(obj.clone())).unwrap();
        }
        let writer = FencedWriter::new(api, guard, "widgets", "a");
        ShardGate::new(writer, "widgets", ReadOnlyIndexer::new(indexer))
    }

    fn widget(name: &str, to: &str) -> DynamicObject {
        DynamicObject::new("v1", "ConfigMap")
            .within("ns")
            .named(name)
            .with_label(shard_label("widgets"), to)
            .with_resource_version("7")
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_cached_object_labelled_ours_and_not_draining_is_reconciled() {
        // SH18
        let gate = gate(true, &[widget("mine", "a"), widget("theirs", "b")]);
        assert!(matches!(
            gate.admit("ns/mine").await,
            Ok(Admission::Reconcile(obj)) if obj.name() == "mine"
        ));
        assert!(matches!(
            gate.admit("ns/theirs").await,
            Ok(Admission::NotOurs)
        ));
        assert!(matches!(gate.admit("ns/gone").await, Ok(Admission::Gone)));
    }

    /// Found by the `sharding` integration scenario: while a replica's shard lease is lapsed (a
    /// partition, a freeze), every key it tries is refused by the gate; counted as failures, they
    /// backed off exponentially (client-go's limiter: up to 1000 s), so after the replica
    /// re-joined, the objects handed back to it waited out that backoff unreconciled. A lapsed
    /// lease is the replica's state, not the key's: the key is tried again after a fixed delay
    /// with its failures forgotten.
    #[tokio::test(start_paused = true)]
    async fn keys_refused_while_the_lease_is_lapsed_are_reconciled_soon_after_it_is_back() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let guard = LeaseGuard::new();
        let gate = gate_with(guard.clone(), &[widget("mine", "a")]);
        let queue = RateLimitingQueue::new(workqueue::default_controller_rate_limiter());
        queue.add("ns/mine".to_string());
        let calls = Arc::new(AtomicUsize::new(0));
        let stop = CancellationToken::new();
        let run = tokio::spawn({
            let (calls, stop, queue) = (calls.clone(), stop.clone(), queue.clone());
            async move {
                ShardedController::new(gate, queue)
                    .run(stop, move |_obj, _writer| {
                        let calls = calls.clone();
                        async move {
                            calls.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, FenceError>(Action::Done)
                        }
                    })
                    .await
            }
        });
        // Twenty seconds lapsed: with exponential backoff the key would now wait ~10 s or more.
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert_eq!(
            calls.load(Ordering::SeqCst),
            0,
            "nothing runs without the lease"
        );
        assert_eq!(
            queue.num_requeues(&"ns/mine".to_string()),
            0,
            "no failure counted"
        );
        // Not held for twenty seconds: not yet said as an error.
        let log = crate::log_capture::LogCapture::start();
        let said = |log: &crate::log_capture::LogCapture| {
            log.events()
                .iter()
                .filter(|e| e.level == tracing::Level::ERROR)
                .count()
        };
        assert_eq!(said(&log), 0);
        // Past the warning's delay: said once, however many keys are refused after.
        tokio::time::sleep(LAPSE_WARNING).await;
        assert_eq!(said(&log), 1, "{:?}", log.events());
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(said(&log), 1);
        guard.extend_to(Instant::now() + Duration::from_secs(3600));
        tokio::time::sleep(LAPSED_RETRY + Duration::from_millis(100)).await;
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "reconciled once the lease is back"
        );
        stop.cancel();
        run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn without_the_shard_lease_nothing_is_reconciled_or_acknowledged() {
        // SH8 through the gate: the key is retried, nothing sent.
        let draining = widget("w", "a").with_label(drain_label("widgets"), "a");
        let gate = gate(false, &[widget("mine", "a"), draining]);
        for key in ["ns/mine", "ns/w"] {
            assert!(
                matches!(gate.admit(key).await, Err(FenceError::LeaseNotHeld { .. })),
                "{key}"
            );
        }
    }
}
