//! Contract B14 (plain FIFO) and B15 (the in-order RealFifo, non-atomic mode).

mod common;

use common::*;
use delta_fifo::store_index::ObjectOrTombstone;
use delta_fifo::{DeltaType::*, Fifo, Popped, ProcessError, RealFifo, RealFifoOptions};

async fn fifo_pop(f: &Fifo<Obj>) -> (i64, bool) {
    f.pop(|o, initial| Ok::<_, ProcessError>((o.val, initial)))
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn fifo_keeps_only_the_newest_object_per_key() {
    let f = Fifo::new();
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("foo", 15)).unwrap();
    assert_eq!(f.list().iter().map(|o| o.val).collect::<Vec<_>>(), [15]);
    assert_eq!(f.list_keys(), ["foo"]);
    assert_eq!(fifo_pop(&f).await.0, 15);
    assert!(f.is_empty());
}

#[tokio::test]
async fn fifo_replace_resets_the_queue_to_the_list() {
    let f = Fifo::new();
    f.add(obj("foo", 10)).unwrap();
    f.add(obj("gone", 1)).unwrap();
    f.replace(vec![obj("foo", 15)], "").unwrap();
    assert_eq!(fifo_pop(&f).await.0, 15);
    assert!(f.is_empty());
}

#[tokio::test]
async fn fifo_delete_leaves_a_queue_entry_that_pop_skips() {
    let f = Fifo::new();
    f.add(obj("a", 1)).unwrap();
    f.add(obj("b", 2)).unwrap();
    f.delete(obj("a", 1)).unwrap();
    assert_eq!(f.list_keys(), ["b"]);
    assert_eq!(fifo_pop(&f).await.0, 2);
    assert!(f.is_empty());
}

#[tokio::test]
async fn fifo_add_if_not_present_keeps_queued_objects() {
    let f = Fifo::new();
    f.add(obj("a", 1)).unwrap();
    f.add(obj("b", 2)).unwrap();
    f.add_if_not_present(obj("b", 3)).unwrap();
    f.add_if_not_present(obj("c", 4)).unwrap();
    assert_eq!(f.len(), 3);
    let vals = [
        fifo_pop(&f).await.0,
        fifo_pop(&f).await.0,
        fifo_pop(&f).await.0,
    ];
    assert_eq!(vals, [1, 2, 4]);
}

#[tokio::test]
async fn fifo_has_synced_follows_the_initial_population() {
    let f: Fifo<Obj> = Fifo::new();
    assert!(!f.has_synced());
    f.add(obj("a", 1)).unwrap();
    assert!(f.has_synced());

    let f: Fifo<Obj> = Fifo::new();
    f.replace(vec![], "").unwrap();
    assert!(f.has_synced());

    let f = Fifo::new();
    f.replace(vec![obj("a", 1), obj("b", 2)], "").unwrap();
    assert!(!f.has_synced());
    assert!(fifo_pop(&f).await.1);
    assert!(!f.has_synced());
    assert!(fifo_pop(&f).await.1);
    assert!(f.has_synced());
    assert!(f.wait_for_sync().await);
}

#[tokio::test]
async fn fifo_requeue_and_close() {
    let f = Fifo::new();
    f.add(obj("a", 1)).unwrap();
    assert!(f
        .pop(|_, _| Err::<(), _>(ProcessError::Requeue(None)))
        .await
        .unwrap()
        .is_none());
    assert_eq!(f.len(), 1);
    f.close();
    assert_eq!(fifo_pop(&f).await.0, 1);
    assert!(is_closed_error(
        &f.pop(|_, _| Ok::<_, ProcessError>(())).await.unwrap_err()
    ));
}

fn real(objs: &[(&str, i64)]) -> RealFifo<Obj> {
    RealFifo::new(RealFifoOptions::new(known(objs)))
}

async fn real_pop(f: &RealFifo<Obj>) -> (Vec<D>, bool) {
    f.pop(|popped, initial| {
        let Popped::Deltas(d) = popped else {
            panic!("a non-atomic queue holds deltas only")
        };
        assert_eq!(d.len(), 1, "the in-order queue pops one delta at a time");
        Ok::<_, ProcessError>((describe(d), initial))
    })
    .await
    .unwrap()
    .unwrap()
}

async fn real_drain(f: &RealFifo<Obj>) -> Vec<D> {
    let mut out = Vec::new();
    while !f.is_empty() {
        out.extend(real_pop(f).await.0);
    }
    out
}

#[tokio::test]
async fn real_fifo_keeps_every_event_in_arrival_order() {
    let f = real(&[]);
    f.add(obj("foo", 10)).unwrap();
    f.add(obj("bar", 1)).unwrap();
    f.add(obj("foo", 11)).unwrap();
    f.add(obj("foo", 13)).unwrap();
    f.add(obj("zab", 30)).unwrap();
    assert_eq!(real_pop(&f).await.0[0].2, Some(10));
    f.add(obj("foo", 14)).unwrap();
    let vals: Vec<i64> = real_drain(&f).await.iter().map(|d| d.2.unwrap()).collect();
    assert_eq!(vals, [1, 11, 13, 30, 14]);
}

#[tokio::test]
async fn real_fifo_always_enqueues_deletes() {
    let f = real(&[]);
    f.delete(ObjectOrTombstone::Object(obj("never-seen", 1)))
        .unwrap();
    assert_eq!(real_drain(&f).await, [d(Deleted, "never-seen", 1)]);
}

#[tokio::test]
async fn real_fifo_replace_queues_deletions_before_the_listed_objects() {
    let f = real(&[("foo", 1), ("bar", 2), ("baz", 3)]);
    f.replace(vec![obj("foo", 5)], "").unwrap();
    let popped = real_drain(&f).await;
    let mut tombstones = popped[..2].to_vec();
    tombstones.sort();
    assert_eq!(tombstones, [t("bar", Some(2)), t("baz", Some(3))]);
    assert_eq!(popped[2], d(Replaced, "foo", 5));

    let f = real(&[("foo", 1), ("bar", 2), ("baz", 3)]);
    f.replace(vec![obj("bar", 100), obj("foo", 5)], "").unwrap();
    f.replace(vec![obj("foo", 5)], "").unwrap();
    assert_eq!(
        real_drain(&f).await,
        [
            t("baz", Some(3)),
            d(Replaced, "bar", 100),
            d(Replaced, "foo", 5),
            t("bar", Some(100)),
            d(Replaced, "foo", 5)
        ]
    );
}

#[tokio::test]
async fn real_fifo_syncs_after_the_initial_deltas_are_processed() {
    let f = real(&[("gone", 1)]);
    f.replace(vec![obj("a", 1), obj("b", 2)], "").unwrap();
    for _ in 0..3 {
        assert!(!f.has_synced());
        assert!(real_pop(&f).await.1);
    }
    assert!(f.has_synced());
    f.add(obj("c", 3)).unwrap();
    assert!(!real_pop(&f).await.1);
}

#[tokio::test]
async fn real_fifo_resync_skips_queued_keys() {
    let f = real(&[("foo", 5), ("bar", 6)]);
    f.update(obj("foo", 7)).unwrap();
    f.resync().unwrap();
    let popped = real_drain(&f).await;
    assert_eq!(popped, [d(Updated, "foo", 7), d(Sync, "bar", 6)]);
    assert!(popped.iter().all(|x| x.1 != "foo" || x.0 != Sync));
}

/// `RealFifo::key_of`: an object's key is the key function's answer, and its failure is a key
/// error naming the object; a tombstone's key is its own, whatever the key function says.
#[test]
fn real_fifo_key_of_uses_the_key_function_for_objects_and_a_tombstone_key_for_tombstones() {
    let f = RealFifo::new(RealFifoOptions::new(known(&[])));
    let key = f.key_of(&ObjectOrTombstone::from(obj("foo", 1))).unwrap();
    assert_eq!(key.as_str(), "foo");
    let key = f.key_of(&tombstone("ns/gone", None)).unwrap();
    assert_eq!(key.as_str(), "ns/gone");

    let strict = RealFifo::new(RealFifoOptions::new(known(&[])).key_fn(std::sync::Arc::new(
        |o: &Obj| {
            if o.meta.name.as_deref() == Some("") {
                Err(delta_fifo::store_index::KeyError::NoMeta)
            } else {
                Ok(format!("custom/{}", o.meta.name.as_deref().unwrap_or("")).into())
            }
        },
    )));
    let key = strict
        .key_of(&ObjectOrTombstone::from(obj("foo", 1)))
        .unwrap();
    assert_eq!(key.as_str(), "custom/foo");
    let err = strict
        .key_of(&ObjectOrTombstone::from(obj("", 1)))
        .unwrap_err();
    assert!(err.key_error().is_some(), "{err}");
    assert!(
        err.to_string()
            .starts_with("couldn't create key for object"),
        "{err}"
    );
    // The key function is not asked about a tombstone, even one holding an object it refuses.
    let key = strict
        .key_of(&tombstone("ns/kept", Some(obj("", 1))))
        .unwrap();
    assert_eq!(key.as_str(), "ns/kept");
}

/// `RealFifo::bookmark` takes a resource version as every other write of the workspace does
/// (`impl Into<ResourceVersion>`, so a `&str` too): it is recorded as the last synced version and,
/// in atomic mode with bookmarks, queued as a `Bookmark` entry holding that version.
#[tokio::test]
async fn a_bookmark_takes_any_resource_version_and_queues_it_in_atomic_mode() {
    let atomic = RealFifo::<Obj>::new(RealFifoOptions::atomic(delta_fifo::Atomic {
        emit_bookmarks: true,
        unlock_while_processing: false,
    }));
    atomic.bookmark("123");
    assert_eq!(atomic.last_sync_resource_version(), "123");
    let seen = atomic
        .pop(|popped, _| match popped {
            Popped::Bookmark(rv) => Ok(rv.to_string()),
            _ => Ok(String::from("not a bookmark")),
        })
        .await
        .unwrap();
    assert_eq!(seen.as_deref(), Some("123"));
}
