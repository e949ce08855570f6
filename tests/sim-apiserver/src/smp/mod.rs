//! Strategic merge patch (`application/strategic-merge-patch+json`), driven by the OpenAPI
//! schema of the object's kind ([`crate::openapi`]).
//!
//! A strategic merge patch is a JSON merge patch whose lists are not always replaced: a list
//! whose field says `x-kubernetes-patch-strategy: merge` is merged, element by element by its
//! `x-kubernetes-patch-merge-key` when its elements are objects (`containers` by `name`), as a
//! set when they are scalars (`finalizers`). Directives refine it:
//! * `"$patch": "replace"` in an object replaces it (in a merged list's element: the list),
//!   `"$patch": "delete"` empties it (in a merged list's element: removes the elements with
//!   that key), `"$patch": "merge"` in an object is the default;
//! * `"$retainKeys": [..]` drops the object's other keys before merging (a union type's
//!   discriminated members, like a Deployment's `strategy`);
//! * `"$setElementOrder/<field>": [..]` orders the merged list;
//! * `"$deleteFromPrimitiveList/<field>": [..]` removes those values from a merged scalar list;
//! * `null` removes a key.
//!
//! A field the schema does not know is treated as having no strategy (objects merge, lists are
//! replaced). Errors are [`SmpError::BadRequest`] (400) for a malformed directive and
//! [`SmpError::Invalid`] (422) for lists of lists, as kube-apiserver sorts them; kube-apiserver
//! answers the remaining malformed patches (an unknown `$patch`, an element without its merge
//! key) with a 500 carrying the same words, which here is a 400: the fault is the client's,
//! and a 500 invites a retry.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::resources::ResourceDef;
use crate::status::ApiError;

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_PRIMITIVE: &str = "$deleteFromPrimitiveList/";

/// How many `$ref`s a schema lookup follows before giving up (a hostile schema may loop).
const MAX_REF_HOPS: usize = 32;

/// Why a strategic merge patch was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SmpError {
    /// The patch is malformed (400 BadRequest).
    BadRequest(String),
    /// The patch cannot be applied (422).
    Invalid(String),
}

impl std::fmt::Display for SmpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SmpError::BadRequest(m) | SmpError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for SmpError {}

impl From<SmpError> for ApiError {
    fn from(e: SmpError) -> Self {
        match e {
            SmpError::BadRequest(m) => ApiError::bad_request(m),
            // kube-apiserver answers these with a generic 422 whose message is not the
            // patch's fault but this fixed sentence.
            SmpError::Invalid(_) => {
                let mut e = ApiError::unprocessable(
                    "the server rejected our request due to an error in our request",
                );
                e.details = Some(serde_json::json!({}));
                e
            }
        }
    }
}

fn bad(m: impl Into<String>) -> SmpError {
    SmpError::BadRequest(m.into())
}

fn no_merge_key(m: &Map<String, Value>, key: &str) -> SmpError {
    bad(format!(
        "map: {} does not contain declared merge key: {key}",
        crate::go_json::go_format(&Value::Object(m.clone()))
    ))
}

fn unknown_patch_type(d: &Value, m: &Map<String, Value>) -> SmpError {
    let d = d.as_str().map_or_else(|| d.to_string(), str::to_string);
    bad(format!(
        "unknown patch type: {d} in map: {}",
        crate::go_json::go_format(&Value::Object(m.clone()))
    ))
}

/// A position in a schema: the node (if the schema describes this far) and the definitions
/// its `$ref`s point into (`#/definitions/X` or `#/components/schemas/X`).
#[derive(Debug, Clone, Copy)]
pub struct Schema<'a> {
    node: Option<&'a Value>,
    defs: &'a Map<String, Value>,
}

/// What a field's schema says about patching it.
#[derive(Debug, Clone, Copy, Default)]
struct FieldMeta<'a> {
    merge: bool,
    replace: bool,
    merge_key: Option<&'a str>,
}

impl<'a> Schema<'a> {
    /// The schema `node`, whose references resolve in `defs`.
    pub fn new(node: &'a Value, defs: &'a Map<String, Value>) -> Self {
        Self {
            node: Some(node),
            defs,
        }
        .resolve()
    }

    /// No schema: every object merges, every list is replaced (a JSON merge patch).
    pub fn none(defs: &'a Map<String, Value>) -> Self {
        Self { node: None, defs }
    }

    fn resolve(mut self) -> Self {
        for _ in 0..MAX_REF_HOPS {
            let Some(n) = self.node else { return self };
            if let Some(r) = n.get("$ref").and_then(Value::as_str) {
                let name = r
                    .strip_prefix("#/definitions/")
                    .or_else(|| r.strip_prefix("#/components/schemas/"));
                self.node = name.and_then(|name| self.defs.get(name));
                continue;
            }
            match n.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
                Some([one]) if n.get("properties").is_none() => self.node = Some(one),
                _ => return self,
            }
        }
        Self::none(self.defs)
    }

    fn field(self, name: &str) -> (Schema<'a>, FieldMeta<'a>) {
        let prop = self
            .node
            .and_then(|n| n.get("properties"))
            .and_then(|p| p.get(name));
        let mut meta = FieldMeta::default();
        if let Some(p) = prop {
            let strategy = p
                .get("x-kubernetes-patch-strategy")
                .and_then(Value::as_str)
                .unwrap_or("");
            for s in strategy.split(',') {
                match s {
                    "merge" => meta.merge = true,
                    "replace" => meta.replace = true,
                    _ => {}
                }
            }
            meta.merge_key = p
                .get("x-kubernetes-patch-merge-key")
                .and_then(Value::as_str);
        }
        let child = Schema {
            node: prop,
            defs: self.defs,
        }
        .resolve();
        (child, meta)
    }

    fn items(self) -> Schema<'a> {
        Schema {
            node: self.node.and_then(|n| n.get("items")),
            defs: self.defs,
        }
        .resolve()
    }
}

/// Applies the strategic merge patch `patch` to `doc` as `schema` describes it (all or
/// nothing: on error `doc` is unchanged).
pub fn strategic_merge_patch(
    doc: &mut Value,
    patch: &Value,
    schema: Schema<'_>,
) -> Result<(), SmpError> {
    let Value::Object(p) = patch else {
        return Err(bad("the patch is not a JSON object"));
    };
    let orig = match doc {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    *doc = merge_map(orig, p, schema)?;
    Ok(())
}

/// The strategic merge patch of a served object: its kind's schema for a built-in kind, a 415
/// for a custom resource (kube-apiserver takes no strategic merge patch for those).
pub fn patch_resource(
    def: &ResourceDef,
    sub: Option<&str>,
    doc: &mut Value,
    patch: &Value,
) -> Result<(), ApiError> {
    let Some(name) = crate::openapi::builtin_definition(def, sub) else {
        return Err(ApiError::unsupported_media_type_of(
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    };
    let defs = crate::openapi::definitions();
    let schema = defs
        .get(name)
        .map_or_else(|| Schema::none(defs), |n| Schema::new(n, defs));
    Ok(strategic_merge_patch(doc, patch, schema)?)
}

/// The value a patch value becomes where the document has nothing: the patch itself with its
/// directives carried out against emptiness (and its `null`s dropped).
fn fresh(p: &Value, schema: Schema<'_>, meta: FieldMeta<'_>) -> Result<Value, SmpError> {
    match p {
        Value::Object(pm) => merge_map(Map::new(), pm, schema),
        Value::Array(pa) if meta.merge => Ok(Value::Array(merge_list(
            Vec::new(),
            pa,
            meta.merge_key,
            schema.items(),
        )?)),
        Value::Array(pa) => {
            let items = schema.items();
            pa.iter()
                .map(|x| match x {
                    Value::Object(m) => merge_map(Map::new(), m, items),
                    other => Ok(other.clone()),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array)
        }
        other => Ok(other.clone()),
    }
}

fn merge_value(
    o: Value,
    p: &Value,
    schema: Schema<'_>,
    meta: FieldMeta<'_>,
) -> Result<Value, SmpError> {
    match (o, p) {
        (Value::Object(om), Value::Object(pm)) if !meta.replace => merge_map(om, pm, schema),
        (Value::Array(oa), Value::Array(pa)) if meta.merge => Ok(Value::Array(merge_list(
            oa,
            pa,
            meta.merge_key,
            schema.items(),
        )?)),
        _ => fresh(p, schema, meta),
    }
}

fn merge_map(
    mut orig: Map<String, Value>,
    patch: &Map<String, Value>,
    schema: Schema<'_>,
) -> Result<Value, SmpError> {
    if let Some(d) = patch.get(PATCH) {
        match d.as_str() {
            Some("replace") => {
                let mut rest = patch.clone();
                rest.remove(PATCH);
                return merge_map(Map::new(), &rest, schema);
            }
            Some("delete") => return Ok(Value::Object(Map::new())),
            Some("merge") => {}
            _ => {
                return Err(unknown_patch_type(d, patch));
            }
        }
    }
    if let Some(rk) = patch.get(RETAIN_KEYS) {
        retain_keys(&mut orig, patch, rk)?;
    }
    let ordered = merge_set_element_orders(&mut orig, patch, schema)?;
    delete_from_primitive_lists(&mut orig, patch)?;
    for (k, v) in patch {
        if k.starts_with('$') || ordered.contains(&k.as_str()) {
            continue;
        }
        if v.is_null() {
            orig.remove(k);
            continue;
        }
        let (child, meta) = schema.field(k);
        match orig.get_mut(k) {
            Some(slot) => {
                let o = std::mem::take(slot);
                *slot = merge_value(o, v, child, meta)?;
            }
            None => {
                orig.insert(k.clone(), fresh(v, child, meta)?);
            }
        }
    }
    Ok(Value::Object(orig))
}

/// `$retainKeys` (`rk`): keeps only the keys it names in `orig`, refusing a patch that sets a
/// field it does not name.
fn retain_keys(
    orig: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    rk: &Value,
) -> Result<(), SmpError> {
    let bad_rk = || bad("invalid patch format of retainKeys");
    let keys = rk
        .as_array()
        .ok_or_else(bad_rk)?
        .iter()
        .map(|k| k.as_str().ok_or_else(bad_rk))
        .collect::<Result<HashSet<_>, _>>()?;
    for (k, v) in patch {
        if v.is_null() || k.starts_with('$') {
            continue;
        }
        if !keys.contains(&k.as_str()) {
            return Err(bad_rk());
        }
    }
    orig.retain(|k, _| keys.contains(&k.as_str()));
    Ok(())
}

/// Each `$setElementOrder/<field>`: merges the field's list with the patch's and orders the
/// result as the directive says; the fields so merged, which the plain merge then skips.
fn merge_set_element_orders<'p>(
    orig: &mut Map<String, Value>,
    patch: &'p Map<String, Value>,
    schema: Schema<'_>,
) -> Result<Vec<&'p str>, SmpError> {
    let mut ordered: Vec<&str> = Vec::new();
    for (k, order) in patch {
        let Some(field) = k.strip_prefix(SET_ORDER) else {
            continue;
        };
        let bad_order = || bad("invalid patch format of setElementOrder list");
        let order = order.as_array().ok_or_else(bad_order)?;
        if field.is_empty() {
            return Err(bad_order());
        }
        let (child, meta) = schema.field(field);
        let o = match orig.get(field) {
            None => None,
            Some(Value::Array(a)) => Some(a.clone()),
            Some(_) => return Err(bad_order()),
        };
        let p = match patch.get(field) {
            None => None,
            Some(Value::Array(a)) => Some(a),
            Some(_) => return Err(bad_order()),
        };
        if let Some(p) = p {
            check_order(p, order, meta.merge_key)?;
        }
        let merged = match (&o, p) {
            (None, None) => continue,
            (Some(o), None) => o.clone(),
            (None, Some(p)) => match fresh(&Value::Array(p.clone()), child, meta)? {
                Value::Array(a) => a,
                _ => unreachable!("fresh keeps an array an array"),
            },
            (Some(o), Some(p)) => match merge_value(
                Value::Array(o.clone()),
                &Value::Array(p.clone()),
                child,
                meta,
            )? {
                Value::Array(a) => a,
                _ => unreachable!("a list merges into a list"),
            },
        };
        let key = if merged.first().is_some_and(Value::is_object) {
            meta.merge_key
        } else {
            None
        };
        let sorted = order_list(merged, order, o.as_deref().unwrap_or(&[]), key);
        orig.insert(field.to_string(), Value::Array(sorted));
        ordered.push(field);
    }
    Ok(ordered)
}

/// Each `$deleteFromPrimitiveList/<field>`: removes the values it lists from that list of
/// `orig`.
fn delete_from_primitive_lists(
    orig: &mut Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<(), SmpError> {
    for (k, v) in patch {
        let Some(field) = k.strip_prefix(DELETE_PRIMITIVE) else {
            continue;
        };
        let bad_prim = || bad("invalid patch format of primitive list");
        let gone = v.as_array().ok_or_else(bad_prim)?;
        if field.is_empty() {
            return Err(bad_prim());
        }
        if let Some(Value::Array(a)) = orig.get_mut(field) {
            a.retain(|x| !gone.contains(x));
        }
    }
    Ok(())
}

/// The identity of a list element: its merge key's value for objects, itself for scalars.
fn ident<'v>(v: &'v Value, key: Option<&str>) -> Option<&'v Value> {
    match key {
        Some(k) => v.get(k),
        None => Some(v),
    }
}

/// Where each identity first occurs in a list, so that merging and ordering stay linear in
/// the lists' lengths (a hostile patch of many elements against a long list is not quadratic).
struct Positions(HashMap<String, usize>);

impl Positions {
    fn of(list: &[Value], key: Option<&str>) -> Self {
        let mut m = HashMap::with_capacity(list.len());
        for (i, v) in list.iter().enumerate() {
            if let Some(id) = ident(v, key) {
                m.entry(id.to_string()).or_insert(i);
            }
        }
        Self(m)
    }

    fn get(&self, v: &Value, key: Option<&str>) -> Option<usize> {
        self.0.get(&ident(v, key)?.to_string()).copied()
    }
}

/// The patch's elements (those not deleted) must appear in `$setElementOrder` in the same
/// relative order.
fn check_order(patch: &[Value], order: &[Value], key: Option<&str>) -> Result<(), SmpError> {
    let mut at = 0;
    for p in patch {
        if p.get(PATCH).is_some() {
            continue;
        }
        let Some(id) = ident(p, key) else {
            continue;
        };
        match order[at..].iter().position(|o| ident(o, key) == Some(id)) {
            Some(i) => at += i + 1,
            None => {
                return Err(bad(format!(
                    "The order in patch list:\n{}\n doesn't match $setElementOrder list:\n{}\n",
                    Value::Array(patch.to_vec()),
                    Value::Array(order.to_vec())
                )))
            }
        }
    }
    Ok(())
}

/// A list element with its position in the server's list, if it has one.
type Placed = (Option<usize>, Value);

/// Orders a merged list: the elements named in `order` (the patch, or `$setElementOrder`) in
/// that order, the others (known only to the server) in their original order, the two
/// interleaved by their original positions where both have one.
fn order_list(
    merged: Vec<Value>,
    order: &[Value],
    server: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let in_order = Positions::of(order, key);
    let in_server = Positions::of(server, key);
    let (mut named, mut server_only): (Vec<Placed>, Vec<Placed>) = merged
        .into_iter()
        .map(|m| (in_server.get(&m, key), m))
        .partition(|(_, m)| in_order.get(m, key).is_some());
    named.sort_by_key(|(_, m)| in_order.get(m, key));
    server_only.sort_by_key(|(at, _)| at.unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(named.len() + server_only.len());
    let (mut l, mut r) = (
        server_only.into_iter().peekable(),
        named.into_iter().peekable(),
    );
    loop {
        let take_left = match (l.peek(), r.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((a, _)), Some((b, _))) => matches!((a, b), (Some(x), Some(y)) if x < y),
        };
        let next = if take_left { l.next() } else { r.next() };
        out.extend(next.map(|(_, v)| v));
    }
    out
}

fn kind_of(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        Value::Array(_) => 4,
        Value::Object(_) => 5,
    }
}

fn merge_list(
    mut orig: Vec<Value>,
    patch: &[Value],
    key: Option<&str>,
    items: Schema<'_>,
) -> Result<Vec<Value>, SmpError> {
    let Some(first) = orig.first().or(patch.first()) else {
        return Ok(orig);
    };
    let kind = kind_of(first);
    check_same_kind(&orig, patch, kind)?;
    if kind != 5 {
        return Ok(merge_primitive_list(orig, patch));
    }
    let Some(key) = key else {
        return Err(bad("cannot merge lists without merge key for type map"));
    };
    let directives = ListDirectives::of(patch, key)?;
    if !directives.deleted.is_empty() {
        orig.retain(|o| {
            o.get(key)
                .is_none_or(|id| !directives.deleted.contains(&id.to_string()))
        });
    }
    if directives.replace {
        let mut out = Vec::with_capacity(directives.plain.len());
        for m in directives.plain {
            out.push(merge_map(Map::new(), m, items)?);
        }
        return Ok(out);
    }
    merge_by_key(orig, directives.plain, key, items)
}

/// Refuses a list holding lists, or elements not all of `kind` (`kind_of`), in the server's
/// list or the patch's.
fn check_same_kind(orig: &[Value], patch: &[Value], kind: u8) -> Result<(), SmpError> {
    for v in orig.iter().chain(patch) {
        if v.is_array() {
            return Err(SmpError::Invalid("lists of lists are not supported".into()));
        }
        if kind_of(v) != kind {
            return Err(bad(format!(
                "list element types are not identical: {}",
                Value::Array(orig.iter().chain(patch).cloned().collect())
            )));
        }
    }
    Ok(())
}

/// A list of scalars merged as a set: the patch's values not already there added, ordered as
/// the patch orders them.
fn merge_primitive_list(mut orig: Vec<Value>, patch: &[Value]) -> Vec<Value> {
    let server = orig.clone();
    let mut seen: HashSet<String> = orig.iter().map(Value::to_string).collect();
    for p in patch {
        if seen.insert(p.to_string()) {
            orig.push(p.clone());
        }
    }
    order_list(orig, patch, &server, None)
}

/// A patch's list of objects read for its `$patch` directives.
struct ListDirectives<'p> {
    /// The elements to merge, in the patch's order.
    plain: Vec<&'p Map<String, Value>>,
    /// A `$patch: replace` element: the list becomes `plain`.
    replace: bool,
    /// The merge keys of the `$patch: delete` elements.
    deleted: HashSet<String>,
}

impl<'p> ListDirectives<'p> {
    /// Reads `patch`, every element an object, whose `key` identifies it.
    fn of(patch: &'p [Value], key: &str) -> Result<Self, SmpError> {
        let mut out = ListDirectives {
            plain: Vec::new(),
            replace: false,
            deleted: HashSet::new(),
        };
        for p in patch {
            let m = p.as_object().expect("checked: every element is an object");
            match m.get(PATCH) {
                None => out.plain.push(m),
                Some(d) => match d.as_str() {
                    Some("delete") => {
                        let id = m.get(key).ok_or_else(|| no_merge_key(m, key))?;
                        out.deleted.insert(id.to_string());
                    }
                    Some("replace") => out.replace = true,
                    Some("merge") => {
                        return Err(bad("merging lists cannot yet be specified in the patch"))
                    }
                    _ => return Err(unknown_patch_type(d, m)),
                },
            }
        }
        Ok(out)
    }
}

/// Merges each of `plain` into the element of `orig` with its `key` (appending it when there is
/// none), then orders the list as the patch does.
fn merge_by_key(
    mut orig: Vec<Value>,
    plain: Vec<&Map<String, Value>>,
    key: &str,
    items: Schema<'_>,
) -> Result<Vec<Value>, SmpError> {
    let server = orig.clone();
    let mut at = Positions::of(&orig, Some(key));
    for m in &plain {
        let id = m.get(key).ok_or_else(|| no_merge_key(m, key))?;
        match at.0.get(&id.to_string()).copied() {
            Some(i) => {
                let Value::Object(o) = std::mem::take(&mut orig[i]) else {
                    unreachable!("checked: every element is an object")
                };
                orig[i] = merge_map(o, m, items)?;
            }
            None => {
                at.0.insert(id.to_string(), orig.len());
                orig.push(merge_map(Map::new(), m, items)?);
            }
        }
    }
    let order: Vec<Value> = plain
        .into_iter()
        .map(|m| Value::Object(m.clone()))
        .collect();
    Ok(order_list(orig, &order, &server, Some(key)))
}
