//! Protobuf answers made comparable: the envelope (`k8s\0` and `runtime.Unknown`) read field by
//! field, the object's message decoded to JSON with Kubernetes' own `.proto` descriptors (so
//! its values are normalised as a JSON answer's are), and the message's *shape*: the field
//! numbers in the order they are written, nested where a field holds a message. The shape is
//! what byte equality would judge once values are set aside: a field written that the other
//! server leaves out, or fields written in another order, shows there even where the decoded
//! JSON is the same.
//!
//! In the decoded object, zero values (`false`, `0`, `""`, empty maps and lists) are left out:
//! protobuf decodes an absent field and a zero one alike (Go writes most zeros, a `proto3`-style
//! encoder none), so the object compares what a client reads, and the shape what was sent.

use serde_json::{json, Value};

/// The magic of every protobuf object body.
const MAGIC: &[u8] = b"k8s\0";

/// How deep the shape follows nested messages (Kubernetes' objects are far shallower).
const MAX_DEPTH: usize = 32;

/// `body`, a protobuf answer, as `{"envelope": .., "shape": [..], "object": ..}`, or a
/// description of why it is not one.
pub fn describe(body: &[u8]) -> Value {
    let Some(envelope) = body.strip_prefix(MAGIC) else {
        return json!({"not_protobuf": format!("no `k8s\\0` magic; {} bytes", body.len())});
    };
    let Some(fields) = fields(envelope) else {
        return json!({"malformed": "the runtime.Unknown does not parse"});
    };
    let text =
        |field: &Field<'_>| String::from_utf8_lossy(field.bytes().unwrap_or(&[])).into_owned();
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    let mut envelope_fields = Vec::new();
    let mut content = serde_json::Map::new();
    for field in &fields {
        envelope_fields.push(field.number);
        match field.number {
            1 => {
                for meta in fields_of(field.bytes().unwrap_or(&[])) {
                    match meta.number {
                        1 => api_version = text(&meta),
                        2 => kind = text(&meta),
                        _ => {}
                    }
                }
            }
            2 => raw = field.bytes().unwrap_or(&[]),
            3 => {
                content.insert("contentEncoding".into(), text(field).into());
            }
            4 => {
                content.insert("contentType".into(), text(field).into());
            }
            _ => {}
        }
    }
    let object = match reflector::protobuf::transcode::decode_message_as(&api_version, &kind, raw) {
        Ok(mut object) => {
            drop_zeros(&mut object);
            object
        }
        Err(e) => json!({"undecodable": e.to_string()}),
    };
    json!({
        "envelope": {
            "apiVersion": api_version,
            "kind": kind,
            "fields": envelope_fields,
            "content": content,
        },
        "shape": shape(raw, 0),
        "object": object,
    })
}

/// Removes the members of `value` (at any depth) that protobuf cannot tell from absent.
fn drop_zeros(value: &mut Value) {
    match value {
        Value::Object(members) => {
            for child in members.values_mut() {
                drop_zeros(child);
            }
            members.retain(|_, v| !is_zero(v));
        }
        Value::Array(items) => items.iter_mut().for_each(drop_zeros),
        _ => {}
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// One field of a message as written.
struct Field<'a> {
    number: u64,
    value: FieldValue<'a>,
}

enum FieldValue<'a> {
    Scalar,
    Bytes(&'a [u8]),
}

impl<'a> Field<'a> {
    fn bytes(&self) -> Option<&'a [u8]> {
        match self.value {
            FieldValue::Bytes(b) => Some(b),
            FieldValue::Scalar => None,
        }
    }
}

/// The fields of `message`, or `None` when it does not parse as a message to its end.
fn fields(message: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < message.len() {
        let key = varint(message, &mut at)?;
        let number = key >> 3;
        if number == 0 {
            return None;
        }
        let value = match key & 7 {
            0 => {
                varint(message, &mut at)?;
                FieldValue::Scalar
            }
            1 => {
                at = at.checked_add(8).filter(|end| *end <= message.len())?;
                FieldValue::Scalar
            }
            5 => {
                at = at.checked_add(4).filter(|end| *end <= message.len())?;
                FieldValue::Scalar
            }
            2 => {
                let len = usize::try_from(varint(message, &mut at)?).ok()?;
                let end = at.checked_add(len).filter(|end| *end <= message.len())?;
                let bytes = &message[at..end];
                at = end;
                FieldValue::Bytes(bytes)
            }
            _ => return None,
        };
        out.push(Field { number, value });
    }
    Some(out)
}

/// The fields of `message`, none when it does not parse.
fn fields_of(message: &[u8]) -> Vec<Field<'_>> {
    fields(message).unwrap_or_default()
}

fn varint(data: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *data.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The shape of `message`: one string per top-level field, `N` for a scalar or a string,
/// `N{...}` for a nested message (a length-delimited field that is not text and parses as one).
fn shape(message: &[u8], depth: usize) -> Vec<String> {
    fields_of(message)
        .iter()
        .map(|field| field_shape(field, depth))
        .collect()
}

fn field_shape(field: &Field<'_>, depth: usize) -> String {
    match field.value {
        FieldValue::Bytes(bytes) if depth < MAX_DEPTH && !is_text(bytes) => match fields(bytes) {
            Some(inner) if !inner.is_empty() => {
                let parts: Vec<String> = inner.iter().map(|f| field_shape(f, depth + 1)).collect();
                format!("{}{{{}}}", field.number, parts.join(" "))
            }
            _ => field.number.to_string(),
        },
        _ => field.number.to_string(),
    }
}

/// Whether `bytes` read as printable text (a string field, not a message).
fn is_text(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|s| {
        s.chars()
            .all(|c| !c.is_control() || matches!(c, '\n' | '\t' | '\r'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configmap_is_described_by_envelope_shape_and_object() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "n", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "data": {"k": "v"}});
        let body = reflector::protobuf::transcode::encode_object(&cm).unwrap();
        let described = describe(&body);
        assert_eq!(described["envelope"]["kind"], "ConfigMap");
        assert_eq!(described["object"]["data"]["k"], "v");
        // metadata (1) holds name (1), namespace (3) and creationTimestamp (8, a Time message of
        // seconds and nanos, both written as Go writes them);
        // data (2) is a map entry of key (1) and value (2).
        assert_eq!(described["shape"], json!(["1{1 3 8{1 2}}", "2{1 2}"]));
    }

    #[test]
    fn zeros_are_absent() {
        let mut v =
            json!({"a": 0, "b": false, "c": "", "d": {"e": []}, "f": 1, "g": [0, {"h": ""}]});
        drop_zeros(&mut v);
        assert_eq!(v, json!({"f": 1, "g": [0, {}]}));
    }

    #[test]
    fn a_body_without_the_magic_says_so() {
        assert!(describe(b"{}").get("not_protobuf").is_some());
    }
}
