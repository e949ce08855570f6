//! The objects an informer is done with are dropped by the task that reads the watch, the one
//! that allocated them (`reflector::Reclaim`, invariants G1–G3), not by the handler's task that
//! held them last: under glibc's malloc, frees beside the allocations do not make two threads
//! wait on one arena lock. Checked with an object type that records, when dropped, which task
//! dropped it.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{queues, until};
use futures::StreamExt as _;
use parking_lot::Mutex;
use shared_informer::reflector::store_index::{Object, ObjectMeta};
use shared_informer::reflector::{
    ListOptions, ListerWatcher, ObjectList, ReflectorError, WatchEvent, WatchOptions, WatchStream,
};
use shared_informer::{EventHandlerFns, InformerOptions, InformerQueue, SharedIndexInformer};
use tokio::sync::mpsc;
use tokio::task::Id;
use tokio_util::sync::CancellationToken;

/// Who dropped which version: (resource version, the task that dropped it).
type Drops = Arc<Mutex<Vec<(String, Option<Id>)>>>;

/// An object that records the task dropping it.
struct Tracked {
    metadata: ObjectMeta,
    drops: Drops,
}

impl Tracked {
    fn new(rv: u64, drops: &Drops) -> Self {
        Tracked {
            metadata: ObjectMeta {
                name: Some("a".into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.to_string()),
                ..ObjectMeta::default()
            },
            drops: Arc::clone(drops),
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let rv = self.metadata.resource_version.clone().unwrap_or_default();
        self.drops.lock().push((rv, tokio::task::try_id()));
    }
}

impl Object for Tracked {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        Some(&self.metadata)
    }
}

type Item = Result<WatchEvent<Tracked>, ReflectorError>;

/// Runs `informer` on a task of its own until the returned token is cancelled, and waits for it
/// to sync.
async fn run_until_synced<K, L>(
    informer: &SharedIndexInformer<K, L>,
) -> (CancellationToken, tokio::task::JoinHandle<()>)
where
    K: Object + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    assert!(informer.wait_for_sync().await);
    (cancel, run)
}

/// Lists one object at version 1, then watches what the test sends; records the task that
/// reads the watch (the reflector's).
#[derive(Clone)]
struct Lw {
    drops: Drops,
    sender: Arc<Mutex<Option<mpsc::UnboundedSender<Item>>>>,
    reader: Arc<Mutex<Option<Id>>>,
}

impl ListerWatcher<Tracked> for Lw {
    async fn list(&self, _: ListOptions) -> Result<ObjectList<Tracked>, ReflectorError> {
        Ok(ObjectList::new(vec![Tracked::new(1, &self.drops)], "1"))
    }

    async fn watch(&self, _: WatchOptions) -> Result<WatchStream<Tracked>, ReflectorError> {
        let (tx, mut rx) = mpsc::unbounded_channel();
        *self.sender.lock() = Some(tx);
        let reader = Arc::clone(&self.reader);
        Ok(futures::stream::poll_fn(move |cx| {
            *reader.lock() = tokio::task::try_id();
            rx.poll_recv(cx)
        })
        .boxed())
    }

    fn supports_watch_list(&self) -> bool {
        false
    }
}

/// Updates the object `updates` times; every replaced version must be dropped by the watch
/// reader's task, none by the handler's (or, with no handler, by the informer's pop loop).
async fn replaced_objects_are_dropped_by_the_watch_reader(queue: InformerQueue, handler: bool) {
    let drops: Drops = Arc::default();
    let lw = Lw {
        drops: Arc::clone(&drops),
        sender: Arc::default(),
        reader: Arc::default(),
    };
    let informer = SharedIndexInformer::new(
        lw.clone(),
        InformerOptions {
            name: "tracked".into(),
            queue,
            ..InformerOptions::default()
        },
    );
    let handler_task: Arc<Mutex<Option<Id>>> = Arc::default();
    let handled: Arc<Mutex<u64>> = Arc::default();
    if handler {
        let (task, handled) = (Arc::clone(&handler_task), Arc::clone(&handled));
        informer
            .add_event_handler(EventHandlerFns::new().on_update(
                move |_: &Arc<Tracked>, new: &Arc<Tracked>| {
                    *task.lock() = tokio::task::try_id();
                    *handled.lock() = new.resource_version().unwrap().parse().unwrap();
                },
            ))
            .unwrap();
    }
    let (cancel, run) = run_until_synced(&informer).await;
    until(|| lw.sender.lock().is_some()).await;

    let updates = 300u64;
    for rv in 2..=updates + 1 {
        let sent = lw.sender.lock().as_ref().map(|tx| {
            tx.send(Ok(WatchEvent::Modified(Tracked::new(rv, &drops))))
                .is_ok()
        });
        assert_eq!(sent, Some(true));
    }
    // Every replaced version (1 to `updates`) is dropped, with no further event to wake the
    // reader: the first object kept wakes it (G2).
    until(|| drops.lock().len() as u64 == updates).await;
    if handler {
        assert_eq!(*handled.lock(), updates + 1);
    }
    let reader = lw.reader.lock().expect("the watch was read in a task");
    let mut dropped = drops.lock().clone();
    dropped.sort_by_key(|(rv, _)| rv.parse::<u64>().unwrap());
    let versions: Vec<u64> = dropped.iter().map(|(rv, _)| rv.parse().unwrap()).collect();
    assert_eq!(versions, (1..=updates).collect::<Vec<_>>());
    let elsewhere: Vec<&(String, Option<Id>)> = dropped
        .iter()
        .filter(|(_, task)| *task != Some(reader))
        .collect();
    assert!(
        elsewhere.is_empty(),
        "dropped outside the watch reader's task ({reader:?}; handler {:?}): {elsewhere:?}",
        handler_task.lock()
    );
    assert!(informer.indexer().get_by_key("ns/a").is_some());

    cancel.cancel();
    run.await.unwrap();
}

on_every_queue!(
    a_handlers_replaced_objects_are_dropped_by_the_watch_reader,
    start_paused = true
);
async fn a_handlers_replaced_objects_are_dropped_by_the_watch_reader(queue: InformerQueue) {
    replaced_objects_are_dropped_by_the_watch_reader(queue, true).await;
}

on_every_queue!(
    replaced_objects_no_handler_hears_of_are_dropped_by_the_watch_reader,
    start_paused = true
);
async fn replaced_objects_no_handler_hears_of_are_dropped_by_the_watch_reader(
    queue: InformerQueue,
) {
    replaced_objects_are_dropped_by_the_watch_reader(queue, false).await;
}

/// An object decoded from JSON that records the thread that decoded it and, when dropped, the
/// thread that dropped it, in [`LANE_DROPS`] under its namespace.
#[derive(serde::Deserialize)]
struct OnThread {
    metadata: ObjectMeta,
    #[serde(skip, default = "this_thread")]
    made_on: (std::thread::ThreadId, Option<String>),
}

fn this_thread() -> (std::thread::ThreadId, Option<String>) {
    let thread = std::thread::current();
    (thread.id(), thread.name().map(str::to_string))
}

/// (namespace, resource version, made on, dropped on) of every dropped [`OnThread`].
type LaneDrop = (
    String,
    String,
    (std::thread::ThreadId, Option<String>),
    std::thread::ThreadId,
);

static LANE_DROPS: Mutex<Vec<LaneDrop>> = Mutex::new(Vec::new());

impl Drop for OnThread {
    fn drop(&mut self) {
        LANE_DROPS.lock().push((
            self.metadata.namespace.clone().unwrap_or_default(),
            self.metadata.resource_version.clone().unwrap_or_default(),
            self.made_on.clone(),
            std::thread::current().id(),
        ));
    }
}

impl Object for OnThread {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        Some(&self.metadata)
    }
}

shared_informer::reflector::decode_with_serde!(OnThread);

// Decode lanes (the reflector's `decode_lane.rs`, M1): through the HTTP lister-watcher on a
// multi-threaded runtime, every replaced object is dropped on the thread that decoded it, a
// lane's, never a runtime worker; so under glibc each object's memory goes back to the arena it
// came from.
on_every_queue!(
    replaced_objects_are_dropped_on_the_lane_that_decoded_them,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn replaced_objects_are_dropped_on_the_lane_that_decoded_them(queue: InformerQueue) {
    drops_on_the_decoding_lane(queue, "lane", |lw| lw).await;
}

// M5: a lister-watcher that wraps the HTTP one and forwards nothing but `list` and `watch` (as
// one written before lanes existed does) keeps the fast path: the objects are decoded on the
// reflector's lane and dropped there.
on_every_queue!(
    a_wrapping_lister_watcher_keeps_the_lane_without_forwarding_anything,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_wrapping_lister_watcher_keeps_the_lane_without_forwarding_anything(
    queue: InformerQueue,
) {
    drops_on_the_decoding_lane(queue, "wrapped", |inner| Counting {
        inner,
        calls: AtomicU64::new(0),
    })
    .await;
}

/// A lister-watcher that counts the calls to the one it wraps and says nothing else of itself.
struct Counting<L> {
    inner: L,
    calls: AtomicU64,
}

impl<L: ListerWatcher<OnThread>> ListerWatcher<OnThread> for Counting<L> {
    async fn list(&self, options: ListOptions) -> Result<ObjectList<OnThread>, ReflectorError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.list(options).await
    }

    async fn watch(&self, options: WatchOptions) -> Result<WatchStream<OnThread>, ReflectorError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.watch(options).await
    }
}

async fn drops_on_the_decoding_lane<L>(
    queue: InformerQueue,
    tag: &str,
    wrap: impl FnOnce(shared_informer::reflector::HttpListerWatcher<OnThread>) -> L,
) where
    L: ListerWatcher<OnThread>,
{
    use serde_json::json;
    use shared_informer::reflector::{ClusterConfig, HttpListerWatcher, Resource};

    let ns = format!("{tag}-{}", common::queues::name_of(queue));
    let sim = sim_apiserver::SimServer::builder().start().await.unwrap();
    sim.create("pods", Some(&ns), json!({"metadata": {"name": "a"}}))
        .unwrap();
    let config = ClusterConfig::new(&sim.url()).unwrap();
    let lw = HttpListerWatcher::<OnThread>::new(&config, Resource::namespaced("", "v1", "pods"))
        .unwrap()
        .namespace(ns.clone());
    let informer = SharedIndexInformer::new(
        wrap(lw),
        InformerOptions {
            name: "on-thread".into(),
            queue,
            ..InformerOptions::default()
        },
    );
    let handled: Arc<Mutex<u64>> = Arc::default();
    informer
        .add_event_handler(EventHandlerFns::new().on_update({
            let handled = Arc::clone(&handled);
            move |_: &Arc<OnThread>, _: &Arc<OnThread>| *handled.lock() += 1
        }))
        .unwrap();
    let (cancel, run) = run_until_synced(&informer).await;

    let updates = 200u64;
    for i in 0..updates {
        sim.update(
            "pods",
            Some(&ns),
            json!({"metadata": {"name": "a"}, "spec": {"n": i}}),
        )
        .unwrap();
    }
    let dropped_here = |ns: &str| {
        LANE_DROPS
            .lock()
            .iter()
            .filter(|d| d.0 == ns)
            .cloned()
            .collect::<Vec<_>>()
    };
    // The list's version and each update but the last are replaced, handled and dropped, on the
    // lane before its next job (M7): further updates give it one.
    until(|| *handled.lock() == updates).await;
    let mut nudges = 0;
    while (dropped_here(&ns).len() as u64) < updates {
        nudges += 1;
        assert!(nudges < 100, "replaced objects never dropped");
        sim.update(
            "pods",
            Some(&ns),
            json!({"metadata": {"name": "a"}, "spec": {"n": updates + nudges}}),
        )
        .unwrap();
        until(|| *handled.lock() == updates + nudges).await;
    }
    let dropped = dropped_here(&ns);
    let elsewhere: Vec<_> = dropped
        .iter()
        .filter(|(_, _, (made, _), freed)| made != freed)
        .collect();
    assert!(
        elsewhere.is_empty(),
        "dropped on another thread than the one that decoded them: {elsewhere:?}"
    );
    if std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
        let off_lane: Vec<_> = dropped
            .iter()
            .filter(|(_, _, (_, name), _)| {
                !name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("reflector-decode-"))
            })
            .collect();
        assert!(off_lane.is_empty(), "decoded off the lanes: {off_lane:?}");
    }
    cancel.cancel();
    run.await.unwrap();
}
