//! A bounded least-recently-used map, for the correlator's caches.
//!
//! Invariant: `len() <= capacity()` after every operation; inserting a new key into a full map
//! first evicts the key used least recently (a `get_mut` or an `insert` counts as a use).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

#[derive(Debug)]
pub(crate) struct Lru<K, V> {
    capacity: usize,
    /// key → (value, the tick of its last use).
    entries: HashMap<K, (V, u64)>,
    /// tick of last use → key: the first entry is the least recently used.
    order: BTreeMap<u64, K>,
    tick: u64,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    /// A map holding at most `capacity` entries (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            entries: HashMap::new(),
            order: BTreeMap::new(),
            tick: 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    fn touch(&mut self, key: &K) {
        self.tick += 1;
        if let Some((_, used)) = self.entries.get_mut(key) {
            self.order.remove(used);
            *used = self.tick;
            self.order.insert(self.tick, key.clone());
        }
    }

    /// The value for `key`, marked as just used.
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.touch(key);
        self.entries.get_mut(key).map(|(value, _)| value)
    }

    /// Sets `key` to `value`, marked as just used, evicting the least recently used entry if a
    /// new key would go over capacity.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        if let Some((old, _)) = self.entries.get_mut(&key) {
            *old = value;
            self.touch(&key);
            return;
        }
        if self.entries.len() >= self.capacity {
            if let Some((_, oldest)) = self.order.pop_first() {
                self.entries.remove(&oldest);
            }
        }
        self.tick += 1;
        self.order.insert(self.tick, key.clone());
        self.entries.insert(key, (value, self.tick));
    }

    /// Removes `key`, returning its value.
    #[cfg(test)]
    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let (value, used) = self.entries.remove(key)?;
        self.order.remove(&used);
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Get(u8),
        Insert(u8, u32),
        Remove(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..32).prop_map(Op::Get),
            (0u8..32, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            (0u8..32).prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// The invariant in the module docs, against a model: a vector ordered by last use.
        #[test]
        fn lru_never_exceeds_capacity_and_evicts_the_least_recently_used(
            capacity in 1usize..8,
            ops in prop::collection::vec(op(), 0..200),
        ) {
            let mut lru = Lru::new(capacity);
            let mut model: Vec<(u8, u32)> = Vec::new(); // least recently used first
            for op in ops {
                match op {
                    Op::Get(k) => {
                        let expected = model.iter().position(|(mk, _)| *mk == k).map(|i| {
                            let entry = model.remove(i);
                            model.push(entry);
                            entry.1
                        });
                        prop_assert_eq!(lru.get_mut(&k).copied(), expected);
                    }
                    Op::Insert(k, v) => {
                        if let Some(i) = model.iter().position(|(mk, _)| *mk == k) {
                            model.remove(i);
                        } else if model.len() == capacity {
                            model.remove(0);
                        }
                        model.push((k, v));
                        lru.insert(k, v);
                    }
                    Op::Remove(k) => {
                        let expected = model.iter().position(|(mk, _)| *mk == k).map(|i| model.remove(i).1);
                        prop_assert_eq!(lru.remove(&k), expected);
                    }
                }
                prop_assert!(lru.len() <= lru.capacity());
                prop_assert_eq!(lru.len(), model.len());
                prop_assert_eq!(lru.order.len(), lru.entries.len());
            }
        }
    }
}
