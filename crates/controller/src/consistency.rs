//! Read your own writes: a reconcile does not act on a cache older than the controller's own
//! last write of the key, in the terms of client-go's `ConsistencyStore` (Kubernetes 1.36,
//! KEP-5647), now that resource versions may be compared (KEP-5504, GA in 1.35).
//!
//! After a write, the controller records the resourceVersion the server answered
//! ([`ConsistencyStore::wrote_at`], or [`record`](ConsistencyStore::record) with the written
//! object). Before a reconcile acts on the cached object, [`ensure_ready`](ConsistencyStore::ensure_ready)
//! compares that version with how far the informer's cache has got
//! (`SharedIndexInformer::last_store_sync_resource_version`): until the cache has applied the
//! write (or anything newer) the key is [`Readiness::Stale`] and the reconcile requeues it
//! instead of acting on what it wrote over; once it has, the record is cleared. Rules RW1–RW4
//! (docs/semantics.md):
//!
//! - RW1: versions are compared as the API allows ([`compare_resource_versions`]): two decimal
//!   integers without leading zeros compare as numbers; any other pair is not comparable, and
//!   then only the cached object carrying exactly the written version proves the write seen;
//! - RW2: a key with no record, or whose record the cache has reached, is ready, and its record
//!   is cleared; a stale check counts in [`stale_sync_skips`](ConsistencyStore::stale_sync_skips)
//!   (client-go's `stale_sync_skips_total`);
//! - RW3: bounded: a record older than `max_wait` (default 10 s: the write's event is lost, say
//!   the object was deleted) no longer holds the key back; it is cleared and counted in
//!   [`gave_up`](ConsistencyStore::gave_up);
//! - RW4: at most `max_keys` records (default 100,000): recording one more first drops the
//!   records past `max_wait`, then the oldest.
//!
//! ```
//! use controller::consistency::{ConsistencyStore, Readiness};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let store = ConsistencyStore::new();
//! store.wrote_at("default/web", "120");
//! // The cache has applied events up to 118: our write is not in it yet.
//! assert!(matches!(store.ensure_ready("default/web", "118", Some("117")), Readiness::Stale { .. }));
//! // Now it has.
//! assert_eq!(store.ensure_ready("default/web", "121", Some("120")), Readiness::Ready);
//! assert_eq!(store.stale_sync_skips(), 1);
//! # }
//! ```

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use workqueue::shared_informer::reflector::store_index::Object;

/// The order of two resource versions, where the API allows comparing them (RW1): both
/// decimal integers without leading zeros (as kube-apiserver with etcd writes them). `None`
/// for any other pair: opaque versions compare for equality only.
///
/// ```
/// use std::cmp::Ordering;
/// use controller::consistency::compare_resource_versions;
/// assert_eq!(compare_resource_versions("99", "100"), Some(Ordering::Less));
/// assert_eq!(compare_resource_versions("100", "100"), Some(Ordering::Equal));
/// assert_eq!(compare_resource_versions("0100", "100"), None);
/// assert_eq!(compare_resource_versions("abc", "100"), None);
/// ```
pub fn compare_resource_versions(a: &str, b: &str) -> Option<Ordering> {
    let comparable = |v: &str| {
        !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()) && (v == "0" || !v.starts_with('0'))
    };
    if !comparable(a) || !comparable(b) {
        return None;
    }
    Some(a.len().cmp(&b.len()).then_with(|| a.cmp(b)))
}

/// Whether a key's cache is recent enough to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Act: no write of ours is missing from the cache.
    Ready,
    /// Requeue: the cache has not applied our last write yet.
    Stale {
        /// The version our write produced.
        wrote: String,
        /// How far the cache has got.
        cache: String,
    },
}

#[derive(Debug)]
struct Written {
    version: String,
    at: Instant,
}

/// The versions of the controller's own last writes, per key (see the
/// [module documentation](self)).
#[derive(Debug)]
pub struct ConsistencyStore {
    /// At most `max_keys` entries (RW4).
    written: Mutex<HashMap<String, Written>>,
    max_wait: Duration,
    max_keys: usize,
    stale_skips: AtomicU64,
    gave_up: AtomicU64,
}

impl Default for ConsistencyStore {
    fn default() -> Self {
        Self::new()
    }
}

impl ConsistencyStore {
    /// A store holding a key back at most 10 s, with at most 100,000 records.
    pub fn new() -> Self {
        ConsistencyStore {
            written: Mutex::new(HashMap::new()),
            max_wait: Duration::from_secs(10),
            max_keys: 100_000,
            stale_skips: AtomicU64::new(0),
            gave_up: AtomicU64::new(0),
        }
    }

    /// How long a record may hold its key back at most (RW3).
    #[must_use]
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait;
        self
    }

    /// How many records are kept at most (RW4; at least 1).
    #[must_use]
    pub fn max_keys(mut self, keys: usize) -> Self {
        self.max_keys = keys.max(1);
        self
    }

    /// Records that our write of `key` produced `version` (client-go's `WroteAt`). A record of
    /// a newer comparable version is kept.
    pub fn wrote_at(&self, key: impl Into<String>, version: &str) {
        if version.is_empty() {
            return;
        }
        let key = key.into();
        let now = Instant::now();
        let mut written = self.written.lock();
        if let Some(existing) = written.get(&key) {
            if compare_resource_versions(&existing.version, version) == Some(Ordering::Greater) {
                return;
            }
        } else if written.len() >= self.max_keys {
            self.make_room(&mut written, now);
        }
        written.insert(
            key,
            Written {
                version: version.to_string(),
                at: now,
            },
        );
    }

    /// [`wrote_at`](Self::wrote_at) for the object a write returned: its key
    /// (`namespace/name`) and resourceVersion.
    pub fn record<K: Object>(&self, written: &K) {
        let key = match written.namespace().filter(|ns| !ns.is_empty()) {
            Some(ns) => format!("{ns}/{}", written.name()),
            None => written.name().to_string(),
        };
        if let Some(version) = written.resource_version() {
            self.wrote_at(key, version);
        }
    }

    /// Whether `key` may be acted on, the cache having applied everything up to `cache_version`
    /// (the informer's `last_store_sync_resource_version`) and holding the object at
    /// `cached_version` (client-go's `EnsureReady`; RW1–RW3).
    pub fn ensure_ready(
        &self,
        key: &str,
        cache_version: &str,
        cached_version: Option<&str>,
    ) -> Readiness {
        let mut written = self.written.lock();
        let Some(record) = written.get(key) else {
            return Readiness::Ready;
        };
        let seen = match compare_resource_versions(cache_version, &record.version) {
            Some(order) => order != Ordering::Less,
            None => cached_version == Some(record.version.as_str()),
        };
        if seen {
            written.remove(key);
            return Readiness::Ready;
        }
        if record.at.elapsed() >= self.max_wait {
            tracing::warn!(
                key,
                wrote = %record.version,
                cache = cache_version,
                "the cache has not shown our write within the wait bound: acting on it anyway"
            );
            written.remove(key);
            self.gave_up.fetch_add(1, Relaxed);
            return Readiness::Ready;
        }
        self.stale_skips.fetch_add(1, Relaxed);
        Readiness::Stale {
            wrote: record.version.clone(),
            cache: cache_version.to_string(),
        }
    }

    /// Forgets `key`'s record (client-go's `Clear`), e.g. when the object was deleted.
    pub fn clear(&self, key: &str) {
        self.written.lock().remove(key);
    }

    /// How many times a key was found stale (`stale_sync_skips_total`).
    pub fn stale_sync_skips(&self) -> u64 {
        self.stale_skips.load(Relaxed)
    }

    /// How many records were given up after `max_wait` (RW3).
    pub fn gave_up(&self) -> u64 {
        self.gave_up.load(Relaxed)
    }

    /// How many keys have a record.
    pub fn len(&self) -> usize {
        self.written.lock().len()
    }

    /// Whether no key has a record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// RW4: drops the records past `max_wait`, then, if still full, the oldest.
    fn make_room(&self, written: &mut HashMap<String, Written>, now: Instant) {
        written.retain(|_, w| now.duration_since(w.at) < self.max_wait);
        if written.len() >= self.max_keys {
            if let Some(oldest) = written
                .iter()
                .min_by_key(|(_, w)| w.at)
                .map(|(k, _)| k.clone())
            {
                written.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[tokio::test(start_paused = true)]
    async fn opaque_versions_are_proved_seen_by_the_object_carrying_the_written_one() {
        // RW1
        let store = ConsistencyStore::new();
        store.wrote_at("ns/a", "v-7f");
        assert!(matches!(
            store.ensure_ready("ns/a", "v-80", Some("v-7e")),
            Readiness::Stale { .. }
        ));
        assert_eq!(
            store.ensure_ready("ns/a", "v-80", Some("v-7f")),
            Readiness::Ready
        );
        assert!(store.is_empty(), "cleared once seen");
    }

    #[tokio::test(start_paused = true)]
    async fn a_newer_record_is_kept_and_an_older_one_ignored() {
        let store = ConsistencyStore::new();
        store.wrote_at("ns/a", "10");
        store.wrote_at("ns/a", "9");
        assert!(matches!(
            store.ensure_ready("ns/a", "9", None),
            Readiness::Stale { .. }
        ));
        store.wrote_at("ns/a", "12");
        assert!(matches!(
            store.ensure_ready("ns/a", "11", None),
            Readiness::Stale { .. }
        ));
        assert_eq!(store.ensure_ready("ns/a", "12", None), Readiness::Ready);
        assert_eq!(store.stale_sync_skips(), 2);
        store.wrote_at("ns/b", "3");
        store.clear("ns/b");
        assert_eq!(store.ensure_ready("ns/b", "1", None), Readiness::Ready);
    }

    #[tokio::test(start_paused = true)]
    async fn a_record_holds_its_key_back_for_max_wait_at_most() {
        // RW3
        let store = ConsistencyStore::new().max_wait(Duration::from_secs(2));
        store.wrote_at("ns/a", "10");
        tokio::time::sleep(Duration::from_millis(1999)).await;
        assert!(matches!(
            store.ensure_ready("ns/a", "5", None),
            Readiness::Stale { .. }
        ));
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(store.ensure_ready("ns/a", "5", None), Readiness::Ready);
        assert_eq!((store.gave_up(), store.len()), (1, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn the_records_are_bounded_dropping_the_expired_then_the_oldest() {
        // RW4
        let store = ConsistencyStore::new()
            .max_keys(3)
            .max_wait(Duration::from_secs(5));
        store.wrote_at("a", "1");
        tokio::time::sleep(Duration::from_secs(6)).await;
        for key in ["b", "c"] {
            store.wrote_at(key, "1");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        store.wrote_at("d", "1"); // full: "a" is past max_wait and goes
        assert_eq!(store.len(), 3);
        assert_eq!(store.ensure_ready("a", "0", None), Readiness::Ready);
        tokio::time::sleep(Duration::from_secs(1)).await;
        store.wrote_at("e", "1"); // full, none expired: the oldest ("b") goes
        assert_eq!(store.len(), 3);
        assert_eq!(store.ensure_ready("b", "0", None), Readiness::Ready);
        assert!(matches!(
            store.ensure_ready("e", "0", None),
            Readiness::Stale { .. }
        ));
    }

    proptest! {
        /// RW1: the order of comparable versions is the order of their numbers.
        #[test]
        fn comparable_versions_order_as_numbers(a in 0u64..u64::MAX, b in 0u64..u64::MAX) {
            prop_assert_eq!(
                compare_resource_versions(&a.to_string(), &b.to_string()),
                Some(a.cmp(&b))
            );
        }
    }
}
