//! [`InformerName`]: a process-wide unique name for a set of informers, such as one controller
//! manager's factory (client-go's `cache.InformerName`), and [`InformerNameAndResource`], the
//! name plus one resource, which labels one informer's logs and says whether its metrics are to be
//! published.
//!
//! Why a registry: metrics are labelled by name and resource; two factories under one name, or
//! two informers of one resource under one name, would publish two series under one label set
//! and each would overwrite the other. So a name is *reserved* — a second reservation while the
//! first is held is an error — and within a name, only the first informer of each resource gets
//! a reserved identity; later ones of the same resource still run and log under the name, but
//! [`InformerNameAndResource::is_reserved`] is false for them, so they should not publish.
//! Releasing the name (explicitly, or by dropping its last handle) frees it for reuse and
//! un-reserves every identity made from it.

use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use thiserror::Error;

/// Why a name could not be reserved.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum InformerNameError {
    /// The name is empty.
    #[error("informer name cannot be empty")]
    Empty,
    /// The name is reserved already, and not released.
    #[error("informer name {0:?} is already registered")]
    AlreadyReserved(String),
}

/// Names reserved and not released. The process has one ([`InformerName::reserve`]); tests can
/// make their own.
///
/// Invariant: a name maps to the reserved flag of the one [`InformerName`] holding it, and that
/// flag is true; releasing removes the entry before anyone can reserve the name again.
#[derive(Debug, Default)]
pub struct InformerNameRegistry {
    names: Mutex<HashMap<String, Arc<AtomicBool>>>,
}

impl InformerNameRegistry {
    /// An empty registry, apart from the process-wide one.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// The process-wide registry [`InformerName::reserve`] uses.
    pub fn global() -> &'static Arc<InformerNameRegistry> {
        static GLOBAL: LazyLock<Arc<InformerNameRegistry>> = LazyLock::new(Default::default);
        &GLOBAL
    }

    /// Reserves `name` in this registry.
    ///
    /// # Errors
    ///
    /// [`InformerNameError::Empty`] for `""`; [`InformerNameError::AlreadyReserved`] while
    /// another handle holds it.
    pub fn reserve(self: &Arc<Self>, name: &str) -> Result<InformerName, InformerNameError> {
        if name.is_empty() {
            return Err(InformerNameError::Empty);
        }
        let mut names = self.names.lock();
        if names
            .get(name)
            .is_some_and(|held| held.load(Ordering::Acquire))
        {
            return Err(InformerNameError::AlreadyReserved(name.to_string()));
        }
        let reserved = Arc::new(AtomicBool::new(true));
        names.insert(name.to_string(), Arc::clone(&reserved));
        Ok(InformerName {
            inner: Arc::new(NameInner {
                name: name.to_string(),
                registry: Arc::clone(self),
                reserved,
                resources: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Whether `name` is reserved now.
    pub fn is_reserved(&self, name: &str) -> bool {
        self.names
            .lock()
            .get(name)
            .is_some_and(|held| held.load(Ordering::Acquire))
    }
}

struct NameInner {
    name: String,
    registry: Arc<InformerNameRegistry>,
    /// True until released; the registry's entry for the name is this flag.
    reserved: Arc<AtomicBool>,
    /// Each resource registered under the name, with the flag its identity reads.
    resources: Mutex<HashMap<String, Arc<AtomicBool>>>,
}

impl NameInner {
    fn release(&self) {
        // The resources first, so no identity reads reserved once the name is free again.
        let mut resources = self.resources.lock();
        for flag in resources.values() {
            flag.store(false, Ordering::Release);
        }
        resources.clear();
        drop(resources);
        if self.reserved.swap(false, Ordering::AcqRel) {
            let mut names = self.registry.names.lock();
            // Only our own entry: after a release the name may belong to someone else already.
            if names
                .get(&self.name)
                .is_some_and(|held| Arc::ptr_eq(held, &self.reserved))
            {
                names.remove(&self.name);
            }
        }
    }
}

impl Drop for NameInner {
    fn drop(&mut self) {
        self.release();
    }
}

/// A reserved informer name (see the module documentation). Cheap to clone: clones share one
/// reservation, released by [`release`](Self::release) or when the last clone is dropped.
///
/// Keep the handle as long as the name is to stay reserved: unlike client-go, which keeps a name
/// for the life of the process, a handle discarded at once (`let _ = InformerName::reserve(..)`)
/// frees the name at once (rule D13.4). Hence `#[must_use]`: `InformerName::reserve("kcm")?;` as
/// a statement is warned of.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// # fn main() -> Result<(), shared_informer::InformerNameError> {
/// shared_informer::InformerName::reserve("doc-discarded")?; // freed again at once
/// # Ok(()) }
/// ```
///
/// ```
/// # fn main() -> Result<(), shared_informer::InformerNameError> {
/// use shared_informer::{InformerName, InformerNameRegistry};
///
/// let _ = InformerName::reserve("doc-discarded")?;
/// assert!(!InformerNameRegistry::global().is_reserved("doc-discarded"), "dropped at once");
/// let kept = InformerName::reserve("doc-discarded")?;
/// assert!(InformerNameRegistry::global().is_reserved("doc-discarded"));
/// # drop(kept); Ok(()) }
/// ```
///
/// ```
/// use shared_informer::{InformerName, InformerNameError};
///
/// let name = InformerName::reserve("doc-example-controller")?;
/// assert_eq!(
///     InformerName::reserve("doc-example-controller").unwrap_err(),
///     InformerNameError::AlreadyReserved("doc-example-controller".into())
/// );
/// let pods = name.with_resource("pods.v1");
/// assert!(pods.is_reserved());
/// assert!(!name.with_resource("pods.v1").is_reserved(), "a second pods informer does not publish");
/// name.release();
/// assert!(!pods.is_reserved());
/// let again = InformerName::reserve("doc-example-controller")?;
/// # drop(again);
/// # Ok::<(), InformerNameError>(())
/// ```
#[derive(Clone)]
#[must_use = "dropping the last handle releases the name: keep it for as long as the name is to stay reserved (client-go keeps a name for the process)"]
pub struct InformerName {
    inner: Arc<NameInner>,
}

impl fmt::Debug for InformerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerName")
            .field("name", &self.inner.name)
            .field("reserved", &self.is_reserved())
            .finish()
    }
}

impl InformerName {
    /// Reserves `name` in the process-wide registry (client-go's `NewInformerName`).
    ///
    /// # Errors
    ///
    /// As [`InformerNameRegistry::reserve`]: empty, or reserved already.
    pub fn reserve(name: &str) -> Result<InformerName, InformerNameError> {
        InformerNameRegistry::global().reserve(name)
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether it is still reserved (not released).
    pub fn is_reserved(&self) -> bool {
        self.inner.reserved.load(Ordering::Acquire)
    }

    /// The identity of one informer of `resource` under this name. The first identity of each
    /// resource is reserved; a later one of the same resource is not (logged), nor is any made
    /// after [`release`](Self::release).
    pub fn with_resource(&self, resource: &str) -> InformerNameAndResource {
        let flag = Arc::new(AtomicBool::new(false));
        let mut resources = self.inner.resources.lock();
        if self.is_reserved() {
            if resources.contains_key(resource) {
                tracing::error!(
                    informer_name = %self.inner.name,
                    resource,
                    "duplicate informer registration: its metrics will not be published"
                );
            } else {
                flag.store(true, Ordering::Release);
                resources.insert(resource.to_string(), Arc::clone(&flag));
            }
        }
        InformerNameAndResource {
            name: Arc::from(self.inner.name.as_str()),
            resource: Arc::from(resource),
            reserved: flag,
        }
    }

    /// Frees the name for reuse, and un-reserves every identity made from it. Idempotent; also
    /// done when the last clone is dropped.
    pub fn release(&self) {
        self.inner.release();
    }
}

/// One informer's identity under an [`InformerName`]: the name and the resource (client-go's
/// `InformerNameAndResource`). Two are equal when name and resource are.
#[derive(Clone)]
pub struct InformerNameAndResource {
    name: Arc<str>,
    resource: Arc<str>,
    reserved: Arc<AtomicBool>,
}

impl InformerNameAndResource {
    /// The informer name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The resource.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Whether this identity holds the name for its resource: the first of its resource under a
    /// name not released. Only then should its metrics be published. One atomic load.
    pub fn is_reserved(&self) -> bool {
        self.reserved.load(Ordering::Acquire)
    }
}

impl fmt::Debug for InformerNameAndResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerNameAndResource")
            .field("name", &self.name)
            .field("resource", &self.resource)
            .field("reserved", &self.is_reserved())
            .finish()
    }
}

impl PartialEq for InformerNameAndResource {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.resource == other.resource
    }
}

impl Eq for InformerNameAndResource {}

impl Hash for InformerNameAndResource {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        self.resource.hash(state);
    }
}

impl fmt::Display for InformerNameAndResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_reserved_once_until_released() {
        let registry = InformerNameRegistry::new();
        assert_eq!(registry.reserve("").unwrap_err(), InformerNameError::Empty);
        let kcm = registry.reserve("kcm").unwrap();
        assert!(registry.is_reserved("kcm"));
        let err = registry.reserve("kcm").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"informer name "kcm" is already registered"#
        );
        let other = registry.reserve("scheduler").unwrap();
        kcm.release();
        kcm.release(); // idempotent
        assert!(!kcm.is_reserved());
        assert!(!registry.is_reserved("kcm"));
        let again = registry.reserve("kcm").unwrap();
        // The old handle's release must not free the new holder's name.
        kcm.release();
        drop(kcm);
        assert!(registry.is_reserved("kcm"));
        assert!(again.is_reserved() && other.is_reserved());
    }

    #[test]
    fn dropping_the_last_handle_releases_the_name() {
        let registry = InformerNameRegistry::new();
        let name = registry.reserve("kcm").unwrap();
        let clone = name.clone();
        let pods = name.with_resource("pods.v1");
        drop(name);
        assert!(registry.is_reserved("kcm"), "a clone still holds it");
        drop(clone);
        assert!(!registry.is_reserved("kcm"));
        assert!(!pods.is_reserved());
        let _again = registry.reserve("kcm").unwrap();
    }

    /// The difference from client-go (D13.4): a handle discarded at once frees the name at
    /// once, where client-go keeps it for the process; the type is `#[must_use]` for this.
    #[test]
    fn a_handle_discarded_at_once_frees_the_name_at_once() {
        let registry = InformerNameRegistry::new();
        let _ = registry.reserve("kcm").unwrap();
        assert!(!registry.is_reserved("kcm"));
        let _kept = registry.reserve("kcm").unwrap();
        assert!(registry.is_reserved("kcm"));
    }

    #[test]
    fn only_the_first_informer_of_a_resource_holds_the_name() {
        let registry = InformerNameRegistry::new();
        let name = registry.reserve("kcm").unwrap();
        let pods = name.with_resource("pods.v1");
        let twin = name.with_resource("pods.v1");
        let nodes = name.with_resource("nodes.v1");
        assert!(pods.is_reserved() && nodes.is_reserved());
        assert!(!twin.is_reserved());
        assert_eq!(pods, twin, "equal by name and resource");
        name.release();
        assert!(!pods.is_reserved() && !nodes.is_reserved());
        assert!(!name.with_resource("services.v1").is_reserved());
    }
}
