//! DeltaFIFO throughput: 1M add/update operations over 10k keys with one popping consumer, either
//! applying every popped item to an indexer as an informer does, or only counting deltas (the
//! queue's own cost). Run with
//! `cargo bench -p delta-fifo --bench fifo`.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use delta_fifo::store_index::{DynamicObject, Indexer, Indexers};
use delta_fifo::{
    DeltaFifo, DeltaFifoOptions, DeltaType, FifoError, Popped, ProcessError, RealFifo,
    RealFifoOptions,
};

const OPS: usize = 1_000_000;
const KEYS: usize = 10_000;

fn objects() -> Vec<Arc<DynamicObject>> {
    (0..KEYS)
        .map(|i| {
            Arc::new(
                DynamicObject::new("v1", "Pod")
                    .within(format!("ns-{}", i % 100))
                    .named(format!("pod-{i}"))
                    .with_resource_version(i.to_string()),
            )
        })
        .collect()
}

fn apply(
    cache: &Indexer<DynamicObject>,
    deltas: &delta_fifo::Deltas<DynamicObject>,
) -> Result<(), ProcessError> {
    for delta in deltas {
        if let (kind, Some(obj)) = (delta.kind, delta.object()) {
            if kind != DeltaType::Deleted {
                cache
                    .update(Arc::clone(obj))
                    .map_err(ProcessError::failed)?;
            }
        }
    }
    Ok(())
}

fn bench(c: &mut Criterion) {
    let objs = objects();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("fifo");
    group.sample_size(10);
    group.throughput(Throughput::Elements(OPS as u64));

    group.bench_function("delta_fifo_1M_ops_10k_keys_one_consumer", |b| {
        b.iter(|| {
            rt.block_on(async {
                let cache: Indexer<DynamicObject> =
                    Indexer::new(Indexers::new().with_namespace_index());
                let fifo = DeltaFifo::new(DeltaFifoOptions::new().known_objects(cache.clone()));
                let consumer = {
                    let fifo = fifo.clone();
                    tokio::spawn(async move {
                        loop {
                            match fifo.pop(|d, _| apply(&cache, d)).await {
                                Ok(_) => {}
                                Err(FifoError::Closed) => return,
                                Err(e) => panic!("{e}"),
                            }
                        }
                    })
                };
                for i in 0..OPS {
                    let obj = Arc::clone(&objs[i % KEYS]);
                    if i < KEYS {
                        fifo.add(obj).expect("add");
                    } else {
                        fifo.update(obj).expect("update");
                    }
                }
                fifo.close();
                consumer.await.expect("consumer");
            })
        })
    });

    group.bench_function("delta_fifo_1M_ops_10k_keys_counting_consumer", |b| {
        b.iter(|| {
            rt.block_on(async {
                let fifo = DeltaFifo::new(DeltaFifoOptions::new());
                let consumer = {
                    let fifo = fifo.clone();
                    tokio::spawn(async move {
                        let mut deltas = 0usize;
                        loop {
                            match fifo.pop(|d, _| Ok::<_, ProcessError>(d.len())).await {
                                Ok(n) => deltas += n.unwrap_or(0),
                                Err(FifoError::Closed) => return deltas,
                                Err(e) => panic!("{e}"),
                            }
                        }
                    })
                };
                for i in 0..OPS {
                    fifo.update(Arc::clone(&objs[i % KEYS])).expect("update");
                }
                fifo.close();
                assert_eq!(consumer.await.expect("consumer"), OPS);
            })
        })
    });

    group.bench_function("real_fifo_1M_ops_10k_keys_one_consumer", |b| {
        b.iter(|| {
            rt.block_on(async {
                let cache: Indexer<DynamicObject> =
                    Indexer::new(Indexers::new().with_namespace_index());
                let fifo = RealFifo::new(RealFifoOptions::new(cache.clone()));
                let consumer = {
                    let fifo = fifo.clone();
                    tokio::spawn(async move {
                        loop {
                            let popped = fifo.pop(|popped, _| match popped {
                                Popped::Deltas(d) => apply(&cache, d),
                                _ => unreachable!("a non-atomic queue holds deltas only"),
                            });
                            match popped.await {
                                Ok(_) => {}
                                Err(FifoError::Closed) => return,
                                Err(e) => panic!("{e}"),
                            }
                        }
                    })
                };
                for i in 0..OPS {
                    fifo.update(Arc::clone(&objs[i % KEYS])).expect("update");
                }
                fifo.close();
                consumer.await.expect("consumer");
            })
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
