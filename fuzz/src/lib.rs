//! What the fuzz targets share: cutting an input in two where its first byte says, and feeding
//! the pieces to a watch decoder as the chunks of one body.

use bytes::Bytes;
use reflector::{Decode, WatchDecoder};

/// `data` without its first byte, cut in two at the place that byte picks (any place, the ends
/// included); `None` for empty input.
pub fn cut(data: &[u8]) -> Option<[&[u8]; 2]> {
    let (&at, body) = data.split_first()?;
    let at = at as usize % (body.len() + 1);
    Some([&body[..at], &body[at..]])
}

/// Feeds `chunks` to `decoder` in order, then ends the body; stops at the first error, as a
/// watch does. Any bytes must give events or a typed error, never a panic.
pub fn stream<K: Decode>(mut decoder: WatchDecoder<K>, chunks: &[&[u8]]) {
    let mut events = Vec::new();
    for chunk in chunks {
        if decoder
            .decode(Bytes::copy_from_slice(chunk), &mut events)
            .is_err()
        {
            return;
        }
    }
    let _ = decoder.finish(&mut events);
}
