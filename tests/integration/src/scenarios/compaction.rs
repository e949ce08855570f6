//! Scenario 3: the store is compacted while the informer's watch is disconnected, so resuming it
//! gets 410 Expired and the reflector relists; what was deleted meanwhile must arrive as
//! `DeletedFinalStateUnknown` tombstones, exactly once each, and nothing else may be lost or
//! duplicated. Three variants: the relist is a plain list, a watch-list stream, or a list
//! paginated 50 objects at a time.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::json;
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::DynamicObject;
use workqueue::shared_informer::reflector::ReflectorOptions;

use crate::check::{converge, eventually, Outcome, Recorder};
use crate::harness::{config_for, pods, seed, synced};
use crate::{ensure, fail, Opts};

const ROUNDS: usize = 3;
const PER_ROUND: usize = 40;

/// How the informer relists.
#[derive(Debug, Clone, Copy)]
enum Relist {
    /// A plain list (the simulated watch cache answers it in one page).
    List,
    /// Watch-list streaming (`sendInitialEvents`).
    WatchList,
    /// A list paginated 50 at a time (the simulator without its watch cache).
    Paginated,
}

/// Runs the three relist variants.
pub async fn compaction_relist(_: Opts) -> Outcome {
    let mut details = Vec::new();
    for relist in [Relist::List, Relist::WatchList, Relist::Paginated] {
        let detail = rounds(relist)
            .await
            .map_err(|f| crate::check::Failure(format!("{relist:?}: {f}")))?;
        details.push(format!("[{relist:?}: {detail}]"));
    }
    Ok(details.join(" "))
}

/// Runs [`ROUNDS`] rounds of: stall the watch, delete / update / create [`PER_ROUND`] pods each,
/// compact, cut the connection, unstall; then checks the relist's notifications.
async fn rounds(relist: Relist) -> Outcome {
    let sim = SimServer::builder()
        .watch_cache(!matches!(relist, Relist::Paginated))
        .start()
        .await?;
    seed(&sim, "pods", "cp", 3, 300, 50)?;
    let options = ReflectorOptions {
        watch_list: matches!(relist, Relist::WatchList),
        page_size: if matches!(relist, Relist::Paginated) {
            50
        } else {
            0
        },
        ..ReflectorOptions::default()
    };
    let factory = crate::harness::factory(config_for(&sim)?).reflector_options(options);
    let informer = factory.informer::<DynamicObject>(pods())?;
    let (a, seq_a) = Recorder::new();
    let (b, seq_b) = Recorder::new();
    informer.add_event_handler(a)?;
    informer.add_event_handler(b)?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    synced(&informer, Duration::from_secs(30)).await?;
    // The watch must be open before it is stalled, or the round would test a plain relist.
    eventually(
        "the informer's watch to open",
        Duration::from_secs(10),
        || {
            if sim.counters().active_watches == 1 {
                Ok(())
            } else {
                Err(format!("{} active watches", sim.counters().active_watches))
            }
        },
    )
    .await?;

    let mut next_new = 0usize;
    let mut total_tombstones = 0;
    for round in 0..ROUNDS {
        let before = sim.counters();
        let (tomb_a, tomb_b) = (seq_a.lock().tombstoned.len(), seq_b.lock().tombstoned.len());
        let (adds_before, deletes_before) = {
            let s = seq_a.lock();
            (s.adds, s.deletes)
        };
        sim.faults().stall();
        // Pick victims from the server's current state, in key order: every third is deleted,
        // the next updated.
        let present = crate::check::server_state(&sim, "pods").map_err(crate::check::Failure)?;
        let mut deleted = BTreeSet::new();
        let mut updated = 0;
        for (i, key) in present.keys().enumerate() {
            let Some((ns, name)) = key.split_once('/') else {
                fail!("unexpected key {key}");
            };
            if i % 3 == 0 && deleted.len() < PER_ROUND {
                sim.delete("pods", Some(ns), name)?;
                deleted.insert(key.clone());
            } else if i % 3 == 1 && updated < PER_ROUND {
                sim.patch(
                    "pods",
                    Some(ns),
                    name,
                    &json!({"metadata": {"labels": {"round": round.to_string()}}}),
                )?;
                updated += 1;
            }
        }
        for _ in 0..PER_ROUND {
            let ns = format!("cp-{}", next_new % 3);
            sim.create(
                "pods",
                Some(&ns),
                json!({"metadata": {"name": format!("new-{next_new}")}}),
            )?;
            next_new += 1;
        }
        let compacted = sim.faults().compact();
        // The next event written (the first change queued on the stalled stream) is cut in half
        // and the connection aborted: the reflector resumes from a compacted revision.
        sim.faults().reset_mid_chunk();
        sim.faults().unstall();
        converge(
            &sim,
            "pods",
            informer.indexer(),
            &[("a", &seq_a), ("b", &seq_b)],
            Duration::from_secs(30),
        )
        .await
        .map_err(|f| crate::check::Failure(format!("round {round}: {f}")))?;

        let after = sim.counters();
        match relist {
            Relist::WatchList => ensure!(
                after.lists == 0 && after.watches > before.watches,
                "round {round}: watch-list mode should re-stream, not list: {} lists, {} → {} watches",
                after.lists,
                before.watches,
                after.watches
            ),
            _ => ensure!(
                after.lists > before.lists,
                "round {round}: no relist after compaction at {compacted} ({} lists before and after)",
                after.lists
            ),
        }
        for (name, seq, from) in [("a", &seq_a, tomb_a), ("b", &seq_b, tomb_b)] {
            let s = seq.lock();
            let got: Vec<&String> = s.tombstoned[from..].iter().map(|(k, _)| k).collect();
            let unique: BTreeSet<&String> = got.iter().copied().collect();
            ensure!(
                unique.len() == got.len(),
                "round {round}: handler {name} got duplicate tombstones: {got:?}"
            );
            let want: BTreeSet<&String> = deleted.iter().collect();
            ensure!(
                unique == want,
                "round {round}: handler {name} got tombstones for {} keys, {} were deleted; \
                 unexpected {:?}, missing {:?}",
                unique.len(),
                want.len(),
                unique.difference(&want).take(3).collect::<Vec<_>>(),
                want.difference(&unique).take(3).collect::<Vec<_>>()
            );
        }
        let s = seq_a.lock();
        ensure!(
            s.deletes == deletes_before,
            "round {round}: {} deletes with a final state, but the watch never delivered them",
            s.deletes - deletes_before
        );
        ensure!(
            s.adds - adds_before == PER_ROUND as u64,
            "round {round}: {} adds for {PER_ROUND} created pods",
            s.adds - adds_before
        );
        total_tombstones += deleted.len();
    }
    let c = sim.counters();
    cancel.cancel();
    factory.shutdown().await;
    Ok(format!(
        "{ROUNDS}×{PER_ROUND} deletes/updates/creates behind compactions: \
         {total_tombstones} tombstones, once each; {} lists, {} watches, {} pods match",
        c.lists,
        c.watches,
        informer.indexer().len()
    ))
}
