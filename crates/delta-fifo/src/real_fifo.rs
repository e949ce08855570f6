//! [`RealFifo`]: the in-order queue, every change kept in arrival order (client-go's `RealFIFO`,
//! contract B15), in its two modes: tombstones computed at relist time from the known objects
//! (B15.2), or atomic entries for whole relists and resyncs (B15.3); with batched pops (B15.5).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use store_index::{
    meta_namespace_key, BoxError, DeletedFinalStateUnknown, KeyFn, KeyListerGetter, Object,
    ObjectKey, ObjectOrTombstone, ResourceVersion,
};

use crate::core::{Locked, QueueCore};
use crate::delta::{Delta, DeltaType, Deltas};
use crate::error::FifoError;
use crate::options::{KnownObjects, Transformer};
use crate::process::{finish, ProcessError};
use crate::queue::{Popped, Queue};
use crate::store::Store;

/// The most deltas one batched pop hands out by default (client-go's `defaultBatchSize`).
pub const DEFAULT_BATCH_SIZE: usize = 1000;

/// Below this many queued entries, an atomic queue with
/// [`Atomic::unlock_while_processing`] releases its lock while the consumer processes; above
/// it, the producer waits, which keeps a fast producer from running away from a slow consumer.
pub const UNLOCK_WHILE_PROCESSING_MAX_DEPTH: usize = 2000;

/// A process call slower than this, with more than [`SLOW_DEPTH`] entries still queued, is logged.
const SLOW_PROCESS: Duration = Duration::from_millis(100);
const SLOW_DEPTH: usize = 10;

/// The atomic mode of a [`RealFifo`] (client-go's `AtomicFIFO`): a relist is one
/// [`Popped::ReplacedAll`] entry and a resync one [`Popped::SyncAll`], so that the consumer can
/// apply a relist to its store at once and no reader ever sees a half-replaced cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Atomic {
    /// Queue a [`Popped::Bookmark`] for every resource version the reflector reports (watch
    /// events' and bookmarks'), so that the consumer learns which one its store has reached.
    pub emit_bookmarks: bool,
    /// Release the queue's lock while the consumer processes an entry, when fewer than
    /// [`UNLOCK_WHILE_PROCESSING_MAX_DEPTH`] entries are queued (client-go's
    /// `UnlockWhileProcessingFIFO`): the reflector keeps queueing meanwhile. Safe only in atomic
    /// mode, where nothing the queue does depends on the consumer's store.
    ///
    /// Invariant **R2:** unlocking changes when a producer may queue, never what is popped: a
    /// change queued while an entry is processed goes behind everything queued, each key's
    /// changes pop in the order they were queued, every change pops once, and the pops are those
    /// of the same operations with the lock held (checked against the model by
    /// `proptest_atomic_real_fifo_matches_its_model`, and with concurrent producers by
    /// `tests/concurrency.rs`).
    pub unlock_while_processing: bool,
}

enum Mode<K> {
    /// Non-atomic (B15.2): a relist queues tombstones worked out against these known objects.
    Tombstones(KnownObjects<K>),
    Atomic(Atomic),
}

/// Options of a [`RealFifo`]. Its two constructors are its two modes, so that the combinations
/// client-go rejects at run time (atomic with known objects, non-atomic without, bookmarks or
/// unlocking without atomic) cannot be written.
///
/// ```
/// use delta_fifo::{Atomic, RealFifo, RealFifoOptions};
/// use delta_fifo::store_index::{DynamicObject, Indexer};
///
/// let indexer: Indexer<DynamicObject> = Indexer::default();
/// let tombstones = RealFifo::new(RealFifoOptions::new(indexer.clone()).name("pods"));
/// let atomic = RealFifo::<DynamicObject>::new(RealFifoOptions::atomic(Atomic {
///     emit_bookmarks: true,
///     unlock_while_processing: true,
/// }));
/// assert!(tombstones.is_empty() && atomic.is_empty());
/// ```
pub struct RealFifoOptions<K> {
    key_fn: KeyFn<K>,
    transformer: Option<Transformer<K>>,
    name: String,
    mode: Mode<K>,
}

impl<K: Object> RealFifoOptions<K> {
    /// Non-atomic mode (B15.2): a relist queues a tombstone for every key that `known_objects`
    /// (the consumer's store) or the queue holds and the list does not, then a `Replaced` delta
    /// per listed object.
    pub fn new(known_objects: impl KeyListerGetter<K> + 'static) -> Self {
        Self::with_mode(Mode::Tombstones(Arc::new(known_objects)))
    }

    /// Atomic mode (B15.3): see [`Atomic`].
    pub fn atomic(atomic: Atomic) -> Self {
        Self::with_mode(Mode::Atomic(atomic))
    }

    fn with_mode(mode: Mode<K>) -> Self {
        RealFifoOptions {
            key_fn: Arc::new(|obj: &K| meta_namespace_key(obj)),
            transformer: None,
            name: "RealFIFO".into(),
            mode,
        }
    }

    crate::options::common_setters!();
}

/// One queued entry.
enum Entry<K> {
    Delta(ObjectKey, Delta<K>),
    ReplacedAll {
        resource_version: ResourceVersion,
        objects: Vec<Arc<K>>,
    },
    SyncAll,
    Bookmark(ResourceVersion),
}

/// What one pop took off the queue: deltas of distinct keys (their keys kept apart, so that the
/// deltas can be handed out as one slice without copying), or one atomic entry.
enum Taken<K> {
    Deltas(Vec<ObjectKey>, Deltas<K>),
    Atomic(Entry<K>),
}

impl<K> Taken<K> {
    fn len(&self) -> usize {
        match self {
            Taken::Deltas(keys, _) => keys.len(),
            Taken::Atomic(_) => 1,
        }
    }

    /// Back into queue entries (for a requeue).
    fn into_entries(self) -> Vec<Entry<K>> {
        match self {
            Taken::Deltas(keys, deltas) => keys
                .into_iter()
                .zip(deltas.0)
                .map(|(k, d)| Entry::Delta(k, d))
                .collect(),
            Taken::Atomic(entry) => vec![entry],
        }
    }
}

/// The queue's entries.
///
/// Invariant **R1:** `queued[k]` is the number of `Entry::Delta` entries of `queue` with key `k`,
/// and `k` is absent when that number is zero.
struct Items<K> {
    queue: VecDeque<Entry<K>>,
    queued: HashMap<ObjectKey, usize>,
}

impl<K> Items<K> {
    fn push(&mut self, entry: Entry<K>) {
        if let Entry::Delta(key, _) = &entry {
            *self.queued.entry(key.clone()).or_default() += 1;
        }
        self.queue.push_back(entry);
    }

    fn forget(&mut self, entry: &Entry<K>) {
        if let Entry::Delta(key, _) = entry {
            if let Some(n) = self.queued.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    self.queued.remove(key);
                }
            }
        }
    }

    fn pop_front(&mut self) -> Option<Entry<K>> {
        let entry = self.queue.pop_front()?;
        self.forget(&entry);
        Some(entry)
    }
}

/// A queue that keeps every change as its own delta, in arrival order: no per-key merging, and a
/// delete is always queued. Each pop hands out one entry, or with
/// [`pop_batch`](Self::pop_batch) up to a number of deltas of distinct keys.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use delta_fifo::{Popped, ProcessError, RealFifo, RealFifoOptions};
/// use delta_fifo::store_index::{DynamicObject, Indexer, Object};
///
/// let known: Indexer<DynamicObject> = Indexer::default();
/// let fifo = RealFifo::new(RealFifoOptions::new(known));
/// let pod = |name: &str| Arc::new(DynamicObject::new("v1", "Pod").named(name));
/// fifo.add(pod("a")).unwrap();
/// fifo.add(pod("b")).unwrap();
/// fifo.update(pod("a")).unwrap();
/// let mut order = Vec::new();
/// for _ in 0..3 {
///     let name = fifo
///         .pop(|popped, _| match popped {
///             Popped::Deltas(d) => Ok::<_, ProcessError>(d.newest().unwrap().object().unwrap().name().to_string()),
///             _ => unreachable!("a non-atomic queue holds deltas only"),
///         })
///         .await
///         .unwrap();
///     order.extend(name);
/// }
/// assert_eq!(order, ["a", "b", "a"]);
/// # });
/// ```
pub struct RealFifo<K> {
    core: Arc<QueueCore<K, Items<K>>>,
    mode: Arc<Mode<K>>,
}

impl<K> Clone for RealFifo<K> {
    fn clone(&self) -> Self {
        RealFifo {
            core: Arc::clone(&self.core),
            mode: Arc::clone(&self.mode),
        }
    }
}

impl<K: Object> RealFifo<K> {
    /// An empty queue.
    pub fn new(options: RealFifoOptions<K>) -> Self {
        let items = Items {
            queue: VecDeque::new(),
            queued: HashMap::new(),
        };
        RealFifo {
            core: Arc::new(QueueCore::new(
                options.key_fn,
                options.transformer,
                options.name,
                items,
            )),
            mode: Arc::new(options.mode),
        }
    }

    /// Whether this queue is in atomic mode.
    pub fn is_atomic(&self) -> bool {
        matches!(*self.mode, Mode::Atomic(_))
    }

    /// The queue's name (for logs).
    pub fn name(&self) -> &str {
        self.core.name()
    }

    /// The key of an object (the key function's) or of a tombstone (its own).
    pub fn key_of(&self, obj: &ObjectOrTombstone<K>) -> Result<ObjectKey, FifoError> {
        self.core.key_of(obj)
    }

    fn enqueue(
        &self,
        locked: &mut Locked<Items<K>>,
        kind: DeltaType,
        object: ObjectOrTombstone<K>,
        transform: bool,
    ) -> Result<(), FifoError> {
        let key = self.core.key_of(&object)?;
        let object = self.core.prepare(object, transform)?;
        locked.items.push(Entry::Delta(key, Delta { kind, object }));
        self.core.wake();
        Ok(())
    }

    fn change(&self, kind: DeltaType, object: ObjectOrTombstone<K>) -> Result<(), FifoError> {
        let mut locked = self.core.lock();
        locked.populated = true;
        self.enqueue(&mut locked, kind, object, true)?;
        self.core.signal_if_synced(&locked);
        Ok(())
    }

    /// Queues an `Added` delta.
    pub fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.change(DeltaType::Added, obj.into())
    }

    /// Queues an `Updated` delta.
    pub fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.change(DeltaType::Updated, obj.into())
    }

    /// Queues a `Deleted` delta, always (no existence check).
    pub fn delete(&self, obj: impl Into<ObjectOrTombstone<K>>) -> Result<(), FifoError> {
        self.change(DeltaType::Deleted, obj.into())
    }

    /// A relist. Atomic mode (B15.3): one `ReplacedAll` entry holding the transformed list.
    /// Otherwise (B15.2): tombstones for queued keys missing from the list (one per key, in order
    /// of first appearance, from the key's last queued delta, unless that is already a deletion),
    /// then tombstones for known keys neither listed nor queued, then one `Replaced` delta per
    /// listed object in list order. Either way the list's resource version becomes
    /// [`last_sync_resource_version`](Self::last_sync_resource_version).
    pub fn replace(
        &self,
        list: Vec<Arc<K>>,
        resource_version: impl Into<ResourceVersion>,
    ) -> Result<(), FifoError> {
        let resource_version = resource_version.into();
        let mut listed: HashSet<ObjectKey> = HashSet::with_capacity(list.len());
        for obj in &list {
            listed.insert(self.core.object_key(obj)?);
        }
        let mut locked = self.core.lock();
        match &*self.mode {
            Mode::Atomic(_) => {
                let objects = list
                    .into_iter()
                    .map(|o| self.core.transform(o))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| FifoError::Enqueue(Box::new(e)))?;
                locked.items.push(Entry::ReplacedAll {
                    resource_version: resource_version.clone(),
                    objects,
                });
                self.core.wake();
            }
            Mode::Tombstones(known) => {
                self.queue_relist_deletions(&mut locked, known, &listed)?;
                for obj in list {
                    self.enqueue(&mut locked, DeltaType::Replaced, obj.into(), true)
                        .map_err(|e| FifoError::Enqueue(Box::new(e)))?;
                }
            }
        }
        if !locked.populated {
            locked.populated = true;
            locked.initial_population_count = locked.items.queue.len();
        }
        self.core.signal_if_synced(&locked);
        drop(locked);
        self.core.set_last_sync_resource_version(&resource_version);
        Ok(())
    }

    /// B15.2's deletions: queued keys first, then known ones.
    fn queue_relist_deletions(
        &self,
        locked: &mut Locked<Items<K>>,
        known: &KnownObjects<K>,
        listed: &HashSet<ObjectKey>,
    ) -> Result<(), FifoError> {
        let mut last: HashMap<&ObjectKey, &Delta<K>> = HashMap::new();
        let mut first_seen: Vec<&ObjectKey> = Vec::new();
        for entry in &locked.items.queue {
            if let Entry::Delta(key, delta) = entry {
                if last.insert(key, delta).is_none() {
                    first_seen.push(key);
                }
            }
        }
        let queued_deletions: Vec<(ObjectKey, ObjectOrTombstone<K>)> = first_seen
            .into_iter()
            .filter(|key| !listed.contains(*key))
            .filter_map(|key| {
                let delta = last.get(key)?;
                (delta.kind != DeltaType::Deleted).then(|| (key.clone(), delta.object.clone()))
            })
            .collect();
        for (key, newest) in queued_deletions {
            let tombstone = newest.into_tombstone(key);
            self.enqueue(locked, DeltaType::Deleted, tombstone.into(), false)?;
        }
        for key in known.list_keys() {
            if listed.contains(&key) || locked.items.queued.contains_key(&key) {
                continue;
            }
            let obj = match known.get_by_key(key.as_str()) {
                Ok(obj) => obj,
                Err(error) => {
                    tracing::warn!(fifo = %self.core.name(), %key, %error, "known object lookup failed during replace; queueing an empty tombstone");
                    None
                }
            };
            let tombstone = DeletedFinalStateUnknown { key, obj };
            self.enqueue(locked, DeltaType::Deleted, tombstone.into(), false)?;
        }
        Ok(())
    }

    /// A periodic resync. Atomic mode: one `SyncAll` entry (the consumer resyncs what it holds).
    /// Otherwise: a `Sync` delta for every known object whose key has nothing queued.
    pub fn resync(&self) -> Result<(), FifoError> {
        let mut locked = self.core.lock();
        match &*self.mode {
            Mode::Atomic(_) => {
                locked.items.push(Entry::SyncAll);
                self.core.wake();
            }
            Mode::Tombstones(known) => {
                for key in known.list_keys() {
                    if locked.items.queued.contains_key(&key) {
                        continue;
                    }
                    match known.get_by_key(key.as_str()) {
                        Ok(Some(obj)) => {
                            self.enqueue(&mut locked, DeltaType::Sync, obj.into(), false)?
                        }
                        Ok(None) => {}
                        Err(error) => {
                            tracing::warn!(fifo = %self.core.name(), %key, %error, "resync: lookup failed")
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The reflector reached `resource_version`: recorded as
    /// [`last_sync_resource_version`](Self::last_sync_resource_version), and queued as a
    /// `Bookmark` entry when the atomic mode emits bookmarks.
    pub fn bookmark(&self, resource_version: impl Into<ResourceVersion>) {
        let resource_version = resource_version.into();
        self.core.set_last_sync_resource_version(&resource_version);
        if self.emits_bookmarks() {
            self.push_bookmark(resource_version);
        }
    }

    /// Whether reaching a resource version queues a `Bookmark` entry.
    fn emits_bookmarks(&self) -> bool {
        matches!(
            &*self.mode,
            Mode::Atomic(Atomic {
                emit_bookmarks: true,
                ..
            })
        )
    }

    fn push_bookmark(&self, resource_version: ResourceVersion) {
        let mut locked = self.core.lock();
        locked.items.push(Entry::Bookmark(resource_version));
        self.core.wake();
    }

    /// The resource version the reflector feeding this queue last synced to: its last list's,
    /// then each watch event's and bookmark's; `""` before the first list.
    pub fn last_sync_resource_version(&self) -> ResourceVersion {
        self.core.last_sync_resource_version()
    }

    /// Waits for the next entry and runs `process` on it: a one-delta [`Popped::Deltas`], or an
    /// atomic entry. See [`pop_batch`](Self::pop_batch).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an entry is taken, and `process` run on it, only in the poll that returns; a
    /// future dropped while waiting takes nothing.
    pub async fn pop<R, F>(&self, process: F) -> Result<Option<R>, FifoError>
    where
        F: FnOnce(Popped<'_, K>, bool) -> Result<R, ProcessError>,
    {
        self.pop_batch(1, process).await
    }

    /// Waits for the next entry and runs `process` on it, with up to `max_batch` deltas of
    /// distinct keys taken together as one [`Popped::Batch`] (B15.5). A batch ends before a key
    /// already in it, before an atomic entry (which is popped alone when it comes first), and at
    /// the end of the initial population; a batch of one is handed out as
    /// [`Popped::Deltas`].
    ///
    /// `process` runs under the queue's lock (so the consumer's store update is atomic with the
    /// pop), except in atomic mode with `unlock_while_processing` and a short queue. The initial
    /// population count drops **after** `process` returns (B15.4). A requeue puts the entries back
    /// at the end, except deltas whose key was queued again meanwhile. Outcomes as in
    /// [`DeltaFifo::pop`](crate::DeltaFifo::pop).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: entries are taken, and `process` run on them, only in the poll that returns; a
    /// future dropped while waiting takes nothing.
    pub async fn pop_batch<R, F>(
        &self,
        max_batch: usize,
        process: F,
    ) -> Result<Option<R>, FifoError>
    where
        F: FnOnce(Popped<'_, K>, bool) -> Result<R, ProcessError>,
    {
        let unlock = matches!(
            &*self.mode,
            Mode::Atomic(Atomic {
                unlock_while_processing: true,
                ..
            })
        );
        let mut process = Some(process);
        let taken = self
            .core
            .pop_with(|locked| {
                let is_in_initial_list = !locked.has_synced();
                let Some(taken) = Self::take(locked, max_batch.max(1)) else {
                    return locked.closed.then_some(Err(FifoError::Closed));
                };
                let depth = locked.items.queue.len();
                if unlock && depth < UNLOCK_WHILE_PROCESSING_MAX_DEPTH {
                    return Some(Ok((taken, is_in_initial_list, None)));
                }
                let Some(process) = process.take() else {
                    unreachable!("process is taken once, right before returning");
                };
                let result = self.run(process, &taken, is_in_initial_list, depth);
                Some(Ok((taken, is_in_initial_list, Some(result))))
            })
            .await;
        let (taken, is_in_initial_list, result) = match taken {
            Ok(t) => t,
            Err(e) => return Err(e),
        };
        let result = match result {
            Some(r) => r,
            None => {
                let Some(process) = process.take() else {
                    unreachable!("process runs either under the lock or here");
                };
                self.run(process, &taken, is_in_initial_list, 0)
            }
        };
        let mut locked = self.core.lock();
        locked.count_processed(taken.len());
        let outcome = finish(result, || {
            for entry in taken.into_entries() {
                let requeued_meanwhile =
                    matches!(&entry, Entry::Delta(key, _) if locked.items.queued.contains_key(key));
                if !requeued_meanwhile {
                    locked.items.push(entry);
                }
            }
            self.core.wake();
        });
        self.core.signal_if_synced(&locked);
        outcome
    }

    /// Takes the next entry, or a batch of deltas of distinct keys (B15.5), off the queue; `None`
    /// when it is empty.
    fn take(locked: &mut Locked<Items<K>>, max_batch: usize) -> Option<Taken<K>> {
        let mut limit = max_batch;
        if locked.initial_population_count > 0 {
            limit = limit.min(locked.initial_population_count);
        }
        if !matches!(locked.items.queue.front()?, Entry::Delta(..)) {
            // An atomic entry goes alone.
            return locked.items.pop_front().map(Taken::Atomic);
        }
        let mut keys: Vec<ObjectKey> = Vec::with_capacity(limit.min(locked.items.queue.len()));
        let mut deltas = Vec::with_capacity(keys.capacity());
        // Distinct keys: a set only once the batch is long enough for scanning to cost more.
        let mut seen: HashSet<ObjectKey> = HashSet::new();
        while keys.len() < limit {
            let fits = match locked.items.queue.front() {
                Some(Entry::Delta(key, _)) => {
                    if keys.len() < 8 {
                        !keys.contains(key)
                    } else {
                        if seen.is_empty() {
                            seen.extend(keys.iter().cloned());
                        }
                        !seen.contains(key)
                    }
                }
                _ => false,
            };
            if !fits {
                break;
            }
            let Some(Entry::Delta(key, delta)) = locked.items.pop_front() else {
                break;
            };
            if !seen.is_empty() {
                seen.insert(key.clone());
            }
            keys.push(key);
            deltas.push(delta);
        }
        Some(Taken::Deltas(keys, Deltas(deltas)))
    }

    /// Hands `taken` to `process` in the right [`Popped`] shape, logging a slow call on a deep
    /// queue.
    fn run<R>(
        &self,
        process: impl FnOnce(Popped<'_, K>, bool) -> Result<R, ProcessError>,
        taken: &Taken<K>,
        is_in_initial_list: bool,
        depth: usize,
    ) -> Result<R, ProcessError> {
        let started = Instant::now();
        let result = match taken {
            Taken::Deltas(_, deltas) if deltas.len() == 1 => {
                process(Popped::Deltas(deltas), is_in_initial_list)
            }
            Taken::Deltas(_, deltas) => process(Popped::Batch(&deltas.0), is_in_initial_list),
            Taken::Atomic(Entry::ReplacedAll {
                resource_version,
                objects,
            }) => process(
                Popped::ReplacedAll {
                    objects,
                    resource_version,
                },
                is_in_initial_list,
            ),
            Taken::Atomic(Entry::SyncAll) => process(Popped::SyncAll, is_in_initial_list),
            Taken::Atomic(Entry::Bookmark(rv)) => process(Popped::Bookmark(rv), is_in_initial_list),
            Taken::Atomic(Entry::Delta(_, delta)) => {
                // `take` never makes this; handled for completeness.
                let deltas = Deltas(vec![delta.clone()]);
                process(Popped::Deltas(&deltas), is_in_initial_list)
            }
        };
        let took = started.elapsed();
        if took > SLOW_PROCESS.saturating_mul(taken.len().min(10) as u32) && depth > SLOW_DEPTH {
            tracing::warn!(fifo = %self.core.name(), ?took, depth, batch = taken.len(), "slow process function while the queue is deep");
        }
        result
    }

    crate::core::core_accessors!();

    /// Number of queued entries.
    pub fn len(&self) -> usize {
        self.core.lock().items.queue.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The queued deltas, in queue order (atomic entries are not deltas and are left out).
    pub fn list(&self) -> Vec<Delta<K>> {
        let locked = self.core.lock();
        locked
            .items
            .queue
            .iter()
            .filter_map(|e| match e {
                Entry::Delta(_, d) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }

    /// The keys that have deltas queued, each once, in order of first appearance.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        let locked = self.core.lock();
        let mut seen = HashSet::new();
        locked
            .items
            .queue
            .iter()
            .filter_map(|e| match e {
                Entry::Delta(k, _) if seen.insert(k) => Some(k.clone()),
                _ => None,
            })
            .collect()
    }

    /// The deltas queued under `key`, oldest first (`None` when it has none).
    pub fn get_by_key(&self, key: &str) -> Option<Deltas<K>> {
        let locked = self.core.lock();
        if !locked.items.queued.contains_key(key) {
            return None;
        }
        let deltas: Vec<Delta<K>> = locked
            .items
            .queue
            .iter()
            .filter_map(|e| match e {
                Entry::Delta(k, d) if k.as_str() == key => Some(d.clone()),
                _ => None,
            })
            .collect();
        Some(Deltas(deltas))
    }

    /// The deltas queued under `obj`'s key.
    pub fn get(&self, obj: &ObjectOrTombstone<K>) -> Result<Option<Deltas<K>>, FifoError> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(key.as_str()))
    }
}

impl<K: Object> Store<K> for RealFifo<K> {
    fn key(&self, obj: &K) -> Result<ObjectKey, FifoError> {
        self.core.object_key(obj)
    }
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        RealFifo::add(self, obj)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        RealFifo::update(self, obj)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        RealFifo::delete(self, obj)
    }
    fn replace(
        &self,
        list: Vec<Arc<K>>,
        resource_version: &ResourceVersion,
    ) -> Result<(), FifoError> {
        RealFifo::replace(self, list, resource_version)
    }
    fn resync(&self) -> Result<(), FifoError> {
        RealFifo::resync(self)
    }
    fn transform(&self, obj: Arc<K>) -> Result<Arc<K>, FifoError> {
        self.core.transform(obj)
    }
    fn update_resource_version(&self, resource_version: &ResourceVersion) {
        // As `bookmark`, with a copy only for the entry: a reflector calls this on every event.
        self.core.set_last_sync_resource_version(resource_version);
        if self.emits_bookmarks() {
            self.push_bookmark(resource_version.clone());
        }
    }
}

impl<K: Object> Queue<K> for RealFifo<K> {
    async fn pop_entry<R, F>(&self, max_batch: usize, process: F) -> Result<Option<R>, FifoError>
    where
        F: FnOnce(Popped<'_, K>, bool) -> Result<R, ProcessError> + Send,
        R: Send,
    {
        self.pop_batch(max_batch, process).await
    }
    fn has_synced(&self) -> bool {
        RealFifo::has_synced(self)
    }
    async fn wait_for_sync(&self) -> bool {
        RealFifo::wait_for_sync(self).await
    }
    fn close(&self) {
        RealFifo::close(self)
    }
    fn is_closed(&self) -> bool {
        RealFifo::is_closed(self)
    }
    fn len(&self) -> usize {
        RealFifo::len(self)
    }
    fn last_sync_resource_version(&self) -> ResourceVersion {
        RealFifo::last_sync_resource_version(self)
    }
}

#[cfg(test)]
mod tests {
    use store_index::DynamicObject;

    use super::*;

    fn unlocking() -> RealFifo<DynamicObject> {
        RealFifo::new(RealFifoOptions::atomic(Atomic {
            emit_bookmarks: false,
            unlock_while_processing: true,
        }))
    }

    fn fill(fifo: &RealFifo<DynamicObject>, n: usize) {
        for i in 0..n {
            let pod = DynamicObject::new("v1", "Pod").named(format!("p{i}"));
            fifo.add(Arc::new(pod)).unwrap();
        }
    }

    /// Whether the queue's lock was held while `process` ran, for one pop of up to `batch`.
    async fn locked_while_processing(fifo: &RealFifo<DynamicObject>, batch: usize) -> bool {
        fifo.pop_batch(batch, |_, _| Ok::<_, ProcessError>(fifo.core.is_locked()))
            .await
            .unwrap()
            .unwrap()
    }

    /// B15.3: the lock is released while processing only when fewer than
    /// `UNLOCK_WHILE_PROCESSING_MAX_DEPTH` entries are left queued after the pop; a deeper queue
    /// processes under the lock, so the producer waits and cannot run further ahead.
    #[tokio::test]
    async fn unlocking_while_processing_stops_at_the_depth_threshold() {
        let fifo = unlocking();
        fill(&fifo, UNLOCK_WHILE_PROCESSING_MAX_DEPTH + 1);
        // 2000 left after the pop: not fewer than the threshold.
        assert!(locked_while_processing(&fifo, 1).await);
        assert_eq!(fifo.len(), UNLOCK_WHILE_PROCESSING_MAX_DEPTH);
        // 1999 left: unlocked.
        assert!(!locked_while_processing(&fifo, 1).await);
        // The depth counts what is left after the whole batch is taken.
        fill(&fifo, 1000);
        assert_eq!(fifo.len(), 2999);
        assert!(locked_while_processing(&fifo, 999).await);
        assert!(!locked_while_processing(&fifo, 1).await);
        // Without unlock_while_processing, or in the non-atomic mode, always under the lock.
        let held = RealFifo::new(RealFifoOptions::atomic(Atomic::default()));
        fill(&held, 1);
        assert!(locked_while_processing(&held, 1).await);
        let tombstones = RealFifo::new(RealFifoOptions::new(store_index::Indexer::default()));
        fill(&tombstones, 1);
        assert!(locked_while_processing(&tombstones, 1).await);
    }
}
