//! The ListAndWatch loop against a scripted lister-watcher (contract section C).

use reflector::store_index::ResourceVersion;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use parking_lot::Mutex;
use reflector::delta_fifo::{FifoError, Store};
use reflector::store_index::{DynamicObject, Object, StoreError};
use reflector::{
    BackoffConfig, Bookmark, ListError, ListOptions, ListerWatcher, ObjectList, Reflector,
    ReflectorError, ReflectorOptions, Representation, ResourceVersionMatch, Status, WatchEvent,
    WatchOptions, WatchStream,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

type Obj = DynamicObject;
type Event = Result<WatchEvent<Obj>, ReflectorError>;

fn pod(name: &str, rv: &str) -> Obj {
    DynamicObject::new("v1", "Pod")
        .within("ns")
        .named(name)
        .with_resource_version(rv)
}

fn pods(n: usize, rv: &str) -> Vec<Obj> {
    (0..n).map(|i| pod(&format!("p{i}"), rv)).collect()
}

fn api(code: u16, reason: &str, msg: &str) -> ReflectorError {
    ReflectorError::api(Status::failure(code, reason, msg))
}

fn expired() -> ReflectorError {
    api(410, "Expired", "too old resource version")
}

fn bookmark(rv: &str, end: bool) -> Event {
    Ok(WatchEvent::Bookmark(Bookmark {
        resource_version: rv.into(),
        initial_events_end: end,
    }))
}

enum WatchScript {
    Fail(ReflectorError),
    /// These events, then the server closes the stream.
    Close(Vec<Event>),
    /// These events, then nothing until dropped.
    Hang(Vec<Event>),
    /// These events, then the server closes the stream after this long.
    CloseAfter(Duration, Vec<Event>),
}

#[derive(Default)]
struct FakeLw {
    lists: Mutex<VecDeque<Result<ObjectList<Obj>, ReflectorError>>>,
    watches: Mutex<VecDeque<WatchScript>>,
    list_calls: Mutex<Vec<ListOptions>>,
    watch_calls: Mutex<Vec<WatchOptions>>,
    watch_times: Mutex<Vec<Instant>>,
    list_times: Mutex<Vec<Instant>>,
    no_watch_list: bool,
    hang_lists: bool,
    dropped: Arc<AtomicUsize>,
    representation: Representation,
}

impl FakeLw {
    fn list(self, l: Result<ObjectList<Obj>, ReflectorError>) -> Self {
        self.lists.lock().push_back(l);
        self
    }
    fn watch(self, w: WatchScript) -> Self {
        self.watches.lock().push_back(w);
        self
    }
    fn list_rvs(&self) -> Vec<String> {
        self.list_calls
            .lock()
            .iter()
            .map(|o| o.resource_version.clone().unwrap_or_default().into())
            .collect()
    }
    fn list_limits(&self) -> Vec<u32> {
        self.list_calls.lock().iter().map(|o| o.limit).collect()
    }
}

struct DropGuard(Arc<AtomicUsize>);
impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The fake as seen by the reflector (a local type, so the foreign trait can be implemented).
struct Lw(Arc<FakeLw>);

impl ListerWatcher<Obj> for Lw {
    async fn list(&self, options: ListOptions) -> Result<ObjectList<Obj>, ReflectorError> {
        self.0.list_calls.lock().push(options);
        self.0.list_times.lock().push(Instant::now());
        if self.0.hang_lists {
            std::future::pending::<()>().await;
        }
        let next = self.0.lists.lock().pop_front();
        next.unwrap_or_else(|| Err(api(500, "InternalError", "no more scripted lists")))
    }

    async fn watch(&self, options: WatchOptions) -> Result<WatchStream<Obj>, ReflectorError> {
        self.0.watch_calls.lock().push(options);
        self.0.watch_times.lock().push(Instant::now());
        let script = self
            .0
            .watches
            .lock()
            .pop_front()
            .unwrap_or(WatchScript::Hang(vec![]));
        let guard = DropGuard(self.0.dropped.clone());
        match script {
            WatchScript::Fail(e) => Err(e),
            WatchScript::Close(evs) => Ok(futures::stream::iter(evs)
                .chain(futures::stream::iter(std::iter::once(guard)).filter_map(|_| async { None }))
                .boxed()),
            WatchScript::CloseAfter(after, evs) => Ok(futures::stream::iter(evs)
                .chain(
                    futures::stream::once(tokio::time::sleep(after)).filter_map(move |_| {
                        let _ = &guard;
                        async { None }
                    }),
                )
                .boxed()),
            WatchScript::Hang(evs) => Ok(futures::stream::iter(evs)
                .chain(futures::stream::pending().map(move |e: Event| {
                    let _ = &guard;
                    e
                }))
                .boxed()),
        }
    }

    fn supports_watch_list(&self) -> bool {
        !self.0.no_watch_list
    }

    fn representation(&self) -> Representation {
        self.0.representation
    }
}

#[derive(Default)]
struct RecordingStore {
    items: Mutex<BTreeMap<String, String>>,
    rv_updates: Mutex<Vec<String>>,
    replaced_rvs: Mutex<Vec<String>>,
    resyncs: AtomicUsize,
    fail_resync_at: Option<usize>,
    fail_replace: AtomicBool,
}

fn key(o: &Obj) -> String {
    format!("{}/{}", o.namespace().unwrap_or(""), o.name())
}

impl Store<Obj> for RecordingStore {
    fn add(&self, obj: Arc<Obj>) -> Result<(), FifoError> {
        self.items
            .lock()
            .insert(key(&obj), obj.resource_version().unwrap_or("").into());
        Ok(())
    }
    fn update(&self, obj: Arc<Obj>) -> Result<(), FifoError> {
        self.add(obj)
    }
    fn delete(&self, obj: Arc<Obj>) -> Result<(), FifoError> {
        self.items.lock().remove(&key(&obj));
        Ok(())
    }
    fn replace(&self, list: Vec<Arc<Obj>>, rv: &ResourceVersion) -> Result<(), FifoError> {
        if self.fail_replace.load(Ordering::SeqCst) {
            return Err(FifoError::Store(StoreError::IndexNotFound("x".into())));
        }
        let mut items = self.items.lock();
        items.clear();
        for o in list {
            items.insert(key(&o), o.resource_version().unwrap_or("").into());
        }
        self.replaced_rvs.lock().push(rv.into());
        Ok(())
    }
    fn resync(&self) -> Result<(), FifoError> {
        let n = self.resyncs.fetch_add(1, Ordering::SeqCst) + 1;
        if Some(n) == self.fail_resync_at {
            return Err(FifoError::Closed);
        }
        Ok(())
    }
    fn update_resource_version(&self, rv: &ResourceVersion) {
        self.rv_updates.lock().push(rv.into());
    }
}

fn reflector(
    lw: FakeLw,
    store: RecordingStore,
    options: ReflectorOptions,
) -> (Arc<FakeLw>, Reflector<Obj, Lw, Arc<RecordingStore>>) {
    let lw = Arc::new(lw);
    let r = Reflector::new(Lw(lw.clone()), Arc::new(store), options);
    (lw, r)
}

fn no_jitter() -> ReflectorOptions {
    ReflectorOptions {
        backoff: BackoffConfig {
            jitter: 0.0,
            ..Default::default()
        },
        ..list_then_watch()
    }
}

/// [`no_jitter`] with the initial state streamed by a watch-list.
fn watch_list_no_jitter() -> ReflectorOptions {
    ReflectorOptions {
        watch_list: true,
        ..no_jitter()
    }
}

/// Records the text of every error the reflector hands to its watch error handler.
fn record_errors(r: &Reflector<Obj, Lw, Arc<RecordingStore>>) -> Arc<Mutex<Vec<String>>> {
    let reported = Arc::new(Mutex::new(Vec::new()));
    r.set_watch_error_handler(Arc::new({
        let reported = reported.clone();
        move |e: &ReflectorError| reported.lock().push(e.to_string())
    }));
    reported
}

fn list_ok(items: Vec<Obj>, rv: &str) -> Result<ObjectList<Obj>, ReflectorError> {
    Ok(ObjectList::new(items, rv))
}

async fn list_and_watch(r: &Reflector<Obj, Lw, Arc<RecordingStore>>) -> Result<(), ReflectorError> {
    r.list_and_watch(&CancellationToken::new()).await
}

// C4.1 / C5.2
#[tokio::test(start_paused = true)]
async fn first_list_is_at_rv_0_with_limit_500_and_relist_at_last_synced_rv_without_limit() {
    let lw = FakeLw::default()
        .list(list_ok(pods(2, "10"), "10"))
        .watch(WatchScript::Close(vec![Err(expired())]))
        .list(list_ok(pods(2, "10"), "10"))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    list_and_watch(&r).await.unwrap();
    assert_eq!(r.last_sync_resource_version(), "10");
    list_and_watch(&r).await.unwrap();
    assert_eq!(lw.list_rvs(), ["0", "10"]);
    assert_eq!(lw.list_limits(), [500, 0]);
}

// C5.2 / C5.1
#[tokio::test(start_paused = true)]
async fn user_page_size_applies_to_every_page_and_items_of_all_pages_are_concatenated() {
    let lw = FakeLw::default()
        .list(Ok(ObjectList::new(pods(4, "10"), "10").with_continue("C1")))
        .list(Ok(ObjectList::new(
            (4..8).map(|i| pod(&format!("p{i}"), "10")).collect(),
            "11",
        )
        .with_continue("C2")))
        .list(list_ok(vec![pod("p8", "10"), pod("p9", "10")], "12"))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(
        lw,
        RecordingStore::default(),
        ReflectorOptions {
            page_size: 4,
            ..no_jitter()
        },
    );
    list_and_watch(&r).await.unwrap();
    assert_eq!(lw.list_limits(), [4, 4, 4]);
    let calls = lw.list_calls.lock().clone();
    assert_eq!(calls[1].continue_token.as_deref(), Some("C1"));
    assert_eq!(calls[1].resource_version, None);
    assert_eq!(calls[2].continue_token.as_deref(), Some("C2"));
    assert_eq!(r.store().items.lock().len(), 10);
    assert_eq!(
        r.store().replaced_rvs.lock().clone(),
        ["10"],
        "the list RV is the first page's"
    );
}

// C5.2 rule 2
#[tokio::test(start_paused = true)]
async fn a_paginated_list_at_rv_0_keeps_limit_500_for_later_relists() {
    let lw = FakeLw::default()
        .list(Ok(ObjectList::new(pods(1, "10"), "10").with_continue("C1")))
        .list(list_ok(vec![pod("q", "10")], "10"))
        .watch(WatchScript::Close(vec![Err(expired())]))
        .list(list_ok(pods(2, "10"), "10"))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    list_and_watch(&r).await.unwrap();
    list_and_watch(&r).await.unwrap();
    assert_eq!(lw.list_rvs(), ["0", "", "10"]);
    assert_eq!(lw.list_limits(), [500, 500, 500]);
}

// C5.3
#[tokio::test(start_paused = true)]
async fn expired_continuation_page_falls_back_to_one_full_list_at_the_original_rv() {
    let lw = FakeLw::default()
        .list(list_ok(pods(4, "10"), "10"))
        .watch(WatchScript::Close(vec![Err(expired())]))
        .list(Ok(ObjectList::new(pods(4, "10"), "10").with_continue("C1")))
        .list(Err(expired()))
        .list(list_ok(pods(8, "10"), "10"))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(
        lw,
        RecordingStore::default(),
        ReflectorOptions {
            page_size: 4,
            ..no_jitter()
        },
    );
    list_and_watch(&r).await.unwrap();
    list_and_watch(&r).await.unwrap();
    assert_eq!(lw.list_rvs(), ["0", "10", "", "10"]);
    assert_eq!(lw.list_limits(), [4, 4, 4, 0]);
    assert_eq!(r.store().items.lock().len(), 8);
}

// C6.1
#[tokio::test(start_paused = true)]
async fn expired_list_at_exact_rv_is_retried_immediately_at_the_latest_rv() {
    let lw = FakeLw::default()
        .list(list_ok(pods(4, "10"), "10"))
        .watch(WatchScript::Close(vec![Err(expired())]))
        .list(Err(expired()))
        .list(list_ok(pods(8, "11"), "11"))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    list_and_watch(&r).await.unwrap();
    assert_eq!(r.store().items.lock().len(), 4);
    list_and_watch(&r).await.unwrap();
    assert_eq!(lw.list_rvs(), ["0", "10", ""]);
    assert_eq!(r.store().items.lock().len(), 8);
    assert_eq!(r.metrics().relists, 1);
}

// C6.2
#[tokio::test(start_paused = true)]
async fn too_large_resource_version_in_all_three_forms_switches_the_relist_to_the_latest_rv() {
    let cause: Status = serde_json::from_str(
        r#"{"code":504,"reason":"Timeout","message":"x","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}]}}"#,
    ).unwrap();
    let old_cause: Status = serde_json::from_str(
        r#"{"code":504,"reason":"Timeout","message":"x","details":{"causes":[{"message":"Too large resource version: 30, current: 29"}]}}"#,
    ).unwrap();
    let old_msg = Status::failure(
        504,
        "Timeout",
        "Too large resource version: 40, current: 39",
    );
    let lw = FakeLw::default()
        .list(list_ok(vec![], "20"))
        .watch(WatchScript::Close(vec![Err(expired())]))
        .list(Err(ReflectorError::api(cause)))
        .list(list_ok(vec![], "30"))
        .watch(WatchScript::Close(vec![Err(expired())]))
        .list(Err(ReflectorError::api(old_cause)))
        .list(list_ok(vec![], "40"))
        .watch(WatchScript::Close(vec![Err(expired())]))
        .list(Err(ReflectorError::api(old_msg)))
        .list(list_ok(vec![], "50"))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    for _ in 0..4 {
        list_and_watch(&r).await.unwrap();
    }
    assert_eq!(lw.list_rvs(), ["0", "20", "", "30", "", "40", ""]);
}

// C3.2 / C7.1
#[tokio::test(start_paused = true)]
async fn list_errors_are_wrapped_and_stay_matchable_and_store_rejection_fails_the_sync() {
    let (_, r) = reflector(
        FakeLw::default().list(Err(api(403, "Forbidden", "Access Denied"))),
        RecordingStore::default(),
        no_jitter(),
    );
    let err = list_and_watch(&r).await.unwrap_err();
    assert!(err.to_string().starts_with("failed to list "), "{err}");
    assert_eq!(err.status().map(|s| s.code), Some(403));

    let store = RecordingStore::default();
    store.fail_replace.store(true, Ordering::SeqCst);
    let (_, r) = reflector(
        FakeLw::default().list(list_ok(pods(1, "5"), "5")),
        store,
        no_jitter(),
    );
    let err = list_and_watch(&r).await.unwrap_err();
    assert!(
        err.to_string().starts_with("unable to sync list result"),
        "{err}"
    );
    assert_eq!(r.last_sync_resource_version(), "");
}

// C6.4
#[tokio::test(start_paused = true)]
async fn a_table_list_is_rejected() {
    let mut table = ObjectList::new(vec![], "1");
    table.kind = Some("Table".into());
    table.api_version = Some("meta.k8s.io/v1".into());
    let (_, r) = reflector(
        FakeLw::default().list(Ok(table)),
        RecordingStore::default(),
        no_jitter(),
    );
    let err = list_and_watch(&r).await.unwrap_err();
    assert!(err.to_string().contains("unsupported list gvk"), "{err}");
}

// C8.1 / C8.2 / C8.3
#[tokio::test(start_paused = true)]
async fn watch_requests_bookmarks_from_the_list_rv_with_a_randomised_timeout() {
    for (configured, lo, hi) in [
        (None, 300, 600),
        (Some(1), 300, 600),
        (Some(1800), 1800, 3600),
    ] {
        let lw = FakeLw::default()
            .list(list_ok(vec![], "1"))
            .watch(WatchScript::Close(vec![Err(expired())]));
        let mut opts = no_jitter();
        if let Some(c) = configured {
            opts.min_watch_timeout = Duration::from_secs(c);
        }
        let (lw, r) = reflector(lw, RecordingStore::default(), opts);
        list_and_watch(&r).await.unwrap();
        let w = lw.watch_calls.lock()[0].clone();
        assert_eq!(w.resource_version.as_deref(), Some("1"));
        assert!(w.allow_watch_bookmarks);
        assert_eq!(w.send_initial_events, None);
        assert_eq!(w.resource_version_match, None);
        let t = w.timeout_seconds.unwrap();
        assert!((lo..=hi).contains(&t), "{t} not in [{lo}, {hi}]");
    }
}

// C9.2
#[tokio::test(start_paused = true)]
async fn watch_refused_with_429_is_reopened_after_backoff_without_relisting() {
    let mut lw = FakeLw::default().list(list_ok(vec![], "1"));
    for _ in 0..4 {
        lw = lw.watch(WatchScript::Fail(api(429, "TooManyRequests", "slow down")));
    }
    lw = lw.watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    let start = Instant::now();
    list_and_watch(&r).await.unwrap();
    assert_eq!(lw.list_calls.lock().len(), 1);
    assert_eq!(lw.watch_calls.lock().len(), 5);
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(800 + 1600 + 3200 + 6400)
    );
    let refused = ReflectorError::from(reflector::ClientError::transport(
        "connect",
        Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
    ));
    assert!(refused.is_connection_refused());
}

// C9.3
#[tokio::test(start_paused = true)]
async fn other_watch_open_errors_are_returned() {
    let lw = FakeLw::default()
        .list(list_ok(vec![], "1"))
        .watch(WatchScript::Fail(api(403, "Forbidden", "no")));
    let (_, r) = reflector(lw, RecordingStore::default(), no_jitter());
    assert_eq!(
        list_and_watch(&r)
            .await
            .unwrap_err()
            .status()
            .map(|s| s.code),
        Some(403)
    );
}

// C10.2
#[tokio::test(start_paused = true)]
async fn every_event_including_bookmarks_propagates_its_resource_version() {
    let lw = FakeLw::default()
        .list(list_ok(vec![], "10"))
        .watch(WatchScript::Close(vec![
            Ok(WatchEvent::Added(pod("a", "10"))),
            Ok(WatchEvent::Modified(pod("a", "20"))),
            bookmark("30", false),
            Ok(WatchEvent::Deleted(pod("a", "40"))),
            Err(expired()),
        ]));
    let (_, r) = reflector(lw, RecordingStore::default(), no_jitter());
    list_and_watch(&r).await.unwrap();
    assert_eq!(
        r.store().rv_updates.lock().clone(),
        ["10", "20", "30", "40"]
    );
    assert_eq!(r.last_sync_resource_version(), "40");
}

// C10.1 / C10.2
#[tokio::test(start_paused = true)]
async fn events_of_an_unexpected_kind_are_skipped_and_the_rest_applied_in_order() {
    let lw = FakeLw::default()
        .list(list_ok(vec![pod("foo", "1"), pod("bar", "1")], "1"))
        .watch(WatchScript::Close(vec![
            Ok(WatchEvent::Added(
                DynamicObject::new("v1", "Service")
                    .within("ns")
                    .named("rejected")
                    .with_resource_version("2"),
            )),
            Ok(WatchEvent::Deleted(pod("foo", "3"))),
            Ok(WatchEvent::Modified(pod("bar", "55"))),
            Ok(WatchEvent::Added(pod("baz", "32"))),
            Err(expired()),
        ]));
    let opts = ReflectorOptions {
        expected_gvk: Some(("v1".into(), "Pod".into())),
        ..no_jitter()
    };
    let (_, r) = reflector(lw, RecordingStore::default(), opts);
    list_and_watch(&r).await.unwrap();
    let items = r.store().items.lock().clone();
    assert_eq!(
        items,
        BTreeMap::from([
            ("ns/bar".to_string(), "55".to_string()),
            ("ns/baz".to_string(), "32".to_string())
        ])
    );
    assert_eq!(r.last_sync_resource_version(), "32");
}

// C10.1 with a metadata-only lister-watcher (D14): the representation's own list and object
// types pass for the expected kind; other kinds are still skipped.
#[tokio::test(start_paused = true)]
async fn objects_of_the_representation_asked_for_pass_for_the_expected_kind() {
    let meta = |name: &str, rv: &str| {
        DynamicObject::new("meta.k8s.io/v1", "PartialObjectMetadata")
            .within("ns")
            .named(name)
            .with_resource_version(rv)
    };
    let mut page = ObjectList::new(vec![meta("foo", "1")], "1");
    page.kind = Some("PartialObjectMetadataList".into());
    page.api_version = Some("meta.k8s.io/v1".into());
    let lw = FakeLw {
        representation: Representation::PartialObjectMetadata,
        ..FakeLw::default()
    }
    .list(Ok(page))
    .watch(WatchScript::Close(vec![
        Ok(WatchEvent::Added(meta("bar", "2"))),
        Ok(WatchEvent::Added(
            DynamicObject::new("v1", "Service")
                .within("ns")
                .named("rejected")
                .with_resource_version("3"),
        )),
        // A server that does not know the representation sends the resource's own kind.
        Ok(WatchEvent::Added(pod("baz", "4"))),
        Err(expired()),
    ]));
    let opts = ReflectorOptions {
        expected_gvk: Some(("v1".into(), "Pod".into())),
        ..no_jitter()
    };
    let (_, r) = reflector(lw, RecordingStore::default(), opts);
    list_and_watch(&r).await.unwrap();
    let items = r.store().items.lock().clone();
    assert_eq!(
        items.keys().map(String::as_str).collect::<Vec<_>>(),
        ["ns/bar", "ns/baz", "ns/foo"]
    );
}

// C10.2: synthetic ADDED events of a watch at RV "0" do not move the RV
#[tokio::test(start_paused = true)]
async fn added_events_of_a_watch_from_rv_0_do_not_propagate_until_a_non_added_event() {
    let lw = FakeLw::default()
        .list(list_ok(vec![], ""))
        .watch(WatchScript::Close(vec![
            Ok(WatchEvent::Added(pod("a", "7"))),
            Ok(WatchEvent::Added(pod("b", "3"))),
            bookmark("9", false),
            Ok(WatchEvent::Added(pod("c", "11"))),
            Err(expired()),
        ]));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    list_and_watch(&r).await.unwrap();
    assert_eq!(
        lw.watch_calls.lock()[0].resource_version.as_deref(),
        Some("")
    );
    assert_eq!(r.store().rv_updates.lock().clone(), ["9", "11"]);
}

// C11.2
#[tokio::test(start_paused = true)]
async fn a_normal_close_rewatches_at_the_last_rv_without_relisting() {
    let lw = FakeLw::default()
        .list(list_ok(vec![], "5"))
        .watch(WatchScript::Close(vec![Ok(WatchEvent::Added(pod(
            "a", "6",
        )))]))
        .watch(WatchScript::Close(vec![bookmark("8", false)]))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    list_and_watch(&r).await.unwrap();
    let rvs: Vec<_> = lw
        .watch_calls
        .lock()
        .iter()
        .map(|w| w.resource_version.clone().unwrap())
        .collect();
    assert_eq!(rvs, ["5", "6", "8"]);
    assert_eq!(lw.list_calls.lock().len(), 1);
    assert_eq!(
        lw.dropped.load(Ordering::SeqCst),
        3,
        "every watch is closed"
    );
}

// C11.2
#[tokio::test(start_paused = true)]
async fn a_very_short_watch_without_events_ends_list_and_watch_for_a_relist() {
    let lw = FakeLw::default()
        .list(list_ok(vec![], "5"))
        .watch(WatchScript::Close(vec![]));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    list_and_watch(&r).await.unwrap();
    assert_eq!(lw.watch_calls.lock().len(), 1);
}

// C11.3
#[tokio::test(start_paused = true)]
async fn watch_429_event_and_open_refusal_each_wait_one_backoff() {
    let lw = FakeLw::default()
        .list(list_ok(vec![], "5"))
        .watch(WatchScript::Fail(api(429, "TooManyRequests", "")))
        .watch(WatchScript::Close(vec![Ok(WatchEvent::Error(
            Status::failure(429, "TooManyRequests", ""),
        ))]))
        .watch(WatchScript::Close(vec![]));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    list_and_watch(&r).await.unwrap();
    assert_eq!(r.metrics().backoff_waits, 2);
    assert_eq!(lw.watch_calls.lock().len(), 3);
}

// C11.3
#[tokio::test(start_paused = true)]
async fn internal_error_event_relists_and_the_relist_drops_what_only_the_broken_watch_added() {
    let lw = FakeLw::default()
        .list(list_ok(vec![pod("listed", "5")], "5"))
        .watch(WatchScript::Close(vec![
            Ok(WatchEvent::Added(pod("ghost", "6"))),
            Ok(WatchEvent::Error(Status::failure(
                500,
                "InternalError",
                "StoreReadError",
            ))),
        ]))
        .list(list_ok(vec![pod("listed", "5")], "7"))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    list_and_watch(&r).await.unwrap();
    assert!(r.store().items.lock().contains_key("ns/ghost"));
    list_and_watch(&r).await.unwrap();
    assert_eq!(lw.list_rvs(), ["0", "6"]);
    assert_eq!(
        r.store().items.lock().keys().cloned().collect::<Vec<_>>(),
        ["ns/listed"]
    );
}

// C11.4, with one deliberate difference: each re-watch waits a backoff delay (client-go re-watches
// at once, which hammers a server answering every watch with a 500 for the whole window).
#[tokio::test(start_paused = true)]
async fn internal_errors_within_the_retry_window_rewatch_after_a_backoff_without_relisting() {
    let lw = FakeLw::default()
        .list(list_ok(vec![], "5"))
        .watch(WatchScript::Close(vec![Err(api(
            500,
            "InternalError",
            "x",
        ))]))
        .watch(WatchScript::Close(vec![Err(api(
            500,
            "InternalError",
            "x",
        ))]))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let opts = ReflectorOptions {
        max_internal_error_retry_duration: Duration::from_secs(30),
        ..no_jitter()
    };
    let (lw, r) = reflector(lw, RecordingStore::default(), opts);
    list_and_watch(&r).await.unwrap();
    assert_eq!(lw.watch_calls.lock().len(), 3);
    assert_eq!(lw.list_calls.lock().len(), 1);
    assert_eq!(r.metrics().backoff_waits, 2);
}

// C12.3
#[tokio::test(start_paused = true)]
async fn resync_runs_on_its_period_and_a_failing_resync_ends_the_watch() {
    let store = RecordingStore {
        fail_resync_at: Some(2),
        ..Default::default()
    };
    let lw = FakeLw::default()
        .list(list_ok(vec![], "5"))
        .watch(WatchScript::Hang(vec![]));
    let opts = ReflectorOptions {
        resync_period: Duration::from_millis(1),
        ..no_jitter()
    };
    let (lw, r) = reflector(lw, store, opts);
    list_and_watch(&r).await.unwrap();
    assert_eq!(r.store().resyncs.load(Ordering::SeqCst), 2);
    assert_eq!(lw.dropped.load(Ordering::SeqCst), 1);
}

// C12.1
#[tokio::test(start_paused = true)]
async fn should_resync_hook_gates_the_store_resync() {
    let store = RecordingStore {
        fail_resync_at: Some(1),
        ..Default::default()
    };
    let lw = FakeLw::default()
        .list(list_ok(vec![], "5"))
        .watch(WatchScript::Hang(vec![]));
    let opts = ReflectorOptions {
        resync_period: Duration::from_secs(1),
        ..no_jitter()
    };
    let asked = Arc::new(AtomicUsize::new(0));
    let a = asked.clone();
    let (_, r) = reflector(lw, store, opts);
    let r = r.with_should_resync(Arc::new(move || a.fetch_add(1, Ordering::SeqCst) >= 3));
    let start = Instant::now();
    list_and_watch(&r).await.unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), 4);
    assert_eq!(start.elapsed(), Duration::from_secs(4));
}

// C13.5 fallback
#[tokio::test(start_paused = true)]
async fn watch_list_refused_falls_back_to_list_at_rv_0_then_watch() {
    let lw = FakeLw::default()
        .watch(WatchScript::Fail(api(
            422,
            "Invalid",
            "sendInitialEvents is not supported",
        )))
        .list(list_ok(pods(1, "4"), "4"))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), watch_list_no_jitter());
    list_and_watch(&r).await.unwrap();
    let w = lw.watch_calls.lock().clone();
    assert_eq!(w[0].send_initial_events, Some(true));
    assert_eq!(
        w[0].resource_version_match,
        Some(ResourceVersionMatch::NotOlderThan)
    );
    assert_eq!(w[0].resource_version.as_deref(), Some(""));
    assert!(w[0].allow_watch_bookmarks);
    assert_eq!(lw.list_rvs(), ["0"]);
    assert_eq!(lw.list_limits(), [500]);
    assert_eq!(w[1].resource_version.as_deref(), Some("4"));
    assert_eq!(w[1].send_initial_events, None);
}

// C13.2 / C13.3
#[tokio::test(start_paused = true)]
async fn watch_list_streams_into_a_temporary_store_then_keeps_the_stream() {
    let lw = FakeLw::default()
        .watch(WatchScript::Close(vec![
            Ok(WatchEvent::Added(pod("p1", "1"))),
            Ok(WatchEvent::Added(pod("p2", "2"))),
            Ok(WatchEvent::Modified(pod("p1", "3"))),
            Ok(WatchEvent::Added(pod("p3", "4"))),
            Ok(WatchEvent::Deleted(pod("p3", "5"))),
            bookmark("6", true),
            Ok(WatchEvent::Added(pod("p4", "7"))),
        ]))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), watch_list_no_jitter());
    list_and_watch(&r).await.unwrap();
    assert_eq!(r.store().replaced_rvs.lock().clone(), ["6"]);
    let items = r.store().items.lock().clone();
    assert_eq!(items.get("ns/p1").map(String::as_str), Some("3"));
    assert!(
        items.contains_key("ns/p2") && items.contains_key("ns/p4") && !items.contains_key("ns/p3")
    );
    assert!(lw.list_calls.lock().is_empty());
    assert_eq!(r.metrics().watch_lists_incomplete, 0);
    let w = lw.watch_calls.lock().clone();
    assert_eq!(w[1].resource_version.as_deref(), Some("7"));
    assert_eq!(w[1].send_initial_events, None);
}

// C13.2: the snapshot is keyed as the store keys, so a store with a key function of its own gets
// every object the stream sent, not one per namespace and name.
#[tokio::test(start_paused = true)]
async fn watch_list_keys_its_snapshot_with_the_stores_key_function() {
    use reflector::store_index::{Indexer, Indexers, KeyError, KeyFn, ObjectKey};
    let lw = FakeLw::default().watch(WatchScript::Close(vec![
        Ok(WatchEvent::Added(pod("same", "1").with_label("id", "a"))),
        Ok(WatchEvent::Added(pod("same", "2").with_label("id", "b"))),
        Ok(WatchEvent::Deleted(pod("same", "3").with_label("id", "b"))),
        Ok(WatchEvent::Added(pod("same", "4").with_label("id", "c"))),
        bookmark("5", true),
        Err(expired()),
    ]));
    let by_id: KeyFn<Obj> = Arc::new(|o: &Obj| {
        o.label("id")
            .map(ObjectKey::from)
            .ok_or_else(|| KeyError::Custom("no id".into()))
    });
    let cache = Indexer::with_key_fn(by_id, Indexers::new());
    let r = Reflector::new(Lw(Arc::new(lw)), cache.clone(), watch_list_no_jitter());
    r.list_and_watch(&CancellationToken::new()).await.unwrap();
    let mut keys = cache.list_keys();
    keys.sort();
    assert_eq!(keys, ["a", "c"]);
}

// C13.4
#[tokio::test(start_paused = true)]
async fn watch_list_stream_closing_before_the_end_bookmark_is_retried_with_nothing_applied() {
    let lw = FakeLw::default()
        .watch(WatchScript::Close(vec![
            Ok(WatchEvent::Added(pod("p1", "1"))),
            bookmark("1", false),
        ]))
        .watch(WatchScript::Close(vec![bookmark("2", true)]))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), watch_list_no_jitter());
    tokio::time::advance(Duration::from_secs(2)).await;
    list_and_watch(&r).await.unwrap();
    let w = lw.watch_calls.lock().clone();
    assert_eq!(w[0], w[1].clone().into_same_timeout(&w[0]));
    assert!(r.store().items.lock().is_empty());
    assert_eq!(r.store().replaced_rvs.lock().clone(), ["2"]);
    // Counted, so that a sync slowed down by a server cutting its streams says so.
    assert_eq!(r.metrics().watch_lists_incomplete, 1);
    assert_eq!(r.metrics().backoff_waits, 1);
}

/// The gaps between the starts of consecutive watch requests.
fn watch_gaps(lw: &FakeLw) -> Vec<Duration> {
    let times = lw.watch_times.lock().clone();
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

// C13.4: a server that keeps cutting a large collection's watch-list (kube-apiserver's watch
// cache does, when the resource is written often) gets a new attempt after the first backoff
// delay each time, not after a delay that doubles up to a minute.
#[tokio::test(start_paused = true)]
async fn watch_list_streams_cut_after_bringing_events_are_retried_after_the_first_backoff_delay() {
    let cut = || WatchScript::Close(vec![Ok(WatchEvent::Added(pod("p1", "1")))]);
    let lw = FakeLw::default()
        .watch(cut())
        .watch(cut())
        .watch(cut())
        .watch(cut())
        .watch(WatchScript::Close(vec![
            Ok(WatchEvent::Added(pod("p1", "1"))),
            bookmark("2", true),
        ]))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), watch_list_no_jitter());
    list_and_watch(&r).await.unwrap();
    assert_eq!(r.metrics().watch_lists_incomplete, 4);
    assert_eq!(
        watch_gaps(&lw)[..4],
        [Duration::from_millis(800); 4],
        "each retry after the first delay"
    );
    assert_eq!(r.store().replaced_rvs.lock().clone(), ["2"]);
}

// C13.4: streams that close without bringing anything back off as failures do.
#[tokio::test(start_paused = true)]
async fn watch_list_streams_closed_without_events_back_off_longer_each_time() {
    let empty = || WatchScript::CloseAfter(Duration::from_secs(2), vec![]);
    let lw = FakeLw::default()
        .watch(empty())
        .watch(empty())
        .watch(empty())
        .watch(WatchScript::Close(vec![bookmark("2", true)]))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), watch_list_no_jitter());
    list_and_watch(&r).await.unwrap();
    assert_eq!(r.metrics().watch_lists_incomplete, 3);
    let waits: Vec<u128> = watch_gaps(&lw)[..3]
        .iter()
        .map(|gap| (*gap - Duration::from_secs(2)).as_millis())
        .collect();
    assert_eq!(waits, [800, 1600, 3200]);
}

trait SameTimeout {
    fn into_same_timeout(self, other: &WatchOptions) -> WatchOptions;
}
impl SameTimeout for WatchOptions {
    fn into_same_timeout(mut self, other: &WatchOptions) -> WatchOptions {
        self.timeout_seconds = other.timeout_seconds;
        self
    }
}

#[tokio::test(start_paused = true)]
async fn watch_list_is_not_tried_when_the_lister_watcher_cannot_do_it() {
    let lw = FakeLw {
        no_watch_list: true,
        ..Default::default()
    }
    .list(list_ok(vec![], "1"))
    .watch(WatchScript::Close(vec![Err(expired())]));
    let (lw, r) = reflector(lw, RecordingStore::default(), watch_list_no_jitter());
    list_and_watch(&r).await.unwrap();
    assert_eq!(lw.watch_calls.lock()[0].send_initial_events, None);
}

// C2.1 / C2.2 / C14
#[tokio::test(start_paused = true)]
async fn run_waits_one_jittered_backoff_after_a_failure_and_reports_errors_to_the_handler() {
    let lw = FakeLw::default().list(Err(api(403, "Forbidden", "Access Denied")));
    let (lw, r) = reflector(lw, RecordingStore::default(), list_then_watch());
    let r = Arc::new(r);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    r.set_watch_error_handler(Arc::new(move |e| {
        let _ = tx.send(e.to_string());
    }));
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (r, c) = (r.clone(), cancel.clone());
        async move { r.run(c).await }
    });
    let first = tokio::time::timeout(Duration::from_secs(1), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(first.contains("Access Denied"), "{first}");
    let _second = rx.recv().await.unwrap();
    let times = lw.list_times.lock().clone();
    let gap = times[1] - times[0];
    assert!(
        gap >= Duration::from_millis(800) && gap < Duration::from_millis(1600),
        "{gap:?}"
    );
    cancel.cancel();
    task.await.unwrap();
}

// Cancellation
#[tokio::test(start_paused = true)]
async fn cancellation_stops_run_promptly_and_closes_the_watch() {
    let lw = FakeLw::default()
        .list(list_ok(vec![], "1"))
        .watch(WatchScript::Hang(vec![]));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    let r = Arc::new(r);
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (r, c) = (r.clone(), cancel.clone());
        async move { r.run(c).await }
    });
    while lw.watch_calls.lock().is_empty() {
        tokio::task::yield_now().await;
    }
    let at = Instant::now();
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .unwrap()
        .unwrap();
    assert!(at.elapsed() < Duration::from_secs(1));
    assert_eq!(lw.dropped.load(Ordering::SeqCst), 1);
}

// C10.1: a long burst of ready events is applied completely and in order (events are applied in
// bounded batches between cancellation checks).
#[tokio::test(start_paused = true)]
async fn a_burst_of_ready_events_is_applied_completely_in_order() {
    let events: Vec<Event> = (0..200)
        .map(|i| {
            Ok(WatchEvent::Added(pod(
                &format!("b{i}"),
                &(100 + i).to_string(),
            )))
        })
        .chain(std::iter::once(Err(expired())))
        .collect();
    let lw = FakeLw::default()
        .list(list_ok(vec![], "1"))
        .watch(WatchScript::Close(events));
    let (_, r) = reflector(lw, RecordingStore::default(), no_jitter());
    list_and_watch(&r).await.unwrap();
    assert_eq!(r.store().items.lock().len(), 200);
    assert_eq!(r.metrics().added, 200);
    assert_eq!(r.last_sync_resource_version(), "299");
}

// C7.2
#[tokio::test(start_paused = true)]
async fn cancellation_while_a_list_is_in_flight_returns_ok_and_drops_the_list() {
    let lw = FakeLw {
        hang_lists: true,
        ..Default::default()
    };
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    let cancel = CancellationToken::new();
    let r = Arc::new(r);
    let task = tokio::spawn({
        let (r, c) = (r.clone(), cancel.clone());
        async move { r.list_and_watch(&c).await }
    });
    while lw.list_calls.lock().is_empty() {
        tokio::task::yield_now().await;
    }
    cancel.cancel();
    task.await.unwrap().unwrap();
    assert!(r.store().replaced_rvs.lock().is_empty());
    assert!(lw.watch_calls.lock().is_empty());
}

// C13.6
#[tokio::test(start_paused = true)]
async fn watch_list_runs_the_queues_transformer_on_the_snapshot_and_again_on_replace() {
    use reflector::delta_fifo::{DeltaFifo, DeltaFifoOptions};
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let fifo: DeltaFifo<Obj> = DeltaFifo::new(DeltaFifoOptions::new().transformer(move |o| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(o)
    }));
    let lw = FakeLw::default()
        .watch(WatchScript::Close(vec![
            Ok(WatchEvent::Added(pod("p1", "1"))),
            Ok(WatchEvent::Added(pod("p2", "2"))),
            bookmark("2", true),
            Ok(WatchEvent::Added(pod("p3", "3"))),
        ]))
        .watch(WatchScript::Close(vec![Err(expired())]));
    let lw = Arc::new(lw);
    let r = Reflector::new(Lw(lw.clone()), fifo.clone(), watch_list_no_jitter());
    r.list_and_watch(&CancellationToken::new()).await.unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        5,
        "2 initial objects twice (snapshot, then replace) and 1 later add once"
    );
    assert_eq!(fifo.len(), 3);
}

// Misbehaving servers. Every retry path waits a backoff delay, watch-list retries included (where
// client-go retries a 410 at once): a server that answers every watch-list request with a 410 must
// not be hammered, and cancellation must still be observed on a current-thread runtime.
#[tokio::test(start_paused = true)]
async fn watch_list_answered_410_forever_is_retried_only_after_backoff_delays_and_stops_on_cancel()
{
    let mut lw = FakeLw::default();
    for _ in 0..1000 {
        lw = lw.watch(WatchScript::Fail(expired()));
    }
    let opts = watch_list_no_jitter();
    let (lw, r) = reflector(lw, RecordingStore::default(), opts);
    let reported = Arc::new(AtomicUsize::new(0));
    r.set_watch_error_handler(Arc::new({
        let reported = reported.clone();
        move |e: &ReflectorError| {
            assert!(e.is_expired(), "{e}");
            reported.fetch_add(1, Ordering::SeqCst);
        }
    }));
    let r = Arc::new(r);
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (r, cancel) = (r.clone(), cancel.clone());
        async move { r.run(cancel).await }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    // Attempts at 0, 0.8, 2.4, 5.6, 12.0, 24.8 and 50.4 s (no jitter): seven in a minute.
    assert_eq!(lw.watch_calls.lock().len(), 7);
    assert_eq!(
        reported.load(Ordering::SeqCst),
        7,
        "every failed attempt is reported"
    );
    assert!(
        lw.list_calls.lock().is_empty(),
        "a 410 is retried, not a reason to list"
    );
    let rvs: Vec<_> = lw
        .watch_calls
        .lock()
        .iter()
        .map(|o| o.resource_version.clone().unwrap_or_default())
        .collect();
    assert!(rvs.iter().all(|rv| rv.is_empty()), "{rvs:?}");
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(1), run)
        .await
        .expect("run stops within a second of cancellation")
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_failed_relist_keeps_the_store_exactly_as_it_was() {
    let not_a_list = ReflectorError::InvalidList(ListError {
        problem: "no items".into(),
        snippet: "{}".into(),
    });
    let lw = FakeLw::default()
        .list(list_ok(pods(3, "10"), "10"))
        .watch(WatchScript::Close(vec![Err(api(400, "BadRequest", "x"))]))
        .list(Err(not_a_list))
        .list(Err(api(500, "InternalError", "a Status in a 200")));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    list_and_watch(&r).await.unwrap();
    let before = r.store().items.lock().clone();
    assert_eq!(before.len(), 3);
    for _ in 0..2 {
        let err = list_and_watch(&r).await.expect_err("the relist fails");
        assert!(err.to_string().starts_with("failed to list"), "{err}");
        assert_eq!(
            *r.store().items.lock(),
            before,
            "nothing replaced, nothing deleted"
        );
    }
    assert_eq!(r.store().replaced_rvs.lock().len(), 1);
    assert_eq!(r.last_sync_resource_version(), "10");
    assert_eq!(lw.list_rvs(), ["0", "10", "10"]);
}

#[tokio::test(start_paused = true)]
async fn an_idle_watch_is_reported_and_resumed_at_the_same_resource_version_after_a_backoff() {
    let lw = FakeLw::default()
        .list(list_ok(pods(1, "10"), "10"))
        .watch(WatchScript::Close(vec![
            Ok(WatchEvent::Modified(pod("p0", "11"))),
            Err(ReflectorError::WatchIdle(Duration::from_secs(360))),
        ]))
        .watch(WatchScript::Fail(expired()));
    let (lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    let reported = record_errors(&r);
    let err = list_and_watch(&r)
        .await
        .expect_err("the second watch fails to open");
    assert!(err.is_expired());
    let rvs: Vec<_> = lw
        .watch_calls
        .lock()
        .iter()
        .map(|o| o.resource_version.clone().unwrap_or_default())
        .collect();
    assert_eq!(rvs, ["10", "11"], "resumed where the idle watch stopped");
    assert_eq!(lw.list_calls.lock().len(), 1, "no relist");
    assert_eq!(r.metrics().backoff_waits, 1);
    assert_eq!(reported.lock().len(), 1);
    assert!(
        reported.lock()[0].contains("received nothing"),
        "{:?}",
        reported.lock()
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_ended_by_an_error_is_reported_before_the_relist() {
    let lw = FakeLw::default()
        .list(list_ok(pods(1, "10"), "10"))
        .watch(WatchScript::Close(vec![Err(ReflectorError::Decode(
            reflector::DecodeError::UnknownEventType {
                snippet: r#"{"type":"SURPRISE"}"#.into(),
            },
        ))]));
    let (_lw, r) = reflector(lw, RecordingStore::default(), no_jitter());
    let reported = record_errors(&r);
    list_and_watch(&r).await.unwrap();
    assert_eq!(reported.lock().len(), 1);
    assert!(
        reported.lock()[0].contains("unknown type"),
        "{:?}",
        reported.lock()
    );
}

#[tokio::test(start_paused = true)]
async fn pages_of_another_kind_than_the_expected_one_fail_the_list() {
    let mut page = ObjectList::new(pods(1, "5"), "5");
    page.kind = Some("ConfigMapList".into());
    let lw = FakeLw::default().list(Ok(page));
    let opts = ReflectorOptions {
        expected_gvk: Some(("v1".into(), "Pod".into())),
        ..no_jitter()
    };
    let (_lw, r) = reflector(lw, RecordingStore::default(), opts);
    let err = list_and_watch(&r).await.expect_err("wrong kind");
    assert!(
        matches!(err.inner(), ReflectorError::InvalidList(_)),
        "{err}"
    );
    assert!(r.store().items.lock().is_empty());
    assert!(r.store().replaced_rvs.lock().is_empty());
}

/// The default options but for watch-list streaming (C1.3): these tests are of a list and what
/// follows it, and ask for one.
fn list_then_watch() -> ReflectorOptions {
    ReflectorOptions {
        watch_list: false,
        ..ReflectorOptions::default()
    }
}
