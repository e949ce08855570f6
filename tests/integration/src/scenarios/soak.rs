//! Scenario 9: a soak at high churn (1 500 pod events/s plus configmap churn, watches cut every
//! 5 000 events) with a pods informer feeding a recorder and a controller, sampling the process's
//! resident memory every second.
//!
//! The memory rule: the first third of the run is warm-up (the initial list, the churn's key
//! space filling, the server's event log reaching its 10 000-event cap, allocator pools growing).
//! Over the remaining two thirds, a least-squares line through the samples must not grow by more
//! than `max(24 MiB, 10 % of the warm-up peak)`, and no sample may exceed
//! `1.5 × warm-up peak + 64 MiB`. A leak of 1 KiB per event (about 1.5 MiB/s here) grows by
//! well over 100 MiB in a two-minute run; allocator noise moves the fitted line by a few MiB.

use std::sync::Arc;
use std::time::{Duration, Instant};

use controller::{Action, Controller};
use parking_lot::Mutex;
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{CompactObject, DynamicObject};
use workqueue::{default_controller_rate_limiter, KeyEnqueuer, RateLimitingQueue};

use crate::check::{converge, rss_bytes, Failure, Outcome, Recorder};
use crate::harness::{churn, config_for, configmaps, fast_backoff, pods, seed, synced, Progress};
use crate::{ensure, Opts};

const MIB: f64 = 1024.0 * 1024.0;

/// The verdict on a series of RSS samples (bytes, one per second).
pub fn memory_verdict(samples: &[u64]) -> Result<String, String> {
    if samples.len() < 6 {
        return Err(format!("only {} memory samples", samples.len()));
    }
    let mib: Vec<f64> = samples.iter().map(|&b| b as f64 / MIB).collect();
    let (warm, rest) = mib.split_at(mib.len() / 3);
    let warm_peak = warm.iter().copied().fold(0.0, f64::max);
    let peak = rest.iter().copied().fold(0.0, f64::max);
    // Least-squares slope (MiB per sample) over the samples after warm-up.
    let n = rest.len() as f64;
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = rest.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, y) in rest.iter().enumerate() {
        let dx = i as f64 - mean_x;
        sxy += dx * (y - mean_y);
        sxx += dx * dx;
    }
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let growth = slope * (n - 1.0);
    let figures = format!(
        "RSS MiB: warm-up peak {warm_peak:.0}, then mean {mean_y:.0}, peak {peak:.0}, \
         fitted growth {growth:+.1} over {:.0}s",
        n - 1.0
    );
    let growth_limit = (warm_peak * 0.10).max(24.0);
    let peak_limit = warm_peak * 1.5 + 64.0;
    if growth > growth_limit {
        return Err(format!("{figures}: grows more than {growth_limit:.0} MiB"));
    }
    if peak > peak_limit {
        return Err(format!("{figures}: peak above {peak_limit:.0} MiB"));
    }
    Ok(figures)
}

/// Runs the soak for `opts.soak_seconds`.
pub async fn soak(opts: Opts) -> Outcome {
    let seconds = opts.soak_seconds as f64;
    let sim = SimServer::start().await?;
    seed(&sim, "pods", "soak", 3, 3_000, 1_000)?;
    let factory = crate::harness::factory(config_for(&sim)?).reflector_options(fast_backoff(false));
    let pod_informer = factory.informer::<CompactObject>(pods())?;
    let cm_informer = factory.informer::<DynamicObject>(configmaps())?;
    let queue: RateLimitingQueue<String> =
        RateLimitingQueue::new(default_controller_rate_limiter());
    pod_informer.add_event_handler(KeyEnqueuer::new(queue.clone()))?;
    let (pr, pod_seq) = Recorder::new();
    let pod_reg = pod_informer.add_event_handler(pr)?;
    let (cr, cm_seq) = Recorder::new();
    cm_informer.add_event_handler(cr)?;
    sim.faults().end_watches_after(5_000);
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    let reconciles = Arc::new(Mutex::new(0u64));
    let runner = {
        let indexer = pod_informer.indexer().clone();
        let reconciles = Arc::clone(&reconciles);
        let (cancel, queue) = (cancel.clone(), queue.clone());
        tokio::spawn(async move {
            Controller::new(queue)
                .workers(2)
                .run(cancel, move |key: String| {
                    // A real controller reads the cached object; this one only counts.
                    let _cached = indexer.get_by_key(&key);
                    *reconciles.lock() += 1;
                    async move { Ok::<_, String>(Action::Done) }
                })
                .await
        })
    };
    synced(&pod_informer, Duration::from_secs(60)).await?;
    synced(&cm_informer, Duration::from_secs(60)).await?;

    let churns = vec![
        churn(&sim, "pods", "soak-0", 1_000, 500.0, seconds, 1_000),
        churn(&sim, "pods", "soak-1", 1_000, 500.0, seconds, 1_000),
        churn(&sim, "pods", "soak-2", 1_000, 500.0, seconds, 1_000),
        churn(&sim, "configmaps", "soak-0", 500, 100.0, seconds, 500),
    ];
    let samples = Arc::new(Mutex::new(Vec::<u64>::new()));
    let progress = {
        let (informer, reg, samples) =
            (pod_informer.clone(), pod_reg.clone(), Arc::clone(&samples));
        let queue = queue.clone();
        Progress::start(
            "soak",
            Duration::from_secs(10),
            move || reg.processed(),
            move || {
                format!(
                    "pods cached={}  queue={}  rss={:.0} MiB",
                    informer.indexer().len(),
                    queue.len(),
                    samples.lock().last().copied().unwrap_or(0) as f64 / MIB
                )
            },
        )
    };
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while started.elapsed().as_secs_f64() < seconds {
        tick.tick().await;
        let rss = rss_bytes()?;
        samples.lock().push(rss);
    }
    let mut ops = 0;
    for c in churns {
        ops += c.finished().await;
    }
    drop(progress);
    let rate = ops as f64 / started.elapsed().as_secs_f64();
    let memory = memory_verdict(&samples.lock()).map_err(Failure)?;
    let pods_detail = converge(
        &sim,
        "pods",
        pod_informer.indexer(),
        &[("pods", &pod_seq)],
        Duration::from_secs(60),
    )
    .await?;
    converge(
        &sim,
        "configmaps",
        cm_informer.indexer(),
        &[("configmaps", &cm_seq)],
        Duration::from_secs(30),
    )
    .await?;
    crate::check::eventually(
        "the controller queue to drain",
        Duration::from_secs(30),
        || {
            if queue.is_empty() {
                Ok(())
            } else {
                Err(format!("{} queued", queue.len()))
            }
        },
    )
    .await?;
    let c = sim.counters();
    cancel.cancel();
    ensure!(
        matches!(
            tokio::time::timeout(Duration::from_secs(10), runner).await,
            Ok(Ok(()))
        ),
        "the controller did not stop within 10 s"
    );
    factory.shutdown().await;
    Ok(format!(
        "{ops} ops in {seconds:.0}s ({rate:.0}/s), {} reconciles, {} watches, {} MB sent; {memory}; {pods_detail}",
        reconciles.lock(),
        c.watches,
        c.bytes / 1_000_000
    ))
}

#[cfg(test)]
mod tests {
    use super::memory_verdict;

    const M: u64 = 1024 * 1024;

    #[test]
    fn flat_or_noisy_memory_passes_and_a_steady_leak_fails() {
        let flat: Vec<u64> = (0..120).map(|i| (200 + (i % 7) * 3) * M).collect();
        assert!(memory_verdict(&flat).is_ok(), "{:?}", memory_verdict(&flat));
        // Warm-up growth is fine.
        let warming: Vec<u64> = (0..120).map(|i| (100 + i.min(40) * 2) * M).collect();
        assert!(
            memory_verdict(&warming).is_ok(),
            "{:?}",
            memory_verdict(&warming)
        );
        // 0.5 MiB/s after warm-up: 40 MiB over the last 80 s.
        let leak: Vec<u64> = (0..120).map(|i| (200 + i / 2) * M).collect();
        assert!(
            memory_verdict(&leak).is_err(),
            "{:?}",
            memory_verdict(&leak)
        );
        // A jump.
        let mut jump = flat.clone();
        jump[100] = 600 * M;
        assert!(
            memory_verdict(&jump).is_err(),
            "{:?}",
            memory_verdict(&jump)
        );
    }
}
