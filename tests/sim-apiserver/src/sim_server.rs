//! A running server as test code holds it: [`SimServerBuilder::start`], and [`SimServer`]'s
//! object API (create, update, patch, delete, get, list, history, the write log), which writes
//! through the store as the server's handlers do, with no HTTP and no authorization.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::authz::{Policy, Rule, Subject};
use crate::builder::SimServerBuilder;
use crate::faults::Faults;
use crate::metrics::{CounterSnapshot, Counters, UserSnapshot};
use crate::resources::ResourceDef;
use crate::shared::Shared;
use crate::status::ApiError;
use crate::storage::{key_of, Storage};
use crate::tls::{TlsError, TlsMaterial};
use crate::users::{Directory, User};

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

impl SimServerBuilder {
    /// Binds 127.0.0.1 on an ephemeral port and starts serving.
    pub async fn start(self) -> Result<SimServer, SimError> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let mut registry = crate::builtin::registry();
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
        tokio::spawn(crate::server::accept_loop(
            listener,
            acceptor,
            shared.clone(),
        ));
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

    /// Requests and response bytes per authenticated user, by user name: what each client cost
    /// the server (a request refused as unauthenticated counts for nobody).
    pub fn user_counters(&self) -> BTreeMap<String, UserSnapshot> {
        self.shared.counters.users()
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
            self.shared.reconcile_crds();
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
    // A resourceVersion in the patch becomes a precondition (409 when stale); without one the
    // patch applies to the latest version: read, merged and written again when another write
    // landed in between, as kube-apiserver's storage retries a patch (a bounded number of
    // times here, yielding between tries; a test driving more contention than that gets the 409).
    let preconditioned = patch.pointer("/metadata/resourceVersion").is_some();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let cur = storage
            .get(idx, &key_of(ns, name))
            .ok_or_else(|| ApiError::not_found(&def.plural, &def.group, name))?;
        let mut v = cur.value.clone();
        json_patch::merge(&mut v, patch);
        if v.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
            return Err(ApiError::bad_request(
                "metadata.name: the name may not be changed by a patch",
            ));
        }
        match storage.update(idx, def, ns, name, v) {
            Err(e) if e.code == 409 && !preconditioned && attempts < PATCH_ATTEMPTS => {
                // Let the writer that got in first finish before reading again.
                std::thread::yield_now();
            }
            written => return written,
        }
    }
}

/// How many times the test API's patch without a resourceVersion is tried against concurrent
/// writes of the same object (kube-apiserver retries without a bound; each try here is a read,
/// a merge and a compare-and-swap, microseconds).
const PATCH_ATTEMPTS: usize = 1000;
