//! [`TestServer`]: the API server a controller's own tests run against, chosen by one switch:
//! this simulator by default, a real kube-apiserver and etcd (the project's `real-apiserver`,
//! built from the Go module proxy and cached under `target/`) when `REAL_APISERVER=1` is set.
//! The same test then runs with `cargo test` on the simulator, in milliseconds, and with
//! `REAL_APISERVER=1 cargo test` on the server its controller will meet in a cluster, as
//! controller-runtime's envtest does for Go controllers.
//!
//! Both are reached through a kubeconfig file ([`TestServer::kubeconfig_path`]), as a
//! controller in a cluster is configured, and both can be seeded and read back by plain
//! resource names (`"configmaps"`, `"deployments.apps"`, `"widgets.example.com"`) through an
//! admin of their own, independent of the client under test.
//!
//! What a test may not expect of the real server: no controllers run beside it (no garbage
//! collection by owner references, namespaces stay `Terminating`, no Pod made from a
//! Deployment) and nothing that only the simulator can do (its faults, its write log, its
//! history): [`TestServer::sim`] answers the simulator when the test needs it, `None` on a real
//! server, so that such a test can skip those checks or itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use real_apiserver::{RealServer, ServerOptions, User};
use serde_json::Value;

use crate::sim_server::{SimError, SimServer};
use crate::status::ApiError;

/// The switch: `REAL_APISERVER=1` picks a real kube-apiserver.
pub const REAL_APISERVER_VARIABLE: &str = "REAL_APISERVER";

/// Why a [`TestServer`] could not start, or refused a seeding request.
#[derive(Debug, thiserror::Error)]
pub enum TestServerError {
    /// The simulator did not start.
    #[error("the simulated API server did not start: {0}")]
    Sim(#[from] SimError),
    /// The real kube-apiserver or etcd was not built or did not start (the error names the
    /// missing piece: no Go, the module proxy unreachable, a port in use, ...).
    #[error("the real kube-apiserver did not start: {0}")]
    Real(#[from] real_apiserver::Error),
    /// The kubeconfig file could not be written.
    #[error("writing the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The server answered a seeding or reading request with an error status.
    #[error("{what}: {code} {message}")]
    Refused {
        /// The request.
        what: String,
        /// The HTTP status.
        code: u16,
        /// The server's message (its `Status` body on a real server).
        message: String,
    },
    /// A resource name the real server's discovery does not list.
    #[error("the server serves no resource {0:?} (a plural, with its group after a dot)")]
    UnknownResource(String),
}

/// Where a resource lives on a real server, from its discovery.
#[derive(Debug, Clone)]
struct Address {
    /// `/api/v1` or `/apis/group/version`.
    prefix: String,
    api_version: String,
    kind: String,
    plural: String,
    namespaced: bool,
}

/// A real kube-apiserver and what its discovery told.
struct Real {
    server: RealServer,
    addresses: Mutex<HashMap<String, Address>>,
}

enum Inner {
    Sim(SimServer),
    Real(Box<Real>),
}

/// The API server a controller's tests run against: the simulator, or a real kube-apiserver
/// and etcd when `REAL_APISERVER=1`, both reached through a kubeconfig file. A real server runs
/// no controllers beside it (no garbage collection, namespaces stay `Terminating`) and has none
/// of the simulator's faults, write log or history: [`TestServer::sim`] is `None` there.
///
/// ```no_run
/// use sim_apiserver::TestServer;
///
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let server = TestServer::start().await?; // REAL_APISERVER=1 cargo test: a real one
/// server.create("configmaps", Some("default"), serde_json::json!({"metadata": {"name": "a"}}))?;
/// // Point the controller under test at it as it would be in a cluster:
/// println!("KUBECONFIG={}", server.kubeconfig_path().display());
/// let stored = server.get("configmaps", Some("default"), "a")?;
/// assert_eq!(stored["metadata"]["name"], "a");
/// server.stop().await?;
/// # Ok(()) }
/// ```
pub struct TestServer {
    inner: Inner,
    kubeconfig: PathBuf,
    /// The kubeconfig's folder, when this server wrote one (the simulator's), removed on drop.
    _written: Option<Written>,
}

/// A folder this server wrote, removed when dropped.
struct Written(PathBuf);

impl Drop for Written {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("real", &self.is_real())
            .field("url", &self.url())
            .field("kubeconfig", &self.kubeconfig)
            .finish()
    }
}

impl TestServer {
    /// Starts the server the environment asks for: a real kube-apiserver and etcd when
    /// `REAL_APISERVER=1` (built first when missing, about five minutes on 2 cores; cached
    /// after), else the simulator (HTTPS with a bearer token, on a free loopback port).
    pub async fn start() -> Result<TestServer, TestServerError> {
        if std::env::var(REAL_APISERVER_VARIABLE).is_ok_and(|v| v == "1") {
            TestServer::start_real(ServerOptions::default()).await
        } else {
            TestServer::start_sim().await
        }
    }

    /// Starts the simulator, whatever the environment says.
    pub async fn start_sim() -> Result<TestServer, TestServerError> {
        let sim = SimServer::builder()
            .tls(true)
            .token("test-server")
            .start()
            .await?;
        let dir = std::env::temp_dir().join(format!(
            "sim-test-server-{}-{}",
            std::process::id(),
            sim.addr().port()
        ));
        let kubeconfig = dir.join("kubeconfig");
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&kubeconfig, sim.kubeconfig()))
            .map_err(|source| TestServerError::Kubeconfig {
                path: kubeconfig.clone(),
                source,
            })?;
        Ok(TestServer {
            inner: Inner::Sim(sim),
            kubeconfig,
            _written: Some(Written(dir)),
        })
    }

    /// Starts a real kube-apiserver and etcd with `options`, whatever the environment says.
    pub async fn start_real(options: ServerOptions) -> Result<TestServer, TestServerError> {
        // Building and starting block (a build takes minutes): off the runtime's workers.
        let server = tokio::task::spawn_blocking(move || RealServer::start(options))
            .await
            .map_err(|e| {
                TestServerError::Real(real_apiserver::Error::Io {
                    what: "starting the real kube-apiserver".into(),
                    source: std::io::Error::other(e.to_string()),
                })
            })??;
        let kubeconfig = server.kubeconfig().to_path_buf();
        Ok(TestServer {
            inner: Inner::Real(Box::new(Real {
                server,
                addresses: Mutex::default(),
            })),
            kubeconfig,
            _written: None,
        })
    }

    /// Whether this is a real kube-apiserver.
    pub fn is_real(&self) -> bool {
        matches!(self.inner, Inner::Real(_))
    }

    /// The simulator, for what only it can do (faults, its write log, every version of an
    /// object); `None` on a real server.
    pub fn sim(&self) -> Option<&SimServer> {
        match &self.inner {
            Inner::Sim(sim) => Some(sim),
            Inner::Real(_) => None,
        }
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        match &self.inner {
            Inner::Sim(sim) => sim.url(),
            Inner::Real(real) => real.server.url().to_string(),
        }
    }

    /// A kubeconfig file whose current context reaches the server as an admin (a bearer token
    /// on the simulator, a client certificate on the real server), with its CA.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// Creates `object` in `namespace` (`None` for a cluster-scoped resource), as an admin:
    /// the server's answer. `resource` is a plural with its group after a dot (`"pods"`,
    /// `"deployments.apps"`); `apiVersion` and `kind` are filled in when missing.
    pub fn create(
        &self,
        resource: &str,
        namespace: Option<&str>,
        object: Value,
    ) -> Result<Value, TestServerError> {
        match &self.inner {
            Inner::Sim(sim) => sim
                .create(resource, namespace, object)
                .map_err(|e| refused(format!("creating a {resource}"), e)),
            Inner::Real(real) => real.create(resource, namespace, object),
        }
    }

    /// One object, as an admin reads it.
    pub fn get(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, TestServerError> {
        match &self.inner {
            Inner::Sim(sim) => sim
                .get(resource, namespace, name)
                .map_err(|e| refused(format!("reading {resource} {name}"), e)),
            Inner::Real(real) => {
                let address = real.address(resource)?;
                real.send("GET", &address.path(namespace, Some(name)), None)
            }
        }
    }

    /// Every object of `resource` in `namespace` (`None`: all namespaces, or a cluster-scoped
    /// resource).
    pub fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, TestServerError> {
        match &self.inner {
            Inner::Sim(sim) => sim
                .list(resource, namespace)
                .map_err(|e| refused(format!("listing {resource}"), e)),
            Inner::Real(real) => {
                let address = real.address(resource)?;
                let list = real.send("GET", &address.path(namespace, None), None)?;
                Ok(match list.get("items") {
                    Some(Value::Array(items)) => items.clone(),
                    _ => Vec::new(),
                })
            }
        }
    }

    /// Deletes one object (at once where the server allows it: on a real server, finalizers
    /// and graceful deletion still apply).
    pub fn delete(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), TestServerError> {
        match &self.inner {
            Inner::Sim(sim) => sim
                .delete(resource, namespace, name)
                .map(drop)
                .map_err(|e| refused(format!("deleting {resource} {name}"), e)),
            Inner::Real(real) => {
                let address = real.address(resource)?;
                real.send("DELETE", &address.path(namespace, Some(name)), None)
                    .map(drop)
            }
        }
    }

    /// Stops the server: the simulator at once; a real one's kube-apiserver and etcd, their
    /// data removed (dropping the server does the same, and so does a test that panics).
    pub async fn stop(self) -> Result<(), TestServerError> {
        match self.inner {
            Inner::Sim(sim) => {
                drop(sim);
                Ok(())
            }
            Inner::Real(real) => tokio::task::spawn_blocking(move || real.server.stop())
                .await
                .map_err(|e| {
                    TestServerError::Real(real_apiserver::Error::Io {
                        what: "stopping the real kube-apiserver".into(),
                        source: std::io::Error::other(e.to_string()),
                    })
                })?
                .map_err(TestServerError::Real),
        }
    }
}

fn refused(what: String, e: ApiError) -> TestServerError {
    TestServerError::Refused {
        what,
        code: e.code,
        message: e.message,
    }
}

impl Address {
    fn path(&self, namespace: Option<&str>, name: Option<&str>) -> String {
        let mut path = self.prefix.clone();
        if let Some(ns) = namespace.filter(|_| self.namespaced) {
            path.push_str("/namespaces/");
            path.push_str(ns);
        }
        path.push('/');
        path.push_str(&self.plural);
        if let Some(name) = name {
            path.push('/');
            path.push_str(name);
        }
        path
    }
}

impl Real {
    /// One request as the admin: the answer's JSON, or the error status.
    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, TestServerError> {
        let text = body.map(Value::to_string);
        let body = text.as_deref().map(|t| ("application/json", t.as_bytes()));
        let (code, answer) = self.server.request(User::Admin, method, path, body)?;
        if !(200..300).contains(&code) {
            let message = serde_json::from_str::<Value>(&answer)
                .ok()
                .and_then(|s| s["message"].as_str().map(str::to_string))
                .unwrap_or(answer);
            return Err(TestServerError::Refused {
                what: format!("{method} {path}"),
                code,
                message,
            });
        }
        serde_json::from_str(&answer).map_err(|e| TestServerError::Refused {
            what: format!("{method} {path}"),
            code,
            message: format!("an answer that is not JSON: {e}"),
        })
    }

    /// Where `resource` (`plural` or `plural.group`) lives: the group's preferred version and
    /// the resource's kind and scope, from discovery, asked once per resource.
    fn address(&self, resource: &str) -> Result<Address, TestServerError> {
        if let Some(known) = self
            .addresses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(resource)
        {
            return Ok(known.clone());
        }
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        let (prefix, api_version) = if group.is_empty() {
            ("/api/v1".to_string(), "v1".to_string())
        } else {
            let found = self.send("GET", &format!("/apis/{group}"), None);
            let group_version = match found {
                Ok(g) => g["preferredVersion"]["groupVersion"]
                    .as_str()
                    .map(str::to_string),
                Err(TestServerError::Refused { code: 404, .. }) => None,
                Err(e) => return Err(e),
            }
            .ok_or_else(|| TestServerError::UnknownResource(resource.to_string()))?;
            (format!("/apis/{group_version}"), group_version)
        };
        let resources = self.send("GET", &prefix, None)?;
        let entry = resources["resources"]
            .as_array()
            .and_then(|all| all.iter().find(|r| r["name"] == plural))
            .ok_or_else(|| TestServerError::UnknownResource(resource.to_string()))?;
        let address = Address {
            prefix,
            api_version,
            kind: entry["kind"].as_str().unwrap_or_default().to_string(),
            plural: plural.to_string(),
            namespaced: entry["namespaced"].as_bool().unwrap_or(false),
        };
        self.addresses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(resource.to_string(), address.clone());
        Ok(address)
    }

    fn create(
        &self,
        resource: &str,
        namespace: Option<&str>,
        mut object: Value,
    ) -> Result<Value, TestServerError> {
        let address = self.address(resource)?;
        if let Some(fields) = object.as_object_mut() {
            fields
                .entry("apiVersion")
                .or_insert_with(|| Value::from(address.api_version.clone()));
            fields
                .entry("kind")
                .or_insert_with(|| Value::from(address.kind.clone()));
        }
        self.send("POST", &address.path(namespace, None), Some(&object))
    }
}
