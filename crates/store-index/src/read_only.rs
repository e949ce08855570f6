//! [`ReadOnlyIndexer`]: every query of an [`Indexer`], and no write.
//!
//! An informer's cache is written by the informer alone (the queue pops into it, then handlers
//! are told); a user who wrote into it would make it disagree with the server without any handler
//! hearing of it. So the informer hands out this view, and its writes stay private.

use std::sync::Arc;

use crate::error::StoreError;
use crate::index::Indexers;
use crate::indexer::Indexer;
use crate::key::ObjectKey;
use crate::object::Object;
use crate::resource_version::ResourceVersion;

/// A read-only view of an [`Indexer`]: the same objects, the same indexes, as they change.
///
/// ```
/// use std::sync::Arc;
/// use store_index::{DynamicObject, Indexer, Indexers, ReadOnlyIndexer, NAMESPACE_INDEX};
///
/// let indexer = Indexer::new(Indexers::new().with_namespace_index());
/// let view = ReadOnlyIndexer::new(indexer.clone());
/// indexer.add(Arc::new(DynamicObject::new("v1", "Pod").within("ns").named("a"))).unwrap();
/// assert_eq!(view.len(), 1, "the view sees the indexer's writes");
/// assert!(view.get_by_key("ns/a").is_some());
/// assert_eq!(view.by_index(NAMESPACE_INDEX, "ns").unwrap().len(), 1);
/// ```
pub struct ReadOnlyIndexer<K> {
    indexer: Indexer<K>,
}

impl<K> Clone for ReadOnlyIndexer<K> {
    fn clone(&self) -> Self {
        ReadOnlyIndexer {
            indexer: self.indexer.clone(),
        }
    }
}

impl<K: Object> std::fmt::Debug for ReadOnlyIndexer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ReadOnlyIndexer")
            .field(&self.indexer)
            .finish()
    }
}

impl<K: Object> From<Indexer<K>> for ReadOnlyIndexer<K> {
    fn from(indexer: Indexer<K>) -> Self {
        ReadOnlyIndexer { indexer }
    }
}

impl<K: Object> ReadOnlyIndexer<K> {
    /// A read-only view of `indexer`.
    pub fn new(indexer: Indexer<K>) -> Self {
        ReadOnlyIndexer { indexer }
    }

    /// The key of `obj` under the indexer's key function.
    pub fn key_of(&self, obj: &K) -> Result<ObjectKey, StoreError> {
        self.indexer.key_of(obj)
    }

    /// The stored object with `obj`'s key.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, StoreError> {
        self.indexer.get(obj)
    }

    /// The stored object under `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.indexer.get_by_key(key)
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.indexer.contains_key(key)
    }

    /// Every stored object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.indexer.list()
    }

    /// Every key.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.indexer.list_keys()
    }

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.indexer.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.indexer.is_empty()
    }

    /// The resource version of the last write that carried one.
    pub fn resource_version(&self) -> ResourceVersion {
        self.indexer.resource_version()
    }

    /// The stored objects sharing an index value with `obj` under `index_name`.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, StoreError> {
        self.indexer.index(index_name, obj)
    }

    /// The keys in the bucket `value` of index `index_name`, sorted.
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, StoreError> {
        self.indexer.index_keys(index_name, value)
    }

    /// The objects in the bucket `value` of index `index_name`.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, StoreError> {
        self.indexer.by_index(index_name, value)
    }

    /// Every value of index `index_name` that has at least one object.
    pub fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.indexer.list_index_func_values(index_name)
    }

    /// The registered index functions.
    pub fn get_indexers(&self) -> Indexers<K> {
        self.indexer.get_indexers()
    }

    /// Runs `f` on the object under `key` while the store's read lock is held.
    pub fn with_object<R>(&self, key: &str, f: impl FnOnce(Option<&Arc<K>>) -> R) -> R {
        self.indexer.with_object(key, f)
    }
}
