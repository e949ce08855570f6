//! Typed `k8s_pb` objects through the whole stack on protobuf: written with protobuf
//! bodies through `Api`, listed and watched in protobuf by a factory's informer, transformed,
//! indexed, listed with selectors, handed to handlers; a missing object's `Status` read from
//! protobuf; and writes to a server that refuses protobuf bodies, sent again as JSON. The
//! simulator counts the answers it writes in protobuf, which shows that the informer's came in
//! protobuf (a `k8s_pb` type also reads JSON, through the transcoder).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use shared_informer::reflector::protobuf::PbView;
use shared_informer::reflector::store_index::k8s_pb::api::core::v1::{Container, Pod, PodSpec};
use shared_informer::reflector::store_index::k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use shared_informer::reflector::store_index::{Indexers, Object, Pb, Selector};
use shared_informer::reflector::{
    Api, Client, ClientError, ClusterConfig, CreateOptions, DeleteOptions, Encoding, Resource,
};
use shared_informer::{EventHandlerFns, SharedIndexInformer, SharedInformerFactory};
use sim_apiserver::SimServer;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn pod(name: &str, node: &str, app: &str) -> Pod {
    Pod {
        metadata: Some(ObjectMeta {
            name: Some(name.into()),
            labels: [("app".to_string(), app.to_string())].into(),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            containers: vec![Container {
                name: Some("c".into()),
                image: Some("nginx:1.27".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `pod` with its `app` label set to `app`.
fn with_app(pod: &Pod, app: &str) -> Pod {
    let mut changed = pod.clone();
    let meta = changed.metadata.get_or_insert_with(Default::default);
    meta.labels.insert("app".into(), app.into());
    changed
}

/// Starts the factory, waits for its caches, and expects the handler's adds of `a`, `b`, `c`.
async fn start_and_expect_three_adds(
    factory: &SharedInformerFactory,
    rx: &mut mpsc::UnboundedReceiver<String>,
) -> CancellationToken {
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    assert!(factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .all_synced());
    let mut adds: Vec<String> = Vec::new();
    for _ in 0..3 {
        adds.push(next(rx).await);
    }
    adds.sort();
    assert_eq!(adds, ["add a", "add b", "add c"]);
    cancel
}

/// The `node` index holds `a` and `c` on `n1`, and two pods are `app=web`.
fn assert_node_index_and_app_selector<K: Object + shared_informer::reflector::Decode>(
    informer: &SharedIndexInformer<K>,
) {
    let on_n1 = informer.indexer().by_index("node", "n1").unwrap();
    let mut names: Vec<&str> = on_n1.iter().map(|p| p.name()).collect();
    names.sort();
    assert_eq!(names, ["a", "c"]);
    let web: Selector = "app=web".parse().unwrap();
    assert_eq!(informer.lister().namespaced("default").list(&web).len(), 2);
}

async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("an event within 30 s")
        .expect("the handler lives")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_k8s_pb_pod_informer_indexes_lists_transforms_and_notifies_over_protobuf() {
    let sim = SimServer::builder().start().await.unwrap();
    let config = config_for(&sim);
    let api: Api<Pb<Pod>> = Api::namespaced(Client::new(&config).unwrap(), "default");
    for (name, node, app) in [("a", "n1", "web"), ("b", "n2", "web"), ("c", "n1", "db")] {
        let created = api
            .create_pb(&CreateOptions::default(), &pod(name, node, app))
            .await
            .unwrap();
        assert_eq!(
            (created.name(), created.namespace()),
            (name, Some("default"))
        );
    }
    // The simulator stored what the protobuf bodies said.
    let stored = sim.get("pods", Some("default"), "a").unwrap();
    assert_eq!(stored["spec"]["nodeName"], json!("n1"));

    let factory = SharedInformerFactory::new(config.clone());
    let informer = factory
        .informer::<Pb<Pod>>(Resource::of_pb::<Pod>())
        .unwrap();
    informer
        .set_transform(|p: Arc<Pb<Pod>>| {
            let mut p = (*p).clone();
            if let Some(m) = p.metadata.as_mut() {
                m.managed_fields.clear();
                m.annotations.insert("transformed".into(), "yes".into());
            }
            Ok(Arc::new(p))
        })
        .unwrap();
    informer
        .add_indexers(Indexers::new().with("node", |p: &Pb<Pod>| {
            Ok(p.spec.iter().filter_map(|s| s.node_name.clone()).collect())
        }))
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (t1, t2, t3) = (tx.clone(), tx.clone(), tx);
    informer
        .add_event_handler(
            EventHandlerFns::new()
                .on_add(move |p: &Arc<Pb<Pod>>, _| {
                    let _ = t1.send(format!("add {}", p.name()));
                })
                .on_update(move |_, p: &Arc<Pb<Pod>>| {
                    let _ = t2.send(format!(
                        "update {} {}",
                        p.name(),
                        p.label("app").unwrap_or("")
                    ));
                })
                .on_delete(move |p| {
                    let _ = t3.send(format!(
                        "delete {}",
                        p.key().map(|k| k.to_string()).unwrap_or_default()
                    ));
                }),
        )
        .unwrap();
    let cancel = start_and_expect_three_adds(&factory, &mut rx).await;

    assert_node_index_and_app_selector(&informer);
    let a = informer.lister().namespaced("default").get("a").unwrap();
    assert_eq!(a.annotation("transformed"), Some("yes"));
    assert_eq!(
        a.spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some("nginx:1.27")
    );

    // An update with a protobuf body, carrying the resourceVersion it was read at.
    let mut changed = with_app(&a, "db");
    changed.metadata.as_mut().unwrap().annotations.clear();
    api.replace_pb("a", &CreateOptions::default(), &changed)
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await, "update a db");
    // The same resourceVersion again: a conflict, read from a protobuf Status.
    let err = api
        .replace_pb("a", &CreateOptions::default(), &changed)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err:?}");
    api.delete("b", &DeleteOptions::default()).await.unwrap();
    assert_eq!(next(&mut rx).await, "delete default/b");
    let missing = api.get("nope").await.unwrap_err();
    assert!(matches!(missing, ClientError::NotFound(_)), "{missing:?}");
    let counters = sim.counters();
    assert!(
        counters.protobuf_responses > counters.lists + counters.gets,
        "the informer's list and watch, the writes' answers and the gets: {counters:?}"
    );
    cancel.cancel();
    factory.shutdown().await;
}

/// The same paths for `PbView<Pod>`: the informer's objects keep their messages and are read
/// through typed views, in handlers, indexers, listers and transforms; writes go through
/// `to_message` and `replace_pb`; a JSON answer (`Encoding::Json`) gives the same objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_view_informer_indexes_lists_and_notifies_over_protobuf_and_json() {
    let sim = SimServer::builder().start().await.unwrap();
    let config = config_for(&sim);
    let api: Api<PbView<Pod>> = Api::namespaced(Client::new(&config).unwrap(), "default");
    for (name, node, app) in [("a", "n1", "web"), ("b", "n2", "web"), ("c", "n1", "db")] {
        let created = api
            .create_pb(&CreateOptions::default(), &pod(name, node, app))
            .await
            .unwrap();
        let spec = created.view().spec().unwrap();
        assert_eq!((created.name(), spec.node_name()), (name, Some(node)));
    }

    let factory = SharedInformerFactory::new(config.clone());
    let informer = factory
        .informer::<PbView<Pod>>(Resource::of_pb::<Pod>())
        .unwrap();
    informer
        .add_indexers(Indexers::new().with("node", |p: &PbView<Pod>| {
            let spec = p.view().spec();
            Ok(spec
                .and_then(|s| s.node_name())
                .map(str::to_string)
                .into_iter()
                .collect())
        }))
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (t1, t2) = (tx.clone(), tx);
    informer
        .add_event_handler(
            EventHandlerFns::new()
                .on_add(move |p: &Arc<PbView<Pod>>, _| {
                    let _ = t1.send(format!("add {}", p.name()));
                })
                .on_update(move |_, p: &Arc<PbView<Pod>>| {
                    let image = p.view().spec().and_then(|s| s.containers().next()?.image());
                    let _ = t2.send(format!("update {} {}", p.name(), image.unwrap_or("")));
                }),
        )
        .unwrap();
    let cancel = start_and_expect_three_adds(&factory, &mut rx).await;
    assert_node_index_and_app_selector(&informer);

    // A write of the owned message, read from the cache.
    let a = informer.lister().namespaced("default").get("a").unwrap();
    let mut changed = a.to_message().unwrap();
    changed.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.28".into());
    api.replace_pb("a", &CreateOptions::default(), &changed)
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await, "update a nginx:1.28");

    // The same objects from JSON answers, transcoded into their messages.
    let json_api: Api<PbView<Pod>> =
        Api::namespaced(Client::new(&config).unwrap(), "default").encoding(Encoding::Json);
    let before = sim.counters().protobuf_responses;
    let from_json = json_api.get("a").await.unwrap();
    assert_eq!(
        sim.counters().protobuf_responses,
        before,
        "answered in JSON"
    );
    let cached = informer.lister().namespaced("default").get("a").unwrap();
    assert_eq!(
        from_json
            .view()
            .spec()
            .unwrap()
            .containers()
            .next()
            .unwrap()
            .image(),
        cached
            .view()
            .spec()
            .unwrap()
            .containers()
            .next()
            .unwrap()
            .image()
    );
    assert_eq!(from_json.resource_version(), cached.resource_version());
    cancel.cancel();
    factory.shutdown().await;
}

fn config_for(sim: &SimServer) -> ClusterConfig {
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    if let Some(ca) = sim.ca_pem() {
        config.certificate_authority = Some(ca.as_bytes().to_vec());
    }
    if let Some(t) = sim.token() {
        config.credentials = shared_informer::reflector::Credentials::Token(t.into());
    }
    config
}

/// A server that takes no protobuf body answers 415 before applying anything; the write is sent
/// again as JSON, transcoded from the object, and stores the same object. `Encoding::Json` sends
/// JSON at once. A kind without a descriptor here (not in `k8s.io/api`) cannot fall back: the
/// server's 415 is returned, or, asked for JSON, a typed error with nothing sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8s_pb_writes_are_sent_again_as_json_to_a_server_that_refuses_protobuf_bodies() {
    use shared_informer::reflector::store_index::k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use shared_informer::reflector::Encoding;

    let sim = SimServer::builder().protobuf(false).start().await.unwrap();
    let api: Api<Pb<Pod>> = Api::namespaced(Client::new(&config_for(&sim)).unwrap(), "default");
    let created = api
        .create_pb(&CreateOptions::default(), &pod("a", "n1", "web"))
        .await
        .unwrap();
    assert_eq!(created.label("app"), Some("web"));
    let counters = sim.counters();
    assert_eq!((counters.writes, counters.errors), (2, 1), "415, then JSON");
    let stored = sim.get("pods", Some("default"), "a").unwrap();
    assert_eq!(stored["spec"]["nodeName"], json!("n1"));
    assert_eq!(
        stored["spec"]["containers"][0]["image"],
        json!("nginx:1.27")
    );

    let changed = with_app(&created, "db");
    let replaced = api
        .replace_pb("a", &CreateOptions::default(), &changed)
        .await
        .unwrap();
    assert_eq!(replaced.label("app"), Some("db"));
    // The stale resourceVersion again: the JSON write gets the conflict.
    let err = api
        .replace_pb("a", &CreateOptions::default(), &changed)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err:?}");

    let json_api = api.clone().encoding(Encoding::Json);
    let before = sim.counters();
    json_api
        .create_pb(&CreateOptions::default(), &pod("b", "n2", "web"))
        .await
        .unwrap();
    let after = sim.counters();
    assert_eq!(
        (after.writes - before.writes, after.errors - before.errors),
        (1, 0),
        "JSON at once"
    );

    let crd = CustomResourceDefinition {
        metadata: Some(ObjectMeta {
            name: Some("widgets.example.com".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let crds: Api<Pb<CustomResourceDefinition>> = Api::all(Client::new(&config_for(&sim)).unwrap());
    let refused = crds
        .create_pb(&CreateOptions::default(), &crd)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ClientError::Api(status) if status.code == 415),
        "{refused:?}"
    );
    let before = sim.counters().writes;
    let unsent = crds
        .encoding(Encoding::Json)
        .create_pb(&CreateOptions::default(), &crd)
        .await
        .unwrap_err();
    assert!(
        matches!(unsent, ClientError::InvalidRequest(_)),
        "{unsent:?}"
    );
    assert_eq!(sim.counters().writes, before, "nothing sent");
}
