//! [`HandlerRegistration`]: the handle `add_event_handler` returns.

use std::sync::Arc;

use crate::listener::Listener;

/// A registered handler: its own HasSynced, its counters, and the key to remove it.
pub struct HandlerRegistration<K> {
    listener: Arc<Listener<K>>,
    informer: usize,
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
            informer: self.informer,
        }
    }
}

impl<K: Send + Sync + 'static> HandlerRegistration<K> {
    pub(crate) fn new(listener: Arc<Listener<K>>, informer: usize) -> Self {
        HandlerRegistration { listener, informer }
    }

    pub(crate) fn id(&self) -> u64 {
        self.listener.id
    }

    pub(crate) fn informer_id(&self) -> usize {
        self.informer
    }

    pub(crate) fn listener(&self) -> &Arc<Listener<K>> {
        &self.listener
    }

    /// True once the informer has synced and this handler has handled every add of the initial
    /// list (or of the cache replayed to it); stays true (contract D7).
    pub fn has_synced(&self) -> bool {
        self.listener.has_synced()
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

    /// The registration's name (`informer#n`).
    pub fn name(&self) -> &str {
        &self.listener.name
    }
}
