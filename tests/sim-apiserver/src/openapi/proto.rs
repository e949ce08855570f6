//! The protobuf form of `/openapi/v2` (gnostic's `openapi.v2.Document`), which is the only form
//! client-go's discovery client reads: it asks for
//! `application/com.github.proto-openapi.spec.v2@v1.0+protobuf` and unmarshals the body as
//! protobuf, falling back to another protobuf URL, never to JSON.
//!
//! Only what kubectl reads is encoded: `swagger`, `info`, an empty `paths` (kubectl takes the
//! `fieldValidation` check from `/openapi/v3`) and every definition, with its vendor extensions
//! (`Any.yaml` holds the extension's value as JSON text, which is YAML too). Written by hand
//! from the message layout rather than with a protobuf code generator: a dozen fields of four
//! messages do not justify a build-time dependency.

use serde_json::{Map, Value};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes(out, field, s.as_bytes());
}

fn boolean(out: &mut Vec<u8>, field: u32, b: bool) {
    tag(out, field, 0);
    varint(out, u64::from(b));
}

fn int64(out: &mut Vec<u8>, field: u32, i: i64) {
    tag(out, field, 0);
    varint(out, i as u64);
}

fn double(out: &mut Vec<u8>, field: u32, f: f64) {
    tag(out, field, 1);
    out.extend_from_slice(&f.to_le_bytes());
}

/// `openapi.v2.Any` with the value as YAML (JSON text).
fn any(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 2, &v.to_string());
    out
}

fn named(name: &str, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, name);
    bytes(&mut out, 2, value);
    out
}

/// `openapi.v2.Schema` from a Swagger 2.0 schema object.
fn schema(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Value::Object(m) = v else { return out };
    let s = |k: &str| m.get(k).and_then(Value::as_str);
    let b = |k: &str| m.get(k).and_then(Value::as_bool);
    for (field, k) in [(1, "$ref"), (2, "format"), (3, "title"), (4, "description")] {
        if let Some(x) = s(k) {
            string(&mut out, field, x);
        }
    }
    schema_constraints(m, &mut out);
    schema_shape(m, &mut out);
    if let Some(x) = s("discriminator") {
        string(&mut out, 26, x);
    }
    if let Some(x) = b("readOnly") {
        boolean(&mut out, 27, x);
    }
    if let Some(e) = m.get("example") {
        bytes(&mut out, 30, &any(e));
    }
    for (k, v) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
        bytes(&mut out, 31, &named(k, &any(v)));
    }
    out
}

/// A schema's fields 5 to 20: its default and what it constrains a value to (bounds, lengths,
/// pattern, required fields, enum), in field order.
fn schema_constraints(m: &Map<String, Value>, out: &mut Vec<u8>) {
    let n = |k: &str| m.get(k).and_then(Value::as_f64);
    let i = |k: &str| m.get(k).and_then(Value::as_i64);
    let b = |k: &str| m.get(k).and_then(Value::as_bool);
    if let Some(d) = m.get("default") {
        bytes(out, 5, &any(d));
    }
    for (field, k) in [(6, "multipleOf"), (7, "maximum"), (9, "minimum")] {
        if let Some(x) = n(k) {
            double(out, field, x);
        }
    }
    for (field, k) in [
        (8, "exclusiveMaximum"),
        (10, "exclusiveMinimum"),
        (16, "uniqueItems"),
    ] {
        if let Some(x) = b(k) {
            boolean(out, field, x);
        }
    }
    for (field, k) in [
        (11, "maxLength"),
        (12, "minLength"),
        (14, "maxItems"),
        (15, "minItems"),
        (17, "maxProperties"),
        (18, "minProperties"),
    ] {
        if let Some(x) = i(k) {
            int64(out, field, x);
        }
    }
    if let Some(x) = m.get("pattern").and_then(Value::as_str) {
        string(out, 13, x);
    }
    for r in m
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(r) = r.as_str() {
            string(out, 19, r);
        }
    }
    for e in m
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        bytes(out, 20, &any(e));
    }
}

/// A schema's fields 21 to 25: its shape (additional properties, type, items, allOf,
/// properties), the nested schemas encoded in turn, in field order.
fn schema_shape(m: &Map<String, Value>, out: &mut Vec<u8>) {
    match m.get("additionalProperties") {
        Some(Value::Bool(x)) => {
            let mut item = Vec::new();
            boolean(&mut item, 2, *x);
            bytes(out, 21, &item);
        }
        Some(a @ Value::Object(_)) => {
            let mut item = Vec::new();
            bytes(&mut item, 1, &schema(a));
            bytes(out, 21, &item);
        }
        _ => {}
    }
    match m.get("type") {
        Some(Value::String(t)) => {
            let mut item = Vec::new();
            string(&mut item, 1, t);
            bytes(out, 22, &item);
        }
        Some(Value::Array(ts)) => {
            let mut item = Vec::new();
            ts.iter()
                .filter_map(Value::as_str)
                .for_each(|t| string(&mut item, 1, t));
            bytes(out, 22, &item);
        }
        _ => {}
    }
    match m.get("items") {
        Some(o @ Value::Object(_)) => {
            let mut item = Vec::new();
            bytes(&mut item, 1, &schema(o));
            bytes(out, 23, &item);
        }
        Some(Value::Array(a)) => {
            let mut item = Vec::new();
            a.iter().for_each(|o| bytes(&mut item, 1, &schema(o)));
            bytes(out, 23, &item);
        }
        _ => {}
    }
    for a in m
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        bytes(out, 24, &schema(a));
    }
    if let Some(Value::Object(props)) = m.get("properties") {
        let mut p = Vec::new();
        for (k, v) in props {
            bytes(&mut p, 1, &named(k, &schema(v)));
        }
        bytes(out, 25, &p);
    }
}

/// Encodes the JSON Swagger document `doc` (from [`super::swagger`]) as a gnostic
/// `openapi.v2.Document`.
pub fn swagger_protobuf(doc: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(
        &mut out,
        1,
        doc.get("swagger").and_then(Value::as_str).unwrap_or("2.0"),
    );
    let mut info = Vec::new();
    for (field, k) in [(1, "title"), (2, "version")] {
        if let Some(x) = doc.pointer(&format!("/info/{k}")).and_then(Value::as_str) {
            string(&mut info, field, x);
        }
    }
    bytes(&mut out, 2, &info);
    bytes(&mut out, 8, &[]);
    let empty = Map::new();
    let defs = doc
        .get("definitions")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut d = Vec::new();
    for (name, s) in defs {
        bytes(&mut d, 1, &named(name, &schema(s)));
    }
    bytes(&mut out, 9, &d);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_fields_with_their_numbers_and_wire_types() {
        // Schema{type: TypeItem{value: "string"}, description: "d"}
        let s = schema(&json!({"type": "string", "description": "d"}));
        assert_eq!(
            s,
            [0x22, 1, b'd', 0xb2, 0x01, 8, 0x0a, 6, b's', b't', b'r', b'i', b'n', b'g']
        );
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
        // x-extension: field 31, NamedAny{name, Any{yaml}}.
        let s = schema(&json!({"x-k": "m"}));
        assert_eq!(s[..2], [0xfa, 0x01]);
        assert!(s.ends_with(b"\"m\""));
    }
}
