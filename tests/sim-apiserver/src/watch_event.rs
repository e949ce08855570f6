//! One watch event on the wire: its type and its line, `{"type":…,"object":…}` and a newline,
//! the object's JSON written into the line once and shared by every watcher.

use bytes::Bytes;

/// A watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created (or initial state).
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// A watch event line, `{"type":…,"object":…}` and a newline, the object written in place by
/// `write_object` into a buffer starting at `capacity` bytes; also where the object lies in it.
pub(crate) fn build_event_line(
    etype: &str,
    capacity: usize,
    write_object: impl FnOnce(&mut Vec<u8>),
) -> (Bytes, std::ops::Range<usize>) {
    let mut buf = Vec::with_capacity(capacity);
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(etype.as_bytes());
    buf.extend_from_slice(b"\",\"object\":");
    let start = buf.len();
    write_object(&mut buf);
    let end = buf.len();
    buf.extend_from_slice(b"}\n");
    (Bytes::from(buf), start..end)
}

/// The watch event line announcing the serialized object `obj` as `etype`.
pub(crate) fn event_line(etype: &str, obj: &[u8]) -> Bytes {
    build_event_line(etype, obj.len() + 32, |buf| buf.extend_from_slice(obj)).0
}

/// The object of an event line built by [`build_event_line`] (`{"object":{}}` if it is not one).
pub(crate) fn event_object(line: &[u8]) -> &[u8] {
    const KEY: &[u8] = b"\",\"object\":";
    line.windows(KEY.len())
        .position(|w| w == KEY)
        .map(|pos| pos + KEY.len())
        .filter(|start| line.len() >= start + 2 && line.ends_with(b"}\n"))
        .map(|start| &line[start..line.len() - 2])
        .unwrap_or(b"{}")
}
