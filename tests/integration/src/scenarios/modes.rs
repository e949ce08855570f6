//! Scenario 4: the four combinations of bookmarks (the server sends them every 200 ms, or never
//! within the run) and watch-list mode (`sendInitialEvents` streaming instead of a list), each under
//! churn with watches ending every 1 000 events.

use std::time::Duration;

use serde_json::json;
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::CompactObject;

use crate::check::{converge, eventually, Failure, Outcome, Recorder};
use crate::harness::{churn, config_for, fast_backoff, finish_all, pods, seed, synced};
use crate::{ensure, Opts};

async fn one(bookmarks: bool, watch_list: bool) -> Outcome {
    let interval = if bookmarks {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(3_600)
    };
    let sim = SimServer::builder()
        .bookmark_interval(interval)
        .start()
        .await?;
    seed(&sim, "pods", "md", 2, 500, 100)?;
    let factory =
        crate::harness::factory(config_for(&sim)?).reflector_options(fast_backoff(watch_list));
    let informer = factory.informer::<CompactObject>(pods())?;
    let (recorder, seq) = Recorder::new();
    informer.add_event_handler(recorder)?;
    // Every watch ends after 1 000 events: more than a watch-list stream's 500 initial ones, so
    // several re-watches during the churn.
    sim.faults().end_watches_after(1_000);
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    synced(&informer, Duration::from_secs(30)).await?;
    // The handler hears of the synced cache's adds after the cache has them: wait for all 500.
    eventually(
        "the handler's 500 initial adds",
        Duration::from_secs(30),
        || match seq.lock().initial_adds {
            500 => Ok(()),
            n => Err(format!("{n} initial adds, want 500")),
        },
    )
    .await?;
    let churns = vec![
        churn(&sim, "pods", "md-0", 200, 200.0, 6.0, 100),
        churn(&sim, "pods", "md-1", 200, 200.0, 6.0, 100),
    ];
    let ops = finish_all(churns).await;
    converge(
        &sim,
        "pods",
        informer.indexer(),
        &[("recorder", &seq)],
        Duration::from_secs(30),
    )
    .await?;

    // Writes to another resource move the global revision. Only a bookmark can tell the pod
    // informer about it: with bookmarks its last synced version catches up, without it stays.
    let pods_rv = informer.last_sync_resource_version();
    for i in 0..5 {
        sim.create(
            "configmaps",
            Some("md-0"),
            json!({"metadata": {"name": format!("cm-{i}")}}),
        )?;
    }
    let revision = sim.revision().to_string();
    let bookmarked = eventually(
        "a bookmark to advance the pod informer's resource version",
        // 25 bookmark intervals with bookmarks; without, 10 intervals of the other case.
        Duration::from_secs(if bookmarks { 5 } else { 2 }),
        || {
            let rv = informer.last_sync_resource_version();
            if rv == revision {
                Ok(rv)
            } else {
                Err(format!("at {rv}, server at {revision}"))
            }
        },
    )
    .await;
    match (bookmarks, bookmarked) {
        (true, Err(f)) => return Err(f),
        (false, Ok(rv)) => {
            return Err(Failure(format!(
                "without bookmarks the pod informer still reached {rv} (was {pods_rv})"
            )))
        }
        _ => {}
    }
    let c = sim.counters();
    if watch_list {
        ensure!(
            c.lists == 0,
            "watch-list mode, yet {} list requests reached the server",
            c.lists
        );
    } else {
        ensure!(c.lists >= 1, "no list in list mode");
    }
    cancel.cancel();
    factory.shutdown().await;
    Ok(format!(
        "{ops} ops, {} lists, {} watches, {} events",
        c.lists, c.watches, c.watch_events
    ))
}

/// Runs the four combinations; the detail lists each.
pub async fn bookmarks_and_watch_list(_: Opts) -> Outcome {
    let mut details = Vec::new();
    for (bookmarks, watch_list) in [(false, false), (true, false), (false, true), (true, true)] {
        let label = format!(
            "bookmarks {} / watch-list {}",
            if bookmarks { "on" } else { "off" },
            if watch_list { "on" } else { "off" }
        );
        let detail = one(bookmarks, watch_list)
            .await
            .map_err(|f| Failure(format!("{label}: {f}")))?;
        details.push(format!("[{label}: {detail}]"));
    }
    Ok(details.join(" "))
}
