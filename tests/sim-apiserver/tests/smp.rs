//! Strategic merge patch: a table of cases modelled on Kubernetes' own strategic-merge-patch
//! test table (written here in our own words against a small schema of the same shape), the
//! built-in kinds' real merge keys, and the HTTP path.

mod common;

use common::Client;
use http::{Method, StatusCode};
use serde_json::{json, Map, Value};
use sim_apiserver::smp::{strategic_merge_patch, Schema, SmpError};
use sim_apiserver::{ResourceDef, SimServer};

const SMP: &str = "application/strategic-merge-patch+json";

/// A schema like the Go test's: merging and non-merging lists of objects and of scalars, a
/// map, a `retainKeys` union and a `replace` field; elements nest the same lists again.
fn test_defs() -> Map<String, Value> {
    let fields = json!({
        "name": {"type": "string"},
        "value": {"type": "string"},
        "other": {"type": "string"},
        "mergingList": {"type": "array", "items": {"$ref": "#/definitions/Item"},
            "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"},
        "nonMergingList": {"type": "array", "items": {"$ref": "#/definitions/Item"}},
        "mergingIntList": {"type": "array", "items": {"type": "integer"},
            "x-kubernetes-patch-strategy": "merge"},
        "nonMergingIntList": {"type": "array", "items": {"type": "integer"}},
        "simpleMap": {"type": "object", "additionalProperties": {"type": "string"}},
        "retainKeysMap": {"$ref": "#/definitions/Item", "x-kubernetes-patch-strategy": "retainKeys"},
        "replacingItem": {"type": "object", "x-kubernetes-patch-strategy": "replace"},
    });
    let mut defs = Map::new();
    defs.insert(
        "Item".into(),
        json!({"type": "object", "properties": fields}),
    );
    defs
}

fn apply(defs: &Map<String, Value>, orig: Value, patch: Value) -> Result<Value, SmpError> {
    let root = json!({"$ref": "#/definitions/Item"});
    let mut doc = orig.clone();
    let r = strategic_merge_patch(&mut doc, &patch, Schema::new(&root, defs));
    if r.is_err() {
        assert_eq!(doc, orig, "a refused patch leaves the document alone");
    }
    r.map(|()| doc)
}

fn named(names: &[&str]) -> Value {
    Value::Array(names.iter().map(|n| json!({"name": n})).collect())
}

#[test]
fn the_strategic_merge_patch_table() {
    let defs = test_defs();
    let cases: Vec<(&str, Value, Value, Value)> = vec![
        (
            "null removes a key",
            json!({"name": "a", "value": "b"}),
            json!({"value": null}),
            json!({"name": "a"}),
        ),
        (
            "null for an absent key is not stored",
            json!({"name": "a"}),
            json!({"other": null}),
            json!({"name": "a"}),
        ),
        (
            "maps merge",
            json!({"simpleMap": {"k1": "1"}}),
            json!({"simpleMap": {"k2": "2"}}),
            json!({"simpleMap": {"k1": "1", "k2": "2"}}),
        ),
        (
            "$patch: replace replaces a map",
            json!({"simpleMap": {"k1": "1"}}),
            json!({"simpleMap": {"$patch": "replace", "k2": "2"}}),
            json!({"simpleMap": {"k2": "2"}}),
        ),
        (
            "$patch: delete empties a map",
            json!({"simpleMap": {"k1": "1"}, "name": "a"}),
            json!({"simpleMap": {"$patch": "delete"}}),
            json!({"simpleMap": {}, "name": "a"}),
        ),
        (
            "$patch: merge is the default",
            json!({"simpleMap": {"k1": "1"}}),
            json!({"simpleMap": {"$patch": "merge", "k2": "2"}}),
            json!({"simpleMap": {"k1": "1", "k2": "2"}}),
        ),
        (
            "a merging list merges its elements by key",
            json!({"mergingList": [{"name": "1", "value": "a"}, {"name": "2", "value": "b"}]}),
            json!({"mergingList": [{"name": "2", "value": "c"}]}),
            json!({"mergingList": [{"name": "1", "value": "a"}, {"name": "2", "value": "c"}]}),
        ),
        (
            "a merged element keeps the fields the patch does not name",
            json!({"mergingList": [{"name": "1", "value": "a", "other": "x"}]}),
            json!({"mergingList": [{"name": "1", "value": null, "other": "y"}]}),
            json!({"mergingList": [{"name": "1", "other": "y"}]}),
        ),
        (
            "without $setElementOrder a new element goes before the server's",
            json!({"mergingList": named(&["1", "2"])}),
            json!({"mergingList": named(&["3"])}),
            json!({"mergingList": named(&["3", "1", "2"])}),
        ),
        (
            "$setElementOrder places the new element",
            json!({"mergingList": named(&["1", "2"])}),
            json!({"$setElementOrder/mergingList": named(&["1", "2", "3"]), "mergingList": named(&["3"])}),
            json!({"mergingList": named(&["1", "2", "3"])}),
        ),
        (
            "$setElementOrder alone reorders",
            json!({"mergingList": named(&["1", "2", "3"])}),
            json!({"$setElementOrder/mergingList": named(&["3", "1", "2"])}),
            json!({"mergingList": named(&["3", "1", "2"])}),
        ),
        (
            "$patch: delete removes the element with that key",
            json!({"mergingList": named(&["1", "2", "3"])}),
            json!({"mergingList": [{"name": "2", "$patch": "delete"}]}),
            json!({"mergingList": named(&["1", "3"])}),
        ),
        (
            "$patch: replace in an element replaces the whole list",
            json!({"mergingList": named(&["1", "2"])}),
            json!({"mergingList": [{"name": "3"}, {"$patch": "replace"}]}),
            json!({"mergingList": named(&["3"])}),
        ),
        (
            "a list without a strategy is replaced",
            json!({"nonMergingList": named(&["1", "2"])}),
            json!({"nonMergingList": named(&["3"])}),
            json!({"nonMergingList": named(&["3"])}),
        ),
        (
            "a scalar list without a strategy is replaced",
            json!({"nonMergingIntList": [1, 2]}),
            json!({"nonMergingIntList": [3]}),
            json!({"nonMergingIntList": [3]}),
        ),
        (
            "a merging scalar list is a set",
            json!({"mergingIntList": [1, 2]}),
            json!({"mergingIntList": [2, 3]}),
            json!({"mergingIntList": [1, 2, 3]}),
        ),
        (
            "$deleteFromPrimitiveList removes values",
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [2]}),
            json!({"mergingIntList": [1, 3]}),
        ),
        (
            "$setElementOrder orders a scalar list",
            json!({"mergingIntList": [1, 2]}),
            json!({"$setElementOrder/mergingIntList": [2, 1, 3], "mergingIntList": [3]}),
            json!({"mergingIntList": [2, 1, 3]}),
        ),
        (
            "$retainKeys drops the keys it does not list",
            json!({"retainKeysMap": {"name": "a", "value": "1", "other": "x"}}),
            json!({"retainKeysMap": {"$retainKeys": ["name", "other"], "other": "y"}}),
            json!({"retainKeysMap": {"name": "a", "other": "y"}}),
        ),
        (
            "lists nested in merged elements merge too",
            json!({"mergingList": [{"name": "1", "mergingList": named(&["a", "b"]), "nonMergingList": named(&["a"])}]}),
            json!({"mergingList": [{"name": "1", "mergingList": named(&["c"]), "nonMergingList": named(&["c"])}]}),
            json!({"mergingList": [{"name": "1", "mergingList": named(&["c", "a", "b"]), "nonMergingList": named(&["c"])}]}),
        ),
        (
            "directives in a value the document lacks are carried out, not stored",
            json!({}),
            json!({"simpleMap": {"$patch": "replace", "k": "v"}, "mergingList": [{"name": "1"}, {"name": "2", "$patch": "delete"}]}),
            json!({"simpleMap": {"k": "v"}, "mergingList": named(&["1"])}),
        ),
        (
            "a value of another type replaces",
            json!({"simpleMap": "s"}),
            json!({"simpleMap": {"k": "v"}}),
            json!({"simpleMap": {"k": "v"}}),
        ),
        (
            "a replace strategy replaces a map",
            json!({"replacingItem": {"a": 1}}),
            json!({"replacingItem": {"b": 2}}),
            json!({"replacingItem": {"b": 2}}),
        ),
        (
            "a field the schema lacks merges as JSON merge patch",
            json!({"unknown": {"a": 1, "l": [1]}}),
            json!({"unknown": {"b": 2, "l": [2]}}),
            json!({"unknown": {"a": 1, "b": 2, "l": [2]}}),
        ),
    ];
    for (what, orig, patch, want) in cases {
        let got = apply(&defs, orig, patch).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn malformed_patches_are_refused_with_kube_apiservers_words() {
    let defs = test_defs();
    let list = json!({"mergingList": named(&["1"]), "retainKeysMap": {"name": "a"}, "mergingIntList": [1]});
    let bad: Vec<(Value, &str)> = vec![
        (
            json!({"$patch": "frobnicate"}),
            "unknown patch type: frobnicate in map",
        ),
        (
            json!({"mergingList": [{"value": "x"}]}),
            "does not contain declared merge key: name",
        ),
        (
            json!({"mergingList": [{"name": "1", "$patch": "merge"}]}),
            "merging lists cannot yet be specified in the patch",
        ),
        (
            json!({"retainKeysMap": {"$retainKeys": "name"}}),
            "invalid patch format of retainKeys",
        ),
        (
            json!({"retainKeysMap": {"$retainKeys": ["name"], "value": "v"}}),
            "invalid patch format of retainKeys",
        ),
        (
            json!({"$setElementOrder/mergingList": "x"}),
            "invalid patch format of setElementOrder list",
        ),
        (
            json!({"$setElementOrder/mergingList": named(&["1", "2"]), "mergingList": named(&["2", "1"])}),
            "doesn't match $setElementOrder list",
        ),
        (
            json!({"$deleteFromPrimitiveList/mergingIntList": 1}),
            "invalid patch format of primitive list",
        ),
        (
            json!({"mergingIntList": ["a"]}),
            "list element types are not identical",
        ),
    ];
    for (patch, words) in bad {
        match apply(&defs, list.clone(), patch.clone()) {
            Err(SmpError::BadRequest(m)) => assert!(m.contains(words), "{patch}: {m}"),
            other => panic!("{patch}: {other:?}"),
        }
    }
    match apply(
        &defs,
        json!({"mergingIntList": [1]}),
        json!({"mergingIntList": [[2]]}),
    ) {
        Err(SmpError::Invalid(m)) => assert_eq!(m, "lists of lists are not supported"),
        other => panic!("{other:?}"),
    }
}

/// The built-in kinds' schemas carry the merge keys of Kubernetes' swagger.
fn patch_builtin(kind: &str, orig: Value, patch: Value) -> Value {
    let defs = sim_apiserver::openapi::definitions();
    let mut doc = orig;
    strategic_merge_patch(&mut doc, &patch, Schema::new(&defs[kind], defs)).unwrap();
    doc
}

#[test]
fn built_in_kinds_merge_by_their_own_keys() {
    let pod = json!({"metadata": {"name": "p", "finalizers": ["a"], "ownerReferences": [
            {"uid": "1", "name": "o1", "kind": "K", "apiVersion": "v1"},
            {"uid": "2", "name": "o2", "kind": "K", "apiVersion": "v1"}]},
        "spec": {
            "containers": [
                {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}],
                 "ports": [{"containerPort": 80}], "volumeMounts": [{"mountPath": "/m", "name": "v"}]},
                {"name": "b", "image": "b:1"}],
            "volumes": [{"name": "v", "emptyDir": {}}],
            "tolerations": [{"key": "t1"}]}});
    let patch = json!({"metadata": {"finalizers": ["b"], "ownerReferences": [{"uid": "1", "$patch": "delete"}]},
        "spec": {
            "containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}],
                "ports": [{"containerPort": 443}], "volumeMounts": [{"mountPath": "/m", "readOnly": true}]}],
            "volumes": [{"name": "v", "$retainKeys": ["name", "configMap"], "configMap": {"name": "c"}}],
            "tolerations": [{"key": "t2"}]}});
    let got = patch_builtin("io.k8s.api.core.v1.Pod", pod, patch);
    // A value the server lacks goes first, as a new element of any merged list does.
    assert_eq!(got["metadata"]["finalizers"], json!(["b", "a"]));
    assert_eq!(
        got["metadata"]["ownerReferences"],
        json!([{"uid": "2", "name": "o2", "kind": "K", "apiVersion": "v1"}])
    );
    let a = &got["spec"]["containers"][0];
    assert_eq!(a["image"], "a:1");
    assert_eq!(
        a["env"],
        json!([{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}])
    );
    assert_eq!(
        a["ports"],
        json!([{"containerPort": 443}, {"containerPort": 80}])
    );
    assert_eq!(
        a["volumeMounts"],
        json!([{"mountPath": "/m", "name": "v", "readOnly": true}])
    );
    assert_eq!(
        got["spec"]["containers"][1],
        json!({"name": "b", "image": "b:1"})
    );
    assert_eq!(
        got["spec"]["volumes"],
        json!([{"name": "v", "configMap": {"name": "c"}}])
    );
    assert_eq!(
        got["spec"]["tolerations"],
        json!([{"key": "t2"}]),
        "tolerations have no strategy"
    );

    let deploy = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
        "template": {"spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}}});
    let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"},
        "template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}});
    let got = patch_builtin("io.k8s.api.apps.v1.Deployment", deploy, patch);
    assert_eq!(got["spec"]["strategy"], json!({"type": "Recreate"}));
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}])
    );
}

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";

/// Each container's name and image (the server defaults the rest of a container).
fn names_and_images(containers: &Value) -> Value {
    containers
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!({"name": c["name"], "image": c["image"]}))
        .collect()
}

#[tokio::test]
async fn patching_a_deployments_second_container_over_http_keeps_the_first() {
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
    let d = json!({"metadata": {"name": "web"}, "spec": {"replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
            {"name": "app", "image": "app:1"}, {"name": "sidecar", "image": "side:1"}]}}}});
    let r = c.post(DEPLOYS, d).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let url = format!("{DEPLOYS}/web");
    let p = json!({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "side:2"}]}}}});
    let r = c.send(Method::PATCH, &url, Some((SMP, p))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        names_and_images(&r.body["spec"]["template"]["spec"]["containers"]),
        json!([{"name": "app", "image": "app:1"}, {"name": "sidecar", "image": "side:2"}])
    );
    // `$patch: delete` removes the container and is not stored.
    let p = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "$patch": "delete"}]}}}});
    let r = c.send(Method::PATCH, &url, Some((SMP, p))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let stored = sim.get("deployments.apps", Some("default"), "web").unwrap();
    assert_eq!(
        names_and_images(&stored["spec"]["template"]["spec"]["containers"]),
        json!([{"name": "sidecar", "image": "side:2"}])
    );
    // The scale subresource takes a strategic merge patch against `Scale`.
    let r = c
        .send(
            Method::PATCH,
            &format!("{url}/scale"),
            Some((SMP, json!({"spec": {"replicas": 3}}))),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["spec"]["replicas"], 3);
    // A malformed directive is a 400, and changes nothing.
    let rv = stored["metadata"]["resourceVersion"].clone();
    let p = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
    let r = c.send(Method::PATCH, &url, Some((SMP, p))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.body["reason"], "BadRequest");
    let after = sim.get("deployments.apps", Some("default"), "web").unwrap();
    assert_eq!(
        after["metadata"]["resourceVersion"],
        json!((rv.as_str().unwrap().parse::<u64>().unwrap() + 1).to_string()),
        "only the scale write"
    );
    // Lists of lists: kube-apiserver's generic 422.
    let p = json!({"metadata": {"finalizers": [["a"]]}});
    let r = c.send(Method::PATCH, &url, Some((SMP, p))).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.body);
    assert_eq!(r.body["reason"], "Invalid");
    assert_eq!(
        r.body["message"],
        "the server rejected our request due to an error in our request"
    );
    // A custom resource takes no strategic merge patch, as with kube-apiserver.
    let w = "/apis/example.com/v1/namespaces/default/widgets";
    assert_eq!(
        c.post(w, json!({"metadata": {"name": "w"}})).await.status,
        StatusCode::CREATED
    );
    let r = c
        .send(
            Method::PATCH,
            &format!("{w}/w"),
            Some((SMP, json!({"spec": {"a": 1}}))),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", r.body);
    assert!(
        !r.body["message"].as_str().unwrap().contains("strategic"),
        "{}",
        r.body
    );
}
