//! Protobuf on the wire against the simulated API server: typed `k8s_pb` objects
//! listed (in pages) and watched in protobuf, through the reflector's own lister-watcher and
//! through a wrapper that forwards nothing but `list` and `watch`; 410 after compaction; and
//! the negotiation decided by the answer, not the request.
//!
//! The simulator counts the answers it writes in protobuf (`protobuf_responses`): that, not the
//! objects, proves which encoding was asked for, since a `k8s_pb` type also reads JSON (through
//! the descriptor-driven transcoder). Waiting is event-driven (a `watch` channel bumped by every
//! store change), never a sleep.

mod counting_alloc;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use counting_alloc::allocations_of;
use parking_lot::Mutex;
use reflector::delta_fifo::{FifoError, Store};
use reflector::store_index::k8s_pb::api::core::v1::Pod;
use reflector::store_index::k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use reflector::store_index::{CompactObject, DynamicObject, Object, Pb, ResourceVersion};
use reflector::{
    BackoffConfig, ClusterConfig, Credentials, Decode, Encoding, HttpListerWatcher, ListOptions,
    ListerWatcher, ObjectList, Reflector, ReflectorError, ReflectorOptions, Resource, WatchOptions,
    WatchStream,
};
use serde_json::json;
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;

struct MapStore<K> {
    items: Mutex<BTreeMap<String, Arc<K>>>,
    /// Every (event, key, resourceVersion) in the order the store saw it.
    log: Mutex<Vec<(String, String, String)>>,
    changed: tokio::sync::watch::Sender<u64>,
}

impl<K> Default for MapStore<K> {
    fn default() -> Self {
        MapStore {
            items: Mutex::default(),
            log: Mutex::default(),
            changed: tokio::sync::watch::channel(0).0,
        }
    }
}

fn key<K: Object>(o: &K) -> String {
    format!("{}/{}", o.namespace().unwrap_or(""), o.name())
}

impl<K: Object> MapStore<K> {
    fn record(&self, what: &str, o: &K) {
        self.log.lock().push((
            what.into(),
            key(o),
            o.resource_version().unwrap_or("").into(),
        ));
        self.changed.send_modify(|n| *n += 1);
    }
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
    fn len(&self) -> usize {
        self.items.lock().len()
    }
}

impl<K: Object> Store<K> for MapStore<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.items.lock().insert(key(obj.as_ref()), obj.clone());
        self.record("add", obj.as_ref());
        Ok(())
    }
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.items.lock().insert(key(obj.as_ref()), obj.clone());
        self.record("update", obj.as_ref());
        Ok(())
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.items.lock().remove(&key(obj.as_ref()));
        self.record("delete", obj.as_ref());
        Ok(())
    }
    fn replace(&self, list: Vec<Arc<K>>, _rv: &ResourceVersion) -> Result<(), FifoError> {
        *self.items.lock() = list.into_iter().map(|o| (key(o.as_ref()), o)).collect();
        self.log
            .lock()
            .push(("replace".into(), String::new(), String::new()));
        self.changed.send_modify(|n| *n += 1);
        Ok(())
    }
    fn resync(&self) -> Result<(), FifoError> {
        Ok(())
    }
    fn update_resource_version(&self, _rv: &ResourceVersion) {}
}

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

/// A list then a watch (not the default watch-list): these tests count and check each.
fn options() -> ReflectorOptions {
    ReflectorOptions {
        watch_list: false,
        backoff: BackoffConfig {
            initial: Duration::from_millis(10),
            cap: Duration::from_millis(50),
            jitter: 0.0,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn pods() -> Resource {
    Resource::of_pb::<Pod>()
}

fn create_pods(sim: &SimServer, ns: &str, n: usize) {
    for i in 0..n {
        sim.create(
            "pods",
            Some(ns),
            json!({"metadata": {"name": format!("p{i}"), "labels": {"app": "web"}},
                   "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx:1.27"}]}}),
        )
        .unwrap();
    }
}

type Running<K, L> = (
    Arc<Reflector<K, L, Arc<MapStore<K>>>>,
    Arc<MapStore<K>>,
    Arc<Mutex<Vec<String>>>,
    CancellationToken,
    tokio::task::JoinHandle<()>,
);

/// A store, the errors its reflector reported, and how to stop it.
type Started<K> = (
    Arc<MapStore<K>>,
    Arc<Mutex<Vec<String>>>,
    CancellationToken,
    tokio::task::JoinHandle<()>,
);

/// Runs a reflector of `lw` into a new store; the errors it reports go to `errors`.
fn run<K: Decode, L: ListerWatcher<K>>(lw: L, options: ReflectorOptions) -> Started<K> {
    let (_, store, errors, cancel, task) = run_reflector(lw, options);
    (store, errors, cancel, task)
}

/// [`run`], with the reflector.
fn run_reflector<K: Decode, L: ListerWatcher<K>>(
    lw: L,
    options: ReflectorOptions,
) -> Running<K, L> {
    let store = Arc::new(MapStore::default());
    let errors = Arc::new(Mutex::new(Vec::new()));
    let r = Arc::new(Reflector::new(lw, store.clone(), options));
    r.set_watch_error_handler(Arc::new({
        let errors = errors.clone();
        move |e: &ReflectorError| errors.lock().push(e.to_string())
    }));
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (r, c) = (r.clone(), cancel.clone());
        async move { r.run(c).await }
    });
    (r, store, errors, cancel, task)
}

async fn stop(cancel: CancellationToken, task: tokio::task::JoinHandle<()>) {
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .expect("stops within a second")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_protobuf_pods_list_in_pages_and_watch_every_event_type() {
    let sim = SimServer::builder()
        .watch_cache(false)
        .start()
        .await
        .unwrap();
    create_pods(&sim, "default", 1_200);
    let lw = HttpListerWatcher::<Pb<Pod>>::new(&config_for(&sim), pods()).unwrap();
    let (store, errors, cancel, task) = run(lw, options());
    store.until("1200 pods", |s| s.len() == 1_200).await;
    assert!(sim.counters().lists >= 3, "1200 pods in pages of 500");
    {
        let items = store.items.lock();
        let p = &items["default/p7"];
        assert_eq!(p.label("app"), Some("web"));
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(spec.containers[0].image.as_deref(), Some("nginx:1.27"));
    }
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "new"}, "spec": {"containers": []}}),
    )
    .unwrap();
    sim.update(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "p1", "labels": {"app": "db"}}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx:1.27"}]}}),
    )
    .unwrap();
    sim.delete("pods", Some("default"), "p2").unwrap();
    store
        .until("added, modified and deleted", |s| {
            let items = s.items.lock();
            items.contains_key("default/new")
                && !items.contains_key("default/p2")
                && items["default/p1"].label("app") == Some("db")
        })
        .await;
    let counters = sim.counters();
    assert!(
        counters.protobuf_responses > counters.lists,
        "every page and the watch in protobuf: {counters:?}"
    );
    assert!(errors.lock().is_empty(), "{:?}", errors.lock());
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_410_error_frame_relists_in_protobuf_and_drops_what_was_deleted_while_away() {
    let sim = SimServer::builder().start().await.unwrap();
    create_pods(&sim, "default", 5);
    let lw = HttpListerWatcher::<Pb<Pod>>::new(&config_for(&sim), pods()).unwrap();
    let (r, store, errors, cancel, task) = run_reflector(lw, options());
    store.until("5 pods", |s| s.len() == 5).await;
    // The next event becomes an ERROR frame carrying a protobuf Status 410.
    sim.faults().error_event(410);
    sim.delete("pods", Some("default"), "p0").unwrap();
    sim.delete("pods", Some("default"), "p1").unwrap();
    sim.faults().compact();
    store
        .until("relist without p0 and p1", |s| {
            let items = s.items.lock();
            !items.contains_key("default/p0")
                && !items.contains_key("default/p1")
                && items.len() == 3
        })
        .await;
    let log = store.log.lock().clone();
    assert_eq!(
        log.iter().filter(|e| e.0 == "replace").count(),
        2,
        "{log:?}"
    );
    assert!(log.iter().all(|e| e.0 != "delete"), "removed by the relist");
    assert!(r.metrics().expired >= 1, "{:?}", r.metrics());
    let counters = sim.counters();
    assert!(
        counters.protobuf_responses > counters.lists,
        "both lists and the watch in protobuf: {counters:?}"
    );
    assert!(
        errors.lock().iter().all(|e| !e.contains("protobuf")),
        "{:?}",
        errors.lock()
    );
    stop(cancel, task).await;
}

/// A lister-watcher wrapping another, written without knowing about encodings: it forwards
/// `list` and `watch` only (every other method keeps its default).
struct Wrapper<L>(L, Arc<Mutex<u32>>);

impl<K: Decode, L: ListerWatcher<K>> ListerWatcher<K> for Wrapper<L> {
    async fn list(&self, options: ListOptions) -> Result<ObjectList<K>, ReflectorError> {
        *self.1.lock() += 1;
        self.0.list(options).await
    }
    async fn watch(&self, options: WatchOptions) -> Result<WatchStream<K>, ReflectorError> {
        self.0.watch(options).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protobuf_path_survives_a_wrapping_lister_watcher() {
    let sim = SimServer::builder().start().await.unwrap();
    create_pods(&sim, "default", 5);
    let lists = Arc::new(Mutex::new(0));
    let lw = Wrapper(
        HttpListerWatcher::<Pb<Pod>>::new(&config_for(&sim), pods()).unwrap(),
        lists.clone(),
    );
    let (store, errors, cancel, task) = run(lw, options());
    store.until("5 pods", |s| s.len() == 5).await;
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "w"}, "spec": {"containers": []}}),
    )
    .unwrap();
    store.until("the watched pod", |s| s.len() == 6).await;
    assert!(*lists.lock() >= 1);
    assert!(
        sim.counters().protobuf_responses >= 2,
        "the list and the watch"
    );
    assert!(errors.lock().is_empty(), "{:?}", errors.lock());
    stop(cancel, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_answering_json_is_decoded_as_json_and_refused_only_where_json_cannot_be_read() {
    let sim = SimServer::builder().protobuf(false).start().await.unwrap();
    create_pods(&sim, "default", 3);
    let config = config_for(&sim);
    // DynamicObject asks for JSON; forcing protobuf changes nothing for a JSON-only type.
    let lw = HttpListerWatcher::<DynamicObject>::new(&config, pods())
        .unwrap()
        .encoding(Encoding::Protobuf);
    let page = lw.list(ListOptions::default()).await.unwrap();
    assert_eq!(page.items.len(), 3);
    // CompactObject told to ask for protobuf reads the JSON answer.
    let lw = HttpListerWatcher::<CompactObject>::new(&config, pods())
        .unwrap()
        .encoding(Encoding::Protobuf);
    let page = lw.list(ListOptions::default()).await.unwrap();
    assert_eq!(page.items.len(), 3);
    // A k8s_pb Pod reads the JSON answer through the transcoder.
    let lw = HttpListerWatcher::<Pb<Pod>>::new(&config, pods()).unwrap();
    let page = lw.list(ListOptions::default()).await.unwrap();
    assert_eq!(page.items.len(), 3);
    assert_eq!(page.items[0].label("app"), Some("web"));
    assert_eq!(sim.counters().protobuf_responses, 0);
    // A kind with no descriptor compiled in (not in k8s.io/api) cannot: a typed error, not an
    // empty list (its quoted names are redacted, as every string of a server's text is).
    sim.create(
        "customresourcedefinitions.apiextensions.k8s.io",
        None,
        widget_crd(),
    )
    .unwrap();
    let crds = HttpListerWatcher::<Pb<CustomResourceDefinition>>::new(
        &config,
        Resource::of_pb::<CustomResourceDefinition>(),
    )
    .unwrap();
    let err = crds.list(ListOptions::default()).await.unwrap_err();
    assert!(
        matches!(err, ReflectorError::InvalidList(ref e)
            if e.problem.contains("no protobuf message is known for kind")),
        "{err}"
    );
}

fn widget_crd() -> serde_json::Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

/// A pod that uses every JSON shape the transcoder turns into another message shape: embedded
/// structs (`volumeSource`, `localObjectReference`, the probe's `handler`), quantities,
/// int-or-strings, times, and a null.
fn rich_pod(name: &str) -> serde_json::Value {
    json!({"metadata": {"name": name, "labels": {"app": "rich"}, "annotations": {"note": "n"}},
        "spec": {"nodeName": "n1", "serviceAccountName": null,
            "containers": [{"name": "app", "image": "nginx:1.27",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}}],
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m"}},
                "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5},
                "livenessProbe": {"tcpSocket": {"port": 8080}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "conf", "configMap": {"name": "settings", "defaultMode": 420}}],
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule",
                "tolerationSeconds": 30}]},
        "status": {"phase": "Running", "startTime": "2026-11-27T05:00:00Z",
            "conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-11-27T05:00:05Z"}]}})
}

/// Adds a pod, relabels `rich` and deletes `p2`, waits until both stores have seen all three, and
/// checks that they hold the same objects.
async fn change_and_compare<K: Object + PartialEq + std::fmt::Debug>(
    sim: &SimServer,
    a: &MapStore<K>,
    b: &MapStore<K>,
) {
    sim.create("pods", Some("default"), rich_pod("new"))
        .unwrap();
    let mut changed = rich_pod("rich");
    changed["metadata"]["labels"]["app"] = json!("changed");
    sim.update("pods", Some("default"), changed).unwrap();
    sim.delete("pods", Some("default"), "p2").unwrap();
    for store in [a, b] {
        store
            .until("added, modified and deleted", |s| {
                let items = s.items.lock();
                items.contains_key("default/new")
                    && !items.contains_key("default/p2")
                    && items["default/rich"].label("app") == Some("changed")
            })
            .await;
    }
    assert_eq!(*a.items.lock(), *b.items.lock());
}

/// A server that answers JSON to typed protobuf objects (here because JSON was chosen; the same
/// goes for a proxy or an aggregated server): every object, listed or watched, is transcoded with
/// Kubernetes' descriptors and equals the one the protobuf answer gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_protobuf_objects_read_from_a_json_answer_equal_those_read_from_protobuf() {
    let sim = SimServer::builder().start().await.unwrap();
    create_pods(&sim, "default", 20);
    sim.create("pods", Some("default"), rich_pod("rich"))
        .unwrap();
    let config = config_for(&sim);
    let json_lw = HttpListerWatcher::<Pb<Pod>>::new(&config, pods())
        .unwrap()
        .encoding(Encoding::Json);
    let pb_lw = HttpListerWatcher::<Pb<Pod>>::new(&config, pods()).unwrap();

    let from_json = json_lw.list(ListOptions::default()).await.unwrap();
    assert_eq!(sim.counters().protobuf_responses, 0, "JSON was asked for");
    let from_pb = pb_lw.list(ListOptions::default()).await.unwrap();
    assert_eq!(sim.counters().protobuf_responses, 1);
    assert_eq!(from_json.items.len(), 21);
    assert_eq!(from_json.items, from_pb.items);
    let rich = from_json.items.iter().find(|p| p.name() == "rich").unwrap();
    let container = &rich.spec.as_ref().unwrap().containers[0];
    let limits = &container.resources.as_ref().unwrap().limits;
    assert_eq!(limits["cpu"].string.as_deref(), Some("500m"));
    let env_ref = container.env[0]
        .value_from
        .as_ref()
        .unwrap()
        .config_map_key_ref
        .as_ref();
    assert_eq!(
        env_ref
            .unwrap()
            .local_object_reference
            .as_ref()
            .unwrap()
            .name
            .as_deref(),
        Some("settings"),
        "an embedded struct's fields, read from the outer JSON object"
    );

    let (json_store, json_errors, c1, t1) = run(json_lw, options());
    let (pb_store, pb_errors, c2, t2) = run(pb_lw, options());
    json_store
        .until("21 pods over JSON", |s| s.len() == 21)
        .await;
    pb_store
        .until("21 pods over protobuf", |s| s.len() == 21)
        .await;
    change_and_compare(&sim, &json_store, &pb_store).await;
    assert!(json_errors.lock().is_empty(), "{:?}", json_errors.lock());
    assert!(pb_errors.lock().is_empty(), "{:?}", pb_errors.lock());
    stop(c1, t1).await;
    stop(c2, t2).await;
}

/// `k8s_openapi` objects asking for protobuf: listed and watched in protobuf, each message read
/// straight into the type, they equal the objects a JSON answer gives; by default they ask for
/// JSON (cheaper to decode into them). `Decode` for them needs the `k8s-openapi` feature.
#[cfg(feature = "k8s-openapi")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8s_openapi_objects_asking_for_protobuf_equal_those_read_from_json() {
    type OpenApiPod = k8s_openapi::api::core::v1::Pod;
    let sim = SimServer::builder().start().await.unwrap();
    create_pods(&sim, "default", 20);
    sim.create("pods", Some("default"), rich_pod("rich"))
        .unwrap();
    let config = config_for(&sim);
    let by_default = HttpListerWatcher::<OpenApiPod>::new(&config, pods()).unwrap();
    let pb_lw = HttpListerWatcher::<OpenApiPod>::new(&config, pods())
        .unwrap()
        .encoding(Encoding::Protobuf);

    let from_json = by_default.list(ListOptions::default()).await.unwrap();
    assert_eq!(sim.counters().protobuf_responses, 0, "JSON by default");
    let from_pb = pb_lw.list(ListOptions::default()).await.unwrap();
    assert_eq!(sim.counters().protobuf_responses, 1);
    assert_eq!(from_json.items.len(), 21);
    assert_eq!(from_json.items, from_pb.items);
    let rich = from_pb.items.iter().find(|p| p.name() == "rich").unwrap();
    let container = &rich.spec.as_ref().unwrap().containers[0];
    let limits = container
        .resources
        .as_ref()
        .unwrap()
        .limits
        .as_ref()
        .unwrap();
    assert_eq!(limits["cpu"].0, "500m");
    let env = container.env.as_ref().unwrap();
    assert_eq!(env.capacity(), env.len(), "a list allocated at its length");

    let (json_store, json_errors, c1, t1) = run(by_default, options());
    let (pb_store, pb_errors, c2, t2) = run(pb_lw, options());
    for store in [&json_store, &pb_store] {
        store.until("21 pods", |s| s.len() == 21).await;
    }
    change_and_compare(&sim, &json_store, &pb_store).await;
    // The list above, the reflector's list and its watch: all in protobuf.
    assert!(
        sim.counters().protobuf_responses >= 3,
        "the watch was answered in protobuf too"
    );
    assert!(json_errors.lock().is_empty(), "{:?}", json_errors.lock());
    assert!(pb_errors.lock().is_empty(), "{:?}", pb_errors.lock());
    stop(c1, t1).await;
    stop(c2, t2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_objects_asking_for_protobuf_hold_it_from_a_protobuf_server_and_json_otherwise() {
    use reflector::store_index::RawEncoding;
    let cases = [
        (true, Encoding::Protobuf, RawEncoding::Protobuf),
        (false, Encoding::Protobuf, RawEncoding::Json),
        // The default: JSON, so that `decode` into serde types keeps working.
        (true, Encoding::Auto, RawEncoding::Json),
    ];
    for (speaks, encoding, expected) in cases {
        let sim = SimServer::builder().protobuf(speaks).start().await.unwrap();
        create_pods(&sim, "default", 3);
        let lw = HttpListerWatcher::<CompactObject>::new(
            &config_for(&sim),
            Resource::namespaced("", "v1", "pods"),
        )
        .unwrap()
        .encoding(encoding);
        let (store, errors, cancel, task) = run(lw, options());
        store.until("3 pods", |s| s.len() == 3).await;
        sim.create(
            "pods",
            Some("default"),
            json!({"metadata": {"name": "w", "labels": {"app": "x"}}, "spec": {"containers": []}}),
        )
        .unwrap();
        store.until("the watched pod", |s| s.len() == 4).await;
        let items = store.items.lock().clone();
        assert!(
            items.values().all(|o| o.encoding() == expected),
            "{items:?}"
        );
        let w = &items["default/w"];
        assert_eq!((w.label("app"), w.kind()), (Some("x"), Some("Pod")));
        if expected == RawEncoding::Protobuf {
            let typed: Pod = w.decode_pb().unwrap();
            assert_eq!(typed.metadata.unwrap().name.as_deref(), Some("w"));
        } else {
            assert_eq!(w.to_dynamic().unwrap().metadata.name.as_deref(), Some("w"));
        }
        assert!(errors.lock().is_empty(), "{:?}", errors.lock());
        stop(cancel, task).await;
    }
}

/// Reading a protobuf watch event into a `CompactObject` allocates only what the object keeps,
/// and the frame it was cut from: the event's type, its envelope's kind and apiVersion are read
/// in place, never copied into strings thrown away after the event.
#[test]
fn a_protobuf_watch_event_allocates_only_what_its_compact_object_keeps() {
    use reflector::protobuf::{encode_frame, RawWatchEvent as Frame, WATCH_MEDIA_TYPE};
    use reflector::{WatchDecoder, WatchEvent, DEFAULT_MAX_EVENT_SIZE};

    let frames: Vec<bytes::Bytes> = (0..50)
        .map(|i| {
            let pod: serde_json::Value =
                serde_json::from_str(&sim_apiserver::fixtures::realistic_pod_json(i)).unwrap();
            let object = sim_apiserver::protobuf::encode_object(&pod).unwrap();
            let mut frame = Vec::new();
            encode_frame(
                &mut frame,
                &Frame {
                    event_type: "MODIFIED".into(),
                    object: bytes::Bytes::from(object),
                }
                .encode(),
            );
            bytes::Bytes::from(frame)
        })
        .collect();
    let mut decoder = WatchDecoder::<CompactObject>::for_content_type(
        Some(WATCH_MEDIA_TYPE),
        DEFAULT_MAX_EVENT_SIZE,
    );
    let mut out = Vec::with_capacity(2 * frames.len());
    // The first event warms what is made once (the decoder's queues).
    decoder.decode(frames[0].clone(), &mut out).unwrap();
    let ((), allocations) = allocations_of(|| {
        for f in &frames[1..] {
            decoder.decode(f.clone(), &mut out).unwrap();
        }
    });
    assert_eq!(out.len(), frames.len());
    for (i, e) in out.iter().enumerate() {
        let WatchEvent::Modified(pod) = e else {
            panic!("event {i}: {e:?}")
        };
        assert_eq!(pod.kind(), Some("Pod"));
        assert!(pod.name().starts_with(&format!("web-{i}-")));
    }
    let per_event = allocations as f64 / (frames.len() - 1) as f64;
    // Nine, each named: the chunk's list of frames, the frame, the header that lets the event's
    // object share the frame, the object's own copy of its message (M1), and its metadata table
    // (the text it unescapes, the label and annotation entries while they are sorted, the
    // pairs). The event's type and the envelope's kind and apiVersion add none: they are read
    // in place (with them, 12).
    assert!(
        per_event <= 9.0,
        "{per_event} allocations per protobuf watch event ({allocations} for {})",
        frames.len() - 1
    );
}
