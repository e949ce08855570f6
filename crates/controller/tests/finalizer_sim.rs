//! The finalizer helper and the status conditions against the simulated API server: the
//! finalizer added before anything acts, the cleanup run on deletion and the finalizer removed
//! only after it succeeded, stale copies refused, and conditions written through the status
//! subresource.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use controller::conditions::{
    conditions_patch, object_conditions, set_object_condition, Condition, ConditionStatus,
};
use controller::{finalizer, Action, FinalizerError, FinalizerEvent};
use reflector::store_index::{DynamicObject, Object};
use reflector::{
    Api, Client, ClientError, ClusterConfig, DeleteOptions, Patch, PatchOptions, Resource,
};
use serde_json::json;
use sim_apiserver::SimServer;
use workqueue::shared_informer::reflector;

const NAME: &str = "example.com/cleanup";

fn api(sim: &SimServer) -> Api<DynamicObject> {
    let client = Client::new(&ClusterConfig::new(&sim.url()).unwrap()).unwrap();
    Api::namespaced_with(
        client,
        Resource::namespaced("", "v1", "configmaps"),
        "default",
    )
}

async fn get(api: &Api<DynamicObject>, name: &str) -> Arc<DynamicObject> {
    Arc::new(api.get(name).await.unwrap())
}

/// Runs the finalizer once, counting the reconcile's calls; `cleanup_fails` makes the cleanup
/// fail.
async fn run(
    api: &Api<DynamicObject>,
    object: Arc<DynamicObject>,
    calls: &(AtomicUsize, AtomicUsize),
    cleanup_fails: bool,
) -> Result<Action, FinalizerError<String>> {
    finalizer(api, NAME, object, |event| async move {
        match event {
            FinalizerEvent::Apply(object) => {
                assert!(
                    object.finalizers().iter().any(|f| f == NAME),
                    "FZ1: never acts without it"
                );
                calls.0.fetch_add(1, Ordering::SeqCst);
                Ok(Action::Done)
            }
            FinalizerEvent::Cleanup(_) => {
                calls.1.fetch_add(1, Ordering::SeqCst);
                if cleanup_fails {
                    Err("the bucket is still in use".to_string())
                } else {
                    Ok(Action::Done)
                }
            }
        }
    })
    .await
}

#[tokio::test]
async fn the_finalizer_is_added_first_and_removed_only_after_a_successful_cleanup() {
    let sim = SimServer::start().await.unwrap();
    let api = api(&sim);
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "w"}}),
    )
    .unwrap();
    let calls = (AtomicUsize::new(0), AtomicUsize::new(0));

    // FZ1: the first call adds the finalizer, then acts on the object that carries it.
    let action = run(&api, get(&api, "w").await, &calls, false)
        .await
        .unwrap();
    assert_eq!(action, Action::Done);
    assert_eq!(calls.0.load(Ordering::SeqCst), 1);
    let with = get(&api, "w").await;
    assert_eq!(with.finalizers(), [NAME]);

    // FZ4: again, on the object with the finalizer: the reconcile runs, nothing is written.
    let writes = sim.write_log().len();
    run(&api, with.clone(), &calls, false).await.unwrap();
    run(&api, with.clone(), &calls, false).await.unwrap();
    assert_eq!(calls.0.load(Ordering::SeqCst), 3);
    assert_eq!(
        sim.write_log().len(),
        writes,
        "no write for an object that has it"
    );

    // Deletion is requested: the object stays while the finalizer is on.
    api.delete("w", &DeleteOptions::default()).await.unwrap();
    let deleting = get(&api, "w").await;
    assert!(deleting.deletion_timestamp().is_some());

    // FZ2: a failed cleanup keeps the finalizer, and the object with it.
    let failed = run(&api, deleting.clone(), &calls, true).await;
    assert!(
        matches!(failed, Err(FinalizerError::Cleanup(_))),
        "{failed:?}"
    );
    assert_eq!(get(&api, "w").await.finalizers(), [NAME]);

    // A cleanup that succeeds removes it, and the server then deletes the object.
    run(&api, deleting, &calls, false).await.unwrap();
    assert_eq!(calls.1.load(Ordering::SeqCst), 2);
    assert!(matches!(api.get("w").await, Err(ClientError::NotFound(_))));
    assert_eq!(
        calls.0.load(Ordering::SeqCst),
        3,
        "never applied while deleting"
    );
}

#[tokio::test]
async fn a_stale_copy_cannot_drop_another_controllers_finalizer() {
    // FZ3
    let sim = SimServer::start().await.unwrap();
    let api = api(&sim);
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "w"}}),
    )
    .unwrap();
    let stale = get(&api, "w").await;
    // Another controller adds its own finalizer meanwhile.
    api.patch(
        "w",
        &PatchOptions::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["other.example.com/keep"]}})),
    )
    .await
    .unwrap();
    let calls = (AtomicUsize::new(0), AtomicUsize::new(0));
    let outcome = run(&api, stale, &calls, false).await;
    assert!(
        matches!(outcome, Err(FinalizerError::Conflict(_))),
        "{outcome:?}"
    );
    assert_eq!(
        get(&api, "w").await.finalizers(),
        ["other.example.com/keep"]
    );
    // On the fresh copy both are kept.
    run(&api, get(&api, "w").await, &calls, false)
        .await
        .unwrap();
    assert_eq!(
        get(&api, "w").await.finalizers(),
        ["other.example.com/keep", NAME]
    );
}

#[tokio::test]
async fn an_object_being_deleted_without_the_finalizer_is_left_alone() {
    // FZ4: never given a finalizer once deletion is requested.
    let sim = SimServer::start().await.unwrap();
    let api = api(&sim);
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "w", "finalizers": ["other.example.com/keep"]}}),
    )
    .unwrap();
    api.delete("w", &DeleteOptions::default()).await.unwrap();
    let calls = (AtomicUsize::new(0), AtomicUsize::new(0));
    let writes = sim.write_log().len();
    let action = run(&api, get(&api, "w").await, &calls, false)
        .await
        .unwrap();
    assert_eq!(action, Action::Done);
    assert_eq!(
        (
            calls.0.load(Ordering::SeqCst),
            calls.1.load(Ordering::SeqCst)
        ),
        (0, 0)
    );
    assert_eq!(sim.write_log().len(), writes);
    let invalid = finalizer(&api, "no-domain", get(&api, "w").await, |_| async {
        Ok::<_, String>(Action::Done)
    })
    .await;
    assert!(matches!(invalid, Err(FinalizerError::InvalidName(_))));
}

#[tokio::test]
async fn conditions_are_written_through_the_status_subresource_fenced_by_the_seen_version() {
    // Deployments are served with their status subresource.
    let sim = SimServer::start().await.unwrap();
    let client = Client::new(&ClusterConfig::new(&sim.url()).unwrap()).unwrap();
    let deployments: Api<DynamicObject> = Api::namespaced_with(
        client,
        Resource::namespaced("apps", "v1", "deployments"),
        "default",
    );
    sim.create(
        "deployments.apps",
        Some("default"),
        json!({"metadata": {"name": "web"}, "spec": {"replicas": 1,
               "selector": {"matchLabels": {"app": "web"}},
               "template": {"metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    )
    .unwrap();
    let seen = deployments.get("web").await.unwrap();
    let mut desired = seen.clone();
    let ready = Condition::new("Ready", ConditionStatus::True, "Running", "all good")
        .observed_generation(seen.generation().unwrap_or(0));
    assert!(set_object_condition(&mut desired, ready, "2026-11-29T10:00:00Z").unwrap());
    let conditions = object_conditions(&desired).unwrap();
    let written = deployments
        .patch_status(
            "web",
            &PatchOptions::default(),
            &Patch::Merge(conditions_patch(&seen, &conditions)),
        )
        .await
        .unwrap();
    let stored = object_conditions(&written).unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].last_transition_time, "2026-11-29T10:00:00Z");
    // The same patch on the copy seen before that write is refused, not written over it.
    let stale = deployments
        .patch_status(
            "web",
            &PatchOptions::default(),
            &Patch::Merge(conditions_patch(&seen, &conditions)),
        )
        .await;
    assert!(matches!(stale, Err(ClientError::Conflict(_))), "{stale:?}");
}
