//! Writes over HTTP: create, update, the four patch types, delete, delete collection, the
//! `status` and `scale` subresources and dry run, with kube-apiserver's validation and errors.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{json, Value};

use crate::apply::{self, ApplyScope};
use crate::body::SimBody;
use crate::faults::RequestKind;
use crate::metrics::Counters;
use crate::params::{parse_bool, ListParams};
use crate::patch::{apply_json_patch, JsonPatchError};
use crate::resource_path::ResourcePath;
use crate::resources::ResourceDef;
use crate::response::{json_response, value_response};
use crate::shared::Shared;
use crate::status::ApiError;
use crate::storage::{key_of, Obj, Preconditions, Storage, WriteOptions, WriteScope};

/// Attempts of a read-modify-write (patch, apply, scale) racing other writers before the
/// Conflict is given to the client (kube-apiserver retries patches internally too).
const RMW_ATTEMPTS: usize = 64;

/// The write options of a request's query.
#[derive(Debug, Default)]
struct WriteQuery {
    dry_run: bool,
    field_manager: Option<String>,
    force: Option<bool>,
    propagation_policy: Option<String>,
    grace_period: Option<String>,
}

fn unsupported_dry_run(options_kind: &str, values: &[String]) -> ApiError {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    ApiError::invalid_options(
        options_kind,
        "dryRun",
        "FieldValueNotSupported",
        &format!(
            "Unsupported value: [{}]: supported values: \"All\"",
            quoted.join(", ")
        ),
    )
}

fn parse_query(query: Option<&str>, options_kind: &str) -> Result<WriteQuery, ApiError> {
    let mut q = WriteQuery::default();
    let mut dry = Vec::new();
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match k.as_ref() {
            "dryRun" => dry.push(v.to_string()),
            "fieldManager" => q.field_manager = Some(v.to_string()).filter(|s| !s.is_empty()),
            "force" => q.force = Some(parse_bool("force", &v)?),
            "propagationPolicy" => q.propagation_policy = Some(v.to_string()),
            "gracePeriodSeconds" => q.grace_period = Some(v.to_string()),
            "fieldValidation" if !matches!(v.as_ref(), "" | "Ignore" | "Strict" | "Warn") => {
                return Err(ApiError::invalid_options(
                    options_kind,
                    "fieldValidation",
                    "FieldValueNotSupported",
                    &format!("Unsupported value: {v:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""),
                ));
            }
            _ => {}
        }
    }
    if dry.iter().any(|d| d != "All") {
        return Err(unsupported_dry_run(options_kind, &dry));
    }
    q.dry_run = !dry.is_empty();
    Ok(q)
}

async fn read_body(req: Request<Incoming>) -> Result<(Option<String>, Bytes), ApiError> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.split(';').next().unwrap_or("").trim().to_string());
    let body = req
        .into_body()
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("reading request body: {e}")))?
        .to_bytes();
    Ok((ct, body))
}

/// The media types a create or update body may be in, as kube-apiserver lists them.
const OBJECT_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// The body of a request that is not protobuf, decoded by its content type, with
/// kube-apiserver's errors: Go's JSON messages, a 415 for a media type the method does not
/// take.
fn decode_text(
    method: &Method,
    content_type: Option<&str>,
    raw: &[u8],
    def: &ResourceDef,
) -> Result<Value, ApiError> {
    let blank = raw.iter().all(u8::is_ascii_whitespace);
    match *method {
        Method::DELETE => {
            if blank {
                return Ok(Value::Null);
            }
            json(raw).map_err(|m| ApiError::bad_request(format!("error decoding body: {m}")))
        }
        Method::PATCH => match content_type.unwrap_or("") {
            "application/apply-patch+yaml" => yaml(raw).map_err(|m| {
                ApiError::bad_request(format!(
                    "error decoding YAML: error converting YAML to JSON: {m}"
                ))
            }),
            "application/merge-patch+json" | "application/json-patch+json" => {
                json(raw).map_err(|m| ApiError::bad_request(format!("error decoding patch: {m}")))
            }
            "application/strategic-merge-patch+json" => json(raw).map_err(ApiError::bad_request),
            _ => Err(ApiError::unsupported_patch_media_type()),
        },
        _ => {
            let decoded = match content_type.unwrap_or("application/json") {
                "application/json" => json(raw),
                "application/yaml" => yaml(raw),
                _ => {
                    return Err(ApiError::unsupported_media_type_of(OBJECT_MEDIA_TYPES));
                }
            };
            decoded.map_err(|m| {
                ApiError::bad_request(format!(
                    "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {m} ({})",
                    def.kind,
                    quoted_body(raw)
                ))
            })
        }
    }
}

/// A JSON body, or Go's message for why it is not JSON.
fn json(raw: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(raw)
        .map_err(|e| crate::go_json::syntax_error(raw).unwrap_or_else(|| e.to_string()))
}

/// A YAML body (JSON is YAML), or the parser's message.
fn yaml(raw: &[u8]) -> Result<Value, String> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Err("empty document".into());
    }
    serde_saphyr::from_slice::<Value>(raw).map_err(|e| e.to_string())
}

/// The body as kube-apiserver quotes it in a decoding error: `<empty>`, or its first 1 KiB.
fn quoted_body(raw: &[u8]) -> String {
    const SHOWN: usize = 1024;
    if raw.is_empty() {
        return "<empty>".into();
    }
    let text = String::from_utf8_lossy(&raw[..raw.len().min(SHOWN)]).into_owned();
    if raw.len() > SHOWN {
        format!("{text}...")
    } else {
        text
    }
}

fn respond(shared: &Shared, code: StatusCode, o: &Obj) -> Response<SimBody> {
    json_response(shared, code, o.json.clone())
}

/// What a write request sent: its options, and its body as read and as decoded.
struct Sent {
    q: WriteQuery,
    /// The body's media type, without parameters.
    content_type: Option<String>,
    raw: Bytes,
    body: Value,
    opts: WriteOptions,
}

/// A POST, PUT, PATCH or DELETE on a resource path (after authorization).
pub(crate) async fn write_request(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
    rp: ResourcePath,
    query: Option<String>,
) -> Result<Response<SimBody>, ApiError> {
    let method = req.method().clone();
    Counters::inc(&shared.counters.writes);
    if let Some(e) = shared.faults.take_failure(RequestKind::Write) {
        return Err(e);
    }
    let def = &rp.def;
    if def.namespaced && rp.ns.is_none() {
        return Err(ApiError::path_not_found());
    }
    let ns = rp.ns.as_deref().unwrap_or("");
    let sent = read_sent(shared, req, &rp, query.as_deref()).await?;
    if shared.faults.take_conflict() {
        let name = rp
            .name
            .clone()
            .or_else(|| {
                sent.body
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default();
        return Err(ApiError::update_conflict(&def.plural, &def.group, &name));
    }
    let sub = rp.sub.as_deref();
    match (&method, rp.name.as_deref()) {
        (&Method::POST, None) => create(shared, &rp, ns, sent),
        (&Method::PUT, Some(name)) if sub == Some("scale") => put_scale(shared, &rp, name, sent),
        (&Method::PUT, Some(name)) => update(shared, &rp, ns, name, sent),
        (&Method::PATCH, Some(name)) => patch(shared, &rp, name, sent),
        (&Method::DELETE, Some(name)) => delete(shared, &rp, ns, name, &sent),
        (&Method::DELETE, None) => delete_collection(shared, &rp, ns, &sent, query.as_deref()),
        _ => Err(ApiError::method_not_allowed(method.as_str())),
    }
}

/// The options and body of a write request, decoded from protobuf or text.
async fn read_sent(
    shared: &Shared,
    req: Request<Incoming>,
    rp: &ResourcePath,
    query: Option<&str>,
) -> Result<Sent, ApiError> {
    let method = req.method().clone();
    let options_kind = match method {
        Method::POST => "CreateOptions",
        Method::PUT => "UpdateOptions",
        Method::PATCH => "PatchOptions",
        _ => "DeleteOptions",
    };
    let q = parse_query(query, options_kind)?;
    let (content_type, raw) = read_body(req).await?;
    let body = match crate::protobuf::serve::decode_body(
        content_type.as_deref(),
        &raw,
        &rp.def,
        &method,
        shared.speaks_protobuf(),
    ) {
        Some(decoded) => decoded?,
        None => decode_text(&method, content_type.as_deref(), &raw, &rp.def)?,
    };
    let scope = match rp.sub.as_deref() {
        Some("status") => WriteScope::Status,
        _ => WriteScope::Main,
    };
    let opts = WriteOptions {
        dry_run: q.dry_run,
        scope,
    };
    Ok(Sent {
        q,
        content_type,
        raw,
        body,
        opts,
    })
}

/// A POST: the object created.
fn create(
    shared: &Shared,
    rp: &ResourcePath,
    ns: &str,
    sent: Sent,
) -> Result<Response<SimBody>, ApiError> {
    let def = &rp.def;
    if def.namespaced {
        shared.check_namespace(ns)?;
    }
    if let Some(bns) = sent
        .body
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        if def.namespaced && !bns.is_empty() && bns != ns {
            return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
        }
    }
    let mut body = sent.body;
    crate::defaults::apply(def, &mut body);
    let o = shared
        .storage
        .create_with(rp.idx, def, ns, body, sent.opts)?;
    Ok(respond(shared, StatusCode::CREATED, &o))
}

/// A PUT of a scale: the parent's replicas set, its new Scale answered.
fn put_scale(
    shared: &Shared,
    rp: &ResourcePath,
    name: &str,
    sent: Sent,
) -> Result<Response<SimBody>, ApiError> {
    let def = &rp.def;
    let scale = sent.body;
    check_scale(&scale)?;
    let replicas = replicas_of(name, &scale)?;
    let rv = scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let o = read_modify_write(&shared.storage, rp, name, sent.opts, |cur| {
        let mut v = set_replicas(def, cur, replicas);
        if let Some(rv) = &rv {
            v["metadata"]["resourceVersion"] = json!(rv);
        }
        Ok(v)
    })?;
    Ok(value_response(
        shared,
        StatusCode::OK,
        &scale_of(def, &o.value),
    ))
}

/// A PUT of an object (or of its status).
fn update(
    shared: &Shared,
    rp: &ResourcePath,
    ns: &str,
    name: &str,
    sent: Sent,
) -> Result<Response<SimBody>, ApiError> {
    let def = &rp.def;
    let unconditional = sent
        .body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    if unconditional && !def.is_core() {
        // Custom resources, unlike most built-in kinds, refuse an update that does not
        // say which version it replaces.
        return Err(ApiError::invalid(
            &def.plural,
            &def.group,
            name,
            "metadata.resourceVersion",
            "FieldValueInvalid",
            "Invalid value: 0: must be specified for an update",
        ));
    }
    let mut body = sent.body;
    crate::defaults::apply(def, &mut body);
    let o = shared
        .storage
        .update_with(rp.idx, def, ns, name, body, sent.opts)?;
    Ok(respond(shared, StatusCode::OK, &o))
}

/// A PATCH of an object, its status or its scale: server-side apply, or a patch by its
/// media type.
fn patch(
    shared: &Arc<Shared>,
    rp: &ResourcePath,
    name: &str,
    sent: Sent,
) -> Result<Response<SimBody>, ApiError> {
    let def = &rp.def;
    let sub = rp.sub.as_deref();
    let storage = &shared.storage;
    let ct = sent.content_type.clone().unwrap_or_default();
    if ct == "application/apply-patch+yaml" {
        return server_side_apply(shared, rp, name, sent);
    }
    if sent.q.force.is_some() {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            "force",
            "FieldValueForbidden",
            "Forbidden: may not be specified for non-apply patch",
        ));
    }
    let body = &sent.body;
    let patch = |v: &mut Value| patch_value(def, sub, &ct, body, v);
    if sub == Some("scale") {
        let o = read_modify_write(storage, rp, name, sent.opts, |cur| {
            let mut scale = scale_of(def, cur);
            patch(&mut scale)?;
            check_scale(&scale)?;
            let replicas = replicas_of(name, &scale)?;
            let mut v = set_replicas(def, cur, replicas);
            v["metadata"]["resourceVersion"] = scale["metadata"]["resourceVersion"].clone();
            Ok(v)
        })?;
        return Ok(value_response(
            shared,
            StatusCode::OK,
            &scale_of(def, &o.value),
        ));
    }
    let o = read_modify_write(storage, rp, name, sent.opts, |cur| {
        let mut v = cur.clone();
        patch(&mut v)?;
        let patched = v.pointer("/metadata/name").and_then(Value::as_str);
        if patched != Some(name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                patched.unwrap_or("")
            )));
        }
        Ok(v)
    })?;
    Ok(respond(shared, StatusCode::OK, &o))
}

/// `v` patched by `body`, a patch of media type `ct` (other than server-side apply).
fn patch_value(
    def: &ResourceDef,
    sub: Option<&str>,
    ct: &str,
    body: &Value,
    v: &mut Value,
) -> Result<(), ApiError> {
    match ct {
        "application/strategic-merge-patch+json" => crate::smp::patch_resource(def, sub, v, body),
        "application/merge-patch+json" => {
            if !body.is_object() {
                return Err(ApiError::bad_request(format!(
                    "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                    crate::go_json::type_name(body)
                )));
            }
            json_patch::merge(v, body);
            Ok(())
        }
        "application/json-patch+json" => apply_json_patch(v, body).map_err(|e| match e {
            JsonPatchError::Malformed(m) => ApiError::bad_request(m),
            JsonPatchError::Unapplicable(m) => ApiError::unprocessable(m),
        }),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// A DELETE of one object: a success `Status`, or the object (see [`crate::deletion`]).
fn delete(
    shared: &Shared,
    rp: &ResourcePath,
    ns: &str,
    name: &str,
    sent: &Sent,
) -> Result<Response<SimBody>, ApiError> {
    let storage = &shared.storage;
    let (pre, dry_run) = delete_options(&sent.body, &sent.q)?;
    let o = storage.delete_with(rp.idx, &rp.def, ns, name, &pre, dry_run)?;
    match crate::deletion::answer(&rp.def, &o.value, storage.revision()) {
        Some(status) => Ok(value_response(shared, StatusCode::OK, &status)),
        None => Ok(respond(shared, StatusCode::OK, &o)),
    }
}

/// A DELETE of a collection: what its selectors match in the namespace, answered as a list.
fn delete_collection(
    shared: &Shared,
    rp: &ResourcePath,
    ns: &str,
    sent: &Sent,
    query: Option<&str>,
) -> Result<Response<SimBody>, ApiError> {
    let def = &rp.def;
    let storage = &shared.storage;
    let (_, dry_run) = delete_options(&sent.body, &sent.q)?;
    let mut p = ListParams::parse_for(&def.kind, query)?;
    p.apply_shard_selector(shared.sharded_list_and_watch())?;
    let (rev, map) = storage.snapshot(rp.idx, None)?;
    let mut items = Vec::new();
    for o in map.values() {
        let ons = o
            .value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        if (def.namespaced && ons != ns) || !p.selectors.matches(&o.value) {
            continue;
        }
        let name = o
            .value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        match storage.delete_with(rp.idx, def, ons, name, &Preconditions::default(), dry_run) {
            Ok(d) => items.push(list_item(def, &d.value)),
            // Deleted meanwhile by someone else.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    // The revision of the list the deleted objects were found in, as kube-apiserver
    // answers a delete of a collection.
    let list = json!({
        "kind": def.list_kind(), "apiVersion": def.api_version(),
        "metadata": {"resourceVersion": rev.to_string()}, "items": items,
    });
    Ok(value_response(shared, StatusCode::OK, &list))
}

/// An object as an item of its kind's list: a built-in kind's carry no kind or apiVersion.
fn list_item(def: &ResourceDef, obj: &Value) -> Value {
    let mut item = obj.clone();
    if def.is_core() {
        if let Some(m) = item.as_object_mut() {
            m.remove("kind");
            m.remove("apiVersion");
        }
    }
    item
}

/// Preconditions and dry run of a DELETE, from its `DeleteOptions` body and query.
fn delete_options(body: &Value, q: &WriteQuery) -> Result<(Preconditions, bool), ApiError> {
    if !body.is_null() && !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of a DELETE must be a DeleteOptions object",
        ));
    }
    let policy = body
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| q.propagation_policy.clone());
    if let Some(p) = policy {
        if !matches!(p.as_str(), "Orphan" | "Background" | "Foreground") {
            return Err(ApiError::invalid_options(
                "DeleteOptions",
                "propagationPolicy",
                "FieldValueNotSupported",
                &format!("Unsupported value: {p:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""),
            ));
        }
    }
    match body.get("gracePeriodSeconds") {
        None | Some(Value::Null) => {}
        Some(v) if v.is_i64() => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "gracePeriodSeconds must be an integer, not {v}"
            )))
        }
    }
    if let Some(g) = &q.grace_period {
        if g.parse::<i64>().is_err() {
            return Err(ApiError::bad_request(format!(
                "strconv.ParseInt: parsing {g:?}: invalid syntax"
            )));
        }
    }
    let mut dry_run = q.dry_run;
    if let Some(d) = body.get("dryRun") {
        let values: Vec<String> = d
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| x.as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_else(|| vec![d.to_string()]);
        if values.iter().any(|v| v != "All") {
            return Err(unsupported_dry_run("DeleteOptions", &values));
        }
        dry_run |= !values.is_empty();
    }
    let s = |p: &str| body.pointer(p).and_then(Value::as_str).map(str::to_string);
    Ok((
        Preconditions {
            uid: s("/preconditions/uid"),
            resource_version: s("/preconditions/resourceVersion"),
        },
        dry_run,
    ))
}

/// Reads the object, computes the new one with `f` and writes it with the resourceVersion
/// read as precondition (unless `f` set one), retrying when another write got in between.
fn read_modify_write(
    storage: &Storage,
    rp: &ResourcePath,
    name: &str,
    opts: WriteOptions,
    f: impl Fn(&Value) -> Result<Value, ApiError>,
) -> Result<Arc<Obj>, ApiError> {
    let def = &rp.def;
    let ns = rp.ns.as_deref().unwrap_or("");
    let mut attempt = 0;
    loop {
        attempt += 1;
        let cur = storage
            .get(rp.idx, &key_of(ns, name))
            .ok_or_else(|| ApiError::not_found(&def.plural, &def.group, name))?;
        let mut v = f(&cur.value)?;
        if !v.is_object() {
            return Err(ApiError::bad_request(format!(
                "the patched object is not an object (must be of type {})",
                def.kind
            )));
        }
        crate::defaults::apply(def, &mut v);
        // A resourceVersion other than the one read was asked for: a precondition, never
        // retried. The one read (carried over from the object, or asked for and still
        // current) only guards against a write in between, after which the change is
        // computed again on the newer object.
        let current = cur.rv().to_string();
        let explicit = v
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty() && *s != current);
        if !explicit {
            if !v.get("metadata").is_some_and(Value::is_object) {
                v["metadata"] = json!({});
            }
            v["metadata"]["resourceVersion"] = json!(current);
        }
        match storage.update_with(rp.idx, def, ns, name, v, opts) {
            Err(e) if e.code == 409 && !explicit && attempt < RMW_ATTEMPTS => continue,
            r => return r,
        }
    }
}

/// Server-side apply (see [`crate::apply`]).
fn server_side_apply(
    shared: &Arc<Shared>,
    rp: &ResourcePath,
    name: &str,
    sent: Sent,
) -> Result<Response<SimBody>, ApiError> {
    let def = &rp.def;
    let ns = rp.ns.as_deref().unwrap_or("");
    let (q, opts, applied) = (&sent.q, sent.opts, &sent.body);
    let Some(manager) = q.field_manager.as_deref() else {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            "fieldManager",
            "FieldValueRequired",
            "Required value: is required for apply patch",
        ));
    };
    let scope = apply_scope(rp, name, &sent.raw, applied)?;
    let force = q.force.unwrap_or(false);
    let storage = &shared.storage;
    let key = key_of(ns, name);
    for _ in 0..RMW_ATTEMPTS {
        let Some(cur) = storage.get(rp.idx, &key) else {
            if scope == ApplyScope::Status {
                return Err(ApiError::not_found(&def.plural, &def.group, name));
            }
            if def.namespaced {
                shared.check_namespace(ns)?;
            }
            let mut obj = apply::apply(None, applied, manager, force, scope, &def.api_version())?;
            obj["metadata"]["name"] = json!(name);
            crate::defaults::apply(def, &mut obj);
            match storage.create_with(rp.idx, def, ns, obj, opts) {
                Err(e) if e.code == 409 => continue,
                r => return Ok(respond(shared, StatusCode::CREATED, &*r?)),
            }
        };
        // A resourceVersion in the applied configuration is a precondition on an existing
        // object, as in any update (kube-apiserver 1.36 answers 409); on a create it is ignored.
        if let Some(wanted) = applied
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|rv| !rv.is_empty())
        {
            if wanted.parse::<u64>().ok() != Some(cur.rv()) {
                return Err(ApiError::conflict(&def.plural, &def.group, name));
            }
        }
        let mut obj = apply::apply(
            Some(&cur.value),
            applied,
            manager,
            force,
            scope,
            &def.api_version(),
        )?;
        obj["metadata"]["resourceVersion"] = json!(cur.rv().to_string());
        crate::defaults::apply(def, &mut obj);
        match storage.update_with(rp.idx, def, ns, name, obj, opts) {
            Err(e) if e.code == 409 || e.code == 404 => continue,
            r => return Ok(respond(shared, StatusCode::OK, &*r?)),
        }
    }
    Err(ApiError::conflict(&def.plural, &def.group, name))
}

/// What an apply of `applied` (sent as `raw`) to the object `name` of `rp` may change, or why
/// the applied configuration is refused.
fn apply_scope(
    rp: &ResourcePath,
    name: &str,
    raw: &[u8],
    applied: &Value,
) -> Result<ApplyScope, ApiError> {
    let def = &rp.def;
    if !applied.is_object() {
        let what = if raw.is_empty() {
            "empty"
        } else {
            "not a JSON object"
        };
        return Err(ApiError::bad_request(format!(
            "the applied configuration is {what} (this server reads apply bodies as JSON)"
        )));
    }
    let kind = applied.get("kind").and_then(Value::as_str).unwrap_or("");
    let av = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let scope = match rp.sub.as_deref() {
        Some("status") => ApplyScope::Status,
        Some(_) => {
            return Err(ApiError::unsupported_media_type(
                "application/apply-patch+yaml",
            ))
        }
        None => ApplyScope::Main {
            skip_status: def.status_subresource,
        },
    };
    if kind.is_empty() || av.is_empty() {
        let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
        return Err(ApiError::bad_request(format!(
            "invalid object type: {group}/{version}, Kind={kind}"
        )));
    }
    if kind != def.kind || av != def.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({}), or the kind ({kind}) is not {}",
            def.api_version(),
            def.kind
        )));
    }
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    if let Some(n) = applied.pointer("/metadata/name").and_then(Value::as_str) {
        if n != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
    }
    Ok(scope)
}

/// The `autoscaling/v1` `Scale` of an object of a resource with a scale subresource.
pub(crate) fn scale_of(def: &ResourceDef, obj: &Value) -> Value {
    let sd = def.scale.clone().unwrap_or_default();
    let int = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let selector = sd.selector.iter().find_map(|p| match obj.pointer(p)? {
        Value::String(s) => Some(s.clone()),
        Value::Object(sel) => {
            let labels = sel.get("matchLabels")?.as_object()?;
            let parts: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            Some(parts.join(","))
        }
        _ => None,
    });
    let mut meta = serde_json::Map::new();
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj.get("metadata").and_then(|m| m.get(k)) {
            meta.insert(k.into(), v.clone());
        }
    }
    let mut status = json!({"replicas": int(&sd.status_replicas)});
    if let Some(s) = selector.filter(|s| !s.is_empty()) {
        status["selector"] = json!(s);
    }
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta,
        "spec": {"replicas": int(&sd.spec_replicas)}, "status": status,
    })
}

fn check_scale(scale: &Value) -> Result<(), ApiError> {
    let kind = scale.get("kind").and_then(Value::as_str).unwrap_or("");
    let av = scale
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !scale.is_object()
        || (!kind.is_empty() && kind != "Scale")
        || (!av.is_empty() && av != "autoscaling/v1")
    {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type Scale): {kind} in version {av:?}"
        )));
    }
    Ok(())
}

fn replicas_of(name: &str, scale: &Value) -> Result<i64, ApiError> {
    let bad = |detail: String| {
        ApiError::invalid(
            "Scale",
            "autoscaling",
            name,
            "spec.replicas",
            "FieldValueInvalid",
            &detail,
        )
    };
    match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => Ok(0),
        Some(v) => match v.as_i64() {
            Some(n) if n >= 0 && n <= i64::from(i32::MAX) => Ok(n),
            Some(n) => Err(bad(format!(
                "Invalid value: {n}: must be greater than or equal to 0"
            ))),
            None => Err(bad(format!("Invalid value: {v}: must be an integer"))),
        },
    }
}

fn set_replicas(def: &ResourceDef, cur: &Value, replicas: i64) -> Value {
    let sd = def.scale.clone().unwrap_or_default();
    let mut v = cur.clone();
    let toks: Vec<&str> = sd
        .spec_replicas
        .trim_start_matches('/')
        .split('/')
        .collect();
    let mut at = &mut v;
    for t in &toks {
        if !at.is_object() {
            *at = json!({});
        }
        at = at
            .as_object_mut()
            .expect("object")
            .entry(t.to_string())
            .or_insert(Value::Null);
    }
    *at = json!(replicas);
    v
}

/// A write request over HTTP: run under its `fieldValidation` (unknown fields of a custom
/// resource become `Warning` headers or a 400), and followed by serving the CRDs anew when it wrote a
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
    let (r, warnings) = crate::field_validation::with_field_validation(query, write).await;
    if crd && r.is_ok() {
        shared.reconcile_crds();
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
