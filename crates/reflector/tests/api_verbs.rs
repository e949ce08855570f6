//! `Api<K>` against the simulated API server: every verb, and every error a caller branches on,
//! for typed (`k8s_openapi`), `DynamicObject` and `CompactObject` objects.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use reflector::store_index::{CompactObject, DynamicObject, Object};
use reflector::{
    retry_on_conflict, Api, Client, ClientError, ClusterConfig, Credentials, DeleteParams, Deleted,
    ListOptions, Patch, PatchParams, PostParams, Preconditions, Resource, RetryBackoff,
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
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    assert_eq!(created.name(), "a");
    let rv1 = created.resource_version().unwrap().to_string();
    assert!(created.uid().is_some());

    let got = api.get("a").await.unwrap();
    assert_eq!(got.data["data"]["k"], "1");
    assert!(api.get_opt("missing").await.unwrap().is_none());

    api.create(&PostParams::default(), &cm("b", "2"))
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
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_ne!(replaced.resource_version().unwrap(), rv1);
    assert_eq!(replaced.data["data"]["k"], "2");

    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"m": "x"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["data"], json!({"k": "2", "m": "x"}));
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"data": {"s": "y"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["data"]["s"], "y");

    match api.delete("a", &DeleteParams::default()).await.unwrap() {
        Deleted::Object(o) => assert_eq!(o.name(), "a"),
        Deleted::Status(s) => assert_eq!(s.status.as_deref(), Some("Success")),
    }
    assert!(api.get("a").await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn typed_and_compact_objects_go_through_the_same_verbs() {
    let (_sim, client) = start().await;
    let typed: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let mut c = ConfigMap::default();
    c.metadata.name = Some("typed".into());
    c.data = Some([("k".to_string(), "v".to_string())].into());
    let created = typed.create(&PostParams::default(), &c).await.unwrap();
    assert_eq!(created.metadata.name.as_deref(), Some("typed"));
    assert_eq!(created.data.unwrap()["k"], "v");

    let compact: Api<CompactObject> = Api::namespaced_with(
        client.clone(),
        Resource::namespaced("", "v1", "configmaps"),
        NS,
    );
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
        .create(&PostParams::default(), &cm("c", "0"))
        .await
        .unwrap();
    // Someone else writes in between.
    api.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "other"}})),
    )
    .await
    .unwrap();
    let mut stale = first.clone();
    stale.data.insert("data".into(), json!({"k": "mine"}));
    let err = api
        .replace("c", &PostParams::default(), &stale)
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
            api.replace("c", &PostParams::default(), &o).await
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
    api.create(&PostParams::default(), &cm("d", "0"))
        .await
        .unwrap();

    let err = api
        .create(&PostParams::default(), &cm("d", "0"))
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
            &DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some("1".into()),
                    uid: None,
                }),
                ..DeleteParams::default()
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
        .create(&PostParams::default(), &cm("e", "0"))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Invalid(_)), "{err:?}");
    assert_eq!(err.causes()[0].field, "metadata.name");

    sim.faults()
        .fail_next_with(RequestKind::Write, ApiError::too_many_requests(7), 1);
    match api
        .create(&PostParams::default(), &cm("f", "0"))
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
        .readonly_token("viewer-token")
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
        .create(&PostParams::default(), &cm("w", "0"))
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
        .patch("a", &PatchParams::default(), &Patch::Apply(json!({})))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::InvalidRequest(_)), "{err:?}");
    let err = api
        .patch(
            "a",
            &PatchParams::default().force(),
            &Patch::Merge(json!({})),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::InvalidRequest(_)), "{err:?}");
    let err = api.get("../secrets/x").await.unwrap_err();
    assert!(matches!(err, ClientError::InvalidRequest(_)), "{err:?}");
    assert_eq!(sim.counters().requests, before);
}
