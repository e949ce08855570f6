//! [`ExpirationCache`]: a store whose entries expire a fixed time after they were written
//! (contract rule A7.2, client-go's `ExpirationCache` with a `TTLPolicy`).
//!
//! For facts that go stale on their own — a token, the answer of a slow lookup — rather than
//! facts kept fresh by a watch. Expiry is lazy: nothing runs in the background; an entry found
//! expired by a read is deleted by that read.
//!
//! Invariants (tests below):
//! - **X1 (strictly older):** an entry is expired exactly when `now - written > ttl`; one exactly
//!   `ttl` old is alive, and with a zero `ttl` nothing ever expires.
//! - **X2 (expired is gone):** no read returns an expired entry, and a read that meets one
//!   (`get`, `get_by_key`, `list`, `list_keys`) deletes it, so it stays gone even if the clock
//!   were set back.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::clock::{Clock, SystemClock};
use crate::error::StoreError;
use crate::key::{meta_namespace_key, KeyFn, ObjectKey};
use crate::object::Object;
use crate::tombstone::ObjectOrTombstone;

/// A stored object and when it was written.
struct TimestampedEntry<K> {
    obj: Arc<K>,
    written: Instant,
}

/// A thread-safe store whose entries expire `ttl` after their last add or update (see the
/// module's invariants X1, X2). Share it with an `Arc`.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use store_index::{DynamicObject, ExpirationCache, FakeClock};
///
/// let clock = FakeClock::new();
/// let cache = ExpirationCache::new(Duration::from_secs(30)).with_clock(clock.clone());
/// cache.add(Arc::new(DynamicObject::new("v1", "Pod").within("ns").named("a"))).unwrap();
///
/// clock.advance(Duration::from_secs(30));
/// assert!(cache.get_by_key("ns/a").is_some(), "exactly 30s old is alive");
/// clock.advance(Duration::from_millis(1));
/// assert!(cache.get_by_key("ns/a").is_none(), "older than 30s is gone");
/// ```
pub struct ExpirationCache<K> {
    key_fn: KeyFn<K>,
    ttl: Duration,
    clock: Arc<dyn Clock>,
    entries: Mutex<HashMap<ObjectKey, TimestampedEntry<K>>>,
}

impl<K: Object> std::fmt::Debug for ExpirationCache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpirationCache")
            .field("ttl", &self.ttl)
            .field("entries", &self.entries.lock().len())
            .finish()
    }
}

impl<K: Object> ExpirationCache<K> {
    /// An empty cache keyed by `namespace/name`, on the system clock, whose entries expire when
    /// older than `ttl` (never, when `ttl` is zero).
    pub fn new(ttl: Duration) -> Self {
        ExpirationCache {
            key_fn: Arc::new(|obj: &K| meta_namespace_key(obj)),
            ttl,
            clock: Arc::new(SystemClock),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Reads the time from `clock` instead (a [`FakeClock`](crate::FakeClock) in tests).
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Keys objects with `key_fn` instead.
    pub fn with_key_fn(mut self, key_fn: KeyFn<K>) -> Self {
        self.key_fn = key_fn;
        self
    }

    /// The time to live.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    fn key_of(&self, obj: &K) -> Result<ObjectKey, StoreError> {
        (self.key_fn)(obj).map_err(|e| StoreError::key(obj, e))
    }

    /// X1: strictly older than the ttl, and never with a zero ttl. A clock that went back counts
    /// as no time passed.
    fn is_expired(&self, entry: &TimestampedEntry<K>, now: Instant) -> bool {
        !self.ttl.is_zero() && now.saturating_duration_since(entry.written) > self.ttl
    }

    /// Inserts or replaces `obj`, stamped with the current time.
    pub fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        let key = self.key_of(&obj)?;
        let written = self.clock.now();
        self.entries
            .lock()
            .insert(key, TimestampedEntry { obj, written });
        Ok(())
    }

    /// Same as [`add`](Self::add): the entry's age starts again.
    pub fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.add(obj)
    }

    /// Removes the entry with `obj`'s key (an object's, or a tombstone's own); a missing key is a
    /// silent no-op.
    pub fn delete(&self, obj: impl Into<ObjectOrTombstone<K>>) -> Result<(), StoreError> {
        let key = match obj.into() {
            ObjectOrTombstone::Object(obj) => self.key_of(&obj)?,
            ObjectOrTombstone::Tombstone(t) => t.key,
        };
        self.entries.lock().remove(key.as_str());
        Ok(())
    }

    /// The live entry with `obj`'s key; an expired one is deleted and reported absent.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, StoreError> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(key.as_str()))
    }

    /// The live entry under `key`; an expired one is deleted and reported absent.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        let now = self.clock.now();
        let mut entries = self.entries.lock();
        let entry = entries.get(key)?;
        if self.is_expired(entry, now) {
            entries.remove(key);
            return None;
        }
        Some(Arc::clone(&entry.obj))
    }

    /// Deletes every expired entry; the rest stay.
    fn purge(&self, entries: &mut HashMap<ObjectKey, TimestampedEntry<K>>) {
        let now = self.clock.now();
        entries.retain(|_, entry| !self.is_expired(entry, now));
    }

    /// Every live object, in no particular order; expired entries are deleted.
    pub fn list(&self) -> Vec<Arc<K>> {
        let mut entries = self.entries.lock();
        self.purge(&mut entries);
        entries.values().map(|e| Arc::clone(&e.obj)).collect()
    }

    /// Every live key, in no particular order; expired entries are deleted. (client-go's
    /// `ListKeys` lists expired keys too; here the two listings agree.)
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        let mut entries = self.entries.lock();
        self.purge(&mut entries);
        entries.keys().cloned().collect()
    }

    /// Replaces the whole contents, every object stamped with the current time. If any object
    /// cannot be keyed, the cache is left untouched. With duplicate keys the last one wins.
    pub fn replace(&self, objects: impl IntoIterator<Item = Arc<K>>) -> Result<(), StoreError> {
        let written = self.clock.now();
        let mut fresh = HashMap::new();
        for obj in objects {
            fresh.insert(self.key_of(&obj)?, TimestampedEntry { obj, written });
        }
        *self.entries.lock() = fresh;
        Ok(())
    }

    /// Does nothing: there is nothing to resync. Present for parity with client-go.
    pub fn resync(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeletedFinalStateUnknown, DynamicObject, FakeClock, KeyError};

    const TTL: Duration = Duration::from_secs(10);

    fn pod(name: &str) -> Arc<DynamicObject> {
        Arc::new(DynamicObject::new("v1", "Pod").within("ns").named(name))
    }

    fn cache(ttl: Duration) -> (ExpirationCache<DynamicObject>, FakeClock) {
        let clock = FakeClock::new();
        (ExpirationCache::new(ttl).with_clock(clock.clone()), clock)
    }

    fn sorted_keys(cache: &ExpirationCache<DynamicObject>) -> Vec<String> {
        let mut keys: Vec<String> = cache.list_keys().iter().map(|k| k.to_string()).collect();
        keys.sort();
        keys
    }

    #[test]
    fn an_entry_exactly_ttl_old_is_alive_and_one_a_nanosecond_older_is_gone() {
        let (cache, clock) = cache(TTL);
        let start = clock.now();
        cache.add(pod("a")).unwrap();
        clock.advance(TTL);
        assert!(
            cache.get_by_key("ns/a").is_some(),
            "X1: now - written == ttl"
        );
        clock.advance(Duration::from_nanos(1));
        assert!(
            cache.get_by_key("ns/a").is_none(),
            "X1: now - written > ttl"
        );
        clock.set(start);
        assert!(
            cache.get_by_key("ns/a").is_none(),
            "X2: deleted, not hidden"
        );
    }

    #[test]
    fn a_zero_ttl_never_expires() {
        let (cache, clock) = cache(Duration::ZERO);
        cache.add(pod("a")).unwrap();
        clock.advance(Duration::from_secs(365 * 24 * 3600));
        assert!(cache.get_by_key("ns/a").is_some());
        assert_eq!(cache.list().len(), 1);
    }

    #[test]
    fn list_omits_and_deletes_expired_entries() {
        let (cache, clock) = cache(TTL);
        let start = clock.now();
        cache.add(pod("old")).unwrap();
        clock.advance(Duration::from_secs(6));
        cache.add(pod("young")).unwrap();
        clock.advance(Duration::from_secs(5));
        let names: Vec<String> = cache.list().iter().map(|o| o.name().to_string()).collect();
        assert_eq!(names, ["young"]);
        clock.set(start);
        assert_eq!(
            sorted_keys(&cache),
            ["ns/young"],
            "X2: old was deleted by list"
        );
    }

    #[test]
    fn list_keys_omits_expired_entries_too() {
        let (cache, clock) = cache(TTL);
        cache.add(pod("a")).unwrap();
        clock.advance(TTL + Duration::from_secs(1));
        assert!(cache.list_keys().is_empty());
    }

    #[test]
    fn an_update_restarts_the_entrys_age() {
        let (cache, clock) = cache(TTL);
        cache.add(pod("a")).unwrap();
        clock.advance(Duration::from_secs(8));
        cache.update(pod("a")).unwrap();
        clock.advance(Duration::from_secs(8));
        assert!(cache.get(&pod("a")).unwrap().is_some());
    }

    #[test]
    fn delete_by_object_or_tombstone_and_missing_keys_are_no_ops() {
        let (cache, _clock) = cache(TTL);
        cache.add(pod("a")).unwrap();
        cache.add(pod("b")).unwrap();
        cache.delete(pod("a")).unwrap();
        cache
            .delete(DeletedFinalStateUnknown {
                key: "ns/b".into(),
                obj: None,
            })
            .unwrap();
        cache.delete(pod("missing")).unwrap();
        assert!(cache.list().is_empty());
    }

    #[test]
    fn replace_stamps_everything_now_and_is_all_or_nothing() {
        let clock = FakeClock::new();
        let cache = ExpirationCache::new(TTL)
            .with_clock(clock.clone())
            .with_key_fn(Arc::new(|o: &DynamicObject| {
                if o.name() == "bad" {
                    Err(KeyError::Custom("bad name".into()))
                } else {
                    meta_namespace_key(o)
                }
            }));
        cache.add(pod("keep")).unwrap();
        let err = cache.replace([pod("x"), pod("bad")]).unwrap_err();
        assert_eq!(err.key_error(), Some(&KeyError::Custom("bad name".into())));
        assert_eq!(sorted_keys(&cache), ["ns/keep"]);

        clock.advance(Duration::from_secs(9));
        cache.replace([pod("x"), pod("y")]).unwrap();
        clock.advance(Duration::from_secs(9));
        assert_eq!(sorted_keys(&cache), ["ns/x", "ns/y"]);
        assert!(cache.resync().is_ok());
    }

    #[derive(Debug)]
    struct Opaque;
    impl Object for Opaque {}

    #[test]
    fn objects_without_metadata_are_refused() {
        let cache = ExpirationCache::new(TTL);
        assert_eq!(
            cache.add(Arc::new(Opaque)).unwrap_err().key_error(),
            Some(&KeyError::NoMeta)
        );
        assert!(cache.get(&Opaque).is_err());
        assert!(cache.list().is_empty());
    }

    #[test]
    fn a_closure_is_a_clock() {
        let fixed = Instant::now();
        let cache = ExpirationCache::new(TTL).with_clock(move || fixed);
        cache.add(pod("a")).unwrap();
        assert!(cache.get_by_key("ns/a").is_some());
    }
}
