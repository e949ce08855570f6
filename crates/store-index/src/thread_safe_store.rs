//! The state behind an [`Indexer`](crate::Indexer): items plus named indexes, always consistent.
//!
//! Invariants (checked by `proptest_index_invariants` in `indexer.rs`):
//! - **I1 (index = rebuild):** for every index `n` and value `v`, `indices[n][v]` is exactly the set
//!   of keys `k` in `items` whose object yields `v` under index function `n`.
//! - **I2 (no empty bucket):** no bucket `indices[n][v]` is empty; a bucket that loses its last key
//!   is removed, so a store whose objects churn through many values does not leak.
//! - **I3 (all or nothing):** a write either updates items and every index, or changes nothing
//!   (an index function error leaves the state as it was).
//!
//! All of it sits behind one lock in the `Indexer`, so every query answers from one snapshot.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::error::StoreError;
use crate::index::{IndexFn, Indexers};
use crate::key::ObjectKey;
use crate::object::Object;
use crate::resource_version::ResourceVersion;

/// One index: value → keys of the objects that yield that value.
pub(crate) type Index = HashMap<String, HashSet<ObjectKey>>;

/// A registered index function and its buckets.
pub(crate) struct NamedIndex<K> {
    pub(crate) name: String,
    pub(crate) func: IndexFn<K>,
    pub(crate) buckets: Index,
}

/// Items and indexes. Not thread-safe by itself: the `Indexer` wraps it in a lock.
pub(crate) struct State<K> {
    pub(crate) items: HashMap<ObjectKey, Arc<K>>,
    /// Sorted by name; few entries, so lookups scan.
    pub(crate) indexes: Vec<NamedIndex<K>>,
    /// Where the resource version of the last write that carried one comes from (A6): last
    /// written, not the maximum.
    pub(crate) last_write: LastWrite<K>,
}

/// The last write that carried a resource version. Keeping the object (a shared `Arc`) instead
/// of copying its version string saves an allocation on every add and update; the price is that
/// the last added object stays alive until the next write even if it is deleted by key meanwhile.
pub(crate) enum LastWrite<K> {
    /// An added or updated object.
    Object(Arc<K>),
    /// A delete, a replace or a bookmark.
    Version(ResourceVersion),
}

impl<K: Object> LastWrite<K> {
    pub(crate) fn resource_version(&self) -> ResourceVersion {
        match self {
            LastWrite::Object(obj) => obj.resource_version().unwrap_or("").into(),
            LastWrite::Version(rv) => rv.clone(),
        }
    }
}

fn index_values<K>(
    index: &NamedIndex<K>,
    key: &ObjectKey,
    obj: &K,
) -> Result<Vec<String>, StoreError> {
    (index.func)(obj).map_err(|source| StoreError::IndexFunc {
        index: index.name.clone(),
        key: key.to_string(),
        source,
    })
}

impl<K: Object> State<K> {
    pub(crate) fn new(indexers: &Indexers<K>) -> Self {
        State {
            items: HashMap::new(),
            indexes: indexers
                .iter()
                .map(|(name, func)| NamedIndex {
                    name: name.to_string(),
                    func: Arc::clone(func),
                    buckets: HashMap::new(),
                })
                .collect(),
            last_write: LastWrite::Version(ResourceVersion::default()),
        }
    }

    pub(crate) fn index(&self, name: &str) -> Result<&NamedIndex<K>, StoreError> {
        self.indexes
            .iter()
            .find(|i| i.name == name)
            .ok_or_else(|| StoreError::IndexNotFound(name.to_string()))
    }

    /// Adds or replaces the object under `key`, keeping every index in step (I1–I3); returns the
    /// object it replaced.
    pub(crate) fn upsert(
        &mut self,
        key: ObjectKey,
        obj: Arc<K>,
    ) -> Result<Option<Arc<K>>, StoreError> {
        let old = self.items.get(&key);
        // Compute everything first, so that an index function error changes nothing (I3).
        let mut changes = Vec::with_capacity(self.indexes.len());
        for index in &self.indexes {
            let new_values = index_values(index, &key, &obj)?;
            let old_values = match old {
                Some(old) => index_values(index, &key, old)?,
                None => Vec::new(),
            };
            changes.push((old_values, new_values));
        }
        for (index, (old_values, new_values)) in self.indexes.iter_mut().zip(changes) {
            // Fast path of A4.2: one unchanged value means nothing to do.
            if old_values.len() == 1 && new_values.len() == 1 && old_values[0] == new_values[0] {
                continue;
            }
            for value in old_values.iter().filter(|v| !new_values.contains(v)) {
                remove_from_bucket(&mut index.buckets, value, &key);
            }
            for value in new_values.into_iter().filter(|v| !old_values.contains(v)) {
                index.buckets.entry(value).or_default().insert(key.clone());
            }
        }
        Ok(self.items.insert(key, obj))
    }

    /// Removes `key` from the items and from every index, using the stored object's values.
    pub(crate) fn remove(&mut self, key: &str) -> Result<Option<Arc<K>>, StoreError> {
        let Some((stored_key, old)) = self.items.get_key_value(key) else {
            return Ok(None);
        };
        let mut removals = Vec::with_capacity(self.indexes.len());
        for index in &self.indexes {
            removals.push(index_values(index, stored_key, old)?);
        }
        let stored_key = stored_key.clone();
        for (index, values) in self.indexes.iter_mut().zip(removals) {
            for value in &values {
                remove_from_bucket(&mut index.buckets, value, &stored_key);
            }
        }
        Ok(self.items.remove(key))
    }

    /// Replaces all items and rebuilds every index from scratch (A3.5, A4.4).
    /// Replaces every item and rebuilds every index; returns the items it replaced. On an
    /// indexing error nothing changes.
    pub(crate) fn replace(
        &mut self,
        items: HashMap<ObjectKey, Arc<K>>,
    ) -> Result<HashMap<ObjectKey, Arc<K>>, StoreError> {
        let mut rebuilt = Vec::with_capacity(self.indexes.len());
        for index in &self.indexes {
            rebuilt.push(build_index(index, &items)?);
        }
        for (index, buckets) in self.indexes.iter_mut().zip(rebuilt) {
            index.buckets = buckets;
        }
        Ok(std::mem::replace(&mut self.items, items))
    }

    /// Registers new index functions and indexes every existing item with them (A4.7).
    pub(crate) fn add_indexers(&mut self, new: &Indexers<K>) -> Result<(), StoreError> {
        let conflicts: Vec<String> = new
            .names()
            .filter(|n| self.indexes.iter().any(|i| i.name == *n))
            .map(str::to_string)
            .collect();
        if !conflicts.is_empty() {
            return Err(StoreError::IndexerConflict(conflicts));
        }
        let mut added = Vec::with_capacity(new.len());
        for (name, func) in new.iter() {
            let mut index = NamedIndex {
                name: name.to_string(),
                func: Arc::clone(func),
                buckets: HashMap::new(),
            };
            index.buckets = build_index(&index, &self.items)?;
            added.push(index);
        }
        self.indexes.extend(added);
        self.indexes.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(())
    }
}

fn build_index<K>(
    index: &NamedIndex<K>,
    items: &HashMap<ObjectKey, Arc<K>>,
) -> Result<Index, StoreError> {
    let mut buckets: Index = HashMap::new();
    for (key, obj) in items {
        for value in index_values(index, key, obj)? {
            buckets.entry(value).or_default().insert(key.clone());
        }
    }
    Ok(buckets)
}

fn remove_from_bucket(buckets: &mut Index, value: &str, key: &ObjectKey) {
    if let Some(set) = buckets.get_mut(value) {
        set.remove(key);
        if set.is_empty() {
            buckets.remove(value); // I2
        }
    }
}
