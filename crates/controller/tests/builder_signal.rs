//! BD5 through a real signal: a builder's controller shuts down gracefully on SIGTERM, releasing
//! its leader lease. A test binary of its own, as the signal is the whole process's.
#![cfg(unix)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use controller::prelude::*;
use serde_json::json;
use sim_apiserver::{ResourceDef, SimServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_controller_and_releases_its_lease() {
    let sim = SimServer::start().await.unwrap();
    sim.register(ResourceDef::new("example.com", "v1", "Widget", "widgets", true).with_status());
    sim.create(
        "widgets.example.com",
        Some("default"),
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "web"}}),
    )
    .unwrap();
    let client = Client::new(&ClusterConfig::new(&sim.url()).unwrap()).unwrap();
    let reconciled = Arc::new(AtomicUsize::new(0));
    let run = tokio::spawn({
        let reconciled = reconciled.clone();
        ControllerBuilder::<DynamicObject>::new(
            client,
            Resource::namespaced("example.com", "v1", "widgets"),
            "Widget",
        )
        .namespace("default")
        .leader_election("widget-controller")
        .identity("a")
        .run(
            move |_widget, _ctx: Context<DynamicObject, ()>| {
                reconciled.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, FenceError>(Action::Done) }
            },
            |_, _, _| Action::Retry,
            (),
        )
    });
    // The signal handlers are installed first thing in `run`: once a reconcile ran, they are.
    for _ in 0..2000 {
        if reconciled.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        reconciled.load(Ordering::SeqCst) > 0,
        "the widget was reconciled"
    );
    let lease = sim
        .get(
            "leases.coordination.k8s.io",
            Some("default"),
            "widget-controller",
        )
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "a");
    let killed = std::process::Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", std::process::id())])
        .status()
        .unwrap();
    assert!(killed.success());
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("run returns after SIGTERM")
        .unwrap()
        .unwrap();
    let lease = sim
        .get(
            "leases.coordination.k8s.io",
            Some("default"),
            "widget-controller",
        )
        .unwrap();
    assert_ne!(lease["spec"]["holderIdentity"], "a", "released: {lease}");
}
