//! Object keys: `namespace/name` for namespaced objects, `name` for cluster-scoped ones.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use crate::error::KeyError;
use crate::object::Object;

/// The storage key of an object: `namespace/name`, or `name` when the namespace is empty.
///
/// Keys are shared (`Arc<str>`), because the same key sits in the store, in every index bucket and
/// in the FIFO's queue; cloning one never copies the string.
///
/// ```
/// use store_index::ObjectKey;
/// let key = ObjectKey::new("default", "pod1");
/// assert_eq!(key.as_str(), "default/pod1");
/// assert_eq!(key.split().unwrap(), ("default", "pod1"));
/// assert_eq!(ObjectKey::new("", "node1").as_str(), "node1");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(Arc<str>);

impl ObjectKey {
    /// Builds the key of an object in `namespace` (empty for cluster-scoped) named `name`.
    /// No escaping: a `/` inside a name is kept as is.
    pub fn new(namespace: &str, name: &str) -> Self {
        if namespace.is_empty() {
            return ObjectKey(Arc::from(name));
        }
        // Assemble short keys on the stack so the `Arc` is the only allocation (keys are built on
        // every write).
        const STACK: usize = 256;
        let len = namespace.len() + 1 + name.len();
        if len <= STACK {
            let mut buf = [0u8; STACK];
            buf[..namespace.len()].copy_from_slice(namespace.as_bytes());
            buf[namespace.len()] = b'/';
            buf[namespace.len() + 1..len].copy_from_slice(name.as_bytes());
            if let Ok(key) = std::str::from_utf8(&buf[..len]) {
                return ObjectKey(Arc::from(key));
            }
        }
        let mut s = String::with_capacity(len);
        s.push_str(namespace);
        s.push('/');
        s.push_str(name);
        ObjectKey(Arc::from(s))
    }

    /// Wraps a string that already is a key (an "explicit key"), unchanged.
    pub fn from_raw(key: impl Into<Arc<str>>) -> Self {
        ObjectKey(key.into())
    }

    /// The key as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Splits the key into `(namespace, name)`; see [`split_meta_namespace_key`].
    pub fn split(&self) -> Result<(&str, &str), KeyError> {
        split_meta_namespace_key(&self.0)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ObjectKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ObjectKey {
    fn from(s: &str) -> Self {
        ObjectKey(Arc::from(s))
    }
}

impl From<String> for ObjectKey {
    fn from(s: String) -> Self {
        ObjectKey(Arc::from(s))
    }
}

impl PartialEq<str> for ObjectKey {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for ObjectKey {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

/// A key function: computes an object's storage key.
pub type KeyFn<K> = std::sync::Arc<dyn Fn(&K) -> Result<ObjectKey, KeyError> + Send + Sync>;

/// The default key function (client-go's `MetaNamespaceKeyFunc`).
///
/// Fails with [`KeyError::NoMeta`] (text `object has no meta`) when the object has no metadata.
pub fn meta_namespace_key<K: Object + ?Sized>(obj: &K) -> Result<ObjectKey, KeyError> {
    if !obj.has_meta() {
        return Err(KeyError::NoMeta);
    }
    Ok(ObjectKey::new(obj.namespace().unwrap_or(""), obj.name()))
}

/// Splits a key into `(namespace, name)`.
///
/// One part gives `("", part)`, two parts `(first, second)`, three or more parts an error.
/// Empty segments are allowed: `"/b"` gives `("", "b")`, `"a/"` gives `("a", "")`.
pub fn split_meta_namespace_key(key: &str) -> Result<(&str, &str), KeyError> {
    let mut parts = key.split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, _) => Ok(("", name)),
        (Some(namespace), Some(name), None) => Ok((namespace, name)),
        _ => Err(KeyError::UnexpectedFormat(key.to_string())),
    }
}

/// A `(namespace, name)` pair whose string form is exactly the object key (client-go's
/// `ObjectName`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ObjectName {
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectName {
    /// Builds a name from its parts.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectName {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The name of an object.
    pub fn of<K: Object + ?Sized>(obj: &K) -> Self {
        ObjectName::new(obj.namespace().unwrap_or(""), obj.name())
    }

    /// Parses a key (see [`split_meta_namespace_key`]).
    pub fn parse(key: &str) -> Result<Self, KeyError> {
        let (namespace, name) = split_meta_namespace_key(key)?;
        Ok(ObjectName::new(namespace, name))
    }

    /// The storage key.
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(&self.namespace, &self.name)
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ObjectMeta;

    struct Meta(ObjectMeta);
    impl Object for Meta {
        fn object_meta(&self) -> Option<&ObjectMeta> {
            Some(&self.0)
        }
    }
    struct NoMeta;
    impl Object for NoMeta {}

    fn obj(ns: Option<&str>, name: &str) -> Meta {
        Meta(ObjectMeta {
            namespace: ns.map(str::to_string),
            name: Some(name.to_string()),
            ..Default::default()
        })
    }

    #[test]
    fn key_is_namespace_slash_name_or_just_name() {
        assert_eq!(
            meta_namespace_key(&obj(Some("default"), "pod1")).unwrap(),
            "default/pod1"
        );
        assert_eq!(meta_namespace_key(&obj(None, "node1")).unwrap(), "node1");
        assert_eq!(meta_namespace_key(&obj(Some(""), "x")).unwrap(), "x");
    }

    #[test]
    fn slash_in_a_name_is_not_escaped() {
        assert_eq!(meta_namespace_key(&obj(Some("a"), "b/c")).unwrap(), "a/b/c");
    }

    #[test]
    fn object_without_meta_has_no_key() {
        let err = meta_namespace_key(&NoMeta).unwrap_err();
        assert!(err.to_string().starts_with("object has no meta"), "{err}");
    }

    #[test]
    fn split_handles_one_two_and_empty_segments() {
        assert_eq!(split_meta_namespace_key("a").unwrap(), ("", "a"));
        assert_eq!(split_meta_namespace_key("a/b").unwrap(), ("a", "b"));
        assert_eq!(split_meta_namespace_key("/b").unwrap(), ("", "b"));
        assert_eq!(split_meta_namespace_key("a/").unwrap(), ("a", ""));
    }

    #[test]
    fn split_of_leading_slash_re_encodes_without_it() {
        assert_eq!(ObjectName::parse("/b").unwrap().to_string(), "b");
        assert_eq!(ObjectName::parse("/b").unwrap().key(), "b");
    }

    #[test]
    fn split_rejects_three_parts() {
        let err = split_meta_namespace_key("a/b/c").unwrap_err();
        assert_eq!(err.to_string(), r#"unexpected key format: "a/b/c""#);
    }

    #[test]
    fn object_name_string_form_is_the_key() {
        let n = ObjectName::of(&obj(Some("ns"), "p"));
        assert_eq!(n.to_string(), "ns/p");
        assert_eq!(n.key(), "ns/p");
        assert_eq!(ObjectName::of(&obj(None, "p")).to_string(), "p");
    }
}
