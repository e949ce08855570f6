//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) of built-in kinds, on
//! raw bytes: no generated types and no descriptors are needed by these layers.
//!
//! Layers, each usable alone:
//! - [`wire`]: the protobuf wire format (varints, length-delimited fields), read with bounds;
//! - [`Unknown`]: the `k8s\0` magic + `runtime.Unknown` envelope of every object, list and
//!   `Status` body;
//! - [`FrameDecoder`], [`encode_frame`], [`WatchEvent`]: watch framing
//!   (`;stream=watch`: 4-byte big-endian lengths, bare `meta.v1.WatchEvent`s);
//! - [`meta`]: `ObjectMeta`, `ListMeta` and `Status` read straight off the wire (the metadata
//!   of every top-level built-in object is its field 1).
//!
//! The simulated API server (`tests/sim-apiserver`) serves protobuf with these same layers, and
//! adds a descriptor-driven transcoder of whole objects on top.
//!
//! Malformed input of any layer is a [`ProtobufError`], never a panic, and no length read from
//! the input allocates more than the input holds (or, for frames, than the decoder's bound).

mod envelope;
mod frame;
pub mod meta;
pub use crate::store_index::time;
pub mod wire;

pub use envelope::{Unknown, MAGIC};
pub use frame::{encode_frame, FrameDecoder, WatchEvent, DEFAULT_MAX_FRAME};

/// The media type of protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of protobuf watch streams.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Whether a response's `Content-Type` is protobuf (any parameters, `;stream=watch` included):
/// the answer, not the request's `Accept`, says how a body is decoded (a server may answer JSON
/// to a protobuf `Accept`).
///
/// ```
/// use reflector::protobuf::is_protobuf;
/// assert!(is_protobuf(Some("application/vnd.kubernetes.protobuf;stream=watch")));
/// assert!(!is_protobuf(Some("application/json")));
/// assert!(!is_protobuf(None));
/// ```
pub fn is_protobuf(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case(MEDIA_TYPE))
    })
}

/// Why protobuf input could not be read (or an object could not be written as protobuf).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("not a Kubernetes protobuf object: the k8s\\0 prefix is missing")]
    BadMagic,
    /// The input ends inside a field or a frame.
    #[error("truncated protobuf input in {what}")]
    Truncated {
        /// What was being read.
        what: &'static str,
    },
    /// A watch frame announces more bytes than the decoder's bound.
    #[error("a watch frame of {len} bytes exceeds the bound of {max} bytes")]
    FrameTooLarge {
        /// The announced length.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// Bytes that are not a protobuf message of the expected shape.
    #[error("malformed protobuf in {what}: {why}")]
    Malformed {
        /// What was being read.
        what: &'static str,
        /// What is wrong.
        why: &'static str,
    },
    /// No message is known for this kind (a custom resource, or a group not compiled in).
    #[error("no protobuf message is known for kind {kind:?} of {api_version:?}")]
    UnknownKind {
        /// The envelope's or object's `apiVersion`.
        api_version: String,
        /// Its `kind`.
        kind: String,
    },
    /// A field number the message's descriptor does not define.
    #[error("unknown field number {number} in {path}")]
    UnknownField {
        /// Where, as `Kind.field.field`.
        path: String,
        /// The field number.
        number: u32,
    },
    /// A message that does not decode into its type.
    #[error("invalid protobuf message at {path}: {why}")]
    Message {
        /// Where, as `Kind.field.field`.
        path: String,
        /// What the decoder said.
        why: String,
    },
    /// A JSON object whose shape does not fit its kind's message.
    #[error("the object does not fit its protobuf message at {path}: {why}")]
    Json {
        /// Where, as `.field.field`.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The object type cannot be decoded from protobuf (its `Decode` says so): the client asked
    /// for JSON, or the server answered protobuf where JSON was asked for.
    #[error("{type_name} cannot be decoded from protobuf")]
    Unsupported {
        /// The Rust type.
        type_name: &'static str,
    },
}

#[cfg(test)]
mod tests;
