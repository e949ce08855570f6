//! Several producer tasks and one consumer on a multi-thread runtime: every delta produced is
//! popped exactly once, and each key's deltas pop in the order they were produced.

mod common;

use std::collections::HashMap;

use common::*;
use delta_fifo::{DeltaFifo, DeltaFifoOptions, FifoError, ProcessError};

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
