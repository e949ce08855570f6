//! Scenario 11: periodic resync under churn and cut watches. An informer with a 1 s resync check
//! carries handlers asking for no resync, 1 s and 3 s: resync-class notifications (an update
//! repeating the resourceVersion) must reach each according to its period — none for the first —
//! without ever taking a key back to an older version.

use std::time::Duration;

use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::CompactObject;

use crate::check::{converge, Outcome, Recorder};
use crate::harness::{churn, config_for, fast_backoff, finish_all, pods, seed, synced};
use crate::{ensure, Opts};

/// Runs the scenario.
pub async fn resync_under_churn(_: Opts) -> Outcome {
    let sim = SimServer::start().await?;
    seed(&sim, "pods", "rs", 2, 300, 100)?;
    let factory = crate::harness::factory(config_for(&sim)?)
        .default_resync(Duration::from_secs(1))
        .reflector_options(fast_backoff(false));
    let informer = factory.informer::<CompactObject>(pods())?;
    let (never, never_seq) = Recorder::new();
    let (every_1s, seq_1s) = Recorder::new();
    let (every_3s, seq_3s) = Recorder::new();
    informer.add_event_handler_with_resync(never, Duration::ZERO)?;
    informer.add_event_handler_with_resync(every_1s, Duration::from_secs(1))?;
    informer.add_event_handler_with_resync(every_3s, Duration::from_secs(3))?;
    sim.faults().end_watches_after(400);
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    synced(&informer, Duration::from_secs(30)).await?;
    let churns = vec![
        churn(&sim, "pods", "rs-0", 200, 150.0, 9.0, 100),
        churn(&sim, "pods", "rs-1", 200, 150.0, 9.0, 100),
    ];
    let ops = finish_all(churns).await;
    let detail = converge(
        &sim,
        "pods",
        informer.indexer(),
        &[("no-resync", &never_seq), ("1s", &seq_1s), ("3s", &seq_3s)],
        Duration::from_secs(30),
    )
    .await?;
    let (r0, r1, r3) = (
        never_seq.lock().resyncs,
        seq_1s.lock().resyncs,
        seq_3s.lock().resyncs,
    );
    let cached = informer.indexer().len() as u64;
    ensure!(
        r0 == 0,
        "the handler without resync got {r0} resync-class updates"
    );
    // Over ~9 s: about 9 rounds for the 1 s handler and 3 for the 3 s one (keys with queued
    // changes are skipped, so allow slack).
    ensure!(
        r1 >= 4 * cached && r3 >= cached && r1 > 2 * r3,
        "resync-class updates: 1 s handler {r1}, 3 s handler {r3}, for {cached} cached pods"
    );
    cancel.cancel();
    factory.shutdown().await;
    Ok(format!(
        "{ops} ops; resync-class updates: none 0, 1 s {r1}, 3 s {r3}; {detail}"
    ))
}
