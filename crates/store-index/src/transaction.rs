//! Store transactions: a batch of adds, updates and deletes applied under one lock (contract rule
//! A3.7, client-go's `Store.Transaction`).
//!
//! An informer that processes several keys at once wants its cache to move from one consistent
//! state to the next: a lister must never see the first half of a batch. [`Indexer::transaction`]
//! computes every key first (user code, outside the lock), then takes the write lock **once** and
//! applies the operations in order. An operation that cannot be applied — its key cannot be
//! computed, or an index function refuses its object (A4.5) — is skipped and reported; the others
//! still apply.
//!
//! Invariants (checked by the property test `proptest_transaction_invariants` below and by
//! `tests/concurrency.rs`):
//! - **T1 (one by one):** a transaction leaves items and indexes exactly as applying its
//!   operations one by one with `add`/`update`/`delete` would, and the operations it reports as
//!   failed are exactly those that would fail alone.
//! - **T2 (all at once):** no reader observes a state in which some but not all of a transaction's
//!   successful operations have been applied.
//! - **T3 (last operation's version):** the tracked resource version (A6) becomes that of the last
//!   successfully applied operation's object — never an earlier operation's — and stays as it was
//!   when that object carries none (a tombstone, an object without metadata).

use std::fmt;
use std::sync::Arc;

use crate::error::StoreError;
use crate::indexer::Indexer;
use crate::object::Object;
use crate::thread_safe_store::LastWrite;
use crate::tombstone::ObjectOrTombstone;

/// What a [`Transaction`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionKind {
    /// Insert or replace the object (the same as `Update`, A3).
    Add,
    /// Insert or replace the object (the same as `Add`, A3).
    Update,
    /// Remove the object with this key; a missing key is a silent no-op.
    Delete,
}

/// One operation of a store transaction.
///
/// Built with [`add`](Self::add), [`update`](Self::update) or [`delete`](Self::delete), so that
/// only a delete can carry a tombstone (a store of `K` cannot hold one).
#[derive(Debug)]
pub struct Transaction<K> {
    kind: TransactionKind,
    object: ObjectOrTombstone<K>,
}

impl<K> Clone for Transaction<K> {
    fn clone(&self) -> Self {
        Transaction {
            kind: self.kind,
            object: self.object.clone(),
        }
    }
}

impl<K> Transaction<K> {
    /// Insert or replace `obj`.
    pub fn add(obj: Arc<K>) -> Self {
        Transaction {
            kind: TransactionKind::Add,
            object: ObjectOrTombstone::Object(obj),
        }
    }

    /// Insert or replace `obj` (the same effect as [`add`](Self::add)).
    pub fn update(obj: Arc<K>) -> Self {
        Transaction {
            kind: TransactionKind::Update,
            object: ObjectOrTombstone::Object(obj),
        }
    }

    /// Remove the object with `obj`'s key: an object's key, or a tombstone's own key.
    pub fn delete(obj: impl Into<ObjectOrTombstone<K>>) -> Self {
        Transaction {
            kind: TransactionKind::Delete,
            object: obj.into(),
        }
    }

    /// What the operation does.
    pub fn kind(&self) -> TransactionKind {
        self.kind
    }

    /// The object (or, for a delete, possibly a tombstone) it carries.
    pub fn object(&self) -> &ObjectOrTombstone<K> {
        &self.object
    }
}

/// Why some operations of a transaction were not applied; the others were.
///
/// Shown as `failed to execute (<failed>/<total>) transactions failed due to: [<errors>]`.
#[derive(Debug)]
pub struct TransactionError {
    /// Positions (in the input, ascending) of the operations that were applied; empty, not
    /// absent, when every one failed.
    pub successful_indices: Vec<usize>,
    /// How many operations the transaction had.
    pub total: usize,
    /// The errors of the operations that were skipped, in input order.
    pub errors: Vec<StoreError>,
}

impl TransactionError {
    /// Positions (in the input, ascending) of the operations that were skipped.
    pub fn failed_indices(&self) -> Vec<usize> {
        let mut ok = self.successful_indices.iter().peekable();
        (0..self.total)
            .filter(|i| {
                if ok.peek() == Some(&i) {
                    ok.next();
                    false
                } else {
                    true
                }
            })
            .collect()
    }
}

impl fmt::Display for TransactionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "failed to execute ({}/{}) transactions failed due to: [",
            self.errors.len(),
            self.total
        )?;
        for (i, err) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{err}")?;
        }
        f.write_str("]")
    }
}

impl std::error::Error for TransactionError {}

impl<K: Object> Indexer<K> {
    /// Applies `ops` in order under one acquisition of the write lock: no reader sees part of the
    /// batch, and every index moves with the items (T1–T3 in this module's docs).
    ///
    /// Keys are computed before the lock is taken. An operation whose key cannot be computed, or
    /// whose object an index function refuses, is skipped (the store is as if it had not been
    /// there) and reported in the [`TransactionError`] with the positions of those that were
    /// applied. `Ok(())` means every operation was applied. The tracked resource version becomes
    /// that of the last applied operation's object (see T3).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use store_index::{DynamicObject, Indexer, Transaction};
    ///
    /// let pod = |name: &str, rv: &str| {
    ///     Arc::new(DynamicObject::new("v1", "Pod").within("ns").named(name).with_resource_version(rv))
    /// };
    /// let indexer: Indexer<DynamicObject> = Indexer::default();
    /// indexer.add(pod("old", "1")).unwrap();
    /// indexer
    ///     .transaction([
    ///         Transaction::add(pod("a", "2")),
    ///         Transaction::update(pod("b", "3")),
    ///         Transaction::delete(pod("old", "4")),
    ///     ])
    ///     .unwrap();
    /// let mut keys = indexer.list_keys();
    /// keys.sort();
    /// assert_eq!(keys, ["ns/a", "ns/b"]);
    /// assert_eq!(indexer.resource_version(), "4");
    /// ```
    pub fn transaction(
        &self,
        ops: impl IntoIterator<Item = Transaction<K>>,
    ) -> Result<(), TransactionError> {
        self.transaction_with_previous(ops).1
    }

    /// [`transaction`](Self::transaction), also returning what each operation replaced or
    /// removed, in input order (`None` for a key that held nothing, or an operation that was
    /// skipped): a consumer that notifies about the batch learns add from update without reading
    /// the store once more per object.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use store_index::{DynamicObject, Indexer, Object, Transaction};
    ///
    /// let pod = |rv: &str| Arc::new(DynamicObject::new("v1", "Pod").within("ns").named("a").with_resource_version(rv));
    /// let indexer: Indexer<DynamicObject> = Indexer::default();
    /// indexer.add(pod("1")).unwrap();
    /// let (previous, outcome) =
    ///     indexer.transaction_with_previous([Transaction::update(pod("2")), Transaction::delete(pod("2"))]);
    /// outcome.unwrap();
    /// assert_eq!(previous[0].as_ref().unwrap().resource_version(), Some("1"));
    /// assert_eq!(previous[1].as_ref().unwrap().resource_version(), Some("2"));
    /// ```
    pub fn transaction_with_previous(
        &self,
        ops: impl IntoIterator<Item = Transaction<K>>,
    ) -> (Vec<Option<Arc<K>>>, Result<(), TransactionError>) {
        let mut keyed = Vec::new();
        let mut errors = Vec::new();
        let mut total = 0;
        for (i, op) in ops.into_iter().enumerate() {
            total += 1;
            let key = match &op.object {
                ObjectOrTombstone::Object(obj) => self.key_of(obj),
                ObjectOrTombstone::Tombstone(t) => Ok(t.key.clone()),
            };
            match key {
                Ok(key) => keyed.push((i, key, op)),
                Err(err) => errors.push((i, err)),
            }
        }

        let mut successful_indices = Vec::with_capacity(keyed.len());
        let mut previous: Vec<Option<Arc<K>>> = vec![None; total];
        self.write_state(|state| {
            let mut last_applied = None;
            for (i, key, op) in keyed {
                let applied = match (op.kind, &op.object) {
                    (
                        TransactionKind::Add | TransactionKind::Update,
                        ObjectOrTombstone::Object(obj),
                    ) => state.upsert(key, Arc::clone(obj)),
                    // A delete; the constructors let only a delete carry a tombstone.
                    _ => state.remove(key.as_str()),
                };
                match applied {
                    Ok(old) => {
                        previous[i] = old;
                        successful_indices.push(i);
                        last_applied = Some(op);
                    }
                    Err(err) => errors.push((i, err)),
                }
            }
            // T3: only the last applied operation decides, as if the batch were one write.
            if let Some(Transaction {
                kind,
                object: ObjectOrTombstone::Object(obj),
            }) = last_applied
            {
                if obj.has_meta() {
                    state.last_write = match kind {
                        TransactionKind::Delete => {
                            LastWrite::Version(obj.resource_version().unwrap_or("").into())
                        }
                        TransactionKind::Add | TransactionKind::Update => LastWrite::Object(obj),
                    };
                }
            }
        });

        if errors.is_empty() {
            return (previous, Ok(()));
        }
        errors.sort_by_key(|(i, _)| *i);
        let error = TransactionError {
            successful_indices,
            total,
            errors: errors.into_iter().map(|(_, err)| err).collect(),
        };
        (previous, Err(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::KeyError;
    use crate::{meta_namespace_key, DeletedFinalStateUnknown, DynamicObject, Indexers};

    fn pod(name: &str, rv: &str) -> Arc<DynamicObject> {
        Arc::new(
            DynamicObject::new("v1", "Pod")
                .within("ns")
                .named(name)
                .with_resource_version(rv),
        )
    }

    /// Keys every object but those named `bad`.
    fn picky_indexer() -> Indexer<DynamicObject> {
        Indexer::with_key_fn(
            Arc::new(|o: &DynamicObject| {
                if o.name() == "bad" {
                    Err(KeyError::Custom("bad name".into()))
                } else {
                    meta_namespace_key(o)
                }
            }),
            Indexers::new().with_namespace_index(),
        )
    }

    #[test]
    fn skipped_keys_leave_the_others_applied_and_are_reported_by_position() {
        let idx = picky_indexer();
        let err = idx
            .transaction([
                Transaction::add(pod("a", "1")),
                Transaction::add(pod("bad", "3")),
                Transaction::add(pod("b", "2")),
                Transaction::add(pod("bad", "4")),
            ])
            .unwrap_err();
        assert_eq!(err.successful_indices, [0, 2]);
        assert_eq!(err.failed_indices(), [1, 3]);
        assert_eq!(err.total, 4);
        assert_eq!(err.errors.len(), 2);
        assert!(err
            .errors
            .iter()
            .all(|e| e.key_error() == Some(&KeyError::Custom("bad name".into()))));
        let mut keys = idx.list_keys();
        keys.sort();
        assert_eq!(keys, ["ns/a", "ns/b"]);
        assert_eq!(idx.index_keys("namespace", "ns").unwrap(), ["ns/a", "ns/b"]);
    }

    #[test]
    fn all_failing_reports_an_empty_list_of_successes() {
        let idx = picky_indexer();
        let err = idx
            .transaction([
                Transaction::add(pod("bad", "1")),
                Transaction::delete(pod("bad", "2")),
            ])
            .unwrap_err();
        assert!(err.successful_indices.is_empty());
        assert_eq!(err.total, 2);
        assert!(idx.is_empty());
        assert_eq!(idx.resource_version(), "");
    }

    #[test]
    fn error_text_counts_failures_over_total_and_lists_the_errors() {
        let idx = picky_indexer();
        let err = idx
            .transaction([
                Transaction::add(pod("bad", "1")),
                Transaction::add(pod("a", "2")),
                Transaction::add(pod("bad", "3")),
            ])
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("failed to execute (2/3) transactions failed due to: [couldn't create key for object "),
            "{text}"
        );
        assert!(text.ends_with(": bad name]"), "{text}");
        assert_eq!(text.matches("bad name").count(), 2, "{text}");
    }

    #[test]
    fn no_error_means_no_result() {
        let idx = picky_indexer();
        assert!(idx.transaction(Vec::new()).is_ok());
        assert!(idx.transaction([Transaction::add(pod("a", "1"))]).is_ok());
    }

    #[test]
    fn resource_version_is_the_last_operations_only() {
        let idx: Indexer<DynamicObject> = Indexer::default();
        idx.transaction([
            Transaction::add(pod("a", "40")),
            Transaction::add(pod("b", "30")),
            Transaction::add(pod("c", "50")),
        ])
        .unwrap();
        assert_eq!(idx.resource_version(), "50");
        idx.transaction([
            Transaction::add(pod("d", "90")),
            Transaction::delete(pod("a", "60")),
        ])
        .unwrap();
        assert_eq!(idx.resource_version(), "60");
    }

    #[test]
    fn a_last_operation_without_a_version_leaves_the_version_as_it_was() {
        let idx: Indexer<DynamicObject> = Indexer::default();
        idx.add(pod("a", "10")).unwrap();
        idx.transaction([
            Transaction::add(pod("b", "20")),
            Transaction::delete(DeletedFinalStateUnknown {
                key: "ns/a".into(),
                obj: Some(pod("a", "15")),
            }),
        ])
        .unwrap();
        assert!(
            idx.get_by_key("ns/a").is_none(),
            "the tombstone deleted by its key"
        );
        assert_eq!(idx.resource_version(), "10", "T3: not the earlier add's 20");
    }

    #[test]
    fn a_failed_last_operation_does_not_set_the_version() {
        let idx = picky_indexer();
        let err = idx
            .transaction([
                Transaction::add(pod("a", "7")),
                Transaction::add(pod("bad", "8")),
            ])
            .unwrap_err();
        assert_eq!(err.successful_indices, [0]);
        assert_eq!(idx.resource_version(), "7");
    }

    #[test]
    fn an_index_function_refusal_skips_that_operation_only() {
        let idx: Indexer<DynamicObject> =
            Indexer::new(Indexers::new().with("strict", |o: &DynamicObject| {
                if o.label("boom").is_some() {
                    Err("boom".into())
                } else {
                    Ok(vec![o.name().to_string()])
                }
            }));
        idx.add(pod("a", "1")).unwrap();
        let boom = Arc::new(
            DynamicObject::new("v1", "Pod")
                .within("ns")
                .named("a")
                .with_label("boom", "x"),
        );
        let err = idx
            .transaction([Transaction::update(boom), Transaction::add(pod("b", "2"))])
            .unwrap_err();
        assert_eq!(err.successful_indices, [1]);
        assert!(matches!(err.errors[0], StoreError::IndexFunc { .. }));
        assert!(idx.get_by_key("ns/a").unwrap().label("boom").is_none());
        assert_eq!(idx.index_keys("strict", "a").unwrap(), ["ns/a"]);
        assert_eq!(idx.index_keys("strict", "b").unwrap(), ["ns/b"]);
    }

    #[test]
    fn failed_indices_complement_the_successes() {
        let err = TransactionError {
            successful_indices: vec![1, 2, 5],
            total: 7,
            errors: Vec::new(),
        };
        assert_eq!(err.failed_indices(), [0, 3, 4, 6]);
    }
}

#[cfg(test)]
mod proptest_transaction_invariants {
    //! T1 (one by one) and T3 (last operation's version) of this module: any sequence of
    //! transactions, with operations that fail keying or indexing mixed in, leaves the store as a
    //! model indexer that applies every operation alone does, with the same failures.

    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::error::KeyError;
    use crate::{meta_namespace_key, DeletedFinalStateUnknown, DynamicObject, Indexers};

    #[derive(Debug, Clone)]
    enum Op {
        /// Name 0..4 (4 is keyed as an error), label value 0..3 (2 is refused by an index).
        Add(u8, u8, u8),
        Update(u8, u8, u8),
        Delete(u8, u8),
        DeleteTombstone(u8),
        /// An object without a resource version.
        AddUnversioned(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u8..5, 0u8..3, 0u8..100).prop_map(|(n, v, rv)| Op::Add(n, v, rv)),
            2 => (0u8..5, 0u8..3, 0u8..100).prop_map(|(n, v, rv)| Op::Update(n, v, rv)),
            2 => (0u8..5, 0u8..100).prop_map(|(n, rv)| Op::Delete(n, rv)),
            1 => (0u8..5).prop_map(Op::DeleteTombstone),
            1 => (0u8..4).prop_map(Op::AddUnversioned),
        ]
    }

    fn name(n: u8) -> String {
        if n == 4 {
            "bad".into()
        } else {
            format!("p{n}")
        }
    }

    fn object(n: u8, v: u8, rv: Option<u8>) -> Arc<DynamicObject> {
        let mut o = DynamicObject::new("v1", "Pod")
            .within("ns")
            .named(name(n))
            .with_label("v", format!("v{v}"));
        if let Some(rv) = rv {
            o = o.with_resource_version(rv.to_string());
        }
        Arc::new(o)
    }

    fn to_transaction(op: &Op) -> Transaction<DynamicObject> {
        match *op {
            Op::Add(n, v, rv) => Transaction::add(object(n, v, Some(rv))),
            Op::Update(n, v, rv) => Transaction::update(object(n, v, Some(rv))),
            Op::Delete(n, rv) => Transaction::delete(object(n, 0, Some(rv))),
            Op::DeleteTombstone(n) => Transaction::delete(DeletedFinalStateUnknown {
                key: format!("ns/{}", name(n)).into(),
                obj: None,
            }),
            Op::AddUnversioned(n) => Transaction::add(object(n, 0, None)),
        }
    }

    fn indexer() -> Indexer<DynamicObject> {
        Indexer::with_key_fn(
            Arc::new(|o: &DynamicObject| {
                if o.name() == "bad" {
                    Err(KeyError::Custom("bad".into()))
                } else {
                    meta_namespace_key(o)
                }
            }),
            Indexers::new().with("v", |o: &DynamicObject| match o.label("v") {
                Some("v2") => Err("v2 refused".into()),
                v => Ok(v.map(str::to_string).into_iter().collect()),
            }),
        )
    }

    /// Applies `op` alone, as the non-transactional API would.
    fn apply_alone(idx: &Indexer<DynamicObject>, op: &Op) -> Result<(), StoreError> {
        let t = to_transaction(op);
        match (t.kind(), t.object().clone()) {
            (TransactionKind::Delete, obj) => idx.delete(obj),
            (_, ObjectOrTombstone::Object(obj)) => idx.add(obj),
            (_, ObjectOrTombstone::Tombstone(_)) => unreachable!("only deletes carry tombstones"),
        }
    }

    fn snapshot(
        idx: &Indexer<DynamicObject>,
    ) -> (BTreeMap<String, String>, BTreeMap<String, Vec<String>>) {
        let items = idx
            .list()
            .iter()
            .map(|o| (format!("ns/{}", o.name()), format!("{:?}", o)))
            .collect();
        let index = idx
            .list_index_func_values("v")
            .into_iter()
            .map(|v| {
                let keys = idx
                    .index_keys("v", &v)
                    .unwrap()
                    .iter()
                    .map(|k| k.to_string())
                    .collect();
                (v, keys)
            })
            .collect();
        (items, index)
    }

    proptest! {
        #[test]
        fn a_transaction_equals_its_operations_applied_one_by_one(
            batches in prop::collection::vec(prop::collection::vec(op(), 0..8), 1..8)
        ) {
            let store = indexer();
            let model = indexer();
            for batch in batches {
                let rv_before = store.resource_version();
                let mut expected_failures = Vec::new();
                let mut last_ok = None;
                for (i, op) in batch.iter().enumerate() {
                    match apply_alone(&model, op) {
                        Ok(()) => last_ok = Some(op.clone()),
                        Err(_) => expected_failures.push(i),
                    }
                }
                let result = store.transaction(batch.iter().map(to_transaction));
                match result {
                    Ok(()) => prop_assert!(expected_failures.is_empty()),
                    Err(err) => {
                        prop_assert_eq!(err.total, batch.len());
                        prop_assert_eq!(err.failed_indices(), expected_failures.clone());
                        prop_assert_eq!(err.errors.len(), expected_failures.len());
                    }
                }
                prop_assert_eq!(snapshot(&store), snapshot(&model), "T1");
                // T3: the last applied operation's version, or the one before the batch when that
                // operation carries none.
                let expected_rv = match last_ok {
                    Some(Op::Add(_, _, rv) | Op::Update(_, _, rv) | Op::Delete(_, rv)) => rv.to_string(),
                    // Metadata without a version: recorded as "", as `add` does.
                    Some(Op::AddUnversioned(_)) => String::new(),
                    Some(Op::DeleteTombstone(_)) | None => rv_before.to_string(),
                };
                prop_assert_eq!(store.resource_version().into_string(), expected_rv, "T3");
            }
        }
    }
}
