//! A simulated kube-apiserver for the integration suite, the demo and the benchmarks.
//!
//! It behaves like kube-apiserver on the wire: one global revision used as resourceVersion,
//! list semantics (`resourceVersion` unset / `"0"` / exact with `resourceVersionMatch`,
//! pagination with continue tokens, 410 Expired after compaction, the "Too large resource
//! version" 504), chunked watch streams with bookmarks and `sendInitialEvents`, label and
//! field selectors, `Status` errors, discovery, HTTP/1.1 and HTTP/2, TLS with bearer tokens,
//! plus fault injection ([`Faults`]), a churn generator ([`ChurnConfig`]) and request counters.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use sim_apiserver::SimServer;
//! let sim = SimServer::builder().tls(true).token("t").start().await?;
//! sim.create("pods", Some("default"), serde_json::json!({"metadata": {"name": "p1"}}))?;
//! sim.faults().end_watches_after(3).rechunk(7);
//! println!("{} {:?}", sim.url(), sim.ca_path());
//! # Ok(()) }
//! ```
//!
//! # Wire behaviour (what a client can rely on)
//!
//! * **resourceVersion** is one global counter over all resources (etcd's revision); every
//!   write bumps it. Namespaces `default`, `kube-system`, `kube-public` are created at start
//!   (revisions 1 to 3).
//! * **List**: `resourceVersion` unset → latest; `"0"` → latest, and with the simulated watch
//!   cache (default) `limit` is ignored (no continue token); `X` + `Exact` → the state at `X`
//!   (410 `Expired` "The resourceVersion for the provided list is too old." if compacted);
//!   `X` + `NotOlderThan` → latest; `X` without a match and with a `limit` → exact (legacy);
//!   `X` beyond the current revision → 504 `Timeout`, message
//!   `Timeout: Too large resource version: X, current: C`, `details.causes[0].reason =
//!   "ResourceVersionTooLarge"`, `retryAfterSeconds: 1`, header `Retry-After: 1`.
//!   Items of built-in lists carry no `kind`/`apiVersion` (custom resources keep them).
//! * **Continue tokens**: base64url (no padding) of
//!   `{"v":"meta.k8s.io/v1","rv":<list revision>,"start":"<ns>/<name>\0"}`; every page has
//!   the first page's revision; `remainingItemCount` is set when no selector is used. After
//!   compaction: 410 `Expired` with the "inconsistent list" message and, in the Status's
//!   `metadata.continue`, a token (rv -1) that continues at the latest revision. A garbled token
//!   is 400 `continue key is not valid: ...`. `continue` with `resourceVersion` is 400, with
//!   `resourceVersionMatch` 422.
//! * **Watch** (`watch=true|1`): HTTP 200, `Content-Type: application/json`, chunked (one chunk
//!   per event unless re-chunked), one `{"type":..,"object":..}` per line. Unset or `"0"` start
//!   → synthetic ADDED events for the current state (each at its own resourceVersion, so not
//!   in order), then changes; `X` → every change after `X`, in order; `X` compacted → HTTP 200
//!   then one line `{"type":"ERROR","object":{"kind":"Status",..,"reason":"Expired","code":410,
//!   "message":"too old resource version: X (C)"}}` and the stream ends. A future `X` waits for
//!   it. DELETED carries the final state at the delete revision. With selectors, an object that
//!   stops matching arrives as DELETED (the object as it last matched, at the change's
//!   resourceVersion) and one that starts matching as ADDED.
//! * **Bookmarks** only with `allowWatchBookmarks=true`: `{"kind":"Pod","apiVersion":"v1",
//!   "metadata":{"resourceVersion":"N"}}` every bookmark interval
//!   (default 60 s) and 2 s before the deadline. `timeoutSeconds` (default 30 min) ends the
//!   stream cleanly (end of body).
//! * **sendInitialEvents=true** needs `resourceVersionMatch=NotOlderThan` (422 otherwise, each
//!   broken rule of `ValidateListOptions` a cause): ADDED for the current state, then (with
//!   `allowWatchBookmarks=true`) a BOOKMARK at the current revision with
//!   `metadata.annotations["k8s.io/initial-events-end"] = "true"`, then live changes on the
//!   same stream.
//! * **Slow watchers**: each has a bounded buffer (default 1024 events); on overflow the server
//!   drops it and closes the stream (no ERROR event), like kube-apiserver's cacher.
//! * **Compression** (opt-in, [`SimServerBuilder::gzip_responses`], `--gzip`): a response with
//!   a whole body (list, get, discovery, error) of at least [`DEFAULT_GZIP_MIN_BYTES`] (128 KiB,
//!   kube-apiserver's; [`SimServerBuilder::gzip_min_bytes`], `--gzip-min-bytes`) is sent with
//!   `Content-Encoding: gzip` and `Vary: Accept-Encoding` when the request's `Accept-Encoding`
//!   names `gzip` (not `q=0`); watches and streamed list faults never are. Counted in
//!   [`CounterSnapshot::gzip_responses`]; off by default, so benchmarks are unchanged.
//! * **Metadata representation** (client-go's metadata client): lists whose `Accept` header asks
//!   for `application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1` are a
//!   `PartialObjectMetadataList` of `meta.k8s.io/v1` whose items are
//!   `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{..}}`; watches
//!   and gets asking for `as=PartialObjectMetadata` carry objects (bookmarks included) in that
//!   form, ERROR events keep their Status. The header's media ranges are tried in order and the
//!   first one the server can produce wins (Tables: below); when none is left (an unknown `as=`
//!   without an `application/json` fallback), or the one chosen is of the wrong list-ness, the
//!   answer is 406 `NotAcceptable`. `SimServerBuilder::partial_object_metadata(false)` makes a
//!   server that does not know the representation (clients get whole objects through their
//!   fallback). See [`representation`].
//! * **Auth**: with a main token ([`SimServerBuilder::token`], user `admin`) or users of its
//!   own ([`SimServerBuilder::user`]: bearer token and/or a client certificate whose CN is the
//!   user and O its groups, [`SimServer::client_cert`]), a request without known credentials
//!   is 401 `Unauthorized`; without either, every request is `admin`. What a user may do is
//!   what [`SimServerBuilder::allow`] grants it or its groups (a small RBAC, see [`authz`]);
//!   `system:masters` may do anything, as may [`SimServerBuilder::user_token`] users and the
//!   generated client certificate; denials are 403 in kube-apiserver's words. The self
//!   reviews (`kubectl auth can-i`, `kubectl auth whoami`) are served. Per-user faults match
//!   on the user name.
//!
//! * **Tables** (what kubectl prints): a get, list or watch whose `Accept` header asks for
//!   `as=Table;g=meta.k8s.io;v=v1` (or `v1beta1`) before any other range the server can produce
//!   is answered with a `meta.k8s.io` `Table`: for a custom resource `Name` and its CRD's
//!   `additionalPrinterColumns` (`Age` when it has none; simple JSONPaths such as `.spec.x` or
//!   `.status.items[0].y`; `date` cells as kubectl's ages), for a built-in kind `Name` and `Age`,
//!   or kube-apiserver's own columns for pods (`Ready`, `Status`, `Restarts`, and `IP`, `Node`
//!   ... for `-o wide`), config maps, namespaces, deployments, leases, events (`Last Seen`,
//!   `Type`, `Reason`, `Object`, `Message`) and CRDs (`Name`, `Created At`). Rows carry the object as `includeObject`
//!   says (`Metadata`, the default: a `PartialObjectMetadata`; `Object`; `None`). Watch events
//!   carry one-row Tables, column definitions only in the first.
//! * **CustomResourceDefinitions** (`apiextensions.k8s.io/v1`, cluster-scoped, with status):
//!   a CRD is defaulted (`singular`, `listKind`, conversion `None`) and validated as
//!   kube-apiserver does for the common mistakes (name not `<plural>.<group>`, not exactly one
//!   storage version, no or a non-structural schema, bad scope or printer column: 422 `Invalid`
//!   with one cause each). Once stored it is served before the write is answered: each served
//!   version (namespaced or cluster-scoped per `spec.scope`, all versions sharing one store;
//!   whole objects read through a version are shown in it, as conversion strategy `None` does) with its short names, categories, `status` and
//!   `scale` subresources; its status gets `NamesAccepted` and `Established` (`True`),
//!   `acceptedNames` and `storedVersions`. A CRD whose plural is already served otherwise gets
//!   `NamesAccepted: False`. Writes to a custom resource are pruned of unknown fields (unless
//!   `x-kubernetes-preserve-unknown-fields`), nulls of non-nullable fields dropped, `default`s
//!   applied, then validated (`type`, `required`, `enum`, `minimum`/`maximum` and their
//!   exclusive forms, `minLength`/`maxLength`, `pattern`, `minItems`/`maxItems`,
//!   `min`/`maxProperties`, `nullable`, `x-kubernetes-int-or-string`,
//!   `x-kubernetes-embedded-resource`), with kube-apiserver's causes and message
//!   (`Widget.example.com "w1" is invalid: spec.size: Invalid value: "string": spec.size in
//!   body must be of type integer: "string"`). A default added to the schema later shows on
//!   objects stored before (same resourceVersion, no event). Updating the CRD (versions,
//!   schema, printer columns, subresources) takes effect at once; deleting it deletes its
//!   objects (one DELETED event each) and ends the watches on it. Unknown fields pruned
//!   from a write over HTTP get a `Warning: 299 - "unknown field \"spec.x\""` header each
//!   (`fieldValidation` unset or `Warn`), nothing (`Ignore`), or, with `Strict` (kubectl's
//!   default), 400 `Widget in version "v1" cannot be handled as a Widget: strict decoding
//!   error: unknown field "spec.x"`. Not done: conversion webhooks, CEL validation rules,
//!   immutability checks of a CRD's `scope` and names.
//!
//! # Writes
//!
//! * **Resources**: core/v1 `pods` (status), `configmaps`, `namespaces` (status), `events`,
//!   `services` (status; for `kubectl cluster-info`);
//!   `coordination.k8s.io/v1` `leases`; `events.k8s.io/v1` `events`; `apps/v1` `deployments`
//!   (status, scale); `apiextensions.k8s.io/v1` `customresourcedefinitions` (status); more
//!   with CRDs or with [`SimServerBuilder::resource`] and [`ResourceDef::with_status`]
//!   / [`ResourceDef::with_scale`]. Discovery lists `deployments/status`, `deployments/scale`
//!   (`autoscaling/v1` `Scale`) and the `deletecollection` verb.
//!   core/v1 and `events.k8s.io/v1` events are one store in two shapes (see
//!   [`events_convert`]): a write through either is read, listed and watched through both at
//!   the same resourceVersion. Discovery lists kube-apiserver's short names (`po`, `cm`,
//!   `ns`, `ev`, `deploy`) and the `all` category (pods, deployments).
//! * **Defaults**: writes through the API get kube-apiserver's defaults for built-in kinds
//!   (a Deployment's `strategy`, a pod spec's `restartPolicy`, ...), see [`defaults`].
//! * **Create** (POST, 201): no name and no `generateName` is 422 `Invalid` (cause
//!   `FieldValueRequired`, field `metadata.name`), a name that is not a DNS-1123 subdomain 422
//!   (`FieldValueInvalid`); `generateName` gets 5 random characters; an existing name is 409
//!   `AlreadyExists`. A resource with a status subresource gets its initial status, not the
//!   one sent (none; `phase: Pending` for pods, `Active` for namespaces; the test API's
//!   [`SimServer::create`] stores what it is given). **Update** (PUT): a set `metadata.resourceVersion` must be current (409
//!   `Conflict`); a missing object is 404. `generation` is bumped when something outside
//!   `metadata` and `status` changes (kinds without one, ConfigMaps, Namespaces, Services,
//!   Events and Leases, get none); an update that changes nothing stores nothing (the
//!   resourceVersion stays, no watch event), as kube-apiserver's. `metadata.managedFields` left out of a write are kept.
//! * **Patch**: `application/merge-patch+json`, `application/strategic-merge-patch+json`
//!   (built-in kinds only, by their merge keys and strategies and with `$patch`,
//!   `$setElementOrder`, `$retainKeys` and `$deleteFromPrimitiveList`, see [`smp`]; a custom
//!   resource answers 415 as kube-apiserver's does),
//!   `application/json-patch+json` (RFC 6902, see [`patch`]: a failed `test` or a missing path
//!   is 422, a malformed document 400), `application/apply-patch+yaml` (server-side apply,
//!   see [`apply`] for what is simplified); others 415. A patch without a resourceVersion is
//!   retried against concurrent writers as kube-apiserver does; with one it is a precondition.
//! * **Subresources**: `.../{name}/status` (GET the object; PUT/PATCH change only `.status`;
//!   the main resource then keeps the stored `.status`); `.../{name}/scale` (GET an
//!   `autoscaling/v1` `Scale`; PUT/PATCH set the parent's `spec.replicas` and answer the new
//!   Scale, the Scale's resourceVersion is a precondition). A subresource the resource does
//!   not have is 404.
//! * **Dry run** (`dryRun=All`, also in a DeleteOptions body): the answer the write would
//!   give (a created object has no resourceVersion, an updated one keeps the old), but
//!   nothing stored, no resourceVersion consumed, no watch event. Another value is 422
//!   (`CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ...`), as
//!   kube-apiserver validates request options.
//! * **Delete**: DeleteOptions body or query: `propagationPolicy` (`Orphan`, `Background`,
//!   `Foreground`; anything else 422), `gracePeriodSeconds` (not an integer: 400),
//!   `preconditions.uid` / `.resourceVersion` (409 `Precondition failed: ...`). The object
//!   goes at once whatever the policy (no graceful deletion) unless it has
//!   `metadata.finalizers`: then it is marked with a `deletionTimestamp` (a MODIFIED event)
//!   and goes when an update removes the last one. The answer is a success `Status`
//!   (`details`: name, group, kind = the resource, uid) as kube-apiserver's, except for pods
//!   and namespaces and an object still there, which are answered with the object. DELETE on a
//!   collection deletes what `labelSelector` / `fieldSelector` match in the namespace (one
//!   DELETED event each) and answers them as a `<Kind>List`.
//! * **History**: [`SimServer::history`] gives the stored versions of an object (bounded per
//!   object and over all objects).
//!
//! # Faults ([`Faults`], via `sim.faults()`)
//!
//! | call | effect |
//! |---|---|
//! | `end_watches_after(n)` | streams opened afterwards close cleanly after `n` events (`0`: at once) |
//! | `rechunk(size)` | streams opened afterwards are cut into `size`-byte chunks (events split and packed) |
//! | `fail_next(kind, code, k)` / `fail_next_with(kind, err, k)` | next `k` list/watch/get/write requests answer that Status (429 and 503 with `Retry-After: 1`) |
//! | `list_body(fault, k)` | the next `k` lists misbehave, per [`ListFault`]: `StatusWithOk` (200 with a failure Status), `EmptyObject` (`{}`), `Html` (200 `text/html`), `Endless` (a list body that never ends), `RepeatContinue` (the same continue token forever), `CloseMidBody` (half the body, then the connection aborted), `NoResourceVersion` (no `metadata.resourceVersion`) |
//! | `silent_watches(k)` | the next `k` watches get 200 headers and then nothing, ever (no events, bookmarks or timeout close) |
//! | `reset_mid_chunk()` | the next event written is cut in half and the connection aborted |
//! | `malformed_line()` | a non-JSON line is written before the next event |
//! | `unknown_event_type()` | a line `{"type":"SURPRISE","object":..}` (the next event's object) is written before the next event |
//! | `error_event(code)` / `error_event_with(err)` | the next event is replaced by an ERROR event, then the stream ends |
//! | `stall()` / `unstall()` | all streams stop writing (even bookmarks and timeouts) until unstalled |
//! | `compact()` | compacts to the current revision now (also `sim.compact_to(rev)`; by count with `max_log_events`) |
//! | `conflict_next_writes(k)` | the next `k` writes answer 409 `Conflict` ("Operation cannot be fulfilled on ... the object has been modified ...") for the object written |
//! | `throttle_next_writes(secs, k)` | the next `k` writes answer 429 with `Retry-After: secs` and `details.retryAfterSeconds` |
//! | `partition_user(user)` / `heal_user(user)` | requests of `user` get no answer and its watch streams stop writing until healed (held requests are then handled, if their client still waits) |
//! | `slow_user(user, delay)` | every answer to `user` is sent `delay` late, until healed |
//! | `reset()` | clears every fault |
//!
//! For every request-counting fault, `k = u32::MAX` means every request until `reset()`; the
//! one-shots stack (`n` calls affect the next `n` events). The same faults are reachable as
//! text specs through [`apply_fault_spec`] ([`FAULT_SPECS`]), which the `sim-apiserver`
//! binary takes as `--fault SPEC`, e.g. `--fault list-status-200 --fault fail-watch=503:2`.
#![deny(missing_docs)]

pub mod apply;
pub mod authz;
mod body;
mod builder;
mod builtin;
pub mod churn;
pub mod compression;
pub mod continue_token;
mod crd;
pub mod defaults;
mod deletion;
pub mod discovery;
pub mod events_convert;
mod fault_responses;
pub mod faults;
mod field_validation;
pub mod fixtures;
pub mod go_json;
mod label_syntax;
pub mod list;
pub mod managed_fields;
pub mod metrics;
pub mod openapi;
pub mod params;
pub mod patch;
pub mod prebuilt;
pub mod procstat;
pub mod protobuf;
mod reads;
pub mod representation;
mod resource_path;
pub mod resources;
mod response;
pub mod selectors;
mod server;
pub mod shard_selector;
mod shared;
mod sim_server;
pub mod smp;
pub mod status;
pub mod storage;
mod table;
mod test_server;
mod time;
pub mod tls;
mod unknown_fields;
pub mod users;
mod validation;
mod watch;
mod watch_event;
pub mod write_log;
mod writes;

pub use authz::{Rule, Subject};
pub use builder::SimServerBuilder;
pub use churn::{ChurnConfig, ChurnHandle};
pub use compression::DEFAULT_GZIP_MIN_BYTES;
pub use faults::{
    apply_fault_spec, Faults, ListFault, RequestKind, FAULT_SPECS, REPEAT_CONTINUE_TOKEN,
};
pub use metrics::{CounterSnapshot, UserSnapshot};
pub use prebuilt::{
    serve_prebuilt, serve_prebuilt_paced, serve_prebuilt_with, Framing, Pace, Prebuilt,
    PrebuiltList,
};
pub use resources::{ResourceDef, ScaleDef};
pub use sim_server::{SimError, SimServer};
pub use status::ApiError;
pub use test_server::{TestServer, TestServerError, REAL_APISERVER_VARIABLE};
pub use users::User;

/// The guide `docs/simulator.md`, whose Rust snippets are compiled and run as this crate's
/// doctests (`cargo test --doc -p sim-apiserver`).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/simulator.md")]
pub struct GuideDoctests;
pub use write_log::{WriteRecord, DEFAULT_WRITE_LOG_LIMIT, TEST_API_USER};
