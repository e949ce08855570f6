//! Finalizers: a controller's cleanup that runs before the object it manages goes.
//!
//! [`finalizer`] wraps a reconcile. While the object lives it first makes sure the object
//! carries the controller's finalizer, then calls the reconcile with [`FinalizerEvent::Apply`];
//! once deletion is requested (the object has a `deletionTimestamp`) and the finalizer is still
//! there, it calls it with [`FinalizerEvent::Cleanup`] and removes the finalizer only when the
//! cleanup succeeded, so the server deletes the object only after the cleanup. Rules
//! (FZ1–FZ4 in docs/semantics.md):
//!
//! - FZ1: the finalizer is added before the reconcile ever acts on the object: the first call
//!   adds it, then runs [`FinalizerEvent::Apply`] on the object the server answered, which
//!   carries it (no filter on the watch events, such as a generation predicate, can leave the
//!   object waiting for its first reconcile);
//! - FZ2: the cleanup runs only on an object being deleted that still has the finalizer, and the
//!   finalizer is removed only after the cleanup returned `Ok`: a failed cleanup keeps it, and
//!   the error goes to the caller (for its backoff);
//! - FZ3: every add and removal is a JSON merge patch of `metadata.finalizers` carrying the seen
//!   `resourceVersion`, so it can neither drop another controller's finalizer added meanwhile nor
//!   act on a stale copy (a conflict is [`FinalizerError::Conflict`]: read again and retry);
//! - FZ4: idempotent: calling it again on the same object does nothing more than the first call
//!   did (an object with the finalizer is not patched again; an object being deleted without it
//!   is left alone, since the controller's cleanup already ran; an object being deleted that
//!   never got the finalizer is never given one).
//!
//! Works for every object type with metadata: typed (`k8s_openapi`, your own serde types),
//! `DynamicObject`, `CompactObject`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use controller::finalizer::{finalizer, FinalizerEvent, FinalizerError};
//! use controller::Action;
//! use workqueue::shared_informer::reflector::store_index::DynamicObject;
//! use workqueue::shared_informer::reflector::{Api, ClientError};
//!
//! async fn reconcile(api: Api<DynamicObject>, widget: Arc<DynamicObject>)
//!     -> Result<Action, FinalizerError<ClientError>> {
//!     finalizer(&api, "widgets.example.com/cleanup", widget, |event| async move {
//!         match event {
//!             FinalizerEvent::Apply(widget) => {
//!                 // create or update what the widget wants
//!                 let _ = widget;
//!                 Ok(Action::Done)
//!             }
//!             FinalizerEvent::Cleanup(widget) => {
//!                 // delete what lives outside Kubernetes; an error keeps the finalizer
//!                 let _ = widget;
//!                 Ok::<_, ClientError>(Action::Done)
//!             }
//!         }
//!     })
//!     .await
//! }
//! ```

use std::future::Future;
use std::sync::Arc;

use serde_json::json;
use workqueue::shared_informer::reflector::store_index::Object;
use workqueue::shared_informer::reflector::{Api, ClientError, Decode, Patch, PatchOptions};

use crate::runner::Action;

/// What the wrapped reconcile is asked to do.
#[derive(Debug)]
pub enum FinalizerEvent<K> {
    /// The object lives and carries the finalizer: bring the world to what it asks for.
    Apply(Arc<K>),
    /// Deletion is requested and the finalizer is still there: clean up; the finalizer is
    /// removed when this returns `Ok`.
    Cleanup(Arc<K>),
}

/// Why [`finalizer`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FinalizerError<E> {
    /// The reconcile's [`FinalizerEvent::Apply`] failed.
    #[error("reconcile failed: {0}")]
    Apply(#[source] E),
    /// The reconcile's [`FinalizerEvent::Cleanup`] failed: the finalizer stays, and the
    /// object with it.
    #[error("cleanup failed, the finalizer stays: {0}")]
    Cleanup(#[source] E),
    /// Adding or removing the finalizer met a newer version of the object (409): read it
    /// again and retry.
    #[error("the object changed since it was read (409 Conflict); the finalizer was not written")]
    Conflict(#[source] ClientError),
    /// Adding or removing the finalizer failed otherwise.
    #[error("writing the finalizer failed: {0}")]
    Write(#[source] ClientError),
    /// The name is not a valid finalizer (empty, or without the `domain/name` form that
    /// kube-apiserver asks of finalizers other than its own).
    #[error(
        "invalid finalizer name {0:?}: it must be a qualified name such as example.com/cleanup"
    )]
    InvalidName(String),
    /// The object has no name or no resourceVersion, so no fenced patch can be written.
    #[error("the object has no name or no resourceVersion to write the finalizer against")]
    NoVersion,
}

/// Runs `reconcile` for `object` under the finalizer `name` (rules FZ1–FZ4 in the
/// [module documentation](self)), writing the finalizer through `api` (the object's own
/// resource and namespace).
///
/// # Cancel safety
///
/// Cancel safe as far as the finalizer goes: each write is one request, whose effect is read
/// back from the object's next version. Whether the reconcile is cancel safe is the reconcile's.
pub async fn finalizer<K, F, Fut, E>(
    api: &Api<K>,
    name: &str,
    object: Arc<K>,
    reconcile: F,
) -> Result<Action, FinalizerError<E>>
where
    K: Object + Decode,
    F: FnOnce(FinalizerEvent<K>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
{
    if !is_qualified(name) {
        return Err(FinalizerError::InvalidName(name.to_string()));
    }
    let has = object.finalizers().iter().any(|f| f == name);
    let deleting = object.deletion_timestamp().is_some();
    match (deleting, has) {
        // FZ4: already cleaned up (or never ours): nothing to do.
        (true, false) => Ok(Action::Done),
        (true, true) => {
            let outcome = reconcile(FinalizerEvent::Cleanup(object.clone())).await;
            let action = outcome.map_err(FinalizerError::Cleanup)?;
            let rest: Vec<&String> = object.finalizers().iter().filter(|f| *f != name).collect();
            write_finalizers(api, &*object, &rest).await?;
            Ok(action)
        }
        (false, false) => {
            // FZ1: added first, then Apply on the server's answer, which carries it.
            let mut all: Vec<&String> = object.finalizers().iter().collect();
            let owned = name.to_string();
            all.push(&owned);
            let with = write_finalizers(api, &*object, &all).await?;
            reconcile(FinalizerEvent::Apply(Arc::new(with)))
                .await
                .map_err(FinalizerError::Apply)
        }
        (false, true) => reconcile(FinalizerEvent::Apply(object))
            .await
            .map_err(FinalizerError::Apply),
    }
}

/// FZ3: one merge patch of the whole list, conditioned on the seen resourceVersion.
async fn write_finalizers<K, E>(
    api: &Api<K>,
    seen: &K,
    finalizers: &[&String],
) -> Result<K, FinalizerError<E>>
where
    K: Object + Decode,
{
    let (name, Some(rv)) = (seen.name(), seen.resource_version()) else {
        return Err(FinalizerError::NoVersion);
    };
    if name.is_empty() || rv.is_empty() {
        return Err(FinalizerError::NoVersion);
    }
    let patch = json!({"metadata": {"resourceVersion": rv, "finalizers": finalizers}});
    match api
        .patch(name, &PatchOptions::default(), &Patch::Merge(patch))
        .await
    {
        Ok(written) => Ok(written),
        Err(error @ ClientError::Conflict(_)) => Err(FinalizerError::Conflict(error)),
        Err(error) => Err(FinalizerError::Write(error)),
    }
}

/// A finalizer name kube-apiserver accepts from a controller: `domain/name`, each part
/// non-empty, no spaces.
fn is_qualified(name: &str) -> bool {
    match name.split_once('/') {
        Some((domain, rest)) => {
            !domain.is_empty()
                && !rest.is_empty()
                && !rest.contains('/')
                && !name.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finalizer_name_is_a_qualified_name() {
        assert!(is_qualified("example.com/cleanup"));
        for bad in [
            "",
            "cleanup",
            "/cleanup",
            "example.com/",
            "a/b/c",
            "example.com/clean up",
        ] {
            assert!(!is_qualified(bad), "{bad:?}");
        }
    }
}
