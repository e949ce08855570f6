//! Tombstones: deletions inferred by a relist rather than observed.

use std::sync::Arc;

use crate::error::KeyError;
use crate::key::{meta_namespace_key, ObjectKey};
use crate::object::Object;

/// A deletion that was inferred (a key vanished between two lists) rather than seen as an event:
/// client-go's `DeletedFinalStateUnknown`.
///
/// The key is authoritative. The object is the last state known to the cache, which may be stale,
/// or absent when no copy could be found. Tombstones never nest: building one from a tombstone
/// takes the inner object (see [`ObjectOrTombstone::into_tombstone`]).
#[derive(Debug)]
pub struct DeletedFinalStateUnknown<K> {
    /// The deleted object's key.
    pub key: ObjectKey,
    /// The last known state of the object, if any.
    pub obj: Option<Arc<K>>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        DeletedFinalStateUnknown {
            key: self.key.clone(),
            obj: self.obj.clone(),
        }
    }
}

impl<K> PartialEq for DeletedFinalStateUnknown<K>
where
    K: PartialEq,
{
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.obj == other.obj
    }
}

/// What a delete carries: the object itself or a tombstone.
///
/// This is what delete handlers receive, and what a DeltaFIFO's Deleted delta holds.
#[derive(Debug)]
pub enum ObjectOrTombstone<K> {
    /// An object whose deletion (or other change) was observed.
    Object(Arc<K>),
    /// A deletion inferred by a relist.
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for ObjectOrTombstone<K> {
    fn clone(&self) -> Self {
        match self {
            ObjectOrTombstone::Object(o) => ObjectOrTombstone::Object(Arc::clone(o)),
            ObjectOrTombstone::Tombstone(t) => ObjectOrTombstone::Tombstone(t.clone()),
        }
    }
}

impl<K: PartialEq> PartialEq for ObjectOrTombstone<K> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ObjectOrTombstone::Object(a), ObjectOrTombstone::Object(b)) => a == b,
            (ObjectOrTombstone::Tombstone(a), ObjectOrTombstone::Tombstone(b)) => a == b,
            _ => false,
        }
    }
}

impl<K> From<Arc<K>> for ObjectOrTombstone<K> {
    fn from(obj: Arc<K>) -> Self {
        ObjectOrTombstone::Object(obj)
    }
}

impl<K> From<&Arc<K>> for ObjectOrTombstone<K> {
    fn from(obj: &Arc<K>) -> Self {
        ObjectOrTombstone::Object(Arc::clone(obj))
    }
}

impl<K> From<DeletedFinalStateUnknown<K>> for ObjectOrTombstone<K> {
    fn from(t: DeletedFinalStateUnknown<K>) -> Self {
        ObjectOrTombstone::Tombstone(t)
    }
}

impl<K> ObjectOrTombstone<K> {
    /// True for a tombstone.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, ObjectOrTombstone::Tombstone(_))
    }

    /// The object: the observed one, or the tombstone's last known state (may be absent).
    pub fn object(&self) -> Option<&Arc<K>> {
        match self {
            ObjectOrTombstone::Object(o) => Some(o),
            ObjectOrTombstone::Tombstone(t) => t.obj.as_ref(),
        }
    }

    /// The tombstone, if this is one.
    pub fn tombstone(&self) -> Option<&DeletedFinalStateUnknown<K>> {
        match self {
            ObjectOrTombstone::Tombstone(t) => Some(t),
            ObjectOrTombstone::Object(_) => None,
        }
    }

    /// A tombstone for `key` whose object is this value's object, unwrapping an existing tombstone
    /// so that tombstones never nest.
    pub fn into_tombstone(self, key: ObjectKey) -> DeletedFinalStateUnknown<K> {
        let obj = match self {
            ObjectOrTombstone::Object(o) => Some(o),
            ObjectOrTombstone::Tombstone(t) => t.obj,
        };
        DeletedFinalStateUnknown { key, obj }
    }
}

impl<K: Object> ObjectOrTombstone<K> {
    /// The deletion-handling key (client-go's `DeletionHandlingMetaNamespaceKeyFunc`): a tombstone's
    /// stored key verbatim, otherwise the default `namespace/name` key.
    pub fn key(&self) -> Result<ObjectKey, KeyError> {
        match self {
            ObjectOrTombstone::Object(o) => meta_namespace_key(o.as_ref()),
            ObjectOrTombstone::Tombstone(t) => Ok(t.key.clone()),
        }
    }

    /// The resource version of an observed object; `None` for tombstones, which have no metadata
    /// of their own.
    pub fn resource_version(&self) -> Option<&str> {
        match self {
            ObjectOrTombstone::Object(o) => o.resource_version(),
            ObjectOrTombstone::Tombstone(_) => None,
        }
    }
}

/// The deletion-handling key function as a free function.
pub fn deletion_handling_key<K: Object>(
    value: &ObjectOrTombstone<K>,
) -> Result<ObjectKey, KeyError> {
    value.key()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ObjectMeta;

    #[derive(Debug, PartialEq)]
    struct Pod(ObjectMeta);
    impl Object for Pod {
        fn object_meta(&self) -> Option<&ObjectMeta> {
            Some(&self.0)
        }
    }
    fn pod(ns: &str, name: &str) -> Arc<Pod> {
        Arc::new(Pod(ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..Default::default()
        }))
    }

    #[test]
    fn deletion_handling_key_returns_a_tombstones_key_verbatim() {
        let t: ObjectOrTombstone<Pod> = DeletedFinalStateUnknown {
            key: ObjectKey::from("weird/key/with/slashes"),
            obj: Some(pod("ns", "other")),
        }
        .into();
        assert_eq!(t.key().unwrap(), "weird/key/with/slashes");
        assert_eq!(
            ObjectOrTombstone::Object(pod("ns", "p")).key().unwrap(),
            "ns/p"
        );
    }

    #[test]
    fn tombstones_never_nest() {
        let inner = pod("ns", "p");
        let t: ObjectOrTombstone<Pod> = DeletedFinalStateUnknown {
            key: ObjectKey::from("ns/p"),
            obj: Some(Arc::clone(&inner)),
        }
        .into();
        let again = t.into_tombstone(ObjectKey::from("ns/p"));
        assert!(Arc::ptr_eq(again.obj.as_ref().unwrap(), &inner));
    }

    #[test]
    fn tombstones_have_no_resource_version() {
        let t: ObjectOrTombstone<Pod> = DeletedFinalStateUnknown {
            key: ObjectKey::from("ns/p"),
            obj: Some(pod("ns", "p")),
        }
        .into();
        assert_eq!(t.resource_version(), None);
    }
}
