//! Contract B15.3–B15.5: the RealFifo's atomic mode, batched pops and the sync bookkeeping, and
//! a property test of the non-atomic queue against a model.

mod common;

use std::collections::BTreeMap;

use common::*;
use delta_fifo::store_index::{Indexer, Object, ResourceVersion};
use delta_fifo::{
    Atomic, DeltaType::*, Popped, ProcessError, Queue, RealFifo, RealFifoOptions, Store,
};
use proptest::prelude::*;

/// What one pop handed out, described.
#[derive(Debug, Clone, PartialEq)]
enum P {
    Deltas(Vec<D>),
    Batch(Vec<D>),
    ReplacedAll(Vec<i64>, String),
    SyncAll,
    Bookmark(String),
}

fn describe_popped(popped: Popped<'_, Obj>) -> P {
    match popped {
        Popped::Deltas(d) => P::Deltas(describe(d)),
        Popped::Batch(b) => P::Batch(describe(&b.iter().cloned().collect())),
        Popped::ReplacedAll {
            objects,
            resource_version,
        } => P::ReplacedAll(
            objects.iter().map(|o| o.val).collect(),
            resource_version.to_string(),
        ),
        Popped::SyncAll => P::SyncAll,
        Popped::Bookmark(rv) => P::Bookmark(rv.to_string()),
    }
}

async fn pop_batch(f: &RealFifo<Obj>, max: usize) -> (P, bool) {
    f.pop_batch(max, |p, initial| {
        Ok::<_, ProcessError>((describe_popped(p), initial))
    })
    .await
    .unwrap()
    .unwrap()
}

async fn drain_batches(f: &RealFifo<Obj>, max: usize) -> Vec<P> {
    let mut out = Vec::new();
    while !f.is_empty() {
        out.push(pop_batch(f, max).await.0);
    }
    out
}

fn atomic(bookmarks: bool) -> RealFifo<Obj> {
    atomic_unlocking(bookmarks, false)
}

fn atomic_unlocking(bookmarks: bool, unlock_while_processing: bool) -> RealFifo<Obj> {
    RealFifo::new(RealFifoOptions::atomic(Atomic {
        emit_bookmarks: bookmarks,
        unlock_while_processing,
    }))
}

#[tokio::test]
async fn atomic_replace_is_one_entry_with_the_transformed_list() {
    let f = RealFifo::new(
        RealFifoOptions::atomic(Atomic::default())
            .transformer(|o: std::sync::Arc<Obj>| Ok(obj(o.name(), o.val * 10))),
    );
    assert!(f.is_atomic());
    f.replace(vec![obj("a", 1), obj("b", 2)], "7").unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(f.last_sync_resource_version(), "7");
    assert!(!f.has_synced());
    let (p, initial) = pop_batch(&f, 1000).await;
    assert_eq!(p, P::ReplacedAll(vec![10, 20], "7".into()));
    assert!(initial);
    assert!(f.has_synced(), "the initial population was the one entry");
}

#[tokio::test]
async fn atomic_resync_and_bookmarks_are_entries_of_their_own() {
    let f = atomic(true);
    f.replace(vec![obj("a", 1)], "1").unwrap();
    f.add(obj("b", 2)).unwrap();
    f.update_resource_version(&ResourceVersion::from("2"));
    f.resync().unwrap();
    assert_eq!(f.last_sync_resource_version(), "2");
    assert_eq!(
        drain_batches(&f, 1000).await,
        [
            P::ReplacedAll(vec![1], "1".into()),
            P::Deltas(vec![d(Added, "b", 2)]),
            P::Bookmark("2".into()),
            P::SyncAll,
        ]
    );
    // Without bookmark emission the RV is still recorded, and nothing is queued.
    let f = atomic(false);
    f.update_resource_version(&ResourceVersion::from("9"));
    assert!(f.is_empty());
    assert_eq!(f.last_sync_resource_version(), "9");
}

#[tokio::test]
async fn a_batch_never_crosses_the_end_of_the_initial_population() {
    // Initial [o1, o2] then updates o3, o4, with a batch size of 2.
    let f = RealFifo::new(RealFifoOptions::new(known(&[])));
    f.replace(vec![obj("o1", 1), obj("o2", 2)], "1").unwrap();
    f.update(obj("o3", 3)).unwrap();
    f.update(obj("o4", 4)).unwrap();
    let (first, initial) = pop_batch(&f, 2).await;
    assert_eq!(
        first,
        P::Batch(vec![d(Replaced, "o1", 1), d(Replaced, "o2", 2)])
    );
    assert!(initial);
    assert!(f.has_synced());
    let (second, initial) = pop_batch(&f, 2).await;
    assert_eq!(
        second,
        P::Batch(vec![d(Updated, "o3", 3), d(Updated, "o4", 4)])
    );
    assert!(!initial);

    // Initial [o1, o2, o3] then an update of o2, unlimited: the batch stops at the initial list.
    let f = RealFifo::new(RealFifoOptions::new(known(&[])));
    f.replace(vec![obj("o1", 1), obj("o2", 2), obj("o3", 3)], "1")
        .unwrap();
    f.update(obj("o2", 22)).unwrap();
    assert_eq!(
        drain_batches(&f, usize::MAX).await,
        [
            P::Batch(vec![
                d(Replaced, "o1", 1),
                d(Replaced, "o2", 2),
                d(Replaced, "o3", 3)
            ]),
            P::Deltas(vec![d(Updated, "o2", 22)]),
        ]
    );
}

#[tokio::test]
async fn a_batch_ends_before_a_key_already_in_it() {
    // Initial [o1] then two updates of o1: three batches of one.
    let f = RealFifo::new(RealFifoOptions::new(known(&[])));
    f.replace(vec![obj("o1", 1)], "1").unwrap();
    f.update(obj("o1", 2)).unwrap();
    f.update(obj("o1", 3)).unwrap();
    assert_eq!(
        drain_batches(&f, 1000).await,
        [
            P::Deltas(vec![d(Replaced, "o1", 1)]),
            P::Deltas(vec![d(Updated, "o1", 2)]),
            P::Deltas(vec![d(Updated, "o1", 3)]),
        ]
    );
    let f = RealFifo::new(RealFifoOptions::new(known(&[])));
    for (n, v) in [("a", 1), ("b", 2), ("a", 3), ("c", 4)] {
        f.add(obj(n, v)).unwrap();
    }
    assert_eq!(
        drain_batches(&f, 1000).await,
        [
            P::Batch(vec![d(Added, "a", 1), d(Added, "b", 2)]),
            P::Batch(vec![d(Added, "a", 3), d(Added, "c", 4)]),
        ]
    );
}

#[tokio::test]
async fn an_atomic_entry_is_popped_alone_and_ends_a_batch() {
    let f = atomic(false);
    f.add(obj("a", 1)).unwrap();
    f.replace(vec![obj("b", 2)], "5").unwrap();
    f.add(obj("c", 3)).unwrap();
    f.add(obj("d", 4)).unwrap();
    assert_eq!(
        drain_batches(&f, 1000).await,
        [
            P::Deltas(vec![d(Added, "a", 1)]),
            P::ReplacedAll(vec![2], "5".into()),
            P::Batch(vec![d(Added, "c", 3), d(Added, "d", 4)]),
        ]
    );
}

#[tokio::test]
async fn unlocking_while_processing_lets_the_producer_in() {
    let f = RealFifo::new(RealFifoOptions::atomic(Atomic {
        emit_bookmarks: false,
        unlock_while_processing: true,
    }));
    f.add(obj("a", 1)).unwrap();
    // With the lock held this add would deadlock; unlocked, it is queued behind.
    let producer = f.clone();
    f.pop(|_, _| {
        producer.add(obj("b", 2)).map_err(ProcessError::failed)?;
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(
        drain_batches(&f, 1).await,
        [P::Deltas(vec![d(Added, "b", 2)])]
    );
}

#[tokio::test]
async fn a_requeued_batch_goes_back_at_the_end_unless_its_key_came_back() {
    let f = RealFifo::new(RealFifoOptions::new(known(&[])));
    f.add(obj("a", 1)).unwrap();
    f.add(obj("b", 2)).unwrap();
    let requeued = f
        .pop_batch(10, |_, _| Err::<(), _>(ProcessError::Requeue(None)))
        .await
        .unwrap();
    assert!(requeued.is_none());
    assert_eq!(
        drain_batches(&f, 10).await,
        [P::Batch(vec![d(Added, "a", 1), d(Added, "b", 2)])]
    );
}

#[tokio::test]
async fn list_keys_and_get_show_what_is_queued() {
    let f = RealFifo::new(RealFifoOptions::new(known(&[])));
    f.add(obj("a", 1)).unwrap();
    f.add(obj("b", 2)).unwrap();
    f.update(obj("a", 3)).unwrap();
    assert_eq!(f.list_keys(), ["a", "b"]);
    assert_eq!(f.list().len(), 3);
    assert_eq!(
        describe(&f.get_by_key("a").unwrap()),
        [d(Added, "a", 1), d(Updated, "a", 3)]
    );
    assert!(f.get_by_key("zzz").is_none());
    assert_eq!(
        describe(&f.get(&obj("b", 0).into()).unwrap().unwrap()),
        [d(Added, "b", 2)]
    );
    assert_eq!(Queue::len(&f), 3);
}

/// An operation of the property test.
#[derive(Debug, Clone)]
enum Op {
    Add(u8, i64),
    Delete(u8),
    Replace(Vec<(u8, i64)>),
    Resync,
    Pop(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..6, 0i64..100).prop_map(|(k, v)| Op::Add(k, v)),
        2 => (0u8..6).prop_map(Op::Delete),
        1 => proptest::collection::vec((0u8..6, 0i64..100), 0..5).prop_map(Op::Replace),
        1 => Just(Op::Resync),
        4 => (1usize..5).prop_map(Op::Pop),
    ]
}

fn name(k: u8) -> String {
    format!("k{k}")
}

/// The model: B15.1 (every change queued in order), B15.2 (relist deletions then Replaced),
/// B15.5 (batches of distinct keys within the initial population), and a consumer store that
/// applies every popped delta.
#[derive(Default)]
struct Model {
    queue: Vec<(String, D)>,
    store: BTreeMap<String, i64>,
    initial: Option<usize>,
    populated: bool,
}

impl Model {
    fn last_for(&self, key: &str) -> Option<&D> {
        self.queue
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, d)| d)
    }

    /// `known_order`: the consumer store's key order (unspecified, a hash map's), which the
    /// queue follows for the deletions it finds there.
    fn replace(&mut self, list: &[(u8, i64)], known_order: &[String]) {
        let mut dedup: Vec<(String, i64)> = Vec::new();
        for (k, v) in list {
            dedup.push((name(*k), *v));
        }
        let listed: Vec<&String> = dedup.iter().map(|(k, _)| k).collect();
        let mut first_seen: Vec<String> = Vec::new();
        for (k, _) in &self.queue {
            if !first_seen.contains(k) {
                first_seen.push(k.clone());
            }
        }
        let mut new = Vec::new();
        for k in &first_seen {
            if listed.contains(&k) {
                continue;
            }
            let last = self.last_for(k).unwrap().clone();
            if last.0 != Deleted {
                new.push((k.clone(), t(k, last.2)));
            }
        }
        for k in known_order {
            let v = self.store[k];
            if !listed.contains(&k) && !first_seen.contains(k) {
                new.push((k.clone(), t(k, Some(v))));
            }
        }
        for (k, v) in &dedup {
            new.push((k.clone(), d(Replaced, k, *v)));
        }
        self.queue.extend(new);
        if !self.populated {
            self.populated = true;
            self.initial = Some(self.queue.len());
        }
    }

    fn resync(&mut self, known_order: &[String]) {
        for k in known_order {
            let v = self.store[k];
            if self.last_for(k).is_none() {
                self.queue.push((k.clone(), d(Sync, k, v)));
            }
        }
    }

    fn pop(&mut self, max: usize) -> Vec<D> {
        let mut limit = max;
        if let Some(n) = self.initial.filter(|n| *n > 0) {
            limit = limit.min(n);
        }
        let mut taken: Vec<(String, D)> = Vec::new();
        while taken.len() < limit && !self.queue.is_empty() {
            if taken.iter().any(|(k, _)| *k == self.queue[0].0) {
                break;
            }
            taken.push(self.queue.remove(0));
        }
        if let Some(n) = self.initial.as_mut() {
            *n = n.saturating_sub(taken.len());
        }
        for (k, d) in &taken {
            match d.0 {
                Deleted => {
                    self.store.remove(k);
                }
                _ => {
                    self.store.insert(k.clone(), d.2.unwrap());
                }
            }
        }
        taken.into_iter().map(|(_, d)| d).collect()
    }
}

fn order(store: &Indexer<Obj>) -> Vec<String> {
    store.list_keys().iter().map(|k| k.to_string()).collect()
}

fn apply(store: &Indexer<Obj>, deltas: &[delta_fifo::Delta<Obj>]) {
    for delta in deltas {
        match delta.kind {
            Deleted => {
                store.delete(delta.object.clone()).unwrap();
            }
            _ => store.update(delta.object().unwrap().clone()).unwrap(),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    /// The non-atomic RealFifo behaves as the model: the same pops, in the same batches, with the
    /// same HasSynced; and its key count (invariant R1) matches what `list` shows.
    #[test]
    fn proptest_real_fifo_matches_its_model(ops in proptest::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let store: Indexer<Obj> = Indexer::default();
            let f = RealFifo::new(RealFifoOptions::new(store.clone()));
            let mut model = Model::default();
            for op in ops {
                match op {
                    Op::Add(k, v) => {
                        f.add(obj(&name(k), v)).unwrap();
                        model.queue.push((name(k), d(Added, &name(k), v)));
                        model.populated = true;
                    }
                    Op::Delete(k) => {
                        f.delete(obj(&name(k), -1)).unwrap();
                        model.queue.push((name(k), d(Deleted, &name(k), -1)));
                        model.populated = true;
                    }
                    Op::Replace(list) => {
                        let mut seen = std::collections::HashSet::new();
                        let list: Vec<(u8, i64)> =
                            list.into_iter().filter(|(k, _)| seen.insert(*k)).collect();
                        f.replace(list.iter().map(|(k, v)| obj(&name(*k), *v)).collect(), "1")
                            .unwrap();
                        model.replace(&list, &order(&store));
                    }
                    Op::Resync => {
                        f.resync().unwrap();
                        model.resync(&order(&store));
                    }
                    Op::Pop(max) if !f.is_empty() => {
                        let got = f
                            .pop_batch(max, |p, _| {
                                let deltas: Vec<delta_fifo::Delta<Obj>> = match p {
                                    Popped::Deltas(d) => d.iter().cloned().collect(),
                                    Popped::Batch(b) => b.to_vec(),
                                    other => panic!("{other:?}"),
                                };
                                apply(&store, &deltas);
                                Ok::<_, ProcessError>(describe(&deltas.into_iter().collect()))
                            })
                            .await
                            .unwrap()
                            .unwrap();
                        prop_assert_eq!(got, model.pop(max));
                    }
                    Op::Pop(_) => {}
                }
                let listed: Vec<D> = describe(&f.list().into_iter().collect());
                let modelled: Vec<D> = model.queue.iter().map(|(_, d)| d.clone()).collect();
                prop_assert_eq!(listed, modelled);
                let mut keys: Vec<String> = Vec::new();
                for (k, _) in &model.queue {
                    if !keys.contains(k) {
                        keys.push(k.clone());
                    }
                }
                let got_keys: Vec<String> = f.list_keys().iter().map(|k| k.to_string()).collect();
                prop_assert_eq!(got_keys, keys);
                let synced = model.populated && model.initial.unwrap_or(0) == 0;
                prop_assert_eq!(f.has_synced(), synced);
            }
            Ok(())
        })?;
    }
}

/// An entry of the atomic model's queue.
#[derive(Debug, Clone, PartialEq)]
enum AtomicEntry {
    Delta(String, D),
    Replaced(Vec<i64>),
    SyncAll,
    Bookmark(String),
}

/// An operation of the atomic property test.
#[derive(Debug, Clone)]
enum AtomicOp {
    Add(u8, i64),
    Delete(u8),
    Replace(Vec<(u8, i64)>),
    Resync,
    Bookmark(u32),
    Pop(usize),
    /// A pop whose process function adds a change, as a reflector does while the informer
    /// processes with the lock released (run after the pop when the lock is held).
    PopWhileAdding(usize, u8, i64),
}

fn atomic_op() -> impl Strategy<Value = AtomicOp> {
    prop_oneof![
        4 => (0u8..6, 0i64..100).prop_map(|(k, v)| AtomicOp::Add(k, v)),
        2 => (0u8..6).prop_map(AtomicOp::Delete),
        1 => proptest::collection::vec((0u8..6, 0i64..100), 0..5).prop_map(AtomicOp::Replace),
        1 => Just(AtomicOp::Resync),
        1 => (0u32..1000).prop_map(AtomicOp::Bookmark),
        4 => (1usize..5).prop_map(AtomicOp::Pop),
        2 => (1usize..5, 0u8..6, 0i64..100).prop_map(|(m, k, v)| AtomicOp::PopWhileAdding(m, k, v)),
    ]
}

/// B15.3 and B15.5 in atomic mode: every change and every relist, resync and bookmark is one
/// entry, in order; a batch takes deltas of distinct keys and never an atomic entry with them.
fn atomic_model_pop(queue: &mut Vec<AtomicEntry>, initial: &mut Option<usize>, max: usize) -> P {
    let mut limit = max;
    if let Some(n) = initial.filter(|n| *n > 0) {
        limit = limit.min(n);
    }
    let first = queue.remove(0);
    let mut taken = 1;
    let popped = match first {
        AtomicEntry::Delta(key, d) => {
            let mut keys = vec![key];
            let mut ds = vec![d];
            while taken < limit {
                match queue.first() {
                    Some(AtomicEntry::Delta(k, _)) if !keys.contains(k) => {}
                    _ => break,
                }
                let AtomicEntry::Delta(k, d) = queue.remove(0) else {
                    unreachable!()
                };
                keys.push(k);
                ds.push(d);
                taken += 1;
            }
            if ds.len() == 1 {
                P::Deltas(ds)
            } else {
                P::Batch(ds)
            }
        }
        AtomicEntry::Replaced(vals) => P::ReplacedAll(vals, "1".into()),
        AtomicEntry::SyncAll => P::SyncAll,
        AtomicEntry::Bookmark(rv) => P::Bookmark(rv),
    };
    if let Some(n) = initial.as_mut() {
        *n = n.saturating_sub(taken);
    }
    popped
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    /// The atomic RealFifo behaves as its model: the same entries in the same pops and batches,
    /// the same HasSynced, and the reflector's RV recorded whether or not bookmarks are queued;
    /// with `unlock_while_processing` too, where changes queued during a pop's processing land
    /// behind everything queued and nothing else differs (invariant R2).
    #[test]
    fn proptest_atomic_real_fifo_matches_its_model(
        ops in proptest::collection::vec(atomic_op(), 1..40),
        unlock in any::<bool>(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let f = atomic_unlocking(true, unlock);
            let mut queue: Vec<AtomicEntry> = Vec::new();
            let mut initial: Option<usize> = None;
            let mut populated = false;
            for op in ops {
                match op {
                    AtomicOp::Add(k, v) => {
                        f.add(obj(&name(k), v)).unwrap();
                        queue.push(AtomicEntry::Delta(name(k), d(Added, &name(k), v)));
                        populated = true;
                    }
                    AtomicOp::Delete(k) => {
                        f.delete(obj(&name(k), -1)).unwrap();
                        queue.push(AtomicEntry::Delta(name(k), d(Deleted, &name(k), -1)));
                        populated = true;
                    }
                    AtomicOp::Replace(list) => {
                        f.replace(list.iter().map(|(k, v)| obj(&name(*k), *v)).collect(), "1")
                            .unwrap();
                        queue.push(AtomicEntry::Replaced(list.iter().map(|(_, v)| *v).collect()));
                        if !populated {
                            populated = true;
                            initial = Some(queue.len());
                        }
                    }
                    AtomicOp::Resync => {
                        f.resync().unwrap();
                        queue.push(AtomicEntry::SyncAll);
                    }
                    AtomicOp::Bookmark(rv) => {
                        f.update_resource_version(&ResourceVersion::from(rv.to_string()));
                        queue.push(AtomicEntry::Bookmark(rv.to_string()));
                        prop_assert_eq!(f.last_sync_resource_version(), rv.to_string());
                    }
                    AtomicOp::Pop(max) if !f.is_empty() => {
                        let (got, _) = pop_batch(&f, max).await;
                        prop_assert_eq!(got, atomic_model_pop(&mut queue, &mut initial, max));
                    }
                    AtomicOp::Pop(_) => {}
                    AtomicOp::PopWhileAdding(max, k, v) if !f.is_empty() => {
                        let producer = f.clone();
                        let got = if unlock {
                            // The lock is released: the add goes in while the entry is processed.
                            f.pop_batch(max, |p, _| {
                                producer.add(obj(&name(k), v)).map_err(ProcessError::failed)?;
                                Ok::<_, ProcessError>(describe_popped(p))
                            })
                            .await
                        } else {
                            let got = f
                                .pop_batch(max, |p, _| Ok::<_, ProcessError>(describe_popped(p)))
                                .await;
                            producer.add(obj(&name(k), v)).unwrap();
                            got
                        };
                        let got = got.unwrap().unwrap();
                        prop_assert_eq!(got, atomic_model_pop(&mut queue, &mut initial, max));
                        queue.push(AtomicEntry::Delta(name(k), d(Added, &name(k), v)));
                        populated = true;
                    }
                    AtomicOp::PopWhileAdding(..) => {}
                }
                prop_assert_eq!(f.len(), queue.len());
                prop_assert_eq!(f.has_synced(), populated && initial.unwrap_or(0) == 0);
            }
            Ok(())
        })?;
    }
}
