//! CustomResourceDefinitions over HTTP: a CRD written is served (discovery, routes, scope), its
//! schema validates, prunes and defaults writes, its status and scale subresources work, its
//! printer columns make the Tables kubectl asks for, and deleting it removes the resource.

mod common;

use common::Client;
use http::{Method, StatusCode};
use serde_json::{json, Value};
use sim_apiserver::SimServer;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "minimum": 1},
                        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                        "replicas": {"type": "integer", "default": 1},
                    }},
                    "status": {"type": "object", "properties": {
                        "replicas": {"type": "integer"}, "selector": {"type": "string"},
                        "phase": {"type": "string"},
                    }},
                }}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }],
        },
    })
}

fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "labels": {"app": "w"}}, "spec": spec})
}

async fn server_with_widgets() -> (SimServer, Client) {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let r = c.post(CRDS, widget_crd()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    (sim, c)
}

#[tokio::test]
async fn a_created_crd_is_established_and_served_in_discovery() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    // Before: nothing at the custom path.
    assert_eq!(c.get(WIDGETS).await.status, StatusCode::NOT_FOUND);
    let crds = c.get("/apis/apiextensions.k8s.io/v1").await;
    let names: Vec<&str> = crds.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(
        names,
        vec![
            "customresourcedefinitions",
            "customresourcedefinitions/status"
        ]
    );

    let r = c.post(CRDS, widget_crd()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let got = c.get(&format!("{CRDS}/widgets.example.com")).await.body;
    assert_eq!(got["spec"]["names"]["singular"], "widget");
    assert_eq!(got["spec"]["names"]["listKind"], "WidgetList");
    let conds = got["status"]["conditions"].as_array().unwrap();
    for t in ["NamesAccepted", "Established"] {
        let c = conds.iter().find(|c| c["type"] == t).expect(t);
        assert_eq!(c["status"], "True", "{t}");
    }
    assert_eq!(got["status"]["acceptedNames"]["kind"], "Widget");
    assert_eq!(got["status"]["storedVersions"], json!(["v1"]));

    let disc = c.get("/apis/example.com/v1").await;
    assert_eq!(disc.status, StatusCode::OK);
    let res = &disc.body["resources"];
    assert_eq!(res[0]["name"], "widgets");
    assert_eq!(res[0]["namespaced"], true);
    let subs: Vec<&str> = res
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(subs, vec!["widgets", "widgets/status", "widgets/scale"]);
    let groups = c.get("/apis").await.body;
    assert!(groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["name"] == "example.com"));
    assert_eq!(c.get(WIDGETS).await.status, StatusCode::OK);
    // `kubectl get crd` prints NAME and CREATED AT.
    let (t, _) = c.get_accepting(CRDS, TABLE).await;
    let cols: Vec<&str> = t.body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, vec!["Name", "Created At"]);
    assert_eq!(
        t.body["rows"][0]["cells"],
        json!(["widgets.example.com", got["metadata"]["creationTimestamp"]])
    );
}

#[tokio::test]
async fn invalid_crds_are_refused_with_kube_apiserver_causes() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let mut bad = widget_crd();
    bad["metadata"]["name"] = json!("widget.example.com");
    let r = c.post(CRDS, bad).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.body["reason"], "Invalid");
    assert_eq!(
        r.body["message"],
        r#"CustomResourceDefinition.apiextensions.k8s.io "widget.example.com" is invalid: metadata.name: Invalid value: "widget.example.com": must be spec.names.plural+"."+spec.group"#
    );
    assert_eq!(r.body["details"]["causes"][0]["field"], "metadata.name");

    let mut two = widget_crd();
    let mut v2 = two["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    two["spec"]["versions"].as_array_mut().unwrap().push(v2);
    let r = c.post(CRDS, two).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .ends_with("must have exactly one version marked as storage version"));

    let mut nonstructural = widget_crd();
    nonstructural["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("type");
    let r = c.post(CRDS, nonstructural).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    // A single version's schema is the CRD's, named as apiextensions names it.
    assert_eq!(
        r.body["details"]["causes"][0]["field"],
        "spec.validation.openAPIV3Schema.properties[spec].type"
    );
    assert_eq!(
        r.body["details"]["causes"][0]["message"],
        "Required value: must not be empty for specified object fields"
    );
    // Nothing was stored or served.
    assert_eq!(c.get(CRDS).await.body["items"], json!([]));
    assert_eq!(
        c.get("/apis/example.com/v1").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn writes_are_validated_pruned_and_defaulted_by_the_schema() {
    let (_sim, c) = server_with_widgets().await;
    let r = c
        .post(WIDGETS, widget("w1", json!({"size": "string"})))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        r.body["message"],
        r#"Widget.example.com "w1" is invalid: spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#
    );
    assert_eq!(
        r.body["details"]["causes"][0],
        json!({"reason": "FieldValueTypeInvalid", "field": "spec.size",
            "message": "Invalid value: \"string\": spec.size in body must be of type integer: \"string\""})
    );
    let r = c
        .post(WIDGETS, widget("w1", json!({"size": 0, "color": "green"})))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        r.body["message"],
        r#"Widget.example.com "w1" is invalid: [spec.color: Unsupported value: "green": supported values: "red", "blue", spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1]"#
    );
    let r = c.post(WIDGETS, widget("w1", json!({}))).await;
    assert_eq!(
        r.body["details"]["causes"][0],
        json!({"reason": "FieldValueRequired", "field": "spec.size", "message": "Required value"})
    );

    let r = c
        .post(
            WIDGETS,
            widget("w1", json!({"size": 3, "unknown": true})).tap(|w| w["extra"] = json!(1)),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(
        r.body["spec"],
        json!({"size": 3, "color": "red", "replicas": 1})
    );
    assert!(r.body.get("extra").is_none(), "{}", r.body);
    assert_eq!(r.body["kind"], "Widget");

    // An update is checked too, and a patch the same way.
    let mut w = r.body.clone();
    w["spec"]["size"] = json!(-1);
    let r = c
        .send(
            Method::PUT,
            &format!("{WIDGETS}/w1"),
            Some(("application/json", w)),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    let r = c
        .send(
            Method::PATCH,
            &format!("{WIDGETS}/w1"),
            Some((
                "application/merge-patch+json",
                json!({"spec": {"color": null, "size": 5}}),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    // A removed defaulted field comes back with its default.
    assert_eq!(
        r.body["spec"],
        json!({"size": 5, "color": "red", "replicas": 1})
    );
}

trait Tap {
    fn tap(self, f: impl FnOnce(&mut Self)) -> Self;
}
impl Tap for Value {
    fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }
}

#[tokio::test]
async fn status_and_scale_subresources_follow_the_crd() {
    let (_sim, c) = server_with_widgets().await;
    let mut w = widget("w1", json!({"size": 3}));
    w["status"] = json!({"phase": "Ignored"});
    let r = c.post(WIDGETS, w).await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert!(
        r.body.get("status").is_none(),
        "status is not set on create"
    );
    let r = c
        .send(
            Method::PATCH,
            &format!("{WIDGETS}/w1/status"),
            Some((
                "application/merge-patch+json",
                json!({"status": {"phase": "Ready", "replicas": 1, "selector": "app=w"}, "spec": {"size": 9}}),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["status"]["phase"], "Ready");
    assert_eq!(
        r.body["spec"]["size"], 3,
        "a status write leaves spec alone"
    );
    // The schema checks status writes as well.
    let r = c
        .send(
            Method::PATCH,
            &format!("{WIDGETS}/w1/status"),
            Some((
                "application/merge-patch+json",
                json!({"status": {"replicas": "x"}}),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.body["details"]["causes"][0]["field"], "status.replicas");

    let scale = c.get(&format!("{WIDGETS}/w1/scale")).await.body;
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 1);
    assert_eq!(scale["status"], json!({"replicas": 1, "selector": "app=w"}));
    let r = c
        .send(
            Method::PATCH,
            &format!("{WIDGETS}/w1/scale"),
            Some((
                "application/merge-patch+json",
                json!({"spec": {"replicas": 4}}),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        c.get(&format!("{WIDGETS}/w1")).await.body["spec"]["replicas"],
        4
    );
}

#[tokio::test]
async fn tables_carry_the_printer_columns_for_lists_gets_and_watches() {
    let (_sim, c) = server_with_widgets().await;
    let mut watch = c
        .watch_accepting(&format!("{WIDGETS}?watch=1"), TABLE)
        .await;
    assert_eq!(watch.status, StatusCode::OK);
    for (n, size) in [("a", 1), ("b", 2)] {
        c.post(WIDGETS, widget(n, json!({"size": size}))).await;
    }
    let (t, _) = c.get_accepting(WIDGETS, TABLE).await;
    assert_eq!(t.status, StatusCode::OK);
    assert_eq!(t.body["kind"], "Table");
    assert_eq!(t.body["apiVersion"], "meta.k8s.io/v1");
    let cols: Vec<&str> = t.body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, vec!["Name", "Size", "Color", "Phase", "Age"]);
    let rows = t.body["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let cells = rows[1]["cells"].as_array().unwrap();
    assert_eq!(
        cells[..4],
        [json!("b"), json!(2), json!("red"), Value::Null]
    );
    assert!(cells[4].as_str().unwrap().ends_with('s'), "{}", cells[4]);
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(rows[0]["object"]["metadata"]["name"], "a");
    assert!(t.body["metadata"]["resourceVersion"].is_string());

    let (one, _) = c
        .get_accepting(&format!("{WIDGETS}/a?includeObject=Object"), TABLE)
        .await;
    assert_eq!(one.body["rows"][0]["object"]["spec"]["size"], 1);
    let (none, _) = c
        .get_accepting(&format!("{WIDGETS}/a?includeObject=None"), TABLE)
        .await;
    assert!(none.body["rows"][0]["object"].is_null());

    // Watch events are Tables, only the first with column definitions.
    let first = watch.expect("ADDED").await;
    assert_eq!(first["kind"], "Table");
    assert_eq!(first["columnDefinitions"].as_array().unwrap().len(), 5);
    assert_eq!(first["rows"][0]["cells"][0], "a");
    let second = watch.expect("ADDED").await;
    assert!(second["columnDefinitions"].is_null());
    assert_eq!(second["rows"][0]["cells"][0], "b");

    // Without a Table in the header, objects as before.
    let plain = c.get(WIDGETS).await;
    assert_eq!(plain.body["kind"], "WidgetList");
}

#[tokio::test]
async fn built_in_kinds_print_name_and_age() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    c.post(
        "/api/v1/namespaces/default/pods",
        common::pod("p1", json!({})),
    )
    .await;
    let (t, _) = c
        .get_accepting("/api/v1/namespaces/default/pods", TABLE)
        .await;
    let cols: Vec<&str> = t.body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols[..5], ["Name", "Ready", "Status", "Restarts", "Age"]);
    assert_eq!(
        t.body["rows"][0]["cells"].as_array().unwrap()[..4],
        [json!("p1"), json!("0/1"), json!("Pending"), json!("0")]
    );
    let wide: Vec<(&str, i64)> = t.body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["priority"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        wide[5..],
        [
            ("IP", 1),
            ("Node", 1),
            ("Nominated Node", 1),
            ("Readiness Gates", 1)
        ]
    );
    // Events print as kubectl shows them: no NAME unless wide.
    let ev = json!({"metadata": {"name": "p1.1"}, "type": "Warning", "reason": "BackOff",
        "message": "restarting", "involvedObject": {"kind": "Pod", "name": "p1"}, "count": 3,
        "lastTimestamp": "2020-01-01T00:00:00Z"});
    assert_eq!(
        c.post("/api/v1/namespaces/default/events", ev).await.status,
        StatusCode::CREATED
    );
    let (t, _) = c
        .get_accepting("/api/v1/namespaces/default/events", TABLE)
        .await;
    let cells = t.body["rows"][0]["cells"].as_array().unwrap();
    assert_eq!(
        cells[1..4],
        [json!("Warning"), json!("BackOff"), json!("pod/p1")]
    );
    assert_eq!(
        (&cells[6], &cells[8], &cells[9]),
        (&json!("restarting"), &json!("3"), &json!("p1.1"))
    );
    assert!(
        cells[0].as_str().unwrap().ends_with('y') || cells[0].as_str().unwrap().ends_with('d'),
        "{}",
        cells[0]
    );
    assert_eq!(t.body["columnDefinitions"][0]["name"], "Last Seen");
    let (ns, _) = c.get_accepting("/api/v1/namespaces/default", TABLE).await;
    assert_eq!(ns.body["rows"][0]["cells"][0], "default");
    assert_eq!(ns.body["rows"][0]["cells"][1], "Active");
    // An unknown includeObject is a 400.
    let (bad, _) = c
        .get_accepting("/api/v1/namespaces?includeObject=All", TABLE)
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn deleting_the_crd_removes_its_objects_ends_watches_and_stops_serving() {
    let (sim, c) = server_with_widgets().await;
    for n in ["a", "b"] {
        c.post(WIDGETS, widget(n, json!({"size": 1}))).await;
    }
    let mut watch = c.watch(&format!("{WIDGETS}?watch=1")).await;
    watch.expect("ADDED").await;
    watch.expect("ADDED").await;
    let r = c
        .send(Method::DELETE, &format!("{CRDS}/widgets.example.com"), None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let rest = watch.rest().await;
    let deleted: Vec<&str> = rest
        .iter()
        .filter(|e| e["type"] == "DELETED")
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(deleted, vec!["a", "b"], "then the stream ends");
    assert_eq!(c.get(WIDGETS).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        c.get("/apis/example.com/v1").await.status,
        StatusCode::NOT_FOUND
    );
    assert!(!c.get("/apis").await.body["groups"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["name"] == "example.com"));
    // Created again, it starts empty.
    assert_eq!(c.post(CRDS, widget_crd()).await.status, StatusCode::CREATED);
    assert_eq!(c.get(WIDGETS).await.body["items"], json!([]));
    assert!(sim.list("widgets.example.com", None).unwrap().is_empty());
}

#[tokio::test]
async fn cluster_scoped_crds_and_updates_take_effect() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let mut crd = widget_crd();
    crd["spec"]["scope"] = json!("Cluster");
    assert_eq!(c.post(CRDS, crd).await.status, StatusCode::CREATED);
    let r = c
        .post(
            "/apis/example.com/v1/widgets",
            widget("cw", json!({"size": 1})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert!(r.body["metadata"].get("namespace").is_none());
    assert_eq!(c.get(WIDGETS).await.status, StatusCode::NOT_FOUND);

    // A new served version and a changed schema, through the test API.
    let mut crd = sim
        .get(
            "customresourcedefinitions.apiextensions.k8s.io",
            None,
            "widgets.example.com",
        )
        .unwrap();
    let mut v2 = crd["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    v2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]["maximum"] =
        json!(2);
    crd["spec"]["versions"].as_array_mut().unwrap().push(v2);
    sim.update("customresourcedefinitions.apiextensions.k8s.io", None, crd)
        .unwrap();
    let disc = c.get("/apis/example.com").await.body;
    assert_eq!(disc["versions"].as_array().unwrap().len(), 2);
    // Both versions see the same objects.
    let v2list = c.get("/apis/example.com/v2/widgets").await;
    assert_eq!(v2list.body["items"][0]["metadata"]["name"], "cw");
    let r = c
        .post(
            "/apis/example.com/v2/widgets",
            json!({"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "big"}, "spec": {"size": 3}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.body);
    assert_eq!(
        r.body["details"]["causes"][0]["message"],
        "Invalid value: 3: spec.size in body should be less than or equal to 2"
    );
}

#[tokio::test]
async fn a_changed_schema_defaults_stored_objects_and_new_columns_print() {
    let (sim, c) = server_with_widgets().await;
    let before = c.post(WIDGETS, widget("w1", json!({"size": 2}))).await.body;
    let crd_path = format!("{CRDS}/widgets.example.com");
    let mut crd = c.get(&crd_path).await.body;
    let v1 = &mut crd["spec"]["versions"][0];
    v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["shape"] =
        json!({"type": "string", "default": "round"});
    v1["additionalPrinterColumns"] =
        json!([{"name": "Shape", "type": "string", "jsonPath": ".spec.shape"}]);
    let r = c
        .send(Method::PUT, &crd_path, Some(("application/json", crd)))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let rev = sim.revision();

    // Read back with the new default, at the same resourceVersion, with no write.
    let after = c.get(&format!("{WIDGETS}/w1")).await.body;
    assert_eq!(after["spec"]["shape"], "round");
    assert_eq!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    assert_eq!(sim.revision(), rev);
    let (t, _) = c.get_accepting(WIDGETS, TABLE).await;
    let cols: Vec<&str> = t.body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, vec!["Name", "Shape"]);
    assert_eq!(t.body["rows"][0]["cells"], json!(["w1", "round"]));
}

#[tokio::test]
async fn a_crd_whose_plural_is_taken_is_stored_but_not_established() {
    let sim = SimServer::builder()
        .resource(sim_apiserver::ResourceDef::new(
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
    let r = c.post(CRDS, widget_crd()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let got = c.get(&format!("{CRDS}/widgets.example.com")).await.body;
    let conds = got["status"]["conditions"].as_array().unwrap();
    let cond = |t: &str| conds.iter().find(|c| c["type"] == t).unwrap().clone();
    assert_eq!(cond("NamesAccepted")["status"], "False");
    assert_eq!(cond("NamesAccepted")["reason"], "PluralConflict");
    assert_eq!(cond("Established")["status"], "False");
    // The resource registered in Rust is untouched: no schema, so nothing is validated.
    let r = c.post(WIDGETS, widget("w", json!({"size": "any"}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    // Deleting the refused CRD leaves it alone too.
    c.send(Method::DELETE, &format!("{CRDS}/widgets.example.com"), None)
        .await;
    assert_eq!(
        c.get(WIDGETS).await.body["items"].as_array().unwrap().len(),
        1
    );
}

#[tokio::test]
async fn unknown_fields_warn_by_default_and_fail_a_strict_write() {
    let (_sim, c) = server_with_widgets().await;
    let typo = || widget("w1", json!({"size": 1, "colour": "red"}));
    let r = c
        .post(&format!("{WIDGETS}?fieldValidation=Strict"), typo())
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(
        r.body["message"],
        r#"Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.colour""#
    );
    assert_eq!(c.get(WIDGETS).await.body["items"], json!([]));

    let r = c.post(WIDGETS, typo()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let warnings: Vec<&str> = r
        .headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(warnings, vec![r#"299 - "unknown field \"spec.colour\"""#]);
    assert!(r.body["spec"].get("colour").is_none());

    let r = c
        .send(
            Method::PATCH,
            &format!("{WIDGETS}/w1?fieldValidation=Ignore"),
            Some((
                "application/merge-patch+json",
                json!({"spec": {"colour": "blue"}}),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.headers.get("warning").is_none());
}

#[tokio::test]
async fn every_served_version_reads_the_same_objects_in_its_own_version() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let mut crd = widget_crd();
    let mut v2 = crd["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    crd["spec"]["versions"].as_array_mut().unwrap().push(v2);
    assert_eq!(c.post(CRDS, crd).await.status, StatusCode::CREATED);
    let v2_path = "/apis/example.com/v2/namespaces/default/widgets";
    let mut watch = c.watch(&format!("{v2_path}?watch=1")).await;
    c.post(WIDGETS, widget("from-v1", json!({"size": 1}))).await;
    let r = c
        .post(
            v2_path,
            json!({"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "from-v2"}, "spec": {"size": 2}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["apiVersion"], "example.com/v2");

    // Lists, gets and watches convert (strategy None: only apiVersion changes).
    for (path, version) in [(WIDGETS, "example.com/v1"), (v2_path, "example.com/v2")] {
        let list = c.get(path).await.body;
        let versions: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["apiVersion"].as_str().unwrap())
            .collect();
        assert_eq!(versions, vec![version, version], "{path}");
        for name in ["from-v1", "from-v2"] {
            let one = c.get(&format!("{path}/{name}")).await.body;
            assert_eq!(one["apiVersion"], version, "{path}/{name}");
        }
    }
    assert_eq!(watch.expect("ADDED").await["apiVersion"], "example.com/v2");
    assert_eq!(watch.expect("ADDED").await["apiVersion"], "example.com/v2");
}

#[tokio::test]
async fn a_crd_applied_server_side_is_served_too() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let r = c
        .send(
            Method::PATCH,
            &format!("{CRDS}/widgets.example.com?fieldManager=kubectl"),
            Some(("application/apply-patch+yaml", widget_crd())),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = c.post(WIDGETS, widget("w1", json!({"size": 1}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["spec"]["color"], "red");
}
