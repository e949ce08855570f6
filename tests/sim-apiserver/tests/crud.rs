//! Object API rules: create/get/update/patch/delete, Status errors, discovery.

mod common;

use common::{pod, rv, Client};
use http::{Method, StatusCode};
use serde_json::json;
use sim_apiserver::{ResourceDef, SimServer};

const PODS: &str = "/api/v1/namespaces/default/pods";

fn assert_status(body: &serde_json::Value, code: u16, reason: &str) {
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["apiVersion"], "v1");
    assert_eq!(body["status"], "Failure");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
    assert!(body["message"].is_string());
}

#[tokio::test]
async fn create_sets_uid_timestamp_generation_and_a_strictly_increasing_resource_version() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let a = c.post(PODS, pod("a", json!({}))).await;
    assert_eq!(a.status, StatusCode::CREATED);
    let b = c.post(PODS, pod("b", json!({}))).await;
    for o in [&a.body, &b.body] {
        assert_eq!(o["kind"], "Pod");
        assert_eq!(o["metadata"]["namespace"], "default");
        assert_eq!(o["metadata"]["uid"].as_str().unwrap().len(), 36);
        assert!(o["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z'));
        assert_eq!(o["metadata"]["generation"], 1);
    }
    assert!(rv(&b.body) > rv(&a.body));
    assert_eq!(rv(&b.body), sim.revision());
    let g = c.get(&format!("{PODS}/a")).await;
    assert_eq!(g.status, StatusCode::OK);
    assert_eq!(g.body, a.body);
}

#[tokio::test]
async fn get_of_a_missing_object_is_a_404_not_found_status() {
    let sim = SimServer::start().await.unwrap();
    let r = Client::new(&sim).get(&format!("{PODS}/nope")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_status(&r.body, 404, "NotFound");
    assert_eq!(r.body["message"], "pods \"nope\" not found");
    assert_eq!(r.body["details"], json!({"name": "nope", "kind": "pods"}));
}

#[tokio::test]
async fn create_of_an_existing_name_is_409_already_exists() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    c.post(PODS, pod("a", json!({}))).await;
    let r = c.post(PODS, pod("a", json!({}))).await;
    assert_status(&r.body, 409, "AlreadyExists");
}

#[tokio::test]
async fn create_without_a_name_is_422_invalid_and_generate_name_works() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let r = c.post(PODS, json!({"metadata": {}})).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_status(&r.body, 422, "Invalid");
    assert_eq!(r.body["details"]["causes"][0]["field"], "metadata.name");
    let g = c
        .post(
            PODS,
            json!({"metadata": {"generateName": "web-"},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
        )
        .await;
    assert_eq!(g.status, StatusCode::CREATED);
    assert!(common::name(&g.body).starts_with("web-"));
}

#[tokio::test]
async fn create_in_a_missing_namespace_is_404() {
    let sim = SimServer::start().await.unwrap();
    let r = Client::new(&sim)
        .post("/api/v1/namespaces/nowhere/pods", pod("a", json!({})))
        .await;
    assert_status(&r.body, 404, "NotFound");
    assert_eq!(r.body["message"], "namespaces \"nowhere\" not found");
}

#[tokio::test]
async fn update_with_a_stale_resource_version_is_409_conflict() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let a = c.post(PODS, pod("a", json!({}))).await.body;
    let mut v1 = a.clone();
    v1["metadata"]["labels"] = json!({"x": "1"});
    let u = c
        .send(
            Method::PUT,
            &format!("{PODS}/a"),
            Some(("application/json", v1)),
        )
        .await;
    assert_eq!(u.status, StatusCode::OK);
    assert!(rv(&u.body) > rv(&a));
    assert_eq!(u.body["metadata"]["uid"], a["metadata"]["uid"]);
    let mut stale = a.clone();
    stale["metadata"]["labels"] = json!({"x": "2"});
    let r = c
        .send(
            Method::PUT,
            &format!("{PODS}/a"),
            Some(("application/json", stale.clone())),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_status(&r.body, 409, "Conflict");
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .contains("the object has been modified"));
    // Without a resourceVersion the update is unconditional.
    stale["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let ok = c
        .send(
            Method::PUT,
            &format!("{PODS}/a"),
            Some(("application/json", stale)),
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK);
}

#[tokio::test]
async fn update_bumps_generation_only_when_the_spec_changes() {
    let sim = SimServer::start().await.unwrap();
    let a = sim.create("pods", None, pod("a", json!({}))).unwrap();
    let mut l = a.clone();
    l["metadata"]["labels"] = json!({"k": "v"});
    let l = sim.update("pods", None, l).unwrap();
    assert_eq!(l["metadata"]["generation"], 1);
    let mut s = l.clone();
    s["spec"]["containers"][0]["image"] = json!("nginx");
    assert_eq!(
        sim.update("pods", None, s).unwrap()["metadata"]["generation"],
        2
    );
}

#[tokio::test]
async fn merge_patch_applies_and_unknown_patch_types_are_415() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    c.post(PODS, pod("a", json!({"keep": "1", "drop": "1"})))
        .await;
    let r = c
        .send(
            Method::PATCH,
            &format!("{PODS}/a"),
            Some((
                "application/merge-patch+json",
                json!({"metadata": {"labels": {"drop": null, "new": "2"}}}),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.body["metadata"]["labels"],
        json!({"keep": "1", "new": "2"})
    );
    let j = c
        .send(
            Method::PATCH,
            &format!("{PODS}/a"),
            Some(("application/xml", json!([]))),
        )
        .await;
    assert_status(&j.body, 415, "UnsupportedMediaType");
}

#[tokio::test]
async fn delete_returns_the_object_and_a_later_get_is_404() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let a = c.post(PODS, pod("a", json!({}))).await.body;
    let d = c.send(Method::DELETE, &format!("{PODS}/a"), None).await;
    assert_eq!(d.status, StatusCode::OK);
    assert_eq!(d.body["metadata"]["uid"], a["metadata"]["uid"]);
    assert!(rv(&d.body) > rv(&a));
    assert_eq!(
        c.get(&format!("{PODS}/a")).await.status,
        StatusCode::NOT_FOUND
    );
    let again = c.send(Method::DELETE, &format!("{PODS}/a"), None).await;
    assert_status(&again.body, 404, "NotFound");
}

#[tokio::test]
async fn discovery_documents_list_builtin_and_registered_resources() {
    let sim = SimServer::builder()
        .resource(ResourceDef::new(
            "example.com",
            "v1",
            "Widget",
            "widgets",
            true,
        ))
        .start()
        .await
        .unwrap();
    let c = Client::new(&sim);
    let v = c.get("/version").await.body;
    assert_eq!(v["major"], "1");
    let api = c.get("/api").await.body;
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"], json!(["v1"]));
    let core = c.get("/api/v1").await.body;
    assert_eq!(core["kind"], "APIResourceList");
    let names: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    // Sorted by name, as kube-apiserver lists them.
    assert_eq!(
        names,
        [
            "configmaps",
            "events",
            "namespaces",
            "namespaces/status",
            "pods",
            "pods/status",
            "services",
            "services/status"
        ]
    );
    assert_eq!(core["resources"][2]["namespaced"], false);
    let apis = c.get("/apis").await.body;
    assert_eq!(apis["kind"], "APIGroupList");
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    // In kube-apiserver's group order, then the others by name.
    assert_eq!(
        groups,
        [
            "apps",
            "events.k8s.io",
            "authentication.k8s.io",
            "authorization.k8s.io",
            "apiextensions.k8s.io",
            "coordination.k8s.io",
            "example.com"
        ]
    );
    assert_eq!(
        apis["groups"][6]["preferredVersion"]["groupVersion"],
        "example.com/v1"
    );
    let g = c.get("/apis/example.com/v1").await.body;
    assert_eq!(g["groupVersion"], "example.com/v1");
    assert_eq!(g["resources"][0]["kind"], "Widget");
    // A group the server does not serve is no API path: kube-apiserver's mux answers it in
    // plain text; an unknown version of a served group is a 404 Status.
    let missing = c.get("/apis/nope/v1").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let missing = c.get("/apis/apps/v7").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_status(&missing.body, 404, "NotFound");
}

/// What client-go and kubectl send for discovery: aggregated first, the legacy documents after.
const DISCOVERY_ACCEPT: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

#[tokio::test]
async fn aggregated_discovery_is_one_document_per_root_when_asked_first() {
    let sim = SimServer::builder()
        .resource(ResourceDef::new("example.com", "v1", "Widget", "widgets", true).with_status())
        .start()
        .await
        .unwrap();
    let c = Client::new(&sim);
    let (core, _) = c.get_accepting("/api", DISCOVERY_ACCEPT).await;
    assert_eq!(
        core.headers["content-type"],
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(core.body["kind"], "APIGroupDiscoveryList");
    assert_eq!(core.body["apiVersion"], "apidiscovery.k8s.io/v2");
    let items = core.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "the core group alone");
    assert!(items[0]["metadata"].get("name").is_none());
    let v1 = &items[0]["versions"][0];
    assert_eq!(v1["version"], "v1");
    assert_eq!(v1["freshness"], "Current");
    let pods = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "pods")
        .unwrap();
    // kube-apiserver names a response kind's group and version only where they differ.
    assert_eq!(
        pods,
        &json!({
            "resource": "pods", "responseKind": {"group": "", "version": "", "kind": "Pod"},
            "scope": "Namespaced", "singularResource": "pod",
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            "shortNames": ["po"], "categories": ["all"],
            "subresources": [{"subresource": "status",
                              "responseKind": {"group": "", "version": "", "kind": "Pod"},
                              "verbs": ["get", "patch", "update"]}],
        })
    );
    let namespaces = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "namespaces")
        .unwrap();
    assert_eq!(namespaces["scope"], "Cluster");

    let (apis, _) = c.get_accepting("/apis", DISCOVERY_ACCEPT).await;
    assert_eq!(apis.body["kind"], "APIGroupDiscoveryList");
    let group = |name: &str| {
        apis.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("group {name} in {}", apis.body))
    };
    let deployments = &group("apps")["versions"][0]["resources"][0];
    assert_eq!(deployments["resource"], "deployments");
    let subs: Vec<(&str, &str)> = deployments["subresources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["subresource"].as_str().unwrap(),
                s["responseKind"]["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(subs, [("scale", "Scale"), ("status", "Deployment")]);
    let widgets = &group("example.com")["versions"][0]["resources"][0];
    assert_eq!(widgets["responseKind"]["kind"], "Widget");
    assert_eq!(widgets["subresources"][0]["subresource"], "status");

    // Plain JSON first, or no Accept at all: the legacy documents, as before.
    for accept in [
        "application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
    ] {
        let (legacy, _) = c.get_accepting("/apis", accept).await;
        assert_eq!(legacy.body["kind"], "APIGroupList", "{accept}");
        assert_eq!(legacy.headers["content-type"], "application/json");
    }
    assert_eq!(c.get("/api").await.body["kind"], "APIVersions");
}

#[tokio::test]
async fn a_registered_custom_resource_supports_crud_and_cluster_scope_is_enforced() {
    let sim = SimServer::start().await.unwrap();
    sim.register(ResourceDef::new(
        "example.com",
        "v1",
        "Gadget",
        "gadgets",
        false,
    ));
    let c = Client::new(&sim);
    let r = c
        .post(
            "/apis/example.com/v1/gadgets",
            json!({"metadata": {"name": "g1"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.body["apiVersion"], "example.com/v1");
    assert!(r.body["metadata"].get("namespace").is_none());
    let l = c.get("/apis/example.com/v1/gadgets").await.body;
    assert_eq!(l["kind"], "GadgetList");
    assert_eq!(l["items"].as_array().unwrap().len(), 1);
    let ns = c
        .get("/apis/example.com/v1/namespaces/default/gadgets")
        .await;
    assert_eq!(ns.status, StatusCode::NOT_FOUND);
    assert_eq!(
        sim.get("gadgets.example.com", None, "g1").unwrap()["metadata"]["name"],
        "g1"
    );
}

#[tokio::test]
async fn namespaces_are_cluster_scoped_and_builtin_ones_exist() {
    let sim = SimServer::start().await.unwrap();
    let l = Client::new(&sim).get("/api/v1/namespaces").await.body;
    let names: Vec<&str> = l["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(common::name)
        .collect();
    assert_eq!(names, ["default", "kube-public", "kube-system"]);
}

#[tokio::test]
async fn an_object_of_the_wrong_kind_or_version_is_400() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let r = c
        .post(
            PODS,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
        )
        .await;
    assert_status(&r.body, 400, "BadRequest");
    let r = c
        .post(
            PODS,
            json!({"apiVersion": "apps/v1", "kind": "Pod", "metadata": {"name": "x"}}),
        )
        .await;
    assert_status(&r.body, 400, "BadRequest");
    assert!(sim.list("pods", None).unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_absurd_timeout_is_capped_rather_than_crashing_the_stream() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let mut w = c
        .watch("/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=9223372036854775807")
        .await;
    sim.create("pods", None, pod("a", json!({}))).unwrap();
    assert_eq!(common::name(&w.expect("ADDED").await), "a");
}

/// The test API's merge patch without a resourceVersion applies to the latest version, as
/// kube-apiserver's does: concurrent patches of one object from several threads all land
/// (none answered 409), and a patch carrying a stale resourceVersion is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_api_patches_without_a_resource_version_never_conflict_with_each_other() {
    let sim = SimServer::start().await.unwrap();
    let created = sim
        .create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": "busy"}, "data": {}}),
        )
        .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let sim = sim.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    sim.patch(
                        "configmaps",
                        Some("default"),
                        "busy",
                        &json!({"data": {format!("t{t}"): i.to_string()}}),
                    )
                    .unwrap_or_else(|e| panic!("thread {t}, patch {i}: {e:?}"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stored = sim.get("configmaps", Some("default"), "busy").unwrap();
    for t in 0..4 {
        assert_eq!(stored["data"][format!("t{t}")], "199", "{stored}");
    }
    let stale = json!({"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
                       "data": {"late": "1"}});
    let err = sim
        .patch("configmaps", Some("default"), "busy", &stale)
        .unwrap_err();
    assert_eq!(err.code, 409, "{err:?}");
}
