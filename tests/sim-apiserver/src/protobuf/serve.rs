//! The simulator's use of the codec: protobuf answers where the `Accept` header prefers them and
//! the kind has a message, and protobuf request bodies for create and update of such kinds.
//! The handlers keep working in JSON; answers are transcoded on the way out, bodies on the way in.

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{encode_frame, encode_object, RawWatchEvent, MEDIA_TYPE, WATCH_MEDIA_TYPE};
use crate::body::{Chunk, SimBody};
use crate::representation::{PARTIAL_OBJECT_METADATA, PARTIAL_OBJECT_METADATA_LIST};
use crate::resources::ResourceDef;
use crate::status::ApiError;

/// A request that is to be answered in protobuf.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Protobuf {
    watch: bool,
}

/// Whether `req` is to be answered in protobuf: the first media range of its `Accept` that the
/// server can produce is protobuf (kube-apiserver's order), either plain, for a kind that has a
/// message, or asking for the metadata representation (`as=PartialObjectMetadata[List]`, a meta
/// type every resource has, custom ones included). Tables (`as=Table`) are not served in
/// protobuf here: such a range is passed over. The `Accept` header is then replaced by the same
/// range in JSON for the JSON handlers, whose answer [`Protobuf::encode`] transcodes. Without
/// `partial_supported` (a server that knows no `as=`), ranges asking for the metadata
/// representation are passed over, as the JSON negotiation passes them over.
pub(crate) fn negotiate<B>(
    req: &mut Request<B>,
    def: &ResourceDef,
    partial_supported: bool,
) -> Option<Protobuf> {
    let accept = req.headers().get(header::ACCEPT)?.to_str().ok()?;
    let mut as_json = None;
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let params: Vec<&str> = parts
            .filter(|p| !p.is_empty() && !p.starts_with("stream="))
            .collect();
        let as_kind = params
            .iter()
            .find_map(|p| p.strip_prefix("as="))
            .map(|v| v.trim_matches('"'));
        match (media.as_str(), as_kind) {
            (MEDIA_TYPE, None) if super::message_for(&def.api_version(), &def.kind).is_some() => {
                as_json = Some("application/json".to_string());
                break;
            }
            (MEDIA_TYPE, Some(PARTIAL_OBJECT_METADATA | PARTIAL_OBJECT_METADATA_LIST))
                if partial_supported =>
            {
                as_json = Some(format!("application/json;{}", params.join(";")));
                break;
            }
            ("application/json" | "application/*" | "*/*", _) => break,
            _ => {}
        }
    }
    let as_json = HeaderValue::from_str(&as_json?).ok()?;
    let watch = req.uri().query().is_some_and(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .any(|(k, v)| k == "watch" && (v == "true" || v == "1"))
    }) || req.uri().path().starts_with("/api/v1/watch/")
        || req.uri().path().split('/').nth(4) == Some("watch");
    req.headers_mut().insert(header::ACCEPT, as_json);
    Some(Protobuf { watch })
}

impl Protobuf {
    /// `resp` (a JSON answer) in protobuf: a whole body as one enveloped object, a watch stream
    /// as frames. Anything else (plain text, injected faults that are not JSON, a kind without a
    /// message such as `autoscaling/v1` `Scale`) is passed through as it is.
    pub(crate) fn encode(self, resp: Response<SimBody>) -> Response<SimBody> {
        let is_json = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|c| c.as_bytes().starts_with(b"application/json"));
        if !is_json {
            return resp;
        }
        if let Some(whole) = resp.body().whole() {
            let Ok(encoded) = serde_json::from_slice::<Value>(whole)
                .map_err(|e| e.to_string())
                .and_then(|v| encode_object(&v).map_err(|e| e.to_string()))
                .inspect_err(|e| tracing::debug!("answering JSON, not protobuf: {e}"))
            else {
                return resp;
            };
            let (mut parts, body) = resp.into_parts();
            parts
                .headers
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
            return Response::from_parts(parts, body.with_whole(encoded));
        }
        if !self.watch {
            return resp;
        }
        let (mut parts, body) = resp.into_parts();
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(WATCH_MEDIA_TYPE),
        );
        Response::from_parts(parts, body.map_stream(watch_frames))
    }
}

/// A bound on one JSON watch line being reassembled from chunks: beyond it the stream is
/// aborted rather than buffered.
const MAX_LINE: usize = 64 * 1024 * 1024;

/// The JSON watch stream `rx` (one event a line, chunks cut anywhere) as protobuf frames.
fn watch_frames(mut rx: mpsc::Receiver<Chunk>) -> mpsc::Receiver<Chunk> {
    let (tx, out) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut pending: Vec<u8> = Vec::new();
        while let Some(chunk) = rx.recv().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            pending.extend_from_slice(&chunk);
            let mut frames = Vec::new();
            let mut start = 0;
            while let Some(nl) = pending[start..].iter().position(|&b| b == b'\n') {
                let line = &pending[start..start + nl];
                start += nl + 1;
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match event_frame(line) {
                    Ok(f) => frames.extend_from_slice(&f),
                    Err(why) => {
                        let _ = tx
                            .send(Err(std::io::Error::new(
                                std::io::ErrorKind::InvalidData,
                                why,
                            )))
                            .await;
                        return;
                    }
                }
            }
            pending.drain(..start);
            if pending.len() > MAX_LINE {
                let _ = tx
                    .send(Err(std::io::Error::other(
                        "a watch event beyond the line bound",
                    )))
                    .await;
                return;
            }
            if !frames.is_empty() && tx.send(Ok(Bytes::from(frames))).await.is_err() {
                return;
            }
        }
    });
    out
}

/// One JSON watch event as a protobuf frame.
fn event_frame(line: &[u8]) -> Result<Vec<u8>, String> {
    let mut event: Value = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    let event_type = event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let object = encode_object(&event["object"].take()).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(object.len() + 32);
    encode_frame(
        &mut out,
        &RawWatchEvent {
            event_type,
            object: Bytes::from(object),
        }
        .encode(),
    );
    Ok(out)
}

/// A write's body as JSON, decoding protobuf (`content_type` without parameters): `None` when the
/// body is not protobuf. Patches are never protobuf, and custom resources have no message: 415;
/// so is every protobuf body when the server does not `speak` protobuf.
pub(crate) fn decode_body(
    content_type: Option<&str>,
    raw: &Bytes,
    def: &ResourceDef,
    method: &Method,
    speak: bool,
) -> Option<Result<Value, ApiError>> {
    let ct = content_type?;
    if !ct.eq_ignore_ascii_case(MEDIA_TYPE) {
        return None;
    }
    if method == Method::PATCH {
        return Some(Err(ApiError::unsupported_media_type(ct)));
    }
    if !speak || super::message_for(&def.api_version(), &def.kind).is_none() {
        let mut e = ApiError::unsupported_media_type(ct);
        e.message = "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml".into();
        return Some(Err(e));
    }
    Some(
        super::decode_object(raw).map_err(|e| {
            ApiError::bad_request(format!("the object provided is unrecognized: {e}"))
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protobuf::{decode_object, FrameDecoder};

    async fn frames_of(chunks: Vec<&'static [u8]>) -> Vec<Chunk> {
        let (tx, rx) = mpsc::channel(chunks.len() + 1);
        for c in chunks {
            tx.send(Ok(Bytes::from_static(c))).await.unwrap();
        }
        drop(tx);
        let mut out = watch_frames(rx);
        let mut got = Vec::new();
        while let Some(c) = out.recv().await {
            got.push(c);
        }
        got
    }

    #[tokio::test]
    async fn json_watch_lines_cut_anywhere_become_one_frame_each() {
        let stream: &'static [u8] = b"{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}}\n{\"type\":\"DELETED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"b\"}}}\n";
        for cut in [1, 40, 87, 88, 120] {
            let got = frames_of(vec![&stream[..cut], &stream[cut..]]).await;
            let mut d = FrameDecoder::new(1 << 20);
            for c in got {
                d.push(&c.unwrap());
            }
            let mut names = Vec::new();
            while let Some(f) = d.next_frame().unwrap() {
                let e = RawWatchEvent::decode(&f).unwrap();
                let o = decode_object(&e.object).unwrap();
                names.push(format!(
                    "{} {}",
                    e.event_type,
                    o["metadata"]["name"].as_str().unwrap()
                ));
            }
            d.finish().unwrap();
            assert_eq!(names, ["ADDED a", "DELETED b"], "cut at {cut}");
        }
    }

    fn chosen(accept: &str, def: &ResourceDef, uri: &str) -> Option<(bool, String)> {
        chosen_by(accept, def, uri, true)
    }

    fn chosen_by(
        accept: &str,
        def: &ResourceDef,
        uri: &str,
        partial_supported: bool,
    ) -> Option<(bool, String)> {
        let mut req = Request::get(uri).header("accept", accept).body(()).unwrap();
        let p = negotiate(&mut req, def, partial_supported)?;
        Some((
            p.watch,
            req.headers()["accept"].to_str().unwrap().to_string(),
        ))
    }

    #[test]
    fn the_first_servable_range_decides() {
        let pods = ResourceDef::new("", "v1", "Pod", "pods", true);
        let widgets = ResourceDef::new("example.com", "v1", "Widget", "widgets", true);
        let uri = "/api/v1/pods";
        let json = Some((false, "application/json".to_string()));
        assert_eq!(chosen(MEDIA_TYPE, &pods, uri), json);
        assert_eq!(
            chosen(
                "application/vnd.kubernetes.protobuf, application/json",
                &pods,
                uri
            ),
            json
        );
        assert_eq!(
            chosen("text/html, application/vnd.kubernetes.protobuf", &pods, uri),
            json
        );
        assert_eq!(
            chosen(
                "application/json, application/vnd.kubernetes.protobuf",
                &pods,
                uri
            ),
            None
        );
        assert_eq!(
            chosen("*/*, application/vnd.kubernetes.protobuf", &pods, uri),
            None
        );
        assert_eq!(chosen(MEDIA_TYPE, &widgets, uri), None);
        assert_eq!(
            chosen("application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1, application/vnd.kubernetes.protobuf", &pods, uri),
            json
        );
        assert_eq!(
            chosen(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                &widgets,
                uri
            ),
            Some((
                false,
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1".to_string()
            ))
        );
        // client-go's metadata client: a server that knows no `as=` passes over both ranges
        // asking for it, and answers the whole objects in JSON, its last range.
        let metadata_client = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(
            chosen_by(metadata_client, &pods, uri, true),
            Some((
                false,
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1".to_string()
            ))
        );
        assert_eq!(chosen_by(metadata_client, &pods, uri, false), None);
        for watch in [
            "/api/v1/pods?watch=true",
            "/api/v1/pods?watch=1&resourceVersion=0",
            "/api/v1/watch/pods",
            "/apis/apps/v1/watch/deployments",
        ] {
            let got = chosen(
                "application/vnd.kubernetes.protobuf;stream=watch",
                &pods,
                watch,
            );
            assert_eq!(got, Some((true, "application/json".to_string())), "{watch}");
        }
        assert_eq!(
            chosen(MEDIA_TYPE, &pods, "/api/v1/pods?watch=false").map(|c| c.0),
            Some(false)
        );
    }

    #[tokio::test]
    async fn a_line_that_does_not_transcode_aborts_the_stream() {
        let got = frames_of(vec![b"{\"type\":\"ADDED\",\"object\":{\"kind\":}\n"]).await;
        assert!(matches!(got.last(), Some(Err(_))));
        let got = frames_of(vec![b"{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\"}}\n"]).await;
        assert!(matches!(got.last(), Some(Err(_))));
    }
}
