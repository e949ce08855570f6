//! The event recorder against a real kube-apiserver (tests/real-apiserver, 1.36.3): what
//! client-go's correlator does to repeated and to similar events, through `ApiEventSink`, and
//! what the server keeps of it:
//! - the same event three times is one Event, created once and patched twice (strategic merge
//!   of `count`, `lastTimestamp` and `message`), `count` 3, its `firstTimestamp` the first
//!   occurrence's and no later than its `lastTimestamp`;
//! - twelve events alike but for their message (same object, type and reason): the first nine
//!   are Events of their own, and from the tenth distinct message on they are combined into one
//!   Event, `(combined from similar events): <latest message>`, `count` 3.
//!
//! It needs the real server's binaries: it runs when `REAL_APISERVER=1` (building them with Go
//! if missing, about five minutes cold) or when both are already built under
//! `target/real-apiserver/bin/` (or named by `KUBE_APISERVER` and `ETCD`), and otherwise passes
//! saying why it did not run, so that `cargo test --workspace` needs no Go. Run it with
//! `REAL_APISERVER=1 cargo test -p controller --test events_real -- --nocapture`.

use controller::events::{
    ApiEventSink, BroadcasterConfig, EventBroadcaster, EventSource, EventType, ObjectReference,
};
use real_apiserver::{BuildModule, RealServer, ServerOptions, User};
use serde_json::{json, Value};
use workqueue::shared_informer::reflector::{Client, ClusterConfig, Credentials};
use workqueue::CancellationToken;

const NAMESPACE: &str = "events";

/// Why the test cannot run here, if it cannot.
fn not_runnable() -> Option<String> {
    if std::env::var("REAL_APISERVER").is_ok_and(|v| v == "1") {
        return None;
    }
    let missing: Vec<String> = [
        (BuildModule::Etcd, "ETCD"),
        (BuildModule::KubeApiserver, "KUBE_APISERVER"),
    ]
    .into_iter()
    .filter_map(|(module, variable)| {
        let named = std::env::var_os(variable).filter(|p| !p.is_empty());
        match named
            .map(std::path::PathBuf::from)
            .ok_or(())
            .or_else(|()| module.cached().map_err(|error| error.to_string()))
        {
            Ok(path) if path.is_file() => None,
            Ok(path) => Some(path.display().to_string()),
            Err(error) => Some(error),
        }
    })
    .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "no real kube-apiserver: {} not built; set REAL_APISERVER=1 to build and run",
            missing.join(", ")
        )
    })
}

fn request(server: &RealServer, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let body = body.map(|b| b.to_string());
    let (status, text) = server
        .request(
            User::Admin,
            method,
            path,
            body.as_deref().map(|b| ("application/json", b.as_bytes())),
        )
        .unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The Events of `NAMESPACE` whose reason is `reason`, as the server stores them.
fn events(server: &RealServer, reason: &str) -> Vec<Value> {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/events");
    let (status, list) = request(server, "GET", &path, None);
    assert_eq!(status, 200, "{list}");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == reason)
        .cloned()
        .collect()
}

/// A ConfigMap of the namespace, made on the server: the events' involved object.
fn object(server: &RealServer, name: &str) -> ObjectReference {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    let (status, created) = request(
        server,
        "POST",
        &path,
        Some(json!({"metadata": {"name": name}, "data": {}})),
    );
    assert_eq!(status, 201, "{created}");
    ObjectReference::new("v1", "ConfigMap", NAMESPACE, name)
        .with_uid(created["metadata"]["uid"].as_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_kube_apiserver_keeps_repeated_events_as_one_and_similar_ones_combined() {
    if let Some(reason) = not_runnable() {
        println!("skipped: {reason}");
        return;
    }
    let server = tokio::task::spawn_blocking(|| RealServer::start(ServerOptions::default()))
        .await
        .unwrap()
        .unwrap_or_else(|error| panic!("the real kube-apiserver did not start: {error}"));
    let (status, body) = request(
        &server,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"metadata": {"name": NAMESPACE}})),
    );
    assert_eq!(status, 201, "{body}");
    let mut config = ClusterConfig::new(server.url()).unwrap();
    config.certificate_authority = Some(server.ca_pem().as_bytes().to_vec());
    config.credentials = Credentials::Token(server.token(User::Admin).to_string().into());
    let client = Client::new(&config).unwrap();
    let repeated = object(&server, "repeated");
    let similar = object(&server, "similar");

    let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
    let stats = broadcaster.stats_handle();
    let recorder = broadcaster.new_recorder(EventSource::new("widget-controller"));
    let writer = broadcaster.start(ApiEventSink::new(client), CancellationToken::new());
    for _ in 0..3 {
        recorder.event(&repeated, EventType::Warning, "BackOff", "restarting");
    }
    for i in 1..=12 {
        let message = format!("attempt {i} failed");
        recorder.event(&similar, EventType::Warning, "Failed", &message);
    }
    drop(recorder);
    writer.await.unwrap();
    let stats = stats.get();
    println!("{stats:?}");
    // One create and two patches for the repeated event; nine Events of their own and one
    // combined Event (created once, patched twice) for the similar ones.
    assert_eq!((stats.created, stats.patched), (1 + 10, 2 + 2), "{stats:?}");
    assert_eq!((stats.aggregated, stats.failed, stats.filtered), (3, 0, 0));

    let [backoff] = &events(&server, "BackOff")[..] else {
        panic!("not one BackOff Event: {:?}", events(&server, "BackOff"));
    };
    assert_eq!(backoff["count"], 3, "{backoff}");
    assert_eq!(backoff["message"], "restarting");
    assert_eq!(backoff["type"], "Warning");
    assert_eq!(backoff["involvedObject"]["name"], "repeated");
    assert_eq!(backoff["involvedObject"]["uid"], repeated.uid.as_str());
    assert_eq!(backoff["source"]["component"], "widget-controller");
    let first = backoff["firstTimestamp"].as_str().unwrap();
    let last = backoff["lastTimestamp"].as_str().unwrap();
    assert!(first <= last, "first {first}, last {last}");

    let failed = events(&server, "Failed");
    let (combined, single): (Vec<&Value>, Vec<&Value>) = failed
        .iter()
        .partition(|e| e["message"].as_str().unwrap().starts_with("(combined"));
    let mut singles: Vec<&str> = single
        .iter()
        .map(|e| {
            assert_eq!(e["count"], 1, "{e}");
            e["message"].as_str().unwrap()
        })
        .collect();
    singles.sort_unstable_by_key(|m| m.split(' ').nth(1).and_then(|n| n.parse::<u32>().ok()));
    let expected: Vec<String> = (1..=9).map(|i| format!("attempt {i} failed")).collect();
    assert_eq!(singles, expected);
    let [combined] = &combined[..] else {
        panic!("not one combined Event: {combined:?}");
    };
    assert_eq!(combined["count"], 3, "{combined}");
    assert_eq!(
        combined["message"],
        "(combined from similar events): attempt 12 failed"
    );
    assert_eq!(combined["involvedObject"]["name"], "similar");
    println!(
        "stored: BackOff count {} ({first} … {last}); {} single Failed Events and one combined, count {}",
        backoff["count"],
        singles.len(),
        combined["count"]
    );
    server.stop().unwrap();
}
