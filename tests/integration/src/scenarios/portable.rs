//! The portable scenarios: the same steps and the same verdicts on the simulator and on a real
//! kube-apiserver with etcd (`--server sim|real`). Nothing here injects a fault that only the
//! simulator can: the server is driven through [`Backend`] (seeding, churn, the truth read back)
//! and the client under test sees whatever the server does.
//!
//! - `portable-informers`: paginated lists and watch-list streaming, a label and a field
//!   selector, on both queues, under churn in three namespaces.
//! - `portable-relist-410`: the informer's watch is held back (a wrapper around its
//!   lister-watcher) while objects are deleted, updated and created and the server compacts past
//!   its resource version; released, the watch gets 410 Gone, the reflector relists, and each
//!   deletion arrives as a tombstone exactly once.
//! - `portable-crd`: a CustomResourceDefinition made through the API, a `DynamicObject` informer
//!   on the resource it serves, under churn.
//! - `portable-protobuf`: `PbView<Pod>` and `CompactObject` informers on Kubernetes' protobuf.
//! - `portable-writes`: `Api` writes of every kind, each read back through the backend.
//! - `portable-shard-selector`: server-side sharded lists and watches, judged against our own
//!   hash of every object's uid.
//! - `portable-read-your-writes`: the consistency store holds a key back while the cache has
//!   not applied the controller's own write (the watch held back), and releases it after.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::protobuf::PbView;
use workqueue::shared_informer::reflector::store_index::{CompactObject, DynamicObject};
use workqueue::shared_informer::reflector::{
    Encoding, HttpListerWatcher, ListOptions, ListerWatcher, ObjectList, ReflectorError,
    ReflectorOptions, Resource, WatchOptions, WatchStream,
};
use workqueue::shared_informer::{InformerOptions, SharedIndexInformer};

use crate::backend::{self, Backend, Real};
use crate::check::{converge, converge_where, eventually, Failure, Outcome, Recorder};
use crate::harness::{configmaps, factory, fast_backoff, pods, synced};
use crate::{ensure, Opts};

const NAMESPACES: usize = 3;

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "churn"}}, "data": {"k": "v"}})
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "churn"}},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/app:1"}]}})
}

/// Creates `per_namespace` objects `seed-{i}` in each of `prefix-0..NAMESPACES`, every other
/// one labelled `tier=a` (else `tier=b`).
fn seed(
    backend: &dyn Backend,
    resource: &str,
    prefix: &str,
    per_namespace: usize,
    template: fn(&str) -> Value,
) -> Result<(), Failure> {
    for ns in 0..NAMESPACES {
        let namespace = format!("{prefix}-{ns}");
        for i in 0..per_namespace {
            let mut object = template(&format!("seed-{i}"));
            object["metadata"]["labels"] = json!({"tier": if i % 2 == 0 { "a" } else { "b" }});
            backend
                .create(resource, Some(&namespace), object)
                .map_err(|e| Failure(format!("seeding {resource} in {namespace}: {e}")))?;
        }
    }
    Ok(())
}

/// Churns every namespace at `rate` operations a second each for `seconds`; the total done.
async fn churn_all(
    backend: &Arc<dyn Backend>,
    resource: &'static str,
    prefix: &str,
    rate: f64,
    seconds: f64,
    template: fn(&str) -> Value,
) -> Result<u64, Failure> {
    let churns: Vec<_> = (0..NAMESPACES)
        .map(|ns| {
            backend::churn(
                backend.clone(),
                resource,
                format!("{prefix}-{ns}"),
                40,
                rate,
                seconds,
                template,
            )
        })
        .collect();
    let mut ops = 0;
    for churn in churns {
        ops += churn
            .await
            .map_err(|e| Failure(format!("churn task: {e}")))?
            .map_err(|e| Failure(format!("churn: {e}")))?;
    }
    Ok(ops)
}

fn tier_a(object: &Value) -> bool {
    object
        .pointer("/metadata/labels/tier")
        .and_then(Value::as_str)
        == Some("a")
}

fn in_namespace_1(prefix: &'static str) -> impl Fn(&Value) -> bool {
    move |object: &Value| {
        object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            == Some(format!("{prefix}-1").as_str())
    }
}

/// `portable-informers`: list (paginated 50 at a time) and watch-list modes, each with an
/// informer on everything, one with a label selector and one with a field selector.
pub async fn informers(opts: Opts) -> Outcome {
    let mut details = Vec::new();
    for watch_list in [false, true] {
        let detail = informers_once(opts, watch_list)
            .await
            .map_err(|f| Failure(format!("watch-list {watch_list}: {f}")))?;
        details.push(format!("[watch-list {watch_list}: {detail}]"));
    }
    Ok(details.join(" "))
}

async fn informers_once(opts: Opts, watch_list: bool) -> Outcome {
    const PREFIX: &str = "pi";
    let backend = backend::start(opts.server).await?;
    seed(&*backend, "configmaps", PREFIX, 150, configmap)?;
    let options = ReflectorOptions {
        page_size: 50,
        ..fast_backoff(watch_list)
    };
    let everything = factory(backend.config()?).reflector_options(options.clone());
    let labelled = factory(backend.config()?)
        .reflector_options(options.clone())
        .label_selector("tier=a".parse()?);
    let fielded = factory(backend.config()?)
        .reflector_options(options)
        .field_selector(format!("metadata.namespace={PREFIX}-1"));
    let all = everything.informer::<CompactObject>(configmaps())?;
    let tier = labelled.informer::<DynamicObject>(configmaps())?;
    let ns1 = fielded.informer::<DynamicObject>(configmaps())?;
    let (rec_all, seq_all) = Recorder::new();
    let (rec_tier, seq_tier) = Recorder::new();
    let (rec_ns1, seq_ns1) = Recorder::new();
    all.add_event_handler(rec_all)?;
    tier.add_event_handler(rec_tier)?;
    ns1.add_event_handler(rec_ns1)?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    for factory in [&everything, &labelled, &fielded] {
        factory.start(&cancel);
    }
    synced(&all, Duration::from_secs(60)).await?;
    synced(&tier, Duration::from_secs(60)).await?;
    synced(&ns1, Duration::from_secs(60)).await?;
    // The churn's objects carry no tier label: they move the label informer's neighbours only.
    let ops = churn_all(&backend, "configmaps", PREFIX, 40.0, 5.0, configmap).await?;
    // Flip some seeds between tiers, so objects enter and leave the label selector.
    for i in (0..150).step_by(3) {
        let tier = if i % 2 == 0 { "b" } else { "a" };
        backend
            .merge_patch(
                "configmaps",
                Some(&format!("{PREFIX}-0")),
                &format!("seed-{i}"),
                json!({"metadata": {"labels": {"tier": tier}}}),
            )
            .map_err(Failure)?;
    }
    let timeout = Duration::from_secs(60);
    let a = converge(
        &*backend,
        "configmaps",
        all.indexer(),
        &[("all", &seq_all)],
        timeout,
    )
    .await?;
    let t = converge_where(
        &*backend,
        "configmaps",
        &tier_a,
        tier.indexer(),
        &[("tier=a", &seq_tier)],
        timeout,
    )
    .await?;
    let n = converge_where(
        &*backend,
        "configmaps",
        &in_namespace_1(PREFIX),
        ns1.indexer(),
        &[("namespace", &seq_ns1)],
        timeout,
    )
    .await?;
    cancel.cancel();
    for factory in [everything, labelled, fielded] {
        factory.shutdown().await;
    }
    Ok(format!(
        "{} on {ops} churn ops; {a}; {t}; {n}",
        backend.name()
    ))
}

/// A lister-watcher whose watches wait until a gate opens: the scenario holds the informer's
/// watch back while the server moves on, as a client cut off for a while would be.
struct GatedWatch<L> {
    inner: L,
    open: watch::Receiver<bool>,
    /// The resource versions the held watches asked to start from.
    asked: watch::Sender<Vec<String>>,
}

impl<K: Send + 'static, L: ListerWatcher<K>> ListerWatcher<K> for GatedWatch<L> {
    async fn list(&self, options: ListOptions) -> Result<ObjectList<K>, ReflectorError> {
        self.inner.list(options).await
    }

    async fn watch(&self, options: WatchOptions) -> Result<WatchStream<K>, ReflectorError> {
        let from = options
            .resource_version
            .as_ref()
            .map(|rv| rv.to_string())
            .unwrap_or_default();
        self.asked.send_modify(|asked| asked.push(from));
        let mut open = self.open.clone();
        // A closed gate (the scenario ended) lets the watch through: the informer is stopping.
        let _ = open.wait_for(|open| *open).await;
        self.inner.watch(options).await
    }

    fn supports_watch_list(&self) -> bool {
        self.inner.supports_watch_list()
    }

    fn representation(&self) -> workqueue::shared_informer::reflector::Representation {
        self.inner.representation()
    }

    fn resource(&self) -> Option<Resource> {
        self.inner.resource()
    }
}

/// `portable-relist-410`: see the module doc. On the real server the scenario runs without the
/// watch cache and with compaction every 2 s, so that an old resource version is gone from etcd
/// within seconds; on the simulator it compacts by hand.
pub async fn relist_410(opts: Opts) -> Outcome {
    const PREFIX: &str = "gone";
    let backend: Arc<dyn Backend> = match opts.server {
        backend::ServerKind::Sim => {
            let sim = sim_apiserver::SimServer::builder()
                .watch_cache(false)
                .start()
                .await?;
            Arc::new(sim)
        }
        backend::ServerKind::Real => {
            let mut options = real_apiserver::ServerOptions::default();
            options.watch_cache = false;
            options.compaction_interval = Duration::from_secs(2);
            Arc::new(Real::start(options).await?)
        }
    };
    seed(&*backend, "configmaps", PREFIX, 60, configmap)?;
    // The gate starts closed: the informer lists, then its first watch waits.
    let (open_tx, open_rx) = watch::channel(false);
    let (asked_tx, mut asked_rx) = watch::channel(Vec::new());
    let lw = GatedWatch {
        inner: HttpListerWatcher::<DynamicObject>::new(&backend.config()?, configmaps())?,
        open: open_rx,
        asked: asked_tx,
    };
    let informer = SharedIndexInformer::new(
        lw,
        InformerOptions {
            queue: crate::harness::queue(),
            name: "relist-410".into(),
            reflector: ReflectorOptions {
                page_size: 50,
                ..fast_backoff(false)
            },
            ..InformerOptions::default()
        },
    );
    let (recorder, seq) = Recorder::new();
    informer.add_event_handler(recorder)?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    synced(&informer, Duration::from_secs(60)).await?;
    let held = tokio::time::timeout(
        Duration::from_secs(30),
        asked_rx.wait_for(|asked| !asked.is_empty()),
    )
    .await
    .map_err(|_| Failure("the informer opened no watch after its list".into()))?
    .map_err(|e| Failure(format!("the gate: {e}")))?[0]
        .clone();
    ensure!(
        !held.is_empty(),
        "the held watch asks for no resource version"
    );

    // While the watch is held: delete every third object, update the next, create new ones.
    let present = crate::check::server_state(&*backend, "configmaps").map_err(Failure)?;
    let mut deleted = BTreeSet::new();
    for (i, key) in present.keys().filter(|k| k.starts_with(PREFIX)).enumerate() {
        let Some((ns, name)) = key.split_once('/') else {
            continue;
        };
        match i % 3 {
            0 => {
                backend
                    .delete("configmaps", Some(ns), name)
                    .map_err(Failure)?;
                deleted.insert(key.clone());
            }
            1 => {
                backend
                    .merge_patch(
                        "configmaps",
                        Some(ns),
                        name,
                        json!({"data": {"k": "changed"}}),
                    )
                    .map_err(Failure)?;
            }
            _ => {}
        }
    }
    for i in 0..20 {
        backend
            .create(
                "configmaps",
                Some(&format!("{PREFIX}-0")),
                configmap(&format!("new-{i}")),
            )
            .map_err(Failure)?;
    }
    backend
        .compact_past("configmaps", &held)
        .map_err(|e| Failure(format!("compacting past {held}: {e}")))?;
    open_tx
        .send(true)
        .map_err(|_| Failure("the gate's informer is gone".into()))?;
    let detail = converge(
        &*backend,
        "configmaps",
        informer.indexer(),
        &[("relist", &seq)],
        Duration::from_secs(60),
    )
    .await?;
    // The resumed watch was refused (410), so the reflector relisted and opened a new watch
    // from the relist's version.
    let asked = asked_rx.borrow().clone();
    ensure!(
        asked.len() >= 2 && asked[1] != held,
        "after the held watch from {held}, the watches asked for {asked:?}: no relist"
    );
    let tombstoned: Vec<String> = seq
        .lock()
        .tombstoned
        .iter()
        .map(|(k, _)| k.clone())
        .collect();
    let unique: BTreeSet<String> = tombstoned.iter().cloned().collect();
    ensure!(
        unique == deleted && tombstoned.len() == deleted.len(),
        "{} deleted while the watch was held, tombstones for {} keys ({} in all)",
        deleted.len(),
        unique.len(),
        tombstoned.len()
    );
    cancel.cancel();
    Ok(format!(
        "{}: watch from {held} refused, relisted; {} tombstones, each once; {detail}",
        backend.name(),
        deleted.len()
    ))
}

/// `portable-crd`: a CRD through the API, then a `DynamicObject` informer on its resource under
/// churn.
pub async fn crd(opts: Opts) -> Outcome {
    const PREFIX: &str = "pc";
    let backend = backend::start(opts.server).await?;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]},
    });
    backend
        .create("customresourcedefinitions.apiextensions.k8s.io", None, crd)
        .map_err(Failure)?;
    // A new resource is served once the CRD is Established and discovery lists it.
    eventually(
        "the CRD's resource to be served",
        Duration::from_secs(30),
        || backend.list("gadgets.example.com", None).map(|_| ()),
    )
    .await?;
    fn gadget(name: &str) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": name}, "spec": {"size": 1}})
    }
    seed(&*backend, "gadgets.example.com", PREFIX, 50, gadget)?;
    let factory = factory(backend.config()?).reflector_options(fast_backoff(false));
    let informer =
        factory.informer::<DynamicObject>(Resource::namespaced("example.com", "v1", "gadgets"))?;
    let (recorder, seq) = Recorder::new();
    informer.add_event_handler(recorder)?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    synced(&informer, Duration::from_secs(60)).await?;
    let ops = churn_all(&backend, "gadgets.example.com", PREFIX, 30.0, 4.0, gadget).await?;
    let detail = converge(
        &*backend,
        "gadgets.example.com",
        informer.indexer(),
        &[("gadgets", &seq)],
        Duration::from_secs(60),
    )
    .await?;
    cancel.cancel();
    factory.shutdown().await;
    Ok(format!("{} on {ops} churn ops; {detail}", backend.name()))
}

/// `portable-protobuf`: `PbView<Pod>` and `CompactObject` informers asking for protobuf, under
/// pod churn; both converge, and the typed view decoded real messages.
pub async fn protobuf(opts: Opts) -> Outcome {
    use workqueue::shared_informer::reflector::store_index::k8s_pb::api::core::v1::Pod;
    const PREFIX: &str = "pp";
    let backend = backend::start(opts.server).await?;
    seed(&*backend, "pods", PREFIX, 60, pod)?;
    let factory = factory(backend.config()?)
        .reflector_options(fast_backoff(false))
        .encoding(Encoding::Protobuf);
    let viewed = factory.informer::<PbView<Pod>>(Resource::of_pb::<Pod>())?;
    let compact = factory.informer::<CompactObject>(pods())?;
    let (rec_view, seq_view) = Recorder::new();
    let (rec_compact, seq_compact) = Recorder::new();
    viewed.add_event_handler(rec_view)?;
    compact.add_event_handler(rec_compact)?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    synced(&viewed, Duration::from_secs(60)).await?;
    synced(&compact, Duration::from_secs(60)).await?;
    let ops = churn_all(&backend, "pods", PREFIX, 30.0, 4.0, pod).await?;
    let timeout = Duration::from_secs(60);
    let v = converge(
        &*backend,
        "pods",
        viewed.indexer(),
        &[("view", &seq_view)],
        timeout,
    )
    .await?;
    let c = converge(
        &*backend,
        "pods",
        compact.indexer(),
        &[("compact", &seq_compact)],
        timeout,
    )
    .await?;
    // Every cached view holds a real container list, decoded from the server's messages.
    let images: BTreeSet<String> = viewed
        .indexer()
        .list()
        .iter()
        .filter_map(|p| {
            p.view()
                .spec()
                .and_then(|s| s.containers().next())
                .and_then(|c| c.image())
                .map(str::to_string)
        })
        .collect();
    ensure!(
        images.len() == 1 && images.contains("registry.invalid/app:1"),
        "the protobuf views hold images {images:?}"
    );
    cancel.cancel();
    factory.shutdown().await;
    Ok(format!("{} on {ops} churn ops; {v}; {c}", backend.name()))
}

/// `portable-writes`: this project's `Api` writes (create, each patch type, status, scale, dry
/// run, a stale replace and `retry_on_conflict`), each checked by reading the object back
/// through the backend's own path.
pub async fn writes(opts: Opts) -> Outcome {
    use workqueue::shared_informer::reflector::{
        retry_on_conflict, Api, Client, CreateOptions, Patch, PatchOptions, RetryBackoff,
    };
    const NS: &str = "pw";
    let backend = backend::start(opts.server).await?;
    backend
        .create("configmaps", Some(NS), configmap("seed"))
        .map_err(Failure)?;
    let client = Client::new(&backend.config()?)?;
    let maps: Api<DynamicObject> = Api::namespaced_with(client.clone(), configmaps(), NS);
    let read = |name: &str| backend.get("configmaps", Some(NS), name).map_err(Failure);
    let data = |object: &Value, key: &str| {
        object
            .pointer(&format!("/data/{key}"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut done = Vec::new();

    // Create, then a merge patch and a JSON patch whose test guards it.
    let mut object = configmap("cm");
    object["data"] = json!({"a": "1"});
    maps.create(&CreateOptions::default(), &object).await?;
    maps.patch(
        "cm",
        &PatchOptions::default(),
        &Patch::Merge(json!({"data": {"b": "2"}})),
    )
    .await?;
    let stored = read("cm")?;
    ensure!(
        data(&stored, "a").as_deref() == Some("1") && data(&stored, "b").as_deref() == Some("2"),
        "after a merge patch: {}",
        stored["data"]
    );
    let guarded = |expect: &str, to: &str| {
        Patch::Json(json!([
            {"op": "test", "path": "/data/a", "value": expect},
            {"op": "replace", "path": "/data/a", "value": to},
        ]))
    };
    maps.patch("cm", &PatchOptions::default(), &guarded("1", "3"))
        .await?;
    let refused = maps
        .patch("cm", &PatchOptions::default(), &guarded("1", "4"))
        .await;
    ensure!(
        refused.is_err(),
        "a JSON patch whose test fails was applied"
    );
    ensure!(
        data(&read("cm")?, "a").as_deref() == Some("3"),
        "a JSON patch with a passing test did not apply, or a failing one did"
    );
    done.push("merge and JSON patch");

    // A strategic merge patch merges a pod's containers by name.
    let pods_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), pods(), NS);
    let mut two = pod("smp");
    two["spec"]["containers"] = json!([
        {"name": "a", "image": "registry.invalid/a:1"},
        {"name": "b", "image": "registry.invalid/b:1"},
    ]);
    pods_api.create(&CreateOptions::default(), &two).await?;
    pods_api
        .patch(
            "smp",
            &PatchOptions::default(),
            &Patch::Strategic(
                json!({"spec": {"containers": [{"name": "b", "image": "registry.invalid/b:2"}]}}),
            ),
        )
        .await?;
    let stored = backend.get("pods", Some(NS), "smp").map_err(Failure)?;
    let images: Vec<&str> = stored["spec"]["containers"]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["image"].as_str()).collect())
        .unwrap_or_default();
    ensure!(
        images == ["registry.invalid/a:1", "registry.invalid/b:2"],
        "a strategic merge patch left the containers' images {images:?}"
    );
    done.push("strategic merge patch");

    // Server-side apply: a second manager conflicts unless it forces, and then owns the field.
    let applied = |value: &str| {
        Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "applied"}, "data": {"x": value}}))
    };
    maps.patch("applied", &PatchOptions::apply("manager-a"), &applied("1"))
        .await?;
    let conflict = maps
        .patch("applied", &PatchOptions::apply("manager-b"), &applied("2"))
        .await;
    ensure!(
        matches!(&conflict, Err(e) if e.is_conflict()),
        "a second manager's apply of an owned field answered {conflict:?}, want a conflict"
    );
    maps.patch(
        "applied",
        &PatchOptions::apply("manager-b").force(),
        &applied("2"),
    )
    .await?;
    let stored = read("applied")?;
    let managers: Vec<&str> = stored["metadata"]["managedFields"]
        .as_array()
        .map(|m| m.iter().filter_map(|f| f["manager"].as_str()).collect())
        .unwrap_or_default();
    ensure!(
        data(&stored, "x").as_deref() == Some("2") && managers.contains(&"manager-b"),
        "after a forced apply: x = {:?}, managers {managers:?}",
        data(&stored, "x")
    );
    done.push("server-side apply");

    // Status and scale of a Deployment.
    let deployments = Resource::namespaced("apps", "v1", "deployments");
    let deploys: Api<DynamicObject> = Api::namespaced_with(client.clone(), deployments, NS);
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]}}}});
    deploys
        .create(&CreateOptions::default(), &deployment)
        .await?;
    deploys
        .patch_status(
            "web",
            &PatchOptions::default(),
            &Patch::Merge(json!({"status": {"observedGeneration": 1, "replicas": 1}})),
        )
        .await?;
    let scale = deploys.get_scale("web").await?;
    ensure!(
        scale.spec.replicas == Some(1),
        "the scale subresource reads {:?} replicas",
        scale.spec.replicas
    );
    deploys
        .patch_scale(
            "web",
            &PatchOptions::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await?;
    let stored = backend
        .get("deployments.apps", Some(NS), "web")
        .map_err(Failure)?;
    ensure!(
        stored["spec"]["replicas"] == 3 && stored["status"]["observedGeneration"] == 1,
        "after status and scale writes: replicas {}, observedGeneration {}",
        stored["spec"]["replicas"],
        stored["status"]["observedGeneration"]
    );
    done.push("status and scale");

    // Dry run: the answer comes back, nothing is stored.
    let dry = CreateOptions {
        dry_run: true,
        ..CreateOptions::default()
    };
    maps.create(&dry, &configmap("dry")).await?;
    ensure!(read("dry").is_err(), "a dry-run create stored the object");
    maps.patch(
        "cm",
        &PatchOptions::default().dry_run(),
        &Patch::Merge(json!({"data": {"a": "dry"}})),
    )
    .await?;
    ensure!(
        data(&read("cm")?, "a").as_deref() == Some("3"),
        "a dry-run patch changed the object"
    );
    done.push("dry run");

    // A replace from a stale read is refused; retry_on_conflict reads again and wins.
    let stale = maps.get("cm").await?;
    backend
        .merge_patch(
            "configmaps",
            Some(NS),
            "cm",
            json!({"data": {"c": "meanwhile"}}),
        )
        .map_err(Failure)?;
    let refused = maps.replace("cm", &CreateOptions::default(), &stale).await;
    ensure!(
        matches!(&refused, Err(e) if e.is_conflict()),
        "a replace from a stale read answered {refused:?}, want a conflict"
    );
    let mut attempts = 0;
    retry_on_conflict(RetryBackoff::DEFAULT_RETRY, || {
        attempts += 1;
        let maps = maps.clone();
        let stale = stale.clone();
        let first = attempts == 1;
        async move {
            // The first attempt writes the stale copy; later ones read afresh.
            let mut current = if first { stale } else { maps.get("cm").await? };
            let mut value = serde_json::to_value(&current).map_err(|e| {
                workqueue::shared_informer::reflector::ClientError::InvalidRequest(e.to_string())
            })?;
            value["data"]["d"] = json!("retried");
            current = serde_json::from_value(value).map_err(|e| {
                workqueue::shared_informer::reflector::ClientError::InvalidRequest(e.to_string())
            })?;
            maps.replace("cm", &CreateOptions::default(), &current)
                .await
        }
    })
    .await?;
    let stored = read("cm")?;
    ensure!(
        attempts >= 2
            && data(&stored, "d").as_deref() == Some("retried")
            && data(&stored, "c").as_deref() == Some("meanwhile"),
        "retry_on_conflict: {attempts} attempts, data {}",
        stored["data"]
    );
    done.push("conflict and retry_on_conflict");
    Ok(format!("{}: {}", backend.name(), done.join(", ")))
}

/// Creates `count` ConfigMaps `seed-{i}` in `namespace`, eight requests at a time.
fn seed_many(backend: &dyn Backend, namespace: &str, count: usize) -> Result<(), Failure> {
    const WRITERS: usize = 8;
    let create = |i: usize| {
        backend
            .create(
                "configmaps",
                Some(namespace),
                configmap(&format!("seed-{i}")),
            )
            .map(|_| ())
            .map_err(|e| Failure(format!("seeding configmaps in {namespace}: {e}")))
    };
    // The first alone: it makes the namespace, which concurrent creates would race to make.
    create(0)?;
    tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let writers: Vec<_> = (0..WRITERS)
                .map(|w| {
                    scope
                        .spawn(move || (1..count).filter(|i| i % WRITERS == w).try_for_each(create))
                })
                .collect();
            writers.into_iter().try_for_each(|w| {
                w.join()
                    .map_err(|_| Failure("a seeding thread panicked".into()))?
            })
        })
    })
}

/// `portable-shard-selector`: server-side sharded lists and watches. 10,000 ConfigMaps are
/// listed shard by shard (four equal uid ranges, pages of 500): the server must send only the
/// objects whose uid our hash puts in the shard (the client's own filter drops nothing and every
/// page echoes the selector), and the four shards together hold every object exactly once. Then
/// an informer of one shard follows churn, holding exactly the shard.
pub async fn shard_selector(opts: Opts) -> Outcome {
    use std::collections::BTreeMap;
    use workqueue::shared_informer::reflector::store_index::{
        shard_hash, ShardField, ShardRange, ShardSelector,
    };
    use workqueue::shared_informer::reflector::ReflectorMetrics;
    const PREFIX: &str = "ps";
    const OBJECTS: usize = 10_000;
    const SHARDS: u32 = 4;
    let backend = backend::start(opts.server).await?;
    let namespace = format!("{PREFIX}-seeds");
    seed_many(&*backend, &namespace, OBJECTS)?;
    let truth: BTreeMap<String, u64> = backend
        .list("configmaps", Some(&namespace))
        .map_err(Failure)?
        .iter()
        .map(|o| {
            let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
            let uid = o["metadata"]["uid"].as_str().unwrap_or("");
            (name, shard_hash(uid))
        })
        .collect();
    ensure!(truth.len() == OBJECTS, "{} objects seeded", truth.len());

    let config = backend.config()?;
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    let mut sizes = Vec::new();
    for shard in 0..SHARDS {
        let range = ShardRange::equal_part(shard, SHARDS)?;
        let metrics = Arc::new(ReflectorMetrics::default());
        let lw = HttpListerWatcher::<DynamicObject>::new(&config, configmaps())?
            .namespace(namespace.clone())
            .shard_selector(ShardSelector::new(ShardField::Uid, [range])?)
            .count_bytes_into(Arc::clone(&metrics));
        let mut continue_token = None;
        let mut pages = 0;
        let mut size = 0;
        loop {
            ensure!(pages < 100, "shard {shard}: more than 100 pages of 500");
            let page = lw
                .list(ListOptions {
                    limit: 500,
                    continue_token: continue_token.take(),
                    ..ListOptions::default()
                })
                .await?;
            pages += 1;
            for object in &page.items {
                let name = object.metadata.name.clone().unwrap_or_default();
                let hash = truth.get(&name).copied();
                ensure!(
                    hash.is_some_and(|h| range.contains(h)),
                    "shard {shard} holds {name}, whose uid hashes to {hash:x?}, outside {range:x?}"
                );
                ensure!(
                    seen.insert(name.clone(), shard).is_none(),
                    "{name} is in two shards"
                );
                size += 1;
            }
            match page.continue_token {
                Some(token) => continue_token = Some(token),
                None => break,
            }
        }
        let stats = metrics.snapshot();
        ensure!(
            stats.shard_filtered == 0 && stats.shard_unapplied == 0,
            "shard {shard}: the server did not shard the list ({} objects sent outside it, {} \
             pages without the echo)",
            stats.shard_filtered,
            stats.shard_unapplied
        );
        sizes.push(size);
    }
    let missing: Vec<&String> = truth.keys().filter(|n| !seen.contains_key(*n)).collect();
    ensure!(
        missing.is_empty(),
        "{} objects are in no shard, as {:?}",
        missing.len(),
        missing.iter().take(5).collect::<Vec<_>>()
    );

    // One shard's informer, under churn in other namespaces.
    let selector = ShardSelector::new(ShardField::Uid, [ShardRange::equal_part(1, SHARDS)?])?;
    let factory = factory(config)
        .reflector_options(ReflectorOptions {
            page_size: 500,
            ..fast_backoff(false)
        })
        .shard_selector(selector.clone());
    let informer = factory.informer::<CompactObject>(configmaps())?;
    let (recorder, sequence) = Recorder::new();
    informer.add_event_handler(recorder)?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    synced(&informer, Duration::from_secs(120)).await?;
    let ops = churn_all(&backend, "configmaps", PREFIX, 40.0, 4.0, configmap).await?;
    let in_shard = move |object: &Value| {
        selector.matches_value(object["metadata"]["uid"].as_str().unwrap_or(""))
    };
    let verdict = converge_where(
        &*backend,
        "configmaps",
        &in_shard,
        informer.indexer(),
        &[("shard", &sequence)],
        Duration::from_secs(60),
    )
    .await?;
    let stats = informer.stats().reflector;
    ensure!(
        stats.shard_filtered == 0,
        "the server sent {} objects outside the informer's shard",
        stats.shard_filtered
    );
    cancel.cancel();
    factory.shutdown().await;
    let fallback = shard_selector_without_the_gate(opts).await?;
    Ok(format!(
        "{}: {OBJECTS} objects in shards of {sizes:?}, each listed in pages of 500 and echoed; \
         {ops} churn ops; {verdict}; without the gate: {fallback}",
        backend.name()
    ))
}

/// The same shard's informer on a server that ignores shard selectors: it receives every
/// object, keeps exactly the shard's, and counts what it dropped and the pages not sharded.
async fn shard_selector_without_the_gate(opts: Opts) -> Outcome {
    use workqueue::shared_informer::reflector::store_index::{
        ShardField, ShardRange, ShardSelector,
    };
    const PREFIX: &str = "pu";
    let backend = backend::start_without_sharding(opts.server).await?;
    seed(&*backend, "configmaps", PREFIX, 100, configmap)?;
    let selector = ShardSelector::new(ShardField::Uid, [ShardRange::equal_part(1, 4)?])?;
    let factory = factory(backend.config()?)
        .reflector_options(ReflectorOptions {
            page_size: 50,
            ..fast_backoff(false)
        })
        .shard_selector(selector.clone());
    let informer = factory.informer::<DynamicObject>(configmaps())?;
    let (recorder, sequence) = Recorder::new();
    informer.add_event_handler(recorder)?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    synced(&informer, Duration::from_secs(60)).await?;
    let ops = churn_all(&backend, "configmaps", PREFIX, 40.0, 3.0, configmap).await?;
    let in_shard = move |object: &Value| {
        selector.matches_value(object["metadata"]["uid"].as_str().unwrap_or(""))
    };
    let verdict = converge_where(
        &*backend,
        "configmaps",
        &in_shard,
        informer.indexer(),
        &[("shard", &sequence)],
        Duration::from_secs(60),
    )
    .await?;
    let stats = informer.stats().reflector;
    ensure!(
        stats.shard_filtered > 0 && stats.shard_unapplied > 0,
        "a server without the gate sent only the shard? {stats:?}"
    );
    cancel.cancel();
    factory.shutdown().await;
    Ok(format!(
        "{ops} churn ops; {verdict}; {} objects dropped on the client, {} pages not sharded",
        stats.shard_filtered, stats.shard_unapplied
    ))
}

/// `portable-read-your-writes`: the informer's watch is held back after its list (the
/// `GatedWatch` wrapper), the scenario writes an object, and the consistency store must say
/// that the cache (still at the list's version) has not seen the write; released, the watch
/// brings the write and the key is ready. On the real server this holds the store's version
/// comparison to etcd's resource versions.
pub async fn read_your_writes(opts: Opts) -> Outcome {
    use controller::consistency::{compare_resource_versions, ConsistencyStore, Readiness};
    use workqueue::shared_informer::reflector::store_index::Object as _;
    const PREFIX: &str = "ryw";
    let backend = backend::start(opts.server).await?;
    seed(&*backend, "configmaps", PREFIX, 1, configmap)?;
    let (open_tx, open_rx) = watch::channel(false);
    let (asked_tx, _asked_rx) = watch::channel(Vec::new());
    let lw = GatedWatch {
        inner: HttpListerWatcher::<DynamicObject>::new(&backend.config()?, configmaps())?,
        open: open_rx,
        asked: asked_tx,
    };
    let informer = SharedIndexInformer::new(
        lw,
        InformerOptions {
            queue: crate::harness::queue(),
            name: "read-your-writes".into(),
            reflector: fast_backoff(false),
            ..InformerOptions::default()
        },
    );
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    synced(&informer, Duration::from_secs(60)).await?;
    let key = format!("{PREFIX}-0/seed-0");
    let store = ConsistencyStore::new().max_wait(Duration::from_secs(60));
    let ready = |store: &ConsistencyStore| {
        let cached = informer.indexer().get_by_key(&key);
        store.ensure_ready(
            &key,
            informer.last_store_sync_resource_version().as_str(),
            cached.as_deref().and_then(|c| c.resource_version()),
        )
    };
    let listed_at = informer.last_store_sync_resource_version().to_string();
    let written = backend
        .merge_patch(
            "configmaps",
            Some(&format!("{PREFIX}-0")),
            "seed-0",
            json!({"data": {"k": "written"}}),
        )
        .map_err(Failure)?;
    let wrote = written["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    store.wrote_at(key.clone(), &wrote);
    ensure!(
        compare_resource_versions(&listed_at, &wrote) == Some(std::cmp::Ordering::Less),
        "the server's versions do not compare: listed at {listed_at:?}, wrote {wrote:?}"
    );
    let stale = ready(&store);
    ensure!(
        matches!(stale, Readiness::Stale { .. }),
        "the held cache was taken for ready: {stale:?}"
    );
    let before = informer
        .indexer()
        .get_by_key(&key)
        .and_then(|c| c.data["data"]["k"].as_str().map(str::to_string));
    ensure!(
        before.as_deref() == Some("v"),
        "the held cache shows {before:?}, not the state before the write"
    );
    open_tx.send_replace(true);
    eventually(
        "the cache to show the write",
        Duration::from_secs(30),
        || match ready(&store) {
            Readiness::Ready => Ok(()),
            stale => Err(format!("{stale:?}")),
        },
    )
    .await?;
    let after = informer
        .indexer()
        .get_by_key(&key)
        .and_then(|c| c.data["data"]["k"].as_str().map(str::to_string));
    ensure!(
        after.as_deref() == Some("written"),
        "the cache shows {after:?}"
    );
    cancel.cancel();
    Ok(format!(
        "{}: listed at {listed_at}, wrote {wrote}: stale until the watch was released, then ready; {} stale check(s)",
        backend.name(),
        store.stale_sync_skips()
    ))
}
