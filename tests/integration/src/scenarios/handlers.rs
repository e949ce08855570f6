//! Scenario 7: a slow handler and a panicking handler beside two healthy ones. The healthy ones
//! and the cache converge while the slow one is still far behind; the slow one catches up later;
//! the panicking one keeps receiving (its registration counts the panics) and ends consistent, but
//! never reports synced, since it panicked on an initial add.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::DynamicObject;

use crate::check::{converge, eventually, Failure, Misbehave, Outcome, Recorder};
use crate::harness::{churn, config_for, finish_all, pods, seed, synced};
use crate::{ensure, Opts};

/// Runs the scenario.
pub async fn slow_and_panicking(_: Opts) -> Outcome {
    let sim = SimServer::start().await?;
    seed(&sim, "pods", "hd", 2, 400, 100)?;
    let factory = crate::harness::factory(config_for(&sim)?);
    let informer = factory.informer::<DynamicObject>(pods())?;
    let (h1, healthy_1) = Recorder::new();
    let (h2, healthy_2) = Recorder::new();
    let (slow, slow_seq) = Recorder::misbehaving(Misbehave {
        delay: Duration::from_millis(4),
        panic_every: 0,
    });
    let (panicky, panicky_seq) = Recorder::misbehaving(Misbehave {
        delay: Duration::ZERO,
        // The informer pauses a handler for 1 s after each panic (contract D9.3), so a handler
        // that panicked on every few events could never keep up: one in 400.
        panic_every: 400,
    });
    let h1_reg = informer.add_event_handler(h1)?;
    let slow_reg = informer.add_event_handler(slow)?;
    let panicky_reg = informer.add_event_handler(panicky)?;
    let h2_reg = informer.add_event_handler(h2)?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    synced(&informer, Duration::from_secs(30)).await?;
    // Per-registration HasSynced (contract D7): each handler syncs once it has handled its initial
    // adds — the slow one later — except the panicking one, whose 400th notification (the last
    // initial add) panics, so it never does (D7.2).
    eventually(
        "every handler but the panicking one to sync",
        Duration::from_secs(30),
        || {
            let regs = [&h1_reg, &h2_reg, &slow_reg];
            if regs.iter().all(|r| r.has_synced()) {
                Ok(())
            } else {
                Err(format!(
                    "synced: {:?}",
                    regs.iter().map(|r| r.has_synced()).collect::<Vec<_>>()
                ))
            }
        },
    )
    .await?;

    let max_pending = Arc::new(AtomicI64::new(0));
    let sampler = {
        let (reg, max) = (slow_reg.clone(), Arc::clone(&max_pending));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                max.fetch_max(reg.pending(), Ordering::Relaxed);
            }
        })
    };
    let churns = vec![
        churn(&sim, "pods", "hd-0", 300, 200.0, 10.0, 100),
        churn(&sim, "pods", "hd-1", 300, 200.0, 10.0, 100),
    ];
    let ops = finish_all(churns).await;
    let healthy = converge(
        &sim,
        "pods",
        informer.indexer(),
        &[("healthy-1", &healthy_1), ("healthy-2", &healthy_2)],
        Duration::from_secs(30),
    )
    .await
    .map_err(|f| {
        Failure(format!(
            "{f}; handlers (name, pending, processed, panics): {:?}",
            informer.handler_stats()
        ))
    })?;
    let behind = slow_reg.pending();
    ensure!(
        behind > 100,
        "the slow handler should still be far behind when the others converge, but has only \
         {behind} pending"
    );
    let caught_up = converge(
        &sim,
        "pods",
        informer.indexer(),
        &[("slow", &slow_seq), ("panicky", &panicky_seq)],
        Duration::from_secs(60),
    )
    .await
    .map_err(|f| {
        Failure(format!(
            "{f}; handlers (name, pending, processed, panics): {:?}",
            informer.handler_stats()
        ))
    })?;
    sampler.abort();
    let panics = panicky_reg.panics();
    let received = panicky_seq.lock().events();
    ensure!(
        panics == received / 400 && panics > 0,
        "the panicking handler panicked on every 400th of {received} notifications, \
         its registration counted {panics}"
    );
    ensure!(
        !panicky_reg.has_synced(),
        "the handler that panicked on an initial add reports synced (contract D7.2)"
    );
    // Its view is complete; the notification it is returning from is the last one pending.
    eventually(
        "the slow handler's buffer to drain",
        Duration::from_secs(5),
        || match slow_reg.pending() {
            0 => Ok(()),
            n => Err(format!("{n} pending")),
        },
    )
    .await?;
    cancel.cancel();
    factory.shutdown().await;
    Ok(format!(
        "{ops} ops; healthy converged while the slow one had {behind} pending (max {}); \
         panicking one survived {panics} panics over {received} notifications; {healthy}; slow: {caught_up}",
        max_pending.load(Ordering::Relaxed)
    ))
}
