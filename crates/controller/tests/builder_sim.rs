//! The controller builder against the simulated API server: the README's controller (a Widget
//! owning a ConfigMap applied server-side, a status condition, a finalizer, an event), its
//! failure paths (an error, a panic, a timeout, a failing cleanup), predicates, shutdown, and the
//! same program under leader election and sharded over two replicas (rules BD1–BD7).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use controller::prelude::*;
use controller::sharding::shard_label;
use parking_lot::Mutex;
use serde_json::{json, Value};
use sim_apiserver::{ResourceDef, SimServer};
use tokio::task::JoinHandle;

const FINALIZER: &str = "widgets.example.com/cleanup";

fn widgets() -> Resource {
    Resource::namespaced("example.com", "v1", "widgets")
}

fn configmaps() -> Resource {
    Resource::namespaced("", "v1", "configmaps")
}

async fn sim() -> SimServer {
    let sim = SimServer::start().await.unwrap();
    sim.register(ResourceDef::new("example.com", "v1", "Widget", "widgets", true).with_status());
    sim
}

fn client(sim: &SimServer) -> Client {
    Client::new(&ClusterConfig::new(&sim.url()).unwrap()).unwrap()
}

fn widget(sim: &SimServer, name: &str, size: u32) {
    sim.create(
        "widgets.example.com",
        Some("default"),
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": name}, "spec": {"size": size}}),
    )
    .unwrap();
}

fn get(sim: &SimServer, resource: &str, name: &str) -> Option<Value> {
    sim.get(resource, Some("default"), name).ok()
}

/// Polls `condition` (a state reached by requests already sent) for up to 20 s.
async fn wait_until(what: &str, condition: impl Fn() -> bool) {
    for _ in 0..2000 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

/// What the tests' reconciles count and how they misbehave.
#[derive(Default)]
struct State {
    reconciles: AtomicUsize,
    cleanups: AtomicUsize,
    /// Reconciles by widget name (the replica's own view).
    seen: Mutex<BTreeMap<String, usize>>,
    /// The first this many reconciles fail with an error.
    fail_first: AtomicUsize,
    /// The first this many reconciles panic.
    panic_first: AtomicUsize,
    /// The first this many reconciles hang (for the timeout).
    hang_first: AtomicUsize,
    /// The first this many cleanups fail.
    cleanup_fails_first: AtomicUsize,
}

fn take(counter: &AtomicUsize) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(transparent)]
    Write(#[from] FenceError),
    #[error("the test asked for a failure")]
    Asked,
}

struct Running {
    stop: CancellationToken,
    run: JoinHandle<Result<(), BuilderError>>,
}

impl Running {
    async fn stop(self) -> Result<(), BuilderError> {
        self.stop.cancel();
        self.run.await.unwrap()
    }
}

fn start(builder: ControllerBuilder<DynamicObject>, state: Arc<State>) -> Running {
    let stop = CancellationToken::new();
    let builder = builder.shutdown_on(stop.clone()).without_signal_handlers();
    let run =
        tokio::spawn(async move { builder.run(reconcile, |_, _, _| Action::Retry, state).await });
    Running { stop, run }
}

/// The README's reconcile, with the tests' counters and faults.
async fn reconcile(
    widget: Arc<DynamicObject>,
    ctx: Context<DynamicObject, Arc<State>>,
) -> Result<Action, FinalizerError<Error>> {
    let state = Arc::clone(&ctx);
    reconcile_with(widget, &ctx, &state).await
}

async fn reconcile_with<S>(
    widget: Arc<DynamicObject>,
    ctx: &Context<DynamicObject, S>,
    state: &State,
) -> Result<Action, FinalizerError<Error>> {
    state.reconciles.fetch_add(1, Ordering::SeqCst);
    *state
        .seen
        .lock()
        .entry(widget.name().to_string())
        .or_default() += 1;
    if take(&state.panic_first) {
        panic!("the test asked for a panic");
    }
    if take(&state.hang_first) {
        std::future::pending::<()>().await;
    }
    if take(&state.fail_first) {
        return Err(FinalizerError::Apply(Error::Asked));
    }
    let api = ctx.api(&widget);
    finalizer(&api, FINALIZER, widget, |event| async {
        match event {
            FinalizerEvent::Apply(widget) => {
                let size = widget
                    .pointer("/spec/size")
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": widget.name()}, "data": {"size": size.to_string()}});
                ctx.apply_child(&widget, &configmaps(), &config).await?;
                let ready = Condition::new(
                    "Ready",
                    ConditionStatus::True,
                    "Applied",
                    "configmap applied",
                );
                ctx.set_condition(&widget, ready).await?;
                ctx.event(&widget, EventType::Normal, "Applied", "configmap applied");
                Ok(Action::Done)
            }
            FinalizerEvent::Cleanup(_) => {
                state.cleanups.fetch_add(1, Ordering::SeqCst);
                if take(&state.cleanup_fails_first) {
                    return Err(Error::Asked);
                }
                Ok(Action::Done)
            }
        }
    })
    .await
}

fn builder(sim: &SimServer) -> ControllerBuilder<DynamicObject> {
    ControllerBuilder::new(client(sim), widgets(), "Widget")
        .namespace("default")
        .owns(configmaps())
}

fn ready_condition(widget: &Value) -> Option<Value> {
    widget["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned()
}

fn events_with_reason(sim: &SimServer, reason: &str) -> usize {
    sim.list("events", Some("default"))
        .unwrap()
        .iter()
        .filter(|e| e["reason"] == reason)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_controller_applies_a_child_a_condition_an_event_and_cleans_up() {
    let sim = sim().await;
    widget(&sim, "web", 3);
    let state = Arc::new(State::default());
    let running = start(builder(&sim), state.clone());

    wait_until("the widget is ready", || {
        get(&sim, "widgets.example.com", "web")
            .and_then(|w| ready_condition(&w))
            .is_some()
    })
    .await;
    let web = get(&sim, "widgets.example.com", "web").unwrap();
    assert_eq!(web["metadata"]["finalizers"], json!([FINALIZER]), "FZ1");
    let ready = ready_condition(&web).unwrap();
    assert_eq!(ready["status"], "True");
    assert_eq!(ready["observedGeneration"], web["metadata"]["generation"]);
    let config = get(&sim, "configmaps", "web").expect("the child is applied");
    assert_eq!(config["data"]["size"], "3");
    let owner = &config["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Widget");
    assert_eq!(owner["uid"], web["metadata"]["uid"]);
    assert_eq!(owner["controller"], true);
    let managers: Vec<&str> = config["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"widget-controller"), "{managers:?}");
    wait_until("the event is written", || {
        events_with_reason(&sim, "Applied") > 0
    })
    .await;

    // BD3: a child's change enqueues its owner, whose reconcile applies the child again.
    sim.patch(
        "configmaps",
        Some("default"),
        "web",
        &json!({"data": {"size": "tampered"}}),
    )
    .unwrap();
    wait_until("the child is put back", || {
        get(&sim, "configmaps", "web").is_some_and(|c| c["data"]["size"] == "3")
    })
    .await;

    // Deletion: the cleanup runs, the finalizer goes, and with it the widget.
    sim.delete("widgets.example.com", Some("default"), "web")
        .unwrap();
    wait_until("the widget is gone", || {
        get(&sim, "widgets.example.com", "web").is_none()
    })
    .await;
    assert_eq!(state.cleanups.load(Ordering::SeqCst), 1);
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_a_panic_a_timeout_and_a_failed_cleanup_are_retried() {
    let sim = sim().await;
    let state = Arc::new(State::default());
    state.fail_first.store(1, Ordering::SeqCst);
    state.panic_first.store(1, Ordering::SeqCst);
    state.hang_first.store(1, Ordering::SeqCst);
    state.cleanup_fails_first.store(2, Ordering::SeqCst);
    let running = start(
        builder(&sim).reconcile_timeout(Duration::from_millis(200)),
        state.clone(),
    );
    widget(&sim, "web", 1);
    wait_until("the widget is ready despite the failures", || {
        get(&sim, "widgets.example.com", "web")
            .and_then(|w| ready_condition(&w))
            .is_some()
    })
    .await;
    assert!(
        state.reconciles.load(Ordering::SeqCst) >= 4,
        "three failures, then success"
    );
    sim.delete("widgets.example.com", Some("default"), "web")
        .unwrap();
    wait_until("the widget is gone", || {
        get(&sim, "widgets.example.com", "web").is_none()
    })
    .await;
    assert_eq!(
        state.cleanups.load(Ordering::SeqCst),
        3,
        "two failed cleanups kept the finalizer, the third removed it"
    );
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_error_policy_decides_what_follows_an_error() {
    let sim = sim().await;
    widget(&sim, "web", 1);
    let stop = CancellationToken::new();
    let policy_calls = Arc::new(AtomicUsize::new(0));
    let run = tokio::spawn({
        let (stop, calls) = (stop.clone(), policy_calls.clone());
        builder(&sim)
            .shutdown_on(stop)
            .without_signal_handlers()
            .run(
                |_widget, _ctx: Context<DynamicObject, ()>| async {
                    Err::<Action, _>("always fails")
                },
                move |widget, error, _ctx| {
                    assert_eq!(widget.name(), "web");
                    assert_eq!(*error, "always fails");
                    calls.fetch_add(1, Ordering::SeqCst);
                    Action::RequeueAfter(Duration::from_millis(50))
                },
                (),
            )
    });
    // Requeued every 50 ms by the policy, not backed off exponentially by the queue.
    wait_until("the policy is asked ten times", || {
        policy_calls.load(Ordering::SeqCst) >= 10
    })
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generation_predicate_lets_spec_changes_through_and_not_status_writes() {
    let sim = sim().await;
    widget(&sim, "web", 1);
    let state = Arc::new(State::default());
    // Not owning the ConfigMaps: their events would enqueue the widget whatever its predicates.
    let running = start(
        ControllerBuilder::new(client(&sim), widgets(), "Widget")
            .namespace("default")
            .with_predicate(generation_changed()),
        state.clone(),
    );
    wait_until("the widget is ready", || {
        get(&sim, "widgets.example.com", "web")
            .and_then(|w| ready_condition(&w))
            .is_some()
    })
    .await;
    // One reconcile: it added the finalizer and acted (FZ1); its own writes did not pass.
    let settled = state.reconciles.load(Ordering::SeqCst);
    assert_eq!(settled, 1);
    let api: Api<DynamicObject> = Api::namespaced_with(client(&sim), widgets(), "default");
    api.patch_status(
        "web",
        &PatchOptions::default(),
        &Patch::Merge(json!({"status": {"note": "written by someone else"}})),
    )
    .await
    .unwrap();
    sim.patch(
        "widgets.example.com",
        Some("default"),
        "web",
        &json!({"metadata": {"labels": {"tier": "web"}}}),
    )
    .unwrap();
    sim.patch(
        "widgets.example.com",
        Some("default"),
        "web",
        &json!({"spec": {"size": 2}}),
    )
    .unwrap();
    wait_until("the spec change is applied", || {
        get(&sim, "configmaps", "web").is_some_and(|c| c["data"]["size"] == "2")
    })
    .await;
    assert_eq!(
        state.reconciles.load(Ordering::SeqCst),
        settled + 1,
        "only the spec change was reconciled"
    );
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_gives_reconciles_in_flight_a_bounded_time() {
    let sim = sim().await;
    widget(&sim, "web", 1);
    let state = Arc::new(State::default());
    state.hang_first.store(1, Ordering::SeqCst);
    let running = start(
        builder(&sim).shutdown_timeout(Duration::from_millis(300)),
        state.clone(),
    );
    wait_until("the reconcile hangs", || {
        state.reconciles.load(Ordering::SeqCst) == 1
    })
    .await;
    // The hanging reconcile has no timeout: shutdown abandons it after 300 ms and returns.
    tokio::time::timeout(Duration::from_secs(20), running.stop())
        .await
        .expect("run returns within the shutdown timeout")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_leader_election_one_replica_reconciles_and_the_other_takes_over() {
    let sim = sim().await;
    widget(&sim, "web", 1);
    let (a, b) = (Arc::new(State::default()), Arc::new(State::default()));
    let first = start(
        builder(&sim)
            .leader_election("widget-controller")
            .identity("a"),
        a.clone(),
    );
    wait_until("a reconciles", || a.reconciles.load(Ordering::SeqCst) > 0).await;
    let second = start(
        builder(&sim)
            .leader_election("widget-controller")
            .identity("b"),
        b.clone(),
    );
    widget(&sim, "db", 1);
    wait_until("a reconciles the new widget", || {
        a.seen.lock().contains_key("db")
    })
    .await;
    assert_eq!(b.reconciles.load(Ordering::SeqCst), 0, "b waits: a leads");
    first.stop().await.unwrap();
    let lease = get(&sim, "leases.coordination.k8s.io", "widget-controller").unwrap();
    assert_ne!(lease["spec"]["holderIdentity"], "a", "released on shutdown");
    widget(&sim, "cache", 1);
    wait_until("b leads and reconciles", || {
        b.seen.lock().contains_key("cache")
    })
    .await;
    second.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replicas_split_the_widgets_and_their_children() {
    let sim = sim().await;
    for i in 0..12 {
        widget(&sim, &format!("w{i}"), i);
    }
    let (a, b) = (Arc::new(State::default()), Arc::new(State::default()));
    let first = start(builder(&sim).sharded("widgets").identity("a"), a.clone());
    let second = start(builder(&sim).sharded("widgets").identity("b"), b.clone());
    let label = shard_label("widgets");
    // Settled: every widget ready, assigned, reconciled by its owner, its child following it,
    // and both replicas owning some (the second may join after the first took every widget).
    let settled = || {
        let mut owners = std::collections::BTreeSet::new();
        let each = (0..12).all(|i| {
            let name = format!("w{i}");
            let Some(w) = get(&sim, "widgets.example.com", &name) else {
                return false;
            };
            let Some(owner) = w["metadata"]["labels"][&label].as_str().map(str::to_string) else {
                return false;
            };
            let mine = if owner == "a" { &a } else { &b };
            let child = get(&sim, "configmaps", &name);
            owners.insert(owner.clone());
            ready_condition(&w).is_some()
                && mine.seen.lock().contains_key(&name)
                && child.is_some_and(|c| c["metadata"]["labels"][&label] == owner.as_str())
        });
        each && owners.len() == 2
    };
    wait_until(
        "the widgets are shared and reconciled by their owners",
        settled,
    )
    .await;
    assert!(
        a.reconciles.load(Ordering::SeqCst) > 0 && b.reconciles.load(Ordering::SeqCst) > 0,
        "both replicas work"
    );
    first.stop().await.unwrap();
    second.stop().await.unwrap();
}

/// What the read-your-writes test's reconcile counts.
struct Counting {
    calls: AtomicUsize,
    /// The `status.count` each reconcile saw.
    seen: Mutex<Vec<i64>>,
    /// Holds the informer's watch back (the simulator's stall), right before the first write.
    stall: Box<dyn Fn() + Send + Sync>,
}

/// Counts to 3 in the widget's status, one step per reconcile, each computed from the cached
/// copy: acting twice on one copy would write the same count twice.
async fn count_up(
    widget: Arc<DynamicObject>,
    ctx: Context<DynamicObject, Counting>,
) -> Result<Action, FenceError> {
    ctx.calls.fetch_add(1, Ordering::SeqCst);
    let count = widget
        .pointer("/status/count")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    ctx.seen.lock().push(count);
    if count >= 3 {
        return Ok(Action::Done);
    }
    if count == 0 {
        (ctx.stall)();
    }
    ctx.patch_status(&widget, &json!({"status": {"count": count + 1}}))
        .await?;
    Ok(Action::RequeueAfter(Duration::from_millis(10)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_not_reconciled_until_the_cache_shows_our_own_write() {
    let sim = Arc::new(sim().await);
    widget(&sim, "web", 1);
    let store = Arc::new(ConsistencyStore::new());
    let state = Counting {
        calls: AtomicUsize::new(0),
        seen: Mutex::new(Vec::new()),
        stall: Box::new({
            let sim = sim.clone();
            move || {
                sim.faults().stall();
            }
        }),
    };
    let stop = CancellationToken::new();
    let run = tokio::spawn(
        ControllerBuilder::new(client(&sim), widgets(), "Widget")
            .namespace("default")
            .consistency(store.clone())
            .shutdown_on(stop.clone())
            .without_signal_handlers()
            .run(count_up, |_, _, _| Action::Retry, state),
    );
    // The first reconcile wrote count 1; the cache still shows 0 (the watch is held back), and
    // the key, requeued after 10 ms, is skipped each time instead of reconciled on that copy.
    wait_until("several stale skips", || store.stale_sync_skips() >= 3).await;
    assert_eq!(
        get(&sim, "widgets.example.com", "web").unwrap()["status"]["count"],
        1
    );
    sim.faults().unstall();
    wait_until("the count reaches 3", || {
        get(&sim, "widgets.example.com", "web").is_some_and(|w| w["status"]["count"] == 3)
    })
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(store.gave_up(), 0);
}

/// The builder's metrics and readiness (feature `metrics`): the reconciles under
/// controller-runtime's names, the queue under client-go's, the leader status, and `/readyz`'s
/// check failing until the caches synced.
#[cfg(feature = "metrics")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builder_records_its_metrics_and_readiness() {
    use controller::metrics::{ControllerMetrics, Health};
    use controller::workqueue::PrometheusMetricsProvider;
    use prometheus_client::registry::Registry;

    let sim = sim().await;
    widget(&sim, "web", 1);
    let mut registry = Registry::default();
    let queue = Arc::new(PrometheusMetricsProvider::register(&mut registry));
    let reconciles = ControllerMetrics::register(&mut registry);
    let health = Health::new();
    let state = Arc::new(State::default());
    let running = start(
        builder(&sim)
            .leader_election("widget-controller")
            .identity("a")
            .metrics(reconciles, queue)
            .health(health.clone()),
        state.clone(),
    );
    wait_until("the widget is ready", || {
        get(&sim, "widgets.example.com", "web")
            .and_then(|w| ready_condition(&w))
            .is_some()
    })
    .await;
    assert_eq!(health.names(), ["widget-controller-caches"]);
    assert!(health.failing().is_empty(), "{:?}", health.failing());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for series in [
        "controller_runtime_reconcile_total{controller=\"widget-controller\",result=\"success\"}",
        "workqueue_adds_total{name=\"widget-controller\"}",
        "leader_election_master_status{name=\"widget-controller\"} 1",
    ] {
        assert!(text.contains(series), "{series} missing from\n{text}");
    }
    running.stop().await.unwrap();
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("leader_election_master_status{name=\"widget-controller\"} 0"),
        "{text}"
    );
}

/// A typed primary resource (k8s-openapi's `ConfigMap`): the same builder, context and writes.
#[cfg(feature = "k8s-openapi")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_primary_resource_is_reconciled_and_written() {
    use k8s_openapi::api::core::v1::ConfigMap;

    async fn stamp(
        config: Arc<ConfigMap>,
        ctx: Context<ConfigMap, ()>,
    ) -> Result<Action, FenceError> {
        if config
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("stamped"))
        {
            return Ok(Action::Done);
        }
        let patch = json!({"metadata": {"resourceVersion": config.metadata.resource_version,
                                        "annotations": {"stamped": "yes"}}});
        let written = ctx
            .api(&config)
            .patch(
                config.name(),
                &PatchOptions::default(),
                &Patch::Merge(patch),
            )
            .await?;
        ctx.record_write(&written);
        ctx.event(&config, EventType::Normal, "Stamped", "annotated");
        Ok(Action::Done)
    }

    let sim = sim().await;
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "typed"}}),
    )
    .unwrap();
    let stop = CancellationToken::new();
    let run = tokio::spawn(
        ControllerBuilder::<ConfigMap>::new(client(&sim), configmaps(), "ConfigMap")
            .namespace("default")
            .with_predicate(generation_changed().or(annotations_changed()))
            .shutdown_on(stop.clone())
            .without_signal_handlers()
            .run(stamp, |_, _, _| Action::Retry, ()),
    );
    wait_until("the config map is stamped", || {
        get(&sim, "configmaps", "typed")
            .is_some_and(|c| c["metadata"]["annotations"]["stamped"] == "yes")
    })
    .await;
    wait_until("the event is written", || {
        events_with_reason(&sim, "Stamped") > 0
    })
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
}

/// `.watches`: a ConfigMap naming a widget in its `widget` label enqueues that widget, on
/// add, update and delete; and a `CompactObject` primary runs as any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_object_enqueues_the_keys_its_mapper_gives() {
    let sim = sim().await;
    widget(&sim, "web", 1);
    let seen = Arc::new(AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let seen = seen.clone();
        ControllerBuilder::<CompactObject>::new(client(&sim), widgets(), "Widget")
            .namespace("default")
            .watches(configmaps(), |config: &DynamicObject| {
                config
                    .label("widget")
                    .map(|w| format!("{}/{w}", config.namespace().unwrap_or("")))
            })
            .shutdown_on(stop.clone())
            .without_signal_handlers()
            .run(
                move |widget: Arc<CompactObject>, _ctx: Context<CompactObject, ()>| {
                    assert_eq!(widget.name(), "web");
                    seen.fetch_add(1, Ordering::SeqCst);
                    async { Ok::<_, FenceError>(Action::Done) }
                },
                |_, _, _| Action::Retry,
                (),
            )
    });
    wait_until("the widget's first reconcile", || {
        seen.load(Ordering::SeqCst) == 1
    })
    .await;
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "settings", "labels": {"widget": "web"}}}),
    )
    .unwrap();
    wait_until("the add enqueues the widget", || {
        seen.load(Ordering::SeqCst) == 2
    })
    .await;
    sim.patch(
        "configmaps",
        Some("default"),
        "settings",
        &json!({"data": {"k": "v"}}),
    )
    .unwrap();
    wait_until("the update enqueues it", || {
        seen.load(Ordering::SeqCst) == 3
    })
    .await;
    sim.delete("configmaps", Some("default"), "settings")
        .unwrap();
    wait_until("the delete enqueues it", || {
        seen.load(Ordering::SeqCst) == 4
    })
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
}
