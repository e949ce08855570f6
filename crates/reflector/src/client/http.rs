//! [`Client`]: the HTTP client on hyper 1.x — TLS by rustls (ring), HTTP/1.1 or HTTP/2 chosen by
//! ALPN, pooled connections, HTTP/2 keep-alive pings, connect and request timeouts (on watches,
//! only until the response head), HTTP proxies (`proxy.rs`). HTTP/1.1 watches read on a dedicated
//! connection they drive themselves ([`WatchBody`]). Bodies read whole ask for gzip, as client-go
//! does, and are decompressed as they arrive (`content_encoding.rs`); watches never do.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{
    ACCEPT, ACCEPT_ENCODING, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, PROXY_AUTHORIZATION,
    RETRY_AFTER, USER_AGENT,
};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Empty, Full};
use hyper::body::Incoming;
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::connect::{Connection as _, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::ServerName;

use super::auth::Authenticator;
use super::config::{ClusterConfig, Credentials, Impersonate};
use super::content_encoding::{read_gzip_body, ContentCoding};
use super::error::{ClientError, ConfigError};
use super::proxy::{describe_route, forward_authorization, ProxyConnector, ProxySettings};
use super::rate_limit::{RateLimit, TokenBucket};
use super::tls::{tls_config, tls_err};
use super::watch_body::{send_on_dedicated_http1, WatchBody};
use crate::wire::representation::Representation;
use crate::wire::status::Status;

/// A check run right before a write is sent ([`Api::with_write_check`](crate::Api::with_write_check)).
pub type WriteCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

type Connector = HttpsConnector<ProxyConnector>;
type HyperClient = hyper_util::client::legacy::Client<Connector, Full<Bytes>>;

/// The connection pool, made again when an exec plugin's client certificate changes (so that no
/// request goes out on a connection that presents the old one).
struct Pool {
    client: HyperClient,
    /// The exec client certificate's version the pool's connections present.
    cert_version: u64,
}

/// A client for one API server. Cheap to clone (connections are pooled and shared).
#[derive(Clone)]
pub struct Client {
    pool: Arc<parking_lot::Mutex<Pool>>,
    /// How `pool` is built.
    builder: Arc<hyper_util::client::legacy::Builder>,
    /// The pool's connector, also used to open dedicated watch connections.
    connector: Connector,
    /// Set once the server answered over HTTP/2 (by ALPN or prior knowledge): watches then share
    /// the pool's multiplexed connection instead of opening their own.
    http2: Arc<AtomicBool>,
    base: String,
    auth: Arc<Authenticator>,
    request_timeout: Option<Duration>,
    /// Ask for gzip on requests whose body is read whole ([`ClusterConfig::compression`]).
    compression: bool,
    user_agent: http::HeaderValue,
    /// `Impersonate-*` headers, sent with every request.
    impersonate: Arc<http::HeaderMap>,
    /// `Proxy-Authorization` of every request, when they go to a forwarding proxy that wants it.
    proxy_authorization: Option<http::HeaderValue>,
    /// Shared by every clone: requests other than watches, and watches.
    requests: Option<Arc<TokenBucket>>,
    watches: Option<Arc<TokenBucket>>,
}

/// A watch's response once its head arrived ([`Client::watch`]): the body to read the events
/// from, and the `Content-Type` the server chose for them.
#[derive(Debug)]
pub struct WatchResponse {
    /// The streaming body: JSON lines, or length-prefixed protobuf frames.
    pub body: WatchBody,
    /// The response's `Content-Type`, if it named one: `application/json`, or
    /// `application/vnd.kubernetes.protobuf;stream=watch` for a protobuf stream.
    pub content_type: Option<String>,
}

/// Default bound on one response body read whole (a list page): 1 GiB. A list larger than that in
/// one answer (an unpaginated list of a very large resource) needs
/// [`HttpListerWatcher::max_list_page_bytes`](crate::HttpListerWatcher::max_list_page_bytes).
pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 30;

/// Bound on an error response's body: a `Status` is a few hundred bytes.
const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// The `Accept` header of requests that name none: the objects as they are.
const JSON: &str = Representation::Object.list_accept();

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.base)
            .finish()
    }
}

/// A credential for a plain `http://` server travels in clear text to anyone on the path: said
/// once per client (the one client every informer and writer of a cluster shares), naming the
/// server and the kind of credential, never its value. Not refused: a server reached through
/// `kubectl proxy` or a sidecar on loopback is plain HTTP on purpose.
fn warn_if_sent_in_clear(config: &ClusterConfig, server: &str) {
    if config.server.scheme() != "http" {
        return;
    }
    let credential = match &config.credentials {
        Credentials::None => return,
        Credentials::Token(_) | Credentials::TokenFile(_) => "a bearer token",
        Credentials::Basic { .. } => "a password (basic authentication)",
        Credentials::Exec(_) => "the exec plugin's bearer token",
        Credentials::Oidc(_) => "an OIDC id token as a bearer token",
    };
    tracing::warn!(
        %server,
        "{credential} is configured for a plain http:// server and will be sent in clear text \
         on every request to {server}; use https://"
    );
}

impl Client {
    /// A client for `config`'s server. A bearer token or a password configured for a plain
    /// `http://` server is sent all the same, with a warning logged once per client.
    pub fn new(config: &ClusterConfig) -> Result<Self, ConfigError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(config.connect_timeout);
        http.set_keepalive(config.tcp_keepalive);
        let mut base = config.server.as_str().trim_end_matches('/').to_string();
        if config.server.query().is_some() {
            return Err(ConfigError::Url {
                url: base,
                reason: "the server URL must not have a query".into(),
            });
        }
        base.shrink_to_fit();
        warn_if_sent_in_clear(config, &base);
        let server: http::Uri =
            base.parse()
                .map_err(|e: http::uri::InvalidUri| ConfigError::Url {
                    url: base.clone(),
                    reason: e.to_string(),
                })?;
        let proxies = Arc::new(ProxySettings::from_process(&config.proxy)?);
        if let Some(proxy) = describe_route(&proxies, &server) {
            tracing::debug!(server = %base, %proxy, "connecting through a proxy");
        }
        let proxy_authorization =
            forward_authorization(&proxies, &server, config.http2_prior_knowledge);
        let user_agent =
            http::HeaderValue::from_str(&config.user_agent).map_err(|_| ConfigError::Field {
                field: "user_agent".into(),
                reason: "not a valid HTTP header value".into(),
            })?;
        // An OIDC refresh goes where the API server's requests go: through the same proxy.
        let auth = Authenticator::for_config(config, proxies.clone(), &user_agent)?;
        let http = ProxyConnector::new(
            http,
            proxies,
            config.http2_prior_knowledge,
            config.connect_timeout,
        );
        let tls = tls_config(config, auth.client_cert_slot())?;
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        let builder = match &config.tls_server_name {
            Some(name) => {
                let name = ServerName::try_from(name.clone())
                    .map_err(|e| tls_err("tls-server-name", e))?;
                builder.with_server_name_resolver(FixedServerNameResolver::new(name))
            }
            None => builder,
        };
        let connector = builder.enable_http1().enable_http2().wrap_connector(http);
        let mut b = hyper_util::client::legacy::Client::builder(TokioExecutor::new());
        b.timer(TokioTimer::new()).pool_timer(TokioTimer::new());
        if let Some(ka) = config.keep_alive_interval {
            b.http2_keep_alive_interval(ka)
                .http2_keep_alive_timeout(ka)
                .http2_keep_alive_while_idle(true);
        }
        if config.http2_prior_knowledge {
            b.http2_only(true);
        }
        let pool = Pool {
            client: b.build(connector.clone()),
            cert_version: 0,
        };
        Ok(Client {
            pool: Arc::new(parking_lot::Mutex::new(pool)),
            builder: Arc::new(b),
            connector,
            http2: Arc::new(AtomicBool::new(config.http2_prior_knowledge)),
            base,
            auth: Arc::new(auth),
            impersonate: Arc::new(impersonation_headers(config.impersonate.as_ref())?),
            request_timeout: config.request_timeout,
            compression: config.compression,
            user_agent,
            proxy_authorization,
            requests: config.rate_limit.map(|l| Arc::new(TokenBucket::new(l))),
            watches: config
                .watch_rate_limit
                .map(|l| Arc::new(TokenBucket::new(l))),
        })
    }

    /// This client with a rate limit of its own for requests other than watches (`None`: no
    /// limit): the connections, credentials and watch limit stay shared with `self`, the
    /// request budget does not. Give one to a part whose few requests must not wait behind a
    /// storm of others (a shard ring's lease renewals behind a controller's reconciles).
    ///
    /// ```
    /// use reflector::{Client, ClusterConfig, RateLimit};
    /// let client = Client::new(&ClusterConfig::new("https://10.0.0.1:6443")?)?;
    /// let leases = client.with_rate_limit(Some(RateLimit::new(10.0, 20)));
    /// # let _ = leases;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_rate_limit(&self, limit: Option<RateLimit>) -> Client {
        Client {
            requests: limit.map(|l| Arc::new(TokenBucket::new(l))),
            ..self.clone()
        }
    }

    /// Sends `GET path_and_query` and returns the response head once it arrives (any status),
    /// after waiting for the client's rate limiter.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the request (its connection is closed or returned
    /// to the pool); nothing was changed on the server.
    pub async fn send(&self, path_and_query: &str) -> Result<Response<Incoming>, ClientError> {
        self.send_accepting(path_and_query, JSON).await
    }

    /// [`send`](Self::send) with this `Accept` header (for instance a [`Representation`]'s).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the request (its connection is closed or returned
    /// to the pool); nothing was changed on the server.
    pub async fn send_accepting(
        &self,
        path_and_query: &str,
        accept: &str,
    ) -> Result<Response<Incoming>, ClientError> {
        if let Some(bucket) = &self.requests {
            bucket.acquire(path_and_query).await;
        }
        self.send_now(path_and_query, accept, false).await
    }

    /// [`send_accepting`](Self::send_accepting) without the rate limiter (the caller has waited
    /// for its own). A 401 to a credential that can be renewed (exec plugin, OIDC) renews it and
    /// sends once more. `gzip`: say `Accept-Encoding: gzip` (only where the body is read whole
    /// and decoded).
    async fn send_now(
        &self,
        path_and_query: &str,
        accept: &str,
        gzip: bool,
    ) -> Result<Response<Incoming>, ClientError> {
        self.send_body_now(Method::GET, path_and_query, accept, gzip, None, None)
            .await
    }

    /// [`send_now`](Self::send_now) with any method and, with `body`, its content type and
    /// bytes (sent again as they are if a 401 renews the credential).
    async fn send_body_now(
        &self,
        method: Method,
        path_and_query: &str,
        accept: &str,
        gzip: bool,
        body: Option<(&str, &Bytes)>,
        check: Option<&WriteCheck>,
    ) -> Result<Response<Incoming>, ClientError> {
        let uri = format!("{}{}", self.base, path_and_query);
        let mut retried = false;
        loop {
            // Right before each send (a renewal before a re-send may have taken a while).
            if let Some(check) = check {
                check().map_err(|reason| ClientError::WriteRefused {
                    what: format!("{method} {path_and_query}"),
                    reason,
                })?;
            }
            let (head, generation) = self
                .request_head(method.clone(), &uri, accept, gzip)
                .await?;
            let head = match body {
                Some((content_type, _)) => head.header(CONTENT_TYPE, content_type),
                None => head,
            };
            let bytes = body.map(|(_, b)| b.clone()).unwrap_or_default();
            let req = self.finish_request(head, Full::new(bytes), &uri)?;
            let resp = self
                .pooled()
                .request(req)
                .await
                .map_err(|e| ClientError::transport(format!("{method} {uri}"), Box::new(e)))?;
            if resp.version() == http::Version::HTTP_2 {
                self.http2.store(true, Ordering::Relaxed);
            }
            if self.renew_after(&resp, generation, &mut retried) {
                continue;
            }
            return Ok(resp);
        }
    }

    /// After `resp` to a request sent with credential `generation`: whether to send it again,
    /// once, because it was a 401 and the credential is being renewed.
    fn renew_after<B>(&self, resp: &Response<B>, generation: u64, retried: &mut bool) -> bool {
        if resp.status() != StatusCode::UNAUTHORIZED || *retried {
            return false;
        }
        *retried = true;
        let again = self.auth.invalidate(generation);
        if again {
            tracing::info!(server = %self.base, "401 Unauthorized: renewing the credential and sending again");
        }
        again
    }

    /// The pool, made again first if an exec plugin has replaced the client certificate.
    fn pooled(&self) -> HyperClient {
        let mut pool = self.pool.lock();
        if let Some(slot) = self.auth.client_cert_slot() {
            let version = slot.version();
            if version != pool.cert_version {
                pool.client = self.builder.build(self.connector.clone());
                pool.cert_version = version;
            }
        }
        pool.client.clone()
    }

    /// The head of a request of `target` (absolute for the pool and for a forwarding proxy,
    /// origin-form on a dedicated connection to the server), with the credentials' current
    /// `Authorization` header, `accept` as the `Accept` header and, if `gzip`, `Accept-Encoding:
    /// gzip`. Also returns the credential's generation. [`finish_request`](Self::finish_request)
    /// adds the body and the impersonation headers.
    async fn request_head(
        &self,
        method: Method,
        target: &str,
        accept: &str,
        gzip: bool,
    ) -> Result<(http::request::Builder, u64), ClientError> {
        let credential = self.auth.credential().await?;
        let mut req = Request::builder()
            .method(method)
            .uri(target)
            .header(ACCEPT, accept)
            .header(USER_AGENT, self.user_agent.clone());
        if gzip {
            req = req.header(ACCEPT_ENCODING, "gzip");
        }
        if let Some(h) = &self.proxy_authorization {
            req = req.header(PROXY_AUTHORIZATION, h.clone());
        }
        if let Some(h) = credential.header {
            req = req.header(AUTHORIZATION, h);
        }
        Ok((req, credential.generation))
    }

    /// The request of `head` with `body` and the impersonation headers; `uri` names it in errors.
    fn finish_request<B>(
        &self,
        head: http::request::Builder,
        body: B,
        uri: &str,
    ) -> Result<Request<B>, ClientError> {
        let mut req = head.body(body).map_err(|e| {
            ClientError::transport(format!("building request for {uri}"), Box::new(e))
        })?;
        for (name, value) in self.impersonate.iter() {
            req.headers_mut().append(name, value.clone());
        }
        Ok(req)
    }

    /// Opens a watch (`GET path_and_query` whose body streams) asking for `accept` (JSON,
    /// `application/json`, or a [`Representation`]'s or protobuf's media type): returns the
    /// response once its head arrives, within the request timeout, as the body to read events
    /// from and the `Content-Type` the server chose (a protobuf stream, `…;stream=watch`, or JSON
    /// lines, whatever was asked for). An error status is read and returned as
    /// [`ClientError::Api`]. The body itself has no timeout (the server ends a watch after its
    /// `timeoutSeconds`). A watch never asks for compression (kube-apiserver never compresses
    /// one); a stream that comes encoded anyway is a transport error.
    ///
    /// Over HTTP/1.1 the watch gets a connection of its own that its body drives as it is read
    /// (see [`WatchBody`] for why); over HTTP/2 it shares the pool's multiplexed connection. The
    /// protocol is learned from the server's answers: a dedicated connection whose ALPN
    /// negotiation picks HTTP/2 is dropped and the watch goes to the pool, as do all later ones.
    ///
    /// ```no_run
    /// use http_body_util::BodyExt;
    /// # async fn f(client: reflector::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// let watch = client
    ///     .watch("/api/v1/namespaces/default/pods?watch=true", "application/json")
    ///     .await?;
    /// let mut body = watch.body;
    /// while let Some(frame) = body.frame().await {
    ///     let bytes = frame?.into_data().unwrap_or_default();
    ///     println!("{} bytes of JSON lines", bytes.len());
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// [`Representation`]: crate::Representation
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the watch request; nothing was changed.
    pub async fn watch(
        &self,
        path_and_query: &str,
        accept: &str,
    ) -> Result<WatchResponse, ClientError> {
        let (body, content_type) = self.open_watch(path_and_query, accept).await?;
        Ok(WatchResponse { body, content_type })
    }

    /// The old name of [`watch`](Self::watch) with an `Accept` header, answering the body only.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`watch`](Self::watch).
    #[deprecated(
        since = "0.1.0",
        note = "use `watch(path, accept)`, whose answer's `body` this is"
    )]
    pub async fn watch_accepting(
        &self,
        path_and_query: &str,
        accept: &str,
    ) -> Result<WatchBody, ClientError> {
        self.open_watch(path_and_query, accept)
            .await
            .map(|(body, _)| body)
    }

    /// The old name of [`watch`](Self::watch), answering a pair.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`watch`](Self::watch).
    #[deprecated(
        since = "0.1.0",
        note = "use `watch(path, accept)`, whose answer has `body` and `content_type`"
    )]
    pub async fn watch_negotiated(
        &self,
        path_and_query: &str,
        accept: &str,
    ) -> Result<(WatchBody, Option<String>), ClientError> {
        self.open_watch(path_and_query, accept).await
    }

    /// [`watch`](Self::watch)'s work: the body and the `Content-Type`.
    async fn open_watch(
        &self,
        path_and_query: &str,
        accept: &str,
    ) -> Result<(WatchBody, Option<String>), ClientError> {
        if let Some(bucket) = &self.watches {
            bucket.acquire(path_and_query).await;
        }
        let resp = self
            .with_timeout(async {
                let mut retried = false;
                while !self.http2.load(Ordering::Relaxed) {
                    match self
                        .watch_on_dedicated_connection(path_and_query, accept)
                        .await?
                    {
                        Some((resp, generation)) => {
                            if self.renew_after(&resp, generation, &mut retried) {
                                continue;
                            }
                            return Ok(resp);
                        }
                        None => break,
                    }
                }
                Ok::<_, ClientError>(
                    self.send_now(path_and_query, accept, false)
                        .await?
                        .map(WatchBody::without_driver),
                )
            })
            .await??;
        if resp.status().is_success() {
            if ContentCoding::of(resp.headers(), path_and_query)? != ContentCoding::Identity {
                return Err(ClientError::transport(
                    format!("watching {path_and_query}"),
                    "the server compressed a watch stream, which was not asked for".into(),
                ));
            }
            let content_type = content_type_of(resp.headers());
            return Ok((resp.into_body(), content_type));
        }
        Err(self.error_response(resp, accept).await)
    }

    /// The error a non-success response to a request sent with `accept` means: its body read
    /// (bounded in size and time, and decompressed within the same bound if gzip) as a `Status`,
    /// or a status made from the HTTP code when the body is not one; a 406 is
    /// [`ClientError::NotAcceptable`], naming `accept`.
    async fn error_response<B>(&self, resp: Response<B>, accept: &str) -> ClientError
    where
        B: hyper::body::Body<Data = Bytes, Error = hyper::Error> + Unpin,
    {
        let code = resp.status().as_u16();
        // `Retry-After: <seconds>` (a 429's or a 503's); the HTTP-date form is not used by
        // kube-apiserver and is ignored.
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u32>().ok());
        // An encoding we cannot read leaves the code alone to say what happened.
        let encoding = ContentCoding::of(resp.headers(), "error body").ok();
        let read = async {
            match encoding {
                Some(encoding) => {
                    read_body(
                        resp.into_body(),
                        encoding,
                        None,
                        MAX_ERROR_BODY_BYTES,
                        "error body",
                    )
                    .await
                }
                None => Ok(Bytes::new()),
            }
        };
        let body = match self.with_timeout(read).await {
            Ok(Ok(body)) => body,
            // The code alone still says what happened.
            Ok(Err(_)) | Err(_) => Bytes::new(),
        };
        let mut status = Status::from_response(code, &body);
        if let Some(seconds) = retry_after {
            let details = status.details.get_or_insert_with(Default::default);
            details.retry_after_seconds.get_or_insert(seconds);
        }
        if code == StatusCode::NOT_ACCEPTABLE.as_u16() {
            return ClientError::NotAcceptable {
                accept: accept.to_string(),
                status: Box::new(status),
            };
        }
        ClientError::api(status)
    }

    /// Sends the watch on a new HTTP/1.1 connection; `None` when the server picked HTTP/2. Also
    /// returns the credential's generation.
    async fn watch_on_dedicated_connection(
        &self,
        path_and_query: &str,
        accept: &str,
    ) -> Result<Option<(Response<WatchBody>, u64)>, ClientError> {
        use tower_service::Service as _;
        let full = format!("{}{}", self.base, path_and_query);
        let uri: http::Uri = full.parse().map_err(|e| {
            ClientError::transport(format!("building request for {full}"), Box::new(e))
        })?;
        let connect_err = |e: Box<dyn std::error::Error + Send + Sync>| {
            ClientError::transport(format!("GET {full}"), e)
        };
        let target = uri.path_and_query().map_or("/", |p| p.as_str());
        // The credential first: an exec plugin may return the client certificate the TLS
        // handshake is to present.
        let (head, generation) = self
            .request_head(Method::GET, target, accept, false)
            .await?;
        let mut req = self.finish_request(head, Empty::new(), &full)?;
        let mut connector = self.connector.clone();
        futures::future::poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(connect_err)?;
        let io = connector.call(uri.clone()).await.map_err(connect_err)?;
        let connected = io.connected();
        if connected.is_negotiated_h2() {
            self.http2.store(true, Ordering::Relaxed);
            return Ok(None);
        }
        // A forwarding proxy needs to be told where the request goes: absolute form.
        if connected.is_proxied() {
            *req.uri_mut() = uri.clone();
        }
        if let Some(authority) = uri.authority() {
            let host = http::HeaderValue::from_str(authority.as_str()).map_err(|e| {
                ClientError::transport(format!("building request for {full}"), Box::new(e))
            })?;
            req.headers_mut().insert(http::header::HOST, host);
        }
        let resp = send_on_dedicated_http1(io, req)
            .await
            .map_err(|e| ClientError::transport(format!("GET {full}"), Box::new(e)))?;
        Ok(Some((resp, generation)))
    }

    /// Sends `GET path_and_query` and returns a successful response's head; an error status is
    /// read (bounded by the request timeout) and returned as [`ClientError::Api`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the request (its connection is closed or returned
    /// to the pool); nothing was changed on the server.
    pub async fn get_stream(
        &self,
        path_and_query: &str,
    ) -> Result<Response<Incoming>, ClientError> {
        let resp = self.send(path_and_query).await?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        Err(self.error_response(resp, JSON).await)
    }

    /// `GET path_and_query` and the whole body, within the request timeout and at most
    /// [`DEFAULT_MAX_BODY_BYTES`] (decompressed, see [`get_bytes_within`](Self::get_bytes_within)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the request (its connection is closed or returned
    /// to the pool); nothing was changed on the server.
    pub async fn get_bytes(&self, path_and_query: &str) -> Result<Bytes, ClientError> {
        self.get_bytes_within(path_and_query, DEFAULT_MAX_BODY_BYTES)
            .await
    }

    /// `GET path_and_query` and the whole body, within the request timeout; a body longer than
    /// `max_bytes` (announced by its `Content-Length` or found while reading) is
    /// [`ClientError::BodyTooLarge`], and reading stops there.
    ///
    /// With [`ClusterConfig::compression`] (the default) the request says `Accept-Encoding:
    /// gzip`, as client-go's does. A gzip body (`Content-Encoding: gzip`, whether asked for or
    /// not) is decompressed frame by frame as it arrives, never held compressed; `max_bytes`
    /// bounds the decompressed body, and inflating stops as soon as it is crossed. A corrupt or
    /// truncated gzip stream, or an encoding other than gzip and identity, is
    /// [`ClientError::Transport`] naming the request.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the request (its connection is closed or returned
    /// to the pool); nothing was changed on the server.
    pub async fn get_bytes_within(
        &self,
        path_and_query: &str,
        max_bytes: usize,
    ) -> Result<Bytes, ClientError> {
        self.get_bytes_accepting(path_and_query, JSON, max_bytes)
            .await
    }

    /// [`get_bytes_within`](Self::get_bytes_within) with this `Accept` header (for instance a
    /// [`Representation`]'s): a server that cannot answer in any media type it lists answers
    /// 406, [`ClientError::NotAcceptable`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the request (its connection is closed or returned
    /// to the pool); nothing was changed on the server.
    pub async fn get_bytes_accepting(
        &self,
        path_and_query: &str,
        accept: &str,
        max_bytes: usize,
    ) -> Result<Bytes, ClientError> {
        self.get_body_accepting(path_and_query, accept, max_bytes)
            .await
            .map(|(body, _)| body)
    }

    /// [`get_bytes_accepting`](Self::get_bytes_accepting), and the response's `Content-Type`:
    /// what the body is to be decoded as (a server may answer JSON to a protobuf `Accept`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the request (its connection is closed or returned
    /// to the pool); nothing was changed on the server.
    pub async fn get_body_accepting(
        &self,
        path_and_query: &str,
        accept: &str,
        max_bytes: usize,
    ) -> Result<(Bytes, Option<String>), ClientError> {
        if let Some(bucket) = &self.requests {
            // Outside the request timeout: waiting for our own limiter is not the server's delay.
            bucket.acquire(path_and_query).await;
        }
        self.with_timeout(async {
            let resp = self
                .send_now(path_and_query, accept, self.compression)
                .await?;
            if !resp.status().is_success() {
                return Err(self.error_response(resp, accept).await);
            }
            let encoding = ContentCoding::of(resp.headers(), path_and_query)?;
            let len = resp
                .headers()
                .get(CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<usize>().ok());
            let content_type = content_type_of(resp.headers());
            if resp.status() == StatusCode::NO_CONTENT {
                return Ok((Bytes::new(), content_type));
            }
            read_body(resp.into_body(), encoding, len, max_bytes, path_and_query)
                .await
                .map(|body| (body, content_type))
        })
        .await?
    }

    /// Sends `method path_and_query` with `body` (its content type and bytes, if any) and returns
    /// a successful response's whole body (at most `max_bytes`, gzip decompressed if the server
    /// compressed it), within the request timeout and after the client's rate limiter: the
    /// request under every verb of [`Api`](crate::Api). An error status is read and returned
    /// as the [`ClientError`] its `Status` means ([`ClientError::Conflict`],
    /// [`ClientError::NotFound`], …, with a `Retry-After` header's seconds in
    /// [`StatusDetails::retry_after_seconds`](crate::StatusDetails::retry_after_seconds)).
    ///
    /// A write is sent once: a transport failure or a timeout is returned, never retried here,
    /// since the server may have applied the write (only a 401 to a renewable credential is sent
    /// again, the server having refused it).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe for reads. For a write (any verb but GET): not cancel safe, as a write dropped
    /// after it was sent may still be applied by the server, and its answer is lost (the client never
    /// sends it again).
    pub async fn request_bytes(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(&str, Bytes)>,
        max_bytes: usize,
    ) -> Result<Bytes, ClientError> {
        self.request_bytes_checked(method, path_and_query, body, max_bytes, None)
            .await
    }

    /// [`request_bytes`](Self::request_bytes), with `check` run after the rate limiter's wait,
    /// right before the request is sent (and before a re-send): a refusal is
    /// [`ClientError::WriteRefused`] and nothing is sent.
    pub(crate) async fn request_bytes_checked(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(&str, Bytes)>,
        max_bytes: usize,
        check: Option<&WriteCheck>,
    ) -> Result<Bytes, ClientError> {
        self.request_body_checked(method, path_and_query, JSON, body, max_bytes, check)
            .await
            .map(|(bytes, _)| bytes)
    }

    /// [`request_bytes_checked`](Self::request_bytes_checked) with this `Accept` header, and the
    /// answer's `Content-Type` (what its body is to be decoded as).
    pub(crate) async fn request_body_checked(
        &self,
        method: Method,
        path_and_query: &str,
        accept: &str,
        body: Option<(&str, Bytes)>,
        max_bytes: usize,
        check: Option<&WriteCheck>,
    ) -> Result<(Bytes, Option<String>), ClientError> {
        if let Some(bucket) = &self.requests {
            bucket.acquire(path_and_query).await;
        }
        let what = format!("{method} {path_and_query}");
        self.with_timeout(async {
            let gzip = self.compression;
            let body = body.as_ref().map(|(t, b)| (*t, b));
            let resp = self
                .send_body_now(method.clone(), path_and_query, accept, gzip, body, check)
                .await?;
            if !resp.status().is_success() {
                return Err(self.error_response(resp, accept).await);
            }
            let encoding = ContentCoding::of(resp.headers(), &what)?;
            let len = resp
                .headers()
                .get(CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<usize>().ok());
            let content_type = content_type_of(resp.headers());
            read_body(resp.into_body(), encoding, len, max_bytes, &what)
                .await
                .map(|bytes| (bytes, content_type))
        })
        .await?
    }

    async fn with_timeout<T>(
        &self,
        fut: impl std::future::Future<Output = T>,
    ) -> Result<T, ClientError> {
        match self.request_timeout {
            Some(t) => tokio::time::timeout(t, fut)
                .await
                .map_err(|_| ClientError::Timeout(t)),
            None => Ok(fut.await),
        }
    }
}

/// The `Impersonate-*` headers of `impersonate`. Extra keys are percent-encoded as client-go
/// does, since header names allow fewer characters than keys (`example.com/scopes` is fine,
/// `a b` is not).
fn impersonation_headers(
    impersonate: Option<&Impersonate>,
) -> Result<http::HeaderMap, ConfigError> {
    let mut headers = http::HeaderMap::new();
    let Some(imp) = impersonate else {
        return Ok(headers);
    };
    let bad = |what: &str| ConfigError::Field {
        field: format!("impersonate.{what}"),
        reason: "not a valid HTTP header value".into(),
    };
    let value = |v: &str, what: &str| http::HeaderValue::from_str(v).map_err(|_| bad(what));
    headers.insert("impersonate-user", value(&imp.user, "user")?);
    if let Some(uid) = &imp.uid {
        headers.insert("impersonate-uid", value(uid, "uid")?);
    }
    for g in &imp.groups {
        headers.append("impersonate-group", value(g, "groups")?);
    }
    for (key, values) in &imp.extra {
        let mut name = String::from("impersonate-extra-");
        for b in key.bytes() {
            // RFC 7230 token characters pass; everything else (and `%`) is percent-encoded.
            if b.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&b) {
                name.push(b.to_ascii_lowercase() as char);
            } else {
                name.push_str(&format!("%{b:02X}"));
            }
        }
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("extra"))?;
        for v in values {
            headers.append(name.clone(), value(v, "extra")?);
        }
    }
    Ok(headers)
}

/// Reads a body into one buffer, dropping each frame once copied (the body is held once) or,
/// for gzip, once inflated. More than `max` bytes, announced (`len`, the `Content-Length`) or
/// read (decompressed), is an error; `what` names the request in errors.
async fn read_body<B>(
    mut body: B,
    encoding: ContentCoding,
    len: Option<usize>,
    max: usize,
    what: &str,
) -> Result<Bytes, ClientError>
where
    B: hyper::body::Body<Data = Bytes, Error = hyper::Error> + Unpin,
{
    if encoding == ContentCoding::Gzip {
        return read_gzip_body(body, len, max, what).await;
    }
    let too_large = || ClientError::BodyTooLarge {
        what: what.to_string(),
        limit: max,
    };
    if len.is_some_and(|len| len > max) {
        return Err(too_large());
    }
    let read_err = |e| ClientError::transport(format!("reading the body of {what}"), Box::new(e));
    let first = match body.frame().await {
        None => return Ok(Bytes::new()),
        Some(f) => f.map_err(read_err)?,
    };
    let first = first.into_data().unwrap_or_default();
    if first.len() > max {
        return Err(too_large());
    }
    if body.is_end_stream() {
        return Ok(first);
    }
    let capacity = len.unwrap_or(first.len() * 2).max(first.len()).min(max);
    let mut buf = BytesMut::with_capacity(capacity);
    buf.extend_from_slice(&first);
    drop(first);
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(read_err)?.into_data() {
            if data.len() > max - buf.len() {
                return Err(too_large());
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

/// A response's `Content-Type`, when it is text.
fn content_type_of(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_with_a_rate_limit_of_its_own_shares_everything_but_the_request_budget() {
        let config = ClusterConfig::new("https://10.0.0.1:6443").unwrap();
        let shared = Client::new(&config).unwrap();
        let own = shared.with_rate_limit(Some(RateLimit::new(10.0, 20)));
        let (Some(a), Some(b)) = (&shared.requests, &own.requests) else {
            panic!("both limit their requests");
        };
        assert!(!Arc::ptr_eq(a, b), "a budget of its own");
        let (Some(a), Some(b)) = (&shared.watches, &own.watches) else {
            panic!("both limit their watches");
        };
        assert!(Arc::ptr_eq(a, b), "the watch budget stays shared");
        assert!(
            Arc::ptr_eq(&shared.pool, &own.pool),
            "the connections stay shared"
        );
        assert!(
            Arc::ptr_eq(&shared.auth, &own.auth),
            "the credentials stay shared"
        );
        assert!(shared.with_rate_limit(None).requests.is_none());
    }
}
