//! Writes fenced twice: locally by the replica's shard lease and the object's assignment label,
//! and at the server by the object's `resourceVersion` (docs/sharding.md gives the argument).
//!
//! ```text
//!   reconcile(seen object) ── FencedWriter ──► local: shard LeaseGuard valid?  label names me?
//!                                  │               (else FenceError, nothing sent)
//!                                  └──────────► server: PUT / PATCH / DELETE with
//!                                                metadata.resourceVersion = seen's  ──► 409 if
//!                                                the object changed since (e.g. relabelled)
//! ```
//!
//! Rules (SH8–SH10 in docs/semantics.md):
//! - SH8: a write leaves the replica only while its shard lease guard is valid and the object,
//!   *as the replica last saw it*, carries the assignment label [`shard_label`]`(ring)` naming
//!   the replica.
//! - SH9: every update, patch and delete of an assigned object carries that seen object's
//!   `resourceVersion` as precondition; the sharder moves an object by relabelling it, which
//!   changes its resourceVersion, so a write computed before the move and delivered after it,
//!   however late, is refused by the server with 409 ([`FenceError::Fenced`]).
//! - SH10: a create has no object to carry a precondition. [`FencedWriter::create_child`]
//!   checks the *owner's* assignment and the guard, and requires a fixed name (no
//!   `generateName`), so that a late duplicate of a create is refused as AlreadyExists instead
//!   of making a second child. A create delivered after the owner moved can still land once:
//!   see docs/sharding.md for what bounds it.

use serde::Serialize;
use serde_json::Value;
use workqueue::shared_informer::reflector::store_index::Object;
use workqueue::shared_informer::reflector::{
    Api, ClientError, CreateOptions, Decode, DeleteOptions, Deleted, Patch, PatchOptions,
    Preconditions,
};

use crate::leader_election::LeaseGuard;

use super::ring::{Ring, RingLeases};

/// The prefix of assignment labels: an object of ring `r` is assigned to the replica named by
/// its label `shard.sharding.informer-rs.io/<r>`.
pub const SHARD_LABEL_PREFIX: &str = "shard.sharding.informer-rs.io/";

/// The label naming the replica an object of `ring` is assigned to.
pub fn shard_label(ring: &str) -> String {
    format!("{SHARD_LABEL_PREFIX}{ring}")
}

/// Why a [`FencedWriter`] did not write, or the server refused the write.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FenceError {
    /// This replica's shard lease guard is not valid: it may have left the ring (SH8).
    #[error("the shard lease of {identity} is not held: writes are refused")]
    LeaseNotHeld {
        /// This replica.
        identity: String,
    },
    /// The object, as last seen, is not assigned to this replica (SH8).
    #[error("{object} is assigned to {assigned_to:?}, not to {identity}: not written")]
    NotAssigned {
        /// The object's name.
        object: String,
        /// The replica its label names, if any.
        assigned_to: Option<String>,
        /// This replica.
        identity: String,
    },
    /// The object as seen has no resourceVersion, so no precondition can fence the write (SH9).
    #[error("{object} has no resourceVersion to fence the write with")]
    NoResourceVersion {
        /// The object's name.
        object: String,
    },
    /// The object to write carries another resourceVersion than the one seen (or none): the
    /// write would not be fenced by what the assignment check read (SH9).
    #[error("the object to write carries resourceVersion {written:?}, not the one seen ({seen})")]
    PreconditionMismatch {
        /// What the object to write carries.
        written: Option<String>,
        /// What the object seen carries.
        seen: String,
    },
    /// A merge patch that is not a JSON object (or whose `metadata` is not one) cannot carry the
    /// resourceVersion precondition (SH9).
    #[error("a fenced merge patch must be a JSON object with an object `metadata`")]
    NotAnObjectPatch,
    /// A child to create has no fixed name (SH10).
    #[error("a fenced create needs a fixed metadata.name (generateName cannot be deduplicated)")]
    UnnamedChild,
    /// A child to create already carries another member's assignment label: it would land in
    /// that member's cache, not in this replica's (SH10).
    #[error("the child {child} is labelled for {labelled}, not for {identity}")]
    ChildLabelledForAnother {
        /// The child's name.
        child: String,
        /// The member its label names.
        labelled: String,
        /// This replica.
        identity: String,
    },
    /// A child to create does not serialize to an object with a `metadata` object.
    #[error("the child to create does not serialize to an object with metadata: {0}")]
    ChildNotAnObject(String),
    /// The child exists already (409 AlreadyExists) but is not in this replica's cache: created
    /// for the owner by its previous replica (a create delivered late) and not yet relabelled.
    /// The sharder makes it follow its owner (SH16); requeue the owner and it appears in the
    /// cache, to be updated with [`FencedWriter::for_children`]'s writer.
    #[error("the child {child} exists but is not in this replica's cache yet: requeue the owner")]
    ChildExists {
        /// The child's name.
        child: String,
        /// The server's answer.
        #[source]
        source: ClientError,
    },
    /// The server refused the write because the object changed since it was seen (409
    /// Conflict): the fence held; read the object again (it may have moved to another replica).
    #[error("the object changed since it was read (409 Conflict): not written (another writer, or a replica that took the object over, came first); requeue to read it again")]
    Fenced(#[source] ClientError),
    /// A child was written in a resource the controller does not own, so its cache cannot say
    /// whose the child is (the builder's `owns` names the resources a sharded reconcile may
    /// write children in).
    #[error("{resource} is not a resource this controller owns: its children cannot be fenced")]
    NotOwned {
        /// The resource's path.
        resource: String,
    },
    /// The object as seen could not be read as the write needs (say, `status.conditions`
    /// that are not a list of conditions): nothing was sent.
    #[error("{object} cannot be read: {reason}")]
    Unreadable {
        /// The object's name.
        object: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Any other failure of the request.
    #[error(transparent)]
    Client(ClientError),
}

impl From<ClientError> for FenceError {
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::Conflict(_) => FenceError::Fenced(error),
            other => FenceError::Client(other),
        }
    }
}

/// The resourceVersion of `seen`, the precondition a fenced write carries (SH9); an object
/// seen without one cannot be written fenced.
pub(crate) fn seen_version<T: Object + ?Sized>(seen: &T) -> Result<&str, FenceError> {
    seen.resource_version()
        .filter(|rv| !rv.is_empty())
        .ok_or_else(|| FenceError::NoResourceVersion {
            object: seen.name().to_string(),
        })
}

/// `patch` with `metadata.resourceVersion` set to `rv`, the precondition the API server checks
/// (a patch whose result carries another resourceVersion than the stored one is a 409). A patch
/// that is not a JSON object, whose `metadata` is not one, or that carries another
/// resourceVersion is refused: it could not carry the precondition, or would carry one the
/// caller did not read.
pub(crate) fn with_precondition(patch: &Value, rv: &str) -> Result<Value, FenceError> {
    let mut patch = patch.clone();
    let Some(fields) = patch.as_object_mut() else {
        return Err(FenceError::NotAnObjectPatch);
    };
    let metadata = fields
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(FenceError::NotAnObjectPatch);
    };
    match metadata.get("resourceVersion") {
        None | Some(Value::Null) => {}
        Some(Value::String(written)) if written == rv => {}
        Some(other) => {
            return Err(FenceError::PreconditionMismatch {
                written: Some(other.to_string()),
                seen: rv.to_string(),
            })
        }
    }
    metadata.insert("resourceVersion".into(), Value::from(rv));
    Ok(patch)
}

/// Writes of one replica of a shard ring to objects of one resource, fenced by SH8–SH10 (see
/// [the sharding module](crate::sharding) and docs/sharding.md).
///
/// ```no_run
/// use controller::sharding::{FencedWriter, MemoryRingLeases, Ring};
/// use controller::leader_election::LeaderElectionConfig;
/// use workqueue::shared_informer::reflector::store_index::DynamicObject;
/// use workqueue::shared_informer::reflector::Api;
///
/// # async fn reconcile(ring: Ring<MemoryRingLeases>, widgets: Api<DynamicObject>, seen: DynamicObject)
/// # -> Result<(), controller::sharding::FenceError> {
/// let writer = FencedWriter::for_ring(widgets, &ring);
/// let mut desired = seen.clone(); // keeps seen's resourceVersion: the precondition
/// desired.data.insert("status".into(), serde_json::json!({"ready": true}));
/// writer.replace_status(&seen, &desired).await?;
/// # Ok(()) }
/// ```
pub struct FencedWriter<K> {
    api: Api<K>,
    guard: LeaseGuard,
    label: String,
    identity: String,
}

impl<K> Clone for FencedWriter<K> {
    fn clone(&self) -> Self {
        Self {
            api: self.api.clone(),
            guard: self.guard.clone(),
            label: self.label.clone(),
            identity: self.identity.clone(),
        }
    }
}

impl<K> std::fmt::Debug for FencedWriter<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FencedWriter")
            .field("label", &self.label)
            .field("identity", &self.identity)
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

impl<K: Decode> FencedWriter<K> {
    /// Writes through `api` as `identity` of `ring`, while `guard` (its shard lease) is valid.
    /// The guard is also checked by `api` right before each request leaves
    /// ([`LeaseGuard::protect`]), after any wait in the client's rate limiter.
    pub fn new(api: Api<K>, guard: LeaseGuard, ring: &str, identity: impl Into<String>) -> Self {
        Self {
            api: guard.protect(api),
            guard,
            label: shard_label(ring),
            identity: identity.into(),
        }
    }

    /// Writes through `api` as `ring`'s replica, with its shard lease guard.
    pub fn for_ring<S: RingLeases>(api: Api<K>, ring: &Ring<S>) -> Self {
        Self::new(api, ring.guard(), ring.name(), ring.identity())
    }

    /// A writer of this replica's children in another resource (a Widget's ConfigMaps), with
    /// the same shard lease guard and identity: it writes a child only while the child, as
    /// seen, carries this replica's label, conditioned on the child's seen resourceVersion. The
    /// sharder relabels an owner's children before it assigns the owner elsewhere (SH19), so a
    /// child write computed before a hand-over and delivered after it is refused by the server,
    /// as an owner's is.
    #[must_use]
    pub fn for_children<C: Decode>(&self, children: Api<C>) -> FencedWriter<C> {
        FencedWriter {
            api: self.guard.protect(children),
            guard: self.guard.clone(),
            label: self.label.clone(),
            identity: self.identity.clone(),
        }
    }

    /// The shard lease's guard every request of this writer checks.
    pub fn guard(&self) -> &LeaseGuard {
        &self.guard
    }

    /// The replica this writer writes as (the value of its assignment label).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The assignment label this writer checks.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The guarded API (reads go through unchecked; writes are checked by the guard only, so
    /// prefer this writer's methods).
    pub fn api(&self) -> &Api<K> {
        &self.api
    }

    /// The API to write `seen` through: this writer's, or, when it is over all namespaces, the
    /// same in `seen`'s namespace.
    fn api_in<T: Object>(&self, seen: &T) -> std::borrow::Cow<'_, Api<K>> {
        match seen.namespace().filter(|ns| !ns.is_empty()) {
            Some(ns) if self.api.namespace().is_none() => {
                std::borrow::Cow::Owned(self.api.within(ns))
            }
            _ => std::borrow::Cow::Borrowed(&self.api),
        }
    }

    /// SH8 on `seen`, and its resourceVersion (the precondition of SH9).
    pub fn check<'a, T: Object>(&self, seen: &'a T) -> Result<&'a str, FenceError> {
        if !self.guard.is_valid() {
            return Err(FenceError::LeaseNotHeld {
                identity: self.identity.clone(),
            });
        }
        let assigned_to = seen.label(&self.label);
        if assigned_to != Some(self.identity.as_str()) {
            return Err(FenceError::NotAssigned {
                object: seen.name().to_string(),
                assigned_to: assigned_to.map(str::to_string),
                identity: self.identity.clone(),
            });
        }
        seen_version(seen)
    }

    fn check_replacement<T: Object>(&self, seen: &K, object: &T) -> Result<(), FenceError> {
        let rv = self.check(seen)?;
        if object.resource_version() != Some(rv) {
            return Err(FenceError::PreconditionMismatch {
                written: object.resource_version().map(str::to_string),
                seen: rv.to_string(),
            });
        }
        Ok(())
    }

    /// Replaces `seen` by `object`, which must carry `seen`'s resourceVersion (a copy of
    /// `seen`, changed, does).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one request. Dropped, it may or may not have reached the server, like any
    /// request; a later fenced write is conditioned on a version read after it.
    pub async fn replace<T: Serialize + Object>(
        &self,
        seen: &K,
        object: &T,
    ) -> Result<K, FenceError> {
        self.check_replacement(seen, object)?;
        Ok(self
            .api_in(seen)
            .replace(seen.name(), &CreateOptions::default(), object)
            .await?)
    }

    /// [`replace`](Self::replace) through the `status` subresource.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one request (see [`replace`](Self::replace)).
    pub async fn replace_status<T: Serialize + Object>(
        &self,
        seen: &K,
        object: &T,
    ) -> Result<K, FenceError> {
        self.check_replacement(seen, object)?;
        Ok(self
            .api_in(seen)
            .replace_status(seen.name(), &CreateOptions::default(), object)
            .await?)
    }

    /// Applies a JSON merge patch to `seen`, with `metadata.resourceVersion` set to seen's in
    /// the patch (the API server checks a resourceVersion in a patch as a precondition).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one request (see [`replace`](Self::replace)).
    pub async fn merge_patch(&self, seen: &K, patch: &Value) -> Result<K, FenceError> {
        let patch = self.fenced_patch(seen, patch)?;
        Ok(self
            .api_in(seen)
            .patch(seen.name(), &PatchOptions::default(), &Patch::Merge(patch))
            .await?)
    }

    /// [`merge_patch`](Self::merge_patch) through the `status` subresource.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one request (see [`replace`](Self::replace)).
    pub async fn merge_patch_status(&self, seen: &K, patch: &Value) -> Result<K, FenceError> {
        let patch = self.fenced_patch(seen, patch)?;
        Ok(self
            .api_in(seen)
            .patch_status(seen.name(), &PatchOptions::default(), &Patch::Merge(patch))
            .await?)
    }

    /// `patch` with `metadata.resourceVersion` set to seen's. A patch that is not a JSON object,
    /// whose `metadata` is not one, or that carries another resourceVersion is refused: it could
    /// not carry the precondition, or would carry one the assignment check did not read.
    fn fenced_patch(&self, seen: &K, patch: &Value) -> Result<Value, FenceError> {
        let rv = self.check(seen)?;
        with_precondition(patch, rv)
    }

    /// Deletes `seen`, with its resourceVersion and uid as preconditions.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one request (see [`replace`](Self::replace)).
    pub async fn delete(&self, seen: &K) -> Result<Deleted<K>, FenceError> {
        let rv = self.check(seen)?;
        let options = DeleteOptions {
            preconditions: Some(Preconditions {
                resource_version: Some(rv.to_string()),
                uid: seen.uid().map(str::to_string),
            }),
            ..DeleteOptions::default()
        };
        Ok(self.api_in(seen).delete(seen.name(), &options).await?)
    }

    /// Creates `child` through `children` for the owner `owner_seen` (SH10): refused locally
    /// unless the shard lease is held and the owner, as seen, is assigned to this replica; the
    /// child must have a fixed name, so that a duplicate delivered late is refused by the
    /// server as AlreadyExists. The child is created with this replica's assignment label (set
    /// here when it has none), so that this replica's label-selector cache sees it; a child
    /// labelled for another member is refused. `children` is protected by the guard as well.
    ///
    /// A child that exists already is [`FenceError::ChildExists`]: requeue the owner.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one request. Dropped, the child may or may not exist; the next call finds it
    /// (`ChildExists` until the cache has it).
    pub async fn create_child<C: Decode, T: Serialize + Object>(
        &self,
        children: &Api<C>,
        owner_seen: &K,
        child: &T,
    ) -> Result<C, FenceError> {
        self.check(owner_seen)?;
        let name = child.name();
        if name.is_empty() {
            return Err(FenceError::UnnamedChild);
        }
        if let Some(other) = child.label(&self.label).filter(|l| *l != self.identity) {
            return Err(FenceError::ChildLabelledForAnother {
                child: name.to_string(),
                labelled: other.to_string(),
                identity: self.identity.clone(),
            });
        }
        let mut body =
            serde_json::to_value(child).map_err(|e| FenceError::ChildNotAnObject(e.to_string()))?;
        let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) else {
            return Err(FenceError::ChildNotAnObject(
                "no metadata object".to_string(),
            ));
        };
        let labels = metadata
            .entry("labels")
            .or_insert_with(|| Value::Object(Default::default()));
        if !labels.is_object() {
            *labels = Value::Object(Default::default());
        }
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(self.label.clone(), Value::from(self.identity.clone()));
        }
        // A children API over all namespaces creates the child in its owner's.
        let children = match owner_seen.namespace().filter(|ns| !ns.is_empty()) {
            Some(ns) if children.namespace().is_none() => children.within(ns),
            _ => children.clone(),
        };
        let children = self.guard.protect(children);
        match children.create(&CreateOptions::default(), &body).await {
            Ok(created) => Ok(created),
            Err(source @ ClientError::AlreadyExists(_)) => Err(FenceError::ChildExists {
                child: name.to_string(),
                source,
            }),
            Err(error) => Err(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;
    use tokio::time::Instant;
    use workqueue::shared_informer::reflector::store_index::DynamicObject;
    use workqueue::shared_informer::reflector::{Client, ClusterConfig, Resource};

    /// A writer whose requests could go nowhere: every case here is decided before sending.
    fn writer(valid: bool) -> FencedWriter<DynamicObject> {
        let client = Client::new(&ClusterConfig::new("http://127.0.0.1:1").unwrap()).unwrap();
        let api = Api::namespaced_with(client, Resource::namespaced("", "v1", "configmaps"), "ns");
        let guard = LeaseGuard::new();
        if valid {
            guard.extend_to(Instant::now() + Duration::from_secs(3600));
        }
        FencedWriter::new(api, guard, "widgets", "a")
    }

    fn seen(label: Option<&str>, rv: Option<&str>) -> DynamicObject {
        let mut obj = DynamicObject::new("v1", "ConfigMap")
            .within("ns")
            .named("w");
        if let Some(to) = label {
            obj = obj.with_label(shard_label("widgets"), to);
        }
        if let Some(rv) = rv {
            obj = obj.with_resource_version(rv);
        }
        obj
    }

    #[tokio::test]
    async fn the_local_checks_refuse_before_anything_is_sent() {
        let mine = seen(Some("a"), Some("7"));
        assert_eq!(writer(true).check(&mine).unwrap(), "7");
        assert!(matches!(
            writer(false).check(&mine),
            Err(FenceError::LeaseNotHeld { .. })
        ));
        for (label, expected) in [(Some("b"), Some("b")), (None, None)] {
            match writer(true).check(&seen(label, Some("7"))) {
                Err(FenceError::NotAssigned { assigned_to, .. }) => {
                    assert_eq!(assigned_to.as_deref(), expected)
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(
            writer(true).check(&seen(Some("a"), None)),
            Err(FenceError::NoResourceVersion { .. })
        ));
        assert!(matches!(
            writer(true).check(&seen(Some("a"), Some(""))),
            Err(FenceError::NoResourceVersion { .. })
        ));
    }

    #[tokio::test]
    async fn a_replacement_must_carry_the_seen_resource_version() {
        let writer = writer(true);
        let mine = seen(Some("a"), Some("7"));
        let mut stripped = mine.clone();
        stripped.metadata.resource_version = None;
        let refused = writer.replace(&mine, &stripped).await;
        assert!(
            matches!(
                refused,
                Err(FenceError::PreconditionMismatch { written: None, .. })
            ),
            "{refused:?}"
        );
        let newer = mine.clone().with_resource_version("8");
        let refused = writer.replace_status(&mine, &newer).await;
        assert!(
            matches!(refused, Err(FenceError::PreconditionMismatch { .. })),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn a_merge_patch_gets_the_seen_resource_version_or_is_refused() {
        let writer = writer(true);
        let mine = seen(Some("a"), Some("7"));
        assert_eq!(
            writer
                .fenced_patch(&mine, &json!({"data": {"x": "1"}}))
                .unwrap(),
            json!({"data": {"x": "1"}, "metadata": {"resourceVersion": "7"}})
        );
        assert_eq!(
            writer
                .fenced_patch(
                    &mine,
                    &json!({"metadata": {"labels": {"k": "v"}, "resourceVersion": "7"}})
                )
                .unwrap(),
            json!({"metadata": {"labels": {"k": "v"}, "resourceVersion": "7"}})
        );
        for patch in [
            json!([{"op": "remove"}]),
            json!(null),
            json!({"metadata": 3}),
        ] {
            assert!(
                matches!(
                    writer.fenced_patch(&mine, &patch),
                    Err(FenceError::NotAnObjectPatch)
                ),
                "{patch}"
            );
        }
        assert!(matches!(
            writer.fenced_patch(&mine, &json!({"metadata": {"resourceVersion": "6"}})),
            Err(FenceError::PreconditionMismatch { .. })
        ));
    }

    #[tokio::test]
    async fn a_child_needs_a_fixed_name() {
        let writer = writer(true);
        let owner = seen(Some("a"), Some("7"));
        let unnamed = DynamicObject::new("v1", "ConfigMap").within("ns");
        let refused = writer.create_child(writer.api(), &owner, &unnamed).await;
        assert!(
            matches!(refused, Err(FenceError::UnnamedChild)),
            "{refused:?}"
        );
    }
}
