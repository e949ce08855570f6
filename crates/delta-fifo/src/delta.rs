//! Deltas: what happened to one object, oldest first.

use std::sync::Arc;

use store_index::ObjectOrTombstone;

/// The kind of change a [`Delta`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeltaType {
    /// The object was added (watch `ADDED`).
    Added,
    /// The object was modified (watch `MODIFIED`).
    Updated,
    /// The object was deleted; the delta's object is its last state, possibly a tombstone.
    Deleted,
    /// The object was listed by a relist (emitted when `emit_replaced` is on).
    Replaced,
    /// A periodic resync, or a relisted object when `emit_replaced` is off.
    Sync,
}

/// One change: its type and the object after it (for `Deleted`, the object before it).
#[derive(Debug)]
pub struct Delta<K> {
    /// What happened.
    pub kind: DeltaType,
    /// The object (or tombstone).
    pub object: ObjectOrTombstone<K>,
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        Delta {
            kind: self.kind,
            object: self.object.clone(),
        }
    }
}

impl<K: PartialEq> PartialEq for Delta<K> {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.object == other.object
    }
}

impl<K> Delta<K> {
    /// A delta carrying an object.
    pub fn new(kind: DeltaType, object: Arc<K>) -> Self {
        Delta {
            kind,
            object: ObjectOrTombstone::Object(object),
        }
    }

    /// The object, or the tombstone's last known object.
    pub fn object(&self) -> Option<&Arc<K>> {
        self.object.object()
    }
}

/// The changes queued for one key, oldest first. Never empty when handed out by a queue.
#[derive(Debug)]
pub struct Deltas<K>(pub(crate) Vec<Delta<K>>);

impl<K> Clone for Deltas<K> {
    fn clone(&self) -> Self {
        Deltas(self.0.clone())
    }
}

impl<K: PartialEq> PartialEq for Deltas<K> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<K> FromIterator<Delta<K>> for Deltas<K> {
    fn from_iter<I: IntoIterator<Item = Delta<K>>>(iter: I) -> Self {
        Deltas(iter.into_iter().collect())
    }
}

impl<K> Default for Deltas<K> {
    fn default() -> Self {
        Deltas(Vec::new())
    }
}

impl<K> Deltas<K> {
    /// Builds a list of deltas (oldest first).
    pub fn from_vec(deltas: Vec<Delta<K>>) -> Self {
        Deltas(deltas)
    }

    /// The oldest delta.
    pub fn oldest(&self) -> Option<&Delta<K>> {
        self.0.first()
    }

    /// The newest delta.
    pub fn newest(&self) -> Option<&Delta<K>> {
        self.0.last()
    }

    /// Number of deltas.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Iterates oldest first.
    pub fn iter(&self) -> std::slice::Iter<'_, Delta<K>> {
        self.0.iter()
    }

    /// The deltas as a slice, oldest first.
    pub fn as_slice(&self) -> &[Delta<K>] {
        &self.0
    }

    /// The deltas as a vector, oldest first.
    pub fn into_vec(self) -> Vec<Delta<K>> {
        self.0
    }

    /// Appends `delta`, then collapses the last two if both are deletions (contract B6): the
    /// older one is kept unless it is a tombstone, in which case the newer one is. No other pair is
    /// ever collapsed.
    pub(crate) fn push_deduped(&mut self, delta: Delta<K>) {
        self.0.push(delta);
        let n = self.0.len();
        if n < 2 {
            return;
        }
        let (older, newer) = (&self.0[n - 2], &self.0[n - 1]);
        if older.kind == DeltaType::Deleted && newer.kind == DeltaType::Deleted {
            if older.object.is_tombstone() {
                self.0.remove(n - 2);
            } else {
                self.0.pop();
            }
        }
    }
}

impl<K> IntoIterator for Deltas<K> {
    type Item = Delta<K>;
    type IntoIter = std::vec::IntoIter<Delta<K>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a, K> IntoIterator for &'a Deltas<K> {
    type Item = &'a Delta<K>;
    type IntoIter = std::slice::Iter<'a, Delta<K>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
