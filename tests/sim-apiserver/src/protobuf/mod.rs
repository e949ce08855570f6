//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) for built-in kinds.
//!
//! Layers, each usable alone (a client needs only the first two to frame and unwrap, and the
//! third to turn a message into the JSON-shaped object):
//! - [`Unknown`]: the `k8s\0` magic + `runtime.Unknown` envelope of every object, list and
//!   `Status` body;
//! - [`FrameDecoder`], [`encode_frame`], [`WatchEvent`]: watch framing
//!   (`;stream=watch`: 4-byte big-endian lengths, bare `meta.v1.WatchEvent`s);
//! - [`encode_object`], [`decode_object`], [`message_for`]: objects between the simulator's JSON
//!   and their messages, from Kubernetes' own `.proto` descriptors.
//!
//! Malformed input of any layer is a [`ProtobufError`], never a panic, and no length read from
//! the input allocates more than the input holds (or, for frames, than the decoder's bound).

mod envelope;
mod frame;
pub(crate) mod serve;
mod time;
mod transcode;
mod wire;

pub use envelope::{Unknown, MAGIC};
pub use frame::{encode_frame, FrameDecoder, WatchEvent, DEFAULT_MAX_FRAME};
pub use transcode::{decode_message_as, decode_object, descriptors, encode_object, message_for};

/// The media type of protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of protobuf watch streams.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

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
    /// A message that does not decode against its descriptor.
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
}

#[cfg(test)]
mod tests;
