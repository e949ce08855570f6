//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) for built-in kinds.
//!
//! Layers, each usable alone (all the client's, `reflector::protobuf`, re-exported here):
//! - [`Unknown`]: the `k8s\0` magic + `runtime.Unknown` envelope of every object, list and
//!   `Status` body;
//! - [`FrameDecoder`], [`encode_frame`], [`RawWatchEvent`]: watch framing
//!   (`;stream=watch`: 4-byte big-endian lengths, bare `meta.v1.WatchEvent`s);
//! - [`encode_object`], [`decode_object`], [`message_for`]: objects between the simulator's JSON
//!   and their messages, from Kubernetes' own `.proto` descriptors
//!   (`reflector::protobuf::transcode`).
//!
//! Malformed input of any layer is a [`ProtobufError`], never a panic, and no length read from
//! the input allocates more than the input holds (or, for frames, than the decoder's bound).

pub(crate) mod serve;

// The framing, the envelope, the wire reader and the errors are the client's own codec
// (`reflector::protobuf`): the simulator speaks with the same layers the client reads with, and
// adds only what a server needs on top (negotiation, and answers transcoded on the way out).
pub use reflector::protobuf::transcode::{
    decode_message_as, decode_object, descriptors, encode_object, message_for,
};
pub use reflector::protobuf::{
    encode_frame, time, FrameDecoder, ProtobufError, RawWatchEvent, Unknown, DEFAULT_MAX_FRAME,
    MAGIC, MEDIA_TYPE, WATCH_MEDIA_TYPE,
};

#[cfg(test)]
mod tests;
