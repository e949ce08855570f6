//! [`HttpListerWatcher`]: list and watch one resource over HTTP.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use http_body_util::BodyExt as _;

use crate::client::{
    BoxError, Client, ClusterConfig, ConfigError, ListOptions, Representation, Resource,
    WatchOptions, DEFAULT_MAX_BODY_BYTES,
};
use crate::decode_lane::DecodeLane;
use crate::error::ReflectorError;
use crate::list::request_byte_bound;
use crate::lister_watcher::{ListerWatcher, WatchStream};
use crate::metrics::ReflectorMetrics;
use crate::shard_filter::ShardFilter;
use crate::store_index::{Selector, ShardSelector};
use crate::watch_idle::{idle_timeout_for, with_idle_timeout, Activity};
use crate::watch_stream::decode_watch_body_on;
use crate::wire::decoder::{WatchDecoder, DEFAULT_MAX_EVENT_SIZE};
use crate::wire::encoding::{accept_dropping_managed_fields, Encoding};
use crate::wire::list_page::ObjectList;
use crate::wire::object::Decode;

/// Lists and watches one resource of an API server (client-go's `ListWatch` from a REST client,
/// contract C15): namespace or all, label, field and shard selectors applied to every request, and the
/// `Accept` header of `K`'s [`Representation`] (`HttpListerWatcher<PartialObjectMetadata>` lists
/// and watches metadata only, as client-go's metadata informers do), in the [`Encoding`] chosen
/// for `K` and the resource (by default protobuf for typed protobuf objects, JSON otherwise;
/// [`encoding`](Self::encoding) changes it), each answer decoded by its `Content-Type`.
///
/// ```no_run
/// use reflector::{ClusterConfig, HttpListerWatcher, Resource};
/// use reflector::store_index::DynamicObject;
/// let config = ClusterConfig::new("https://10.0.0.1:6443").unwrap();
/// let lw: HttpListerWatcher<DynamicObject> =
///     HttpListerWatcher::new(&config, Resource::namespaced("", "v1", "pods"))
///         .unwrap()
///         .namespace("default")
///         .label_selector("app=web,tier!=db".parse().unwrap())
///         .field_selector("spec.nodeName=node-1");
/// ```
pub struct HttpListerWatcher<K> {
    client: Client,
    resource: Resource,
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    /// Sent as `shardSelector`, and applied again to every object received.
    shard: Option<Arc<ShardFilter>>,
    max_event_size: usize,
    watch_list: bool,
    max_list_page_bytes: usize,
    watch_idle_timeout: Option<Duration>,
    encoding: Encoding,
    /// Asks the server to leave `metadata.managedFields` out, and drops what it sends anyway.
    drop_managed_fields: bool,
    metrics: Option<Arc<ReflectorMetrics>>,
    /// Where its list pages and watch events are decoded when it is called outside a reflector
    /// (inside one, on the reflector's lane: `decode_lane.rs`, M5).
    lane: DecodeLane,
    _k: PhantomData<fn() -> K>,
}

impl<K> std::fmt::Debug for HttpListerWatcher<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpListerWatcher")
            .field("resource", &self.resource)
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl<K> HttpListerWatcher<K> {
    /// For `resource` on `config`'s server, across all namespaces.
    pub fn new(config: &ClusterConfig, resource: Resource) -> Result<Self, ConfigError> {
        Ok(Self::with_client(Client::new(config)?, resource))
    }

    /// Sharing an existing client's connections.
    pub fn with_client(client: Client, resource: Resource) -> Self {
        HttpListerWatcher {
            client,
            resource,
            namespace: None,
            label_selector: None,
            field_selector: None,
            shard: None,
            max_event_size: DEFAULT_MAX_EVENT_SIZE,
            watch_list: true,
            max_list_page_bytes: DEFAULT_MAX_BODY_BYTES,
            watch_idle_timeout: None,
            encoding: Encoding::Auto,
            drop_managed_fields: false,
            metrics: None,
            lane: DecodeLane::next(),
            _k: PhantomData,
        }
    }

    /// Only this namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only objects whose labels match `selector` (the same [`Selector`] listers filter with;
    /// parse one with `"app=web,tier!=db".parse()`, which refuses bad syntax with a typed error).
    /// An empty selector selects everything.
    pub fn label_selector(mut self, selector: Selector) -> Self {
        self.label_selector = (!selector.is_empty()).then(|| selector.to_string());
        self
    }

    /// Only objects whose fields match this field selector (`spec.nodeName=n1`); the server
    /// checks its syntax.
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Only the objects of one shard: those whose uid (or namespace) hashes into `selector`'s
    /// ranges, as kube-apiserver's server-side sharded list and watch selects them (the
    /// `ShardedListAndWatch` feature, alpha in Kubernetes 1.36). The selector is sent as
    /// `shardSelector` on every list and watch (replacing one given in the options), and every
    /// object received is checked against it with the server's hash: a server without the
    /// feature ignores the parameter and sends every object, and the client then keeps only the
    /// shard's, says so once in a warning, and counts what it dropped in
    /// [`ReflectorStats::shard_filtered`](crate::ReflectorStats::shard_filtered) (and the pages
    /// the server did not shard in [`shard_unapplied`](crate::ReflectorStats::shard_unapplied)).
    /// Either way the cache and handlers see only the shard.
    ///
    /// ```no_run
    /// use reflector::{ClusterConfig, HttpListerWatcher, Resource};
    /// use reflector::store_index::{DynamicObject, ShardField, ShardRange, ShardSelector};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let config = ClusterConfig::new("https://10.0.0.1:6443")?;
    /// // The first of three equal shards of the pods, by uid.
    /// let shard = ShardSelector::new(ShardField::Uid, [ShardRange::equal_part(0, 3)?])?;
    /// let lw: HttpListerWatcher<DynamicObject> =
    ///     HttpListerWatcher::new(&config, Resource::namespaced("", "v1", "pods"))?
    ///         .shard_selector(shard);
    /// # Ok(()) }
    /// ```
    pub fn shard_selector(mut self, selector: ShardSelector) -> Self {
        let resource = self.resource.path(self.namespace.as_deref());
        self.shard = Some(Arc::new(ShardFilter::new(selector, resource)));
        self
    }

    /// The shard selector set by [`shard_selector`](Self::shard_selector), if any.
    pub fn shard(&self) -> Option<&ShardSelector> {
        self.shard.as_deref().map(ShardFilter::selector)
    }

    /// Largest accepted watch event (default 16 MiB).
    pub fn max_event_size(mut self, bytes: usize) -> Self {
        self.max_event_size = bytes;
        self
    }

    /// Largest accepted list response, in bytes (default [`DEFAULT_MAX_BODY_BYTES`], 1 GiB).
    /// Each page is bounded below it by what its `limit` asks for
    /// ([`page_byte_bound`](crate::page_byte_bound): 258 MiB for a page of 500; a first page the
    /// watch cache may answer whole, [`LIST_FROM_CACHE_BYTES`](crate::LIST_FROM_CACHE_BYTES)): a larger page,
    /// or a body that never ends, stops with
    /// [`ClientError::BodyTooLarge`](crate::ClientError::BodyTooLarge) instead of growing
    /// memory, and the reflector asks for it again in smaller pages (contract H3).
    pub fn max_list_page_bytes(mut self, bytes: usize) -> Self {
        self.max_list_page_bytes = bytes;
        self
    }

    /// How long a watch may receive nothing at all before it is presumed dead and ended with
    /// [`ReflectorError::WatchIdle`](crate::ReflectorError::WatchIdle). Default: the watch's own
    /// `timeoutSeconds` plus [`WATCH_IDLE_MARGIN`](crate::WATCH_IDLE_MARGIN) (a server ends a
    /// watch by then, so longer silence means the server or the network is gone), or
    /// [`DEFAULT_WATCH_IDLE_TIMEOUT`](crate::DEFAULT_WATCH_IDLE_TIMEOUT) without one.
    pub fn watch_idle_timeout(mut self, timeout: Duration) -> Self {
        self.watch_idle_timeout = Some(timeout);
        self
    }

    /// Counts the body bytes received into `metrics` (share a reflector's
    /// [`metrics_handle`](crate::Reflector::metrics_handle)); a list compressed on the wire counts
    /// as its decompressed size, the bytes that were decoded.
    pub fn count_bytes_into(mut self, metrics: Arc<ReflectorMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Which encoding lists and watches ask for (default [`Encoding::Auto`]: protobuf where `K`
    /// and the resource call for it, [`Decode::protobuf_by_default`]). Whatever is asked for,
    /// each answer is decoded by its `Content-Type`, so a server that answers JSON to a protobuf
    /// `Accept` still works.
    pub fn encoding(mut self, encoding: Encoding) -> Self {
        self.encoding = encoding;
        self
    }

    /// With `drop`, no object this lister-watcher returns has `metadata.managedFields`
    /// (server-side apply's record of field ownership, which an informer's handlers seldom read
    /// and which is often the largest part of an object's metadata). Every list and watch asks
    /// the server to leave them out (`drop=metadata.managedFields` on each media range of the
    /// `Accept` header, KEP-5958; a server without the feature ignores it), and every object
    /// received drops whatever it still has right after it is decoded, on the thread that
    /// decoded it ([`Object::drop_managed_fields`](crate::store_index::Object::drop_managed_fields)),
    /// so nothing downstream ever sees them: a cache, handlers, resyncs and tombstones. A type
    /// of your own that does not implement the method keeps what the server sent. Default: off.
    ///
    /// ```no_run
    /// use reflector::{ClusterConfig, HttpListerWatcher, Resource};
    /// use reflector::store_index::DynamicObject;
    /// let config = ClusterConfig::new("https://10.0.0.1:6443").unwrap();
    /// let lw: HttpListerWatcher<DynamicObject> =
    ///     HttpListerWatcher::new(&config, Resource::namespaced("", "v1", "pods"))
    ///         .unwrap()
    ///         .drop_managed_fields(true);
    /// ```
    pub fn drop_managed_fields(mut self, drop: bool) -> Self {
        self.drop_managed_fields = drop;
        self
    }

    /// `accept`, with the `drop` parameter when managed fields are dropped.
    fn accept<'a>(&self, accept: &'a str) -> std::borrow::Cow<'a, str> {
        if self.drop_managed_fields {
            std::borrow::Cow::Owned(accept_dropping_managed_fields(accept))
        } else {
            std::borrow::Cow::Borrowed(accept)
        }
    }

    /// Declares whether the server can do watch-list streaming (default: assume it can).
    pub fn watch_list_supported(mut self, supported: bool) -> Self {
        self.watch_list = supported;
        self
    }

    /// `list` with only the shard's objects, when there is a shard selector.
    fn shard_of(&self, mut list: ObjectList<K>) -> ObjectList<K>
    where
        K: Decode,
    {
        if let Some(shard) = &self.shard {
            shard.filter_list(&mut list, self.metrics.as_deref());
        }
        list
    }

    fn path(&self, query: &str) -> String {
        let mut p = self.resource.path(self.namespace.as_deref());
        if !query.is_empty() {
            p.push('?');
            p.push_str(query);
        }
        p
    }
}

/// With `drop`, every item of `list` drops its `metadata.managedFields`.
fn drop_managed_fields<K: Decode>(list: &mut ObjectList<K>, drop: bool) {
    if drop {
        for item in &mut list.items {
            item.drop_managed_fields();
        }
    }
}

impl<K: Decode> ListerWatcher<K> for HttpListerWatcher<K> {
    async fn list(&self, mut options: ListOptions) -> Result<ObjectList<K>, ReflectorError> {
        options.label_selector = options
            .label_selector
            .or_else(|| self.label_selector.clone());
        options.field_selector = options
            .field_selector
            .or_else(|| self.field_selector.clone());
        if let Some(shard) = &self.shard {
            options.shard_selector = Some(shard.parameter().to_string());
        }
        let accept = self.accept(
            self.encoding
                .list_accept::<K>(&self.resource, K::REPRESENTATION),
        );
        // H6.1: a continuation page belongs to the list its first page paid for.
        let unlimited;
        let client = if options.continue_token.is_some() {
            unlimited = self.client.with_rate_limit(None);
            &unlimited
        } else {
            &self.client
        };
        let (body, content_type) = client
            .get_body_accepting(
                &self.path(&options.to_query()),
                &accept,
                request_byte_bound(&options, self.max_list_page_bytes),
            )
            .await?;
        if let Some(m) = &self.metrics {
            m.add_bytes(body.len() as u64);
        }
        // On the lane, the page's objects are allocated by the thread that will free them.
        if let Some(lane) = DecodeLane::for_decoding(self.lane) {
            let page = body.clone();
            let ct = content_type.clone();
            let drop = self.drop_managed_fields;
            if let Some(list) = lane
                .run(move || {
                    ObjectList::from_body(&page, ct.as_deref()).map(|mut list| {
                        drop_managed_fields(&mut list, drop);
                        list
                    })
                })
                .await
            {
                return list.map_err(ReflectorError::from).map(|l| self.shard_of(l));
            }
        }
        ObjectList::from_body(&body, content_type.as_deref())
            .map_err(ReflectorError::from)
            .map(|mut l| {
                drop_managed_fields(&mut l, self.drop_managed_fields);
                self.shard_of(l)
            })
    }

    async fn watch(&self, mut options: WatchOptions) -> Result<WatchStream<K>, ReflectorError> {
        options.label_selector = options
            .label_selector
            .or_else(|| self.label_selector.clone());
        options.field_selector = options
            .field_selector
            .or_else(|| self.field_selector.clone());
        if let Some(shard) = &self.shard {
            options.shard_selector = Some(shard.parameter().to_string());
        }
        let idle = self
            .watch_idle_timeout
            .unwrap_or_else(|| idle_timeout_for(options.timeout_seconds));
        let accept = self.accept(
            self.encoding
                .watch_accept::<K>(&self.resource, K::REPRESENTATION),
        );
        let crate::client::WatchResponse { body, content_type } = self
            .client
            .watch(&self.path(&options.to_query()), &accept)
            .await?;
        let activity = Activity::default();
        let chunks = body.into_data_stream().map({
            let metrics = self.metrics.clone();
            let activity = activity.clone();
            move |r| {
                activity.mark();
                if let (Some(m), Ok(b)) = (&metrics, &r) {
                    m.add_bytes(b.len() as u64);
                }
                r.map_err(|e| Box::new(e) as BoxError)
            }
        });
        let events = decode_watch_body_on(
            chunks,
            WatchDecoder::for_content_type(content_type.as_deref(), self.max_event_size)
                .drop_managed_fields(self.drop_managed_fields),
            DecodeLane::for_decoding(self.lane),
            // Read from a socket through this runtime: its I/O driver runs (M6).
            true,
        );
        let events = with_idle_timeout(events, activity, idle);
        let Some(shard) = self.shard.clone() else {
            return Ok(events);
        };
        let metrics = self.metrics.clone();
        Ok(events
            .filter(move |event| {
                let keep = match event {
                    Ok(event) => shard.keep_event(event, metrics.as_deref()),
                    Err(_) => true,
                };
                std::future::ready(keep)
            })
            .boxed())
    }

    fn supports_watch_list(&self) -> bool {
        self.watch_list
    }

    fn representation(&self) -> Representation {
        K::REPRESENTATION
    }

    fn resource(&self) -> Option<Resource> {
        Some(self.resource.clone())
    }
}
