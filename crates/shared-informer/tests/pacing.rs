//! Pacing (docs/semantics.md, P1–P5): the informer reads no further ahead of a handler that
//! keeps up than its bounds, and a handler that does not keep up is waited for once, then left to
//! lag without holding the cache back.
//!
//! The handlers here block their thread (as a handler stuck on a lock does) behind a gate the
//! test opens, so these tests run on a multi-threaded runtime; they wait for conditions, never for
//! time to pass.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{pod, until, FakeLw};
use parking_lot::Mutex;
use shared_informer::reflector::store_index::{DynamicObject, Indexers, Object};
use shared_informer::reflector::WatchEvent;
use shared_informer::{
    EventHandlerFns, InOrder, InformerOptions, InformerQueue, Pacing, SharedIndexInformer,
};
use tokio_util::sync::CancellationToken;

const PODS: u64 = 20;
const EVENTS: u64 = 400;

fn informer(
    queue: InformerQueue,
    lw: FakeLw,
    pacing: Option<Pacing>,
) -> SharedIndexInformer<DynamicObject, FakeLw> {
    SharedIndexInformer::new(
        lw,
        InformerOptions {
            name: "pods".into(),
            indexers: Indexers::new(),
            queue,
            pacing,
            ..InformerOptions::default()
        },
    )
}

/// The three queue modes of `common::queues`, the in-order one with batches of 8 so that one pop
/// stays small against the high waters these tests set; every test here runs on each.
const QUEUES: [InformerQueue; 3] = [
    InformerQueue::InOrder(InOrder {
        batch_size: 8,
        atomic: true,
        unlock_while_processing: true,
    }),
    InformerQueue::InOrder(InOrder {
        batch_size: 1,
        atomic: false,
        unlock_while_processing: false,
    }),
    InformerQueue::DeltaFifo,
];

/// A gate a handler blocks on until the test opens it (`block_in_place`, so that the worker's
/// other tasks move to another thread first).
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, parking_lot::Condvar)>);

impl Gate {
    fn pass(&self) {
        let (open, cv) = &*self.0;
        tokio::task::block_in_place(|| {
            let mut open = open.lock();
            while !*open {
                cv.wait(&mut open);
            }
        });
    }

    fn open(&self) {
        let (open, cv) = &*self.0;
        *open.lock() = true;
        cv.notify_all();
    }
}

/// Opens the gate when dropped, so that a failing test does not leave a handler blocked (and the
/// runtime waiting for it) forever.
struct OpenOnDrop(Gate);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// A handler that records every update's new resource version and blocks on `gate` first.
fn gated_recorder(
    gate: &Gate,
    seen: &Arc<Mutex<Vec<(String, u64)>>>,
) -> EventHandlerFns<DynamicObject> {
    let (gate, seen) = (gate.clone(), Arc::clone(seen));
    EventHandlerFns::new().on_update(move |_old: &Arc<DynamicObject>, new: &Arc<DynamicObject>| {
        gate.pass();
        let rv = new.resource_version().unwrap_or("0").parse().unwrap();
        seen.lock().push((new.name().to_string(), rv));
    })
}

/// One test's informer on `queue` (`PODS` pods listed; high waters 16 and 8), and the gate and
/// record of the gated handler the test registers.
struct Paced {
    lw: FakeLw,
    inf: SharedIndexInformer<DynamicObject, FakeLw>,
    gate: Gate,
    seen: Arc<Mutex<Vec<(String, u64)>>>,
    _open: OpenOnDrop,
}

fn paced(queue: InformerQueue, max_handler_wait: Duration) -> Paced {
    let lw = FakeLw::new(
        (0..PODS).map(|i| pod(&format!("p{i}"), i + 1)).collect(),
        &PODS.to_string(),
    );
    let pacing = Pacing {
        queue_high_water: 16,
        handler_high_water: 8,
        max_handler_wait,
    };
    let inf = informer(queue, lw.clone(), Some(pacing));
    let gate = Gate::default();
    Paced {
        lw,
        inf,
        _open: OpenOnDrop(gate.clone()),
        gate,
        seen: Arc::new(Mutex::new(Vec::new())),
    }
}

/// `EVENTS` updates spread over `PODS` pods, resource versions `PODS + 1 ..= PODS + EVENTS`.
fn send_updates(lw: &FakeLw) {
    for e in 0..EVENTS {
        let rv = PODS + 1 + e;
        assert!(lw.send(WatchEvent::Modified(pod(&format!("p{}", e % PODS), rv))));
    }
}

fn start(
    inf: &SharedIndexInformer<DynamicObject, FakeLw>,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let cancel = CancellationToken::new();
    let task = {
        let (inf, cancel) = (inf.clone(), cancel.clone());
        tokio::spawn(async move { inf.run(cancel).await })
    };
    (cancel, task)
}

/// Waits until the cache holds the last event's object (so every notification has been queued).
async fn until_cache_has_the_last_event(inf: &SharedIndexInformer<DynamicObject, FakeLw>) {
    let last_rv = (PODS + EVENTS).to_string();
    until(|| {
        inf.indexer()
            .get_by_key("ns/p19")
            .is_some_and(|o| o.resource_version() == Some(last_rv.as_str()))
    })
    .await;
}

/// Every pod's updates reached the handler, each pod's in increasing resource version order.
fn assert_in_order_per_pod(seen: &[(String, u64)]) {
    for p in 0..PODS {
        let name = format!("p{p}");
        let rvs: Vec<u64> = seen
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, rv)| *rv)
            .collect();
        assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{name}: {rvs:?}");
        assert_eq!(
            rvs.last(),
            Some(&(EVENTS + 1 + p)),
            "{name} ends at its last update"
        );
    }
}

/// P2, P3: while a handler that is waited for does not drain, the informer stops taking from the
/// queue and the reflector stops reading the watch: what it has read stays within the bounds.
/// Opened, everything arrives, in order per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_is_waited_for_holds_the_reader_back_within_the_bounds() {
    for queue in QUEUES {
        let setup = paced(queue, Duration::from_secs(3600));
        let (lw, inf, gate, seen) = (&setup.lw, &setup.inf, &setup.gate, &setup.seen);
        let reg = inf.add_event_handler(gated_recorder(gate, seen)).unwrap();
        let (cancel, task) = start(inf);
        until(|| reg.has_synced()).await;
        until(|| lw.watches() > 0).await;
        send_updates(lw);

        // The informer now waits for the handler. From here on, the whole time the handler is
        // blocked, what the reflector has read stays within the bounds: the handler's high water
        // plus one pop in its buffer, the queue's high water plus one batch of already decoded
        // events (64) in the queue. Unpaced, it reads all 400 events at once.
        let batch = match queue {
            InformerQueue::InOrder(o) => o.batch_size as i64,
            // One pop is one key with every delta queued for it.
            InformerQueue::DeltaFifo => (EVENTS / PODS) as i64,
        };
        let read = || {
            inf.last_sync_resource_version()
                .as_str()
                .parse::<u64>()
                .unwrap()
                - PODS
        };
        until(|| reg.pending() > 8).await;
        let bound = 8 + batch as u64 + 1 + 16 + 64;
        for _ in 0..100 {
            let (read_now, pending) = (read(), reg.pending());
            assert!(
                pending <= 8 + batch,
                "{queue:?}: {pending} notifications buffered"
            );
            assert!(
                read_now <= bound,
                "{queue:?}: the reflector read {read_now} events (bound {bound})"
            );
            // An observation window, not a synchronisation: the bound holds at every instant.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(!inf.handler_stats()[0].lagging);

        gate.open();
        // The cache holds an event before its notification is queued (a pop's notifications go
        // out after its cache write), and the DeltaFifo pops by key, not in event order: so wait
        // for the handler to have handled every pod's last update, then for its buffer to drain.
        until_cache_has_the_last_event(inf).await;
        until(|| {
            let seen = seen.lock();
            (0..PODS).all(|p| seen.contains(&(format!("p{p}"), EVENTS + 1 + p)))
        })
        .await;
        until(|| reg.pending() == 0).await;
        assert_eq!(read(), EVENTS);
        assert_in_order_per_pod(&seen.lock());
        cancel.cancel();
        task.await.unwrap();
    }
}

/// P4: a handler still over half its high water after `max_handler_wait` is left to lag: the cache
/// and another handler go on to the end while its buffer grows; once it drains it is paced again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_does_not_drain_in_time_lags_without_holding_the_cache_back() {
    for queue in QUEUES {
        let setup = paced(queue, Duration::from_millis(20));
        let (lw, inf, gate, seen) = (&setup.lw, &setup.inf, &setup.gate, &setup.seen);
        let slow = inf.add_event_handler(gated_recorder(gate, seen)).unwrap();
        let fast = inf.add_event_handler(EventHandlerFns::new()).unwrap();
        let (cancel, task) = start(inf);
        until(|| slow.has_synced() || inf.has_synced()).await;
        until(|| lw.watches() > 0).await;
        send_updates(lw);

        until_cache_has_the_last_event(inf).await;
        until(|| fast.processed() >= EVENTS).await;
        assert!(
            inf.handler_stats()[0].lagging,
            "{queue:?}: the slow handler is lagging"
        );
        assert!(
            slow.pending() > 8,
            "{queue:?}: its buffer grew past the high water"
        );
        assert!(!inf.handler_stats()[1].lagging);

        gate.open();
        until(|| slow.pending() == 0).await;
        assert!(
            !inf.handler_stats()[0].lagging,
            "{queue:?}: caught up, paced again"
        );
        assert_in_order_per_pod(&seen.lock());
        cancel.cancel();
        task.await.unwrap();
    }
}

/// P1: without pacing the informer never waits: a blocked handler's buffer takes every event and
/// the cache reaches the end at once (client-go's behaviour).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_pacing_nothing_is_waited_for() {
    for queue in QUEUES {
        let lw = FakeLw::new(
            (0..PODS).map(|i| pod(&format!("p{i}"), i + 1)).collect(),
            &PODS.to_string(),
        );
        let inf = informer(queue, lw.clone(), None);
        let (gate, seen) = (Gate::default(), Arc::new(Mutex::new(Vec::new())));
        let _open = OpenOnDrop(gate.clone());
        let slow = inf.add_event_handler(gated_recorder(&gate, &seen)).unwrap();
        let (cancel, task) = start(&inf);
        until(|| inf.has_synced()).await;
        until(|| lw.watches() > 0).await;
        send_updates(&lw);
        until(|| slow.pending() as u64 >= EVENTS).await;
        // Every event buffered for the blocked handler: the cache, which is written first, is at
        // the end already.
        until_cache_has_the_last_event(&inf).await;
        assert!(
            !inf.handler_stats()[0].lagging,
            "{queue:?}: lagging is a pacing state only"
        );
        gate.open();
        until(|| slow.pending() == 0).await;
        assert_in_order_per_pod(&seen.lock());
        cancel.cancel();
        task.await.unwrap();
    }
}

/// P3: initial-list adds hold objects the cache holds too, so they are not counted: a handler
/// still busy with a large initial list is not waited for, and watch events reach the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_list_adds_are_not_waited_for() {
    const LISTED: u64 = 100;
    for queue in QUEUES {
        let lw = FakeLw::new(
            (0..LISTED).map(|i| pod(&format!("p{i}"), i + 1)).collect(),
            &LISTED.to_string(),
        );
        let pacing = Pacing {
            queue_high_water: 16,
            handler_high_water: 8,
            max_handler_wait: Duration::from_secs(3600),
        };
        let inf = informer(queue, lw.clone(), Some(pacing));
        let gate = Gate::default();
        let _open = OpenOnDrop(gate.clone());
        let blocked = gate.clone();
        let reg = inf
            .add_event_handler(
                EventHandlerFns::new().on_add(move |_: &Arc<DynamicObject>, _| blocked.pass()),
            )
            .unwrap();
        let (cancel, task) = start(&inf);
        until(|| inf.has_synced() && lw.watches() > 0).await;
        assert!(
            reg.pending() as u64 >= LISTED - 1,
            "{queue:?}: the initial adds wait"
        );
        // Fewer updates than the high water: had the initial adds counted, the informer would
        // wait for this handler (for an hour) before taking them from the queue.
        for e in 0..4 {
            assert!(lw.send(WatchEvent::Modified(pod(&format!("p{e}"), LISTED + 1 + e))));
        }
        let last = (LISTED + 4).to_string();
        until(|| {
            inf.indexer()
                .get_by_key("ns/p3")
                .is_some_and(|o| o.resource_version() == Some(last.as_str()))
        })
        .await;
        assert!(!inf.handler_stats()[0].lagging);
        gate.open();
        until(|| reg.pending() == 0 && reg.has_synced()).await;
        cancel.cancel();
        task.await.unwrap();
    }
}
