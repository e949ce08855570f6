//! How one recorded event reaches every watcher of a broadcaster (client-go's
//! `watch.Broadcaster` with `DropIfChannelFull`): each watcher has its own bounded buffer, and
//! the recorder offers the event to each without waiting.
//!
//! Invariants:
//! - every buffer holds at most [`BroadcasterConfig::queue_capacity`] events, so the events
//!   held are bounded by that times the number of watchers;
//! - an event a watcher's full buffer cannot take is dropped for that watcher alone and counted
//!   in its `dropped`: a slow or stalled watcher never delays the recorder or another watcher;
//! - the buffer created with the broadcaster goes to the first watcher started, so that events
//!   recorded before any watcher exists are not lost (later watchers see the events recorded from
//!   their start on, as in client-go);
//! - only recorders and the broadcaster hold the senders: once all are dropped, every buffer
//!   closes and each watcher ends after handling what its buffer still holds.
//!
//! [`BroadcasterConfig::queue_capacity`]: super::BroadcasterConfig::queue_capacity

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::sync::mpsc::{self, error::TrySendError};

use super::model::Event;
use super::recorder::Counters;

/// One watcher's buffer, as the recorders see it.
#[derive(Debug)]
struct Outlet {
    id: u64,
    sender: mpsc::Sender<Arc<Event>>,
    counters: Arc<Counters>,
}

/// A watcher's end of its buffer.
#[derive(Debug)]
pub(crate) struct Subscription {
    pub(crate) id: u64,
    pub(crate) receiver: mpsc::Receiver<Arc<Event>>,
    /// The watcher's own counts (its drops are counted by the recorders).
    pub(crate) counters: Arc<Counters>,
}

/// The registry of watchers' buffers.
#[derive(Debug)]
pub(crate) struct Fanout {
    outlets: RwLock<Vec<Outlet>>,
    /// The first buffer's receiver until the first watcher takes it.
    pending: Mutex<Option<Subscription>>,
    capacity: usize,
    next_id: AtomicU64,
}

impl Fanout {
    /// A registry with one buffer waiting for the first watcher.
    pub(crate) fn new(capacity: usize) -> Self {
        let fanout = Self {
            outlets: RwLock::new(Vec::new()),
            pending: Mutex::new(None),
            capacity: capacity.max(1),
            next_id: AtomicU64::new(0),
        };
        let first = fanout.open();
        *fanout.pending.lock() = Some(first);
        fanout
    }

    fn open(&self) -> Subscription {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = mpsc::channel(self.capacity);
        let counters = Arc::new(Counters::default());
        self.outlets.write().push(Outlet {
            id,
            sender,
            counters: counters.clone(),
        });
        Subscription {
            id,
            receiver,
            counters,
        }
    }

    /// A buffer for a new watcher: the one made with the broadcaster if no watcher took it yet.
    pub(crate) fn subscribe(&self) -> Subscription {
        let mut pending = self.pending.lock();
        match pending.take() {
            Some(first) => first,
            None => self.open(),
        }
    }

    /// Stops offering events to watcher `id`.
    pub(crate) fn unsubscribe(&self, id: u64) {
        self.outlets.write().retain(|outlet| outlet.id != id);
    }

    /// Offers `event` to every watcher without waiting. Returns whether every watcher took it;
    /// `false` also when there is none.
    pub(crate) fn send(&self, event: Event) -> bool {
        let event = Arc::new(event);
        let mut delivered = true;
        let mut closed = false;
        {
            let outlets = self.outlets.read();
            if outlets.is_empty() {
                return false;
            }
            for outlet in outlets.iter() {
                match outlet.sender.try_send(event.clone()) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => {
                        delivered = false;
                        outlet.counters.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    // The watcher ended without being stopped (cancelled or panicked).
                    Err(TrySendError::Closed(_)) => {
                        delivered = false;
                        closed = true;
                        outlet.counters.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        if closed {
            self.outlets
                .write()
                .retain(|outlet| !outlet.sender.is_closed());
        }
        delivered
    }
}
