//! Property tests of the DeltaFIFO invariants, each named after the invariant it checks, as
//! client-go's DeltaFIFO contract states them:
//! 1. queue and items hold the same key set, with no duplicate key in the queue;
//! 2. keys pop in the order they were first enqueued since their last pop;
//! 3. each popped `Deltas` is non-empty, oldest first, and equals the operations applied to that
//!    key since its last pop, after the dedup rule (checked against a reference model);
//! 4. after `replace`, what pops is exactly every listed object as Replaced (or Sync), every known
//!    key missing from the list as Deleted with a tombstone, and nothing else;
//! 5. `has_synced` turns true exactly when the last item of the initial population has been popped;
//! 6. `resync` never adds a delta to a key that is already queued.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use delta_fifo::store_index::Indexer;
use delta_fifo::{DeltaFifo, DeltaFifoOptions, DeltaType};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(u8, i64),
    Update(u8, i64),
    Delete(u8, i64),
    Replace(Vec<(u8, i64)>),
    Resync,
    Pop,
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..5;
    let val = 0i64..100;
    prop_oneof![
        3 => (key.clone(), val.clone()).prop_map(|(k, v)| Op::Add(k, v)),
        3 => (key.clone(), val.clone()).prop_map(|(k, v)| Op::Update(k, v)),
        2 => (key.clone(), val.clone()).prop_map(|(k, v)| Op::Delete(k, v)),
        1 => prop::collection::vec((key, val), 0..5).prop_map(Op::Replace),
        1 => Just(Op::Resync),
        3 => Just(Op::Pop),
    ]
}

fn name(k: u8) -> String {
    format!("k{k}")
}

/// The reference model: a plain ordered list of keys and a map of described deltas, written from
/// the contract's rules without sharing any code with the queue.
#[derive(Default)]
struct Model {
    queue: Vec<String>,
    items: BTreeMap<String, Vec<D>>,
    /// What a consumer has processed: the known objects.
    known: BTreeMap<String, i64>,
    emit_replaced: bool,
}

impl Model {
    fn push(&mut self, key: &str, delta: D) {
        let deltas = self.items.entry(key.to_string()).or_insert_with(|| {
            self.queue.push(key.to_string());
            Vec::new()
        });
        deltas.push(delta);
        let n = deltas.len();
        if n >= 2 && deltas[n - 2].0 == DeltaType::Deleted && deltas[n - 1].0 == DeltaType::Deleted
        {
            if deltas[n - 2].3 {
                deltas.remove(n - 2);
            } else {
                deltas.pop();
            }
        }
    }

    fn delete(&mut self, key: &str, val: i64) {
        if !self.known.contains_key(key) && !self.items.contains_key(key) {
            return;
        }
        self.push(key, d(DeltaType::Deleted, key, val));
    }

    /// Returns where the unordered part of the queue starts: keys first enqueued by the tombstone
    /// phases may come in any order (contract B8.6).
    fn replace(&mut self, list: &[(String, i64)]) -> usize {
        let kind = if self.emit_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        };
        let listed: BTreeSet<String> = list.iter().map(|(k, _)| k.clone()).collect();
        for (k, v) in list {
            self.push(k, d(kind, k, *v));
        }
        let unordered_from = self.queue.len();
        let queued: Vec<(String, Option<i64>)> = self
            .items
            .iter()
            .filter(|(k, _)| !listed.contains(*k))
            .map(|(k, ds)| (k.clone(), ds.last().and_then(|x| x.2)))
            .collect();
        for (k, v) in queued {
            self.push(&k, t(&k, v));
        }
        let known: Vec<(String, i64)> = self
            .known
            .iter()
            .filter(|(k, _)| !listed.contains(*k) && !self.items.contains_key(*k))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for (k, v) in known {
            self.push(&k, t(&k, Some(v)));
        }
        unordered_from
    }

    /// Returns where the unordered part of the queue starts (resync walks the known store in no
    /// particular order).
    fn resync(&mut self) -> usize {
        let unordered_from = self.queue.len();
        let known: Vec<(String, i64)> = self
            .known
            .iter()
            .filter(|(k, _)| !self.items.contains_key(*k))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for (k, v) in known {
            self.push(&k, d(DeltaType::Sync, &k, v));
        }
        unordered_from
    }

    /// Accepts the queue's order for the keys appended from `from` on, after checking they are
    /// the same set.
    fn adopt_order(&mut self, from: usize, actual: &[String]) {
        let want: BTreeSet<&String> = self.queue[from..].iter().collect();
        let got: BTreeSet<&String> = actual.get(from..).unwrap_or_default().iter().collect();
        assert_eq!(got, want, "invariant 1: the same keys were enqueued");
        self.queue.truncate(from);
        self.queue.extend(actual[from..].iter().cloned());
    }

    fn pop(&mut self) -> Option<(String, Vec<D>)> {
        if self.queue.is_empty() {
            return None;
        }
        let key = self.queue.remove(0);
        let deltas = self.items.remove(&key)?;
        for delta in &deltas {
            match delta.0 {
                DeltaType::Deleted => {
                    self.known.remove(&key);
                }
                _ => {
                    self.known.insert(key.clone(), delta.2.unwrap_or_default());
                }
            }
        }
        Some((key, deltas))
    }
}

/// Applies popped deltas to the known store, as an informer does.
fn apply(known: &Indexer<Obj>, deltas: &delta_fifo::Deltas<Obj>) {
    for delta in deltas {
        match (delta.kind, delta.object.tombstone(), delta.object()) {
            (DeltaType::Deleted, Some(t), _) => {
                known.delete_by_key(t.key.as_str()).unwrap();
            }
            (DeltaType::Deleted, None, Some(o)) => known.delete(o).unwrap(),
            (_, _, Some(o)) => known.update(o.clone()).unwrap(),
            _ => unreachable!("non-delete deltas carry objects"),
        }
    }
}

fn keys_of(fifo: &DeltaFifo<Obj>) -> Vec<String> {
    fifo.list_keys().iter().map(|k| k.to_string()).collect()
}

fn check_queue_shape(fifo: &DeltaFifo<Obj>, model: &Model) {
    let keys: Vec<String> = fifo.list_keys().iter().map(|k| k.to_string()).collect();
    let unique: BTreeSet<&String> = keys.iter().collect();
    assert_eq!(
        unique.len(),
        keys.len(),
        "invariant 1: no duplicate key in the queue"
    );
    for key in &keys {
        let deltas = fifo
            .get_by_key(key)
            .expect("invariant 1: every queued key has items");
        assert!(
            !deltas.is_empty(),
            "invariant 3: stored deltas are never empty"
        );
    }
    assert_eq!(fifo.len(), keys.len());
    assert_eq!(
        keys, model.queue,
        "invariant 2: queue order is first-enqueue order"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fifo_matches_the_reference_model(ops in prop::collection::vec(op(), 1..80), emit_replaced in any::<bool>()) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let known: Indexer<Obj> = Indexer::default();
            let fifo = DeltaFifo::new(DeltaFifoOptions::new().known_objects(known.clone()).emit_replaced(emit_replaced));
            let mut model = Model { emit_replaced, ..Model::default() };
            for op in ops {
                match op {
                    Op::Add(k, v) => { fifo.add(obj(&name(k), v)).unwrap(); model.push(&name(k), d(DeltaType::Added, &name(k), v)); }
                    Op::Update(k, v) => { fifo.update(obj(&name(k), v)).unwrap(); model.push(&name(k), d(DeltaType::Updated, &name(k), v)); }
                    Op::Delete(k, v) => { fifo.delete(obj(&name(k), v)).unwrap(); model.delete(&name(k), v); }
                    Op::Replace(list) => {
                        let list: Vec<(String, i64)> = list.into_iter().map(|(k, v)| (name(k), v)).collect();
                        fifo.replace(list.iter().map(|(k, v)| obj(k, *v)).collect(), "").unwrap();
                        let from = model.replace(&list);
                        model.adopt_order(from, &keys_of(&fifo));
                    }
                    Op::Resync => {
                        fifo.resync().unwrap();
                        let from = model.resync();
                        model.adopt_order(from, &keys_of(&fifo));
                    }
                    Op::Pop => {
                        let want = model.pop();
                        if let Some((key, want)) = want {
                            let (deltas, _) = pop(&fifo).await;
                            apply(&known, &deltas);
                            let got_key = fifo.key_of(&deltas.newest().unwrap().object).unwrap();
                            assert_eq!(got_key.as_str(), key, "invariant 2: pop order");
                            assert_eq!(describe(&deltas), want, "invariant 3: popped deltas equal the model's");
                        } else {
                            assert!(fifo.is_empty());
                        }
                    }
                }
                check_queue_shape(&fifo, &model);
            }
        });
    }

    #[test]
    fn replace_pops_exactly_the_listed_and_the_missing(
        known_vals in prop::collection::btree_map(0u8..6, 0i64..50, 0..6),
        list in prop::collection::btree_map(0u8..6, 50i64..100, 0..6),
        emit_replaced in any::<bool>(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let known: Indexer<Obj> = Indexer::default();
            for (k, v) in &known_vals { known.add(obj(&name(*k), *v)).unwrap(); }
            let fifo = DeltaFifo::new(DeltaFifoOptions::new().known_objects(known.clone()).emit_replaced(emit_replaced));
            fifo.replace(list.iter().map(|(k, v)| obj(&name(*k), *v)).collect(), "").unwrap();
            let kind = if emit_replaced { DeltaType::Replaced } else { DeltaType::Sync };
            let mut expected: BTreeMap<String, Vec<D>> = BTreeMap::new();
            for (k, v) in &list { expected.insert(name(*k), vec![d(kind, &name(*k), *v)]); }
            for (k, v) in &known_vals {
                if !list.contains_key(k) { expected.insert(name(*k), vec![t(&name(*k), Some(*v))]); }
            }
            let mut got: BTreeMap<String, Vec<D>> = BTreeMap::new();
            while !fifo.is_empty() {
                let (deltas, initial) = pop(&fifo).await;
                assert!(initial, "every pop of the first replace is in the initial list");
                let key = fifo.key_of(&deltas.newest().unwrap().object).unwrap();
                got.insert(key.to_string(), describe(&deltas));
            }
            assert_eq!(got, expected, "invariant 4: exactly the listed and the missing pop");
        });
    }

    #[test]
    fn has_synced_turns_true_exactly_after_the_last_initial_pop(
        known_vals in prop::collection::btree_map(0u8..6, 0i64..50, 0..6),
        list in prop::collection::vec((0u8..6, 50i64..100), 0..8),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let known: Indexer<Obj> = Indexer::default();
            for (k, v) in &known_vals { known.add(obj(&name(*k), *v)).unwrap(); }
            let fifo = DeltaFifo::new(DeltaFifoOptions::new().known_objects(known.clone()));
            fifo.replace(list.iter().map(|(k, v)| obj(&name(*k), *v)).collect(), "").unwrap();
            let listed: BTreeSet<u8> = list.iter().map(|(k, _)| *k).collect();
            let missing = known_vals.keys().filter(|k| !listed.contains(k)).count();
            let initial = listed.len() + missing;
            assert_eq!(fifo.len(), initial);
            for i in 0..initial {
                assert!(!fifo.has_synced(), "invariant 5: not synced before pop {}", i + 1);
                pop(&fifo).await;
            }
            assert!(fifo.has_synced(), "invariant 5: synced after the last initial pop");
            fifo.add(obj("later", 1)).unwrap();
            assert!(fifo.has_synced(), "invariant 5: stays synced");
        });
    }

    #[test]
    fn resync_never_adds_to_a_queued_key(
        known_vals in prop::collection::btree_map(0u8..6, 0i64..50, 0..6),
        queued in prop::collection::vec((0u8..6, 50i64..100), 0..6),
    ) {
        let known: Indexer<Obj> = Indexer::default();
        for (k, v) in &known_vals { known.add(obj(&name(*k), *v)).unwrap(); }
        let fifo = DeltaFifo::new(DeltaFifoOptions::new().known_objects(known.clone()));
        for (k, v) in &queued { fifo.update(obj(&name(*k), *v)).unwrap(); }
        let before: BTreeMap<String, Vec<D>> = fifo.list_keys().iter()
            .map(|k| (k.to_string(), describe(&fifo.get_by_key(k.as_str()).unwrap()))).collect();
        fifo.resync().unwrap();
        for (k, deltas) in &before {
            assert_eq!(&describe(&fifo.get_by_key(k).unwrap()), deltas, "invariant 6: queued key {k} unchanged by resync");
        }
        for (k, v) in &known_vals {
            if !before.contains_key(&name(*k)) {
                assert_eq!(describe(&fifo.get_by_key(&name(*k)).unwrap()), vec![d(DeltaType::Sync, &name(*k), *v)]);
            }
        }
    }
}
