//! [`Decode`]: how an object type is built from the JSON the server sends.
//!
//! Serde types decode in one pass straight from the frame's text. [`CompactObject`] instead
//! decodes only its metadata and keeps the object's bytes, sliced out of the frame (watch) or
//! copied once (list pages, so that a page's buffer is freed as soon as the page is decoded).

use bytes::Bytes;
use delta_fifo::store_index::{CompactObject, DynamicObject, Object};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// The text an object is being decoded from (a watch event's line, or a list page), and the
/// buffer that holds it, so that an object keeping its raw bytes can slice them rather than copy.
#[derive(Debug, Clone, Copy)]
pub struct DecodeSource<'a> {
    text: &'a str,
    bytes: &'a Bytes,
    share: bool,
}

impl<'a> DecodeSource<'a> {
    /// A source over `bytes`, whose UTF-8 text is `text` (the same memory). With `share`, objects
    /// that keep raw bytes slice them out of `bytes` (no copy); otherwise they copy them.
    pub fn new(text: &'a str, bytes: &'a Bytes, share: bool) -> Self {
        DecodeSource { text, bytes, share }
    }

    /// The bytes of `sub`, which must be a sub-slice of this source's text: a slice of the source's
    /// buffer when sharing, else a copy.
    pub fn bytes_of(&self, sub: &str) -> Bytes {
        let start = (sub.as_ptr() as usize).wrapping_sub(self.text.as_ptr() as usize);
        let inside = start <= self.text.len() && sub.len() <= self.text.len() - start;
        if self.share && inside && self.bytes.len() == self.text.len() {
            self.bytes.slice(start..start + sub.len())
        } else {
            Bytes::copy_from_slice(sub.as_bytes())
        }
    }
}

/// An object type the reflector can decode from list pages and watch events.
///
/// Implemented for [`DynamicObject`] and [`CompactObject`]; implement it for your own serde types
/// with [`decode_with_serde!`](crate::decode_with_serde).
pub trait Decode: Object + Sized {
    /// Decodes one object. `frame` holds the text the deserializer reads from.
    fn decode<'de, D: Deserializer<'de>>(
        deserializer: D,
        frame: &DecodeSource<'de>,
    ) -> Result<Self, D::Error>;

    /// Decodes one object whose JSON is exactly `text` (a sub-slice of `frame`'s text), nothing
    /// but whitespace after it. The watch decoder calls this when it can see where an event's
    /// object starts and ends without parsing the envelope, so a type that keeps its raw bytes
    /// can skip the pass that finds them. The default runs [`decode`](Decode::decode) on `text`.
    fn decode_exact<'de>(
        text: &'de str,
        frame: &DecodeSource<'de>,
    ) -> Result<Self, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(text);
        let object = Self::decode(&mut de, frame)?;
        de.end()?;
        Ok(object)
    }
}

/// Implements [`Decode`] for types that implement `serde::Deserialize` (one pass, no copy).
///
/// ```
/// use reflector::decode_with_serde;
/// use reflector::store_index::{Object, ObjectMeta};
///
/// #[derive(serde::Deserialize)]
/// struct Widget { metadata: ObjectMeta }
/// impl Object for Widget {
///     fn object_meta(&self) -> Option<&ObjectMeta> { Some(&self.metadata) }
/// }
/// decode_with_serde!(Widget);
/// ```
#[macro_export]
macro_rules! decode_with_serde {
    ($($t:ty),+ $(,)?) => {$(
        impl $crate::Decode for $t {
            fn decode<'de, D: $crate::__serde::Deserializer<'de>>(
                deserializer: D,
                _frame: &$crate::DecodeSource<'de>,
            ) -> ::std::result::Result<Self, D::Error> {
                <$t as $crate::__serde::Deserialize<'de>>::deserialize(deserializer)
            }
        }
    )+};
}

decode_with_serde!(DynamicObject);

impl Decode for CompactObject {
    fn decode<'de, D: Deserializer<'de>>(
        deserializer: D,
        frame: &DecodeSource<'de>,
    ) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        CompactObject::from_json(frame.bytes_of(raw.get())).map_err(D::Error::custom)
    }

    /// One pass: the object's extent is already known, so no `RawValue` pass is needed to find it.
    fn decode_exact<'de>(
        text: &'de str,
        frame: &DecodeSource<'de>,
    ) -> Result<Self, serde_json::Error> {
        CompactObject::from_json(frame.bytes_of(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_object_slices_its_bytes_out_of_a_shared_frame() {
        let bytes = Bytes::from_static(br#"{"object":{"metadata":{"name":"a"}}}"#);
        let text = std::str::from_utf8(&bytes).unwrap();
        let frame = DecodeSource::new(text, &bytes, true);
        let sub = &text[10..text.len() - 1];
        let b = frame.bytes_of(sub);
        assert_eq!(b.as_ref(), sub.as_bytes());
        assert_eq!(b.as_ptr(), bytes[10..].as_ptr());
        let copied = DecodeSource::new(text, &bytes, false).bytes_of(sub);
        assert_ne!(copied.as_ptr(), bytes[10..].as_ptr());
        assert_eq!(frame.bytes_of("elsewhere").as_ref(), b"elsewhere");
    }
}
