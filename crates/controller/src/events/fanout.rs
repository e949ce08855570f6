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
use super::shared::Counters;

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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::events::model::{EventMeta, EventSource, EventType, ObjectReference};

    fn event(n: usize) -> Event {
        Event {
            metadata: EventMeta {
                name: format!("e.{n:x}"),
                namespace: "default".into(),
                resource_version: String::new(),
            },
            involved_object: ObjectReference::new("v1", "Pod", "default", "web-0"),
            reason: format!("R{n}"),
            message: String::new(),
            source: EventSource::new("test"),
            first_timestamp: None,
            last_timestamp: None,
            count: 1,
            type_: EventType::Normal,
            event_time: None,
            reporting_component: "test".into(),
            reporting_instance: String::new(),
            action: None,
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Record,
        Subscribe,
        /// Watcher `i` (modulo those there are) handles up to `n` events.
        Drain(usize, usize),
        Unsubscribe(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => Just(Op::Record),
            1 => Just(Op::Subscribe),
            3 => (0usize..4, 0usize..4).prop_map(|(i, n)| Op::Drain(i, n)),
            1 => (0usize..4).prop_map(Op::Unsubscribe),
        ]
    }

    /// One watcher as the test sees it: its end of the buffer, what it handled, and the events
    /// offered to it while it was subscribed.
    struct Watcher {
        subscription: Subscription,
        subscribed: bool,
        handled: Vec<usize>,
        offered: Vec<usize>,
    }

    proptest! {
        /// Invariants (module docs): no buffer holds more than `capacity` events; each watcher
        /// handles, in order, exactly the events offered to it that it did not count as dropped,
        /// whatever the other watchers do; `send` reports a miss exactly when some subscribed
        /// watcher, or no watcher at all, missed the event.
        #[test]
        fn each_watchers_buffer_is_bounded_and_only_its_own_drops_cost_it_events(
            capacity in 1usize..4,
            ops in prop::collection::vec(op(), 1..120),
        ) {
            let fanout = Fanout::new(capacity);
            // The first subscription is the buffer made with the registry.
            let mut watchers = vec![Watcher {
                subscription: fanout.subscribe(),
                subscribed: true,
                handled: Vec::new(),
                offered: Vec::new(),
            }];
            for (next, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Record => {
                        let dropped = |w: &Watcher| w.subscription.counters.dropped.load(Ordering::Relaxed);
                        let before: Vec<u64> = watchers.iter().map(dropped).collect();
                        let delivered = fanout.send(event(next));
                        let mut missed = !watchers.iter().any(|w| w.subscribed);
                        for (w, before) in watchers.iter_mut().zip(before) {
                            let after = dropped(w);
                            if !w.subscribed {
                                prop_assert_eq!(after, before, "not offered once unsubscribed");
                            } else if after == before {
                                w.offered.push(next);
                            } else {
                                prop_assert_eq!(after, before + 1);
                                missed = true;
                            }
                        }
                        prop_assert_eq!(delivered, !missed);
                    }
                    Op::Subscribe => watchers.push(Watcher {
                        subscription: fanout.subscribe(),
                        subscribed: true,
                        handled: Vec::new(),
                        offered: Vec::new(),
                    }),
                    Op::Drain(i, n) => {
                        let len = watchers.len();
                        let w = &mut watchers[i % len];
                        for _ in 0..n {
                            match w.subscription.receiver.try_recv() {
                                Ok(event) => w.handled.push(event.reason[1..].parse().unwrap()),
                                Err(_) => break,
                            }
                        }
                    }
                    Op::Unsubscribe(i) => {
                        let len = watchers.len();
                        let w = &mut watchers[i % len];
                        fanout.unsubscribe(w.subscription.id);
                        w.subscribed = false;
                    }
                }
                for w in &watchers {
                    prop_assert!(w.subscription.receiver.len() <= capacity);
                }
            }
            for w in &mut watchers {
                while let Ok(event) = w.subscription.receiver.try_recv() {
                    w.handled.push(event.reason[1..].parse().unwrap());
                }
                prop_assert_eq!(&w.handled, &w.offered);
            }
        }
    }
}
