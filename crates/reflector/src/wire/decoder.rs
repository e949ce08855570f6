//! The streaming watch-event decoder.
//!
//! A watch body is a stream of JSON objects `{"type":"ADDED","object":{…}}`, normally one per line
//! (kube-apiserver writes one HTTP chunk per event, ending in `\n`). The decoder takes the body's
//! `Bytes` chunks as they arrive:
//!
//! - frames end at `\n` (a `\r` before it is JSON whitespace); objects written back to back on one
//!   line, or with nothing between them, are also accepted;
//! - when a chunk holds whole lines, each frame is a zero-copy slice of the chunk; only a frame split
//!   across chunks is copied, once, into the pending buffer;
//! - per chunk the decoder looks only at the new bytes, never at what is already buffered;
//! - objects that keep raw bytes ([`CompactObject`](delta_fifo::store_index::CompactObject)) copy
//!   them out of a chunk (a chunk is a slice of the HTTP client's read buffer, which a cached object
//!   must not pin), and slice them only out of a frame reassembled in a buffer of its own;
//! - a frame in kube-apiserver's exact layout (`{"type":"MODIFIED","object":{…}}`) is decoded in
//!   one pass over the object ([`Decode::decode_exact`]); any other layout through the envelope;
//! - the pending buffer never exceeds the configured maximum event size (plus one chunk): a larger
//!   event is a [`DecodeError::TooLarge`];
//! - each frame is checked as UTF-8 once and decoded with `serde_json::from_str` in one pass, the
//!   object going straight into the target type through [`Decode`];
//! - framing ([`WatchDecoder::frames`]) is separate from decoding, so that the reading task frames
//!   while the frames are decoded on another thread, the lister-watcher's decode lane (see
//!   `watch_stream` and `decode_lane`);
//! - an `ERROR` event becomes [`WatchEvent::Error`] carrying the parsed [`Status`]; anything
//!   malformed, or of an event type it does not know, is a [`DecodeError`] that ends the watch.
//!   Nothing panics on any input.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use bytes::{Buf, Bytes, BytesMut};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use thiserror::Error;

use crate::store_index::ResourceVersion;
use crate::wire::object::{Decode, DecodeSource, ProtobufSource};
use crate::wire::protobuf::meta as pb_meta;
use crate::wire::protobuf::{
    is_protobuf, FrameDecoder, ProtobufError, RawWatchEventView, UnknownView,
};
use crate::wire::status::Status;

/// Default maximum size of one watch event: 16 MiB.
pub const DEFAULT_MAX_EVENT_SIZE: usize = 16 << 20;

/// The annotation a watch-list stream sets on its initial-events-end bookmark.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// One watch event.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent<K> {
    /// `ADDED`.
    Added(K),
    /// `MODIFIED`.
    Modified(K),
    /// `DELETED` (the object's last state).
    Deleted(K),
    /// `BOOKMARK`: only a resource version (and the watch-list end marker).
    Bookmark(Bookmark),
    /// `ERROR`: the server ended the watch with this status.
    Error(Status),
}

impl<K> WatchEvent<K> {
    /// The event type as written on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => "BOOKMARK",
            WatchEvent::Error(_) => "ERROR",
        }
    }

    /// The object of an `ADDED`, `MODIFIED` or `DELETED` event.
    pub fn object_mut(&mut self) -> Option<&mut K> {
        match self {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => Some(o),
            WatchEvent::Bookmark(_) | WatchEvent::Error(_) => None,
        }
    }
}

/// A `BOOKMARK` event's content.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bookmark {
    /// The resource version the watch has reached.
    pub resource_version: ResourceVersion,
    /// Whether the bookmark carries `k8s.io/initial-events-end: "true"` (watch-list mode).
    pub initial_events_end: bool,
}

/// A watch body that cannot be decoded.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A frame is not valid JSON of a watch event.
    #[error("malformed watch event: {reason} (in {snippet:?})")]
    Json {
        /// The parser's message and position, with the values it quotes redacted (an event may
        /// carry a Secret).
        reason: String,
        /// Whether the frame ended before its JSON did.
        eof: bool,
        /// The start of the offending frame, its JSON string values redacted.
        snippet: String,
    },
    /// A frame is not UTF-8.
    #[error("watch event is not valid UTF-8")]
    Utf8,
    /// An event exceeds the maximum event size.
    #[error("watch event larger than the maximum of {max} bytes")]
    TooLarge {
        /// The configured maximum.
        max: usize,
    },
    /// An event's `type` is none of `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`: the
    /// watch is ended rather than run on with an event silently missing.
    #[error("watch event of unknown type (in {snippet:?})")]
    UnknownEventType {
        /// The start of the offending frame, its JSON string values redacted (the unknown type
        /// is a string value too: the snippet shows where it is, not what it is).
        snippet: String,
    },
    /// The stream ended in the middle of an event.
    #[error("watch stream ended inside an event ({0} bytes pending)")]
    Truncated(usize),
    /// A protobuf watch stream (`;stream=watch`) with a frame or an event that cannot be read:
    /// a frame beyond the maximum event size, a cut frame, a malformed event or envelope, or an
    /// object the type cannot decode.
    #[error("malformed protobuf watch event: {0}")]
    Protobuf(#[from] ProtobufError),
}

/// Decodes a watch body, chunk by chunk, into [`WatchEvent`]s of `K`.
pub struct WatchDecoder<K> {
    pending: BytesMut,
    max_event_size: usize,
    /// A protobuf stream's framing (`None`: JSON lines).
    protobuf: Option<FrameDecoder>,
    /// Each object drops its `metadata.managedFields` once decoded.
    drop_managed_fields: bool,
    _k: PhantomData<fn() -> K>,
}

impl<K> fmt::Debug for WatchDecoder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchDecoder")
            .field("pending", &self.pending.len())
            .field("max_event_size", &self.max_event_size)
            .finish()
    }
}

impl<K: Decode> Default for WatchDecoder<K> {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_EVENT_SIZE)
    }
}

impl<K: Decode> WatchDecoder<K> {
    /// A decoder refusing events larger than `max_event_size` bytes.
    pub fn new(max_event_size: usize) -> Self {
        WatchDecoder {
            pending: BytesMut::new(),
            max_event_size: max_event_size.max(1),
            protobuf: None,
            drop_managed_fields: false,
            _k: PhantomData,
        }
    }

    /// With `drop`, every object decoded drops its `metadata.managedFields`
    /// ([`Object::drop_managed_fields`](crate::store_index::Object::drop_managed_fields)) right
    /// after it is decoded, on the thread that decoded it, before anything else sees it.
    pub fn drop_managed_fields(mut self, drop: bool) -> Self {
        self.drop_managed_fields = drop;
        self
    }

    /// Whether objects drop their `metadata.managedFields` ([`drop_managed_fields`](Self::drop_managed_fields)).
    pub fn drops_managed_fields(&self) -> bool {
        self.drop_managed_fields
    }

    /// A decoder of a protobuf watch stream (`application/vnd.kubernetes.protobuf;stream=watch`:
    /// length-prefixed `WatchEvent` frames), refusing frames larger than `max_event_size` bytes
    /// before reading them.
    pub fn protobuf(max_event_size: usize) -> Self {
        let max_event_size = max_event_size.max(1);
        WatchDecoder {
            protobuf: Some(FrameDecoder::new(max_event_size)),
            ..Self::new(max_event_size)
        }
    }

    /// The decoder of a watch body whose response said `content_type`: protobuf frames for
    /// protobuf, JSON lines otherwise (the answer decides, not what was asked for).
    pub fn for_content_type(content_type: Option<&str>, max_event_size: usize) -> Self {
        if is_protobuf(content_type) {
            Self::protobuf(max_event_size)
        } else {
            Self::new(max_event_size)
        }
    }

    /// Decodes the complete events of `chunk` (and of what was pending before it) into `out`.
    /// Events decoded before an error are in `out` when the error is returned.
    pub fn decode(
        &mut self,
        chunk: Bytes,
        out: &mut Vec<WatchEvent<K>>,
    ) -> Result<(), DecodeError> {
        let mut frames = Vec::new();
        let framed = self.frames(chunk, &mut frames);
        decode_frames(frames, out, self.drop_managed_fields)?;
        framed
    }

    /// Splits the complete frames of `chunk` (and of what was pending before it) off into `out`,
    /// undecoded, keeping an incomplete tail for later. Frames found before an error are in `out`
    /// when the error is returned. Decoding them in order with [`decode_frames`] gives what
    /// [`decode`](Self::decode) gives.
    pub(crate) fn frames(
        &mut self,
        chunk: Bytes,
        out: &mut Vec<RawFrame>,
    ) -> Result<(), DecodeError> {
        if let Some(frames) = &mut self.protobuf {
            frames.push_bytes(chunk);
            while let Some(bytes) = frames.next_frame()? {
                // A frame is a slice of the chunk that held it whole (no copy on the reading
                // thread), or a buffer of its own for one cut across chunks. Objects copy what
                // they keep when they are decoded (on the reflector's lane, `share` false in
                // `decode_protobuf_event`): a slice would pin the HTTP client's read buffer, and
                // a frame the reader allocated would put the cache in the readers' arenas (M1:
                // 37 MB at sync, 55–59 MB after 50k events when objects kept their frames,
                // docs/benchmarks.md).
                out.push(RawFrame {
                    bytes,
                    protobuf: true,
                    last: false,
                });
            }
            return Ok(());
        }
        let mut rest = chunk;
        if !self.pending.is_empty() {
            match memchr::memchr(b'\n', &rest) {
                None => return self.buffer(&rest, out),
                Some(nl) => {
                    if self.pending.len() + nl > self.max_event_size {
                        return Err(self.too_large());
                    }
                    self.pending.extend_from_slice(&rest[..nl]);
                    // The assembled frame is a buffer of its own, but the reader's, and one that
                    // `pending`'s spare capacity still shares: objects copy what they keep out of
                    // it on the lane (M1), as they do for protobuf frames.
                    out.push(RawFrame {
                        bytes: self.pending.split().freeze(),
                        protobuf: false,
                        last: false,
                    });
                    rest.advance(nl + 1);
                }
            }
        }
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', &rest) {
            if nl - start > self.max_event_size {
                return Err(self.too_large());
            }
            if nl > start {
                // Objects copy what they keep out of a chunk: the chunk is a slice of the HTTP
                // client's read buffer, and one long-lived object holding a slice of it would pin
                // the whole buffer (and every other event read into it) for as long as it lives.
                out.push(RawFrame {
                    bytes: rest.slice(start..nl),
                    protobuf: false,
                    last: false,
                });
            }
            start = nl + 1;
        }
        if start < rest.len() {
            return self.buffer(&rest[start..], out);
        }
        Ok(())
    }

    /// The body ended: decodes what is pending. A partial event is an error.
    pub fn finish(&mut self, out: &mut Vec<WatchEvent<K>>) -> Result<(), DecodeError> {
        match self.final_frame()? {
            Some(frame) => decode_frames(vec![frame], out, self.drop_managed_fields),
            None => Ok(()),
        }
    }

    /// The body ended: what is pending, as a last frame to decode like the others (on the lane,
    /// M1), or nothing. A protobuf stream cut inside a frame is [`DecodeError::Truncated`] here;
    /// a JSON event cut short is found when its frame is decoded, as the same error.
    pub(crate) fn final_frame(&mut self) -> Result<Option<RawFrame>, DecodeError> {
        if let Some(frames) = &self.protobuf {
            let pending = frames.pending_len();
            frames.finish().map_err(|e| match e {
                ProtobufError::Truncated { .. } => DecodeError::Truncated(pending),
                other => DecodeError::Protobuf(other),
            })?;
            return Ok(None);
        }
        if self.pending.is_empty() {
            return Ok(None);
        }
        // A buffer of the reader's, like any reassembled frame: objects copy what they keep.
        Ok(Some(RawFrame {
            bytes: self.pending.split().freeze(),
            protobuf: false,
            last: true,
        }))
    }

    /// Bytes held for an event not yet complete.
    pub fn pending_len(&self) -> usize {
        match &self.protobuf {
            Some(frames) => frames.pending_len(),
            None => self.pending.len(),
        }
    }

    fn too_large(&mut self) -> DecodeError {
        self.pending = BytesMut::new();
        DecodeError::TooLarge {
            max: self.max_event_size,
        }
    }

    /// Keeps `tail` (no newline in it) for later. Past the maximum, the pending bytes may still be
    /// several whole objects written without newlines: those are decoded, and only a single object
    /// larger than the maximum is an error.
    fn buffer(&mut self, tail: &[u8], out: &mut Vec<RawFrame>) -> Result<(), DecodeError> {
        self.pending.extend_from_slice(tail);
        if self.pending.len() <= self.max_event_size {
            return Ok(());
        }
        let (consumed, largest) = complete_objects_len(&self.pending)?;
        if largest > self.max_event_size {
            return Err(self.too_large());
        }
        if consumed > 0 {
            out.push(RawFrame {
                bytes: self.pending.split_to(consumed).freeze(),
                protobuf: false,
                last: false,
            });
        }
        if self.pending.len() > self.max_event_size {
            return Err(self.too_large());
        }
        Ok(())
    }
}

/// The length of the prefix of `buf` made of complete JSON values, and the largest of them.
fn complete_objects_len(buf: &[u8]) -> Result<(usize, usize), DecodeError> {
    let text = match std::str::from_utf8(buf) {
        Ok(t) => t,
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&buf[..e.valid_up_to()]).map_err(|_| DecodeError::Utf8)?
        }
        Err(_) => return Err(DecodeError::Utf8),
    };
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<IgnoredAny>();
    let (mut consumed, mut largest) = (0, 0);
    loop {
        match stream.next() {
            None => return Ok((consumed, largest)),
            Some(Ok(_)) => {
                largest = largest.max(stream.byte_offset() - consumed);
                consumed = stream.byte_offset();
            }
            Some(Err(e)) if e.is_eof() => return Ok((consumed, largest)),
            Some(Err(e)) => return Err(json_error(e, text)),
        }
    }
}

fn json_error(source: serde_json::Error, text: &str) -> DecodeError {
    DecodeError::Json {
        reason: crate::wire::snippet::redact_quoted(&source.to_string()),
        eof: source.is_eof(),
        snippet: snippet_of(text),
    }
}

/// The first 120 characters of `text`, string values redacted, to name a frame in an error.
fn snippet_of(text: &str) -> String {
    crate::wire::snippet::body_snippet(text, 120)
}

/// One complete frame of a watch body, not yet decoded.
pub(crate) struct RawFrame {
    /// Made by the task reading the body, never an object's own buffer: objects copy what they
    /// keep out of it where they are decoded, on the reflector's lane (M1).
    pub(super) bytes: Bytes,
    /// A protobuf `WatchEvent` (else JSON text).
    protobuf: bool,
    /// The bytes pending when the body ended, with no newline after them: JSON that ends
    /// before its object does is [`DecodeError::Truncated`], a body cut inside an event.
    last: bool,
}

/// Decodes frames in order into `out`, stopping at the first error (events before it are in
/// `out`); with `drop_managed_fields`, each object drops its `metadata.managedFields` as soon as
/// it is decoded, on the thread that decoded it (see [`WatchDecoder::drop_managed_fields`]).
pub(crate) fn decode_frames<K: Decode>(
    frames: Vec<RawFrame>,
    out: &mut Vec<WatchEvent<K>>,
    drop_managed_fields: bool,
) -> Result<(), DecodeError> {
    let first = out.len();
    let decoded = decode_each(frames, out);
    if drop_managed_fields {
        for event in &mut out[first..] {
            if let Some(object) = event.object_mut() {
                object.drop_managed_fields();
            }
        }
    }
    decoded
}

/// [`decode_frames`]' decoding.
fn decode_each<K: Decode>(
    frames: Vec<RawFrame>,
    out: &mut Vec<WatchEvent<K>>,
) -> Result<(), DecodeError> {
    for frame in frames {
        if frame.protobuf {
            out.push(decode_protobuf_event(&frame.bytes)?);
        } else {
            let len = frame.bytes.len();
            decode_frame(frame.bytes, out).map_err(|e| match e {
                DecodeError::Json { eof: true, .. } if frame.last => DecodeError::Truncated(len),
                other => other,
            })?;
        }
    }
    Ok(())
}

/// Decodes one protobuf frame: a `meta.v1.WatchEvent` whose object is an enveloped object (a
/// `Status` for `ERROR`). An object keeping its message keeps a copy, never a slice of the frame
/// (see [`RawFrame::bytes`]).
fn decode_protobuf_event<K: Decode>(payload: &Bytes) -> Result<WatchEvent<K>, DecodeError> {
    // Views: the event's type and the envelope's kind and apiVersion are read in place.
    let event = RawWatchEventView::decode(payload)?;
    let object = UnknownView::decode(&event.object)?;
    if !object.content_type.is_empty() || !object.content_encoding.is_empty() {
        return Err(ProtobufError::Malformed {
            what: "runtime.Unknown",
            why: "an object that is not protobuf (contentType or contentEncoding set)",
        }
        .into());
    }
    let source = ProtobufSource::new(object.api_version, object.kind, false);
    let decode = || K::decode_protobuf(&object.raw, &source);
    Ok(match event.event_type {
        "ADDED" => WatchEvent::Added(decode()?),
        "MODIFIED" => WatchEvent::Modified(decode()?),
        "DELETED" => WatchEvent::Deleted(decode()?),
        "BOOKMARK" => {
            let meta = pb_meta::object_meta_of(&object.raw)?;
            let end = meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(INITIAL_EVENTS_END_ANNOTATION))
                .is_some_and(|v| v == "true");
            WatchEvent::Bookmark(Bookmark {
                resource_version: meta.resource_version.unwrap_or_default().into(),
                initial_events_end: end,
            })
        }
        "ERROR" if object.kind == "Status" => {
            WatchEvent::Error(Status::from_protobuf(&object.raw)?)
        }
        "ERROR" => WatchEvent::Error(Status::failure(
            500,
            "",
            format!("unexpected watch error object of kind {:?}", object.kind),
        )),
        // The type is a string from the server: it is not quoted back.
        _ => {
            return Err(DecodeError::UnknownEventType {
                snippet: "<protobuf watch event>".to_string(),
            })
        }
    })
}

/// Decodes one frame: normally one event, possibly several written back to back. Objects copy what
/// they keep of it (see [`RawFrame::bytes`]).
fn decode_frame<K: Decode>(frame: Bytes, out: &mut Vec<WatchEvent<K>>) -> Result<(), DecodeError> {
    let text = std::str::from_utf8(&frame).map_err(|_| DecodeError::Utf8)?;
    if text.trim_ascii().is_empty() {
        return Ok(());
    }
    let ctx = DecodeSource::new(text, &frame, false);
    if let Some(event) = decode_apiserver_event(text, &ctx) {
        out.push(event);
        return Ok(());
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let first = EventSeed::<K>::new(&ctx)
        .deserialize(&mut de)
        .map_err(|e| json_error(e, text))?;
    if de.end().is_ok() {
        return push_known(first, text, out);
    }
    // Rare: several objects on one line. Split them (borrowing) and decode each.
    for raw in serde_json::Deserializer::from_str(text).into_iter::<&RawValue>() {
        let raw = raw.map_err(|e| json_error(e, text))?;
        let mut de = serde_json::Deserializer::from_str(raw.get());
        let ev = EventSeed::<K>::new(&ctx)
            .deserialize(&mut de)
            .map_err(|e| json_error(e, text))?;
        push_known(ev, raw.get(), out)?;
    }
    Ok(())
}

/// Pushes a decoded event; `None` (an event type this decoder does not know) is an error that
/// ends the watch, for the reflector to start over rather than run on with a gap.
fn push_known<K>(
    event: Option<WatchEvent<K>>,
    text: &str,
    out: &mut Vec<WatchEvent<K>>,
) -> Result<(), DecodeError> {
    match event {
        Some(event) => {
            out.push(event);
            Ok(())
        }
        None => Err(DecodeError::UnknownEventType {
            snippet: snippet_of(text),
        }),
    }
}

/// The fast path for the exact shape kube-apiserver writes an object event in,
/// `{"type":"ADDED|MODIFIED|DELETED","object":{…}}`: the object's text is everything between that
/// prefix and the final `}`, so it is decoded in one pass with [`Decode::decode_exact`] instead of
/// through the envelope. `None` when the frame has another shape, or when the object's text does
/// not decode as exactly one value (say, a field after `object`): the general path then decodes
/// the frame and reports any error. Which path decoded an event never shows in its result.
fn decode_apiserver_event<K: Decode>(
    text: &str,
    frame: &DecodeSource<'_>,
) -> Option<WatchEvent<K>> {
    const PREFIXES: [(&str, EventType); 3] = [
        (r#"{"type":"MODIFIED","object":"#, EventType::Modified),
        (r#"{"type":"ADDED","object":"#, EventType::Added),
        (r#"{"type":"DELETED","object":"#, EventType::Deleted),
    ];
    let text = text.trim_ascii_end();
    let (prefix, ty) = PREFIXES.iter().find(|(p, _)| text.starts_with(p))?;
    let object = text.get(prefix.len()..text.len().checked_sub(1)?)?;
    if !text.ends_with('}') || !object.starts_with('{') {
        return None;
    }
    let object = K::decode_exact(object, frame).ok()?;
    Some(match ty {
        EventType::Added => WatchEvent::Added(object),
        EventType::Deleted => WatchEvent::Deleted(object),
        _ => WatchEvent::Modified(object),
    })
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Field {
    Type,
    Object,
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
struct BookmarkObject {
    #[serde(default)]
    metadata: BookmarkMeta,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct BookmarkMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

impl From<BookmarkObject> for Bookmark {
    fn from(b: BookmarkObject) -> Self {
        let end = b
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(INITIAL_EVENTS_END_ANNOTATION))
            .is_some_and(|v| v == "true");
        Bookmark {
            resource_version: b.metadata.resource_version.into(),
            initial_events_end: end,
        }
    }
}

/// An `ERROR` event's object: a Status, or (rarely) something else, which still ends the watch.
fn error_status(raw: &RawValue) -> Status {
    match serde_json::from_str::<Status>(raw.get()) {
        Ok(s) => s,
        Err(_) => Status::failure(
            500,
            "",
            format!("unexpected watch error object: {}", raw.get()),
        ),
    }
}

/// Deserializes one event; `None` for an unknown event type (the caller makes that an error).
struct EventSeed<'a, 'de, K> {
    frame: &'a DecodeSource<'de>,
    _k: PhantomData<fn() -> K>,
}

impl<'a, 'de, K> EventSeed<'a, 'de, K> {
    fn new(frame: &'a DecodeSource<'de>) -> Self {
        EventSeed {
            frame,
            _k: PhantomData,
        }
    }
}

impl<'de, K: Decode> DeserializeSeed<'de> for EventSeed<'_, 'de, K> {
    type Value = Option<WatchEvent<K>>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

struct ObjectSeed<'a, 'de, K>(&'a DecodeSource<'de>, PhantomData<fn() -> K>);

impl<'de, K: Decode> DeserializeSeed<'de> for ObjectSeed<'_, 'de, K> {
    type Value = K;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<K, D::Error> {
        K::decode(deserializer, self.0)
    }
}

impl<'de, K: Decode> Visitor<'de> for EventSeed<'_, 'de, K> {
    type Value = Option<WatchEvent<K>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a watch event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut ty: Option<EventType> = None;
        let mut event: Option<Option<WatchEvent<K>>> = None;
        // Only when "object" comes before "type" (kube-apiserver writes "type" first).
        let mut deferred: Option<&'de RawValue> = None;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Type => {
                    if ty.is_some() {
                        return Err(de::Error::duplicate_field("type"));
                    }
                    ty = Some(map.next_value()?);
                }
                Field::Object => {
                    if event.is_some() || deferred.is_some() {
                        return Err(de::Error::duplicate_field("object"));
                    }
                    match ty {
                        Some(t) => event = Some(self.object(t, &mut map)?),
                        None => deferred = Some(map.next_value()?),
                    }
                }
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let ty = ty.ok_or_else(|| de::Error::missing_field("type"))?;
        if let Some(ev) = event {
            return Ok(ev);
        }
        let raw = deferred.ok_or_else(|| de::Error::missing_field("object"))?;
        let mut de = serde_json::Deserializer::from_str(raw.get());
        self.object_from(ty, raw, &mut de)
            .map_err(de::Error::custom)
    }
}

impl<'de, K: Decode> EventSeed<'_, 'de, K> {
    fn object<A: MapAccess<'de>>(
        &self,
        ty: EventType,
        map: &mut A,
    ) -> Result<Option<WatchEvent<K>>, A::Error> {
        let seed = || ObjectSeed::<K>(self.frame, PhantomData);
        Ok(Some(match ty {
            EventType::Added => WatchEvent::Added(map.next_value_seed(seed())?),
            EventType::Modified => WatchEvent::Modified(map.next_value_seed(seed())?),
            EventType::Deleted => WatchEvent::Deleted(map.next_value_seed(seed())?),
            EventType::Bookmark => WatchEvent::Bookmark(map.next_value::<BookmarkObject>()?.into()),
            EventType::Error => WatchEvent::Error(error_status(map.next_value::<&RawValue>()?)),
            EventType::Unknown => {
                map.next_value::<IgnoredAny>()?;
                return Ok(None);
            }
        }))
    }

    fn object_from(
        &self,
        ty: EventType,
        raw: &'de RawValue,
        de: &mut serde_json::Deserializer<serde_json::de::StrRead<'de>>,
    ) -> Result<Option<WatchEvent<K>>, serde_json::Error> {
        let seed = || ObjectSeed::<K>(self.frame, PhantomData);
        Ok(Some(match ty {
            EventType::Added => WatchEvent::Added(seed().deserialize(de)?),
            EventType::Modified => WatchEvent::Modified(seed().deserialize(de)?),
            EventType::Deleted => WatchEvent::Deleted(seed().deserialize(de)?),
            EventType::Bookmark => WatchEvent::Bookmark(BookmarkObject::deserialize(de)?.into()),
            EventType::Error => WatchEvent::Error(error_status(raw)),
            EventType::Unknown => return Ok(None),
        }))
    }
}

#[cfg(test)]
mod tests {
    use delta_fifo::store_index::{CompactObject, DynamicObject, Object};

    use super::*;

    fn ev(ty: &str, name: &str, rv: u32) -> String {
        format!(
            r#"{{"type":"{ty}","object":{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}},"spec":{{"x":"é"}}}}}}"#
        )
    }

    fn decode_all(chunks: &[&[u8]]) -> Result<Vec<WatchEvent<DynamicObject>>, DecodeError> {
        let mut d = WatchDecoder::<DynamicObject>::default();
        let mut out = Vec::new();
        for c in chunks {
            d.decode(Bytes::copy_from_slice(c), &mut out)?;
        }
        d.finish(&mut out)?;
        Ok(out)
    }

    fn names(evs: &[WatchEvent<DynamicObject>]) -> Vec<String> {
        evs.iter()
            .map(|e| match e {
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                    format!("{} {}", e.type_name(), o.name())
                }
                WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.resource_version),
                WatchEvent::Error(s) => format!("ERROR {}", s.code),
            })
            .collect()
    }

    #[test]
    fn events_split_across_chunks_and_several_per_chunk_decode_in_order() {
        let stream = format!(
            "{}\n{}\n{}\n",
            ev("ADDED", "a", 1),
            ev("MODIFIED", "b", 2),
            ev("DELETED", "c", 3)
        );
        let b = stream.as_bytes();
        let out = decode_all(&[&b[..7], &b[7..200], &b[200..]]).unwrap();
        assert_eq!(names(&out), ["ADDED a", "MODIFIED b", "DELETED c"]);
    }

    #[test]
    fn crlf_lf_and_no_separator_are_all_accepted() {
        let stream = format!(
            "{}\r\n{}{}\n\n{}",
            ev("ADDED", "a", 1),
            ev("ADDED", "b", 2),
            ev("ADDED", "c", 3),
            ev("ADDED", "d", 4)
        );
        let out = decode_all(&[stream.as_bytes()]).unwrap();
        assert_eq!(names(&out), ["ADDED a", "ADDED b", "ADDED c", "ADDED d"]);
    }

    #[test]
    fn a_decoder_dropping_managed_fields_hands_out_objects_without_them() {
        let with = |ty: &str, name: &str| {
            format!(
                r#"{{"type":"{ty}","object":{{"kind":"Pod","metadata":{{"name":"{name}","resourceVersion":"1","managedFields":[{{"manager":"m"}}]}},"spec":{{"x":1}}}}}}"#
            )
        };
        // The fast path (an apiserver-shaped line), the general one (the object first), a
        // line cut across chunks and the last line without a newline.
        let general = r#"{"object":{"kind":"Pod","metadata":{"name":"c","managedFields":[{"manager":"m"}]}},"type":"DELETED"}"#;
        let stream = format!(
            "{}\n{general}\n{}",
            with("ADDED", "a"),
            with("MODIFIED", "b")
        );
        for drop in [false, true] {
            let mut d = WatchDecoder::<DynamicObject>::default().drop_managed_fields(drop);
            assert_eq!(d.drops_managed_fields(), drop);
            let mut out = Vec::new();
            let (head, tail) = stream.split_at(stream.len() - 20);
            d.decode(Bytes::copy_from_slice(head.as_bytes()), &mut out)
                .unwrap();
            d.decode(Bytes::copy_from_slice(tail.as_bytes()), &mut out)
                .unwrap();
            d.finish(&mut out).unwrap();
            assert_eq!(names(&out), ["ADDED a", "DELETED c", "MODIFIED b"]);
            for mut event in out {
                let object = event.object_mut().expect("an object event");
                assert_eq!(object.metadata.managed_fields.is_none(), drop);
                let x = object.data.get("spec").and_then(|s| s["x"].as_i64());
                assert_eq!(x, (object.name() != "c").then_some(1), "the rest stays");
            }
        }
    }

    #[test]
    fn bookmark_carries_resource_version_and_initial_events_end() {
        let line = br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        let out = decode_all(&[line]).unwrap();
        assert_eq!(
            out,
            [WatchEvent::Bookmark(Bookmark {
                resource_version: "12".into(),
                initial_events_end: true
            })]
        );
    }

    #[test]
    fn error_event_becomes_a_typed_status() {
        let line = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#;
        let out = decode_all(&[line]).unwrap();
        match &out[0] {
            WatchEvent::Error(s) => assert!(s.is_expired()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn object_before_type_is_accepted() {
        let line =
            br#"{"object":{"metadata":{"name":"x","resourceVersion":"4"}},"type":"MODIFIED"}"#;
        let out = decode_all(&[line]).unwrap();
        assert_eq!(names(&out), ["MODIFIED x"]);
    }

    #[test]
    fn malformed_event_is_a_decode_error_after_the_good_ones() {
        let stream = format!(
            "{}\n{{\"type\":\"ADDED\",\"object\":[}}\n",
            ev("ADDED", "a", 1)
        );
        let mut d = WatchDecoder::<DynamicObject>::default();
        let mut out = Vec::new();
        let err = d.decode(Bytes::from(stream), &mut out).unwrap_err();
        assert!(matches!(err, DecodeError::Json { .. }), "{err}");
        assert_eq!(names(&out), ["ADDED a"]);
    }

    #[test]
    fn truncated_stream_is_reported_at_finish() {
        let e = ev("ADDED", "a", 1);
        let err = decode_all(&[&e.as_bytes()[..30]]).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated(30)), "{err}");
    }

    #[test]
    fn event_larger_than_the_maximum_is_refused_without_buffering_it() {
        let e = ev("ADDED", "a", 1);
        let mut d = WatchDecoder::<DynamicObject>::new(64);
        let mut out = Vec::new();
        let b = e.as_bytes();
        d.decode(Bytes::copy_from_slice(&b[..40]), &mut out)
            .unwrap();
        let err = d
            .decode(Bytes::copy_from_slice(&b[40..]), &mut out)
            .unwrap_err();
        assert!(matches!(err, DecodeError::TooLarge { max: 64 }));
        let err = WatchDecoder::<DynamicObject>::new(64)
            .decode(Bytes::from(format!("{e}\n")), &mut out)
            .unwrap_err();
        assert!(matches!(err, DecodeError::TooLarge { .. }));
        assert!(d.pending_len() <= 64);
    }

    #[test]
    fn many_small_events_without_newlines_are_not_too_large() {
        let stream: String = (0..10).map(|i| ev("ADDED", &format!("p{i}"), i)).collect();
        let mut d = WatchDecoder::<DynamicObject>::new(400);
        let mut out = Vec::new();
        for c in stream.as_bytes().chunks(100) {
            d.decode(Bytes::copy_from_slice(c), &mut out).unwrap();
        }
        d.finish(&mut out).unwrap();
        assert_eq!(out.len(), 10);
    }

    #[test]
    fn compact_objects_never_pin_the_chunk_they_came_in() {
        // The chunk stands for the HTTP client's read buffer: an object keeping a slice of it
        // would keep the whole buffer alive.
        let line = ev("ADDED", "a", 1) + "\n";
        let chunk = Bytes::from(line.clone());
        let mut d = WatchDecoder::<CompactObject>::default();
        let mut out = Vec::new();
        d.decode(chunk.clone(), &mut out).unwrap();
        let WatchEvent::Added(obj) = &out[0] else {
            panic!()
        };
        let start = line.find(r#"{"apiVersion"#).unwrap();
        assert!(!chunk.as_ptr_range().contains(&obj.raw().as_ptr()));
        let line = line.trim_end().as_bytes();
        assert_eq!(&obj.raw()[..], &line[start..line.len() - 1]);
        assert_eq!(obj.resource_version(), Some("1"));
    }

    /// The one-pass path for kube-apiserver's exact layout and the general path agree, event for
    /// event, whatever the layout: field order, spacing, extra fields, escapes, several events on
    /// a line, and types the fast path does not take.
    #[test]
    fn the_apiserver_layout_fast_path_decodes_as_the_general_path_does() {
        let obj = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a\"b","namespace":"ns","resourceVersion":"7","labels":{"k":"v\u00e9"}},"spec":{"s":"}"}}"#;
        let frames = [
            format!(r#"{{"type":"ADDED","object":{obj}}}"#),
            format!(r#"{{"type":"MODIFIED","object":{obj}}}"#),
            format!(r#"{{"type":"DELETED","object":{obj}}}   "#),
            format!(r#"{{ "type" : "MODIFIED", "object" : {obj} }}"#),
            format!(r#"{{"object":{obj},"type":"MODIFIED"}}"#),
            format!(r#"{{"type":"MODIFIED","object":{obj},"extra":1}}"#),
            format!(r#"{{"type":"MODIFIED","object":{obj}}}{{"type":"ADDED","object":{obj}}}"#),
        ];
        for frame in &frames {
            let text = frame.as_str();
            let bytes = Bytes::from(frame.clone());
            let ctx = DecodeSource::new(text, &bytes, false);
            // The general path alone: the envelope visitor.
            let mut general = Vec::new();
            for raw in serde_json::Deserializer::from_str(text).into_iter::<&RawValue>() {
                let mut de = serde_json::Deserializer::from_str(raw.unwrap().get());
                general.extend(
                    EventSeed::<CompactObject>::new(&ctx)
                        .deserialize(&mut de)
                        .unwrap(),
                );
            }
            let mut decoded: Vec<WatchEvent<CompactObject>> = Vec::new();
            decode_frame(bytes.clone(), &mut decoded).unwrap();
            assert_eq!(decoded.len(), general.len(), "{frame}");
            for (a, b) in decoded.iter().zip(&general) {
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "{frame}");
            }
        }
        // A malformed object in the fast path's layout is still an error, with the general
        // path's message.
        let bad = Bytes::from_static(br#"{"type":"ADDED","object":{"metadata":{"name":1}}}"#);
        let mut out: Vec<WatchEvent<CompactObject>> = Vec::new();
        assert!(matches!(
            decode_frame(bad, &mut out),
            Err(DecodeError::Json { .. })
        ));
        assert!(out.is_empty());
    }

    /// M1 for a JSON event cut by a chunk boundary: the decoder assembles it in a buffer the
    /// reader made (and whose spare capacity the next pending event reuses), so the object decoded
    /// from it on the lane keeps a copy, not a slice of that buffer.
    #[test]
    fn m1_compact_objects_from_an_event_split_across_chunks_keep_a_copy_made_where_they_are_decoded(
    ) {
        let line = ev("ADDED", "a", 1) + "\n" + &ev("ADDED", "b", 2)[..10];
        let (head, tail) = line.split_at(25);
        let mut d = WatchDecoder::<CompactObject>::default();
        let mut frames = Vec::new();
        d.frames(Bytes::from(head.to_string()), &mut frames)
            .unwrap();
        assert!(frames.is_empty());
        d.frames(Bytes::from(tail.to_string()), &mut frames)
            .unwrap();
        assert_eq!(
            frames.len(),
            1,
            "the first event is complete, the second pending"
        );
        let span = frames[0].bytes.as_ptr_range();
        let mut out: Vec<WatchEvent<CompactObject>> = Vec::new();
        decode_frames(frames, &mut out, false).unwrap();
        let [WatchEvent::Added(obj)] = &out[..] else {
            panic!("{out:?}")
        };
        assert_eq!((obj.name(), obj.resource_version()), ("a", Some("1")));
        assert!(
            !span.contains(&obj.raw().as_ptr()),
            "the object keeps a slice of the reader's assembled frame"
        );
    }

    #[test]
    fn compact_objects_from_a_chunk_of_several_events_copy_their_bytes() {
        let chunk = Bytes::from(format!(
            "{}\n{}\n{}\n",
            ev("ADDED", "a", 1),
            ev("ADDED", "b", 2),
            ev("ADDED", "c", 3)
        ));
        let mut d = WatchDecoder::<CompactObject>::default();
        let mut out = Vec::new();
        d.decode(chunk.clone(), &mut out).unwrap();
        assert_eq!(out.len(), 3);
        for e in &out {
            let WatchEvent::Added(obj) = e else { panic!() };
            assert!(!chunk.as_ptr_range().contains(&obj.raw().as_ptr()));
            assert!(obj.raw().starts_with(br#"{"apiVersion""#));
        }
    }

    #[test]
    fn an_unknown_event_type_is_an_error_after_the_events_before_it() {
        let stream = format!(
            "{}\n{}\n",
            ev("ADDED", "a", 1),
            r#"{"type":"WEIRD","object":{}}"#
        );
        let mut d = WatchDecoder::<DynamicObject>::default();
        let mut out = Vec::new();
        let err = d
            .decode(Bytes::from(stream), &mut out)
            .expect_err("an unknown type ends the watch");
        assert!(
            matches!(&err, DecodeError::UnknownEventType { snippet } if snippet.contains("WEIRD")),
            "{err}"
        );
        assert_eq!(names(&out), ["ADDED a"]);
    }

    #[test]
    fn garbage_never_panics() {
        for g in [
            &b"\xff\xfe\n"[..],
            b"{}\n",
            b"[]\n",
            b"null\n",
            b"{\"type\":1}\n",
            b"}}}\n",
            b"{\"type\":\"ADDED\"}\n",
        ] {
            assert!(
                decode_all(&[g]).is_err(),
                "{:?}",
                String::from_utf8_lossy(g)
            );
        }
    }

    mod props {
        use proptest::prelude::*;

        use super::*;

        fn event_strategy() -> impl Strategy<Value = String> {
            (0..4usize, "[a-z0-9]{1,12}", 0u32..100000, "[ -~]{0,40}").prop_map(|(t, name, rv, note)| {
                let note = serde_json::to_string(&note).unwrap();
                match t {
                    0 => format!(r#"{{"type":"ADDED","object":{{"metadata":{{"name":"{name}","resourceVersion":"{rv}"}},"note":{note}}}}}"#),
                    1 => format!(r#"{{"type":"MODIFIED","object":{{"metadata":{{"name":"{name}","resourceVersion":"{rv}"}},"note":{note}}}}}"#),
                    2 => format!(r#"{{"type":"DELETED","object":{{"metadata":{{"name":"{name}","resourceVersion":"{rv}"}}}}}}"#),
                    _ => format!(r#"{{"type":"BOOKMARK","object":{{"metadata":{{"resourceVersion":"{rv}"}}}}}}"#),
                }
            })
        }

        fn separator() -> impl Strategy<Value = &'static str> {
            prop_oneof![Just("\n"), Just("\r\n"), Just(""), Just("\n\n")]
        }

        proptest! {
            #[test]
            fn rechunked_stream_decodes_to_the_same_events(
                events in prop::collection::vec((event_strategy(), separator()), 0..20),
                cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
            ) {
                let stream: String = events.iter().map(|(e, s)| format!("{e}{s}")).collect();
                let whole = decode_all(&[stream.as_bytes()]).unwrap();
                prop_assert_eq!(whole.len(), events.len());
                let b = stream.as_bytes();
                let mut points: Vec<usize> = cuts.iter().map(|i| i.index(b.len() + 1)).collect();
                points.sort_unstable();
                let mut chunks = Vec::new();
                let mut last = 0;
                for p in points { chunks.push(&b[last..p]); last = p; }
                chunks.push(&b[last..]);
                let rechunked = decode_all(&chunks).unwrap();
                prop_assert_eq!(rechunked, whole);
            }

            #[test]
            fn corrupted_stream_gives_errors_never_panics(
                events in prop::collection::vec(event_strategy(), 1..8),
                flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
                cut in any::<prop::sample::Index>(),
            ) {
                let mut bytes = events.join("\n").into_bytes();
                for (i, v) in flips { let n = bytes.len(); bytes[i.index(n)] = v; }
                let at = cut.index(bytes.len() + 1);
                let _ = decode_all(&[&bytes[..at], &bytes[at..]]);
                let mut small = WatchDecoder::<CompactObject>::new(50);
                let mut out = Vec::new();
                let _ = small.decode(Bytes::from(bytes), &mut out).and_then(|_| small.finish(&mut out));
            }
        }
    }
}
