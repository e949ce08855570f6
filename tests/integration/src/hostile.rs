//! A small misbehaving HTTP/1.1 server on 127.0.0.1, in front of a simulated API server: it
//! forwards what it is not told to spoil, and answers the rest the way broken servers, proxies and
//! networks do (a `Status` with 200, `{}`, HTML, garbage that is not HTTP, a body cut short or
//! never ending, a `continue` token that repeats, 401/403, a watch that says nothing or was never
//! answered, an unknown event type, a watch-list refused with 410 forever).
//!
//! It reads each connection's first request head itself, so it can answer below HTTP when it must.
//! A connection it forwards is spliced to the simulator as raw bytes and is not inspected again;
//! so that a new behaviour applies to every request, [`HostileServer::set`] cuts every forwarded
//! connection, and the client reconnects into the new behaviour. Every task stops when the server
//! is dropped, and each misbehaving answer is bounded (the endless body stops when the client
//! stops reading).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// How list requests (collection GETs without `watch`) are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListAct {
    /// Forwarded to the simulator.
    Forward,
    /// `200 OK` with a `Status` object (Failure, 500 InternalError) as the body.
    StatusWithOk,
    /// `200 OK` with `{}`.
    EmptyObject,
    /// `200 OK`, `text/html`: a proxy's error page.
    Html,
    /// Bytes that are not HTTP at all, then the connection is closed.
    Garbage,
    /// `200 OK` announcing 100,000 bytes, half a list sent, then the connection is closed.
    ClosedMidBody,
    /// `200 OK`, chunked, a list whose items never end.
    Endless,
    /// `200 OK`, a page whose `continue` token is always the same.
    RepeatContinue,
    /// `401 Unauthorized` with its `Status`.
    Unauthorized,
    /// `403 Forbidden` with its `Status`.
    Forbidden,
}

/// How watch requests are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchAct {
    /// Forwarded to the simulator.
    Forward,
    /// `410 Gone` (`Expired`) on open: the client's resource version is too old, so it relists.
    Expired,
    /// Watch-list requests (`sendInitialEvents=true`) get `410 Gone`; other watches are forwarded.
    WatchListExpired,
    /// `200 OK` and headers, then nothing at all, the connection held open.
    Silent,
    /// The request is read and never answered, not even with headers.
    NeverAnswered,
    /// `200 OK`, then one event of type `SURPRISE`, then nothing.
    UnknownEventType,
}

/// Requests seen, by what they were.
#[derive(Debug, Default)]
pub struct Counts {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// List requests (first on their connection).
    pub lists: AtomicU64,
    /// Watch requests.
    pub watches: AtomicU64,
}

struct Shared {
    upstream: SocketAddr,
    acts: Mutex<(ListAct, WatchAct)>,
    counts: Counts,
    /// Cancelled to cut every forwarded connection (replaced by a fresh token each time).
    forwarded: Mutex<CancellationToken>,
    shutdown: CancellationToken,
}

/// The misbehaving server; dropping it stops every task it started.
pub struct HostileServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

impl HostileServer {
    /// Listens on 127.0.0.1 (a free port), forwarding to `upstream` (plain HTTP).
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            acts: Mutex::new((ListAct::Forward, WatchAct::Forward)),
            counts: Counts::default(),
            forwarded: Mutex::new(CancellationToken::new()),
            shutdown: CancellationToken::new(),
        });
        tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(HostileServer { addr, shared })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// From now on, answer lists and watches this way; every forwarded connection is cut.
    pub fn set(&self, list: ListAct, watch: WatchAct) {
        *self.shared.acts.lock() = (list, watch);
        let old = std::mem::replace(&mut *self.shared.forwarded.lock(), CancellationToken::new());
        old.cancel();
    }

    /// The requests seen so far.
    pub fn counts(&self) -> (u64, u64) {
        let c = &self.shared.counts;
        (
            c.lists.load(Ordering::Relaxed),
            c.watches.load(Ordering::Relaxed),
        )
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let conn = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            conn = listener.accept() => conn,
        };
        let Ok((socket, _)) = conn else { continue };
        shared.counts.connections.fetch_add(1, Ordering::Relaxed);
        let shared = shared.clone();
        tokio::spawn(async move {
            let stop = shared.shutdown.clone();
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = serve(socket, &shared) => {}
            }
        });
    }
}

/// The head of a request: its bytes as read (possibly with the start of a body), and its target.
struct Head {
    bytes: Vec<u8>,
    target: String,
}

/// Reads up to the end of the first request head (at most 64 KiB, within 10 s).
async fn read_head(socket: &mut TcpStream) -> Option<Head> {
    let mut bytes = Vec::with_capacity(1024);
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            let n = socket.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            bytes.extend_from_slice(&buf[..n]);
            if bytes.windows(4).any(|w| w == b"\r\n\r\n") {
                return Some(());
            }
            if bytes.len() > 64 << 10 {
                return None;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .ok()??;
    let line = bytes.split(|b| *b == b'\n').next()?;
    let target = String::from_utf8_lossy(line)
        .split_whitespace()
        .nth(1)?
        .to_string();
    Some(Head { bytes, target })
}

async fn serve(mut socket: TcpStream, shared: &Shared) {
    let Some(head) = read_head(&mut socket).await else {
        return;
    };
    let query = head.target.split_once('?').map_or("", |(_, q)| q);
    let has = |param: &str| query.split('&').any(|p| p == param);
    let watch = has("watch=true") || has("watch=1");
    let (list_act, watch_act) = *shared.acts.lock();
    if watch {
        shared.counts.watches.fetch_add(1, Ordering::Relaxed);
        let watch_list = has("sendInitialEvents=true");
        match watch_act {
            WatchAct::Forward => forward(socket, head, shared).await,
            WatchAct::WatchListExpired if !watch_list => forward(socket, head, shared).await,
            WatchAct::Expired | WatchAct::WatchListExpired => {
                respond(&mut socket, "410 Gone", "application/json", &expired()).await
            }
            WatchAct::Silent => {
                let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_ok() {
                    hold(socket).await;
                }
            }
            WatchAct::NeverAnswered => hold(socket).await,
            WatchAct::UnknownEventType => {
                let line = r#"{"type":"SURPRISE","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"surprise","namespace":"hostile","resourceVersion":"999999"}}}"#;
                let out = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{line}\n\r\n",
                    line.len() + 1
                );
                if socket.write_all(out.as_bytes()).await.is_ok() {
                    hold(socket).await;
                }
            }
        }
        return;
    }
    let list = head.bytes.starts_with(b"GET ") && head.target.contains("/configmaps");
    if !list {
        return forward(socket, head, shared).await;
    }
    shared.counts.lists.fetch_add(1, Ordering::Relaxed);
    let json = "application/json";
    match list_act {
        ListAct::Forward => forward(socket, head, shared).await,
        ListAct::StatusWithOk => {
            let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"an aggregated API server said no","reason":"InternalError","code":500}"#;
            respond(&mut socket, "200 OK", json, body).await
        }
        ListAct::EmptyObject => respond(&mut socket, "200 OK", json, "{}").await,
        ListAct::Html => {
            let body = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>";
            respond(&mut socket, "200 OK", "text/html", body).await
        }
        ListAct::Garbage => {
            let _ = socket
                .write_all(b"\x16\x03\x01\x02\x00 SSH-2.0-not-http \xff\xfe\r\n\r\n\x00\x00")
                .await;
        }
        ListAct::ClosedMidBody => {
            let start = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"cut","namespace":"hostile"#;
            let out = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{start}"
            );
            let _ = socket.write_all(out.as_bytes()).await;
        }
        ListAct::Endless => endless(socket).await,
        ListAct::RepeatContinue => {
            let body = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5","continue":"again"},"items":[]}"#;
            respond(&mut socket, "200 OK", json, body).await
        }
        ListAct::Unauthorized => {
            let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
            respond(&mut socket, "401 Unauthorized", json, body).await
        }
        ListAct::Forbidden => {
            let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"x\" cannot list resource \"configmaps\"","reason":"Forbidden","code":403}"#;
            respond(&mut socket, "403 Forbidden", json, body).await
        }
    }
}

fn expired() -> String {
    r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (99)","reason":"Expired","code":410}"#.to_string()
}

/// Writes one complete response and closes the connection.
async fn respond(socket: &mut TcpStream, status: &str, content_type: &str, body: &str) {
    let out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = socket.write_all(out.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// Keeps the connection open, reading and dropping whatever comes, until the client closes it.
async fn hold(mut socket: TcpStream) {
    let mut buf = [0u8; 1024];
    while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
}

/// A list whose items never end, written as fast as the client reads (until it stops).
async fn endless(mut socket: TcpStream) {
    let start =
        r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":["#;
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{start}\r\n",
        start.len()
    );
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let mut items = String::new();
    let mut i = 0u64;
    while items.len() < 64 << 10 {
        items.push_str(&format!(
            r#"{{"metadata":{{"name":"endless-{i}","namespace":"hostile","resourceVersion":"5"}},"data":{{"pad":"{}"}}}},"#,
            "x".repeat(200)
        ));
        i += 1;
    }
    let chunk = format!("{:x}\r\n{items}\r\n", items.len());
    while socket.write_all(chunk.as_bytes()).await.is_ok() {}
}

/// Splices the connection to the simulator until either side closes it or [`HostileServer::set`]
/// cuts it.
async fn forward(mut socket: TcpStream, head: Head, shared: &Shared) {
    let cut = shared.forwarded.lock().clone();
    let Ok(mut upstream) = TcpStream::connect(shared.upstream).await else {
        return;
    };
    let _ = upstream.set_nodelay(true);
    let _ = socket.set_nodelay(true);
    if upstream.write_all(&head.bytes).await.is_err() {
        return;
    }
    tokio::select! {
        _ = cut.cancelled() => {}
        _ = tokio::io::copy_bidirectional(&mut socket, &mut upstream) => {}
    }
}
