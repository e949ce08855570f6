//! The metrics endpoint over real TCP connections (rules MX1–MX5): a controller's reconciles
//! scraped from `/metrics`, the probes, unknown paths, and shutdown on cancel.
#![cfg(feature = "metrics")]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use controller::leader_election::HealthzAdaptor;
use controller::metrics::{serve, ControllerMetrics, Health};
use controller::prelude::*;
use controller::workqueue::{
    ItemExponentialFailureRateLimiter, PrometheusMetricsProvider, QueueConfig,
};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

struct Endpoint {
    addr: SocketAddr,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

async fn start(registry: Registry, health: Health) -> Endpoint {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(serve(listener, Arc::new(registry), health, cancel.clone()));
    Endpoint { addr, cancel, task }
}

/// One request on a connection of its own, closed after the answer: (status, body).
async fn request(addr: SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head[9..12].parse().unwrap();
    (status, head.to_string(), body.to_string())
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let (status, _, body) = request(addr, "GET", path).await;
    (status, body)
}

#[tokio::test(start_paused = true)]
async fn a_controllers_reconciles_are_scraped_by_name_and_labels() {
    let mut registry = Registry::default();
    let queue_metrics = Arc::new(PrometheusMetricsProvider::register(&mut registry));
    let metrics = ControllerMetrics::register(&mut registry);
    let lease = metrics.leader_election("widgets-controller");
    lease.set_leading(true);
    let endpoint = start(registry, Health::new()).await;

    let queue = RateLimitingQueue::with_config(
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1)),
        QueueConfig::new()
            .name("widgets")
            .metrics_provider(queue_metrics),
    );
    for key in ["ok", "bad", "retry", "boom", "later"] {
        queue.add(key);
    }
    let attempts = Arc::new(Mutex::new(std::collections::HashMap::<&str, u32>::new()));
    let token = CancellationToken::new();
    let run = tokio::spawn(
        Controller::new(queue.clone())
            .workers(2)
            .metrics(metrics.controller("widgets"))
            .run(token.clone(), move |key: &'static str| {
                let attempt = {
                    let mut attempts = attempts.lock();
                    let n = attempts.entry(key).or_default();
                    *n += 1;
                    *n
                };
                async move {
                    match (key, attempt) {
                        ("bad", 1) => Err("the server said no".to_string()),
                        ("boom", 1) => panic!("a reconcile bug"),
                        ("retry", 1) => Ok(Action::Retry),
                        ("later", _) => Ok(Action::RequeueAfter(Duration::from_secs(3600))),
                        _ => Ok(Action::Done),
                    }
                }
            }),
    );
    // Paused time: every reconcile and the 1 ms retries happen; the requeue after an hour not.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, text) = get(endpoint.addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(text.contains(r#"controller_runtime_active_workers{controller="widgets"} 0"#));
    token.cancel();
    run.await.unwrap();

    let (status, head, text) = request(endpoint.addr, "GET", "/metrics").await;
    assert_eq!(status, 200);
    assert!(head.contains("application/openmetrics-text"), "{head}");
    for line in [
        // ok, and bad, retry and boom on their second attempt
        r#"controller_runtime_reconcile_total{controller="widgets",result="success"} 4"#,
        // bad's error and boom's panic
        r#"controller_runtime_reconcile_total{controller="widgets",result="error"} 2"#,
        r#"controller_runtime_reconcile_total{controller="widgets",result="requeue"} 1"#,
        r#"controller_runtime_reconcile_total{controller="widgets",result="requeue_after"} 1"#,
        r#"controller_runtime_reconcile_errors_total{controller="widgets"} 2"#,
        r#"controller_runtime_reconcile_panics_total{controller="widgets"} 1"#,
        r#"controller_runtime_reconcile_time_seconds_count{controller="widgets"} 8"#,
        r#"controller_runtime_active_workers{controller="widgets"} 0"#,
        r#"controller_runtime_max_concurrent_reconciles{controller="widgets"} 2"#,
        r#"leader_election_master_status{name="widgets-controller"} 1"#,
        // 5 adds, then bad, retry and boom back after their rate limit
        r#"workqueue_adds_total{name="widgets"} 8"#,
        // those three, and later's requeue
        r#"workqueue_retries_total{name="widgets"} 4"#,
        r#"workqueue_work_duration_seconds_count{name="widgets"} 8"#,
        r#"workqueue_depth{name="widgets"} 0"#,
    ] {
        assert!(text.contains(line), "missing `{line}` in:\n{text}");
    }
    lease.set_leading(false);
    let (_, text) = get(endpoint.addr, "/metrics").await;
    assert!(text.contains(r#"leader_election_master_status{name="widgets-controller"} 0"#));
    endpoint.cancel.cancel();
    endpoint.task.await.unwrap();
}

#[tokio::test]
async fn metrics_serves_the_registry_encoded_at_each_request() {
    let mut registry = Registry::default();
    let scrapes = prometheus_client::metrics::counter::Counter::<u64>::default();
    registry.register("test_scrapes", "Scrapes seen", scrapes.clone());
    let endpoint = start(registry, Health::new()).await;
    for n in 0..2 {
        let (status, head, text) = request(endpoint.addr, "GET", "/metrics").await;
        assert_eq!(status, 200);
        assert!(head.contains("application/openmetrics-text"), "{head}");
        assert!(
            text.contains(&format!("test_scrapes_total {n}\n")),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        scrapes.inc();
    }
    endpoint.cancel.cancel();
    endpoint.task.await.unwrap();
}

#[tokio::test]
async fn healthz_is_ok_readyz_names_failing_checks_until_they_pass_and_other_paths_404() {
    let health = Health::new();
    let synced = Arc::new(AtomicBool::new(false));
    let flag = synced.clone();
    health.add_check("informers", move || flag.load(Ordering::SeqCst));
    health.add_check("queue", || true);
    let endpoint = start(Registry::default(), health).await;

    assert_eq!(
        get(endpoint.addr, "/healthz").await,
        (200, "ok\n".to_string())
    );
    let (status, body) = get(endpoint.addr, "/readyz").await;
    assert_eq!(status, 503);
    assert_eq!(
        body,
        "[-]informers failed\n[+]queue ok\nreadyz check failed\n"
    );
    synced.store(true, Ordering::SeqCst);
    let (status, body) = get(endpoint.addr, "/readyz").await;
    assert_eq!(status, 200);
    assert_eq!(body, "[+]informers ok\n[+]queue ok\nreadyz check passed\n");

    for path in ["/", "/metricsz", "/readyz/informers", "/metrics/"] {
        assert_eq!(get(endpoint.addr, path).await.0, 404, "{path}");
    }
    let (status, head, _) = request(endpoint.addr, "POST", "/metrics").await;
    assert_eq!(status, 405);
    assert!(
        head.to_ascii_lowercase().contains("allow: get, head"),
        "{head}"
    );
    let (status, _, body) = request(endpoint.addr, "HEAD", "/healthz").await;
    assert_eq!((status, body.as_str()), (200, ""));
    endpoint.cancel.cancel();
    endpoint.task.await.unwrap();
}

#[tokio::test]
async fn readyz_follows_leader_election_and_has_synced() {
    let health = Health::new();
    // No elector followed yet: the check passes, as client-go's adaptor's.
    health.add_leader_election(HealthzAdaptor::new(Duration::from_secs(20)));
    health.add_has_synced("never-synced", NeverSynced);
    let endpoint = start(Registry::default(), health).await;
    let (status, body) = get(endpoint.addr, "/readyz").await;
    assert_eq!(status, 503);
    assert_eq!(
        body,
        "[+]leaderElection ok\n[-]never-synced failed\nreadyz check failed\n"
    );
    endpoint.cancel.cancel();
    endpoint.task.await.unwrap();
}

struct NeverSynced;

impl controller::workqueue::shared_informer::HasSynced for NeverSynced {
    fn has_synced(&self) -> bool {
        false
    }
    fn wait_for_sync(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + '_>> {
        Box::pin(async { false })
    }
}

#[tokio::test]
async fn cancel_closes_idle_connections_and_the_listener_and_serve_returns() {
    let endpoint = start(Registry::default(), Health::new()).await;
    // A kept-alive connection, idle after its first answer.
    let mut stream = TcpStream::connect(endpoint.addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.ends_with(b"ok\n") {
        let n = stream.read(&mut buf).await.unwrap();
        assert_ne!(n, 0, "closed before answering");
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"));

    endpoint.cancel.cancel();
    endpoint.task.await.unwrap();
    assert_eq!(
        stream.read(&mut buf).await.unwrap(),
        0,
        "the idle connection was closed"
    );
    assert!(
        TcpStream::connect(endpoint.addr).await.is_err(),
        "the listener is closed"
    );
}
