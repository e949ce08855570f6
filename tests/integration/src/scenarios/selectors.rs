//! Scenario 10: a factory-wide label selector (`tier=a`) while objects move in and out of it by
//! label patches, are deleted and re-created, and unlabelled churn runs beside them. Leaving the
//! selector must arrive as a delete and entering as an add; the cache must equal the server's
//! matching objects, and nothing that never matched may appear.

use std::time::Duration;

use serde_json::{json, Value};
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::DynamicObject;

use crate::check::{cache_state, diff, eventually, server_state_where, Failure, Outcome, Recorder};
use crate::harness::{churn, config_for, fast_backoff, pods, synced};
use crate::{ensure, Opts};

const PODS: usize = 400;

fn tier_a(o: &Value) -> bool {
    o.pointer("/metadata/labels/tier").and_then(Value::as_str) == Some("a")
}

/// Runs the scenario.
pub async fn selector_transitions(_: Opts) -> Outcome {
    let sim = SimServer::start().await?;
    for i in 0..PODS {
        let tier = if i % 2 == 0 { "a" } else { "b" };
        sim.create(
            "pods",
            Some("sel"),
            json!({"metadata": {"name": format!("p-{i}"), "labels": {"tier": tier}}}),
        )?;
    }
    let factory = crate::harness::factory(config_for(&sim)?)
        .label_selector("tier=a".parse()?)
        .reflector_options(fast_backoff(false));
    let informer = factory.informer::<DynamicObject>(pods())?;
    let (recorder, seq) = Recorder::new();
    informer.add_event_handler(recorder)?;
    sim.faults().end_watches_after(700);
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    synced(&informer, Duration::from_secs(30)).await?;
    ensure!(
        informer.indexer().len() == PODS / 2,
        "synced with {} objects, {} match the selector",
        informer.indexer().len(),
        PODS / 2
    );

    // Unlabelled churn in the same namespace: none of it may reach the informer.
    let noise = churn(&sim, "pods", "sel", 200, 200.0, 8.0, 50);
    let mut tick = tokio::time::interval(Duration::from_millis(2));
    let (mut flips, mut recreated) = (0u64, 0u64);
    for op in 0..4_000usize {
        tick.tick().await;
        let i = op.wrapping_mul(7_919) % PODS;
        let name = format!("p-{i}");
        if op % 10 == 9 {
            // Delete and re-create with the other tier.
            let old = sim.get("pods", Some("sel"), &name)?;
            let tier = if tier_a(&old) { "b" } else { "a" };
            sim.delete("pods", Some("sel"), &name)?;
            sim.create(
                "pods",
                Some("sel"),
                json!({"metadata": {"name": name, "labels": {"tier": tier}}}),
            )?;
            recreated += 1;
        } else {
            let old = sim.get("pods", Some("sel"), &name)?;
            let tier = if tier_a(&old) { "b" } else { "a" };
            sim.patch(
                "pods",
                Some("sel"),
                &name,
                &json!({"metadata": {"labels": {"tier": tier}}}),
            )?;
            flips += 1;
        }
    }
    let noise_ops = noise.finished().await;
    let detail = eventually(
        "the cache and the handler to equal the server's tier=a pods",
        Duration::from_secs(30),
        || {
            let server = server_state_where(&sim, "pods", tier_a)?;
            if let Some(v) = seq.lock().violations().first() {
                return Err(format!("sequence violation: {v}"));
            }
            if let Some(d) = diff(&server, &cache_state(informer.indexer())) {
                return Err(format!("cache: {d}"));
            }
            if let Some(d) = diff(&server, &seq.lock().view()) {
                return Err(format!("handler: {d}"));
            }
            Ok(server.len())
        },
    )
    .await?;
    let (adds, deletes, leaked, violations) = {
        let s = seq.lock();
        let leaked = s.view().keys().filter(|k| k.contains("churn-")).count();
        (s.adds, s.deletes, leaked, s.violations().to_vec())
    };
    ensure!(
        violations.is_empty(),
        "sequence violations: {:?}",
        &violations[..violations.len().min(3)]
    );
    ensure!(
        leaked == 0,
        "{leaked} unlabelled churn pods reached the informer"
    );
    if deletes == 0 || adds <= PODS as u64 / 2 {
        return Err(Failure(format!(
            "transitions should show as deletes and adds: {adds} adds, {deletes} deletes"
        )));
    }
    cancel.cancel();
    factory.shutdown().await;
    Ok(format!(
        "{flips} label flips + {recreated} re-creations + {noise_ops} unlabelled ops: \
         {adds} adds, {deletes} deletes; {detail} matching pods consistent"
    ))
}
