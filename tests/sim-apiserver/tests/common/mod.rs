//! A plain HTTP client for the simulator's own tests (hyper, not the reflector).
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use sim_apiserver::SimServer;

/// A test client bound to one server.
#[derive(Clone)]
pub struct Client {
    inner: HyperClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    base: String,
    token: Option<String>,
}

/// A response with its body parsed as JSON.
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub version: Version,
    pub body: Value,
}

fn tls_config(ca_pem: Option<&str>, client_cert: Option<(&str, &str)>) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    if let Some(pem) = ca_pem {
        for c in rustls_pemfile::certs(&mut pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
    }
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    match client_cert {
        Some((cert, key)) => {
            let certs = rustls_pemfile::certs(&mut cert.as_bytes())
                .map(Result::unwrap)
                .collect();
            let key = rustls_pemfile::private_key(&mut key.as_bytes())
                .unwrap()
                .unwrap();
            b.with_client_auth_cert(certs, key).unwrap()
        }
        None => b.with_no_client_auth(),
    }
}

impl Client {
    /// A client for `sim` using its CA and token; HTTP/1.1 only unless `h2`.
    pub fn new(sim: &SimServer) -> Self {
        Self::with(sim, false, sim.token().map(str::to_string), false)
    }

    /// A plain-HTTP/1.1 client for a server at `base` (e.g. the binary's `url:` line).
    pub fn at(base: &str) -> Self {
        let conn = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(None, None))
            .https_or_http()
            .enable_http1()
            .build();
        Self {
            inner: HyperClient::builder(TokioExecutor::new()).build(conn),
            base: base.to_string(),
            token: None,
        }
    }

    /// Full control: `h2` (ALPN on TLS, prior knowledge on plain HTTP), token, client cert.
    pub fn with(sim: &SimServer, h2: bool, token: Option<String>, client_cert: bool) -> Self {
        let cc = if client_cert {
            let m = sim.tls_material().unwrap();
            Some((m.client_cert_pem.as_str(), m.client_key_pem.as_str()))
        } else {
            None
        };
        let cfg = tls_config(sim.ca_pem(), cc);
        let b = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(cfg)
            .https_or_http();
        let conn = if h2 {
            b.enable_http2().build()
        } else {
            b.enable_http1().build()
        };
        let mut cb = HyperClient::builder(TokioExecutor::new());
        if h2 {
            cb.http2_only(true);
        }
        Self {
            inner: cb.build(conn),
            base: sim.url(),
            token,
        }
    }

    /// Sends a request and returns the raw response.
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Value)>,
    ) -> hyper::Response<Incoming> {
        self.raw_with(method, path, body, &[]).await
    }

    /// [`raw`](Self::raw) with extra request headers.
    pub async fn raw_with(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Value)>,
        headers: &[(&str, &str)],
    ) -> hyper::Response<Incoming> {
        let mut b = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path));
        for (name, value) in headers {
            b = b.header(*name, *value);
        }
        if let Some(t) = &self.token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        let req = match body {
            Some((ct, v)) => b
                .header("content-type", ct)
                .body(Full::new(Bytes::from(v.to_string())))
                .unwrap(),
            None => b.body(Full::new(Bytes::new())).unwrap(),
        };
        tokio::time::timeout(Duration::from_secs(30), self.inner.request(req))
            .await
            .expect("request timed out")
            .expect("request failed")
    }

    /// Sends a request and reads the JSON body.
    pub async fn send(&self, method: Method, path: &str, body: Option<(&str, Value)>) -> Resp {
        Self::read(self.raw(method, path, body).await).await.0
    }

    /// GET with this `Accept` header; the body read as JSON, and its size in bytes.
    pub async fn get_accepting(&self, path: &str, accept: &str) -> (Resp, usize) {
        let r = self
            .raw_with(Method::GET, path, None, &[("accept", accept)])
            .await;
        Self::read(r).await
    }

    /// Opens a watch stream with this `Accept` header.
    pub async fn watch_accepting(&self, path: &str, accept: &str) -> Watch {
        let r = self
            .raw_with(Method::GET, path, None, &[("accept", accept)])
            .await;
        Watch {
            status: r.status(),
            headers: r.headers().clone(),
            body: r.into_body(),
            buf: Vec::new(),
            chunks: Vec::new(),
        }
    }

    pub async fn read(r: hyper::Response<Incoming>) -> (Resp, usize) {
        let status = r.status();
        let headers = r.headers().clone();
        let version = r.version();
        let bytes = r.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        let resp = Resp {
            status,
            headers,
            version,
            body,
        };
        (resp, bytes.len())
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Resp {
        self.send(Method::GET, path, None).await
    }

    /// POST JSON.
    pub async fn post(&self, path: &str, v: Value) -> Resp {
        self.send(Method::POST, path, Some(("application/json", v)))
            .await
    }

    /// Opens a watch stream.
    pub async fn watch(&self, path: &str) -> Watch {
        let r = self.raw(Method::GET, path, None).await;
        Watch {
            status: r.status(),
            headers: r.headers().clone(),
            body: r.into_body(),
            buf: Vec::new(),
            chunks: Vec::new(),
        }
    }
}

/// A watch stream being read line by line.
pub struct Watch {
    pub status: StatusCode,
    pub headers: HeaderMap,
    body: Incoming,
    buf: Vec<u8>,
    /// Sizes of the data frames received so far.
    pub chunks: Vec<usize>,
}

/// How reading a watch line ended.
#[derive(Debug)]
pub enum Read {
    /// A complete line.
    Line(String),
    /// The stream ended cleanly.
    End,
    /// The body failed (connection reset).
    Error(String),
}

impl Watch {
    /// The next raw line (bounded by a 30 s guard against hangs).
    pub async fn next_line(&mut self) -> Read {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return Read::Line(String::from_utf8(line[..line.len() - 1].to_vec()).unwrap());
            }
            let f = tokio::time::timeout(Duration::from_secs(30), self.body.frame())
                .await
                .expect("watch read timed out");
            match f {
                None => return Read::End,
                Some(Err(e)) => return Read::Error(e.to_string()),
                Some(Ok(frame)) => {
                    if let Ok(d) = frame.into_data() {
                        self.chunks.push(d.len());
                        self.buf.extend_from_slice(&d);
                    }
                }
            }
        }
    }

    /// The next event as JSON, or `None` at the end of the stream.
    pub async fn next(&mut self) -> Option<Value> {
        match self.next_line().await {
            Read::Line(l) => Some(serde_json::from_str(&l).expect("event is JSON")),
            Read::End => None,
            Read::Error(e) => panic!("watch body error: {e}"),
        }
    }

    /// The next event, asserting its type; returns its object.
    pub async fn expect(&mut self, etype: &str) -> Value {
        let e = self.next().await.expect("stream ended early");
        assert_eq!(e["type"], etype, "unexpected event {e}");
        e["object"].clone()
    }

    /// Reads until the end of the stream; returns the events.
    pub async fn rest(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await {
            out.push(e);
        }
        out
    }
}

/// A minimal pod.
pub fn pod(name: &str, labels: Value) -> Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    })
}

/// `metadata.resourceVersion` as a number.
pub fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .parse()
        .unwrap()
}

/// `metadata.name`.
pub fn name(v: &Value) -> &str {
    v["metadata"]["name"].as_str().unwrap()
}
