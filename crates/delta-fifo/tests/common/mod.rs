//! Test objects and helpers shared by the delta-fifo tests.
#![allow(dead_code)]

use std::sync::Arc;

use delta_fifo::store_index::{
    DeletedFinalStateUnknown, Indexer, Object, ObjectMeta, ObjectOrTombstone,
};
use delta_fifo::{DeltaFifo, DeltaType, Deltas, FifoError, ProcessError};

/// A test object: a name and an integer value (stored as its resource version).
#[derive(Debug, Clone, PartialEq)]
pub struct Obj {
    pub meta: ObjectMeta,
    pub val: i64,
}

impl Object for Obj {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        Some(&self.meta)
    }
}

pub fn obj(name: &str, val: i64) -> Arc<Obj> {
    Arc::new(Obj {
        meta: ObjectMeta {
            name: Some(name.to_string()),
            resource_version: Some(val.to_string()),
            ..Default::default()
        },
        val,
    })
}

pub fn tombstone(key: &str, o: Option<Arc<Obj>>) -> ObjectOrTombstone<Obj> {
    DeletedFinalStateUnknown {
        key: key.into(),
        obj: o,
    }
    .into()
}

/// A known-objects store holding these objects.
pub fn known(objs: &[(&str, i64)]) -> Indexer<Obj> {
    let idx = Indexer::default();
    for (n, v) in objs {
        idx.add(obj(n, *v)).unwrap();
    }
    idx
}

/// A compact description of one delta: (type, name, value, is tombstone).
pub type D = (DeltaType, String, Option<i64>, bool);

pub fn describe(deltas: &Deltas<Obj>) -> Vec<D> {
    deltas
        .iter()
        .map(|d| {
            let (name, val) = match d.object() {
                Some(o) => (o.meta.name.clone().unwrap_or_default(), Some(o.val)),
                None => (String::new(), None),
            };
            let name = match d.object.tombstone() {
                Some(t) => t.key.to_string(),
                None => name,
            };
            (d.kind, name, val, d.object.is_tombstone())
        })
        .collect()
}

pub fn d(kind: DeltaType, name: &str, val: i64) -> D {
    (kind, name.to_string(), Some(val), false)
}

pub fn t(name: &str, val: Option<i64>) -> D {
    (DeltaType::Deleted, name.to_string(), val, true)
}

/// Pops one item, returning its deltas and the is-in-initial-list flag.
pub async fn pop(fifo: &DeltaFifo<Obj>) -> (Deltas<Obj>, bool) {
    fifo.pop(|deltas, initial| Ok::<_, ProcessError>((deltas.clone(), initial)))
        .await
        .expect("pop")
        .expect("a value")
}

/// Pops everything currently queued (the queue must not be closed).
pub async fn drain(fifo: &DeltaFifo<Obj>) -> Vec<Vec<D>> {
    let mut out = Vec::new();
    while !fifo.is_empty() {
        out.push(describe(&pop(fifo).await.0));
    }
    out
}

pub fn is_closed_error(e: &FifoError) -> bool {
    matches!(e, FifoError::Closed)
}
