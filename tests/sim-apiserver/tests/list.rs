//! List rules: resourceVersion semantics, pagination and continue tokens, selectors, 400/410/504.

mod common;

use common::{name, pod, Client};
use http::StatusCode;
use serde_json::{json, Value};
use sim_apiserver::SimServer;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| name(o).to_string())
        .collect()
}

fn list_rv(list: &Value) -> u64 {
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

async fn sim_with(n: usize) -> SimServer {
    let sim = SimServer::builder()
        .watch_cache(false)
        .start()
        .await
        .unwrap();
    for i in 0..n {
        sim.create(
            "pods",
            None,
            pod(&format!("p{i}"), json!({"i": i.to_string()})),
        )
        .unwrap();
    }
    sim
}

#[tokio::test]
async fn list_without_resource_version_returns_the_latest_revision_and_list_kind() {
    let sim = sim_with(3).await;
    let l = Client::new(&sim).get(PODS).await;
    assert_eq!(l.status, StatusCode::OK);
    assert_eq!(l.body["kind"], "PodList");
    assert_eq!(l.body["apiVersion"], "v1");
    assert_eq!(list_rv(&l.body), sim.revision());
    assert_eq!(names(&l.body), ["p0", "p1", "p2"]);
    assert!(l.body["metadata"].get("continue").is_none());
}

#[tokio::test]
async fn items_of_builtin_lists_have_no_kind_or_api_version_but_custom_ones_do() {
    let sim = sim_with(1).await;
    sim.register(sim_apiserver::ResourceDef::new(
        "example.com",
        "v1",
        "Widget",
        "widgets",
        true,
    ));
    sim.create(
        "widgets.example.com",
        None,
        json!({"metadata": {"name": "w"}}),
    )
    .unwrap();
    let c = Client::new(&sim);
    let l = c.get(PODS).await.body;
    let item = &l["items"][0];
    assert!(
        item.get("kind").is_none() && item.get("apiVersion").is_none(),
        "{item}"
    );
    assert_eq!(item["metadata"]["name"], "p0");
    assert_eq!(item["spec"]["containers"][0]["name"], "c");
    let w = c
        .get("/apis/example.com/v1/namespaces/default/widgets")
        .await
        .body;
    assert_eq!(w["kind"], "WidgetList");
    assert_eq!(w["items"][0]["kind"], "Widget");
    assert_eq!(w["items"][0]["apiVersion"], "example.com/v1");
}

#[tokio::test]
async fn list_with_exact_resource_version_returns_the_state_at_that_revision() {
    let sim = sim_with(2).await;
    let at = sim.revision();
    sim.create("pods", None, pod("late", json!({}))).unwrap();
    sim.delete("pods", None, "p0").unwrap();
    let c = Client::new(&sim);
    let l = c
        .get(&format!(
            "{PODS}?resourceVersion={at}&resourceVersionMatch=Exact"
        ))
        .await
        .body;
    assert_eq!(list_rv(&l), at);
    assert_eq!(names(&l), ["p0", "p1"]);
    let n = c
        .get(&format!(
            "{PODS}?resourceVersion={at}&resourceVersionMatch=NotOlderThan"
        ))
        .await
        .body;
    assert_eq!(list_rv(&n), sim.revision());
    assert_eq!(names(&n), ["late", "p1"]);
}

#[tokio::test]
async fn list_at_a_compacted_resource_version_is_410_expired() {
    let sim = sim_with(2).await;
    let old = sim.revision();
    sim.create("pods", None, pod("x", json!({}))).unwrap();
    sim.faults().compact();
    let r = Client::new(&sim)
        .get(&format!(
            "{PODS}?resourceVersion={old}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(r.status, StatusCode::GONE);
    assert_eq!(r.body["reason"], "Expired");
    assert_eq!(r.body["code"], 410);
    assert_eq!(
        r.body["message"],
        "The resourceVersion for the provided list is too old."
    );
}

#[tokio::test]
async fn legacy_limit_with_a_resource_version_is_an_exact_read() {
    let sim = sim_with(2).await;
    let old = sim.revision();
    sim.create("pods", None, pod("x", json!({}))).unwrap();
    sim.faults().compact();
    let r = Client::new(&sim)
        .get(&format!("{PODS}?resourceVersion={old}&limit=500"))
        .await;
    assert_eq!(r.status, StatusCode::GONE);
}

#[tokio::test]
async fn list_at_a_future_resource_version_is_the_too_large_504_with_its_cause() {
    let sim = sim_with(1).await;
    let future = sim.revision() + 100;
    let r = Client::new(&sim)
        .get(&format!(
            "{PODS}?resourceVersion={future}&resourceVersionMatch=NotOlderThan"
        ))
        .await;
    assert_eq!(r.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(r.body["reason"], "Timeout");
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    assert_eq!(
        r.body["details"]["causes"][0]["message"],
        "Too large resource version"
    );
    assert_eq!(r.body["details"]["retryAfterSeconds"], 1);
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .starts_with("Timeout: Too large resource version"));
    assert_eq!(r.headers["retry-after"], "1");
}

#[tokio::test]
async fn pagination_follows_continue_tokens_pinned_to_the_first_page_revision() {
    let sim = sim_with(5).await;
    let c = Client::new(&sim);
    let p1 = c.get(&format!("{PODS}?limit=2")).await.body;
    assert_eq!(names(&p1), ["p0", "p1"]);
    assert_eq!(p1["metadata"]["remainingItemCount"], 3);
    let pinned = list_rv(&p1);
    // Changes after the first page are not visible in later pages.
    sim.create("pods", None, pod("p3a", json!({}))).unwrap();
    sim.delete("pods", None, "p4").unwrap();
    let mut all = names(&p1);
    let mut cont = p1["metadata"]["continue"].as_str().unwrap().to_string();
    loop {
        let p = c.get(&format!("{PODS}?limit=2&continue={cont}")).await.body;
        assert_eq!(list_rv(&p), pinned);
        all.extend(names(&p));
        match p["metadata"]["continue"].as_str() {
            Some(t) => cont = t.to_string(),
            None => break,
        }
    }
    assert_eq!(all, ["p0", "p1", "p2", "p3", "p4"]);
}

#[tokio::test]
async fn continue_token_after_compaction_is_410_with_the_inconsistent_continue_hint() {
    let sim = sim_with(4).await;
    let c = Client::new(&sim);
    let p1 = c.get(&format!("{PODS}?limit=2")).await.body;
    sim.create("pods", None, pod("new", json!({}))).unwrap();
    sim.faults().compact();
    let cont = p1["metadata"]["continue"].as_str().unwrap();
    let r = c.get(&format!("{PODS}?limit=2&continue={cont}")).await;
    assert_eq!(r.status, StatusCode::GONE);
    assert_eq!(r.body["reason"], "Expired");
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .contains("inconsistent list"));
    // The Status carries a token that continues inconsistently at the latest revision.
    let next = r.body["metadata"]["continue"].as_str().unwrap();
    let p = c
        .get(&format!("{PODS}?limit=10&continue={next}"))
        .await
        .body;
    assert_eq!(names(&p), ["p2", "p3"]);
    assert_eq!(list_rv(&p), sim.revision());
}

#[tokio::test]
async fn tampered_continue_token_is_400() {
    let sim = sim_with(3).await;
    let c = Client::new(&sim);
    let r = c.get(&format!("{PODS}?limit=1&continue=not-a-token")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.body["reason"], "BadRequest");
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .contains("continue key is not valid"));
    let p1 = c.get(&format!("{PODS}?limit=1")).await.body;
    let mut t = p1["metadata"]["continue"].as_str().unwrap().to_string();
    t.insert(3, 'x');
    assert_eq!(
        c.get(&format!("{PODS}?limit=1&continue={t}")).await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn continue_with_a_resource_version_is_rejected() {
    let sim = sim_with(3).await;
    let c = Client::new(&sim);
    let p1 = c.get(&format!("{PODS}?limit=1")).await.body;
    let t = p1["metadata"]["continue"].as_str().unwrap();
    let r = c
        .get(&format!("{PODS}?limit=1&continue={t}&resourceVersion=3"))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let m = c
        .get(&format!(
            "{PODS}?limit=1&continue={t}&resourceVersionMatch=NotOlderThan"
        ))
        .await;
    assert_eq!(m.status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn resource_version_zero_ignores_limit_when_a_watch_cache_is_simulated() {
    let sim = SimServer::start().await.unwrap();
    for i in 0..3 {
        sim.create("pods", None, pod(&format!("p{i}"), json!({})))
            .unwrap();
    }
    let c = Client::new(&sim);
    let l = c
        .get(&format!("{PODS}?resourceVersion=0&limit=1"))
        .await
        .body;
    assert_eq!(names(&l).len(), 3);
    assert!(l["metadata"].get("continue").is_none());
    let nocache = sim_with(3).await;
    let l = Client::new(&nocache)
        .get(&format!("{PODS}?resourceVersion=0&limit=1"))
        .await
        .body;
    assert_eq!(names(&l).len(), 1);
    assert!(l["metadata"]["continue"].is_string());
}

#[tokio::test]
async fn malformed_query_parameters_are_400_and_bad_options_are_422() {
    let sim = sim_with(1).await;
    let c = Client::new(&sim);
    for q in [
        "limit=abc",
        "watch=maybe",
        "resourceVersion=abc",
        "labelSelector=a%20in%20(b",
        "fieldSelector=spec.foo%3Dx",
        "timeoutSeconds=x",
    ] {
        let r = c.get(&format!("{PODS}?{q}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{q}: {}", r.body);
        assert_eq!(r.body["kind"], "Status");
    }
    for q in [
        "resourceVersionMatch=Exact",
        "resourceVersion=0&resourceVersionMatch=Exact",
        "resourceVersion=1&resourceVersionMatch=Bogus",
        "sendInitialEvents=true",
    ] {
        let r = c.get(&format!("{PODS}?{q}")).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{q}: {}",
            r.body
        );
        assert_eq!(r.body["reason"], "Invalid");
    }
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists_across_namespaces() {
    let sim = SimServer::start().await.unwrap();
    sim.create("namespaces", None, json!({"metadata": {"name": "other"}}))
        .unwrap();
    sim.create("pods", None, pod("a", json!({"app": "web"})))
        .unwrap();
    sim.create("pods", None, pod("b", json!({"app": "db"})))
        .unwrap();
    sim.create("pods", Some("other"), pod("a", json!({"app": "web"})))
        .unwrap();
    let c = Client::new(&sim);
    let l = c.get("/api/v1/pods?labelSelector=app%3Dweb").await.body;
    assert_eq!(names(&l), ["a", "a"]);
    let l = c
        .get("/api/v1/pods?labelSelector=app%20in%20(web,db)&fieldSelector=metadata.namespace%3Ddefault")
        .await
        .body;
    assert_eq!(names(&l), ["a", "b"]);
    let l = c
        .get("/api/v1/pods?fieldSelector=metadata.name!%3Da")
        .await
        .body;
    assert_eq!(names(&l), ["b"]);
    let l = c.get("/api/v1/namespaces/other/pods").await.body;
    assert_eq!(names(&l), ["a"]);
}

#[tokio::test]
async fn pods_support_kube_apiservers_extra_field_selectors() {
    let sim = SimServer::start().await.unwrap();
    let mut a = pod("a", json!({}));
    a["spec"]["nodeName"] = json!("node-1");
    sim.create("pods", None, a).unwrap();
    sim.create("pods", None, pod("b", json!({}))).unwrap();
    let c = Client::new(&sim);
    let l = c
        .get(&format!("{PODS}?fieldSelector=spec.nodeName%3Dnode-1"))
        .await
        .body;
    assert_eq!(names(&l), ["a"]);
    let l = c
        .get(&format!("{PODS}?fieldSelector=spec.nodeName%3D"))
        .await
        .body;
    assert_eq!(names(&l), ["b"]);
    let r = c
        .get("/api/v1/namespaces/default/configmaps?fieldSelector=spec.nodeName%3Dx")
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // A kind without field conversions of its own words it generically.
    assert_eq!(
        r.body["message"],
        "\"spec.nodeName\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
}
