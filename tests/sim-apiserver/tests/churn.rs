//! The churn generator.

mod common;

use std::time::Duration;

use common::Client;
use sim_apiserver::{ChurnConfig, SimServer};

#[tokio::test(start_paused = true)]
async fn churn_performs_the_requested_operations_and_watchers_see_them() {
    let sim = SimServer::start().await.unwrap();
    let from = sim.revision();
    let mut w = Client::new(&sim)
        .watch(&format!(
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion={from}"
        ))
        .await;
    let h = sim.churn(ChurnConfig {
        keys: 5,
        rate_per_sec: 50.0,
        max_ops: Some(40),
        pad_bytes: 100,
        ..ChurnConfig::default()
    });
    let start = tokio::time::Instant::now();
    assert_eq!(h.finished().await, 40);
    assert!(start.elapsed() >= Duration::from_millis(780));
    assert_eq!(sim.revision() - from, 40);
    let mut seen = 0;
    while seen < 40 {
        let e = w.next().await.unwrap();
        assert!(["ADDED", "MODIFIED", "DELETED"].contains(&e["type"].as_str().unwrap()));
        seen += 1;
    }
    assert!(sim.list("pods", Some("default")).unwrap().len() <= 5);
}

#[tokio::test]
async fn stopping_or_dropping_a_churn_handle_stops_it() {
    let sim = SimServer::start().await.unwrap();
    let cfg = ChurnConfig {
        rate_per_sec: 1000.0,
        max_ops: None,
        ..ChurnConfig::default()
    };
    let h = sim.churn(cfg.clone());
    h.stop().await;
    let rev = sim.revision();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(sim.revision(), rev, "no operation after stop");

    let h = sim.churn(cfg);
    drop(h);
    // The task sees the stop at its next poll (at most one more operation).
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let rev = sim.revision();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(sim.revision(), rev, "no operation after drop");
}
