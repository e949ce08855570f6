//! The server a portable scenario runs on, behind one face: the simulator, or a real
//! kube-apiserver with etcd (`tests/real-apiserver`), chosen by `--server sim|real`.
//!
//! A [`Backend`] seeds objects, writes churn and reads the truth back, each through a path of its
//! own rather than the client under test: the simulator's in-process test API, or a plain HTTPS
//! client of the real server's. So the verdicts of [`crate::check`] (the cache equals the
//! server's state, every handler's sequence is consistent) mean the same on both servers.
//! Resources are named as the simulator names them: the plural, with the group after a dot
//! outside the core group (`"configmaps"`, `"deployments.apps"`, `"gizmos.example.com"`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::Rng;
use real_apiserver::{RealServer, ServerOptions, User};
use serde_json::{json, Value};
use sim_apiserver::SimServer;
use workqueue::shared_informer::reflector::ClusterConfig;

use crate::check::Failure;
use crate::harness::config_for;

/// Which server portable scenarios run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// The embedded simulator (the default).
    Sim,
    /// A real kube-apiserver and etcd, started per scenario.
    Real,
}

/// What a portable scenario needs of a server.
pub trait Backend: Send + Sync {
    /// `sim` or `real`, for details and messages.
    fn name(&self) -> &'static str;
    /// A client configuration with full rights.
    fn config(&self) -> Result<ClusterConfig, Failure>;
    /// Every object of `resource` (in `namespace`, or in all).
    fn list(&self, resource: &str, namespace: Option<&str>) -> Result<Vec<Value>, String>;
    /// One object, as stored.
    fn get(&self, resource: &str, namespace: Option<&str>, name: &str) -> Result<Value, String>;
    /// Creates `object`; returns it as stored.
    fn create(
        &self,
        resource: &str,
        namespace: Option<&str>,
        object: Value,
    ) -> Result<Value, String>;
    /// Applies a JSON merge patch; returns the object as stored.
    fn merge_patch(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        patch: Value,
    ) -> Result<Value, String>;
    /// Deletes the object.
    fn delete(&self, resource: &str, namespace: Option<&str>, name: &str) -> Result<(), String>;
    /// Returns once the server has compacted its history past `resource_version`: a watch or
    /// an exact list from it is refused with 410 Gone.
    fn compact_past(&self, resource: &str, resource_version: &str) -> Result<(), String>;
    /// Starts recording every version of the objects of `resource` in `namespace`, in the
    /// server's order of writes, from now on.
    fn record(&self, resource: &str, namespace: &str) -> Result<Box<dyn History>, String>;
    /// A kubeconfig (YAML) by which a process of its own reaches the server as a user of its
    /// own named `user`, in `system:masters` (allowed everything): a client certificate signed
    /// by the server's CA, embedded. The simulator needs TLS with client certificates for it.
    fn kubeconfig_for(&self, user: &str) -> Result<String, String>;
}

/// Every version of some objects as the server wrote them: what a checker of "who wrote what,
/// when" reads instead of a server's private write log.
pub trait History: Send + Sync {
    /// The versions of the object `name`, oldest first.
    fn versions(&self, name: &str) -> Vec<Value>;
    /// Whether the recording is still whole: an error when it stopped before it was dropped
    /// (a watch the server ended), so that versions since are missing.
    fn whole(&self) -> Result<(), String>;
}

/// The simulator keeps every version itself.
struct SimHistory {
    sim: SimServer,
    resource: String,
    namespace: String,
}

impl History for SimHistory {
    fn versions(&self, name: &str) -> Vec<Value> {
        self.sim
            .history(&self.resource, Some(&self.namespace), name)
    }

    fn whole(&self) -> Result<(), String> {
        // The simulator keeps versions up to its history limits, which its scenarios size.
        Ok(())
    }
}

/// A watch on a real server, from a list's version on, on a thread of its own, resumed from
/// the last version it sent when the server ends it; stopped and joined when dropped.
struct WatchHistory {
    /// The versions of each object, by name, in the watch's order.
    seen: Arc<Mutex<HashMap<String, Vec<Value>>>>,
    /// Why the watch ended, if it ended before it was stopped.
    ended: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl History for WatchHistory {
    fn versions(&self, name: &str) -> Vec<Value> {
        self.seen.lock().get(name).cloned().unwrap_or_default()
    }

    fn whole(&self) -> Result<(), String> {
        match &*self.ended.lock() {
            Some(why) => Err(format!("the recording's watch ended early: {why}")),
            None => Ok(()),
        }
    }
}

fn by_name(seen: &Mutex<HashMap<String, Vec<Value>>>, object: Value) {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    seen.lock().entry(name).or_default().push(object);
}

impl Drop for WatchHistory {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Backend for SimServer {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn config(&self) -> Result<ClusterConfig, Failure> {
        config_for(self)
    }

    fn list(&self, resource: &str, namespace: Option<&str>) -> Result<Vec<Value>, String> {
        SimServer::list(self, resource, namespace).map_err(|e| e.to_string())
    }

    fn get(&self, resource: &str, namespace: Option<&str>, name: &str) -> Result<Value, String> {
        SimServer::get(self, resource, namespace, name).map_err(|e| e.to_string())
    }

    fn create(
        &self,
        resource: &str,
        namespace: Option<&str>,
        object: Value,
    ) -> Result<Value, String> {
        // The test API stores objects in any namespace, but HTTP writes (the client under test)
        // need the namespace to exist, as on a real server.
        if let Some(ns) = namespace {
            if SimServer::get(self, "namespaces", None, ns).is_err() {
                SimServer::create(self, "namespaces", None, json!({"metadata": {"name": ns}}))
                    .map_err(|e| e.to_string())?;
            }
        }
        SimServer::create(self, resource, namespace, object).map_err(|e| e.to_string())
    }

    fn merge_patch(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        patch: Value,
    ) -> Result<Value, String> {
        SimServer::patch(self, resource, namespace, name, &patch).map_err(|e| e.to_string())
    }

    fn delete(&self, resource: &str, namespace: Option<&str>, name: &str) -> Result<(), String> {
        SimServer::delete(self, resource, namespace, name)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn compact_past(&self, _resource: &str, _resource_version: &str) -> Result<(), String> {
        // The simulator compacts when told: to its current revision.
        self.faults().compact();
        Ok(())
    }

    fn record(&self, resource: &str, namespace: &str) -> Result<Box<dyn History>, String> {
        Ok(Box::new(SimHistory {
            sim: self.clone(),
            resource: resource.to_string(),
            namespace: namespace.to_string(),
        }))
    }

    fn kubeconfig_for(&self, user: &str) -> Result<String, String> {
        self.kubeconfig_with_cert(user, &["system:masters"])
            .map_err(|e| e.to_string())
    }
}

/// A real kube-apiserver and etcd, the versions its API groups prefer, and the namespaces known
/// to exist.
pub struct Real {
    server: Arc<RealServer>,
    versions: Mutex<HashMap<String, String>>,
    namespaces: Mutex<HashSet<String>>,
}

impl Real {
    /// Starts a control plane with `options` (on a blocking thread: a start takes seconds).
    pub async fn start(options: ServerOptions) -> Result<Real, Failure> {
        let server = tokio::task::spawn_blocking(move || RealServer::start(options))
            .await
            .map_err(|e| Failure(format!("starting the real server: {e}")))?
            .map_err(|e| Failure(format!("starting the real server: {e}")))?;
        Ok(Real {
            server: Arc::new(server),
            versions: Mutex::new(HashMap::new()),
            namespaces: Mutex::new(HashSet::new()),
        })
    }

    /// One request as the admin; an answer that is not 2xx is an error with its body.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Option<&Value>,
    ) -> Result<Value, String> {
        let bytes = body.map(|b| b.to_string().into_bytes());
        let body = bytes.as_deref().map(|b| (content_type, b));
        // The request blocks on I/O for a few milliseconds: let the runtime move other tasks
        // off this worker meanwhile.
        let answer =
            tokio::task::block_in_place(|| self.server.request(User::Admin, method, path, body));
        let (status, text) = answer.map_err(|e| e.to_string())?;
        if !(200..300).contains(&status) {
            return Err(format!("{method} {path}: {status} {}", text.trim()));
        }
        serde_json::from_str(&text).map_err(|e| format!("{method} {path}: not JSON ({e})"))
    }

    /// `/api/v1` or `/apis/<group>/<preferred version>`, and the plural, of `resource`.
    fn base(&self, resource: &str) -> Result<(String, String), String> {
        let Some((plural, group)) = resource.split_once('.') else {
            return Ok(("/api/v1".to_string(), resource.to_string()));
        };
        if let Some(version) = self.versions.lock().get(group) {
            return Ok((format!("/apis/{group}/{version}"), plural.to_string()));
        }
        let discovered = self.call("GET", &format!("/apis/{group}"), "", None)?;
        let version = discovered["preferredVersion"]["version"]
            .as_str()
            .ok_or_else(|| format!("/apis/{group} names no preferred version"))?
            .to_string();
        self.versions
            .lock()
            .insert(group.to_string(), version.clone());
        Ok((format!("/apis/{group}/{version}"), plural.to_string()))
    }

    /// The collection's path.
    pub fn path(&self, resource: &str, namespace: Option<&str>) -> Result<String, String> {
        let (base, plural) = self.base(resource)?;
        Ok(match namespace {
            Some(ns) => format!("{base}/namespaces/{ns}/{plural}"),
            None => format!("{base}/{plural}"),
        })
    }
}

impl Backend for Real {
    fn name(&self) -> &'static str {
        "real"
    }

    fn config(&self) -> Result<ClusterConfig, Failure> {
        let mut config = ClusterConfig::new(self.server.url())?;
        config.certificate_authority = Some(self.server.ca_pem().as_bytes().to_vec());
        config.credentials = workqueue::shared_informer::reflector::Credentials::Token(
            self.server.token(User::Admin).to_string().into(),
        );
        Ok(config)
    }

    fn list(&self, resource: &str, namespace: Option<&str>) -> Result<Vec<Value>, String> {
        let path = self.path(resource, namespace)?;
        let list = self.call("GET", &path, "", None)?;
        // The items of a list carry no apiVersion and kind; the scenarios read metadata only.
        match list["items"].as_array() {
            Some(items) => Ok(items.clone()),
            None => Err(format!("GET {path}: no items")),
        }
    }

    fn get(&self, resource: &str, namespace: Option<&str>, name: &str) -> Result<Value, String> {
        let path = format!("{}/{name}", self.path(resource, namespace)?);
        self.call("GET", &path, "", None)
    }

    fn create(
        &self,
        resource: &str,
        namespace: Option<&str>,
        object: Value,
    ) -> Result<Value, String> {
        if let Some(ns) = namespace {
            self.ensure_namespace(ns)?;
        }
        let path = self.path(resource, namespace)?;
        self.call("POST", &path, "application/json", Some(&object))
    }

    fn merge_patch(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        patch: Value,
    ) -> Result<Value, String> {
        let path = format!("{}/{name}", self.path(resource, namespace)?);
        self.call("PATCH", &path, "application/merge-patch+json", Some(&patch))
    }

    fn delete(&self, resource: &str, namespace: Option<&str>, name: &str) -> Result<(), String> {
        let path = format!("{}/{name}", self.path(resource, namespace)?);
        self.call("DELETE", &path, "", None).map(|_| ())
    }

    fn compact_past(&self, resource: &str, resource_version: &str) -> Result<(), String> {
        // kube-apiserver compacts etcd on its own clock (`--etcd-compaction-interval`): ask for
        // an exact list at the version until the answer is 410 Gone.
        let path = format!(
            "{}?resourceVersion={resource_version}&resourceVersionMatch=Exact&limit=1",
            self.path(resource, None)?
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let (status, body) = tokio::task::block_in_place(|| {
                self.server.request(User::Admin, "GET", &path, None)
            })
            .map_err(|e| e.to_string())?;
            match status {
                410 => return Ok(()),
                200 if std::time::Instant::now() < deadline => {
                    tokio::task::block_in_place(|| std::thread::sleep(Duration::from_millis(250)))
                }
                _ => {
                    return Err(format!(
                        "an exact list at {resource_version} answered {status}: {}",
                        body.trim()
                    ))
                }
            }
        }
    }
    fn record(&self, resource: &str, namespace: &str) -> Result<Box<dyn History>, String> {
        self.ensure_namespace(namespace)?;
        let path = self.path(resource, Some(namespace))?;
        let list = self.call("GET", &path, "", None)?;
        let from = list["metadata"]["resourceVersion"]
            .as_str()
            .ok_or_else(|| format!("GET {path}: no resourceVersion"))?
            .to_string();
        let seen = Arc::new(Mutex::new(HashMap::new()));
        for item in list["items"].as_array().cloned().unwrap_or_default() {
            by_name(&seen, item);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(Mutex::new(None));
        let thread = std::thread::spawn({
            let (server, seen, stop) = (self.server.clone(), seen.clone(), stop.clone());
            let ended = ended.clone();
            move || {
                // A watch the server ends (its timeout, or a watcher it found too slow under
                // load) is resumed from the last version it sent, as a reflector does: the events
                // after it come next, none lost. One the server refuses (410 Gone: that version
                // was compacted) leaves a hole, and says so.
                let mut from = from;
                let mut resumes = 0;
                let why = loop {
                    let watch = format!(
                        "{path}?watch=1&resourceVersion={from}&allowWatchBookmarks=true&timeoutSeconds=3600"
                    );
                    let mut refused = None;
                    let result = server.watch(User::Admin, &watch, &stop, |event| {
                        if event["type"] == "ERROR" {
                            refused = Some(event["object"]["message"].to_string());
                            return;
                        }
                        if let Some(rv) = event["object"]["metadata"]["resourceVersion"].as_str() {
                            from = rv.to_string();
                        }
                        if event["type"] != "BOOKMARK" {
                            by_name(&seen, event["object"].clone());
                        }
                    });
                    if stop.load(Ordering::Relaxed) {
                        break None;
                    }
                    let ended = match (result, refused) {
                        (_, Some(message)) => break Some(format!("an ERROR event: {message}")),
                        (Err(e), None) => e.to_string(),
                        (Ok(()), None) => "the server closed it".to_string(),
                    };
                    resumes += 1;
                    if resumes > 20 {
                        break Some(format!("{ended}, and 20 resumed watches after it"));
                    }
                    tracing::warn!(%ended, %from, "the history's watch ended; resumed");
                    std::thread::sleep(Duration::from_millis(100));
                };
                if let Some(why) = why {
                    tracing::error!(error = %why, "the history's watch ended");
                    *ended.lock() = Some(why);
                }
            }
        });
        Ok(Box::new(WatchHistory {
            seen,
            ended,
            stop,
            thread: Some(thread),
        }))
    }

    fn kubeconfig_for(&self, user: &str) -> Result<String, String> {
        use base64::Engine as _;
        let (cert, key) = self
            .server
            .client_cert(user, &["system:masters"])
            .map_err(|e| e.to_string())?;
        let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        Ok(format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {url}\n    \
             certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    \
             client-certificate-data: {cert}\n    client-key-data: {key}\ncontexts:\n- name: real\n  \
             context:\n    cluster: real\n    user: {user}\ncurrent-context: real\n",
            url = self.server.url(),
            ca = b64(self.server.ca_pem()),
            cert = b64(&cert),
            key = b64(&key),
        ))
    }
}

impl Real {
    /// Creates `namespace` unless it exists: the simulator takes objects in any namespace, a real
    /// server only in one that exists.
    fn ensure_namespace(&self, namespace: &str) -> Result<(), String> {
        let known = self.namespaces.lock().contains(namespace);
        if known {
            return Ok(());
        }
        let object =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        match self.call(
            "POST",
            "/api/v1/namespaces",
            "application/json",
            Some(&object),
        ) {
            Ok(_) => {}
            Err(e) if e.contains(" 409 ") => {}
            Err(e) => return Err(e),
        }
        self.namespaces.lock().insert(namespace.to_string());
        Ok(())
    }
}

/// Starts the server `kind` names, for a portable scenario.
pub async fn start(kind: ServerKind) -> Result<Arc<dyn Backend>, Failure> {
    Ok(match kind {
        ServerKind::Sim => Arc::new(SimServer::start().await?),
        ServerKind::Real => Arc::new(Real::start(ServerOptions::default()).await?),
    })
}

/// A server of `kind` without server-side sharded lists and watches: the simulator with its
/// stand-in switched off, or kube-apiserver with the `ShardedListAndWatch` gate off. Both ignore
/// a `shardSelector`, as a server older than Kubernetes 1.36 does.
pub async fn start_without_sharding(kind: ServerKind) -> Result<Arc<dyn Backend>, Failure> {
    Ok(match kind {
        ServerKind::Sim => Arc::new(
            SimServer::builder()
                .sharded_list_and_watch(false)
                .start()
                .await?,
        ),
        ServerKind::Real => {
            let mut options = ServerOptions::default();
            for (gate, on) in &mut options.feature_gates {
                if gate == "ShardedListAndWatch" {
                    *on = false;
                }
            }
            Arc::new(Real::start(options).await?)
        }
    })
}

/// A churn written through a [`Backend`]: `rate` operations a second for `seconds` over `keys`
/// names `churn-{i}` of `resource` in `namespace`, each a create, a merge patch or a delete as
/// the key's state allows. Resolves to the number of operations done.
pub fn churn(
    backend: Arc<dyn Backend>,
    resource: &'static str,
    namespace: String,
    keys: usize,
    rate: f64,
    seconds: f64,
    template: fn(&str) -> Value,
) -> tokio::task::JoinHandle<Result<u64, String>> {
    tokio::spawn(async move {
        let mut present = vec![false; keys];
        let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
        let total = (rate * seconds) as u64;
        for op in 0..total {
            ticker.tick().await;
            let i = rand::rng().random_range(0..keys);
            let name = format!("churn-{i}");
            let ns = Some(namespace.as_str());
            if !present[i] {
                backend.create(resource, ns, template(&name))?;
                present[i] = true;
            } else if rand::rng().random_bool(0.25) {
                backend.delete(resource, ns, &name)?;
                present[i] = false;
            } else {
                let patch = json!({"metadata": {"annotations": {"op": op.to_string()}}});
                backend.merge_patch(resource, ns, &name, patch)?;
            }
        }
        Ok(total)
    })
}
