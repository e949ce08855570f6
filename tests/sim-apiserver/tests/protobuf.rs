//! Kubernetes' protobuf encoding over HTTP: gets, lists, watches and errors answered in protobuf
//! where the `Accept` header prefers it and the kind is built in, protobuf bodies for create and
//! update, JSON (406, 415) for custom resources, and real kubectl's protobuf `create`s.

#[path = "common/kubectl.rs"]
mod kubectl_common;

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use sim_apiserver::protobuf::{self, FrameDecoder, RawWatchEvent};
use sim_apiserver::{ResourceDef, SimServer};

const PB: &str = "application/vnd.kubernetes.protobuf";
const PB_OR_JSON: &str = "application/vnd.kubernetes.protobuf, application/json";

struct Answer {
    status: StatusCode,
    content_type: String,
    body: Bytes,
}

async fn request(
    sim: &SimServer,
    method: Method,
    path: &str,
    accept: &str,
    body: Option<(&str, Vec<u8>)>,
) -> Answer {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let b = Request::builder()
        .method(method)
        .uri(format!("{}{path}", sim.url()))
        .header("accept", accept);
    let req = match body {
        Some((ct, bytes)) => b
            .header("content-type", ct)
            .body(Full::new(Bytes::from(bytes))),
        None => b.body(Full::new(Bytes::new())),
    }
    .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(30), client.request(req))
        .await
        .expect("answered in time")
        .expect("request sent");
    let status = r.status();
    let content_type = r.headers()["content-type"].to_str().unwrap().to_string();
    let body = r.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        content_type,
        body,
    }
}

fn decoded(a: &Answer) -> Value {
    assert_eq!(a.content_type, PB, "{:?}", String::from_utf8_lossy(&a.body));
    protobuf::decode_object(&a.body).expect("a protobuf object")
}

fn json_of(a: &Answer) -> Value {
    assert!(
        a.content_type.starts_with("application/json"),
        "{}",
        a.content_type
    );
    serde_json::from_slice(&a.body).unwrap()
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "x"}},
           "data": {"a": "1"}})
}

#[tokio::test]
async fn gets_and_lists_of_built_in_kinds_are_protobuf_when_asked_first() {
    let sim = SimServer::start().await.unwrap();
    for n in ["a", "b"] {
        sim.create("configmaps", Some("default"), config_map(n))
            .unwrap();
    }
    let cm = "/api/v1/namespaces/default/configmaps";
    let get = request(&sim, Method::GET, &format!("{cm}/a"), PB_OR_JSON, None).await;
    assert_eq!(get.status, StatusCode::OK);
    assert!(get.body.starts_with(b"k8s\0"));
    let as_json = request(
        &sim,
        Method::GET,
        &format!("{cm}/a"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(decoded(&get), json_of(&as_json));

    let list = request(&sim, Method::GET, cm, PB, None).await;
    let list_json = json_of(&request(&sim, Method::GET, cm, "application/json", None).await);
    let list = decoded(&list);
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["metadata"], list_json["metadata"]);
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert!(list.to_string().len() > 100);

    // JSON listed first wins, as kube-apiserver tries the ranges in order.
    let json_first = request(
        &sim,
        Method::GET,
        cm,
        "application/json, application/vnd.kubernetes.protobuf",
        None,
    )
    .await;
    assert!(json_first.content_type.starts_with("application/json"));
}

#[tokio::test]
async fn errors_are_protobuf_statuses() {
    let sim = SimServer::start().await.unwrap();
    let a = request(
        &sim,
        Method::GET,
        "/api/v1/namespaces/default/pods/ghost",
        PB_OR_JSON,
        None,
    )
    .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    let status = decoded(&a);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["code"], 404);
    assert_eq!(status["message"], "pods \"ghost\" not found");
}

#[tokio::test]
async fn a_protobuf_watch_is_length_prefixed_watch_events_of_enveloped_objects() {
    let sim = SimServer::start().await.unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let req = Request::get(format!(
        "{}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0",
        sim.url()
    ))
    .header("accept", PB_OR_JSON)
    .body(Full::new(Bytes::new()))
    .unwrap();
    let r = client.request(req).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.headers()["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    sim.create("configmaps", Some("default"), config_map("w1"))
        .unwrap();
    let mut body = r.into_body();
    let mut frames = FrameDecoder::new(protobuf::DEFAULT_MAX_FRAME);
    let event = loop {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("an event in time")
            .expect("the stream goes on")
            .unwrap();
        if let Ok(data) = chunk.into_data() {
            frames.push(&data);
        }
        if let Some(f) = frames.next_frame().unwrap() {
            break RawWatchEvent::decode(&f).unwrap();
        }
    };
    assert_eq!(event.event_type, "ADDED");
    let object = protobuf::decode_object(&event.object).unwrap();
    assert_eq!(object["kind"], "ConfigMap");
    assert_eq!(object["metadata"]["name"], "w1");
    assert_eq!(object["data"]["a"], "1");
}

/// The first `n` events of a protobuf watch of `path`, objects decoded.
async fn watch_events(sim: &SimServer, path: &str, n: usize) -> Vec<(String, Value)> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let req = Request::get(format!("{}{path}", sim.url()))
        .header("accept", PB_OR_JSON)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let r = client.request(req).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let mut body = r.into_body();
    let mut frames = FrameDecoder::new(protobuf::DEFAULT_MAX_FRAME);
    let mut out = Vec::new();
    while out.len() < n {
        if let Some(f) = frames.next_frame().unwrap() {
            let e = RawWatchEvent::decode(&f).unwrap();
            out.push((e.event_type, protobuf::decode_object(&e.object).unwrap()));
            continue;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("an event in time")
            .expect("the stream goes on")
            .unwrap();
        if let Ok(data) = chunk.into_data() {
            frames.push(&data);
        }
    }
    out
}

#[tokio::test]
async fn watch_bookmarks_and_error_events_are_protobuf_frames_too() {
    let sim = SimServer::start().await.unwrap();
    for n in ["a", "b"] {
        sim.create("configmaps", Some("default"), config_map(n))
            .unwrap();
    }
    let cm = "/api/v1/namespaces/default/configmaps";
    let events = watch_events(
        &sim,
        &format!("{cm}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"),
        3,
    )
    .await;
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["ADDED", "ADDED", "BOOKMARK"]);
    let bookmark = &events[2].1;
    assert_eq!(bookmark["kind"], "ConfigMap");
    assert_eq!(
        bookmark["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert!(bookmark["metadata"]["resourceVersion"].as_str().is_some());

    let rv: u64 = bookmark["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    sim.compact_to(rv);
    let gone = watch_events(&sim, &format!("{cm}?watch=1&resourceVersion=1"), 1).await;
    assert_eq!(gone[0].0, "ERROR");
    assert_eq!(gone[0].1["kind"], "Status");
    assert_eq!(gone[0].1["code"], 410);
    assert_eq!(gone[0].1["reason"], "Expired");
}

#[tokio::test]
async fn protobuf_bodies_create_and_update_built_in_kinds_but_never_patch() {
    let sim = SimServer::start().await.unwrap();
    let cm = "/api/v1/namespaces/default/configmaps";
    let body = protobuf::encode_object(&config_map("pb")).unwrap();
    let created = request(&sim, Method::POST, cm, "application/json", Some((PB, body))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let created = json_of(&created);
    assert_eq!(created["data"]["a"], "1");
    assert_eq!(
        sim.get("configmaps", Some("default"), "pb").unwrap()["metadata"]["labels"]["app"],
        "x"
    );

    let mut changed = created.clone();
    changed["data"]["a"] = json!("2");
    let body = protobuf::encode_object(&changed).unwrap();
    let updated = request(&sim, Method::PUT, &format!("{cm}/pb"), PB, Some((PB, body))).await;
    assert_eq!(updated.status, StatusCode::OK);
    assert_eq!(decoded(&updated)["data"]["a"], "2");

    let patch = request(
        &sim,
        Method::PATCH,
        &format!("{cm}/pb"),
        "application/json",
        Some((PB, b"k8s\0".to_vec())),
    )
    .await;
    assert_eq!(patch.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(json_of(&patch)["reason"], "UnsupportedMediaType");

    let garbage = request(
        &sim,
        Method::POST,
        cm,
        "application/json",
        Some((PB, b"k8s\0\x0a\xff".to_vec())),
    )
    .await;
    assert_eq!(garbage.status, StatusCode::BAD_REQUEST);
    let msg = json_of(&garbage)["message"].as_str().unwrap().to_string();
    assert!(
        msg.starts_with("the object provided is unrecognized"),
        "{msg}"
    );
    let not_magic = request(
        &sim,
        Method::POST,
        cm,
        "application/json",
        Some((PB, b"{}".to_vec())),
    )
    .await;
    assert_eq!(not_magic.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn custom_resources_stay_json() {
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
    sim.create(
        "widgets.example.com",
        Some("default"),
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
    )
    .unwrap();
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let fallback = request(&sim, Method::GET, &format!("{path}/w"), PB_OR_JSON, None).await;
    assert_eq!(fallback.status, StatusCode::OK);
    assert_eq!(json_of(&fallback)["metadata"]["name"], "w");
    let only = request(&sim, Method::GET, path, PB, None).await;
    assert_eq!(only.status, StatusCode::NOT_ACCEPTABLE);
    let body = protobuf::Unknown::new("example.com/v1", "Widget", Bytes::new()).encode();
    let create = request(
        &sim,
        Method::POST,
        path,
        "application/json",
        Some((PB, body)),
    )
    .await;
    assert_eq!(create.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let status = json_of(&create);
    assert_eq!(status["reason"], "UnsupportedMediaType");
    assert_eq!(
        status["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
    );
}

/// The kubectls to drive: CI's (1.32) and 1.33 where installed, or `SIM_KUBECTL`.
fn kubectls() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = kubectl_common::find_kubectl().into_iter().collect();
    if std::env::var_os("SIM_KUBECTL").is_none() {
        let k133 = PathBuf::from("/usr/lib/google-cloud-sdk/bin/kubectl.1.33");
        if k133.exists() {
            out.push(k133);
        }
    }
    out
}

#[tokio::test]
async fn kubectl_typed_creates_send_protobuf_and_work() {
    let bins = kubectls();
    if bins.is_empty() {
        eprintln!(
            "SKIPPED: kubectl not found (run `cargo xtask ci`, which builds one, or set SIM_KUBECTL)"
        );
        return;
    }
    for (i, bin) in bins.into_iter().enumerate() {
        let sim = SimServer::start().await.unwrap();
        let k = kubectl_common::Kube::new(bin.clone(), &sim, &format!("pb{i}"));
        let run = |args: &'static str| {
            let mut c = k.cmd(&args.split(' ').collect::<Vec<_>>());
            async move {
                let out = tokio::time::timeout(Duration::from_secs(60), c.output())
                    .await
                    .expect("kubectl finishes")
                    .expect("kubectl runs");
                let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
                let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
                assert!(out.status.success(), "{args}: {stdout}{stderr}");
                stdout
            }
        };
        let who = bin.display();
        assert!(
            run("create configmap gen --from-literal=a=1")
                .await
                .contains("configmap/gen created"),
            "{who}"
        );
        assert_eq!(
            sim.get("configmaps", Some("default"), "gen").unwrap()["data"]["a"],
            "1"
        );
        assert!(
            run("create configmap dry --from-literal=a=1 --dry-run=server")
                .await
                .contains("configmap/dry created (server dry run)"),
            "{who}"
        );
        assert!(sim.get("configmaps", Some("default"), "dry").is_err());
        assert!(run("create deployment gen --image=nginx --replicas=2")
            .await
            .contains("deployment.apps/gen created"));
        let d = sim.get("deployments.apps", Some("default"), "gen").unwrap();
        assert_eq!(d["spec"]["replicas"], 2);
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx"
        );
        assert!(run("create namespace gen")
            .await
            .contains("namespace/gen created"));
        assert!(sim.get("namespaces", None, "gen").is_ok());
        assert_eq!(run("auth can-i create pods").await.trim(), "yes");
    }
}

#[tokio::test]
async fn the_scale_subresource_is_protobuf_both_ways() {
    let sim = SimServer::start().await.unwrap();
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    sim.create("deployments.apps", Some("default"), d).unwrap();
    let path = "/apis/apps/v1/namespaces/default/deployments/d/scale";
    let scale = decoded(&request(&sim, Method::GET, path, PB, None).await);
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 1);
    let mut wanted = scale.clone();
    wanted["spec"]["replicas"] = json!(4);
    let body = protobuf::encode_object(&wanted).unwrap();
    let put = request(&sim, Method::PUT, path, PB, Some((PB, body))).await;
    assert_eq!(put.status, StatusCode::OK);
    assert_eq!(decoded(&put)["spec"]["replicas"], 4);
    assert_eq!(
        sim.get("deployments.apps", Some("default"), "d").unwrap()["spec"]["replicas"],
        4
    );
}

#[tokio::test]
async fn the_metadata_representation_is_protobuf_too_even_for_custom_resources() {
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
    sim.create("configmaps", Some("default"), config_map("m"))
        .unwrap();
    sim.create("widgets.example.com", Some("default"), json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "b"}}, "spec": {"size": 3}}))
        .unwrap();
    let accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    for (path, name) in [
        ("/api/v1/namespaces/default/configmaps", "m"),
        ("/apis/example.com/v1/namespaces/default/widgets", "w"),
    ] {
        let list = decoded(&request(&sim, Method::GET, path, accept, None).await);
        assert_eq!(list["kind"], "PartialObjectMetadataList");
        assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
        let item = &list["items"][0];
        assert_eq!(item["metadata"]["name"], name);
        assert!(
            item.get("data").is_none() && item.get("spec").is_none(),
            "{item}"
        );
    }
    // A table in protobuf is passed over for the next range.
    let table_first =
        "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json";
    let a = request(
        &sim,
        Method::GET,
        "/api/v1/namespaces/default/configmaps",
        table_first,
        None,
    )
    .await;
    assert_eq!(json_of(&a)["kind"], "ConfigMapList");
}

#[tokio::test]
async fn a_server_without_protobuf_answers_json_406_and_415() {
    let sim = SimServer::builder().protobuf(false).start().await.unwrap();
    sim.create("configmaps", Some("default"), config_map("a"))
        .unwrap();
    let cm = "/api/v1/namespaces/default/configmaps";
    let fallback = request(&sim, Method::GET, &format!("{cm}/a"), PB_OR_JSON, None).await;
    assert_eq!(json_of(&fallback)["metadata"]["name"], "a");
    let only = request(&sim, Method::GET, cm, PB, None).await;
    assert_eq!(only.status, StatusCode::NOT_ACCEPTABLE);
    let body = protobuf::encode_object(&config_map("b")).unwrap();
    let create = request(&sim, Method::POST, cm, "application/json", Some((PB, body))).await;
    assert_eq!(create.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn a_protobuf_delete_options_body_is_read() {
    // client-go's typed clients configured for protobuf send DeleteOptions in protobuf too.
    let sim = SimServer::start().await.unwrap();
    sim.create("configmaps", Some("default"), config_map("d"))
        .unwrap();
    let path = "/api/v1/namespaces/default/configmaps/d";
    let opts = |uid: &str| {
        protobuf::encode_object(&json!({"apiVersion": "v1", "kind": "DeleteOptions",
            "preconditions": {"uid": uid}}))
        .unwrap()
    };
    let refused = request(
        &sim,
        Method::DELETE,
        path,
        PB_OR_JSON,
        Some((PB, opts("not-the-uid"))),
    )
    .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(decoded(&refused)["reason"], "Conflict");
    assert!(sim.get("configmaps", Some("default"), "d").is_ok());
    let uid = sim.get("configmaps", Some("default"), "d").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let deleted = request(
        &sim,
        Method::DELETE,
        path,
        PB_OR_JSON,
        Some((PB, opts(&uid))),
    )
    .await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert!(sim.get("configmaps", Some("default"), "d").is_err());
}
