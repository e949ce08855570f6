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
