//! `portable-controller-builder`: the README's controller (`ControllerBuilder`) on the simulator
//! or a real kube-apiserver. A Widget CRD with a status subresource; two replicas under leader
//! election, of which one acts: every widget gets its ConfigMap (server-side apply, a controller
//! owner reference), its `Ready` condition, its finalizer and an Event; a deleted widget is
//! cleaned up and goes; the leader stops, releases its Lease, and the other replica takes over.
//! Then the same program sharded over two replicas: every widget assigned to one of them,
//! reconciled by its owner, its ConfigMap following it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ::controller::prelude::*;
use ::controller::sharding::shard_label;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::backend::{self, Backend};
use crate::check::{eventually, Failure, Outcome};
use crate::{ensure, Opts};

const NS: &str = "default";
const WIDGETS: usize = 20;
const FINALIZER: &str = "widgets.example.com/cleanup";

fn widgets() -> Resource {
    Resource::namespaced("example.com", "v1", "widgets")
}

fn configmaps() -> Resource {
    Resource::namespaced("", "v1", "configmaps")
}

/// The widgets each replica reconciled, by name.
#[derive(Default)]
struct Seen(Mutex<BTreeMap<String, usize>>);

/// The README's reconcile, counting what it saw.
async fn reconcile(
    widget: Arc<DynamicObject>,
    ctx: Context<DynamicObject, Arc<Seen>>,
) -> Result<Action, FinalizerError<FenceError>> {
    *ctx.0.lock().entry(widget.name().to_string()).or_default() += 1;
    finalizer(&ctx.api(&widget), FINALIZER, widget, |event| async {
        match event {
            FinalizerEvent::Apply(widget) => {
                let size = widget
                    .pointer("/spec/size")
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": widget.name()}, "data": {"size": size.to_string()}});
                ctx.apply_child(&widget, &configmaps(), &config).await?;
                let ready = Condition::new("Ready", ConditionStatus::True, "Applied", "applied");
                ctx.set_condition(&widget, ready).await?;
                ctx.event(
                    &widget,
                    EventType::Normal,
                    "Applied",
                    "the ConfigMap is up to date",
                );
                Ok(Action::Done)
            }
            FinalizerEvent::Cleanup(_) => Ok(Action::Done),
        }
    })
    .await
}

struct Replica {
    seen: Arc<Seen>,
    stop: CancellationToken,
    run: JoinHandle<Result<(), BuilderError>>,
}

impl Replica {
    fn start(
        backend: &dyn Backend,
        identity: &str,
        mode: impl FnOnce(ControllerBuilder<DynamicObject>) -> ControllerBuilder<DynamicObject>,
    ) -> Result<Self, Failure> {
        let client = Client::new(&backend.config()?).map_err(|e| Failure(e.to_string()))?;
        let seen = Arc::new(Seen::default());
        let stop = CancellationToken::new();
        let builder = ControllerBuilder::new(client, widgets(), "Widget")
            .namespace(NS)
            .owns(configmaps())
            .identity(identity)
            .shutdown_on(stop.clone())
            .without_signal_handlers();
        let run = tokio::spawn(mode(builder).run(reconcile, |_, _, _| Action::Retry, seen.clone()));
        Ok(Self { seen, stop, run })
    }

    fn reconciled(&self, name: &str) -> bool {
        self.seen.0.lock().contains_key(name)
    }

    fn count(&self) -> usize {
        self.seen.0.lock().values().sum()
    }

    async fn stop(self) -> Result<(), Failure> {
        self.stop.cancel();
        match tokio::time::timeout(Duration::from_secs(60), self.run).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(error))) => Err(Failure(format!("the controller failed: {error}"))),
            Ok(Err(panic)) => Err(Failure(format!("the controller panicked: {panic}"))),
            Err(_) => Err(Failure("the controller did not stop within 60 s".into())),
        }
    }
}

fn widget(name: &str, size: usize) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": size}})
}

/// Whether `name` is as the reconcile leaves it: the finalizer, the `Ready` condition, and its
/// ConfigMap owned by it.
fn done(backend: &dyn Backend, name: &str) -> Result<(), String> {
    let w = backend.get("widgets.example.com", Some(NS), name)?;
    if w["metadata"]["finalizers"] != json!([FINALIZER]) {
        return Err(format!(
            "{name} has finalizers {}",
            w["metadata"]["finalizers"]
        ));
    }
    let ready = w["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .ok_or_else(|| format!("{name} has no Ready condition"))?;
    if ready["status"] != "True" || ready["observedGeneration"] != w["metadata"]["generation"] {
        return Err(format!("{name}'s Ready condition is {ready}"));
    }
    let config = backend.get("configmaps", Some(NS), name)?;
    let owner = &config["metadata"]["ownerReferences"][0];
    if owner["uid"] != w["metadata"]["uid"] || owner["controller"] != true {
        return Err(format!("{name}'s ConfigMap is owned by {owner}"));
    }
    Ok(())
}

pub async fn controller_builder(opts: Opts) -> Outcome {
    let backend = backend::start(opts.server).await?;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]},
    });
    backend
        .create("customresourcedefinitions.apiextensions.k8s.io", None, crd)
        .map_err(Failure)?;
    eventually("the widgets to be served", Duration::from_secs(30), || {
        backend.list("widgets.example.com", Some(NS)).map(|_| ())
    })
    .await?;
    for i in 0..WIDGETS {
        backend
            .create("widgets.example.com", Some(NS), widget(&format!("w{i}"), i))
            .map_err(Failure)?;
    }
    let leader = |b: ControllerBuilder<DynamicObject>| b.leader_election("widget-controller");
    let a = Replica::start(&*backend, "a", leader)?;
    let b = Replica::start(&*backend, "b", leader)?;
    eventually("every widget done", Duration::from_secs(60), || {
        (0..WIDGETS).try_for_each(|i| done(&*backend, &format!("w{i}")))
    })
    .await?;
    let (first, second) = if a.count() > 0 { (a, b) } else { (b, a) };
    ensure!(
        second.count() == 0,
        "both replicas reconciled under leader election ({} and {})",
        first.count(),
        second.count()
    );
    eventually("an Applied event", Duration::from_secs(30), || {
        let events = backend.list("events", Some(NS))?;
        let applied = events.iter().filter(|e| e["reason"] == "Applied").count();
        (applied > 0)
            .then_some(())
            .ok_or("no event yet".to_string())
    })
    .await?;
    // Deletion: the cleanup runs and the finalizer goes, and the widget with it.
    backend
        .delete("widgets.example.com", Some(NS), "w0")
        .map_err(Failure)?;
    eventually(
        "the deleted widget to go",
        Duration::from_secs(30),
        || match backend.get("widgets.example.com", Some(NS), "w0") {
            Err(_) => Ok(()),
            Ok(w) => Err(format!("w0 still has {}", w["metadata"]["finalizers"])),
        },
    )
    .await?;
    // The leader stops and releases its Lease: the other replica takes over at once.
    first.stop().await?;
    backend
        .create("widgets.example.com", Some(NS), widget("late", 1))
        .map_err(Failure)?;
    eventually(
        "the other replica to take over",
        Duration::from_secs(60),
        || {
            done(&*backend, "late")?;
            second
                .reconciled("late")
                .then_some(())
                .ok_or("not by the second replica".to_string())
        },
    )
    .await?;
    second.stop().await?;
    let shared = sharded(&*backend).await?;
    Ok(format!(
        "{}: {WIDGETS} widgets with ConfigMap, condition, finalizer and event under leader \
         election; a deletion cleaned up; a hand-over on the leader's stop; {shared}",
        backend.name()
    ))
}

/// The same program sharded over two replicas: every widget assigned, reconciled by its owner,
/// and its ConfigMap labelled for the same replica.
async fn sharded(backend: &dyn Backend) -> Result<String, Failure> {
    let ring = |b: ControllerBuilder<DynamicObject>| b.sharded("widgets");
    let replicas = [
        Replica::start(backend, "a", ring)?,
        Replica::start(backend, "b", ring)?,
    ];
    let label = shard_label("widgets");
    let names: Vec<String> = backend
        .list("widgets.example.com", Some(NS))
        .map_err(Failure)?
        .iter()
        .filter_map(|w| w["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    eventually(
        "the widgets shared by their owners",
        Duration::from_secs(90),
        || {
            let mut owners = BTreeSet::new();
            for name in &names {
                let w = backend.get("widgets.example.com", Some(NS), name)?;
                let owner = w["metadata"]["labels"][&label]
                    .as_str()
                    .ok_or(format!("{name} is not assigned"))?;
                let replica = if owner == "a" {
                    &replicas[0]
                } else {
                    &replicas[1]
                };
                if !replica.reconciled(name) {
                    return Err(format!("{name} not reconciled by its owner {owner}"));
                }
                let config = backend.get("configmaps", Some(NS), name)?;
                if config["metadata"]["labels"][&label] != owner {
                    return Err(format!("{name}'s ConfigMap does not follow it to {owner}"));
                }
                owners.insert(owner.to_string());
            }
            (owners.len() == 2)
                .then_some(())
                .ok_or(format!("owners so far: {owners:?}"))
        },
    )
    .await?;
    let counts: Vec<usize> = replicas.iter().map(Replica::count).collect();
    for replica in replicas {
        replica.stop().await?;
    }
    Ok(format!(
        "sharded: {} widgets split between two replicas ({} and {} reconciles)",
        names.len(),
        counts[0],
        counts[1]
    ))
}
