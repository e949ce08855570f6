//! [`Indexer`]: the thread-safe store with named indexes (client-go's `cache.Indexer`).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::error::StoreError;
use crate::index::Indexers;
use crate::key::{meta_namespace_key, KeyFn, ObjectKey};
use crate::object::Object;
use crate::resource_version::ResourceVersion;
use crate::thread_safe_store::{LastWrite, State};
use crate::tombstone::ObjectOrTombstone;

/// A thread-safe store of `Arc<K>` objects with named indexes.
///
/// Cloning an `Indexer` gives another handle to the same store (informers, listers and the
/// DeltaFIFO's `known_objects` all share one). Every read answers from one consistent snapshot;
/// objects are shared, never copied, and must be treated as immutable.
///
/// ```
/// use std::sync::Arc;
/// use store_index::{DynamicObject, Indexer, Indexers, Object};
///
/// let indexer = Indexer::new(Indexers::new().with_namespace_index());
/// indexer.add(Arc::new(DynamicObject::new("v1", "Pod").within("default").named("web-1"))).unwrap();
/// indexer.add(Arc::new(DynamicObject::new("v1", "Pod").within("kube-system").named("dns"))).unwrap();
///
/// let in_default = indexer.by_index("namespace", "default").unwrap();
/// assert_eq!(in_default.len(), 1);
/// assert_eq!(in_default[0].name(), "web-1");
/// assert!(indexer.get_by_key("kube-system/dns").is_some());
/// assert!(indexer.by_index("no-such-index", "x").is_err());
/// ```
pub struct Indexer<K> {
    shared: Arc<Shared<K>>,
}

struct Shared<K> {
    key_fn: KeyFn<K>,
    state: RwLock<State<K>>,
}

impl<K> Clone for Indexer<K> {
    fn clone(&self) -> Self {
        Indexer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K: Object> fmt::Debug for Indexer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state.read();
        f.debug_struct("Indexer")
            .field("items", &state.items.len())
            .field(
                "indexes",
                &state.indexes.iter().map(|i| &i.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<K: Object> Default for Indexer<K> {
    fn default() -> Self {
        Self::new(Indexers::new())
    }
}

impl<K: Object> Indexer<K> {
    /// An empty store keyed by `namespace/name`, with these indexes.
    pub fn new(indexers: Indexers<K>) -> Self {
        Self::with_key_fn(Arc::new(|obj: &K| meta_namespace_key(obj)), indexers)
    }

    /// An empty store with a custom key function.
    pub fn with_key_fn(key_fn: KeyFn<K>, indexers: Indexers<K>) -> Self {
        Indexer {
            shared: Arc::new(Shared {
                key_fn,
                state: RwLock::new(State::new(&indexers)),
            }),
        }
    }

    /// The key of `obj` under this store's key function.
    pub fn key_of(&self, obj: &K) -> Result<ObjectKey, StoreError> {
        (self.shared.key_fn)(obj).map_err(|e| StoreError::key(obj, e))
    }

    /// Inserts or replaces `obj` (add and update are the same operation).
    pub fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.upsert(obj).map(|_| ())
    }

    /// Inserts or replaces `obj` and returns the object it replaced, in one atomic step: the key is
    /// computed once and no other writer can come between the read and the write (what an
    /// informer needs to tell an add from an update).
    pub fn upsert(&self, obj: Arc<K>) -> Result<Option<Arc<K>>, StoreError> {
        let key = self.key_of(&obj)?;
        let mut state = self.shared.state.write();
        let tracked = obj.has_meta().then(|| Arc::clone(&obj));
        let old = state.upsert(key, obj)?;
        if let Some(obj) = tracked {
            state.last_write = LastWrite::Object(obj);
        }
        Ok(old)
    }

    /// Same as [`add`](Self::add).
    pub fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.add(obj)
    }

    /// Removes the object with `obj`'s key (an object, or a tombstone and its own key); a missing
    /// key is a silent no-op. An object is used only for its key and its resource version, which
    /// becomes the last written; a tombstone's leaves that unchanged (its object, if it carries
    /// one, is an older state). Every delete of the workspace takes the same argument.
    pub fn delete(&self, obj: impl Into<ObjectOrTombstone<K>>) -> Result<(), StoreError> {
        match obj.into() {
            ObjectOrTombstone::Object(obj) => {
                let key = self.key_of(&obj)?;
                let mut state = self.shared.state.write();
                state.remove(key.as_str())?;
                if obj.has_meta() {
                    state.last_write =
                        LastWrite::Version(obj.resource_version().unwrap_or("").into());
                }
                Ok(())
            }
            ObjectOrTombstone::Tombstone(t) => self.delete_by_key(t.key.as_str()).map(|_| ()),
        }
    }

    /// Removes the object stored under `key` (a tombstone's key, for instance), returning it.
    /// The tracked resource version is left unchanged.
    pub fn delete_by_key(&self, key: &str) -> Result<Option<Arc<K>>, StoreError> {
        self.shared.state.write().remove(key)
    }

    /// The stored object with `obj`'s key.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, StoreError> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(key.as_str()))
    }

    /// The stored object under `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.shared.state.read().items.get(key).cloned()
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.shared.state.read().items.contains_key(key)
    }

    /// Every stored object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.shared.state.read().items.values().cloned().collect()
    }

    /// Every stored key, in no particular order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.shared.state.read().items.keys().cloned().collect()
    }

    /// Number of stored objects.
    pub fn len(&self) -> usize {
        self.shared.state.read().items.len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Replaces the whole contents atomically and rebuilds every index. If any object cannot be
    /// keyed or indexed, the store is left untouched. With duplicate keys the last one wins.
    /// The tracked resource version becomes `resource_version`, even when empty.
    pub fn replace(
        &self,
        objects: impl IntoIterator<Item = Arc<K>>,
        resource_version: impl Into<ResourceVersion>,
    ) -> Result<(), StoreError> {
        let objects = objects.into_iter();
        let mut items = HashMap::with_capacity(objects.size_hint().0);
        for obj in objects {
            items.insert(self.key_of(&obj)?, obj);
        }
        let mut state = self.shared.state.write();
        state.replace(items)?;
        state.last_write = LastWrite::Version(resource_version.into());
        Ok(())
    }

    /// [`replace`](Self::replace), also returning, under the same lock, what each listed object
    /// replaced (in list order; `None` for a key that held nothing) and the objects removed (held
    /// before, not listed), with their keys: what a consumer needs to notify about a relist
    /// without reading the store again per object or keying every object twice.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use store_index::{DynamicObject, Indexer, Object};
    ///
    /// let pod = |name: &str, rv: &str| Arc::new(DynamicObject::new("v1", "Pod").within("ns").named(name).with_resource_version(rv));
    /// let indexer: Indexer<DynamicObject> = Indexer::default();
    /// indexer.add(pod("a", "1")).unwrap();
    /// indexer.add(pod("gone", "1")).unwrap();
    /// let (previous, removed) = indexer.replace_with_previous(vec![pod("a", "2"), pod("b", "2")], "2").unwrap();
    /// assert_eq!(previous[0].as_ref().unwrap().resource_version(), Some("1"));
    /// assert!(previous[1].is_none());
    /// assert_eq!(removed.len(), 1);
    /// assert_eq!(removed[0].0, "ns/gone");
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn replace_with_previous(
        &self,
        objects: impl IntoIterator<Item = Arc<K>>,
        resource_version: impl Into<ResourceVersion>,
    ) -> Result<(Vec<Option<Arc<K>>>, Vec<(ObjectKey, Arc<K>)>), StoreError> {
        let objects = objects.into_iter();
        let mut items = HashMap::with_capacity(objects.size_hint().0);
        let mut keys = Vec::with_capacity(objects.size_hint().0);
        for obj in objects {
            let key = self.key_of(&obj)?;
            keys.push(key.clone());
            items.insert(key, obj);
        }
        let mut state = self.shared.state.write();
        let old = state.replace(items)?;
        state.last_write = LastWrite::Version(resource_version.into());
        let previous = keys.iter().map(|k| old.get(k).cloned()).collect();
        let removed = old
            .into_iter()
            .filter(|(k, _)| !state.items.contains_key(k))
            .collect();
        Ok((previous, removed))
    }

    /// Does nothing: a plain store has nothing to resync. Present for parity with client-go.
    pub fn resync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Records a bookmark's resource version as the last one written.
    pub fn bookmark(&self, resource_version: impl Into<ResourceVersion>) {
        self.shared.state.write().last_write = LastWrite::Version(resource_version.into());
    }

    /// The resource version of the last write that carried one (not the maximum seen).
    pub fn resource_version(&self) -> ResourceVersion {
        self.shared.state.read().last_write.resource_version()
    }

    /// The stored objects whose key is in the union of the buckets of `obj`'s values under
    /// `index_name`, each once.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, StoreError> {
        let state = self.shared.state.read();
        let index = state.index(index_name)?;
        let values = (index.func)(obj).map_err(|source| StoreError::IndexFunc {
            index: index_name.to_string(),
            key: String::new(),
            source,
        })?;
        let mut out = Vec::new();
        if let [value] = values.as_slice() {
            if let Some(keys) = index.buckets.get(value) {
                out.extend(keys.iter().filter_map(|k| state.items.get(k).cloned()));
            }
            return Ok(out);
        }
        let mut seen: HashSet<&ObjectKey> = HashSet::new();
        for value in &values {
            for key in index.buckets.get(value).into_iter().flatten() {
                if seen.insert(key) {
                    out.extend(state.items.get(key).cloned());
                }
            }
        }
        Ok(out)
    }

    /// The keys in the bucket `value` of index `index_name`, sorted ascending; empty for an unknown
    /// value.
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, StoreError> {
        let state = self.shared.state.read();
        let index = state.index(index_name)?;
        let mut keys: Vec<ObjectKey> = index
            .buckets
            .get(value)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default();
        keys.sort_unstable();
        Ok(keys)
    }

    /// The objects in the bucket `value` of index `index_name`; empty for an unknown value. Costs
    /// time proportional to the answer, not to the store.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, StoreError> {
        let state = self.shared.state.read();
        let index = state.index(index_name)?;
        Ok(index
            .buckets
            .get(value)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| state.items.get(k).cloned())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Every value of index `index_name` that currently has at least one object. An unknown index
    /// gives an empty list, not an error (as client-go does).
    pub fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        let state = self.shared.state.read();
        state
            .index(index_name)
            .map(|index| index.buckets.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The registered index functions.
    pub fn get_indexers(&self) -> Indexers<K> {
        let state = self.shared.state.read();
        let mut indexers = Indexers::new();
        for index in &state.indexes {
            indexers.insert(index.name.clone(), Arc::clone(&index.func));
        }
        indexers
    }

    /// Registers more indexes and indexes every stored object with them at once. Fails with
    /// [`StoreError::IndexerConflict`] and adds nothing if any name is already registered.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), StoreError> {
        self.shared.state.write().add_indexers(&indexers)
    }

    /// Runs `f` on the stored object under `key` while holding the read lock, so the caller can
    /// read a consistent pair of facts without cloning.
    pub fn with_object<R>(&self, key: &str, f: impl FnOnce(Option<&Arc<K>>) -> R) -> R {
        f(self.shared.state.read().items.get(key))
    }

    /// Runs `f` on the state under the write lock: one acquisition, so no reader sees any of
    /// `f`'s writes before all of them (what a transaction needs).
    pub(crate) fn write_state<R>(&self, f: impl FnOnce(&mut State<K>) -> R) -> R {
        f(&mut self.shared.state.write())
    }

    #[cfg(test)]
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&State<K>) -> R) -> R {
        f(&self.shared.state.read())
    }
}

/// Read access by key, as a DeltaFIFO needs it for its `known_objects` (client-go's
/// `KeyListerGetter`).
pub trait KeyListerGetter<K>: Send + Sync {
    /// Every key currently known.
    fn list_keys(&self) -> Vec<ObjectKey>;
    /// The object under `key`; an error means "could not tell", which callers treat differently
    /// from "absent".
    fn get_by_key(&self, key: &str) -> Result<Option<Arc<K>>, StoreError>;
}

impl<K: Object> KeyListerGetter<K> for Indexer<K> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        Indexer::list_keys(self)
    }
    fn get_by_key(&self, key: &str) -> Result<Option<Arc<K>>, StoreError> {
        Ok(Indexer::get_by_key(self, key))
    }
}

#[cfg(test)]
mod proptest_index_invariants {
    //! Checks the invariants of `thread_safe_store.rs` (I1 index = rebuild, I2 no empty bucket,
    //! I3 all or nothing) and that `list_keys` equals a model's key set, after any random sequence
    //! of add, update, delete and replace over objects with random labels.

    use std::collections::{BTreeMap, BTreeSet, HashMap};

    use proptest::prelude::*;

    use super::*;
    use crate::DynamicObject;

    /// `(namespace, name, labels)` of one generated object.
    type Spec = (u8, u8, Vec<(u8, u8)>);

    #[derive(Debug, Clone)]
    enum Op {
        Upsert {
            ns: u8,
            name: u8,
            labels: Vec<(u8, u8)>,
        },
        Delete {
            ns: u8,
            name: u8,
        },
        Replace(Vec<Spec>),
    }

    fn labels() -> impl Strategy<Value = Vec<(u8, u8)>> {
        prop::collection::vec((0u8..4, 0u8..3), 0..4)
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..3, 0u8..6, labels()).prop_map(|(ns, name, labels)| Op::Upsert { ns, name, labels }),
            2 => (0u8..3, 0u8..6).prop_map(|(ns, name)| Op::Delete { ns, name }),
            1 => prop::collection::vec((0u8..3, 0u8..6, labels()), 0..8).prop_map(Op::Replace),
        ]
    }

    fn object(ns: u8, name: u8, labels: &[(u8, u8)]) -> Arc<DynamicObject> {
        let mut o = DynamicObject::new("v1", "Pod")
            .within(format!("ns{ns}"))
            .named(format!("p{name}"));
        for (k, v) in labels {
            o = o.with_label(format!("k{k}"), format!("v{v}"));
        }
        Arc::new(o)
    }

    fn indexers() -> Indexers<DynamicObject> {
        Indexers::new()
            .with_namespace_index()
            // Many values per object: every "key=value" label pair.
            .with("labels", |o: &DynamicObject| {
                Ok(o.labels()
                    .map(|l| l.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default())
            })
            // Zero or one value.
            .with("k0", |o: &DynamicObject| {
                Ok(o.label("k0").map(str::to_string).into_iter().collect())
            })
    }

    fn check(indexer: &Indexer<DynamicObject>, model: &BTreeMap<String, Arc<DynamicObject>>) {
        let keys: BTreeSet<String> = indexer.list_keys().iter().map(|k| k.to_string()).collect();
        let model_keys: BTreeSet<String> = model.keys().cloned().collect();
        assert_eq!(keys, model_keys, "list_keys equals the model's key set");
        indexer.with_state(|state| {
            for index in &state.indexes {
                let mut rebuilt: HashMap<String, BTreeSet<String>> = HashMap::new();
                for (key, obj) in &state.items {
                    for value in (index.func)(obj).unwrap() {
                        rebuilt.entry(value).or_default().insert(key.to_string());
                    }
                }
                let actual: HashMap<String, BTreeSet<String>> = index
                    .buckets
                    .iter()
                    .map(|(v, ks)| (v.clone(), ks.iter().map(|k| k.to_string()).collect()))
                    .collect();
                assert_eq!(actual, rebuilt, "I1: index {} equals a rebuild", index.name);
                assert!(
                    index.buckets.values().all(|b| !b.is_empty()),
                    "I2: no empty bucket in {}",
                    index.name
                );
            }
        });
    }

    proptest! {
        #[test]
        fn indexes_equal_a_rebuild_and_no_bucket_is_empty(ops in prop::collection::vec(op(), 1..60)) {
            let indexer = Indexer::new(indexers());
            let mut model: BTreeMap<String, Arc<DynamicObject>> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Upsert { ns, name, labels } => {
                        let obj = object(ns, name, &labels);
                        model.insert(format!("ns{ns}/p{name}"), Arc::clone(&obj));
                        indexer.update(obj).unwrap();
                    }
                    Op::Delete { ns, name } => {
                        let obj = object(ns, name, &[]);
                        model.remove(&format!("ns{ns}/p{name}"));
                        indexer.delete(&obj).unwrap();
                    }
                    Op::Replace(items) => {
                        let objs: Vec<_> = items.iter().map(|(ns, name, l)| object(*ns, *name, l)).collect();
                        model = objs.iter().map(|o| (format!("{}/{}", o.namespace().unwrap(), o.name()), Arc::clone(o))).collect();
                        indexer.replace(objs, "1").unwrap();
                    }
                }
                check(&indexer, &model);
            }
        }

        #[test]
        fn a_rejected_write_changes_nothing(values in prop::collection::vec(0u8..5, 1..30)) {
            // I3: an index function that fails on value 4 must leave items and indexes unchanged.
            let indexer = Indexer::new(indexers().with("picky", |o: &DynamicObject| {
                if o.label("k1") == Some("v4") { Err("picky".into()) } else { Ok(vec![]) }
            }));
            let mut model: BTreeMap<String, Arc<DynamicObject>> = BTreeMap::new();
            for (i, v) in values.into_iter().enumerate() {
                let obj = object(0, (i % 3) as u8, &[(1, v)]);
                let key = format!("ns0/p{}", i % 3);
                if v == 4 {
                    prop_assert!(indexer.update(obj).is_err());
                } else {
                    indexer.update(Arc::clone(&obj)).unwrap();
                    model.insert(key, obj);
                }
                check(&indexer, &model);
            }
        }
    }
}
