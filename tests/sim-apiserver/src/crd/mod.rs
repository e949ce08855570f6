//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`): a CRD written through the API is
//! validated and defaulted like kube-apiserver does it, and once stored it is served: each served
//! version becomes a resource of the registry (discovery, routes, its schema validating writes,
//! its printer columns in Tables), its status says `NamesAccepted` and `Established`. Deleting the
//! CRD deletes its objects (one DELETED event each) and ends the watches on them.
//!
//! Unlike kube-apiserver, which establishes a CRD from a controller a moment after the write, this
//! happens before the write's answer is sent ([`reconcile`] runs right after every CRD write), so
//! a test can use the resource at once. All versions of a CRD share one store (the storage
//! version's slot), objects kept in the version they were written in; reads through a version
//! convert them as strategy `None` does, changing only `apiVersion` ([`Conversion`]).

pub mod definition;
pub mod schema;

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Response};
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::body::{Chunk, SimBody};

use crate::resources::ResourceDef;
use crate::server::Shared;
use crate::status::ApiError;
use crate::storage::{rfc3339_now, WriteOptions, WriteScope};
use crate::table::Column;

/// The API group of CustomResourceDefinitions.
pub const GROUP: &str = "apiextensions.k8s.io";
/// Their resource name.
pub const PLURAL: &str = "customresourcedefinitions";

/// The `customresourcedefinitions` resource itself (cluster-scoped, with a status).
pub fn definition_resource() -> ResourceDef {
    ResourceDef::new(GROUP, "v1", "CustomResourceDefinition", PLURAL, false)
        .with_status()
        .with_short_names(&["crd", "crds"])
        .with_categories(&["api-extensions"])
}

/// The status a CustomResourceDefinition is created with: no names accepted, no conditions,
/// its storage version stored.
pub(crate) fn initial_status(crd: &Value) -> Value {
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    serde_json::json!({"acceptedNames": {"kind": "", "plural": ""}, "conditions": null,
        "storedVersions": storage})
}

/// Whether `def` is the CustomResourceDefinition resource.
pub fn is_definition(def: &ResourceDef) -> bool {
    def.group == GROUP && def.plural == PLURAL
}

/// The admission step of every write (create, update, patch, status, scale, apply): a CRD is
/// defaulted and validated; an object of a resource with a schema is pruned, defaulted and
/// validated against it. 422 `Invalid` with one cause per problem. `old` is the stored object
/// an update replaces.
pub(crate) fn admit(
    def: &ResourceDef,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let causes = if is_definition(def) {
        definition::admit(obj, old)
    } else if let Some(schema) = &def.schema {
        let (causes, unknown) = schema::admit_reporting_unknown(schema, obj);
        report_unknown_fields(def, &unknown)?;
        causes
    } else {
        return Ok(());
    };
    if causes.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let list: Vec<(&str, String, String)> = causes
        .into_iter()
        .map(|c| (c.reason, c.field, c.message))
        .collect();
    Err(ApiError::invalid_causes(&def.kind, &def.group, name, &list))
}

/// Reports the unknown fields a write dropped, as its `fieldValidation` asks: a `Warning`
/// each (the default), nothing (`Ignore`), or (`Strict`) kube-apiserver's 400.
pub(crate) fn report_unknown_fields(def: &ResourceDef, unknown: &[String]) -> Result<(), ApiError> {
    if unknown.is_empty() || !unknown_fields_refused(unknown) {
        return Ok(());
    }
    let list: Vec<String> = unknown
        .iter()
        .map(|u| format!("unknown field {u:?}"))
        .collect();
    Err(ApiError::bad_request(format!(
        "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
        list.join(", "),
        kind = def.kind,
        version = def.version,
    )))
}

/// What a write request's `fieldValidation` asks for unknown fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldValidation {
    /// Pruned silently.
    Ignore,
    /// Pruned, with a `Warning` header each (kube-apiserver's default).
    Warn,
    /// Refused: 400 `strict decoding error`.
    Strict,
}

#[derive(Debug)]
struct FieldCheck {
    mode: FieldValidation,
    warnings: Vec<String>,
}

tokio::task_local! {
    /// The `fieldValidation` of the write request being handled on this task (writes through
    /// the test API have none: unknown fields are pruned silently).
    static FIELD_VALIDATION: RefCell<FieldCheck>;
}

/// Whether unknown fields make the write fail (`Strict`); with `Warn` they are recorded for
/// the response's `Warning` headers.
fn unknown_fields_refused(unknown: &[String]) -> bool {
    FIELD_VALIDATION
        .try_with(|c| {
            let mut c = c.borrow_mut();
            match c.mode {
                FieldValidation::Strict => true,
                FieldValidation::Warn => {
                    for u in unknown {
                        let w = format!("unknown field {u:?}");
                        if !c.warnings.contains(&w) {
                            c.warnings.push(w);
                        }
                    }
                    false
                }
                FieldValidation::Ignore => false,
            }
        })
        .unwrap_or(false)
}

/// Runs the write `write` under the `fieldValidation` of its `query` (`Strict`, `Warn` — the
/// default —, `Ignore`); gives its result and the warnings to send as `Warning` headers.
async fn with_field_validation<F: Future>(
    query: Option<&str>,
    write: F,
) -> (F::Output, Vec<String>) {
    let mut mode = FieldValidation::Warn;
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if k == "fieldValidation" {
            mode = match v.as_ref() {
                "Strict" => FieldValidation::Strict,
                "Ignore" => FieldValidation::Ignore,
                _ => FieldValidation::Warn,
            };
        }
    }
    let check = RefCell::new(FieldCheck {
        mode,
        warnings: Vec::new(),
    });
    FIELD_VALIDATION
        .scope(check, async move {
            let out = write.await;
            let warnings = FIELD_VALIDATION.with(|c| std::mem::take(&mut c.borrow_mut().warnings));
            (out, warnings)
        })
        .await
}

/// A write request over HTTP: run under its `fieldValidation` (unknown fields of a custom
/// resource become `Warning` headers or a 400), and followed by a [`reconcile`] when it wrote a
/// CRD (`crd`).
pub(crate) async fn around_write<F>(
    shared: &Shared,
    crd: bool,
    query: Option<&str>,
    write: F,
) -> Result<Response<SimBody>, ApiError>
where
    F: Future<Output = Result<Response<SimBody>, ApiError>>,
{
    let (r, warnings) = with_field_validation(query, write).await;
    if crd && r.is_ok() {
        reconcile(shared);
    }
    r.map(|mut resp| {
        for w in warnings {
            // kube-apiserver's form: code 299, agent `-`, the text quoted.
            if let Ok(v) = HeaderValue::from_str(&format!("299 - {w:?}")) {
                resp.headers_mut().append(header::WARNING, v);
            }
        }
        resp
    })
}

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
        crate::table::map_watch_lines(rx, move |line| {
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
pub(crate) fn reconcile(shared: &Shared) {
    let state = &shared.crds;
    let _serial = state.serial.lock();
    let Some(crd_idx) = shared.registry.read().find(GROUP, "v1", PLURAL) else {
        return;
    };
    let crd_def = shared.registry.read().get(crd_idx).clone();
    let Ok((_, crds)) = shared.storage.snapshot(crd_idx, None) else {
        return;
    };
    let now = rfc3339_now();
    let mut removed_slots = Vec::new();
    let mut fresh_slots = Vec::new();
    let mut redefaulted = Vec::new();
    let mut statuses = Vec::new();
    {
        let mut reg = shared.registry.write();
        let mut inner = state.inner.lock();
        let names: Vec<String> = crds
            .values()
            .filter_map(|o| o.value.pointer("/metadata/name").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        let gone: Vec<String> = inner
            .serving
            .keys()
            .filter(|n| !names.contains(n))
            .cloned()
            .collect();
        for name in gone {
            let Some(s) = inner.serving.remove(&name) else {
                continue;
            };
            for idx in &s.idxs {
                let def = reg.get(*idx).clone();
                inner.columns.remove(&gvp(&def));
                inner.multi.remove(&gvp(&def));
                inner.slots.remove(idx);
                reg.unregister(*idx);
            }
            removed_slots.push(s.slot);
        }
        for (o, name) in crds.values().zip(&names) {
            let crd = &o.value;
            let served = definition::served(crd);
            let owned: Vec<usize> = inner
                .serving
                .get(name)
                .map(|s| s.idxs.clone())
                .unwrap_or_default();
            let taken = served.defs.iter().find_map(|d| {
                reg.position(|r| r.group == d.group && r.plural == d.plural)
                    .filter(|i| !owned.contains(i))
                    .map(|_| format!("{:?} is already in use", d.plural))
            });
            if let Some(why) = taken {
                let want = definition::status(crd, Some(&why), &now);
                if !definition::status_is_current(crd, &want) {
                    statuses.push((name.clone(), crd.clone(), want));
                }
                continue;
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
                let def = reg.get(*old).clone();
                inner.columns.remove(&gvp(&def));
                inner.multi.remove(&gvp(&def));
                inner.slots.remove(old);
                reg.unregister(*old);
            }
            let Some(first) = idxs.first().copied() else {
                // No version served: nothing to route, but the objects are kept.
                if let Some(mut p) = prev {
                    p.idxs.clear();
                    inner.serving.insert(name.clone(), p);
                }
                continue;
            };
            let slot = prev.as_ref().map(|p| p.slot).unwrap_or(first);
            match (&prev, served.defs[0].schema.clone()) {
                // Objects left in a slot by writes racing a CRD's deletion are not the new
                // CRD's.
                (None, _) => fresh_slots.push(slot),
                (Some(_), Some(schema)) if old_schema.as_ref() != Some(&schema) => {
                    redefaulted.push((slot, schema))
                }
                _ => {}
            }
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
            inner.serving.insert(name.clone(), Serving { slot, idxs });
            state.any.store(true, Ordering::Release);
            let want = definition::status(crd, None, &now);
            if !definition::status_is_current(crd, &want) {
                statuses.push((name.clone(), crd.clone(), want));
            }
        }
    }
    for slot in removed_slots.into_iter().chain(fresh_slots) {
        shared.storage.remove_all(slot);
    }
    for (slot, schema) in redefaulted {
        shared
            .storage
            .rewrite_in_place(slot, |v| schema::apply_defaults(&schema, v));
    }
    for (name, mut crd, status) in statuses {
        crd["status"] = status;
        if let Some(m) = crd.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        let opts = WriteOptions {
            dry_run: false,
            scope: WriteScope::Status,
        };
        if let Err(e) = shared
            .storage
            .update_with(crd_idx, &crd_def, "", &name, crd, opts)
        {
            tracing::debug!(%e, name, "CRD status not written");
        }
    }
}
