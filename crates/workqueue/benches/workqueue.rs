//! Throughput of the work queue and the delaying queue.
//!
//! - `add_get_done/{1,4,8}_workers`: one producer adds 10k distinct string keys while N tokio
//!   workers (on a multi-thread runtime with 2 worker threads) get and done them; then shutdown.
//! - `add_get_done/baseline_tokio_mpsc_1_consumer`: the same 10k keys through a tokio unbounded
//!   channel to one consumer, as a baseline measured in the same run.
//! - `delaying/add_after_100k`: 100k `add_after` calls with distinct keys and spread-out delays
//!   into one delaying queue (all pending in the heap at the end).
//! - `delaying/fire_100k_pending`: 100k pending items become due at once and are moved into the
//!   queue by the timer task and taken out by one worker.
//!
//! Run: `cargo bench -p workqueue`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use workqueue::{DelayingQueue, WorkQueue};

const KEYS: usize = 10_000;
const PENDING: usize = 100_000;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn keys(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("namespace-{}/object-{i}", i % 50))
        .collect()
}

async fn add_get_done(workers: usize, keys: Vec<String>) {
    let queue = WorkQueue::new();
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let queue = queue.clone();
        handles.push(tokio::spawn(async move {
            while let Some(key) = queue.get().await {
                queue.done(&key);
            }
        }));
    }
    for key in keys {
        queue.add(key);
    }
    queue.shutdown();
    for handle in handles {
        handle.await.expect("worker");
    }
}

fn bench_queue(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("add_get_done");
    group.throughput(Throughput::Elements(KEYS as u64));
    for workers in [1, 4, 8] {
        group.bench_function(format!("{workers}_workers"), |b| {
            b.iter_batched(
                || keys(KEYS),
                |keys| rt.block_on(add_get_done(workers, keys)),
                BatchSize::LargeInput,
            );
        });
    }
    group.bench_function("baseline_tokio_mpsc_1_consumer", |b| {
        b.iter_batched(
            || keys(KEYS),
            |keys| rt.block_on(mpsc_baseline(keys)),
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

/// The same traffic through a plain unbounded channel (no dedup, no one-worker-per-item rule):
/// what the queue's bookkeeping costs on top of moving the keys between tasks.
async fn mpsc_baseline(keys: Vec<String>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let consumer = tokio::spawn(async move {
        let mut n = 0usize;
        while let Some(key) = rx.recv().await {
            std::hint::black_box(&key);
            n += 1;
        }
        n
    });
    for key in keys {
        tx.send(key).expect("consumer alive");
    }
    drop(tx);
    assert_eq!(consumer.await.expect("consumer"), KEYS);
}

fn bench_delaying(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("delaying");
    group.sample_size(10);
    group.throughput(Throughput::Elements(PENDING as u64));
    group.bench_function("add_after_100k", |b| {
        b.iter_batched(
            || keys(PENDING),
            |keys| {
                rt.block_on(async {
                    let queue = DelayingQueue::new();
                    for (i, key) in keys.into_iter().enumerate() {
                        queue.add_after(key, Duration::from_secs(60 + (i as u64 * 7919) % 3600));
                    }
                    assert_eq!(queue.waiting_len(), PENDING);
                    queue.shutdown();
                })
            },
            BatchSize::LargeInput,
        );
    });
    group.bench_function("fire_100k_pending", |b| {
        b.iter_batched(
            || keys(PENDING),
            |keys| {
                rt.block_on(async {
                    let queue = DelayingQueue::new();
                    for (i, key) in keys.into_iter().enumerate() {
                        queue.add_after(key, Duration::from_millis(1 + (i as u64 % 5)));
                    }
                    let mut taken = 0;
                    while taken < PENDING {
                        let key = queue.get().await.expect("item");
                        queue.done(&key);
                        taken += 1;
                    }
                    queue.shutdown();
                })
            },
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

criterion_group!(benches, bench_queue, bench_delaying);
criterion_main!(benches);
