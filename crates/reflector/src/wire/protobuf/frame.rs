//! Watch framing of `application/vnd.kubernetes.protobuf;stream=watch`: each frame is a 4-byte
//! big-endian length, then a bare `meta.v1.WatchEvent` (no magic, no envelope) whose
//! `object.raw` holds the object as an enveloped protobuf body ([`super::Unknown`]).

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use super::wire::{self, Field, Reader};
use super::ProtobufError;

/// The frame bound a [`FrameDecoder`] uses unless told otherwise: kube-apiserver refuses objects
/// over about 3 MiB in etcd, so a larger frame is not a watch event.
pub const DEFAULT_MAX_FRAME: usize = 16 * 1024 * 1024;

/// Appends `payload` as one frame.
///
/// # Panics
///
/// If `payload` is 4 GiB or more, which the 4-byte length cannot say (a frame that large is
/// far beyond [`DEFAULT_MAX_FRAME`] and any object kube-apiserver stores).
pub fn encode_frame(out: &mut Vec<u8>, payload: &[u8]) {
    let len = u32::try_from(payload.len()).expect("a watch event fits in 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
}

/// Splits a byte stream, fed in chunks cut anywhere, into frames.
///
/// A frame that a chunk pushed with [`push_bytes`](Self::push_bytes) holds whole is a slice of
/// that chunk: no copy, but it keeps the chunk's buffer alive for as long as it lives, so an
/// object decoded from it copies what it keeps (as the reflector's objects do). Every other frame
/// (one cut across chunks, or any frame of a chunk given to [`push`](Self::push)) is copied into a
/// buffer of its own allocated at exactly its announced length, which pins that frame and nothing
/// else. The decoder holds at most the frame being completed (a length beyond the bound is refused
/// as soon as its 4 bytes are in, before anything is allocated for it) plus the whole frames of
/// the last chunk pushed.
#[derive(Debug)]
pub struct FrameDecoder {
    max_frame: usize,
    /// The length prefix being read.
    head: [u8; 4],
    head_len: usize,
    /// The frame being filled (allocated for its length once its first bytes are in; empty and
    /// unallocated before) and that length: the allocator may give more capacity than asked, so
    /// the capacity does not say where the frame ends.
    current: Option<(BytesMut, usize)>,
    /// Whole frames not yet taken.
    ready: VecDeque<Bytes>,
    /// The error that ended the stream, reported after the frames before it.
    failed: Option<ProtobufError>,
}

impl FrameDecoder {
    /// A decoder refusing frames longer than `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        Self {
            max_frame,
            head: [0; 4],
            head_len: 0,
            current: None,
            ready: VecDeque::new(),
            failed: None,
        }
    }

    /// Appends a chunk of the stream, copying each frame out of it; call [`Self::next_frame`]
    /// until it gives `None` before the next chunk.
    pub fn push(&mut self, chunk: &[u8]) {
        self.push_from(chunk, None);
    }

    /// Appends a chunk of the stream as [`push`](Self::push) does, but a frame the chunk holds
    /// whole comes out as a slice of it, not a copy (see the type's documentation for what that
    /// slice keeps alive).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use reflector::protobuf::{encode_frame, FrameDecoder, DEFAULT_MAX_FRAME};
    ///
    /// let mut stream = Vec::new();
    /// encode_frame(&mut stream, b"first");
    /// encode_frame(&mut stream, b"second");
    /// let stream = Bytes::from(stream);
    /// let mut frames = FrameDecoder::new(DEFAULT_MAX_FRAME);
    /// frames.push_bytes(stream.slice(..12)); // the first frame and 3 bytes of the next
    /// frames.push_bytes(stream.slice(12..));
    /// assert_eq!(frames.next_frame()?.as_deref(), Some(&b"first"[..]));
    /// assert_eq!(frames.next_frame()?.as_deref(), Some(&b"second"[..]));
    /// assert_eq!(frames.next_frame()?, None);
    /// frames.finish()?;
    /// # Ok::<(), reflector::protobuf::ProtobufError>(())
    /// ```
    pub fn push_bytes(&mut self, chunk: Bytes) {
        self.push_from(&chunk, Some(&chunk));
    }

    /// The two `push`es: `chunk` is all of `whole` when it is given, and whole frames are then
    /// sliced out of it.
    fn push_from(&mut self, mut chunk: &[u8], whole: Option<&Bytes>) {
        while !chunk.is_empty() && self.failed.is_none() {
            if let Some((frame, len)) = &mut self.current {
                if frame.is_empty() {
                    // Nothing of this frame read yet: sliced if this chunk holds it whole, else
                    // a buffer at its exact length.
                    let len = *len;
                    if let Some(whole) = whole.filter(|_| chunk.len() >= len) {
                        self.current = None;
                        self.ready.push_back(whole.slice_ref(&chunk[..len]));
                        chunk = &chunk[len..];
                        continue;
                    }
                    *frame = BytesMut::with_capacity(len);
                }
                let take = (*len - frame.len()).min(chunk.len());
                frame.extend_from_slice(&chunk[..take]);
                chunk = &chunk[take..];
                if frame.len() == *len {
                    if let Some((done, _)) = self.current.take() {
                        self.ready.push_back(done.freeze());
                    }
                }
                continue;
            }
            let take = (4 - self.head_len).min(chunk.len());
            self.head[self.head_len..self.head_len + take].copy_from_slice(&chunk[..take]);
            self.head_len += take;
            chunk = &chunk[take..];
            if self.head_len < 4 {
                continue;
            }
            self.head_len = 0;
            let len = u32::from_be_bytes(self.head) as usize;
            if len > self.max_frame {
                self.failed = Some(ProtobufError::FrameTooLarge {
                    len,
                    max: self.max_frame,
                });
            } else if len == 0 {
                self.ready.push_back(Bytes::new());
            } else {
                // Allocated once its first bytes come (it may come whole in the next chunk).
                self.current = Some((BytesMut::new(), len));
            }
        }
    }

    /// The next whole frame's payload, `None` until more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, ProtobufError> {
        if let Some(frame) = self.ready.pop_front() {
            return Ok(Some(frame));
        }
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(None),
        }
    }

    /// Bytes held for a frame not yet complete.
    pub fn pending_len(&self) -> usize {
        self.head_len + self.current.as_ref().map_or(0, |(frame, _)| frame.len())
    }

    /// At the end of the stream: an error if a frame was cut short.
    pub fn finish(&self) -> Result<(), ProtobufError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.head_len == 0 && self.current.is_none() {
            Ok(())
        } else {
            Err(ProtobufError::Truncated {
                what: "a watch frame",
            })
        }
    }
}

/// A `meta.v1.WatchEvent` as framed on the wire: its type and its object, still enveloped (the
/// decoded event, object and all, is [`crate::WatchEvent`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawWatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub event_type: String,
    /// `object.raw`: `k8s\0` + `runtime.Unknown` (a `Status` for `ERROR`).
    pub object: Bytes,
}

impl RawWatchEvent {
    /// The event's message (the payload of one frame).
    pub fn encode(&self) -> Vec<u8> {
        let mut raw_ext = Vec::with_capacity(self.object.len() + 6);
        wire::put_bytes(&mut raw_ext, 1, &self.object);
        let mut out = Vec::with_capacity(raw_ext.len() + self.event_type.len() + 8);
        wire::put_bytes(&mut out, 1, self.event_type.as_bytes());
        wire::put_bytes(&mut out, 2, &raw_ext);
        out
    }

    /// Decodes one frame's payload; `object` shares `payload`'s buffer.
    pub fn decode(payload: &Bytes) -> Result<Self, ProtobufError> {
        let view = RawWatchEventView::decode(payload)?;
        Ok(Self {
            event_type: view.event_type.to_string(),
            object: view.object,
        })
    }
}

/// A watch event read without copying its type: [`RawWatchEvent`]'s fields, the type borrowed from
/// the frame. What a watch decodes each frame into, so that reading an event allocates nothing
/// that the object does not keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawWatchEventView<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub(crate) event_type: &'a str,
    /// `object.raw`, sharing the frame's buffer.
    pub(crate) object: Bytes,
}

impl<'a> RawWatchEventView<'a> {
    /// Decodes one frame's payload, as [`RawWatchEvent::decode`] does.
    pub(crate) fn decode(payload: &'a Bytes) -> Result<Self, ProtobufError> {
        let mut event_type = None;
        let mut object = Bytes::new();
        let mut fields = Reader::new(payload, "meta.v1.WatchEvent");
        while let Some(f) = fields.next_field()? {
            match f {
                Field::Bytes(1, t) => event_type = Some(wire::utf8(t, "meta.v1.WatchEvent")?),
                Field::Bytes(2, ext) => {
                    let mut ext_fields = Reader::new(ext, "runtime.RawExtension");
                    while let Some(f) = ext_fields.next_field()? {
                        if let Field::Bytes(1, raw) = f {
                            object = payload.slice_ref(raw);
                        }
                    }
                }
                _ => {}
            }
        }
        let event_type = event_type.ok_or(ProtobufError::Malformed {
            what: "meta.v1.WatchEvent",
            why: "an event without a type",
        })?;
        Ok(Self { event_type, object })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::protobuf::Unknown;

    fn frames_of(events: &[RawWatchEvent]) -> Vec<u8> {
        let mut out = Vec::new();
        for e in events {
            encode_frame(&mut out, &e.encode());
        }
        out
    }

    fn event(t: &str, name: &[u8]) -> RawWatchEvent {
        let object = Unknown::new("v1", "ConfigMap", Bytes::copy_from_slice(name)).encode();
        RawWatchEvent {
            event_type: t.to_string(),
            object: Bytes::from(object),
        }
    }

    /// Three events of three types, the last with an empty object.
    fn three_events() -> Vec<RawWatchEvent> {
        vec![
            event("ADDED", b"a"),
            event("MODIFIED", b"bb"),
            event("BOOKMARK", b""),
        ]
    }

    #[test]
    fn frames_split_at_every_byte_decode_the_same() {
        let events = three_events();
        let stream = frames_of(&events);
        for cut in 0..=stream.len() {
            let mut d = FrameDecoder::new(1024);
            let mut got = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                d.push(part);
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(RawWatchEvent::decode(&f).unwrap());
                }
            }
            d.finish().unwrap();
            assert_eq!(got, events, "cut at {cut}");
        }
    }

    /// Whether `frame`'s bytes lie inside `chunk`'s.
    fn inside(frame: &[u8], chunk: &[u8]) -> bool {
        let range = chunk.as_ptr() as usize..chunk.as_ptr() as usize + chunk.len();
        frame.is_empty() || range.contains(&(frame.as_ptr() as usize))
    }

    #[test]
    fn pushed_as_bytes_cut_anywhere_frames_decode_the_same_and_only_cut_ones_are_copied() {
        let events = three_events();
        let stream = Bytes::from(frames_of(&events));
        // Where each frame's payload (after its 4-byte length) starts and ends in the stream.
        let mut spans = Vec::new();
        let mut at = 0;
        for e in &events {
            let len = e.encode().len();
            spans.push(at + 4..at + 4 + len);
            at += 4 + len;
        }
        for first in 0..=stream.len() {
            for second in first..=stream.len() {
                let chunks = [
                    stream.slice(..first),
                    stream.slice(first..second),
                    stream.slice(second..),
                ];
                let mut d = FrameDecoder::new(1024);
                let mut got = Vec::new();
                for chunk in &chunks {
                    d.push_bytes(chunk.clone());
                    while let Some(f) = d.next_frame().unwrap() {
                        let span = &spans[got.len()];
                        let whole_in = chunks.iter().filter(|c| !c.is_empty()).find(|c| {
                            let start = c.as_ptr() as usize - stream.as_ptr() as usize;
                            start <= span.start && span.end <= start + c.len()
                        });
                        match whole_in {
                            Some(c) => assert!(inside(&f, c), "{first}/{second}: copied"),
                            None => assert!(!inside(&f, &stream), "{first}/{second}: a slice"),
                        }
                        got.push(RawWatchEvent::decode(&f).unwrap());
                    }
                }
                d.finish().unwrap();
                assert_eq!(got, events, "cut at {first} and {second}");
            }
        }
    }

    #[test]
    fn a_length_beyond_the_bound_is_refused_before_buffering_it() {
        let mut d = FrameDecoder::new(100);
        d.push(&1000u32.to_be_bytes());
        assert!(matches!(
            d.next_frame(),
            Err(ProtobufError::FrameTooLarge {
                len: 1000,
                max: 100
            })
        ));
        let mut d = FrameDecoder::new(100);
        d.push(&u32::MAX.to_be_bytes());
        assert!(d.next_frame().is_err());
    }

    #[test]
    fn each_frame_has_a_buffer_of_its_own_at_its_exact_length() {
        let events = [event("ADDED", b"a"), event("MODIFIED", b"bbbb")];
        let stream = frames_of(&events);
        let mut d = FrameDecoder::new(1024);
        d.push(&stream);
        let a = d.next_frame().unwrap().unwrap();
        let b = d.next_frame().unwrap().unwrap();
        let (a_end, b_start) = (a.as_ptr() as usize + a.len(), b.as_ptr() as usize);
        assert!(a_end != b_start, "frames share one buffer");
        let own = stream.as_ptr() as usize..stream.as_ptr() as usize + stream.len();
        assert!(
            !own.contains(&(a.as_ptr() as usize)),
            "a frame borrows the chunk"
        );
        assert_eq!(RawWatchEvent::decode(&b).unwrap(), events[1]);
    }

    #[test]
    fn frames_before_an_oversized_one_are_delivered_first() {
        let mut stream = frames_of(&[event("ADDED", b"a")]);
        stream.extend_from_slice(&5000u32.to_be_bytes());
        let mut d = FrameDecoder::new(1024);
        d.push(&stream);
        assert!(d.next_frame().unwrap().is_some());
        assert!(matches!(
            d.next_frame(),
            Err(ProtobufError::FrameTooLarge { len: 5000, .. })
        ));
        assert!(d.finish().is_err());
    }

    #[test]
    fn a_truncated_frame_is_reported_at_the_end() {
        let stream = frames_of(&[event("ADDED", b"abc")]);
        let mut d = FrameDecoder::new(1024);
        d.push(&stream[..stream.len() - 1]);
        assert!(d.next_frame().unwrap().is_none());
        assert!(matches!(d.finish(), Err(ProtobufError::Truncated { .. })));
    }

    #[test]
    fn an_event_without_a_type_or_with_a_cut_field_is_an_error() {
        assert!(RawWatchEvent::decode(&Bytes::new()).is_err());
        let enc = event("ADDED", b"abc").encode();
        for cut in 1..enc.len() {
            let r = RawWatchEvent::decode(&Bytes::copy_from_slice(&enc[..cut]));
            // Only the cut right after the type field leaves a whole (object-less) event.
            if cut != 7 {
                assert!(r.is_err(), "cut at {cut}");
            }
        }
    }
}
