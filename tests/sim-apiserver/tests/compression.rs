//! Response compression (opt-in): whole bodies of at least the threshold are gzipped for
//! requests that accept gzip, as kube-apiserver does; watches never are.

mod common;

use std::io::Read as _;

use bytes::Bytes;
use common::{pod, Client};
use http::{header, Method, StatusCode};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use serde_json::json;
use sim_apiserver::{SimServer, SimServerBuilder, DEFAULT_GZIP_MIN_BYTES};

const PODS: &str = "/api/v1/namespaces/default/pods";
const GZIP: &[(&str, &str)] = &[("accept-encoding", "gzip")];

async fn sim_with(builder: SimServerBuilder, pods: usize) -> SimServer {
    let sim = builder.start().await.unwrap();
    for i in 0..pods {
        sim.create("pods", None, pod(&format!("p{i}"), json!({"app": "web"})))
            .unwrap();
    }
    sim
}

async fn body(r: hyper::Response<Incoming>) -> Bytes {
    r.into_body().collect().await.unwrap().to_bytes()
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[tokio::test]
async fn a_list_over_the_threshold_is_gzipped_for_a_client_that_accepts_it() {
    let sim = sim_with(
        SimServer::builder()
            .gzip_responses(true)
            .gzip_min_bytes(1024),
        50,
    )
    .await;
    let c = Client::new(&sim);
    let plain = body(c.raw(Method::GET, PODS, None).await).await;
    assert!(plain.len() > 1024);
    assert_eq!(sim.counters().gzip_responses, 0, "not asked for");

    let before = sim.counters().bytes;
    let r = c.raw_with(Method::GET, PODS, None, GZIP).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[header::CONTENT_ENCODING], "gzip");
    assert_eq!(r.headers()[header::VARY], "Accept-Encoding");
    assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
    let compressed = body(r).await;
    assert_eq!(gunzip(&compressed), plain);
    assert!(
        compressed.len() * 4 < plain.len(),
        "{} of {}",
        compressed.len(),
        plain.len()
    );
    assert_eq!(sim.counters().gzip_responses, 1);
    assert_eq!(
        sim.counters().bytes - before,
        compressed.len() as u64,
        "the byte counter counts what went on the wire"
    );
}

#[tokio::test]
async fn small_bodies_refused_codings_and_the_default_server_send_identity() {
    let sim = sim_with(SimServer::builder().gzip_responses(true), 3).await;
    let c = Client::new(&sim);
    // Under kube-apiserver's 128 KiB.
    let r = c.raw_with(Method::GET, PODS, None, GZIP).await;
    assert!(r.headers().get(header::CONTENT_ENCODING).is_none());
    assert!(body(r).await.len() < DEFAULT_GZIP_MIN_BYTES);

    let sim = sim_with(
        SimServer::builder().gzip_responses(true).gzip_min_bytes(0),
        3,
    )
    .await;
    let c = Client::new(&sim);
    for refused in ["gzip;q=0", "br", "identity"] {
        let r = c
            .raw_with(Method::GET, PODS, None, &[("accept-encoding", refused)])
            .await;
        assert!(
            r.headers().get(header::CONTENT_ENCODING).is_none(),
            "{refused}"
        );
    }
    assert_eq!(sim.counters().gzip_responses, 0);

    // Off by default.
    let sim = sim_with(SimServer::builder().gzip_min_bytes(0), 3).await;
    let r = Client::new(&sim)
        .raw_with(Method::GET, PODS, None, GZIP)
        .await;
    assert!(r.headers().get(header::CONTENT_ENCODING).is_none());
}

#[tokio::test]
async fn gets_and_errors_are_gzipped_but_never_a_watch() {
    let sim = sim_with(
        SimServer::builder().gzip_responses(true).gzip_min_bytes(0),
        1,
    )
    .await;
    let c = Client::new(&sim);

    let r = c
        .raw_with(Method::GET, &format!("{PODS}/p0"), None, GZIP)
        .await;
    assert_eq!(r.headers()[header::CONTENT_ENCODING], "gzip");
    let pod: serde_json::Value = serde_json::from_slice(&gunzip(&body(r).await)).unwrap();
    assert_eq!(pod["metadata"]["name"], "p0");

    let r = c
        .raw_with(Method::GET, &format!("{PODS}/nope"), None, GZIP)
        .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(r.headers()[header::CONTENT_ENCODING], "gzip");
    let status: serde_json::Value = serde_json::from_slice(&gunzip(&body(r).await)).unwrap();
    assert_eq!(status["reason"], "NotFound");

    let r = c
        .raw_with(
            Method::GET,
            &format!("{PODS}?watch=true&timeoutSeconds=1"),
            None,
            GZIP,
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers().get(header::CONTENT_ENCODING).is_none());
    let events = body(r).await;
    assert!(
        events.starts_with(br#"{"type":"ADDED""#),
        "plain JSON lines"
    );
    assert_eq!(sim.counters().gzip_responses, 2);
}
