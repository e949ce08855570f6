//! A scripted in-memory lister-watcher, so informer behaviour can be tested under paused time;
//! and the queues every informer test runs on (`queues`, with `on_every_queue!`).
#![allow(dead_code)]

#[macro_use]
pub mod queues;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use parking_lot::Mutex;
use shared_informer::reflector::store_index::DynamicObject;
use shared_informer::reflector::{
    ListOptions, ListerWatcher, ObjectList, ReflectorError, WatchEvent, WatchOptions, WatchStream,
};
use tokio::sync::mpsc;

pub fn pod(name: &str, rv: u64) -> DynamicObject {
    DynamicObject::new("v1", "Pod")
        .within("ns")
        .named(name)
        .with_resource_version(rv.to_string())
}

/// What the scripted watch yields.
type Item = Result<WatchEvent<DynamicObject>, ReflectorError>;

#[derive(Clone, Default)]
pub struct FakeLw {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    items: Mutex<Vec<DynamicObject>>,
    rv: Mutex<String>,
    lists: AtomicUsize,
    watches: AtomicUsize,
    sender: Mutex<Option<mpsc::UnboundedSender<Item>>>,
}

impl FakeLw {
    pub fn new(items: Vec<DynamicObject>, rv: &str) -> Self {
        let lw = FakeLw::default();
        *lw.inner.items.lock() = items;
        *lw.inner.rv.lock() = rv.to_string();
        lw
    }

    /// Sends an event on the open watch; false when none is open.
    pub fn send(&self, event: WatchEvent<DynamicObject>) -> bool {
        match self.inner.sender.lock().as_ref() {
            Some(tx) => tx.send(Ok(event)).is_ok(),
            None => false,
        }
    }

    /// Ends the open watch with this error, and makes the next list answer with `items`.
    pub fn break_watch(&self, error: ReflectorError, items: Vec<DynamicObject>, rv: &str) {
        *self.inner.items.lock() = items;
        *self.inner.rv.lock() = rv.to_string();
        if let Some(tx) = self.inner.sender.lock().take() {
            let _ = tx.send(Err(error));
        }
    }

    pub fn lists(&self) -> usize {
        self.inner.lists.load(Ordering::SeqCst)
    }

    pub fn watches(&self) -> usize {
        self.inner.watches.load(Ordering::SeqCst)
    }
}

impl ListerWatcher<DynamicObject> for FakeLw {
    async fn list(
        &self,
        _options: ListOptions,
    ) -> Result<ObjectList<DynamicObject>, ReflectorError> {
        self.inner.lists.fetch_add(1, Ordering::SeqCst);
        let items = self.inner.items.lock().clone();
        let rv = self.inner.rv.lock().clone();
        Ok(ObjectList::new(items, rv))
    }

    async fn watch(
        &self,
        _options: WatchOptions,
    ) -> Result<WatchStream<DynamicObject>, ReflectorError> {
        self.inner.watches.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::unbounded_channel();
        *self.inner.sender.lock() = Some(tx);
        Ok(tokio_stream_from(rx))
    }

    fn supports_watch_list(&self) -> bool {
        false
    }
}

fn tokio_stream_from(mut rx: mpsc::UnboundedReceiver<Item>) -> WatchStream<DynamicObject> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
}

/// Waits (yielding, under paused time advancing the clock as tokio does when idle) until `f`.
pub async fn until(mut f: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if f() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    panic!("condition not reached");
}
