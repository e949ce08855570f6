//! Predicates: which updates of the primary resource are worth a reconcile.
//!
//! A [`Predicate`] looks at an update (the object before and after) and says whether to
//! enqueue its key. Additions always enqueue (a new object, or one seen for the first time after
//! a restart, must be reconciled); updates, periodic resyncs' included, enqueue only when the
//! predicates let them through (a resync's old and new are the same object, so
//! [`generation_changed`] filters them, as controller-runtime's predicate of that name does).
//! Predicates given to the builder are combined with *and*; [`Predicate::or`] combines two
//! with *or*.
//!
//! ```
//! use controller::builder::predicate::{generation_changed, labels_changed, Predicate};
//! use controller::workqueue::shared_informer::reflector::store_index::{DynamicObject, Object};
//!
//! let spec_or_labels = generation_changed::<DynamicObject>().or(labels_changed());
//! let old = DynamicObject::new("v1", "ConfigMap").named("a");
//! let new = old.clone().with_label("tier", "web");
//! assert!(spec_or_labels.accepts(&old, &new));
//! assert!(!spec_or_labels.accepts(&old, &old));
//! let named_web = Predicate::new(|_old: &DynamicObject, new: &DynamicObject| new.name() == "web");
//! assert!(!named_web.accepts(&old, &new));
//! ```

use std::fmt;
use std::sync::Arc;

use workqueue::shared_informer::reflector::store_index::Object;

/// The test of a [`Predicate`]: `accepts(old, new)`.
type Accepts<K> = dyn Fn(&K, &K) -> bool + Send + Sync;

/// Whether an update of an object (`old` → `new`) is worth reconciling.
pub struct Predicate<K> {
    accepts: Arc<Accepts<K>>,
}

impl<K> Clone for Predicate<K> {
    fn clone(&self) -> Self {
        Self {
            accepts: Arc::clone(&self.accepts),
        }
    }
}

impl<K> fmt::Debug for Predicate<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Predicate").finish_non_exhaustive()
    }
}

impl<K: 'static> Predicate<K> {
    /// A predicate of your own: `accepts(old, new)`.
    pub fn new(accepts: impl Fn(&K, &K) -> bool + Send + Sync + 'static) -> Self {
        Self {
            accepts: Arc::new(accepts),
        }
    }

    /// Whether the update `old` → `new` passes.
    pub fn accepts(&self, old: &K, new: &K) -> bool {
        (self.accepts)(old, new)
    }

    /// Passes when either passes.
    #[must_use]
    pub fn or(self, other: Predicate<K>) -> Self {
        Self::new(move |old, new| self.accepts(old, new) || other.accepts(old, new))
    }
}

/// The spec changed (`metadata.generation` moved), or deletion was requested: status-only
/// writes, the controller's own included, and resyncs do not pass. Deletion passes even where a
/// server does not bump the generation for it, so a finalizer's cleanup is never filtered out.
pub fn generation_changed<K: Object>() -> Predicate<K> {
    Predicate::new(|old: &K, new: &K| {
        old.generation() != new.generation()
            || (old.deletion_timestamp().is_none() && new.deletion_timestamp().is_some())
    })
}

/// The labels changed.
pub fn labels_changed<K: Object>() -> Predicate<K> {
    Predicate::new(|old: &K, new: &K| old.labels() != new.labels())
}

/// The annotations changed.
pub fn annotations_changed<K: Object>() -> Predicate<K> {
    Predicate::new(|old: &K, new: &K| old.annotations() != new.annotations())
}

#[cfg(test)]
mod tests {
    use super::*;
    use workqueue::shared_informer::reflector::store_index::DynamicObject;

    fn widget(generation: i64) -> DynamicObject {
        let mut w = DynamicObject::new("example.com/v1", "Widget").named("w");
        w.metadata.generation = Some(generation);
        w
    }

    #[test]
    fn generation_changed_passes_spec_changes_and_deletion_only() {
        let p = generation_changed::<DynamicObject>();
        assert!(p.accepts(&widget(1), &widget(2)));
        assert!(
            !p.accepts(&widget(1), &widget(1)),
            "a resync or a status write"
        );
        let mut deleting = widget(1);
        deleting.metadata.deletion_timestamp = Some("2026-11-29T10:00:00Z".into());
        assert!(p.accepts(&widget(1), &deleting));
        assert!(!p.accepts(&deleting, &deleting));
    }

    #[test]
    fn labels_and_annotations_compare_their_maps() {
        let plain = widget(1);
        let labelled = plain.clone().with_label("a", "b");
        assert!(labels_changed().accepts(&plain, &labelled));
        assert!(!labels_changed().accepts(&labelled, &labelled));
        let mut annotated = plain.clone();
        annotated.metadata.annotations = Some([("k".to_string(), "v".to_string())].into());
        assert!(annotations_changed().accepts(&plain, &annotated));
        assert!(!annotations_changed().accepts(&plain, &labelled));
    }
}
