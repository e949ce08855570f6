//! `meta.v1.ObjectMeta` read straight off the wire: field 1 of every top-level built-in object,
//! so it can be read without knowing the rest of the kind's message.
//!
//! Go writes every non-pointer field, empty ones included, while kube-apiserver's JSON omits
//! them: an empty string, a zero `generation` and an empty `Time` read here as absent, so that an
//! object's metadata reads the same whichever encoding it came in.

use std::collections::BTreeMap;

use crate::object::{ObjectMeta, OwnerReference};
use crate::time::format_rfc3339;

use super::wire::{utf8, Field, Reader};
use super::ProtobufError;

/// `metadata` (field 1) of a top-level object's message; default metadata when it has none.
pub fn object_meta_of(message: &[u8]) -> Result<ObjectMeta, ProtobufError> {
    let mut fields = Reader::new(message, "object");
    let mut meta = ObjectMeta::default();
    while let Some(f) = fields.next_field()? {
        if let Field::Bytes(1, m) = f {
            meta = object_meta(m)?;
        }
    }
    Ok(meta)
}

/// The range of `metadata` (field 1) inside a top-level object's message, if it has one: what a
/// caller needs to decode the metadata alone later.
pub(crate) fn object_meta_bytes(message: &[u8]) -> Result<Option<&[u8]>, ProtobufError> {
    let mut fields = Reader::new(message, "object");
    let mut found = None;
    while let Some(f) = fields.next_field()? {
        if let Field::Bytes(1, m) = f {
            found = Some(m);
        }
    }
    Ok(found)
}

pub(crate) fn string(bytes: &[u8], what: &'static str) -> Result<Option<String>, ProtobufError> {
    let s = utf8(bytes, what)?;
    Ok((!s.is_empty()).then(|| s.to_string()))
}

/// A `meta.v1.Time` (seconds, nanos) as kube-apiserver's JSON writes it (whole seconds);
/// `None` for an empty message (Go's zero time, absent from JSON).
pub(crate) fn time(bytes: &[u8]) -> Result<Option<String>, ProtobufError> {
    let mut fields = Reader::new(bytes, "meta.v1.Time");
    let (mut seconds, mut seen) = (0i64, false);
    while let Some(f) = fields.next_field()? {
        if let Field::Varint(1, v) = f {
            // Two's complement, as protobuf writes a negative int64.
            seconds = v as i64;
            seen = true;
        }
    }
    Ok(seen.then(|| format_rfc3339(seconds, 0, 0)))
}

/// A `map<string, string>` entry (key 1, value 2).
pub(crate) fn map_entry(
    bytes: &[u8],
    what: &'static str,
) -> Result<(String, String), ProtobufError> {
    let mut fields = Reader::new(bytes, what);
    let (mut k, mut v) = (String::new(), String::new());
    while let Some(f) = fields.next_field()? {
        match f {
            Field::Bytes(1, b) => k = utf8(b, what)?.to_string(),
            Field::Bytes(2, b) => v = utf8(b, what)?.to_string(),
            _ => {}
        }
    }
    Ok((k, v))
}

fn owner_reference(bytes: &[u8]) -> Result<OwnerReference, ProtobufError> {
    const WHAT: &str = "meta.v1.OwnerReference";
    let mut fields = Reader::new(bytes, WHAT);
    let mut o = OwnerReference::default();
    while let Some(f) = fields.next_field()? {
        match f {
            Field::Bytes(1, b) => o.kind = utf8(b, WHAT)?.to_string(),
            Field::Bytes(3, b) => o.name = utf8(b, WHAT)?.to_string(),
            Field::Bytes(4, b) => o.uid = utf8(b, WHAT)?.to_string(),
            Field::Bytes(5, b) => o.api_version = utf8(b, WHAT)?.to_string(),
            Field::Varint(6, v) => o.controller = Some(v != 0),
            Field::Varint(7, v) => o.block_owner_deletion = Some(v != 0),
            _ => {}
        }
    }
    Ok(o)
}

/// A `ManagedFieldsEntry` in its JSON shape (the metadata keeps managed fields as JSON).
fn managed_fields_entry(bytes: &[u8]) -> Result<serde_json::Value, ProtobufError> {
    const WHAT: &str = "meta.v1.ManagedFieldsEntry";
    let mut fields = Reader::new(bytes, WHAT);
    let mut out = serde_json::Map::new();
    let mut put = |k: &str, b: &[u8]| -> Result<(), ProtobufError> {
        if let Some(s) = string(b, WHAT)? {
            out.insert(k.to_string(), s.into());
        }
        Ok(())
    };
    let mut rest = Vec::new();
    while let Some(f) = fields.next_field()? {
        match f {
            Field::Bytes(1, b) => put("manager", b)?,
            Field::Bytes(2, b) => put("operation", b)?,
            Field::Bytes(3, b) => put("apiVersion", b)?,
            Field::Bytes(6, b) => put("fieldsType", b)?,
            Field::Bytes(8, b) => put("subresource", b)?,
            Field::Bytes(n @ (4 | 7), b) => rest.push((n, b)),
            _ => {}
        }
    }
    for (n, b) in rest {
        if n == 4 {
            if let Some(t) = time(b)? {
                out.insert("time".into(), t.into());
            }
            continue;
        }
        // FieldsV1 { raw = 1 }: the field set, itself JSON.
        let mut raw = Reader::new(b, "meta.v1.FieldsV1");
        while let Some(f) = raw.next_field()? {
            if let Field::Bytes(1, json) = f {
                let v = serde_json::from_slice(json).map_err(|_| ProtobufError::Malformed {
                    what: "meta.v1.FieldsV1",
                    why: "raw field set that is not JSON",
                })?;
                out.insert("fieldsV1".into(), v);
            }
        }
    }
    Ok(serde_json::Value::Object(out))
}

/// Decodes a `meta.v1.ObjectMeta` message.
pub fn object_meta(bytes: &[u8]) -> Result<ObjectMeta, ProtobufError> {
    const WHAT: &str = "meta.v1.ObjectMeta";
    let mut fields = Reader::new(bytes, WHAT);
    let mut m = ObjectMeta::default();
    let mut labels = BTreeMap::new();
    let mut annotations = BTreeMap::new();
    let mut owners = Vec::new();
    let mut finalizers = Vec::new();
    let mut managed = Vec::new();
    while let Some(f) = fields.next_field()? {
        match f {
            Field::Bytes(1, b) => m.name = string(b, WHAT)?,
            Field::Bytes(2, b) => m.generate_name = string(b, WHAT)?,
            Field::Bytes(3, b) => m.namespace = string(b, WHAT)?,
            Field::Bytes(4, b) => m.self_link = string(b, WHAT)?,
            Field::Bytes(5, b) => m.uid = string(b, WHAT)?,
            Field::Bytes(6, b) => m.resource_version = string(b, WHAT)?,
            Field::Varint(7, v) => m.generation = (v != 0).then_some(v as i64),
            Field::Bytes(8, b) => m.creation_timestamp = time(b)?,
            Field::Bytes(9, b) => m.deletion_timestamp = time(b)?,
            Field::Varint(10, v) => m.deletion_grace_period_seconds = Some(v as i64),
            Field::Bytes(11, b) => {
                let (k, v) = map_entry(b, WHAT)?;
                labels.insert(k, v);
            }
            Field::Bytes(12, b) => {
                let (k, v) = map_entry(b, WHAT)?;
                annotations.insert(k, v);
            }
            Field::Bytes(13, b) => owners.push(owner_reference(b)?),
            Field::Bytes(14, b) => finalizers.push(utf8(b, WHAT)?.to_string()),
            Field::Bytes(17, b) => managed.push(managed_fields_entry(b)?),
            _ => {}
        }
    }
    m.labels = (!labels.is_empty()).then_some(labels);
    m.annotations = (!annotations.is_empty()).then_some(annotations);
    m.owner_references = (!owners.is_empty()).then_some(owners);
    m.finalizers = (!finalizers.is_empty()).then_some(finalizers);
    m.managed_fields = (!managed.is_empty()).then_some(managed);
    Ok(m)
}
