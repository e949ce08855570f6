//! The `Content-Encoding` of a response body: identity, or gzip decompressed as its frames
//! arrive.
//!
//! kube-apiserver compresses a response of 128 KiB or more when the request says
//! `Accept-Encoding: gzip`, which a list of thousands of objects always is: the wire carries
//! an eighth to a tenth of the JSON. Decompressing must not undo the bounds a body read whole
//! keeps (docs/semantics.md, C16 and H3): the compressed body is never held (each frame is
//! inflated and dropped), the *decompressed* body is bounded by the same `max_bytes` as an
//! identity body, and inflating stops as soon as that bound is crossed, so a few KiB that would
//! expand to gigabytes (a gzip bomb) cost at most one inflate buffer beyond the bound. The
//! compressed bytes are bounded too, a little above `max_bytes` (a gzip stream can be made of
//! empty blocks that never produce a byte). A stream that is corrupt, truncated or followed by
//! anything is an error, never a short body.

use std::io::{self, Write as _};

use bytes::Bytes;
use flate2::write::GzDecoder;
use http::header::CONTENT_ENCODING;
use http::HeaderMap;
use http_body_util::BodyExt as _;

use super::error::ClientError;

/// How a response body is encoded, from its `Content-Encoding` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContentCoding {
    /// No header, an empty one, or `identity`: the bytes are the body.
    Identity,
    /// `gzip` (or its old alias `x-gzip`).
    Gzip,
}

impl ContentCoding {
    /// The encoding `headers` announce; anything but identity and gzip (`br`, `deflate`, a
    /// list of codings) is a transport error naming `what`: the client only ever asks for gzip.
    pub(crate) fn of(headers: &HeaderMap, what: &str) -> Result<Self, ClientError> {
        let Some(value) = headers.get(CONTENT_ENCODING) else {
            return Ok(ContentCoding::Identity);
        };
        let coding = value.to_str().unwrap_or("").trim();
        if coding.is_empty() || coding.eq_ignore_ascii_case("identity") {
            Ok(ContentCoding::Identity)
        } else if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            Ok(ContentCoding::Gzip)
        } else {
            Err(ClientError::transport(
                format!("reading the body of {what}"),
                Box::new(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "unsupported Content-Encoding {:?} (only gzip is accepted)",
                        String::from_utf8_lossy(value.as_bytes())
                    ),
                )),
            ))
        }
    }
}

/// Why inflating stopped.
#[derive(Debug)]
pub(crate) enum InflateError {
    /// The decompressed body would exceed its bound; nothing more was inflated.
    TooLarge,
    /// The compressed bytes exceed their bound (`max_bytes` plus gzip's worst-case overhead).
    CompressedTooLarge,
    /// Not a gzip stream, a corrupt or truncated one, or bytes after its end.
    Corrupt(io::Error),
}

/// A gzip stream inflated frame by frame into one bounded buffer.
///
/// Invariants: the output buffer never holds more than `max` bytes; at most `wire_max`
/// compressed bytes are accepted; once a call has failed, the inflater is not used again (its methods take it by
/// value or are only called by a loop that stops at the first error).
pub(crate) struct Inflater {
    decoder: GzDecoder<Bounded>,
    compressed: usize,
    wire_max: usize,
}

impl Inflater {
    /// An inflater whose output is bounded by `max` bytes; `capacity` is a first guess of the
    /// output's size (clamped to `max`).
    pub(crate) fn new(max: usize, capacity: usize) -> Self {
        Inflater {
            decoder: GzDecoder::new(Bounded {
                buf: Vec::with_capacity(capacity.min(max)),
                max,
                exceeded: false,
            }),
            compressed: 0,
            wire_max: compressed_bound(max),
        }
    }

    /// Inflates one frame of the compressed stream (any size, any split).
    pub(crate) fn feed(&mut self, frame: &[u8]) -> Result<(), InflateError> {
        self.compressed = self.compressed.saturating_add(frame.len());
        if self.compressed > self.wire_max {
            return Err(InflateError::CompressedTooLarge);
        }
        self.decoder.write_all(frame).map_err(|e| self.failure(e))
    }

    /// Ends the stream: checks that it was whole (its trailer's CRC and length match) and
    /// returns the body.
    pub(crate) fn finish(mut self) -> Result<Bytes, InflateError> {
        if let Err(e) = self.decoder.try_finish() {
            return Err(self.failure(e));
        }
        let mut out = std::mem::take(&mut self.decoder.get_mut().buf);
        // The buffer grew by doubling; give back what the body does not use (for a large
        // buffer, realloc remaps pages instead of copying).
        out.shrink_to_fit();
        Ok(Bytes::from(out))
    }

    fn failure(&self, e: io::Error) -> InflateError {
        if self.decoder.get_ref().exceeded {
            InflateError::TooLarge
        } else {
            InflateError::Corrupt(e)
        }
    }
}

/// The most compressed bytes a gzip stream of at most `max` decompressed bytes needs: deflate's
/// stored blocks add 5 bytes per 65,535, the gzip header and trailer 18 (more with optional
/// name and comment fields); the slack is generous.
fn compressed_bound(max: usize) -> usize {
    max.saturating_add(max / 1024).saturating_add(64 << 10)
}

/// The decompressed bytes, refusing any write that would take them past `max`.
struct Bounded {
    buf: Vec<u8>,
    max: usize,
    exceeded: bool,
}

impl io::Write for Bounded {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.len() > self.max - self.buf.len() {
            self.exceeded = true;
            return Err(io::Error::other(
                "the decompressed body exceeds its maximum",
            ));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads a gzip body, inflating each frame as it arrives and dropping it; the decompressed body
/// is bounded by `max` ([`ClientError::BodyTooLarge`] as soon as it would cross it, as would the
/// compressed bytes a little above it), a corrupt or truncated stream is a transport error;
/// `len` is the `Content-Length` (compressed), `what` names the request in errors.
pub(crate) async fn read_gzip_body<B>(
    mut body: B,
    len: Option<usize>,
    max: usize,
    what: &str,
) -> Result<Bytes, ClientError>
where
    B: hyper::body::Body<Data = Bytes, Error = hyper::Error> + Unpin,
{
    let too_large = || ClientError::BodyTooLarge {
        what: what.to_string(),
        limit: max,
    };
    let fail = |e: InflateError| match e {
        InflateError::TooLarge | InflateError::CompressedTooLarge => too_large(),
        InflateError::Corrupt(e) => {
            ClientError::transport(format!("decoding the gzip body of {what}"), Box::new(e))
        }
    };
    if len.is_some_and(|len| len > compressed_bound(max)) {
        return Err(too_large());
    }
    // JSON lists compress about tenfold; start at four times the compressed size and let the
    // buffer double from there.
    let capacity = len.map_or(64 << 10, |len| len.saturating_mul(4));
    let mut inflater = Inflater::new(max, capacity);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            ClientError::transport(format!("reading the body of {what}"), Box::new(e))
        })?;
        if let Ok(data) = frame.into_data() {
            inflater.feed(&data).map_err(fail)?;
        }
    }
    inflater.finish().map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::Compression;
    use proptest::prelude::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn pod_list(n: usize) -> Vec<u8> {
        let items: Vec<String> = (0..n)
            .map(|i| format!(r#"{{"metadata":{{"name":"pod-{i}","namespace":"default","resourceVersion":"{i}"}},"spec":{{"nodeName":"node-{}"}}}}"#, i % 7))
            .collect();
        format!(
            r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"{n}"}},"items":[{}]}}"#,
            items.join(",")
        )
        .into_bytes()
    }

    fn inflate_in_frames(
        compressed: &[u8],
        frame: usize,
        max: usize,
    ) -> Result<Bytes, InflateError> {
        let mut inflater = Inflater::new(max, 0);
        for chunk in compressed.chunks(frame.max(1)) {
            inflater.feed(chunk)?;
        }
        inflater.finish()
    }

    #[test]
    fn a_body_split_into_one_byte_frames_inflates_to_the_original() {
        let body = pod_list(500);
        let compressed = gzip(&body);
        assert!(compressed.len() * 5 < body.len(), "the fixture compresses");
        for frame in [1, 2, 7, 4096, compressed.len()] {
            let out = inflate_in_frames(&compressed, frame, body.len()).unwrap();
            assert_eq!(out, body, "frames of {frame} bytes");
        }
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_limit_without_inflating_the_rest() {
        // 16 MiB of zeros compress to about 16 KiB; the limit is 256 KiB.
        let mut e = GzEncoder::new(Vec::new(), Compression::best());
        e.write_all(&vec![0u8; 16 << 20]).unwrap();
        let bomb = e.finish().unwrap();
        assert!(bomb.len() < 32 << 10, "{} bytes", bomb.len());
        let max = 256 << 10;
        let mut inflater = Inflater::new(max, 0);
        let mut fed = 0;
        let err = bomb
            .chunks(256)
            .find_map(|chunk| {
                fed += chunk.len();
                inflater.feed(chunk).err()
            })
            .expect("the bomb is refused");
        assert!(matches!(err, InflateError::TooLarge), "{err:?}");
        // Refused after about a thousandth of the limit in compressed bytes (zeros deflate
        // about 1000:1), not after the whole bomb: the rest was never inflated.
        assert!(fed * 8 < bomb.len(), "fed {fed} of {} bytes", bomb.len());
        assert!(inflater.decoder.get_ref().buf.len() <= max);
    }

    #[test]
    fn a_body_of_exactly_the_limit_is_accepted_and_one_byte_more_refused() {
        let body = pod_list(50);
        let compressed = gzip(&body);
        assert_eq!(
            inflate_in_frames(&compressed, 10, body.len()).unwrap(),
            body
        );
        let err = inflate_in_frames(&compressed, 10, body.len() - 1).unwrap_err();
        assert!(matches!(err, InflateError::TooLarge), "{err:?}");
    }

    #[test]
    fn corrupt_gzip_is_an_error_not_a_panic() {
        let body = pod_list(100);
        let good = gzip(&body);
        // Not gzip at all.
        let err = inflate_in_frames(&body, 100, 1 << 20).unwrap_err();
        assert!(matches!(err, InflateError::Corrupt(_)), "{err:?}");
        // A flipped bit in the deflate data or in the CRC.
        for at in [good.len() / 2, good.len() - 6] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            let err = inflate_in_frames(&bad, 33, 1 << 20).unwrap_err();
            assert!(
                matches!(err, InflateError::Corrupt(_)),
                "byte {at}: {err:?}"
            );
        }
        // Bytes after the end of the stream.
        let mut trailing = good.clone();
        trailing.extend_from_slice(b"garbage");
        let err = inflate_in_frames(&trailing, 64, 1 << 20).unwrap_err();
        assert!(matches!(err, InflateError::Corrupt(_)), "{err:?}");
    }

    #[test]
    fn a_truncated_stream_is_an_error_never_a_short_body() {
        let body = pod_list(100);
        let good = gzip(&body);
        for cut in [0, 5, 10, good.len() / 2, good.len() - 8, good.len() - 1] {
            let err = inflate_in_frames(&good[..cut], 16, 1 << 20).unwrap_err();
            assert!(
                matches!(err, InflateError::Corrupt(_)),
                "cut at {cut}: {err:?}"
            );
        }
    }

    #[test]
    fn endless_empty_blocks_are_bounded_by_the_compressed_limit() {
        // A gzip header, then stored blocks of length 0 (3 bytes each, never a byte of output):
        // without a bound on the compressed bytes, this would be read until the timeout.
        let mut inflater = Inflater::new(1024, 0);
        inflater
            .feed(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff])
            .unwrap();
        let empty_blocks: Vec<u8> = [0x00, 0x00, 0x00, 0xff, 0xff].repeat(1000);
        let err = loop {
            if let Err(e) = inflater.feed(&empty_blocks) {
                break e;
            }
        };
        assert!(matches!(err, InflateError::CompressedTooLarge), "{err:?}");
    }

    #[test]
    fn content_encoding_identity_gzip_and_the_rest() {
        let enc = |v: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(v) = v {
                h.insert(CONTENT_ENCODING, v.parse().unwrap());
            }
            ContentCoding::of(&h, "GET /api/v1/pods")
        };
        assert_eq!(enc(None).unwrap(), ContentCoding::Identity);
        assert_eq!(enc(Some("identity")).unwrap(), ContentCoding::Identity);
        assert_eq!(enc(Some("")).unwrap(), ContentCoding::Identity);
        assert_eq!(enc(Some("gzip")).unwrap(), ContentCoding::Gzip);
        assert_eq!(enc(Some(" GZIP ")).unwrap(), ContentCoding::Gzip);
        assert_eq!(enc(Some("x-gzip")).unwrap(), ContentCoding::Gzip);
        for other in ["br", "deflate", "gzip, br", "zstd"] {
            let err = enc(Some(other)).unwrap_err().to_string();
            assert!(
                err.contains("GET /api/v1/pods") && err.contains("unsupported Content-Encoding"),
                "{other}: {err}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any body, compressed and cut into arbitrary frames, inflates to the original.
        #[test]
        fn proptest_any_framing_inflates_to_the_original(
            body in proptest::collection::vec(any::<u8>(), 0..20_000),
            repeat in 1usize..8,
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
        ) {
            let body = body.repeat(repeat);
            let compressed = gzip(&body);
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(compressed.len() + 1)).collect();
            at.push(0);
            at.push(compressed.len());
            at.sort_unstable();
            let mut inflater = Inflater::new(body.len(), 0);
            for w in at.windows(2) {
                inflater.feed(&compressed[w[0]..w[1]]).unwrap();
            }
            prop_assert_eq!(inflater.finish().unwrap(), Bytes::from(body));
        }
    }
}
