//! [`HandlerRegistration`]: the handle `add_event_handler` returns.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::informer_id::InformerId;
use crate::listener::Listener;
use crate::synced::HasSynced;

/// A registered handler: its own HasSynced, its counters, and the key to remove it.
pub struct HandlerRegistration<K> {
    listener: Arc<Listener<K>>,
    informer: InformerId,
}

impl<K> std::fmt::Debug for HandlerRegistration<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerRegistration")
            .field("name", &self.listener.name)
            .finish()
    }
}

impl<K> Clone for HandlerRegistration<K> {
    fn clone(&self) -> Self {
        HandlerRegistration {
            listener: Arc::clone(&self.listener),
            informer: self.informer.clone(),
        }
    }
}

impl<K: Send + Sync + 'static> HandlerRegistration<K> {
    pub(crate) fn new(listener: Arc<Listener<K>>, informer: InformerId) -> Self {
        HandlerRegistration { listener, informer }
    }

    pub(crate) fn id(&self) -> u64 {
        self.listener.id
    }

    /// The informer this registration belongs to.
    pub fn informer_id(&self) -> &InformerId {
        &self.informer
    }

    pub(crate) fn listener(&self) -> &Arc<Listener<K>> {
        &self.listener
    }

    /// True once the informer has synced and this handler has handled every add of the initial
    /// list (or of the cache replayed to it); stays true (contract D7).
    pub fn has_synced(&self) -> bool {
        self.listener.has_synced()
    }

    /// Waits until [`has_synced`](Self::has_synced) (`true`), or until the informer or this
    /// registration stopped first (`false`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn wait_for_sync(&self) -> bool {
        self.listener.wait_for_sync().await
    }

    /// Notifications queued to this handler and not yet handled.
    pub fn pending(&self) -> i64 {
        self.listener.pending()
    }

    /// Notifications this handler has handled (including ones that panicked).
    pub fn processed(&self) -> u64 {
        self.listener.processed()
    }

    /// How many notifications made this handler panic.
    pub fn panics(&self) -> u64 {
        self.listener.panics()
    }

    /// The resync period in force for this handler (zero: never), after the 1 s minimum and the
    /// informer's check-period rules (contract D5.3).
    pub fn resync_period(&self) -> std::time::Duration {
        self.listener.resync.lock().period
    }

    /// The registration's name: its informer's identity and a number, `pods (DynamicObject)#2`
    /// (D15).
    pub fn name(&self) -> &str {
        &self.listener.name
    }
}

impl<K: Send + Sync + 'static> HasSynced for HandlerRegistration<K> {
    fn has_synced(&self) -> bool {
        HandlerRegistration::has_synced(self)
    }

    fn wait_for_sync(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(self.listener.wait_for_sync())
    }
}
