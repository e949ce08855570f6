//! [`UndeltaStore`]: a store that hands its complete contents to a callback after every write
//! (contract rule A7.1, client-go's `UndeltaStore`).
//!
//! Some consumers do not want changes, they want the current whole: a component that rewrites a
//! file, or recomputes a summary, from the full list each time. The undelta store turns the
//! stream of adds, updates and deletes back into full states.
//!
//! Invariants (tests below):
//! - **U1 (one push per write):** every successful add, update, delete and replace pushes exactly
//!   once; a failed write, a read and a resync push nothing.
//! - **U2 (complete and in order):** each push is the store's complete contents right after that
//!   write, and pushes arrive in the order of the writes (writes through this store are serialised
//!   with their push).

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::StoreError;
use crate::indexer::Indexer;
use crate::key::ObjectKey;
use crate::object::Object;
use crate::read_only::ReadOnlyIndexer;
use crate::resource_version::ResourceVersion;
use crate::tombstone::ObjectOrTombstone;

/// The callback: receives the complete contents, in no particular order.
type PushFn<K> = Box<dyn Fn(Vec<Arc<K>>) + Send + Sync>;

/// A store that pushes its complete contents to a callback after every successful write (see the
/// module's invariants U1, U2).
///
/// The callback runs while this store's writers are held back (that is what keeps pushes in
/// order), so it must not write to the same store; it may read it.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use store_index::{DynamicObject, UndeltaStore};
///
/// let pushes = Arc::new(Mutex::new(Vec::new()));
/// let seen = Arc::clone(&pushes);
/// let store = UndeltaStore::new(move |all: Vec<Arc<DynamicObject>>| seen.lock().unwrap().push(all.len()));
///
/// let pod = |name: &str| Arc::new(DynamicObject::new("v1", "Pod").within("ns").named(name));
/// store.add(pod("a")).unwrap();
/// store.add(pod("b")).unwrap();
/// store.delete(pod("a")).unwrap();
/// assert!(store.get_by_key("ns/b").is_some()); // reads push nothing
/// assert_eq!(*pushes.lock().unwrap(), [1, 2, 1]);
/// ```
pub struct UndeltaStore<K> {
    store: Indexer<K>,
    push: PushFn<K>,
    /// Held from a write until its push returns (U2).
    writes: Mutex<()>,
}

impl<K: Object> fmt::Debug for UndeltaStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("UndeltaStore").field(&self.store).finish()
    }
}

impl<K: Object> UndeltaStore<K> {
    /// An empty store keyed by `namespace/name` that pushes to `push`.
    pub fn new(push: impl Fn(Vec<Arc<K>>) + Send + Sync + 'static) -> Self {
        Self::with_store(Indexer::default(), push)
    }

    /// Wraps `store` (its key function and indexes). Writes made through other handles of the
    /// same indexer bypass the callback, so this store should be its only writer.
    pub fn with_store(
        store: Indexer<K>,
        push: impl Fn(Vec<Arc<K>>) + Send + Sync + 'static,
    ) -> Self {
        UndeltaStore {
            store,
            push: Box::new(push),
            writes: Mutex::new(()),
        }
    }

    /// Runs `write` and, if it succeeds, pushes the complete contents (U1, U2).
    fn write_then_push<R>(
        &self,
        write: impl FnOnce(&Indexer<K>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let _serialised = self.writes.lock();
        let result = write(&self.store)?;
        (self.push)(self.store.list());
        Ok(result)
    }

    /// Inserts or replaces `obj`, then pushes.
    pub fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.write_then_push(|s| s.add(obj))
    }

    /// Same as [`add`](Self::add).
    pub fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.write_then_push(|s| s.update(obj))
    }

    /// Removes the object with `obj`'s key (an object's, or a tombstone's own), then pushes —
    /// also when the key was absent, as client-go does: the delete succeeded.
    pub fn delete(&self, obj: impl Into<ObjectOrTombstone<K>>) -> Result<(), StoreError> {
        let obj = obj.into();
        self.write_then_push(|s| s.delete(obj))
    }

    /// Replaces the whole contents (all or nothing, as [`Indexer::replace`]), then pushes once.
    pub fn replace(
        &self,
        objects: impl IntoIterator<Item = Arc<K>>,
        resource_version: impl Into<ResourceVersion>,
    ) -> Result<(), StoreError> {
        self.write_then_push(|s| s.replace(objects, resource_version))
    }

    /// Does nothing and pushes nothing.
    pub fn resync(&self) -> Result<(), StoreError> {
        self.store.resync()
    }

    /// The stored object with `obj`'s key.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, StoreError> {
        self.store.get(obj)
    }

    /// The stored object under `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.store.get_by_key(key)
    }

    /// Every stored object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.store.list()
    }

    /// Every stored key.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.store.list_keys()
    }

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// A read-only view of the wrapped store (indexes included); reading it pushes nothing.
    pub fn reader(&self) -> ReadOnlyIndexer<K> {
        ReadOnlyIndexer::new(self.store.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DynamicObject, KeyError};

    type Pushes = Arc<parking_lot::Mutex<Vec<Vec<(String, i64)>>>>;

    fn pod(name: &str, value: i64) -> Arc<DynamicObject> {
        Arc::new(
            DynamicObject::new("v1", "Pod")
                .within("ns")
                .named(name)
                .with_field("value", value.into()),
        )
    }

    /// A store recording every push as sorted `(name, value)` pairs.
    fn recording() -> (UndeltaStore<DynamicObject>, Pushes) {
        let pushes: Pushes = Arc::default();
        let sink = Arc::clone(&pushes);
        let store = UndeltaStore::new(move |all: Vec<Arc<DynamicObject>>| {
            let mut list: Vec<(String, i64)> = all
                .iter()
                .map(|o| (o.name().to_string(), o.data["value"].as_i64().unwrap()))
                .collect();
            list.sort();
            sink.lock().push(list);
        });
        (store, pushes)
    }

    fn a(value: i64) -> (String, i64) {
        ("a".to_string(), value)
    }

    #[test]
    fn add_then_update_pushes_twice_ending_with_the_update() {
        let (store, pushes) = recording();
        store.add(pod("a", 2)).unwrap();
        store.update(pod("a", 1)).unwrap();
        assert_eq!(*pushes.lock(), [vec![a(2)], vec![a(1)]]);
    }

    #[test]
    fn add_then_delete_ends_with_an_empty_push() {
        let (store, pushes) = recording();
        store.add(pod("a", 2)).unwrap();
        store.delete(pod("a", 0)).unwrap();
        assert_eq!(pushes.lock().last().unwrap(), &Vec::<(String, i64)>::new());
        assert_eq!(pushes.lock().len(), 2);
    }

    #[test]
    fn replace_pushes_once_with_the_new_contents() {
        let (store, pushes) = recording();
        store.replace([pod("a", 1)], "5").unwrap();
        assert_eq!(*pushes.lock(), [vec![a(1)]]);
        assert_eq!(store.reader().resource_version(), "5");
    }

    #[test]
    fn each_push_is_the_complete_contents() {
        let (store, pushes) = recording();
        store.add(pod("a", 1)).unwrap();
        store.add(pod("b", 2)).unwrap();
        store.add(pod("c", 3)).unwrap();
        let last = pushes.lock().last().unwrap().clone();
        assert_eq!(
            last,
            [a(1), ("b".to_string(), 2), ("c".to_string(), 3)],
            "U2: all of it, not the change"
        );
    }

    #[test]
    fn reads_and_resync_push_nothing() {
        let (store, pushes) = recording();
        store.add(pod("a", 1)).unwrap();
        let _ = store.get(&pod("a", 0)).unwrap();
        let _ = store.get_by_key("ns/a");
        let _ = (
            store.list(),
            store.list_keys(),
            store.len(),
            store.is_empty(),
        );
        let _ = store.reader().list();
        store.resync().unwrap();
        assert_eq!(pushes.lock().len(), 1, "U1");
    }

    #[derive(Debug)]
    struct Opaque;
    impl Object for Opaque {}

    #[test]
    fn failed_writes_push_nothing() {
        let pushes = Arc::new(parking_lot::Mutex::new(0usize));
        let sink = Arc::clone(&pushes);
        let store = UndeltaStore::new(move |_: Vec<Arc<Opaque>>| *sink.lock() += 1);
        assert_eq!(
            store.add(Arc::new(Opaque)).unwrap_err().key_error(),
            Some(&KeyError::NoMeta)
        );
        assert!(store.update(Arc::new(Opaque)).is_err());
        assert!(store.delete(Arc::new(Opaque)).is_err());
        assert!(store.replace([Arc::new(Opaque)], "1").is_err());
        assert_eq!(*pushes.lock(), 0, "U1");
    }

    #[test]
    fn pushes_from_concurrent_writers_arrive_in_write_order() {
        let sizes = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let sink = Arc::clone(&sizes);
        let store =
            UndeltaStore::new(move |all: Vec<Arc<DynamicObject>>| sink.lock().push(all.len()));
        std::thread::scope(|s| {
            for writer in 0..2 {
                let store = &store;
                s.spawn(move || {
                    for i in 0..200 {
                        store.add(pod(&format!("w{writer}-{i}"), i)).unwrap();
                    }
                });
            }
        });
        // Only adds of distinct keys: the n-th push must hold exactly n objects (U2).
        assert_eq!(*sizes.lock(), (1..=400).collect::<Vec<_>>());
    }
}
