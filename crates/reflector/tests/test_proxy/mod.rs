//! A small HTTP proxy for tests, shared by the test binaries that put one between the client
//! and a server: it tunnels `CONNECT` requests, forwards absolute-form ones, and can refuse,
//! answer garbage, flood, stay silent, or demand credentials.

// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine as _;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// How the test proxy answers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Tunnels and forwards.
    Pass,
    /// `403 Forbidden` to everything.
    Refuse,
    /// A line that is not HTTP at all.
    Garbage,
    /// A response head that never ends (far beyond 64 KiB).
    Flood,
    /// Reads the request and never answers.
    Silent,
}

#[derive(Default)]
pub struct Seen {
    /// Targets of `CONNECT` requests tunnelled.
    pub tunnels: Vec<String>,
    /// Authorities of absolute-form requests forwarded.
    pub forwards: Vec<String>,
    /// The `Proxy-Authorization` of each request head the proxy read.
    pub authorizations: Vec<Option<String>>,
    /// `host:port` targets the proxy connects to another address instead (its own name
    /// resolution, so that a test can name a server by a host that is not loopback).
    pub aliases: Vec<(String, SocketAddr)>,
}

pub struct TestProxy {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestProxy {
    /// A proxy on 127.0.0.1 answering as `mode`; with `credentials` (`user:password`), requests
    /// without the matching `Proxy-Authorization: Basic …` get `407`.
    pub async fn start(mode: Mode, credentials: Option<&str>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let required = credentials.map(|c| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(c)
            )
        });
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                loop {
                    let Ok((conn, _)) = listener.accept().await else {
                        return;
                    };
                    tokio::spawn(serve(conn, mode, required.clone(), seen.clone()));
                }
            }
        });
        TestProxy { addr, seen, task }
    }

    pub fn url(&self) -> url::Url {
        format!("http://{}", self.addr).parse().unwrap()
    }

    pub fn url_with_user_info(&self, user_info: &str) -> url::Url {
        format!("http://{user_info}@{}", self.addr).parse().unwrap()
    }

    pub fn tunnels(&self) -> Vec<String> {
        self.seen.lock().tunnels.clone()
    }

    pub fn forwards(&self) -> Vec<String> {
        self.seen.lock().forwards.clone()
    }

    /// Connections to `host_port` go to `addr` instead.
    pub fn alias(&self, host_port: &str, addr: SocketAddr) {
        self.seen.lock().aliases.push((host_port.to_string(), addr));
    }
}

/// Reads a request head (and whatever followed it in the same reads).
async fn read_head(conn: &mut TcpStream) -> Option<(Vec<u8>, usize)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some((buf, i + 4));
        }
        if buf.len() > 64 << 10 {
            return None;
        }
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Connects to `target` (`host:port`), or to the address it is an alias of.
async fn connect(target: &str, seen: &Mutex<Seen>) -> std::io::Result<TcpStream> {
    let alias = seen
        .lock()
        .aliases
        .iter()
        .find(|(name, _)| name == target)
        .map(|(_, addr)| *addr);
    match alias {
        Some(addr) => TcpStream::connect(addr).await,
        None => TcpStream::connect(target).await,
    }
}

async fn serve(mut conn: TcpStream, mode: Mode, required: Option<String>, seen: Arc<Mutex<Seen>>) {
    let Some((buf, end)) = read_head(&mut conn).await else {
        return;
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.lines();
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let (method, target) = (
        request_line.next().unwrap_or_default().to_string(),
        request_line.next().unwrap_or_default().to_string(),
    );
    let authorization = lines.find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("proxy-authorization")
            .then(|| value.trim().to_string())
    });
    seen.lock().authorizations.push(authorization.clone());
    match mode {
        Mode::Pass => {}
        Mode::Refuse => {
            let _ = conn
                .write_all(
                    b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            return;
        }
        Mode::Garbage => {
            let _ = conn.write_all(b"SSH-2.0-OpenSSH_9.6\r\n\r\n").await;
            return;
        }
        Mode::Flood => {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\n").await;
            let filler = format!("X-Filler: {}\r\n", "a".repeat(1000));
            for _ in 0..100 {
                if conn.write_all(filler.as_bytes()).await.is_err() {
                    return;
                }
            }
            // Hold the connection until the client gives up on it.
            let _ = conn.read(&mut [0u8; 1]).await;
            return;
        }
        Mode::Silent => {
            let _ = conn.read(&mut [0u8; 1]).await;
            return;
        }
    }
    if required.is_some() && authorization != required {
        let _ = conn
            .write_all(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n\
                  Proxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n\
                  Connection: close\r\n\r\n",
            )
            .await;
        return;
    }
    if method == "CONNECT" {
        let Ok(mut upstream) = connect(&target, &seen).await else {
            let _ = conn.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
            return;
        };
        seen.lock().tunnels.push(target);
        if conn
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
        // Whatever the client sent behind its CONNECT belongs to the server.
        if upstream.write_all(&buf[end..]).await.is_err() {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
    } else {
        let authority = target
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_default()
            .to_string();
        let Ok(mut upstream) = connect(&authority, &seen).await else {
            let _ = conn.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
            return;
        };
        seen.lock().forwards.push(authority);
        // hyper servers accept absolute-form requests: pass the bytes on as they are.
        if upstream.write_all(&buf).await.is_err() {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
    }
}
