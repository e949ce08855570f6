//! Reads: a GET of a collection (a list, or a watch) or of one object, written in the
//! representation the request's `Accept` header negotiates, as a Table, or converted to the
//! version read (one of several versions of a CRD).

use std::sync::Arc;

use http::header::ToStrError;
use http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;

use crate::body::SimBody;
use crate::fault_responses::{faulty_list, silent_watch};
use crate::faults::RequestKind;
use crate::list;
use crate::metrics::Counters;
use crate::params::ListParams;
use crate::representation::{self, Representation, Target};
use crate::resource_path::ResourcePath;
use crate::response::{json_response, value_response};
use crate::shared::Shared;
use crate::status::ApiError;
use crate::storage::key_of;
use crate::table::ReadView;
use crate::watch::{self as watch_stream, WatchCtx};

/// How a read's answer is written: the representation its `Accept` header negotiates, and the
/// view (a Table, or a CRD's conversion) it asks for beyond that.
struct Format<'a> {
    /// The `Accept` header; not visible ASCII, it names nothing the server can produce.
    accept: Option<Result<&'a str, ToStrError>>,
    partial_object_metadata: bool,
    view: Option<ReadView>,
}

impl Format<'_> {
    /// The representation of `target`: whole objects for a Table, else what `Accept` asks for.
    fn negotiate(&self, target: Target) -> Result<Representation, ApiError> {
        if self.view.as_ref().is_some_and(ReadView::is_table) {
            return Ok(Representation::Object);
        }
        match self.accept {
            Some(Err(_)) => Err(ApiError::not_acceptable(
                "only the following media types are accepted: application/json",
            )),
            Some(Ok(a)) => representation::negotiate(Some(a), target, self.partial_object_metadata),
            None => Ok(Representation::Object),
        }
    }
}

/// A GET of `rp`: a list or a watch of the collection, or one object.
pub(crate) fn read(
    shared: &Arc<Shared>,
    req: &Request<Incoming>,
    rp: &ResourcePath,
    user: &str,
) -> Result<Response<SimBody>, ApiError> {
    let query = req.uri().query();
    let accept = req.headers().get(header::ACCEPT).map(|v| v.to_str());
    // Tables, and a CRD's objects read through another version than the one written in.
    let view_accept = match &accept {
        Some(Ok(a)) => Some(*a),
        _ => None,
    };
    let view = ReadView::new(&shared.crds, &rp.def, rp.sub.as_deref(), view_accept, query)?;
    let format = Format {
        accept,
        partial_object_metadata: shared.cfg.partial_object_metadata,
        view,
    };
    match rp.name.as_deref() {
        None => collection(shared, rp, query, format, user),
        Some(name) => object(shared, rp, name, query, format),
    }
}

/// A list or a watch of the collection `rp` names.
fn collection(
    shared: &Arc<Shared>,
    rp: &ResourcePath,
    query: Option<&str>,
    format: Format<'_>,
    user: &str,
) -> Result<Response<SimBody>, ApiError> {
    let mut p = ListParams::parse_for(&rp.def.kind, query)?;
    // Read where kube-apiserver's storage reads it: after the options are validated.
    p.validate()?;
    p.apply_shard_selector(shared.cfg.sharded_list_and_watch)?;
    p.representation = format.negotiate(if p.watch {
        Target::Object
    } else {
        Target::List
    })?;
    if p.watch {
        watch(shared, rp, &p, format.view, user)
    } else {
        list(shared, rp, &p, format.view)
    }
}

/// A watch of the collection `rp` names.
fn watch(
    shared: &Arc<Shared>,
    rp: &ResourcePath,
    p: &ListParams,
    view: Option<ReadView>,
    user: &str,
) -> Result<Response<SimBody>, ApiError> {
    Counters::inc(&shared.counters.watches);
    if let Some(e) = shared.faults.take_failure(RequestKind::Watch) {
        return Err(e);
    }
    if shared.faults.take_silent_watch() {
        return Ok(silent_watch(shared));
    }
    let ctx = WatchCtx {
        storage: shared.storage.clone(),
        faults: shared.faults.clone(),
        counters: shared.counters.clone(),
        shutdown: shared.shutdown.clone(),
        bookmark_interval: shared.cfg.bookmark_interval,
        default_timeout: shared.cfg.default_watch_timeout,
        user: user.to_string(),
    };
    let mut rx = watch_stream::open(ctx, rp.idx, &rp.def, rp.ns.as_deref(), p)?;
    if let Some(v) = view {
        rx = v.watch(rx, p.representation);
    }
    let mut r = Response::new(SimBody::stream(rx, shared.counters.clone()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

/// A list of the collection `rp` names.
fn list(
    shared: &Arc<Shared>,
    rp: &ResourcePath,
    p: &ListParams,
    view: Option<ReadView>,
) -> Result<Response<SimBody>, ApiError> {
    Counters::inc(&shared.counters.lists);
    if let Some(e) = shared.faults.take_failure(RequestKind::List) {
        return Err(e);
    }
    if let Some(f) = shared.faults.take_list_fault() {
        return faulty_list(shared, f, rp, p);
    }
    let ns = rp.ns.as_deref();
    let watch_cache = shared.cfg.watch_cache;
    let mut body = list::list(&shared.storage, rp.idx, &rp.def, ns, p, watch_cache)?;
    if let Some(v) = &view {
        body = v.list(body, p.representation)?;
    }
    Ok(json_response(shared, StatusCode::OK, body))
}

/// A get of the object `name` (or of its scale).
fn object(
    shared: &Arc<Shared>,
    rp: &ResourcePath,
    name: &str,
    query: Option<&str>,
    format: Format<'_>,
) -> Result<Response<SimBody>, ApiError> {
    let def = &rp.def;
    let storage = &shared.storage;
    Counters::inc(&shared.counters.gets);
    let representation = format
        .negotiate(Target::Object)
        .map_err(|e| with_internal_type(e, &rp.def))?;
    if let Some(e) = shared.faults.take_failure(RequestKind::Get) {
        return Err(e);
    }
    let ns = rp.ns.as_deref().unwrap_or("");
    if def.namespaced && ns.is_empty() {
        return Err(ApiError::path_not_found());
    }
    // A get is served at the latest revision; a resourceVersion asks for at least
    // that one, so one from the future is refused as a list's is.
    let p = ListParams::parse_for(&def.kind, query)?;
    if let Some(x) = p.rv_number_or_500()? {
        if x > storage.revision() {
            return Err(ApiError::too_large_resource_version(x, storage.revision()));
        }
    }
    let o = storage
        .get(rp.idx, &key_of(ns, name))
        .ok_or_else(|| ApiError::not_found(&def.plural, &def.group, name))?;
    if rp.sub.as_deref() == Some("scale") {
        let scale = crate::writes::scale_of(def, &o.value);
        return Ok(value_response(shared, StatusCode::OK, &scale));
    }
    let mut body = o.json_as(representation);
    if let Some(v) = &format.view {
        body = v.object(&o.value, body, representation);
    }
    Ok(json_response(shared, StatusCode::OK, body))
}

/// A get's "is not a list" refusal names the Go type kube-apiserver holds, as it does.
fn with_internal_type(mut e: ApiError, def: &crate::resources::ResourceDef) -> ApiError {
    if e.message.ends_with("is not a list") {
        let internal = if !def.is_core() {
            "unstructured.Unstructured".to_string()
        } else {
            let group = match def.group.split('.').next() {
                Some("") | None => "core",
                Some(g) => g,
            };
            format!("{group}.{}", def.kind)
        };
        e.message = format!("{} (*{internal})", e.message);
    }
    e
}
