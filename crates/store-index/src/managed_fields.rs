//! `metadata.managedFields` cut out of an object's raw JSON or protobuf message, for
//! [`CompactObject::drop_managed_fields`](crate::Object::drop_managed_fields): the bytes before
//! and after the member are kept as they are, so every other field, its order and its spelling
//! stay the server's.
//!
//! Invariant MF1 (tested below): the cut JSON decodes to the original object's `Value` without
//! `metadata.managedFields`, and is the original bytes when there were none; the cut message is
//! the original's fields, in order and byte for byte, but the metadata's `managedFields`
//! (field 17 of field 1), the metadata's length written again.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::protobuf::wire::{put_bytes, Field, Reader};
use crate::protobuf::ProtobufError;

/// The object's `metadata`, only as far as its `managedFields` member.
#[derive(Deserialize)]
struct Top<'a> {
    #[serde(borrow, default)]
    metadata: Option<Meta<'a>>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(borrow, default, rename = "managedFields")]
    managed_fields: Option<&'a RawValue>,
}

/// `raw` (one JSON object) without `metadata.managedFields`: `None` when it has none (or is not
/// an object this can read, which the caller keeps as it is).
pub(crate) fn json_without_managed_fields(raw: &[u8]) -> Option<Vec<u8>> {
    let has = |needle: &[u8]| raw.windows(needle.len()).any(|w| w == needle);
    // A key written with escapes is found by the decoding below, not by this look.
    if !has(b"\"managedFields\"") && !has(b"\\u") {
        return None;
    }
    let top: Top<'_> = serde_json::from_slice(raw).ok()?;
    let value = top.metadata?.managed_fields?.get().as_bytes();
    let start = (value.as_ptr() as usize).checked_sub(raw.as_ptr() as usize)?;
    let end = start + value.len();
    let Some((from, to)) = member_span(raw, start, end) else {
        return rewritten(raw);
    };
    let mut cut = Vec::with_capacity(raw.len() - (to - from));
    cut.extend_from_slice(&raw[..from]);
    cut.extend_from_slice(&raw[to..]);
    Some(cut)
}

/// The bytes to remove for the member whose value is `raw[start..end]`: its key, the colon,
/// the value and one comma beside it (the one before, else the one after). `None` when the key
/// is not written plainly as `"managedFields"` (escaped, say).
fn member_span(raw: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    const KEY: &[u8] = b"\"managedFields\"";
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let colon = start
        - raw[..start]
            .iter()
            .rev()
            .take_while(|b| is_space(b))
            .count();
    let key_end = colon.checked_sub(1).filter(|&c| raw[c] == b':')?;
    let key_end = key_end
        - raw[..key_end]
            .iter()
            .rev()
            .take_while(|b| is_space(b))
            .count();
    let key_start = key_end.checked_sub(KEY.len())?;
    if &raw[key_start..key_end] != KEY {
        return None;
    }
    let before = key_start
        - raw[..key_start]
            .iter()
            .rev()
            .take_while(|b| is_space(b))
            .count();
    if before > 0 && raw[before - 1] == b',' {
        return Some((before - 1, end));
    }
    let after = end + raw[end..].iter().take_while(|b| is_space(b)).count();
    if raw.get(after) == Some(&b',') {
        return Some((key_start, after + 1));
    }
    Some((key_start, end))
}

/// `raw` decoded, its `metadata.managedFields` removed, and written again: for a key the cut
/// cannot find in place.
fn rewritten(raw: &[u8]) -> Option<Vec<u8>> {
    let mut value: serde_json::Value = serde_json::from_slice(raw).ok()?;
    value
        .get_mut("metadata")?
        .as_object_mut()?
        .remove("managedFields")?;
    let mut out = serde_json::to_vec(&value).ok()?;
    out.shrink_to_fit();
    Some(out)
}

/// The object message `message` without its metadata's `managedFields` (field 17 of the
/// metadata, field 1): `None` when it has none. A message that does not read as one is an error.
pub(crate) fn protobuf_without_managed_fields(
    message: &[u8],
) -> Result<Option<Vec<u8>>, ProtobufError> {
    let mut out = Vec::with_capacity(message.len());
    let mut cut = false;
    let mut fields = Reader::new(message, "object");
    loop {
        let start = message.len() - fields.rest().len();
        let Some(field) = fields.next_field()? else {
            break;
        };
        let whole = &message[start..message.len() - fields.rest().len()];
        match field {
            Field::Bytes(1, meta) => match meta_without_managed_fields(meta)? {
                Some(meta) => {
                    put_bytes(&mut out, 1, &meta);
                    cut = true;
                }
                None => out.extend_from_slice(whole),
            },
            _ => out.extend_from_slice(whole),
        }
    }
    // Kept by the object for as long as it is cached: at its length, not the original's.
    out.shrink_to_fit();
    Ok(cut.then_some(out))
}

/// An `ObjectMeta` message without its field 17, or `None` when it has none.
fn meta_without_managed_fields(meta: &[u8]) -> Result<Option<Vec<u8>>, ProtobufError> {
    let mut out = Vec::with_capacity(meta.len());
    let mut cut = false;
    let mut fields = Reader::new(meta, "ObjectMeta");
    loop {
        let start = meta.len() - fields.rest().len();
        let Some(field) = fields.next_field()? else {
            break;
        };
        match field {
            Field::Bytes(17, _) => cut = true,
            _ => out.extend_from_slice(&meta[start..meta.len() - fields.rest().len()]),
        }
    }
    Ok(cut.then_some(out))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::*;

    fn without(mut v: Value) -> Value {
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        v
    }

    /// MF1, for one text.
    fn check(text: &str) {
        let original: Value = serde_json::from_str(text).unwrap();
        match json_without_managed_fields(text.as_bytes()) {
            Some(cut) => {
                let cut: Value = serde_json::from_slice(&cut).unwrap();
                assert_eq!(cut, without(original), "{text}");
            }
            None => assert_eq!(without(original.clone()), original, "{text}"),
        }
    }

    #[test]
    fn the_member_is_cut_wherever_it_stands_in_the_metadata() {
        let mf = r#"[{"manager":"m","fieldsV1":{"f:metadata":{}}}]"#;
        for text in [
            format!(r#"{{"metadata":{{"managedFields":{mf},"name":"a"}},"spec":{{}}}}"#),
            format!(r#"{{"metadata":{{"name":"a","managedFields":{mf}}}}}"#),
            format!(r#"{{"metadata":{{"managedFields":{mf}}},"x":1}}"#),
            format!(
                r#"{{ "metadata" : {{ "name" : "a" , "managedFields" : {mf} , "uid" : "u" }} }}"#
            ),
            format!(r#"{{"metadata":{{"name":"a","manag\u0065dFields":{mf}}}}}"#),
        ] {
            check(&text);
        }
    }

    #[test]
    fn an_object_without_them_is_left_as_it_is() {
        let text = r#"{"metadata":{"name":"a"},"spec":{"note":"managedFields"}}"#;
        assert_eq!(json_without_managed_fields(text.as_bytes()), None);
        // A field of the same name outside the metadata stays.
        let text = r#"{"metadata":{"name":"a"},"spec":{"managedFields":[1]}}"#;
        assert_eq!(json_without_managed_fields(text.as_bytes()), None);
    }

    #[test]
    fn every_type_that_can_hold_them_drops_them_and_keeps_the_rest() {
        use crate::{CompactObject, DynamicObject, Object, PartialObjectMetadata};
        let text = sim_apiserver::fixtures::realistic_pod_json(3);
        let original: Value = serde_json::from_str(&text).unwrap();
        assert!(original["metadata"]["managedFields"].is_array());
        let bare = without(original.clone());

        let mut dynamic: DynamicObject = serde_json::from_str(&text).unwrap();
        assert!(dynamic.drop_managed_fields());
        assert_eq!(serde_json::to_value(&dynamic).unwrap(), bare);

        let mut partial: PartialObjectMetadata = serde_json::from_str(&text).unwrap();
        assert!(partial.drop_managed_fields());
        assert_eq!(partial.metadata.managed_fields, None);
        assert_eq!(partial.name(), dynamic.name());

        let mut compact = CompactObject::from_json(bytes::Bytes::from(text.clone())).unwrap();
        assert!(compact.drop_managed_fields());
        assert_eq!(compact.decode::<Value>().unwrap(), bare);
        assert_eq!(compact.metadata(), &dynamic.metadata);
        assert_eq!(compact.label("app"), Some("web"));

        // A protobuf message without them stays as it is, byte for byte.
        let message = bytes::Bytes::from_static(b"\x0a\x03\x0a\x01p");
        let mut pb = CompactObject::from_protobuf(message.clone(), "v1", "Pod").unwrap();
        assert!(pb.drop_managed_fields());
        assert_eq!(pb.raw(), &message);

        #[cfg(feature = "k8s-openapi")]
        {
            let mut pod: k8s_openapi::api::core::v1::Pod = serde_json::from_str(&text).unwrap();
            assert!(pod.drop_managed_fields());
            let typed_bare: k8s_openapi::api::core::v1::Pod =
                serde_json::from_value(bare.clone()).unwrap();
            assert_eq!(pod, typed_bare);
        }
        #[cfg(feature = "k8s-pb")]
        {
            use crate::k8s_pb::api::core::v1::Pod;
            use crate::k8s_pb::apimachinery::pkg::apis::meta::v1::{
                ManagedFieldsEntry, ObjectMeta,
            };
            let mut pod = crate::Pb(Pod {
                metadata: Some(ObjectMeta {
                    name: Some("p".into()),
                    managed_fields: vec![ManagedFieldsEntry::default()],
                    ..Default::default()
                }),
                ..Default::default()
            });
            assert!(pod.drop_managed_fields());
            let meta = pod.metadata.as_ref().unwrap();
            assert!(meta.managed_fields.is_empty());
            assert_eq!(meta.name.as_deref(), Some("p"));
        }
    }

    #[test]
    fn a_protobuf_message_loses_its_metadata_field_17_and_nothing_else() {
        use crate::protobuf::wire::put_varint;
        use crate::{CompactObject, Object};
        // metadata { name "p", managedFields {manager "m"} x2, labels {app: web}, generation 3 },
        // spec { ... } (field 2), then a field after it.
        let mut meta = Vec::new();
        put_bytes(&mut meta, 1, b"p");
        put_bytes(&mut meta, 17, b"\x0a\x01m");
        let mut label = Vec::new();
        put_bytes(&mut label, 1, b"app");
        put_bytes(&mut label, 2, b"web");
        put_bytes(&mut meta, 11, &label);
        put_bytes(&mut meta, 17, b"\x0a\x02mm");
        put_varint(&mut meta, 7 << 3);
        put_varint(&mut meta, 3);
        let message = |meta: &[u8]| {
            let mut m = Vec::new();
            put_bytes(&mut m, 1, meta);
            put_bytes(&mut m, 2, b"\x12\x03abc");
            put_bytes(&mut m, 3, b"status");
            m
        };
        let mut bare = Vec::new();
        put_bytes(&mut bare, 1, b"p");
        put_bytes(&mut bare, 11, &label);
        put_varint(&mut bare, 7 << 3);
        put_varint(&mut bare, 3);
        assert_eq!(
            protobuf_without_managed_fields(&message(&meta)).unwrap(),
            Some(message(&bare))
        );
        assert_eq!(
            protobuf_without_managed_fields(&message(&bare)).unwrap(),
            None
        );
        assert!(protobuf_without_managed_fields(b"\x0a\x05ab").is_err());

        let mut object =
            CompactObject::from_protobuf(bytes::Bytes::from(message(&meta)), "v1", "Pod").unwrap();
        assert!(object.drop_managed_fields());
        assert_eq!(object.raw().as_ref(), message(&bare).as_slice());
        assert_eq!((object.name(), object.label("app")), ("p", Some("web")));
        assert_eq!(
            (object.kind(), object.api_version()),
            (Some("Pod"), Some("v1"))
        );
        assert_eq!(object.metadata().managed_fields, None);
    }

    proptest! {
        /// MF1 over metadata of other members before and after it, with spaces around.
        #[test]
        fn the_cut_object_is_the_object_without_the_member(
            before in prop::collection::vec("[a-z]{1,6}", 0..3),
            after in prop::collection::vec("[a-z]{1,6}", 0..3),
            space in "[ \n]{0,2}",
        ) {
            let mut members: Vec<String> =
                before.iter().map(|k| format!(r#""b{k}":{space}"{k}""#)).collect();
            members.push(format!(r#""managedFields"{space}:{space}{}"#, json!([{"manager": "m"}])));
            members.extend(after.iter().map(|k| format!(r#""a{k}":{space}[1,2]"#)));
            let text = format!(r#"{{"metadata":{{{}}},"spec":{{}}}}"#, members.join(&format!(",{space}")));
            check(&text);
        }
    }
}
