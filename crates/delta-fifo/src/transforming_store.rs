//! [`TransformingStore`]: a transformer at the store itself, for a store that a reflector feeds
//! directly, without one of this crate's queues in between (client-go's `TransformFunc` given to
//! whatever store the objects enter); and [`Store`] for the [`Indexer`], so that a reflector can
//! keep a plain cache.
//!
//! The queues of this crate apply their own transformer as objects are queued (contract B7), and
//! an informer installs its transform there. A reflector that writes straight into a cache has
//! no queue to do it; wrapping that cache in a `TransformingStore` applies the transformer on
//! every way in: `add`, `update`, `delete`, `replace`, and the watch-list snapshot, which the
//! reflector builds with [`Store::transform`] (C13.6).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use store_index::{BoxError, Indexer, Object, ObjectKey, ResourceVersion};

use crate::error::FifoError;
use crate::options::Transformer;
use crate::store::Store;

/// A [`Store`] that transforms each object before the wrapped store sees it.
///
/// Every object that enters goes through the transformer first: those of `add`, `update` and
/// `delete` (a deletion's final state, as the reflector hands it), every listed object of
/// `replace`, and [`transform`](Store::transform), where the wrapped store's own transformer,
/// if any, runs after this one. `resync`, resource versions and back-pressure pass through
/// untouched. A transformer error fails that call with [`FifoError::Transform`] and the wrapped
/// store is not called: a `replace` transforms the whole list before handing it on, so a failing
/// object leaves the wrapped store as it was. As every transformer (B7.3) it must be idempotent.
///
/// ```
/// use std::sync::Arc;
/// use delta_fifo::{Store, TransformingStore};
/// use delta_fifo::store_index::{DynamicObject, Indexer, Object};
///
/// let cache: Indexer<DynamicObject> = Indexer::default();
/// // Keeps nothing of the annotations (large, and not needed by this controller).
/// let store = TransformingStore::new(cache.clone(), |pod: Arc<DynamicObject>| {
///     let mut pod = (*pod).clone();
///     pod.metadata.annotations = None;
///     Ok(Arc::new(pod))
/// });
/// let mut pod = DynamicObject::new("v1", "Pod").within("ns").named("p");
/// pod.metadata.annotations = Some([("note".to_string(), "long text".to_string())].into());
/// store.add(Arc::new(pod)).unwrap();
/// assert!(cache.get_by_key("ns/p").unwrap().metadata.annotations.is_none());
/// ```
pub struct TransformingStore<S, K> {
    inner: S,
    transformer: Transformer<K>,
}

impl<S: fmt::Debug, K> fmt::Debug for TransformingStore<S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransformingStore")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S: Clone, K> Clone for TransformingStore<S, K> {
    fn clone(&self) -> Self {
        TransformingStore {
            inner: self.inner.clone(),
            transformer: Arc::clone(&self.transformer),
        }
    }
}

impl<S, K> TransformingStore<S, K> {
    /// Wraps `inner`, transforming with `transformer`.
    pub fn new(
        inner: S,
        transformer: impl Fn(Arc<K>) -> Result<Arc<K>, BoxError> + Send + Sync + 'static,
    ) -> Self {
        Self::with_transformer(inner, Arc::new(transformer))
    }

    /// Wraps `inner`, with a shared transformer (the one an informer's `set_transform` takes).
    pub fn with_transformer(inner: S, transformer: Transformer<K>) -> Self {
        TransformingStore { inner, transformer }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn apply(&self, obj: Arc<K>) -> Result<Arc<K>, FifoError> {
        (self.transformer)(obj).map_err(FifoError::Transform)
    }
}

impl<S: Store<K>, K: Send + Sync> Store<K> for TransformingStore<S, K> {
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.inner.add(self.apply(obj)?)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.inner.update(self.apply(obj)?)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.inner.delete(self.apply(obj)?)
    }
    fn replace(
        &self,
        list: Vec<Arc<K>>,
        resource_version: &ResourceVersion,
    ) -> Result<(), FifoError> {
        let list = list
            .into_iter()
            .map(|obj| self.apply(obj))
            .collect::<Result<Vec<_>, _>>()?;
        self.inner.replace(list, resource_version)
    }
    fn resync(&self) -> Result<(), FifoError> {
        self.inner.resync()
    }
    fn transform(&self, obj: Arc<K>) -> Result<Arc<K>, FifoError> {
        self.inner.transform(self.apply(obj)?)
    }
    fn update_resource_version(&self, resource_version: &ResourceVersion) {
        self.inner.update_resource_version(resource_version)
    }
    fn has_room(&self) -> bool {
        self.inner.has_room()
    }
    fn wait_for_room(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.inner.wait_for_room()
    }
    fn key(&self, obj: &K) -> Result<ObjectKey, FifoError>
    where
        K: Object,
    {
        self.inner.key(obj)
    }
}

/// A plain cache as a reflector's store (client-go's reflector writing into a `cache.Store`):
/// `add`/`update` write the object, `delete` removes its key, `replace` swaps the whole contents
/// atomically with the list's resource version, `resync` does nothing, and every resource version
/// the reflector reaches is recorded as the cache's (A6). Errors are the cache's, as
/// [`FifoError::Store`].
impl<K: Object> Store<K> for Indexer<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        Ok(Indexer::add(self, obj)?)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        Ok(Indexer::update(self, obj)?)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        Ok(Indexer::delete(self, obj)?)
    }
    fn replace(
        &self,
        list: Vec<Arc<K>>,
        resource_version: &ResourceVersion,
    ) -> Result<(), FifoError> {
        Ok(Indexer::replace(self, list, resource_version.clone())?)
    }
    fn resync(&self) -> Result<(), FifoError> {
        Ok(Indexer::resync(self)?)
    }
    fn update_resource_version(&self, resource_version: &ResourceVersion) {
        self.bookmark(resource_version.clone());
    }
    fn key(&self, obj: &K) -> Result<ObjectKey, FifoError> {
        Ok(self.key_of(obj)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store_index::DynamicObject;

    fn pod(name: &str, rv: &str) -> Arc<DynamicObject> {
        Arc::new(
            DynamicObject::new("v1", "Pod")
                .within("ns")
                .named(name)
                .with_resource_version(rv),
        )
    }

    /// Marks each object it sees with a label; refuses objects named `bad`.
    fn marking() -> TransformingStore<Indexer<DynamicObject>, DynamicObject> {
        TransformingStore::new(Indexer::default(), |obj: Arc<DynamicObject>| {
            if obj.name() == "bad" {
                return Err("refused".into());
            }
            Ok(Arc::new((*obj).clone().with_label("transformed", "yes")))
        })
    }

    fn marked(store: &TransformingStore<Indexer<DynamicObject>, DynamicObject>) -> Vec<String> {
        let mut names: Vec<String> = store
            .inner()
            .list()
            .iter()
            .filter(|o| o.labels().is_some_and(|l| l.contains_key("transformed")))
            .map(|o| o.name().to_string())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn every_way_in_is_transformed() {
        let store = marking();
        store.add(pod("a", "1")).unwrap();
        store.update(pod("a", "2")).unwrap();
        assert_eq!(marked(&store), ["a"]);
        store
            .replace(vec![pod("b", "3"), pod("c", "3")], &"3".into())
            .unwrap();
        assert_eq!(marked(&store), ["b", "c"]);
        assert_eq!(store.inner().resource_version().as_str(), "3");
        let snapshot = store.transform(pod("d", "4")).unwrap();
        assert!(snapshot.labels().unwrap().contains_key("transformed"));
        store.delete(pod("b", "5")).unwrap();
        assert_eq!(marked(&store), ["c"]);
        store.update_resource_version(&"6".into());
        assert_eq!(store.inner().resource_version().as_str(), "6");
    }

    #[test]
    fn a_failing_transform_changes_nothing() {
        let store = marking();
        store.add(pod("a", "1")).unwrap();
        let err = store.add(pod("bad", "2")).unwrap_err();
        assert_eq!(err.to_string(), "transforming: refused");
        let err = store
            .replace(vec![pod("b", "3"), pod("bad", "3")], &"3".into())
            .unwrap_err();
        assert!(matches!(err, FifoError::Transform(_)));
        assert_eq!(marked(&store), ["a"], "the cache is as it was");
        assert_eq!(store.inner().resource_version().as_str(), "1");
    }

    #[test]
    fn a_queue_below_applies_its_own_transformer_after() {
        let fifo = crate::DeltaFifo::new(crate::DeltaFifoOptions::new().transformer(
            |obj: Arc<DynamicObject>| Ok(Arc::new((*obj).clone().with_label("queue", "yes"))),
        ));
        let store = TransformingStore::new(fifo, |obj: Arc<DynamicObject>| {
            Ok(Arc::new((*obj).clone().with_label("store", "yes")))
        });
        let out = Store::transform(&store, pod("a", "1")).unwrap();
        let labels = out.labels().unwrap();
        assert!(labels.contains_key("store") && labels.contains_key("queue"));
    }
}
