//! [`DynamicObject`]: any Kubernetes object, typed metadata plus the rest as JSON.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::object::{Object, ObjectMeta};

/// An object of any kind (custom resources, or types the program has no struct for): `apiVersion`,
/// `kind` and `metadata` decoded, every other top-level field kept as JSON in `data`.
///
/// Decoding visits the object's fields once, without serde's buffering `flatten`; encoding writes
/// `apiVersion`, `kind`, `metadata`, then the other fields.
///
/// ```
/// use store_index::{DynamicObject, Object};
/// let obj: DynamicObject = serde_json::from_str(
///     r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"size":3}}"#,
/// ).unwrap();
/// assert_eq!(obj.kind(), Some("Widget"));
/// assert_eq!(obj.name(), "w");
/// assert_eq!(obj.data["spec"]["size"], 3);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DynamicObject {
    /// `apiVersion`, when present.
    pub api_version: Option<String>,
    /// `kind`, when present.
    pub kind: Option<String>,
    /// `metadata` (default when absent).
    pub metadata: ObjectMeta,
    /// Every other top-level field (`spec`, `status`, `data`, …).
    pub data: Map<String, Value>,
}

impl DynamicObject {
    /// An empty object of the given `apiVersion` and `kind`.
    pub fn new(api_version: impl Into<String>, kind: impl Into<String>) -> Self {
        DynamicObject {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            ..Default::default()
        }
    }

    /// Sets the name.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.metadata.name = Some(name.into());
        self
    }

    /// Sets the namespace.
    pub fn within(mut self, namespace: impl Into<String>) -> Self {
        self.metadata.namespace = Some(namespace.into());
        self
    }

    /// Sets the uid.
    pub fn with_uid(mut self, uid: impl Into<String>) -> Self {
        self.metadata.uid = Some(uid.into());
        self
    }

    /// Sets the resource version.
    pub fn with_resource_version(mut self, rv: impl Into<String>) -> Self {
        self.metadata.resource_version = Some(rv.into());
        self
    }

    /// Sets one label.
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
        self
    }

    /// Sets one top-level data field.
    pub fn with_field(mut self, key: impl Into<String>, value: Value) -> Self {
        self.data.insert(key.into(), value);
        self
    }

    /// The value at the JSON pointer `pointer` (RFC 6901, as `serde_json::Value::pointer`)
    /// among the fields other than `apiVersion`, `kind` and `metadata`, or `None` when any step
    /// is missing. Indexing `data["spec"]` panics on an object without a spec; this does not.
    ///
    /// ```
    /// use serde_json::json;
    /// use store_index::DynamicObject;
    ///
    /// let widget = DynamicObject::new("example.com/v1", "Widget").with_field("spec", json!({"size": 3}));
    /// assert_eq!(widget.pointer("/spec/size"), Some(&json!(3)));
    /// assert_eq!(widget.pointer("/status/ready"), None);
    /// assert_eq!(widget.pointer("spec"), None, "a pointer starts with /");
    /// ```
    pub fn pointer(&self, pointer: &str) -> Option<&Value> {
        let rest = pointer.strip_prefix('/')?;
        let (first, tail) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        let first = first.replace("~1", "/").replace("~0", "~");
        self.data.get(&first)?.pointer(tail)
    }
}

impl Object for DynamicObject {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        Some(&self.metadata)
    }
    fn drop_managed_fields(&mut self) -> bool {
        self.metadata.managed_fields = None;
        true
    }
    fn api_version(&self) -> Option<&str> {
        self.api_version.as_deref()
    }
    fn kind(&self) -> Option<&str> {
        self.kind.as_deref()
    }
}

impl Serialize for DynamicObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let extra = usize::from(self.api_version.is_some()) + usize::from(self.kind.is_some());
        let mut map = serializer.serialize_map(Some(extra + 1 + self.data.len()))?;
        if let Some(v) = &self.api_version {
            map.serialize_entry("apiVersion", v)?;
        }
        if let Some(k) = &self.kind {
            map.serialize_entry("kind", k)?;
        }
        map.serialize_entry("metadata", &self.metadata)?;
        for (k, v) in &self.data {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for DynamicObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DynVisitor;
        impl<'de> Visitor<'de> for DynVisitor {
            type Value = DynamicObject;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Kubernetes object (a JSON object)")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut access: A,
            ) -> Result<DynamicObject, A::Error> {
                let mut obj = DynamicObject::default();
                let mut seen_meta = false;
                while let Some(key) = access.next_key::<String>()? {
                    match key.as_str() {
                        "apiVersion" => obj.api_version = access.next_value()?,
                        "kind" => obj.kind = access.next_value()?,
                        "metadata" => {
                            if seen_meta {
                                return Err(de::Error::duplicate_field("metadata"));
                            }
                            seen_meta = true;
                            obj.metadata = access
                                .next_value::<Option<ObjectMeta>>()?
                                .unwrap_or_default();
                        }
                        _ => {
                            let value: Value = access.next_value()?;
                            obj.data.insert(key, value);
                        }
                    }
                }
                Ok(obj)
            }
        }
        deserializer.deserialize_map(DynVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_object_round_trips_unknown_fields() {
        let json = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"n","resourceVersion":"3"},"data":{"k":"v"},"immutable":true}"#;
        let obj: DynamicObject = serde_json::from_str(json).unwrap();
        assert_eq!(obj.resource_version(), Some("3"));
        assert_eq!(obj.data["data"]["k"], "v");
        let back = serde_json::to_value(&obj).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(json).unwrap());
    }

    #[test]
    fn missing_metadata_decodes_as_default() {
        let obj: DynamicObject = serde_json::from_str(r#"{"kind":"X"}"#).unwrap();
        assert_eq!(obj.name(), "");
        assert_eq!(obj.kind(), Some("X"));
    }

    #[test]
    fn non_object_json_is_an_error_not_a_panic() {
        assert!(serde_json::from_str::<DynamicObject>("[1,2]").is_err());
        assert!(serde_json::from_str::<DynamicObject>(r#"{"metadata":5}"#).is_err());
        assert!(serde_json::from_str::<DynamicObject>(r#"{"metadata":{},"metadata":{}}"#).is_err());
    }
}
