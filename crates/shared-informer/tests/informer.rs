//! Contract section (d): the informer against a scripted lister-watcher, under paused time.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{pod, queues, until, FakeLw};
use parking_lot::Mutex;
use shared_informer::reflector::store_index::{DynamicObject, Indexers, Object};
use shared_informer::reflector::{ReflectorError, Status, WatchEvent};
use shared_informer::{
    EventHandlerFns, InOrder, InformerError, InformerOptions, InformerQueue, SharedIndexInformer,
};
use tokio_util::sync::CancellationToken;

type Log = Arc<Mutex<Vec<String>>>;

fn recorder(log: &Log, tag: &'static str) -> EventHandlerFns<DynamicObject> {
    let (a, u, d) = (Arc::clone(log), Arc::clone(log), Arc::clone(log));
    EventHandlerFns::new()
        .on_add(move |o: &Arc<DynamicObject>, initial| {
            a.lock().push(format!(
                "{tag} add {} {} initial={initial}",
                o.name(),
                o.resource_version().unwrap_or("")
            ))
        })
        .on_update(move |old, new| {
            u.lock().push(format!(
                "{tag} update {} {}->{}",
                new.name(),
                old.resource_version().unwrap_or(""),
                new.resource_version().unwrap_or("")
            ))
        })
        .on_delete(move |o| {
            let name = o.key().map(|k| k.to_string()).unwrap_or_default();
            d.lock().push(format!(
                "{tag} delete {name} tombstone={}",
                o.is_tombstone()
            ))
        })
}

fn informer_on(
    queue: InformerQueue,
    lw: FakeLw,
    resync: Duration,
) -> SharedIndexInformer<DynamicObject, FakeLw> {
    SharedIndexInformer::new(
        lw,
        InformerOptions {
            name: "pods".into(),
            resync_period: resync,
            indexers: Indexers::new().with_namespace_index(),
            queue,
            ..InformerOptions::default()
        },
    )
}

fn start(
    inf: &SharedIndexInformer<DynamicObject, FakeLw>,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let cancel = CancellationToken::new();
    let task = {
        let inf = inf.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move { inf.run(cancel).await })
    };
    (cancel, task)
}

on_every_queue!(
    handlers_see_adds_updates_and_deletes_after_the_cache_is_written,
    start_paused = true
);
async fn handlers_see_adds_updates_and_deletes_after_the_cache_is_written(queue: InformerQueue) {
    let lw = FakeLw::new(vec![pod("a", 1), pod("b", 2)], "2");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    let log: Log = Arc::default();
    let seen_in_cache = Arc::new(AtomicUsize::new(0));
    let indexer = inf.indexer().clone();
    let counter = Arc::clone(&seen_in_cache);
    inf.add_event_handler(recorder(&log, "h")).unwrap();
    inf.add_event_handler(
        EventHandlerFns::new().on_add(move |o: &Arc<DynamicObject>, _| {
            if indexer.get(o).unwrap().is_some() {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        }),
    )
    .unwrap();
    let (cancel, task) = start(&inf);
    assert!(inf.wait_for_sync().await);
    until(|| lw.watches() == 1).await;
    lw.send(WatchEvent::Modified(pod("a", 3)));
    lw.send(WatchEvent::Deleted(pod("b", 4)));
    lw.send(WatchEvent::Added(pod("c", 5)));
    until(|| log.lock().len() == 5).await;
    let mut initial: Vec<String> = log.lock()[..2].to_vec();
    initial.sort();
    assert_eq!(
        initial,
        ["h add a 1 initial=true", "h add b 2 initial=true"]
    );
    assert_eq!(
        log.lock()[2..],
        [
            "h update a 1->3",
            "h delete ns/b tombstone=false",
            "h add c 5 initial=false"
        ]
    );
    assert_eq!(
        seen_in_cache.load(Ordering::SeqCst),
        3,
        "each add was visible in the cache"
    );
    assert_eq!(inf.last_sync_resource_version(), "5");
    cancel.cancel();
    task.await.unwrap();
    assert!(inf.is_started() && inf.is_stopped());
}

on_every_queue!(
    a_relist_after_410_delivers_missing_objects_as_tombstones,
    start_paused = true
);
async fn a_relist_after_410_delivers_missing_objects_as_tombstones(queue: InformerQueue) {
    let lw = FakeLw::new(vec![pod("a", 1), pod("b", 2)], "2");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    let log: Log = Arc::default();
    inf.add_event_handler(recorder(&log, "h")).unwrap();
    let (cancel, task) = start(&inf);
    assert!(inf.wait_for_sync().await);
    until(|| lw.watches() == 1).await;
    // While away, b was deleted and c created; the watch then ends with 410 Gone.
    lw.break_watch(gone(), vec![pod("a", 1), pod("c", 7)], "7");
    until(|| lw.lists() == 2 && log.lock().len() == 5).await;
    let mut after: Vec<String> = log.lock()[2..].to_vec();
    after.sort();
    assert_eq!(
        after,
        [
            "h add c 7 initial=false",
            "h delete ns/b tombstone=true",
            "h update a 1->1"
        ],
        "the unchanged object is a resync-class update for a syncing new listener"
    );
    assert_eq!(sorted_keys(&inf), ["ns/a", "ns/c"]);
    cancel.cancel();
    task.await.unwrap();
}

on_every_queue!(
    resync_reaches_only_the_listeners_that_are_due,
    start_paused = true
);
async fn resync_reaches_only_the_listeners_that_are_due(queue: InformerQueue) {
    // Contract D5.4: informer default 1 s; listeners 0, 2 s, 3 s.
    let lw = FakeLw::new(vec![pod("pod1", 1), pod("pod2", 2)], "2");
    let inf = informer_on(queue, lw.clone(), Duration::from_secs(1));
    let counts: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    for (period, count) in [0u64, 2, 3].into_iter().zip(&counts) {
        let (a, u) = (Arc::clone(count), Arc::clone(count));
        inf.add_event_handler_with_resync(
            EventHandlerFns::new()
                .on_add(move |_: &Arc<DynamicObject>, _| {
                    a.fetch_add(1, Ordering::SeqCst);
                })
                .on_update(move |_, _| {
                    u.fetch_add(1, Ordering::SeqCst);
                }),
            Duration::from_secs(period),
        )
        .unwrap();
    }
    let started = tokio::time::Instant::now();
    let (cancel, task) = start(&inf);
    assert!(inf.wait_for_sync().await);
    until(|| counts.iter().all(|c| c.load(Ordering::SeqCst) == 2)).await;
    tokio::time::sleep_until(started + Duration::from_millis(2_500)).await;
    let at = |i: usize| counts[i].load(Ordering::SeqCst);
    assert_eq!(
        (at(0), at(1), at(2)),
        (2, 4, 2),
        "at +2 s only the 2 s listener resynced"
    );
    tokio::time::sleep_until(started + Duration::from_millis(3_500)).await;
    assert_eq!(
        (at(0), at(1), at(2)),
        (2, 4, 4),
        "at +3 s only the 3 s listener resynced"
    );
    cancel.cancel();
    task.await.unwrap();
}

on_every_queue!(
    resync_periods_follow_the_check_period_rules,
    start_paused = true
);
async fn resync_periods_follow_the_check_period_rules(queue: InformerQueue) {
    // Contract D5.3: informer default 12 h; handlers asking 0, 1 min, 55 s, 5 s before start.
    let inf = informer_on(queue, FakeLw::default(), Duration::from_secs(12 * 3600));
    let noop = EventHandlerFns::<DynamicObject>::new;
    let regs: Vec<_> = [0u64, 60, 55, 5]
        .into_iter()
        .map(|s| {
            inf.add_event_handler_with_resync(noop(), Duration::from_secs(s))
                .unwrap()
        })
        .collect();
    let periods: Vec<u64> = regs.iter().map(|r| r.resync_period().as_secs()).collect();
    assert_eq!(
        periods,
        [0, 60, 55, 5],
        "the check period follows the smallest request; larger ones keep theirs"
    );
    // Below the 1 s minimum, a request is raised to it.
    let tiny = inf
        .add_event_handler_with_resync(noop(), Duration::from_millis(10))
        .unwrap();
    assert_eq!(tiny.resync_period(), Duration::from_secs(1));
    // An informer created with period 0 never resyncs, whatever handlers ask (D5.3 rule 4).
    let never = informer_on(queue, FakeLw::new(vec![pod("p", 1)], "1"), Duration::ZERO);
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    never
        .add_event_handler_with_resync(
            EventHandlerFns::new().on_update(move |_: &Arc<DynamicObject>, _| {
                c.fetch_add(1, Ordering::SeqCst);
            }),
            Duration::from_millis(10),
        )
        .unwrap();
    let (cancel, task) = start(&never);
    assert!(never.wait_for_sync().await);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(count.load(Ordering::SeqCst), 0);
    cancel.cancel();
    task.await.unwrap();
}

on_every_queue!(
    a_late_handler_receives_the_cache_and_syncs_after_handling_it,
    start_paused = true
);
async fn a_late_handler_receives_the_cache_and_syncs_after_handling_it(queue: InformerQueue) {
    let lw = FakeLw::new(vec![pod("a", 1), pod("b", 2)], "2");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    let early = inf.add_event_handler(EventHandlerFns::new()).unwrap();
    assert!(!early.has_synced(), "not synced before run");
    let (cancel, task) = start(&inf);
    assert!(inf.wait_for_sync().await);
    until(|| early.has_synced()).await;

    let log: Log = Arc::default();
    let l = Arc::clone(&log);
    // On this single-threaded runtime the handler's task cannot run before the next await, so the
    // registration is observed before it handled its replay.
    let late = inf
        .add_event_handler(
            EventHandlerFns::new().on_add(move |o: &Arc<DynamicObject>, initial| {
                l.lock().push(format!("{} initial={initial}", o.name()));
            }),
        )
        .unwrap();
    assert!(
        !late.has_synced(),
        "a late handler is not synced until it handled the replay"
    );
    assert_eq!(
        late.pending(),
        2,
        "the whole cache was queued to it at registration"
    );
    until(|| late.has_synced()).await;
    let mut got = log.lock().clone();
    got.sort();
    assert_eq!(got, ["a initial=true", "b initial=true"]);
    cancel.cancel();
    task.await.unwrap();
}

on_every_queue!(a_removed_handler_receives_nothing_more, start_paused = true);
async fn a_removed_handler_receives_nothing_more(queue: InformerQueue) {
    let lw = FakeLw::new(vec![pod("a", 1)], "1");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    let log: Log = Arc::default();
    let keep: Log = Arc::default();
    let reg = inf.add_event_handler(recorder(&log, "gone")).unwrap();
    inf.add_event_handler(recorder(&keep, "kept")).unwrap();
    let (cancel, task) = start(&inf);
    until(|| log.lock().len() == 1 && keep.lock().len() == 1).await;
    inf.shutdown_event_handler(&reg).await;
    inf.remove_event_handler(&reg); // idempotent
    until(|| lw.watches() == 1).await;
    lw.send(WatchEvent::Added(pod("b", 2)));
    until(|| keep.lock().len() == 2).await;
    assert_eq!(log.lock().len(), 1);
    cancel.cancel();
    task.await.unwrap();
}

on_every_queue!(
    a_panicking_handler_keeps_receiving_and_others_are_unaffected,
    start_paused = true
);
async fn a_panicking_handler_keeps_receiving_and_others_are_unaffected(queue: InformerQueue) {
    let lw = FakeLw::new((0..5).map(|i| pod(&format!("p{i}"), i)).collect(), "5");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    let panicky: Vec<_> = (0..2)
        .map(|_| {
            inf.add_event_handler(
                EventHandlerFns::new().on_add(|_: &Arc<DynamicObject>, _| panic!("handler bug")),
            )
            .unwrap()
        })
        .collect();
    let healthy = inf.add_event_handler(EventHandlerFns::new()).unwrap();
    let started = tokio::time::Instant::now();
    let (cancel, task) = start(&inf);
    until(|| healthy.processed() == 5).await;
    until(|| healthy.has_synced()).await;
    until(|| panicky.iter().all(|r| r.panics() == 5)).await;
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "a 1 s pause follows each panic"
    );
    assert!(
        !panicky[0].has_synced(),
        "a handler that panics on initial adds never syncs (D7.2)"
    );
    cancel.cancel();
    task.await.unwrap();
}

on_every_queue!(
    a_blocked_handler_does_not_slow_another,
    flavor = "multi_thread",
    worker_threads = 4
);
async fn a_blocked_handler_does_not_slow_another(queue: InformerQueue) {
    let lw = FakeLw::new((0..200).map(|i| pod(&format!("p{i}"), i)).collect(), "200");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let slow = inf
        .add_event_handler(
            EventHandlerFns::new().on_add(move |_: &Arc<DynamicObject>, _| {
                // Blocking the thread, as a handler stuck on a lock or a synchronous call does.
                // `block_in_place` hands the worker's other tasks to another thread first:
                // otherwise a listener task that tokio had put in this worker's LIFO slot, which
                // other workers cannot steal, would wait behind the blocked one (the test's own
                // artefact, seen under CI load).
                let _ = tokio::task::block_in_place(|| wait.lock().recv());
            }),
        )
        .unwrap();
    let fast = inf.add_event_handler(EventHandlerFns::new()).unwrap();
    let (cancel, task) = start(&inf);
    until(|| fast.processed() == 200).await;
    // The informer marks itself synced from its own task, just after the last initial pop.
    until(|| fast.has_synced()).await;
    assert!(
        slow.processed() <= 1,
        "the slow handler is still on its first notification"
    );
    assert!(
        slow.pending() >= 199,
        "its notifications wait in its own buffer"
    );
    assert!(
        inf.has_synced(),
        "the informer itself is not held back either"
    );
    for _ in 0..200 {
        let _ = release.send(());
    }
    until(|| slow.processed() == 200).await;
    cancel.cancel();
    task.await.unwrap();
}

on_every_queue!(
    lifecycle_rules_for_transform_handlers_and_indexers,
    start_paused = true
);
async fn lifecycle_rules_for_transform_handlers_and_indexers(queue: InformerQueue) {
    let lw = FakeLw::new(vec![pod("pod1", 1), pod("pod2", 2)], "2");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    assert!(!inf.is_started() && !inf.is_stopped());
    inf.set_transform(|o: Arc<DynamicObject>| {
        let mut o = (*o).clone();
        o.metadata.name = o.metadata.name.map(|n| n.to_uppercase());
        Ok(Arc::new(o))
    })
    .unwrap();
    let log: Log = Arc::default();
    inf.add_event_handler(recorder(&log, "h")).unwrap();
    let (cancel, task) = start(&inf);
    until(|| log.lock().len() == 2).await;
    let mut got = log.lock().clone();
    got.sort();
    assert_eq!(
        got,
        ["h add POD1 1 initial=true", "h add POD2 2 initial=true"]
    );
    assert!(inf.is_started() && !inf.is_stopped());
    assert!(matches!(
        inf.set_transform(Ok),
        Err(InformerError::AlreadyStarted)
    ));
    assert_eq!(
        inf.set_transform(Ok).unwrap_err().to_string(),
        "informer has already started"
    );
    inf.add_indexers(Indexers::new().with("labels", |o: &DynamicObject| {
        Ok(vec![o.name().to_lowercase()])
    }))
    .unwrap();
    assert_eq!(inf.indexer().list_index_func_values("labels").len(), 2);
    cancel.cancel();
    task.await.unwrap();
    assert!(inf.is_started() && inf.is_stopped());
    let err = inf.add_event_handler(EventHandlerFns::new()).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("was not added to shared informer because it has stopped already"),
        "{err}"
    );
    assert!(inf.add_indexers(Indexers::new()).is_err());
    // Running again after stop returns at once.
    inf.run(CancellationToken::new()).await;
}

on_every_queue!(
    a_stopped_and_dropped_informer_frees_its_cache,
    start_paused = true
);
async fn a_stopped_and_dropped_informer_frees_its_cache(queue: InformerQueue) {
    let lw = FakeLw::new(vec![pod("a", 1)], "1");
    let inf = informer_on(queue, lw.clone(), Duration::from_secs(30));
    let log: Log = Arc::default();
    let registration = inf.add_event_handler(recorder(&log, "h")).unwrap();
    let (cancel, task) = start(&inf);
    assert!(inf.wait_for_sync().await);
    let cached = Arc::downgrade(&inf.indexer().get_by_key("ns/a").unwrap());
    until(|| log.lock().len() == 1).await;

    cancel.cancel();
    task.await.unwrap();
    assert!(inf.is_stopped());
    assert_eq!(inf.last_sync_resource_version(), "1", "kept after stop");
    drop(registration);
    drop(inf);
    // Nothing the informer built may keep it (and so its cache) alive once every handle is gone:
    // the reflector it ran, the resync hook it gave that reflector, its listeners.
    assert!(
        cached.upgrade().is_none(),
        "the cached object outlived the informer: a reference cycle keeps it"
    );
}

// D7 and D11 through the one waiting mechanism: an informer and its registrations waited for
// together, the report naming what did not sync.
on_every_queue!(
    wait_for_cache_sync_names_the_registrations_that_did_not_sync,
    start_paused = true
);
async fn wait_for_cache_sync_names_the_registrations_that_did_not_sync(queue: InformerQueue) {
    use shared_informer::{wait_for_cache_sync, HasSynced};

    let lw = FakeLw::new((0..3).map(|i| pod(&format!("p{i}"), i)).collect(), "3");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    let healthy = inf.add_event_handler(EventHandlerFns::new()).unwrap();
    let slow = inf
        .add_event_handler(
            EventHandlerFns::new()
                .on_add(|_: &Arc<DynamicObject>, _| std::thread::sleep(Duration::from_millis(1))),
        )
        .unwrap();
    let panicky = inf
        .add_event_handler(
            EventHandlerFns::new().on_add(|_: &Arc<DynamicObject>, _| panic!("handler bug")),
        )
        .unwrap();
    let waiting = tokio::spawn({
        let (healthy, slow) = (healthy.clone(), slow.clone());
        async move { (healthy.wait_for_sync().await, slow.wait_for_sync().await) }
    });
    let (cancel, task) = start(&inf);
    let report = wait_for_cache_sync(
        Duration::from_secs(30),
        [
            ("informer", &inf as &dyn HasSynced),
            ("healthy", &healthy as &dyn HasSynced),
            ("slow", &slow as &dyn HasSynced),
            ("panicky", &panicky as &dyn HasSynced),
        ],
    )
    .await;
    assert_eq!(report.not_synced(), ["panicky"], "{report}");
    assert_eq!(waiting.await.unwrap(), (true, true));
    // Removal ends a wait that could never succeed.
    let never = tokio::spawn({
        let panicky = panicky.clone();
        async move { panicky.wait_for_sync().await }
    });
    inf.shutdown_event_handler(&panicky).await;
    assert!(
        !never.await.unwrap(),
        "a removed registration stops waiting, unsynced"
    );
    assert!(!panicky.has_synced());
    let stats = inf.handler_stats();
    assert_eq!(
        stats
            .iter()
            .map(|s| (s.processed, s.panics))
            .collect::<Vec<_>>(),
        [(3, 0), (3, 0)],
        "the two registrations left, each having handled the three initial adds"
    );
    assert!(inf.id().to_string().starts_with("pods ("), "{}", inf.id());
    cancel.cancel();
    task.await.unwrap();
}

on_every_queue!(
    a_registration_of_another_informer_is_not_removed,
    start_paused = true
);
async fn a_registration_of_another_informer_is_not_removed(queue: InformerQueue) {
    let a = informer_on(queue, FakeLw::new(vec![pod("a", 1)], "1"), Duration::ZERO);
    let b = informer_on(queue, FakeLw::new(vec![pod("b", 1)], "1"), Duration::ZERO);
    assert_eq!(a.id().name, b.id().name, "same name and type");
    assert_ne!(a.id(), b.id(), "still two informers");
    let log: Log = Arc::default();
    let reg = a.add_event_handler(recorder(&log, "a")).unwrap();
    b.remove_event_handler(&reg);
    let (cancel, task) = start(&a);
    until(|| reg.has_synced()).await;
    assert_eq!(log.lock().len(), 1, "still registered with a");
    cancel.cancel();
    task.await.unwrap();
}

fn sorted_keys(inf: &SharedIndexInformer<DynamicObject, FakeLw>) -> Vec<String> {
    let mut keys: Vec<String> = inf
        .indexer()
        .list_keys()
        .iter()
        .map(|k| k.to_string())
        .collect();
    keys.sort();
    keys
}

fn gone() -> ReflectorError {
    ReflectorError::api(Status {
        code: 410,
        reason: "Expired".into(),
        message: "too old resource version".into(),
        ..Status::default()
    })
}

/// D2.5's check line, on the in-order queue in both modes: a relist's deletions reach handlers
/// first, then the listed objects in list order.
async fn a_relist_notifies_deletions_then_the_list_in_order(queue: InformerQueue) {
    let lw = FakeLw::new(vec![pod("pod-1", 1), pod("pod-2", 2), pod("pod-3", 3)], "3");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    let log: Log = Arc::default();
    inf.add_event_handler(recorder(&log, "h")).unwrap();
    let (cancel, task) = start(&inf);
    assert!(inf.wait_for_sync().await);
    until(|| lw.watches() == 1 && log.lock().len() == 3).await;
    lw.break_watch(
        gone(),
        vec![pod("pod-1", 4), pod("pod-2", 5), pod("pod-4", 6)],
        "6",
    );
    until(|| log.lock().len() == 7).await;
    assert_eq!(
        log.lock()[3..],
        [
            "h delete ns/pod-3 tombstone=true",
            "h update pod-1 1->4",
            "h update pod-2 2->5",
            "h add pod-4 6 initial=false",
        ]
    );
    assert_eq!(inf.last_store_sync_resource_version(), "6");
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_relist_notifies_deletions_then_the_list_in_order_atomic() {
    a_relist_notifies_deletions_then_the_list_in_order(queues::IN_ORDER).await
}

#[tokio::test(start_paused = true)]
async fn a_relist_notifies_deletions_then_the_list_in_order_tombstones() {
    a_relist_notifies_deletions_then_the_list_in_order(queues::IN_ORDER_TOMBSTONES).await
}

/// Whether a reader polling the cache during a relist of 3000 objects ever sees part of the old
/// list beside part of the new one.
async fn a_reader_sees_a_half_applied_relist(queue: InformerQueue) -> bool {
    let old: Vec<DynamicObject> = (0..3000).map(|i| pod(&format!("p{i}"), 1)).collect();
    let new: Vec<DynamicObject> = (0..3000).map(|i| pod(&format!("p{i}"), 2)).collect();
    let lw = FakeLw::new(old, "1");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    let (cancel, task) = start(&inf);
    assert!(inf.wait_for_sync().await);
    until(|| lw.watches() == 1).await;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (cache, done) = (inf.indexer().clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut mixed = false;
            while !done.load(Ordering::SeqCst) && !mixed {
                let (mut one, mut two) = (0, 0);
                for o in cache.list() {
                    match o.resource_version() {
                        Some("1") => one += 1,
                        _ => two += 1,
                    }
                }
                mixed = one > 0 && two > 0;
            }
            mixed
        })
    };
    lw.break_watch(gone(), new, "2");
    let cache = inf.indexer().clone();
    let updated = move || {
        cache
            .list()
            .iter()
            .all(|o| o.resource_version() == Some("2"))
    };
    while !updated() {
        tokio::task::yield_now().await;
    }
    done.store(true, Ordering::SeqCst);
    let mixed = reader.join().unwrap();
    cancel.cancel();
    task.await.unwrap();
    mixed
}

/// An atomic relist replaces the cache at once: no reader ever sees half of it. (The DeltaFifo,
/// which applies a relist key by key, is the control: a reader does see it half applied, which
/// shows the test can tell.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_atomic_relist_is_never_seen_half_applied() {
    assert!(!a_reader_sees_a_half_applied_relist(queues::IN_ORDER).await);
    // The control depends on the reader thread running while the relist is applied: a few tries
    // make a busy machine's scheduling irrelevant.
    let mut control = false;
    for _ in 0..5 {
        control = a_reader_sees_a_half_applied_relist(InformerQueue::DeltaFifo).await;
        if control {
            break;
        }
    }
    assert!(
        control,
        "the DeltaFifo control never showed a half-applied relist"
    );
}

on_every_queue!(
    the_store_resource_version_follows_what_the_cache_applied,
    start_paused = true
);
/// The cache's own resource version (A6, D2.7) follows what it has applied, while the
/// reflector's may be ahead. On the atomic in-order queue the list's RV and bookmarks reach the
/// cache; on the others only objects do, so the cache holds the RV of the last object written.
async fn the_store_resource_version_follows_what_the_cache_applied(queue: InformerQueue) {
    let atomic = matches!(queue, InformerQueue::InOrder(InOrder { atomic: true, .. }));
    let lw = FakeLw::new(vec![pod("a", 1)], "10");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    assert_eq!(inf.last_store_sync_resource_version(), "");
    let (cancel, task) = start(&inf);
    assert!(inf.wait_for_sync().await);
    // Synced: the list has been applied. Its RV, or its last object's.
    let listed = if atomic { "10" } else { "1" };
    assert_eq!(inf.last_store_sync_resource_version(), listed, "{queue:?}");
    assert_eq!(inf.last_sync_resource_version(), "10");
    until(|| lw.watches() == 1).await;
    assert!(lw.send(WatchEvent::Modified(pod("a", 12))));
    until(|| inf.last_store_sync_resource_version() == "12").await;
    assert_eq!(inf.last_sync_resource_version(), "12");
    assert!(
        lw.send(WatchEvent::Bookmark(shared_informer::reflector::Bookmark {
            resource_version: "15".into(),
            initial_events_end: false,
        }))
    );
    until(|| inf.last_sync_resource_version() == "15").await;
    if atomic {
        until(|| inf.last_store_sync_resource_version() == "15").await;
    } else {
        // The other queues queue nothing for a bookmark: nothing is left to reach the cache.
        assert_eq!(inf.last_store_sync_resource_version(), "12", "{queue:?}");
    }
    cancel.cancel();
    task.await.unwrap();
}

/// A batch is one transaction (D2.6): an object the cache refuses (here, one its index function
/// cannot index) is skipped and reported, and the rest of the batch is applied and notified.
#[tokio::test(start_paused = true)]
async fn a_batch_applies_what_the_cache_accepts_and_notifies_only_that() {
    let lw = FakeLw::new(vec![pod("a", 1), pod("bad", 2), pod("c", 3)], "3");
    let inf = SharedIndexInformer::new(
        lw.clone(),
        InformerOptions {
            name: "pods".into(),
            indexers: Indexers::new().with("strict", |o: &DynamicObject| {
                if o.name() == "bad" {
                    Err("cannot index this one".into())
                } else {
                    Ok(vec![o.name().to_string()])
                }
            }),
            queue: InformerQueue::InOrder(InOrder {
                batch_size: 1000,
                atomic: false,
                unlock_while_processing: false,
            }),
            ..InformerOptions::default()
        },
    );
    let log: Log = Arc::default();
    inf.add_event_handler(recorder(&log, "h")).unwrap();
    let (cancel, task) = start(&inf);
    assert!(inf.wait_for_sync().await);
    until(|| log.lock().len() == 2).await;
    let mut seen = log.lock().clone();
    seen.sort();
    assert_eq!(seen, ["h add a 1 initial=true", "h add c 3 initial=true"]);
    assert_eq!(sorted_keys(&inf), ["ns/a", "ns/c"]);
    cancel.cancel();
    task.await.unwrap();
}

// D15: the informer's identity, name and object type, labels its handlers' names and stats and
// its reflector's counters.
on_every_queue!(
    the_informer_identity_labels_its_stats_and_its_handlers,
    start_paused = true
);
async fn the_informer_identity_labels_its_stats_and_its_handlers(queue: InformerQueue) {
    let lw = FakeLw::new(vec![pod("a", 1), pod("b", 2)], "2");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    assert_eq!(inf.id().to_string(), "pods (DynamicObject)");
    assert!(inf.id().type_name.ends_with("::DynamicObject"));
    let registration = inf.add_event_handler(EventHandlerFns::new()).unwrap();
    assert!(
        registration.name().starts_with("pods (DynamicObject)#"),
        "{}",
        registration.name()
    );
    let (cancel, task) = start(&inf);
    assert!(registration.wait_for_sync().await);
    until(|| lw.watches() == 1).await;
    assert!(lw.send(WatchEvent::Modified(pod("a", 3))));
    until(|| inf.stats().reflector.modified == 1).await;
    let stats = inf.stats();
    assert_eq!(&stats.informer, inf.id());
    assert_eq!(
        (stats.reflector.lists, stats.reflector.listed_items),
        (1, 2)
    );
    assert_eq!(stats.reflector.watches, 1);
    let [handler] = &stats.handlers[..] else {
        panic!("one handler: {:?}", stats.handlers)
    };
    assert_eq!(&handler.informer, inf.id());
    assert_eq!(handler.name, registration.name());
    let by_handler_stats = &inf.handler_stats()[0];
    assert_eq!(
        (&by_handler_stats.informer, &by_handler_stats.name),
        (&handler.informer, &handler.name)
    );
    // Another informer of the same name and type is still another informer.
    let twin = informer_on(queue, FakeLw::new(vec![], "1"), Duration::ZERO);
    assert_eq!(twin.id().to_string(), inf.id().to_string());
    assert_ne!(twin.id(), inf.id());
    cancel.cancel();
    task.await.unwrap();
}

// A handler that hands its initial adds to a worker: its registration syncs when the handler has
// returned, the `SyncTracker` only when the worker has finished them too.
on_every_queue!(
    a_sync_tracker_waits_for_the_work_a_handler_handed_off,
    start_paused = true
);
async fn a_sync_tracker_waits_for_the_work_a_handler_handed_off(queue: InformerQueue) {
    use shared_informer::{HasSynced, SyncTracker};

    let lw = FakeLw::new((0..3).map(|i| pod(&format!("p{i}"), i)).collect(), "3");
    let inf = informer_on(queue, lw.clone(), Duration::ZERO);
    let tracker = SyncTracker::new();
    let (work, mut worker) = tokio::sync::mpsc::unbounded_channel::<String>();
    let registration = inf
        .add_event_handler(EventHandlerFns::new().on_add({
            let tracker = tracker.clone();
            move |o: &Arc<DynamicObject>, initial| {
                if initial {
                    tracker.start();
                }
                work.send(o.name().to_string()).unwrap();
            }
        }))
        .unwrap();
    tracker.set_upstream(registration.clone());
    let (cancel, task) = start(&inf);
    assert!(registration.wait_for_sync().await);
    assert_eq!(tracker.pending(), 3);
    assert!(!tracker.has_synced(), "the worker has not started");
    let waiting = tokio::spawn({
        let tracker = tracker.clone();
        async move { tracker.wait_for_sync().await }
    });
    for done in 1..=3 {
        assert!(worker.recv().await.is_some());
        tracker.finished().unwrap();
        assert_eq!(tracker.has_synced(), done == 3, "{done} finished");
    }
    assert!(waiting.await.unwrap());
    cancel.cancel();
    task.await.unwrap();
}

// client-go's AddEventHandlerWithOptions: an unset resync period is the informer's default, a set
// one (zero included) the handler's own; a name labels the registration, its stats and logs.
on_every_queue!(
    handler_options_set_the_resync_period_and_name_the_handler,
    start_paused = true
);
async fn handler_options_set_the_resync_period_and_name_the_handler(queue: InformerQueue) {
    use shared_informer::HandlerOptions;

    let lw = FakeLw::new(vec![pod("pod1", 1), pod("pod2", 2)], "2");
    let inf = informer_on(queue, lw.clone(), Duration::from_secs(1));
    let counts: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let options = [
        HandlerOptions::new(),
        HandlerOptions::new().resync_period(Duration::ZERO),
        HandlerOptions::new()
            .resync_period(Duration::from_secs(2))
            .name("node-controller"),
    ];
    let mut registrations = Vec::new();
    for (options, count) in options.into_iter().zip(&counts) {
        let (a, u) = (Arc::clone(count), Arc::clone(count));
        registrations.push(
            inf.add_event_handler_with_options(
                EventHandlerFns::new()
                    .on_add(move |_: &Arc<DynamicObject>, _| {
                        a.fetch_add(1, Ordering::SeqCst);
                    })
                    .on_update(move |_, _| {
                        u.fetch_add(1, Ordering::SeqCst);
                    }),
                options,
            )
            .unwrap(),
        );
    }
    let periods: Vec<Duration> = registrations.iter().map(|r| r.resync_period()).collect();
    assert_eq!(
        periods,
        [
            Duration::from_secs(1),
            Duration::ZERO,
            Duration::from_secs(2)
        ]
    );
    assert_eq!(registrations[0].name(), "pods (DynamicObject)#1");
    assert_eq!(
        registrations[2].name(),
        "pods (DynamicObject)#3/node-controller"
    );
    let started = tokio::time::Instant::now();
    let (cancel, task) = start(&inf);
    assert!(inf.wait_for_sync().await);
    tokio::time::sleep_until(started + Duration::from_millis(2_500)).await;
    let at = |i: usize| counts[i].load(Ordering::SeqCst);
    assert_eq!(
        (at(0), at(1), at(2)),
        (6, 2, 4),
        "the default 1 s handler resynced twice, the 0 one never, the 2 s one once"
    );
    let names: Vec<String> = inf.handler_stats().into_iter().map(|h| h.name).collect();
    assert!(
        names.contains(&"pods (DynamicObject)#3/node-controller".to_string()),
        "{names:?}"
    );
    let report = shared_informer::wait_for_cache_sync(
        Duration::from_secs(1),
        [(registrations[2].name(), &registrations[2] as _)],
    )
    .await;
    assert_eq!(
        report.iter().next(),
        Some(("pods (DynamicObject)#3/node-controller", true))
    );
    cancel.cancel();
    task.await.unwrap();
}
