//! One registered handler: its unbounded buffer, its delivery task, its resync schedule and its
//! HasSynced tracker (client-go's `processorListener` and `synctrack`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::handler::{Notification, ResourceEventHandler};
use crate::synced::SyncLatch;

/// Pause after a handler panic before the next notification is delivered (contract D9.3).
pub(crate) const PANIC_PAUSE: Duration = Duration::from_secs(1);

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
    tx: UnboundedSender<Notification<K>>,
    rx: Mutex<Option<UnboundedReceiver<Notification<K>>>>,
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
}

impl<K: Send + Sync + 'static> Listener<K> {
    pub(crate) fn new(
        id: u64,
        name: String,
        handler: Arc<dyn ResourceEventHandler<K>>,
        resync: ResyncSchedule,
        informer_synced: Arc<SyncLatch>,
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
        }
    }

    /// Queues a notification; never blocks.
    pub(crate) fn send(&self, notification: Notification<K>) {
        if self.stop.is_cancelled() {
            return;
        }
        if let Notification::Add {
            is_in_initial_list: true,
            ..
        } = &notification
        {
            self.initial_pending.fetch_add(1, Ordering::SeqCst);
        }
        self.pending.fetch_add(1, Ordering::Relaxed);
        if self.tx.send(notification).is_err() {
            self.pending.fetch_sub(1, Ordering::Relaxed);
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

    async fn deliver(self: Arc<Self>, mut rx: UnboundedReceiver<Notification<K>>) {
        loop {
            let notification = tokio::select! {
                biased;
                _ = self.stop.cancelled() => return,
                n = rx.recv() => match n {
                    Some(n) => n,
                    None => return,
                },
            };
            let initial = matches!(
                notification,
                Notification::Add {
                    is_in_initial_list: true,
                    ..
                }
            );
            let handler = &self.handler;
            let outcome = catch_unwind(AssertUnwindSafe(|| match &notification {
                Notification::Add {
                    obj,
                    is_in_initial_list,
                } => handler.on_add(obj, *is_in_initial_list),
                Notification::Update { old, new } => handler.on_update(old, new),
                Notification::Delete(obj) => handler.on_delete(obj),
            }));
            self.pending.fetch_sub(1, Ordering::Relaxed);
            self.processed.fetch_add(1, Ordering::Relaxed);
            match outcome {
                Ok(()) => {
                    if initial && self.initial_pending.fetch_sub(1, Ordering::SeqCst) == 1 {
                        self.check_synced();
                        self.initial_done.notify_waiters();
                    }
                }
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
                        _ = self.stop.cancelled() => return,
                        _ = tokio::time::sleep(PANIC_PAUSE) => {}
                    }
                }
            }
        }
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
    pub(crate) async fn wait_synced(&self) -> bool {
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
