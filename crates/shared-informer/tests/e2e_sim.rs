//! The informer and the factory against the simulated API server, each test on every queue.

#[macro_use]
mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use common::queues;
use parking_lot::Mutex;
use serde_json::json;
use shared_informer::reflector::store_index::{DynamicObject, Object};
use shared_informer::reflector::{ClusterConfig, Credentials, ExecConfig, Resource};
use shared_informer::{EventHandlerFns, InformerQueue, SharedInformerFactory};
use sim_apiserver::{ChurnConfig, SimServer};
use tokio_util::sync::CancellationToken;

fn pods() -> Resource {
    Resource::namespaced("", "v1", "pods")
}

async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// One client per factory: informers of different resources share its connections and its
// credential cache, so an exec credential plugin runs once, not once per informer.
on_every_queue!(
    informers_of_one_factory_share_one_client_and_one_credential_cache,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn informers_of_one_factory_share_one_client_and_one_credential_cache(queue: InformerQueue) {
    let sim = SimServer::builder()
        .token("from-plugin")
        .start()
        .await
        .unwrap();
    for (resource, name) in [("pods", "p"), ("configmaps", "c")] {
        sim.create(resource, Some("ns"), json!({"metadata": {"name": name}}))
            .unwrap();
    }
    let dir = std::env::temp_dir().join(format!(
        "informer-factory-exec-{}-{}",
        std::process::id(),
        queues::name_of(queue)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let runs = dir.join("runs");
    let script = dir.join("cred.sh");
    std::fs::write(
        &script,
        format!(
            "echo run >> '{}'\necho '{}'\n",
            runs.display(),
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-plugin","expirationTimestamp":"2999-01-01T00:00:00Z"}}"#
        ),
    )
    .unwrap();
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    config.credentials = Credentials::Exec(ExecConfig {
        command: "sh".into(),
        args: vec![script.display().to_string()],
        api_version: "client.authentication.k8s.io/v1".into(),
        ..ExecConfig::default()
    });
    let factory = SharedInformerFactory::new(config).queue(queue);
    let pods = factory.informer::<DynamicObject>(pods()).unwrap();
    assert_eq!(pods.queue(), queue);
    let configmaps = factory
        .informer::<DynamicObject>(Resource::namespaced("", "v1", "configmaps"))
        .unwrap();
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let report = factory.wait_for_cache_sync(Duration::from_secs(30)).await;
    assert!(report.all_synced(), "{report:?}");
    assert_eq!((pods.indexer().len(), configmaps.indexer().len()), (1, 1));
    // Each informer's counters, the body bytes its lister-watcher received included (D15).
    for informer in [&pods, &configmaps] {
        let stats = informer.stats().reflector;
        assert_eq!(
            (stats.lists, stats.watches),
            (0, 1),
            "synced by one watch-list: {stats:?}"
        );
        assert!(
            stats.bytes > 0,
            "a factory informer counts its bytes: {stats:?}"
        );
    }
    let runs = std::fs::read_to_string(&runs).unwrap();
    assert_eq!(
        runs.lines().count(),
        1,
        "the plugin ran once for both informers"
    );
    cancel.cancel();
    factory.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

on_every_queue!(
    consumers_of_one_factory_share_a_single_watch_list,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn consumers_of_one_factory_share_a_single_watch_list(queue: InformerQueue) {
    let sim = SimServer::start().await.unwrap();
    for i in 0..20 {
        sim.create(
            "pods",
            Some("ns"),
            json!({"metadata": {"name": format!("p{i}")}}),
        )
        .unwrap();
    }
    let factory = SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap()).queue(queue);
    let seen: Vec<Arc<Mutex<usize>>> = (0..5).map(|_| Arc::default()).collect();
    for count in &seen {
        let informer = factory.informer::<DynamicObject>(pods()).unwrap();
        let count = Arc::clone(count);
        informer
            .add_event_handler(
                EventHandlerFns::new().on_add(move |_: &Arc<DynamicObject>, _| *count.lock() += 1),
            )
            .unwrap();
    }
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let report = factory.wait_for_cache_sync(Duration::from_secs(30)).await;
    assert_eq!(
        report.len(),
        1,
        "one informer for five consumers: {report:?}"
    );
    assert!(report.all_synced());
    sim.create("pods", Some("ns"), json!({"metadata": {"name": "late"}}))
        .unwrap();
    eventually("every consumer saw 21 adds", || {
        seen.iter().all(|c| *c.lock() == 21)
    })
    .await;
    let counters = sim.counters();
    assert_eq!(
        (counters.lists, counters.watches),
        (0, 1),
        "one watch-list (the default, C1.3), no list: {counters:?}"
    );
    cancel.cancel();
    factory.shutdown().await;
}

// IT1 (`informer_thread.rs`): informers started on an `InformerThread` list, watch and call
// their handlers on that thread, never on the caller's runtime; the factory's shutdown waits for
// them there, and the thread then stops.
on_every_queue!(
    a_factory_started_on_an_informer_thread_handles_every_event_there,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_factory_started_on_an_informer_thread_handles_every_event_there(queue: InformerQueue) {
    let thread = shared_informer::InformerThread::spawn("e2e-informers").unwrap();
    every_event_handled_on(thread, queue).await;
}

// IT3 (`informer_thread.rs`): the same on a thread with a batching window: every event still
// reaches its handler, on that thread (the window's spacing of wake-ups is checked in
// `informer_thread.rs`'s own test).
on_every_queue!(
    a_factory_started_on_a_batching_informer_thread_handles_every_event_there,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_factory_started_on_a_batching_informer_thread_handles_every_event_there(
    queue: InformerQueue,
) {
    let window = Duration::from_millis(20);
    let thread = shared_informer::InformerThread::spawn_batching("e2e-informers", window).unwrap();
    every_event_handled_on(thread, queue).await;
}

/// Starts a factory on `thread` (named `e2e-informers`), changes pods, and checks that every
/// event was handled there.
async fn every_event_handled_on(thread: shared_informer::InformerThread, queue: InformerQueue) {
    let sim = SimServer::start().await.unwrap();
    for i in 0..5 {
        sim.create(
            "pods",
            Some("ns"),
            json!({"metadata": {"name": format!("p{i}"), "labels": {"v": "0"}}}),
        )
        .unwrap();
    }
    let factory = SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap()).queue(queue);
    let informer = factory.informer::<DynamicObject>(pods()).unwrap();
    // (which handler, the name of the thread it was called on)
    type Calls = Arc<Mutex<Vec<(&'static str, Option<String>)>>>;
    let calls: Calls = Arc::default();
    let on = |what: &'static str| {
        let calls = Arc::clone(&calls);
        move || {
            let thread = std::thread::current().name().map(str::to_string);
            calls.lock().push((what, thread));
        }
    };
    let (add, update, delete) = (on("add"), on("update"), on("delete"));
    informer
        .add_event_handler(
            EventHandlerFns::new()
                .on_add(move |_: &Arc<DynamicObject>, _| add())
                .on_update(move |_: &Arc<DynamicObject>, _: &Arc<DynamicObject>| update())
                .on_delete(move |_| delete()),
        )
        .unwrap();
    let cancel = CancellationToken::new();
    factory.start_on(thread.handle(), &cancel);
    let report = factory.wait_for_cache_sync(Duration::from_secs(30)).await;
    assert!(report.all_synced(), "{report}");
    let mut pod = sim.get("pods", Some("ns"), "p0").unwrap();
    pod["metadata"]["labels"]["v"] = json!("1");
    sim.update("pods", Some("ns"), pod).unwrap();
    sim.delete("pods", Some("ns"), "p1").unwrap();
    sim.create("pods", Some("ns"), json!({"metadata": {"name": "late"}}))
        .unwrap();
    eventually("6 adds, an update and a delete", || calls.lock().len() == 8).await;
    let calls = calls.lock().clone();
    for (what, on) in &calls {
        assert_eq!(
            on.as_deref(),
            Some("e2e-informers"),
            "{what} handled on {on:?}"
        );
    }
    let count = |what| calls.iter().filter(|(w, _)| *w == what).count();
    assert_eq!((count("add"), count("update"), count("delete")), (6, 1, 1));
    assert_eq!(informer.indexer().len(), 5);
    cancel.cancel();
    factory.shutdown().await;
    tokio::task::spawn_blocking(move || thread.join())
        .await
        .unwrap();
}

/// Per key: absent → add → (update with a larger resource version)* → delete → absent …
#[derive(Default)]
struct Sequences {
    state: HashMap<String, Option<u64>>,
    violations: Vec<String>,
    events: usize,
}

impl Sequences {
    fn rv(o: &DynamicObject) -> u64 {
        o.resource_version()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0)
    }
    fn add(&mut self, o: &DynamicObject) {
        self.events += 1;
        let key = format!("{}/{}", o.namespace().unwrap_or(""), o.name());
        if let Some(Some(_)) = self.state.get(&key) {
            self.violations.push(format!("add of present {key}"));
        }
        self.state.insert(key, Some(Self::rv(o)));
    }
    fn update(&mut self, o: &DynamicObject) {
        self.events += 1;
        let key = format!("{}/{}", o.namespace().unwrap_or(""), o.name());
        match self.state.get(&key) {
            Some(Some(prev)) if *prev < Self::rv(o) => {}
            other => self
                .violations
                .push(format!("update of {key} from {other:?} to {}", Self::rv(o))),
        }
        self.state.insert(key, Some(Self::rv(o)));
    }
    fn delete(&mut self, key: String) {
        self.events += 1;
        if !matches!(self.state.get(&key), Some(Some(_))) {
            self.violations.push(format!("delete of absent {key}"));
        }
        self.state.insert(key, None);
    }
}

on_every_queue!(
    handler_sequences_stay_consistent_under_churn_and_the_cache_equals_the_server,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn handler_sequences_stay_consistent_under_churn_and_the_cache_equals_the_server(
    queue: InformerQueue,
) {
    let sim = SimServer::start().await.unwrap();
    let factory = SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap()).queue(queue);
    let informer = factory.informer::<DynamicObject>(pods()).unwrap();
    assert_eq!(informer.queue(), queue);
    let seq = Arc::new(Mutex::new(Sequences::default()));
    let (a, u, d) = (Arc::clone(&seq), Arc::clone(&seq), Arc::clone(&seq));
    informer
        .add_event_handler(
            EventHandlerFns::new()
                .on_add(move |o: &Arc<DynamicObject>, _| a.lock().add(o))
                .on_update(move |_, new| u.lock().update(new))
                .on_delete(move |o| {
                    d.lock()
                        .delete(o.key().map(|k| k.to_string()).unwrap_or_default())
                }),
        )
        .unwrap();
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    assert!(informer.wait_for_sync().await);
    // Watches end every 150 events and streams arrive in 7-byte chunks meanwhile.
    sim.faults().end_watches_after(150).rechunk(7);
    let churn = sim.churn(ChurnConfig {
        resource: "pods".into(),
        namespace: "ns".into(),
        keys: 60,
        rate_per_sec: 2_000.0,
        max_ops: Some(1_500),
        duration: None,
        pad_bytes: 200,
    });
    let ops = churn.finished().await;
    assert_eq!(ops, 1_500);
    let server = || -> BTreeMap<String, String> {
        sim.list("pods", None)
            .unwrap()
            .iter()
            .map(|o| {
                let m = &o["metadata"];
                (
                    format!(
                        "{}/{}",
                        m["namespace"].as_str().unwrap(),
                        m["name"].as_str().unwrap()
                    ),
                    m["resourceVersion"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let cached = || -> BTreeMap<String, String> {
        informer
            .indexer()
            .list()
            .iter()
            .map(|o| {
                (
                    format!("{}/{}", o.namespace().unwrap_or(""), o.name()),
                    o.resource_version().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    eventually("the cache equals the server", || cached() == server()).await;
    // The handler hears of the cache's last changes after the cache has them: wait for it too.
    let present = || -> BTreeMap<String, u64> {
        seq.lock()
            .state
            .iter()
            .filter_map(|(k, v)| v.map(|rv| (k.clone(), rv)))
            .collect()
    };
    eventually("the handler's view equals the server's", || {
        present().len() == server().len()
    })
    .await;
    {
        let seq = seq.lock();
        assert!(
            seq.violations.is_empty(),
            "sequence violations: {:?}",
            &seq.violations[..seq.violations.len().min(5)]
        );
        assert!(seq.events > 0);
    }
    cancel.cancel();
    factory.shutdown().await;
}
