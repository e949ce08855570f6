//! Scenario `controller-writes`: a controller that acts. Each `Widget` (a custom resource,
//! `example.com/v1`, with a status subresource) wants `spec.replicas` child ConfigMaps named
//! `<widget>-<i>`; the controller creates the missing ones, deletes the extra ones (with a uid
//! precondition) and those of deleted widgets (a delete collection by label), and writes the
//! parent's `status` (children, observedGeneration) through the status subresource with
//! `retry_on_conflict`. All of it through the informers' own client (`Api<K>`), while widgets are
//! created, resized and deleted behind its back and conflicts are injected into its writes.
//!
//! At the end: for every widget on the server exactly its children exist (nothing missing,
//! nothing duplicated or left over), every status is up to date with its generation, and no child
//! of a deleted widget is left.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use controller::{Action, Controller};
use serde_json::{json, Value};
use sim_apiserver::{ApiError, RequestKind, ResourceDef, SimServer};
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{DynamicObject, Object, ReadOnlyIndexer};
use workqueue::shared_informer::reflector::{
    retry_on_conflict, Api, ClientError, CreateOptions, DeleteOptions, ListOptions, Preconditions,
    Resource, RetryBackoff,
};
use workqueue::shared_informer::EventHandlerFns;
use workqueue::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, KeyEnqueuer, MaxOf, RateLimitingQueue,
};

use crate::check::{eventually, Outcome};
use crate::harness::{config_for, configmaps, fast_backoff};
use crate::{ensure, Opts};

const NS: &str = "cw";
const LABEL: &str = "widget";

fn widgets() -> Resource {
    Resource::namespaced("example.com", "v1", "widgets")
}

/// What the controller did, for the report.
#[derive(Default)]
struct Stats {
    creates: AtomicU64,
    deletes: AtomicU64,
    status_writes: AtomicU64,
    conflicts: AtomicU64,
    failures: AtomicU64,
}

fn widget(name: &str, replicas: u64) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": name, "namespace": NS}, "spec": {"replicas": replicas}})
}

fn child(parent: &str, i: u64) -> DynamicObject {
    let mut o = DynamicObject::new("v1", "ConfigMap");
    o.metadata.name = Some(format!("{parent}-{i}"));
    o.metadata.labels = Some([(LABEL.to_string(), parent.to_string())].into());
    o.data.insert(
        "data".into(),
        json!({"parent": parent, "index": i.to_string()}),
    );
    o
}

/// The controller's handles: caches to read, APIs to write.
#[derive(Clone)]
struct Ctx {
    widgets: ReadOnlyIndexer<DynamicObject>,
    children: ReadOnlyIndexer<DynamicObject>,
    widget_api: Api<DynamicObject>,
    child_api: Api<DynamicObject>,
    stats: Arc<Stats>,
}

fn replicas_of(w: &DynamicObject) -> u64 {
    w.data
        .get("spec")
        .and_then(|s| s.get("replicas"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// One reconcile of the widget `key` (`namespace/name`).
async fn reconcile(ctx: Ctx, key: String) -> Result<Action, ClientError> {
    let name = key.rsplit('/').next().unwrap_or(&key).to_string();
    let Some(w) = ctx.widgets.get_by_key(&key) else {
        // Deleted: its children go too, in one request.
        let selector = format!("{LABEL}={name}");
        let has_children = ctx.children.list().iter().any(|c| {
            c.labels()
                .and_then(|l| l.get(LABEL))
                .is_some_and(|p| *p == name)
        });
        if has_children {
            ctx.child_api
                .delete_collection(
                    &DeleteOptions::default(),
                    &ListOptions {
                        label_selector: Some(selector),
                        ..ListOptions::default()
                    },
                )
                .await?;
            ctx.stats.deletes.fetch_add(1, Ordering::Relaxed);
        }
        return Ok(Action::Done);
    };
    let replicas = replicas_of(&w);
    for i in 0..replicas {
        let child_key = format!("{NS}/{name}-{i}");
        if ctx.children.get_by_key(&child_key).is_none() {
            match ctx
                .child_api
                .create(&CreateOptions::default(), &child(&name, i))
                .await
            {
                Ok(_) => {
                    ctx.stats.creates.fetch_add(1, Ordering::Relaxed);
                }
                // Created earlier and not in the cache yet: nothing to do.
                Err(ClientError::AlreadyExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
    }
    for c in ctx.children.list() {
        let Some(parent) = c.labels().and_then(|l| l.get(LABEL)) else {
            continue;
        };
        let index = c
            .name()
            .rsplit('-')
            .next()
            .and_then(|i| i.parse::<u64>().ok());
        if *parent == name && index.is_none_or(|i| i >= replicas) {
            let params = DeleteOptions {
                preconditions: Some(Preconditions {
                    uid: c.uid().map(str::to_string),
                    resource_version: None,
                }),
                ..DeleteOptions::default()
            };
            match ctx.child_api.delete(c.name(), &params).await {
                Ok(_) => {
                    ctx.stats.deletes.fetch_add(1, Ordering::Relaxed);
                }
                Err(ClientError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
    }
    let generation = w.generation().unwrap_or(0);
    let status = json!({"children": replicas, "observedGeneration": generation});
    if w.data.get("status") != Some(&status) {
        let uid = w.uid().map(str::to_string);
        let stats = Arc::clone(&ctx.stats);
        let api = ctx.widget_api.clone();
        let mut first = Some((*w).clone());
        let written = retry_on_conflict(RetryBackoff::DEFAULT_RETRY, || {
            // The cached copy first; after a conflict, the server's.
            let cached = first.take();
            let (api, uid, name, stats) = (api.clone(), uid.clone(), name.clone(), stats.clone());
            async move {
                let mut fresh = match cached {
                    Some(c) => c,
                    None => {
                        stats.conflicts.fetch_add(1, Ordering::Relaxed);
                        api.get(&name).await?
                    }
                };
                if fresh.uid() != uid.as_deref() || replicas_of(&fresh) != replicas {
                    // Replaced or resized meanwhile: its own event will reconcile it again.
                    return Ok(false);
                }
                let generation = fresh.generation().unwrap_or(0);
                fresh.data.insert(
                    "status".into(),
                    json!({"children": replicas, "observedGeneration": generation}),
                );
                api.replace_status(&name, &CreateOptions::default(), &fresh)
                    .await?;
                Ok(true)
            }
        })
        .await;
        match written {
            Ok(true) => {
                ctx.stats.status_writes.fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) | Err(ClientError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Action::Done)
}

/// What the server holds: widgets (name → replicas, generation, status) and children (name →
/// parent label).
fn check_server(sim: &SimServer) -> Result<String, String> {
    let widgets = sim
        .list("widgets.example.com", Some(NS))
        .map_err(|e| e.to_string())?;
    let children = sim
        .list("configmaps", Some(NS))
        .map_err(|e| e.to_string())?;
    let mut want: BTreeSet<String> = BTreeSet::new();
    let mut problems = Vec::new();
    for w in &widgets {
        let name = w["metadata"]["name"].as_str().unwrap_or("");
        let replicas = w["spec"]["replicas"].as_u64().unwrap_or(0);
        for i in 0..replicas {
            want.insert(format!("{name}-{i}"));
        }
        let generation = w["metadata"]["generation"].as_u64().unwrap_or(0);
        let status = json!({"children": replicas, "observedGeneration": generation});
        if w.get("status") != Some(&status) {
            problems.push(format!(
                "{name}: status {:?}, want {status}",
                w.get("status")
            ));
        }
    }
    let have: BTreeMap<String, String> = children
        .iter()
        .filter_map(|c| {
            let parent = c["metadata"]["labels"][LABEL].as_str()?;
            Some((
                c["metadata"]["name"].as_str()?.to_string(),
                parent.to_string(),
            ))
        })
        .collect();
    let missing: Vec<_> = want
        .iter()
        .filter(|n| !have.contains_key(*n))
        .take(5)
        .collect();
    let extra: Vec<_> = have.keys().filter(|n| !want.contains(*n)).take(5).collect();
    if !missing.is_empty() || !extra.is_empty() || !problems.is_empty() {
        return Err(format!(
            "missing children {missing:?}, extra children {extra:?}, statuses {:?}",
            &problems[..problems.len().min(3)]
        ));
    }
    Ok(format!(
        "{} widgets with {} children",
        widgets.len(),
        have.len()
    ))
}

/// Runs the scenario.
pub async fn controller_writes(_: Opts) -> Outcome {
    let sim = SimServer::start().await?;
    sim.register(ResourceDef::new("example.com", "v1", "Widget", "widgets", true).with_status());
    sim.create("namespaces", None, json!({"metadata": {"name": NS}}))?;
    for i in 0..60 {
        sim.create(
            "widgets.example.com",
            Some(NS),
            widget(&format!("w{i}"), i % 4),
        )?;
    }
    let factory = crate::harness::factory(config_for(&sim)?)
        .namespace(NS)
        .reflector_options(fast_backoff(false));
    let client = factory.client()?;
    let widget_informer = factory.informer::<DynamicObject>(widgets())?;
    let child_informer = factory.informer::<DynamicObject>(configmaps())?;
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new(MaxOf::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1),
        )),
        Box::new(BucketRateLimiter::new(500.0, 200)),
    ]));
    widget_informer.add_event_handler(KeyEnqueuer::new(queue.clone()))?;
    // A child's change reconciles its parent.
    let parent_of = |c: &DynamicObject| {
        c.labels()
            .and_then(|l| l.get(LABEL))
            .map(|p| format!("{NS}/{p}"))
    };
    {
        let (q1, q2, q3) = (queue.clone(), queue.clone(), queue.clone());
        child_informer.add_event_handler(
            EventHandlerFns::new()
                .on_add(move |c, _| {
                    if let Some(k) = parent_of(c) {
                        q1.add(k);
                    }
                })
                .on_update(move |_, c| {
                    if let Some(k) = parent_of(c) {
                        q2.add(k);
                    }
                })
                .on_deleted(move |d| {
                    if let Some(k) = d.object.as_deref().and_then(parent_of) {
                        q3.add(k);
                    }
                }),
        )?;
    }
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    let ctx = Ctx {
        widgets: widget_informer.indexer().clone(),
        children: child_informer.indexer().clone(),
        widget_api: Api::namespaced_with(client.clone(), widgets(), NS),
        child_api: Api::namespaced_with(client, configmaps(), NS),
        stats: Arc::default(),
    };
    let stats = Arc::clone(&ctx.stats);
    let runner = {
        let (cancel, queue, ctx) = (cancel.clone(), queue.clone(), ctx.clone());
        tokio::spawn(async move {
            Controller::new(queue)
                .workers(4)
                .run(cancel, move |key: String| {
                    let ctx = ctx.clone();
                    async move {
                        let stats = Arc::clone(&ctx.stats);
                        let out = reconcile(ctx, key).await;
                        if out.is_err() {
                            stats.failures.fetch_add(1, Ordering::Relaxed);
                        }
                        out
                    }
                })
                .await
        })
    };
    let report = factory.wait_for_cache_sync(Duration::from_secs(30)).await;
    ensure!(report.all_synced(), "the caches did not sync: {report:?}");
    eventually("the first convergence", Duration::from_secs(60), || {
        check_server(&sim)
    })
    .await?;

    // Churn behind the controller's back, with conflicts injected into its writes.
    let mut churn_ops = 0u64;
    let mut next = 60u64;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut step = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for round in 0..40u64 {
        for _ in 0..10 {
            let live = sim.list("widgets.example.com", Some(NS))?;
            let pick = step();
            match pick % 10 {
                0..=5 if !live.is_empty() => {
                    let w = &live[(pick as usize / 10) % live.len()];
                    let name = w["metadata"]["name"].as_str().unwrap_or("");
                    let replicas = step() % 5;
                    sim.patch(
                        "widgets.example.com",
                        Some(NS),
                        name,
                        &json!({"spec": {"replicas": replicas}}),
                    )?;
                }
                6..=7 if !live.is_empty() => {
                    let w = &live[(pick as usize / 10) % live.len()];
                    let name = w["metadata"]["name"].as_str().unwrap_or("");
                    sim.delete("widgets.example.com", Some(NS), name)?;
                }
                _ => {
                    sim.create(
                        "widgets.example.com",
                        Some(NS),
                        widget(&format!("w{next}"), step() % 4),
                    )?;
                    next += 1;
                }
            }
            churn_ops += 1;
        }
        if round % 4 == 0 {
            sim.faults().fail_next_with(
                RequestKind::Write,
                ApiError::conflict("widgets", "example.com", "injected"),
                3,
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let detail = eventually("convergence after churn", Duration::from_secs(60), || {
        check_server(&sim)
    })
    .await?;
    ensure!(
        queue.is_empty() || queue.len() < 5,
        "the queue still holds {} keys after convergence",
        queue.len()
    );
    cancel.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(10), runner).await;
    ensure!(
        matches!(stopped, Ok(Ok(()))),
        "the controller runner did not stop cleanly within 10 s: {stopped:?}"
    );
    factory.shutdown().await;
    let s = &stats;
    ensure!(
        s.conflicts.load(Ordering::Relaxed) + s.failures.load(Ordering::Relaxed) > 0,
        "no conflict reached the controller: the injection did not work"
    );
    Ok(format!(
        "{churn_ops} churn ops; {} creates, {} deletes, {} status writes, {} conflicts re-read, {} failed reconciles retried; {detail} converged",
        s.creates.load(Ordering::Relaxed),
        s.deletes.load(Ordering::Relaxed),
        s.status_writes.load(Ordering::Relaxed),
        s.conflicts.load(Ordering::Relaxed),
        s.failures.load(Ordering::Relaxed),
    ))
}
