//! Index functions and the built-in namespace index.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::error::BoxError;
use crate::object::Object;

/// An index function: the zero, one or many "indexed values" of an object.
///
/// It must be deterministic (the same object always yields the same values): the store removes an
/// object from its old buckets by computing the old object's values again.
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Result<Vec<String>, BoxError> + Send + Sync>;

/// The name of the standard namespace index.
pub const NAMESPACE_INDEX: &str = "namespace";

/// A set of named index functions.
///
/// ```
/// use store_index::{DynamicObject, Indexers, Object};
/// let indexers: Indexers<DynamicObject> = Indexers::new()
///     .with_namespace_index()
///     .with("app", |obj: &DynamicObject| Ok(obj.label("app").map(str::to_string).into_iter().collect()));
/// assert_eq!(indexers.names().collect::<Vec<_>>(), ["app", "namespace"]);
/// ```
pub struct Indexers<K> {
    fns: BTreeMap<String, IndexFn<K>>,
}

impl<K> Clone for Indexers<K> {
    fn clone(&self) -> Self {
        Indexers {
            fns: self.fns.clone(),
        }
    }
}

impl<K> Default for Indexers<K> {
    fn default() -> Self {
        Indexers {
            fns: BTreeMap::new(),
        }
    }
}

impl<K> fmt::Debug for Indexers<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.fns.keys()).finish()
    }
}

impl<K: Object> Indexers<K> {
    /// No index functions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the index function `name`.
    pub fn with<F>(mut self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&K) -> Result<Vec<String>, BoxError> + Send + Sync + 'static,
    {
        self.fns.insert(name.into(), Arc::new(f));
        self
    }

    /// Adds the standard namespace index ([`NAMESPACE_INDEX`], [`namespace_index_fn`]).
    pub fn with_namespace_index(mut self) -> Self {
        self.fns.insert(
            NAMESPACE_INDEX.to_string(),
            Arc::new(namespace_index_fn::<K>),
        );
        self
    }

    /// Adds an already shared index function.
    pub fn insert(&mut self, name: impl Into<String>, f: IndexFn<K>) {
        self.fns.insert(name.into(), f);
    }

    /// The index names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.fns.keys().map(String::as_str)
    }

    /// The function registered under `name`.
    pub fn get(&self, name: &str) -> Option<&IndexFn<K>> {
        self.fns.get(name)
    }

    /// Number of index functions.
    pub fn len(&self) -> usize {
        self.fns.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.fns.is_empty()
    }

    /// Iterates over `(name, function)` pairs, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &IndexFn<K>)> {
        self.fns.iter().map(|(k, v)| (k.as_str(), v))
    }
}

/// The error of the namespace index for an object without metadata.
#[derive(Debug, thiserror::Error)]
#[error("object has no meta")]
pub struct NoMetaError;

/// The standard namespace index function: one value, the namespace (`""` for cluster-scoped
/// objects). Fails for objects without metadata.
pub fn namespace_index_fn<K: Object>(obj: &K) -> Result<Vec<String>, BoxError> {
    if !obj.has_meta() {
        return Err(Box::new(NoMetaError));
    }
    Ok(vec![obj.namespace().unwrap_or("").to_string()])
}
