//! Multi-threaded stress test of the work queue's invariants (contract E1.1, E2–E6).
//!
//! 4 producers add 100k times over 1k keys while 8 workers process them, then the queue is shut
//! down with drain. Checked:
//! - **one worker per item**: no key is ever processed by two workers at once;
//! - **no lost update**: every add that happened after a key's last processing started is
//!   followed by one more processing (each add bumps the key's version first; each processing
//!   records the version it saw when it started; at the end every key's last seen version is its
//!   final version);
//! - **nothing lost after shutdown with drain**: the workers see every queued key before `get`
//!   reports shutdown, and the drain returns only once nothing is processing.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use workqueue::WorkQueue;

const PRODUCERS: usize = 4;
const WORKERS: usize = 8;
const ADDS: usize = 100_000;
const KEYS: usize = 1_000;

struct Keys {
    /// Bumped before every add of the key.
    version: Vec<AtomicU64>,
    /// The highest version a processing of the key saw when it started.
    processed_version: Vec<AtomicU64>,
    /// Set while a worker processes the key.
    in_flight: Vec<AtomicBool>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn invariants_one_worker_per_item_no_lost_update_nothing_lost_after_drain() {
    let keys = Arc::new(Keys {
        version: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
        processed_version: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
        in_flight: (0..KEYS).map(|_| AtomicBool::new(false)).collect(),
    });
    let overlaps = Arc::new(AtomicUsize::new(0));
    let processings = Arc::new(AtomicUsize::new(0));
    let queue = WorkQueue::<usize>::new();

    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (queue, keys) = (queue.clone(), keys.clone());
            let (overlaps, processings) = (overlaps.clone(), processings.clone());
            tokio::spawn(async move {
                while let Some(key) = queue.get().await {
                    if keys.in_flight[key].swap(true, Ordering::SeqCst) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    let seen = keys.version[key].load(Ordering::SeqCst);
                    keys.processed_version[key].fetch_max(seen, Ordering::SeqCst);
                    processings.fetch_add(1, Ordering::Relaxed);
                    if key % 7 == 0 {
                        tokio::task::yield_now().await; // let adds land while processing
                    }
                    keys.in_flight[key].store(false, Ordering::SeqCst);
                    queue.done(&key);
                }
            })
        })
        .collect();

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (queue, keys) = (queue.clone(), keys.clone());
            tokio::spawn(async move {
                for i in 0..ADDS / PRODUCERS {
                    let key = (i * 31 + p * 257) % KEYS;
                    keys.version[key].fetch_add(1, Ordering::SeqCst);
                    queue.add(key);
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for producer in producers {
        producer.await.unwrap();
    }

    queue.shutdown_with_drain().await;
    for worker in workers {
        worker.await.unwrap();
    }

    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "one worker per item violated"
    );
    for key in 0..KEYS {
        assert_eq!(
            keys.processed_version[key].load(Ordering::SeqCst),
            keys.version[key].load(Ordering::SeqCst),
            "no lost update violated for key {key}"
        );
    }
    let processings = processings.load(Ordering::SeqCst);
    assert!(
        (KEYS..=ADDS).contains(&processings),
        "between one processing per key and one per add, got {processings}"
    );
    assert_eq!(queue.len(), 0, "nothing left after drain");
    assert_eq!(queue.get().await, None);
}
