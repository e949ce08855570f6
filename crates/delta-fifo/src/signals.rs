//! Waking poppers and announcing "synced": the signalling every queue of this crate shares.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{watch, Notify};

/// Wakes tasks waiting for a queue to change, and announces once that the queue has synced.
///
/// Wake-ups cost nothing when nobody waits (the common case on a busy queue: the consumer finds
/// work without waiting). Correctness: a waiter registers itself (`waiters += 1`, notification
/// enabled) **before** it checks the queue under the queue's lock; a producer changes the queue
/// under that lock and reads `waiters` **after**. The lock orders the two, so either the waiter's
/// check sees the change or the producer sees the waiter and notifies it.
pub(crate) struct Signals {
    notify: Notify,
    waiters: AtomicUsize,
    /// Flips to true exactly once (contract B11.4: after the last initial item's process call).
    synced: watch::Sender<bool>,
}

struct Registered<'a>(&'a AtomicUsize);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Signals {
    pub(crate) fn new() -> Self {
        Signals {
            notify: Notify::new(),
            waiters: AtomicUsize::new(0),
            synced: watch::channel(false).0,
        }
    }

    /// Wakes every waiter, if there is any. Call after changing the queue.
    pub(crate) fn wake_all(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.notify.notify_waiters();
        }
    }

    /// Runs `check` until it returns a value, waiting for a wake-up between attempts.
    ///
    /// The first attempt is made unregistered: on a busy queue it finds work, and a waiter that
    /// stayed registered while it works (say, while a pop's `process` runs) would make every
    /// producer in that time take the wake-up list's lock for nothing.
    pub(crate) async fn wait_until<T>(&self, mut check: impl FnMut() -> Option<T>) -> T {
        if let Some(value) = check() {
            return value;
        }
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            self.waiters.fetch_add(1, Ordering::SeqCst);
            let registered = Registered(&self.waiters);
            if let Some(value) = check() {
                return value;
            }
            notified.await;
            drop(registered);
        }
    }

    /// Announces "synced" the first time `has_synced` is true.
    pub(crate) fn synced_if(&self, has_synced: bool) {
        if has_synced && !*self.synced.borrow() {
            self.synced.send_replace(true);
        }
    }

    /// Waits until synced was announced; returns at once if it already was.
    pub(crate) async fn wait_for_sync(&self) {
        let mut rx = self.synced.subscribe();
        // The sender lives as long as `self`, so this only ends once the value is true.
        let _ = rx.wait_for(|synced| *synced).await;
    }
}
