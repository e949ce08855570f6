//! The set of listeners of one informer: distribution and the resync schedule (client-go's
//! `sharedProcessor`).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use reflector::Reclaim;
use tokio::time::Instant;

use crate::handler::Notification;
use crate::listener::{determine_resync_period, Listener};

/// The notifications of one pop of the informer's queue, collected while the cache is written and
/// handed to the listeners at once ([`Processor::deliver`]).
pub(crate) struct Outbox<K> {
    /// Each notification and whether it is resync-class (D3.2).
    items: Vec<(Notification<K>, bool)>,
}

impl<K> Default for Outbox<K> {
    fn default() -> Self {
        Outbox { items: Vec::new() }
    }
}

impl<K> Outbox<K> {
    pub(crate) fn push(&mut self, notification: Notification<K>, resync_class: bool) {
        self.items.push((notification, resync_class));
    }
}

pub(crate) struct Processor<K> {
    listeners: RwLock<Vec<Arc<Listener<K>>>>,
    /// Set while running: where delivery tasks of late listeners are spawned.
    runtime: RwLock<Option<tokio::runtime::Handle>>,
    /// Where the objects of a pop no listener hears of go (`reflector::Reclaim`).
    reclaim: Arc<Reclaim<K>>,
}

impl<K: Send + Sync + 'static> Processor<K> {
    pub(crate) fn new(reclaim: Arc<Reclaim<K>>) -> Self {
        Processor {
            listeners: RwLock::new(Vec::new()),
            runtime: RwLock::new(None),
            reclaim,
        }
    }

    pub(crate) fn add(&self, listener: Arc<Listener<K>>) {
        if let Some(rt) = self.runtime.read().as_ref() {
            listener.start(rt);
        }
        self.listeners.write().push(listener);
    }

    /// Removes the listener with `id`; returns it if it was registered here.
    pub(crate) fn remove(&self, id: u64) -> Option<Arc<Listener<K>>> {
        let mut listeners = self.listeners.write();
        let pos = listeners.iter().position(|l| l.id == id)?;
        let listener = listeners.remove(pos);
        listener.stop.cancel();
        Some(listener)
    }

    /// Starts every listener's delivery task.
    pub(crate) fn run(&self, runtime: tokio::runtime::Handle) {
        for listener in self.listeners.read().iter() {
            listener.start(&runtime);
        }
        *self.runtime.write() = Some(runtime);
    }

    /// Stops every listener, clears the set and waits for the delivery tasks (D9.4).
    pub(crate) async fn stop(&self) {
        *self.runtime.write() = None;
        let listeners = std::mem::take(&mut *self.listeners.write());
        for listener in &listeners {
            listener.stop.cancel();
        }
        for listener in listeners {
            listener.shutdown().await;
        }
    }

    /// Queues what one pop produced to every listener, as one batch per listener, in order; a
    /// resync-class update (D3.2) only to the listeners that are syncing now. Never waits.
    pub(crate) fn deliver(&self, outbox: Outbox<K>) {
        if outbox.items.is_empty() {
            return;
        }
        let listeners = self.listeners.read();
        if listeners.is_empty() {
            let mut spent = Vec::with_capacity(outbox.items.len() * 2);
            for (notification, _) in outbox.items {
                notification.into_objects(&mut spent);
            }
            self.reclaim.give_all(&mut spent);
            return;
        }
        let last = listeners.len() - 1;
        let mut items = Some(outbox.items);
        for (i, listener) in listeners.iter().enumerate() {
            let syncing = listener.resync.lock().syncing;
            let wanted = |(_, resync_class): &(Notification<K>, bool)| !resync_class || syncing;
            let batch: Vec<Notification<K>> = if i == last {
                // The last listener takes the notifications themselves instead of clones.
                let items = items.take().unwrap_or_default();
                items.into_iter().filter(wanted).map(|(n, _)| n).collect()
            } else {
                items
                    .iter()
                    .flatten()
                    .filter(|item| wanted(item))
                    .map(|(n, _)| n.clone())
                    .collect()
            };
            listener.send_all(batch);
        }
    }

    /// The check tick (D5.4): marks due listeners syncing and schedules their next resync; the
    /// others stop syncing. True when any listener is syncing, so the queue should resync.
    pub(crate) fn should_resync(&self) -> bool {
        let now = Instant::now();
        let mut any = false;
        for listener in self.listeners.read().iter() {
            let mut schedule = listener.resync.lock();
            if !schedule.period.is_zero() && now >= schedule.next_resync {
                schedule.syncing = true;
                schedule.next_resync = now + schedule.period;
                any = true;
            } else {
                schedule.syncing = false;
            }
        }
        any
    }

    /// The check period changed before start: recompute every listener's period (D5.3 rule 3).
    pub(crate) fn resync_check_period_changed(&self, check: Duration) {
        for listener in self.listeners.read().iter() {
            let mut schedule = listener.resync.lock();
            schedule.period = determine_resync_period(schedule.requested, check);
        }
    }

    /// The listeners the informer should wait for now (P3): paced, not lagging, and over
    /// `high_water`. Allocates only when there is one.
    pub(crate) fn over_high_water(&self, high_water: usize) -> Vec<Arc<Listener<K>>> {
        self.listeners
            .read()
            .iter()
            .filter(|l| l.over_high_water(high_water))
            .cloned()
            .collect()
    }

    pub(crate) fn listeners(&self) -> Vec<Arc<Listener<K>>> {
        self.listeners.read().clone()
    }
}
