//! End-to-end informer figures, each beside a same-run raw `serde_json` baseline of the same bytes:
//! - initial sync of 10k and 100k realistic Pods (≈3.8 KB each) with two indexes, from start to
//!   `has_synced`, against fetching the same list once and decoding it (median of three rounds);
//! - watch throughput: a warm-up round then five rounds of 50k updates of a synced 10k-pod
//!   informer, delivered to a counting handler, against decoding the same objects (median round
//!   reported). The events are produced first, behind a stalled watch stream, then released at
//!   once, so the figure measures the client side (HTTP, framing, decode, FIFO, indexer, dispatch)
//!   and the server's writing, not the server's production rate.
//!
//! Run with `cargo bench -p shared-informer --bench informer`. The simulated server runs on a thread
//! and runtime of its own (as kube-apiserver runs in a process of its own) but on the same two
//! cores, so end-to-end figures include its own work of sending.
//!
//! Also: a watch against a fast fake server that serves pre-built bytes, held back until the cache
//! has synced so that none is read before the timed window (`BENCH_REPEAT=N` runs it N times,
//! default 5, and reports the median), beside two same-run baselines: decoding the same lines, and
//! decoding them into a map of the cached objects (the least any cache does: each event frees the
//! cold object it replaces).
//!
//! Arguments `sync`, `watch` (the simulator's) and `fast` pick figures, in any combination; with
//! none, all run. `BENCH_ROUNDS=N` sets the simulator watch's rounds (default 5). Besides its
//! human-readable lines, the bench prints one `bench-result {json}` line per figure for
//! `cargo xtask bench` to collect.
//!
//! Diagnostics: `BENCH_WORKERS=1` (one runtime thread: no cross-thread wake-ups), `NO_HANDLER=1`
//! (no handler registered; completion seen through the last-synced resource version) and
//! `PERF_CTL_FIFO=<fifo>` (profile only the simulator rounds' release windows:
//! `mkfifo ctl && PERF_CTL_FIFO=ctl perf record --control fifo:ctl -D -1 <bench> watch`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use shared_informer::reflector::store_index::{
    meta_namespace_key, CompactObject, DynamicObject, Object, ObjectKey,
};
use shared_informer::reflector::{Client, ClusterConfig, Decode, ReflectorOptions, Resource};
use shared_informer::{EventHandlerFns, InformerQueue, SharedInformerFactory};
use sim_apiserver::fixtures::realistic_pod_json;
use sim_apiserver::procstat;
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;

#[derive(serde::Deserialize)]
struct List<K> {
    items: Vec<K>,
}

/// One watch event line, as the baselines decode it.
#[derive(serde::Deserialize)]
#[serde(bound = "K: DeserializeOwned")]
struct Event<K> {
    #[serde(rename = "type")]
    _kind: String,
    object: K,
}

fn pods() -> Resource {
    Resource::namespaced("", "v1", "pods")
}

/// A server on a thread and runtime of its own, as kube-apiserver runs in a process of its own: it
/// shares the machine's cores with the client, not the client's runtime. Dropping it stops the
/// runtime and waits for the thread, so the server's teardown (freeing what it stored) is not
/// measured as part of the next figure.
struct ServerThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerThread {
    /// Runs `serve` on a new thread named `name` until the handle is dropped.
    fn spawn<F>(name: &str, serve: impl FnOnce() -> F + Send + 'static) -> Self
    where
        F: std::future::Future<Output = ()>,
    {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("server runtime");
                runtime.block_on(async move {
                    tokio::select! {
                        _ = serve() => {}
                        _ = stopped => {}
                    }
                });
            })
            .expect("server thread");
        ServerThread {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The simulated server on a [`ServerThread`]. Fields drop in order: the server's handle, then
/// the thread (joined).
struct OwnThreadSim {
    sim: SimServer,
    _thread: ServerThread,
}

impl std::ops::Deref for OwnThreadSim {
    type Target = SimServer;
    fn deref(&self) -> &SimServer {
        &self.sim
    }
}

impl Drop for OwnThreadSim {
    fn drop(&mut self) {
        self.sim.shutdown();
    }
}

/// Events the simulator's log keeps: more than a watch burst (see [`seeded`]).
const LOG_EVENTS: usize = 120_000;

async fn seeded(n: usize) -> OwnThreadSim {
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let thread = ServerThread::spawn("sim-apiserver", move || async move {
        // A watcher buffer bigger than a burst: a burst produced behind a stalled stream must
        // not end the watch as a slow watcher's (which the figure would then time instead). The
        // log keeps one burst and more (the baseline watches the last burst again), not every
        // burst: a log holding every object version grew by 1.2 GB a round, and producing a burst
        // then took ten seconds, most of them faulting in fresh pages.
        let sim = SimServer::builder()
            .max_log_events(LOG_EVENTS)
            .watch_buffer(1_000_000)
            .start()
            .await
            .expect("sim");
        let _ = started_tx.send(sim);
        std::future::pending::<()>().await
    });
    let sim = started_rx.await.expect("sim started");
    for i in 0..n {
        let mut pod: serde_json::Value =
            serde_json::from_str(&realistic_pod_json(i)).expect("fixture");
        let meta = pod["metadata"].as_object_mut().expect("metadata");
        meta.remove("resourceVersion");
        meta.remove("uid");
        let ns = meta["namespace"].as_str().expect("namespace").to_string();
        sim.create("pods", Some(&ns), pod).expect("create");
    }
    OwnThreadSim {
        sim,
        _thread: thread,
    }
}

fn decode_time<K: DeserializeOwned>(bytes: &[u8]) -> (Duration, usize) {
    let start = Instant::now();
    let list: List<K> = serde_json::from_slice(bytes).expect("decode");
    (start.elapsed(), list.items.len())
}

async fn sync_time<K: Object + Decode>(config: &ClusterConfig) -> (Duration, usize) {
    sync_time_on::<K>(config, InformerQueue::default()).await
}

/// [`sync_time`] with the informer on `queue`.
async fn sync_time_on<K: Object + Decode>(
    config: &ClusterConfig,
    queue: InformerQueue,
) -> (Duration, usize) {
    let factory = SharedInformerFactory::new(config.clone()).queue(queue);
    let informer = factory.informer::<K>(pods()).expect("informer");
    informer
        .add_indexers(
            shared_informer::reflector::store_index::Indexers::new().with("app", |o: &K| {
                Ok(o.label("app").map(str::to_string).into_iter().collect())
            }),
        )
        .expect("indexers");
    let cancel = CancellationToken::new();
    let start = Instant::now();
    factory.start(&cancel);
    let report = factory.wait_for_cache_sync(Duration::from_secs(600)).await;
    let took = start.elapsed();
    assert!(report.all_synced(), "informer did not sync");
    let len = informer.indexer().len();
    cancel.cancel();
    factory.shutdown().await;
    (took, len)
}

/// Initial sync of `n` pods: `ROUNDS` rounds, each timing a fetch of the whole list, its decode and
/// an informer's sync for each object type, interleaved so that a slow moment of the machine
/// weighs on informer and baseline alike; the median round (by ratio) is reported.
async fn initial_sync(n: usize) {
    const ROUNDS: usize = 3;
    let sim = seeded(n).await;
    let config = ClusterConfig::new(&sim.url()).expect("config");
    let client = Client::new(&config).expect("client");
    // (informer, fetch, decode) per round, for CompactObject and DynamicObject.
    let mut rounds: [Vec<(Duration, Duration, Duration)>; 2] = [Vec::new(), Vec::new()];
    let mut mb = 0.0;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let bytes = client
            .get_bytes("/api/v1/pods?resourceVersion=0")
            .await
            .expect("list");
        let fetch = start.elapsed();
        mb = bytes.len() as f64 / 1e6;
        let (decode, decoded) = decode_time::<CompactObject>(&bytes);
        let (sync, synced) = sync_time::<CompactObject>(&config).await;
        assert_eq!((decoded, synced), (n, n));
        rounds[0].push((sync, fetch, decode));
        let (decode, decoded) = decode_time::<DynamicObject>(&bytes);
        let (sync, synced) = sync_time::<DynamicObject>(&config).await;
        assert_eq!((decoded, synced), (n, n));
        rounds[1].push((sync, fetch, decode));
    }
    for (label, mut runs) in ["CompactObject", "DynamicObject"].into_iter().zip(rounds) {
        let ratio = |(sync, fetch, decode): &(Duration, Duration, Duration)| {
            (*fetch + *decode).as_secs_f64() / sync.as_secs_f64()
        };
        runs.sort_by(|a, b| ratio(a).total_cmp(&ratio(b)));
        let median = runs[runs.len() / 2];
        let (sync, fetch, decode) = median;
        let baseline = fetch + decode;
        report(
            &format!("informer initial sync, {n} pods, {label}, two indexes (median of {ROUNDS})"),
            sync.as_secs_f64() * 1e3,
            "ms",
            baseline.as_secs_f64() * 1e3,
            "list fetch + serde_json decode",
            ratio(&median),
        );
        println!(
            "initial sync {n:>6} pods ({mb:.0} MB) {label}, median of {ROUNDS}: informer {:>8.1} ms | baseline fetch {:.1} ms + decode {:.1} ms = {:.1} ms | ratio {:.2} (rounds: {})",
            sync.as_secs_f64() * 1e3,
            fetch.as_secs_f64() * 1e3,
            decode.as_secs_f64() * 1e3,
            baseline.as_secs_f64() * 1e3,
            ratio(&median),
            runs.iter().map(|r| format!("{:.2}", ratio(r))).collect::<Vec<_>>().join(", "),
        );
    }
}

/// Counts the updates a handler receives, and wakes the bench each time the count reaches a
/// multiple of `burst` (the end of a burst), so that nothing polls while a figure is measured.
struct UpdateCounter {
    count: AtomicU64,
    burst: u64,
    reached: tokio::sync::Notify,
}

impl UpdateCounter {
    fn new(burst: usize) -> Arc<Self> {
        Arc::new(UpdateCounter {
            count: AtomicU64::new(0),
            burst: burst as u64,
            reached: tokio::sync::Notify::new(),
        })
    }

    /// A handler counting its updates into `self`.
    fn handler<K>(self: &Arc<Self>) -> EventHandlerFns<K> {
        let counter = Arc::clone(self);
        EventHandlerFns::new().on_update(move |_: &Arc<K>, _| {
            let n = counter.count.fetch_add(1, Ordering::Relaxed) + 1;
            if n % counter.burst == 0 {
                // Stores a permit if the bench is not waiting yet.
                counter.reached.notify_one();
            }
        })
    }

    /// Waits until `target` updates have been counted.
    async fn wait_for(&self, target: u64) {
        while self.count.load(Ordering::Relaxed) < target {
            self.reached.notified().await;
        }
    }
}

/// Reads a watch body until `events` lines have come, then drops the connection.
async fn read_events(client: &Client, path: &str, events: usize) -> bytes::Bytes {
    use http_body_util::BodyExt;
    let mut body = client
        .watch(path, "application/json")
        .await
        .expect("watch")
        .body;
    let mut all = bytes::BytesMut::new();
    let mut lines = 0;
    while lines < events {
        let frame = body
            .frame()
            .await
            .expect("the watch ended early")
            .expect("frame");
        if let Ok(data) = frame.into_data() {
            lines += data.iter().filter(|b| **b == b'\n').count();
            all.extend_from_slice(&data);
        }
    }
    all.freeze()
}

/// Watch throughput through the simulated server: `rounds` bursts of `events` updates to one synced
/// informer, each produced behind a stalled stream and released at once; reports the median round.
async fn watch_throughput(cached: usize, events: usize, rounds: usize) {
    assert!(
        events < LOG_EVENTS,
        "a burst must fit in the log, for the baseline to watch it again"
    );
    let sim = seeded(cached).await;
    let config = ClusterConfig::new(&sim.url()).expect("config");
    let client = Client::new(&config).expect("client");
    let factory = SharedInformerFactory::new(config);
    let informer = factory.informer::<CompactObject>(pods()).expect("informer");
    let updates = UpdateCounter::new(events);
    informer
        .add_event_handler(updates.handler())
        .expect("handler");
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    factory.wait_for_cache_sync(Duration::from_secs(120)).await;

    let names: Vec<(String, String)> = (0..cached)
        .map(|i| {
            let v: serde_json::Value =
                serde_json::from_str(&realistic_pod_json(i)).expect("fixture");
            (
                v["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                v["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let mut runs = Vec::with_capacity(rounds);
    // Round 0 warms up and is not counted (it is still printed): the first burst after a sync
    // may grow the process's heap, faulting in fresh pages, which a long-running informer pays
    // once.
    for round in 0..=rounds {
        let rv_before = informer.last_sync_resource_version();
        sim.faults().stall();
        let produce = Instant::now();
        // On a thread of its own (not the runtime's blocking pool), so profiles tell it apart.
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let sim_handle = SimServer::clone(&sim);
        let names_for_producer = names.clone();
        std::thread::Builder::new()
            .name("producer".into())
            .spawn(move || {
                for e in 0..events {
                    let (ns, name) = &names_for_producer[e % names_for_producer.len()];
                    let patch = serde_json::json!({"metadata": {"labels": {"generation": format!("{round}-{e}")}}});
                    sim_handle.patch("pods", Some(ns), name, &patch).expect("patch");
                }
                let _ = done_tx.send(());
            })
            .expect("producer thread");
        done_rx.await.expect("producer");
        let produced = produce.elapsed();
        let target = (round as u64 + 1) * events as u64;
        let cpu_before = procstat::thread_cpu();
        let switches = context_switches();
        perf_control("enable");
        let start = Instant::now();
        sim.faults().unstall();
        updates.wait_for(target).await;
        let took = start.elapsed();
        perf_control("disable");
        let cpu = procstat::cpu_between(&cpu_before, &procstat::thread_cpu());
        let switches = context_switches() - switches;

        // Baseline: decode the very event lines the server sent in this round, read again by a
        // bare watch from the same resource version.
        let body = read_events(
            &client,
            &format!("/api/v1/pods?watch=1&resourceVersion={rv_before}"),
            events,
        )
        .await;
        let lines: Vec<&[u8]> = body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), events, "the round's events, fetched again");
        let bytes = body.len();
        let t = Instant::now();
        for line in &lines {
            let ev: Event<CompactObject> = serde_json::from_slice(line).expect("decode");
            std::hint::black_box(ev.object);
        }
        let decode = t.elapsed();
        let rate = events as f64 / took.as_secs_f64();
        let base = events as f64 / decode.as_secs_f64();
        println!(
            "watch {events} updates over {cached} cached pods (CompactObject), simulated server, {}: {rate:>8.0} events/s ({:.1} MB/s; producing them took the server {:.2} s) | baseline decode {base:>8.0} events/s | ratio {:.2}",
            if round == 0 {
                "warm-up round (not counted)".to_string()
            } else {
                format!("round {round}")
            },
            bytes as f64 / 1e6 / took.as_secs_f64(),
            produced.as_secs_f64(),
            rate / base,
        );
        println!(
            "  cpu in the {:.2} s: {cpu}; {switches} context switches",
            took.as_secs_f64()
        );
        if round > 0 {
            runs.push((rate, base, rate / base));
        }
    }
    cancel.cancel();
    factory.shutdown().await;
    runs.sort_by(|a, b| a.2.total_cmp(&b.2));
    let (rate, base, ratio) = runs[runs.len() / 2];
    report(
        &format!("informer watch via the simulator, {events} updates, CompactObject (median of {rounds} after a warm-up)"),
        rate,
        "events/s",
        base,
        "serde_json decode",
        ratio,
    );
}

/// The global allocator this build of the bench runs with, named in every figure it reports.
static ALLOCATOR: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

#[allow(dead_code)] // The `informer_mimalloc` bench calls `run` instead.
pub fn main() {
    run("glibc malloc");
}

/// Runs the figures asked for on the command line, reporting them as measured with `allocator`.
pub fn run(allocator: &'static str) {
    let _ = ALLOCATOR.set(allocator);
    // BENCH_WORKERS=1 shows how much of the cost is cross-thread wake-ups.
    let workers = env_number("BENCH_WORKERS", 2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    // `-- sync`, `-- watch` (the simulator's watch) and `-- fast` (the fast server's) pick
    // figures, any combination of them; with none, all run.
    let picked = |name: &str| std::env::args().skip(1).any(|a| a == name);
    let (sync, watch, fast, queues) = (
        picked("sync"),
        picked("watch"),
        picked("fast"),
        picked("queues"),
    );
    let all = !(sync || watch || fast || queues);
    if picked("handoff") {
        rt.block_on(handoff(200_000));
        return;
    }
    rt.block_on(async {
        if all || sync {
            initial_sync(10_000).await;
            initial_sync(100_000).await;
        }
        if all || watch {
            let rounds = env_number("BENCH_ROUNDS", 5).max(1);
            watch_throughput(10_000, 50_000, rounds).await;
        }
        if all || queues {
            queue_comparison(10_000, env_number("BENCH_EVENTS", 50_000)).await;
        }
        if all || fast {
            let events = env_number("BENCH_EVENTS", 50_000);
            if std::env::var("BENCH_TYPE").map_or(true, |t| t != "dynamic") {
                fast_server_watch::<CompactObject>(10_000, events).await;
            }
            if std::env::var("BENCH_TYPE").map_or(true, |t| t != "compact") {
                fast_server_watch::<DynamicObject>(10_000, events).await;
            }
        }
    });
}

/// A server that answers the list with a pre-built body and the first watch with pre-built event
/// lines, one HTTP chunk per event as kube-apiserver writes them; later watches stay open and
/// silent (`sim_apiserver::serve_prebuilt`, shared with the peer benchmark). Serving costs a
/// reference-count increment per event, so the figure measures the client side.
mod fast_server {
    use std::sync::Arc;

    use bytes::Bytes;

    /// Starts the server on a [`ServerThread`](super::ServerThread); it serves until that is dropped.
    pub fn start(list: Bytes, events: Arc<Vec<Bytes>>) -> (String, super::ServerThread) {
        start_released(list, events, tokio::sync::watch::channel(true).1)
    }

    /// [`start`], with the first watch's events held back until `release` turns true, so that a
    /// figure can time exactly their delivery.
    pub fn start_released(
        list: Bytes,
        events: Arc<Vec<Bytes>>,
        release: tokio::sync::watch::Receiver<bool>,
    ) -> (String, super::ServerThread) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let thread = super::ServerThread::spawn("fast-server", move || async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            sim_apiserver::serve_prebuilt(listener, list, events, release).await;
        });
        (format!("http://{addr}"), thread)
    }
}

/// Runs [`fast_server_watch_once`] `BENCH_REPEAT` times (default 5) and reports the median run.
async fn fast_server_watch<K>(cached: usize, events: usize)
where
    K: Object + Decode + DeserializeOwned + Send + Sync + 'static,
{
    let repeat = env_number("BENCH_REPEAT", 5).max(1);
    let mut runs = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        runs.push(fast_server_watch_once::<K>(cached, events).await);
    }
    runs.sort_by(|a, b| a.ratio.total_cmp(&b.ratio));
    let median = runs[runs.len() / 2];
    let type_name = std::any::type_name::<K>()
        .rsplit("::")
        .next()
        .unwrap_or("?");
    let name = format!(
        "informer watch, fast server, {events} events, {type_name} ({:.0} MB/s; median of {repeat})",
        median.mb_per_s
    );
    report(
        &name,
        median.rate,
        "events/s",
        median.decode,
        "serde_json decode",
        median.ratio,
    );
    // The same run against what any cache pays per event: decoding and replacing a cached object.
    report(
        &format!("{name}, against decode + replace"),
        median.rate,
        "events/s",
        median.decode_replace,
        "decode + replace in a map",
        median.rate / median.decode_replace,
    );
}

/// The in-order informer (client-go's default, and ours) beside the DeltaFifo informer in the same
/// run: watch events/s from the fast server, and the initial sync of `cached` pods from the
/// simulator, each interleaved round by round and reported as the median of the rounds' ratios.
async fn queue_comparison(cached: usize, events: usize) {
    let repeat = env_number("BENCH_REPEAT", 5).max(1);
    let mut watch: Vec<(f64, f64)> = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let in_order =
            fast_server_watch_on::<CompactObject>(cached, events, InformerQueue::default()).await;
        let delta =
            fast_server_watch_on::<CompactObject>(cached, events, InformerQueue::DeltaFifo).await;
        watch.push((in_order.rate, delta.rate));
    }
    watch.sort_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)));
    let (in_order, delta) = watch[watch.len() / 2];
    report(
        &format!(
            "informer watch, fast server, {events} events, CompactObject, in-order queue (median of {repeat})"
        ),
        in_order,
        "events/s",
        delta,
        "DeltaFifo informer",
        in_order / delta,
    );
    let sim = seeded(cached).await;
    let config = ClusterConfig::new(&sim.url()).expect("config");
    let mut sync: Vec<(f64, f64)> = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let (a, _) = sync_time_on::<CompactObject>(&config, InformerQueue::default()).await;
        let (b, _) = sync_time_on::<CompactObject>(&config, InformerQueue::DeltaFifo).await;
        sync.push((a.as_secs_f64(), b.as_secs_f64()));
    }
    sync.sort_by(|a, b| (a.1 / a.0).total_cmp(&(b.1 / b.0)));
    let (a, b) = sync[sync.len() / 2];
    report(
        &format!("informer initial sync, {cached} pods, CompactObject, in-order queue (median of {repeat})"),
        cached as f64 / a,
        "objects/s",
        cached as f64 / b,
        "DeltaFifo informer",
        b / a,
    );
}

/// One fast-server run's figures.
#[derive(Clone, Copy)]
struct FastRun {
    /// Events per second through the informer.
    rate: f64,
    /// Events per second decoding the same lines.
    decode: f64,
    /// `rate / decode`.
    ratio: f64,
    /// Events per second decoding the same lines into a map of the cached objects.
    decode_replace: f64,
    mb_per_s: f64,
}

async fn fast_server_watch_once<K>(cached: usize, events: usize) -> FastRun
where
    K: Object + Decode + DeserializeOwned + Send + Sync + 'static,
{
    fast_server_watch_on::<K>(cached, events, InformerQueue::default()).await
}

/// [`fast_server_watch_once`] with the informers on `queue`.
async fn fast_server_watch_on<K>(cached: usize, events: usize, queue: InformerQueue) -> FastRun
where
    K: Object + Decode + DeserializeOwned + Send + Sync + 'static,
{
    let type_name = std::any::type_name::<K>()
        .rsplit("::")
        .next()
        .unwrap_or("?");
    let pod_lines: Vec<String> = (0..cached).map(realistic_pod_json).collect();
    let list = format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"{}"}},"items":[{}]}}"#,
        cached,
        pod_lines.join(",")
    );
    // MODIFIED events: the same pods with later resource versions.
    let rv_of = |i: usize| format!(r#""resourceVersion":"{}""#, 1000 + i);
    let lines: Arc<Vec<bytes::Bytes>> = Arc::new(
        (0..events)
            .map(|e| {
                let i = e % cached;
                let obj = pod_lines[i].replacen(
                    &rv_of(i),
                    &format!(r#""resourceVersion":"{}""#, cached + 1 + e),
                    1,
                );
                bytes::Bytes::from(format!("{{\"type\":\"MODIFIED\",\"object\":{obj}}}\n"))
            })
            .collect(),
    );
    let (release, released) = tokio::sync::watch::channel(false);
    let (url, _server) =
        fast_server::start_released(bytes::Bytes::from(list), Arc::clone(&lines), released);
    // A list, then the watch whose events are timed. The server builds its list whole, so it
    // cannot answer a watch-list (the default sync) with initial events and their end bookmark:
    // an informer left on the default would wait for that bookmark for ever.
    let factory = SharedInformerFactory::new(ClusterConfig::new(&url).expect("config"))
        .queue(queue)
        .reflector_options(ReflectorOptions {
            watch_list: false,
            ..ReflectorOptions::default()
        });
    let informer = factory.informer::<K>(pods()).expect("informer");
    let updates = UpdateCounter::new(events);
    // NO_HANDLER=1: no handler at all; completion is seen through the last-synced resource version.
    let no_handler = std::env::var("NO_HANDLER").is_ok();
    if !no_handler {
        informer
            .add_event_handler(updates.handler())
            .expect("handler");
    }
    let last_rv = (cached + events).to_string();
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    factory.wait_for_cache_sync(Duration::from_secs(120)).await;
    let rss_synced = rss_mb();
    let cpu_before = procstat::thread_cpu();
    let switches = context_switches();
    // The events were held back until now: none of them was read while the cache synced.
    let start = Instant::now();
    release.send_replace(true);
    if no_handler {
        // A diagnostic without a handler to signal the end: polled every millisecond.
        while informer.last_sync_resource_version() != last_rv {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    } else {
        updates.wait_for(events as u64).await;
    }
    let took = start.elapsed();
    let cpu = procstat::cpu_between(&cpu_before, &procstat::thread_cpu());
    let switches = context_switches() - switches;
    eprintln!(
        "rss after sync {rss_synced:.0} MB, after the watch {:.0} MB, peak {:.0} MB",
        rss_mb(),
        peak_rss_mb()
    );
    cancel.cancel();
    factory.shutdown().await;

    let t = Instant::now();
    for line in lines.iter() {
        let ev: Event<K> = serde_json::from_slice(line).expect("decode");
        std::hint::black_box(ev.object);
    }
    let decode = t.elapsed();
    // A second baseline: the least any cache does per event, decoding the line and replacing the
    // cached object it updates (freeing the old one, allocated long ago and cold), one thread.
    let mut cache: std::collections::HashMap<ObjectKey, K> = pod_lines
        .iter()
        .map(|l| {
            let o: K = serde_json::from_str(l).expect("decode");
            (meta_namespace_key(&o).expect("key"), o)
        })
        .collect();
    let t = Instant::now();
    for line in lines.iter() {
        let ev: Event<K> = serde_json::from_slice(line).expect("decode");
        let key = meta_namespace_key(&ev.object).expect("key");
        std::hint::black_box(cache.insert(key, ev.object));
    }
    let replace = t.elapsed();
    let bytes: usize = lines.iter().map(|l| l.len()).sum();
    let rate = events as f64 / took.as_secs_f64();
    let base = events as f64 / decode.as_secs_f64();
    let replace_rate = events as f64 / replace.as_secs_f64();
    println!(
        "watch {events} updates over {cached} cached pods ({type_name}), fast server: {rate:>8.0} events/s ({:.1} MB/s) | baseline decode of the same lines {base:>8.0} events/s | ratio {:.2} | decode + replace in a map {replace_rate:>8.0} events/s, ratio {:.2}",
        bytes as f64 / 1e6 / took.as_secs_f64(),
        rate / base,
        rate / replace_rate,
    );
    println!(
        "  cpu in the {:.2} s: {cpu}; {switches} context switches",
        took.as_secs_f64()
    );
    FastRun {
        rate,
        decode: base,
        ratio: rate / base,
        decode_replace: replace_rate,
        mb_per_s: bytes as f64 / 1e6 / took.as_secs_f64(),
    }
}

/// Diagnostic: how fast can the bare HTTP client hand body frames to a reader task?
async fn handoff(events: usize) {
    use http_body_util::BodyExt;
    let line = bytes::Bytes::from(format!(
        "{{\"type\":\"MODIFIED\",\"object\":{}}}\n",
        realistic_pod_json(1)
    ));
    let lines: Arc<Vec<bytes::Bytes>> = Arc::new(vec![line; events]);
    // A: the pooled client (connection driven by its own spawned task).
    let (url, _server) = fast_server::start(bytes::Bytes::new(), Arc::clone(&lines));
    let client = Client::new(&ClusterConfig::new(&url).expect("config")).expect("client");
    let start = Instant::now();
    let resp = client
        .get_stream("/api/v1/pods?watch=true")
        .await
        .expect("watch");
    let mut body = resp.into_body();
    let mut n = 0usize;
    while n < events {
        let f = body.frame().await.expect("frame").expect("ok");
        if f.is_data() {
            n += 1;
        }
    }
    let pooled = start.elapsed();
    // B: the connection driven inside the reading task.
    let (url, _server) = fast_server::start(bytes::Bytes::new(), Arc::clone(&lines));
    let addr = url.trim_start_matches("http://").to_string();
    let start = Instant::now();
    let tcp = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    let (mut send, conn) = hyper::client::conn::http1::handshake::<
        _,
        http_body_util::Empty<bytes::Bytes>,
    >(hyper_util::rt::TokioIo::new(tcp))
    .await
    .expect("handshake");
    let read = async {
        let req = hyper::Request::get("/api/v1/pods?watch=true")
            .header("host", addr.as_str())
            .body(http_body_util::Empty::new())
            .expect("req");
        let resp = send.send_request(req).await.expect("send");
        let mut body = resp.into_body();
        let mut n = 0usize;
        while n < events {
            let f = body.frame().await.expect("frame").expect("ok");
            if f.is_data() {
                n += 1;
            }
        }
    };
    tokio::select! {
        _ = conn => panic!("connection ended"),
        _ = read => {}
    }
    let inline = start.elapsed();
    // C: the reflector's watch call.
    let (url, _server) = fast_server::start(bytes::Bytes::new(), Arc::clone(&lines));
    let client = Client::new(&ClusterConfig::new(&url).expect("config")).expect("client");
    let start = Instant::now();
    let mut body = client
        .watch("/api/v1/pods?watch=true", "application/json")
        .await
        .expect("watch")
        .body;
    let mut n = 0usize;
    while n < events {
        let f = body.frame().await.expect("frame").expect("ok");
        if f.is_data() {
            n += 1;
        }
    }
    let watch = start.elapsed();
    println!(
        "handoff {events} frames: pooled client {:.0} frames/s, connection in the reading task {:.0} frames/s, Client::watch {:.0} frames/s",
        events as f64 / pooled.as_secs_f64(),
        events as f64 / inline.as_secs_f64(),
        events as f64 / watch.as_secs_f64()
    );
}

/// Context switches so far of this process's threads, summed (from `/proc/self/task/*/status`).
/// The number in environment variable `name`, or `default` when it is unset or not a number.
fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Writes `command` to the control FIFO named by `PERF_CTL_FIFO`, if set, so that a profile taken
/// with `perf record --control fifo:<that path> -D -1` covers only the measured windows.
fn perf_control(command: &str) {
    use std::io::Write as _;
    if let Some(path) = std::env::var_os("PERF_CTL_FIFO") {
        let written = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut fifo| fifo.write_all(format!("{command}\n").as_bytes()));
        if let Err(e) = written {
            eprintln!("PERF_CTL_FIFO: {e}");
        }
    }
}

fn context_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

fn rss_mb() -> f64 {
    procstat::status_mb("VmRSS:")
}
fn peak_rss_mb() -> f64 {
    procstat::status_mb("VmHWM:")
}

/// Prints one machine-readable figure for `cargo xtask bench`: the value, its same-run baseline,
/// and their ratio oriented so that higher is better.
fn report(name: &str, value: f64, unit: &str, baseline: f64, baseline_name: &str, ratio: f64) {
    let allocator = ALLOCATOR.get().copied().unwrap_or("glibc malloc");
    println!(
        "bench-result {}",
        serde_json::json!({
            "name": format!("{name}, {allocator}"),
            "value": value,
            "unit": unit,
            "baseline": baseline,
            "baseline_name": baseline_name,
            "ratio": ratio,
        })
    );
}
