//! [`TransformingListerWatcher`]: an informer of one type whose cache holds another, each object
//! converted as it arrives (client-go's `TransformFunc` used to change an object's type, such as
//! a `Pod` cached as a small summary).
//!
//! Why an adaptor below the informer rather than a second form of
//! [`set_transform`](crate::SharedIndexInformer::set_transform): an informer's queue, cache,
//! handlers and listers are all of one type `K`, and the transform `set_transform` installs runs
//! inside the queue, where objects are `Arc<K>` already. A transform that changes the type must
//! run before the queue, on each decoded object; so it wraps the lister-watcher, and the informer
//! is simply an informer of the new type: `SharedIndexInformer<T, TransformingListerWatcher<…>>`.
//! `set_transform` still works on it, as a second, same-type step on `T`.
//!
//! The conversion takes the decoded object by value, so nothing is cloned: the source object is
//! consumed where it was decoded and only the result is cached.
//!
//! A failed conversion is handled as client-go handles a transform that fails inside its queue:
//! a list page with one failing object fails as a whole (`unable to sync list result:
//! transforming: …`; the reflector retries the list after its backoff), and a watch event whose
//! object fails is logged and dropped, its resource version kept (it goes on as a bookmark), as
//! a reflector does with a watch event its store refuses.
//!
//! The result need not be a Kubernetes object: a value without metadata (`impl Object for T {}`)
//! is cached under the informer's key function ([`InformerOptions::key_fn`], rule D10.3; the
//! default, `namespace/name`, refuses it with `object has no meta`). Such a value carries no
//! resource version, so each watch event of one is followed by a bookmark of its source's: the
//! reflector resumes its watches where they were.
//!
//! [`InformerOptions::key_fn`]: crate::InformerOptions::key_fn

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::StreamExt;
use reflector::delta_fifo::FifoError;
use reflector::store_index::{BoxError, Object, ResourceVersion};
use reflector::{
    Bookmark, ListOptions, ListerWatcher, ObjectList, ReflectorError, Representation, Resource,
    WatchEvent, WatchOptions, WatchStream,
};

/// A lister-watcher of `T` made of a lister-watcher of `S` and a conversion `S → T` (see the
/// module documentation). It forwards what the inner one says of itself (watch-list support,
/// representation, resource); the decode lane needs no forwarding (the reflector's lane is used
/// by the inner one's decoders however it is wrapped).
///
/// ```
/// use shared_informer::{InformerOptions, SharedIndexInformer, TransformingListerWatcher};
/// use shared_informer::reflector::store_index::{DynamicObject, Object, ObjectMeta};
/// # use shared_informer::reflector::{ListOptions, ListerWatcher, ObjectList, ReflectorError, WatchOptions, WatchStream};
/// # struct Never;
/// # impl ListerWatcher<DynamicObject> for Never {
/// #     async fn list(&self, _: ListOptions) -> Result<ObjectList<DynamicObject>, ReflectorError> { std::future::pending().await }
/// #     async fn watch(&self, _: WatchOptions) -> Result<WatchStream<DynamicObject>, ReflectorError> { std::future::pending().await }
/// # }
///
/// /// What the controller keeps of a pod: its metadata and node.
/// struct PodSummary {
///     metadata: ObjectMeta,
///     node: Option<String>,
/// }
/// impl Object for PodSummary {
///     fn object_meta(&self) -> Option<&ObjectMeta> {
///         Some(&self.metadata)
///     }
/// }
///
/// # let pods_lw = Never;
/// let lw = TransformingListerWatcher::new(pods_lw, |pod: DynamicObject| {
///     Ok(PodSummary {
///         node: pod.data.get("spec").and_then(|s| s["nodeName"].as_str()).map(String::from),
///         metadata: pod.metadata,
///     })
/// });
/// let summaries: SharedIndexInformer<PodSummary, _> =
///     SharedIndexInformer::new(lw, InformerOptions::default());
/// # let _ = summaries;
/// ```
pub struct TransformingListerWatcher<L, S, F> {
    inner: L,
    transform: Arc<F>,
    _source: PhantomData<fn(S)>,
}

impl<L: fmt::Debug, S, F> fmt::Debug for TransformingListerWatcher<L, S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransformingListerWatcher")
            .field("inner", &self.inner)
            .field("source", &std::any::type_name::<S>())
            .finish()
    }
}

impl<L, S, F> TransformingListerWatcher<L, S, F> {
    /// Wraps `inner`, converting each object it lists or watches with `transform`.
    pub fn new<T>(inner: L, transform: F) -> Self
    where
        F: Fn(S) -> Result<T, BoxError>,
    {
        TransformingListerWatcher {
            inner,
            transform: Arc::new(transform),
            _source: PhantomData,
        }
    }

    /// The wrapped lister-watcher.
    pub fn inner(&self) -> &L {
        &self.inner
    }
}

impl<L, S, T, F> ListerWatcher<T> for TransformingListerWatcher<L, S, F>
where
    L: ListerWatcher<S>,
    S: Object,
    T: Object,
    F: Fn(S) -> Result<T, BoxError> + Send + Sync + 'static,
{
    async fn list(&self, options: ListOptions) -> Result<ObjectList<T>, ReflectorError> {
        let page = self.inner.list(options).await?;
        let items = page
            .items
            .into_iter()
            .map(|obj| (self.transform)(obj))
            .collect::<Result<Vec<T>, BoxError>>()
            .map_err(|e| ReflectorError::SyncList(FifoError::Transform(e)))?;
        Ok(ObjectList {
            items,
            resource_version: page.resource_version,
            continue_token: page.continue_token,
            kind: page.kind,
            api_version: page.api_version,
            shard_info: page.shard_info,
        })
    }

    async fn watch(&self, options: WatchOptions) -> Result<WatchStream<T>, ReflectorError> {
        let events = self.inner.watch(options).await?;
        let transform = Arc::clone(&self.transform);
        Ok(events
            .flat_map(move |event| {
                let converted = match event {
                    Ok(event) => convert(&*transform, event),
                    Err(e) => one(Err(e)),
                };
                futures::stream::iter(converted)
            })
            .boxed())
    }

    fn supports_watch_list(&self) -> bool {
        self.inner.supports_watch_list()
    }

    fn representation(&self) -> Representation {
        self.inner.representation()
    }

    fn resource(&self) -> Option<Resource> {
        self.inner.resource()
    }
}

/// What one watch event becomes: nothing, the converted event, or the converted event and a
/// bookmark of its source's resource version (for a value without metadata).
type Converted<T> = std::iter::Flatten<std::array::IntoIter<Option<WatchItem<T>>, 2>>;

type WatchItem<T> = Result<WatchEvent<T>, ReflectorError>;

fn one<T>(item: WatchItem<T>) -> Converted<T> {
    [Some(item), None].into_iter().flatten()
}

/// One watch event converted. A failed conversion becomes a bookmark of the object's resource
/// version (nothing, if it has none), after an error log naming the object by key. A converted
/// value without metadata that reports no resource version is followed by a bookmark of its
/// source's, so the reflector still learns where the watch is (it records no resource version
/// from such a value, C10.2).
fn convert<S: Object, T: Object>(
    transform: &(impl Fn(S) -> Result<T, BoxError> + ?Sized),
    event: WatchEvent<S>,
) -> Converted<T> {
    let (kind, obj): (fn(T) -> WatchEvent<T>, S) = match event {
        WatchEvent::Added(obj) => (WatchEvent::Added, obj),
        WatchEvent::Modified(obj) => (WatchEvent::Modified, obj),
        WatchEvent::Deleted(obj) => (WatchEvent::Deleted, obj),
        WatchEvent::Bookmark(b) => return one(Ok(WatchEvent::Bookmark(b))),
        WatchEvent::Error(status) => return one(Ok(WatchEvent::Error(status))),
    };
    let resource_version = obj.resource_version().map(ResourceVersion::from);
    let key = match obj.namespace() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", obj.name()),
        _ => obj.name().to_string(),
    };
    let bookmark = |resource_version| {
        Ok(WatchEvent::Bookmark(Bookmark {
            resource_version,
            initial_events_end: false,
        }))
    };
    match transform(obj) {
        Ok(converted) => {
            let versionless = !converted.has_meta() && converted.resource_version().is_none();
            let then = resource_version.filter(|_| versionless).map(bookmark);
            [Some(Ok(kind(converted))), then].into_iter().flatten()
        }
        Err(error) => {
            tracing::error!(%key, %error, "transforming a watch event's object failed; the event is dropped");
            [resource_version.map(bookmark), None].into_iter().flatten()
        }
    }
}
