//! Built-in Kubernetes objects between their JSON form and their protobuf messages (feature
//! `protobuf-json`), driven by the descriptors of Kubernetes' own `.proto` files (vendored under
//! `proto/` and compiled by `build.rs`) through `prost-reflect`'s descriptors: JSON is written
//! straight to wire bytes, and wire bytes read straight into JSON, with no dynamic message in
//! between (the dynamic-message builder and reader they replaced are their test oracles, PT1 and
//! PT2).
//!
//! Two users: `Pb` objects (feature `k8s-pb`) read a JSON answer through it (a proxy that
//! rewrites bodies, an aggregated server without protobuf), and the simulated API server stores
//! JSON and serves protobuf with it. It is a fallback and a test tool, not a fast path: a
//! transcoded object costs a JSON tree and an encoding (about 4× a protobuf decode).
//!
//! `prost-reflect` is chosen because it is the maintained reflection layer of `prost` (the Rust
//! protobuf implementation tonic and most of the ecosystem use), so one descriptor set serves
//! every kind without generating or hand-writing a struct per type.
//!
//! Kubernetes' JSON is not the proto3 JSON mapping, so the walk is our own: field names are the
//! JSON names (Kubernetes' `.proto` fields are named after them), and the types whose JSON differs
//! from their message are handled by name: `Time`/`MicroTime` (RFC 3339), `Duration` (Go duration
//! string), `Quantity` (string), `IntOrString` (int or string), `RawExtension` and `FieldsV1`
//! (inline JSON), single-`items` wrappers such as `ExtraValue` (a JSON array), `bytes` (base64).
//! Going back, fields Go writes although JSON omits them (empty strings, zero `Time`) are left
//! out, as kube-apiserver's JSON would.
//!
//! Every group of `k8s.io/api` is compiled in. Kinds of other modules (`apiextensions-apiserver`'s
//! `CustomResourceDefinition`, `kube-aggregator`'s `APIService`, `metrics.k8s.io`) are not:
//! they are [`ProtobufError::UnknownKind`].
//!
//! ```
//! use reflector::protobuf::transcode::{decode_object, encode_object};
//! use serde_json::json;
//!
//! let pod = json!({"apiVersion": "v1", "kind": "Pod",
//!     "metadata": {"name": "web", "namespace": "default"},
//!     "spec": {"containers": [{"name": "app", "image": "nginx",
//!         "resources": {"limits": {"cpu": "500m"}}}]}});
//! let body = encode_object(&pod).unwrap(); // `k8s\0` + runtime.Unknown + the Pod message
//! assert_eq!(decode_object(&body.into()).unwrap(), pod);
//! ```

#[cfg(test)]
use std::collections::HashMap;
use std::sync::OnceLock;

use base64::Engine as _;
use bytes::Bytes;
use prost_reflect::{DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};
#[cfg(test)]
use prost_reflect::{DynamicMessage, MapKey, ReflectMessage, Value as PValue};
use serde_json::{Map, Value};

use super::{time, wire, ProtobufError, Unknown};

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";
pub(super) const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
pub(super) const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
pub(super) const DURATION: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Duration";
pub(super) const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
pub(super) const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
pub(super) const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
pub(super) const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";

/// Fields of Go structs embedded with an empty JSON name (`VolumeSource` in `Volume`,
/// `ProbeHandler` in `Probe`, …): their fields sit in the outer JSON object. Every such field of
/// `k8s.io/api` (its `types.go` files, `json:""` or `json:",inline"` with a protobuf tag); no
/// message-typed field of another meaning has one of these names.
const INLINE: &[&str] = &[
    "volumeSource",
    "persistentVolumeSource",
    "localObjectReference",
    "handler",
    "ephemeralContainerCommon",
    "ingressRuleValue",
    "deviceConfiguration",
    "rule",
    "ruleWithOperations",
];

/// Fields whose `.proto` name is not their JSON name: Go's protobuf tags name them in upper case,
/// their JSON tags in lower (admissionregistration's `Webhooks`, `MatchCondition`'s `Name` and
/// `Expression`). `DaemonEndpoint`'s `Port` is `Port` in JSON too, and so not listed.
const RENAMED: &[(&str, &str)] = &[
    ("Webhooks", "webhooks"),
    ("Name", "name"),
    ("Expression", "expression"),
];

/// The JSON name of `field`.
pub(super) fn json_name(field: &FieldDescriptor) -> &str {
    RENAMED
        .iter()
        .find(|(proto, _)| *proto == field.name())
        .map_or(field.name(), |(_, json)| json)
}

/// The field of `desc` whose JSON name is `name`.
#[cfg(test)]
fn field_by_json_name(desc: &MessageDescriptor, name: &str) -> Option<FieldDescriptor> {
    RENAMED
        .iter()
        .filter(|(_, json)| *json == name)
        .find_map(|(proto, _)| desc.get_field_by_name(proto))
        .or_else(|| desc.get_field_by_name(name))
}

pub(super) fn is_inline(field: &FieldDescriptor) -> bool {
    INLINE.contains(&field.name()) && matches!(field.kind(), Kind::Message(_))
}

/// The API groups of `k8s.io/api`, and the directory (protobuf package) of each: a kind's message
/// is `k8s.io.api.<package>.<version>.<Kind>`.
const GROUPS: &[(&str, &str)] = &[
    ("", "core"),
    ("admission.k8s.io", "admission"),
    ("admissionregistration.k8s.io", "admissionregistration"),
    ("apidiscovery.k8s.io", "apidiscovery"),
    ("apps", "apps"),
    ("authentication.k8s.io", "authentication"),
    ("authorization.k8s.io", "authorization"),
    ("autoscaling", "autoscaling"),
    ("batch", "batch"),
    ("certificates.k8s.io", "certificates"),
    ("coordination.k8s.io", "coordination"),
    ("discovery.k8s.io", "discovery"),
    ("events.k8s.io", "events"),
    ("extensions", "extensions"),
    ("flowcontrol.apiserver.k8s.io", "flowcontrol"),
    ("imagepolicy.k8s.io", "imagepolicy"),
    ("internal.apiserver.k8s.io", "apiserverinternal"),
    ("lifecycle.k8s.io", "lifecycle"),
    ("networking.k8s.io", "networking"),
    ("node.k8s.io", "node"),
    ("policy", "policy"),
    ("rbac.authorization.k8s.io", "rbac"),
    ("resource.k8s.io", "resource"),
    ("scheduling.k8s.io", "scheduling"),
    ("storage.k8s.io", "storage"),
    ("storagemigration.k8s.io", "storagemigration"),
];

/// The descriptors of every compiled-in Kubernetes message.
pub fn descriptors() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(
            &include_bytes!(concat!(env!("OUT_DIR"), "/k8s_descriptors.bin"))[..],
        )
        .expect("build.rs wrote a valid descriptor set")
    })
}

/// The message of `kind` in `api_version`, if protobuf is defined for it here: the built-in
/// kinds of the compiled-in groups, and `meta.k8s.io/v1` kinds (`Status`, `DeleteOptions`, …)
/// under any of those groups' versions.
pub fn message_for(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let pool = descriptors();
    let package = GROUPS
        .iter()
        .find(|(g, _)| *g == group)
        .map(|(_, p)| format!("k8s.io.api.{p}.{version}"));
    package
        .and_then(|p| pool.get_message_by_name(&format!("{p}.{kind}")))
        .or_else(|| {
            let meta_ok = package_known(group) || group == "meta.k8s.io";
            meta_ok
                .then(|| pool.get_message_by_name(&format!("{META}.{kind}")))
                .flatten()
        })
}

fn package_known(group: &str) -> bool {
    GROUPS.iter().any(|(g, _)| *g == group)
}

/// `object` (a JSON object with `apiVersion` and `kind`) as an enveloped protobuf body.
pub fn encode_object(object: &Value) -> Result<Vec<u8>, ProtobufError> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let message = encode_message_as(api_version, kind, object)?;
    Ok(Unknown::new(api_version, kind, Bytes::from(message)).encode())
}

/// `object`, a JSON object of `api_version`/`kind` (its own `apiVersion` and `kind`, if any, are
/// not read: they travel in the envelope), as the bare message of that kind: the twin of
/// [`decode_message_as`].
///
/// ```
/// use reflector::protobuf::transcode::{decode_message_as, encode_message_as};
/// use serde_json::json;
///
/// // A list item, as JSON lists write them: no apiVersion, no kind.
/// let item = json!({"metadata": {"name": "settings"}, "data": {"mode": "fast"}});
/// let message = encode_message_as("v1", "ConfigMap", &item).unwrap();
/// let back = decode_message_as("v1", "ConfigMap", &message).unwrap();
/// assert_eq!(back["data"]["mode"], "fast");
/// assert_eq!(back["kind"], "ConfigMap");
/// ```
pub fn encode_message_as(
    api_version: &str,
    kind: &str,
    object: &Value,
) -> Result<Vec<u8>, ProtobufError> {
    let desc = message_for(api_version, kind).ok_or_else(|| ProtobufError::UnknownKind {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
    })?;
    let mut out = Vec::with_capacity(1024);
    json_to_wire(&desc, object, &mut String::new(), &mut out)?;
    Ok(out)
}

/// An enveloped protobuf body as the JSON object, `apiVersion` and `kind` included.
pub fn decode_object(body: &Bytes) -> Result<Value, ProtobufError> {
    let u = Unknown::decode(body)?;
    // kube-apiserver never writes these; a raw in another encoding is not a message to decode.
    let protobuf_raw = matches!(u.content_type.as_str(), "" | super::MEDIA_TYPE);
    if !protobuf_raw || !u.content_encoding.is_empty() {
        return Err(ProtobufError::Malformed {
            what: "runtime.Unknown",
            why: "raw is not a plain protobuf message (contentType or contentEncoding set)",
        });
    }
    decode_message_as(&u.api_version, &u.kind, &u.raw)
}

/// The message `raw` of `api_version`/`kind` as its JSON object, `apiVersion` and `kind`
/// included.
pub fn decode_message_as(
    api_version: &str,
    kind: &str,
    raw: &[u8],
) -> Result<Value, ProtobufError> {
    let desc = message_for(api_version, kind).ok_or_else(|| ProtobufError::UnknownKind {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
    })?;
    let mut out = Map::new();
    out.insert("kind".into(), Value::from(kind));
    out.insert("apiVersion".into(), Value::from(api_version));
    if let Value::Object(fields) = wire_to_json(&desc, raw, &mut kind.to_string(), 0)? {
        out.extend(fields);
    }
    Ok(Value::Object(out))
}

fn shape(path: &str, why: impl Into<String>) -> ProtobufError {
    ProtobufError::Json {
        path: if path.is_empty() {
            ".".into()
        } else {
            path.to_string()
        },
        why: why.into(),
    }
}

/// A message with exactly one field, a repeated `items` (`ExtraValue`, `Verbs`): in JSON, the
/// bare array.
pub(super) fn items_wrapper(desc: &MessageDescriptor) -> Option<FieldDescriptor> {
    let mut fields = desc.fields();
    match (fields.next(), fields.next()) {
        (Some(f), None) if f.name() == "items" && f.is_list() => Some(f),
        _ => None,
    }
}

// JSON to protobuf wire bytes, straight from the descriptors. No dynamic message is built: a
// message's fields are written in field-number order as the JSON has them (what
// `json_to_message` below sets, and how a dynamic message would encode it), nested messages
// into a buffer of their own so that their length prefix is known, map entries in the JSON's
// key order (deterministic, as Go's encoder is). Invariant PT1: the bytes decode to the same
// dynamic message `json_to_message` builds from the same JSON, and fail on the same JSON with
// the same error (the property test `the_wire_encoder_agrees_with_the_dynamic_message_oracle`).

pub(super) const VARINT: u32 = 0;
pub(super) const FIXED64: u32 = 1;
pub(super) const LEN: u32 = 2;
pub(super) const FIXED32: u32 = 5;

fn put_tag(out: &mut Vec<u8>, number: u32, wire_type: u32) {
    wire::put_varint(out, (u64::from(number) << 3) | u64::from(wire_type));
}

pub(super) fn wire_type(kind: &Kind) -> u32 {
    match kind {
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => FIXED64,
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => FIXED32,
        Kind::String | Kind::Bytes | Kind::Message(_) => LEN,
        _ => VARINT,
    }
}

/// Writes the fields of the message `desc` that `v` holds (no tag or length of its own).
fn json_to_wire(
    desc: &MessageDescriptor,
    v: &Value,
    path: &mut String,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    let field = |name: &str| {
        desc.get_field_by_name(name)
            .expect("a field of the special type")
    };
    match desc.full_name() {
        TIME | MICRO_TIME => {
            let s = v
                .as_str()
                .ok_or_else(|| shape(path, "a timestamp must be a string"))?;
            let (secs, nanos) = time::parse_rfc3339(s)
                .ok_or_else(|| shape(path, format!("not RFC 3339: {s:?}")))?;
            put_tag(out, field("seconds").number(), VARINT);
            wire::put_varint(out, secs as u64);
            put_tag(out, field("nanos").number(), VARINT);
            wire::put_varint(out, i64::from(nanos) as u64);
            return Ok(());
        }
        DURATION => {
            let s = v
                .as_str()
                .ok_or_else(|| shape(path, "a duration must be a string"))?;
            let n = time::parse_duration(s)
                .ok_or_else(|| shape(path, format!("not a duration: {s:?}")))?;
            put_tag(out, field("duration").number(), VARINT);
            wire::put_varint(out, n as u64);
            return Ok(());
        }
        QUANTITY => {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(shape(path, "a quantity must be a string or a number")),
            };
            wire::put_bytes(out, field("string").number(), s.as_bytes());
            return Ok(());
        }
        INT_OR_STRING => {
            match v {
                Value::String(s) => {
                    put_tag(out, field("type").number(), VARINT);
                    wire::put_varint(out, 1);
                    wire::put_bytes(out, field("strVal").number(), s.as_bytes());
                }
                Value::Number(n) => {
                    let i = n
                        .as_i64()
                        .and_then(|i| i32::try_from(i).ok())
                        .ok_or_else(|| shape(path, "an int-or-string number must be an int32"))?;
                    put_tag(out, field("type").number(), VARINT);
                    wire::put_varint(out, 0);
                    put_tag(out, field("intVal").number(), VARINT);
                    wire::put_varint(out, i64::from(i) as u64);
                }
                _ => return Err(shape(path, "must be an integer or a string")),
            }
            return Ok(());
        }
        RAW_EXTENSION | FIELDS_V1 => {
            let raw = serde_json::to_vec(v).expect("a Value serializes");
            let raw_field = desc.fields().next().expect("raw's one field");
            wire::put_bytes(out, raw_field.number(), &raw);
            return Ok(());
        }
        _ => {}
    }
    if let (Some(items), Value::Array(_)) = (items_wrapper(desc), v) {
        return field_to_wire(&items, v, path, out);
    }
    let Value::Object(fields) = v else {
        return Err(shape(path, format!("{} must be an object", desc.name())));
    };
    // Field-number order, each field where the JSON has it (embedded structs: in the object
    // itself).
    let mut by_number: Vec<FieldDescriptor> = desc.fields().collect();
    by_number.sort_by_key(FieldDescriptor::number);
    let mut scratch = Vec::new();
    for field in &by_number {
        if is_inline(field) {
            let Kind::Message(inner) = field.kind() else {
                unreachable!("is_inline checks the kind")
            };
            scratch.clear();
            json_to_wire(&inner, v, path, &mut scratch)?;
            if !scratch.is_empty() {
                wire::put_bytes(out, field.number(), &scratch);
            }
            continue;
        }
        let name = json_name(field);
        let Some(value) = fields.get(name).filter(|v| !v.is_null()) else {
            continue;
        };
        let len = path.len();
        path.push('.');
        path.push_str(name);
        field_to_wire(field, value, path, out)?;
        path.truncate(len);
    }
    Ok(())
}

/// Writes `field` holding `v`: a map's entries, a list's items, or one value.
fn field_to_wire(
    field: &FieldDescriptor,
    v: &Value,
    path: &mut String,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            unreachable!("a map field's kind is its entry message")
        };
        let (key_field, value_field) = (entry.map_entry_key_field(), entry.map_entry_value_field());
        let value_kind = value_field.kind();
        let Value::Object(m) = v else {
            return Err(shape(path, "a map must be an object"));
        };
        let mut entry_bytes = Vec::new();
        for (k, item) in m {
            if item.is_null() {
                continue;
            }
            entry_bytes.clear();
            wire::put_bytes(&mut entry_bytes, key_field.number(), k.as_bytes());
            value_to_wire(
                &value_kind,
                value_field.number(),
                item,
                path,
                &mut entry_bytes,
            )?;
            wire::put_bytes(out, field.number(), &entry_bytes);
        }
        return Ok(());
    }
    if field.is_list() {
        let Value::Array(items) = v else {
            return Err(shape(path, "must be an array"));
        };
        let kind = field.kind();
        if field.is_packed() && wire_type(&kind) != LEN {
            let mut packed = Vec::new();
            for item in items {
                scalar_to_wire(&kind, item, path, &mut packed)?;
            }
            wire::put_bytes(out, field.number(), &packed);
        } else {
            for item in items {
                value_to_wire(&kind, field.number(), item, path, out)?;
            }
        }
        return Ok(());
    }
    value_to_wire(&field.kind(), field.number(), v, path, out)
}

/// Writes one value of `kind` as field `number`: its tag, then the value (length-prefixed for
/// strings, bytes and messages).
fn value_to_wire(
    kind: &Kind,
    number: u32,
    v: &Value,
    path: &mut String,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    match kind {
        Kind::Message(m) => {
            let mut inner = Vec::new();
            json_to_wire(m, v, path, &mut inner)?;
            wire::put_bytes(out, number, &inner);
        }
        Kind::String => {
            let s = v.as_str().ok_or_else(|| shape(path, "must be a string"))?;
            wire::put_bytes(out, number, s.as_bytes());
        }
        Kind::Bytes => {
            let b = base64_of(v, path)?;
            wire::put_bytes(out, number, &b);
        }
        Kind::Enum(_) => return Err(shape(path, "enums are not used by Kubernetes")),
        scalar => {
            put_tag(out, number, wire_type(scalar));
            scalar_to_wire(scalar, v, path, out)?;
        }
    }
    Ok(())
}

fn base64_of(v: &Value, path: &str) -> Result<Vec<u8>, ProtobufError> {
    let s = v
        .as_str()
        .ok_or_else(|| shape(path, "bytes must be a base64 string"))?;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|_| shape(path, "bytes must be a base64 string"))
}

/// Writes the value of a numeric or boolean `kind`, without a tag.
fn scalar_to_wire(
    kind: &Kind,
    v: &Value,
    path: &str,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    let int = |v: &Value| v.as_i64().ok_or_else(|| shape(path, "must be an integer"));
    let int32 =
        |v: &Value| i32::try_from(int(v)?).map_err(|_| shape(path, "out of the int32 range"));
    let uint32 =
        |v: &Value| u32::try_from(int(v)?).map_err(|_| shape(path, "out of the uint32 range"));
    let uint64 = |v: &Value| {
        v.as_u64()
            .ok_or_else(|| shape(path, "must be an unsigned integer"))
    };
    let float = |v: &Value| v.as_f64().ok_or_else(|| shape(path, "must be a number"));
    match kind {
        Kind::Bool => {
            let b = v
                .as_bool()
                .ok_or_else(|| shape(path, "must be a boolean"))?;
            wire::put_varint(out, u64::from(b));
        }
        // Negative int32s are sign-extended to ten bytes, as protobuf requires.
        Kind::Int32 => wire::put_varint(out, i64::from(int32(v)?) as u64),
        Kind::Int64 => wire::put_varint(out, int(v)? as u64),
        Kind::Uint32 => wire::put_varint(out, u64::from(uint32(v)?)),
        Kind::Uint64 => wire::put_varint(out, uint64(v)?),
        Kind::Sint32 => {
            let n = int32(v)?;
            wire::put_varint(out, u64::from(((n << 1) ^ (n >> 31)) as u32));
        }
        Kind::Sint64 => {
            let n = int(v)?;
            wire::put_varint(out, ((n << 1) ^ (n >> 63)) as u64);
        }
        Kind::Fixed32 => out.extend_from_slice(&uint32(v)?.to_le_bytes()),
        Kind::Sfixed32 => out.extend_from_slice(&int32(v)?.to_le_bytes()),
        Kind::Fixed64 => out.extend_from_slice(&uint64(v)?.to_le_bytes()),
        Kind::Sfixed64 => out.extend_from_slice(&int(v)?.to_le_bytes()),
        Kind::Double => out.extend_from_slice(&float(v)?.to_le_bytes()),
        Kind::Float => out.extend_from_slice(&(float(v)? as f32).to_le_bytes()),
        Kind::String | Kind::Bytes | Kind::Message(_) | Kind::Enum(_) => {
            unreachable!("value_to_wire writes these")
        }
    }
    Ok(())
}

// Protobuf wire bytes to JSON, straight from the descriptors, the reverse of `json_to_wire`: no
// dynamic message is built. Invariant PT2: for a valid encoding (given once or twice), the JSON
// is what `message_to_json` gives for the dynamic message decoded from it; damaged bytes give a
// typed error or a lenient reading, never a panic (the property test
// `the_wire_decoder_agrees_with_the_dynamic_message_oracle`). As protobuf requires, a singular
// scalar given twice keeps the last value, a singular message given twice is the merge of both
// (their bytes read as one), a repeated scalar may come packed or not, and a map entry given
// twice keeps the last.

/// How deep messages may nest before the input is refused (prost's own limit): Kubernetes'
/// messages nest far less, so only a hostile input reaches it, and the stack stays bounded.
pub(super) const MAX_DEPTH: usize = 100;

/// One field's value as the wire has it.
#[derive(Clone, Copy)]
pub(super) enum Raw<'a> {
    Varint(u64),
    Fixed64([u8; 8]),
    Fixed32([u8; 4]),
    Bytes(&'a [u8]),
}

/// Reads the next field of `buf` (number and value), advancing it; `None` at its end.
pub(super) fn next_raw<'a>(
    buf: &mut &'a [u8],
    path: &str,
) -> Result<Option<(u32, Raw<'a>)>, ProtobufError> {
    let malformed = |why: &str| ProtobufError::Message {
        path: path.to_string(),
        why: why.to_string(),
    };
    fn take<'a>(buf: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let head = buf.get(..n)?;
        *buf = &buf[n..];
        Some(head)
    }
    if buf.is_empty() {
        return Ok(None);
    }
    let key = read_varint(buf).ok_or_else(|| malformed("a truncated or overlong field key"))?;
    let number = u32::try_from(key >> 3)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| malformed("a field number out of range"))?;
    let truncated = || malformed("a truncated field");
    let raw = match (key & 7) as u32 {
        VARINT => Raw::Varint(read_varint(buf).ok_or_else(truncated)?),
        FIXED64 => Raw::Fixed64(read_fixed::<8>(buf).ok_or_else(truncated)?),
        FIXED32 => Raw::Fixed32(read_fixed::<4>(buf).ok_or_else(truncated)?),
        LEN => {
            let n = read_varint(buf).ok_or_else(truncated)?;
            let n = usize::try_from(n).map_err(|_| truncated())?;
            Raw::Bytes(take(buf, n).ok_or_else(truncated)?)
        }
        _ => {
            return Err(malformed(
                "a wire type Kubernetes never uses (groups or unknown)",
            ))
        }
    };
    Ok(Some((number, raw)))
}

/// The fields of the message `buf` of `desc`, each with every value the wire gave it, in the
/// order of their first appearance. A field number `desc` does not define is an error (a map
/// entry's are skipped, as protobuf's map decoding skips them), as is a value of the wrong wire
/// type.
pub(super) fn read_message<'a>(
    desc: &MessageDescriptor,
    mut buf: &'a [u8],
    path: &str,
) -> Result<Vec<(FieldDescriptor, Vec<Raw<'a>>)>, ProtobufError> {
    let mut fields: Vec<(FieldDescriptor, Vec<Raw<'a>>)> = Vec::new();
    while let Some((number, raw)) = next_raw(&mut buf, path)? {
        let Some(field) = desc.get_field(number) else {
            if desc.is_map_entry() {
                continue;
            }
            return Err(ProtobufError::UnknownField {
                path: path.to_string(),
                number,
            });
        };
        let kind = field.kind();
        let fits = match raw {
            Raw::Bytes(_) => wire_type(&kind) == LEN || field.is_list(),
            Raw::Varint(_) => wire_type(&kind) == VARINT,
            Raw::Fixed64(_) => wire_type(&kind) == FIXED64,
            Raw::Fixed32(_) => wire_type(&kind) == FIXED32,
        };
        if !fits {
            return Err(ProtobufError::Message {
                path: path.to_string(),
                why: format!("field {number} has the wrong wire type"),
            });
        }
        match fields.iter_mut().find(|(f, _)| f.number() == number) {
            Some((_, values)) => values.push(raw),
            None => fields.push((field, vec![raw])),
        }
    }
    Ok(fields)
}

/// The bytes of a singular message field given once or more: merged, as protobuf reads them.
fn merged<'a>(values: &[Raw<'a>]) -> std::borrow::Cow<'a, [u8]> {
    let mut parts = values.iter().filter_map(|r| match r {
        Raw::Bytes(b) => Some(*b),
        _ => None,
    });
    match (parts.next(), values.len()) {
        (Some(only), 1) => std::borrow::Cow::Borrowed(only),
        (first, _) => {
            let mut all = first.map(<[u8]>::to_vec).unwrap_or_default();
            for part in parts {
                all.extend_from_slice(part);
            }
            std::borrow::Cow::Owned(all)
        }
    }
}

/// The JSON of the message `buf` of `desc`.
fn wire_to_json(
    desc: &MessageDescriptor,
    buf: &[u8],
    path: &mut String,
    depth: usize,
) -> Result<Value, ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::Message {
            path: path.clone(),
            why: format!("messages nested deeper than {MAX_DEPTH}"),
        });
    }
    let fields = read_message(desc, buf, path)?;
    let last = |name: &str| {
        let number = desc
            .get_field_by_name(name)
            .expect("a field of the special type")
            .number();
        fields
            .iter()
            .find(|(f, _)| f.number() == number)
            .and_then(|(_, values)| values.last().copied())
    };
    let int = |raw: Option<Raw<'_>>| match raw {
        Some(Raw::Varint(v)) => Some(v as i64),
        _ => None,
    };
    let text = |raw: Option<Raw<'_>>| -> Result<Option<String>, ProtobufError> {
        match raw {
            Some(Raw::Bytes(b)) => {
                std::str::from_utf8(b)
                    .map(|s| Some(s.to_string()))
                    .map_err(|_| ProtobufError::Message {
                        path: path.clone(),
                        why: "a string that is not UTF-8".into(),
                    })
            }
            _ => Ok(None),
        }
    };
    match desc.full_name() {
        name @ (TIME | MICRO_TIME) => {
            // Go writes a zero time as an empty message, which reads back as null.
            let Some(secs) = int(last("seconds")) else {
                return Ok(Value::Null);
            };
            let nanos = int(last("nanos")).map_or(0, |n| n as i32);
            let digits = if name == MICRO_TIME { 6 } else { 0 };
            return Ok(Value::from(time::format_rfc3339(secs, nanos, digits)));
        }
        DURATION => {
            let n = int(last("duration")).unwrap_or(0);
            return Ok(Value::from(time::format_duration(n)));
        }
        QUANTITY => {
            let s = text(last("string"))?;
            return Ok(Value::from(s.unwrap_or_else(|| "0".to_string())));
        }
        INT_OR_STRING => {
            let is_string = int(last("type")) == Some(1);
            return Ok(if is_string {
                Value::from(text(last("strVal"))?.unwrap_or_default())
            } else {
                Value::from(int(last("intVal")).map_or(0, |i| i as i32))
            });
        }
        RAW_EXTENSION | FIELDS_V1 => {
            let raw_field = desc.fields().next().expect("raw's one field");
            let raw = fields
                .iter()
                .find(|(f, _)| f.number() == raw_field.number())
                .and_then(|(_, values)| values.last().copied());
            let raw = match raw {
                Some(Raw::Bytes(b)) => b,
                _ => &[][..],
            };
            if raw.is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_slice(raw).map_err(|e| ProtobufError::Message {
                path: path.clone(),
                why: format!("raw is not JSON: {e}"),
            });
        }
        _ => {}
    }
    if let Some(items) = items_wrapper(desc) {
        let values = fields
            .iter()
            .find(|(f, _)| f.number() == items.number())
            .map_or(&[][..], |(_, values)| &values[..]);
        return list_to_json(&items, values, path, depth);
    }
    let mut out = Map::new();
    for (field, values) in &fields {
        let len = path.len();
        path.push('.');
        path.push_str(json_name(field));
        let json = if field.is_map() {
            map_to_json(field, values, path, depth)?
        } else if field.is_list() {
            list_to_json(field, values, path, depth)?
        } else if let Kind::Message(inner) = field.kind() {
            wire_to_json(&inner, &merged(values), path, depth + 1)?
        } else {
            let last = values
                .last()
                .copied()
                .expect("a field is read with a value");
            scalar_to_json(&field.kind(), last, path)?
        };
        path.truncate(len);
        if is_inline(field) {
            if let Value::Object(inner) = json {
                out.extend(inner);
            }
            continue;
        }
        let omitted = match &json {
            Value::Null => true,
            Value::String(s) => s.is_empty() && !field.is_list(),
            // An empty packed run: no element, so the field is not set.
            Value::Array(items) => items.is_empty(),
            _ => false,
        };
        if !omitted {
            out.insert(json_name(field).to_string(), json);
        }
    }
    Ok(Value::Object(out))
}

/// A repeated field's values as a JSON array: messages one a value, scalars packed or not.
fn list_to_json(
    field: &FieldDescriptor,
    values: &[Raw<'_>],
    path: &mut String,
    depth: usize,
) -> Result<Value, ProtobufError> {
    let kind = field.kind();
    let mut items = Vec::with_capacity(values.len());
    for raw in values {
        match (raw, &kind) {
            (Raw::Bytes(b), Kind::Message(inner)) => {
                items.push(wire_to_json(inner, b, path, depth + 1)?);
            }
            (Raw::Bytes(b), Kind::String | Kind::Bytes) => {
                items.push(scalar_to_json(&kind, Raw::Bytes(b), path)?);
            }
            (Raw::Bytes(mut packed), scalar) => {
                while !packed.is_empty() {
                    let value = match wire_type(scalar) {
                        VARINT => read_varint(&mut packed).map(Raw::Varint),
                        FIXED64 => read_fixed::<8>(&mut packed).map(Raw::Fixed64),
                        _ => read_fixed::<4>(&mut packed).map(Raw::Fixed32),
                    }
                    .ok_or_else(|| ProtobufError::Message {
                        path: path.clone(),
                        why: "a truncated packed field".into(),
                    })?;
                    items.push(scalar_to_json(scalar, value, path)?);
                }
            }
            (other, scalar) => items.push(scalar_to_json(scalar, *other, path)?),
        }
    }
    Ok(Value::Array(items))
}

pub(super) fn read_varint(buf: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..10 {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

pub(super) fn read_fixed<const N: usize>(buf: &mut &[u8]) -> Option<[u8; N]> {
    let head: [u8; N] = buf.get(..N)?.try_into().ok()?;
    *buf = &buf[N..];
    Some(head)
}

/// A map field's entries as a JSON object; an entry given twice keeps the last.
fn map_to_json(
    field: &FieldDescriptor,
    values: &[Raw<'_>],
    path: &mut String,
    depth: usize,
) -> Result<Value, ProtobufError> {
    let Kind::Message(entry) = field.kind() else {
        unreachable!("a map field's kind is its entry message")
    };
    let (key_field, value_field) = (entry.map_entry_key_field(), entry.map_entry_value_field());
    let mut out = Map::new();
    for raw in values {
        let Raw::Bytes(bytes) = raw else {
            unreachable!("read_message keeps only length-delimited values of a map")
        };
        let entry_fields = read_message(&entry, bytes, path)?;
        let value_of = |f: &FieldDescriptor| {
            entry_fields
                .iter()
                .find(|(e, _)| e.number() == f.number())
                .map(|(_, values)| values)
        };
        let key = match value_of(&key_field).and_then(|v| v.last()) {
            Some(Raw::Bytes(b)) => std::str::from_utf8(b)
                .map_err(|_| ProtobufError::Message {
                    path: path.clone(),
                    why: "a map key that is not UTF-8".into(),
                })?
                .to_string(),
            None => String::new(),
            Some(_) => {
                return Err(ProtobufError::Message {
                    path: path.clone(),
                    why: "a map key that is not a string".into(),
                })
            }
        };
        let value = match (value_of(&value_field), value_field.kind()) {
            (Some(values), Kind::Message(inner)) => {
                wire_to_json(&inner, &merged(values), path, depth + 1)?
            }
            (None, Kind::Message(inner)) => wire_to_json(&inner, &[], path, depth + 1)?,
            (Some(values), kind) => {
                scalar_to_json(&kind, *values.last().expect("read with a value"), path)?
            }
            (None, kind) => default_json(&kind),
        };
        out.insert(key, value);
    }
    Ok(Value::Object(out))
}

/// The JSON of a scalar's default value (a map entry that leaves its value out).
fn default_json(kind: &Kind) -> Value {
    match kind {
        Kind::String => Value::from(""),
        Kind::Bytes => Value::from(""),
        Kind::Bool => Value::from(false),
        Kind::Double | Kind::Float => Value::from(0.0),
        _ => Value::from(0),
    }
}

/// One scalar value of `kind` as JSON: strings as they are, bytes in base64, integers as
/// numbers of their width.
fn scalar_to_json(kind: &Kind, raw: Raw<'_>, path: &str) -> Result<Value, ProtobufError> {
    let wrong = || ProtobufError::Message {
        path: path.to_string(),
        why: "a value of the wrong wire type".into(),
    };
    Ok(match (kind, raw) {
        (Kind::String, Raw::Bytes(b)) => {
            Value::from(std::str::from_utf8(b).map_err(|_| ProtobufError::Message {
                path: path.to_string(),
                why: "a string that is not UTF-8".into(),
            })?)
        }
        (Kind::Bytes, Raw::Bytes(b)) => {
            Value::from(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Kind::Bool, Raw::Varint(v)) => Value::from(v != 0),
        (Kind::Int32, Raw::Varint(v)) => Value::from(v as i32),
        (Kind::Int64, Raw::Varint(v)) => Value::from(v as i64),
        (Kind::Uint32, Raw::Varint(v)) => Value::from(v as u32),
        (Kind::Uint64, Raw::Varint(v)) => Value::from(v),
        (Kind::Sint32, Raw::Varint(v)) => {
            let n = v as u32;
            Value::from(((n >> 1) as i32) ^ -((n & 1) as i32))
        }
        (Kind::Sint64, Raw::Varint(v)) => Value::from(((v >> 1) as i64) ^ -((v & 1) as i64)),
        (Kind::Enum(_), Raw::Varint(v)) => Value::from(v as i32),
        (Kind::Fixed32, Raw::Fixed32(b)) => Value::from(u32::from_le_bytes(b)),
        (Kind::Sfixed32, Raw::Fixed32(b)) => Value::from(i32::from_le_bytes(b)),
        (Kind::Float, Raw::Fixed32(b)) => Value::from(f64::from(f32::from_le_bytes(b))),
        (Kind::Fixed64, Raw::Fixed64(b)) => Value::from(u64::from_le_bytes(b)),
        (Kind::Sfixed64, Raw::Fixed64(b)) => Value::from(i64::from_le_bytes(b)),
        (Kind::Double, Raw::Fixed64(b)) => Value::from(f64::from_le_bytes(b)),
        _ => return Err(wrong()),
    })
}

// The dynamic-message builder and reader the wire encoder and decoder replaced, kept as their
// oracles (PT1, PT2).

#[cfg(test)]
fn json_to_message(
    desc: &MessageDescriptor,
    v: &Value,
    path: &mut String,
) -> Result<DynamicMessage, ProtobufError> {
    let mut msg = DynamicMessage::new(desc.clone());
    let set = |msg: &mut DynamicMessage, name: &str, value: PValue| {
        let f = desc
            .get_field_by_name(name)
            .expect("a field of the special type");
        msg.set_field(&f, value);
    };
    match desc.full_name() {
        TIME | MICRO_TIME => {
            let s = v
                .as_str()
                .ok_or_else(|| shape(path, "a timestamp must be a string"))?;
            let (secs, nanos) = time::parse_rfc3339(s)
                .ok_or_else(|| shape(path, format!("not RFC 3339: {s:?}")))?;
            set(&mut msg, "seconds", PValue::I64(secs));
            set(&mut msg, "nanos", PValue::I32(nanos));
            return Ok(msg);
        }
        DURATION => {
            let s = v
                .as_str()
                .ok_or_else(|| shape(path, "a duration must be a string"))?;
            let n = time::parse_duration(s)
                .ok_or_else(|| shape(path, format!("not a duration: {s:?}")))?;
            set(&mut msg, "duration", PValue::I64(n));
            return Ok(msg);
        }
        QUANTITY => {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(shape(path, "a quantity must be a string or a number")),
            };
            set(&mut msg, "string", PValue::String(s));
            return Ok(msg);
        }
        INT_OR_STRING => {
            match v {
                Value::String(s) => {
                    set(&mut msg, "type", PValue::I64(1));
                    set(&mut msg, "strVal", PValue::String(s.clone()));
                }
                Value::Number(n) => {
                    let i = n
                        .as_i64()
                        .and_then(|i| i32::try_from(i).ok())
                        .ok_or_else(|| shape(path, "an int-or-string number must be an int32"))?;
                    set(&mut msg, "type", PValue::I64(0));
                    set(&mut msg, "intVal", PValue::I32(i));
                }
                _ => return Err(shape(path, "must be an integer or a string")),
            }
            return Ok(msg);
        }
        RAW_EXTENSION | FIELDS_V1 => {
            let raw = serde_json::to_vec(v).expect("a Value serializes");
            let field = desc.fields().next().expect("raw's one field");
            msg.set_field(&field, PValue::Bytes(Bytes::from(raw)));
            return Ok(msg);
        }
        _ => {}
    }
    if let (Some(items), Value::Array(_)) = (items_wrapper(desc), v) {
        let value = json_to_field(&items, v, path)?;
        msg.set_field(&items, value);
        return Ok(msg);
    }
    let Value::Object(fields) = v else {
        return Err(shape(path, format!("{} must be an object", desc.name())));
    };
    for field in desc.fields().filter(is_inline) {
        if let Kind::Message(inner) = field.kind() {
            let inner = json_to_message(&inner, v, path)?;
            if inner.fields().next().is_some() {
                msg.set_field(&field, PValue::Message(inner));
            }
        }
    }
    for (name, value) in fields {
        if value.is_null() {
            continue;
        }
        let Some(field) = field_by_json_name(desc, name).filter(|f| !is_inline(f)) else {
            // `apiVersion`/`kind` travel in the envelope; other fields the .proto does not know
            // are dropped, as kube-apiserver drops unknown JSON fields of built-in kinds.
            continue;
        };
        let len = path.len();
        path.push('.');
        path.push_str(name);
        let converted = json_to_field(&field, value, path)?;
        path.truncate(len);
        msg.set_field(&field, converted);
    }
    Ok(msg)
}

#[cfg(test)]
fn json_to_field(
    field: &FieldDescriptor,
    v: &Value,
    path: &mut String,
) -> Result<PValue, ProtobufError> {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            unreachable!("a map field's kind is its entry message")
        };
        let value_kind = entry.map_entry_value_field().kind();
        let Value::Object(m) = v else {
            return Err(shape(path, "a map must be an object"));
        };
        let mut out = HashMap::with_capacity(m.len());
        for (k, item) in m {
            if item.is_null() {
                continue;
            }
            out.insert(
                MapKey::String(k.clone()),
                json_to_scalar(&value_kind, item, path)?,
            );
        }
        return Ok(PValue::Map(out));
    }
    if field.is_list() {
        let Value::Array(items) = v else {
            return Err(shape(path, "must be an array"));
        };
        let kind = field.kind();
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            out.push(json_to_scalar(&kind, item, path)?);
        }
        return Ok(PValue::List(out));
    }
    json_to_scalar(&field.kind(), v, path)
}

#[cfg(test)]
fn json_to_scalar(kind: &Kind, v: &Value, path: &mut String) -> Result<PValue, ProtobufError> {
    let int = |v: &Value| v.as_i64().ok_or_else(|| shape(path, "must be an integer"));
    Ok(match kind {
        Kind::String => PValue::String(
            v.as_str()
                .ok_or_else(|| shape(path, "must be a string"))?
                .to_string(),
        ),
        Kind::Bool => PValue::Bool(
            v.as_bool()
                .ok_or_else(|| shape(path, "must be a boolean"))?,
        ),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            PValue::I32(i32::try_from(int(v)?).map_err(|_| shape(path, "out of the int32 range"))?)
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => PValue::I64(int(v)?),
        Kind::Uint32 | Kind::Fixed32 => {
            PValue::U32(u32::try_from(int(v)?).map_err(|_| shape(path, "out of the uint32 range"))?)
        }
        Kind::Uint64 | Kind::Fixed64 => PValue::U64(
            v.as_u64()
                .ok_or_else(|| shape(path, "must be an unsigned integer"))?,
        ),
        Kind::Double => PValue::F64(v.as_f64().ok_or_else(|| shape(path, "must be a number"))?),
        Kind::Float => {
            PValue::F32(v.as_f64().ok_or_else(|| shape(path, "must be a number"))? as f32)
        }
        Kind::Bytes => {
            let s = v
                .as_str()
                .ok_or_else(|| shape(path, "bytes must be a base64 string"))?;
            let b = base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|_| shape(path, "bytes must be a base64 string"))?;
            PValue::Bytes(Bytes::from(b))
        }
        Kind::Message(m) => PValue::Message(json_to_message(m, v, path)?),
        Kind::Enum(_) => return Err(shape(path, "enums are not used by Kubernetes")),
    })
}

#[cfg(test)]
fn message_to_json(msg: &DynamicMessage, path: &mut String) -> Result<Value, ProtobufError> {
    if let Some(f) = msg.unknown_fields().next() {
        return Err(ProtobufError::UnknownField {
            path: path.clone(),
            number: f.number(),
        });
    }
    let desc = msg.descriptor();
    let get = |name: &str| {
        let f = desc
            .get_field_by_name(name)
            .expect("a field of the special type");
        msg.has_field(&f).then(|| msg.get_field(&f).into_owned())
    };
    match desc.full_name() {
        name @ (TIME | MICRO_TIME) => {
            // Go writes a zero time as an empty message, which reads back as null.
            let Some(secs) = get("seconds").and_then(|s| s.as_i64()) else {
                return Ok(Value::Null);
            };
            let nanos = get("nanos").and_then(|n| n.as_i32()).unwrap_or(0);
            let digits = if name == MICRO_TIME { 6 } else { 0 };
            return Ok(Value::from(time::format_rfc3339(secs, nanos, digits)));
        }
        DURATION => {
            let n = get("duration").and_then(|d| d.as_i64()).unwrap_or(0);
            return Ok(Value::from(time::format_duration(n)));
        }
        QUANTITY => {
            let s = get("string").and_then(|s| s.as_str().map(str::to_string));
            return Ok(Value::from(s.unwrap_or_else(|| "0".to_string())));
        }
        INT_OR_STRING => {
            let is_string = get("type").and_then(|t| t.as_i64()) == Some(1);
            return Ok(if is_string {
                Value::from(
                    get("strVal")
                        .and_then(|s| s.as_str().map(str::to_string))
                        .unwrap_or_default(),
                )
            } else {
                Value::from(get("intVal").and_then(|i| i.as_i32()).unwrap_or(0))
            });
        }
        RAW_EXTENSION | FIELDS_V1 => {
            let field = desc.fields().next().expect("raw's one field");
            let raw = msg.get_field(&field);
            let raw = raw.as_bytes().map(|b| b.as_ref()).unwrap_or(&[]);
            if raw.is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_slice(raw).map_err(|e| ProtobufError::Message {
                path: path.clone(),
                why: format!("raw is not JSON: {e}"),
            });
        }
        _ => {}
    }
    if let Some(items) = items_wrapper(&desc) {
        return value_to_json(&msg.get_field(&items), path);
    }
    let mut out = Map::new();
    for (field, value) in msg.fields() {
        let len = path.len();
        path.push('.');
        path.push_str(json_name(&field));
        let json = if field.is_map() {
            let mut m = Map::new();
            for (k, item) in value.as_map().into_iter().flatten() {
                let MapKey::String(k) = k else {
                    return Err(ProtobufError::Message {
                        path: path.clone(),
                        why: "a map key that is not a string".into(),
                    });
                };
                m.insert(k.clone(), value_to_json(item, path)?);
            }
            Value::Object(m)
        } else {
            value_to_json(value, path)?
        };
        path.truncate(len);
        if is_inline(&field) {
            if let Value::Object(inner) = json {
                out.extend(inner);
            }
            continue;
        }
        let omitted = match &json {
            Value::Null => true,
            Value::String(s) => s.is_empty() && !field.is_list(),
            _ => false,
        };
        if !omitted {
            out.insert(json_name(&field).to_string(), json);
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
fn value_to_json(v: &PValue, path: &mut String) -> Result<Value, ProtobufError> {
    Ok(match v {
        PValue::Bool(b) => Value::from(*b),
        PValue::I32(i) => Value::from(*i),
        PValue::I64(i) => Value::from(*i),
        PValue::U32(i) => Value::from(*i),
        PValue::U64(i) => Value::from(*i),
        PValue::F32(f) => Value::from(f64::from(*f)),
        PValue::F64(f) => Value::from(*f),
        PValue::String(s) => Value::from(s.as_str()),
        PValue::Bytes(b) => Value::from(base64::engine::general_purpose::STANDARD.encode(b)),
        PValue::EnumNumber(n) => Value::from(*n),
        PValue::Message(m) => message_to_json(m, path)?,
        PValue::List(items) => Value::Array(
            items
                .iter()
                .map(|i| value_to_json(i, path))
                .collect::<Result<_, _>>()?,
        ),
        PValue::Map(_) => {
            return Err(ProtobufError::Message {
                path: path.clone(),
                why: "a map where a single value belongs".into(),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    //! PT1: the wire encoder against the dynamic-message builder it replaced.

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// The wire encoder's bytes for `object` of `api_version`/`kind` against the oracle's
    /// dynamic message, both as a decoder reads them (a list or map set empty is no field on the
    /// wire): the same message, or both an error.
    fn agree(api_version: &str, kind: &str, object: &Value) -> Result<(), String> {
        use prost::Message as _;
        let desc = message_for(api_version, kind).expect("a compiled-in kind");
        let oracle = json_to_message(&desc, object, &mut String::new());
        let mut bytes = Vec::new();
        let wire = json_to_wire(&desc, object, &mut String::new(), &mut bytes);
        let read = |b: &[u8]| DynamicMessage::decode(desc.clone(), b).map_err(|e| e.to_string());
        match (oracle, wire) {
            (Ok(expected), Ok(())) => {
                if read(&bytes)? == read(&expected.encode_to_vec())? {
                    Ok(())
                } else {
                    Err(format!("{object}: the wire encoder's message differs"))
                }
            }
            (Err(_), Err(_)) => Ok(()),
            (oracle, wire) => Err(format!(
                "{object}: oracle {:?}, wire {:?}",
                oracle.err(),
                wire.err()
            )),
        }
    }

    #[test]
    fn the_wire_encoder_agrees_with_the_oracle_on_realistic_objects() {
        for i in [0, 9, 77_777] {
            let pod: Value =
                serde_json::from_str(&sim_apiserver::fixtures::realistic_pod_json(i)).unwrap();
            agree("v1", "Pod", &pod).unwrap();
        }
        for (api_version, kind, object) in cases() {
            agree(api_version, kind, &object).unwrap();
        }
    }

    /// Objects of the kinds whose JSON differs from their message most (bytes, micro times,
    /// renamed and wrapped fields, inline JSON, `IntOrString`), some of them invalid.
    fn cases() -> Vec<(&'static str, &'static str, Value)> {
        vec![
            (
                "v1",
                "Secret",
                json!({"metadata": {"name": "s"}, "type": "Opaque",
                "data": {"password": "c2VjcmV0", "empty": ""}, "immutable": true}),
            ),
            (
                "v1",
                "Secret",
                json!({"metadata": {"name": "s"}, "data": {"bad": "not base64!"}}),
            ),
            (
                "events.k8s.io/v1",
                "Event",
                json!({"metadata": {"name": "e"},
                "eventTime": "2026-11-27T05:00:00.123456Z", "reason": "Pulled", "action": "Pull",
                "series": {"count": 3, "lastObservedTime": "2026-11-27T05:00:01.000001Z"}}),
            ),
            (
                "networking.k8s.io/v1",
                "Ingress",
                json!({"metadata": {"name": "i"},
                "spec": {"rules": [{"host": "a", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "w", "port": {"number": 80}}}}]}}]}}),
            ),
            (
                "admissionregistration.k8s.io/v1",
                "ValidatingWebhookConfiguration",
                json!({
                "metadata": {"name": "g"}, "webhooks": [{"name": "g.example.com",
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["pods"]}],
                "matchConditions": [{"name": "n", "expression": "true"}]}]}),
            ),
            (
                "authentication.k8s.io/v1",
                "TokenReview",
                json!({"metadata": {},
                "status": {"user": {"username": "u", "extra": {"k": ["a", "b"]}}}}),
            ),
            (
                "apps/v1",
                "ControllerRevision",
                json!({"metadata": {"name": "r"}, "revision": 2,
                "data": {"spec": {"template": {"x": [1, 2.5, null, "s"]}}}}),
            ),
            (
                "v1",
                "Node",
                json!({"metadata": {"name": "n"},
                "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "capacity": {"cpu": 4, "memory": "16Gi"}}}),
            ),
        ]
    }

    /// A leaf that is sometimes of the wrong type, so errors are compared too.
    fn leaf(good: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
        prop_oneof![
            8 => good,
            1 => Just(Value::Null),
            1 => prop_oneof![Just(json!(true)), Just(json!([1])), Just(json!({"x": 1})),
                Just(json!("text")), Just(json!(-3)), Just(json!(1.5))],
        ]
        .boxed()
    }

    fn int(range: std::ops::RangeInclusive<i64>) -> BoxedStrategy<Value> {
        range.prop_map(Value::from).boxed()
    }

    fn text() -> BoxedStrategy<Value> {
        "[a-z0-9.-]{0,12}".prop_map(Value::from).boxed()
    }

    fn deployment() -> impl Strategy<Value = Value> {
        let int_or_string =
            prop_oneof![int(-3..=3_000_000_000), "[0-9]{1,3}%".prop_map(Value::from)];
        let quantity = prop_oneof![
            "[0-9]{1,4}(m|Mi|Gi|)".prop_map(Value::from),
            int(0..=64),
            (0.0f64..8.0).prop_map(Value::from)
        ];
        let container = (
            leaf(text()),
            leaf(int(-70_000..=70_000)),
            leaf(quantity.boxed()),
            proptest::collection::btree_map("[a-z]{1,4}", leaf(text()), 0..3),
            leaf(int(i64::MIN..=i64::MAX)),
        )
            .prop_map(|(image, port, cpu, env, user)| {
                json!({"name": "c", "image": image,
                    "ports": [{"containerPort": port, "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": cpu}},
                    "env": env.into_iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
                    "securityContext": {"runAsUser": user}})
            });
        (
            proptest::collection::btree_map("[a-z/.]{1,6}", leaf(text()), 0..4),
            leaf(int(-3_000_000_000..=3_000_000_000)),
            leaf(int_or_string.boxed()),
            proptest::collection::vec(container, 0..3),
            leaf(
                prop_oneof![
                    Just(json!("2026-11-27T05:00:00Z")),
                    Just(json!("2026-11-27T05:00:00.5+01:00")),
                    Just(json!("yesterday"))
                ]
                .boxed(),
            ),
            leaf(prop_oneof![Just(json!(true)), Just(json!(false))].boxed()),
        )
            .prop_map(|(labels, replicas, surge, containers, created, paused)| {
                json!({"metadata": {"name": "d", "labels": labels, "creationTimestamp": created},
                    "spec": {"replicas": replicas, "paused": paused,
                        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge}},
                        "template": {"spec": {"containers": containers}}}})
            })
    }

    /// Flips the bytes at `flips` and cuts at `cut`; whether there were bytes to damage.
    fn damage(
        bytes: &mut Vec<u8>,
        flips: Vec<(prop::sample::Index, u8)>,
        cut: Option<prop::sample::Index>,
    ) -> bool {
        if bytes.is_empty() {
            return false;
        }
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len()));
        }
        true
    }

    /// The wire decoder's JSON for `bytes` against the oracle's (the dynamic message decoded,
    /// then walked): the same JSON wherever the oracle reads the bytes. Where it refuses them the
    /// decoder may refuse them too or read them leniently (an invalid string in a field the JSON
    /// never shows, say). Used on valid encodings, whole or given twice.
    fn agree_reading(api_version: &str, kind: &str, bytes: &[u8]) -> Result<(), String> {
        let desc = message_for(api_version, kind).expect("a compiled-in kind");
        let oracle = DynamicMessage::decode(desc.clone(), bytes)
            .map_err(|e| ProtobufError::Message {
                path: kind.to_string(),
                why: e.to_string(),
            })
            .and_then(|m| message_to_json(&m, &mut kind.to_string()));
        let wire = wire_to_json(&desc, bytes, &mut kind.to_string(), 0);
        match (oracle, wire) {
            (Ok(expected), Ok(got)) if expected == got => Ok(()),
            (Ok(expected), Ok(got)) => Err(format!("read {got}, the oracle {expected}")),
            (Ok(_), Err(e)) => Err(format!(
                "the oracle reads the bytes, the decoder fails: {e}"
            )),
            (Err(_), _) => Ok(()),
        }
    }

    fn encoded(api_version: &str, kind: &str, object: &Value) -> Option<Vec<u8>> {
        let desc = message_for(api_version, kind).expect("a compiled-in kind");
        let mut bytes = Vec::new();
        json_to_wire(&desc, object, &mut String::new(), &mut bytes).ok()?;
        Some(bytes)
    }

    #[test]
    fn the_wire_decoder_agrees_with_the_oracle_on_realistic_objects_and_merges() {
        for i in [0, 9, 77_777] {
            let pod: Value =
                serde_json::from_str(&sim_apiserver::fixtures::realistic_pod_json(i)).unwrap();
            let bytes = encoded("v1", "Pod", &pod).unwrap();
            agree_reading("v1", "Pod", &bytes).unwrap();
            // Given twice: singular scalars keep the last, messages merge, lists double.
            agree_reading("v1", "Pod", &[&bytes[..], &bytes[..]].concat()).unwrap();
            let mut out = decode_message_as("v1", "Pod", &bytes).unwrap();
            let object = out.as_object_mut().unwrap();
            assert_eq!(object.remove("kind"), Some(json!("Pod")));
            assert_eq!(object.remove("apiVersion"), Some(json!("v1")));
            let mut expected = pod.clone();
            let expected = expected.as_object_mut().unwrap();
            expected.remove("kind");
            expected.remove("apiVersion");
            // JSON nulls are absent fields on the wire.
            fn without_nulls(v: &Value) -> Value {
                match v {
                    Value::Object(m) => Value::Object(
                        m.iter()
                            .filter(|(_, x)| !x.is_null())
                            .map(|(k, x)| (k.clone(), without_nulls(x)))
                            .collect(),
                    ),
                    Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
                    other => other.clone(),
                }
            }
            assert_eq!(
                Value::Object(object.clone()),
                without_nulls(&Value::Object(expected.clone()))
            );
        }
        let deep = (0..MAX_DEPTH + 5).fold(Vec::new(), |inner, _| {
            let mut outer = Vec::new();
            // Field 2 of a Pod is its spec; a nested run of specs is refused by depth or shape.
            wire::put_bytes(&mut outer, 2, &inner);
            outer
        });
        let desc = message_for("v1", "Pod").unwrap();
        assert!(wire_to_json(&desc, &deep, &mut String::new(), 0).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn the_wire_encoder_agrees_with_the_dynamic_message_oracle(object in deployment()) {
            prop_assert_eq!(agree("apps/v1", "Deployment", &object), Ok(()));
        }

        #[test]
        fn the_wire_decoder_agrees_with_the_dynamic_message_oracle(
            object in deployment(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
            cut in proptest::option::of(any::<prop::sample::Index>()),
        ) {
            if let Some(mut bytes) = encoded("apps/v1", "Deployment", &object) {
                prop_assert_eq!(agree_reading("apps/v1", "Deployment", &bytes), Ok(()));
                let twice = [&bytes[..], &bytes[..]].concat();
                prop_assert_eq!(agree_reading("apps/v1", "Deployment", &twice), Ok(()));
                if damage(&mut bytes, flips, cut) {
                    // Damaged bytes: a typed error or a reading, never a panic. (Where each
                    // reader is lenient differs in corners, a wrong wire type say, so the
                    // readings are not compared.)
                    let desc = message_for("apps/v1", "Deployment").unwrap();
                    let _ = wire_to_json(&desc, &bytes, &mut String::new(), 0);
                }
            }
        }
    }

    // WS1: the serde reader (`wire_serde.rs`) against the JSON tree of the same bytes.
    use super::super::convert::decode_message_into;

    /// `T` read straight from `bytes` against `T` from `decode_message_as`'s JSON of them: the
    /// same value, or both an error.
    fn agree_serde<T>(api_version: &str, kind: &str, bytes: &[u8]) -> Result<(), String>
    where
        T: serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let tree = decode_message_as(api_version, kind, bytes)
            .map_err(|e| e.to_string())
            .and_then(|json| serde_json::from_value::<T>(json).map_err(|e| e.to_string()));
        let direct = decode_message_into::<T>(api_version, kind, &Bytes::copy_from_slice(bytes))
            .map_err(|e| e.to_string());
        match (tree, direct) {
            (Ok(a), Ok(b)) if a == b => Ok(()),
            (Err(_), Err(_)) => Ok(()),
            (tree, direct) => Err(format!(
                "{}: from the tree {tree:?}, read straight {direct:?}",
                std::any::type_name::<T>()
            )),
        }
    }

    /// [`agree_serde`] into `serde_json::Value` (every node as the tree has it) and into the
    /// `k8s_openapi` type of the kind, where the tests use one.
    fn agree_serde_all(api_version: &str, kind: &str, bytes: &[u8]) -> Result<(), String> {
        agree_serde::<Value>(api_version, kind, bytes)?;
        match kind {
            "Pod" => agree_serde::<k8s_openapi::api::core::v1::Pod>(api_version, kind, bytes),
            "Deployment" => {
                agree_serde::<k8s_openapi::api::apps::v1::Deployment>(api_version, kind, bytes)
            }
            "Node" => agree_serde::<k8s_openapi::api::core::v1::Node>(api_version, kind, bytes),
            "Secret" => agree_serde::<k8s_openapi::api::core::v1::Secret>(api_version, kind, bytes),
            _ => Ok(()),
        }
    }

    #[test]
    fn the_serde_reader_agrees_with_the_json_tree_on_realistic_and_special_objects() {
        for i in [0, 9, 77_777] {
            let pod: Value =
                serde_json::from_str(&sim_apiserver::fixtures::realistic_pod_json(i)).unwrap();
            let bytes = encoded("v1", "Pod", &pod).unwrap();
            agree_serde_all("v1", "Pod", &bytes).unwrap();
            agree_serde_all("v1", "Pod", &[&bytes[..], &bytes[..]].concat()).unwrap();
            // Read straight, the pod is the one its JSON gives.
            let direct: k8s_openapi::api::core::v1::Pod =
                decode_message_into("v1", "Pod", &Bytes::from(bytes)).unwrap();
            let from_json: k8s_openapi::api::core::v1::Pod =
                serde_json::from_str(&sim_apiserver::fixtures::realistic_pod_json(i)).unwrap();
            assert_eq!(direct, from_json);
        }
        let mut read = 0;
        for (api_version, kind, object) in cases() {
            if let Some(bytes) = encoded(api_version, kind, &object) {
                agree_serde_all(api_version, kind, &bytes).unwrap();
                read += 1;
            }
        }
        assert!(read >= 6, "only {read} of the special objects encode");
        // Values the tree leaves out: an empty string, a zero time, empty inline JSON, a NaN.
        let desc = message_for("apps/v1", "ControllerRevision").unwrap();
        let mut meta = Vec::new();
        wire::put_bytes(&mut meta, 1, b""); // name ""
        wire::put_bytes(&mut meta, 8, b""); // creationTimestamp: an empty Time
        let mut bytes = Vec::new();
        wire::put_bytes(&mut bytes, 1, &meta);
        let mut data = Vec::new();
        wire::put_bytes(&mut data, 1, b" null ");
        wire::put_bytes(&mut bytes, 2, &data);
        assert!(desc.get_field(2).is_some_and(|f| f.name() == "data"));
        agree_serde_all("apps/v1", "ControllerRevision", &bytes).unwrap();
        let read: Value =
            decode_message_into("apps/v1", "ControllerRevision", &Bytes::from(bytes)).unwrap();
        assert_eq!(
            read,
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {}})
        );
        // An `IntOrString` and a `Quantity` that are empty strings: left out where they are a
        // field, kept in a map.
        let deployment = json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": ""}},
            "template": {"spec": {"containers": [{"name": "c",
                "resources": {"limits": {"cpu": ""}}}]}}}});
        let bytes = encoded("apps/v1", "Deployment", &deployment).unwrap();
        agree_serde_all("apps/v1", "Deployment", &bytes).unwrap();
        let read: Value =
            decode_message_into("apps/v1", "Deployment", &Bytes::from(bytes)).unwrap();
        assert_eq!(read["spec"]["strategy"], json!({"rollingUpdate": {}}));
        assert_eq!(
            read["spec"]["template"]["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": ""}})
        );
        // A packed list with no element (a pod's supplementalGroups): left out.
        let pod = message_for("v1", "Pod").unwrap();
        let spec = pod.get_field(2).unwrap();
        let Kind::Message(spec_desc) = spec.kind() else {
            panic!("spec is a message")
        };
        let security = spec_desc.get_field_by_name("securityContext").unwrap();
        let Kind::Message(security_desc) = security.kind() else {
            panic!("a message")
        };
        let groups = security_desc
            .get_field_by_name("supplementalGroups")
            .unwrap();
        assert!(groups.is_list() && spec.name() == "spec");
        // A pod whose spec.securityContext.supplementalGroups is one packed run of `run`'s bytes,
        // read both ways.
        let read_packed = |run: &[u8]| -> Value {
            let mut inner = Vec::new();
            wire::put_bytes(&mut inner, groups.number(), run);
            let mut spec_bytes = Vec::new();
            wire::put_bytes(&mut spec_bytes, security.number(), &inner);
            let mut bytes = Vec::new();
            wire::put_bytes(&mut bytes, 2, &spec_bytes);
            agree_serde_all("v1", "Pod", &bytes).unwrap();
            decode_message_into("v1", "Pod", &Bytes::from(bytes)).unwrap()
        };
        assert_eq!(read_packed(b"")["spec"], json!({"securityContext": {}}));
        // The same list packed with three elements, one of them a multi-byte varint: each read.
        let mut run = Vec::new();
        for group in [1000u64, 2, 300_000] {
            wire::put_varint(&mut run, group);
        }
        assert_eq!(
            read_packed(&run)["spec"],
            json!({"securityContext": {"supplementalGroups": [1000, 2, 300000]}})
        );
    }

    /// What lets the serde reader give each key once without checking: no message has, through
    /// its inline fields, two fields of one JSON name.
    #[test]
    fn inline_messages_share_no_name_with_their_parent() {
        fn names(desc: &MessageDescriptor, out: &mut Vec<String>) {
            for field in desc.fields() {
                match field.kind() {
                    Kind::Message(inner) if is_inline(&field) => names(&inner, out),
                    _ => out.push(json_name(&field).to_string()),
                }
            }
        }
        let mut checked = 0;
        for desc in descriptors().all_messages() {
            if !desc.fields().any(|f| is_inline(&f)) {
                continue;
            }
            let mut all = Vec::new();
            names(&desc, &mut all);
            let mut once = all.clone();
            once.sort();
            once.dedup();
            assert_eq!(once.len(), all.len(), "{}: {all:?}", desc.full_name());
            checked += 1;
        }
        assert!(checked >= 9, "only {checked} messages with inline fields");
    }

    /// A message with fields named `kind` and `apiVersion`, read as a top-level object: its own
    /// replace the ones given, as in the tree.
    #[test]
    fn the_serde_reader_lets_a_message_name_its_own_kind() {
        let object = json!({"kind": "Deployment", "apiVersion": "apps/v1", "name": "web"});
        let bytes = encoded("autoscaling/v1", "CrossVersionObjectReference", &object).unwrap();
        agree_serde::<Value>("autoscaling/v1", "CrossVersionObjectReference", &bytes).unwrap();
        // A struct refuses a key given twice (a map keeps the last), so this one fails unless
        // each key comes once.
        #[derive(Debug, PartialEq, serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Reference {
            kind: String,
            api_version: String,
            name: String,
        }
        agree_serde::<Reference>("autoscaling/v1", "CrossVersionObjectReference", &bytes).unwrap();
        let typed: Reference = decode_message_into(
            "autoscaling/v1",
            "CrossVersionObjectReference",
            &Bytes::from(bytes.clone()),
        )
        .unwrap();
        assert_eq!(
            (typed.kind.as_str(), typed.name.as_str()),
            ("Deployment", "web")
        );
        let read: Value = decode_message_into(
            "autoscaling/v1",
            "CrossVersionObjectReference",
            &Bytes::from(bytes),
        )
        .unwrap();
        assert_eq!(read, object);
    }

    #[test]
    fn the_serde_reader_says_where_an_object_does_not_fit_the_type() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Pod {
            spec: Spec,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Spec {
            containers: Vec<Container>,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Container {
            image: u32,
        }
        let pod = json!({"spec": {"containers": [{"name": "a", "image": "nginx"}]}});
        let bytes = Bytes::from(encoded("v1", "Pod", &pod).unwrap());
        let err = decode_message_into::<Pod>("v1", "Pod", &bytes).unwrap_err();
        assert!(
            matches!(&err, ProtobufError::Message { path, why }
                if path == "Pod.spec.containers[0].image" && why.contains("expected u32")),
            "{err:?}"
        );
        // Damaged bytes are the wire's error, with where.
        let mut cut = bytes.to_vec();
        cut.truncate(cut.len() - 3);
        let err = decode_message_into::<Value>("v1", "Pod", &Bytes::from(cut)).unwrap_err();
        assert!(
            matches!(&err, ProtobufError::Message { path, .. } if path.starts_with("Pod")),
            "{err:?}"
        );
        let unknown = decode_message_into::<Value>("example.com/v1", "Widget", &bytes);
        assert!(matches!(unknown, Err(ProtobufError::UnknownKind { .. })));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn the_serde_reader_agrees_with_the_json_tree_on_generated_messages(
            object in deployment(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
            cut in proptest::option::of(any::<prop::sample::Index>()),
        ) {
            if let Some(mut bytes) = encoded("apps/v1", "Deployment", &object) {
                prop_assert_eq!(agree_serde_all("apps/v1", "Deployment", &bytes), Ok(()));
                let twice = [&bytes[..], &bytes[..]].concat();
                prop_assert_eq!(agree_serde_all("apps/v1", "Deployment", &twice), Ok(()));
                if damage(&mut bytes, flips, cut) {
                    prop_assert_eq!(agree_serde_all("apps/v1", "Deployment", &bytes), Ok(()));
                }
            }
        }
    }
}
