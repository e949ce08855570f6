//! [`DeltaFifo`]: per-key deltas in first-enqueue order (client-go's `DeltaFIFO`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use store_index::{
    DeletedFinalStateUnknown, KeyError, Object, ObjectKey, ObjectOrTombstone, ResourceVersion,
};

use crate::core::{Locked, QueueCore};
use crate::delta::{Delta, DeltaType, Deltas};
use crate::error::FifoError;
use crate::options::{DeltaFifoOptions, KnownObjects};
use crate::process::{finish, ProcessError};
use crate::queue::{Popped, Queue};
use crate::store::Store;

/// A process call slower than this, with more than [`SLOW_DEPTH`] items still queued, is logged.
const SLOW_PROCESS: Duration = Duration::from_millis(100);
/// See [`SLOW_PROCESS`].
const SLOW_DEPTH: usize = 10;

/// A queue of per-key [`Deltas`], the producer/consumer hand-off between a reflector and an
/// informer's store.
///
/// Producers (`add`, `update`, `delete`, `replace`, `resync`) append deltas; a consumer pops one
/// key at a time with all of its deltas, oldest first. Keys pop in the order they were first
/// enqueued since their last pop: more deltas for a queued key never move it.
///
/// ```
/// # tokio_test_block_on(async {
/// use std::sync::Arc;
/// use delta_fifo::{DeltaFifo, DeltaFifoOptions, DeltaType};
/// use delta_fifo::store_index::DynamicObject;
///
/// let fifo = DeltaFifo::new(DeltaFifoOptions::new());
/// let pod = |rv: &str| Arc::new(DynamicObject::new("v1", "Pod").within("ns").named("p").with_resource_version(rv));
/// fifo.add(pod("1")).unwrap();
/// fifo.update(pod("2")).unwrap();
///
/// let kinds = fifo
///     .pop(|deltas, _initial| Ok(deltas.iter().map(|d| d.kind).collect::<Vec<_>>()))
///     .await
///     .unwrap();
/// assert_eq!(kinds, Some(vec![DeltaType::Added, DeltaType::Updated]));
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
pub struct DeltaFifo<K> {
    core: Arc<QueueCore<K, Items<K>>>,
    config: Arc<Config<K>>,
}

impl<K> Clone for DeltaFifo<K> {
    fn clone(&self) -> Self {
        DeltaFifo {
            core: Arc::clone(&self.core),
            config: Arc::clone(&self.config),
        }
    }
}

/// What only a `DeltaFifo` has.
struct Config<K> {
    known_objects: Option<KnownObjects<K>>,
    emit_replaced: bool,
}

/// The queue's items.
///
/// Invariants (checked by the property tests in `tests/properties.rs`):
/// - **F1:** a key is in `queue` iff it is in `items`, and `queue` holds no key twice;
/// - **F2:** every `Deltas` in `items` is non-empty, oldest first;
/// - **F3:** `has_synced()` = `populated && initial_population_count == 0`, and once true stays true
///   (the queue core's invariant HS1).
struct Items<K> {
    items: HashMap<ObjectKey, Deltas<K>>,
    queue: VecDeque<ObjectKey>,
}

type State<K> = Locked<Items<K>>;

impl<K: Object> DeltaFifo<K> {
    /// An empty queue.
    pub fn new(options: DeltaFifoOptions<K>) -> Self {
        let items = Items {
            items: HashMap::new(),
            queue: VecDeque::new(),
        };
        DeltaFifo {
            core: Arc::new(QueueCore::new(
                options.key_fn,
                options.transformer,
                options.name,
                items,
            )),
            config: Arc::new(Config {
                known_objects: options.known_objects,
                emit_replaced: options.emit_replaced,
            }),
        }
    }

    /// The queue's name (for logs).
    pub fn name(&self) -> &str {
        self.core.name()
    }

    /// The key of an object or tombstone (contract B3): a tombstone's own key, else the key
    /// function's answer.
    pub fn key_of(&self, obj: &ObjectOrTombstone<K>) -> Result<ObjectKey, FifoError> {
        self.core.key_of(obj)
    }

    fn object_key(&self, obj: &K) -> Result<ObjectKey, FifoError> {
        self.core.object_key(obj)
    }

    /// Appends an `Added` delta.
    pub fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        let mut state = self.core.lock();
        state.populated = true;
        self.queue_action(
            &mut state,
            DeltaType::Added,
            ObjectOrTombstone::Object(obj),
            true,
        )?;
        self.signal_if_synced(&state);
        Ok(())
    }

    /// Appends an `Updated` delta.
    pub fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        let mut state = self.core.lock();
        state.populated = true;
        self.queue_action(
            &mut state,
            DeltaType::Updated,
            ObjectOrTombstone::Object(obj),
            true,
        )?;
        self.signal_if_synced(&state);
        Ok(())
    }

    /// Appends a `Deleted` delta, unless the deletion is already known to have been reported
    /// (contract B5): without known objects, when the key has nothing queued; with them, when the
    /// known store says "absent" (without error) and nothing is queued.
    pub fn delete(&self, obj: impl Into<ObjectOrTombstone<K>>) -> Result<(), FifoError> {
        let obj = obj.into();
        let key = self.key_of(&obj)?;
        let mut state = self.core.lock();
        state.populated = true;
        let queued = state.items.items.contains_key(&key);
        let skip = match &self.config.known_objects {
            None => !queued,
            Some(known) => matches!(known.get_by_key(key.as_str()), Ok(None)) && !queued,
        };
        if !skip {
            self.queue_action(&mut state, DeltaType::Deleted, obj, true)?;
        }
        self.signal_if_synced(&state);
        Ok(())
    }

    /// Replaces the queue's view of the world with `list` (contract B8): a `Replaced` (or `Sync`)
    /// delta for every listed object, then a `Deleted` tombstone for every queued key and every
    /// known key missing from the list. The list's resource version becomes
    /// [`last_sync_resource_version`](Self::last_sync_resource_version) once it is queued.
    pub fn replace(
        &self,
        list: Vec<Arc<K>>,
        resource_version: impl Into<ResourceVersion>,
    ) -> Result<(), FifoError> {
        let kind = if self.config.emit_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        };
        let mut state = self.core.lock();
        let mut listed: HashSet<ObjectKey> = HashSet::with_capacity(list.len());
        for obj in list {
            let key = self.object_key(&obj)?;
            listed.insert(key);
            self.queue_action(&mut state, kind, ObjectOrTombstone::Object(obj), true)
                .map_err(|e| FifoError::Enqueue(Box::new(e)))?;
        }

        // B8.2: queued keys missing from the list get a tombstone of their newest object.
        let missing_queued: Vec<(ObjectKey, ObjectOrTombstone<K>)> = state
            .items
            .items
            .iter()
            .filter(|(key, _)| !listed.contains(*key))
            .filter_map(|(key, deltas)| Some((key.clone(), deltas.newest()?.object.clone())))
            .collect();
        let mut queued_deletions = 0;
        for (key, newest) in missing_queued {
            queued_deletions += 1;
            let tombstone = newest.into_tombstone(key);
            self.queue_action(&mut state, DeltaType::Deleted, tombstone.into(), false)?;
        }

        // B8.3: known keys neither listed nor queued get a tombstone of the known object.
        if let Some(known) = &self.config.known_objects {
            for key in known.list_keys() {
                if listed.contains(&key) || state.items.items.contains_key(&key) {
                    continue;
                }
                let obj = match known.get_by_key(key.as_str()) {
                    Ok(Some(obj)) => Some(obj),
                    Ok(None) => {
                        tracing::debug!(fifo = %self.core.name(), %key, "known key vanished during replace; queueing an empty tombstone");
                        None
                    }
                    Err(error) => {
                        tracing::warn!(fifo = %self.core.name(), %key, %error, "known object lookup failed during replace; queueing an empty tombstone");
                        None
                    }
                };
                queued_deletions += 1;
                let tombstone = DeletedFinalStateUnknown { key, obj };
                self.queue_action(&mut state, DeltaType::Deleted, tombstone.into(), false)?;
            }
        }

        if !state.populated {
            state.populated = true;
            state.initial_population_count = listed.len() + queued_deletions;
        }
        self.signal_if_synced(&state);
        drop(state);
        self.core
            .set_last_sync_resource_version(&resource_version.into());
        Ok(())
    }

    /// The resource version the reflector feeding this queue last synced to (its last list's,
    /// then each watch event's and bookmark's); `""` before the first list.
    ///
    /// ```
    /// use delta_fifo::store_index::DynamicObject;
    /// use delta_fifo::{DeltaFifo, DeltaFifoOptions, Store};
    ///
    /// let fifo = DeltaFifo::<DynamicObject>::new(DeltaFifoOptions::new());
    /// assert_eq!(fifo.last_sync_resource_version(), "");
    /// fifo.replace(Vec::new(), "10").unwrap();
    /// assert_eq!(fifo.last_sync_resource_version(), "10");
    /// fifo.update_resource_version(&"12".into()); // a later watch event or bookmark
    /// assert_eq!(fifo.last_sync_resource_version(), "12");
    /// ```
    pub fn last_sync_resource_version(&self) -> ResourceVersion {
        self.core.last_sync_resource_version()
    }

    /// Queues a `Sync` delta for every known object whose key has nothing queued (contract B9).
    /// Without known objects, does nothing.
    pub fn resync(&self) -> Result<(), FifoError> {
        let Some(known) = &self.config.known_objects else {
            return Ok(());
        };
        let mut state = self.core.lock();
        for key in known.list_keys() {
            let obj = match known.get_by_key(key.as_str()) {
                Ok(Some(obj)) => obj,
                Ok(None) => {
                    tracing::debug!(fifo = %self.core.name(), %key, "resync: known key has no object");
                    continue;
                }
                Err(error) => {
                    tracing::warn!(fifo = %self.core.name(), %key, %error, "resync: lookup failed");
                    continue;
                }
            };
            let obj_key = self.object_key(&obj)?;
            if state.items.items.contains_key(&obj_key) {
                continue;
            }
            self.queue_action(&mut state, DeltaType::Sync, obj.into(), false)?;
        }
        Ok(())
    }

    /// Queues `deltas` under their key unless that key is already queued (newer deltas win).
    /// Legacy client-go API (contract B13.2), kept by this project.
    pub fn add_if_not_present(&self, deltas: Deltas<K>) -> Result<(), FifoError> {
        let key = self.deltas_key(&deltas)?;
        let mut state = self.core.lock();
        state.populated = true;
        Self::insert_if_absent(&mut state, key, deltas);
        self.core.wake();
        self.signal_if_synced(&state);
        Ok(())
    }

    fn deltas_key(&self, deltas: &Deltas<K>) -> Result<ObjectKey, FifoError> {
        match deltas.newest() {
            Some(newest) => self.key_of(&newest.object),
            None => Err(FifoError::Key {
                object: "Deltas[]".to_string(),
                source: KeyError::Custom("0 length Deltas object; can't get key".to_string()),
            }),
        }
    }

    fn insert_if_absent(state: &mut State<K>, key: ObjectKey, deltas: Deltas<K>) {
        if deltas.is_empty() || state.items.items.contains_key(&key) {
            return;
        }
        state.items.queue.push_back(key.clone());
        state.items.items.insert(key, deltas);
    }

    /// Appends one delta for the object's key, transforming first when asked (never tombstones),
    /// deduplicating consecutive deletions, and waking every waiting popper.
    fn queue_action(
        &self,
        state: &mut State<K>,
        kind: DeltaType,
        object: ObjectOrTombstone<K>,
        transform: bool,
    ) -> Result<(), FifoError> {
        let key = self.key_of(&object)?;
        let object = self.core.prepare(object, transform)?;
        let delta = Delta { kind, object };
        match state.items.items.get_mut(&key) {
            Some(deltas) => deltas.push_deduped(delta),
            None => {
                state.items.queue.push_back(key.clone());
                state.items.items.insert(key, Deltas(vec![delta]));
            }
        }
        self.core.wake();
        Ok(())
    }

    fn signal_if_synced(&self, state: &State<K>) {
        self.core.signal_if_synced(state);
    }

    /// Waits for the next key and hands its deltas to `process`, which runs **synchronously under
    /// the queue's lock** so that the caller's store update is atomic with the pop (contract B10).
    /// `process` must be quick and must not call back into this queue.
    ///
    /// Returns `Ok(Some(result))`; `Ok(None)` when `process` asked for a requeue without error;
    /// [`FifoError::Process`] when it failed (the item is dropped, or re-queued for
    /// [`ProcessError::Requeue`]); [`FifoError::Closed`] once the queue is closed and empty. A closed
    /// queue that still holds items keeps handing them out.
    ///
    /// A consumer meant to run on the in-order [`RealFifo`](crate::RealFifo) too is written
    /// against [`Queue::pop_entry`](crate::Queue::pop_entry), with
    /// [`Popped::deltas`](crate::Popped::deltas) for the deltas.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a key is taken, and `process` run on its deltas, only in the poll that returns; a
    /// future dropped while waiting takes nothing.
    pub async fn pop<R, F>(&self, process: F) -> Result<Option<R>, FifoError>
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<R, ProcessError>,
    {
        let mut process = Some(process);
        self.core
            .pop_with(|state| {
                while let Some(key) = state.items.queue.pop_front() {
                    let Some(deltas) = state.items.items.remove(&key) else {
                        tracing::error!(fifo = %self.core.name(), %key, "queued key has no deltas; skipping");
                        continue;
                    };
                    let is_in_initial_list = !state.has_synced();
                    if state.initial_population_count > 0 {
                        state.initial_population_count -= 1;
                    }
                    let Some(process) = process.take() else {
                        unreachable!("process is taken once, right before returning");
                    };
                    let depth = state.items.queue.len();
                    let started = Instant::now();
                    let result = process(&deltas, is_in_initial_list);
                    let took = started.elapsed();
                    if took > SLOW_PROCESS && depth > SLOW_DEPTH {
                        tracing::warn!(fifo = %self.core.name(), %key, ?took, depth, "slow process function while the queue is deep");
                    }
                    let outcome = finish(result, || Self::insert_if_absent(state, key, deltas));
                    self.signal_if_synced(state);
                    return Some(outcome);
                }
                state.closed.then_some(Err(FifoError::Closed))
            })
            .await
    }

    crate::core::core_accessors!();

    /// Number of queued keys.
    pub fn len(&self) -> usize {
        self.core.lock().items.queue.len()
    }

    /// True when no key is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The newest object (or tombstone) of every queued key, in queue order.
    pub fn list(&self) -> Vec<ObjectOrTombstone<K>> {
        let state = self.core.lock();
        state
            .items
            .queue
            .iter()
            .filter_map(|k| state.items.items.get(k)?.newest().map(|d| d.object.clone()))
            .collect()
    }

    /// The queued keys, in queue order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.core.lock().items.queue.iter().cloned().collect()
    }

    /// A copy of the deltas queued under `key` (later appends do not change it).
    pub fn get_by_key(&self, key: &str) -> Option<Deltas<K>> {
        self.core.lock().items.items.get(key).cloned()
    }

    /// A copy of the deltas queued under `obj`'s key.
    pub fn get(&self, obj: &ObjectOrTombstone<K>) -> Result<Option<Deltas<K>>, FifoError> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(key.as_str()))
    }
}

impl<K: Object> Store<K> for DeltaFifo<K> {
    fn key(&self, obj: &K) -> Result<ObjectKey, FifoError> {
        self.core.object_key(obj)
    }
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        DeltaFifo::add(self, obj)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        DeltaFifo::update(self, obj)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        DeltaFifo::delete(self, obj)
    }
    fn replace(
        &self,
        list: Vec<Arc<K>>,
        resource_version: &ResourceVersion,
    ) -> Result<(), FifoError> {
        DeltaFifo::replace(self, list, resource_version)
    }
    fn resync(&self) -> Result<(), FifoError> {
        DeltaFifo::resync(self)
    }
    fn transform(&self, obj: Arc<K>) -> Result<Arc<K>, FifoError> {
        self.core.transform(obj)
    }
    fn update_resource_version(&self, resource_version: &ResourceVersion) {
        self.core.set_last_sync_resource_version(resource_version);
    }
}

impl<K: Object> Queue<K> for DeltaFifo<K> {
    async fn pop_entry<R, F>(&self, _max_batch: usize, process: F) -> Result<Option<R>, FifoError>
    where
        F: FnOnce(Popped<'_, K>, bool) -> Result<R, ProcessError> + Send,
        R: Send,
    {
        DeltaFifo::pop(self, |deltas, initial| {
            process(Popped::Deltas(deltas), initial)
        })
        .await
    }
    fn has_synced(&self) -> bool {
        DeltaFifo::has_synced(self)
    }
    async fn wait_for_sync(&self) -> bool {
        DeltaFifo::wait_for_sync(self).await
    }
    fn close(&self) {
        DeltaFifo::close(self)
    }
    fn is_closed(&self) -> bool {
        DeltaFifo::is_closed(self)
    }
    fn len(&self) -> usize {
        DeltaFifo::len(self)
    }
    fn last_sync_resource_version(&self) -> ResourceVersion {
        DeltaFifo::last_sync_resource_version(self)
    }
}
