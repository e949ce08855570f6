//! Contract section (b), DeltaFIFO rules B1–B13: one test per rule and check line.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use delta_fifo::store_index::Object;
use delta_fifo::{DeltaFifo, DeltaFifoOptions, DeltaType::*, Deltas, FifoError, ProcessError};

fn fifo() -> DeltaFifo<Obj> {
    DeltaFifo::new(DeltaFifoOptions::new())
}

fn fifo_known(objs: &[(&str, i64)]) -> DeltaFifo<Obj> {
    DeltaFifo::new(DeltaFifoOptions::new().known_objects(known(objs)))
}

fn newest_val(deltas: &Deltas<Obj>) -> i64 {
    deltas.newest().unwrap().object().unwrap().val
}

#[tokio::test]
async fn line_jumpers_keep_their_place_and_popped_keys_go_to_the_back() {
    let f = fifo();
    f.add(obj("foo", 10)).unwrap();
    f.add(obj("bar", 1)).unwrap();
    f.add(obj("foo", 11)).unwrap();
    f.add(obj("foo", 13)).unwrap();
    f.add(obj("zab", 30)).unwrap();
    assert_eq!(newest_val(&pop(&f).await.0), 13);
    f.add(obj("foo", 14)).unwrap();
    let order: Vec<i64> = [pop(&f).await, pop(&f).await, pop(&f).await]
        .iter()
        .map(|(d, _)| newest_val(d))
        .collect();
    assert_eq!(order, [1, 30, 14]);
}

#[tokio::test]
async fn key_of_uses_the_tombstone_key_or_the_newest_object() {
    let f = fifo();
    assert_eq!(f.key_of(&obj("A", 1).into()).unwrap(), "A");
    assert_eq!(f.key_of(&tombstone("B", None)).unwrap(), "B");
    let err = f.add_if_not_present(Deltas::default()).unwrap_err();
    assert!(err.key_error().is_some(), "{err}");
    assert!(err.to_string().contains("0 length Deltas object"), "{err}");
}

#[tokio::test]
async fn delete_without_known_objects_is_dropped_when_nothing_is_queued() {
    let f = fifo();
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("bar", 15)).unwrap();
    f.add(obj("qux", 17)).unwrap();
    f.delete(obj("qux", 18)).unwrap();
    f.delete(obj("baz", 20)).unwrap();
    let vals: Vec<i64> = drain(&f)
        .await
        .iter()
        .map(|ds| ds.last().unwrap().2.unwrap())
        .collect();
    assert_eq!(vals, [10, 15, 18]);
}

#[tokio::test]
async fn delete_with_known_objects_is_queued_for_known_keys() {
    let f = fifo_known(&[("foo", 5), ("bar", 6), ("baz", 7)]);
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("bar", 15)).unwrap();
    f.delete(obj("baz", 20)).unwrap();
    let vals: Vec<i64> = drain(&f)
        .await
        .iter()
        .map(|ds| ds.last().unwrap().2.unwrap())
        .collect();
    assert_eq!(vals, [10, 15, 20]);

    let f = fifo_known(&[]);
    f.add(obj("foo", 5)).unwrap();
    f.delete(obj("foo", 6)).unwrap();
    assert_eq!(
        drain(&f).await,
        [vec![d(Added, "foo", 5), d(Deleted, "foo", 6)]]
    );
}

#[tokio::test]
async fn consecutive_deletions_collapse_keeping_the_real_one() {
    // real then tombstone → the real delete survives
    let f = fifo_known(&[("foo", 1)]);
    f.delete(obj("foo", 2)).unwrap();
    f.delete(tombstone("foo", Some(obj("foo", 3)))).unwrap();
    assert_eq!(drain(&f).await, [vec![d(Deleted, "foo", 2)]]);
    // tombstone then real → the real delete
    let f = fifo_known(&[("foo", 1)]);
    f.delete(tombstone("foo", Some(obj("foo", 3)))).unwrap();
    f.delete(obj("foo", 2)).unwrap();
    assert_eq!(drain(&f).await, [vec![d(Deleted, "foo", 2)]]);
    // two real deletes → the first
    let f = fifo_known(&[("foo", 1)]);
    f.delete(obj("foo", 2)).unwrap();
    f.delete(obj("foo", 3)).unwrap();
    assert_eq!(drain(&f).await, [vec![d(Deleted, "foo", 2)]]);
    // two tombstones → the second
    let f = fifo_known(&[("foo", 1)]);
    f.delete(tombstone("foo", Some(obj("foo", 3)))).unwrap();
    f.delete(tombstone("foo", Some(obj("foo", 4)))).unwrap();
    assert_eq!(drain(&f).await, [vec![t("foo", Some(4))]]);
}

#[tokio::test]
async fn no_other_pair_of_deltas_is_ever_collapsed() {
    let f = fifo();
    f.update(obj("foo", 1)).unwrap();
    f.update(obj("foo", 1)).unwrap();
    f.add(obj("foo", 2)).unwrap();
    f.delete(obj("foo", 3)).unwrap();
    assert_eq!(
        drain(&f).await,
        [vec![
            d(Updated, "foo", 1),
            d(Updated, "foo", 1),
            d(Added, "foo", 2),
            d(Deleted, "foo", 3)
        ]]
    );
}

#[tokio::test]
async fn transformer_runs_once_per_enqueue_and_never_on_tombstones() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let f = DeltaFifo::new(DeltaFifoOptions::new().transformer(move |o: Arc<Obj>| {
        counter.fetch_add(1, Ordering::SeqCst);
        let mut o = (*o).clone();
        o.val *= 100;
        Ok(Arc::new(o))
    }));
    f.add(obj("foo", 10)).unwrap();
    f.add(obj("bar", 11)).unwrap();
    f.update(obj("foo", 12)).unwrap();
    f.delete(obj("foo", 15)).unwrap();
    f.replace(vec![], "").unwrap();
    f.add(obj("bar", 16)).unwrap();
    f.replace(vec![], "").unwrap();
    assert_eq!(f.list_keys(), ["foo", "bar"]);
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    let (foo, _) = pop(&f).await;
    let newest = foo.newest().unwrap();
    assert_eq!(newest.kind, Deleted);
    assert!(!newest.object.is_tombstone());
    assert_eq!(newest.object().unwrap().val, 1500);
    let (bar, _) = pop(&f).await;
    let newest = bar.newest().unwrap();
    assert!(newest.object.is_tombstone());
    assert_eq!(newest.object().unwrap().val, 1600);
}

#[tokio::test]
async fn transformer_error_aborts_that_call_and_replace_keeps_earlier_items() {
    let f = DeltaFifo::new(DeltaFifoOptions::new().transformer(|o: Arc<Obj>| {
        if o.val < 0 {
            Err("negative".into())
        } else {
            Ok(o)
        }
    }));
    let err = f.add(obj("bad", -1)).unwrap_err();
    assert!(err.to_string().contains("negative"));
    assert!(f.is_empty());
    let err = f
        .replace(vec![obj("a", 1), obj("b", -1), obj("c", 2)], "")
        .unwrap_err();
    assert!(
        err.to_string().starts_with("couldn't enqueue object:"),
        "{err}"
    );
    assert_eq!(f.list_keys(), ["a"]);
}

#[tokio::test]
async fn replace_with_known_objects_emits_sync_and_tombstones() {
    // delete baz=10 then replace([foo=5])
    let f = fifo_known(&[("foo", 5), ("bar", 6), ("baz", 7)]);
    f.delete(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        drain(&f).await,
        [
            vec![d(Deleted, "baz", 10)],
            vec![d(Sync, "foo", 5)],
            vec![t("bar", Some(6))]
        ]
    );

    // add baz=10 then replace([foo=5])
    let f = fifo_known(&[("foo", 5), ("bar", 6), ("baz", 7)]);
    f.add(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        drain(&f).await,
        [
            vec![d(Added, "baz", 10), t("baz", Some(10))],
            vec![d(Sync, "foo", 5)],
            vec![t("bar", Some(6))]
        ]
    );

    // delete bar=6, add bar=100, replace([foo=5])
    let f = fifo_known(&[("foo", 5), ("bar", 6), ("baz", 7)]);
    f.delete(obj("bar", 6)).unwrap();
    f.add(obj("bar", 100)).unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        drain(&f).await,
        [
            vec![
                d(Deleted, "bar", 6),
                d(Added, "bar", 100),
                t("bar", Some(100))
            ],
            vec![d(Sync, "foo", 5)],
            vec![t("baz", Some(7))]
        ]
    );

    // replace([bar=100, foo=5]) then replace([foo=5])
    let f = fifo_known(&[("foo", 5), ("bar", 6), ("baz", 7)]);
    f.replace(vec![obj("bar", 100), obj("foo", 5)], "0")
        .unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        drain(&f).await,
        [
            vec![d(Sync, "bar", 100), t("bar", Some(100))],
            vec![d(Sync, "foo", 5), d(Sync, "foo", 5)],
            vec![t("baz", Some(7))]
        ]
    );
}

#[tokio::test]
async fn replace_without_known_objects_tombstones_only_queued_keys() {
    let f = fifo();
    f.add(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_eq!(
        drain(&f).await,
        [
            vec![d(Added, "baz", 10), t("baz", Some(10))],
            vec![d(Sync, "foo", 5)]
        ]
    );
}

#[tokio::test]
async fn replace_emits_replaced_when_asked() {
    let f = DeltaFifo::new(
        DeltaFifoOptions::new()
            .known_objects(known(&[("foo", 5), ("bar", 6), ("baz", 7)]))
            .emit_replaced(true),
    );
    f.delete(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 6)], "0").unwrap();
    assert_eq!(
        drain(&f).await,
        [
            vec![d(Deleted, "baz", 10)],
            vec![d(Replaced, "foo", 6)],
            vec![t("bar", Some(6))]
        ]
    );
}

#[tokio::test]
async fn replace_adds_a_relisted_object_even_after_a_queued_delete() {
    let f = fifo_known(&[("foo", 1)]);
    f.delete(obj("foo", 1)).unwrap();
    f.replace(vec![obj("foo", 2)], "").unwrap();
    assert_eq!(
        drain(&f).await,
        [vec![d(Deleted, "foo", 1), d(Sync, "foo", 2)]]
    );
}

#[tokio::test]
async fn replace_tombstones_for_queued_keys_are_the_same_with_or_without_an_empty_known_store() {
    type Scenario = fn(&DeltaFifo<Obj>);
    let scenarios: [(Scenario, Vec<D>); 6] = [
        (
            |f| {
                f.add(obj("foo", 1)).unwrap();
                f.replace(vec![], "").unwrap();
            },
            vec![d(Added, "foo", 1), t("foo", Some(1))],
        ),
        (
            |f| {
                f.add(obj("foo", 1)).unwrap();
                f.delete(obj("foo", 1)).unwrap();
                f.replace(vec![], "").unwrap();
            },
            vec![d(Added, "foo", 1), d(Deleted, "foo", 1)],
        ),
        (
            |f| {
                f.add(obj("foo", 1)).unwrap();
                f.replace(vec![obj("foo", 1)], "").unwrap();
                f.replace(vec![obj("foo", 1)], "").unwrap();
                f.replace(vec![], "").unwrap();
            },
            vec![
                d(Added, "foo", 1),
                d(Sync, "foo", 1),
                d(Sync, "foo", 1),
                t("foo", Some(1)),
            ],
        ),
        (
            |f| {
                f.add(obj("foo", 1)).unwrap();
                f.replace(vec![], "").unwrap();
                f.replace(vec![], "").unwrap();
            },
            vec![d(Added, "foo", 1), t("foo", Some(1))],
        ),
        (
            |f| {
                f.add(obj("foo", 1)).unwrap();
                f.delete(obj("foo", 1)).unwrap();
                f.add(obj("foo", 2)).unwrap();
                f.replace(vec![], "").unwrap();
            },
            vec![
                d(Added, "foo", 1),
                d(Deleted, "foo", 1),
                d(Added, "foo", 2),
                t("foo", Some(2)),
            ],
        ),
        (
            |f| {
                f.add(obj("foo", 1)).unwrap();
                f.update(obj("foo", 2)).unwrap();
                f.replace(vec![], "").unwrap();
            },
            vec![d(Added, "foo", 1), d(Updated, "foo", 2), t("foo", Some(2))],
        ),
    ];
    for (run, want) in scenarios {
        for f in [fifo(), fifo_known(&[])] {
            run(&f);
            assert_eq!(drain(&f).await, std::slice::from_ref(&want));
            assert!(f.is_empty());
        }
    }
    // With emit_replaced: add, replace([obj]), replace([]) → Added, Replaced, tombstone.
    let f = DeltaFifo::new(DeltaFifoOptions::new().emit_replaced(true));
    f.add(obj("foo", 1)).unwrap();
    f.replace(vec![obj("foo", 1)], "").unwrap();
    f.replace(vec![], "").unwrap();
    assert_eq!(
        drain(&f).await,
        [vec![
            d(Added, "foo", 1),
            d(Replaced, "foo", 1),
            t("foo", Some(1))
        ]]
    );
}

#[tokio::test]
async fn replace_tombstones_never_nest() {
    let f = fifo();
    f.delete(tombstone("foo", Some(obj("foo", 3))))
        .unwrap_or(());
    // Without known objects a delete of an unqueued key is dropped; queue a tombstone through
    // add_if_not_present instead, then relist without it.
    f.add_if_not_present(Deltas::from_vec(vec![delta_fifo::Delta {
        kind: Deleted,
        object: tombstone("foo", Some(obj("foo", 3))),
    }]))
    .unwrap();
    f.add(obj("foo", 4)).unwrap();
    f.replace(vec![], "").unwrap();
    let (deltas, _) = pop(&f).await;
    let last = deltas.newest().unwrap();
    let inner = last.object.tombstone().unwrap().obj.as_ref().unwrap();
    assert_eq!(
        inner.val, 4,
        "the tombstone carries the newest plain object"
    );
}

#[tokio::test]
async fn replace_queues_an_empty_tombstone_when_the_known_lookup_fails() {
    struct Flaky;
    impl delta_fifo::store_index::KeyListerGetter<Obj> for Flaky {
        fn list_keys(&self) -> Vec<delta_fifo::store_index::ObjectKey> {
            vec!["gone".into(), "broken".into()]
        }
        fn get_by_key(
            &self,
            key: &str,
        ) -> Result<Option<Arc<Obj>>, delta_fifo::store_index::StoreError> {
            match key {
                "broken" => Err(delta_fifo::store_index::StoreError::IndexNotFound(
                    "x".into(),
                )),
                _ => Ok(None),
            }
        }
    }
    let f = DeltaFifo::new(DeltaFifoOptions::new().known_objects(Flaky));
    f.replace(vec![], "").unwrap();
    let mut popped = drain(&f).await;
    popped.sort();
    assert_eq!(popped, [vec![t("broken", None)], vec![t("gone", None)]]);
}

#[tokio::test]
async fn resync_queues_sync_only_for_unqueued_known_keys() {
    let f = fifo_known(&[("foo", 5)]);
    f.resync().unwrap();
    assert_eq!(describe(&f.get_by_key("foo").unwrap()), [d(Sync, "foo", 5)]);

    let f = fifo_known(&[("foo", 5)]);
    f.update(obj("foo", 6)).unwrap();
    f.resync().unwrap();
    assert_eq!(drain(&f).await, [vec![d(Updated, "foo", 6)]]);

    let f = fifo_known(&[("foo", 5)]);
    f.delete(obj("foo", 10)).unwrap();
    f.resync().unwrap();
    assert_eq!(
        describe(&f.get_by_key("foo").unwrap()),
        [d(Deleted, "foo", 10)]
    );

    let f = fifo();
    f.resync().unwrap();
    assert!(f.is_empty());
}

#[tokio::test]
async fn resync_neither_transforms_nor_marks_populated() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let f = DeltaFifo::new(
        DeltaFifoOptions::new()
            .known_objects(known(&[("foo", 5)]))
            .transformer(move |o| {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(o)
            }),
    );
    f.resync().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert!(!f.has_synced());
}

#[tokio::test]
async fn has_synced_follows_the_initial_population() {
    let f = fifo();
    assert!(!f.has_synced());
    f.add(obj("a", 1)).unwrap();
    assert!(f.has_synced());

    let f = fifo();
    f.replace(vec![], "").unwrap();
    assert!(f.has_synced());

    let f = fifo();
    f.replace(vec![obj("a", 1), obj("b", 2)], "").unwrap();
    assert!(!f.has_synced());
    pop(&f).await;
    assert!(!f.has_synced());
    pop(&f).await;
    assert!(f.has_synced());

    let f = fifo();
    f.replace(vec![obj("a", 1), obj("a", 2)], "").unwrap();
    pop(&f).await;
    assert!(f.has_synced(), "duplicate keys count once");
}

#[tokio::test]
async fn initial_list_flag_covers_listed_keys_and_tombstones() {
    let f = fifo_known(&[("foo", 1), ("bar", 2), ("baz", 3)]);
    f.replace(vec![obj("foo", 1)], "").unwrap();
    for _ in 0..3 {
        assert!(!f.has_synced());
        let (_, initial) = pop(&f).await;
        assert!(initial);
    }
    assert!(f.has_synced());
    f.add(obj("x", 1)).unwrap();
    assert!(!pop(&f).await.1);

    let f = fifo();
    f.add(obj("x", 1)).unwrap();
    f.replace(vec![obj("y", 1)], "").unwrap();
    assert!(
        !pop(&f).await.1,
        "an add before the first replace disables the count"
    );
}

#[tokio::test(start_paused = true)]
async fn wait_synced_fires_after_the_last_initial_process_call() {
    let f = fifo();
    f.replace(vec![obj("a", 1)], "").unwrap();
    let waiter = {
        let f = f.clone();
        tokio::spawn(async move { f.wait_for_sync().await })
    };
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished());
    pop(&f).await;
    assert!(tokio::time::timeout(Duration::from_secs(1), waiter)
        .await
        .unwrap()
        .unwrap());
}

#[tokio::test(start_paused = true)]
async fn wait_synced_answers_false_when_the_queue_closes_before_it_synced() {
    let f = fifo();
    f.replace(vec![obj("a", 1)], "").unwrap();
    let waiter = {
        let f = f.clone();
        tokio::spawn(async move { f.wait_for_sync().await })
    };
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished());
    f.close();
    let synced = tokio::time::timeout(Duration::from_secs(1), waiter)
        .await
        .expect("a close ends the wait")
        .unwrap();
    assert!(!synced, "closed with its initial item never popped");
}

#[tokio::test(start_paused = true)]
async fn close_wakes_every_blocked_popper_with_the_closed_error() {
    let f = fifo();
    let poppers: Vec<_> = (0..10)
        .map(|_| {
            let f = f.clone();
            tokio::spawn(async move { f.pop(|_, _| Ok::<_, ProcessError>(())).await })
        })
        .collect();
    tokio::task::yield_now().await;
    f.close();
    assert!(f.is_closed());
    for p in poppers {
        let result = tokio::time::timeout(Duration::from_millis(500), p)
            .await
            .unwrap()
            .unwrap();
        let err = result.unwrap_err();
        assert!(is_closed_error(&err));
        assert_eq!(err.to_string(), "DeltaFIFO: manipulating with closed queue");
    }
}

#[tokio::test]
async fn a_closed_queue_still_hands_out_its_items_and_accepts_adds() {
    let f = fifo();
    f.add(obj("a", 1)).unwrap();
    f.close();
    f.add(obj("b", 2)).unwrap();
    assert_eq!(drain(&f).await.len(), 2);
    assert!(is_closed_error(
        &f.pop(|_, _| Ok::<_, ProcessError>(())).await.unwrap_err()
    ));
}

#[tokio::test]
async fn pop_wakes_when_an_item_arrives() {
    let f = fifo();
    let popper = {
        let f = f.clone();
        tokio::spawn(async move { pop(&f).await })
    };
    tokio::task::yield_now().await;
    f.add(obj("late", 7)).unwrap();
    let (deltas, _) = popper.await.unwrap();
    assert_eq!(newest_val(&deltas), 7);
}

#[tokio::test]
async fn process_errors_drop_the_item_and_requeue_puts_it_back() {
    let f = fifo();
    f.add(obj("foo", 10)).unwrap();
    let r = f
        .pop(|_, _| Err::<(), _>(ProcessError::Requeue(None)))
        .await
        .unwrap();
    assert!(r.is_none());
    assert_eq!(f.list_keys(), ["foo"]);
    let err = f
        .pop(|_, _| Err::<(), _>(ProcessError::Requeue(Some("test error".into()))))
        .await
        .unwrap_err();
    assert!(matches!(&err, FifoError::Process(e) if e.to_string() == "test error"));
    assert_eq!(f.list_keys(), ["foo"]);
    let err = f
        .pop(|_, _| Err::<(), _>(ProcessError::failed("boom")))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("boom"));
    assert!(f.is_empty());
}

#[tokio::test]
async fn list_get_and_keys_read_the_queue_without_changing_it() {
    let f = fifo();
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("foo", 12)).unwrap();
    f.delete(obj("foo", 15)).unwrap();
    let list = f.list();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].object().unwrap().val, 15);
    assert_eq!(f.list_keys(), ["foo"]);
    let copy = f.get(&obj("foo", 0).into()).unwrap().unwrap();
    f.add(obj("foo", 16)).unwrap();
    assert_eq!(copy.len(), 3, "a returned copy does not see later appends");
    pop(&f).await;
    assert!(f.get_by_key("foo").is_none());
}

#[tokio::test]
async fn add_if_not_present_keeps_newer_deltas() {
    let f = fifo();
    f.add(obj("b", 3)).unwrap();
    f.add(obj("c", 4)).unwrap();
    let (saved_b, _) = pop(&f).await;
    let (saved_c, _) = pop(&f).await;
    f.add(obj("a", 1)).unwrap();
    f.add(obj("b", 2)).unwrap();
    f.add_if_not_present(saved_b).unwrap();
    f.add_if_not_present(saved_c).unwrap();
    assert_eq!(f.len(), 3);
    let vals: Vec<i64> = drain(&f)
        .await
        .iter()
        .map(|ds| ds.last().unwrap().2.unwrap())
        .collect();
    assert_eq!(vals, [1, 2, 4]);
}

#[tokio::test]
async fn objects_without_keys_are_rejected_with_a_key_error() {
    let f = DeltaFifo::new(DeltaFifoOptions::new().key_fn(Arc::new(|o: &Obj| {
        if o.name().is_empty() {
            Err(delta_fifo::store_index::KeyError::NoMeta)
        } else {
            Ok(o.name().into())
        }
    })));
    let err = f.add(obj("", 1)).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("couldn't create key for object"),
        "{err}"
    );
    assert!(f.is_empty());
    let err = f.replace(vec![obj("ok", 1), obj("", 2)], "").unwrap_err();
    assert!(err.key_error().is_some());
}
