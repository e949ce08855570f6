//! Requests and response bytes per authenticated user: each user's lists, gets, watch streams and
//! writes' answers are counted to that user, after compression (the reads apart), and a request
//! refused as unauthenticated to nobody.

mod common;

use std::io::Read as _;

use common::{pod, Client};
use http::{Method, StatusCode};
use http_body_util::BodyExt as _;
use serde_json::json;
use sim_apiserver::{SimServer, UserSnapshot};

const PODS: &str = "/api/v1/namespaces/default/pods";

#[tokio::test]
async fn each_users_requests_and_bytes_are_counted_to_that_user() {
    let sim = SimServer::builder()
        .token("admin-token")
        .user_token("a-token", "alice")
        .user_token("b-token", "bob")
        .gzip_responses(true)
        .gzip_min_bytes(1024)
        .start()
        .await
        .unwrap();
    for i in 0..30 {
        sim.create("pods", None, pod(&format!("p{i}"), json!({"app": "web"})))
            .unwrap();
    }
    assert!(sim.user_counters().is_empty(), "the test API is no user");

    // Alice lists, uncompressed.
    let alice = Client::with(&sim, false, Some("a-token".into()), false);
    let r = alice.raw(Method::GET, PODS, None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let listed = r.into_body().collect().await.unwrap().to_bytes();
    assert!(listed.len() > 1024);
    let users = sim.user_counters();
    assert_eq!(
        users.get("alice"),
        Some(&UserSnapshot {
            requests: 1,
            bytes: listed.len() as u64,
            read_bytes: listed.len() as u64,
        })
    );
    assert!(!users.contains_key("bob"));
    // Then writes: its answer counts as bytes, not as read bytes.
    let created = alice.post(PODS, pod("alice-1", json!({}))).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let alice_now = sim.user_counters()["alice"];
    assert_eq!(alice_now.requests, 2);
    assert!(alice_now.bytes > listed.len() as u64);
    assert_eq!(alice_now.read_bytes, listed.len() as u64);

    // Bob lists gzipped, then watches from now and receives one event.
    let bob = Client::with(&sim, false, Some("b-token".into()), false);
    let r = bob
        .raw_with(Method::GET, PODS, None, &[("accept-encoding", "gzip")])
        .await;
    let compressed = r.into_body().collect().await.unwrap().to_bytes();
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&compressed[..])
        .read_to_end(&mut plain)
        .unwrap();
    assert!(
        plain.len() > listed.len(),
        "the list, one pod longer, compressed"
    );
    let from = sim.revision();
    let mut watch = bob
        .watch(&format!("{PODS}?watch=true&resourceVersion={from}"))
        .await;
    sim.create("pods", None, pod("late", json!({}))).unwrap();
    watch.expect("ADDED").await;
    let streamed: usize = watch.chunks.iter().sum();
    assert!(streamed > 0);
    let users = sim.user_counters();
    assert_eq!(
        users["bob"],
        UserSnapshot {
            requests: 2,
            bytes: (compressed.len() + streamed) as u64,
            read_bytes: (compressed.len() + streamed) as u64,
        },
        "what went on the wire to bob: the compressed list and the watch's event"
    );
    assert_eq!(users["alice"], alice_now, "alice's untouched");

    // A wrong token is refused before anyone is known: counted in all, to nobody.
    let before = sim.counters().requests;
    let stranger = Client::with(&sim, false, Some("wrong".into()), false);
    let r = stranger.raw(Method::GET, PODS, None).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(sim.counters().requests, before + 1);
    assert_eq!(sim.user_counters().len(), 2);
}
