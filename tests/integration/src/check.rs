//! What every scenario asserts: the informer's cache equals the server's state (key →
//! resourceVersion), and every handler saw a consistent per-key sequence of notifications.
//!
//! Also the scenario error type ([`Failure`]), waiting for a condition with a deadline
//! ([`eventually`]) and reading the process's resident memory ([`rss_bytes`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::backend::Backend;
use parking_lot::Mutex;
use serde_json::Value;
use workqueue::shared_informer::reflector::store_index::{
    Object, ObjectOrTombstone, ReadOnlyIndexer,
};
use workqueue::shared_informer::ResourceEventHandler;

/// Why a scenario failed: a message naming what was expected and what was seen.
///
/// Anything implementing `std::error::Error` converts into it with `?` (like `anyhow`), so setup
/// errors (the simulator, configuration, API errors) keep their own text.
#[derive(Debug)]
pub struct Failure(pub String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

/// Fails the scenario with a formatted message.
#[macro_export]
macro_rules! fail {
    ($($arg:tt)*) => {
        return Err($crate::check::Failure(format!($($arg)*)))
    };
}

/// Fails the scenario unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            $crate::fail!($($arg)*);
        }
    };
}

/// The outcome of a scenario: a one-line detail on success.
pub type Outcome = Result<String, Failure>;

/// Polls `f` every 20 ms until it returns `Ok`, or fails after `timeout` with the last reason.
pub async fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> Result<T, String>,
) -> Result<T, Failure> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(reason) if tokio::time::Instant::now() >= deadline => {
                return Err(Failure(format!(
                    "timed out after {timeout:?} waiting for {what}: {reason}"
                )))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// The cache key of an object: `namespace/name`, or `name` when cluster-scoped.
pub fn key_of(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

fn rv_of(rv: Option<&str>) -> u64 {
    rv.and_then(|r| r.parse().ok()).unwrap_or(0)
}

/// key → resourceVersion of everything the server holds for `resource`.
pub fn server_state(sim: &dyn Backend, resource: &str) -> Result<BTreeMap<String, u64>, String> {
    server_state_where(sim, resource, |_| true)
}

/// key → resourceVersion of the server's objects of `resource` for which `keep` holds.
pub fn server_state_where(
    sim: &dyn Backend,
    resource: &str,
    keep: impl Fn(&Value) -> bool,
) -> Result<BTreeMap<String, u64>, String> {
    let items = sim
        .list(resource, None)
        .map_err(|e| format!("listing {resource} from the simulator: {e}"))?;
    Ok(items
        .iter()
        .filter(|o| keep(o))
        .map(|o| {
            let m = &o["metadata"];
            (
                key_of(m["namespace"].as_str(), m["name"].as_str().unwrap_or("")),
                rv_of(m["resourceVersion"].as_str()),
            )
        })
        .collect())
}

/// key → resourceVersion of everything an informer's indexer holds.
pub fn cache_state<K: Object>(indexer: &ReadOnlyIndexer<K>) -> BTreeMap<String, u64> {
    indexer
        .list()
        .iter()
        .map(|o| (key_of(o.namespace(), o.name()), rv_of(o.resource_version())))
        .collect()
}

/// Describes how `got` differs from `want` (counts and a few examples), or `None` when equal.
pub fn diff(want: &BTreeMap<String, u64>, got: &BTreeMap<String, u64>) -> Option<String> {
    if want == got {
        return None;
    }
    let missing: Vec<&String> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<&String> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    let stale: Vec<String> = want
        .iter()
        .filter_map(|(k, rv)| match got.get(k) {
            Some(g) if g != rv => Some(format!("{k} at {g}, server {rv}")),
            _ => None,
        })
        .collect();
    Some(format!(
        "{} missing {:?}, {} extra {:?}, {} stale {:?} (server {} keys, here {})",
        missing.len(),
        &missing[..missing.len().min(3)],
        extra.len(),
        &extra[..extra.len().min(3)],
        stale.len(),
        &stale[..stale.len().min(3)],
        want.len(),
        got.len(),
    ))
}

#[derive(Debug, Clone, Copy)]
struct KeyState {
    present: bool,
    /// The largest resourceVersion seen for the key (present or deleted).
    rv: u64,
}

/// A handler's per-key notification history, checked as it arrives: absent → add → update* with
/// strictly increasing resourceVersion (an update repeating the version is a resync-class update,
/// counted apart) → at most one delete (possibly a tombstone) → absent → a newer re-add …; every
/// update's old object is the one this handler saw last.
#[derive(Debug, Default)]
pub struct Sequences {
    keys: HashMap<String, KeyState>,
    violations: Vec<String>,
    /// Add notifications.
    pub adds: u64,
    /// Adds flagged as part of the initial list (or the replay to a late handler).
    pub initial_adds: u64,
    /// Updates with a newer resourceVersion.
    pub updates: u64,
    /// Updates repeating the resourceVersion (relist of an unchanged object, resync).
    pub resyncs: u64,
    /// Deletes carrying the object's final state.
    pub deletes: u64,
    /// Deletes carrying a `DeletedFinalStateUnknown` tombstone.
    pub tombstones: u64,
    /// Keys whose delete arrived as a tombstone, with the tombstone's resourceVersion.
    pub tombstoned: Vec<(String, u64)>,
}

impl Sequences {
    fn violation(&mut self, v: String) {
        if self.violations.len() < 100 {
            self.violations.push(v);
        }
    }

    /// Records an add.
    pub fn add(&mut self, key: String, rv: u64, initial: bool) {
        self.adds += 1;
        if initial {
            self.initial_adds += 1;
        }
        match self.keys.get(&key).copied() {
            Some(KeyState {
                present: true,
                rv: last,
            }) => self.violation(format!("add of present {key} (had {last}, got {rv})")),
            Some(KeyState {
                present: false,
                rv: last,
            }) if rv <= last => self.violation(format!(
                "re-add of {key} at {rv}, not newer than its delete at {last}"
            )),
            _ => {}
        }
        self.keys.insert(key, KeyState { present: true, rv });
    }

    /// Records an update from `old_rv` to `new_rv`.
    pub fn update(&mut self, key: String, old_rv: u64, new_rv: u64) {
        match self.keys.get(&key).copied() {
            Some(KeyState {
                present: true,
                rv: last,
            }) => {
                if old_rv != last {
                    self.violation(format!(
                        "update of {key}: old object at {old_rv}, but this handler last saw {last}"
                    ));
                }
                if new_rv == old_rv {
                    self.resyncs += 1;
                } else if new_rv < old_rv {
                    self.violation(format!(
                        "update of {key} goes back from {old_rv} to {new_rv}"
                    ));
                } else {
                    self.updates += 1;
                }
            }
            other => {
                self.updates += 1;
                self.violation(format!("update of absent {key} ({other:?} → {new_rv})"))
            }
        }
        let rv = self.keys.get(&key).map_or(new_rv, |s| s.rv.max(new_rv));
        self.keys.insert(key, KeyState { present: true, rv });
    }

    /// Records a delete at `rv` (`None`: a tombstone without an object; `tombstone`: a
    /// `DeletedFinalStateUnknown`).
    pub fn delete(&mut self, key: String, rv: Option<u64>, tombstone: bool) {
        if tombstone {
            self.tombstones += 1;
            self.tombstoned.push((key.clone(), rv.unwrap_or(0)));
        } else {
            self.deletes += 1;
            if rv.is_none() {
                self.violation(format!(
                    "delete of {key} carries an object without a version"
                ));
            }
        }
        let rv = rv.unwrap_or(0);
        match self.keys.get(&key).copied() {
            Some(KeyState {
                present: true,
                rv: last,
            }) if rv != 0 && rv < last => self.violation(format!(
                "delete of {key} at {rv}, older than its last version {last}"
            )),
            Some(KeyState { present: true, .. }) => {}
            other => self.violation(format!("delete of absent {key} ({other:?})")),
        }
        let rv = self.keys.get(&key).map_or(rv, |s| s.rv.max(rv));
        self.keys.insert(key, KeyState { present: false, rv });
    }

    /// The sequence violations seen so far (at most 100 kept).
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// What this handler believes is present: key → resourceVersion.
    pub fn view(&self) -> BTreeMap<String, u64> {
        self.keys
            .iter()
            .filter(|(_, s)| s.present)
            .map(|(k, s)| (k.clone(), s.rv))
            .collect()
    }

    /// Notifications recorded.
    pub fn events(&self) -> u64 {
        self.adds + self.updates + self.resyncs + self.deletes + self.tombstones
    }
}

/// Behaviour of a [`Recorder`] besides recording.
#[derive(Debug, Clone, Copy, Default)]
pub struct Misbehave {
    /// Blocks this long in every notification (a slow handler).
    pub delay: Duration,
    /// Panics after recording every n-th notification (0: never).
    pub panic_every: u64,
}

/// The payload of the panics [`Recorder`] injects (the panic hook keeps them quiet).
pub const INJECTED_PANIC: &str = "injected handler panic";

/// An event handler that records every notification into a shared [`Sequences`].
pub struct Recorder<K> {
    seq: Arc<Mutex<Sequences>>,
    misbehave: Misbehave,
    seen: AtomicU64,
    _k: PhantomData<fn() -> K>,
}

impl<K> Recorder<K> {
    /// A well-behaved recorder and the sequences it fills.
    pub fn new() -> (Self, Arc<Mutex<Sequences>>) {
        Self::misbehaving(Misbehave::default())
    }

    /// A recorder that is also slow and/or panics.
    pub fn misbehaving(misbehave: Misbehave) -> (Self, Arc<Mutex<Sequences>>) {
        let seq = Arc::new(Mutex::new(Sequences::default()));
        (
            Recorder {
                seq: Arc::clone(&seq),
                misbehave,
                seen: AtomicU64::new(0),
                _k: PhantomData,
            },
            seq,
        )
    }

    fn before(&self) {
        if !self.misbehave.delay.is_zero() {
            // A deliberately slow handler: it blocks its own delivery task, as a slow consumer
            // would (this is the behaviour under test, not synchronisation).
            std::thread::sleep(self.misbehave.delay);
        }
    }

    fn after(&self) {
        let n = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        if self.misbehave.panic_every > 0 && n.is_multiple_of(self.misbehave.panic_every) {
            std::panic::panic_any(INJECTED_PANIC);
        }
    }
}

impl<K: Object> ResourceEventHandler<K> for Recorder<K> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        self.before();
        self.seq.lock().add(
            key_of(obj.namespace(), obj.name()),
            rv_of(obj.resource_version()),
            is_in_initial_list,
        );
        self.after();
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        self.before();
        self.seq.lock().update(
            key_of(new.namespace(), new.name()),
            rv_of(old.resource_version()),
            rv_of(new.resource_version()),
        );
        self.after();
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        self.before();
        let key = match obj.key() {
            Ok(k) => k.to_string(),
            Err(e) => {
                self.seq
                    .lock()
                    .violation(format!("delete notification without a key: {e}"));
                return;
            }
        };
        // A tombstone has no version of its own; its object (if any) is the last cached state.
        let rv = obj.object().and_then(|o| o.resource_version());
        self.seq
            .lock()
            .delete(key, rv.map(|r| rv_of(Some(r))), obj.is_tombstone());
        self.after();
    }
}

/// A named handler's sequences, for [`consistent_where`].
pub type Watched<'a> = (&'a str, &'a Arc<Mutex<Sequences>>);

/// The quiescence check: the cache equals the server's objects for which `keep` holds (all of
/// them for an informer without a selector), and every handler's sequence is free of violations
/// and ends in that state. `Err` says what differs (callers poll it with [`eventually`]);
/// sequence violations are reported at once as [`Fatal`].
pub fn consistent_where<K: Object>(
    sim: &dyn Backend,
    resource: &str,
    keep: &(dyn Fn(&Value) -> bool + Sync),
    indexer: &ReadOnlyIndexer<K>,
    handlers: &[Watched<'_>],
) -> Result<String, Fatal> {
    for (name, seq) in handlers {
        let seq = seq.lock();
        if !seq.violations().is_empty() {
            return Err(Fatal::Now(format!(
                "handler {name}: {} sequence violations, first: {:?}",
                seq.violations().len(),
                &seq.violations()[..seq.violations().len().min(3)]
            )));
        }
    }
    let server = server_state_where(sim, resource, keep).map_err(Fatal::Now)?;
    let cache = cache_state(indexer);
    if let Some(d) = diff(&server, &cache) {
        return Err(Fatal::NotYet(format!(
            "{resource} cache differs from the server: {d}"
        )));
    }
    let mut events = Vec::new();
    for (name, seq) in handlers {
        let seq = seq.lock();
        if let Some(d) = diff(&server, &seq.view()) {
            return Err(Fatal::NotYet(format!(
                "handler {name}'s view of {resource} differs from the server: {d}"
            )));
        }
        events.push(seq.events());
    }
    Ok(format!(
        "{} {resource} consistent, handler events {events:?}",
        server.len()
    ))
}

/// Why [`consistent_where`] is not satisfied.
#[derive(Debug)]
pub enum Fatal {
    /// Not converged yet: keep polling.
    NotYet(String),
    /// Broken for good (a sequence violation): stop now.
    Now(String),
}

/// Waits (up to `timeout`) for [`consistent_where`] over every object, failing at once on a sequence violation.
pub async fn converge<K: Object>(
    sim: &dyn Backend,
    resource: &str,
    indexer: &ReadOnlyIndexer<K>,
    handlers: &[Watched<'_>],
    timeout: Duration,
) -> Result<String, Failure> {
    converge_where(sim, resource, &|_| true, indexer, handlers, timeout).await
}

/// [`converge`] for an informer that sees only the objects for which `keep` holds.
pub async fn converge_where<K: Object>(
    sim: &dyn Backend,
    resource: &str,
    keep: &(dyn Fn(&Value) -> bool + Sync),
    indexer: &ReadOnlyIndexer<K>,
    handlers: &[Watched<'_>],
    timeout: Duration,
) -> Result<String, Failure> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match consistent_where(sim, resource, keep, indexer, handlers) {
            Ok(detail) => return Ok(detail),
            Err(Fatal::Now(reason)) => return Err(Failure(reason)),
            Err(Fatal::NotYet(reason)) if tokio::time::Instant::now() >= deadline => {
                return Err(Failure(format!(
                    "no quiescence within {timeout:?}: {reason}"
                )))
            }
            Err(Fatal::NotYet(_)) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The process's resident set size in bytes (`VmRSS` of `/proc/self/status`).
pub fn rss_bytes() -> Result<u64, Failure> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| Failure(format!("reading /proc/self/status: {e}")))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| Failure("no VmRSS line in /proc/self/status".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_history_has_no_violations() {
        let mut s = Sequences::default();
        s.add("ns/a".into(), 5, true);
        s.update("ns/a".into(), 5, 7);
        s.update("ns/a".into(), 7, 7);
        s.delete("ns/a".into(), Some(7), true);
        s.add("ns/a".into(), 9, false);
        assert!(s.violations().is_empty(), "{:?}", s.violations());
        assert_eq!((s.adds, s.updates, s.resyncs, s.tombstones), (2, 1, 1, 1));
        assert_eq!(s.view().get("ns/a"), Some(&9));
    }

    #[test]
    fn lost_or_reordered_notifications_are_violations() {
        let mut s = Sequences::default();
        s.add("a".into(), 5, false);
        s.add("a".into(), 6, false); // add of present
        s.update("a".into(), 5, 8); // old is not the last seen (6)
        s.update("a".into(), 8, 7); // goes back
        s.delete("b".into(), Some(3), false); // delete of absent
        s.delete("a".into(), Some(9), false);
        s.add("a".into(), 9, false); // re-add not newer
        assert_eq!(s.violations().len(), 5, "{:?}", s.violations());
    }
}
