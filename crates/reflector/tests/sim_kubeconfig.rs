//! The simulated API server's own kubeconfig (`SimServer::kubeconfig`, written by
//! `sim-apiserver --kubeconfig PATH`) is what a user points their controller at: this client must
//! load it as it is and reach the server, over TLS with the server's token.

use reflector::store_index::DynamicObject;
use reflector::{Client, ClusterConfig, ObjectList};
use serde_json::json;
use sim_apiserver::SimServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulators_kubeconfig_loads_and_reaches_it_over_tls_with_its_token() {
    let sim = SimServer::builder()
        .tls(true)
        .token("sim-token")
        .start()
        .await
        .unwrap();
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "web-1"}}),
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("reflector-sim-kubeconfig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config");
    std::fs::write(&path, sim.kubeconfig()).unwrap();

    let load = ClusterConfig::load_kubeconfig_files(std::slice::from_ref(&path), None).unwrap();
    assert!(load.warnings.is_empty(), "{:?}", load.warnings);
    assert_eq!(load.config.default_namespace, "default");
    let body = Client::new(&load.config)
        .unwrap()
        .get_bytes("/api/v1/namespaces/default/pods")
        .await
        .unwrap();
    let list = ObjectList::<DynamicObject>::from_json(&body).unwrap();
    assert_eq!(list.items.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
