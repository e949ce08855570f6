//! Waking poppers: the one wait/notify pattern every queue of this crate uses.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Wakes tasks waiting for a queue to change, without paying for a notification when nobody
/// waits (the common case on a busy queue: the consumer finds work without waiting).
///
/// Correctness: a waiter registers itself (`waiters += 1`, notification enabled) **before** it
/// checks the queue under the queue's lock; a producer changes the queue under that lock and
/// reads `waiters` **after**. The lock orders the two, so either the waiter's check sees the
/// change or the producer sees the waiter and notifies it.
pub(crate) struct Wakeup {
    notify: Notify,
    waiters: AtomicUsize,
}

struct Registered<'a>(&'a AtomicUsize);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Wakeup {
    pub(crate) fn new() -> Self {
        Wakeup {
            notify: Notify::new(),
            waiters: AtomicUsize::new(0),
        }
    }

    /// Wakes every waiter, if there is any. Call after changing the queue (lock held or not).
    pub(crate) fn wake_all(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.notify.notify_waiters();
        }
    }

    /// Runs `check` until it returns a value, waiting for a wake-up between attempts.
    pub(crate) async fn wait_until<T>(&self, mut check: impl FnMut() -> Option<T>) -> T {
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
}
