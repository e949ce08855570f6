//! [`Fifo`]: the plain FIFO, latest object per key, no deltas (client-go's `FIFO`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use store_index::{KeyFn, Object, ObjectKey, ObjectOrTombstone, ResourceVersion};

use crate::core::{Locked, QueueCore};
use crate::error::FifoError;
use crate::options::DeltaFifoOptions;
use crate::process::{finish, ProcessError};
use crate::store::Store;

/// A producer/consumer queue holding only the latest object per key (contract B14).
///
/// Adds and updates of a queued key replace its object without moving it. A delete removes the
/// object but leaves the key queued; the pop that reaches it skips it. Pop, close and HasSynced
/// behave as in [`DeltaFifo`](crate::DeltaFifo).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use delta_fifo::{Fifo, ProcessError};
/// use delta_fifo::store_index::{DynamicObject, Object};
///
/// let fifo = Fifo::new();
/// let pod = |rv: &str| Arc::new(DynamicObject::new("v1", "Pod").named("p").with_resource_version(rv));
/// fifo.add(pod("10")).unwrap();
/// fifo.update(pod("15")).unwrap();
/// let rv = fifo.pop(|obj, _| Ok::<_, ProcessError>(obj.resource_version().map(str::to_string))).await.unwrap();
/// assert_eq!(rv, Some(Some("15".to_string())));
/// assert!(fifo.is_empty());
/// # });
/// ```
pub struct Fifo<K> {
    core: Arc<QueueCore<K, Items<K>>>,
}

impl<K> Clone for Fifo<K> {
    fn clone(&self) -> Self {
        Fifo {
            core: Arc::clone(&self.core),
        }
    }
}

/// Invariant: every key of `items` is in `queue` (a deleted key may linger in `queue` without an
/// item, and is skipped by pop).
struct Items<K> {
    items: HashMap<ObjectKey, Arc<K>>,
    queue: VecDeque<ObjectKey>,
}

impl<K: Object> Default for Fifo<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Object> Fifo<K> {
    /// An empty FIFO keyed by `namespace/name`.
    pub fn new() -> Self {
        Self::with_key_fn(DeltaFifoOptions::<K>::new().key_fn)
    }

    /// An empty FIFO with a custom key function.
    pub fn with_key_fn(key_fn: KeyFn<K>) -> Self {
        let items = Items {
            items: HashMap::new(),
            queue: VecDeque::new(),
        };
        Fifo {
            core: Arc::new(QueueCore::new(key_fn, None, "FIFO".into(), items)),
        }
    }

    fn key_of(&self, obj: &K) -> Result<ObjectKey, FifoError> {
        self.core.object_key(obj)
    }

    /// Queues `obj` (or replaces the queued object of its key, keeping its place).
    pub fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        let key = self.key_of(&obj)?;
        let mut state = self.core.lock();
        state.populated = true;
        if !state.items.items.contains_key(&key) {
            state.items.queue.push_back(key.clone());
        }
        state.items.items.insert(key, obj);
        self.core.wake();
        self.signal_if_synced(&state);
        Ok(())
    }

    /// Same as [`add`](Self::add).
    pub fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.add(obj)
    }

    /// Removes the queued object of `obj`'s key (an object's, or a tombstone's own); its queue
    /// entry stays and is skipped by pop.
    pub fn delete(&self, obj: impl Into<ObjectOrTombstone<K>>) -> Result<(), FifoError> {
        let key = match obj.into() {
            ObjectOrTombstone::Object(obj) => self.key_of(&obj)?,
            ObjectOrTombstone::Tombstone(t) => t.key,
        };
        let mut state = self.core.lock();
        state.populated = true;
        state.items.items.remove(&key);
        self.signal_if_synced(&state);
        Ok(())
    }

    /// Replaces everything queued with `list` (keys computed first: a key error changes nothing).
    pub fn replace(
        &self,
        list: Vec<Arc<K>>,
        _resource_version: impl Into<ResourceVersion>,
    ) -> Result<(), FifoError> {
        let mut items = HashMap::with_capacity(list.len());
        let mut queue = VecDeque::with_capacity(list.len());
        for obj in list {
            let key = self.key_of(&obj)?;
            if items.insert(key.clone(), obj).is_none() {
                queue.push_back(key);
            }
        }
        let mut state = self.core.lock();
        if !state.populated {
            state.populated = true;
            state.initial_population_count = items.len();
        }
        state.items = Items { items, queue };
        self.core.wake();
        self.signal_if_synced(&state);
        Ok(())
    }

    /// Re-queues any item whose key is missing from the queue (normally none).
    pub fn resync(&self) -> Result<(), FifoError> {
        let mut state = self.core.lock();
        let queued: HashSet<ObjectKey> = state.items.queue.iter().cloned().collect();
        let missing: Vec<ObjectKey> = state
            .items
            .items
            .keys()
            .filter(|k| !queued.contains(*k))
            .cloned()
            .collect();
        if !missing.is_empty() {
            state.items.queue.extend(missing);
            self.core.wake();
        }
        Ok(())
    }

    /// Queues `obj` only if its key has no queued object (legacy API, contract B14.6).
    pub fn add_if_not_present(&self, obj: Arc<K>) -> Result<(), FifoError> {
        let key = self.key_of(&obj)?;
        let mut state = self.core.lock();
        state.populated = true;
        if !state.items.items.contains_key(&key) {
            state.items.queue.push_back(key.clone());
            state.items.items.insert(key, obj);
            self.core.wake();
        }
        self.signal_if_synced(&state);
        Ok(())
    }

    fn signal_if_synced(&self, state: &Locked<Items<K>>) {
        self.core.signal_if_synced(state);
    }

    /// Waits for the next object and runs `process` on it under the lock; outcomes as in
    /// [`DeltaFifo::pop`](crate::DeltaFifo::pop).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an item is taken, and `process` run on it, only in the poll that returns it; a
    /// future dropped while waiting takes nothing.
    pub async fn pop<R, F>(&self, process: F) -> Result<Option<R>, FifoError>
    where
        F: FnOnce(&Arc<K>, bool) -> Result<R, ProcessError>,
    {
        let mut process = Some(process);
        self.core
            .pop_with(|state| {
                while let Some(key) = state.items.queue.pop_front() {
                    let is_in_initial_list = !state.has_synced();
                    if state.initial_population_count > 0 {
                        state.initial_population_count -= 1;
                    }
                    let Some(obj) = state.items.items.remove(&key) else {
                        // Deleted while queued (B14.2); the entry still counted above.
                        self.signal_if_synced(state);
                        continue;
                    };
                    let Some(process) = process.take() else {
                        unreachable!("process is taken once, right before returning");
                    };
                    let result = process(&obj, is_in_initial_list);
                    let outcome = finish(result, || {
                        if !state.items.items.contains_key(&key) {
                            state.items.queue.push_back(key.clone());
                            state.items.items.insert(key, obj);
                        }
                    });
                    self.signal_if_synced(state);
                    return Some(outcome);
                }
                state.closed.then_some(Err(FifoError::Closed))
            })
            .await
    }

    crate::core::core_accessors!(
        /// A `Fifo` keeps one object per key: a key the first `replace` lists twice is popped once
        /// (B14.6).
    );

    /// Number of queued objects.
    pub fn len(&self) -> usize {
        self.core.lock().items.items.len()
    }

    /// True when no object is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The queued objects, in queue order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let state = self.core.lock();
        let mut seen = HashSet::new();
        state
            .items
            .queue
            .iter()
            .filter(|k| seen.insert(*k))
            .filter_map(|k| state.items.items.get(k).cloned())
            .collect()
    }

    /// The keys of the queued objects, in queue order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        let state = self.core.lock();
        let mut seen = HashSet::new();
        state
            .items
            .queue
            .iter()
            .filter(|k| state.items.items.contains_key(*k) && seen.insert(*k))
            .cloned()
            .collect()
    }

    /// The queued object under `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.core.lock().items.items.get(key).cloned()
    }
}

impl<K: Object> Store<K> for Fifo<K> {
    fn key(&self, obj: &K) -> Result<ObjectKey, FifoError> {
        self.core.object_key(obj)
    }
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        Fifo::add(self, obj)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        Fifo::update(self, obj)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        Fifo::delete(self, &obj)
    }
    fn replace(
        &self,
        list: Vec<Arc<K>>,
        resource_version: &ResourceVersion,
    ) -> Result<(), FifoError> {
        Fifo::replace(self, list, resource_version)
    }
    fn resync(&self) -> Result<(), FifoError> {
        Fifo::resync(self)
    }
}
