//! [`RealFifo`]: the in-order queue, every event kept in arrival order (client-go's `RealFIFO`,
//! contract B15, non-atomic mode).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use store_index::{
    describe, DeletedFinalStateUnknown, KeyFn, Object, ObjectKey, ObjectOrTombstone,
    ResourceVersion,
};

use crate::delta::{Delta, DeltaType, Deltas};
use crate::error::FifoError;
use crate::options::{DeltaFifoOptions, KnownObjects, Transformer};
use crate::process::{finish, ProcessError};
use crate::queue::Queue;
use crate::signals::Signals;
use crate::store::Store;

/// A queue that keeps every change as its own delta, in arrival order: no per-key merging, and a
/// delete is always enqueued. Each pop hands out a one-element [`Deltas`].
///
/// A relist queues its deletions (tombstones) **before** the listed objects, which are always
/// `Replaced`. It needs `known_objects` (the informer's indexer), which is why the constructor takes
/// it directly.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use delta_fifo::{RealFifo, DeltaFifoOptions, ProcessError};
/// use delta_fifo::store_index::{DynamicObject, Indexer, Object};
///
/// let known: Indexer<DynamicObject> = Indexer::default();
/// let fifo = RealFifo::new(known, DeltaFifoOptions::new());
/// let pod = |name: &str| Arc::new(DynamicObject::new("v1", "Pod").named(name));
/// fifo.add(pod("a")).unwrap();
/// fifo.add(pod("b")).unwrap();
/// fifo.update(pod("a")).unwrap();
/// let mut order = Vec::new();
/// for _ in 0..3 {
///     let name = fifo.pop(|d, _| Ok::<_, ProcessError>(d.newest().unwrap().object().unwrap().name().to_string())).await.unwrap();
///     order.extend(name);
/// }
/// assert_eq!(order, ["a", "b", "a"]);
/// # });
/// ```
pub struct RealFifo<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for RealFifo<K> {
    fn clone(&self) -> Self {
        RealFifo {
            shared: Arc::clone(&self.shared),
        }
    }
}

struct Shared<K> {
    key_fn: KeyFn<K>,
    known_objects: KnownObjects<K>,
    transformer: Option<Transformer<K>>,
    name: String,
    state: Mutex<State<K>>,
    signals: Signals,
}

/// Invariant: `queued[k]` is the number of entries of `queue` with key `k` (absent when zero).
struct State<K> {
    queue: VecDeque<(ObjectKey, Delta<K>)>,
    queued: HashMap<ObjectKey, usize>,
    populated: bool,
    initial_population_count: usize,
    closed: bool,
}

impl<K> State<K> {
    fn has_synced(&self) -> bool {
        self.populated && self.initial_population_count == 0
    }

    fn push(&mut self, key: ObjectKey, delta: Delta<K>) {
        *self.queued.entry(key.clone()).or_default() += 1;
        self.queue.push_back((key, delta));
    }

    fn pop_front(&mut self) -> Option<(ObjectKey, Delta<K>)> {
        let (key, delta) = self.queue.pop_front()?;
        if let Some(n) = self.queued.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.queued.remove(&key);
            }
        }
        Some((key, delta))
    }
}

impl<K: Object> RealFifo<K> {
    /// An empty queue over `known_objects` (the store the consumer keeps up to date). From the
    /// options, the key function, transformer and name are used (`emit_replaced` does not apply:
    /// relisted objects are always `Replaced`).
    pub fn new(
        known_objects: impl store_index::KeyListerGetter<K> + 'static,
        options: DeltaFifoOptions<K>,
    ) -> Self {
        RealFifo {
            shared: Arc::new(Shared {
                key_fn: options.key_fn,
                known_objects: Arc::new(known_objects),
                transformer: options.transformer,
                name: options.name,
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    queued: HashMap::new(),
                    populated: false,
                    initial_population_count: 0,
                    closed: false,
                }),
                signals: Signals::new(),
            }),
        }
    }

    fn key_of(&self, obj: &ObjectOrTombstone<K>) -> Result<ObjectKey, FifoError> {
        match obj {
            ObjectOrTombstone::Tombstone(t) => Ok(t.key.clone()),
            ObjectOrTombstone::Object(o) => {
                (self.shared.key_fn)(o).map_err(|source| FifoError::Key {
                    object: describe(o.as_ref()),
                    source,
                })
            }
        }
    }

    fn enqueue(
        &self,
        state: &mut State<K>,
        kind: DeltaType,
        object: ObjectOrTombstone<K>,
        transform: bool,
    ) -> Result<(), FifoError> {
        let key = self.key_of(&object)?;
        let object = match (object, &self.shared.transformer) {
            (ObjectOrTombstone::Object(o), Some(t)) if transform => {
                ObjectOrTombstone::Object(t(o).map_err(FifoError::Transform)?)
            }
            (object, _) => object,
        };
        state.push(key, Delta { kind, object });
        self.shared.signals.wake_all();
        Ok(())
    }

    fn change(&self, kind: DeltaType, object: ObjectOrTombstone<K>) -> Result<(), FifoError> {
        let mut state = self.shared.state.lock();
        state.populated = true;
        self.enqueue(&mut state, kind, object, true)?;
        self.signal_if_synced(&state);
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

    /// A relist (contract B15.2): tombstones for queued keys missing from the list (one per key,
    /// in order of first appearance, from the key's last queued delta, unless that is already a
    /// deletion), then tombstones for known keys neither listed nor queued, then one `Replaced`
    /// delta per listed object in list order.
    pub fn replace(
        &self,
        list: Vec<Arc<K>>,
        _resource_version: impl Into<ResourceVersion>,
    ) -> Result<(), FifoError> {
        let mut listed: HashSet<ObjectKey> = HashSet::with_capacity(list.len());
        for obj in &list {
            listed.insert(self.key_of(&ObjectOrTombstone::Object(Arc::clone(obj)))?);
        }
        let mut state = self.shared.state.lock();

        let mut last: HashMap<&ObjectKey, &Delta<K>> = HashMap::new();
        let mut first_seen: Vec<&ObjectKey> = Vec::new();
        for (key, delta) in &state.queue {
            if last.insert(key, delta).is_none() {
                first_seen.push(key);
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
            self.enqueue(&mut state, DeltaType::Deleted, tombstone.into(), false)?;
        }

        let known = &self.shared.known_objects;
        for key in known.list_keys() {
            if listed.contains(&key) || state.queued.contains_key(&key) {
                continue;
            }
            let obj = known.get_by_key(key.as_str()).ok().flatten();
            let tombstone = DeletedFinalStateUnknown { key, obj };
            self.enqueue(&mut state, DeltaType::Deleted, tombstone.into(), false)?;
        }

        for obj in list {
            self.enqueue(&mut state, DeltaType::Replaced, obj.into(), true)
                .map_err(|e| FifoError::Enqueue(Box::new(e)))?;
        }

        if !state.populated {
            state.populated = true;
            state.initial_population_count = state.queue.len();
        }
        self.signal_if_synced(&state);
        Ok(())
    }

    /// Queues a `Sync` delta for every known object whose key has nothing queued.
    pub fn resync(&self) -> Result<(), FifoError> {
        let known = &self.shared.known_objects;
        let mut state = self.shared.state.lock();
        for key in known.list_keys() {
            if state.queued.contains_key(&key) {
                continue;
            }
            match known.get_by_key(key.as_str()) {
                Ok(Some(obj)) => self.enqueue(&mut state, DeltaType::Sync, obj.into(), false)?,
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(fifo = %self.shared.name, %key, %error, "resync: lookup failed")
                }
            }
        }
        Ok(())
    }

    fn signal_if_synced(&self, state: &State<K>) {
        self.shared.signals.synced_if(state.has_synced());
    }

    /// Waits for the next delta and runs `process` on it (a one-element [`Deltas`]) under the
    /// lock. The initial-population count drops **after** `process` returns (B15.4). A requeue puts
    /// the delta back at the end unless its key was queued again meanwhile.
    pub async fn pop<R, F>(&self, process: F) -> Result<Option<R>, FifoError>
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<R, ProcessError>,
    {
        let mut process = Some(process);
        self.shared
            .signals
            .wait_until(|| {
                let mut state = self.shared.state.lock();
                if let Some((key, delta)) = state.pop_front() {
                    let is_in_initial_list = !state.has_synced();
                    let deltas = Deltas(vec![delta]);
                    let Some(process) = process.take() else {
                        unreachable!("process is taken once, right before returning");
                    };
                    let result = process(&deltas, is_in_initial_list);
                    if state.initial_population_count > 0 {
                        state.initial_population_count -= 1;
                    }
                    let outcome = finish(result, || {
                        if !state.queued.contains_key(&key) {
                            for delta in deltas {
                                state.push(key.clone(), delta);
                            }
                        }
                    });
                    self.signal_if_synced(&state);
                    return Some(outcome);
                }
                state.closed.then_some(Err(FifoError::Closed))
            })
            .await
    }

    /// Whether the initial population has been processed.
    pub fn has_synced(&self) -> bool {
        self.shared.state.lock().has_synced()
    }

    /// Waits until synced.
    pub async fn wait_synced(&self) {
        self.shared.signals.wait_synced().await;
    }

    /// Closes the queue; poppers get [`FifoError::Closed`] once it is empty.
    pub fn close(&self) {
        self.shared.state.lock().closed = true;
        self.shared.signals.wake_all();
    }

    /// Whether the queue is closed.
    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().closed
    }

    /// Number of queued deltas.
    pub fn len(&self) -> usize {
        self.shared.state.lock().queue.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Object> Store<K> for RealFifo<K> {
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
        match &self.shared.transformer {
            Some(t) => t(obj).map_err(FifoError::Transform),
            None => Ok(obj),
        }
    }
}

impl<K: Object> Queue<K> for RealFifo<K> {
    async fn pop<R, F>(&self, process: F) -> Result<Option<R>, FifoError>
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<R, ProcessError> + Send,
        R: Send,
    {
        RealFifo::pop(self, process).await
    }
    fn has_synced(&self) -> bool {
        RealFifo::has_synced(self)
    }
    async fn wait_synced(&self) {
        RealFifo::wait_synced(self).await
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
}
