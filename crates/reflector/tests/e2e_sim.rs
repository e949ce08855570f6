//! End to end against the simulated API server: real sockets, real TLS, real chunked and
//! HTTP/2 streams. Each test starts its own server.
//!
//! Waiting is event-driven: the store publishes every change on a `watch` channel and tests wait
//! for a predicate (with a generous deadline), never sleeping as synchronisation.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use reflector::delta_fifo::{FifoError, Store};
use reflector::store_index::{CompactObject, DynamicObject, Object, ResourceVersion};
use reflector::{
    BackoffConfig, Client, ClusterConfig, Credentials, Decode, HttpListerWatcher, Reflector,
    ReflectorMetrics, ReflectorOptions, Resource,
};
use serde_json::json;
use sim_apiserver::{ListFault, RequestKind, SimServer};
use tokio_util::sync::CancellationToken;

struct MapStore<K> {
    items: Mutex<BTreeMap<String, Arc<K>>>,
    replaces: AtomicUsize,
    deletes: AtomicUsize,
    rv: Mutex<String>,
    changed: tokio::sync::watch::Sender<u64>,
}

impl<K> Default for MapStore<K> {
    fn default() -> Self {
        MapStore {
            items: Mutex::default(),
            replaces: AtomicUsize::new(0),
            deletes: AtomicUsize::new(0),
            rv: Mutex::default(),
            changed: tokio::sync::watch::channel(0).0,
        }
    }
}

fn key<K: Object>(o: &K) -> String {
    format!("{}/{}", o.namespace().unwrap_or(""), o.name())
}

impl<K: Object> MapStore<K> {
    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }
    fn len(&self) -> usize {
        self.items.lock().len()
    }
    fn has(&self, k: &str) -> bool {
        self.items.lock().contains_key(k)
    }
    /// Waits until `pred` holds (re-checked after every store change).
    async fn until(&self, what: &str, pred: impl Fn(&Self) -> bool) {
        let mut rx = self.changed.subscribe();
        let wait = async {
            while !pred(self) {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        if tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .is_err()
        {
            panic!("timed out waiting for {what}");
        }
    }
}

impl<K: Object> Store<K> for MapStore<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.items.lock().insert(key(obj.as_ref()), obj);
        self.bump();
        Ok(())
    }
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.add(obj)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.items.lock().remove(&key(obj.as_ref()));
        self.deletes.fetch_add(1, Ordering::SeqCst);
        self.bump();
        Ok(())
    }
    fn replace(&self, list: Vec<Arc<K>>, rv: &ResourceVersion) -> Result<(), FifoError> {
        *self.items.lock() = list.into_iter().map(|o| (key(o.as_ref()), o)).collect();
        *self.rv.lock() = rv.to_string();
        self.replaces.fetch_add(1, Ordering::SeqCst);
        self.bump();
        Ok(())
    }
    fn resync(&self) -> Result<(), FifoError> {
        Ok(())
    }
    fn update_resource_version(&self, rv: &ResourceVersion) {
        *self.rv.lock() = rv.to_string();
        self.bump();
    }
}

type Running<K> = (
    Arc<Reflector<K, HttpListerWatcher<K>, Arc<MapStore<K>>>>,
    Arc<MapStore<K>>,
    CancellationToken,
    tokio::task::JoinHandle<()>,
);

fn config_for(sim: &SimServer) -> ClusterConfig {
    let mut c = ClusterConfig::new(&sim.url()).unwrap();
    if let Some(ca) = sim.ca_pem() {
        c.certificate_authority = Some(ca.as_bytes().to_vec());
    }
    if let Some(t) = sim.token() {
        c.credentials = Credentials::Token(t.into());
    }
    c
}

fn fast_backoff() -> BackoffConfig {
    BackoffConfig {
        initial: Duration::from_millis(10),
        cap: Duration::from_millis(50),
        jitter: 0.0,
        ..Default::default()
    }
}

fn start<K: Decode>(config: &ClusterConfig, options: ReflectorOptions) -> Running<K> {
    let lw = HttpListerWatcher::new(config, Resource::namespaced("", "v1", "pods")).unwrap();
    start_with(lw, options)
}

fn start_with<K: Decode>(lw: HttpListerWatcher<K>, options: ReflectorOptions) -> Running<K> {
    start_recording(lw, options, None)
}

/// Starts a reflector whose watch error handler pushes each error's text to `errors`, set before
/// it runs, so not even its first list's error can be missed.
fn start_recording<K: Decode>(
    lw: HttpListerWatcher<K>,
    options: ReflectorOptions,
    errors: Option<Arc<Mutex<Vec<String>>>>,
) -> Running<K> {
    let metrics = Arc::new(ReflectorMetrics::default());
    let lw = lw.count_bytes_into(metrics.clone());
    let store = Arc::new(MapStore::default());
    let r = Arc::new(Reflector::new(lw, store.clone(), options).with_metrics(metrics));
    if let Some(errors) = errors {
        r.set_watch_error_handler(Arc::new(move |e: &reflector::ReflectorError| {
            errors.lock().push(e.to_string())
        }));
    }
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (r, c) = (r.clone(), cancel.clone());
        async move { r.run(c).await }
    });
    (r, store, cancel, task)
}

fn create_pods(sim: &SimServer, ns: &str, n: usize) {
    for i in 0..n {
        sim.create("pods", Some(ns), json!({"metadata": {"name": format!("p{i}"), "labels": {"app": "web"}}, "spec": {"nodeName": "n1"}}))
            .unwrap();
    }
}

async fn stop(cancel: CancellationToken, task: tokio::task::JoinHandle<()>) {
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .expect("stops within a second")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paginated_list_of_10k_objects_fills_the_store() {
    let sim = SimServer::builder()
        .watch_cache(false)
        .start()
        .await
        .unwrap();
    create_pods(&sim, "default", 10_000);
    let (r, store, cancel, task) = start::<CompactObject>(&config_for(&sim), list_then_watch());
    store.until("10k objects", |s| s.len() == 10_000).await;
    let m = r.metrics();
    assert_eq!(m.lists, 1);
    assert_eq!(m.pages, 20, "10k objects in pages of 500");
    assert_eq!(m.listed_items, 10_000);
    assert!(m.bytes > 10_000 * 50, "{m:?}");
    assert_eq!(store.replaces.load(Ordering::SeqCst), 1);
    assert!(store
        .items
        .lock()
        .get("default/p9999")
        .unwrap()
        .raw()
        // JSON by default for a CompactObject, whose `decode` reads JSON.
        .starts_with(b"{"));
    stop(cancel, task).await;
}

/// H6.1: a list's continuation pages are not counted against the client's request budget
/// again. With one request every 1,000 s, a list of 20 pages still completes: only its first
/// page took a token (counted as each page waiting, it would take five hours).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lists_continuation_pages_do_not_wait_for_the_rate_limiter() {
    let sim = SimServer::builder()
        .watch_cache(false)
        .start()
        .await
        .unwrap();
    create_pods(&sim, "default", 200);
    let mut config = config_for(&sim);
    config.rate_limit = Some(reflector::RateLimit::new(0.001, 1));
    let options = ReflectorOptions {
        page_size: 10,
        ..list_then_watch()
    };
    let (r, store, cancel, task) = start::<CompactObject>(&config, options);
    store.until("200 objects", |s| s.len() == 200).await;
    assert_eq!(r.metrics().pages, 20, "200 objects in pages of 10");
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflector_syncs_and_watches_a_server_that_compresses_its_lists() {
    let sim = SimServer::builder()
        .watch_cache(false)
        .gzip_responses(true)
        .gzip_min_bytes(16 << 10)
        .start()
        .await
        .unwrap();
    create_pods(&sim, "default", 2_000);
    let (r, store, cancel, task) = start::<CompactObject>(&config_for(&sim), list_then_watch());
    store.until("2k objects", |s| s.len() == 2_000).await;
    assert_eq!(r.metrics().pages, 4, "2k objects in pages of 500");
    assert_eq!(sim.counters().gzip_responses, 4, "every page compressed");
    // The watch that follows is plain JSON lines.
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "late"}}),
    )
    .unwrap();
    store
        .until("the watched pod", |s| s.has("default/late"))
        .await;
    assert_eq!(sim.counters().gzip_responses, 4);
    assert_eq!(store.replaces.load(Ordering::SeqCst), 1);
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_watch_connection_resumes_without_relisting() {
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 3);
    let (r, store, cancel, task) = start::<DynamicObject>(
        &config_for(&sim),
        ReflectorOptions {
            backoff: fast_backoff(),
            ..list_then_watch()
        },
    );
    store.until("initial list", |s| s.len() == 3).await;
    // An event first: a watch dropped with no event within a second is a "very short watch",
    // which does relist (C11.2).
    create_pods_named(&sim, "pre", 1);
    store.until("first watch event", |s| s.len() == 4).await;
    // Later watches close cleanly after each event; the current one is reset mid-event.
    sim.faults().end_watches_after(1).reset_mid_chunk();
    create_pods_named(&sim, "x", 5);
    store
        .until("all events after the reset", |s| s.len() == 9)
        .await;
    assert_eq!(sim.counters().lists, 1, "no relist");
    assert!(r.metrics().watches >= 6, "{:?}", r.metrics());
    stop(cancel, task).await;
}

fn create_pods_named(sim: &SimServer, prefix: &str, n: usize) {
    for i in 0..n {
        sim.create(
            "pods",
            Some("default"),
            json!({"metadata": {"name": format!("{prefix}{i}")}}),
        )
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_watch_after_compaction_relists_and_drops_objects_deleted_while_away() {
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 5);
    let (r, store, cancel, task) = start::<DynamicObject>(
        &config_for(&sim),
        ReflectorOptions {
            backoff: fast_backoff(),
            ..list_then_watch()
        },
    );
    store.until("initial list", |s| s.len() == 5).await;
    // The next event becomes a 410 ERROR that ends the watch; the deletions happen "while away".
    sim.faults().error_event(410);
    sim.delete("pods", Some("default"), "p0").unwrap();
    sim.delete("pods", Some("default"), "p1").unwrap();
    sim.faults().compact();
    store
        .until("relist without p0 and p1", |s| {
            !s.has("default/p0") && !s.has("default/p1") && s.len() == 3
        })
        .await;
    assert_eq!(
        store.deletes.load(Ordering::SeqCst),
        0,
        "removed by the relist, not by watch events"
    );
    assert_eq!(store.replaces.load(Ordering::SeqCst), 2);
    assert!(r.metrics().expired >= 1);
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_advance_the_resource_version() {
    let sim = SimServer::builder()
        .bookmark_interval(Duration::from_millis(50))
        .start()
        .await
        .unwrap();
    create_pods(&sim, "default", 2);
    let (r, store, cancel, task) = start::<DynamicObject>(&config_for(&sim), list_then_watch());
    store.until("initial list", |s| s.len() == 2).await;
    for i in 0..3 {
        sim.create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": format!("c{i}")}}),
        )
        .unwrap();
    }
    let target = sim.revision().to_string();
    store
        .until("a bookmark at the latest revision", |s| {
            *s.rv.lock() == target
        })
        .await;
    assert_eq!(r.last_sync_resource_version(), target);
    assert!(r.metrics().bookmarks >= 1);
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_and_failing_requests_back_off_and_recover() {
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 2);
    sim.faults()
        .fail_next(RequestKind::List, 500, 2)
        .fail_next(RequestKind::Watch, 429, 3);
    let errors = Arc::new(AtomicUsize::new(0));
    let (r, store, cancel, task) = {
        let lw = HttpListerWatcher::new(&config_for(&sim), Resource::namespaced("", "v1", "pods"))
            .unwrap();
        let store = Arc::new(MapStore::<DynamicObject>::default());
        let r = Arc::new(Reflector::new(
            lw,
            store.clone(),
            ReflectorOptions {
                backoff: fast_backoff(),
                ..list_then_watch()
            },
        ));
        let e = errors.clone();
        r.set_watch_error_handler(Arc::new(move |_| {
            e.fetch_add(1, Ordering::SeqCst);
        }));
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (r, c) = (r.clone(), cancel.clone());
            async move { r.run(c).await }
        });
        (r, store, cancel, task)
    };
    store.until("list after two 500s", |s| s.len() == 2).await;
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "late"}}),
    )
    .unwrap();
    store
        .until("watch after three 429s", |s| s.has("default/late"))
        .await;
    assert_eq!(
        errors.load(Ordering::SeqCst),
        2,
        "each failed list reaches the error handler"
    );
    assert_eq!(sim.counters().lists, 3);
    assert!(sim.counters().watches >= 4);
    assert_eq!(
        r.metrics().backoff_waits,
        2 + 3,
        "two after failed lists, three for the 429s"
    );
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_line_or_an_unknown_event_type_ends_the_watch_and_the_reflector_relists() {
    for unknown_type in [false, true] {
        let sim = SimServer::start().await.unwrap();
        create_pods(&sim, "default", 2);
        let (_r, store, cancel, task) = start_with(pods_lw(&sim), fast());
        store.until("initial list", |s| s.len() == 2).await;
        if unknown_type {
            sim.faults().unknown_event_type();
        } else {
            sim.faults().malformed_line();
        }
        sim.create(
            "pods",
            Some("default"),
            json!({"metadata": {"name": "after"}}),
        )
        .unwrap();
        store
            .until("the object, via the relist", |s| s.has("default/after"))
            .await;
        store
            .until("second list", |s| s.replaces.load(Ordering::SeqCst) == 2)
            .await;
        assert_eq!(sim.counters().lists, 2, "unknown type: {unknown_type}");
        assert_eq!(store.deletes.load(Ordering::SeqCst), 0);
        stop(cancel, task).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_bearer_token() {
    let sim = SimServer::builder()
        .tls(true)
        .token("s3cret")
        .start()
        .await
        .unwrap();
    create_pods(&sim, "default", 3);
    let (_r, store, cancel, task) = start::<DynamicObject>(&config_for(&sim), list_then_watch());
    store.until("list over TLS", |s| s.len() == 3).await;
    stop(cancel, task).await;

    let mut wrong = config_for(&sim);
    wrong.credentials = Credentials::Token("nope".into());
    let err = Client::new(&wrong)
        .unwrap()
        .get_bytes("/api/v1/pods")
        .await
        .unwrap_err();
    assert_eq!(err.status().map(|s| s.code), Some(401), "{err}");

    let mut untrusted = config_for(&sim);
    untrusted.certificate_authority = None;
    assert!(Client::new(&untrusted)
        .unwrap()
        .get_bytes("/api/v1/pods")
        .await
        .is_err());
    untrusted.insecure_skip_tls_verify = true;
    assert!(Client::new(&untrusted)
        .unwrap()
        .get_bytes("/api/v1/pods")
        .await
        .is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_client_certificate() {
    let sim = SimServer::builder()
        .tls(true)
        .client_cert_auth(true)
        .start()
        .await
        .unwrap();
    create_pods(&sim, "default", 2);
    let tls = sim.tls_material().unwrap();
    let mut config = config_for(&sim);
    config.client_certificate = Some(tls.client_cert_pem.as_bytes().to_vec());
    config.client_key = Some(tls.client_key_pem.as_bytes().to_vec().into());
    let (_r, store, cancel, task) = start::<DynamicObject>(&config, list_then_watch());
    store
        .until("list with a client certificate", |s| s.len() == 2)
        .await;
    stop(cancel, task).await;
    let mut key_only = config_for(&sim);
    key_only.client_key = Some(tls.client_key_pem.as_bytes().to_vec().into());
    assert!(
        Client::new(&key_only).is_err(),
        "a key without a certificate is a configuration error"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_is_negotiated_by_alpn_and_usable_as_prior_knowledge() {
    let sim = SimServer::builder()
        .tls(true)
        .token("t")
        .start()
        .await
        .unwrap();
    let resp = Client::new(&config_for(&sim))
        .unwrap()
        .send("/api/v1/pods")
        .await
        .unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    let h1 = SimServer::builder()
        .tls(true)
        .http2(false)
        .token("t")
        .start()
        .await
        .unwrap();
    let resp = Client::new(&config_for(&h1))
        .unwrap()
        .send("/api/v1/pods")
        .await
        .unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_11);

    let plain = SimServer::start().await.unwrap();
    create_pods(&plain, "default", 4);
    let mut config = config_for(&plain);
    config.http2_prior_knowledge = true;
    let resp = Client::new(&config)
        .unwrap()
        .send("/api/v1/pods")
        .await
        .unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    let (_r, store, cancel, task) = start::<DynamicObject>(&config, list_then_watch());
    store.until("list over h2c", |s| s.len() == 4).await;
    plain
        .create("pods", Some("default"), json!({"metadata": {"name": "w"}}))
        .unwrap();
    store.until("watch over h2c", |s| s.has("default/w")).await;
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_the_initial_state_is_streamed_by_a_watch_list_without_a_list() {
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 50);
    let (r, store, cancel, task) =
        start::<CompactObject>(&config_for(&sim), ReflectorOptions::default());
    store
        .until("streamed initial state", |s| {
            s.len() == 50 && s.replaces.load(Ordering::SeqCst) == 1
        })
        .await;
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "later"}}),
    )
    .unwrap();
    store
        .until("event on the same stream", |s| s.has("default/later"))
        .await;
    assert_eq!(sim.counters().lists, 0);
    assert_eq!(r.metrics().lists, 0);
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_within_a_second_and_closes_the_watch() {
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 1);
    let (_r, store, cancel, task) = start::<DynamicObject>(&config_for(&sim), list_then_watch());
    store.until("initial list", |s| s.len() == 1).await;
    let opened = async {
        while sim.watcher_count() == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), opened)
        .await
        .unwrap();
    stop(cancel, task).await;
    let closed = async {
        while sim.watcher_count() != 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(1), closed)
        .await
        .expect("the server sees the watch closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_and_namespace_narrow_list_and_watch() {
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 2);
    create_pods(&sim, "other", 2);
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "db", "labels": {"app": "db"}}}),
    )
    .unwrap();
    let lw = HttpListerWatcher::<DynamicObject>::new(
        &config_for(&sim),
        Resource::namespaced("", "v1", "pods"),
    )
    .unwrap()
    .namespace("default")
    .label_selector("app=web".parse().unwrap());
    let store = Arc::new(MapStore::<DynamicObject>::default());
    let r = Arc::new(Reflector::new(lw, store.clone(), list_then_watch()));
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (r, c) = (r.clone(), cancel.clone());
        async move { r.run(c).await }
    });
    store
        .until("filtered list", |s| s.replaces.load(Ordering::SeqCst) == 1)
        .await;
    assert_eq!(
        store.items.lock().keys().cloned().collect::<Vec<_>>(),
        ["default/p0", "default/p1"]
    );
    sim.create(
        "pods",
        Some("other"),
        json!({"metadata": {"name": "o", "labels": {"app": "web"}}}),
    )
    .unwrap();
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "n", "labels": {"app": "web"}}}),
    )
    .unwrap();
    store.until("matching event", |s| s.has("default/n")).await;
    assert!(!store.has("other/o"));
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_with_an_exec_plugin_reaches_a_tls_server() {
    let sim = SimServer::builder()
        .tls(true)
        .token("from-plugin")
        .start()
        .await
        .unwrap();
    create_pods(&sim, "default", 1);
    let dir = std::env::temp_dir().join(format!("reflector-e2e-kubeconfig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.crt"), sim.ca_pem().unwrap()).unwrap();
    let credential = r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-plugin","expirationTimestamp":"2999-01-01T00:00:00Z"}}"#;
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: sim\nclusters:\n- name: sim\n  cluster:\n    server: {}\n    certificate-authority: ca.crt\ncontexts:\n- name: sim\n  context: {{cluster: sim, user: plugin, namespace: default}}\nusers:\n- name: plugin\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: sh\n      args: [cred.sh]\n",
        sim.url()
    );
    std::fs::write(dir.join("cred.sh"), format!("echo '{credential}'\n")).unwrap();
    std::fs::write(dir.join("config"), kubeconfig).unwrap();
    let mut config = ClusterConfig::from_kubeconfig_files(&[dir.join("config")], None).unwrap();
    // The plugin runs in the test's working directory: give the script's full path.
    if let Credentials::Exec(exec) = &mut config.credentials {
        exec.args = vec![dir.join("cred.sh").display().to_string()];
    }
    let body = Client::new(&config)
        .unwrap()
        .get_bytes("/api/v1/namespaces/default/pods")
        .await
        .unwrap();
    let list = reflector::ObjectList::<DynamicObject>::from_json(&body).unwrap();
    assert_eq!(list.items.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The default backoff (0.8 s doubling, with jitter) measured on tokio's paused clock: the run
/// takes virtual time, not wall time.
#[tokio::test(start_paused = true)]
async fn throttled_watches_wait_the_default_backoff_on_a_paused_clock() {
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 2);
    sim.faults()
        .fail_next(RequestKind::List, 500, 1)
        .fail_next(RequestKind::Watch, 429, 2);
    let mut config = config_for(&sim);
    // Only the backoff timers matter here: no request or keep-alive timers to auto-advance to.
    config.request_timeout = None;
    config.keep_alive_interval = None;
    let started = tokio::time::Instant::now();
    let wall = std::time::Instant::now();
    let (r, store, cancel, task) = start::<DynamicObject>(&config, list_then_watch());
    store.until("list after a 500", |s| s.len() == 2).await;
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "late"}}),
    )
    .unwrap();
    store
        .until("watch after two 429s", |s| s.has("default/late"))
        .await;
    let waited = started.elapsed();
    // At least one delay after the failed list, then two for the 429s: 0.8 + 0.8 + 1.6 s. (The
    // paused clock may also jump to other timers while sockets are busy, so no upper bound.)
    assert!(waited >= Duration::from_millis(3200), "{waited:?}");
    assert!(r.metrics().backoff_waits >= 3, "{:?}", r.metrics());
    assert!(
        wall.elapsed() < Duration::from_secs(3),
        "paused time, not wall time"
    );
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_recognised_as_such() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = ClusterConfig::new(&format!("http://127.0.0.1:{port}")).unwrap();
    let err = Client::new(&config)
        .unwrap()
        .get_bytes("/api/v1/pods")
        .await
        .unwrap_err();
    assert!(err.is_connection_refused(), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_list_names_the_resource_not_the_rust_type() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = ClusterConfig::new(&format!("http://127.0.0.1:{port}")).unwrap();
    for (resource, name) in [
        (
            Resource::namespaced("example.com", "v1", "widgets"),
            "widgets.example.com",
        ),
        (Resource::namespaced("", "v1", "pods"), "pods"),
    ] {
        let lw = HttpListerWatcher::<DynamicObject>::new(&config, resource).unwrap();
        let store = Arc::new(MapStore::<DynamicObject>::default());
        let r = Reflector::new(lw, store, list_then_watch());
        let err = r
            .list_and_watch(&CancellationToken::new())
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("failed to list {name}: ")),
            "{text}"
        );
        assert!(!text.contains("DynamicObject"), "{text}");
        assert!(format!("{r:?}").contains(name), "{r:?}");
    }
}

/// `Client::watch` over each protocol: HTTP/1.1 (plain and TLS) on a connection of its own that
/// the body drives, HTTP/2 (learned by ALPN on the watch's own connection attempt, or by prior
/// knowledge) on the pool's shared connection. Each streams events, reports an error status as a
/// typed error, and closes the watch on the server when the body is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_watch_streams_and_closes_over_every_protocol() {
    use http_body_util::BodyExt as _;
    let plain = SimServer::start().await.unwrap();
    let tls_h1 = SimServer::builder()
        .tls(true)
        .http2(false)
        .token("t")
        .start()
        .await
        .unwrap();
    let tls_h2 = SimServer::builder()
        .tls(true)
        .token("t")
        .start()
        .await
        .unwrap();
    let mut h2c = config_for(&plain);
    h2c.http2_prior_knowledge = true;
    // (name, config, server, whether the watch gets a dedicated connection)
    let cases = [
        ("HTTP/1.1", config_for(&plain), &plain, true),
        ("HTTPS HTTP/1.1", config_for(&tls_h1), &tls_h1, true),
        ("HTTPS HTTP/2 by ALPN", config_for(&tls_h2), &tls_h2, false),
        ("h2c prior knowledge", h2c, &plain, false),
    ];
    for (name, config, sim, dedicated) in cases {
        let client = Client::new(&config).unwrap();
        // Twice on one client: for HTTP/2 by ALPN, the first watch learns the protocol.
        for round in 0..2 {
            let pod = format!("p-{}-{round}", name.len());
            sim.create("pods", Some("w"), json!({"metadata": {"name": pod}}))
                .unwrap();
            let before = sim.watcher_count();
            let mut body = client
                .watch(
                    "/api/v1/namespaces/w/pods?watch=true&resourceVersion=0",
                    "application/json",
                )
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .body;
            assert!(
                format!("{body:?}").contains(&format!("dedicated_connection: {dedicated}")),
                "{name}: {body:?}"
            );
            let mut text = Vec::new();
            while !String::from_utf8_lossy(&text).contains(&pod) {
                let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
                    .await
                    .unwrap_or_else(|_| panic!("{name}: no event"))
                    .expect("the watch stays open")
                    .unwrap();
                text.extend_from_slice(&frame.into_data().unwrap_or_default());
            }
            assert!(String::from_utf8_lossy(&text).contains(r#""type":"ADDED""#));
            assert_eq!(sim.watcher_count(), before + 1, "{name}");
            drop(body);
            let closed = async {
                while sim.watcher_count() != before {
                    tokio::task::yield_now().await;
                }
            };
            tokio::time::timeout(Duration::from_secs(5), closed)
                .await
                .unwrap_or_else(|_| panic!("{name}: the server sees the watch closed"));
        }
        let err = client
            .watch(
                "/api/v1/namespaces/w/nosuchthings?watch=true",
                "application/json",
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err, reflector::ClientError::NotFound(s) if s.code == 404),
            "{name}: {err:?}"
        );
    }
}

/// A dedicated HTTP/1.1 watch connection reads into a fixed-size buffer: events several times
/// that size (a big ConfigMap-like annotation) arrive whole, between small ones, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_events_larger_than_the_read_buffer_arrive_whole() {
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 1);
    let (_r, store, cancel, task) = start::<CompactObject>(&config_for(&sim), list_then_watch());
    store.until("initial list", |s| s.len() == 1).await;
    let sizes = [300_000usize, 10, 1_000_000, 5, 200_000];
    for (i, size) in sizes.iter().enumerate() {
        let blob: String = (0..*size)
            .map(|j| char::from(b'a' + ((i + j) % 26) as u8))
            .collect();
        sim.create(
            "pods",
            Some("default"),
            json!({"metadata": {"name": format!("big{i}"), "annotations": {"blob": blob}}}),
        )
        .unwrap();
    }
    store
        .until("every big event", |s| s.len() == 1 + sizes.len())
        .await;
    for (i, size) in sizes.iter().enumerate() {
        let items = store.items.lock();
        let obj = items.get(&format!("default/big{i}")).unwrap();
        let blob = obj.annotation("blob").unwrap();
        assert_eq!(blob.len(), *size, "big{i}");
        assert!(blob
            .bytes()
            .enumerate()
            .all(|(j, b)| b == b'a' + ((i + j) % 26) as u8));
    }
    stop(cancel, task).await;
}

// The simulator's misbehaving-server modes, against the real client: nothing cached is lost, every
// failure is retried after a backoff, and the reflector recovers once the server behaves.

fn pods_lw(sim: &SimServer) -> HttpListerWatcher<DynamicObject> {
    HttpListerWatcher::new(&config_for(sim), Resource::namespaced("", "v1", "pods")).unwrap()
}

fn fast() -> ReflectorOptions {
    ReflectorOptions {
        backoff: fast_backoff(),
        ..list_then_watch()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relists_answered_with_what_is_not_a_list_keep_the_store_and_then_recover() {
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 3);
    let (r, store, cancel, task) = start_with(pods_lw(&sim), fast());
    store.until("initial list", |s| s.len() == 3).await;
    for (round, fault) in [
        ListFault::StatusWithOk,
        ListFault::EmptyObject,
        ListFault::Html,
        ListFault::NoResourceVersion,
        ListFault::CloseMidBody,
    ]
    .into_iter()
    .enumerate()
    {
        let lists = sim.counters().lists;
        let replaces = store.replaces.load(Ordering::SeqCst);
        let failures = r.metrics().backoff_waits;
        // Two bad answers, and the watch ends with a 410 so that the reflector relists into them.
        sim.faults().list_body(fault, 2).error_event(410);
        let name = format!("new-{round}");
        sim.create("pods", Some("default"), json!({"metadata": {"name": name}}))
            .unwrap();
        store
            .until(&format!("{fault:?}: the relist that works"), |s| {
                s.replaces.load(Ordering::SeqCst) == replaces + 1
            })
            .await;
        assert!(store.has(&format!("default/{name}")), "{fault:?}");
        assert_eq!(store.len(), 4 + round, "{fault:?}: nothing lost");
        assert_eq!(store.deletes.load(Ordering::SeqCst), 0, "{fault:?}");
        assert_eq!(
            sim.counters().lists,
            lists + 3,
            "{fault:?}: two refused, one kept"
        );
        assert!(
            r.metrics().backoff_waits >= failures + 3,
            "{fault:?}: each failed list waits a backoff (and so does the relist itself)"
        );
    }
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_list_answered_with_a_status_never_fills_the_store() {
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 3);
    sim.faults().list_body(ListFault::StatusWithOk, 3);
    let (_r, store, cancel, task) = start_with(pods_lw(&sim), fast());
    store.until("the list that works", |s| s.len() == 3).await;
    assert_eq!(
        store.replaces.load(Ordering::SeqCst),
        1,
        "only the real list was applied"
    );
    assert_eq!(sim.counters().lists, 4);
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeating_continue_token_fails_the_list_instead_of_paging_forever() {
    let sim = SimServer::builder()
        .watch_cache(false)
        .start()
        .await
        .unwrap();
    create_pods(&sim, "default", 5);
    // Answered: page 1 + the repeated token (detected), then page 1 + the same token, now refused
    // by the server (400); the third list pages normally.
    sim.faults().list_body(ListFault::RepeatContinue, 3);
    let errors = Arc::new(Mutex::new(Vec::new()));
    let (_r, store, cancel, task) = start_recording(
        pods_lw(&sim),
        ReflectorOptions {
            page_size: 2,
            ..fast()
        },
        Some(errors.clone()),
    );
    store.until("the whole list", |s| s.len() == 5).await;
    assert_eq!(store.replaces.load(Ordering::SeqCst), 1);
    assert_eq!(
        sim.counters().lists,
        2 + 2 + 3,
        "bounded: two short lists, then three pages"
    );
    assert!(
        errors
            .lock()
            .iter()
            .any(|e| e.contains("repeated the continue token")),
        "{:?}",
        errors.lock()
    );
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_list_body_stops_at_the_page_limit_and_the_page_is_asked_for_smaller() {
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 3);
    // Two endless bodies: the first page at "0", then at "" (the watch cache may have ignored
    // the limit); the third request, for 62 items, is answered.
    sim.faults().list_body(ListFault::Endless, 2);
    let errors = Arc::new(Mutex::new(Vec::new()));
    let (_r, store, cancel, task) = start_recording(
        pods_lw(&sim).max_list_page_bytes(1 << 20),
        fast(),
        Some(errors.clone()),
    );
    store.until("the list that works", |s| s.len() == 3).await;
    assert_eq!(sim.counters().lists, 3);
    assert!(errors.lock().is_empty(), "{:?}", errors.lock());
    stop(cancel, task).await;

    // Endless however small the page: the list fails after five bounded requests, and the
    // next round (after a backoff delay) is answered.
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 3);
    sim.faults().list_body(ListFault::Endless, 5);
    let errors = Arc::new(Mutex::new(Vec::new()));
    let (_r, store, cancel, task) = start_recording(
        pods_lw(&sim).max_list_page_bytes(1 << 20),
        fast(),
        Some(errors.clone()),
    );
    store.until("the list that works", |s| s.len() == 3).await;
    let errors = errors.lock().clone();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("exceeds the maximum of 1048576 bytes"),
        "{errors:?}"
    );
    assert_eq!(sim.counters().lists, 5 + 1);
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_watch_is_ended_by_its_idle_timeout_and_resumed_without_a_relist() {
    let sim = SimServer::start().await.unwrap();
    create_pods(&sim, "default", 2);
    sim.faults().silent_watches(1);
    let errors = Arc::new(Mutex::new(Vec::new()));
    let (_r, store, cancel, task) = start_recording(
        pods_lw(&sim).watch_idle_timeout(Duration::from_millis(800)),
        fast(),
        Some(errors.clone()),
    );
    store.until("initial list", |s| s.len() == 2).await;
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "later"}}),
    )
    .unwrap();
    store
        .until("the change, on the resumed watch", |s| {
            s.has("default/later")
        })
        .await;
    assert_eq!(sim.counters().lists, 1, "resumed, not relisted");
    assert_eq!(sim.counters().watches, 2);
    assert!(
        errors.lock().iter().any(|e| e.contains("received nothing")),
        "{:?}",
        errors.lock()
    );
    stop(cancel, task).await;
}

/// Answers one request on `listener` with an empty pod list and returns the request's head.
async fn capture_one_request(listener: tokio::net::TcpListener) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let (mut socket, _) = listener.accept().await.unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "the client closed before sending a whole request");
        head.extend_from_slice(&buf[..n]);
    }
    let body =
        r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}"#;
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(response.as_bytes()).await.unwrap();
    String::from_utf8_lossy(&head).to_ascii_lowercase()
}

#[tokio::test]
async fn requests_carry_a_user_agent_in_client_go_shape_which_can_be_overridden() {
    for custom in [None, Some("my-controller/1.2.3")] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut config =
            ClusterConfig::new(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        if let Some(agent) = custom {
            config.user_agent = agent.into();
        }
        let client = Client::new(&config).unwrap();
        let server = tokio::spawn(capture_one_request(listener));
        client.get_bytes("/api/v1/pods").await.unwrap();
        let head = server.await.unwrap();
        let agent = head
            .lines()
            .find_map(|l| l.strip_prefix("user-agent: "))
            .unwrap_or_else(|| panic!("no user-agent in {head}"))
            .to_string();
        match custom {
            Some(custom) => assert_eq!(agent, custom),
            None => {
                let version = env!("CARGO_PKG_VERSION");
                // The platform as Go's runtime.GOOS/GOARCH spell it (K7).
                let arch = match std::env::consts::ARCH {
                    "x86_64" => "amd64",
                    "aarch64" => "arm64",
                    "x86" => "386",
                    other => other,
                };
                let os = match std::env::consts::OS {
                    "macos" => "darwin",
                    other => other,
                };
                assert!(
                    agent.ends_with(&format!("/{version} ({os}/{arch}) informer-rs/{version}")),
                    "{agent}"
                );
            }
        }
    }
    let mut bad = ClusterConfig::new("http://127.0.0.1:1").unwrap();
    bad.user_agent = "line\nbreak".into();
    assert!(Client::new(&bad).is_err());
}

/// The default options but for watch-list streaming (C1.3): these tests are of a list and what
/// follows it, and ask for one.
fn list_then_watch() -> ReflectorOptions {
    ReflectorOptions {
        watch_list: false,
        ..ReflectorOptions::default()
    }
}
