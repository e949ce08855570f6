//! [`DeletedObject`]: what a typed delete handler receives (contract rule A1.7).
//!
//! A delete reaches a handler either as the object whose deletion was seen, or as a tombstone when
//! the deletion was inferred by a relist (A2). Handlers mostly want the name and the key, and
//! making every one of them match on [`ObjectOrTombstone`] — and handle a key that will not split —
//! is busywork; so this type answers `name`, `namespace` and `key` for both cases and never fails.

use std::sync::Arc;

use crate::key::ObjectKey;
use crate::object::Object;
use crate::tombstone::{DeletedFinalStateUnknown, ObjectOrTombstone};

/// A deleted object: the object, when one is known, and the tombstone, when the deletion was
/// inferred rather than observed.
///
/// Built from an [`ObjectOrTombstone`]: an observed deletion gives an object and no tombstone; a
/// tombstone gives the tombstone and, as the object, its last known state (which may be stale, or
/// absent).
///
/// The accessors never fail (A1.7):
/// - with a tombstone, the tombstone's key decides: it is split on its **first** `/` only, so extra
///   slashes stay in the name and a key without a slash is a name alone;
/// - without a tombstone, the object's metadata answers;
/// - with neither, the name, namespace and key are empty.
///
/// ```
/// use std::sync::Arc;
/// use store_index::{DeletedFinalStateUnknown, DeletedObject, DynamicObject, ObjectOrTombstone};
///
/// let seen = DeletedObject::from(ObjectOrTombstone::Object(Arc::new(
///     DynamicObject::new("v1", "Pod").within("ns").named("web"),
/// )));
/// assert_eq!((seen.namespace(), seen.name()), ("ns", "web"));
/// assert_eq!(seen.key(), "ns/web");
///
/// let inferred: DeletedObject<DynamicObject> = DeletedObject::from(ObjectOrTombstone::from(
///     DeletedFinalStateUnknown { key: "ns/odd/name".into(), obj: None },
/// ));
/// assert_eq!((inferred.namespace(), inferred.name()), ("ns", "odd/name"));
/// assert_eq!(inferred.key(), "ns/odd/name");
/// assert!(inferred.object.is_none());
/// ```
#[derive(Debug)]
pub struct DeletedObject<K> {
    /// The deleted object, or a tombstone's last known state of it; `None` when no copy is known.
    pub object: Option<Arc<K>>,
    /// The tombstone, when the deletion was inferred by a relist.
    pub tombstone: Option<DeletedFinalStateUnknown<K>>,
}

impl<K> Clone for DeletedObject<K> {
    fn clone(&self) -> Self {
        DeletedObject {
            object: self.object.clone(),
            tombstone: self.tombstone.clone(),
        }
    }
}

impl<K> Default for DeletedObject<K> {
    /// Neither object nor tombstone: empty name, namespace and key.
    fn default() -> Self {
        DeletedObject {
            object: None,
            tombstone: None,
        }
    }
}

impl<K> From<ObjectOrTombstone<K>> for DeletedObject<K> {
    fn from(value: ObjectOrTombstone<K>) -> Self {
        match value {
            ObjectOrTombstone::Object(obj) => DeletedObject {
                object: Some(obj),
                tombstone: None,
            },
            ObjectOrTombstone::Tombstone(tombstone) => DeletedObject {
                object: tombstone.obj.clone(),
                tombstone: Some(tombstone),
            },
        }
    }
}

impl<K> From<Arc<K>> for DeletedObject<K> {
    fn from(obj: Arc<K>) -> Self {
        ObjectOrTombstone::Object(obj).into()
    }
}

impl<K> From<DeletedFinalStateUnknown<K>> for DeletedObject<K> {
    fn from(tombstone: DeletedFinalStateUnknown<K>) -> Self {
        ObjectOrTombstone::Tombstone(tombstone).into()
    }
}

impl<K> DeletedObject<K> {
    /// True when the deletion was inferred by a relist (there is a tombstone).
    pub fn is_tombstone(&self) -> bool {
        self.tombstone.is_some()
    }

    /// The tombstone key split on its first `/`: `(namespace, name)`, or `("", key)` without one.
    fn split_tombstone_key(key: &str) -> (&str, &str) {
        key.split_once('/').unwrap_or(("", key))
    }
}

impl<K: Object> DeletedObject<K> {
    /// The name: from the tombstone's key when there is a tombstone (everything after its first
    /// `/`), otherwise the object's; `""` when neither is known.
    pub fn name(&self) -> &str {
        match (&self.tombstone, &self.object) {
            (Some(t), _) => Self::split_tombstone_key(t.key.as_str()).1,
            (None, Some(obj)) => obj.name(),
            (None, None) => "",
        }
    }

    /// The namespace: from the tombstone's key when there is a tombstone (everything before its
    /// first `/`, `""` without one), otherwise the object's; `""` for cluster-scoped objects and
    /// when neither is known.
    pub fn namespace(&self) -> &str {
        match (&self.tombstone, &self.object) {
            (Some(t), _) => Self::split_tombstone_key(t.key.as_str()).0,
            (None, Some(obj)) => obj.namespace().unwrap_or(""),
            (None, None) => "",
        }
    }

    /// The key: the tombstone's key verbatim when there is a tombstone (it is authoritative, A1.4),
    /// otherwise `namespace/name` (or `name`) of the object; empty when neither is known. Unlike a
    /// key function this never fails: an object without metadata gives the empty key.
    pub fn key(&self) -> ObjectKey {
        match (&self.tombstone, &self.object) {
            (Some(t), _) => t.key.clone(),
            (None, Some(obj)) => ObjectKey::new(obj.namespace().unwrap_or(""), obj.name()),
            (None, None) => ObjectKey::from(""),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicObject;

    fn pod(ns: &str, name: &str) -> Arc<DynamicObject> {
        Arc::new(DynamicObject::new("v1", "Pod").within(ns).named(name))
    }

    fn tombstone(key: &str, obj: Option<Arc<DynamicObject>>) -> DeletedObject<DynamicObject> {
        DeletedFinalStateUnknown {
            key: ObjectKey::from(key),
            obj,
        }
        .into()
    }

    #[test]
    fn an_observed_deletion_reads_the_object() {
        let d = DeletedObject::from(pod("ns", "a"));
        assert!(!d.is_tombstone());
        assert_eq!(
            (d.namespace(), d.name(), d.key().as_str()),
            ("ns", "a", "ns/a")
        );
        let cluster = DeletedObject::from(pod("", "node1"));
        assert_eq!(
            (cluster.namespace(), cluster.name(), cluster.key().as_str()),
            ("", "node1", "node1")
        );
    }

    #[test]
    fn a_tombstone_key_is_split_on_its_first_slash_only() {
        let d = tombstone("ns/a/b", None);
        assert_eq!((d.namespace(), d.name()), ("ns", "a/b"));
        assert_eq!(d.key(), "ns/a/b");
    }

    #[test]
    fn a_tombstone_key_without_a_slash_is_a_name_alone() {
        let d = tombstone("node1", None);
        assert_eq!(
            (d.namespace(), d.name(), d.key().as_str()),
            ("", "node1", "node1")
        );
    }

    #[test]
    fn a_tombstone_key_wins_over_its_stale_object() {
        let d = tombstone("ns/new-name", Some(pod("other", "old-name")));
        assert!(d.is_tombstone());
        assert_eq!((d.namespace(), d.name()), ("ns", "new-name"));
        assert_eq!(d.key(), "ns/new-name");
        assert_eq!(d.object.as_ref().unwrap().name(), "old-name");
    }

    #[test]
    fn edge_keys_split_without_failing() {
        let d = tombstone("/b", None);
        assert_eq!((d.namespace(), d.name()), ("", "b"));
        let d = tombstone("a/", None);
        assert_eq!((d.namespace(), d.name()), ("a", ""));
        let d = tombstone("", None);
        assert_eq!((d.namespace(), d.name(), d.key().as_str()), ("", "", ""));
    }

    #[test]
    fn neither_object_nor_tombstone_gives_empty_answers() {
        let d = DeletedObject::<DynamicObject>::default();
        assert_eq!((d.namespace(), d.name(), d.key().as_str()), ("", "", ""));
    }

    #[derive(Debug)]
    struct Opaque;
    impl Object for Opaque {}

    #[test]
    fn an_object_without_metadata_gives_an_empty_key_not_an_error() {
        let d = DeletedObject::from(Arc::new(Opaque));
        assert_eq!((d.namespace(), d.name(), d.key().as_str()), ("", "", ""));
    }
}
