//! The one HTTP client both servers are asked through: HTTPS trusting the server's own CA,
//! HTTP/1.1 only (the real server would pick HTTP/2 over ALPN, the simulator either; one
//! protocol keeps the answers' framing alike), and a fixed `User-Agent`, since kube-apiserver
//! names a write's field manager after it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;

use crate::Error;

/// The `User-Agent` of every request, and so the `manager` of every write's `managedFields`.
pub const USER_AGENT: &str = "differential/v0.1";

/// How long one request may take before it is reported as hung. kube-apiserver takes 3 s to
/// refuse a list at a resourceVersion from the future.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A request, as sent.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// `GET`, `POST`, ...
    pub method: Method,
    /// Path and query, starting with `/`.
    pub path: String,
    /// Request headers (`Content-Type`, `Accept`, ...).
    pub headers: Vec<(String, String)>,
    /// The bearer token of the user asking.
    pub token: String,
    /// The body, empty for none.
    pub body: Bytes,
}

/// A whole answer.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

/// A watch whose headers have arrived: its status and headers, and its body's lines as they
/// come (a task reads the body into the channel until the stream ends or the watch is dropped).
#[derive(Debug)]
pub struct OpenWatch {
    /// The HTTP status.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// One item per line of the body; an `Err` when reading failed, then nothing more.
    pub lines: mpsc::UnboundedReceiver<Result<Bytes, String>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        // Dropping the reader drops the body, which closes the connection: the server ends the
        // watch.
        self.reader.abort();
    }
}

/// An HTTPS client bound to one server.
#[derive(Clone)]
pub struct Client {
    inner: HyperClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    base: String,
}

impl Client {
    /// A client of the server at `base` (`https://127.0.0.1:port`) whose certificate `ca_pem`
    /// signed.
    pub fn new(base: &str, ca_pem: &str) -> Result<Client, Error> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| Error::Setup(format!("the server's CA: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| Error::Setup(format!("the server's CA: {e}")))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Setup(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .build();
        Ok(Client {
            inner: HyperClient::builder(TokioExecutor::new()).build(connector),
            base: base.trim_end_matches('/').to_string(),
        })
    }

    /// The server's `host:port`, which kube-apiserver writes into discovery.
    pub fn authority(&self) -> &str {
        self.base
            .split_once("://")
            .map_or(self.base.as_str(), |(_, rest)| rest)
    }

    /// Sends `request` and reads the whole answer.
    pub async fn send(&self, request: &Outgoing) -> Result<Answer, Error> {
        let exchange = async {
            let response = self.start(request).await?;
            let (parts, body) = response.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| self.failed(request, e))?
                .to_bytes();
            Ok(Answer {
                status: parts.status.as_u16(),
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| {
                self.failed(
                    request,
                    format!("no whole answer in {} s", REQUEST_TIMEOUT.as_secs()),
                )
            })?
    }

    /// Sends a watch `request` and returns once its headers are in; its body is read by a task
    /// of its own into [`OpenWatch::lines`].
    pub async fn open_watch(&self, request: &Outgoing) -> Result<OpenWatch, Error> {
        let response = tokio::time::timeout(REQUEST_TIMEOUT, self.start(request))
            .await
            .map_err(|_| self.failed(request, "no answer's headers"))??;
        let (parts, body) = response.into_parts();
        let (tx, lines) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_lines(body, tx));
        Ok(OpenWatch {
            status: parts.status.as_u16(),
            headers: parts.headers,
            lines,
            reader,
        })
    }

    async fn start(&self, request: &Outgoing) -> Result<http::Response<Incoming>, Error> {
        let mut builder = Request::builder()
            .method(request.method.clone())
            .uri(format!("{}{}", self.base, request.path))
            .header("user-agent", USER_AGENT)
            .header("authorization", format!("Bearer {}", request.token));
        for (name, value) in &request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let built = builder
            .body(Full::new(request.body.clone()))
            .map_err(|e| self.failed(request, e))?;
        self.inner
            .request(built)
            .await
            .map_err(|e| self.failed(request, e))
    }

    fn failed(&self, request: &Outgoing, why: impl std::fmt::Display) -> Error {
        Error::Request {
            request: format!("{} {}{}", request.method, self.base, request.path),
            why: why.to_string(),
        }
    }
}

/// Reads `body` and sends each line (without its newline) to `tx`, then any unterminated rest.
async fn read_lines(mut body: Incoming, tx: mpsc::UnboundedSender<Result<Bytes, String>>) {
    let mut pending: Vec<u8> = Vec::new();
    loop {
        match body.frame().await {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                pending.extend_from_slice(&data);
                while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).take(end).collect();
                    if !line.is_empty() && tx.send(Ok(Bytes::from(line))).is_err() {
                        return;
                    }
                }
            }
            Some(Err(e)) => {
                let _ = tx.send(Err(e.to_string()));
                return;
            }
            None => {
                if !pending.is_empty() {
                    let _ = tx.send(Ok(Bytes::from(pending)));
                }
                return;
            }
        }
    }
}
