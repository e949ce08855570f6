//! Fault injection rules and request counters.

mod common;

use common::{name, pod, Client, Read};
use http::StatusCode;
use serde_json::json;
use sim_apiserver::{RequestKind, SimServer};

const PODS: &str = "/api/v1/namespaces/default/pods";

async fn sim_with(n: usize) -> SimServer {
    let sim = SimServer::start().await.unwrap();
    for i in 0..n {
        sim.create("pods", None, pod(&format!("p{i}"), json!({})))
            .unwrap();
    }
    sim
}

#[tokio::test]
async fn end_watches_after_n_events_closes_streams_cleanly() {
    let sim = sim_with(5).await;
    sim.faults().end_watches_after(3);
    let mut w = Client::new(&sim).watch(&format!("{PODS}?watch=true")).await;
    let events = w.rest().await;
    assert_eq!(events.len(), 3);
}

#[tokio::test]
async fn rechunk_to_one_byte_splits_events_but_keeps_them_intact() {
    let sim = sim_with(3).await;
    sim.faults().rechunk(1);
    let mut w = Client::new(&sim)
        .watch(&format!("{PODS}?watch=true&timeoutSeconds=1"))
        .await;
    for i in 0..3 {
        assert_eq!(name(&w.expect("ADDED").await), format!("p{i}"));
    }
    assert!(
        w.chunks.iter().all(|c| *c == 1),
        "every data frame is one byte"
    );
}

#[tokio::test]
async fn rechunk_to_a_large_size_puts_several_events_in_one_chunk() {
    let sim = sim_with(4).await;
    sim.faults().rechunk(100_000);
    let mut w = Client::new(&sim).watch(&format!("{PODS}?watch=true")).await;
    for _ in 0..4 {
        w.expect("ADDED").await;
    }
    assert_eq!(w.chunks.len(), 1, "all four initial events share one chunk");
    sim.create("pods", None, pod("late", json!({}))).unwrap();
    assert_eq!(name(&w.expect("ADDED").await), "late");
}

#[tokio::test]
async fn reset_mid_chunk_cuts_an_event_and_breaks_the_connection() {
    let sim = sim_with(0).await;
    let mut w = Client::new(&sim).watch(&format!("{PODS}?watch=true")).await;
    sim.create("pods", None, pod("a", json!({}))).unwrap();
    w.expect("ADDED").await;
    sim.faults().reset_mid_chunk();
    sim.create("pods", None, pod("b", json!({}))).unwrap();
    match w.next_line().await {
        Read::Error(_) => {}
        other => panic!("expected a body error, got {other:?}"),
    }
}

#[tokio::test]
async fn fail_next_answers_429_with_retry_after_then_recovers() {
    let sim = sim_with(1).await;
    let c = Client::new(&sim);
    sim.faults().fail_next(RequestKind::List, 429, 2);
    for _ in 0..2 {
        let r = c.get(PODS).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers["retry-after"], "1");
        assert_eq!(r.body["reason"], "TooManyRequests");
        assert_eq!(r.body["details"]["retryAfterSeconds"], 1);
    }
    assert_eq!(c.get(PODS).await.status, StatusCode::OK);
}

#[tokio::test]
async fn fail_next_applies_500_and_503_to_watches_only_when_asked() {
    let sim = sim_with(1).await;
    let c = Client::new(&sim);
    sim.faults()
        .fail_next(RequestKind::Watch, 500, 1)
        .fail_next(RequestKind::Watch, 503, 1);
    assert_eq!(
        c.get(PODS).await.status,
        StatusCode::OK,
        "lists are unaffected"
    );
    let r = c.get(&format!("{PODS}?watch=true")).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(r.body["reason"], "InternalError");
    let r = c.get(&format!("{PODS}?watch=true")).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.body["reason"], "ServiceUnavailable");
    let mut w = c.watch(&format!("{PODS}?watch=true")).await;
    assert_eq!(w.status, StatusCode::OK);
    w.expect("ADDED").await;
}

#[tokio::test]
async fn stall_holds_a_stream_until_unstalled() {
    let sim = sim_with(0).await;
    let mut w = Client::new(&sim).watch(&format!("{PODS}?watch=true")).await;
    sim.faults().stall();
    sim.create("pods", None, pod("a", json!({}))).unwrap();
    // The stream is stalled: reading yields nothing while the write is held.
    let read = tokio::spawn(async move {
        let o = w.expect("ADDED").await;
        name(&o).to_string()
    });
    tokio::task::yield_now().await;
    assert!(!read.is_finished());
    sim.faults().unstall();
    assert_eq!(read.await.unwrap(), "a");
}

#[tokio::test]
async fn malformed_line_precedes_the_next_event() {
    let sim = sim_with(0).await;
    let mut w = Client::new(&sim).watch(&format!("{PODS}?watch=true")).await;
    sim.faults().malformed_line();
    sim.create("pods", None, pod("a", json!({}))).unwrap();
    match w.next_line().await {
        Read::Line(l) => assert!(
            serde_json::from_str::<serde_json::Value>(&l).is_err(),
            "{l}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(name(&w.expect("ADDED").await), "a");
}

#[tokio::test]
async fn error_event_fault_sends_an_error_status_and_ends_the_stream() {
    let sim = sim_with(0).await;
    let mut w = Client::new(&sim).watch(&format!("{PODS}?watch=true")).await;
    sim.faults().error_event(410);
    sim.create("pods", None, pod("a", json!({}))).unwrap();
    let s = w.expect("ERROR").await;
    assert_eq!(s["code"], 410);
    assert_eq!(s["reason"], "Expired");
    assert!(w.next().await.is_none());
}

#[tokio::test]
async fn compact_now_expires_every_older_version() {
    let sim = sim_with(2).await;
    let before = sim.revision() - 1;
    assert_eq!(sim.faults().compact(), sim.revision());
    let r = Client::new(&sim)
        .get(&format!(
            "{PODS}?resourceVersion={before}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(r.status, StatusCode::GONE);
}

#[tokio::test]
async fn counters_count_lists_watches_and_bytes() {
    let sim = sim_with(2).await;
    let c = Client::new(&sim);
    let before = sim.counters();
    c.get(PODS).await;
    c.get(PODS).await;
    let mut w = c.watch(&format!("{PODS}?watch=true")).await;
    w.expect("ADDED").await;
    let after = sim.counters();
    assert_eq!(after.lists - before.lists, 2);
    assert_eq!(after.watches - before.watches, 1);
    assert!(after.bytes > before.bytes);
    assert!(after.watch_events >= 1);
    assert_eq!(after.active_watches, 1);
}

#[tokio::test]
async fn end_watches_after_zero_closes_at_once_and_exact_statuses_can_be_injected() {
    let sim = sim_with(2).await;
    let c = Client::new(&sim);
    sim.faults().end_watches_after(0);
    let mut w = c.watch(&format!("{PODS}?watch=true")).await;
    assert!(w.rest().await.is_empty());
    sim.faults().reset();
    sim.faults().fail_next_with(
        RequestKind::List,
        sim_apiserver::ApiError::too_large_resource_version(20, 10),
        1,
    );
    let r = c.get(PODS).await;
    assert_eq!(r.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    let mut w = c.watch(&format!("{PODS}?watch=true")).await;
    sim.faults()
        .error_event_with(sim_apiserver::ApiError::internal("etcd read failed"));
    sim.create("pods", None, pod("x", json!({}))).unwrap();
    // The two initial events may already be written; the injected one replaces the next.
    let mut last = w.rest().await;
    let e = last.pop().unwrap();
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["code"], 500);
    assert_eq!(
        e["object"]["message"],
        "Internal error occurred: etcd read failed"
    );
}

#[tokio::test]
async fn fail_next_can_target_gets_writes_or_any_request() {
    let sim = sim_with(1).await;
    let c = Client::new(&sim);
    sim.faults().fail_next(RequestKind::Write, 500, 1);
    assert_eq!(c.get(&format!("{PODS}/p0")).await.status, StatusCode::OK);
    let r = c.post(PODS, pod("w", json!({}))).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        sim.get("pods", None, "w").is_err(),
        "the failed write did nothing"
    );
    sim.faults().fail_next(RequestKind::Any, 503, 1);
    let r = c.get(&format!("{PODS}/p0")).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers["retry-after"], "1");
    assert_eq!(
        c.get("/version").await.status,
        StatusCode::OK,
        "discovery is never failed"
    );
    assert_eq!(c.get(&format!("{PODS}/p0")).await.status, StatusCode::OK);
}
