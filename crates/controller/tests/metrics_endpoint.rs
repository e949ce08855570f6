//! The metrics endpoint over real TCP connections (rules MX1–MX4): the probes, unknown paths,
//! and shutdown on cancel.
#![cfg(feature = "metrics")]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use controller::leader_election::HealthzAdaptor;
use controller::metrics::{serve, Health};
use controller::prelude::*;
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
