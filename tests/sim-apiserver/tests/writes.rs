//! The write API a client's writers, leader election and event recorder use: built-in
//! leases/events/deployments, status and scale subresources, JSON patch, server-side apply,
//! dry run, DeleteOptions, delete collection and create/update validation.

mod common;

use common::{pod, rv, Client};
use http::{Method, StatusCode};
use serde_json::{json, Value};
use sim_apiserver::{ResourceDef, SimServer};

const PODS: &str = "/api/v1/namespaces/default/pods";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn assert_status(body: &Value, code: u16, reason: &str) {
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "nginx:1"}]}}},
        "status": {"replicas": 0},
    })
}

#[tokio::test]
async fn leases_events_and_deployments_are_built_in_and_discovered_with_subresources() {
    let sim = SimServer::builder()
        .resource(ResourceDef::new("example.com", "v1", "Widget", "widgets", true).with_status())
        .start()
        .await
        .unwrap();
    let c = Client::new(&sim);
    let lease = json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}});
    let r = c.post(LEASES, lease).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["apiVersion"], "coordination.k8s.io/v1");
    assert_eq!(r.body["kind"], "Lease");
    let ev = json!({"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started", "count": 1});
    let r = c.post("/api/v1/namespaces/default/events", ev).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["kind"], "Event");
    let r = c
        .post(
            "/apis/events.k8s.io/v1/namespaces/default/events",
            json!({"metadata": {"name": "e2"}, "reason": "Started", "action": "Start", "eventTime": "2024-01-01T00:00:00.000000Z"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["apiVersion"], "events.k8s.io/v1");
    let r = c.post(DEPLOYS, deployment("web", 2)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    // Built-in groups list items without kind/apiVersion, as the core group does.
    let list = c.get(DEPLOYS).await.body;
    assert_eq!(list["kind"], "DeploymentList");
    assert!(list["items"][0].get("kind").is_none(), "{list}");

    let names = |v: &Value| -> Vec<String> {
        v["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    let apps = c.get("/apis/apps/v1").await.body;
    assert_eq!(
        names(&apps),
        ["deployments", "deployments/scale", "deployments/status"]
    );
    let scale = &apps["resources"][1];
    assert_eq!(
        (&scale["group"], &scale["version"], &scale["kind"]),
        (&json!("autoscaling"), &json!("v1"), &json!("Scale"))
    );
    assert_eq!(scale["verbs"], json!(["get", "patch", "update"]));
    assert_eq!(
        names(&c.get("/apis/coordination.k8s.io/v1").await.body),
        ["leases"]
    );
    assert_eq!(
        names(&c.get("/apis/events.k8s.io/v1").await.body),
        ["events"]
    );
    assert_eq!(
        names(&c.get("/apis/example.com/v1").await.body),
        ["widgets", "widgets/status"]
    );
    assert!(names(&c.get("/api/v1").await.body).contains(&"events".to_string()));
    // The test API resolves `plural.group`.
    assert!(sim
        .get("leases.coordination.k8s.io", Some("default"), "leader")
        .is_ok());
    assert!(sim
        .get("events.events.k8s.io", Some("default"), "e2")
        .is_ok());
    assert!(sim.get("events", Some("default"), "e1").is_ok());
}

/// Coordinated leader election's candidates: `coordination.k8s.io/v1beta1` LeaseCandidates, as
/// a candidate uses them (one object read and watched by name, renewed by update) and as the
/// coordinator pings them (an update of `spec.pingTime`).
#[tokio::test]
async fn lease_candidates_are_served_at_coordination_v1beta1_beside_leases() {
    const CANDIDATES: &str = "/apis/coordination.k8s.io/v1beta1/namespaces/default/leasecandidates";
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let group = c.get("/apis/coordination.k8s.io").await.body;
    assert_eq!(group["preferredVersion"]["version"], "v1", "{group}");
    let resources = c.get("/apis/coordination.k8s.io/v1beta1").await.body;
    assert_eq!(resources["resources"][0]["name"], "leasecandidates");
    assert_eq!(resources["resources"][0]["kind"], "LeaseCandidate");

    let candidate = |name: &str| {
        json!({"metadata": {"name": name}, "spec": {
            "leaseName": "my-controller", "binaryVersion": "1.36.3", "emulationVersion": "1.36.0",
            "strategy": "OldestEmulationVersion", "renewTime": "2026-01-01T00:00:00.000000Z"}})
    };
    let r = c.post(CANDIDATES, candidate("pod-a")).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["apiVersion"], "coordination.k8s.io/v1beta1");
    assert_eq!(r.body["kind"], "LeaseCandidate");
    c.post(CANDIDATES, candidate("pod-b")).await;

    let by_name = format!("{CANDIDATES}?fieldSelector=metadata.name%3Dpod-a");
    let list = c.get(&by_name).await.body;
    assert_eq!(list["kind"], "LeaseCandidateList");
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
    let mut watch = c
        .watch(&format!(
            "{by_name}&watch=true&resourceVersion={}",
            list["metadata"]["resourceVersion"].as_str().unwrap()
        ))
        .await;
    let mut pinged = list["items"][0].clone();
    pinged["spec"]["pingTime"] = json!("2026-01-01T00:00:05.000000Z");
    let url = format!("{CANDIDATES}/pod-a");
    let r = c
        .send(Method::PUT, &url, Some(("application/json", pinged)))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let seen = watch.expect("MODIFIED").await;
    assert_eq!(seen["spec"]["pingTime"], "2026-01-01T00:00:05.000000Z");
    assert_eq!(seen["spec"]["renewTime"], "2026-01-01T00:00:00.000000Z");
    let stored = sim
        .get(
            "leasecandidates.coordination.k8s.io",
            Some("default"),
            "pod-a",
        )
        .unwrap();
    assert_eq!(stored["spec"]["leaseName"], "my-controller");
}

#[tokio::test]
async fn the_status_subresource_changes_only_status_and_the_main_resource_keeps_it() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let created = c.post(DEPLOYS, deployment("web", 2)).await.body;
    assert_eq!(
        created["status"],
        json!({}),
        "a create sets an empty status"
    );
    let url = format!("{DEPLOYS}/web");
    let status_url = format!("{url}/status");
    let created = c
        .send(
            Method::PATCH,
            &status_url,
            Some((MERGE, json!({"status": {"replicas": 0}}))),
        )
        .await
        .body;
    assert_eq!(created["metadata"]["generation"], 1);

    // PUT on the main resource: the spec change lands (generation 2), the status one is ignored.
    let mut put = created.clone();
    put["spec"]["replicas"] = json!(3);
    put["status"]["replicas"] = json!(99);
    let r = c
        .send(Method::PUT, &url, Some(("application/json", put)))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["spec"]["replicas"], 3);
    assert_eq!(r.body["status"]["replicas"], 0);
    assert_eq!(r.body["metadata"]["generation"], 2);
    let after_put = r.body;

    // PUT on status: only status changes, generation stays.
    let mut st = after_put.clone();
    st["spec"]["replicas"] = json!(7);
    st["status"] = json!({"replicas": 3, "readyReplicas": 3});
    let r = c
        .send(
            Method::PUT,
            &status_url,
            Some(("application/json", st.clone())),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["spec"]["replicas"], 3);
    assert_eq!(r.body["status"]["readyReplicas"], 3);
    assert_eq!(r.body["metadata"]["generation"], 2);
    assert!(rv(&r.body) > rv(&after_put));

    // The same PUT again carries a stale resourceVersion now.
    let stale = c
        .send(Method::PUT, &status_url, Some(("application/json", st)))
        .await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    assert_status(&stale.body, 409, "Conflict");

    // PATCH on status (merge) and on the main resource (status ignored).
    let r = c
        .send(
            Method::PATCH,
            &status_url,
            Some((
                MERGE,
                json!({"spec": {"replicas": 9}, "status": {"readyReplicas": 1}}),
            )),
        )
        .await;
    assert_eq!(r.body["status"]["readyReplicas"], 1);
    assert_eq!(r.body["spec"]["replicas"], 3);
    let r = c
        .send(
            Method::PATCH,
            &url,
            Some((MERGE, json!({"status": {"readyReplicas": 5}}))),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["status"]["readyReplicas"], 1);
    assert_eq!(r.body["metadata"]["generation"], 2);

    // GET on status returns the object.
    let g = c.get(&status_url).await;
    assert_eq!(g.status, StatusCode::OK);
    assert_eq!(g.body["kind"], "Deployment");

    // Subresources a resource does not have are 404; other verbs on one are 405.
    c.post(LEASES, json!({"metadata": {"name": "l"}})).await;
    assert_eq!(
        c.get(&format!("{LEASES}/l/scale")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        c.get(&format!("{LEASES}/l/status")).await.status,
        StatusCode::NOT_FOUND
    );
    let del = c.send(Method::DELETE, &status_url, None).await;
    assert_status(&del.body, 405, "MethodNotAllowed");
    assert_eq!(
        c.send(
            Method::PUT,
            &format!("{DEPLOYS}/nope/status"),
            Some(("application/json", deployment("nope", 1)))
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn a_custom_resource_with_a_status_subresource_behaves_like_a_builtin_one() {
    let sim = SimServer::builder()
        .resource(ResourceDef::new("example.com", "v1", "Widget", "widgets", true).with_status())
        .start()
        .await
        .unwrap();
    let c = Client::new(&sim);
    let w = "/apis/example.com/v1/namespaces/default/widgets";
    c.post(w, json!({"metadata": {"name": "w"}, "spec": {"size": 1}}))
        .await;
    let r = c
        .send(
            Method::PATCH,
            &format!("{w}/w/status"),
            Some((MERGE, json!({"status": {"ready": true}}))),
        )
        .await;
    assert_eq!(r.body["status"], json!({"ready": true}));
    assert_eq!(r.body["metadata"]["generation"], 1);
    let r = c
        .send(
            Method::PATCH,
            &format!("{w}/w"),
            Some((
                MERGE,
                json!({"spec": {"size": 2}, "status": {"ready": false}}),
            )),
        )
        .await;
    assert_eq!(r.body["status"], json!({"ready": true}));
    assert_eq!(r.body["metadata"]["generation"], 2);
}

#[tokio::test]
async fn the_scale_subresource_reads_and_sets_spec_replicas() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let d = c.post(DEPLOYS, deployment("web", 2)).await.body;
    let scale_url = format!("{DEPLOYS}/web/scale");
    let s = c.get(&scale_url).await;
    assert_eq!(s.status, StatusCode::OK);
    assert_eq!(s.body["kind"], "Scale");
    assert_eq!(s.body["apiVersion"], "autoscaling/v1");
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        assert_eq!(s.body["metadata"][k], d["metadata"][k], "{k}");
    }
    assert_eq!(s.body["spec"]["replicas"], 2);
    assert_eq!(
        s.body["status"],
        json!({"replicas": 0, "selector": "app=web"})
    );

    let mut put = s.body.clone();
    put["spec"]["replicas"] = json!(5);
    let r = c
        .send(
            Method::PUT,
            &scale_url,
            Some(("application/json", put.clone())),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["kind"], "Scale");
    assert_eq!(r.body["spec"]["replicas"], 5);
    assert!(rv(&r.body) > rv(&d));
    let parent = sim.get("deployments.apps", Some("default"), "web").unwrap();
    assert_eq!(parent["spec"]["replicas"], 5);
    assert_eq!(parent["metadata"]["generation"], 2);

    // The resourceVersion of a Scale is a precondition.
    let stale = c
        .send(Method::PUT, &scale_url, Some(("application/json", put)))
        .await;
    assert_status(&stale.body, 409, "Conflict");

    let r = c
        .send(
            Method::PATCH,
            &scale_url,
            Some((MERGE, json!({"spec": {"replicas": 1}}))),
        )
        .await;
    assert_eq!(r.body["spec"]["replicas"], 1);
    let r = c
        .send(
            Method::PATCH,
            &scale_url,
            Some((
                JSON_PATCH,
                json!([{"op": "replace", "path": "/spec/replicas", "value": 4}]),
            )),
        )
        .await;
    assert_eq!(r.body["spec"]["replicas"], 4);
    let bad = c
        .send(
            Method::PATCH,
            &scale_url,
            Some((MERGE, json!({"spec": {"replicas": -1}}))),
        )
        .await;
    assert_status(&bad.body, 422, "Invalid");
    assert_eq!(bad.body["details"]["causes"][0]["field"], "spec.replicas");
    assert_eq!(
        sim.get("deployments.apps", Some("default"), "web").unwrap()["spec"]["replicas"],
        4
    );
}

#[tokio::test]
async fn json_patch_applies_rfc6902_and_refuses_what_cannot_be_applied() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let mut p = pod("a", json!({"app": "x"}));
    p["metadata"]["annotations"] = json!({"example.com/ab": "1"});
    c.post(PODS, p).await;
    let url = format!("{PODS}/a");
    let patch = json!([
        {"op": "test", "path": "/metadata/labels/app", "value": "x"},
        {"op": "add", "path": "/metadata/labels/tier", "value": "web"},
        {"op": "remove", "path": "/metadata/annotations/example.com~1ab"},
        {"op": "add", "path": "/spec/containers/-", "value": {"name": "d", "image": "nginx"}},
        {"op": "copy", "from": "/metadata/labels/app", "path": "/metadata/labels/copy"},
        {"op": "move", "from": "/metadata/labels/copy", "path": "/metadata/labels/moved"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "busybox:2"},
    ]);
    let r = c.send(Method::PATCH, &url, Some((JSON_PATCH, patch))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.body["metadata"]["labels"],
        json!({"app": "x", "tier": "web", "moved": "x"})
    );
    // The last annotation gone, so is the map, as Go writes it.
    assert!(
        r.body["metadata"].get("annotations").is_none(),
        "{}",
        r.body
    );
    assert_eq!(r.body["spec"]["containers"][1]["name"], "d");
    assert_eq!(r.body["spec"]["containers"][0]["image"], "busybox:2");
    let before = sim.revision();

    for unapplicable in [
        json!([{"op": "test", "path": "/metadata/labels/app", "value": "y"}]),
        json!([{"op": "replace", "path": "/spec/nope/deeper", "value": 1}]),
        json!([{"op": "remove", "path": "/metadata/labels/nope"}]),
        json!([{"op": "nope", "path": "/a"}]),
    ] {
        let r = c
            .send(Method::PATCH, &url, Some((JSON_PATCH, unapplicable)))
            .await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.body);
        assert_status(&r.body, 422, "Invalid");
    }
    for malformed in [json!({"op": "add"}), json!([{"op": "add", "path": "/a"}])] {
        let r = c
            .send(Method::PATCH, &url, Some((JSON_PATCH, malformed)))
            .await;
        assert_status(&r.body, 400, "BadRequest");
    }
    // A test of the resourceVersion is an optimistic lock.
    let r = c
        .send(
            Method::PATCH,
            &url,
            Some((
                JSON_PATCH,
                json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "1"}]),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(sim.revision(), before, "nothing was written");
    let r = c
        .send(
            Method::PATCH,
            &format!("{url}/status"),
            Some((
                JSON_PATCH,
                json!([{"op": "add", "path": "/status", "value": {"phase": "Running"}}]),
            )),
        )
        .await;
    assert_eq!(r.body["status"]["phase"], "Running", "{}", r.body);
}

async fn apply(c: &Client, url: &str, query: &str, body: Value) -> common::Resp {
    c.send(
        Method::PATCH,
        &format!("{url}?{query}"),
        Some((APPLY, body)),
    )
    .await
}

#[tokio::test]
async fn server_side_apply_creates_merges_tracks_owners_and_conflicts() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let url = format!("{DEPLOYS}/web");
    let cfg = |replicas: i64, extra: Value| {
        let mut d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"team": "a"}},
            "spec": {"replicas": replicas, "paused": false,
                     "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1"}]}}},
        });
        if let Value::Object(m) = extra {
            for (k, v) in m {
                d["spec"][k] = v;
            }
        }
        d
    };

    let r = apply(&c, &url, "", cfg(1, json!({}))).await;
    assert_status(&r.body, 422, "Invalid");
    assert_eq!(
        r.body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueRequired"
    );

    let r = apply(
        &c,
        &url,
        "fieldManager=ci",
        cfg(1, json!({"minReadySeconds": 5})),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["spec"]["replicas"], 1);
    let mf = &r.body["metadata"]["managedFields"];
    assert_eq!(mf[0]["manager"], "ci");
    assert_eq!(mf[0]["operation"], "Apply");
    assert_eq!(mf[0]["fieldsType"], "FieldsV1");
    assert_eq!(mf[0]["apiVersion"], "apps/v1");
    assert_eq!(
        mf[0]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:team": {}}},
               "f:spec": {"f:replicas": {}, "f:paused": {}, "f:minReadySeconds": {},
                   "f:selector": {"f:matchLabels": {"f:app": {}}},
                   "f:template": {"f:metadata": {"f:labels": {"f:app": {}}},
                       "f:spec": {"f:containers": {}}}}})
    );

    // Another manager applying the same value shares the field; a different value conflicts.
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 1, "revisionHistoryLimit": 3}});
    let r = apply(&c, &url, "fieldManager=hpa", other).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let before = sim.revision();
    let conflicting = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 4, "paused": true, "revisionHistoryLimit": 3}});
    let r = apply(&c, &url, "fieldManager=hpa", conflicting.clone()).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_status(&r.body, 409, "Conflict");
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .starts_with("Apply failed with 2 conflicts"));
    let causes = r.body["details"]["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 2);
    for c in causes {
        assert_eq!(c["reason"], "FieldManagerConflict");
        assert_eq!(c["message"], "conflict with \"ci\"");
    }
    let fields: Vec<&str> = causes
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, [".spec.paused", ".spec.replicas"]);
    assert_eq!(sim.revision(), before);

    // force=true takes the fields over.
    let r = apply(&c, &url, "fieldManager=hpa&force=true", conflicting).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["spec"]["replicas"], 4);
    assert_eq!(r.body["spec"]["paused"], true);
    let owners = |body: &Value, m: &str| {
        body["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == m)
            .map(|e| e["fieldsV1"].clone())
    };
    assert_eq!(
        owners(&r.body, "ci"),
        Some(json!({"f:metadata": {"f:labels": {"f:team": {}}},
            "f:spec": {"f:minReadySeconds": {},
                "f:selector": {"f:matchLabels": {"f:app": {}}},
                "f:template": {"f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {}}}}}))
    );

    // ci omits minReadySeconds now: removed (nobody else owns it); it still owns the label.
    let mut without = cfg(4, json!({}));
    for field in ["replicas", "paused"] {
        without["spec"].as_object_mut().unwrap().remove(field);
    }
    let r = apply(&c, &url, "fieldManager=ci", without).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(
        r.body["spec"].get("minReadySeconds").is_none(),
        "{}",
        r.body
    );
    assert_eq!(r.body["spec"]["revisionHistoryLimit"], 3);
    assert_eq!(r.body["metadata"]["labels"]["team"], "a");

    // hpa omits revisionHistoryLimit: removed, then defaulted again (10) as kube-apiserver
    // does; replicas it still applies stays.
    let r = apply(
        &c,
        &url,
        "fieldManager=hpa",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 4, "paused": true}}),
    )
    .await;
    assert_eq!(r.body["spec"]["revisionHistoryLimit"], 10);

    // Bad applies: another kind, another name, force on a merge patch.
    let r = apply(
        &c,
        &url,
        "fieldManager=x",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}}),
    )
    .await;
    assert_status(&r.body, 400, "BadRequest");
    let r = apply(
        &c,
        &url,
        "fieldManager=x",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "other"}}),
    )
    .await;
    assert_status(&r.body, 400, "BadRequest");
    let r = apply(&c, &url, "fieldManager=x", json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "managedFields": []}})).await;
    assert_eq!(r.body["message"], "metadata.managedFields must be nil");
    let r = c
        .send(
            Method::PATCH,
            &format!("{url}?force=true"),
            Some((MERGE, json!({}))),
        )
        .await;
    assert_status(&r.body, 422, "Invalid");
}

/// As kube-apiserver 1.36 answers (checked with kubectl against it): an applied configuration's
/// `resourceVersion` is a precondition on an existing object and ignored on a create; its owner
/// references are applied.
#[tokio::test]
async fn server_side_apply_heeds_a_resource_version_and_applies_owner_references() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let url = "/api/v1/namespaces/default/configmaps/c";
    let owner = json!([{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w",
                        "uid": "u-1", "controller": true}]);
    let cfg = |rv: &str, value: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "resourceVersion": rv, "ownerReferences": owner},
               "data": {"a": value}})
    };
    let created = apply(&c, url, "fieldManager=t", cfg("999", "1")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["metadata"]["ownerReferences"], owner);
    let rv = created.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let stale = apply(&c, url, "fieldManager=t&force=true", cfg("1", "2")).await;
    assert_status(&stale.body, 409, "Conflict");
    assert_eq!(
        stale.body["message"],
        "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let fresh = apply(&c, url, "fieldManager=t&force=true", cfg(&rv, "2")).await;
    assert_eq!(fresh.status, StatusCode::OK, "{}", fresh.body);
    assert_eq!(fresh.body["data"]["a"], "2");
}

#[tokio::test]
async fn server_side_apply_to_status_owns_only_status() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    c.post(DEPLOYS, deployment("web", 2)).await;
    let r = apply(
        &c,
        &format!("{DEPLOYS}/web/status"),
        "fieldManager=controller",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": 9}, "status": {"readyReplicas": 2}}),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["status"]["readyReplicas"], 2);
    assert_eq!(r.body["spec"]["replicas"], 2);
    let e = &r.body["metadata"]["managedFields"][0];
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:readyReplicas": {}}}));
    // An apply to the main resource ignores status.
    let r = apply(
        &c,
        &format!("{DEPLOYS}/web"),
        "fieldManager=user",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": 3}, "status": {"readyReplicas": 0}}),
    )
    .await;
    assert_eq!(r.body["status"]["readyReplicas"], 2);
    assert_eq!(r.body["spec"]["replicas"], 3);
}

#[tokio::test]
async fn dry_run_answers_like_the_write_but_stores_nothing_and_sends_no_event() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let d = c.post(DEPLOYS, deployment("web", 2)).await.body;
    let start = sim.revision();
    let mut w = c
        .watch(&format!("{DEPLOYS}?watch=1&resourceVersion={start}"))
        .await;
    let url = format!("{DEPLOYS}/web");

    let r = c
        .post(&format!("{DEPLOYS}?dryRun=All"), deployment("new", 1))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["metadata"]["name"], "new");
    assert!(r.body["metadata"]["uid"].is_string());
    // Validation still runs.
    let r = c
        .post(&format!("{DEPLOYS}?dryRun=All"), deployment("web", 1))
        .await;
    assert_status(&r.body, 409, "AlreadyExists");
    let r = c
        .post(&format!("{DEPLOYS}?dryRun=All"), deployment("Bad_Name", 1))
        .await;
    assert_status(&r.body, 422, "Invalid");

    let mut put = d.clone();
    put["spec"]["replicas"] = json!(5);
    let r = c
        .send(
            Method::PUT,
            &format!("{url}?dryRun=All"),
            Some(("application/json", put)),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["spec"]["replicas"], 5);
    assert_eq!(r.body["metadata"]["generation"], 2);
    assert_eq!(rv(&r.body), rv(&d));
    let r = c
        .send(
            Method::PATCH,
            &format!("{url}?dryRun=All"),
            Some((MERGE, json!({"spec": {"replicas": 6}}))),
        )
        .await;
    assert_eq!(r.body["spec"]["replicas"], 6);
    let r = c
        .send(
            Method::PATCH,
            &format!("{url}?dryRun=All"),
            Some((
                JSON_PATCH,
                json!([{"op": "replace", "path": "/spec/replicas", "value": 7}]),
            )),
        )
        .await;
    assert_eq!(r.body["spec"]["replicas"], 7);
    let r = apply(&c, &url, "fieldManager=m&dryRun=All", json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 8}})).await;
    assert_eq!(r.body["spec"]["replicas"], 8, "{}", r.body);
    let mut other = deployment("other", 8);
    other.as_object_mut().unwrap().remove("status");
    let r = apply(
        &c,
        &format!("{DEPLOYS}/other"),
        "fieldManager=m&dryRun=All",
        other,
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = c
        .send(
            Method::PATCH,
            &format!("{url}/status?dryRun=All"),
            Some((MERGE, json!({"status": {"replicas": 2}}))),
        )
        .await;
    assert_eq!(r.body["status"]["replicas"], 2);
    let r = c
        .send(
            Method::PATCH,
            &format!("{url}/scale?dryRun=All"),
            Some((MERGE, json!({"spec": {"replicas": 3}}))),
        )
        .await;
    assert_eq!(r.body["spec"]["replicas"], 3);
    let r = c
        .send(Method::DELETE, &format!("{url}?dryRun=All"), None)
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = c
        .send(
            Method::DELETE,
            &url,
            Some((
                "application/json",
                json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = c
        .send(Method::DELETE, &format!("{DEPLOYS}?dryRun=All"), None)
        .await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 1);

    assert_eq!(sim.revision(), start, "no resourceVersion consumed");
    assert_eq!(
        sim.get("deployments.apps", Some("default"), "web").unwrap(),
        d
    );
    assert!(sim.get("deployments.apps", Some("default"), "new").is_err());
    assert_eq!(
        sim.history("deployments.apps", Some("default"), "web")
            .len(),
        1
    );

    // The first event the watch sees is the real write that follows.
    c.send(
        Method::PATCH,
        &url,
        Some((MERGE, json!({"metadata": {"labels": {"real": "1"}}}))),
    )
    .await;
    let ev = w.expect("MODIFIED").await;
    assert_eq!(ev["metadata"]["labels"]["real"], "1");

    // Any other dryRun value is refused (kube-apiserver: 422 from the options' validation).
    let r = c
        .post(&format!("{DEPLOYS}?dryRun=Some"), deployment("x", 1))
        .await;
    assert_status(&r.body, 422, "Invalid");
    assert_eq!(
        r.body["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Some\"]: supported values: \"All\""
    );
    let r = c
        .send(Method::DELETE, &format!("{url}?dryRun=x"), None)
        .await;
    assert_status(&r.body, 422, "Invalid");
}

#[tokio::test]
async fn delete_options_are_validated_and_preconditions_enforced() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let a = c.post(PODS, pod("a", json!({}))).await.body;
    let url = format!("{PODS}/a");
    let del = |body: Value| {
        let c = c.clone();
        let url = url.clone();
        async move {
            c.send(Method::DELETE, &url, Some(("application/json", body)))
                .await
        }
    };
    let r = del(json!({"propagationPolicy": "Sideways"})).await;
    assert_status(&r.body, 422, "Invalid");
    assert_eq!(r.body["details"]["causes"][0]["field"], "propagationPolicy");
    let r = c
        .send(
            Method::DELETE,
            &format!("{url}?propagationPolicy=Nope"),
            None,
        )
        .await;
    assert_status(&r.body, 422, "Invalid");
    let r = del(json!({"gracePeriodSeconds": "soon"})).await;
    assert_status(&r.body, 400, "BadRequest");
    let r = del(json!({"preconditions": {"uid": "not-the-uid"}})).await;
    assert_status(&r.body, 409, "Conflict");
    assert_eq!(
        r.body["message"],
        format!(
            "Operation cannot be fulfilled on Pod \"a\": the UID in the precondition (not-the-uid) does not match the UID in record ({}). The object might have been deleted and then recreated",
            a["metadata"]["uid"].as_str().unwrap()
        )
    );
    let r = del(json!({"preconditions": {"resourceVersion": "1"}})).await;
    assert_status(&r.body, 409, "Conflict");
    assert!(sim.get("pods", Some("default"), "a").is_ok());
    let r = c
        .send(
            Method::DELETE,
            &format!("{url}?propagationPolicy=Foreground&gracePeriodSeconds=0"),
            Some(("application/json", json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background",
                "preconditions": {"uid": a["metadata"]["uid"], "resourceVersion": a["metadata"]["resourceVersion"]}}))),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(sim.get("pods", Some("default"), "a").is_err());
}

#[tokio::test]
async fn delete_collection_deletes_what_the_selectors_match_and_lists_it() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    for (n, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        c.post(PODS, pod(n, json!({"app": app}))).await;
    }
    c.post("/api/v1/namespaces", json!({"metadata": {"name": "other"}}))
        .await;
    c.post(
        "/api/v1/namespaces/other/pods",
        pod("d", json!({"app": "x"})),
    )
    .await;
    let start = sim.revision();
    let mut w = c
        .watch(&format!("/api/v1/pods?watch=1&resourceVersion={start}"))
        .await;
    let r = c
        .send(
            Method::DELETE,
            &format!("{PODS}?labelSelector=app%3Dx"),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["kind"], "PodList");
    assert_eq!(r.body["apiVersion"], "v1");
    let names: Vec<&str> = r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    for n in ["a", "b"] {
        assert_eq!(w.expect("DELETED").await["metadata"]["name"], n);
    }
    assert!(sim.get("pods", Some("default"), "c").is_ok());
    assert!(sim.get("pods", Some("other"), "d").is_ok());
    let r = c
        .send(
            Method::DELETE,
            &format!("{PODS}?fieldSelector=metadata.name%3Dc"),
            None,
        )
        .await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 1);
    assert_eq!(w.expect("DELETED").await["metadata"]["name"], "c");
    assert!(sim.list("pods", Some("default")).unwrap().is_empty());
}

#[tokio::test]
async fn create_and_update_validate_names_as_kube_apiserver_does() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let r = c.post(LEASES, json!({"metadata": {}})).await;
    assert_status(&r.body, 422, "Invalid");
    let d = &r.body["details"];
    assert_eq!(d["kind"], "Lease");
    assert_eq!(d["group"], "coordination.k8s.io");
    // Go leaves the empty name out of `details`.
    assert!(d.get("name").is_none(), "{d}");
    assert_eq!(d["causes"][0]["reason"], "FieldValueRequired");
    assert_eq!(d["causes"][0]["field"], "metadata.name");

    let r = c
        .post(LEASES, json!({"metadata": {"name": "Not_A-Name"}}))
        .await;
    assert_status(&r.body, 422, "Invalid");
    assert_eq!(r.body["details"]["name"], "Not_A-Name");
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueInvalid"
    );
    assert_eq!(r.body["details"]["causes"][0]["field"], "metadata.name");

    let r = c
        .post(LEASES, json!({"metadata": {"generateName": "lock-"}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let name = r.body["metadata"]["name"].as_str().unwrap();
    let suffix = name.strip_prefix("lock-").unwrap();
    assert_eq!(suffix.len(), 5);
    assert!(suffix
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));

    let r = c.post(LEASES, json!({"metadata": {"name": name}})).await;
    assert_status(&r.body, 409, "AlreadyExists");
    let r = c
        .send(
            Method::PUT,
            &format!("{LEASES}/missing"),
            Some(("application/json", json!({"metadata": {"name": "missing"}}))),
        )
        .await;
    assert_status(&r.body, 404, "NotFound");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_patches_without_a_resource_version_all_apply_and_one_with_a_stale_one_conflicts(
) {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let created = c.post(PODS, pod("a", json!({}))).await.body;
    assert_eq!(
        created["status"],
        json!({"phase": "Pending", "qosClass": "BestEffort"})
    );
    let url = format!("{PODS}/a");
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let c = c.clone();
            let url = url.clone();
            tokio::spawn(async move {
                let ct = if i % 2 == 0 {
                    MERGE
                } else {
                    "application/strategic-merge-patch+json"
                };
                c.send(
                    Method::PATCH,
                    &url,
                    Some((ct, json!({"metadata": {"labels": {format!("l{i}"): "x"}}}))),
                )
                .await
                .status
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), StatusCode::OK);
    }
    let labels = sim.get("pods", Some("default"), "a").unwrap()["metadata"]["labels"].clone();
    assert_eq!(labels.as_object().unwrap().len(), 16, "{labels}");
    let stale = c
        .send(
            Method::PATCH,
            &url,
            Some((
                MERGE,
                json!({"metadata": {"resourceVersion": created["metadata"]["resourceVersion"], "labels": {"z": "1"}}}),
            )),
        )
        .await;
    assert_status(&stale.body, 409, "Conflict");
}
