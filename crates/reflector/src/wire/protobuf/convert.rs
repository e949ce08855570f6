//! Objects from one type family to another through the [`transcode`](super::transcode)r (feature
//! `protobuf-json`): what a `k8s_openapi` user can do with objects that came in protobuf.
//!
//! - [`decode_compact`]: a [`CompactObject`] into any serde type (a `k8s_openapi` type,
//!   `DynamicObject`, your own struct), whatever it holds. A cache of `CompactObject`s asking for
//!   protobuf (`Encoding::Protobuf`: half the bytes, two thirds of the memory) can then decode the
//!   few objects a controller works on into the types it already uses, where
//!   [`CompactObject::decode`] reads JSON only.
//! - `to_k8s_pb` and `from_k8s_pb` (feature `k8s-pb`): any serializable object of a
//!   `k8s.io/api` kind to its `k8s_pb` type and back, e.g. a `k8s_openapi` `Pod` to write with
//!   `Api::create_pb`.
//!
//! Each goes through Kubernetes' JSON form of the object and its message, the way the API server
//! converts them, so the result is what the server would give in the other encoding. From a
//! message, the JSON form is not built: the message is read straight into the type as its JSON
//! would be ([`decode_message_into`], invariant WS1): about 37 µs for a 4 KB pod into a `k8s_openapi` `Pod` here, 2.1× `decode` of the same
//! pod's JSON `CompactObject` (0.70× the JSON tree's 52 µs; docs/benchmarks.md). Into a message,
//! a JSON tree and an encoding (about 55 µs). For objects taken one at a time; a busy cache of
//! `k8s_openapi` objects is cheaper on JSON.
//! Kinds outside `k8s.io/api` have no descriptor compiled in and are a
//! [`ProtobufError::UnknownKind`](crate::protobuf::ProtobufError::UnknownKind).

use serde::de::{DeserializeOwned, Error as _};

use bytes::Bytes;

use super::ProtobufError;
use crate::store_index::{CompactObject, Object, RawEncoding};

/// The message `raw` of `api_version`/`kind` deserialized straight into `T` (a `k8s_openapi`
/// type, `DynamicObject`, `serde_json::Value`, a struct of your own), as
/// `serde_json::from_value` would give it from
/// [`decode_message_as`](super::transcode::decode_message_as)'s JSON (invariant WS1),
/// without building that JSON: each field is converted only when `T` asks for it, straight into
/// what `T` builds. A type that does not fit the object is a [`ProtobufError::Message`] saying
/// where (`Pod.spec.containers[0].ports`) and what the type expected.
///
/// ```
/// use bytes::Bytes;
/// use reflector::protobuf::convert::decode_message_into;
/// use reflector::protobuf::transcode::encode_message_as;
/// use serde::Deserialize;
/// use serde_json::json;
///
/// #[derive(Deserialize)]
/// struct Pod { kind: String, spec: Spec }
/// #[derive(Deserialize)]
/// struct Spec { containers: Vec<Container> }
/// #[derive(Deserialize)]
/// struct Container { image: String }
///
/// let pod = json!({"metadata": {"name": "web"},
///     "spec": {"containers": [{"name": "app", "image": "nginx"}]}});
/// let message = Bytes::from(encode_message_as("v1", "Pod", &pod).unwrap());
/// let typed: Pod = decode_message_into("v1", "Pod", &message).unwrap();
/// assert_eq!((typed.kind.as_str(), typed.spec.containers[0].image.as_str()), ("Pod", "nginx"));
/// ```
pub fn decode_message_into<T: serde::de::DeserializeOwned>(
    api_version: &str,
    kind: &str,
    raw: &Bytes,
) -> Result<T, ProtobufError> {
    let desc = super::transcode::message_for(api_version, kind).ok_or_else(|| {
        ProtobufError::UnknownKind {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        }
    })?;
    super::wire_serde::deserialize(desc, raw.clone(), api_version, kind)
}

/// `object` decoded into `T`: from its JSON as [`CompactObject::decode`] does, or, for an object
/// held in protobuf, from the JSON its message transcodes to (`apiVersion` and `kind`
/// included). Errors are `serde_json`'s, as `decode`'s are; a message that does not transcode
/// (a kind with no descriptor, a malformed message) is one too, saying why.
///
/// ```
/// use bytes::Bytes;
/// use reflector::protobuf::convert::decode_compact;
/// use reflector::protobuf::transcode::encode_message_as;
/// use reflector::store_index::CompactObject;
/// use serde_json::json;
///
/// let pod = json!({"metadata": {"name": "web", "labels": {"app": "web"}},
///     "spec": {"containers": [{"name": "app", "image": "nginx"}]}});
/// let message = Bytes::from(encode_message_as("v1", "Pod", &pod).unwrap());
/// let cached = CompactObject::from_protobuf(message, "v1", "Pod").unwrap();
/// assert!(cached.decode::<serde_json::Value>().is_err()); // protobuf is not JSON
/// let decoded: serde_json::Value = decode_compact(&cached).unwrap();
/// assert_eq!(decoded["spec"]["containers"][0]["image"], "nginx");
/// assert_eq!(decoded["kind"], "Pod");
/// ```
pub fn decode_compact<T: DeserializeOwned>(object: &CompactObject) -> Result<T, serde_json::Error> {
    if object.encoding() != RawEncoding::Protobuf {
        return object.decode();
    }
    decode_message_into(
        object.api_version().unwrap_or(""),
        object.kind().unwrap_or(""),
        object.raw(),
    )
    .map_err(serde_json::Error::custom)
}

#[cfg(feature = "k8s-pb")]
pub use pb::{from_k8s_pb, to_k8s_pb};

#[cfg(feature = "k8s-pb")]
mod pb {
    use bytes::Bytes;
    use serde::de::DeserializeOwned;
    use serde::Serialize;

    use super::super::transcode::encode_message_as;
    use super::super::ProtobufError;
    use super::decode_message_into;
    use crate::store_index::k8s_pb;

    /// `object`, any serializable object of `M`'s kind (a `k8s_openapi` type, a `serde_json`
    /// value), as the `k8s_pb` type `M`. Its own `apiVersion` and `kind`, if it has them, are
    /// not read: `M` names the message.
    ///
    /// ```
    /// use reflector::protobuf::convert::to_k8s_pb;
    /// use reflector::store_index::k8s_pb::api::core::v1::ConfigMap;
    /// use serde_json::json;
    ///
    /// let cm: ConfigMap = to_k8s_pb(&json!({"metadata": {"name": "settings"}, "data": {"mode": "fast"}})).unwrap();
    /// assert_eq!(cm.data["mode"], "fast");
    /// ```
    pub fn to_k8s_pb<M>(object: &impl Serialize) -> Result<M, ProtobufError>
    where
        M: prost::Message + Default + k8s_pb::Resource,
    {
        let json = serde_json::to_value(object).map_err(|e| ProtobufError::Json {
            path: ".".into(),
            why: e.to_string(),
        })?;
        let message = encode_message_as(M::API_VERSION, M::KIND, &json)?;
        M::decode(Bytes::from(message)).map_err(|e| ProtobufError::Message {
            path: M::KIND.to_string(),
            why: e.to_string(),
        })
    }

    /// The `k8s_pb` object `message` as any serde type of its kind (a `k8s_openapi` type,
    /// `DynamicObject`), `apiVersion` and `kind` included in the JSON it is decoded from.
    ///
    /// ```
    /// use reflector::protobuf::convert::from_k8s_pb;
    /// use reflector::store_index::k8s_pb::api::core::v1::ConfigMap;
    ///
    /// let mut cm = ConfigMap::default();
    /// cm.data.insert("mode".into(), "fast".into());
    /// let json: serde_json::Value = from_k8s_pb(&cm).unwrap();
    /// assert_eq!((json["kind"].as_str(), json["data"]["mode"].as_str()), (Some("ConfigMap"), Some("fast")));
    /// ```
    pub fn from_k8s_pb<T, M>(message: &M) -> Result<T, ProtobufError>
    where
        T: DeserializeOwned,
        M: prost::Message + k8s_pb::Resource,
    {
        decode_message_into(
            M::API_VERSION,
            M::KIND,
            &Bytes::from(message.encode_to_vec()),
        )
    }
}
