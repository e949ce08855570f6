//! Indexer throughput: add and update 100k objects with two indexes, `by_index` over 1,000
//! namespaces, and listing 100k objects. Run with `cargo bench -p store-index --bench indexer`.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use store_index::{DynamicObject, Indexer, Indexers, Object};

const OBJECTS: usize = 100_000;
const NAMESPACES: usize = 1_000;

fn objects(generation: u32) -> Vec<Arc<DynamicObject>> {
    (0..OBJECTS)
        .map(|i| {
            Arc::new(
                DynamicObject::new("v1", "Pod")
                    .within(format!("ns-{}", i % NAMESPACES))
                    .named(format!("pod-{i}"))
                    .with_resource_version(format!(
                        "{}",
                        i as u64 + u64::from(generation) * 1_000_000
                    ))
                    .with_label("app", format!("app-{}", (i + generation as usize) % 50)),
            )
        })
        .collect()
}

fn indexer() -> Indexer<DynamicObject> {
    Indexer::new(
        Indexers::new()
            .with_namespace_index()
            .with("app", |o: &DynamicObject| {
                Ok(o.label("app").map(str::to_string).into_iter().collect())
            }),
    )
}

fn bench(c: &mut Criterion) {
    let first = objects(0);
    let second = objects(1);
    let mut group = c.benchmark_group("indexer");
    group.sample_size(10);
    group.throughput(Throughput::Elements(OBJECTS as u64));

    group.bench_function("add_100k_two_indexes", |b| {
        b.iter_batched(
            || (indexer(), first.clone()),
            |(idx, objs)| {
                for o in objs {
                    idx.add(o).expect("add");
                }
                idx
            },
            BatchSize::LargeInput,
        )
    });

    group.bench_function("update_100k_two_indexes", |b| {
        b.iter_batched(
            || {
                let idx = indexer();
                for o in &first {
                    idx.add(Arc::clone(o)).expect("add");
                }
                (idx, second.clone())
            },
            |(idx, objs)| {
                for o in objs {
                    idx.update(o).expect("update");
                }
                idx
            },
            BatchSize::LargeInput,
        )
    });

    let full = indexer();
    full.replace(first.iter().cloned(), "1").expect("replace");
    let names: Vec<String> = (0..NAMESPACES).map(|i| format!("ns-{i}")).collect();
    group.bench_function("by_index_1000_namespaces", |b| {
        b.iter(|| {
            let mut n = 0;
            for ns in &names {
                n += full.by_index("namespace", ns).expect("index").len();
            }
            assert_eq!(n, OBJECTS);
        })
    });

    group.bench_function("list_100k", |b| b.iter(|| full.list().len()));
    group.finish();

    // by_index cost must follow the answer's size, not the store's: one namespace of 100 objects
    // in a store of 100k versus the same namespace alone.
    let mut group = c.benchmark_group("by_index_scaling");
    let small = indexer();
    for o in first.iter().filter(|o| o.namespace() == Some("ns-7")) {
        small.add(Arc::clone(o)).expect("add");
    }
    group.bench_function("one_namespace_in_100k", |b| {
        b.iter(|| full.by_index("namespace", "ns-7").expect("index").len())
    });
    group.bench_function("one_namespace_alone", |b| {
        b.iter(|| small.by_index("namespace", "ns-7").expect("index").len())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
