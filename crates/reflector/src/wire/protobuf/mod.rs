//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) of built-in kinds, on
//! raw bytes: no generated types and no descriptors are needed by these layers.
//!
//! Layers, each usable alone:
//! - [`wire`]: the protobuf wire format (varints, length-delimited fields), read with bounds;
//! - [`Unknown`]: the `k8s\0` magic + `runtime.Unknown` envelope of every object, list and
//!   `Status` body;
//! - [`FrameDecoder`], [`encode_frame`], [`RawWatchEvent`]: watch framing
//!   (`;stream=watch`: 4-byte big-endian lengths, bare `meta.v1.WatchEvent`s);
//! - [`meta`]: `ObjectMeta` (from `store_index::protobuf`), `ListMeta` and `Status` read straight
//!   off the wire (the metadata of every top-level built-in object is its field 1).
//!
//! - [`transcode`] (feature `protobuf-json`): whole built-in objects between Kubernetes' JSON and
//!   their messages, driven by Kubernetes' own `.proto` descriptors. `Pb` objects read JSON
//!   answers through it; the simulated API server (`tests/sim-apiserver`) serves protobuf with it
//!   and with the layers above;
//! - [`convert`] (feature `protobuf-json`): objects from one type family to another through the
//!   transcoder (a protobuf `CompactObject` into `k8s_openapi` types, `k8s_openapi` to `k8s_pb`).
//!
//! - [`view`] (feature `k8s-pb`): typed views of built-in messages, read in place from the
//!   bytes; `reflector::protobuf::PbView` is the informer object that keeps its message and reads
//!   it through one.
//!
//! Malformed input of any layer is a [`ProtobufError`], never a panic, and no length read from
//! the input allocates more than the input holds (or, for frames, than the decoder's bound).

#[cfg(feature = "protobuf-json")]
pub mod convert;
mod envelope;
mod frame;
pub mod meta;
#[cfg(feature = "protobuf-json")]
pub mod transcode;
#[cfg(feature = "k8s-pb")]
pub mod view;
#[cfg(feature = "protobuf-json")]
mod wire_serde;

// The wire reader, the error and `ObjectMeta` off the wire belong to the object model (a
// `CompactObject` reads its metadata from protobuf): they live in `store_index::protobuf`.
pub use crate::store_index::protobuf::{wire, ProtobufError};
pub use crate::store_index::time;

pub(crate) use envelope::UnknownView;
pub use envelope::{Unknown, MAGIC};
pub(crate) use frame::RawWatchEventView;
pub use frame::{encode_frame, FrameDecoder, RawWatchEvent, DEFAULT_MAX_FRAME};
/// The old name of [`RawWatchEvent`], which read as the decoded [`crate::WatchEvent`].
#[deprecated(
    since = "0.1.0",
    note = "renamed `RawWatchEvent`: a `meta.v1.WatchEvent` whose object is still enveloped"
)]
pub type WatchEvent = RawWatchEvent;

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

#[cfg(test)]
mod tests;
