//! Scale and watch-stream abuse: a 10k-object initial sync followed by 30 s of 1k events/s, and
//! churn while watches are cut every few hundred events, re-chunked to single bytes, reset
//! mid-event, fed malformed lines and ERROR events, and lists and watches refused.

use std::time::{Duration, Instant};

use sim_apiserver::{RequestKind, SimServer};
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{CompactObject, DynamicObject};

use crate::check::{cache_state, converge, diff, server_state, Failure, Outcome, Recorder};
use crate::harness::{churn, config_for, fast_backoff, finish_all, pods, seed, synced, Progress};
use crate::{ensure, Opts};

/// Scenario 1: 10 000 pods synced at start (a watch-list, the default), then 1 000 churn events/s for 30 s.
pub async fn big_list_then_churn(_: Opts) -> Outcome {
    const SEEDED: usize = 10_000;
    let sim = SimServer::start().await?;
    seed(&sim, "pods", "big", 10, SEEDED, 300)?;
    let factory = crate::harness::factory(config_for(&sim)?);
    let informer = factory.informer::<CompactObject>(pods())?;
    let (recorder, seq) = Recorder::new();
    let registration = informer.add_event_handler(recorder)?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    let t = Instant::now();
    factory.start(&cancel);
    synced(&informer, Duration::from_secs(60)).await?;
    let list_secs = t.elapsed().as_secs_f64();
    ensure!(
        informer.indexer().len() == SEEDED,
        "synced with {} of {SEEDED} objects",
        informer.indexer().len()
    );
    if let Some(d) = diff(
        &server_state(&sim, "pods").map_err(Failure)?,
        &cache_state(informer.indexer()),
    ) {
        crate::fail!("cache after the initial list: {d}");
    }

    let progress = {
        let (informer, registration) = (informer.clone(), registration.clone());
        let counted = registration.clone();
        Progress::start(
            "churn-10k-list",
            Duration::from_secs(10),
            move || counted.processed(),
            move || {
                format!(
                    "cache={}  handler pending={}",
                    informer.indexer().len(),
                    registration.pending()
                )
            },
        )
    };
    let t = Instant::now();
    let churns = vec![
        churn(&sim, "pods", "big-0", 1_500, 500.0, 30.0, 500),
        churn(&sim, "pods", "big-1", 1_500, 500.0, 30.0, 500),
    ];
    let ops = finish_all(churns).await;
    let churn_secs = t.elapsed().as_secs_f64();
    drop(progress);
    let detail = converge(
        &sim,
        "pods",
        informer.indexer(),
        &[("recorder", &seq)],
        Duration::from_secs(60),
    )
    .await?;
    let initial = seq.lock().initial_adds;
    ensure!(
        initial == SEEDED as u64,
        "{initial} adds flagged initial, want {SEEDED}"
    );
    // No fault is injected: one watch-list (the default sync) kept as the watch, no list, unless
    // the client fell so far behind that the server dropped its watcher (then it resumes with a
    // new watch, without relisting).
    let c = sim.counters();
    let dropped = sim.slow_watcher_terminations();
    ensure!(
        c.lists == 0 && c.watches == 1 + dropped,
        "no fault was injected, yet {} lists and {} watches ({dropped} watchers dropped as slow)",
        c.lists,
        c.watches
    );
    cancel.cancel();
    factory.shutdown().await;
    Ok(format!(
        "{SEEDED} listed+synced in {list_secs:.1}s; {ops} churn ops in {churn_secs:.1}s ({:.0}/s); {detail}",
        ops as f64 / churn_secs
    ))
}

/// Scenario 2, in list mode and in watch-list mode: churn while watch streams end every 250
/// events (2 000 in watch-list mode), arrive one byte per chunk, and a
/// fault is injected every 1.5 s (reset mid-event, malformed line, ERROR 500 / 410, refused watch
/// and list, a stall that gets the watcher dropped as too slow, a compaction).
pub async fn watch_faults(_: Opts) -> Outcome {
    let mut details = Vec::new();
    for watch_list in [false, true] {
        let mode = if watch_list { "watch-list" } else { "list" };
        let detail = watch_faults_in(watch_list)
            .await
            .map_err(|f| Failure(format!("{mode} mode: {f}")))?;
        details.push(format!("[{mode} mode: {detail}]"));
    }
    Ok(details.join(" "))
}

/// One run of [`watch_faults`], relisting by list or by watch-list stream.
async fn watch_faults_in(watch_list: bool) -> Outcome {
    // A small per-watcher buffer, so a stalled stream is dropped as too slow, and a short event
    // log, so resuming after a long enough gap meets a compacted revision.
    let sim = SimServer::builder()
        .watch_buffer(128)
        .max_log_events(2_000)
        .start()
        .await?;
    seed(&sim, "pods", "wf", 2, 600, 100)?;
    let factory =
        crate::harness::factory(config_for(&sim)?).reflector_options(fast_backoff(watch_list));
    let informer = factory.informer::<DynamicObject>(pods())?;
    let (a, seq_a) = Recorder::new();
    let (b, seq_b) = Recorder::new();
    informer.add_event_handler(a)?;
    informer.add_event_handler(b)?;
    // A watch-list stream must get through its initial events (about 1 000 with the churn's keys)
    // before the cut, or it would restart for ever (contract C13.4).
    let end_after = if watch_list { 2_000 } else { 250 };
    sim.faults().end_watches_after(end_after).rechunk(1);
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    synced(&informer, Duration::from_secs(30)).await?;

    let churns = vec![
        churn(&sim, "pods", "wf-0", 300, 150.0, 12.0, 150),
        churn(&sim, "pods", "wf-1", 300, 150.0, 12.0, 150),
    ];
    let injector = {
        let sim = sim.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(1_500));
            tick.tick().await;
            for round in 0u32.. {
                tick.tick().await;
                let f = sim.faults();
                match round % 8 {
                    0 => {
                        // A stalled stream: events pile up behind the 128-event buffer until the
                        // server drops the watcher as too slow (within 3 s at this rate).
                        let dropped = sim.slow_watcher_terminations();
                        f.stall();
                        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
                        while sim.slow_watcher_terminations() == dropped
                            && tokio::time::Instant::now() < deadline
                        {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        f.unstall()
                    }
                    1 => f.reset_mid_chunk(),
                    2 => f.malformed_line(),
                    3 => f.error_event(500),
                    4 => f.error_event(410),
                    5 => f.fail_next(RequestKind::Watch, 429, 2),
                    6 => f.fail_next(RequestKind::List, 503, 1),
                    _ => {
                        f.compact();
                        f
                    }
                };
            }
        })
    };
    let progress = {
        let informer = informer.clone();
        let sim2 = sim.clone();
        Progress::start(
            "watch-faults",
            Duration::from_secs(10),
            move || sim2.counters().watch_events,
            move || format!("(server-side) cache={}", informer.indexer().len()),
        )
    };
    let ops = finish_all(churns).await;
    injector.abort();
    drop(progress);
    // Faults stay armed (resets, 1-byte chunks) while converging, except the one-shot ones.
    let detail = converge(
        &sim,
        "pods",
        informer.indexer(),
        &[("a", &seq_a), ("b", &seq_b)],
        Duration::from_secs(60),
    )
    .await?;
    let c = sim.counters();
    let dropped = sim.slow_watcher_terminations();
    ensure!(
        dropped >= 1,
        "the stalls should have got a watcher dropped as too slow"
    );
    ensure!(
        c.watches >= if watch_list { 5 } else { 10 } && (watch_list || c.lists >= 2),
        "the faults should have forced re-watches and relists: {} watches, {} lists",
        c.watches,
        c.lists
    );
    let tombstones = seq_a.lock().tombstones;
    let resyncs = seq_a.lock().resyncs;
    sim.faults().reset();
    cancel.cancel();
    factory.shutdown().await;
    Ok(format!(
        "{ops} churn ops; {} watches, {} lists, {} errors, {dropped} slow watchers dropped; \
         {tombstones} tombstones, {resyncs} same-version updates; {detail}",
        c.watches, c.lists, c.errors
    ))
}
