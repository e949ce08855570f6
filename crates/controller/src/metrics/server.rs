//! The HTTP endpoint: `/metrics`, `/healthz`, `/readyz` on hyper's HTTP/1.1 server (MX1–MX4).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::health::Health;

/// The media type `prometheus_client`'s text encoder writes (OpenMetrics text, which
/// Prometheus scrapes).
const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";
/// hyper's smallest read buffer: the request line and headers must fit in it.
const MAX_HEAD_BYTES: usize = 8192;
/// How long a connection asked to close may take to finish the answer it is writing.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// The pause after a failed `accept` (out of file descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The endpoint's bounds (MX4). Build with `ServeOptions { field: value, ..Default::default() }`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Connections served at once; further ones wait in the listener's backlog. Default 64.
    pub max_connections: usize,
    /// How long a client may take to send a request's line and headers. Default 5 s.
    pub header_read_timeout: Duration,
    /// How long one connection may stay open, keep-alive included; it is then closed after the
    /// answer in progress. Default 60 s.
    pub connection_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            max_connections: 64,
            header_read_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_secs(60),
        }
    }
}

impl ServeOptions {
    /// Sets [`max_connections`](Self::max_connections) (at least 1).
    pub fn max_connections(mut self, max_connections: usize) -> Self {
        self.max_connections = max_connections.max(1);
        self
    }

    /// Sets [`header_read_timeout`](Self::header_read_timeout).
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// Sets [`connection_timeout`](Self::connection_timeout).
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }
}

struct State {
    registry: Arc<Registry>,
    health: Health,
}

/// Serves `GET /metrics` (the registry in the text format), `GET /healthz` (200 while serving)
/// and `GET /readyz` (200 when every check of `health` passes, 503 naming the failing ones) on
/// `listener` until `cancel` fires, with the default [`ServeOptions`]; see
/// [`serve_with_options`] and rules MX1–MX4.
///
/// # Cancel safety
///
/// Cancel safe in that dropping the future closes the listener and every connection at once
/// (answers in progress are cut); `cancel` closes them after their answers in progress instead.
pub async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    health: Health,
    cancel: CancellationToken,
) {
    serve_with_options(listener, registry, health, ServeOptions::default(), cancel).await;
}

/// [`serve`] with explicit bounds. Returns once `cancel` has fired, the listener is closed and
/// every connection has finished its answer in progress (or was cut after a 5 s grace).
///
/// # Cancel safety
///
/// As [`serve`]'s.
pub async fn serve_with_options(
    listener: TcpListener,
    registry: Arc<Registry>,
    health: Health,
    options: ServeOptions,
    cancel: CancellationToken,
) {
    let state = Arc::new(State { registry, health });
    let slots = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let permit = tokio::select! {
            biased;
            () = cancel.cancelled() => break,
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break, // never closed
            },
        };
        let accepted = tokio::select! {
            biased;
            () = cancel.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _peer)) => {
                connections.spawn(connection(
                    stream,
                    state.clone(),
                    options.clone(),
                    cancel.clone(),
                    permit,
                ));
            }
            Err(error) => {
                tracing::warn!(%error, "metrics endpoint: accept failed");
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                }
            }
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

async fn connection(
    stream: TcpStream,
    state: Arc<State>,
    options: ServeOptions,
    cancel: CancellationToken,
    _slot: OwnedSemaphorePermit,
) {
    let service = service_fn(move |request| {
        let state = state.clone();
        async move { Ok::<_, Infallible>(answer(&request, &state)) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, "metrics endpoint: connection ended with an error");
            }
            return;
        }
        () = cancel.cancelled() => {}
        () = tokio::time::sleep(options.connection_timeout) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(CLOSE_GRACE, conn).await;
}

fn answer(request: &Request<Incoming>, state: &State) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    if !matches!(path, "/metrics" | "/healthz" | "/readyz") {
        return reply(StatusCode::NOT_FOUND, TEXT, "404 page not found\n".into());
    }
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        let mut response = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "method not allowed\n".into(),
        );
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let mut response = match path {
        "/metrics" => {
            let mut text = String::new();
            match prometheus_client::encoding::text::encode(&mut text, &state.registry) {
                Ok(()) => reply(StatusCode::OK, METRICS_CONTENT_TYPE, text),
                Err(error) => {
                    tracing::warn!(%error, "metrics endpoint: encoding the registry failed");
                    reply(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        TEXT,
                        "encoding metrics failed\n".into(),
                    )
                }
            }
        }
        "/healthz" => reply(StatusCode::OK, TEXT, "ok\n".into()),
        _ => readyz(&state.health),
    };
    // A request carrying a body is answered, never read; its connection is not reused (MX4).
    if has_body(request) {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

fn has_body(request: &Request<Incoming>) -> bool {
    use hyper::body::Body;
    !request.body().is_end_stream()
}

/// `[+]name ok` / `[-]name failed` per check, as kube-apiserver's `/readyz?verbose`.
fn readyz(health: &Health) -> Response<Full<Bytes>> {
    let results = health.results();
    let mut body = String::new();
    for (name, passed) in &results {
        let line = if *passed {
            "[+]{name} ok"
        } else {
            "[-]{name} failed"
        };
        body.push_str(&line.replace("{name}", name));
        body.push('\n');
    }
    if results.iter().all(|(_, passed)| *passed) {
        body.push_str("readyz check passed\n");
        reply(StatusCode::OK, TEXT, body)
    } else {
        body.push_str("readyz check failed\n");
        reply(StatusCode::SERVICE_UNAVAILABLE, TEXT, body)
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
