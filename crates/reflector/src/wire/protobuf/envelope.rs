//! The envelope of every protobuf object kube-apiserver writes: the 4-byte magic `k8s\0`, then a
//! `runtime.Unknown` whose `typeMeta` names the kind and whose `raw` holds the object's message.

use bytes::Bytes;

use super::wire::{self, Field, Reader};
use super::ProtobufError;

/// The prefix of every protobuf-encoded object (not of watch frames, whose events are bare).
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// A decoded `runtime.Unknown`: the kind of the object and its message bytes, not yet decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unknown {
    /// `typeMeta.apiVersion` (`v1`, `apps/v1`).
    pub api_version: String,
    /// `typeMeta.kind` (`Pod`, `PodList`, `Status`).
    pub kind: String,
    /// The object's own protobuf message (no `apiVersion`/`kind` inside it).
    pub raw: Bytes,
    /// `contentEncoding`: empty for everything kube-apiserver writes.
    pub content_encoding: String,
    /// `contentType`: empty (meaning protobuf) for everything kube-apiserver writes.
    pub content_type: String,
}

impl Unknown {
    /// An envelope of `raw`, the message of an object of `api_version`/`kind`.
    pub fn new(api_version: impl Into<String>, kind: impl Into<String>, raw: Bytes) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            raw,
            ..Self::default()
        }
    }

    /// `k8s\0` followed by this envelope, as a body or a watch event's object.
    pub fn encode(&self) -> Vec<u8> {
        let mut type_meta = Vec::with_capacity(self.api_version.len() + self.kind.len() + 4);
        wire::put_bytes(&mut type_meta, 1, self.api_version.as_bytes());
        wire::put_bytes(&mut type_meta, 2, self.kind.as_bytes());
        let mut out = Vec::with_capacity(MAGIC.len() + type_meta.len() + self.raw.len() + 16);
        out.extend_from_slice(&MAGIC);
        wire::put_bytes(&mut out, 1, &type_meta);
        wire::put_bytes(&mut out, 2, &self.raw);
        // Go writes both strings even when empty; readers treat absent and empty alike.
        wire::put_bytes(&mut out, 3, self.content_encoding.as_bytes());
        wire::put_bytes(&mut out, 4, self.content_type.as_bytes());
        out
    }

    /// Decodes `data` (magic included). `raw` shares `data`'s buffer: no copy of the object.
    pub fn decode(data: &Bytes) -> Result<Self, ProtobufError> {
        let view = UnknownView::decode(data)?;
        Ok(Self {
            api_version: view.api_version.to_string(),
            kind: view.kind.to_string(),
            raw: view.raw,
            content_encoding: view.content_encoding.to_string(),
            content_type: view.content_type.to_string(),
        })
    }
}

/// An envelope read without copying its strings: [`Unknown`]'s fields, borrowed from the body.
/// What a watch decodes each event's envelope into, so that reading an event allocates nothing
/// that the object does not keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UnknownView<'a> {
    /// `typeMeta.apiVersion`.
    pub(crate) api_version: &'a str,
    /// `typeMeta.kind`.
    pub(crate) kind: &'a str,
    /// The object's own message, sharing the body's buffer.
    pub(crate) raw: Bytes,
    /// `contentEncoding`.
    pub(crate) content_encoding: &'a str,
    /// `contentType`.
    pub(crate) content_type: &'a str,
}

impl<'a> UnknownView<'a> {
    /// Decodes `data` (magic included), as [`Unknown::decode`] does.
    pub(crate) fn decode(data: &'a Bytes) -> Result<Self, ProtobufError> {
        let Some(body) = data.strip_prefix(&MAGIC[..]) else {
            return Err(ProtobufError::BadMagic);
        };
        let mut out = Self::default();
        let mut fields = Reader::new(body, "runtime.Unknown");
        while let Some(f) = fields.next_field()? {
            match f {
                Field::Bytes(1, tm) => {
                    let mut tm_fields = Reader::new(tm, "runtime.TypeMeta");
                    while let Some(f) = tm_fields.next_field()? {
                        match f {
                            Field::Bytes(1, s) => {
                                out.api_version = wire::utf8(s, "runtime.TypeMeta")?
                            }
                            Field::Bytes(2, s) => out.kind = wire::utf8(s, "runtime.TypeMeta")?,
                            _ => {}
                        }
                    }
                }
                Field::Bytes(2, raw) => out.raw = data.slice_ref(raw),
                Field::Bytes(3, s) => out.content_encoding = wire::utf8(s, "runtime.Unknown")?,
                Field::Bytes(4, s) => out.content_type = wire::utf8(s, "runtime.Unknown")?,
                // Fields a later Kubernetes may add are skipped, as Go's decoder does.
                _ => {}
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_shares_the_raw_bytes() {
        let u = Unknown::new("apps/v1", "Deployment", Bytes::from_static(b"\x0a\x00"));
        let enc = Bytes::from(u.encode());
        assert!(enc.starts_with(b"k8s\0"));
        let back = Unknown::decode(&enc).unwrap();
        assert_eq!(back, u);
        let range = enc.as_ptr() as usize..enc.as_ptr() as usize + enc.len();
        assert!(range.contains(&(back.raw.as_ptr() as usize)));
    }

    #[test]
    fn a_wrong_magic_is_a_typed_error() {
        let mut enc = Unknown::new("v1", "Pod", Bytes::new()).encode();
        enc[0] = b'K';
        assert!(matches!(
            Unknown::decode(&Bytes::from(enc)),
            Err(ProtobufError::BadMagic)
        ));
        assert!(matches!(
            Unknown::decode(&Bytes::from_static(b"{\"kind\":\"Pod\"}")),
            Err(ProtobufError::BadMagic)
        ));
    }

    #[test]
    fn a_truncated_envelope_is_a_typed_error_at_every_cut() {
        let enc = Unknown::new("v1", "Pod", Bytes::from_static(b"0123456789")).encode();
        // Every cut inside the typeMeta field or the raw field leaves a length pointing past
        // the end (the last 4 bytes are the two empty trailing strings).
        let raw_end = enc.len() - 4;
        for cut in (5..4 + 2 + 9).chain(raw_end - 10..raw_end) {
            let r = Unknown::decode(&Bytes::copy_from_slice(&enc[..cut]));
            assert!(r.is_err(), "cut at {cut}: {r:?}");
        }
        let huge_len = Bytes::from_static(b"k8s\0\x12\xff\xff\xff\xff\x0f");
        assert!(matches!(
            Unknown::decode(&huge_len),
            Err(ProtobufError::Truncated { .. })
        ));
    }
}
