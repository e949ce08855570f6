//! Built-in Kubernetes objects between their JSON form and their protobuf messages (feature
//! `protobuf-json`), driven by the descriptors of Kubernetes' own `.proto` files (vendored under
//! `proto/` and compiled by `build.rs`) through `prost-reflect`'s dynamic messages.
//!
//! Two users: [`Pb`](crate::store_index::Pb) objects read a JSON answer through it (a proxy that
//! rewrites bodies, an aggregated server without protobuf), and the simulated API server stores
//! JSON and serves protobuf with it. It is a fallback and a test tool, not a fast path: a
//! transcoded object costs a JSON tree, a dynamic message and an encoding.
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

use std::collections::HashMap;
use std::sync::OnceLock;

use base64::Engine as _;
use bytes::Bytes;
use prost::Message as _;
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor,
    ReflectMessage, Value as PValue,
};
use serde_json::{Map, Value};

use super::{time, ProtobufError, Unknown};

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";
const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
const DURATION: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Duration";
const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";

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
fn json_name(field: &FieldDescriptor) -> &str {
    RENAMED
        .iter()
        .find(|(proto, _)| *proto == field.name())
        .map_or(field.name(), |(_, json)| json)
}

/// The field of `desc` whose JSON name is `name`.
fn field_by_json_name(desc: &MessageDescriptor, name: &str) -> Option<FieldDescriptor> {
    RENAMED
        .iter()
        .filter(|(_, json)| *json == name)
        .find_map(|(proto, _)| desc.get_field_by_name(proto))
        .or_else(|| desc.get_field_by_name(name))
}

fn is_inline(field: &FieldDescriptor) -> bool {
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
    Ok(json_to_message(&desc, object, &mut String::new())?.encode_to_vec())
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
    let msg = DynamicMessage::decode(desc, raw).map_err(|e| ProtobufError::Message {
        path: kind.to_string(),
        why: e.to_string(),
    })?;
    let mut out = Map::new();
    out.insert("kind".into(), Value::from(kind));
    out.insert("apiVersion".into(), Value::from(api_version));
    if let Value::Object(fields) = message_to_json(&msg, &mut kind.to_string())? {
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
fn items_wrapper(desc: &MessageDescriptor) -> Option<FieldDescriptor> {
    let mut fields = desc.fields();
    match (fields.next(), fields.next()) {
        (Some(f), None) if f.name() == "items" && f.is_list() => Some(f),
        _ => None,
    }
}

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
