//! Fault injection rules and request counters.

mod common;

use std::time::Duration;

use common::{name, pod, Client, Read};
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use sim_apiserver::{apply_fault_spec, ListFault, RequestKind, SimServer, REPEAT_CONTINUE_TOKEN};

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

/// Reads a raw response body until `limit` bytes, its end or an error; returns the bytes read
/// and whether the body failed.
async fn read_body(r: hyper::Response<hyper::body::Incoming>, limit: usize) -> (Vec<u8>, bool) {
    let mut body = r.into_body();
    let mut out = Vec::new();
    while out.len() < limit {
        let f = tokio::time::timeout(Duration::from_secs(30), body.frame())
            .await
            .expect("body read timed out");
        match f {
            None => return (out, false),
            Some(Err(_)) => return (out, true),
            Some(Ok(frame)) => {
                if let Ok(d) = frame.into_data() {
                    out.extend_from_slice(&d);
                }
            }
        }
    }
    (out, false)
}

fn content_type(r: &common::Resp) -> &str {
    r.headers["content-type"].to_str().unwrap()
}

#[tokio::test]
async fn list_status_with_ok_answers_200_with_a_failure_status_k_times() {
    let sim = sim_with(2).await;
    let c = Client::new(&sim);
    let before = sim.counters();
    sim.faults().list_body(ListFault::StatusWithOk, 2);
    for _ in 0..2 {
        let r = c.get(PODS).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(content_type(&r), "application/json");
        assert_eq!(r.body["kind"], "Status");
        assert_eq!(r.body["apiVersion"], "v1");
        assert_eq!(r.body["metadata"], json!({}));
        assert_eq!(r.body["status"], "Failure");
        assert_eq!(r.body["reason"], "InternalError");
        assert_eq!(r.body["code"], 500);
        assert!(r.body["message"]
            .as_str()
            .unwrap()
            .contains("Internal error"));
        assert!(r.body.get("items").is_none());
    }
    let r = c.get(PODS).await;
    assert_eq!(
        r.body["kind"], "PodList",
        "after k answers the lists are real again"
    );
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
    assert_eq!(
        sim.counters().lists - before.lists,
        3,
        "faulty lists still count"
    );
    // Watches and single GETs are untouched by list faults.
    sim.faults().list_body(ListFault::StatusWithOk, 1);
    assert_eq!(c.get(&format!("{PODS}/p0")).await.body["kind"], "Pod");
    let mut w = c.watch(&format!("{PODS}?watch=true")).await;
    assert_eq!(name(&w.expect("ADDED").await), "p0");
}

#[tokio::test]
async fn list_empty_object_answers_an_empty_json_object_until_reset_with_u32_max() {
    let sim = sim_with(1).await;
    let c = Client::new(&sim);
    sim.faults().list_body(ListFault::EmptyObject, u32::MAX);
    for _ in 0..5 {
        let r = c.get(PODS).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(content_type(&r), "application/json");
        assert_eq!(r.body, json!({}));
    }
    sim.faults().reset();
    assert_eq!(c.get(PODS).await.body["kind"], "PodList");
}

#[tokio::test]
async fn list_html_answers_an_html_page_with_200() {
    let sim = sim_with(1).await;
    let c = Client::new(&sim);
    sim.faults().list_body(ListFault::Html, 1);
    let r = c.get(PODS).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(content_type(&r), "text/html");
    let page = r.body.as_str().expect("not JSON");
    assert!(page.starts_with("<html>"), "{page}");
    assert!(page.contains("</html>"), "{page}");
    assert_eq!(c.get(PODS).await.body["kind"], "PodList");
}

#[tokio::test]
async fn list_faults_queue_in_order() {
    let sim = sim_with(1).await;
    let c = Client::new(&sim);
    sim.faults()
        .list_body(ListFault::Html, 1)
        .list_body(ListFault::EmptyObject, 1);
    assert_eq!(content_type(&c.get(PODS).await), "text/html");
    assert_eq!(c.get(PODS).await.body, json!({}));
    assert_eq!(c.get(PODS).await.body["kind"], "PodList");
}

#[tokio::test]
async fn list_endless_streams_valid_items_forever_until_the_client_leaves() {
    let sim = sim_with(1).await;
    let c = Client::new(&sim);
    sim.faults().list_body(ListFault::Endless, 1);
    let r = c.raw(Method::GET, PODS, None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "application/json");
    const TWO_MIB: usize = 2 << 20;
    let (body, failed) = read_body(r, TWO_MIB).await;
    assert!(!failed);
    assert!(
        body.len() >= TWO_MIB,
        "the body ended after {} bytes",
        body.len()
    );
    let text = String::from_utf8(body).unwrap();
    let prefix = format!(
        "{{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{}\"}},\"items\":[",
        sim.revision()
    );
    assert!(text.starts_with(&prefix), "{}", &text[..200]);
    // The items are valid objects, each followed by a comma.
    let items = &text[prefix.len()..];
    let first_end = items.find("},").unwrap() + 2;
    let first: Value = serde_json::from_str(&items[..first_end - 1]).unwrap();
    assert_eq!(
        first,
        json!({"metadata": {"name": "endless-0", "namespace": "default", "resourceVersion": "1"}})
    );
    assert!(text.contains("\"name\":\"endless-20000\""));
    // The response was dropped (client gone); the next list is real.
    assert_eq!(c.get(PODS).await.body["kind"], "PodList");
}

#[tokio::test]
async fn list_endless_stops_on_server_shutdown() {
    let sim = sim_with(0).await;
    sim.faults().list_body(ListFault::Endless, 1);
    let r = Client::new(&sim).raw(Method::GET, PODS, None).await;
    let mut body = r.into_body();
    assert!(body.frame().await.unwrap().is_ok());
    sim.shutdown();
    // The body ends (cleanly or not) instead of running on.
    loop {
        let f = tokio::time::timeout(Duration::from_secs(30), body.frame())
            .await
            .expect("the endless body kept going after shutdown");
        if !matches!(f, Some(Ok(_))) {
            break;
        }
    }
}

#[tokio::test]
async fn list_repeat_continue_returns_the_same_token_so_a_pager_never_ends() {
    let sim = sim_with(3).await;
    let c = Client::new(&sim);
    sim.faults().list_body(ListFault::RepeatContinue, 3);
    let first = c.get(&format!("{PODS}?limit=2")).await;
    assert_eq!(first.status, StatusCode::OK);
    let token = first.body["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(token, REPEAT_CONTINUE_TOKEN);
    let names = |r: &common::Resp| -> Vec<String> {
        r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| name(i).to_string())
            .collect()
    };
    assert_eq!(names(&first), ["p0", "p1"]);
    for _ in 0..2 {
        let again = c.get(&format!("{PODS}?limit=2&continue={token}")).await;
        assert_eq!(again.status, StatusCode::OK);
        assert_eq!(again.body["metadata"]["continue"], token.as_str());
        assert_eq!(names(&again), ["p0", "p1"]);
    }
    // The three answers are used up: the token is refused like any garbled one.
    let r = c.get(&format!("{PODS}?limit=2&continue={token}")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .contains("continue key is not valid"));
    // Without a limit the page is the whole list, still with the token.
    sim.faults().list_body(ListFault::RepeatContinue, 1);
    let r = c.get(PODS).await;
    assert_eq!(names(&r), ["p0", "p1", "p2"]);
    assert_eq!(r.body["metadata"]["continue"], REPEAT_CONTINUE_TOKEN);
}

#[tokio::test]
async fn list_close_mid_body_sends_half_the_real_list_then_aborts() {
    let sim = sim_with(3).await;
    let c = Client::new(&sim);
    let full = read_body(c.raw(Method::GET, PODS, None).await, usize::MAX)
        .await
        .0;
    sim.faults().list_body(ListFault::CloseMidBody, 1);
    let r = c.raw(Method::GET, PODS, None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "application/json");
    let (half, failed) = read_body(r, usize::MAX).await;
    assert!(failed, "the body ends in an error, not cleanly");
    assert_eq!(half, full[..full.len() / 2]);
    assert!(serde_json::from_slice::<Value>(&half).is_err());
    assert_eq!(c.get(PODS).await.body["kind"], "PodList");
    // Over HTTP/2 the stream is reset after (at most) the first half.
    let h2 = Client::with(&sim, true, None, false);
    sim.faults().list_body(ListFault::CloseMidBody, 1);
    let r = h2.raw(Method::GET, PODS, None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let (got, failed) = read_body(r, usize::MAX).await;
    assert!(failed, "the stream ends in an error, not cleanly");
    assert!(full[..full.len() / 2].starts_with(&got));
}

#[tokio::test]
async fn list_no_resource_version_leaves_it_out_of_the_real_list() {
    let sim = sim_with(2).await;
    let c = Client::new(&sim);
    sim.faults().list_body(ListFault::NoResourceVersion, 1);
    let r = c.get(PODS).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["kind"], "PodList");
    assert_eq!(r.body["metadata"], json!({}));
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
    let r = c.get(PODS).await;
    assert_eq!(
        r.body["metadata"]["resourceVersion"],
        sim.revision().to_string()
    );
}

#[tokio::test]
async fn silent_watches_send_headers_and_then_nothing() {
    let sim = sim_with(1).await;
    let c = Client::new(&sim);
    let before = sim.counters();
    sim.faults().silent_watches(1);
    let path = format!("{PODS}?watch=true&allowWatchBookmarks=true&timeoutSeconds=1");
    let mut silent = c.watch(&path).await;
    assert_eq!(silent.status, StatusCode::OK);
    assert_eq!(silent.headers["content-type"], "application/json");
    // The next watch is a normal one: it gets the initial pod and a new one, then its
    // 1 s timeout closes it.
    let mut normal = c.watch(&path).await;
    assert_eq!(name(&normal.expect("ADDED").await), "p0");
    sim.create("pods", None, pod("late", json!({}))).unwrap();
    assert_eq!(name(&normal.expect("ADDED").await), "late");
    let rest = normal.rest().await;
    assert!(rest.iter().all(|e| e["type"] == "BOOKMARK"), "{rest:?}");
    // The silent stream, opened first with the same timeout, has had nothing: neither
    // events nor a bookmark nor the timeout close.
    let got = tokio::time::timeout(Duration::from_millis(300), silent.next_line()).await;
    assert!(got.is_err(), "the silent watch sent {got:?}");
    assert!(silent.chunks.is_empty());
    assert_eq!(sim.counters().watches - before.watches, 2);
}

#[tokio::test]
async fn unknown_event_type_writes_a_surprise_line_before_each_of_the_next_n_events() {
    let sim = sim_with(0).await;
    let mut w = Client::new(&sim).watch(&format!("{PODS}?watch=true")).await;
    sim.faults().unknown_event_type().unknown_event_type();
    for n in ["a", "b"] {
        sim.create("pods", None, pod(n, json!({}))).unwrap();
        let surprise = w.expect("SURPRISE").await;
        let added = w.expect("ADDED").await;
        assert_eq!(name(&surprise), n);
        assert_eq!(
            surprise, added,
            "the SURPRISE line carries the event's object"
        );
    }
    sim.create("pods", None, pod("c", json!({}))).unwrap();
    assert_eq!(name(&w.expect("ADDED").await), "c");
}

const VALID: &str = "valid specs: list-status-200[:N]";

#[tokio::test]
async fn fault_specs_apply_every_request_or_the_next_n() {
    let sim = sim_with(1).await;
    let c = Client::new(&sim);
    let f = sim.faults();
    assert_eq!(
        apply_fault_spec(f, "list-status-200").unwrap(),
        "list-status-200 (every request)"
    );
    for _ in 0..3 {
        assert_eq!(c.get(PODS).await.body["kind"], "Status");
    }
    f.reset();
    assert_eq!(
        apply_fault_spec(f, "list-html:2").unwrap(),
        "list-html (next 2 requests)"
    );
    assert_eq!(
        apply_fault_spec(f, "list-empty-object:1").unwrap(),
        "list-empty-object (next request)"
    );
    assert_eq!(content_type(&c.get(PODS).await), "text/html");
    assert_eq!(content_type(&c.get(PODS).await), "text/html");
    assert_eq!(c.get(PODS).await.body, json!({}));
    assert_eq!(c.get(PODS).await.body["kind"], "PodList");

    assert_eq!(
        apply_fault_spec(f, "fail-watch=503:1").unwrap(),
        "fail-watch=503 (next request)"
    );
    assert_eq!(
        apply_fault_spec(f, "watch-expired:1").unwrap(),
        "watch-expired (next request)"
    );
    assert_eq!(
        apply_fault_spec(f, "fail-list=429:1").unwrap(),
        "fail-list=429 (next request)"
    );
    let watch = format!("{PODS}?watch=true");
    assert_eq!(c.get(&watch).await.status, StatusCode::SERVICE_UNAVAILABLE);
    let r = c.get(&watch).await;
    assert_eq!(r.status, StatusCode::GONE);
    assert_eq!(r.body["reason"], "Expired");
    assert_eq!(c.get(PODS).await.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(c.get(PODS).await.status, StatusCode::OK);

    for (spec, desc) in [
        ("list-endless:1", "list-endless (next request)"),
        (
            "list-repeat-continue:4",
            "list-repeat-continue (next 4 requests)",
        ),
        (
            "list-close-mid-body:1",
            "list-close-mid-body (next request)",
        ),
        (
            "list-no-resource-version",
            "list-no-resource-version (every request)",
        ),
        ("watch-silent:2", "watch-silent (next 2 requests)"),
        (
            "watch-malformed-line:3",
            "watch-malformed-line (next 3 events)",
        ),
        ("watch-unknown-event", "watch-unknown-event (every event)"),
        (
            "rechunk=7",
            "rechunk=7 (watch streams cut into 7-byte chunks)",
        ),
        (
            "end-watches-after=0",
            "end-watches-after=0 (watch streams end after 0 events)",
        ),
    ] {
        assert_eq!(apply_fault_spec(f, spec).unwrap(), desc);
    }
    f.reset();
    assert_eq!(f.pending_resets(), 0);
    apply_fault_spec(f, "watch-reset-mid-chunk:2").unwrap();
    assert_eq!(f.pending_resets(), 2);
    apply_fault_spec(f, "watch-reset-mid-chunk").unwrap();
    assert_eq!(f.pending_resets(), u32::MAX, "every event");
}

#[tokio::test]
async fn fault_spec_one_shots_without_a_count_hit_every_event() {
    let sim = sim_with(0).await;
    let mut w = Client::new(&sim).watch(&format!("{PODS}?watch=true")).await;
    apply_fault_spec(sim.faults(), "watch-unknown-event").unwrap();
    for n in ["a", "b", "c"] {
        sim.create("pods", None, pod(n, json!({}))).unwrap();
        assert_eq!(name(&w.expect("SURPRISE").await), n);
        assert_eq!(name(&w.expect("ADDED").await), n);
    }
}

#[tokio::test]
async fn bad_fault_specs_are_errors_naming_the_spec_and_listing_the_valid_ones() {
    let sim = sim_with(1).await;
    let f = sim.faults();
    for (spec, why) in [
        ("nope", "unknown fault \"nope\""),
        ("", "unknown fault \"\""),
        ("list-html:x", "the count \"x\" is not a positive integer"),
        ("list-html:0", "the count \"0\" is not a positive integer"),
        ("list-html:-1", "the count \"-1\" is not a positive integer"),
        (
            "list-html:1:2",
            "the count \"1:2\" is not a positive integer",
        ),
        ("list-html=3", "list-html takes no value (got =3)"),
        (
            "fail-list",
            "fail-list needs a status code, as fail-list=CODE",
        ),
        (
            "fail-list=abc",
            "the status code \"abc\" is not a number from 400 to 599",
        ),
        (
            "fail-watch=200:1",
            "the status code \"200\" is not a number from 400 to 599",
        ),
        ("rechunk", "rechunk needs a value, as rechunk=N"),
        ("rechunk=0", "the chunk size must be at least 1"),
        ("rechunk=7:2", "rechunk takes no :N count"),
        (
            "end-watches-after=-1",
            "the value \"-1\" is not a non-negative integer",
        ),
    ] {
        let e = apply_fault_spec(f, spec).unwrap_err();
        assert!(
            e.starts_with(&format!("invalid fault spec {spec:?}: {why}; ")),
            "{spec}: {e}"
        );
        assert!(e.contains(VALID), "{e}");
        assert!(e.contains("end-watches-after=N"), "{e}");
    }
    // Nothing was applied.
    let c = Client::new(&sim);
    assert_eq!(c.get(PODS).await.body["kind"], "PodList");
    let mut w = c.watch(&format!("{PODS}?watch=true")).await;
    assert_eq!(name(&w.expect("ADDED").await), "p0");
    assert_eq!(f.pending_resets(), 0);
}

#[tokio::test]
async fn reset_on_the_first_event_answers_the_head_and_half_the_event_over_both_protocols() {
    let sim = sim_with(1).await;
    for h2 in [false, true] {
        let c = Client::with(&sim, h2, sim.token().map(str::to_string), false);
        // The simulator gives the connection a moment (20 ms) to write the half before the
        // reset; a machine too loaded for that loses it, so the half must arrive in one of a
        // few tries, and nothing more than it in any.
        let mut halves = 0;
        for _ in 0..3 {
            // The initial ADDED of p0 is the first event the watch writes: it is the one cut.
            sim.faults().reset_mid_chunk();
            let mut w = c.watch(&format!("{PODS}?watch=true")).await;
            assert_eq!(w.status, StatusCode::OK, "h2: {h2}");
            match w.next_line().await {
                Read::Error(_) => {}
                other => panic!("h2: {h2}: expected a body error, got {other:?}"),
            }
            assert!(w.chunks.len() <= 1, "h2: {h2}: {:?}", w.chunks);
            halves += w.chunks.len();
            assert_eq!(sim.faults().pending_resets(), 0);
        }
        assert!(halves > 0, "h2: {h2}: half the event never arrived");
    }
}
