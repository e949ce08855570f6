//! Listers: read-only, selector-filtered views of an [`Indexer`](crate::Indexer).

use std::sync::Arc;

use crate::index::NAMESPACE_INDEX;
use crate::key::ObjectKey;
use crate::object::Object;
use crate::read_only::ReadOnlyIndexer;
use crate::selector::Selector;

/// A read-only view of an indexer, for controllers (client-go's generated listers).
///
/// ```
/// use std::sync::Arc;
/// use store_index::{DynamicObject, Indexer, Indexers, Lister, Selector};
///
/// let indexer = Indexer::new(Indexers::new().with_namespace_index());
/// let pod = |ns: &str, name: &str, app: &str| {
///     Arc::new(DynamicObject::new("v1", "Pod").within(ns).named(name).with_label("app", app))
/// };
/// indexer.add(pod("a", "web-1", "web")).unwrap();
/// indexer.add(pod("a", "db-1", "db")).unwrap();
/// indexer.add(pod("b", "web-2", "web")).unwrap();
///
/// let lister = Lister::new(indexer);
/// let web: Selector = "app=web".parse().unwrap();
/// assert_eq!(lister.list(&web).len(), 2);
/// assert_eq!(lister.namespaced("a").list(&web).len(), 1);
/// assert!(lister.namespaced("b").get("web-2").is_some());
/// ```
pub struct Lister<K> {
    indexer: ReadOnlyIndexer<K>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Lister {
            indexer: self.indexer.clone(),
        }
    }
}

// Here rather than in `read_only.rs`: the read-only view sits below the listers built on it.
impl<K: Object> ReadOnlyIndexer<K> {
    /// A lister over the same objects.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.clone())
    }
}

impl<K: Object> Lister<K> {
    /// A lister over `indexer` (an [`Indexer`](crate::Indexer) or a read-only view of one).
    pub fn new(indexer: impl Into<ReadOnlyIndexer<K>>) -> Self {
        Lister {
            indexer: indexer.into(),
        }
    }

    /// Every object whose labels match `selector`.
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        let mut all = self.indexer.list();
        if !selector.is_empty() {
            all.retain(|o| selector.matches_object(o.as_ref()));
        }
        all
    }

    /// The cluster-scoped object named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.indexer.get_by_key(name)
    }

    /// A view of one namespace.
    pub fn namespaced(&self, namespace: impl Into<String>) -> NamespaceLister<K> {
        NamespaceLister {
            indexer: self.indexer.clone(),
            namespace: namespace.into(),
        }
    }

    /// The indexer behind this lister, read-only.
    pub fn indexer(&self) -> &ReadOnlyIndexer<K> {
        &self.indexer
    }
}

/// A lister restricted to one namespace.
pub struct NamespaceLister<K> {
    indexer: ReadOnlyIndexer<K>,
    namespace: String,
}

impl<K: Object> NamespaceLister<K> {
    /// The objects of this namespace whose labels match `selector`. Uses the namespace index when
    /// the indexer has one, otherwise scans.
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        let mut objects = match self.indexer.by_index(NAMESPACE_INDEX, &self.namespace) {
            Ok(objects) => objects,
            Err(_) => {
                let mut all = self.indexer.list();
                all.retain(|o| o.namespace().unwrap_or("") == self.namespace);
                all
            }
        };
        if !selector.is_empty() {
            objects.retain(|o| selector.matches_object(o.as_ref()));
        }
        objects
    }

    /// The object named `name` in this namespace.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.indexer
            .get_by_key(ObjectKey::new(&self.namespace, name).as_str())
    }
}
