//! Several producer tasks and one consumer on a multi-thread runtime: every delta produced is
//! popped exactly once, and each key's deltas pop in the order they were produced. The same for
//! an atomic RealFifo that releases its lock while processing (invariant R2), with the producer
//! made to queue while the consumer processes.

mod common;

use std::collections::HashMap;

use common::*;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use delta_fifo::{
    Atomic, DeltaFifo, DeltaFifoOptions, DeltaType, FifoError, Popped, ProcessError, RealFifo,
    RealFifoOptions,
};
use parking_lot::{Condvar, Mutex};

const PRODUCERS: i64 = 4;
const PER_PRODUCER: i64 = 5_000;
const KEYS_PER_PRODUCER: i64 = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_delta_pops_exactly_once_in_per_key_order() {
    let fifo: DeltaFifo<Obj> = DeltaFifo::new(DeltaFifoOptions::new());
    let consumer = {
        let fifo = fifo.clone();
        tokio::spawn(async move {
            let mut seen: HashMap<String, Vec<i64>> = HashMap::new();
            loop {
                let result = fifo
                    .pop(|deltas, _| {
                        let vals: Vec<(String, i64)> = deltas
                            .iter()
                            .map(|d| {
                                let o = d.object().expect("updates carry objects");
                                (o.meta.name.clone().unwrap_or_default(), o.val)
                            })
                            .collect();
                        Ok::<_, ProcessError>(vals)
                    })
                    .await;
                match result {
                    Ok(Some(vals)) => {
                        for (name, val) in vals {
                            seen.entry(name).or_default().push(val);
                        }
                    }
                    Ok(None) => unreachable!("no requeue here"),
                    Err(FifoError::Closed) => return seen,
                    Err(e) => panic!("unexpected pop error: {e}"),
                }
            }
        })
    };

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let fifo = fifo.clone();
            tokio::spawn(async move {
                for i in 0..PER_PRODUCER {
                    // Keys are disjoint per producer, so each key has one writer and a defined order.
                    let key = format!("p{p}-k{}", i % KEYS_PER_PRODUCER);
                    fifo.update(obj(&key, i)).unwrap();
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    fifo.close();
    let seen = consumer.await.unwrap();

    assert_eq!(seen.len() as i64, PRODUCERS * KEYS_PER_PRODUCER);
    let total: usize = seen.values().map(Vec::len).sum();
    assert_eq!(
        total as i64,
        PRODUCERS * PER_PRODUCER,
        "every delta popped exactly once"
    );
    for (key, vals) in &seen {
        let k: i64 = key.rsplit('k').next().unwrap().parse().unwrap();
        let want: Vec<i64> = (0..PER_PRODUCER)
            .filter(|i| i % KEYS_PER_PRODUCER == k)
            .collect();
        assert_eq!(vals, &want, "deltas of {key} in production order");
    }
}

/// The unlocking test's producer runs in steps the consumer allows: the first before any pop,
/// each later one from inside a pop's processing.
#[derive(Default)]
struct Steps {
    /// (changes queued, changes allowed).
    state: Mutex<(i64, i64)>,
    moved: Condvar,
}

impl Steps {
    /// Producer side: waits until change `i` is allowed.
    fn wait_allowed(&self, i: i64) {
        let mut state = self.state.lock();
        while i >= state.1 {
            self.moved.wait(&mut state);
        }
    }

    fn queued(&self, n: i64) {
        self.state.lock().0 = n;
        self.moved.notify_all();
    }

    fn allow(&self, n: i64) {
        self.state.lock().1 += n;
        self.moved.notify_all();
    }

    /// Consumer side: allows `step` more changes and waits until the producer has queued at
    /// least one of them, or everything. A lock held while processing would stop the producer:
    /// the generous limit turns that into a failure instead of a hang (it is never what makes the
    /// test pass). True when the producer queued meanwhile.
    fn let_the_producer_in(&self, step: i64, total: i64) -> bool {
        let mut state = self.state.lock();
        let before = state.0;
        if before == total {
            return false;
        }
        state.1 += step;
        self.moved.notify_all();
        while state.0 == before {
            let timed_out = self
                .moved
                .wait_for(&mut state, Duration::from_secs(30))
                .timed_out();
            assert!(
                !timed_out,
                "the producer could not queue while an entry was processed"
            );
        }
        true
    }
}

/// R2: a producer keeps queueing while the consumer processes with the lock released (each pop
/// waits until the producer has queued more), and still every change pops exactly once, each
/// key's changes in the order they were queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlocked_real_fifo_loses_and_reorders_nothing_while_a_producer_queues() {
    // Fewer than the depth at which processing keeps the lock again (B15.3, tested in
    // real_fifo.rs), so every pop here is processed unlocked.
    const CHANGES: i64 = 1_900;
    const KEYS: i64 = 37;
    assert!((CHANGES as usize) < delta_fifo::UNLOCK_WHILE_PROCESSING_MAX_DEPTH);
    let fifo: RealFifo<Obj> = RealFifo::new(RealFifoOptions::atomic(Atomic {
        emit_bookmarks: false,
        unlock_while_processing: true,
    }));
    let steps = Arc::new(Steps::default());
    steps.allow(10);
    let producer = {
        let (fifo, steps) = (fifo.clone(), Arc::clone(&steps));
        std::thread::spawn(move || {
            for i in 0..CHANGES {
                steps.wait_allowed(i);
                let key = format!("k{}", i % KEYS);
                if i % 10 == 9 {
                    fifo.delete(obj(&key, i)).unwrap();
                } else {
                    fifo.update(obj(&key, i)).unwrap();
                }
                steps.queued(i + 1);
            }
        })
    };
    let overlapped = Arc::new(AtomicI64::new(0));
    let mut seen: HashMap<String, Vec<(DeltaType, i64)>> = HashMap::new();
    let mut popped = 0;
    while popped < CHANGES {
        let (steps, overlapped) = (Arc::clone(&steps), Arc::clone(&overlapped));
        let got = fifo
            .pop_batch(16, move |entry, _| {
                let deltas: Vec<_> = match entry {
                    Popped::Deltas(d) => d.iter().cloned().collect(),
                    Popped::Batch(b) => b.to_vec(),
                    _ => unreachable!("only changes are queued"),
                };
                if steps.let_the_producer_in(10, CHANGES) {
                    overlapped.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<_, ProcessError>(deltas)
            })
            .await
            .unwrap()
            .unwrap();
        for delta in got {
            let o = delta.object().expect("changes carry objects");
            let name = o.meta.name.clone().unwrap_or_default();
            seen.entry(name).or_default().push((delta.kind, o.val));
            popped += 1;
        }
    }
    producer.join().unwrap();
    assert!(fifo.is_empty());
    assert!(
        overlapped.load(Ordering::Relaxed) > 0,
        "the producer queued while entries were processed"
    );
    for k in 0..KEYS {
        let want: Vec<(DeltaType, i64)> = (0..CHANGES)
            .filter(|i| i % KEYS == k)
            .map(|i| {
                let kind = if i % 10 == 9 {
                    DeltaType::Deleted
                } else {
                    DeltaType::Updated
                };
                (kind, i)
            })
            .collect();
        assert_eq!(
            seen.get(&format!("k{k}")),
            Some(&want),
            "k{k}: every change once, in the order queued"
        );
    }
}
