//! The decoders alone, as ceilings for the clients: `serde-pod` decodes the JSON list and watch
//! events into `k8s_openapi`'s `Pod` with `serde_json`, `prost-pod` decodes the protobuf ones into
//! `k8s_pb`'s `Pod` with prost. Each reads the same fake server over one plain hyper HTTP/1.1
//! connection per request (lists in pages of [`PAGE`], as the informers ask), keeps the listed
//! pods in a `Vec` and puts each event's pod in its slot (event `e` is pod `e % cached`, as the
//! server builds them), dropping the one it replaces: no key, no index, no queue, no handler.
//! What is left is reading the body, framing and decoding, which a client of either encoding
//! cannot do without.

use std::sync::Arc;

use bytes::{Buf as _, Bytes, BytesMut};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use prost::Message as _;

use super::{cached, Counter, SENT_ANNOTATION};

/// Items per list page, the informers' page size.
pub const PAGE: usize = 500;

/// The protobuf media type (lists) and the magic of its envelope.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

/// Opens a connection to `url` (`http://host:port`) and sends `GET path` with `accept`.
async fn get(url: &str, path: &str, accept: &str) -> hyper::Response<Incoming> {
    let authority = url.strip_prefix("http://").expect("an http:// url");
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .expect("connect");
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header("host", authority)
        .header("accept", accept)
        .body(http_body_util::Empty::<Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    response
}

/// Every page of the pod list, each body as it came.
async fn list_pages(url: &str, accept: &str, mut items: impl FnMut(Bytes) -> Option<String>) {
    let mut path = format!("/api/v1/pods?limit={PAGE}");
    loop {
        let body = get(url, &path, accept)
            .await
            .into_body()
            .collect()
            .await
            .expect("list body")
            .to_bytes();
        match items(body) {
            Some(token) => path = format!("/api/v1/pods?limit={PAGE}&continue={token}"),
            None => return,
        }
    }
}

/// The watch's body, its data frames handed to `chunk` until it returns false.
async fn watch(url: &str, accept: &str, mut chunk: impl FnMut(Bytes) -> bool) {
    let mut body = get(url, "/api/v1/pods?watch=true", accept)
        .await
        .into_body();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.expect("watch body").into_data() else {
            continue;
        };
        if !chunk(data) {
            return;
        }
    }
}

/// A JSON watch event as serde reads it straight into its fields (`k8s_openapi`'s own
/// `WatchEvent` goes through an intermediate value first, which is not the decoder's ceiling).
#[derive(serde::Deserialize)]
struct JsonEvent {
    #[serde(rename = "type")]
    event_type: String,
    object: Pod,
}

/// A JSON watch event line's pod, if it is a `MODIFIED` event.
pub fn json_event(line: &[u8]) -> Option<Pod> {
    let event: JsonEvent = serde_json::from_slice(line).expect("an event");
    (event.event_type == "MODIFIED").then_some(event.object)
}

/// A protobuf watch frame's pod (the frame without its length), if it is a `MODIFIED` event:
/// the `WatchEvent`, then the envelope in its `object.raw`, then the `Pod` in the envelope.
pub fn protobuf_event(frame: &[u8]) -> Option<k8s_pb::api::core::v1::Pod> {
    use k8s_pb::apimachinery::pkg::apis::meta::v1::WatchEvent;
    let event = WatchEvent::decode(frame).expect("a WatchEvent");
    if event.r#type.as_deref() != Some("MODIFIED") {
        return None;
    }
    let raw = event.object.and_then(|o| o.raw).unwrap_or_default();
    Some(k8s_pb::api::core::v1::Pod::decode(&unwrap_envelope(&raw)[..]).expect("a Pod"))
}

/// `serde-pod`: lists and watches in JSON, decoding into `k8s_openapi`'s `Pod` with serde_json.
/// Returns once the list is decoded; the watch runs in the returned task.
pub async fn serde_pod(url: &str, counter: &Arc<Counter>) -> tokio::task::JoinHandle<()> {
    let mut pods: Vec<Pod> = Vec::with_capacity(cached());
    list_pages(url, "application/json", |body| {
        let page: k8s_openapi::List<Pod> = serde_json::from_slice(&body).expect("a PodList");
        pods.extend(page.items);
        page.metadata.continue_.filter(|c| !c.is_empty())
    })
    .await;
    assert_eq!(pods.len(), cached(), "listed");
    let (url, counter) = (url.to_string(), Arc::clone(counter));
    tokio::spawn(async move {
        let mut buf = BytesMut::new();
        let mut seen = 0usize;
        watch(&url, "application/json", |data| {
            buf.extend_from_slice(&data);
            while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                let line = buf.split_to(end + 1);
                let Some(pod) = json_event(&line) else {
                    continue;
                };
                let stamp = pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(SENT_ANNOTATION));
                counter.hit_stamped(stamp.map(String::as_str));
                let slot = seen % pods.len();
                pods[slot] = pod;
                seen += 1;
            }
            seen < counter.target() as usize
        })
        .await;
    })
}

/// The enveloped object inside a `k8s\0` body: its `runtime.Unknown`'s raw message.
fn unwrap_envelope(body: &[u8]) -> Vec<u8> {
    let unknown = body
        .strip_prefix(MAGIC)
        .map(k8s_pb::apimachinery::pkg::runtime::Unknown::decode)
        .expect("a k8s\\0 body")
        .expect("a runtime.Unknown");
    unknown.raw.unwrap_or_default()
}

/// `prost-pod`: lists and watches in protobuf, decoding into `k8s_pb`'s `Pod` with prost.
/// Returns once the list is decoded; the watch runs in the returned task.
pub async fn prost_pod(url: &str, counter: &Arc<Counter>) -> tokio::task::JoinHandle<()> {
    use k8s_pb::api::core::v1::{Pod, PodList};
    let mut pods: Vec<Pod> = Vec::with_capacity(cached());
    list_pages(url, PROTOBUF, |body| {
        let page = PodList::decode(&unwrap_envelope(&body)[..]).expect("a PodList");
        pods.extend(page.items);
        page.metadata
            .and_then(|m| m.r#continue)
            .filter(|c| !c.is_empty())
    })
    .await;
    assert_eq!(pods.len(), cached(), "listed");
    let (url, counter) = (url.to_string(), Arc::clone(counter));
    tokio::spawn(async move {
        let mut buf = BytesMut::new();
        let mut seen = 0usize;
        watch(&url, PROTOBUF, |data| {
            buf.extend_from_slice(&data);
            while let Some(head) = buf.get(..4) {
                let len = u32::from_be_bytes(head.try_into().expect("4 bytes")) as usize;
                if buf.len() < 4 + len {
                    break;
                }
                buf.advance(4);
                let frame = buf.split_to(len);
                let Some(pod) = protobuf_event(&frame) else {
                    continue;
                };
                let stamp = pod
                    .metadata
                    .as_ref()
                    .and_then(|m| m.annotations.get(SENT_ANNOTATION));
                counter.hit_stamped(stamp.map(String::as_str));
                let slot = seen % pods.len();
                pods[slot] = pod;
                seen += 1;
            }
            seen < counter.target() as usize
        })
        .await;
    })
}
