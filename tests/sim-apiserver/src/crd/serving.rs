//! Serving the stored CRDs: which registry indexes serve each one's versions, the store slot they
//! share, their printer columns, the conversion of objects read through another version than the
//! one written in, and [`reconcile`], which brings all of it in line with the stored CRDs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use tokio::sync::mpsc;

use super::definition::{self, Column};
use super::{schema, GROUP, PLURAL};
use crate::body::Chunk;
use crate::resources::{Registry, ResourceDef};
use crate::storage::{Storage, WriteOptions, WriteScope};
use crate::time::rfc3339_now;

/// What is served for one CRD.
#[derive(Debug, Clone)]
struct Serving {
    /// The store slot of all its versions.
    slot: usize,
    /// The registry indexes of its served versions.
    idxs: Vec<usize>,
}

#[derive(Debug, Default)]
struct Inner {
    /// By CRD name.
    serving: HashMap<String, Serving>,
    /// Registry index of a CRD's version → its store slot.
    slots: HashMap<usize, usize>,
    /// `group/version/plural` → printer columns.
    columns: HashMap<String, Arc<Vec<Column>>>,
    /// `group/version/plural` of the versions of CRDs serving more than one.
    multi: std::collections::HashSet<String>,
}

/// The server's CRD bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct CrdState {
    /// Whether any CRD was ever served: until then, requests skip the lock (benchmarks run
    /// without CRDs).
    any: AtomicBool,
    inner: Mutex<Inner>,
    /// Reconciles run one at a time.
    serial: Mutex<()>,
}

fn gvp(def: &ResourceDef) -> String {
    format!("{}/{}/{}", def.group, def.version, def.plural)
}

impl CrdState {
    /// The store slot of the resource at registry index `idx` (its own index unless it is a
    /// non-storage version of a CRD).
    pub(crate) fn slot(&self, idx: usize) -> usize {
        if !self.any.load(Ordering::Acquire) {
            return idx;
        }
        self.inner.lock().slots.get(&idx).copied().unwrap_or(idx)
    }

    /// How reads through `def` convert objects, when `def` is one of several served versions of
    /// a CRD (objects are stored in the version they were written in).
    pub(crate) fn conversion(&self, def: &ResourceDef) -> Option<Conversion> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        self.inner
            .lock()
            .multi
            .contains(&gvp(def))
            .then(|| Conversion {
                api_version: Value::String(def.api_version()),
            })
    }

    /// The printer columns of a CRD's resource (`None` for other resources).
    pub(crate) fn columns(&self, def: &ResourceDef) -> Option<Arc<Vec<Column>>> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        self.inner.lock().columns.get(&gvp(def)).cloned()
    }
}

/// The conversion of a CRD's objects to the version a read asks for: strategy `None`, which
/// changes only `apiVersion`.
#[derive(Debug, Clone)]
pub(crate) struct Conversion {
    api_version: Value,
}

impl Conversion {
    fn convert(&self, obj: &mut Value) -> bool {
        match obj.get_mut("apiVersion") {
            Some(v) if *v != self.api_version => {
                *v = self.api_version.clone();
                true
            }
            _ => false,
        }
    }

    /// One object's JSON.
    pub(crate) fn object(&self, body: Bytes) -> Bytes {
        let Ok(mut v) = serde_json::from_slice::<Value>(&body) else {
            return body;
        };
        if self.convert(&mut v) {
            Bytes::from(v.to_string())
        } else {
            body
        }
    }

    /// A list's JSON.
    pub(crate) fn list(&self, body: Bytes) -> Bytes {
        let Ok(mut v) = serde_json::from_slice::<Value>(&body) else {
            return body;
        };
        let mut changed = false;
        if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
            for item in items {
                changed |= self.convert(item);
            }
        }
        if changed {
            Bytes::from(v.to_string())
        } else {
            body
        }
    }

    /// A watch body (ERROR and BOOKMARK events pass as they are).
    pub(crate) fn watch(self, rx: mpsc::Receiver<Chunk>) -> mpsc::Receiver<Chunk> {
        crate::body::map_watch_lines(rx, move |line| {
            let Ok(mut ev) = serde_json::from_slice::<Value>(line) else {
                return Bytes::copy_from_slice(line);
            };
            let object_event = matches!(
                ev.get("type").and_then(Value::as_str),
                Some("ADDED" | "MODIFIED" | "DELETED")
            );
            if object_event && self.convert(&mut ev["object"]) {
                let mut s = ev.to_string();
                s.push('\n');
                Bytes::from(s)
            } else {
                Bytes::copy_from_slice(line)
            }
        })
    }
}

/// Brings what is served in line with the stored CRDs: serves new and changed ones, stops
/// serving deleted ones (deleting their objects), and writes the status of those whose status
/// is not yet what kube-apiserver's controllers would have set.
pub(crate) fn reconcile(registry: &RwLock<Registry>, storage: &Storage, state: &CrdState) {
    let _serial = state.serial.lock();
    let Some(crd_idx) = registry.read().find(GROUP, "v1", PLURAL) else {
        return;
    };
    let crd_def = registry.read().get(crd_idx).clone();
    let Ok((_, crds)) = storage.snapshot(crd_idx, None) else {
        return;
    };
    let now = rfc3339_now();
    let mut work = StorageWork::default();
    {
        let mut reg = registry.write();
        let mut inner = state.inner.lock();
        let names: Vec<String> = crds
            .values()
            .filter_map(|o| o.value.pointer("/metadata/name").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        work.removed_slots = stop_serving_gone(&mut reg, &mut inner, &names);
        for (o, name) in crds.values().zip(&names) {
            if serve_crd(&mut reg, &mut inner, &o.value, name, &now, &mut work) {
                state.any.store(true, Ordering::Release);
            }
        }
    }
    work.run(storage, crd_idx, &crd_def);
}

/// What a reconcile leaves to do in storage once the registry and the bookkeeping are
/// unlocked.
#[derive(Default)]
struct StorageWork {
    /// The slots of CRDs no longer stored, whose objects go.
    removed_slots: Vec<usize>,
    /// The slots of CRDs served anew, emptied of objects left by writes racing a deletion.
    fresh_slots: Vec<usize>,
    /// The slots whose storage version's schema changed, with the new one to default by.
    redefaulted: Vec<(usize, Arc<Value>)>,
    /// The CRDs (name, object, wanted status) whose status is not yet the wanted one.
    statuses: Vec<(String, Value, Value)>,
}

impl StorageWork {
    /// Records the status `crd` should have (refused for `conflict`, if any) unless it has it.
    fn want_status(&mut self, crd: &Value, name: &str, conflict: Option<&str>, now: &str) {
        let want = definition::status(crd, conflict, now);
        if !definition::status_is_current(crd, &want) {
            self.statuses.push((name.to_string(), crd.clone(), want));
        }
    }

    /// Empties the removed and fresh slots, defaults stored objects by changed schemas and
    /// writes the statuses (through the CRD resource at `crd_idx`).
    fn run(self, storage: &Storage, crd_idx: usize, crd_def: &ResourceDef) {
        for slot in self.removed_slots.into_iter().chain(self.fresh_slots) {
            storage.remove_all(slot);
        }
        for (slot, schema) in self.redefaulted {
            storage.rewrite_in_place(slot, |v| schema::apply_defaults(&schema, v));
        }
        for (name, mut crd, status) in self.statuses {
            crd["status"] = status;
            if let Some(m) = crd.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
            let opts = WriteOptions {
                dry_run: false,
                scope: WriteScope::Status,
            };
            if let Err(e) = storage.update_with(crd_idx, crd_def, "", &name, crd, opts) {
                tracing::debug!(%e, name, "CRD status not written");
            }
        }
    }
}

/// Stops serving the CRDs no longer stored (not in `names`); the slots their objects were in.
fn stop_serving_gone(reg: &mut Registry, inner: &mut Inner, names: &[String]) -> Vec<usize> {
    let gone: Vec<String> = inner
        .serving
        .keys()
        .filter(|n| !names.contains(n))
        .cloned()
        .collect();
    let mut removed_slots = Vec::new();
    for name in gone {
        let Some(s) = inner.serving.remove(&name) else {
            continue;
        };
        for idx in &s.idxs {
            unserve(reg, inner, *idx);
        }
        removed_slots.push(s.slot);
    }
    removed_slots
}

/// Stops serving the CRD version at registry index `idx`: its columns, routing and registration.
fn unserve(reg: &mut Registry, inner: &mut Inner, idx: usize) {
    let def = reg.get(idx).clone();
    inner.columns.remove(&gvp(&def));
    inner.multi.remove(&gvp(&def));
    inner.slots.remove(&idx);
    reg.unregister(idx);
}

/// Serves the stored CRD `crd` (named `name`) as it now is, noting in `work` what storage must
/// do and the status it should have; whether it is served (not when another resource has its
/// names, nor with no version served).
fn serve_crd(
    reg: &mut Registry,
    inner: &mut Inner,
    crd: &Value,
    name: &str,
    now: &str,
    work: &mut StorageWork,
) -> bool {
    let served = definition::served(crd);
    let owned: Vec<usize> = inner
        .serving
        .get(name)
        .map(|s| s.idxs.clone())
        .unwrap_or_default();
    if let Some(why) = name_taken(reg, &served, &owned) {
        work.want_status(crd, name, Some(&why), now);
        return false;
    }
    let prev = inner.serving.get(name).cloned();
    // The storage version's schema before this write, to default stored objects anew.
    let old_schema = prev
        .as_ref()
        .and_then(|p| p.idxs.first())
        .and_then(|i| reg.get(*i).schema.clone());
    let idxs: Vec<usize> = served
        .defs
        .iter()
        .map(|d| reg.register(d.clone()))
        .collect();
    for old in owned.iter().filter(|i| !idxs.contains(i)) {
        unserve(reg, inner, *old);
    }
    let Some(first) = idxs.first().copied() else {
        // No version served: nothing to route, but the objects are kept.
        if let Some(mut p) = prev {
            p.idxs.clear();
            inner.serving.insert(name.to_string(), p);
        }
        return false;
    };
    let slot = prev.as_ref().map(|p| p.slot).unwrap_or(first);
    match (&prev, served.defs[0].schema.clone()) {
        // Objects left in a slot by writes racing a CRD's deletion are not the new
        // CRD's.
        (None, _) => work.fresh_slots.push(slot),
        (Some(_), Some(schema)) if old_schema.as_ref() != Some(&schema) => {
            work.redefaulted.push((slot, schema))
        }
        _ => {}
    }
    route_versions(inner, &served, &idxs, slot);
    inner
        .serving
        .insert(name.to_string(), Serving { slot, idxs });
    work.want_status(crd, name, None, now);
    true
}

/// Why the resources of `served` cannot be served: another resource than the CRD's own
/// (`owned`) already has one's group and plural.
fn name_taken(reg: &Registry, served: &definition::Served, owned: &[usize]) -> Option<String> {
    served.defs.iter().find_map(|d| {
        reg.position(|r| r.group == d.group && r.plural == d.plural)
            .filter(|i| !owned.contains(i))
            .map(|_| format!("{:?} is already in use", d.plural))
    })
}

/// Routes each served version (registry indexes `idxs`) to the CRD's store `slot`, with its
/// printer columns, and marks the versions of a CRD serving more than one.
fn route_versions(inner: &mut Inner, served: &definition::Served, idxs: &[usize], slot: usize) {
    for d in &served.defs {
        if served.defs.len() > 1 {
            inner.multi.insert(gvp(d));
        } else {
            inner.multi.remove(&gvp(d));
        }
    }
    for (i, (idx, cols)) in idxs.iter().zip(&served.columns).enumerate() {
        inner.slots.insert(*idx, slot);
        inner
            .columns
            .insert(gvp(&served.defs[i]), Arc::new(cols.clone()));
    }
}
