//! A controller's own test, written once, run on the simulator by `cargo test` and on a real
//! kube-apiserver and etcd by `REAL_APISERVER=1 cargo test` (CI's real-server step): the
//! `TestServer` the guide shows. The controller labels every ConfigMap through a queue and an
//! informer configured from a kubeconfig, as it would be in a cluster; its first write is
//! refused with a 409 on the simulator (a fault only the simulator can inject).

use std::collections::BTreeSet;
use std::time::Duration;

use controller::{Action, CancellationToken, Controller};
use serde_json::json;
use shared_informer::reflector::store_index::{DynamicObject, Object};
use shared_informer::reflector::{Api, Client, ClusterConfig, Patch, PatchOptions, Resource};
use shared_informer::SharedInformerFactory;
use sim_apiserver::{TestServer, TestServerError};
use workqueue::{default_controller_rate_limiter, KeyEnqueuer, RateLimitingQueue};

const NS: &str = "labeller";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_labelling_controller_labels_every_configmap_on_either_server() {
    let server = TestServer::start().await.expect("a test server");
    println!(
        "on {} at {}",
        if server.is_real() {
            "a real kube-apiserver"
        } else {
            "the simulator"
        },
        server.url()
    );
    server
        .create("namespaces", None, json!({"metadata": {"name": NS}}))
        .unwrap();
    for name in ["a", "b", "c"] {
        server
            .create("configmaps", Some(NS), json!({"metadata": {"name": name}}))
            .unwrap();
    }
    if let Some(sim) = server.sim() {
        sim.faults().conflict_next_writes(1);
    }

    let config =
        ClusterConfig::from_kubeconfig_files(&[server.kubeconfig_path().to_path_buf()], None)
            .unwrap();
    let configmaps = Resource::namespaced("", "v1", "configmaps");
    let api: Api<DynamicObject> =
        Api::namespaced_with(Client::new(&config).unwrap(), configmaps.clone(), NS);
    let factory = SharedInformerFactory::new(config).namespace(NS);
    let informer = factory.informer::<DynamicObject>(configmaps).unwrap();
    let queue: RateLimitingQueue<String> =
        RateLimitingQueue::new(default_controller_rate_limiter());
    informer
        .add_event_handler(KeyEnqueuer::new(queue.clone()))
        .unwrap();
    let cancel = CancellationToken::new();
    factory.start(&cancel);

    let (labelled, mut done) = tokio::sync::mpsc::unbounded_channel();
    let cache = informer.indexer().clone();
    let run = tokio::spawn(Controller::new(queue).workers(2).run(
        cancel.clone(),
        move |key: String| {
            let (api, cache, labelled) = (api.clone(), cache.clone(), labelled.clone());
            async move {
                let Some(cm) = cache.get_by_key(&key) else {
                    return Ok(Action::Done);
                };
                if cm.labels().and_then(|l| l.get("checked")).is_none() {
                    let patch = Patch::Merge(json!({"metadata": {"labels": {"checked": "true"}}}));
                    api.patch(cm.name(), &PatchOptions::default(), &patch)
                        .await?;
                    let _ = labelled.send(key);
                }
                Ok::<_, shared_informer::reflector::ClientError>(Action::Done)
            }
        },
    ));

    let mut seen = BTreeSet::new();
    while seen.len() < 3 {
        let key = tokio::time::timeout(Duration::from_secs(60), done.recv())
            .await
            .expect("three labelled ConfigMaps within a minute");
        seen.extend(key);
    }
    cancel.cancel();
    run.await.unwrap();
    factory.shutdown().await;

    // Checked on the server, through its own admin: every ConfigMap labelled.
    let stored = server.list("configmaps", Some(NS)).unwrap();
    let labelled: BTreeSet<&str> = stored
        .iter()
        .filter(|cm| cm["metadata"]["labels"]["checked"] == "true")
        .filter_map(|cm| cm["metadata"]["name"].as_str())
        .collect();
    assert!(
        ["a", "b", "c"].iter().all(|n| labelled.contains(n)),
        "{labelled:?}"
    );
    // Only the simulator keeps every version: created, then written exactly once.
    if let Some(sim) = server.sim() {
        for name in ["a", "b", "c"] {
            assert_eq!(sim.history("configmaps", Some(NS), name).len(), 2);
        }
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeding_an_unknown_resource_or_a_missing_object_is_a_typed_error() {
    let server = TestServer::start().await.expect("a test server");
    let err = server
        .get("configmaps", Some("default"), "nosuch")
        .unwrap_err();
    assert!(
        matches!(err, TestServerError::Refused { code: 404, .. }),
        "{err:?}"
    );
    let err = server
        .create("gadgets.nosuch.example.com", Some("default"), json!({}))
        .unwrap_err();
    match (&err, server.is_real()) {
        (TestServerError::UnknownResource(r), true) => {
            assert_eq!(r, "gadgets.nosuch.example.com")
        }
        (TestServerError::Refused { code: 404, .. }, false) => {}
        _ => panic!("{err:?}"),
    }
    server.stop().await.unwrap();
}
