//! `Api<K>` against the simulated API server: every verb, and every error a caller branches on,
//! for typed (`k8s_openapi`), `DynamicObject` and `CompactObject` objects.

use std::time::Duration;

use reflector::store_index::{CompactObject, DynamicObject, Object};
use reflector::{
    retry_on_conflict, Api, Client, ClientError, ClusterConfig, CreateOptions, Credentials,
    DeleteOptions, Deleted, ListOptions, Patch, PatchOptions, Preconditions, Resource,
    RetryBackoff,
};
use serde_json::json;
use sim_apiserver::{ApiError, RequestKind, SimServer};

const NS: &str = "default";

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

async fn start() -> (SimServer, Client) {
    let sim = SimServer::builder().start().await.unwrap();
    let client = Client::new(&config_for(&sim)).unwrap();
    (sim, client)
}

fn configmaps(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        Resource::namespaced("", "v1", "configmaps"),
        NS,
    )
}

fn cm(name: &str, value: &str) -> DynamicObject {
    let mut o = DynamicObject::new("v1", "ConfigMap");
    o.metadata.name = Some(name.into());
    o.data.insert("data".into(), json!({ "k": value }));
    o
}

#[tokio::test]
async fn create_get_list_replace_patch_delete_a_dynamic_object() {
    let (_sim, client) = start().await;
    let api = configmaps(&client);
    let created = api
        .create(&CreateOptions::default(), &cm("a", "1"))
        .await
        .unwrap();
    assert_eq!(created.name(), "a");
    let rv1 = created.resource_version().unwrap().to_string();
    assert!(created.uid().is_some());

    let got = api.get("a").await.unwrap();
    assert_eq!(got.data["data"]["k"], "1");
    assert!(api.get_opt("missing").await.unwrap().is_none());

    api.create(&CreateOptions::default(), &cm("b", "2"))
        .await
        .unwrap();
    let list = api.list(&ListOptions::default()).await.unwrap();
    let mut names: Vec<_> = list.items.iter().map(|o| o.name().to_string()).collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    assert!(!list.resource_version.is_empty());

    let mut changed = got.clone();
    changed.data.insert("data".into(), json!({"k": "2"}));
    let replaced = api
        .replace("a", &CreateOptions::default(), &changed)
        .await
        .unwrap();
    assert_ne!(replaced.resource_version().unwrap(), rv1);
    assert_eq!(replaced.data["data"]["k"], "2");

    let patched = api
        .patch(
            "a",
            &PatchOptions::default(),
            &Patch::Merge(json!({"data": {"m": "x"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["data"], json!({"k": "2", "m": "x"}));
    let patched = api
        .patch(
            "a",
            &PatchOptions::default(),
            &Patch::Strategic(json!({"data": {"s": "y"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["data"]["s"], "y");

    match api.delete("a", &DeleteOptions::default()).await.unwrap() {
        Deleted::Object(o) => assert_eq!(o.name(), "a"),
        Deleted::Status(s) => assert_eq!(s.status.as_deref(), Some("Success")),
    }
    assert!(api.get("a").await.unwrap_err().is_not_found());
}

/// Typed objects need the `k8s-openapi` feature (CI's test step runs with `--all-features`).
#[cfg(feature = "k8s-openapi")]
#[tokio::test]
async fn typed_objects_go_through_the_same_verbs() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let (_sim, client) = start().await;
    let typed: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let mut c = ConfigMap::default();
    c.metadata.name = Some("typed".into());
    c.data = Some([("k".to_string(), "v".to_string())].into());
    let created = typed.create(&CreateOptions::default(), &c).await.unwrap();
    assert_eq!(created.metadata.name.as_deref(), Some("typed"));
    assert_eq!(created.data.unwrap()["k"], "v");
    let got = typed.get("typed").await.unwrap();
    assert_eq!(got.data.unwrap()["k"], "v");
}

#[tokio::test]
async fn compact_objects_are_read_and_listed_from_their_bytes() {
    let (_sim, client) = start().await;
    configmaps(&client)
        .create(&CreateOptions::default(), &{
            let mut o = DynamicObject::new("v1", "ConfigMap");
            o.metadata.name = Some("typed".into());
            o.data.insert("data".into(), json!({"k": "v"}));
            o
        })
        .await
        .unwrap();
    let by_default: Api<CompactObject> = Api::namespaced_with(
        client.clone(),
        Resource::namespaced("", "v1", "configmaps"),
        NS,
    );
    // JSON by default: a CompactObject's on-demand `decode` reads JSON, so JSON is what it asks for.
    let got = by_default.get("typed").await.unwrap();
    assert_eq!(
        (got.name(), got.encoding()),
        ("typed", reflector::store_index::RawEncoding::Json)
    );
    // Protobuf when asked for.
    let got = by_default
        .clone()
        .encoding(reflector::Encoding::Protobuf)
        .get("typed")
        .await
        .unwrap();
    assert_eq!(
        (got.name(), got.encoding()),
        ("typed", reflector::store_index::RawEncoding::Protobuf)
    );
    let compact = by_default.encoding(reflector::Encoding::Json);
    let got = compact.get("typed").await.unwrap();
    assert_eq!(got.name(), "typed");
    // A compact object is written back as the JSON it holds.
    let copy: serde_json::Value = serde_json::from_slice(got.raw()).unwrap();
    assert_eq!(copy["data"]["k"], "v");
    let list = compact.list(&ListOptions::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
}

#[tokio::test]
async fn a_stale_resource_version_is_a_conflict_and_retry_on_conflict_rereads() {
    let (_sim, client) = start().await;
    let api = configmaps(&client);
    let first = api
        .create(&CreateOptions::default(), &cm("c", "0"))
        .await
        .unwrap();
    // Someone else writes in between.
    api.patch(
        "c",
        &PatchOptions::default(),
        &Patch::Merge(json!({"data": {"k": "other"}})),
    )
    .await
    .unwrap();
    let mut stale = first.clone();
    stale.data.insert("data".into(), json!({"k": "mine"}));
    let err = api
        .replace("c", &CreateOptions::default(), &stale)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err:?}");
    assert_eq!(err.status().unwrap().code, 409);

    // The read-modify-write loop: the first attempt uses the stale copy and conflicts, the
    // second reads again and succeeds.
    let mut attempts = 0;
    let written = retry_on_conflict(RetryBackoff::DEFAULT_RETRY, || {
        attempts += 1;
        let api = api.clone();
        let base = if attempts == 1 {
            Some(stale.clone())
        } else {
            None
        };
        async move {
            let mut o = match base {
                Some(o) => o,
                None => api.get("c").await?,
            };
            o.data.insert("data".into(), json!({"k": "mine"}));
            api.replace("c", &CreateOptions::default(), &o).await
        }
    })
    .await
    .unwrap();
    assert_eq!(attempts, 2);
    assert_eq!(written.data["data"]["k"], "mine");
}

#[tokio::test]
async fn every_error_a_caller_branches_on_has_its_variant_and_the_servers_status() {
    let (sim, client) = start().await;
    let api = configmaps(&client);
    api.create(&CreateOptions::default(), &cm("d", "0"))
        .await
        .unwrap();

    let err = api
        .create(&CreateOptions::default(), &cm("d", "0"))
        .await
        .unwrap_err();
    assert!(err.is_already_exists(), "{err:?}");

    let err = api.get("nope").await.unwrap_err();
    assert!(
        matches!(&err, ClientError::NotFound(s) if s.code == 404),
        "{err:?}"
    );

    let err = api
        .delete(
            "d",
            &DeleteOptions {
                preconditions: Some(Preconditions {
                    resource_version: Some("1".into()),
                    uid: None,
                }),
                ..DeleteOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err:?}");

    sim.faults().fail_next_with(
        RequestKind::Write,
        ApiError::invalid(
            "ConfigMap",
            "",
            "e",
            "metadata.name",
            "FieldValueInvalid",
            "bad name",
        ),
        1,
    );
    let err = api
        .create(&CreateOptions::default(), &cm("e", "0"))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Invalid(_)), "{err:?}");
    assert_eq!(err.causes()[0].field, "metadata.name");

    sim.faults()
        .fail_next_with(RequestKind::Write, ApiError::too_many_requests(7), 1);
    match api
        .create(&CreateOptions::default(), &cm("f", "0"))
        .await
        .unwrap_err()
    {
        ClientError::TooManyRequests {
            retry_after,
            status,
        } => {
            assert_eq!(retry_after, Some(Duration::from_secs(7)));
            assert_eq!(status.code, 429);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_readonly_user_is_forbidden_to_write_and_still_reads() {
    let sim = SimServer::builder()
        .user(sim_apiserver::User::new("viewer").token("viewer-token"))
        .allow(
            sim_apiserver::Subject::user("viewer"),
            sim_apiserver::Rule::read_only(),
        )
        .start()
        .await
        .unwrap();
    sim.create("configmaps", Some(NS), json!({"metadata": {"name": "r"}}))
        .unwrap();
    let mut config = config_for(&sim);
    config.credentials = Credentials::Token("viewer-token".into());
    let api = configmaps(&Client::new(&config).unwrap());
    assert_eq!(api.get("r").await.unwrap().name(), "r");
    let err = api
        .create(&CreateOptions::default(), &cm("w", "0"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ClientError::Forbidden(s) if s.code == 403),
        "{err:?}"
    );
}

#[tokio::test]
async fn requests_that_cannot_be_made_are_refused_before_sending() {
    let (sim, client) = start().await;
    let api = configmaps(&client);
    let before = sim.counters().requests;
    let err = api
        .patch("a", &PatchOptions::default(), &Patch::Apply(json!({})))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::InvalidRequest(_)), "{err:?}");
    let err = api
        .patch(
            "a",
            &PatchOptions::default().force(),
            &Patch::Merge(json!({})),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::InvalidRequest(_)), "{err:?}");
    let err = api.get("../secrets/x").await.unwrap_err();
    assert!(matches!(err, ClientError::InvalidRequest(_)), "{err:?}");
    assert_eq!(sim.counters().requests, before);
}

#[tokio::test]
async fn json_patch_and_server_side_apply_with_owners_conflicts_and_force() {
    let (_sim, client) = start().await;
    let api = configmaps(&client);
    api.create(&CreateOptions::default(), &cm("p", "1"))
        .await
        .unwrap();
    // A JSON patch whose `test` holds is applied; one whose `test` fails changes nothing.
    let patched = api
        .patch(
            "p",
            &PatchOptions::default(),
            &Patch::Json(json!([
                {"op": "test", "path": "/data/k", "value": "1"},
                {"op": "replace", "path": "/data/k", "value": "2"},
            ])),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["data"]["k"], "2");
    let err = api
        .patch(
            "p",
            &PatchOptions::default(),
            &Patch::Json(json!([
                {"op": "test", "path": "/data/k", "value": "1"},
                {"op": "replace", "path": "/data/k", "value": "3"},
            ])),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Invalid(_)), "{err:?}");
    assert_eq!(api.get("p").await.unwrap().data["data"]["k"], "2");

    // Server-side apply creates, then each manager owns its fields.
    let applied = |v: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "ssa"}, "data": {"owned": v}})
    };
    let created = api
        .patch(
            "ssa",
            &PatchOptions::apply("alpha"),
            &Patch::Apply(applied("a")),
        )
        .await
        .unwrap();
    assert_eq!(created.data["data"]["owned"], "a");
    let err = api
        .patch(
            "ssa",
            &PatchOptions::apply("beta"),
            &Patch::Apply(applied("b")),
        )
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err:?}");
    assert!(err
        .status()
        .and_then(|s| s.details.as_ref())
        .is_some_and(|d| d
            .causes
            .iter()
            .any(|c| c.cause_type == "FieldManagerConflict")));
    let forced = api
        .patch(
            "ssa",
            &PatchOptions::apply("beta").force(),
            &Patch::Apply(applied("b")),
        )
        .await
        .unwrap();
    assert_eq!(forced.data["data"]["owned"], "b");
}

#[tokio::test]
async fn the_status_subresource_writes_only_status() {
    let sim = SimServer::builder()
        .resource(
            sim_apiserver::ResourceDef::new("example.com", "v1", "Widget", "widgets", true)
                .with_status(),
        )
        .start()
        .await
        .unwrap();
    let client = Client::new(&config_for(&sim)).unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(
        client,
        Resource::namespaced("example.com", "v1", "widgets"),
        NS,
    );
    let mut w = DynamicObject::new("example.com/v1", "Widget");
    w.metadata.name = Some("w".into());
    w.data.insert("spec".into(), json!({"size": 1}));
    let w = api.create(&CreateOptions::default(), &w).await.unwrap();
    let generation = w.generation();

    let mut with_status = w.clone();
    with_status
        .data
        .insert("status".into(), json!({"ready": true}));
    with_status.data.insert("spec".into(), json!({"size": 99}));
    let written = api
        .replace_status("w", &CreateOptions::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(written.data["status"]["ready"], true);
    assert_eq!(
        written.data["spec"]["size"], 1,
        "spec changed through /status"
    );
    assert_eq!(written.generation(), generation);
    // The stale copy conflicts on /status too.
    let err = api
        .replace_status("w", &CreateOptions::default(), &with_status)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err:?}");
    let patched = api
        .patch_status(
            "w",
            &PatchOptions::default(),
            &Patch::Merge(json!({"status": {"observed": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.data["status"],
        json!({"ready": true, "observed": 2})
    );
    assert_eq!(
        api.get_status("w").await.unwrap().data["status"]["observed"],
        2
    );
    // And the main resource leaves status alone.
    let mut main = api.get("w").await.unwrap();
    main.data.insert("status".into(), json!({"ready": false}));
    let kept = api
        .replace("w", &CreateOptions::default(), &main)
        .await
        .unwrap();
    assert_eq!(kept.data["status"]["ready"], true);
}

#[tokio::test]
async fn the_scale_subresource_reads_and_sets_replicas() {
    let (_sim, client) = start().await;
    let deployments: Api<DynamicObject> = Api::namespaced_with(
        client,
        Resource::namespaced("apps", "v1", "deployments"),
        NS,
    );
    let mut d = DynamicObject::new("apps/v1", "Deployment");
    d.metadata.name = Some("web".into());
    d.data.insert(
        "spec".into(),
        json!({"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}),
    );
    deployments
        .create(&CreateOptions::default(), &d)
        .await
        .unwrap();
    let scale = deployments.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.replicas, Some(2));
    assert_eq!(scale.metadata.name.as_deref(), Some("web"));
    let mut more = scale.clone();
    more.spec.replicas = Some(5);
    let scaled = deployments
        .replace_scale("web", &CreateOptions::default(), &more)
        .await
        .unwrap();
    assert_eq!(scaled.spec.replicas, Some(5));
    // The old scale's resourceVersion is stale now.
    let err = deployments
        .replace_scale("web", &CreateOptions::default(), &more)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err:?}");
    let patched = deployments
        .patch_scale(
            "web",
            &PatchOptions::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.replicas, Some(1));
    assert_eq!(
        deployments.get("web").await.unwrap().data["spec"]["replicas"],
        1
    );
    let err = configmaps(deployments.client())
        .get_scale("web")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

#[tokio::test]
async fn dry_runs_answer_like_the_write_and_store_nothing() {
    let (sim, client) = start().await;
    let api = configmaps(&client);
    let dry = CreateOptions {
        dry_run: true,
        ..CreateOptions::default()
    };
    let answered = api.create(&dry, &cm("dry", "1")).await.unwrap();
    assert_eq!(answered.name(), "dry");
    assert!(api.get_opt("dry").await.unwrap().is_none());
    let real = api
        .create(&CreateOptions::default(), &cm("dry", "1"))
        .await
        .unwrap();
    let revision = sim.revision();
    let patched = api
        .patch(
            "dry",
            &PatchOptions::default().dry_run(),
            &Patch::Merge(json!({"data": {"k": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["data"]["k"], "2");
    let deleted = DeleteOptions {
        dry_run: true,
        ..DeleteOptions::default()
    };
    api.delete("dry", &deleted).await.unwrap();
    assert_eq!(
        sim.revision(),
        revision,
        "a dry run consumed a resourceVersion"
    );
    let now = api.get("dry").await.unwrap();
    assert_eq!(now.resource_version(), real.resource_version());
    assert_eq!(now.data["data"]["k"], "1");
}

#[tokio::test]
async fn delete_collection_deletes_what_the_selector_matches() {
    let (_sim, client) = start().await;
    let api = configmaps(&client);
    for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        let mut o = cm(name, "0");
        o.metadata.labels = Some([("tier".to_string(), tier.to_string())].into());
        api.create(&CreateOptions::default(), &o).await.unwrap();
    }
    let selector = ListOptions {
        label_selector: Some("tier=web".into()),
        ..ListOptions::default()
    };
    match api
        .delete_collection(&DeleteOptions::default(), &selector)
        .await
        .unwrap()
    {
        Deleted::Object(list) => {
            let mut names: Vec<_> = list.items.iter().map(|o| o.name().to_string()).collect();
            names.sort();
            assert_eq!(names, ["a", "b"]);
        }
        Deleted::Status(s) => panic!("a Status where the list was expected: {s:?}"),
    }
    let left = api.list(&ListOptions::default()).await.unwrap();
    assert_eq!(
        left.items.iter().map(|o| o.name()).collect::<Vec<_>>(),
        ["c"]
    );
    // A precondition on the uid protects a recreated object of the same name.
    let old = api.get("c").await.unwrap();
    api.delete("c", &DeleteOptions::default()).await.unwrap();
    api.create(&CreateOptions::default(), &cm("c", "new"))
        .await
        .unwrap();
    let err = api
        .delete(
            "c",
            &DeleteOptions {
                preconditions: Some(Preconditions {
                    uid: old.uid().map(str::to_string),
                    resource_version: None,
                }),
                propagation_policy: Some(reflector::PropagationPolicy::Background),
                ..DeleteOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err:?}");
}

#[tokio::test]
async fn a_write_check_that_refuses_stops_writes_before_sending_and_leaves_reads_alone() {
    let (sim, client) = start().await;
    let allowed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flag = std::sync::Arc::clone(&allowed);
    let api = configmaps(&client).with_write_check(move || {
        if flag.load(std::sync::atomic::Ordering::Relaxed) {
            Ok(())
        } else {
            Err("lease lapsed".to_string())
        }
    });
    api.create(&CreateOptions::default(), &cm("g", "1"))
        .await
        .unwrap();
    allowed.store(false, std::sync::atomic::Ordering::Relaxed);
    let writes = sim.counters().writes;
    let merge = Patch::Merge(json!({"data": {"k": "2"}}));
    let refused = [
        api.create(&CreateOptions::default(), &cm("h", "1"))
            .await
            .err(),
        api.patch("g", &PatchOptions::default(), &merge).await.err(),
        api.delete("g", &DeleteOptions::default()).await.err(),
        api.delete_collection(&DeleteOptions::default(), &ListOptions::default())
            .await
            .err(),
    ];
    for err in refused {
        match err {
            Some(ClientError::WriteRefused { reason, .. }) => assert_eq!(reason, "lease lapsed"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        sim.counters().writes,
        writes,
        "a refused write reached the server"
    );
    assert_eq!(api.get("g").await.unwrap().data["data"]["k"], "1");
    assert_eq!(
        api.list(&ListOptions::default()).await.unwrap().items.len(),
        1
    );
}
