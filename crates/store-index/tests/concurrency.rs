//! Readers querying indexes while writers mutate, on a multi-thread runtime: every read must see a
//! consistent snapshot (no torn index/item pairs, no duplicate keys).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use store_index::{DynamicObject, Indexer, Indexers, Object};

const OBJECTS: usize = 200;
const COLOURS: [&str; 3] = ["red", "green", "blue"];

fn object(i: usize, round: usize) -> Arc<DynamicObject> {
    Arc::new(
        DynamicObject::new("v1", "Pod")
            .within(format!("ns{}", i % 4))
            .named(format!("p{i}"))
            .with_resource_version(round.to_string())
            .with_label("colour", COLOURS[(i + round) % COLOURS.len()]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_never_see_torn_index_and_item_pairs() {
    let indexer = Indexer::new(
        Indexers::new()
            .with_namespace_index()
            .with("colour", |o: &DynamicObject| {
                Ok(o.label("colour").map(str::to_string).into_iter().collect())
            }),
    );
    indexer
        .replace((0..OBJECTS).map(|i| object(i, 0)), "0")
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));

    let mut writers = Vec::new();
    for w in 0..2 {
        let idx = indexer.clone();
        writers.push(tokio::task::spawn_blocking(move || {
            for round in 1..=300 {
                for i in (w..OBJECTS).step_by(2) {
                    if round % 50 == 0 && i % 10 == 0 {
                        idx.delete(object(i, round)).unwrap();
                    }
                    idx.update(object(i, round)).unwrap();
                }
                if w == 0 && round % 100 == 0 {
                    idx.replace((0..OBJECTS).map(|i| object(i, round)), round.to_string())
                        .unwrap();
                }
            }
        }));
    }

    let mut readers = Vec::new();
    for _ in 0..2 {
        let idx = indexer.clone();
        let done = Arc::clone(&done);
        readers.push(tokio::task::spawn_blocking(move || {
            let mut checks = 0u64;
            while !done.load(Ordering::Acquire) || checks == 0 {
                for colour in COLOURS {
                    for obj in idx.by_index("colour", colour).unwrap() {
                        assert_eq!(
                            obj.label("colour"),
                            Some(colour),
                            "object in the wrong bucket"
                        );
                    }
                    let keys = idx.index_keys("colour", colour).unwrap();
                    let unique: HashSet<_> = keys.iter().collect();
                    assert_eq!(unique.len(), keys.len(), "duplicate key in a bucket");
                }
                let ns0 = idx.by_index("namespace", "ns0").unwrap();
                assert!(ns0.iter().all(|o| o.namespace() == Some("ns0")));
                let list = idx.list();
                let names: HashSet<_> = list.iter().map(|o| o.name().to_string()).collect();
                assert_eq!(names.len(), list.len(), "list has two entries for one key");
                checks += 1;
            }
            checks
        }));
    }

    for w in writers {
        w.await.unwrap();
    }
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.await.unwrap() > 0);
    }
    assert_eq!(indexer.len(), OBJECTS);
}

/// T2 of `src/transaction.rs`: readers on other threads never see part of a transaction. Each
/// transaction either adds or deletes the pair `ns/a`, `ns/b` and moves every stored object to a new
/// generation; a reader's one snapshot must hold both of the pair or neither, all of one generation.
#[test]
fn readers_never_see_part_of_a_transaction() {
    use std::collections::BTreeSet;
    use store_index::Transaction;

    const ROUNDS: usize = 2_000;
    const OTHERS: usize = 8;
    let generation = |name: &str, round: usize| {
        Arc::new(
            DynamicObject::new("v1", "Pod")
                .within("ns")
                .named(name)
                .with_label("gen", round.to_string()),
        )
    };
    let indexer = Indexer::new(Indexers::new().with("gen", |o: &DynamicObject| {
        Ok(o.label("gen").map(str::to_string).into_iter().collect())
    }));
    let others: Vec<String> = (0..OTHERS).map(|i| format!("o{i}")).collect();
    indexer
        .transaction(others.iter().map(|n| Transaction::add(generation(n, 0))))
        .unwrap();
    let done = AtomicBool::new(false);

    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            for round in 1..=ROUNDS {
                let mut ops: Vec<_> = others
                    .iter()
                    .map(|n| Transaction::update(generation(n, round)))
                    .collect();
                for pair in ["a", "b"] {
                    ops.push(if round % 2 == 1 {
                        Transaction::add(generation(pair, round))
                    } else {
                        Transaction::delete(generation(pair, round))
                    });
                }
                indexer.transaction(ops).unwrap();
            }
            done.store(true, Ordering::Release);
        });
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut checks = 0u64;
                    while !done.load(Ordering::Acquire) || checks == 0 {
                        let keys: BTreeSet<String> =
                            indexer.list_keys().iter().map(|k| k.to_string()).collect();
                        assert_eq!(
                            keys.contains("ns/a"),
                            keys.contains("ns/b"),
                            "half a transaction visible: {keys:?}"
                        );
                        let gens: BTreeSet<String> = indexer
                            .list()
                            .iter()
                            .map(|o| o.label("gen").unwrap().to_string())
                            .collect();
                        assert_eq!(gens.len(), 1, "two generations in one list: {gens:?}");
                        let values = indexer.list_index_func_values("gen");
                        assert_eq!(values.len(), 1, "index mid-transaction: {values:?}");
                        // A second snapshot: the generation may have moved on (empty bucket),
                        // but a bucket is never partly filled.
                        let bucket = indexer.by_index("gen", &values[0]).unwrap().len();
                        assert!(
                            [0, OTHERS, OTHERS + 2].contains(&bucket),
                            "partly moved bucket: {bucket}"
                        );
                        checks += 1;
                    }
                    checks
                })
            })
            .collect();
        writer.join().unwrap();
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
    });
    assert_eq!(indexer.len(), OTHERS, "the last round deleted the pair");
}
