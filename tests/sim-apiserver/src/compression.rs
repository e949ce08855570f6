//! Response compression as kube-apiserver does it (opt-in here, see
//! [`SimServerBuilder::gzip_responses`](crate::SimServerBuilder::gzip_responses)): a response
//! whose body is whole (a list, a get, discovery, an error) is gzip-compressed when the request
//! says `Accept-Encoding: gzip` and the body is at least the threshold
//! ([`DEFAULT_GZIP_MIN_BYTES`], 128 KiB, kube-apiserver's); a streamed body (a watch, a streamed
//! list fault) never is. The level is gzip's fastest, as kube-apiserver's.

use std::io::Write as _;

use http::{header, HeaderMap, HeaderValue, Response};

use crate::body::SimBody;
use crate::metrics::Counters;

/// kube-apiserver's threshold: smaller responses are sent as they are.
pub const DEFAULT_GZIP_MIN_BYTES: usize = 128 << 10;

/// Whether the request accepts gzip: a `gzip` coding in `Accept-Encoding` whose quality is not 0.
pub(crate) fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            name.eq_ignore_ascii_case("gzip") && !refused
        })
}

/// `resp` with its body gzip-compressed if it is whole and at least `min_bytes` long (then
/// `Content-Encoding: gzip` and `Vary: Accept-Encoding`, and the `gzip_responses` counter).
pub(crate) fn gzip_response(
    resp: Response<SimBody>,
    min_bytes: usize,
    counters: &Counters,
) -> Response<SimBody> {
    let Some(body) = resp.body().whole() else {
        return resp;
    };
    if body.len() < min_bytes {
        return resp;
    }
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 8),
        flate2::Compression::fast(),
    );
    let compressed = encoder
        .write_all(body)
        .and_then(|()| encoder.finish())
        .expect("writing to a Vec cannot fail");
    Counters::inc(&counters.gzip_responses);
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    parts
        .headers
        .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    Response::from_parts(parts, body.with_whole(compressed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_encoding_is_read_as_a_list_of_codings_with_qualities() {
        let accepts = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, v.parse().unwrap());
            accepts_gzip(&h)
        };
        assert!(accepts("gzip"));
        assert!(accepts("GZIP"));
        assert!(accepts("br, gzip;q=0.5"));
        assert!(!accepts("gzip;q=0"));
        assert!(!accepts("br"));
        assert!(!accepts("identity"));
        assert!(!accepts("x-gzipped"));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
