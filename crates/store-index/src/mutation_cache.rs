//! [`MutationCache`]: an informer's cache overlaid with the objects the controller itself just
//! wrote (rule A7.5 in `docs/semantics.md`, client-go's `MutationCache`).
//!
//! A controller that updates an object and reconciles again before its informer has seen the
//! update reads the old object from the cache, and may act twice on a state it already changed.
//! The mutation cache remembers the objects the controller wrote — [`mutation`](MutationCache::mutation)
//! with the server's answer — for a while (a time to live), and answers reads with the newer of
//! the informer's copy and that remembered one, until the informer catches up.
//!
//! **Which copy is newer.** client-go compares resource versions as integers. This project treats
//! them as opaque everywhere else, so the rule here is:
//! - if both versions parse as unsigned integers, the larger wins and the informer's copy wins a
//!   tie (it has caught up);
//! - otherwise the informer's copy wins as soon as its version equals the mutation's, or is one
//!   this cache has not seen before the mutation. The versions seen before are the informer's
//!   version of the key when the mutation was recorded and those of earlier mutations of the key:
//!   while the informer still shows one of those, it has not seen the write yet.
//!
//! Once the informer's copy wins, the mutation is forgotten. A mutation is also forgotten when it
//! is older than the time to live (strictly: `now - recorded > ttl`), and the least recently used
//! ones when more than `capacity` are remembered.
//!
//! **Informer hooks.** A handler of the informer may tell the cache what it saw:
//! [`on_add_or_update`](MutationCache::on_add_or_update) forgets a mutation the informer has
//! caught up with (keeping the cache small), and [`on_delete`](MutationCache::on_delete) forgets a
//! mutation of the deleted object (same UID, or not newer than the deletion) and remembers the
//! deletion for the time to live, so that a late [`mutation`](MutationCache::mutation) of that
//! object (same UID, or a version not newer than the deletion's) cannot bring it back.
//!
//! Invariants (tests below):
//! - **N1 (never older):** a read never returns a mutation the informer has caught up with by the
//!   rule above, nor one past its time to live.
//! - **N2 (adds only when asked):** an object the informer does not hold is returned only with
//!   `include_adds`, and then only from a live mutation.
//! - **N3 (one view):** `by_index(name, value)` returns exactly the objects `get_by_key` would
//!   return for some key whose index values under `name` include `value`.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::clock::{Clock, SystemClock};
use crate::error::StoreError;
use crate::key::ObjectKey;
use crate::object::Object;
use crate::read_only::ReadOnlyIndexer;

/// How many mutations are remembered by default (client-go's LRU size).
const DEFAULT_CAPACITY: usize = 100;

/// An object the controller wrote, and what is needed to tell when the informer has caught up.
struct Mutation<K> {
    obj: Arc<K>,
    /// Versions of this key known to be older than `obj` (see the module docs).
    superseded: Vec<String>,
    recorded: Instant,
    /// For least-recently-used eviction.
    last_used: u64,
}

struct Mutations<K> {
    entries: HashMap<ObjectKey, Mutation<K>>,
    /// Deletions the informer reported (`on_delete`), remembered for the time to live.
    deleted: HashMap<ObjectKey, Deleted>,
    uses: u64,
}

/// A deletion reported by the informer: what a later mutation is compared with.
struct Deleted {
    uid: Option<String>,
    rv: String,
    recorded: Instant,
}

/// Whether `a`'s version is known to be at least `b`'s: both integers and `a >= b`, or equal.
fn at_least(a: &str, b: &str) -> bool {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => a >= b,
        _ => a == b,
    }
}

fn rv<K: Object>(obj: &K) -> &str {
    obj.resource_version().unwrap_or("")
}

/// Whether the informer's `cached` copy is at least as new as the mutation (module docs).
fn caught_up<K: Object>(cached: &K, mutation: &Mutation<K>) -> bool {
    let (cached, written) = (rv(cached), rv(mutation.obj.as_ref()));
    match (cached.parse::<u64>(), written.parse::<u64>()) {
        (Ok(cached), Ok(written)) => cached >= written,
        _ => cached == written || !mutation.superseded.iter().any(|s| s == cached),
    }
}

/// A read view of an informer's cache that also returns the objects the controller just wrote,
/// until the informer catches up (see the module docs for the rule and invariants N1–N3).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use store_index::{DynamicObject, FakeClock, Indexer, MutationCache};
///
/// let pod = |rv: &str| Arc::new(DynamicObject::new("v1", "Pod").within("ns").named("a").with_resource_version(rv));
/// let informer_cache: Indexer<DynamicObject> = Indexer::default();
/// informer_cache.add(pod("10")).unwrap();
///
/// let clock = FakeClock::new();
/// let cache = MutationCache::new(informer_cache.clone(), Duration::from_secs(60)).with_clock(clock.clone());
/// cache.mutation(pod("11")).unwrap(); // what the server answered to our update
/// assert_eq!(cache.get_by_key("ns/a").unwrap().metadata.resource_version.as_deref(), Some("11"));
///
/// informer_cache.update(pod("11")).unwrap(); // the informer catches up
/// assert!(Arc::ptr_eq(&cache.get_by_key("ns/a").unwrap(), &informer_cache.get_by_key("ns/a").unwrap()));
/// ```
pub struct MutationCache<K> {
    backing: ReadOnlyIndexer<K>,
    ttl: Duration,
    include_adds: bool,
    capacity: usize,
    clock: Arc<dyn Clock>,
    mutations: Mutex<Mutations<K>>,
}

impl<K: Object> fmt::Debug for MutationCache<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MutationCache")
            .field("backing", &self.backing)
            .field("ttl", &self.ttl)
            .field("include_adds", &self.include_adds)
            .field("capacity", &self.capacity)
            .field("mutations", &self.mutations.lock().entries.len())
            .finish()
    }
}

impl<K: Object> MutationCache<K> {
    /// A mutation cache over `backing` (an informer's cache, or an [`Indexer`](crate::Indexer))
    /// remembering each mutation for `ttl`, on the system clock, without `include_adds`, for at
    /// most 100 keys.
    pub fn new(backing: impl Into<ReadOnlyIndexer<K>>, ttl: Duration) -> Self {
        MutationCache {
            backing: backing.into(),
            ttl,
            include_adds: false,
            capacity: DEFAULT_CAPACITY,
            clock: Arc::new(SystemClock),
            mutations: Mutex::new(Mutations {
                entries: HashMap::new(),
                deleted: HashMap::new(),
                uses: 0,
            }),
        }
    }

    /// Also return mutated objects the informer does not hold (client-go's `includeAdds`): an
    /// object the controller just created appears at once. Only safe if the caller copes with an
    /// object deleted soon after its creation lingering for up to the time to live.
    pub fn include_adds(mut self, include_adds: bool) -> Self {
        self.include_adds = include_adds;
        self
    }

    /// Reads the time from `clock` instead (a [`FakeClock`](crate::FakeClock) in tests).
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Remembers at most `capacity` mutations (at least one), forgetting the least recently used.
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    fn expired(&self, mutation: &Mutation<K>, now: Instant) -> bool {
        now.saturating_duration_since(mutation.recorded) > self.ttl
    }

    /// Remembers `obj`, an object this controller just wrote (normally the server's answer), under
    /// the backing cache's key for it. A mutation with an integer version lower than the one
    /// already remembered for the key is ignored. Fails only when `obj` cannot be keyed.
    pub fn mutation(&self, obj: Arc<K>) -> Result<(), StoreError> {
        let key = self.backing.key_of(&obj)?;
        let cached = self.backing.get_by_key(key.as_str());
        let now = self.clock.now();
        let mut guard = self.mutations.lock();
        let state = &mut *guard;
        state
            .entries
            .retain(|_, m| now.saturating_duration_since(m.recorded) <= self.ttl);
        state
            .deleted
            .retain(|_, d| now.saturating_duration_since(d.recorded) <= self.ttl);

        let written = rv(obj.as_ref()).to_string();
        if let Some(deleted) = state.deleted.get(&key) {
            let same_object = deleted.uid.is_some() && deleted.uid.as_deref() == obj.uid();
            if same_object || at_least(&deleted.rv, &written) {
                // A write the informer has since seen deleted: it must not come back.
                return Ok(());
            }
        }
        let mut superseded = Vec::new();
        if let Some(previous) = state.entries.get(&key) {
            let previous_rv = rv(previous.obj.as_ref());
            if let (Ok(previous), Ok(new)) = (previous_rv.parse::<u64>(), written.parse::<u64>()) {
                if new < previous {
                    return Ok(());
                }
            }
            superseded.extend(previous.superseded.iter().cloned());
            superseded.push(previous_rv.to_string());
        }
        if let Some(cached) = &cached {
            superseded.push(rv(cached.as_ref()).to_string());
        }
        superseded.retain(|s| *s != written);
        superseded.sort_unstable();
        superseded.dedup();

        state.uses += 1;
        let last_used = state.uses;
        state.entries.insert(
            key,
            Mutation {
                obj,
                superseded,
                recorded: now,
                last_used,
            },
        );
        while state.entries.len() > self.capacity {
            let lru = state
                .entries
                .iter()
                .min_by_key(|(_, m)| m.last_used)
                .map(|(k, _)| k.clone());
            match lru {
                Some(k) => state.entries.remove(&k),
                None => break,
            };
        }
        Ok(())
    }

    /// The newer of the informer's copy of `key` and a live mutation of it (N1), forgetting a
    /// mutation the informer has caught up with. `cached` is the informer's copy.
    fn newer(
        &self,
        state: &mut Mutations<K>,
        key: &str,
        cached: Option<Arc<K>>,
        now: Instant,
    ) -> Option<Arc<K>> {
        let live = match state.entries.get(key) {
            Some(m) if self.expired(m, now) => {
                state.entries.remove(key);
                false
            }
            Some(_) => true,
            None => false,
        };
        if !live {
            return cached;
        }
        let mutation = state.entries.get(key)?;
        match cached {
            Some(cached) if caught_up(cached.as_ref(), mutation) => {
                state.entries.remove(key);
                Some(cached)
            }
            // N2: without include_adds, a key the informer does not hold is absent.
            None if !self.include_adds => None,
            _ => {
                state.uses += 1;
                let uses = state.uses;
                let mutation = state.entries.get_mut(key)?;
                mutation.last_used = uses;
                Some(Arc::clone(&mutation.obj))
            }
        }
    }

    /// The newer of the informer's object under `key` and the controller's own write of it; with
    /// `include_adds`, also a written object the informer does not hold yet.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        let cached = self.backing.get_by_key(key);
        let now = self.clock.now();
        self.newer(&mut self.mutations.lock(), key, cached, now)
    }

    /// [`get_by_key`](Self::get_by_key) with `obj`'s key.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, StoreError> {
        let key = self.backing.key_of(obj)?;
        Ok(self.get_by_key(key.as_str()))
    }

    /// The objects [`get_by_key`](Self::get_by_key) would return whose values under index
    /// `index_name` include `value` (N3). Fails for an unknown index.
    ///
    /// **Difference from client-go:** client-go returns the newer copy of every object in the
    /// informer's bucket, even one the controller's write moved to another value, and adds mutated
    /// objects outside the bucket only with `includeAdds`. Here the newer copies are indexed
    /// again, so a write that moves an object in or out of the bucket shows at once.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, StoreError> {
        let bucket = self.backing.by_index(index_name, value)?;
        let index_fn = self
            .backing
            .get_indexers()
            .get(index_name)
            .cloned()
            .ok_or_else(|| StoreError::IndexNotFound(index_name.to_string()))?;
        let yields_value =
            |obj: &K| index_fn(obj).is_ok_and(|values| values.iter().any(|v| v == value));

        let now = self.clock.now();
        let mut state = self.mutations.lock();
        let mut out = Vec::with_capacity(bucket.len());
        let mut seen = HashSet::with_capacity(bucket.len());
        for cached in bucket {
            let key = self.backing.key_of(&cached)?;
            let winner = self.newer(&mut state, key.as_str(), Some(Arc::clone(&cached)), now);
            seen.insert(key);
            match winner {
                Some(w) if Arc::ptr_eq(&w, &cached) => out.push(w),
                Some(w) if yields_value(&w) => out.push(w),
                _ => {}
            }
        }
        let others: Vec<ObjectKey> = state
            .entries
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for key in others {
            let cached = self.backing.get_by_key(key.as_str());
            if let Some(w) = self.newer(&mut state, key.as_str(), cached, now) {
                if yields_value(&w) {
                    out.push(w);
                }
            }
        }
        Ok(out)
    }

    /// An informer hook: the informer added or updated `obj`. A mutation it has caught up with
    /// is forgotten at once instead of at the next read.
    pub fn on_add_or_update(&self, obj: &K) {
        let Ok(key) = self.backing.key_of(obj) else {
            return;
        };
        let mut state = self.mutations.lock();
        if state.entries.get(&key).is_some_and(|m| caught_up(obj, m)) {
            state.entries.remove(&key);
        }
    }

    /// An informer hook: the informer deleted `obj`. A mutation of the same object (same UID) or
    /// one not newer than the deletion is forgotten, and the deletion is remembered for the time
    /// to live, so that a late [`mutation`](Self::mutation) of that object is ignored. A mutation
    /// known to be newer (a re-creation) is kept, and then no deletion is remembered.
    pub fn on_delete(&self, obj: &K) {
        let Ok(key) = self.backing.key_of(obj) else {
            return;
        };
        let deleted_rv = rv(obj).to_string();
        let now = self.clock.now();
        let mut state = self.mutations.lock();
        if let Some(m) = state.entries.get(&key) {
            let same_object = obj.uid().is_some() && obj.uid() == m.obj.uid();
            if same_object || at_least(&deleted_rv, rv(m.obj.as_ref())) {
                state.entries.remove(&key);
            } else {
                return;
            }
        }
        state.deleted.insert(
            key,
            Deleted {
                uid: obj.uid().map(str::to_string),
                rv: deleted_rv,
                recorded: now,
            },
        );
    }

    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.mutations.lock().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DynamicObject, FakeClock, Indexer, Indexers, KeyError};

    const TTL: Duration = Duration::from_secs(60);

    fn pod(name: &str, rv: &str, app: &str) -> Arc<DynamicObject> {
        Arc::new(
            DynamicObject::new("v1", "Pod")
                .within("ns")
                .named(name)
                .with_resource_version(rv)
                .with_label("app", app),
        )
    }

    fn setup(
        include_adds: bool,
    ) -> (
        Indexer<DynamicObject>,
        MutationCache<DynamicObject>,
        FakeClock,
    ) {
        let informer = Indexer::new(Indexers::new().with("app", |o: &DynamicObject| {
            Ok(o.label("app").map(str::to_string).into_iter().collect())
        }));
        let clock = FakeClock::new();
        let cache = MutationCache::new(informer.clone(), TTL)
            .with_clock(clock.clone())
            .include_adds(include_adds);
        (informer, cache, clock)
    }

    fn rv_of(obj: Option<Arc<DynamicObject>>) -> Option<String> {
        obj.map(|o| rv(o.as_ref()).to_string())
    }

    fn names(mut objs: Vec<Arc<DynamicObject>>) -> Vec<String> {
        objs.sort_by(|a, b| a.name().cmp(b.name()));
        objs.iter()
            .map(|o| format!("{}@{}", o.name(), rv(o.as_ref())))
            .collect()
    }

    #[test]
    fn a_newer_integer_mutation_wins_until_the_informer_catches_up() {
        let (informer, cache, _clock) = setup(false);
        informer.add(pod("a", "5", "web")).unwrap();
        cache.mutation(pod("a", "6", "web")).unwrap();
        assert_eq!(rv_of(cache.get_by_key("ns/a")).as_deref(), Some("6"));
        informer.update(pod("a", "6", "web")).unwrap();
        assert_eq!(rv_of(cache.get_by_key("ns/a")).as_deref(), Some("6"));
        assert_eq!(
            cache.remembered(),
            0,
            "a tie goes to the informer, which drops the mutation"
        );
    }

    #[test]
    fn a_newer_informer_copy_wins_over_an_older_integer_mutation() {
        let (informer, cache, _clock) = setup(false);
        informer.add(pod("a", "7", "web")).unwrap();
        cache.mutation(pod("a", "6", "web")).unwrap();
        assert_eq!(rv_of(cache.get_by_key("ns/a")).as_deref(), Some("7"));
        assert_eq!(cache.remembered(), 0);
    }

    #[test]
    fn integers_are_compared_as_numbers_not_strings() {
        let (informer, cache, _clock) = setup(false);
        informer.add(pod("a", "9", "web")).unwrap();
        cache.mutation(pod("a", "10", "web")).unwrap();
        assert_eq!(rv_of(cache.get_by_key("ns/a")).as_deref(), Some("10"));
    }

    #[test]
    fn a_mutation_lives_exactly_its_ttl() {
        let (informer, cache, clock) = setup(false);
        informer.add(pod("a", "5", "web")).unwrap();
        cache.mutation(pod("a", "6", "web")).unwrap();
        clock.advance(TTL);
        assert_eq!(rv_of(cache.get_by_key("ns/a")).as_deref(), Some("6"));
        clock.advance(Duration::from_nanos(1));
        assert_eq!(
            rv_of(cache.get_by_key("ns/a")).as_deref(),
            Some("5"),
            "N1: past its ttl"
        );
        assert_eq!(cache.remembered(), 0);
    }

    #[test]
    fn an_older_integer_mutation_does_not_replace_a_newer_one() {
        let (informer, cache, _clock) = setup(false);
        informer.add(pod("a", "5", "web")).unwrap();
        cache.mutation(pod("a", "8", "web")).unwrap();
        cache.mutation(pod("a", "7", "web")).unwrap();
        assert_eq!(rv_of(cache.get_by_key("ns/a")).as_deref(), Some("8"));
    }

    #[test]
    fn opaque_versions_the_informer_had_before_the_write_lose_to_the_mutation() {
        let (informer, cache, _clock) = setup(false);
        informer.add(pod("a", "abc", "web")).unwrap();
        cache.mutation(pod("a", "xyz", "web")).unwrap();
        assert_eq!(rv_of(cache.get_by_key("ns/a")).as_deref(), Some("xyz"));
        informer.update(pod("a", "xyz", "web")).unwrap();
        assert_eq!(rv_of(cache.get_by_key("ns/a")).as_deref(), Some("xyz"));
        assert_eq!(cache.remembered(), 0, "caught up: equal versions");
    }

    #[test]
    fn an_opaque_version_not_seen_before_the_write_wins() {
        let (informer, cache, _clock) = setup(false);
        informer.add(pod("a", "abc", "web")).unwrap();
        cache.mutation(pod("a", "xyz", "web")).unwrap();
        informer.update(pod("a", "def", "web")).unwrap(); // someone else's later write
        assert_eq!(rv_of(cache.get_by_key("ns/a")).as_deref(), Some("def"));
        assert_eq!(cache.remembered(), 0);
    }

    #[test]
    fn an_earlier_opaque_mutation_seen_by_the_informer_does_not_hide_a_later_one() {
        let (informer, cache, _clock) = setup(false);
        informer.add(pod("a", "v0", "web")).unwrap();
        cache.mutation(pod("a", "v1", "web")).unwrap();
        cache.mutation(pod("a", "v2", "web")).unwrap();
        informer.update(pod("a", "v1", "web")).unwrap();
        assert_eq!(rv_of(cache.get_by_key("ns/a")).as_deref(), Some("v2"));
        informer.update(pod("a", "v2", "web")).unwrap();
        assert_eq!(rv_of(cache.get_by_key("ns/a")).as_deref(), Some("v2"));
        assert_eq!(cache.remembered(), 0);
    }

    #[test]
    fn without_include_adds_an_object_the_informer_lacks_is_absent() {
        let (_informer, cache, _clock) = setup(false);
        cache.mutation(pod("new", "3", "web")).unwrap();
        assert!(cache.get_by_key("ns/new").is_none(), "N2");
        assert!(cache.by_index("app", "web").unwrap().is_empty(), "N2");
    }

    #[test]
    fn with_include_adds_a_created_object_shows_until_the_informer_has_it() {
        let (informer, cache, clock) = setup(true);
        cache.mutation(pod("new", "opaque-1", "web")).unwrap();
        assert_eq!(
            rv_of(cache.get_by_key("ns/new")).as_deref(),
            Some("opaque-1")
        );
        assert_eq!(
            names(cache.by_index("app", "web").unwrap()),
            ["new@opaque-1"]
        );
        informer.add(pod("new", "opaque-2", "web")).unwrap();
        assert_eq!(
            rv_of(cache.get_by_key("ns/new")).as_deref(),
            Some("opaque-2")
        );
        assert_eq!(cache.remembered(), 0);

        cache.mutation(pod("other", "4", "web")).unwrap();
        clock.advance(TTL + Duration::from_secs(1));
        assert!(
            cache.get_by_key("ns/other").is_none(),
            "N2: only from a live mutation"
        );
    }

    #[test]
    fn by_index_answers_from_the_newer_view_indexed_again() {
        let (informer, cache, _clock) = setup(false);
        informer.add(pod("stays", "1", "web")).unwrap();
        informer.add(pod("leaves", "2", "web")).unwrap();
        informer.add(pod("joins", "3", "db")).unwrap();
        informer.add(pod("bumped", "4", "web")).unwrap();
        cache.mutation(pod("leaves", "12", "db")).unwrap();
        cache.mutation(pod("joins", "13", "web")).unwrap();
        cache.mutation(pod("bumped", "14", "web")).unwrap();
        assert_eq!(
            names(cache.by_index("app", "web").unwrap()),
            ["bumped@14", "joins@13", "stays@1"],
            "N3"
        );
        assert_eq!(
            names(cache.by_index("app", "db").unwrap()),
            ["leaves@12"],
            "N3"
        );

        informer.update(pod("joins", "20", "db")).unwrap(); // the informer moved past our write
        assert_eq!(
            names(cache.by_index("app", "web").unwrap()),
            ["bumped@14", "stays@1"]
        );
    }

    #[test]
    fn by_index_on_an_unknown_index_is_an_error() {
        let (_informer, cache, _clock) = setup(true);
        let err = cache.by_index("nope", "x").unwrap_err();
        assert_eq!(err.to_string(), "Index with name nope does not exist");
    }

    #[test]
    fn the_least_recently_used_mutation_is_forgotten_beyond_capacity() {
        let (informer, cache, _clock) = setup(false);
        let cache = cache.with_capacity(2);
        for name in ["a", "b", "c"] {
            informer.add(pod(name, "1", "web")).unwrap();
        }
        cache.mutation(pod("a", "2", "web")).unwrap();
        cache.mutation(pod("b", "2", "web")).unwrap();
        let _ = cache.get_by_key("ns/a"); // a is now more recently used than b
        cache.mutation(pod("c", "2", "web")).unwrap();
        assert_eq!(cache.remembered(), 2);
        assert_eq!(rv_of(cache.get_by_key("ns/a")).as_deref(), Some("2"));
        assert_eq!(
            rv_of(cache.get_by_key("ns/b")).as_deref(),
            Some("1"),
            "b was forgotten"
        );
        assert_eq!(rv_of(cache.get_by_key("ns/c")).as_deref(), Some("2"));
    }

    #[test]
    fn a_mutation_that_cannot_be_keyed_is_refused_and_not_remembered() {
        let informer: Indexer<DynamicObject> = Indexer::with_key_fn(
            Arc::new(|_: &DynamicObject| Err(KeyError::Custom("no keys here".into()))),
            Indexers::new(),
        );
        let cache = MutationCache::new(informer, TTL).include_adds(true);
        let err = cache.mutation(pod("a", "1", "web")).unwrap_err();
        assert_eq!(
            err.key_error(),
            Some(&KeyError::Custom("no keys here".into()))
        );
        assert!(cache.get(&pod("a", "1", "web")).is_err());
        assert_eq!(cache.remembered(), 0);
    }

    #[test]
    fn hooks_forget_caught_up_mutations_and_keep_deleted_objects_deleted() {
        let (informer, cache, clock) = setup(false);
        informer.add(pod("a", "10", "x")).unwrap();
        cache.mutation(pod("a", "11", "x")).unwrap();
        cache.on_add_or_update(&pod("a", "10", "x"));
        assert_eq!(cache.remembered(), 1, "the informer has not caught up");
        cache.on_add_or_update(&pod("a", "11", "x"));
        assert_eq!(cache.remembered(), 0);

        // A deletion at 20 forgets the write at 12 and refuses a late write at 15 or 20.
        cache.mutation(pod("a", "12", "x")).unwrap();
        cache.on_delete(&pod("a", "20", "x"));
        assert_eq!(cache.remembered(), 0);
        cache.mutation(pod("a", "15", "x")).unwrap();
        cache.mutation(pod("a", "20", "x")).unwrap();
        assert_eq!(cache.remembered(), 0, "a deleted object does not come back");
        // A newer write (a re-creation) is accepted; past the TTL the deletion is forgotten.
        cache.mutation(pod("a", "21", "x")).unwrap();
        assert_eq!(cache.remembered(), 1);
        cache.on_delete(&pod("a", "19", "x"));
        assert_eq!(
            cache.remembered(),
            1,
            "a newer write survives an older deletion"
        );
        clock.advance(TTL + Duration::from_secs(1));
        cache.mutation(pod("b", "1", "x")).unwrap();
        let state = cache.mutations.lock();
        assert!(
            state.deleted.is_empty(),
            "deletions are remembered for the TTL only"
        );
    }

    #[test]
    fn keys_without_a_mutation_read_straight_through() {
        let (informer, cache, _clock) = setup(false);
        let a = pod("a", "1", "web");
        informer.add(Arc::clone(&a)).unwrap();
        assert!(Arc::ptr_eq(&cache.get_by_key("ns/a").unwrap(), &a));
        assert!(cache.get_by_key("ns/missing").is_none());
    }
}
