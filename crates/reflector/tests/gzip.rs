//! Compressed lists through the real `Client` (docs/semantics.md, C16): against the simulated API
//! server with its gzip option on, and against a scripted server that records request headers
//! and answers with gzip bombs, corrupt streams and encodings never asked for.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use parking_lot::Mutex;
use reflector::store_index::{CompactObject, Object as _};
use reflector::{
    Client, ClientError, ClusterConfig, HttpListerWatcher, ListOptions, ListerWatcher, Resource,
};
use serde_json::json;
use sim_apiserver::SimServer;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn config_for(url: &str) -> ClusterConfig {
    ClusterConfig::new(url).unwrap()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

async fn sim_with_pods(n: usize) -> SimServer {
    let sim = SimServer::builder()
        .gzip_responses(true)
        .gzip_min_bytes(1024)
        .watch_cache(false)
        .start()
        .await
        .unwrap();
    for i in 0..n {
        sim.create(
            "pods",
            Some("default"),
            json!({"metadata": {"name": format!("p{i}"), "labels": {"app": "web"}},
                   "spec": {"nodeName": format!("node-{}", i % 10), "containers": [{"name": "c", "image": "busybox"}]}}),
        )
        .unwrap();
    }
    sim
}

/// JSON, whose compression ratio the figures below are about (protobuf lists are already
/// about half the size and compress less).
fn pods_lw(config: &ClusterConfig) -> HttpListerWatcher<CompactObject> {
    HttpListerWatcher::new(config, Resource::namespaced("", "v1", "pods"))
        .unwrap()
        .encoding(reflector::Encoding::Json)
}

/// (name, resourceVersion) of every item, in order.
fn keys(items: &[CompactObject]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|o| {
            (
                o.name().to_string(),
                o.resource_version().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_list_compressed_by_the_server_returns_the_same_objects_as_an_identity_one() {
    let sim = sim_with_pods(300).await;
    let mut plain = config_for(&sim.url());
    plain.compression = false;
    let compressed = config_for(&sim.url());
    assert!(compressed.compression, "on by default");

    let before = sim.counters();
    let identity = pods_lw(&plain).list(ListOptions::default()).await.unwrap();
    let after_identity = sim.counters();
    assert_eq!(after_identity.gzip_responses, before.gzip_responses);
    let identity_wire = after_identity.bytes - before.bytes;

    let gzipped = pods_lw(&compressed)
        .list(ListOptions::default())
        .await
        .unwrap();
    let after_gzip = sim.counters();
    assert_eq!(
        after_gzip.gzip_responses,
        after_identity.gzip_responses + 1,
        "the server really compressed"
    );
    let gzip_wire = after_gzip.bytes - after_identity.bytes;
    assert!(
        gzip_wire * 4 < identity_wire,
        "{gzip_wire} bytes on the wire against {identity_wire}"
    );

    assert_eq!(identity.items.len(), 300);
    assert_eq!(keys(&gzipped.items), keys(&identity.items));
    assert_eq!(gzipped.resource_version, identity.resource_version);
    let raw = |l: &reflector::ObjectList<CompactObject>| {
        l.items.iter().map(|o| o.raw().to_vec()).collect::<Vec<_>>()
    };
    assert_eq!(raw(&gzipped), raw(&identity), "byte for byte");
}

#[tokio::test]
async fn every_page_of_a_paginated_list_is_compressed_and_decoded() {
    let sim = sim_with_pods(250).await;
    let lw = pods_lw(&config_for(&sim.url()));
    let mut options = ListOptions {
        limit: 100,
        ..ListOptions::default()
    };
    let mut names = Vec::new();
    loop {
        let page = lw.list(options.clone()).await.unwrap();
        names.extend(page.items.iter().map(|o| o.name().to_string()));
        match page.continue_token {
            Some(token) if !token.is_empty() => options.continue_token = Some(token),
            _ => break,
        }
    }
    assert_eq!(names.len(), 250);
    assert_eq!(sim.counters().gzip_responses, 3);
}

#[tokio::test]
async fn a_compressed_error_body_is_read_as_the_servers_status() {
    let sim = SimServer::builder()
        .gzip_responses(true)
        .gzip_min_bytes(0)
        .start()
        .await
        .unwrap();
    let client = Client::new(&config_for(&sim.url())).unwrap();
    let err = client
        .get_bytes(&format!("{PODS}/missing"))
        .await
        .unwrap_err();
    let status = err.status().unwrap_or_else(|| panic!("{err}"));
    assert_eq!(status.code, 404);
    assert_eq!(status.reason, "NotFound");
    assert!(status.message.contains("missing"), "{}", status.message);
    assert_eq!(sim.counters().gzip_responses, 1, "the error was compressed");
}

/// A server on 127.0.0.1 (HTTP/1.1 and HTTP/2) that records each request's headers and answers
/// with `respond`.
struct Scripted {
    url: String,
    seen: Arc<Mutex<Vec<(String, HeaderMap)>>>,
}

impl Scripted {
    async fn start<F>(respond: F) -> Self
    where
        F: Fn(&Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<(String, HeaderMap)>>> = Arc::default();
        let respond = Arc::new(respond);
        let recorded = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (respond, recorded) = (respond.clone(), recorded.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        recorded
                            .lock()
                            .push((req.uri().to_string(), req.headers().clone()));
                        let resp = respond(&req);
                        async move { Ok::<_, std::convert::Infallible>(resp) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc)
                    .await;
                });
            }
        });
        Scripted { url, seen }
    }

    /// The `Accept-Encoding` of every request so far, by whether it was a watch.
    fn accept_encodings(&self) -> Vec<(bool, Option<String>)> {
        self.seen
            .lock()
            .iter()
            .map(|(uri, h)| {
                (
                    uri.contains("watch=true"),
                    h.get(http::header::ACCEPT_ENCODING)
                        .map(|v| v.to_str().unwrap().to_string()),
                )
            })
            .collect()
    }
}

fn respond_with(encoding: Option<&'static str>, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut b = Response::builder().header("content-type", "application/json");
    if let Some(e) = encoding {
        b = b.header("content-encoding", e);
    }
    b.body(Full::new(Bytes::from(body))).unwrap()
}

const EMPTY_LIST: &str =
    r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}"#;

#[tokio::test]
async fn lists_ask_for_gzip_unless_compression_is_off_and_watches_never_do() {
    let server = Scripted::start(|_| respond_with(None, EMPTY_LIST.into())).await;
    for http2 in [false, true] {
        for compression in [true, false] {
            let mut config = config_for(&server.url);
            config.http2_prior_knowledge = http2;
            config.compression = compression;
            let client = Client::new(&config).unwrap();
            server.seen.lock().clear();
            client.get_bytes(PODS).await.unwrap();
            let body = client
                .watch(&format!("{PODS}?watch=true"), "application/json")
                .await
                .unwrap()
                .body
                .collect()
                .await
                .unwrap()
                .to_bytes();
            assert_eq!(body, EMPTY_LIST.as_bytes());
            let want_list = compression.then(|| "gzip".to_string());
            assert_eq!(
                server.accept_encodings(),
                [(false, want_list), (true, None)],
                "http2 {http2}, compression {compression}"
            );
        }
    }
}

#[tokio::test]
async fn a_gzip_bomb_stops_at_the_list_page_limit() {
    // 32 MiB of spaces (valid JSON whitespace) in about 32 KiB.
    let mut e = GzEncoder::new(Vec::new(), Compression::best());
    e.write_all(b"{").unwrap();
    e.write_all(&vec![b' '; 32 << 20]).unwrap();
    let bomb = e.finish().unwrap();
    assert!(bomb.len() < 64 << 10, "{} bytes", bomb.len());
    let server = Scripted::start(move |_| respond_with(Some("gzip"), bomb.clone())).await;
    let client = Client::new(&config_for(&server.url)).unwrap();
    let started = std::time::Instant::now();
    let err = client.get_bytes_within(PODS, 1 << 20).await.unwrap_err();
    assert!(
        matches!(&err, ClientError::BodyTooLarge { what, limit: l } if what == PODS && *l == 1 << 20),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // The same bound through the lister-watcher.
    let lw = pods_lw(&config_for(&server.url)).max_list_page_bytes(1 << 20);
    let err = lw.list(ListOptions::default()).await.unwrap_err();
    assert!(err.to_string().contains("exceeds the maximum"), "{err}");
}

#[tokio::test]
async fn corrupt_truncated_or_unknown_encodings_are_transport_errors_naming_the_request() {
    let good = gzip(EMPTY_LIST.as_bytes());
    let mut flipped = good.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x55;
    let cases: Vec<(&str, Option<&'static str>, Vec<u8>, &str)> = vec![
        ("not gzip", Some("gzip"), EMPTY_LIST.into(), "gzip"),
        ("flipped", Some("gzip"), flipped, "gzip"),
        (
            "truncated",
            Some("gzip"),
            good[..good.len() - 4].to_vec(),
            "gzip",
        ),
        (
            "brotli",
            Some("br"),
            EMPTY_LIST.into(),
            "unsupported Content-Encoding \"br\"",
        ),
    ];
    for (name, encoding, body, says) in cases {
        let server = Scripted::start(move |_| respond_with(encoding, body.clone())).await;
        let client = Client::new(&config_for(&server.url)).unwrap();
        let err = client.get_bytes(PODS).await.unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, ClientError::Transport { .. }),
            "{name}: {err:?}"
        );
        assert!(text.contains(PODS) && text.contains(says), "{name}: {text}");
    }
    // A good one, for contrast, and gzip sent although not asked for is still read.
    let server = Scripted::start(move |_| respond_with(Some("gzip"), good.clone())).await;
    let mut config = config_for(&server.url);
    config.compression = false;
    let body = Client::new(&config).unwrap().get_bytes(PODS).await.unwrap();
    assert_eq!(body, EMPTY_LIST.as_bytes());
}

#[tokio::test]
async fn a_watch_answered_compressed_is_refused() {
    let server = Scripted::start(|_| respond_with(Some("gzip"), gzip(b"{}\n"))).await;
    let client = Client::new(&config_for(&server.url)).unwrap();
    let err = client
        .watch(&format!("{PODS}?watch=true"), "application/json")
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("compressed a watch stream"),
        "{err}"
    );
}
