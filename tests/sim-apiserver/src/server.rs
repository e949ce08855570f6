//! The server: builder, listener (HTTP or HTTPS, HTTP/1.1 and HTTP/2), authentication, routing
//! and the object API for test code.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use parking_lot::RwLock;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::authz::{Attributes, Policy, Rule, Subject};
use crate::body::SimBody;
use crate::churn::{self, ChurnConfig, ChurnHandle};
use crate::compression::{accepts_gzip, gzip_response, DEFAULT_GZIP_MIN_BYTES};
use crate::discovery;
use crate::faults::{Faults, ListFault, RequestKind, REPEAT_CONTINUE_TOKEN};
use crate::list;
use crate::metrics::{CounterSnapshot, Counters};
use crate::openapi;
use crate::params::ListParams;
use crate::representation::{self, Target};
use crate::resources::{Registry, ResourceDef};
use crate::status::ApiError;
use crate::storage::{key_of, merge_patch, Storage};
use crate::tls::{TlsError, TlsMaterial};
use crate::users::{Directory, User, UserInfo};
use crate::watch::{self as watch_stream, WatchCtx};

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Binding or socket error.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// TLS setup error.
    #[error("tls: {0}")]
    Tls(#[from] TlsError),
    /// A client certificate was asked of a server that does not serve TLS.
    #[error("the server does not serve TLS, so it has no CA to sign a client certificate")]
    NotTls,
}

/// Builder for [`SimServer`]. Its `Debug` shows no token.
#[derive(Clone)]
pub struct SimServerBuilder {
    tls: bool,
    http2: bool,
    token: Option<String>,
    client_cert_auth: bool,
    max_log_events: usize,
    watch_buffer: usize,
    bookmark_interval: Duration,
    default_watch_timeout: Duration,
    watch_cache: bool,
    partial_object_metadata: bool,
    protobuf: bool,
    sharded_list_and_watch: bool,
    resources: Vec<ResourceDef>,
    readonly_tokens: Vec<String>,
    user_tokens: Vec<(String, String)>,
    users: Vec<User>,
    grants: Vec<(Subject, Rule)>,
    history_limit: usize,
    history_max_versions: usize,
    write_log_limit: usize,
    gzip: bool,
    gzip_min_bytes: usize,
}

impl std::fmt::Debug for SimServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let user_names: Vec<&str> = self.user_tokens.iter().map(|(_, u)| u.as_str()).collect();
        f.debug_struct("SimServerBuilder")
            .field("tls", &self.tls)
            .field("http2", &self.http2)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("client_cert_auth", &self.client_cert_auth)
            .field("users", &self.users)
            .field("user_tokens", &user_names)
            .field("readonly_tokens", &self.readonly_tokens.len())
            .field("grants", &self.grants)
            .field("resources", &self.resources.len())
            .finish_non_exhaustive()
    }
}

impl Default for SimServerBuilder {
    fn default() -> Self {
        Self {
            tls: false,
            http2: true,
            token: None,
            client_cert_auth: false,
            max_log_events: 10_000,
            watch_buffer: 1024,
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            watch_cache: true,
            partial_object_metadata: true,
            protobuf: true,
            sharded_list_and_watch: true,
            resources: Vec::new(),
            readonly_tokens: Vec::new(),
            user_tokens: Vec::new(),
            users: Vec::new(),
            grants: Vec::new(),
            history_limit: crate::storage::DEFAULT_HISTORY_LIMIT,
            history_max_versions: crate::storage::DEFAULT_HISTORY_MAX_VERSIONS,
            write_log_limit: crate::write_log::DEFAULT_WRITE_LOG_LIMIT,
            gzip: false,
            gzip_min_bytes: DEFAULT_GZIP_MIN_BYTES,
        }
    }
}

impl SimServerBuilder {
    /// Serve HTTPS with a generated CA (default: plain HTTP).
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Accept HTTP/2 (prior knowledge on plain HTTP, ALPN `h2` on TLS). Default on.
    pub fn http2(mut self, on: bool) -> Self {
        self.http2 = on;
        self
    }

    /// Require `Authorization: Bearer <token>` (401 otherwise).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Also accept a client certificate signed by the generated CA instead of the token.
    pub fn client_cert_auth(mut self, on: bool) -> Self {
        self.client_cert_auth = on;
        self
    }

    /// Keep at most this many events in the log (older ones are compacted). Default 10 000.
    pub fn max_log_events(mut self, n: usize) -> Self {
        self.max_log_events = n;
        self
    }

    /// Events buffered per watcher before it is ended as too slow. Default 1024.
    pub fn watch_buffer(mut self, n: usize) -> Self {
        self.watch_buffer = n;
        self
    }

    /// Interval between bookmarks on watches with `allowWatchBookmarks=true`. Default 60 s.
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.bookmark_interval = d;
        self
    }

    /// Watch timeout when the request has no `timeoutSeconds`. Default 30 min.
    pub fn default_watch_timeout(mut self, d: Duration) -> Self {
        self.default_watch_timeout = d;
        self
    }

    /// Behave as if a watch cache is enabled: lists at `resourceVersion=0` ignore `limit`.
    /// Default on; off makes every list paginate.
    pub fn watch_cache(mut self, on: bool) -> Self {
        self.watch_cache = on;
        self
    }

    /// Serve the metadata representation (`PartialObjectMetadata`, `PartialObjectMetadataList`)
    /// when the `Accept` header asks for it. Default on; off, the server behaves as one that
    /// does not know it (older or aggregated API servers): such ranges of the header are passed
    /// over, so a client that lists plain `application/json` after them gets whole objects, and
    /// one that does not gets 406.
    pub fn partial_object_metadata(mut self, on: bool) -> Self {
        self.partial_object_metadata = on;
        self
    }

    /// Speak Kubernetes' protobuf encoding for built-in kinds (see [`crate::protobuf`]). Default
    /// on; off, the server behaves as one that only speaks JSON (aggregated API servers): a
    /// protobuf `Accept` range is passed over (JSON if listed after it, else 406) and a protobuf
    /// body is 415.
    pub fn protobuf(mut self, on: bool) -> Self {
        self.protobuf = on;
        self
    }

    /// Serve server-side sharded lists and watches (the `shardSelector` parameter; see
    /// [`crate::shard_selector`]), standing for kube-apiserver's `ShardedListAndWatch` feature
    /// gate. Default on, as on the project's real kube-apiserver; off, the server behaves as one
    /// without the gate (or older): it ignores the parameter, so lists and watches carry every
    /// object and no list echoes `shardInfo`.
    pub fn sharded_list_and_watch(mut self, on: bool) -> Self {
        self.sharded_list_and_watch = on;
        self
    }

    /// Also accept this bearer token, for a user (named after the token) who may only read:
    /// its writes get 403 Forbidden.
    #[deprecated(
        note = "use `.user(User::new(name).token(token)).allow(Subject::user(name), Rule::read_only())`"
    )]
    pub fn readonly_token(mut self, token: impl Into<String>) -> Self {
        self.readonly_tokens.push(token.into());
        self
    }

    /// Also accept this bearer token, authenticating `user` with full access (several may be
    /// given: one identity per replica of a leader-elected controller). Per-user faults
    /// ([`Faults::partition_user`], [`Faults::slow_user`]) match on `user`.
    pub fn user_token(mut self, token: impl Into<String>, user: impl Into<String>) -> Self {
        self.user_tokens.push((token.into(), user.into()));
        self
    }

    /// Keep the last `n` records of [`SimServer::write_log`] (the oldest go first). Default
    /// [`crate::DEFAULT_WRITE_LOG_LIMIT`] (100 000); 0 keeps none.
    pub fn write_log_limit(mut self, n: usize) -> Self {
        self.write_log_limit = n;
        self
    }

    /// Adds a user (by token and/or client certificate), with the groups it is in. Once a
    /// user is added, requests without credentials are 401 `Unauthorized`; what a user may
    /// do is what [`allow`](Self::allow) grants it or its groups (`system:masters`: anything).
    pub fn user(mut self, user: User) -> Self {
        self.users.push(user);
        self
    }

    /// Grants `rule` to `subject` (see [`crate::authz`]). Requests a user is not granted are
    /// 403 `Forbidden`, worded as kube-apiserver words them.
    pub fn allow(mut self, subject: Subject, rule: Rule) -> Self {
        self.grants.push((subject, rule));
        self
    }

    /// Keep the last `n` versions of each object for [`SimServer::history`]. Default
    /// [`crate::storage::DEFAULT_HISTORY_LIMIT`] (16); 0 keeps none.
    pub fn history_limit(mut self, n: usize) -> Self {
        self.history_limit = n;
        self
    }

    /// Keep at most `n` versions over all objects for [`SimServer::history`] (the oldest
    /// go first). Default [`crate::storage::DEFAULT_HISTORY_MAX_VERSIONS`] (10 000).
    pub fn history_max_versions(mut self, n: usize) -> Self {
        self.history_max_versions = n;
        self
    }

    /// Compress responses as kube-apiserver does: a whole body (a list, a get, discovery, an
    /// error; never a watch) of at least [`gzip_min_bytes`](Self::gzip_min_bytes) is sent with
    /// `Content-Encoding: gzip` when the request says `Accept-Encoding: gzip`. Default off, so
    /// that benchmarks measure what they always did; counted in
    /// [`CounterSnapshot::gzip_responses`].
    pub fn gzip_responses(mut self, on: bool) -> Self {
        self.gzip = on;
        self
    }

    /// The smallest body [`gzip_responses`](Self::gzip_responses) compresses. Default
    /// [`DEFAULT_GZIP_MIN_BYTES`] (128 KiB, kube-apiserver's); tests set it low to compress
    /// small lists (0 compresses every whole body).
    pub fn gzip_min_bytes(mut self, bytes: usize) -> Self {
        self.gzip_min_bytes = bytes;
        self
    }

    /// Registers an extra resource (e.g. a custom resource).
    pub fn resource(mut self, def: ResourceDef) -> Self {
        self.resources.push(def);
        self
    }

    /// Binds 127.0.0.1 on an ephemeral port and starts serving.
    pub async fn start(self) -> Result<SimServer, SimError> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let mut registry = Registry::builtin();
        for d in &self.resources {
            registry.register(d.clone());
        }
        let storage = Arc::new(Storage::new(self.max_log_events, self.watch_buffer));
        if let (Some(core), Some(events)) = (
            registry.find("", "v1", "events"),
            registry.find("events.k8s.io", "v1", "events"),
        ) {
            use crate::events_convert::{core_to_events, events_to_core};
            storage.share(core, events, core_to_events, events_to_core);
        }
        storage.set_history_limit(self.history_limit, self.history_max_versions);
        storage.set_write_log_limit(self.write_log_limit);
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let tls = if self.tls {
            Some(TlsMaterial::generate()?)
        } else {
            None
        };
        let mut ca_path = None;
        if let Some(t) = &tls {
            let dir = std::env::temp_dir().join(format!(
                "sim-apiserver-{}-{}",
                std::process::id(),
                addr.port()
            ));
            std::fs::create_dir_all(&dir)?;
            let p = dir.join("ca.crt");
            std::fs::write(&p, &t.ca_pem)?;
            ca_path = Some(p);
        }
        let acceptor = match &tls {
            Some(t) => Some(tokio_rustls::TlsAcceptor::from(Arc::new(
                t.server_config(self.http2, self.client_cert_auth)?,
            ))),
            None => None,
        };
        let (directory, policy) = self.identities();
        let shared = Arc::new(Shared {
            directory,
            policy,
            faults: Faults::new(storage.clone()),
            storage,
            registry: RwLock::new(registry),
            crds: Default::default(),
            counters: Arc::new(Counters::default()),
            shutdown: shutdown_rx,
            addr,
            tls,
            ca_path,
            cfg: self,
        });
        for ns in ["default", "kube-system", "kube-public"] {
            let ns_idx = shared.resolve("namespaces").expect("builtin");
            let def = shared.registry.read().get(ns_idx).clone();
            let _ = shared.storage.create(
                ns_idx,
                &def,
                "",
                serde_json::json!({"metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
            );
        }
        tokio::spawn(accept_loop(listener, acceptor, shared.clone()));
        Ok(SimServer {
            shared,
            _guard: Arc::new(ShutdownGuard(shutdown_tx)),
        })
    }
}

impl SimServerBuilder {
    /// The users by token and the rules, from the users and grants given and the older
    /// shorthands (`token`, `user_token`, `readonly_token`), which stay what they were: the
    /// main token and user tokens may do anything, a read-only token may get, list and watch.
    fn identities(&self) -> (Directory, Policy) {
        let masters = [crate::users::MASTERS_GROUP];
        let mut users = self.users.clone();
        if let Some(t) = &self.token {
            users.push(User::new("admin").token(t.clone()).groups(masters));
        }
        for (t, name) in &self.user_tokens {
            users.push(User::new(name.clone()).token(t.clone()).groups(masters));
        }
        let mut grants = self.grants.clone();
        for t in &self.readonly_tokens {
            users.push(User::new(t.clone()).token(t.clone()));
            grants.push((Subject::user(t.clone()), Rule::read_only()));
        }
        (Directory::new(&users), Policy::new(grants))
    }
}

#[derive(Debug)]
struct ShutdownGuard(watch::Sender<bool>);

impl Drop for ShutdownGuard {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}

pub(crate) struct Shared {
    directory: Directory,
    policy: Policy,
    pub(crate) storage: Arc<Storage>,
    pub(crate) registry: RwLock<Registry>,
    pub(crate) crds: crate::crd::CrdState,
    pub(crate) faults: Faults,
    pub(crate) counters: Arc<Counters>,
    shutdown: watch::Receiver<bool>,
    addr: SocketAddr,
    tls: Option<TlsMaterial>,
    ca_path: Option<PathBuf>,
    cfg: SimServerBuilder,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(p) = &self.ca_path {
            let _ = std::fs::remove_file(p);
            if let Some(d) = p.parent() {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
}

impl Shared {
    /// Whether `shardSelector` is served (the simulator's stand-in for the feature gate).
    pub(crate) fn sharded_list_and_watch(&self) -> bool {
        self.cfg.sharded_list_and_watch
    }

    /// Whether protobuf is spoken ([`SimServerBuilder::protobuf`]).
    pub(crate) fn speaks_protobuf(&self) -> bool {
        self.cfg.protobuf
    }

    /// Resolves `plural` or `plural.group` to a registry index.
    fn resolve(&self, resource: &str) -> Option<usize> {
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        self.registry
            .read()
            .position(|d| d.plural == plural && d.group == group)
    }
}

/// A running simulated kube-apiserver. Cloning shares it; it stops when the last clone drops
/// (or on [`SimServer::shutdown`]).
#[derive(Clone)]
pub struct SimServer {
    shared: Arc<Shared>,
    _guard: Arc<ShutdownGuard>,
}

impl std::fmt::Debug for SimServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimServer")
            .field("url", &self.url())
            .finish()
    }
}

impl SimServer {
    /// A builder with defaults (plain HTTP, HTTP/1.1 and HTTP/2, no authentication).
    pub fn builder() -> SimServerBuilder {
        SimServerBuilder::default()
    }

    /// Starts a plain-HTTP server with defaults.
    pub async fn start() -> Result<Self, SimError> {
        Self::builder().start().await
    }

    /// Base URL (`http://127.0.0.1:PORT` or `https://...`).
    pub fn url(&self) -> String {
        let scheme = if self.shared.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.shared.addr)
    }

    /// Listening address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The CA certificate (PEM) when serving TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.shared.tls.as_ref().map(|t| t.ca_pem.as_str())
    }

    /// Path of a file holding the CA certificate when serving TLS (removed on shutdown).
    pub fn ca_path(&self) -> Option<&std::path::Path> {
        self.shared.ca_path.as_deref()
    }

    /// All generated TLS material (including a client certificate) when serving TLS.
    pub fn tls_material(&self) -> Option<&TlsMaterial> {
        self.shared.tls.as_ref()
    }

    /// The bearer token required, if any.
    pub fn token(&self) -> Option<&str> {
        self.shared.cfg.token.as_deref()
    }

    /// A kubeconfig (YAML) that points kubectl, client-go or this project's
    /// `ClusterConfig::from_kubeconfig` at this server: one cluster, user and context, all named
    /// `sim`, with the CA file and the bearer token when the server has them, and `default` as the
    /// context's namespace. Write it to a file and set `KUBECONFIG` to try a controller by hand.
    pub fn kubeconfig(&self) -> String {
        // Paths and tokens are quoted as JSON strings, which YAML reads as double-quoted scalars.
        let quote = |s: &str| serde_json::Value::from(s).to_string();
        let user = match self.token() {
            Some(t) => format!("    token: {}\n", quote(t)),
            None => "    {}\n".to_string(),
        };
        self.kubeconfig_with(&user)
    }

    /// A kubeconfig like [`SimServer::kubeconfig`] that authenticates with `token` (one of a
    /// [`User`]'s), for kubectl or a client acting as that user.
    pub fn kubeconfig_for_token(&self, token: &str) -> String {
        let quote = |s: &str| serde_json::Value::from(s).to_string();
        self.kubeconfig_with(&format!("    token: {}\n", quote(token)))
    }

    /// A client certificate and key (PEM) signed by the server's CA for `user` in `groups`
    /// (the subject's CN and O; at most two groups), accepted when the server has
    /// [`SimServerBuilder::client_cert_auth`]. [`SimError::NotTls`] without TLS.
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> Result<(String, String), SimError> {
        let tls = self.shared.tls.as_ref().ok_or(SimError::NotTls)?;
        Ok(tls.client_cert(user, groups)?)
    }

    /// A kubeconfig like [`SimServer::kubeconfig`] that authenticates with a fresh client
    /// certificate for `user` in `groups` ([`SimServer::client_cert`]), embedded as data.
    pub fn kubeconfig_with_cert(&self, user: &str, groups: &[&str]) -> Result<String, SimError> {
        use base64::Engine as _;
        let (cert, key) = self.client_cert(user, groups)?;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        Ok(self.kubeconfig_with(&format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(&cert),
            b64(&key)
        )))
    }

    fn kubeconfig_with(&self, user: &str) -> String {
        let quote = |s: &str| serde_json::Value::from(s).to_string();
        let mut cluster = format!("    server: {}\n", quote(&self.url()));
        if let Some(ca) = self.ca_path() {
            cluster.push_str(&format!(
                "    certificate-authority: {}\n",
                quote(&ca.display().to_string())
            ));
        }
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n{cluster}users:\n- name: sim\n  user:\n{user}contexts:\n- name: sim\n  context:\n    cluster: sim\n    user: sim\n    namespace: default\ncurrent-context: sim\n"
        )
    }

    /// Fault injection.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Request counters.
    pub fn counters(&self) -> CounterSnapshot {
        self.shared.counters.snapshot()
    }

    /// Current store revision (the latest resourceVersion).
    pub fn revision(&self) -> u64 {
        self.shared.storage.revision()
    }

    /// Compacts the event log up to `rev`.
    pub fn compact_to(&self, rev: u64) {
        self.shared.storage.compact_to(rev)
    }

    /// Watchers currently registered with the store.
    pub fn watcher_count(&self) -> usize {
        self.shared.storage.watcher_count()
    }

    /// Watchers ended for being too slow.
    pub fn slow_watcher_terminations(&self) -> u64 {
        self.shared.storage.slow_terminations()
    }

    /// Registers a resource at runtime.
    pub fn register(&self, def: ResourceDef) {
        self.shared.registry.write().register(def);
    }

    fn res(&self, resource: &str) -> Result<(usize, ResourceDef), ApiError> {
        let idx = self
            .shared
            .resolve(resource)
            .ok_or_else(ApiError::path_not_found)?;
        let def = self.shared.registry.read().get(idx).clone();
        Ok((self.shared.crds.slot(idx), def))
    }

    /// After a write through the test API: a CRD written is served (or stops being) at once.
    fn written<T>(&self, def: &ResourceDef, r: Result<T, ApiError>) -> Result<T, ApiError> {
        if r.is_ok() && crate::crd::is_definition(def) {
            crate::crd::reconcile(&self.shared);
        }
        r
    }

    fn ns_for<'a>(def: &ResourceDef, ns: Option<&'a str>) -> &'a str {
        if def.namespaced {
            ns.unwrap_or("default")
        } else {
            ""
        }
    }

    /// Creates an object (`resource` is `pods` or `plural.group`); returns the stored object.
    pub fn create(&self, resource: &str, ns: Option<&str>, obj: Value) -> Result<Value, ApiError> {
        let (idx, def) = self.res(resource)?;
        let ns = Self::ns_for(&def, ns);
        let r = self.shared.storage.create(idx, &def, ns, obj);
        Ok(self.written(&def, r)?.value.clone())
    }

    /// Replaces an object (name taken from `obj`); a set resourceVersion must be current.
    /// The whole object is written, `.status` included even for a resource with a status
    /// subresource (the test API stands for the controllers that own both).
    pub fn update(&self, resource: &str, ns: Option<&str>, obj: Value) -> Result<Value, ApiError> {
        let (idx, def) = self.res(resource)?;
        let ns = Self::ns_for(&def, ns);
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let r = self.shared.storage.update(idx, &def, ns, &name, obj);
        Ok(self.written(&def, r)?.value.clone())
    }

    /// Applies a JSON merge patch.
    pub fn patch(
        &self,
        resource: &str,
        ns: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        let (idx, def) = self.res(resource)?;
        let ns = Self::ns_for(&def, ns);
        let r = patch_object(&self.shared.storage, idx, &def, ns, name, patch);
        Ok(self.written(&def, r)?.value.clone())
    }

    /// Deletes an object; returns its final state.
    pub fn delete(&self, resource: &str, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let (idx, def) = self.res(resource)?;
        let ns = Self::ns_for(&def, ns);
        let r = self.shared.storage.delete(idx, &def, ns, name, None);
        Ok(self.written(&def, r)?.value.clone())
    }

    /// Gets an object.
    pub fn get(&self, resource: &str, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let (idx, def) = self.res(resource)?;
        let ns = Self::ns_for(&def, ns);
        self.shared
            .storage
            .get(idx, &key_of(ns, name))
            .map(|o| o.value.clone())
            .ok_or_else(|| ApiError::not_found(&def.plural, &def.group, name))
    }

    /// Every change the server stored, oldest first, each with its revision, the object, and the
    /// user whose request made it ([`crate::TEST_API_USER`] for this test API): what a test checks
    /// a controller's writes against from the server's side (see [`crate::write_log`]). Bounded
    /// by [`SimServerBuilder::write_log_limit`]; [`SimServer::write_log_dropped`] says whether
    /// records were dropped to keep the bound.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let sim = sim_apiserver::SimServer::start().await?;
    /// sim.create("configmaps", Some("default"), serde_json::json!({"metadata": {"name": "a"}}))?;
    /// let last = sim.write_log().pop().expect("one change at least");
    /// assert_eq!((last.resource.as_str(), last.name.as_str()), ("configmaps", "a"));
    /// assert_eq!(last.user, sim_apiserver::TEST_API_USER);
    /// # Ok(()) }
    /// ```
    pub fn write_log(&self) -> Vec<crate::WriteRecord> {
        let registry = self.shared.registry.read();
        let resolve = |res: usize| {
            registry
                .all()
                .get(res)
                .map(|d| (d.plural.clone(), d.group.clone()))
                .unwrap_or_default()
        };
        self.shared.storage.write_log().records(resolve)
    }

    /// Records [`SimServer::write_log`] dropped to keep its bound (0: complete since the start).
    pub fn write_log_dropped(&self) -> u64 {
        self.shared.storage.write_log().dropped()
    }

    /// Every stored version of an object still kept (created, then each update, including
    /// status and scale writes), oldest first, each with its resourceVersion: e.g. a Lease's
    /// holder over time. Bounded per object by [`SimServerBuilder::history_limit`] and over
    /// all objects by [`SimServerBuilder::history_max_versions`] (the oldest go first); dry
    /// runs are not in it; empty for an unknown resource or object, and once the object is
    /// deleted.
    pub fn history(&self, resource: &str, ns: Option<&str>, name: &str) -> Vec<Value> {
        let Ok((idx, def)) = self.res(resource) else {
            return Vec::new();
        };
        let ns = Self::ns_for(&def, ns);
        self.shared
            .storage
            .history(idx, &key_of(ns, name))
            .iter()
            .map(|o| o.value.clone())
            .collect()
    }

    /// Lists objects (all namespaces when `ns` is `None`).
    pub fn list(&self, resource: &str, ns: Option<&str>) -> Result<Vec<Value>, ApiError> {
        let (idx, def) = self.res(resource)?;
        let (_, map) = self.shared.storage.snapshot(idx, None)?;
        Ok(map
            .values()
            .filter(|o| {
                !def.namespaced
                    || ns.is_none_or(|n| {
                        o.value
                            .pointer("/metadata/namespace")
                            .and_then(Value::as_str)
                            == Some(n)
                    })
            })
            .map(|o| o.value.clone())
            .collect())
    }

    /// Starts a churn generator.
    pub fn churn(&self, cfg: ChurnConfig) -> ChurnHandle {
        churn::start(
            SimServer {
                shared: self.shared.clone(),
                _guard: self._guard.clone(),
            },
            cfg,
        )
    }

    /// Stops accepting and ends every connection and watch now.
    pub fn shutdown(&self) {
        self._guard.0.send_replace(true);
    }
}

fn patch_object(
    storage: &Storage,
    idx: usize,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    patch: &Value,
) -> Result<Arc<crate::storage::Obj>, ApiError> {
    if !patch.is_object() {
        return Err(ApiError::bad_request("the patch is not a JSON object"));
    }
    let cur = storage
        .get(idx, &key_of(ns, name))
        .ok_or_else(|| ApiError::not_found(&def.plural, &def.group, name))?;
    let mut v = cur.value.clone();
    // A resourceVersion in the patch becomes a precondition (409 when stale); without one the
    // patch applies to the version just read.
    merge_patch(&mut v, patch);
    if v.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
        return Err(ApiError::bad_request(
            "metadata.name: the name may not be changed by a patch",
        ));
    }
    storage.update(idx, def, ns, name, v)
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
) {
    let mut shutdown = shared.shutdown.clone();
    loop {
        let (tcp, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(%e, "accept failed");
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let _ = tcp.set_nodelay(true);
        let shared = shared.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let mut shutdown = shared.shutdown.clone();
            if *shutdown.borrow_and_update() {
                return;
            }
            let http2 = shared.cfg.http2;
            match acceptor {
                Some(acc) => {
                    let tls = tokio::select! {
                        r = acc.accept(tcp) => match r {
                            Ok(s) => s,
                            Err(e) => {
                                tracing::debug!(%e, "TLS handshake failed");
                                return;
                            }
                        },
                        _ = shutdown.changed() => return,
                    };
                    // The verifier only lets through certificates signed by the CA.
                    let client_cert = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|c| crate::users::identity_of_certificate(c))
                        .map(Arc::new);
                    serve(tls, shared, client_cert, http2, shutdown).await
                }
                None => serve(tcp, shared, None, http2, shutdown).await,
            }
        });
    }
}

async fn serve<IO>(
    io: IO,
    shared: Arc<Shared>,
    client_cert: Option<Arc<UserInfo>>,
    http2: bool,
    mut shutdown: watch::Receiver<bool>,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| {
        let shared = shared.clone();
        let client_cert = client_cert.clone();
        async move { Ok::<_, Infallible>(handle(shared, req, client_cert).await) }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    if http2 {
        // kube-apiserver's --http2-max-streams-per-connection default.
        builder.http2().max_concurrent_streams(1000);
    } else {
        builder = builder.http1_only();
    }
    let conn = builder.serve_connection(TokioIo::new(io), svc);
    tokio::select! {
        r = conn => if let Err(e) = r { tracing::debug!(%e, "connection ended") },
        _ = shutdown.changed() => {}
    }
}

pub(crate) fn json_response(shared: &Shared, code: StatusCode, body: Bytes) -> Response<SimBody> {
    let mut r = Response::new(SimBody::full(body, shared.counters.clone()));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub(crate) fn value_response(shared: &Shared, code: StatusCode, v: &Value) -> Response<SimBody> {
    json_response(shared, code, Bytes::from(v.to_string()))
}

fn error_response(shared: &Shared, e: &ApiError) -> Response<SimBody> {
    Counters::inc(&shared.counters.errors);
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = value_response(shared, code, &e.to_value());
    if let Some(s) = e.retry_after {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    r
}

/// A parsed resource path.
pub(crate) struct ResourcePath {
    pub(crate) idx: usize,
    pub(crate) def: ResourceDef,
    pub(crate) ns: Option<String>,
    pub(crate) name: Option<String>,
    /// `status` or `scale` (only for a resource that has it).
    pub(crate) sub: Option<String>,
}

enum Route {
    Text(&'static str),
    Json(Value),
    NotFound,
    /// A path outside every served group: kube-apiserver's mux answers it in plain text.
    NoHandler,
    Resource(Box<ResourcePath>),
}

fn route(shared: &Shared, path: &str) -> Route {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let reg = shared.registry.read();
    let (group, version, rest): (&str, &str, &[&str]) = match segs.as_slice() {
        ["healthz"] | ["livez"] | ["readyz"] => return Route::Text("ok"),
        ["version"] => return Route::Json(discovery::version()),
        ["api"] => return Route::Json(discovery::api(&shared.addr.to_string())),
        ["apis"] => return Route::Json(discovery::apis(&reg)),
        ["api", v] => {
            return discovery::resource_list(&reg, "", v)
                .map(Route::Json)
                .unwrap_or(Route::NotFound)
        }
        ["apis", g, ..] if discovery::api_group(&reg, g).is_none() => return Route::NoHandler,
        ["apis", g] => {
            return discovery::api_group(&reg, g)
                .map(Route::Json)
                .unwrap_or(Route::NotFound)
        }
        ["apis", g, v] => {
            return discovery::resource_list(&reg, g, v)
                .map(Route::Json)
                .unwrap_or(Route::NotFound)
        }
        ["openapi", "v2"] => return Route::Json(openapi::swagger(&reg)),
        ["openapi", "v3"] => return Route::Json(openapi::v3_root(&reg)),
        ["openapi", "v3", gv @ ..] => {
            return openapi::v3_document(&reg, &gv.join("/"))
                .map(Route::Json)
                .unwrap_or(Route::NotFound)
        }
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Route::NoHandler,
    };
    let (ns, plural, name, sub) = match rest {
        // `namespaces/{name}/status` is the namespace's status unless `status` is a resource.
        ["namespaces", ns, plural] if reg.find(group, version, plural).is_some() => {
            (Some(*ns), *plural, None, None)
        }
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name), None),
        ["namespaces", ns, plural, name, sub] => (Some(*ns), *plural, Some(*name), Some(*sub)),
        [plural] => (None, *plural, None, None),
        [plural, name] => (None, *plural, Some(*name), None),
        [plural, name, sub] => (None, *plural, Some(*name), Some(*sub)),
        _ => return Route::NotFound,
    };
    let Some(idx) = reg.find(group, version, plural) else {
        return Route::NotFound;
    };
    let def = reg.get(idx).clone();
    // All versions of a CRD share its storage version's store.
    let idx = shared.crds.slot(idx);
    if ns.is_some() && !def.namespaced {
        return Route::NotFound;
    }
    if name.is_some_and(str::is_empty) || ns.is_some_and(str::is_empty) {
        return Route::NotFound;
    }
    match sub {
        None => {}
        Some("status") if def.status_subresource => {}
        Some("scale") if def.scale.is_some() => {}
        Some(_) => return Route::NotFound,
    }
    Route::Resource(Box::new(ResourcePath {
        idx,
        def,
        ns: ns.map(str::to_string),
        name: name.map(str::to_string),
        sub: sub.map(str::to_string),
    }))
}

/// Who is asking: a token's user, a client certificate's, or (when the server asks for no
/// credentials) `admin`, in `system:masters`. `None`: 401.
fn authenticate(
    shared: &Shared,
    req: &Request<Incoming>,
    client_cert: Option<&Arc<UserInfo>>,
) -> Option<Arc<UserInfo>> {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if let Some(u) = presented.and_then(|t| shared.directory.by_token(t)) {
        return Some(u);
    }
    if let Some(u) = client_cert.filter(|_| shared.cfg.client_cert_auth) {
        return Some(u.clone());
    }
    // Without a main token or users of its own the server asks for no credentials (user and
    // read-only tokens alone only name who is asking, as they always did).
    if shared.cfg.token.is_none() && shared.cfg.users.is_empty() {
        return Some(Arc::new(UserInfo::new(
            "admin",
            &[crate::users::MASTERS_GROUP.to_string()],
        )));
    }
    None
}

async fn handle(
    shared: Arc<Shared>,
    mut req: Request<Incoming>,
    client_cert: Option<Arc<UserInfo>>,
) -> Response<SimBody> {
    let gzip = shared.cfg.gzip && accepts_gzip(req.headers());
    let protobuf = match route(&shared, req.uri().path()) {
        Route::Resource(rp) if shared.cfg.protobuf => {
            crate::protobuf::serve::negotiate(&mut req, &rp.def, shared.cfg.partial_object_metadata)
        }
        _ => None,
    };
    let resp = respond(shared.clone(), req, client_cert).await;
    let resp = match protobuf {
        Some(p) => {
            let resp = p.encode(resp);
            let content_type = resp.headers().get(header::CONTENT_TYPE);
            if reflector::protobuf::is_protobuf(content_type.and_then(|c| c.to_str().ok())) {
                Counters::inc(&shared.counters.protobuf_responses);
            }
            resp
        }
        None => resp,
    };
    if gzip {
        gzip_response(resp, shared.cfg.gzip_min_bytes, &shared.counters)
    } else {
        resp
    }
}

async fn respond(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    client_cert: Option<Arc<UserInfo>>,
) -> Response<SimBody> {
    Counters::inc(&shared.counters.requests);
    let Some(auth) = authenticate(&shared, &req, client_cert.as_ref()) else {
        return error_response(&shared, &ApiError::unauthorized());
    };
    // A network partition: nothing is handled (or answered) until it heals.
    let mut shutdown = shared.shutdown.clone();
    if !shared
        .faults
        .partition_wait(&auth.name, &mut shutdown)
        .await
    {
        return error_response(
            &shared,
            &ApiError::service_unavailable("the server is shutting down"),
        );
    }
    let delay = shared.faults.user_delay(&auth.name);
    let user = auth.name.clone();
    let resp = crate::write_log::as_writer(&user, respond_as(shared, req, auth)).await;
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    resp
}

async fn respond_as(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    auth: Arc<UserInfo>,
) -> Response<SimBody> {
    let path = req.uri().path().to_string();
    match route(&shared, &path) {
        Route::Text(t) => {
            let mut r = json_response(&shared, StatusCode::OK, Bytes::from_static(t.as_bytes()));
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            r
        }
        Route::Json(v) => {
            if req.method() != Method::GET {
                return error_response(
                    &shared,
                    &ApiError::method_not_allowed(req.method().as_str()),
                );
            }
            Counters::inc(&shared.counters.discovery);
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|a| a.to_str().ok());
            let trimmed = path.trim_end_matches('/');
            if (trimmed == "/api" || trimmed == "/apis") && !discovery::acceptable(accept) {
                return error_response(
                    &shared,
                    &ApiError::not_acceptable("only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"),
                );
            }
            if (trimmed == "/api" || trimmed == "/apis") && discovery::wants_aggregated(accept) {
                let doc = discovery::aggregated(&shared.registry.read(), trimmed == "/api");
                let mut r = value_response(&shared, StatusCode::OK, &doc);
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(discovery::AGGREGATED_MEDIA_TYPE),
                );
                return r;
            }
            if trimmed == "/openapi/v2" {
                return openapi::v2_response(&shared, accept, &v);
            }
            value_response(&shared, StatusCode::OK, &v)
        }
        Route::NotFound => error_response(&shared, &ApiError::path_not_found()),
        Route::NoHandler => {
            let mut r = json_response(
                &shared,
                StatusCode::NOT_FOUND,
                Bytes::from_static(b"404 page not found\n"),
            );
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            r
        }
        Route::Resource(rp) => {
            if crate::authz::reviews::is_review(&rp.def) {
                let (parts, body) = req.into_parts();
                let r = crate::authz::reviews::handle(
                    &shared.policy,
                    &auth,
                    &parts.method,
                    &rp.def,
                    rp.name.as_deref(),
                    parts
                        .headers
                        .get(header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok()),
                    body,
                )
                .await;
                return match r {
                    Ok((code, v)) => value_response(&shared, code, &v),
                    Err(e) => error_response(&shared, &e),
                };
            }
            let attrs = Attributes::of_request(
                req.method(),
                req.uri().query(),
                &rp.def,
                rp.ns.as_deref(),
                rp.name.as_deref(),
                rp.sub.as_deref(),
            );
            if !shared.policy.allows(&auth, &attrs) {
                return error_response(&shared, &crate::authz::forbidden(&auth, &attrs));
            }
            match resource_request(&shared, req, *rp, &auth.name).await {
                Ok(r) => r,
                Err(e) => error_response(&shared, &e),
            }
        }
    }
}

async fn resource_request(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
    rp: ResourcePath,
    user: &str,
) -> Result<Response<SimBody>, ApiError> {
    let method = req.method().clone();
    let query = req.uri().query().map(str::to_string);
    // An `Accept` header that is not visible ASCII names nothing the server can produce.
    let accept = req.headers().get(header::ACCEPT).map(|v| v.to_str());
    let negotiate = |target| match accept {
        Some(Err(_)) => Err(ApiError::not_acceptable(
            "only the following media types are accepted: application/json",
        )),
        Some(Ok(a)) => {
            representation::negotiate(Some(a), target, shared.cfg.partial_object_metadata)
        }
        None => Ok(representation::Representation::Object),
    };
    // Tables, and a CRD's objects read through another version than the one written in.
    let view = match (&method, &accept) {
        (&Method::GET, Some(Ok(a))) => Some(*a),
        _ => None,
    };
    let view = match method {
        Method::GET => {
            let (sub, q) = (rp.sub.as_deref(), query.as_deref());
            crate::table::ReadView::new(&shared.crds, &rp.def, sub, view, q)?
        }
        _ => None,
    };
    let negotiate = |target| match &view {
        Some(v) if v.is_table() => Ok(representation::Representation::Object),
        _ => negotiate(target),
    };
    let ns = rp.ns.as_deref();
    let storage = &shared.storage;
    let def = &rp.def;
    if rp.sub.is_some() && !matches!(method, Method::GET | Method::PUT | Method::PATCH) {
        return Err(ApiError::method_not_allowed(method.as_str()));
    }
    match (&method, rp.name.as_deref()) {
        (&Method::GET, None) => {
            let mut p = ListParams::parse_for(&def.kind, query.as_deref())?;
            // Read where kube-apiserver's storage reads it: after the options are validated.
            p.validate()?;
            p.apply_shard_selector(shared.cfg.sharded_list_and_watch)?;
            p.representation = negotiate(if p.watch {
                Target::Object
            } else {
                Target::List
            })?;
            if p.watch {
                Counters::inc(&shared.counters.watches);
                if let Some(e) = shared.faults.take_failure(RequestKind::Watch) {
                    return Err(e);
                }
                if shared.faults.take_silent_watch() {
                    return Ok(silent_watch(shared));
                }
                let ctx = WatchCtx {
                    storage: storage.clone(),
                    faults: shared.faults.clone(),
                    counters: shared.counters.clone(),
                    shutdown: shared.shutdown.clone(),
                    bookmark_interval: shared.cfg.bookmark_interval,
                    default_timeout: shared.cfg.default_watch_timeout,
                    user: user.to_string(),
                };
                let mut rx = watch_stream::open(ctx, rp.idx, def, ns, &p)?;
                if let Some(v) = view {
                    rx = v.watch(rx, p.representation);
                }
                let mut r = Response::new(SimBody::stream(rx, shared.counters.clone()));
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                return Ok(r);
            }
            Counters::inc(&shared.counters.lists);
            if let Some(e) = shared.faults.take_failure(RequestKind::List) {
                return Err(e);
            }
            if let Some(f) = shared.faults.take_list_fault() {
                return faulty_list(shared, f, &rp, &p);
            }
            let mut body = list::list(storage, rp.idx, def, ns, &p, shared.cfg.watch_cache)?;
            if let Some(v) = &view {
                body = v.list(body, p.representation)?;
            }
            Ok(json_response(shared, StatusCode::OK, body))
        }
        (&Method::GET, Some(name)) => {
            Counters::inc(&shared.counters.gets);
            let representation = negotiate(Target::Object).map_err(|mut e| {
                if e.message.ends_with("is not a list") {
                    // kube-apiserver names the Go type it holds.
                    let internal = if !def.is_core() {
                        "unstructured.Unstructured".to_string()
                    } else {
                        let group = match def.group.split('.').next() {
                            Some("") | None => "core",
                            Some(g) => g,
                        };
                        format!("{group}.{}", def.kind)
                    };
                    e.message = format!("{} (*{internal})", e.message);
                }
                e
            })?;
            if let Some(e) = shared.faults.take_failure(RequestKind::Get) {
                return Err(e);
            }
            let ns = ns.unwrap_or("");
            if def.namespaced && ns.is_empty() {
                return Err(ApiError::path_not_found());
            }
            // A get is served at the latest revision; a resourceVersion asks for at least
            // that one, so one from the future is refused as a list's is.
            let p = ListParams::parse_for(&def.kind, query.as_deref())?;
            if let Some(x) = p.rv_number_or_500()? {
                if x > storage.revision() {
                    return Err(ApiError::too_large_resource_version(x, storage.revision()));
                }
            }
            let o = storage
                .get(rp.idx, &key_of(ns, name))
                .ok_or_else(|| ApiError::not_found(&def.plural, &def.group, name))?;
            if rp.sub.as_deref() == Some("scale") {
                return Ok(value_response(
                    shared,
                    StatusCode::OK,
                    &crate::writes::scale_of(def, &o.value),
                ));
            }
            let mut body = o.json_as(representation);
            if let Some(v) = &view {
                body = v.object(&o.value, body, representation);
            }
            Ok(json_response(shared, StatusCode::OK, body))
        }
        (&Method::POST, None)
        | (&Method::PUT, Some(_))
        | (&Method::PATCH, Some(_))
        | (&Method::DELETE, _) => {
            let crd = crate::crd::is_definition(&rp.def);
            let write = crate::writes::write_request(shared, req, rp, query.clone());
            crate::crd::around_write(shared, crd, query.as_deref(), write).await
        }
        _ => Err(ApiError::method_not_allowed(method.as_str())),
    }
}

/// A watch under [`Faults::silent_watches`]: 200 headers, then nothing until the client goes
/// away or the server shuts down.
fn silent_watch(shared: &Arc<Shared>) -> Response<SimBody> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let counters = shared.counters.clone();
    let mut shutdown = shared.shutdown.clone();
    Counters::inc(&counters.active_watches);
    tokio::spawn(async move {
        if !*shutdown.borrow_and_update() {
            tokio::select! {
                _ = tx.closed() => {}
                _ = shutdown.changed() => {}
            }
        }
        counters
            .active_watches
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    });
    let mut r = Response::new(SimBody::stream(rx, shared.counters.clone()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The body of [`ListFault::StatusWithOk`] (in kube-apiserver's field order).
const STATUS_WITH_OK: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Internal error occurred: injected fault: a failure Status with HTTP 200","reason":"InternalError","code":500}"#;

/// The HTML page of [`ListFault::Html`].
const HTML_ERROR_PAGE: &str = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";

/// A list answered with the misbehaviour `fault` (see [`ListFault`]).
fn faulty_list(
    shared: &Arc<Shared>,
    fault: ListFault,
    rp: &ResourcePath,
    p: &ListParams,
) -> Result<Response<SimBody>, ApiError> {
    let ns = rp.ns.as_deref();
    let storage = &shared.storage;
    let stream_response = |rx| {
        let mut r = Response::new(SimBody::stream(rx, shared.counters.clone()));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    };
    Ok(match fault {
        ListFault::StatusWithOk => {
            Counters::inc(&shared.counters.errors);
            json_response(
                shared,
                StatusCode::OK,
                Bytes::from_static(STATUS_WITH_OK.as_bytes()),
            )
        }
        ListFault::EmptyObject => json_response(shared, StatusCode::OK, Bytes::from_static(b"{}")),
        ListFault::Html => {
            let mut r = json_response(
                shared,
                StatusCode::OK,
                Bytes::from_static(HTML_ERROR_PAGE.as_bytes()),
            );
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
            r
        }
        ListFault::Endless => {
            let (tx, rx) = tokio::sync::mpsc::channel(2);
            let prefix = list::endless_prefix(&rp.def, storage.revision(), p.representation);
            let item_ns = rp
                .def
                .namespaced
                .then(|| ns.unwrap_or("default").to_string());
            tokio::spawn(list::endless(tx, prefix, item_ns, shared.shutdown.clone()));
            stream_response(rx)
        }
        ListFault::RepeatContinue => {
            let body = list::first_page_with_token(
                storage,
                rp.idx,
                &rp.def,
                ns,
                p,
                REPEAT_CONTINUE_TOKEN,
            )?;
            json_response(shared, StatusCode::OK, body)
        }
        ListFault::CloseMidBody => {
            let body = list::list(storage, rp.idx, &rp.def, ns, p, shared.cfg.watch_cache)?;
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            tokio::spawn(crate::body::send_then_abort(
                tx,
                body.slice(..body.len() / 2),
                "injected close in the middle of a list body",
            ));
            stream_response(rx)
        }
        ListFault::NoResourceVersion => {
            let body = list::list_without_resource_version(
                storage,
                rp.idx,
                &rp.def,
                ns,
                p,
                shared.cfg.watch_cache,
            )?;
            json_response(shared, StatusCode::OK, body)
        }
    })
}

pub(crate) fn check_namespace(shared: &Shared, ns: &str) -> Result<(), ApiError> {
    let idx = shared.resolve("namespaces").expect("builtin namespaces");
    if shared.storage.get(idx, ns).is_none() {
        return Err(ApiError::not_found("namespaces", "", ns));
    }
    Ok(())
}
