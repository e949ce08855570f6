//! What a reconcile is handed beside its object: the user's state and writes that are fenced in
//! every mode.
//!
//! A write through a [`Context`] is safe to make from a reconcile whatever the controller's
//! mode, so that switching leader election or sharding on changes no line of the reconcile
//! (rule BD4 in docs/semantics.md):
//!
//! - with leader election, every request first checks the leader lease's guard (a replica that
//!   may no longer lead sends nothing);
//! - sharded, the shard lease's guard is checked, and the object as seen must carry this
//!   replica's assignment label (the [`FencedWriter`] checks);
//! - in every mode, writes to the primary object carry the resourceVersion it was read at, so a
//!   write computed from a stale copy, or delayed past a hand-over, gets a 409 instead of
//!   landing ([`FenceError::Fenced`]: the key is retried on a fresher copy).
//!
//! Children are written by server-side apply with the controller's name as field manager and a
//! controller owner reference to their owner. A child of an owned resource that the cache holds
//! is applied with its seen resourceVersion as precondition, in every mode; sharded, it must also
//! carry this replica's label, and a missing one is created (never applied: kube-apiserver
//! ignores a resourceVersion in an apply that creates) so that a late duplicate is refused as
//! `AlreadyExists`.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};
use workqueue::shared_informer::reflector::store_index::{
    DynamicObject, Object, PartialObjectMetadata, ReadOnlyIndexer,
};
use workqueue::shared_informer::reflector::{Api, Client, Decode, Patch, PatchOptions, Resource};

use crate::conditions::{set_condition, Condition};
use crate::consistency::ConsistencyStore;
use crate::events::{EventRecorder, EventType, ObjectReference};
use crate::leader_election::LeaseGuard;
use crate::sharding::{with_precondition, FenceError, FencedWriter};

/// What every reconcile of one controller shares: fixed when the controller starts.
pub(super) struct Shared<S> {
    pub(super) state: S,
    pub(super) client: Client,
    pub(super) resource: Resource,
    pub(super) kind: String,
    /// The field manager of server-side applies, and the events' reporting component.
    pub(super) manager: String,
    pub(super) recorder: EventRecorder,
    /// The caches of the owned resources (metadata only), by resource.
    pub(super) children: Vec<(Resource, ReadOnlyIndexer<PartialObjectMetadata>)>,
    /// The versions of this controller's own writes of primary objects (BD7).
    pub(super) consistency: Arc<ConsistencyStore>,
}

/// How this reconcile's writes are fenced.
pub(super) enum Fence<K> {
    /// No lease: writes carry the resourceVersion precondition only.
    None,
    /// Leader election: the leader lease's guard.
    Leader(LeaseGuard),
    /// Sharded: the shard lease and this replica's assignment label.
    Shard(Box<FencedWriter<K>>),
}

impl<K> Clone for Fence<K> {
    fn clone(&self) -> Self {
        match self {
            Fence::None => Fence::None,
            Fence::Leader(guard) => Fence::Leader(guard.clone()),
            Fence::Shard(writer) => Fence::Shard(writer.clone()),
        }
    }
}

/// The second argument of a reconcile: the state given to
/// [`run`](super::ControllerBuilder::run) (also through `Deref`), and writes fenced as the
/// [module documentation](self) says. Cheap to clone.
pub struct Context<K, S> {
    shared: Arc<Shared<S>>,
    fence: Fence<K>,
}

impl<K, S> Clone for Context<K, S> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            fence: self.fence.clone(),
        }
    }
}

impl<K, S> fmt::Debug for Context<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match &self.fence {
            Fence::None => "unfenced",
            Fence::Leader(_) => "leader election",
            Fence::Shard(_) => "sharded",
        };
        f.debug_struct("Context")
            .field("kind", &self.shared.kind)
            .field("manager", &self.shared.manager)
            .field("mode", &mode)
            .finish_non_exhaustive()
    }
}

impl<K, S> Deref for Context<K, S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.shared.state
    }
}

impl<K: Object + Decode, S> Context<K, S> {
    pub(super) fn new(shared: Arc<Shared<S>>, fence: Fence<K>) -> Self {
        Self { shared, fence }
    }

    /// The state given to [`run`](super::ControllerBuilder::run).
    pub fn state(&self) -> &S {
        &self.shared.state
    }

    /// The controller's client (its writes are not fenced: prefer this context's methods and
    /// [`api`](Self::api)).
    pub fn client(&self) -> &Client {
        &self.shared.client
    }

    /// The controller's name: the field manager of its applies and the component of its events.
    pub fn manager(&self) -> &str {
        &self.shared.manager
    }

    /// The API of `object`'s resource in its namespace, with the lease's guard on every request
    /// (leader election or sharding). Writes through it carry no precondition of their own:
    /// [`finalizer`](crate::finalizer()) adds one to each of its writes.
    pub fn api(&self, object: &K) -> Api<K> {
        self.api_of(self.shared.resource.clone(), object.namespace())
    }

    /// The API of another resource, in `namespace`, with the lease's guard on every request.
    pub fn api_of<T: Decode>(&self, resource: Resource, namespace: Option<&str>) -> Api<T> {
        let client = self.shared.client.clone();
        let api = match namespace.filter(|_| resource.namespaced) {
            Some(ns) => Api::namespaced_with(client, resource, ns),
            None => Api::all_with(client, resource),
        };
        match &self.fence {
            Fence::None => api,
            Fence::Leader(guard) => guard.protect(api),
            Fence::Shard(writer) => writer.guard().protect(api),
        }
    }

    /// The controller's event recorder (events are written in the background, never blocking).
    pub fn recorder(&self) -> &EventRecorder {
        &self.shared.recorder
    }

    /// A reference to `object` for events: its resource's API version and kind, namespace,
    /// name and uid.
    pub fn reference(&self, object: &K) -> ObjectReference {
        let reference = ObjectReference::new(
            self.shared.resource.api_version(),
            &self.shared.kind,
            object.namespace().unwrap_or(""),
            object.name(),
        );
        match object.uid() {
            Some(uid) => reference.with_uid(uid),
            None => reference,
        }
    }

    /// Records an event about `object` (aggregated and rate limited as client-go's recorder).
    pub fn event(&self, object: &K, type_: EventType, reason: &str, message: &str) {
        self.shared
            .recorder
            .event(&self.reference(object), type_, reason, message);
    }

    /// Records that a write of yours produced `written` (an object of the primary resource):
    /// until the cache has shown it, its key is requeued instead of reconciled on the older
    /// copy (BD7). The writes of this context record themselves; call it for writes made
    /// otherwise, through [`api`](Self::api) for example.
    pub fn record_write(&self, written: &K) {
        self.shared.consistency.record(written);
    }

    /// Applies a JSON merge patch to `seen`'s `status`, conditioned on its resourceVersion.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one request, fenced by the version seen.
    pub async fn patch_status(&self, seen: &K, patch: &Value) -> Result<K, FenceError> {
        let written = self.patch_status_unrecorded(seen, patch).await?;
        self.record_write(&written);
        Ok(written)
    }

    async fn patch_status_unrecorded(&self, seen: &K, patch: &Value) -> Result<K, FenceError> {
        match &self.fence {
            Fence::Shard(writer) => writer.merge_patch_status(seen, patch).await,
            _ => {
                let rv = crate::sharding::seen_version(seen)?;
                let patch = with_precondition(patch, rv)?;
                Ok(self
                    .api(seen)
                    .patch_status(seen.name(), &PatchOptions::default(), &Patch::Merge(patch))
                    .await?)
            }
        }
    }

    /// Sets `condition` in `seen`'s `status.conditions` (merged by type, its
    /// `observedGeneration` set to `seen`'s generation unless given, its `lastTransitionTime`
    /// moved only when its status changes; rules CD1–CD3) and writes the list with
    /// [`patch_status`](Self::patch_status). Answers `None` without writing when nothing
    /// changed, which makes it safe to call on every reconcile.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: at most one request, fenced by the version seen.
    pub async fn set_condition(
        &self,
        seen: &K,
        mut condition: Condition,
    ) -> Result<Option<K>, FenceError>
    where
        K: Serialize,
    {
        let unreadable = |reason: String| FenceError::Unreadable {
            object: seen.name().to_string(),
            reason,
        };
        let body = serde_json::to_value(seen).map_err(|e| unreadable(e.to_string()))?;
        let mut conditions: Vec<Condition> = match body.pointer("/status/conditions") {
            None | Some(Value::Null) => Vec::new(),
            Some(list) => serde_json::from_value(list.clone())
                .map_err(|e| unreadable(format!("status.conditions: {e}")))?,
        };
        if condition.observed_generation.is_none() {
            condition.observed_generation = seen.generation();
        }
        if !set_condition(&mut conditions, condition, &crate::conditions::now()) {
            return Ok(None);
        }
        let patch = json!({"status": {"conditions": conditions}});
        self.patch_status(seen, &patch).await.map(Some)
    }

    /// Server-side applies `child` (with `apiVersion`, `kind` and `metadata.name`) in
    /// `resource`, owned by `owner`: in `owner`'s namespace, with a controller owner reference
    /// to it, by this controller's field manager, forced. `resource` must be one the builder
    /// [`owns`](super::ControllerBuilder::owns) when sharded (its cache tells whether the child
    /// exists and whose it is); otherwise any resource.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one request. Dropped, the child may or may not have been written; the next
    /// reconcile applies it again.
    pub async fn apply_child<T: Serialize>(
        &self,
        owner: &K,
        resource: &Resource,
        child: &T,
    ) -> Result<DynamicObject, FenceError> {
        let body = self.owned_body(owner, resource, child)?;
        let name = body["metadata"]["name"].as_str().unwrap_or("").to_string();
        if name.is_empty() {
            return Err(FenceError::UnnamedChild);
        }
        let namespace = owner.namespace().filter(|_| resource.namespaced);
        let api: Api<DynamicObject> = self.api_of(resource.clone(), namespace);
        let options = PatchOptions::apply(self.shared.manager.clone()).force();
        let key = match namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.clone(),
        };
        let cache = self.shared.children.iter().find(|(r, _)| r == resource);
        let Fence::Shard(writer) = &self.fence else {
            // An owned child as cached is applied on the version seen, so that an apply the
            // network delays past a newer write (a new leader's) is refused; an unowned or
            // uncached one is applied as it is.
            let seen = cache.and_then(|(_, children)| children.get_by_key(&key));
            let body = match seen.as_ref().and_then(|c| c.resource_version()) {
                Some(rv) if !rv.is_empty() => with_precondition(&body, rv)?,
                _ => body,
            };
            return Ok(api.patch(&name, &options, &Patch::Apply(body)).await?);
        };
        let seen = cache
            .ok_or_else(|| FenceError::NotOwned {
                resource: resource.path(None),
            })?
            .1
            .get_by_key(&key);
        match seen {
            None => {
                let child: DynamicObject = serde_json::from_value(body)
                    .map_err(|e| FenceError::ChildNotAnObject(e.to_string()))?;
                writer.create_child(&api, owner, &child).await
            }
            Some(seen) => {
                writer.check(owner)?;
                let children = writer.for_children(api);
                let rv = children.check(&*seen)?;
                let mut body = with_precondition(&body, rv)?;
                body["metadata"]["labels"][children.label()] = json!(writer.identity());
                Ok(children
                    .api()
                    .patch(&name, &options, &Patch::Apply(body))
                    .await?)
            }
        }
    }

    /// `child` as a JSON object in `owner`'s namespace with a controller reference to `owner`.
    fn owned_body<T: Serialize>(
        &self,
        owner: &K,
        resource: &Resource,
        child: &T,
    ) -> Result<Value, FenceError> {
        let mut body =
            serde_json::to_value(child).map_err(|e| FenceError::ChildNotAnObject(e.to_string()))?;
        let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) else {
            return Err(FenceError::ChildNotAnObject(
                "no metadata object".to_string(),
            ));
        };
        if resource.namespaced {
            if let Some(ns) = owner.namespace() {
                metadata.insert("namespace".into(), json!(ns));
            }
        }
        let uid = owner.uid().filter(|uid| !uid.is_empty()).ok_or_else(|| {
            FenceError::ChildNotAnObject(format!("the owner {} has no uid", owner.name()))
        })?;
        metadata.insert(
            "ownerReferences".into(),
            json!([{
                "apiVersion": self.shared.resource.api_version(),
                "kind": self.shared.kind,
                "name": owner.name(),
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }]),
        );
        Ok(body)
    }
}
