//! List semantics: resourceVersion unset / "0" / exact with `resourceVersionMatch`, pagination with
//! continue tokens that pin the list's revision, and the list body (of the objects, or of their
//! metadata representation, `PartialObjectMetadataList`).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::json;
use tokio::sync::{mpsc, watch};

use crate::body::Chunk;
use crate::continue_token::ContinueToken;
use crate::params::ListParams;
use crate::representation::{Representation, PARTIAL_OBJECT_METADATA_LIST};
use crate::resources::ResourceDef;
use crate::status::ApiError;
use crate::storage::{Obj, Storage};

const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Deviations from the real list metadata, for the list faults.
#[derive(Debug, Default, Clone, Copy)]
struct Shape<'a> {
    /// Always set `metadata.continue` to this token (even on the last page).
    fixed_continue: Option<&'a str>,
    /// Leave `metadata.resourceVersion` out.
    omit_resource_version: bool,
}

/// Serves a list; `watch_cache` makes `resourceVersion=0` ignore `limit` (as the watch cache does).
pub fn list(
    storage: &Storage,
    res: usize,
    def: &ResourceDef,
    ns: Option<&str>,
    p: &ListParams,
    watch_cache: bool,
) -> Result<Bytes, ApiError> {
    list_shaped(storage, res, def, ns, p, watch_cache, Shape::default())
}

/// [`list`] without `metadata.resourceVersion` (`ListFault::NoResourceVersion`).
pub(crate) fn list_without_resource_version(
    storage: &Storage,
    res: usize,
    def: &ResourceDef,
    ns: Option<&str>,
    p: &ListParams,
    watch_cache: bool,
) -> Result<Bytes, ApiError> {
    let shape = Shape {
        omit_resource_version: true,
        ..Shape::default()
    };
    list_shaped(storage, res, def, ns, p, watch_cache, shape)
}

/// The first page of the latest list (`limit` honoured, whatever `resourceVersion` or
/// `continue` says) with `metadata.continue` set to `token` (`ListFault::RepeatContinue`).
pub(crate) fn first_page_with_token(
    storage: &Storage,
    res: usize,
    def: &ResourceDef,
    ns: Option<&str>,
    p: &ListParams,
    token: &str,
) -> Result<Bytes, ApiError> {
    let shape = Shape {
        fixed_continue: Some(token),
        ..Shape::default()
    };
    storage.read(res, None, |rev, map| {
        render(def, rev, map, ns, p, p.limit, None, shape)
    })
}

/// The opening of a `ListFault::Endless` body: a list header at `rev` (in `representation`) and
/// the items array.
pub(crate) fn endless_prefix(def: &ResourceDef, rev: u64, representation: Representation) -> Bytes {
    let (kind, api_version) = list_type(def, representation);
    Bytes::from(format!(
        "{{\"kind\":\"{kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{{\"resourceVersion\":\"{rev}\"}},\"items\":[",
    ))
}

/// `(kind, apiVersion)` of a list of `def` in `representation`.
fn list_type(def: &ResourceDef, representation: Representation) -> (String, String) {
    match representation {
        Representation::Object => (def.list_kind(), def.api_version()),
        Representation::PartialObjectMetadata { api_version } => (
            PARTIAL_OBJECT_METADATA_LIST.to_string(),
            api_version.to_string(),
        ),
    }
}

/// Size of the chunks of a `ListFault::Endless` body.
const ENDLESS_CHUNK: usize = 64 * 1024;

/// Feeds a `ListFault::Endless` body: `prefix`, then chunks of items (in namespace `ns`, if
/// any) forever; stops when the client goes away (the send fails) or on shutdown. The channel
/// is bounded, so it writes only as fast as the client reads.
pub(crate) async fn endless(
    tx: mpsc::Sender<Chunk>,
    prefix: Bytes,
    ns: Option<String>,
    mut shutdown: watch::Receiver<bool>,
) {
    if *shutdown.borrow_and_update() || tx.send(Ok(prefix)).await.is_err() {
        return;
    }
    let ns_field = ns
        .map(|n| format!(",\"namespace\":{}", serde_json::Value::String(n)))
        .unwrap_or_default();
    let mut n: u64 = 0;
    loop {
        let mut b = BytesMut::with_capacity(ENDLESS_CHUNK + 256);
        while b.len() < ENDLESS_CHUNK {
            b.put_slice(
                format!(
                    "{{\"metadata\":{{\"name\":\"endless-{n}\"{ns_field},\"resourceVersion\":\"1\"}}}},"
                )
                .as_bytes(),
            );
            n += 1;
        }
        tokio::select! {
            r = tx.send(Ok(b.freeze())) => if r.is_err() { return },
            _ = shutdown.changed() => return,
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn list_shaped(
    storage: &Storage,
    res: usize,
    def: &ResourceDef,
    ns: Option<&str>,
    p: &ListParams,
    watch_cache: bool,
    shape: Shape<'_>,
) -> Result<Bytes, ApiError> {
    p.validate()?;
    let mut limit = p.limit;
    // kube-apiserver's watch cache serves a list at resourceVersion 0 whole: it ignores the
    // limit, also of the rest of a list a continue token resumes.
    if watch_cache && p.resource_version.as_deref() == Some("0") {
        limit = None;
    }
    if let Some(tok) = &p.continue_token {
        let t = ContinueToken::decode(tok)
            .map_err(|e| ApiError::bad_request(format!("invalid continue token: {e}")))?;
        let at = (t.rv != -1).then_some(t.rv as u64);
        let start = t.start.clone();
        let out = storage.read(res, at, |rev, map| {
            render(def, rev, map, ns, p, limit, Some(&start), shape)
        });
        return match out {
            Ok(b) => Ok(b),
            Err(e) if e.code == 410 => {
                let mut e = ApiError::expired(INCONSISTENT_CONTINUE);
                e.continue_token = Some(
                    ContinueToken {
                        rv: -1,
                        start: t.start,
                    }
                    .encode(),
                );
                Err(e)
            }
            Err(_) => Err(ApiError::bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            )),
        };
    }
    let rv = p.rv_number()?;
    let exact = match p.rv_match.as_deref() {
        Some("Exact") => true,
        Some(_) => false,
        // Legacy: a non-zero resourceVersion with a limit is an exact read.
        None => limit.is_some(),
    };
    let at = match rv {
        None => {
            if p.resource_version.is_some() && watch_cache {
                limit = None;
            }
            None
        }
        Some(x) if exact => Some(x),
        Some(x) => {
            let current = storage.revision();
            if x > current {
                return Err(ApiError::too_large_resource_version(x, current));
            }
            None
        }
    };
    storage.read(res, at, |rev, map| {
        render(def, rev, map, ns, p, limit, None, shape)
    })
}

#[allow(clippy::too_many_arguments)]
fn render(
    def: &ResourceDef,
    rev: u64,
    map: &BTreeMap<String, Arc<Obj>>,
    ns: Option<&str>,
    p: &ListParams,
    limit: Option<usize>,
    start: Option<&str>,
    shape: Shape<'_>,
) -> Bytes {
    let prefix = ns.map(|n| format!("{n}/"));
    let (items, more) = page(map, prefix.as_deref(), p, limit, start);
    let last = items.last().map(|(k, _)| k.as_str()).unwrap_or("");
    let meta = list_meta(
        def,
        rev,
        map,
        prefix.as_deref(),
        p,
        more.then_some(last),
        shape,
    );
    let (list_kind, list_api_version) = list_type(def, p.representation);
    let header = format!(
        "{{\"kind\":\"{list_kind}\",\"apiVersion\":\"{list_api_version}\",\"metadata\":{meta},\"items\":["
    );
    if let Representation::PartialObjectMetadata { .. } = p.representation {
        return metadata_items(&header, &items, p.representation);
    }
    whole_items(&header, &items, def)
}

/// The objects of one page: those in namespace `prefix` matching the selectors, from `start`,
/// at most `limit`; and whether more follow.
fn page<'m>(
    map: &'m BTreeMap<String, Arc<Obj>>,
    prefix: Option<&str>,
    p: &ListParams,
    limit: Option<usize>,
    start: Option<&str>,
) -> (Vec<(&'m String, &'m Arc<Obj>)>, bool) {
    let iter = match start {
        Some(s) => map.range::<str, _>((std::ops::Bound::Included(s), std::ops::Bound::Unbounded)),
        None => map.range::<str, _>(..),
    };
    let mut matching = iter
        .filter(|(k, _)| prefix.is_none_or(|pfx| k.starts_with(pfx)))
        .filter(|(_, o)| p.selectors.matches(&o.value));
    let mut items: Vec<(&String, &Arc<Obj>)> = Vec::new();
    let mut more = false;
    for (k, o) in matching.by_ref() {
        if limit.is_some_and(|l| items.len() >= l) {
            more = true;
            break;
        }
        items.push((k, o));
    }
    (items, more)
}

/// A list's `metadata`: its resourceVersion, a continue token after the page's `last` key when
/// more follow (with the remaining count), the shard echo, and the list faults' `shape`.
fn list_meta(
    def: &ResourceDef,
    rev: u64,
    map: &BTreeMap<String, Arc<Obj>>,
    prefix: Option<&str>,
    p: &ListParams,
    last: Option<&str>,
    shape: Shape<'_>,
) -> serde_json::Value {
    let mut meta = json!({"resourceVersion": rev.to_string()});
    if let Some(last) = last {
        meta["continue"] = json!(ContinueToken {
            rv: rev as i64,
            start: format!("{last}\u{0}"),
        }
        .encode());
        if p.selectors.is_empty() {
            // Counted over the objects after the page whether or not they are in the shard, as
            // kube-apiserver 1.36.3 counts them for a sharded list.
            let after = map
                .range::<str, _>((std::ops::Bound::Excluded(last), std::ops::Bound::Unbounded))
                .filter(|(k, _)| prefix.is_none_or(|pfx| k.starts_with(pfx)));
            meta["remainingItemCount"] = json!(after.count());
        }
    }
    if let Some(shard) = &p.selectors.shard {
        // kube-apiserver 1.36.3 leaves the echo out of a PartialObjectMetadataList.
        if !matches!(
            p.representation,
            Representation::PartialObjectMetadata { .. }
        ) {
            meta["shardInfo"] = json!({"selector": shard.to_string()});
        }
    }
    if let Some(token) = shape.fixed_continue {
        meta["continue"] = json!(token);
    }
    if last.is_none() && !def.is_core() {
        // A custom resource's list is written from an unstructured map that always holds it.
        meta["continue"] = json!("");
    }
    if shape.omit_resource_version {
        if let Some(m) = meta.as_object_mut() {
            m.remove("resourceVersion");
        }
    }
    meta
}

/// The list's body in the metadata representation: every item with its own kind and
/// apiVersion (as kube-apiserver writes PartialObjectMetadataList items).
fn metadata_items(header: &str, items: &[(&String, &Arc<Obj>)], repr: Representation) -> Bytes {
    let items: Vec<Bytes> = items.iter().map(|(_, o)| o.json_as(repr)).collect();
    let size: usize = items.iter().map(|o| o.len() + 1).sum();
    let mut b = BytesMut::with_capacity(size + header.len() + 4);
    b.put_slice(header.as_bytes());
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            b.put_u8(b',');
        }
        b.put_slice(o);
    }
    b.put_slice(b"]}\n");
    b.freeze()
}

/// The list's body of whole objects: kube-apiserver omits kind and apiVersion on the items of
/// built-in lists (they are set on the list only); custom resources keep them.
fn whole_items(header: &str, items: &[(&String, &Arc<Obj>)], def: &ResourceDef) -> Bytes {
    let size: usize = items.iter().map(|(_, o)| o.json.len() + 1).sum();
    let mut b = BytesMut::with_capacity(size + header.len() + 4);
    b.put_slice(header.as_bytes());
    let prefix = format!(
        "{{\"apiVersion\":\"{}\",\"kind\":\"{}\",",
        def.api_version(),
        def.kind
    );
    for (i, (_, o)) in items.iter().enumerate() {
        if i > 0 {
            b.put_u8(b',');
        }
        if !def.is_core() {
            b.put_slice(&o.json);
        } else if o.json.starts_with(prefix.as_bytes()) {
            b.put_u8(b'{');
            b.put_slice(&o.json[prefix.len()..]);
        } else {
            let mut v = o.value.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            b.put_slice(v.to_string().as_bytes());
        }
    }
    b.put_slice(b"]}\n");
    b.freeze()
}
