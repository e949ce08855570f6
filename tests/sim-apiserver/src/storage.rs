//! A revisioned object store: one global, strictly increasing revision (like etcd's) used as the
//! resourceVersion, an event log for watches, compaction (by count or on demand) and per-watcher
//! bounded buffers fed without ever blocking a writer.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::representation::{partial_object_metadata, Representation};
use crate::resources::ResourceDef;
use crate::status::ApiError;
pub use crate::time::rfc3339_now;
pub use crate::watch_event::EventType;

/// A stored object: the JSON value (for selectors) and its serialized bytes (for the wire),
/// shared by reference between the store, the event log and every watcher.
#[derive(Debug)]
pub struct Obj {
    /// The object.
    pub value: Value,
    /// `value` serialized once: a slice of `line`.
    pub json: Bytes,
    /// The watch event line for the change that made this object, `{"type":…,"object":…}` and a
    /// newline, built with `json` in one buffer. Each watcher sends it as it is, without a copy,
    /// as kube-apiserver's watch cache serializes an object once for all its watchers.
    line: Bytes,
    /// The event type `line` announces.
    line_type: EventType,
    /// The object in the metadata representation of `meta.k8s.io/v1`, built for the first
    /// metadata-only client that asks and then shared with every other.
    partial: OnceLock<Bytes>,
}

impl Obj {
    fn new(value: Value, line_type: EventType) -> Arc<Self> {
        // Grown as serde_json::to_vec grows its buffer, so small objects stay small.
        let (line, object) = crate::watch_event::build_event_line(line_type.as_str(), 128, |buf| {
            serde_json::to_writer(buf, &value).expect("Value serializes")
        });
        let json = line.slice(object);
        Arc::new(Self {
            value,
            json,
            line,
            line_type,
            partial: OnceLock::new(),
        })
    }

    /// The object as `representation` writes it.
    pub fn json_as(&self, representation: Representation) -> Bytes {
        match representation {
            Representation::Object => self.json.clone(),
            Representation::PartialObjectMetadata { api_version } => self.partial(api_version),
        }
    }

    /// The watch event line announcing this object, as `representation` writes it, as `etype`.
    pub(crate) fn event_line_as(&self, etype: EventType, representation: Representation) -> Bytes {
        match representation {
            Representation::Object => self.event_line(etype),
            Representation::PartialObjectMetadata { api_version } => {
                crate::watch_event::event_line(etype.as_str(), &self.partial(api_version))
            }
        }
    }

    fn partial(&self, api_version: &str) -> Bytes {
        if api_version == "meta.k8s.io/v1" {
            return self
                .partial
                .get_or_init(|| partial_object_metadata(&self.value, api_version))
                .clone();
        }
        partial_object_metadata(&self.value, api_version)
    }

    /// The watch event line announcing this object as `etype`: the stored line when it is of
    /// that type, a new one otherwise.
    pub(crate) fn event_line(&self, etype: EventType) -> Bytes {
        if etype == self.line_type {
            self.line.clone()
        } else {
            crate::watch_event::event_line(etype.as_str(), &self.json)
        }
    }

    /// `metadata.resourceVersion` as a number (0 if absent).
    pub fn rv(&self) -> u64 {
        rv_of(&self.value).unwrap_or(0)
    }

    /// This object at resourceVersion `rv`, announced as `line_type`: the DELETED event of a
    /// watch whose selector the object stopped matching carries the object as it last matched,
    /// at the revision of the change, as kube-apiserver's watch cache sends it.
    pub(crate) fn at_revision(&self, rv: u64, line_type: EventType) -> Arc<Obj> {
        let mut value = self.value.clone();
        set_rv(&mut value, rv);
        Obj::new(value, line_type)
    }
}

fn rv_of(v: &Value) -> Option<u64> {
    v.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
}

/// One change in the event log.
#[derive(Debug)]
pub struct Event {
    /// Revision of the change.
    pub rv: u64,
    /// What happened.
    pub etype: EventType,
    /// Resource index in the registry.
    pub res: usize,
    /// `namespace/name` or `name`.
    pub key: String,
    /// Namespace (`""` for cluster-scoped).
    pub ns: String,
    /// The object after the change (for DELETED: the final state, at the delete revision).
    pub obj: Arc<Obj>,
    /// The object before the change.
    pub prev: Option<Arc<Obj>>,
}

/// Converts an object from one shape of a shared store to the other.
pub type ShapeFn = fn(&Value) -> Value;

/// Two resources that are one store in two shapes ([`Storage::share`]).
#[derive(Clone, Copy)]
struct Twin {
    a: usize,
    b: usize,
    a_to_b: ShapeFn,
    b_to_a: ShapeFn,
}

struct WatcherSlot {
    res: usize,
    tx: mpsc::Sender<Arc<Event>>,
    terminated: Arc<AtomicBool>,
}

/// The recorded versions of one object, each with its sequence number.
type Versions = VecDeque<(u64, Arc<Obj>)>;

struct Inner {
    rev: u64,
    /// Recent versions of each live object that was updated, for [`Storage::history`], each
    /// with its sequence number in `history_order` (an object never updated has none: its
    /// history is the live object).
    history: HashMap<(usize, String), Versions>,
    /// Every version recorded, oldest first, for the bound on all objects together (entries
    /// of versions already dropped by the per-object bound or a delete are skipped).
    history_order: VecDeque<(u64, usize, String)>,
    history_seq: u64,
    history_limit: usize,
    history_max: usize,
    compacted: u64,
    objects: HashMap<usize, BTreeMap<String, Arc<Obj>>>,
    log: VecDeque<Arc<Event>>,
    max_log: usize,
    watch_buffer: usize,
    watchers: Vec<WatcherSlot>,
    twins: Vec<Twin>,
}

impl Inner {
    /// Records an update of an object (from `old` to `new`) in its bounded history.
    fn remember(&mut self, res: usize, key: &str, old: &Arc<Obj>, new: &Arc<Obj>) {
        if self.history_limit == 0 || self.history_max == 0 {
            return;
        }
        let k = (res, key.to_string());
        let fresh = !self.history.contains_key(&k);
        let mut versions = vec![new.clone()];
        if fresh {
            versions.insert(0, old.clone());
        }
        for o in versions {
            self.history_seq += 1;
            let seq = self.history_seq;
            let h = self.history.entry(k.clone()).or_default();
            h.push_back((seq, o));
            while h.len() > self.history_limit {
                h.pop_front();
            }
            self.history_order.push_back((seq, res, key.to_string()));
        }
        while self.history_order.len() > self.history_max {
            let Some((seq, r, key)) = self.history_order.pop_front() else {
                break;
            };
            let k = (r, key);
            if let Some(h) = self.history.get_mut(&k) {
                if h.front().is_some_and(|(s, _)| *s == seq) {
                    h.pop_front();
                }
                if h.is_empty() {
                    self.history.remove(&k);
                }
            }
        }
    }
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchFrom {
    /// Synthetic ADDED events for the current state, then changes.
    Now,
    /// Changes after this revision.
    After(u64),
}

/// A registered watcher.
pub struct Registration {
    /// Events to send first (synthetic ADDED or replayed log events).
    pub initial: Vec<Arc<Event>>,
    /// Live events.
    pub rx: mpsc::Receiver<Arc<Event>>,
    /// Set when the store dropped this watcher for being too slow.
    pub terminated: Arc<AtomicBool>,
    /// Store revision at registration.
    pub rev: u64,
}

/// Versions kept per object by [`Storage::history`] unless
/// [`Storage::set_history_limit`] says otherwise.
pub const DEFAULT_HISTORY_LIMIT: usize = 16;

/// Versions kept by [`Storage::history`] over all objects together (the oldest go first)
/// unless [`Storage::set_history_limit`] says otherwise: as many as the default event log.
pub const DEFAULT_HISTORY_MAX_VERSIONS: usize = 10_000;

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WriteScope {
    /// The whole object as given (the test API, [`crate::SimServer::update`]).
    #[default]
    Whole,
    /// A write to the main resource over HTTP: for a resource with a status subresource the
    /// stored `.status` is kept, as kube-apiserver ignores status changes there.
    Main,
    /// A write to the `status` subresource: only `.status` changes, the rest is kept.
    Status,
}

/// Options of a write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer as the write would, but store nothing, consume no
    /// resourceVersion and send no watch event.
    pub dry_run: bool,
    /// What the write may change.
    pub scope: WriteScope,
}

/// Preconditions of a delete (`DeleteOptions.preconditions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The object's uid must be this.
    pub uid: Option<String>,
    /// The object's resourceVersion must be this.
    pub resource_version: Option<String>,
}

/// The revisioned store.
pub struct Storage {
    inner: Mutex<Inner>,
    slow_terminations: AtomicU64,
    /// Every committed change with its writer (taken after `inner`, never before it).
    write_log: Mutex<crate::write_log::WriteLog>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.inner.lock();
        f.debug_struct("Storage")
            .field("rev", &i.rev)
            .field("compacted", &i.compacted)
            .field("log", &i.log.len())
            .finish()
    }
}

fn new_uid() -> String {
    let b: [u8; 16] = rand::random();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// The key of an object.
pub fn key_of(ns: &str, name: &str) -> String {
    if ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}/{name}")
    }
}

fn meta_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = Value::Object(Map::new());
    }
    v["metadata"].as_object_mut().expect("metadata object")
}

fn set_rv(v: &mut Value, rv: u64) {
    meta_mut(v).insert("resourceVersion".into(), Value::String(rv.to_string()));
}

/// Whether `a` and `b` are equal but for `metadata` and `status` (a change there does not bump
/// `generation`). Compares in place: cloning both objects to compare them was most of an
/// update's cost.
fn same_spec(a: &Value, b: &Value) -> bool {
    fn spec(m: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
        m.iter().filter(|(k, _)| *k != "metadata" && *k != "status")
    }
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    spec(a).count() == spec(b).count() && spec(a).all(|(k, v)| b.get(k) == Some(v))
}

impl Storage {
    /// A store keeping at most `max_log` events, with watcher buffers of `watch_buffer` events.
    pub fn new(max_log: usize, watch_buffer: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                rev: 0,
                history: HashMap::new(),
                history_order: VecDeque::new(),
                history_seq: 0,
                history_limit: DEFAULT_HISTORY_LIMIT,
                history_max: DEFAULT_HISTORY_MAX_VERSIONS,
                compacted: 0,
                objects: HashMap::new(),
                log: VecDeque::new(),
                max_log: max_log.max(1),
                watch_buffer: watch_buffer.max(1),
                watchers: Vec::new(),
                twins: Vec::new(),
            }),
            slow_terminations: AtomicU64::new(0),
            write_log: Mutex::new(crate::write_log::WriteLog::default()),
        }
    }

    /// The write log ([`crate::write_log`]).
    pub fn write_log(&self) -> parking_lot::MutexGuard<'_, crate::write_log::WriteLog> {
        self.write_log.lock()
    }

    /// Keeps at most `limit` records in the write log from now on (0: none).
    pub fn set_write_log_limit(&self, limit: usize) {
        *self.write_log.lock() = crate::write_log::WriteLog::with_limit(limit);
    }

    /// Current revision.
    pub fn revision(&self) -> u64 {
        self.inner.lock().rev
    }

    /// Oldest revision still servable (events after it are in the log).
    pub fn compacted_revision(&self) -> u64 {
        self.inner.lock().compacted
    }

    /// Watchers ended because their buffer overflowed.
    pub fn slow_terminations(&self) -> u64 {
        self.slow_terminations.load(Ordering::Relaxed)
    }

    /// Number of registered watchers.
    pub fn watcher_count(&self) -> usize {
        let mut i = self.inner.lock();
        i.watchers.retain(|w| !w.tx.is_closed());
        i.watchers.len()
    }

    /// Compacts everything up to the current revision.
    pub fn compact(&self) -> u64 {
        let mut i = self.inner.lock();
        let rev = i.rev;
        i.log.clear();
        i.compacted = rev;
        rev
    }

    /// Compacts up to `rev` (inclusive).
    pub fn compact_to(&self, rev: u64) {
        let mut i = self.inner.lock();
        let rev = rev.min(i.rev);
        while i.log.front().is_some_and(|e| e.rv <= rev) {
            i.log.pop_front();
        }
        i.compacted = i.compacted.max(rev);
    }

    /// Makes resources `a` and `b` one store in two shapes (core/v1 and events.k8s.io/v1
    /// Events): every write to one is written to the other too, converted, at the same
    /// revision, with its own watch event. Call before either holds objects.
    pub fn share(&self, a: usize, b: usize, a_to_b: ShapeFn, b_to_a: ShapeFn) {
        self.inner.lock().twins.push(Twin {
            a,
            b,
            a_to_b,
            b_to_a,
        });
    }

    fn commit(&self, i: &mut Inner, ev: Event) -> Arc<Event> {
        // The change as written: an Event's mirror in the other Event API is not a second write.
        self.write_log
            .lock()
            .record(ev.rv, ev.etype, ev.res, &ev.key);
        let ev = self.publish(i, ev);
        let twin = i.twins.iter().find_map(|t| {
            if t.a == ev.res {
                Some((t.b, t.a_to_b))
            } else if t.b == ev.res {
                Some((t.a, t.b_to_a))
            } else {
                None
            }
        });
        if let Some((other, convert)) = twin {
            let obj = Obj::new(convert(&ev.obj.value), ev.etype);
            let bucket = i.objects.entry(other).or_default();
            let prev = if ev.etype == EventType::Deleted {
                bucket.remove(&ev.key)
            } else {
                bucket.insert(ev.key.clone(), obj.clone())
            };
            self.publish(
                i,
                Event {
                    rv: ev.rv,
                    etype: ev.etype,
                    res: other,
                    key: ev.key.clone(),
                    ns: ev.ns.clone(),
                    obj,
                    prev,
                },
            );
        }
        ev
    }

    /// Appends an event to the log and hands it to the resource's watchers.
    fn publish(&self, i: &mut Inner, ev: Event) -> Arc<Event> {
        let ev = Arc::new(ev);
        i.log.push_back(ev.clone());
        while i.log.len() > i.max_log {
            if let Some(old) = i.log.pop_front() {
                i.compacted = old.rv;
            }
        }
        let mut slow = 0;
        i.watchers.retain(|w| {
            if w.res != ev.res {
                return !w.tx.is_closed();
            }
            match w.tx.try_send(ev.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    w.terminated.store(true, Ordering::SeqCst);
                    slow += 1;
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        if slow > 0 {
            self.slow_terminations.fetch_add(slow, Ordering::Relaxed);
            tracing::debug!(slow, "ended slow watchers");
        }
        ev
    }

    /// Gets an object.
    pub fn get(&self, res: usize, key: &str) -> Option<Arc<Obj>> {
        self.inner
            .lock()
            .objects
            .get(&res)
            .and_then(|m| m.get(key))
            .cloned()
    }

    /// Creates an object, filling in name (from generateName), namespace, uid,
    /// creationTimestamp, generation, resourceVersion, kind and apiVersion.
    pub fn create(
        &self,
        res: usize,
        def: &ResourceDef,
        ns: &str,
        obj: Value,
    ) -> Result<Arc<Obj>, ApiError> {
        self.create_with(res, def, ns, obj, WriteOptions::default())
    }

    /// [`Storage::create`] with options. A dry run answers the object without a
    /// resourceVersion (none was consumed). With [`WriteScope::Main`] (a create over HTTP) a
    /// resource with a status subresource gets its initial status instead of the one sent
    /// (none; `phase: Pending` for pods, `phase: Active` for namespaces).
    pub fn create_with(
        &self,
        res: usize,
        def: &ResourceDef,
        ns: &str,
        mut obj: Value,
        opts: WriteOptions,
    ) -> Result<Arc<Obj>, ApiError> {
        check_type(&obj, def)?;
        if opts.scope == WriteScope::Main && def.status_subresource {
            set_initial_status(def, &mut obj);
        }
        obj["kind"] = Value::String(def.kind.clone());
        obj["apiVersion"] = Value::String(def.api_version());
        if opts.scope != WriteScope::Whole {
            let unknown = crate::unknown_fields::prune(def, &mut obj);
            crate::field_validation::report_unknown_fields(def, &unknown)?;
        }
        let name = name_to_create(def, &obj)?;
        let generate_name = meta_mut(&mut obj)
            .get("generateName")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut causes = crate::validation::name_causes(def, &name, generate_name.as_deref());
        if opts.scope != WriteScope::Whole {
            causes.extend(crate::validation::object_causes(def, &obj));
        }
        crate::validation::check(def, &name, causes)?;
        let m = meta_mut(&mut obj);
        m.insert("name".into(), Value::String(name.clone()));
        crate::crd::admit(def, &mut obj, None)?;
        set_created_metadata(def, ns, &mut obj);
        let key = key_of(ns, &name);
        let mut i = self.inner.lock();
        if i.objects.get(&res).is_some_and(|o| o.contains_key(&key)) {
            return Err(ApiError::already_exists(&def.plural, &def.group, &name));
        }
        if opts.dry_run {
            meta_mut(&mut obj).remove("resourceVersion");
            return Ok(Obj::new(obj, EventType::Added));
        }
        i.rev += 1;
        let rev = i.rev;
        set_rv(&mut obj, rev);
        Ok(self.store_added(&mut i, res, key, ns, rev, obj))
    }

    /// Stores `value` (its resourceVersion already `rev`) as the first version of `key` and
    /// commits the ADDED event.
    fn store_added(
        &self,
        i: &mut Inner,
        res: usize,
        key: String,
        ns: &str,
        rev: u64,
        value: Value,
    ) -> Arc<Obj> {
        let o = Obj::new(value, EventType::Added);
        i.objects
            .entry(res)
            .or_default()
            .insert(key.clone(), o.clone());
        self.commit(
            i,
            Event {
                rv: rev,
                etype: EventType::Added,
                res,
                key,
                ns: ns.to_string(),
                obj: o.clone(),
                prev: None,
            },
        );
        o
    }

    /// Replaces an object (PUT). A non-empty `metadata.resourceVersion` in `obj` must match
    /// the stored one (409 Conflict otherwise).
    pub fn update(
        &self,
        res: usize,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        obj: Value,
    ) -> Result<Arc<Obj>, ApiError> {
        self.update_with(res, def, ns, name, obj, WriteOptions::default())
    }

    /// [`Storage::update`] with options: the scope decides what may change (see
    /// [`WriteScope`]); `metadata.managedFields` absent from `obj` are kept; a dry run answers
    /// the new object at the old resourceVersion. `generation` is bumped only when something
    /// outside `metadata` and `status` changed.
    pub fn update_with(
        &self,
        res: usize,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        mut obj: Value,
        opts: WriteOptions,
    ) -> Result<Arc<Obj>, ApiError> {
        check_type(&obj, def)?;
        check_body_name(&obj, name)?;
        let precondition = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let key = key_of(ns, name);
        let mut i = self.inner.lock();
        let Some(old) = i.objects.get(&res).and_then(|m| m.get(&key)).cloned() else {
            return Err(ApiError::not_found(&def.plural, &def.group, name));
        };
        if let Some(p) = precondition {
            if p.parse::<u64>().ok() != Some(old.rv()) {
                return Err(ApiError::conflict(&def.plural, &def.group, name));
            }
        }
        limit_to_scope(opts.scope, def, &old.value, &mut obj);
        admit_update(opts.scope, def, name, &old.value, &mut obj)?;
        keep_server_fields(def, &old.value, &mut obj);
        set_rv(&mut obj, old.rv());
        if obj == old.value {
            // kube-apiserver writes nothing when an update changes nothing: no new
            // resourceVersion, no watch event.
            return Ok(old);
        }
        if opts.dry_run {
            set_rv(&mut obj, old.rv());
            return Ok(Obj::new(obj, EventType::Modified));
        }
        i.rev += 1;
        let rev = i.rev;
        set_rv(&mut obj, rev);
        if is_terminating(&obj) && !has_finalizers(&obj) {
            // The last finalizer is gone from an object being deleted: it goes now.
            let o = Obj::new(obj, EventType::Deleted);
            // The writer is answered the object at the version it replaced, as kube-apiserver
            // answers it; the DELETED event carries the revision of the deletion.
            let answered = o.at_revision(old.rv(), EventType::Deleted);
            self.store_deleted(&mut i, res, key, ns, rev, o, old);
            return Ok(answered);
        }
        Ok(self.store_modified(&mut i, res, key, ns, rev, obj, old))
    }

    /// Stores `value` (its resourceVersion already `rev`) as the new version of `key`, remembers
    /// the old one in the history and commits the MODIFIED event.
    #[allow(clippy::too_many_arguments)]
    fn store_modified(
        &self,
        i: &mut Inner,
        res: usize,
        key: String,
        ns: &str,
        rev: u64,
        value: Value,
        old: Arc<Obj>,
    ) -> Arc<Obj> {
        let o = Obj::new(value, EventType::Modified);
        i.objects
            .entry(res)
            .or_default()
            .insert(key.clone(), o.clone());
        i.remember(res, &key, &old, &o);
        self.commit(
            i,
            Event {
                rv: rev,
                etype: EventType::Modified,
                res,
                key,
                ns: ns.to_string(),
                obj: o.clone(),
                prev: Some(old),
            },
        );
        o
    }

    /// Removes `key` (and its history) and commits the DELETED event carrying `o`, its final
    /// state at revision `rev`.
    #[allow(clippy::too_many_arguments)]
    fn store_deleted(
        &self,
        i: &mut Inner,
        res: usize,
        key: String,
        ns: &str,
        rev: u64,
        o: Arc<Obj>,
        old: Arc<Obj>,
    ) {
        i.history.remove(&(res, key.clone()));
        if let Some(m) = i.objects.get_mut(&res) {
            m.remove(&key);
        }
        self.commit(
            i,
            Event {
                rv: rev,
                etype: EventType::Deleted,
                res,
                key,
                ns: ns.to_string(),
                obj: o,
                prev: Some(old),
            },
        );
    }

    /// Deletes an object; returns its final state: as it was last stored (a pod: marked for
    /// deletion at the delete revision), as kube-apiserver answers a delete.
    pub fn delete(
        &self,
        res: usize,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        precondition_rv: Option<&str>,
    ) -> Result<Arc<Obj>, ApiError> {
        let pre = Preconditions {
            uid: None,
            resource_version: precondition_rv.map(str::to_string),
        };
        self.delete_with(res, def, ns, name, &pre, false)
    }

    /// [`Storage::delete`] with uid and resourceVersion preconditions (409 Conflict with
    /// kube-apiserver's "Precondition failed" message on a mismatch) and dry run (answers the
    /// object as it is, removes nothing). An object with `metadata.finalizers` is not removed
    /// but marked (`deletionTimestamp`, a MODIFIED event) and answered; it goes when an update
    /// leaves it without finalizers.
    pub fn delete_with(
        &self,
        res: usize,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        pre: &Preconditions,
        dry_run: bool,
    ) -> Result<Arc<Obj>, ApiError> {
        let key = key_of(ns, name);
        let mut i = self.inner.lock();
        let Some(old) = i.objects.get(&res).and_then(|m| m.get(&key)).cloned() else {
            return Err(ApiError::not_found(&def.plural, &def.group, name));
        };
        check_delete_preconditions(def, name, &old, pre)?;
        if has_finalizers(&old.value) {
            return Ok(self.mark_for_deletion(&mut i, res, key, ns, old, dry_run));
        }
        if dry_run {
            return Ok(old);
        }
        i.rev += 1;
        let rev = i.rev;
        let mut v = old.value.clone();
        set_rv(&mut v, rev);
        let pod = def.group.is_empty() && def.kind == "Pod";
        if pod {
            mark_pod_deleted(&mut v);
        }
        let o = Obj::new(v, EventType::Deleted);
        // kube-apiserver answers a delete with the object as it was last stored (a pod's
        // marking for deletion is a write of its own); the DELETED event carries the revision
        // of the deletion.
        let answered = if pod { o.clone() } else { old.clone() };
        self.store_deleted(&mut i, res, key, ns, rev, o, old);
        Ok(answered)
    }

    /// An object with finalizers is not removed but marked for deletion (`deletionTimestamp`,
    /// a MODIFIED event), as kube-apiserver's registry store does, until updates remove its
    /// finalizers; a second delete changes nothing.
    fn mark_for_deletion(
        &self,
        i: &mut Inner,
        res: usize,
        key: String,
        ns: &str,
        old: Arc<Obj>,
        dry_run: bool,
    ) -> Arc<Obj> {
        if is_terminating(&old.value) {
            return old;
        }
        let mut v = old.value.clone();
        let m = meta_mut(&mut v);
        m.insert("deletionTimestamp".into(), Value::String(rfc3339_now()));
        m.insert("deletionGracePeriodSeconds".into(), Value::from(0));
        if dry_run {
            return Obj::new(v, EventType::Modified);
        }
        i.rev += 1;
        let rev = i.rev;
        set_rv(&mut v, rev);
        self.store_modified(i, res, key, ns, rev, v, old)
    }

    /// Deletes every object of a resource (one DELETED event each, as a deleted
    /// CustomResourceDefinition's objects go), then ends the watches on it.
    pub fn remove_all(&self, res: usize) {
        let mut i = self.inner.lock();
        let objects = i.objects.remove(&res).unwrap_or_default();
        for (key, old) in objects {
            i.history.remove(&(res, key.clone()));
            i.rev += 1;
            let rev = i.rev;
            let mut v = old.value.clone();
            set_rv(&mut v, rev);
            let ns = v
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let o = Obj::new(v, EventType::Deleted);
            self.commit(
                &mut i,
                Event {
                    rv: rev,
                    etype: EventType::Deleted,
                    res,
                    key,
                    ns,
                    obj: o,
                    prev: Some(old),
                },
            );
        }
        // Dropping the senders ends each stream once it has written what it holds.
        i.watchers.retain(|w| w.res != res);
    }

    /// Rewrites the live objects of a resource where `f` changes them, keeping their
    /// resourceVersion and sending no event: what a read from etcd shows once a
    /// CustomResourceDefinition's schema gains a default.
    pub fn rewrite_in_place(&self, res: usize, f: impl Fn(&mut Value)) {
        let mut i = self.inner.lock();
        let Some(objects) = i.objects.get_mut(&res) else {
            return;
        };
        for o in objects.values_mut() {
            let mut v = o.value.clone();
            f(&mut v);
            if v != o.value {
                *o = Obj::new(v, o.line_type);
            }
        }
    }

    /// Keeps at most `per_object` versions of each object and `total` versions over all
    /// objects for [`Storage::history`] (0: none; history is then just the live object).
    /// Applies to versions written from now on.
    pub fn set_history_limit(&self, per_object: usize, total: usize) {
        let mut i = self.inner.lock();
        i.history_limit = per_object;
        i.history_max = total;
        if per_object == 0 || total == 0 {
            i.history.clear();
            i.history_order.clear();
        }
    }

    /// The last stored versions of a live object (created, then each update), oldest first,
    /// within the history bounds; an object never updated has just its live version (the
    /// history of an object costs nothing until it is updated). Empty once it is deleted.
    pub fn history(&self, res: usize, key: &str) -> Vec<Arc<Obj>> {
        let i = self.inner.lock();
        if let Some(h) = i.history.get(&(res, key.to_string())) {
            return h.iter().map(|(_, o)| o.clone()).collect();
        }
        i.objects
            .get(&res)
            .and_then(|m| m.get(key))
            .map(|o| vec![o.clone()])
            .unwrap_or_default()
    }

    /// The state of a resource at revision `at` (`None` = now), with the revision served.
    /// Fails with 410 Expired when `at` is compacted, 504 when it is in the future.
    pub fn snapshot(
        &self,
        res: usize,
        at: Option<u64>,
    ) -> Result<(u64, BTreeMap<String, Arc<Obj>>), ApiError> {
        self.read(res, at, |rev, map| (rev, map.clone()))
    }

    /// Runs `f` on the state of a resource at revision `at` (`None` = now) without copying it
    /// when that is the current state (then `f` runs under the store lock, so keep it short);
    /// a past state is rebuilt from the event log first. Errors as [`Storage::snapshot`].
    pub fn read<R>(
        &self,
        res: usize,
        at: Option<u64>,
        f: impl FnOnce(u64, &BTreeMap<String, Arc<Obj>>) -> R,
    ) -> Result<R, ApiError> {
        static EMPTY: BTreeMap<String, Arc<Obj>> = BTreeMap::new();
        let i = self.inner.lock();
        let live = i.objects.get(&res).unwrap_or(&EMPTY);
        let Some(at) = at else {
            return Ok(f(i.rev, live));
        };
        if at > i.rev {
            return Err(ApiError::too_large_resource_version(at, i.rev));
        }
        if at < i.compacted {
            return Err(ApiError::expired(
                "The resourceVersion for the provided list is too old.",
            ));
        }
        let later: Vec<&Arc<Event>> = i
            .log
            .iter()
            .rev()
            .take_while(|e| e.rv > at)
            .filter(|e| e.res == res)
            .collect();
        if later.is_empty() {
            return Ok(f(at, live));
        }
        let mut map = live.clone();
        for ev in later {
            match (&ev.etype, &ev.prev) {
                (EventType::Added, _) => {
                    map.remove(&ev.key);
                }
                (_, Some(prev)) => {
                    map.insert(ev.key.clone(), prev.clone());
                }
                (_, None) => {}
            }
        }
        drop(i);
        Ok(f(at, &map))
    }

    /// Registers a watcher atomically with its starting point, so no event is lost or doubled.
    /// Fails (410 Expired) when `from` is older than the compacted revision.
    pub fn watch(&self, res: usize, from: WatchFrom) -> Result<Registration, ApiError> {
        let mut i = self.inner.lock();
        let initial = match from {
            WatchFrom::Now => i
                .objects
                .get(&res)
                .map(|m| {
                    m.iter()
                        .map(|(k, o)| {
                            Arc::new(Event {
                                rv: o.rv(),
                                etype: EventType::Added,
                                res,
                                key: k.clone(),
                                ns: o
                                    .value
                                    .pointer("/metadata/namespace")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                                    .to_string(),
                                obj: o.clone(),
                                prev: None,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
            WatchFrom::After(x) => {
                if x < i.compacted {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {x} ({})",
                        i.compacted
                    )));
                }
                i.log
                    .iter()
                    .filter(|e| e.rv > x && e.res == res)
                    .cloned()
                    .collect()
            }
        };
        let (tx, rx) = mpsc::channel(i.watch_buffer);
        let terminated = Arc::new(AtomicBool::new(false));
        i.watchers.push(WatcherSlot {
            res,
            tx,
            terminated: terminated.clone(),
        });
        Ok(Registration {
            initial,
            rx,
            terminated,
            rev: i.rev,
        })
    }
}

/// The status an object created over HTTP starts with: status is the controllers' to set, so
/// kube-apiserver's strategies reset it on create (none, or the kind's initial one).
fn set_initial_status(def: &ResourceDef, obj: &mut Value) {
    let initial = match (def.group.as_str(), def.kind.as_str()) {
        ("", "Pod") => Some(serde_json::json!({"phase": "Pending",
            "qosClass": crate::defaults::pod_qos_class(obj)})),
        ("", "Namespace") => Some(serde_json::json!({"phase": "Active"})),
        // Built-in kinds whose status is a struct: kube-apiserver writes it empty.
        ("apps", "Deployment") => Some(serde_json::json!({})),
        ("", "Service") => Some(serde_json::json!({"loadBalancer": {}})),
        // What a CRD answers before apiextensions' controllers (the simulator's
        // reconcile, right after) accept its names.
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            Some(crate::crd::initial_status(obj))
        }
        _ => None,
    };
    let o = obj.as_object_mut().expect("checked to be an object");
    match initial {
        Some(st) => o.insert("status".into(), st),
        None => o.remove("status"),
    };
}

/// The name a create gives its object: `metadata.name`, or `generateName` with a random
/// suffix; 422 when there is neither.
fn name_to_create(def: &ResourceDef, obj: &Value) -> Result<String, ApiError> {
    let meta = |k: &str| {
        obj.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
    };
    let name = meta("name").unwrap_or("");
    if !name.is_empty() {
        return Ok(name.to_string());
    }
    match meta("generateName") {
        Some(g) if !g.is_empty() => Ok(format!("{g}{}", random_suffix())),
        _ => Err(ApiError::invalid(
            &def.kind,
            &def.group,
            "",
            "metadata.name",
            "FieldValueRequired",
            "Required value: name or generateName is required",
        )),
    }
}

/// The metadata the server sets on create: namespace (for a namespaced kind), uid, creation
/// time, generation 1 (for a kind that has one), no deletion mark.
fn set_created_metadata(def: &ResourceDef, ns: &str, obj: &mut Value) {
    let m = meta_mut(obj);
    if def.namespaced {
        m.insert("namespace".into(), Value::String(ns.to_string()));
    } else {
        m.remove("namespace");
    }
    m.insert("uid".into(), Value::String(new_uid()));
    m.insert("creationTimestamp".into(), Value::String(rfc3339_now()));
    if def.generation {
        m.insert("generation".into(), Value::from(1));
    } else {
        m.remove("generation");
    }
    m.remove("deletionTimestamp");
}

/// An update's body must name the object its URL names (400 otherwise).
fn check_body_name(obj: &Value, name: &str) -> Result<(), ApiError> {
    let body_name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

/// Keeps what an update's `scope` may not change from `old`: a main update keeps the status
/// of a kind with a status subresource, a status update keeps all but status (and its
/// managedFields).
fn limit_to_scope(scope: WriteScope, def: &ResourceDef, old: &Value, obj: &mut Value) {
    match scope {
        WriteScope::Whole => {}
        WriteScope::Main if !def.status_subresource => {}
        WriteScope::Main => match old.get("status") {
            Some(st) => obj["status"] = st.clone(),
            None => {
                obj.as_object_mut().map(|m| m.remove("status"));
            }
        },
        WriteScope::Status => {
            let status = obj.get("status").cloned();
            let managed = obj.pointer("/metadata/managedFields").cloned();
            *obj = old.clone();
            if let Some(mf) = managed {
                meta_mut(obj).insert("managedFields".into(), mf);
            }
            match status {
                Some(st) => obj["status"] = st,
                None => {
                    obj.as_object_mut().map(|m| m.remove("status"));
                }
            }
        }
    }
}

/// Admits an update by the model's rules: unknown fields pruned (and reported as the request
/// asks), a custom resource's schema, and validation, finalizers included; a write of the
/// whole object (`WriteScope::Whole`) passes all but the schema.
fn admit_update(
    scope: WriteScope,
    def: &ResourceDef,
    name: &str,
    old: &Value,
    obj: &mut Value,
) -> Result<(), ApiError> {
    if scope != WriteScope::Whole {
        let unknown = crate::unknown_fields::prune(def, obj);
        crate::field_validation::report_unknown_fields(def, &unknown)?;
    }
    crate::crd::admit(def, obj, Some(old))?;
    if scope != WriteScope::Whole {
        let mut causes = crate::validation::object_causes(def, obj);
        causes.extend(crate::validation::finalizer_causes(old, obj));
        crate::validation::check(def, name, causes)?;
    }
    Ok(())
}

/// What an update cannot change, taken from `old`: kind and apiVersion, uid, creation time,
/// namespace, the deletion mark, managedFields the body leaves out; generation bumped only when
/// something outside `metadata` and `status` changed.
fn keep_server_fields(def: &ResourceDef, old: &Value, obj: &mut Value) {
    obj["kind"] = Value::String(def.kind.clone());
    obj["apiVersion"] = Value::String(def.api_version());
    let old_meta = &old["metadata"];
    let generation = old_meta
        .get("generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let bump = !same_spec(old, obj);
    let m = meta_mut(obj);
    for k in [
        "uid",
        "creationTimestamp",
        "namespace",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match old_meta.get(k) {
            Some(v) => m.insert(k.into(), v.clone()),
            None => m.remove(k),
        };
    }
    if def.generation {
        m.insert(
            "generation".into(),
            Value::from(if bump { generation + 1 } else { generation }),
        );
    } else {
        m.remove("generation");
    }
    if !m.contains_key("managedFields") {
        if let Some(mf) = old_meta.get("managedFields") {
            m.insert("managedFields".into(), mf.clone());
        }
    }
}

/// A delete's uid and resourceVersion preconditions against the stored `old`: 409 Conflict
/// with kube-apiserver's "Precondition failed" wording (naming the kind) on a mismatch.
fn check_delete_preconditions(
    def: &ResourceDef,
    name: &str,
    old: &Obj,
    pre: &Preconditions,
) -> Result<(), ApiError> {
    if let Some(u) = pre.uid.as_deref().filter(|u| !u.is_empty()) {
        let have = old
            .value
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("");
        if u != have {
            // kube-apiserver names the kind, not the resource, in precondition failures.
            return Err(ApiError::conflict_because(
                &def.kind,
                &def.group,
                name,
                &format!(
                    "the UID in the precondition ({u}) does not match the UID in record ({have}). The object might have been deleted and then recreated"
                ),
            ));
        }
    }
    if let Some(p) = pre.resource_version.as_deref().filter(|p| !p.is_empty()) {
        if p.parse::<u64>().ok() != Some(old.rv()) {
            return Err(ApiError::conflict_because(
                &def.kind,
                &def.group,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({p}) does not match the ResourceVersion in record ({}). The object might have been modified",
                    old.rv()
                ),
            ));
        }
    }
    Ok(())
}

/// A pod's last state: no kubelet runs it, so it goes at once, but as kube-apiserver deletes a
/// pod: marked for deletion first (a new generation).
fn mark_pod_deleted(v: &mut Value) {
    let m = meta_mut(v);
    let generation = m.get("generation").and_then(Value::as_i64).unwrap_or(1);
    m.insert("deletionTimestamp".into(), Value::String(rfc3339_now()));
    m.insert("deletionGracePeriodSeconds".into(), Value::from(0));
    m.insert("generation".into(), Value::from(generation + 1));
}

/// Whether an object has `metadata.finalizers` left.
pub fn has_finalizers(v: &Value) -> bool {
    v.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

/// Whether an object is being deleted (`metadata.deletionTimestamp` set).
pub fn is_terminating(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// Rejects non-objects and objects whose `kind` / `apiVersion` (when set) are not the
/// resource's, as the apiserver's decoder does.
fn check_type(obj: &Value, def: &ResourceDef) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {})",
            def.kind
        )));
    }
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let other_kind = !kind.is_empty() && kind != def.kind;
    let other_version = !av.is_empty() && av != def.api_version();
    if !other_kind && !other_version {
        return check_micro_times(obj, def);
    }
    if !def.is_core() && !other_version {
        // A custom resource's body is decoded whatever its kind, then validated.
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(ApiError::invalid(
            kind,
            &def.group,
            name,
            "kind",
            "FieldValueInvalid",
            &format!("Invalid value: {kind:?}: must be {}", def.kind),
        ));
    }
    // kube-apiserver's scheme, in its words: no such kind in that version, or no conversion
    // from the kind sent to the resource's (`core` is the internal name of the core group).
    let version = av.rsplit('/').next().unwrap_or(av);
    let why = if other_version {
        format!(
            "no kind {:?} is registered for version {av:?} in scheme \"pkg/runtime/scheme.go:111\"",
            if kind.is_empty() { &def.kind } else { kind }
        )
    } else {
        let internal = match def.group.split('.').next() {
            Some("") | None => "core",
            Some(g) => g,
        };
        format!(
            "converting ({version}.{kind}) to ({internal}.{}): unknown conversion",
            def.kind
        )
    };
    Err(ApiError::bad_request(format!(
        "{} in version {av:?} cannot be handled as a {}: {why}",
        if kind.is_empty() { &def.kind } else { kind },
        def.kind
    )))
}

/// The decoder's refusal of a `MicroTime` field that Go's layout does not parse (a whole-second
/// time, as the python client sends for a time without microseconds, is a 400).
fn check_micro_times(obj: &Value, def: &ResourceDef) -> Result<(), ApiError> {
    for pointer in crate::builtin::micro_time_fields(&def.group, &def.kind) {
        if let Some(Value::String(time)) = obj.pointer(pointer) {
            if let Err(why) = crate::time::check_micro_time(time) {
                return Err(ApiError::bad_request(format!(
                    "{} in version {:?} cannot be handled as a {}: {why}",
                    def.kind, def.version, def.kind
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_carries_its_event_line_and_builds_lines_of_other_types() {
        let value = serde_json::json!({"metadata": {"name": "p", "resourceVersion": "7"}});
        let obj = Obj::new(value.clone(), EventType::Modified);
        assert_eq!(obj.json, serde_json::to_vec(&value).unwrap());
        for etype in [EventType::Added, EventType::Modified, EventType::Deleted] {
            let line = obj.event_line(etype);
            let expected = format!("{{\"type\":\"{}\",\"object\":{}}}\n", etype.as_str(), value);
            assert_eq!(std::str::from_utf8(&line).unwrap(), expected);
        }
        // The stored line is shared, not copied; the object's JSON is a slice of it.
        let line = obj.event_line(EventType::Modified);
        assert!(line.as_ptr_range().contains(&obj.json.as_ptr()));
    }

    #[test]
    fn generation_counts_changes_outside_metadata_and_status_only() {
        let s = Storage::new(100, 2);
        let def = ResourceDef::new("", "v1", "Pod", "pods", true);
        let gen = |o: &Obj| o.value["metadata"]["generation"].as_i64();
        let pod = |labels: &str, image: &str, phase: &str| {
            serde_json::json!({
                "metadata": {"name": "p", "labels": {"l": labels}},
                "spec": {"containers": [{"image": image}]},
                "status": {"phase": phase},
            })
        };
        let created = s
            .create(0, &def, "default", pod("a", "i1", "Pending"))
            .unwrap();
        assert_eq!(gen(&created), Some(1));
        let relabelled = s
            .update(0, &def, "default", "p", pod("b", "i1", "Running"))
            .unwrap();
        assert_eq!(
            gen(&relabelled),
            Some(1),
            "metadata and status leave it alone"
        );
        let respecced = s
            .update(0, &def, "default", "p", pod("b", "i2", "Running"))
            .unwrap();
        assert_eq!(gen(&respecced), Some(2), "a spec change bumps it");
        let mut extra = pod("b", "i2", "Running");
        extra["data"] = serde_json::json!({"k": "v"});
        let added = s.update(0, &def, "default", "p", extra).unwrap();
        assert_eq!(gen(&added), Some(3), "a new top-level field bumps it");
        let removed = s.update(0, &def, "default", "p", serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [{"image": "i2"}]}})).unwrap();
        assert_eq!(gen(&removed), Some(4), "a removed top-level field bumps it");
    }

    #[test]
    fn thousands_of_watchers_never_block_a_writer_and_slow_ones_are_dropped() {
        let s = Storage::new(100, 2);
        let def = ResourceDef::new("", "v1", "Pod", "pods", true);
        let regs: Vec<Registration> = (0..5000)
            .map(|_| s.watch(0, WatchFrom::Now).unwrap())
            .collect();
        for i in 0..3 {
            s.create(
                0,
                &def,
                "default",
                serde_json::json!({"metadata": {"name": format!("p{i}")}}),
            )
            .unwrap();
        }
        // Nobody read: every watcher overflowed its buffer of 2 on the third write.
        assert_eq!(s.slow_terminations(), 5000);
        assert!(regs.iter().all(|r| r.terminated.load(Ordering::SeqCst)));
        assert_eq!(s.watcher_count(), 0);
    }

    #[test]
    fn snapshot_rolls_back_to_a_past_revision() {
        let s = Storage::new(100, 2);
        let def = ResourceDef::new("", "v1", "Pod", "pods", true);
        let a = s
            .create(0, &def, "d", serde_json::json!({"metadata": {"name": "a"}}))
            .unwrap();
        let mut m = a.value.clone();
        m["spec"] = serde_json::json!({"x": 1});
        s.update(0, &def, "d", "a", m).unwrap();
        s.create(0, &def, "d", serde_json::json!({"metadata": {"name": "b"}}))
            .unwrap();
        s.delete(0, &def, "d", "a", None).unwrap();
        let (rev, map) = s.snapshot(0, Some(1)).unwrap();
        assert_eq!(rev, 1);
        assert_eq!(map.len(), 1);
        assert_eq!(map["d/a"].rv(), 1);
        assert_eq!(s.snapshot(0, Some(3)).unwrap().1.len(), 2);
        assert_eq!(s.snapshot(0, Some(9)).unwrap_err().code, 504);
        s.compact_to(2);
        assert_eq!(s.snapshot(0, Some(1)).unwrap_err().code, 410);
    }

    #[test]
    fn timestamps_are_rfc3339() {
        let t = rfc3339_now();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z'));
    }
}
