//! The `hostile-*` scenarios: an informer (`DynamicObject`) reaches the simulated API server
//! through [`HostileServer`], which misbehaves in one way per scenario: on the first list, on a
//! relist, or on watches. Each asserts, over a window of misbehaviour:
//! - the cache is exactly what it was (key → resourceVersion), or, on a first list, never synced
//!   and empty;
//! - no handler saw a delete (nor anything at all, on a first list);
//! - the error reached the watch error handler and the logs, with the words that say what it was;
//! - the requests made stay under a stated bound (backoff and rate limits hold);
//! - the process's resident memory grew by less than a stated bound;
//!
//! then that once the server behaves again the informer converges (cache = server, every
//! handler's history consistent), having never deleted anything.
//!
//! The informer keeps the library's defaults except where a default would make a scenario slow:
//! a fast backoff (50 ms to 800 ms), a 2 s watch idle timeout and request timeout. List pages keep
//! their default bounds, so that the endless body shows what it costs a default informer: at
//! most [`ENDLESS_MAX_RSS_GROWTH`] (each page is bounded by what its `limit` asks for, 258 MiB
//! for 500 items, and asked for again smaller when it overruns).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::json;
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::DynamicObject;
use workqueue::shared_informer::reflector::{ClusterConfig, HttpListerWatcher, ReflectorError};
use workqueue::shared_informer::{InformerOptions, SharedIndexInformer};

use crate::check::{cache_state, converge, eventually, rss_bytes, Outcome, Recorder};
use crate::harness::{configmaps, fast_backoff, seed, synced};
use crate::hostile::{HostileServer, ListAct, WatchAct};
use crate::{ensure, logs, Opts};

/// When the server starts misbehaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// From the first request: the informer must never report synced.
    FirstList,
    /// After the informer synced: its watch is refused with 410, so it relists into the fault.
    Relist,
    /// After the informer synced: only watches misbehave.
    Watch,
}

/// One misbehaviour and what it must look like from the outside.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// The scenario's name.
    pub name: &'static str,
    /// What the server does.
    pub about: &'static str,
    /// How lists are answered during the window.
    pub list: ListAct,
    /// How watches are answered during the window.
    pub watch: WatchAct,
    /// When the window starts.
    pub phase: Phase,
    /// Watch-list streaming on.
    pub watch_list: bool,
    /// Words the reported error and a log line must contain (case-insensitive).
    pub expect: &'static str,
}

const OBJECTS: usize = 120;
const WINDOW: Duration = Duration::from_secs(4);
/// Lists plus watches during the window: a fast backoff (50 ms, doubling to 800 ms) allows about
/// ten attempts in four seconds, each one list or watch and at most two pages.
const MAX_REQUESTS: u64 = 40;
/// Resident memory growth allowed during the window.
const MAX_RSS_GROWTH: u64 = 256 << 20;
/// Resident memory growth allowed while a list body never ends: at most 512 MB since list pages
/// are bounded by their `limit` (rule H3), where the 1 GiB page bound of old cost 1,065 MB.
const ENDLESS_MAX_RSS_GROWTH: u64 = 512_000_000;

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

/// Runs one case (see the module doc).
pub async fn run(_: Opts, case: &'static Case) -> Outcome {
    let sim = SimServer::builder().http2(false).start().await?;
    seed(&sim, "configmaps", "hostile", 2, OBJECTS, 100)?;
    let hostile = HostileServer::start(sim.addr()).await?;
    let mut config = ClusterConfig::new(&hostile.url())?;
    config.request_timeout = Some(Duration::from_secs(2));
    let lw = HttpListerWatcher::<DynamicObject>::new(&config, configmaps())?
        .watch_idle_timeout(Duration::from_secs(2));
    let informer = SharedIndexInformer::new(
        lw,
        InformerOptions {
            queue: crate::harness::queue(),
            name: "hostile".into(),
            reflector: fast_backoff(case.watch_list),
            ..InformerOptions::default()
        },
    );
    let (recorder, seq) = Recorder::new();
    informer.add_event_handler(recorder)?;
    let reported: Arc<Mutex<Vec<String>>> = Arc::default();
    informer.set_watch_error_handler(Arc::new({
        let reported = reported.clone();
        move |e: &ReflectorError| {
            let mut r = reported.lock();
            if r.len() < 1000 {
                r.push(e.to_string());
            }
        }
    }))?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();

    let mut before = None;
    if case.phase == Phase::FirstList {
        hostile.set(case.list, case.watch);
    }
    tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    if case.phase != Phase::FirstList {
        synced(&informer, Duration::from_secs(30)).await?;
        eventually("the watch to open", Duration::from_secs(10), || {
            match sim.counters().active_watches {
                0 => Err("no watch open".to_string()),
                _ => Ok(()),
            }
        })
        .await?;
        before = Some(cache_state(informer.indexer()));
        reported.lock().clear();
    }
    let mark = logs::mark();
    let (lists0, watches0) = hostile.counts();
    let rss0 = rss_bytes()?;
    if case.phase != Phase::FirstList {
        // A relist only happens when the watch says so: refuse it as a compacted server would.
        let watch = match case.phase {
            Phase::Relist => WatchAct::Expired,
            _ => case.watch,
        };
        hostile.set(case.list, watch);
    }

    // The window: nothing may change however long the server misbehaves; memory is sampled.
    let mut peak = rss0;
    let end = tokio::time::Instant::now() + WINDOW;
    while tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(100)).await;
        peak = peak.max(rss_bytes()?);
        match &before {
            None => ensure!(
                !informer.has_synced() && informer.indexer().is_empty(),
                "synced with {} objects from a server that never answered a list",
                informer.indexer().len()
            ),
            Some(before) => {
                let now = cache_state(informer.indexer());
                ensure!(
                    &now == before,
                    "the cache changed: {}",
                    crate::check::diff(before, &now).unwrap_or_default()
                );
            }
        }
    }
    let (lists, watches) = hostile.counts();
    let requests = (lists - lists0) + (watches - watches0);
    {
        let s = seq.lock();
        ensure!(
            s.deletes + s.tombstones == 0,
            "{} deletes and {} tombstones during the window",
            s.deletes,
            s.tombstones
        );
        if case.phase == Phase::FirstList {
            ensure!(
                s.events() == 0,
                "{} notifications before any list",
                s.events()
            );
        }
    }
    ensure!(
        requests <= MAX_REQUESTS,
        "{requests} requests in {WINDOW:?} (at most {MAX_REQUESTS})"
    );
    let growth = peak.saturating_sub(rss0);
    let max_growth = match case.list {
        ListAct::Endless => ENDLESS_MAX_RSS_GROWTH,
        _ => MAX_RSS_GROWTH,
    };
    ensure!(
        growth <= max_growth,
        "resident memory grew by {} MB (at most {} MB)",
        growth / 1_000_000,
        max_growth / 1_000_000
    );
    let expect = lower(case.expect);
    let errors = reported.lock().clone();
    ensure!(
        errors.iter().any(|e| lower(e).contains(&expect)),
        "no reported error mentions {:?}; reported: {:?}",
        case.expect,
        &errors[..errors.len().min(5)]
    );
    let lines = logs::since(mark);
    ensure!(
        lines.iter().any(|l| lower(l).contains(&expect)),
        "no WARN/ERROR log line mentions {:?}; {} lines, last: {:?}",
        case.expect,
        lines.len(),
        lines.last()
    );

    // Recovery: the server behaves, changes resume, and the informer converges.
    hostile.set(ListAct::Forward, WatchAct::Forward);
    for i in 0..3 {
        sim.create(
            "configmaps",
            Some("hostile-0"),
            json!({"metadata": {"name": format!("after-{i}")}, "data": {"i": i.to_string()}}),
        )?;
    }
    sim.patch(
        "configmaps",
        Some("hostile-1"),
        "seed-1",
        &json!({"metadata": {"labels": {"touched": "yes"}}}),
    )?;
    let detail = converge(
        &sim,
        "configmaps",
        informer.indexer(),
        &[("recorder", &seq)],
        Duration::from_secs(30),
    )
    .await?;
    let s = seq.lock();
    ensure!(
        s.deletes + s.tombstones == 0,
        "{} deletes and {} tombstones after recovery",
        s.deletes,
        s.tombstones
    );
    Ok(format!(
        "{requests} requests, {} errors reported, RSS +{} MB (at most {}) in {WINDOW:?}; recovered: {detail}",
        errors.len(),
        growth / 1_000_000,
        max_growth / 1_000_000
    ))
}

/// Every case, by scenario name.
pub static CASES: [Case; 14] = [
    Case {
        name: "hostile-first-list-status-200",
        about: "the first list answered 200 with a Status body",
        list: ListAct::StatusWithOk,
        watch: WatchAct::Forward,
        phase: Phase::FirstList,
        watch_list: false,
        expect: "an aggregated API server said no",
    },
    Case {
        name: "hostile-relist-status-200",
        about: "a relist answered 200 with a Status body",
        list: ListAct::StatusWithOk,
        watch: WatchAct::Forward,
        phase: Phase::Relist,
        watch_list: false,
        expect: "an aggregated API server said no",
    },
    Case {
        name: "hostile-relist-empty-object",
        about: "a relist answered 200 with {}",
        list: ListAct::EmptyObject,
        watch: WatchAct::Forward,
        phase: Phase::Relist,
        watch_list: false,
        expect: "not a list: no kind",
    },
    Case {
        name: "hostile-relist-html",
        about: "a relist answered 200 with an HTML page",
        list: ListAct::Html,
        watch: WatchAct::Forward,
        phase: Phase::Relist,
        watch_list: false,
        expect: "not JSON of a list",
    },
    Case {
        name: "hostile-relist-garbage-http",
        about: "a relist answered with bytes that are not HTTP",
        list: ListAct::Garbage,
        watch: WatchAct::Forward,
        phase: Phase::Relist,
        watch_list: false,
        expect: "transport",
    },
    Case {
        name: "hostile-relist-cut-mid-body",
        about: "a relist's body cut halfway, connection closed",
        list: ListAct::ClosedMidBody,
        watch: WatchAct::Forward,
        phase: Phase::Relist,
        watch_list: false,
        expect: "reading the body",
    },
    Case {
        name: "hostile-first-list-endless-body",
        about: "the first list's body never ends",
        list: ListAct::Endless,
        watch: WatchAct::Forward,
        phase: Phase::FirstList,
        watch_list: false,
        expect: "exceeds the maximum",
    },
    Case {
        name: "hostile-first-list-repeated-continue",
        about: "the first list's continue token repeats forever",
        list: ListAct::RepeatContinue,
        watch: WatchAct::Forward,
        phase: Phase::FirstList,
        watch_list: false,
        expect: "repeated the continue token",
    },
    Case {
        name: "hostile-first-list-401",
        about: "the first list answered 401 with its Status",
        list: ListAct::Unauthorized,
        watch: WatchAct::Forward,
        phase: Phase::FirstList,
        watch_list: false,
        expect: "unauthorized",
    },
    Case {
        name: "hostile-relist-403",
        about: "a relist answered 403 with its Status",
        list: ListAct::Forbidden,
        watch: WatchAct::Forward,
        phase: Phase::Relist,
        watch_list: false,
        expect: "forbidden",
    },
    Case {
        name: "hostile-watch-list-410",
        about: "every watch-list request answered 410 Expired",
        list: ListAct::Forward,
        watch: WatchAct::WatchListExpired,
        phase: Phase::FirstList,
        watch_list: true,
        expect: "too old resource version",
    },
    Case {
        name: "hostile-watch-silent",
        about: "watches answered with headers, then silence",
        list: ListAct::Forward,
        watch: WatchAct::Silent,
        phase: Phase::Watch,
        watch_list: false,
        expect: "received nothing",
    },
    Case {
        name: "hostile-watch-never-answered",
        about: "watch requests read and never answered",
        list: ListAct::Forward,
        watch: WatchAct::NeverAnswered,
        phase: Phase::Watch,
        watch_list: false,
        expect: "timed out",
    },
    Case {
        name: "hostile-watch-unknown-event",
        about: "watches send an event of an unknown type",
        list: ListAct::Forward,
        watch: WatchAct::UnknownEventType,
        phase: Phase::Watch,
        watch_list: false,
        expect: "unknown type",
    },
];
