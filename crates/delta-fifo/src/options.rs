//! Configuration shared by the queues: key function, known objects, transformer.

use std::sync::Arc;

use store_index::{meta_namespace_key, BoxError, KeyFn, KeyListerGetter, Object};

/// A transformer applied to objects as they are enqueued (for example to drop `managedFields`).
///
/// It receives the shared object and returns the object to queue; it must be idempotent, because
/// one object can pass through it more than once (contract B7.3).
pub type Transformer<K> = Arc<dyn Fn(Arc<K>) -> Result<Arc<K>, BoxError> + Send + Sync>;

/// The store a queue consults for objects it no longer holds (normally the informer's indexer).
pub type KnownObjects<K> = Arc<dyn KeyListerGetter<K>>;

/// The setters both queues' options have ([`DeltaFifoOptions`] and
/// [`RealFifoOptions`](crate::RealFifoOptions), whose fields of these names mean the same),
/// written once.
macro_rules! common_setters {
    () => {
        /// The key function (default `namespace/name`; tombstones keep their own key).
        pub fn key_fn(mut self, key_fn: KeyFn<K>) -> Self {
            self.key_fn = key_fn;
            self
        }

        /// A transformer applied to objects as they are queued (never to tombstones or to
        /// resync's `Sync` deltas); it must be idempotent (contract B7.3).
        pub fn transformer(
            mut self,
            f: impl Fn(Arc<K>) -> Result<Arc<K>, BoxError> + Send + Sync + 'static,
        ) -> Self {
            self.transformer = Some(Arc::new(f));
            self
        }

        /// A shared transformer.
        pub fn transformer_arc(mut self, f: Transformer<K>) -> Self {
            self.transformer = Some(f);
            self
        }

        /// The name used in logs.
        pub fn name(mut self, name: impl Into<String>) -> Self {
            self.name = name.into();
            self
        }
    };
}
pub(crate) use common_setters;

/// Options of a [`DeltaFifo`](crate::DeltaFifo) (and of the other queues where they apply).
///
/// ```
/// use delta_fifo::{DeltaFifo, DeltaFifoOptions};
/// use delta_fifo::store_index::{DynamicObject, Indexer};
///
/// let indexer: Indexer<DynamicObject> = Indexer::default();
/// let fifo = DeltaFifo::new(
///     DeltaFifoOptions::new()
///         .known_objects(indexer.clone())
///         .emit_replaced(true)
///         .name("pods"),
/// );
/// assert!(!fifo.has_synced());
/// ```
pub struct DeltaFifoOptions<K> {
    /// The key function (tombstones are keyed by their own key regardless); default
    /// `namespace/name`.
    pub key_fn: KeyFn<K>,
    /// The store of objects already processed (the informer's indexer): a relist queues a
    /// tombstone for each of its keys the list lacks; default none.
    pub known_objects: Option<KnownObjects<K>>,
    /// Whether `replace` emits `Replaced` (true, as informers want) or `Sync` (false, the
    /// default).
    pub emit_replaced: bool,
    /// A transformer applied on enqueue (never to tombstones or resync's `Sync` deltas); default
    /// none.
    pub transformer: Option<Transformer<K>>,
    /// The name in logs; default `DeltaFIFO`.
    pub name: String,
}

impl<K: Object> Default for DeltaFifoOptions<K> {
    fn default() -> Self {
        DeltaFifoOptions {
            key_fn: Arc::new(|obj: &K| meta_namespace_key(obj)),
            known_objects: None,
            emit_replaced: false,
            transformer: None,
            name: "DeltaFIFO".to_string(),
        }
    }
}

impl<K: Object> DeltaFifoOptions<K> {
    /// Defaults: `namespace/name` keys, no known objects, `emit_replaced` off, no transformer.
    pub fn new() -> Self {
        Self::default()
    }

    common_setters!();

    /// The store of objects already processed (the informer's indexer).
    pub fn known_objects(mut self, known: impl KeyListerGetter<K> + 'static) -> Self {
        self.known_objects = Some(Arc::new(known));
        self
    }

    /// Whether `replace` emits `Replaced` (true, as informers want) or `Sync` (false, the default).
    pub fn emit_replaced(mut self, on: bool) -> Self {
        self.emit_replaced = on;
        self
    }
}
