//! [`Heap`]: a priority queue of objects keyed by object key (contract rule A7.4, client-go's
//! `cache.Heap`).
//!
//! A scheduler-style consumer wants "the most urgent object next", and wants a newer version of an
//! object already waiting to take its place (and its new priority) rather than queue twice. So the
//! heap holds at most one object per key: adding a known key updates it in place and restores the
//! order. [`pop`](Heap::pop) waits for an object to arrive, and ends with [`HeapError::Closed`]
//! once the heap is closed and empty.
//!
//! Invariants of `HeapState` (checked after every step by `proptest_heap_against_a_sorted_vec`):
//! - **Q1 (heap order):** no entry compares `Greater` than either of its children, so the root is
//!   a least entry.
//! - **Q2 (positions):** `positions` maps exactly the keys in `queue` to their index in it; a key
//!   is in the heap at most once.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::error::StoreError;
use crate::key::{meta_namespace_key, KeyFn, ObjectKey};
use crate::object::Object;

/// Why a heap operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HeapError {
    /// The heap was closed: adds are refused, and a pop finds nothing more to return.
    #[error("heap is closed")]
    Closed,
    /// A delete named a key the heap does not hold.
    #[error("object not found: {0}")]
    NotFound(ObjectKey),
    /// An object could not be keyed; nothing was changed.
    #[error(transparent)]
    Key(#[from] StoreError),
}

/// An object waiting in the heap under its key.
struct Entry<K> {
    key: ObjectKey,
    obj: Arc<K>,
}

/// The heap proper (Q1, Q2); behind the `Heap`'s lock.
struct HeapState<K> {
    /// A binary heap by the user's comparison (Q1).
    queue: Vec<Entry<K>>,
    /// Key → index in `queue` (Q2).
    positions: HashMap<ObjectKey, usize>,
    closed: bool,
}

type CompareFn<K> = Box<dyn Fn(&K, &K) -> Ordering + Send + Sync>;

/// A thread-safe priority queue of objects, at most one per key, that pops the least object first
/// under a user comparison (see the module's invariants Q1, Q2). Share it with an `Arc`.
///
/// ```
/// use std::sync::Arc;
/// use store_index::{DynamicObject, Heap, HeapError};
///
/// let job = |name: &str, priority: i64| {
///     Arc::new(DynamicObject::new("v1", "Job").within("ns").named(name).with_field("priority", priority.into()))
/// };
/// let priority = |o: &DynamicObject| o.data["priority"].as_i64().unwrap();
/// let heap = Heap::new(move |a: &DynamicObject, b: &DynamicObject| priority(a).cmp(&priority(b)));
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// heap.add(job("a", 1)).unwrap();
/// heap.add(job("b", 2)).unwrap();
/// heap.add_if_not_present(job("b", 3)).unwrap(); // b is present: kept at 2
/// heap.add_if_not_present(job("c", 4)).unwrap();
/// assert_eq!(heap.len(), 3);
/// for expected in [1, 2, 4] {
///     assert_eq!(priority(&heap.pop().await.unwrap()), expected);
/// }
/// heap.close();
/// assert!(matches!(heap.pop().await, Err(HeapError::Closed)));
/// # });
/// ```
pub struct Heap<K> {
    key_fn: KeyFn<K>,
    compare: CompareFn<K>,
    state: Mutex<HeapState<K>>,
    /// Woken on every add and on close; a waiting `pop` registers before it looks.
    arrivals: Notify,
}

impl<K: Object> fmt::Debug for Heap<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("Heap")
            .field("len", &state.queue.len())
            .field("closed", &state.closed)
            .finish()
    }
}

impl<K: Object> Heap<K> {
    /// An empty, open heap keyed by `namespace/name` that pops the object comparing least under
    /// `compare` first. Among equal objects the order is unspecified.
    pub fn new(compare: impl Fn(&K, &K) -> Ordering + Send + Sync + 'static) -> Self {
        Heap {
            key_fn: Arc::new(|obj: &K| meta_namespace_key(obj)),
            compare: Box::new(compare),
            state: Mutex::new(HeapState {
                queue: Vec::new(),
                positions: HashMap::new(),
                closed: false,
            }),
            arrivals: Notify::new(),
        }
    }

    /// Keys objects with `key_fn` instead.
    pub fn with_key_fn(mut self, key_fn: KeyFn<K>) -> Self {
        self.key_fn = key_fn;
        self
    }

    fn key_of(&self, obj: &K) -> Result<ObjectKey, HeapError> {
        (self.key_fn)(obj).map_err(|e| StoreError::key(obj, e).into())
    }

    /// Inserts `obj`, or replaces the object with its key in place and restores the order.
    /// Fails with [`HeapError::Closed`] after [`close`](Self::close).
    pub fn add(&self, obj: Arc<K>) -> Result<(), HeapError> {
        let key = self.key_of(&obj)?;
        {
            let mut state = self.state.lock();
            if state.closed {
                return Err(HeapError::Closed);
            }
            self.upsert(&mut state, key, obj);
        }
        self.arrivals.notify_waiters();
        Ok(())
    }

    /// Same as [`add`](Self::add).
    pub fn update(&self, obj: Arc<K>) -> Result<(), HeapError> {
        self.add(obj)
    }

    /// Inserts `obj` unless an object with its key is already waiting, which is then kept as it
    /// is. Fails with [`HeapError::Closed`] after [`close`](Self::close).
    pub fn add_if_not_present(&self, obj: Arc<K>) -> Result<(), HeapError> {
        let key = self.key_of(&obj)?;
        {
            let mut state = self.state.lock();
            if state.closed {
                return Err(HeapError::Closed);
            }
            if state.positions.contains_key(&key) {
                return Ok(());
            }
            self.upsert(&mut state, key, obj);
        }
        self.arrivals.notify_waiters();
        Ok(())
    }

    /// Adds every object as [`add`](Self::add) does, under one lock. If any object cannot be
    /// keyed, none is added (client-go adds the ones before it). Fails with
    /// [`HeapError::Closed`] after [`close`](Self::close).
    pub fn bulk_add(&self, objects: impl IntoIterator<Item = Arc<K>>) -> Result<(), HeapError> {
        let keyed = objects
            .into_iter()
            .map(|obj| Ok((self.key_of(&obj)?, obj)))
            .collect::<Result<Vec<_>, HeapError>>()?;
        {
            let mut state = self.state.lock();
            if state.closed {
                return Err(HeapError::Closed);
            }
            for (key, obj) in keyed {
                self.upsert(&mut state, key, obj);
            }
        }
        self.arrivals.notify_waiters();
        Ok(())
    }

    /// Removes and returns the object with `obj`'s key; [`HeapError::NotFound`] if there is none.
    pub fn delete(&self, obj: &K) -> Result<Arc<K>, HeapError> {
        let key = self.key_of(obj)?;
        self.delete_by_key(key.as_str())
    }

    /// Removes and returns the object under `key`; [`HeapError::NotFound`] if there is none.
    pub fn delete_by_key(&self, key: &str) -> Result<Arc<K>, HeapError> {
        let mut state = self.state.lock();
        match state.positions.get(key).copied() {
            Some(at) => Ok(self.remove_at(&mut state, at)),
            None => Err(HeapError::NotFound(ObjectKey::from(key))),
        }
    }

    /// Waits until an object is waiting, then removes and returns the least one. Once the heap is
    /// closed, the objects still waiting are returned first, then [`HeapError::Closed`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an object is removed only by a `pop` that returns it.
    pub async fn pop(&self) -> Result<Arc<K>, HeapError> {
        loop {
            let arrival = self.arrivals.notified();
            let mut arrival = std::pin::pin!(arrival);
            // Registered before looking, so an add between the look and the wait still wakes us.
            arrival.as_mut().enable();
            if let Some(result) = self.try_pop().transpose() {
                return result;
            }
            arrival.await;
        }
    }

    /// Removes and returns the least object without waiting: `Ok(None)` when the heap is empty
    /// and open, [`HeapError::Closed`] when it is empty and closed.
    pub fn try_pop(&self) -> Result<Option<Arc<K>>, HeapError> {
        let mut state = self.state.lock();
        if state.queue.is_empty() {
            return if state.closed {
                Err(HeapError::Closed)
            } else {
                Ok(None)
            };
        }
        Ok(Some(self.remove_at(&mut state, 0)))
    }

    /// Closes the heap: adds fail from now on, and waiting pops end with [`HeapError::Closed`]
    /// once nothing is left.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.arrivals.notify_waiters();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    /// Every waiting object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let state = self.state.lock();
        state.queue.iter().map(|e| Arc::clone(&e.obj)).collect()
    }

    /// Every waiting key, in no particular order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        let state = self.state.lock();
        state.queue.iter().map(|e| e.key.clone()).collect()
    }

    /// The waiting object with `obj`'s key.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, HeapError> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(key.as_str()))
    }

    /// The waiting object under `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        let state = self.state.lock();
        let at = *state.positions.get(key)?;
        Some(Arc::clone(&state.queue[at].obj))
    }

    /// How many objects are waiting.
    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Whether no object is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn less(&self, state: &HeapState<K>, a: usize, b: usize) -> bool {
        (self.compare)(&state.queue[a].obj, &state.queue[b].obj) == Ordering::Less
    }

    fn swap(state: &mut HeapState<K>, a: usize, b: usize) {
        state.queue.swap(a, b);
        for at in [a, b] {
            if let Some(pos) = state.positions.get_mut(&state.queue[at].key) {
                *pos = at;
            }
        }
    }

    /// Moves the entry at `at` towards the root while it is less than its parent (Q1).
    fn sift_up(&self, state: &mut HeapState<K>, mut at: usize) -> usize {
        while at > 0 {
            let parent = (at - 1) / 2;
            if !self.less(state, at, parent) {
                break;
            }
            Self::swap(state, at, parent);
            at = parent;
        }
        at
    }

    /// Moves the entry at `at` towards the leaves while a child is less than it (Q1).
    fn sift_down(&self, state: &mut HeapState<K>, mut at: usize) {
        let len = state.queue.len();
        loop {
            let (left, right) = (2 * at + 1, 2 * at + 2);
            let mut least = at;
            if left < len && self.less(state, left, least) {
                least = left;
            }
            if right < len && self.less(state, right, least) {
                least = right;
            }
            if least == at {
                return;
            }
            Self::swap(state, at, least);
            at = least;
        }
    }

    /// Restores Q1 around `at` after its entry changed.
    fn fix(&self, state: &mut HeapState<K>, at: usize) {
        if self.sift_up(state, at) == at {
            self.sift_down(state, at);
        }
    }

    fn upsert(&self, state: &mut HeapState<K>, key: ObjectKey, obj: Arc<K>) {
        match state.positions.get(&key).copied() {
            Some(at) => {
                state.queue[at].obj = obj;
                self.fix(state, at);
            }
            None => {
                let at = state.queue.len();
                state.positions.insert(key.clone(), at);
                state.queue.push(Entry { key, obj });
                self.sift_up(state, at);
            }
        }
    }

    fn remove_at(&self, state: &mut HeapState<K>, at: usize) -> Arc<K> {
        let last = state.queue.len() - 1;
        Self::swap(state, at, last);
        let removed = state
            .queue
            .pop()
            .expect("remove_at is given an index in the queue");
        state.positions.remove(&removed.key);
        if at < state.queue.len() {
            self.fix(state, at);
        }
        removed.obj
    }

    #[cfg(test)]
    fn check_invariants(&self) {
        let state = self.state.lock();
        for at in 1..state.queue.len() {
            let parent = (at - 1) / 2;
            assert!(
                !self.less(&state, at, parent),
                "Q1: entry {at} less than its parent"
            );
        }
        assert_eq!(
            state.positions.len(),
            state.queue.len(),
            "Q2: one position per entry"
        );
        for (at, entry) in state.queue.iter().enumerate() {
            assert_eq!(
                state.positions.get(&entry.key),
                Some(&at),
                "Q2: position of {}",
                entry.key
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KeyError, ObjectMeta};

    #[derive(Debug, PartialEq)]
    struct Job {
        meta: ObjectMeta,
        priority: u32,
    }

    impl Object for Job {
        fn object_meta(&self) -> Option<&ObjectMeta> {
            Some(&self.meta)
        }
    }

    fn job(name: &str, priority: u32) -> Arc<Job> {
        Arc::new(Job {
            meta: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            priority,
        })
    }

    fn heap() -> Heap<Job> {
        Heap::new(|a: &Job, b: &Job| a.priority.cmp(&b.priority))
    }

    fn drain(heap: &Heap<Job>) -> Vec<u32> {
        std::iter::from_fn(|| heap.try_pop().unwrap().map(|j| j.priority)).collect()
    }

    #[tokio::test]
    async fn add_if_not_present_keeps_the_waiting_value() {
        let heap = heap();
        heap.add(job("a", 1)).unwrap();
        heap.add(job("b", 2)).unwrap();
        heap.add_if_not_present(job("b", 3)).unwrap();
        heap.add_if_not_present(job("c", 4)).unwrap();
        assert_eq!(heap.len(), 3);
        let mut pops = Vec::new();
        for _ in 0..3 {
            pops.push(heap.pop().await.unwrap().priority);
        }
        assert_eq!(pops, [1, 2, 4]);
        assert!(heap.is_empty());
    }

    #[test]
    fn add_of_a_known_key_updates_it_in_place_and_reorders() {
        let heap = heap();
        heap.bulk_add([job("a", 5), job("b", 6), job("c", 7)])
            .unwrap();
        heap.update(job("c", 1)).unwrap();
        heap.add(job("a", 9)).unwrap();
        assert_eq!(heap.len(), 3);
        assert_eq!(heap.get_by_key("a").unwrap().priority, 9);
        heap.check_invariants();
        assert_eq!(drain(&heap), [1, 6, 9]);
    }

    #[test]
    fn deleting_an_unknown_key_is_an_error() {
        let heap = heap();
        heap.add(job("a", 1)).unwrap();
        let err = heap.delete(&job("zz", 0)).unwrap_err();
        assert!(matches!(&err, HeapError::NotFound(k) if k == "zz"));
        assert_eq!(err.to_string(), "object not found: zz");
        assert!(matches!(
            heap.delete_by_key("zz"),
            Err(HeapError::NotFound(_))
        ));
        assert_eq!(heap.delete(&job("a", 0)).unwrap().priority, 1);
        assert!(heap.is_empty());
    }

    #[test]
    fn every_add_fails_after_close_with_heap_is_closed() {
        let heap = heap();
        heap.add(job("a", 1)).unwrap();
        heap.close();
        assert!(heap.is_closed());
        for err in [
            heap.add(job("b", 1)).unwrap_err(),
            heap.update(job("a", 2)).unwrap_err(),
            heap.add_if_not_present(job("c", 1)).unwrap_err(),
            heap.bulk_add([job("d", 1)]).unwrap_err(),
        ] {
            assert!(matches!(err, HeapError::Closed));
            assert_eq!(err.to_string(), "heap is closed");
        }
        assert_eq!(heap.list_keys(), ["a"], "nothing was added");
    }

    #[tokio::test]
    async fn pop_after_close_drains_what_is_left_then_fails() {
        let heap = heap();
        heap.bulk_add([job("a", 2), job("b", 1)]).unwrap();
        heap.close();
        assert_eq!(heap.pop().await.unwrap().priority, 1);
        assert_eq!(heap.pop().await.unwrap().priority, 2);
        assert!(matches!(heap.pop().await, Err(HeapError::Closed)));
        assert!(matches!(heap.try_pop(), Err(HeapError::Closed)));
    }

    #[tokio::test]
    async fn pop_waits_for_an_add() {
        let heap = Arc::new(heap());
        let popper = tokio::spawn({
            let heap = Arc::clone(&heap);
            async move { heap.pop().await }
        });
        // On the current-thread runtime the popper runs until it waits.
        tokio::task::yield_now().await;
        assert!(!popper.is_finished(), "pop returned from an empty heap");
        heap.add(job("a", 7)).unwrap();
        assert_eq!(popper.await.unwrap().unwrap().priority, 7);
    }

    #[tokio::test]
    async fn close_wakes_a_waiting_pop() {
        let heap = Arc::new(heap());
        let popper = tokio::spawn({
            let heap = Arc::clone(&heap);
            async move { heap.pop().await }
        });
        tokio::task::yield_now().await;
        assert!(!popper.is_finished());
        heap.close();
        assert!(matches!(popper.await.unwrap(), Err(HeapError::Closed)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_poppers_get_every_object_exactly_once() {
        let heap = Arc::new(heap());
        let poppers: Vec<_> = (0..4)
            .map(|_| {
                let heap = Arc::clone(&heap);
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    while let Ok(job) = heap.pop().await {
                        got.push(job.priority);
                    }
                    got
                })
            })
            .collect();
        let adder = {
            let heap = Arc::clone(&heap);
            tokio::task::spawn_blocking(move || {
                for i in 0..500 {
                    heap.add(job(&format!("j{i}"), i)).unwrap();
                }
            })
        };
        adder.await.unwrap();
        heap.close();
        let mut all = Vec::new();
        for p in poppers {
            all.extend(p.await.unwrap());
        }
        all.sort_unstable();
        assert_eq!(all, (0..500).collect::<Vec<_>>());
    }

    #[derive(Debug)]
    struct Opaque;
    impl Object for Opaque {}

    #[test]
    fn an_object_that_cannot_be_keyed_changes_nothing() {
        let heap = Heap::new(|_: &Opaque, _: &Opaque| Ordering::Equal);
        let err = heap.add(Arc::new(Opaque)).unwrap_err();
        assert!(matches!(&err, HeapError::Key(e) if e.key_error() == Some(&KeyError::NoMeta)));
        assert!(heap.add_if_not_present(Arc::new(Opaque)).is_err());
        assert!(heap.delete(&Opaque).is_err());
        assert!(heap.get(&Opaque).is_err());
        assert!(heap.is_empty());
    }

    #[test]
    fn bulk_add_is_all_or_nothing_on_key_errors() {
        let heap = heap().with_key_fn(Arc::new(|j: &Job| {
            if j.meta.name.as_deref() == Some("bad") {
                Err(KeyError::Custom("bad".into()))
            } else {
                meta_namespace_key(j)
            }
        }));
        assert!(heap
            .bulk_add([job("a", 1), job("bad", 2), job("c", 3)])
            .is_err());
        assert!(heap.is_empty());
    }

    #[test]
    fn reads_see_the_waiting_objects() {
        let heap = heap();
        heap.bulk_add([job("a", 3), job("b", 1)]).unwrap();
        let mut keys: Vec<String> = heap.list_keys().iter().map(|k| k.to_string()).collect();
        keys.sort();
        assert_eq!(keys, ["a", "b"]);
        let mut priorities: Vec<u32> = heap.list().iter().map(|j| j.priority).collect();
        priorities.sort_unstable();
        assert_eq!(priorities, [1, 3]);
        assert_eq!(heap.get(&job("b", 0)).unwrap().unwrap().priority, 1);
        assert!(heap.get_by_key("c").is_none());
    }
}

#[cfg(test)]
mod proptest_heap_against_a_sorted_vec {
    //! Any sequence of add, add_if_not_present, delete and pop gives the same results as a model
    //! kept as a sorted `Vec`, and Q1 and Q2 hold after every step.

    use proptest::prelude::*;

    use super::*;
    use crate::ObjectMeta;

    #[derive(Debug)]
    struct Job {
        meta: ObjectMeta,
        priority: u8,
    }

    impl Object for Job {
        fn object_meta(&self) -> Option<&ObjectMeta> {
            Some(&self.meta)
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(u8, u8),
        AddIfNotPresent(u8, u8),
        Delete(u8),
        Pop,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u8..12, 0u8..20).prop_map(|(k, p)| Op::Add(k, p)),
            2 => (0u8..12, 0u8..20).prop_map(|(k, p)| Op::AddIfNotPresent(k, p)),
            1 => (0u8..12).prop_map(Op::Delete),
            2 => Just(Op::Pop),
        ]
    }

    fn job(key: u8, priority: u8) -> Arc<Job> {
        Arc::new(Job {
            meta: ObjectMeta {
                name: Some(format!("k{key:02}")),
                ..Default::default()
            },
            priority,
        })
    }

    /// Sorted by `(priority, name)`: the same total order the heap is given, so pops are
    /// deterministic.
    type Model = Vec<(u8, String)>;

    fn model_upsert(model: &mut Model, key: u8, priority: u8, if_absent: bool) {
        let name = format!("k{key:02}");
        if let Some(at) = model.iter().position(|(_, n)| *n == name) {
            if if_absent {
                return;
            }
            model.remove(at);
        }
        model.push((priority, name));
        model.sort();
    }

    proptest! {
        #[test]
        fn pops_match_the_model(ops in prop::collection::vec(op(), 1..120)) {
            let heap = Heap::new(|a: &Job, b: &Job| {
                (a.priority, a.name()).cmp(&(b.priority, b.name()))
            });
            let mut model: Model = Vec::new();
            for op in ops {
                match op {
                    Op::Add(k, p) => {
                        heap.add(job(k, p)).unwrap();
                        model_upsert(&mut model, k, p, false);
                    }
                    Op::AddIfNotPresent(k, p) => {
                        heap.add_if_not_present(job(k, p)).unwrap();
                        model_upsert(&mut model, k, p, true);
                    }
                    Op::Delete(k) => {
                        let name = format!("k{k:02}");
                        let expected = model.iter().position(|(_, n)| *n == name).map(|at| model.remove(at));
                        let got = heap.delete_by_key(&name).ok().map(|j| (j.priority, j.name().to_string()));
                        prop_assert_eq!(got, expected);
                    }
                    Op::Pop => {
                        let expected = (!model.is_empty()).then(|| model.remove(0));
                        let got = heap.try_pop().unwrap().map(|j| (j.priority, j.name().to_string()));
                        prop_assert_eq!(got, expected);
                    }
                }
                heap.check_invariants();
                prop_assert_eq!(heap.len(), model.len());
            }
        }
    }
}
