//! One registered handler: its unbounded buffer, its delivery task, its resync schedule and its
//! HasSynced tracker (client-go's `processorListener` and `synctrack`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use reflector::Reclaim;

use crate::handler::{Notification, ResourceEventHandler};
use crate::synced::SyncLatch;

/// Pause after a handler panic before the next notification is delivered (contract D9.3).
pub(crate) const PANIC_PAUSE: Duration = Duration::from_secs(1);

/// Notifications delivered between two yields of the delivery task.
const DELIVERY_YIELD_EVERY: usize = 128;

/// When this listener resyncs (contract D5).
pub(crate) struct ResyncSchedule {
    /// The period the handler asked for (after the 1 s minimum).
    pub(crate) requested: Duration,
    /// The period in force (see `determine_resync_period`).
    pub(crate) period: Duration,
    pub(crate) next_resync: Instant,
    /// Whether resync-class updates are delivered to this listener now. A new listener is syncing
    /// until the next check tick (D5.5).
    pub(crate) syncing: bool,
}

pub(crate) struct Listener<K> {
    pub(crate) id: u64,
    pub(crate) name: String,
    handler: Arc<dyn ResourceEventHandler<K>>,
    /// Notifications come in batches, one per pop of the informer's queue (one wake-up of the
    /// delivery task per batch, not per notification).
    tx: UnboundedSender<Vec<Notification<K>>>,
    rx: Mutex<Option<UnboundedReceiver<Vec<Notification<K>>>>>,
    pub(crate) resync: Mutex<ResyncSchedule>,
    /// Notifications queued and not yet handled (observability gauge).
    pending: AtomicI64,
    /// Notifications handled (including those whose handler panicked).
    processed: AtomicU64,
    panics: AtomicU64,
    /// Initial-list adds queued and not yet handled (D7.1). Synced when the informer has synced and
    /// this is zero; once synced, forever synced.
    initial_pending: AtomicI64,
    synced: SyncLatch,
    informer_synced: Arc<SyncLatch>,
    /// Signalled when the last initial add has been handled.
    initial_done: Notify,
    /// Fires on removal or informer stop: the delivery task drops what is buffered and ends.
    pub(crate) stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
    /// Pacing (P3, P4): the backlog (see `backlog`) at which `room` is signalled and `lagging`
    /// cleared as the buffer drains; `None` when the informer is not paced.
    low_water: Option<i64>,
    room: Notify,
    /// The informer waits on `room` (set before it checks the backlog, cleared by the wake-up).
    waited: AtomicBool,
    /// Not waited for by the informer until the backlog is back down to `low_water` (P4).
    lagging: AtomicBool,
    /// Where the objects of handled notifications go, to be dropped by the informer's watch
    /// reader (`reflector::Reclaim`).
    reclaim: Arc<Reclaim<K>>,
}

impl<K: Send + Sync + 'static> Listener<K> {
    pub(crate) fn new(
        id: u64,
        name: String,
        handler: Arc<dyn ResourceEventHandler<K>>,
        resync: ResyncSchedule,
        informer_synced: Arc<SyncLatch>,
        low_water: Option<usize>,
        reclaim: Arc<Reclaim<K>>,
    ) -> Self {
        let (tx, rx) = unbounded_channel();
        Listener {
            id,
            name,
            handler,
            tx,
            rx: Mutex::new(Some(rx)),
            resync: Mutex::new(resync),
            pending: AtomicI64::new(0),
            processed: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            initial_pending: AtomicI64::new(0),
            synced: SyncLatch::default(),
            informer_synced,
            initial_done: Notify::new(),
            stop: CancellationToken::new(),
            task: Mutex::new(None),
            low_water: low_water.map(|w| i64::try_from(w).unwrap_or(i64::MAX)),
            room: Notify::new(),
            waited: AtomicBool::new(false),
            lagging: AtomicBool::new(false),
            reclaim,
        }
    }

    /// Queues notifications, in order, as one batch; never blocks.
    pub(crate) fn send_all(&self, notifications: Vec<Notification<K>>) {
        if self.stop.is_cancelled() || notifications.is_empty() {
            return;
        }
        let initial = notifications
            .iter()
            .filter(|n| {
                matches!(
                    n,
                    Notification::Add {
                        is_in_initial_list: true,
                        ..
                    }
                )
            })
            .count();
        if initial > 0 {
            self.initial_pending
                .fetch_add(i64::try_from(initial).unwrap_or(i64::MAX), Ordering::SeqCst);
        }
        let n = i64::try_from(notifications.len()).unwrap_or(i64::MAX);
        self.pending.fetch_add(n, Ordering::SeqCst);
        if self.tx.send(notifications).is_err() {
            self.pending.fetch_sub(n, Ordering::SeqCst);
        }
    }

    /// Starts the delivery task on `runtime` (once).
    pub(crate) fn start(self: &Arc<Self>, runtime: &tokio::runtime::Handle) {
        let Some(rx) = self.rx.lock().take() else {
            return;
        };
        let this = Arc::clone(self);
        *self.task.lock() = Some(runtime.spawn(async move { this.deliver(rx).await }));
    }

    async fn deliver(self: Arc<Self>, mut rx: UnboundedReceiver<Vec<Notification<K>>>) {
        // The objects of handled notifications, given back to the reclaim after each batch and
        // before each yield (dropped here if the task ends first).
        let mut spent = Vec::new();
        loop {
            let batch = tokio::select! {
                biased;
                _ = self.stop.cancelled() => return,
                n = rx.recv() => match n {
                    Some(n) => n,
                    None => return,
                },
            };
            for (i, notification) in batch.into_iter().enumerate() {
                // Removal drops what is buffered (D8), this batch's rest included.
                if self.stop.is_cancelled() {
                    return;
                }
                // As tokio's budget would between channel receives: a long batch does not keep
                // the worker from its other tasks.
                if i > 0 && i % DELIVERY_YIELD_EVERY == 0 {
                    self.reclaim.give_all(&mut spent);
                    tokio::task::yield_now().await;
                }
                if !self.deliver_one(&notification).await {
                    return;
                }
                notification.into_objects(&mut spent);
            }
            self.reclaim.give_all(&mut spent);
        }
    }

    /// Hands one notification to the handler; false when the listener stopped during a panic
    /// pause.
    async fn deliver_one(&self, notification: &Notification<K>) -> bool {
        let initial = matches!(
            notification,
            Notification::Add {
                is_in_initial_list: true,
                ..
            }
        );
        let handler = &self.handler;
        let outcome = catch_unwind(AssertUnwindSafe(|| match notification {
            Notification::Add {
                obj,
                is_in_initial_list,
            } => handler.on_add(obj, *is_in_initial_list),
            Notification::Update { old, new } => handler.on_update(old, new),
            Notification::Delete(obj) => handler.on_delete(obj),
        }));
        self.pending.fetch_sub(1, Ordering::SeqCst);
        self.processed.fetch_add(1, Ordering::Relaxed);
        if outcome.is_ok() && initial && self.initial_pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.check_synced();
            self.initial_done.notify_waiters();
        }
        if let Some(low) = self.low_water {
            // Two loads when nobody waits and nothing lags: the common case.
            if (self.waited.load(Ordering::SeqCst) || self.lagging.load(Ordering::SeqCst))
                && self.backlog() <= low
            {
                self.drained_to_low_water();
            }
        }
        match outcome {
            Ok(()) => {}
            Err(panic) => {
                // As client-go: a handler that panics on an initial add never counts it as
                // done, so that registration never reports synced (contract D7.2).
                self.panics.fetch_add(1, Ordering::Relaxed);
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string panic".to_string());
                tracing::error!(handler = %self.name, panic = %message, "event handler panicked; notification skipped");
                tokio::select! {
                    _ = self.stop.cancelled() => return false,
                    _ = tokio::time::sleep(PANIC_PAUSE) => {}
                }
            }
        }
        true
    }

    /// Stops delivery (buffered notifications are dropped) and waits for the task to end.
    pub(crate) async fn shutdown(&self) {
        self.stop.cancel();
        self.synced.set_stopped();
        let task = self.task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// Synced once the informer has synced and every initial add has been handled (D7.1); the
    /// latch keeps it so.
    pub(crate) fn has_synced(&self) -> bool {
        self.check_synced();
        self.synced.is_synced()
    }

    /// Latches synced if the condition holds now.
    pub(crate) fn check_synced(&self) {
        if !self.synced.is_synced()
            && self.informer_synced.is_synced()
            && self.initial_pending.load(Ordering::SeqCst) == 0
        {
            self.synced.set_synced();
        }
    }

    /// Waits until synced (`true`), or until the informer or this registration stopped first
    /// (`false`).
    pub(crate) async fn wait_for_sync(&self) -> bool {
        loop {
            let initial_done = self.initial_done.notified();
            tokio::pin!(initial_done);
            initial_done.as_mut().enable();
            if self.has_synced() {
                return true;
            }
            if self.informer_synced.is_synced() {
                // Only initial adds are missing: wait for the last one to be handled.
                tokio::select! {
                    synced = self.synced.wait() => return synced,
                    _ = self.stop.cancelled() => return self.has_synced(),
                    _ = &mut initial_done => {}
                }
            } else {
                tokio::select! {
                    synced = self.synced.wait() => return synced,
                    _ = self.stop.cancelled() => return self.has_synced(),
                    informer = self.informer_synced.wait() => {
                        if !informer {
                            return false;
                        }
                    }
                    _ = &mut initial_done => {}
                }
            }
        }
    }

    /// What pacing counts (P3): the notifications buffered other than initial-list adds. Those
    /// hold objects the cache holds too, so they keep no memory alive of their own, and a large
    /// initial list is never waited for. (A handler that panicked on an initial add never counts
    /// it as handled, D7.2, so its backlog is undercounted by that many.)
    fn backlog(&self) -> i64 {
        (self.pending.load(Ordering::SeqCst) - self.initial_pending.load(Ordering::SeqCst)).max(0)
    }

    /// The backlog drained to the low water: the informer may stop waiting, and a lagging
    /// listener is waited for again (P3, P4).
    fn drained_to_low_water(&self) {
        self.waited.store(false, Ordering::SeqCst);
        if self.lagging.swap(false, Ordering::SeqCst) {
            tracing::info!(handler = %self.name, "event handler caught up; the informer paces it again");
        }
        self.room.notify_waiters();
    }

    /// Whether the informer should wait for this listener now: paced, not lagging, and a
    /// backlog over `high_water`.
    pub(crate) fn over_high_water(&self, high_water: usize) -> bool {
        self.low_water.is_some()
            && !self.lagging.load(Ordering::SeqCst)
            && usize::try_from(self.backlog()).is_ok_and(|b| b > high_water)
    }

    /// Waits until the buffer is down to the low water, or the listener stopped (P3).
    pub(crate) async fn wait_for_low_water(&self) {
        let Some(low) = self.low_water else {
            return;
        };
        loop {
            // Registered, then announced, then checked: a delivery task that drains the backlog
            // after the check sees `waited` and wakes this waiter; one that drained it before
            // is seen by the check (all SeqCst).
            let drained = self.room.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            self.waited.store(true, Ordering::SeqCst);
            if self.backlog() <= low || self.stop.is_cancelled() {
                self.waited.store(false, Ordering::SeqCst);
                return;
            }
            tokio::select! {
                _ = drained => {}
                _ = self.stop.cancelled() => return,
            }
        }
    }

    /// The informer gave up waiting for this listener (P4). Unless it drained meanwhile, it is
    /// not waited for again until it does.
    pub(crate) fn mark_lagging(&self, waited: std::time::Duration) {
        let Some(low) = self.low_water else {
            return;
        };
        if !self.lagging.swap(true, Ordering::SeqCst) {
            tracing::warn!(
                handler = %self.name,
                pending = self.pending(),
                ?waited,
                "event handler is not keeping up; the informer no longer waits for it and its buffer grows until it catches up"
            );
        }
        self.waited.store(false, Ordering::SeqCst);
        // A delivery that drained the backlog between the informer's last check and the swap
        // above found `lagging` unset and left it so: undo the mark if the backlog is down.
        if self.backlog() <= low {
            self.lagging.store(false, Ordering::SeqCst);
        }
    }

    /// Whether the informer has given up waiting for this listener until it catches up (P4).
    pub(crate) fn is_lagging(&self) -> bool {
        self.lagging.load(Ordering::SeqCst)
    }

    pub(crate) fn pending(&self) -> i64 {
        self.pending.load(Ordering::Relaxed)
    }

    pub(crate) fn processed(&self) -> u64 {
        self.processed.load(Ordering::Relaxed)
    }

    pub(crate) fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }
}

/// The effective resync period of a listener (contract D5.3 rule 4).
pub(crate) fn determine_resync_period(requested: Duration, check: Duration) -> Duration {
    if requested.is_zero() || check.is_zero() {
        Duration::ZERO
    } else if requested < check {
        check
    } else {
        requested
    }
}
