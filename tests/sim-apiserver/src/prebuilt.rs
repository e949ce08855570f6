//! A fake API server of pre-built bytes, for benchmarks that measure the client side alone.
//!
//! A list request gets the [`PrebuiltList`]: whole, or, when it was built of items with
//! [`PrebuiltList::paged`] and the request has a `limit`, one page of it with a `continue` token
//! for the next (as kube-apiserver pages, so a client's memory is measured on the pages it really
//! gets); the first watch gets `events`, one HTTP/1.1 chunk each, once `release` turns true (so a benchmark can time exactly their delivery: drop the
//! sender, or send `true`, to release at once); later watches stay open and silent. A first watch
//! that asks for `sendInitialEvents=true` (a watch-list) of a paged list gets the list's items
//! first, each an `ADDED` event built as it leaves, then the bookmark that ends the initial events
//! (annotated `k8s.io/initial-events-end`), at once, and the events after them once released. Serving costs
//! a reference-count increment per event, so a figure taken against it is the client's. It
//! speaks plain HTTP/1.1 and checks nothing: not a Kubernetes API server, only its wire shape.
//!
//! [`serve_prebuilt_paced`] sends the events at a steady rate instead of all at once, as
//! kube-apiserver sends a quiet cluster's changes (each flushed alone), and can stamp each with
//! the time it left, so that a client can measure its latency from the server's send to its handler.
//!
//! [`serve_prebuilt_with`] serves a [`Prebuilt`]: the same, plus the [`Framing`] of the watch (one
//! HTTP chunk per event, or events coalesced into larger chunks as a busy server or a buffering
//! proxy sends them) and, optionally, the same objects in Kubernetes' protobuf encoding for a
//! client whose `Accept` asks for `application/vnd.kubernetes.protobuf`: list pages in the `k8s\0`
//! envelope, watch events as 4-byte big-endian length-prefixed `meta.v1.WatchEvent` frames whose
//! `object.raw` is the enveloped object. Those bytes are transcoded once, before serving, with the
//! simulator's own codec ([`crate::protobuf`]), so serving either encoding costs the same.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::protobuf::{
    encode_frame, encode_object, ProtobufError, RawWatchEvent, Unknown, MEDIA_TYPE,
    WATCH_MEDIA_TYPE,
};

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The list a [`serve_prebuilt`] server answers with.
#[derive(Debug, Clone)]
pub struct PrebuiltList {
    /// The whole list, for a request without `limit`: of a paged list, built at the first such
    /// request (a list of a million objects served only in pages never holds a second copy).
    whole: Arc<std::sync::OnceLock<Bytes>>,
    /// Its parts, when pages can be cut from it.
    paged: Option<Paged>,
}

#[derive(Debug, Clone)]
struct Paged {
    kind: String,
    resource_version: String,
    /// Each item's JSON, or (protobuf) each item's bare message, without envelope.
    items: Arc<Vec<Bytes>>,
    protobuf: bool,
}

impl PrebuiltList {
    /// A list of `items` (each one object's JSON) of list kind `kind` (`PodList`, `apiVersion`
    /// `v1`) at `resource_version`, served whole without `limit` and in pages with it.
    pub fn paged(kind: &str, resource_version: &str, items: Vec<Bytes>) -> Self {
        let paged = Paged {
            kind: kind.to_string(),
            resource_version: resource_version.to_string(),
            items: Arc::new(items),
            protobuf: false,
        };
        PrebuiltList {
            whole: Arc::default(),
            paged: Some(paged),
        }
    }

    /// The same list in Kubernetes' protobuf encoding (pages too, when this list has them): each
    /// item transcoded once, here, with the simulator's codec. Items must be built-in kinds with
    /// their `apiVersion` and `kind`.
    pub fn to_protobuf(&self) -> Result<PrebuiltList, ProtobufError> {
        let Some(paged) = &self.paged else {
            let whole: Value = serde_json::from_slice(self.whole()).map_err(not_json)?;
            return Ok(PrebuiltList::from(Bytes::from(encode_object(&whole)?)));
        };
        let items = paged
            .items
            .iter()
            .map(|item| {
                let item: Value = serde_json::from_slice(item).map_err(not_json)?;
                Ok(Unknown::decode(&Bytes::from(encode_object(&item)?))?.raw)
            })
            .collect::<Result<Vec<_>, ProtobufError>>()?;
        let paged = Paged {
            items: Arc::new(items),
            protobuf: true,
            ..paged.clone()
        };
        Ok(PrebuiltList {
            whole: Arc::default(),
            paged: Some(paged),
        })
    }

    /// The whole list's body.
    pub fn whole(&self) -> &Bytes {
        self.whole.get_or_init(|| {
            let paged = self
                .paged
                .as_ref()
                .expect("a list built whole has its body");
            paged.page(0, usize::MAX)
        })
    }

    /// The initial events of a watch-list of this list, for a watch in `protobuf` or JSON: each
    /// item an `ADDED` event, then the bookmark at the list's resource version that ends them
    /// (annotated `k8s.io/initial-events-end`), each built when the stream asks for it. `None`
    /// for a list built whole, whose items this server does not know.
    fn initial_events(
        &self,
    ) -> Option<impl futures::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + Sync + 'static>
    {
        let paged = self.paged.clone()?;
        let items = Arc::clone(&paged.items);
        let bookmark = paged.initial_events_end();
        let added = futures::stream::iter(0..items.len())
            .map(move |i| Ok(Frame::data(paged.added(&items[i]))));
        Some(added.chain(futures::stream::once(
            async move { Ok(Frame::data(bookmark)) },
        )))
    }

    /// The body answering a list request with this query string.
    fn answer(&self, query: Option<&str>) -> Bytes {
        let param = |name: &str| {
            query?
                .split('&')
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
        };
        let limit = param("limit").and_then(|l| l.parse::<usize>().ok());
        match (&self.paged, limit) {
            (Some(paged), Some(limit)) if limit > 0 => {
                let start = param("continue")
                    .and_then(|c| c.strip_prefix('p')?.parse().ok())
                    .unwrap_or(0);
                paged.page(start, limit)
            }
            _ => self.whole().clone(),
        }
    }
}

impl From<Bytes> for PrebuiltList {
    /// A list served whole, `limit` or not.
    fn from(whole: Bytes) -> Self {
        PrebuiltList {
            whole: Arc::new(std::sync::OnceLock::from(whole)),
            paged: None,
        }
    }
}

impl Paged {
    /// The kind of the list's items: its own without `List`.
    fn item_kind(&self) -> &str {
        self.kind.strip_suffix("List").unwrap_or(&self.kind)
    }

    /// The watch event (a JSON line, or a protobuf frame) adding `item`.
    fn added(&self, item: &Bytes) -> Bytes {
        if self.protobuf {
            let object = Unknown::new("v1", self.item_kind(), item.clone()).encode();
            let payload = RawWatchEvent {
                event_type: "ADDED".into(),
                object: Bytes::from(object),
            }
            .encode();
            let mut frame = Vec::with_capacity(payload.len() + 4);
            encode_frame(&mut frame, &payload);
            return Bytes::from(frame);
        }
        let mut line = Vec::with_capacity(item.len() + 32);
        line.extend_from_slice(br#"{"type":"ADDED","object":"#);
        line.extend_from_slice(item);
        line.extend_from_slice(b"}\n");
        Bytes::from(line)
    }

    /// The bookmark that ends a watch-list's initial events, at the list's resource version.
    fn initial_events_end(&self) -> Bytes {
        let line = serde_json::json!({
            "type": "BOOKMARK",
            "object": {
                "apiVersion": "v1",
                "kind": self.item_kind(),
                "metadata": {
                    "resourceVersion": self.resource_version,
                    "annotations": {"k8s.io/initial-events-end": "true"},
                },
            },
        })
        .to_string()
            + "\n";
        if self.protobuf {
            protobuf_watch_frame(line.as_bytes()).expect("a bookmark transcodes")
        } else {
            Bytes::from(line)
        }
    }

    /// Items `start..start + limit`, with a continue token (`p<next start>`) when more follow.
    fn page(&self, start: usize, limit: usize) -> Bytes {
        let start = start.min(self.items.len());
        let end = start.saturating_add(limit).min(self.items.len());
        let items = &self.items[start..end];
        if self.protobuf {
            return self.protobuf_page(items, (end < self.items.len()).then_some(end));
        }
        let continue_field = if end < self.items.len() {
            format!(r#","continue":"p{end}""#)
        } else {
            String::new()
        };
        let head = format!(
            r#"{{"kind":"{}","apiVersion":"v1","metadata":{{"resourceVersion":"{}"{continue_field}}},"items":["#,
            self.kind, self.resource_version
        );
        let len = head.len() + items.iter().map(|i| i.len() + 1).sum::<usize>() + 2;
        let mut body = Vec::with_capacity(len);
        body.extend_from_slice(head.as_bytes());
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(item);
        }
        body.extend_from_slice(b"]}");
        Bytes::from(body)
    }

    /// A page in protobuf: the list message (`metadata` 1: a `ListMeta` of `resourceVersion` 2
    /// and `continue` 3; `items` 2, repeated), every Kubernetes list's layout, in its envelope.
    fn protobuf_page(&self, items: &[Bytes], next: Option<usize>) -> Bytes {
        let mut meta = Vec::new();
        put_bytes(&mut meta, 2, self.resource_version.as_bytes());
        if let Some(next) = next {
            put_bytes(&mut meta, 3, format!("p{next}").as_bytes());
        }
        let len = meta.len() + items.iter().map(|i| i.len() + 11).sum::<usize>() + 11;
        let mut list = Vec::with_capacity(len);
        put_bytes(&mut list, 1, &meta);
        for item in items {
            put_bytes(&mut list, 2, item);
        }
        Bytes::from(Unknown::new("v1", self.kind.as_str(), Bytes::from(list)).encode())
    }
}

/// Appends field `number` as a length-delimited protobuf field holding `bytes`.
fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_varint(out, u64::from(number) << 3 | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn not_json(e: serde_json::Error) -> ProtobufError {
    ProtobufError::Json {
        path: ".".into(),
        why: format!("not JSON: {e}"),
    }
}

/// A JSON watch event (`{"type":…,"object":{…}}`, as [`serve_prebuilt`] serves it) as the
/// protobuf watch frame kube-apiserver sends for it: a 4-byte big-endian length, then a
/// `meta.v1.WatchEvent` whose `object.raw` is the object in its `k8s\0` envelope.
pub fn protobuf_watch_frame(event: &[u8]) -> Result<Bytes, ProtobufError> {
    let event: Value = serde_json::from_slice(event).map_err(not_json)?;
    let event_type = event["type"].as_str().ok_or_else(|| ProtobufError::Json {
        path: ".type".into(),
        why: "a watch event without a type".into(),
    })?;
    let object = encode_object(&event["object"])?;
    let payload = RawWatchEvent {
        event_type: event_type.to_string(),
        object: Bytes::from(object),
    }
    .encode();
    let mut frame = Vec::with_capacity(payload.len() + 4);
    encode_frame(&mut frame, &payload);
    Ok(Bytes::from(frame))
}

/// How the first watch's events are cut into HTTP/1.1 chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Framing {
    /// One chunk per event: kube-apiserver flushes each event it has when no other is waiting,
    /// so a quiet (or paced) stream looks like this.
    #[default]
    PerEvent,
    /// Whole events gathered into chunks of at least `chunk_bytes` (the last may be shorter), as
    /// a server with events waiting, or a buffering proxy, sends them.
    Coalesced {
        /// Bytes after which a chunk is closed.
        chunk_bytes: usize,
    },
}

impl Framing {
    /// Events coalesced into chunks of 64 KiB or so.
    pub const COALESCED: Framing = Framing::Coalesced {
        chunk_bytes: 64 * 1024,
    };

    /// `events` cut into this framing's chunks (each one whole events, in order).
    pub fn chunks(self, events: &[Bytes]) -> Vec<Bytes> {
        let Framing::Coalesced { chunk_bytes } = self else {
            return events.to_vec();
        };
        let mut chunks = Vec::new();
        let mut chunk: Vec<u8> = Vec::new();
        for event in events {
            chunk.extend_from_slice(event);
            if chunk.len() >= chunk_bytes {
                chunks.push(Bytes::from(std::mem::take(&mut chunk)));
            }
        }
        if !chunk.is_empty() {
            chunks.push(Bytes::from(chunk));
        }
        chunks
    }

    /// Whether a chunk of `chunk` bytes is still open to another event.
    fn fits(self, chunk: usize) -> bool {
        match self {
            Framing::PerEvent => false,
            Framing::Coalesced { chunk_bytes } => chunk < chunk_bytes,
        }
    }
}

/// What [`serve_prebuilt_with`] serves: a list and the first watch's events, in JSON and
/// optionally in protobuf, with a framing and an optional pace.
#[derive(Debug, Clone)]
pub struct Prebuilt {
    json: (PrebuiltList, Arc<Vec<Bytes>>),
    protobuf: Option<(PrebuiltList, Arc<Vec<Bytes>>)>,
    /// The same objects without `metadata.managedFields`, in JSON and maybe protobuf.
    dropped: Option<Encodings>,
    framing: Framing,
    pace: Option<Pace>,
}

/// A list and its events in JSON, and maybe in protobuf.
type Encodings = (
    (PrebuiltList, Arc<Vec<Bytes>>),
    Option<(PrebuiltList, Arc<Vec<Bytes>>)>,
);

impl Prebuilt {
    /// `list` and `events` (each event's JSON line), one chunk per event, sent at once.
    pub fn new(list: impl Into<PrebuiltList>, events: Arc<Vec<Bytes>>) -> Self {
        Prebuilt {
            json: (list.into(), events),
            protobuf: None,
            dropped: None,
            framing: Framing::PerEvent,
            pace: None,
        }
    }

    /// Also serves `list` (see [`PrebuiltList::to_protobuf`]) and `frames` (each a whole
    /// length-prefixed frame, see [`protobuf_watch_frame`]) to clients that ask for protobuf.
    pub fn with_protobuf(mut self, list: PrebuiltList, frames: Arc<Vec<Bytes>>) -> Self {
        self.protobuf = Some((list, frames));
        self
    }

    /// Transcodes this server's JSON list and events into protobuf (once, here) and serves them
    /// to clients that ask for it.
    pub fn transcoded(self) -> Result<Self, ProtobufError> {
        let list = self.json.0.to_protobuf()?;
        let frames = self
            .json
            .1
            .iter()
            .map(|e| protobuf_watch_frame(e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.with_protobuf(list, Arc::new(frames)))
    }

    /// Also serves `json` (and `protobuf`, to those who ask for it), the same list and events
    /// with no `metadata.managedFields` in their objects, to clients whose `Accept` asks with
    /// `drop=metadata.managedFields` (see [`crate::managed_fields`]), as a server with
    /// KEP-5958's feature does. Without it, the parameter is ignored, as by a server without it.
    pub fn with_managed_fields_dropped(
        mut self,
        json: (PrebuiltList, Arc<Vec<Bytes>>),
        protobuf: Option<(PrebuiltList, Arc<Vec<Bytes>>)>,
    ) -> Self {
        self.dropped = Some((json, protobuf));
        self
    }

    /// Cuts the watch into `framing`'s chunks.
    pub fn framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    /// Sends the events at `pace` (see [`serve_prebuilt_paced`]).
    pub fn paced(mut self, pace: Pace) -> Self {
        self.pace = Some(pace);
        self
    }
}

/// Digits of the send time [`Pace::stamp_after`] writes: microseconds since the UNIX epoch,
/// zero-padded.
pub const STAMP_DIGITS: usize = 16;

/// How [`serve_prebuilt_paced`] sends the events of the first watch.
#[derive(Debug, Clone)]
pub struct Pace {
    /// Time from one event's send to the next's. Each event is sent at the release time plus its
    /// index times this (absolute deadlines: a late send does not push the later ones back).
    pub interval: Duration,
    /// When set, the bytes after which each event holds [`STAMP_DIGITS`] placeholder digits:
    /// they are overwritten, as the event leaves, with the microseconds since the UNIX epoch.
    /// An event without those bytes is sent as it is.
    pub stamp_after: Option<Bytes>,
}

impl Pace {
    /// `per_second` events a second (at least one every hour), unstamped.
    pub fn per_second(per_second: f64) -> Self {
        let per_second = if per_second.is_finite() {
            per_second.max(1.0 / 3600.0)
        } else {
            1.0
        };
        Pace {
            interval: Duration::from_secs_f64(1.0 / per_second),
            stamp_after: None,
        }
    }

    /// This pace, stamping the send time after `marker` in each event.
    pub fn stamped_after(mut self, marker: impl Into<Bytes>) -> Self {
        self.stamp_after = Some(marker.into());
        self
    }
}

/// `event` with its send time written after `marker`, if the marker is there with room after it.
pub fn stamp(event: &Bytes, marker: &[u8], sent: SystemTime) -> Bytes {
    let at = event
        .windows(marker.len().max(1))
        .position(|w| w == marker)
        .map(|i| i + marker.len());
    match at {
        Some(at) if !marker.is_empty() && at + STAMP_DIGITS <= event.len() => {
            let micros = sent.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros())
                % 10u128.pow(STAMP_DIGITS as u32);
            let mut out = event.to_vec();
            out[at..at + STAMP_DIGITS]
                .copy_from_slice(format!("{micros:0width$}", width = STAMP_DIGITS).as_bytes());
            Bytes::from(out)
        }
        _ => event.clone(),
    }
}

/// Serves `list` and `events` (see the [module docs](self)) on `listener` until the task is
/// dropped or the listener fails.
pub async fn serve_prebuilt(
    listener: tokio::net::TcpListener,
    list: impl Into<PrebuiltList>,
    events: Arc<Vec<Bytes>>,
    release: tokio::sync::watch::Receiver<bool>,
) {
    serve_prebuilt_with(listener, Prebuilt::new(list, events), release).await
}

/// [`serve_prebuilt`], with the first watch's events sent at `pace` once released, each in an
/// HTTP chunk of its own, written by a thread of their own (so that a busy server runtime does
/// not bunch them).
pub async fn serve_prebuilt_paced(
    listener: tokio::net::TcpListener,
    list: impl Into<PrebuiltList>,
    events: Arc<Vec<Bytes>>,
    release: tokio::sync::watch::Receiver<bool>,
    pace: Pace,
) {
    serve_prebuilt_with(listener, Prebuilt::new(list, events).paced(pace), release).await
}

/// One encoding's bytes as served: the list, and the watch's chunks (unpaced: already cut to the
/// framing; paced: the events, cut as they leave).
struct Served {
    list: PrebuiltList,
    chunks: Arc<Vec<Bytes>>,
    list_type: &'static str,
    watch_type: &'static str,
}

/// Serves `prebuilt` (see the [module docs](self)) on `listener` until the task is dropped or
/// the listener fails. Chunks of coalesced framing are cut here, before the first connection.
pub async fn serve_prebuilt_with(
    listener: tokio::net::TcpListener,
    prebuilt: Prebuilt,
    release: tokio::sync::watch::Receiver<bool>,
) {
    let Prebuilt {
        json,
        protobuf,
        dropped,
        framing,
        pace,
    } = prebuilt;
    let served = |(list, events): (PrebuiltList, Arc<Vec<Bytes>>), types: (_, _)| {
        let chunks = match (&pace, framing) {
            (None, Framing::Coalesced { .. }) => Arc::new(framing.chunks(&events)),
            _ => events,
        };
        Arc::new(Served {
            list,
            chunks,
            list_type: types.0,
            watch_type: types.1,
        })
    };
    let encodings = |(json, protobuf): Encodings| {
        Arc::new((
            served(json, ("application/json", "application/json")),
            protobuf.map(|p| served(p, (MEDIA_TYPE, WATCH_MEDIA_TYPE))),
        ))
    };
    let whole = encodings((json, protobuf));
    let dropped = dropped.map(encodings);
    let streamed = Arc::new(AtomicBool::new(false));
    while let Ok((socket, _)) = listener.accept().await {
        let _ = socket.set_nodelay(true);
        let (whole, dropped, streamed, release, pace) = (
            Arc::clone(&whole),
            dropped.clone(),
            Arc::clone(&streamed),
            release.clone(),
            pace.clone(),
        );
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let wants_protobuf = req
                    .headers()
                    .get(hyper::header::ACCEPT)
                    .and_then(|a| a.to_str().ok())
                    .is_some_and(|a| a.contains(MEDIA_TYPE));
                let (json, protobuf) = match &dropped {
                    Some(dropped) if crate::managed_fields::requested(req.headers()) => &**dropped,
                    _ => &*whole,
                };
                // A server without protobuf bytes answers JSON, as kube-apiserver does for kinds
                // without a protobuf message.
                let served = match (protobuf, wants_protobuf) {
                    (Some(protobuf), true) => protobuf,
                    _ => json,
                };
                let (content_type, body) =
                    answer(&req, served, &streamed, release.clone(), &pace, framing);
                async move {
                    Ok::<_, Infallible>(
                        Response::builder()
                            .header("content-type", content_type)
                            .body(body)
                            .expect("a response of static parts"),
                    )
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}

/// The body answering `req`, and its content type: the list, the events (first watch only) or a
/// silent watch.
fn answer(
    req: &Request<hyper::body::Incoming>,
    served: &Served,
    streamed: &AtomicBool,
    mut release: tokio::sync::watch::Receiver<bool>,
    pace: &Option<Pace>,
    framing: Framing,
) -> (&'static str, Body) {
    let watch = req
        .uri()
        .query()
        .is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
    if !watch {
        let list = served.list.answer(req.uri().query());
        return (served.list_type, Full::new(list).boxed());
    }
    if streamed.swap(true, Ordering::SeqCst) {
        let silent =
            StreamBody::new(futures::stream::pending::<Result<Frame<Bytes>, Infallible>>());
        return (served.watch_type, http_body_util::BodyExt::boxed(silent));
    }
    let released = async move {
        // A dropped sender releases at once.
        let _ = release.wait_for(|r| *r).await;
    };
    let chunks = Arc::clone(&served.chunks);
    let events = match pace {
        Some(pace) => paced(chunks, released, pace.clone(), framing),
        None => {
            let count = chunks.len();
            let frames = futures::stream::once(released)
                .map(move |()| futures::stream::iter(0..count))
                .flatten()
                .map(move |i| Ok::<_, Infallible>(Frame::data(chunks[i].clone())));
            http_body_util::BodyExt::boxed(StreamBody::new(frames))
        }
    };
    let watch_list = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "sendInitialEvents=true"));
    match watch_list.then(|| served.list.initial_events()).flatten() {
        Some(initial) => {
            let rest = http_body_util::BodyStream::new(events);
            let frames = initial.chain(rest);
            (
                served.watch_type,
                http_body_util::BodyExt::boxed(StreamBody::new(frames)),
            )
        }
        None => (served.watch_type, events),
    }
}

/// The events sent at `pace` once `released` completes: a thread keeps the deadlines and hands
/// each chunk to the connection through a small bounded channel. Coalesced, a chunk leaves at its
/// last event's deadline, each of its events stamped at its own.
fn paced(
    events: Arc<Vec<Bytes>>,
    released: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    pace: Pace,
    framing: Framing,
) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let frames = futures::stream::once(async move {
        released.await;
        std::thread::spawn(move || {
            let start = Instant::now();
            let mut chunk: Vec<u8> = Vec::new();
            for (i, event) in events.iter().enumerate() {
                let deadline = start + pace.interval.mul_f64(i as f64);
                if let Some(wait) = deadline.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let event = match &pace.stamp_after {
                    Some(marker) => stamp(event, marker, SystemTime::now()),
                    None => event.clone(),
                };
                let send = if framing == Framing::PerEvent {
                    event
                } else {
                    chunk.extend_from_slice(&event);
                    if framing.fits(chunk.len()) && i + 1 < events.len() {
                        continue;
                    }
                    Bytes::from(std::mem::take(&mut chunk))
                };
                if tx.blocking_send(send).is_err() {
                    return; // the client went away
                }
            }
        });
        futures::stream::unfold(rx, |mut rx| async move {
            let event = rx.recv().await?;
            Some((Ok::<_, Infallible>(Frame::data(event)), rx))
        })
    })
    .flatten();
    http_body_util::BodyExt::boxed(StreamBody::new(frames))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protobuf::{decode_object, FrameDecoder};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// A raw HTTP/1.1 exchange: the response's head, and its body's chunks (one, the whole body,
    /// when it is not chunked).
    async fn exchange(
        addr: std::net::SocketAddr,
        path: &str,
        accept: &str,
    ) -> (String, Vec<Vec<u8>>) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!(
                "GET {path} HTTP/1.1\r\nhost: x\r\naccept: {accept}\r\nconnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        let end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8(out[..end].to_vec()).unwrap();
        let mut body = &out[end..];
        if !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            return (head, vec![body.to_vec()]);
        }
        let mut chunks = Vec::new();
        loop {
            let line = body.windows(2).position(|w| w == b"\r\n").unwrap();
            let size =
                usize::from_str_radix(std::str::from_utf8(&body[..line]).unwrap(), 16).unwrap();
            if size == 0 {
                return (head, chunks);
            }
            chunks.push(body[line + 2..line + 2 + size].to_vec());
            body = &body[line + 2 + size + 2..];
        }
    }

    fn without_nulls(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), without_nulls(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
            v => v.clone(),
        }
    }

    /// Three realistic pods, listed in pages, and four MODIFIED events of them.
    fn realistic() -> (Vec<Value>, Prebuilt) {
        let pods: Vec<String> = (0..3).map(crate::fixtures::realistic_pod_json).collect();
        let events: Vec<Bytes> = (0..4)
            .map(|e| {
                Bytes::from(format!(
                    "{{\"type\":\"MODIFIED\",\"object\":{}}}\n",
                    pods[e % 3]
                ))
            })
            .collect();
        let values = pods
            .iter()
            .map(|p| serde_json::from_str(p).unwrap())
            .collect();
        let items = pods.into_iter().map(Bytes::from).collect();
        let list = PrebuiltList::paged("PodList", "42", items);
        (values, Prebuilt::new(list, Arc::new(events)))
    }

    #[tokio::test]
    async fn a_client_asking_to_drop_managed_fields_gets_the_pods_without_them() {
        let (pods, prebuilt) = realistic();
        let bare: Vec<Bytes> = pods
            .iter()
            .map(|p| {
                let mut p = p.clone();
                p["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("managedFields");
                Bytes::from(p.to_string())
            })
            .collect();
        let dropped = (
            PrebuiltList::paged("PodList", "42", bare),
            Arc::new(Vec::new()),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve_prebuilt_with(
            listener,
            prebuilt.with_managed_fields_dropped(dropped, None),
            tokio::sync::watch::channel(true).1,
        ));
        let managed_fields_in = |accept: &'static str| async move {
            let (_, body) = exchange(addr, "/api/v1/pods", accept).await;
            let list: Value = serde_json::from_slice(&body.concat()).unwrap();
            let items = list["items"].as_array().unwrap();
            assert_eq!(items.len(), 3);
            items
                .iter()
                .filter(|i| i["metadata"].get("managedFields").is_some())
                .count()
        };
        assert_eq!(managed_fields_in("application/json").await, 3);
        let asking = "application/json;drop=metadata.managedFields";
        assert_eq!(managed_fields_in(asking).await, 0);
        server.abort();
    }

    #[tokio::test]
    async fn protobuf_pages_and_watch_frames_decode_back_to_the_same_pods() {
        let (pods, prebuilt) = realistic();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve_prebuilt_with(
            listener,
            prebuilt.transcoded().unwrap(),
            tokio::sync::watch::channel(true).1,
        ));
        let accept = "application/vnd.kubernetes.protobuf, application/json";
        let mut listed = Vec::new();
        let mut path = "/api/v1/pods?limit=2".to_string();
        loop {
            let (head, body) = exchange(addr, &path, accept).await;
            assert!(
                head.contains("content-type: application/vnd.kubernetes.protobuf\r\n"),
                "{head}"
            );
            let body = Bytes::from(body.concat());
            let envelope = Unknown::decode(&body).unwrap();
            assert_eq!(
                (envelope.api_version.as_str(), envelope.kind.as_str()),
                ("v1", "PodList")
            );
            let page = decode_object(&body).unwrap();
            assert_eq!(page["metadata"]["resourceVersion"], "42");
            listed.extend(page["items"].as_array().unwrap().iter().cloned());
            match page["metadata"]["continue"].as_str() {
                Some(token) => path = format!("/api/v1/pods?limit=2&continue={token}"),
                None => break,
            }
        }
        // List items carry no type meta in protobuf, as kube-apiserver writes them.
        let bare = |pod: &Value| {
            let mut pod = without_nulls(pod);
            pod.as_object_mut()
                .unwrap()
                .retain(|k, _| k != "kind" && k != "apiVersion");
            pod
        };
        assert_eq!(listed, pods.iter().map(bare).collect::<Vec<_>>());

        let (head, chunks) = exchange(addr, "/api/v1/pods?watch=true", accept).await;
        assert!(
            head.contains("content-type: application/vnd.kubernetes.protobuf;stream=watch\r\n"),
            "{head}"
        );
        assert_eq!(chunks.len(), 4, "one chunk per event");
        let mut frames = FrameDecoder::new(1 << 20);
        for (e, chunk) in chunks.iter().enumerate() {
            frames.push(chunk);
            let frame = frames
                .next_frame()
                .unwrap()
                .expect("a whole frame per chunk");
            let event = RawWatchEvent::decode(&frame).unwrap();
            assert_eq!(event.event_type, "MODIFIED");
            assert_eq!(
                decode_object(&event.object).unwrap(),
                without_nulls(&pods[e % 3])
            );
        }
        frames.finish().unwrap();
        server.abort();
    }

    #[tokio::test]
    async fn coalesced_framing_gathers_whole_events_per_chunk_in_both_encodings() {
        let (_, prebuilt) = realistic();
        let prebuilt = prebuilt.transcoded().unwrap();
        let json_events = prebuilt.json.1.clone();
        let frames = prebuilt.protobuf.as_ref().unwrap().1.clone();
        for (accept, events) in [("application/json", json_events), (MEDIA_TYPE, frames)] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            // Two events fill a chunk: four events make two chunks.
            let chunk_bytes = events[0].len() + 1;
            let server = tokio::spawn(serve_prebuilt_with(
                listener,
                prebuilt.clone().framing(Framing::Coalesced { chunk_bytes }),
                tokio::sync::watch::channel(true).1,
            ));
            let (_, chunks) = exchange(addr, "/api/v1/pods?watch=true", accept).await;
            assert_eq!(chunks.len(), 2, "{accept}");
            assert_eq!(
                chunks.concat(),
                events.concat(),
                "{accept}: the same bytes, in order"
            );
            server.abort();
        }
    }

    #[tokio::test]
    async fn a_protobuf_accept_gets_json_when_no_protobuf_was_built_and_json_clients_get_json() {
        let (pods, prebuilt) = realistic();
        for prebuilt in [prebuilt.clone(), prebuilt.transcoded().unwrap()] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let with_protobuf = prebuilt.protobuf.is_some();
            let server = tokio::spawn(serve_prebuilt_with(
                listener,
                prebuilt,
                tokio::sync::watch::channel(true).1,
            ));
            let accept = if with_protobuf {
                "application/json"
            } else {
                MEDIA_TYPE
            };
            let (head, body) = exchange(addr, "/api/v1/pods", accept).await;
            assert!(
                head.contains("content-type: application/json\r\n"),
                "{head}"
            );
            let list: Value = serde_json::from_slice(&body.concat()).unwrap();
            assert_eq!(list["items"].as_array().unwrap().len(), pods.len());
            server.abort();
        }
    }

    #[test]
    fn paced_coalescing_closes_a_chunk_once_it_holds_enough_bytes() {
        let framing = Framing::Coalesced { chunk_bytes: 10 };
        assert!(framing.fits(9) && !framing.fits(10));
        assert!(!Framing::PerEvent.fits(0));
        let events: Vec<Bytes> = ["aaaa", "bbbbbbb", "c", "dddddddddddd", "e"]
            .into_iter()
            .map(Bytes::from)
            .collect();
        let chunks: Vec<Bytes> = framing.chunks(&events);
        assert_eq!(
            chunks,
            ["aaaabbbbbbb", "cdddddddddddd", "e"].map(Bytes::from)
        );
        assert_eq!(Framing::PerEvent.chunks(&events), events);
    }

    #[test]
    fn bad_json_is_a_typed_error_not_a_panic() {
        assert!(matches!(
            protobuf_watch_frame(b"{\"type\":"),
            Err(ProtobufError::Json { .. })
        ));
        assert!(matches!(
            protobuf_watch_frame(br#"{"object":{"apiVersion":"v1","kind":"Pod"}}"#),
            Err(ProtobufError::Json { .. })
        ));
        assert!(matches!(
            protobuf_watch_frame(
                br#"{"type":"ADDED","object":{"apiVersion":"x.io/v1","kind":"Thing"}}"#
            ),
            Err(ProtobufError::UnknownKind { .. })
        ));
        let list = PrebuiltList::paged("PodList", "1", vec![Bytes::from_static(b"not json")]);
        assert!(list.to_protobuf().is_err());
    }

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn lists_get_the_list_and_the_first_watch_the_events_once_released() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (release, released) = tokio::sync::watch::channel(false);
        let events = Arc::new(vec![
            Bytes::from_static(b"{\"a\":1}\n"),
            Bytes::from_static(b"{\"b\":2}\n"),
        ]);
        let server = tokio::spawn(serve_prebuilt(
            listener,
            Bytes::from_static(b"LIST"),
            events,
            released,
        ));
        assert!(get(addr, "/api/v1/pods").await.ends_with("LIST"));
        release.send_replace(true);
        let watch = get(addr, "/api/v1/pods?watch=true").await;
        assert!(
            watch.contains("{\"a\":1}") && watch.contains("{\"b\":2}"),
            "{watch}"
        );
        server.abort();
    }

    #[test]
    fn a_stamp_overwrites_the_placeholder_after_its_marker_and_nothing_else() {
        let event = Bytes::from_static(b"{\"sent\":\"0000000000000000\",\"x\":1}\n");
        let sent = UNIX_EPOCH + Duration::from_micros(1_234_567);
        let stamped = stamp(&event, b"\"sent\":\"", sent);
        assert_eq!(&stamped[..], b"{\"sent\":\"0000000001234567\",\"x\":1}\n");
        // No marker, or no room after it: the event goes as it is.
        assert_eq!(stamp(&event, b"\"absent\":\"", sent), event);
        assert_eq!(stamp(&event, b"\"x\":", sent), event);
    }

    #[tokio::test]
    async fn paced_events_arrive_stamped_and_spaced() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let events: Vec<Bytes> = (0..3)
            .map(|i| Bytes::from(format!("{{\"t\":\"0000000000000000\",\"i\":{i}}}\n")))
            .collect();
        let pace = Pace {
            interval: Duration::from_millis(20),
            stamp_after: None,
        }
        .stamped_after(&b"\"t\":\""[..]);
        let server = tokio::spawn(serve_prebuilt_paced(
            listener,
            Bytes::from_static(b"LIST"),
            Arc::new(events),
            tokio::sync::watch::channel(true).1,
            pace,
        ));
        let before = SystemTime::now();
        let watch = get(addr, "/api/v1/pods?watch=true").await;
        let stamps: Vec<u128> = watch
            .lines()
            .filter_map(|l| l.strip_prefix("{\"t\":\""))
            .map(|l| l[..STAMP_DIGITS].parse().unwrap())
            .collect();
        assert_eq!(stamps.len(), 3, "{watch}");
        let floor = before.duration_since(UNIX_EPOCH).unwrap().as_micros();
        assert!(stamps[0] >= floor, "stamped with the send time");
        // Deadlines are 20 ms apart: the third leaves at least 40 ms after the first.
        assert!(stamps[2] - stamps[0] >= 40_000, "{stamps:?}");
        server.abort();
    }

    #[tokio::test]
    async fn a_paged_list_is_cut_at_limit_and_continued_to_its_end() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let items: Vec<Bytes> = (0..5)
            .map(|i| Bytes::from(format!(r#"{{"i":{i}}}"#)))
            .collect();
        let list = PrebuiltList::paged("PodList", "42", items);
        let server = tokio::spawn(serve_prebuilt(
            listener,
            list,
            Arc::new(Vec::new()),
            tokio::sync::watch::channel(true).1,
        ));
        let body = |response: String| -> serde_json::Value {
            let json = &response[response.find("\r\n\r\n").unwrap() + 4..];
            serde_json::from_str(json).unwrap()
        };
        let whole = body(get(addr, "/api/v1/pods").await);
        assert_eq!(whole["items"].as_array().unwrap().len(), 5);
        assert!(whole["metadata"].get("continue").is_none());
        let mut seen = Vec::new();
        let mut path = "/api/v1/pods?limit=2".to_string();
        loop {
            let page = body(get(addr, &path).await);
            assert_eq!(page["kind"], "PodList");
            assert_eq!(page["metadata"]["resourceVersion"], "42");
            let items = page["items"].as_array().unwrap();
            assert!(items.len() <= 2);
            seen.extend(items.iter().map(|i| i["i"].as_u64().unwrap()));
            match page["metadata"]["continue"].as_str() {
                Some(token) => path = format!("/api/v1/pods?limit=2&continue={token}"),
                None => break,
            }
        }
        assert_eq!(seen, vec![0, 1, 2, 3, 4]);
        server.abort();
    }

    #[tokio::test]
    async fn a_watch_list_streams_the_items_then_the_end_bookmark_then_the_released_events() {
        let (pods, prebuilt) = realistic();
        let prebuilt = prebuilt.transcoded().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve_prebuilt_with(
            listener,
            prebuilt,
            tokio::sync::watch::channel(true).1,
        ));
        let query =
            "/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
        // JSON: one line per chunk, three ADDED, the bookmark, then the four MODIFIED.
        let (_, chunks) = exchange(addr, query, "application/json").await;
        let events: Vec<Value> = chunks
            .iter()
            .map(|c| serde_json::from_slice(c).unwrap())
            .collect();
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "ADDED", "ADDED", "ADDED", "BOOKMARK", "MODIFIED", "MODIFIED", "MODIFIED",
                "MODIFIED"
            ]
        );
        assert_eq!(events[0]["object"], pods[0]);
        let bookmark = &events[3]["object"];
        assert_eq!(bookmark["kind"], "Pod");
        assert_eq!(bookmark["metadata"]["resourceVersion"], "42");
        assert_eq!(
            bookmark["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        // The same in protobuf, from a fresh server (only a server's first watch streams).
        server.abort();
        let (_, prebuilt) = realistic();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve_prebuilt_with(
            listener,
            prebuilt.transcoded().unwrap(),
            tokio::sync::watch::channel(true).1,
        ));
        let (_, chunks) = exchange(addr, query, MEDIA_TYPE).await;
        let mut decoder = FrameDecoder::new(1 << 20);
        let mut seen = Vec::new();
        for chunk in &chunks {
            decoder.push(chunk);
            while let Some(frame) = decoder.next_frame().unwrap() {
                let event = RawWatchEvent::decode(&frame).unwrap();
                let object = without_nulls(&decode_object(&event.object).unwrap());
                seen.push((event.event_type, object));
            }
        }
        assert_eq!(seen.len(), 8);
        assert_eq!(seen[1].0, "ADDED");
        assert_eq!(seen[1].1["metadata"]["name"], pods[1]["metadata"]["name"]);
        assert_eq!(seen[3].0, "BOOKMARK");
        assert_eq!(
            seen[3].1["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        assert_eq!(seen[7].0, "MODIFIED");
        server.abort();
    }
}
