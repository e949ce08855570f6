//! Server-side printing: the `Table` of `meta.k8s.io` that kubectl asks for
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) on gets, lists and watches.
//!
//! Columns: a custom resource's are `Name`, then its CRD's `additionalPrinterColumns` (or `Age`
//! when it declares none), each cell read by a simple JSONPath (`.spec.x`, `.status.y[0].z`,
//! `.metadata.creationTimestamp`); a built-in kind's are `Name` and `Age`, plus a few cheap ones
//! kube-apiserver prints for pods, config maps, namespaces and deployments. Each row carries the
//! object as `includeObject` asks (`None`, `Metadata` — the default, a `PartialObjectMetadata` —
//! or `Object`). In a watch, only the first event's Table has column definitions, as
//! kube-apiserver sends them.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use crate::body::{map_watch_lines, Chunk};
use crate::crd::definition::Column;
use crate::representation::Representation;
use crate::resources::ResourceDef;
use crate::status::ApiError;

/// What a row carries of its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Include {
    None,
    Metadata,
    Object,
}

/// How to turn objects into Tables for one request.
#[derive(Debug, Clone)]
pub(crate) struct TableView {
    api_version: &'static str,
    include: Include,
    kind: String,
    object_api_version: String,
    /// The CRD's columns; `None` for a built-in kind.
    custom: Option<Vec<Column>>,
}

/// How a read's objects are written beyond the negotiated representation: as a Table, or
/// converted to the version read (one of several versions of a CRD).
#[derive(Debug)]
pub(crate) enum ReadView {
    /// A `meta.k8s.io` Table.
    Table(TableView),
    /// Whole objects, their `apiVersion` the one read.
    Converted(crate::crd::serving::Conversion),
}

impl ReadView {
    /// The view of a GET of `def` (`sub`: its subresource, if any) with this `Accept` header
    /// and query, if it needs one.
    pub(crate) fn new(
        crds: &crate::crd::serving::CrdState,
        def: &ResourceDef,
        sub: Option<&str>,
        accept: Option<&str>,
        query: Option<&str>,
    ) -> Result<Option<Self>, ApiError> {
        if sub.is_some() {
            return Ok(None);
        }
        if let Some(v) = accept.and_then(requested) {
            let cols = crds.columns(def);
            let view = TableView::new(v, def, cols.as_deref().map(Vec::as_slice), query)?;
            return Ok(Some(Self::Table(view)));
        }
        Ok(crds.conversion(def).map(Self::Converted))
    }

    /// Whether the answer is a Table (then the representation is not negotiated).
    pub(crate) fn is_table(&self) -> bool {
        matches!(self, Self::Table(_))
    }

    /// A list body as the list handler wrote it in `representation`.
    pub(crate) fn list(
        &self,
        body: Bytes,
        representation: Representation,
    ) -> Result<Bytes, ApiError> {
        match (self, representation) {
            (Self::Table(t), _) => t.list(&body),
            (Self::Converted(c), Representation::Object) => Ok(c.list(body)),
            _ => Ok(body),
        }
    }

    /// One object, stored as `obj`, written in `representation` as `body`.
    pub(crate) fn object(&self, obj: &Value, body: Bytes, representation: Representation) -> Bytes {
        match (self, representation) {
            (Self::Table(t), _) => Bytes::from(t.object(obj, true).to_string()),
            (Self::Converted(c), Representation::Object) => c.object(body),
            _ => body,
        }
    }

    /// A watch body whose events are in `representation`.
    pub(crate) fn watch(
        self,
        rx: mpsc::Receiver<Chunk>,
        representation: Representation,
    ) -> mpsc::Receiver<Chunk> {
        match (self, representation) {
            (Self::Table(t), _) => t.watch(rx),
            (Self::Converted(c), Representation::Object) => c.watch(rx),
            _ => rx,
        }
    }
}

/// The Table's `apiVersion` when `accept` asks for a Table before anything else the server
/// produces (`None`: let [`crate::representation::negotiate`] decide).
pub(crate) fn requested(accept: &str) -> Option<&'static str> {
    for range in crate::representation::json_ranges(accept) {
        let Some(range) = range.filter(|r| r.json) else {
            continue;
        };
        let (as_kind, g, v) = (
            range.as_kind.unwrap_or(""),
            range.group.unwrap_or(""),
            range.version.unwrap_or(""),
        );
        match (as_kind, g, v) {
            ("Table", "meta.k8s.io", "v1") => return Some("meta.k8s.io/v1"),
            ("Table", "meta.k8s.io", "v1beta1") => return Some("meta.k8s.io/v1beta1"),
            ("Table", _, _) => continue,
            // Anything else servable (objects, metadata) comes first: not a Table.
            _ => return None,
        }
    }
    None
}

impl TableView {
    /// The view for `def` (with its CRD's `columns` if it is a custom resource), `includeObject`
    /// read from the request's query (400 for an unknown value, as kube-apiserver answers).
    pub(crate) fn new(
        api_version: &'static str,
        def: &ResourceDef,
        columns: Option<&[Column]>,
        query: Option<&str>,
    ) -> Result<Self, ApiError> {
        let mut include = Include::Metadata;
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            if k == "includeObject" {
                include = match v.as_ref() {
                    "None" => Include::None,
                    "Metadata" | "" => Include::Metadata,
                    "Object" => Include::Object,
                    other => {
                        return Err(ApiError::bad_request(format!(
                            "Unable to convert to Table as requested: includeObject: Invalid value: {other:?}: must be 'Metadata', 'Object', 'None', or empty"
                        )))
                    }
                };
            }
        }
        let custom = columns.map(|c| {
            if c.is_empty() {
                vec![Column {
                    name: "Age".into(),
                    type_: "date".into(),
                    format: String::new(),
                    description: CREATION_DOC.into(),
                    priority: 0,
                    json_path: ".metadata.creationTimestamp".into(),
                }]
            } else {
                c.to_vec()
            }
        });
        Ok(Self {
            api_version,
            include,
            kind: def.kind.clone(),
            object_api_version: def.api_version(),
            custom,
        })
    }

    fn definitions(&self) -> Value {
        let mut defs = vec![json!({"name": "Name", "type": "string", "format": "name",
            "description": NAME_DOC, "priority": 0})];
        match &self.custom {
            Some(cols) => {
                for c in cols {
                    defs.push(json!({"name": c.name, "type": c.type_, "format": c.format,
                        "description": c.description, "priority": c.priority}));
                }
            }
            None => {
                // Built-in kinds have their own columns, Name among them.
                defs.clear();
                for (name, ty, priority, desc) in builtin_columns(&self.kind) {
                    let format = if name == "Name" { "name" } else { "" };
                    let desc = match name {
                        "Name" => NAME_DOC,
                        "Age" | "Created At" => CREATION_DOC,
                        _ => desc,
                    };
                    defs.push(json!({"name": name, "type": ty, "format": format,
                        "description": desc, "priority": priority}));
                }
            }
        }
        Value::Array(defs)
    }

    fn row(&self, obj: &Value, now: i64) -> Value {
        let name = obj.pointer("/metadata/name").cloned().unwrap_or(json!(""));
        let mut cells = vec![name];
        match &self.custom {
            Some(cols) => {
                for c in cols {
                    cells.push(cell(&c.type_, lookup(obj, &c.json_path), now));
                }
            }
            None => cells = builtin_cells(&self.kind, obj, now),
        }
        let mut row = json!({"cells": cells});
        match self.include {
            // kube-apiserver writes the row's object as null.
            Include::None => row["object"] = Value::Null,
            Include::Metadata => {
                row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": self.api_version,
                    "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))});
            }
            Include::Object => {
                let mut o = obj.clone();
                if let Some(m) = o.as_object_mut() {
                    m.entry("kind").or_insert_with(|| json!(self.kind));
                    m.entry("apiVersion")
                        .or_insert_with(|| json!(self.object_api_version));
                }
                row["object"] = o;
            }
        }
        row
    }

    fn table(&self, metadata: Value, rows: Vec<Value>, headers: bool) -> Value {
        let columns = if headers {
            self.definitions()
        } else {
            Value::Null
        };
        json!({"kind": "Table", "apiVersion": self.api_version, "metadata": metadata,
            "columnDefinitions": columns, "rows": rows})
    }

    /// The Table of a list body (a `…List` as the list handler wrote it).
    pub(crate) fn list(&self, body: &[u8]) -> Result<Bytes, ApiError> {
        let list: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::internal(&format!("list not readable as JSON: {e}")))?;
        let now = now_secs();
        let rows = list
            .get("items")
            .and_then(Value::as_array)
            .map(|items| items.iter().map(|o| self.row(o, now)).collect())
            .unwrap_or_default();
        let mut meta = Map::new();
        for k in ["resourceVersion", "continue", "remainingItemCount"] {
            // An empty continue (a custom resource's list writes one) is left out, as
            // kube-apiserver's Table writes it.
            match list.pointer(&format!("/metadata/{k}")) {
                Some(Value::String(s)) if s.is_empty() => {}
                Some(v) => {
                    meta.insert(k.into(), v.clone());
                }
                None => {}
            }
        }
        Ok(Bytes::from(
            self.table(Value::Object(meta), rows, true).to_string(),
        ))
    }

    /// The Table of one object.
    pub(crate) fn object(&self, obj: &Value, headers: bool) -> Value {
        let mut meta = Map::new();
        if let Some(rv) = obj.pointer("/metadata/resourceVersion") {
            meta.insert("resourceVersion".into(), rv.clone());
        }
        self.table(
            Value::Object(meta),
            vec![self.row(obj, now_secs())],
            headers,
        )
    }

    /// A watch body whose events carry Tables instead of objects (ERROR and BOOKMARK events
    /// pass as they are).
    pub(crate) fn watch(self, rx: mpsc::Receiver<Chunk>) -> mpsc::Receiver<Chunk> {
        let mut headers = true;
        map_watch_lines(rx, move |line| self.event(line, &mut headers))
    }

    fn event(&self, line: &[u8], headers: &mut bool) -> Bytes {
        let Ok(mut ev) = serde_json::from_slice::<Value>(line) else {
            return Bytes::copy_from_slice(line);
        };
        let ty = ev.get("type").and_then(Value::as_str).unwrap_or("");
        if !matches!(ty, "ADDED" | "MODIFIED" | "DELETED") {
            return Bytes::copy_from_slice(line);
        }
        let table = self.object(&ev["object"], *headers);
        *headers = false;
        ev["object"] = table;
        let mut s = ev.to_string();
        s.push('\n');
        Bytes::from(s)
    }
}

/// The kind kube-apiserver prints with its default columns, `Name` and `Created At` (the
/// timestamp itself), rather than an age.
const CREATED_AT_KIND: &str = "CustomResourceDefinition";

const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const CREATION_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// A built-in kind's columns: name, type, priority (0: shown by default; 1: `-o wide`),
/// description (Name's and the ages' are filled in by the caller), as kube-apiserver prints them.
fn builtin_columns(kind: &str) -> Vec<(&'static str, &'static str, i64, &'static str)> {
    const NAME: (&str, &str, i64, &str) = ("Name", "string", 0, "");
    const AGE: (&str, &str, i64, &str) = ("Age", "string", 0, "");
    match kind {
        "Pod" => vec![
            NAME,
            ("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
            ("Status", "string", 0, "The aggregate status of the containers in this pod."),
            ("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
            AGE,
            ("IP", "string", 1, "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
            ("Node", "string", 1, "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename"),
            ("Nominated Node", "string", 1, "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled."),
            ("Readiness Gates", "string", 1, "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"),
        ],
        "ConfigMap" => vec![NAME, ("Data", "string", 0, "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process."), AGE],
        "Namespace" => vec![NAME, ("Status", "string", 0, "The status of the namespace"), AGE],
        "Deployment" => vec![
            NAME,
            ("Ready", "string", 0, "Number of the pod with ready state"),
            ("Up-to-date", "string", 0, "Total number of non-terminating pods targeted by this deployment that have the desired template spec."),
            ("Available", "string", 0, "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment."),
            AGE,
            ("Containers", "string", 1, "Names of each container in the template."),
            ("Images", "string", 1, "Images referenced by each container in the template."),
            ("Selector", "string", 1, "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels."),
        ],
        "Lease" => vec![NAME, ("Holder", "string", 0, "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field."), AGE],
        "Event" => vec![
            ("Last Seen", "string", 0, "Time when last this event was observed."),
            ("Type", "string", 0, "Type of this event (Normal, Warning), new types could be added in the future."),
            ("Reason", "string", 0, "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
            ("Object", "string", 0, "The object that this event is about."),
            ("Subobject", "string", 1, "The subobject that this event is about."),
            ("Source", "string", 1, "The component reporting this event. Should be a short machine understandable string."),
            ("Message", "string", 0, "A human-readable description of the status of this operation."),
            ("First Seen", "string", 1, "The time at which the event was first recorded."),
            ("Count", "string", 1, "The number of times this event has occurred."),
            ("Name", "string", 1, ""),
        ],
        CREATED_AT_KIND => vec![NAME, ("Created At", "date", 0, "")],
        _ => vec![NAME, AGE],
    }
}

/// The cells of [`builtin_columns`] for `o`.
fn builtin_cells(kind: &str, o: &Value, now: i64) -> Vec<Value> {
    let text = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or("");
    let or_none = |p: &str| match text(p) {
        "" => json!("<none>"),
        t => json!(t),
    };
    let name = o.pointer("/metadata/name").cloned().unwrap_or(json!(""));
    let created = o.pointer("/metadata/creationTimestamp");
    let age_cell = json!(age(created, now));
    match kind {
        "Pod" => pod_cells(o, name, age_cell),
        "ConfigMap" => {
            let n = ["data", "binaryData"]
                .iter()
                .filter_map(|k| o.get(*k).and_then(Value::as_object))
                .map(Map::len)
                .sum::<usize>();
            vec![name, json!(n), age_cell]
        }
        "Namespace" => vec![
            name,
            o.pointer("/status/phase")
                .cloned()
                .unwrap_or(json!("Active")),
            age_cell,
        ],
        "Deployment" => deployment_cells(o, name, age_cell),
        "Lease" => vec![name, or_none("/spec/holderIdentity"), age_cell],
        "Event" => event_cells(o, name, now),
        CREATED_AT_KIND => vec![name, created.cloned().unwrap_or(Value::Null)],
        _ => vec![name, age_cell],
    }
}

/// A pod's cells: ready containers, status (as kubectl words it), restarts, age, IPs and nodes.
fn pod_cells(o: &Value, name: Value, age_cell: Value) -> Vec<Value> {
    let text = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or("");
    let or_none = |p: &str| match text(p) {
        "" => json!("<none>"),
        t => json!(t),
    };
    let statuses = o
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let total = o
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = statuses
        .iter()
        .filter(|s| s.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|s| s.get("restartCount").and_then(Value::as_i64))
        .sum();
    let status = match (text("/metadata/deletionTimestamp"), text("/status/reason")) {
        ("", "") => match text("/status/phase") {
            "" => "Unknown",
            p => p,
        },
        ("", reason) => reason,
        _ => "Terminating",
    };
    vec![
        name,
        json!(format!("{ready}/{total}")),
        json!(status),
        json!(restarts.to_string()),
        age_cell,
        or_none("/status/podIP"),
        or_none("/spec/nodeName"),
        or_none("/status/nominatedNodeName"),
        json!("<none>"),
    ]
}

/// A deployment's cells: ready, up-to-date and available replicas, age, containers, images
/// and selector.
fn deployment_cells(o: &Value, name: Value, age_cell: Value) -> Vec<Value> {
    let int = |p: &str| o.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let containers = o
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let join = |k: &str| {
        containers
            .iter()
            .filter_map(|c| c.get(k).and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(",")
    };
    let selector = o
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    vec![
        name,
        json!(format!(
            "{}/{}",
            int("/status/readyReplicas"),
            int("/spec/replicas")
        )),
        json!(int("/status/updatedReplicas")),
        json!(int("/status/availableReplicas")),
        age_cell,
        json!(join("name")),
        json!(join("image")),
        json!(selector),
    ]
}

/// An event's cells, from core/v1's fields or events.k8s.io/v1's: last seen, type, reason,
/// object, subobject, source, message, first seen, count and name.
fn event_cells(o: &Value, name: Value, now: i64) -> Vec<Value> {
    let text = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or("");
    // core/v1 fields first, then events.k8s.io/v1's.
    let first = |ps: &[&str]| ps.iter().map(|p| text(p)).find(|t| !t.is_empty());
    let stamp = |ps: &[&str]| match first(ps) {
        Some(t) => json!(age(Some(&json!(t)), now)),
        None => json!("<unknown>"),
    };
    let (okind, oname) = match o.get("involvedObject").or_else(|| o.get("regarding")) {
        Some(r) => (
            r.get("kind").and_then(Value::as_str).unwrap_or(""),
            r.get("name").and_then(Value::as_str).unwrap_or(""),
        ),
        None => ("", ""),
    };
    let count = o
        .get("count")
        .or_else(|| o.pointer("/series/count"))
        .or_else(|| o.get("deprecatedCount"))
        .and_then(Value::as_i64)
        .unwrap_or(1);
    vec![
        stamp(&[
            "/lastTimestamp",
            "/series/lastObservedTime",
            "/deprecatedLastTimestamp",
            "/eventTime",
            "/metadata/creationTimestamp",
        ]),
        json!(text("/type")),
        json!(text("/reason")),
        json!(format!("{}/{oname}", okind.to_lowercase())),
        json!(first(&["/involvedObject/fieldPath", "/regarding/fieldPath"]).unwrap_or("")),
        json!(first(&[
            "/source/component",
            "/reportingController",
            "/deprecatedSource/component"
        ])
        .unwrap_or("")),
        json!(first(&["/message", "/note"]).unwrap_or("")),
        stamp(&[
            "/firstTimestamp",
            "/deprecatedFirstTimestamp",
            "/eventTime",
            "/metadata/creationTimestamp",
        ]),
        json!(count.to_string()),
        name,
    ]
}

/// The value at a simple JSONPath (`.a.b`, `.a[0].b`, `.a['x.y']` not supported).
fn lookup<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut at = obj;
    for seg in path.trim_start_matches('.').split('.') {
        if seg.is_empty() {
            continue;
        }
        let (key, mut rest) = match seg.find('[') {
            Some(i) => (&seg[..i], &seg[i..]),
            None => (seg, ""),
        };
        if !key.is_empty() {
            at = at.get(key)?;
        }
        while let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let idx: usize = r[..end].parse().ok()?;
            at = at.get(idx)?;
            rest = &r[end + 1..];
        }
    }
    Some(at)
}

/// A cell as kube-apiserver's CRD printer makes it from a value of the column's type (null
/// when absent or of another type; kubectl prints `<none>`).
fn cell(ty: &str, v: Option<&Value>, now: i64) -> Value {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Value::Null;
    };
    match ty {
        "integer" => v
            .as_i64()
            .or_else(|| v.as_f64().map(|f| f as i64))
            .map_or(Value::Null, Value::from),
        "number" => v.as_f64().map_or(Value::Null, Value::from),
        "boolean" => v.as_bool().map_or(Value::Null, Value::from),
        "date" => match v.as_str() {
            Some(_) => json!(age(Some(v), now)),
            None => Value::Null,
        },
        _ => match v {
            Value::String(s) => json!(s),
            other => json!(other.to_string()),
        },
    }
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Seconds since the epoch of an RFC 3339 time (`2024-01-02T03:04:05Z`), a fraction dropped.
fn parse_rfc3339(s: &str) -> Option<i64> {
    crate::protobuf::time::parse_rfc3339(s).map(|(seconds, _)| seconds)
}

/// kubectl's AGE of a creation timestamp (`<unknown>` without one).
fn age(ts: Option<&Value>, now: i64) -> String {
    match ts.and_then(Value::as_str).and_then(parse_rfc3339) {
        Some(t) => human_duration(now - t),
        None => "<unknown>".into(),
    }
}

/// Kubernetes' short human duration (`42s`, `5m3s`, `17m`, `3h10m`, `2d4h`, `400d`, `3y2d`).
pub(crate) fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    let (minutes, hours) = (secs / 60, secs / 3600);
    let days = hours / 24;
    if secs < 120 {
        format!("{secs}s")
    } else if minutes < 10 {
        match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        }
    } else if minutes < 180 {
        format!("{minutes}m")
    } else if hours < 8 {
        match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        }
    } else if days < 365 * 2 {
        format!("{days}d")
    } else if days < 365 * 8 {
        match days % 365 {
            0 => format!("{}y", days / 365),
            d => format!("{}y{d}d", days / 365),
        }
    } else {
        format!("{}y", days / 365)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_asked_for_only_before_any_other_servable_range() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(requested(kubectl), Some("meta.k8s.io/v1"));
        assert_eq!(
            requested("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
            Some("meta.k8s.io/v1beta1")
        );
        assert_eq!(requested("application/json"), None);
        assert_eq!(
            requested("application/json,application/json;as=Table;v=v1;g=meta.k8s.io"),
            None
        );
        assert_eq!(
            requested("application/json;as=Table;v=v9;g=meta.k8s.io,application/json"),
            None
        );
    }

    #[test]
    fn durations_read_as_kubectl_prints_them() {
        for (s, want) in [
            (5, "5s"),
            (119, "119s"),
            (303, "5m3s"),
            (600, "10m"),
            (3 * 3600 + 600, "3h10m"),
            (30 * 3600, "30h"),
            (52 * 3600, "2d4h"),
            (400 * 86400, "400d"),
            (3 * 365 * 86400 + 2 * 86400, "3y2d"),
            (-5, "<invalid>"),
        ] {
            assert_eq!(human_duration(s), want, "{s}");
        }
        assert_eq!(parse_rfc3339("1970-01-02T00:00:01Z"), Some(86_401));
        assert_eq!(parse_rfc3339("2024-03-01T00:00:00Z"), Some(1_709_251_200));
        assert_eq!(parse_rfc3339("garbage"), None);
    }

    #[test]
    fn printer_columns_read_simple_json_paths_and_type_their_cells() {
        let o = json!({"metadata": {"name": "w"}, "spec": {"size": 3, "list": [{"n": "a"}], "flag": true}});
        assert_eq!(lookup(&o, ".spec.size"), Some(&json!(3)));
        assert_eq!(lookup(&o, ".spec.list[0].n"), Some(&json!("a")));
        assert_eq!(lookup(&o, ".spec.none"), None);
        assert_eq!(cell("integer", lookup(&o, ".spec.size"), 0), json!(3));
        assert_eq!(cell("string", lookup(&o, ".spec.size"), 0), json!("3"));
        assert_eq!(cell("boolean", lookup(&o, ".spec.flag"), 0), json!(true));
        assert_eq!(cell("integer", lookup(&o, ".spec.flag"), 0), Value::Null);
        assert_eq!(cell("string", None, 0), Value::Null);
    }
}
