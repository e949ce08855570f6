//! Scenario 8: a workqueue controller (`Controller` runner over a `RateLimitingQueue`, fed by a
//! `KeyEnqueuer`) reconciles every change under churn, cut watches and a forced relist, while
//! failures are injected by key class: a panic then two errors, one error, one `Action::Retry`, or
//! none. At the end every key's last successful reconcile saw the server's resourceVersion (or
//! saw it absent), no key was reconciled by two workers at once, and no key's observed version went
//! backwards.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use controller::{Action, Controller};
use parking_lot::Mutex;
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{DynamicObject, Object};
use workqueue::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, KeyEnqueuer, MaxOf, RateLimitingQueue,
};

use crate::check::{converge, eventually, server_state, Outcome, Recorder, INJECTED_PANIC};
use crate::harness::{churn, config_for, fast_backoff, finish_all, pods, seed, synced};
use crate::{ensure, Opts};

#[derive(Default)]
struct Book {
    /// Per key: what the last successful reconcile saw (resourceVersion, or `None`: absent).
    last: HashMap<String, Option<u64>>,
    /// Per key: the largest version any successful reconcile saw.
    max: HashMap<String, u64>,
    attempts: HashMap<String, u32>,
    in_flight: HashSet<String>,
    violations: Vec<String>,
    reconciles: u64,
    failures: u64,
}

fn class(key: &str) -> u64 {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    h.finish() % 4
}

/// Runs the scenario.
pub async fn controller_retries(_: Opts) -> Outcome {
    let sim = SimServer::start().await?;
    seed(&sim, "pods", "ct", 2, 300, 100)?;
    let factory = crate::harness::factory(config_for(&sim)?).reflector_options(fast_backoff(false));
    let informer = factory.informer::<DynamicObject>(pods())?;
    // client-go's default controller limiter holds every retry to 10/s overall (bucket of 100),
    // which would stretch this many injected failures over minutes: the same shape, scaled up.
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new(MaxOf::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(2),
        )),
        Box::new(BucketRateLimiter::new(500.0, 200)),
    ]));
    informer.add_event_handler(KeyEnqueuer::new(queue.clone()))?;
    let (recorder, seq) = Recorder::new();
    informer.add_event_handler(recorder)?;
    let book: Arc<Mutex<Book>> = Arc::default();
    // Every watch (the first one too) ends after 500 events.
    sim.faults().end_watches_after(500);
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);

    let runner = {
        let indexer = informer.indexer().clone();
        let book = Arc::clone(&book);
        let (cancel, queue) = (cancel.clone(), queue.clone());
        tokio::spawn(async move {
            Controller::new(queue)
                .workers(4)
                .run(cancel, move |key: String| {
                    let book = Arc::clone(&book);
                    let seen = indexer.get_by_key(&key).map(|o| {
                        o.resource_version()
                            .and_then(|r| r.parse::<u64>().ok())
                            .unwrap_or(0)
                    });
                    let attempt = {
                        let mut b = book.lock();
                        if !b.in_flight.insert(key.clone()) {
                            b.violations
                                .push(format!("{key} reconciled by two workers at once"));
                        }
                        let a = b.attempts.entry(key.clone()).or_insert(0);
                        *a += 1;
                        *a
                    };
                    async move {
                        // Let other workers run meanwhile, so overlapping keys would show.
                        tokio::task::yield_now().await;
                        let finish = |b: &mut Book, ok: bool| {
                            b.in_flight.remove(&key);
                            if !ok {
                                b.failures += 1;
                            }
                        };
                        match (class(&key), attempt) {
                            (0, 1) => {
                                finish(&mut book.lock(), false);
                                std::panic::panic_any(INJECTED_PANIC)
                            }
                            (0, 2..=3) | (1, 1) => {
                                finish(&mut book.lock(), false);
                                return Err(format!("injected failure {attempt} for {key}"));
                            }
                            (2, 1) => {
                                finish(&mut book.lock(), false);
                                return Ok(Action::Retry);
                            }
                            _ => {}
                        }
                        let mut guard = book.lock();
                        let b = &mut *guard;
                        finish(b, true);
                        b.reconciles += 1;
                        if let Some(rv) = seen {
                            let max = b.max.entry(key.clone()).or_insert(0);
                            if rv < *max {
                                let m = *max;
                                b.violations.push(format!(
                                    "{key} reconciled at {rv} after having been seen at {m}"
                                ));
                            }
                            *max = (*max).max(rv);
                        }
                        b.last.insert(key, seen);
                        Ok::<_, String>(Action::Done)
                    }
                })
                .await
        })
    };
    synced(&informer, Duration::from_secs(30)).await?;

    let churns = vec![
        churn(&sim, "pods", "ct-0", 250, 200.0, 12.0, 100),
        churn(&sim, "pods", "ct-1", 250, 200.0, 12.0, 100),
    ];
    // Half-way, one 410 ERROR event: a relist, whose deletions reach the queue as tombstones.
    eventually("half the churn", Duration::from_secs(20), || {
        let ops: u64 = churns.iter().map(|c| c.ops()).sum();
        if ops >= 2_400 {
            Ok(())
        } else {
            Err(format!("{ops} ops"))
        }
    })
    .await?;
    sim.faults().error_event(410);
    let ops = finish_all(churns).await;
    converge(
        &sim,
        "pods",
        informer.indexer(),
        &[("recorder", &seq)],
        Duration::from_secs(30),
    )
    .await?;
    let detail = eventually(
        "every key's last reconcile to see the server's version",
        Duration::from_secs(60),
        || {
            let server = server_state(&sim, "pods")?;
            let b = book.lock();
            if !b.violations.is_empty() {
                // Reported below, after the wait.
                return Ok(String::new());
            }
            let wrong: BTreeMap<&String, (Option<&u64>, Option<u64>)> = b
                .last
                .iter()
                .filter(|(k, seen)| server.get(*k).copied() != **seen)
                .map(|(k, seen)| (k, (server.get(k), *seen)))
                .take(3)
                .collect();
            let never: Vec<(&String, u64, u32)> = server
                .keys()
                .filter(|k| !b.last.contains_key(*k))
                .map(|k| (k, class(k), b.attempts.get(k).copied().unwrap_or(0)))
                .take(5)
                .collect();
            if wrong.is_empty() && never.is_empty() && queue.is_empty() && queue.waiting_len() == 0 {
                Ok(format!(
                    "{} present and {} deleted keys",
                    server.len(),
                    b.last.len() - server.len()
                ))
            } else {
                Err(format!(
                    "stale (server, reconciled): {wrong:?}; never reconciled (key, class, attempts): {never:?}; queue {} + {} waiting",
                    queue.len(),
                    queue.waiting_len()
                ))
            }
        },
    )
    .await?;
    {
        let b = book.lock();
        ensure!(
            b.violations.is_empty(),
            "{} controller violations, first {:?}",
            b.violations.len(),
            &b.violations[..b.violations.len().min(3)]
        );
    }
    let tombstones = seq.lock().tombstones;
    cancel.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(10), runner).await;
    ensure!(
        matches!(stopped, Ok(Ok(()))),
        "the controller runner did not stop cleanly within 10 s: {stopped:?}"
    );
    factory.shutdown().await;
    let b = book.lock();
    let keys = b.attempts.len();
    let classes: [usize; 4] =
        std::array::from_fn(|c| b.attempts.keys().filter(|k| class(k) == c as u64).count());
    // Each key of class 0 fails 3 times, of classes 1 and 2 once.
    let want_failures = (classes[0] * 3 + classes[1] + classes[2]) as u64;
    ensure!(
        b.failures == want_failures,
        "{} injected failures recorded, want {want_failures} for key classes {classes:?}",
        b.failures
    );
    Ok(format!(
        "{ops} ops; {} reconciles + {} injected failures (panic/err/retry) over {keys} keys, \
         all retried; {tombstones} tombstones; {detail} last reconciled at the server's state",
        b.reconciles, b.failures
    ))
}
