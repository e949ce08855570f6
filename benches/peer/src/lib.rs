//! Peer comparison, benchmark only: kube-rs's reflector beside this project's informer, each in a
//! process of its own, against one fast fake API server in a third process.
//!
//! What it measures, for one client per run (so that peak RSS is that client's alone):
//! - **sync**: from starting the client to its cache being synced on a list of 10k realistic Pods
//!   (≈3.8 KB of JSON each, `sim_apiserver::fixtures::realistic_pod_json`);
//! - **watch**: then N `MODIFIED` events of those pods (default 100k), held back by the server until
//!   the cache has synced and released at once, delivered to one handler that only counts them;
//!   events/s is N over the time from the release to the handler's N-th event;
//! - **memory**: RSS at sync (`VmRSS`), after the watch, and the process's peak (`VmHWM`);
//! - **CPU**: the client process's user + system time during the watch, per event
//!   (`/proc/self/stat`); the server's CPU is its own process's and not counted.
//!
//! Clients, picked by the first argument:
//! - `kube-pod`: `kube::runtime::reflector` over `kube::runtime::watcher` of `k8s_openapi` `Pod`
//!   (default watcher configuration), the handler being the loop that consumes the stream;
//! - `kube-dynamic`: the same of `kube::api::DynamicObject` (the like-for-like peer of our
//!   `DynamicObject`: typed metadata, the rest as `serde_json::Value`);
//! - `ours-pod`, `ours-dynamic`, `ours-compact`: a `SharedInformerFactory` informer of `Pod`,
//!   `DynamicObject` or `CompactObject` (default queue, no indexes), one `on_update` handler;
//! - `ours-compact-pb-typed`: the `CompactObject` informer on protobuf (`Encoding::Protobuf`)
//!   whose `on_update` handler decodes each new object into `k8s_pb`'s `Pod`
//!   (`CompactObject::decode_pb`) and reads its first container's image: a typed `Pod` in the
//!   handler, as kube-rs's loop has one, without a cache of typed pods;
//! - `ours-pod-view`: the informer of `PbView<Pod>` (protobuf by default): each pod kept as its
//!   message, checked once, read through its typed view; the `on_update` handler reads the first
//!   container's image through the view, as `ours-compact-pb-typed` reads it from a decoded pod;
//! - `ours-pod-view-thread`: the same, started on an `InformerThread`;
//! - `ours-pod-thread`, `ours-dynamic-thread`, `ours-compact-thread`: the same, started on an
//!   `InformerThread` (`SharedInformerFactory::start_on`) instead of the clients' runtime;
//! - `ours-pod-thread-batched`, `ours-dynamic-thread-batched`, `ours-compact-thread-batched`,
//!   `ours-pod-view-thread-batched`, `ours-compact-pb-thread-batched`: the same (the last one
//!   `ours-compact-pb`) on an `InformerThread` with a batching window
//!   (`InformerThread::spawn_batching`) of [`BATCH_WINDOW_MS`] (`PEER_BATCH_MS=N` for another);
//! - `go-pod`, `go-pod-json`: client-go's shared informer of `Pod`, in protobuf (its default for
//!   built-in kinds) or JSON, in a process of the client-go probe named by `PEER_CLIENT_GO`
//!   (module `go`; `cargo xtask bench` names the probe it finds or builds, and skips them where
//!   none can be built);
//! - `serde-pod`, `prost-pod`: the decoders alone (module `alone`), the ceilings of a typed client
//!   of each encoding: JSON into `k8s_openapi`'s `Pod` with serde_json, protobuf into `k8s_pb`'s
//!   `Pod` with prost, over plain hyper connections, no cache but a `Vec` of the pods. A client of
//!   [`PROTOBUF_CLIENTS`] gets a server that also serves protobuf (transcoded once at its start).
//!
//! Both run on a tokio multi-threaded runtime of two workers (`PEER_WORKERS=N` for another count:
//! kube-rs's reflector runs about twice as fast on one, so `cargo xtask bench` measures both). The server serves pre-built bytes: the
//! list in one body and each watch event as one HTTP chunk, the same bytes for every client
//! (built as the `informer` bench's fast server builds them), so serving costs a memcpy per event.
//!
//! The crate is a workspace of its own (so that CI never builds kube). Run, from the project's
//! root: `cargo run --release --manifest-path benches/peer/Cargo.toml --target-dir target --
//! <client> [events]`; with mimalloc as the process's allocator, add `--features mimalloc --bin
//! peer-bench-mimalloc` before `--`. The last line printed is `bench-result {json}`: `name`, `value` and `unit`
//! (events/s) as the other custom benches print them, and every figure of the run; `cargo xtask
//! bench` runs each client three times and tables the medians with ratios against kube-rs.
//!
//! `PEER_RATE=<events/s>` paces the watch instead (the everyday rates a quiet cluster sends): the
//! server sends the events at that steady rate, one HTTP chunk each, from a thread of its own, each
//! stamped (an annotation, `informer-rs.bench/sent-us`) with the microseconds since the UNIX epoch
//! at which it left; the handler reads the stamp back, so the figures add the latency from the
//! server's send to the handler's call (p50, p99), besides CPU and context switches per event.
//!
//! `PEER_FRAMING=coalesced` coalesces the watch's events into HTTP chunks of about 64 KiB (as a
//! server with events waiting sends them) instead of one chunk per event (`per-event`, the
//! default); paced, a chunk leaves at its last event's time. `peer-bench wire [events]` prints the
//! bytes per listed pod and per watch event of each encoding instead of running a client.
//!
//! `PEER_DROP=client` or `PEER_DROP=server` drops the pods' `metadata.managedFields` before they
//! are cached, by the client (our factories' `drop_managed_fields`, a transform in client-go's
//! informer) or by the server (which then also holds the pods without them and serves those to
//! clients asking with `drop=metadata.managedFields` in `Accept`, as KEP-5958's servers do); see
//! [`Dropper`].
//!
//! `PEER_TRACE=1` also prints the CPU each thread used until sync (the initial list), RSS and the
//! handler's count every 100 ms during the watch, and the CPU each thread used in it, on stderr; `PEER_MALLOC_STATS=1` prints glibc's per-arena statistics
//! (`malloc_stats(3)`) at sync, after the watch and, with `PEER_TRACE`, at every tick.
//! `PEER_NO_HANDLER=1` (ours only, a diagnostic) registers no
//! handler and sees the end in the cache instead; `PEER_CACHED=N` lists N pods instead of 10k (with
//! `events` 0 or small, a measure of the initial list alone); `PEER_WORKERS=N` sets the client runtime's worker
//! threads (default 2); `PEER_PACING=off` or `PEER_PACING=<queue>,<handler>` replaces the
//! informers' default pacing (high waters), `PEER_QUEUE=delta-fifo` or `PEER_QUEUE=in-order,<batch>`
//! their default queue; `PEER_BACKLOG_MS=N` samples the handler's backlog every N ms instead of 10
//! (each sample wakes the runtime). `PEER_WRAP=1` (ours only) builds the informer by hand on its
//! `HttpListerWatcher` wrapped in one that forwards nothing but `list` and `watch`: the decode
//! lane must survive the wrapping (the rate is the same).
//!
//! Three knobs size the objects and pick the initial sync, for the scale runs (`cargo xtask bench
//! --scale`): `PEER_OBJECT_BYTES=N` grows each pod to about N bytes of JSON with sidecar
//! containers (each a copy of the pod's container, with its status: what a pod of several
//! containers weighs) instead of the realistic pod's 3.8 KB; `PEER_KIND=configmaps` caches
//! ConfigMaps of about `PEER_OBJECT_BYTES` (default [`CONFIG_MAP_BYTES`]) instead of pods, each
//! client's typed `Pod` then being its kind's `ConfigMap` (k8s-openapi's, k8s-pb's, client-go's;
//! the clients `kube-pod`, `kube-dynamic`, `ours-pod`, `ours-dynamic`, `ours-compact`,
//! `ours-compact-pb`, `ours-pod-pb`, `ours-pod-view`, `go-pod`, `go-pod-json`); `PEER_WATCH_LIST=1`
//! makes every client sync through a watch-list (`sendInitialEvents=true`: our factories'
//! `ReflectorOptions::watch_list`, kube-rs's `streaming_lists()`, client-go's `WatchListClient`
//! feature) instead of a paginated list, which the fast server answers with the list's items as
//! `ADDED` events and the bookmark that ends them. Each client is told its mode either way
//! (`PEER_WATCH_LIST` unset or `0`: a list, although our informers and client-go's sync through a
//! watch-list by default, and kube-rs's reflector through a list), so that a run compares like
//! with like.
//!
//! `PERF_CTL_FIFO=<fifo>` profiles the watch window only:
//! `mkfifo ctl && PERF_CTL_FIFO=ctl perf record --control fifo:ctl -D -1 -g peer-bench ours-pod`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::runtime::WatchStreamExt as _;
use shared_informer::reflector::protobuf::PbView;
use shared_informer::reflector::store_index::k8s_pb::api::core::v1::{
    ConfigMap as PbConfigMap, Pod as PbPod,
};
use shared_informer::reflector::store_index::{CompactObject, DynamicObject, Object, Pb};
use shared_informer::reflector::{ClusterConfig, Decode, Encoding, ReflectorOptions, Resource};
use shared_informer::{
    EventHandlerFns, HandlerRegistration, InformerThread, SharedInformerFactory,
};
use sim_apiserver::procstat::{
    cpu_between, process_cpu_s, status_mb, task_totals, thread_cpu, TaskTotals,
};
use tokio_util::sync::CancellationToken;

mod alone;
mod go;
mod real;
mod wire;

/// Pods in the list by default.
pub const CACHED: usize = 10_000;

/// Bytes of JSON of a ConfigMap (`PEER_KIND=configmaps`) unless `PEER_OBJECT_BYTES` says.
pub const CONFIG_MAP_BYTES: usize = 1_000;

/// The kind of the cached objects: `PEER_KIND` (read by the client and inherited by the server
/// process and client-go's probe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Pods,
    ConfigMaps,
}

/// `PEER_KIND`: `pods` (the default) or `configmaps`.
pub fn kind() -> Kind {
    match std::env::var("PEER_KIND").as_deref() {
        Ok("pods") | Ok("") | Err(_) => Kind::Pods,
        Ok("configmaps") => Kind::ConfigMaps,
        Ok(other) => panic!("PEER_KIND={other}: pods or configmaps"),
    }
}

impl Kind {
    /// The resource the clients watch.
    pub fn resource(self) -> Resource {
        Resource::namespaced("", "v1", self.plural())
    }

    pub fn plural(self) -> &'static str {
        match self {
            Kind::Pods => "pods",
            Kind::ConfigMaps => "configmaps",
        }
    }

    /// The list's kind.
    fn list_kind(self) -> &'static str {
        match self {
            Kind::Pods => "PodList",
            Kind::ConfigMaps => "ConfigMapList",
        }
    }
}

/// `PEER_OBJECT_BYTES`: about how many bytes of JSON each object has, if set.
pub fn object_bytes() -> Option<usize> {
    std::env::var("PEER_OBJECT_BYTES")
        .ok()
        .filter(|n| !n.is_empty())
        .map(|n| n.parse().expect("PEER_OBJECT_BYTES: a number of bytes"))
}

/// `PEER_WATCH_LIST=1`: the clients sync through a watch-list instead of a paginated list.
pub fn watch_list() -> bool {
    std::env::var("PEER_WATCH_LIST").is_ok_and(|v| v == "1" || v == "true")
}

/// Pods in the list: `PEER_CACHED` (read by the client and inherited by the server process), else
/// [`CACHED`].
pub fn cached() -> usize {
    std::env::var("PEER_CACHED")
        .ok()
        .map(|n| n.parse().expect("PEER_CACHED: a number"))
        .unwrap_or(CACHED)
}
/// The `*-thread-batched` clients' batching window: `PEER_BATCH_MS`, else [`BATCH_WINDOW_MS`].
pub fn batch_window() -> Duration {
    let ms = std::env::var("PEER_BATCH_MS")
        .ok()
        .map(|n| n.parse().expect("PEER_BATCH_MS: a number of milliseconds"))
        .unwrap_or(BATCH_WINDOW_MS);
    Duration::from_millis(ms)
}

/// `PEER_KUBECONFIG`: the kubeconfig of a real API server to run the clients against instead of
/// the fake server, and `PEER_CONTEXT` its context (else the current one). Its pods are those
/// `peer-bench real-seed` created (`PEER_CACHED` of them, nothing else), its watch events those of
/// a `peer-bench real-write` running beside the client (module `real`): the client counts the
/// `events` updates after its cache synced, its handler had the list and [`settle`] passed, and
/// its figures are those of that window.
pub fn real_server() -> Option<(std::path::PathBuf, Option<String>)> {
    let path = std::env::var_os("PEER_KUBECONFIG").filter(|p| !p.is_empty())?;
    let context = std::env::var("PEER_CONTEXT").ok().filter(|c| !c.is_empty());
    Some((path.into(), context))
}

/// `PEER_SETTLE_MS`: against a real server, how long a client watches after its sync (and its
/// handler's initial adds) before its window opens, default 3,000 ms. The real server's writer
/// runs all along, so the updates written while the client listed reach it first, in a burst, each
/// with a latency as long as the list; a client catches up with them within a second at the
/// paced rates, and the window then holds the steady flow alone.
pub fn settle() -> Duration {
    let ms = std::env::var("PEER_SETTLE_MS")
        .ok()
        .map(|ms| ms.parse().expect("PEER_SETTLE_MS: milliseconds"))
        .unwrap_or(3_000);
    Duration::from_millis(ms)
}

/// `PEER_RATE`: the paced watch's events per second, if set (read by the client and inherited by
/// the server process).
pub fn rate() -> Option<f64> {
    std::env::var("PEER_RATE")
        .ok()
        .map(|r| r.parse::<f64>().expect("PEER_RATE: events per second"))
        .filter(|r| *r > 0.0)
}

/// `PEER_DROP`: who drops the pods' `metadata.managedFields` (read by the client and inherited by
/// the server process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropper {
    /// `PEER_DROP=client`: the client strips them (our informers'
    /// `SharedInformerFactory::drop_managed_fields`, client-go's informer a transform, as
    /// controller-runtime users write it); the server sends them (it ignores the `drop`
    /// parameter, as kube-apiserver 1.36 does).
    Client,
    /// `PEER_DROP=server`: the server leaves them out for clients that ask with
    /// `drop=metadata.managedFields` in `Accept` (KEP-5958); the clients ask, and strip as with
    /// `client` what still comes.
    Server,
}

/// `PEER_DROP`, if set.
pub fn drop_managed_fields() -> Option<Dropper> {
    match std::env::var("PEER_DROP").as_deref() {
        Ok("client") => Some(Dropper::Client),
        Ok("server") => Some(Dropper::Server),
        Ok("") | Err(_) => None,
        Ok(other) => panic!("PEER_DROP={other}: client or server"),
    }
}

/// The annotation a paced event carries its send time in.
pub const SENT_ANNOTATION: &str = "informer-rs.bench/sent-us";

/// Microseconds since the UNIX epoch now (the clock the server stamps with).
fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The latencies a handler saw: from the server's stamp to the handler's call, as a histogram of
/// fixed size made before the watch starts. (Keeping every latency in a growing list added its
/// own memory to the client's RSS during a paced watch: 2 MB over 480k events, part of the
/// `CompactObject` rise examined in docs/benchmarks-archive.md.)
pub struct Latencies(std::sync::Mutex<Vec<u32>>);

/// Latencies below this many µs are counted to the microsecond.
const FINE_US: u64 = 10_000;
/// Above [`FINE_US`], to the nearest this many µs.
const COARSE_STEP_US: u64 = 100;
/// Latencies at or beyond this many µs share the last bucket.
const MAX_US: u64 = 2_000_000;
const BUCKETS: usize = (FINE_US + (MAX_US - FINE_US) / COARSE_STEP_US + 1) as usize;

impl Default for Latencies {
    fn default() -> Self {
        Latencies(std::sync::Mutex::new(vec![0; BUCKETS]))
    }
}

impl Latencies {
    fn bucket(micros: u64) -> usize {
        let micros = micros.min(MAX_US);
        if micros < FINE_US {
            micros as usize
        } else {
            (FINE_US + (micros - FINE_US) / COARSE_STEP_US) as usize
        }
    }

    /// The latency a bucket stands for: its exact value below [`FINE_US`], else its middle.
    fn value(bucket: usize) -> f64 {
        let bucket = bucket as u64;
        if bucket < FINE_US {
            bucket as f64
        } else {
            (FINE_US + (bucket - FINE_US) * COARSE_STEP_US) as f64 + COARSE_STEP_US as f64 / 2.0
        }
    }

    /// Records one event's latency from its stamp, if it has one.
    fn observe(&self, stamp: Option<&str>) {
        if let Some(sent) = stamp.and_then(|s| s.parse::<u64>().ok()) {
            let bucket = Self::bucket(now_us().saturating_sub(sent));
            let mut counts = self.0.lock().expect("latencies");
            counts[bucket] = counts[bucket].saturating_add(1);
        }
    }

    /// Forgets every latency recorded so far.
    fn clear(&self) {
        self.0.lock().expect("latencies").fill(0);
    }

    /// The `q` quantile (0..=1) in microseconds, if any latency was recorded.
    fn quantile(&self, q: f64) -> Option<f64> {
        let counts = self.0.lock().expect("latencies");
        let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        if total == 0 {
            return None;
        }
        let rank = ((total - 1) as f64 * q).round() as u64;
        let mut seen = 0;
        for (bucket, &count) in counts.iter().enumerate() {
            seen += u64::from(count);
            if seen > rank {
                return Some(Self::value(bucket));
            }
        }
        Some(Self::value(BUCKETS - 1))
    }
}

#[cfg(test)]
mod latency_tests {
    use super::*;

    fn record(latencies: &Latencies, micros: &[u64]) {
        let mut counts = latencies.0.lock().unwrap();
        for &m in micros {
            counts[Latencies::bucket(m)] += 1;
        }
    }

    #[test]
    fn quantiles_are_exact_below_ten_ms_and_to_the_bucket_above() {
        let latencies = Latencies::default();
        assert_eq!(latencies.quantile(0.5), None);
        let fine: Vec<u64> = (1..=99).collect();
        record(&latencies, &fine);
        record(&latencies, &[25_049]);
        assert_eq!(latencies.quantile(0.0), Some(1.0));
        assert_eq!(latencies.quantile(0.5), Some(51.0));
        assert_eq!(latencies.quantile(0.98), Some(98.0));
        assert_eq!(latencies.quantile(1.0), Some(25_050.0));
        record(&latencies, &[u64::MAX]);
        assert_eq!(
            latencies.quantile(1.0),
            Some(MAX_US as f64 + COARSE_STEP_US as f64 / 2.0)
        );
    }
}

/// Watch events by default.
pub const DEFAULT_EVENTS: usize = 100_000;

/// The clients, as named on the command line.
pub const CLIENTS: [&str; 20] = [
    "kube-pod",
    "kube-dynamic",
    "ours-pod",
    "ours-dynamic",
    "ours-compact",
    "ours-pod-thread",
    "ours-dynamic-thread",
    "ours-compact-thread",
    "serde-pod",
    "prost-pod",
    "ours-pod-pb",
    "ours-compact-pb",
    "ours-compact-pb-typed",
    "ours-pod-view",
    "ours-pod-view-thread",
    "ours-pod-thread-batched",
    "ours-dynamic-thread-batched",
    "ours-compact-thread-batched",
    "ours-pod-view-thread-batched",
    "ours-compact-pb-thread-batched",
];

/// The `*-thread-batched` clients' batching window, in milliseconds, unless `PEER_BATCH_MS`
/// names another: at 2,000 events/s about ten events per wake-up, each up to 5 ms later.
pub const BATCH_WINDOW_MS: u64 = 5;

/// The clients that ask for protobuf: their server transcodes its objects at start (the others'
/// servers build JSON alone, as before). `ours-pod-pb` is the informer of `k8s_pb`'s `Pod`
/// (`Pb<Pod>`, protobuf by default); `ours-compact-pb` the `CompactObject` informer told to ask
/// for protobuf (`Encoding::Protobuf`), and `ours-compact-pb-typed` the same whose handler decodes
/// each object into a `k8s_pb` `Pod`; `ours-pod-view` the informer of `PbView<Pod>`; `go-pod` client-go's informer, protobuf by default.
pub const PROTOBUF_CLIENTS: [&str; 9] = [
    "prost-pod",
    "ours-pod-pb",
    "ours-pod-view",
    "ours-pod-view-thread",
    "ours-pod-view-thread-batched",
    "ours-compact-pb-thread-batched",
    "ours-compact-pb",
    "ours-compact-pb-typed",
    "go-pod",
];

/// `PEER_FRAMING=coalesced`: the watch's events coalesced into chunks of about 64 KiB
/// (`sim_apiserver::Framing::COALESCED`) instead of one HTTP chunk each (read by the client for
/// its result, inherited by the server process).
pub fn framing() -> sim_apiserver::Framing {
    match std::env::var("PEER_FRAMING").as_deref() {
        Ok("coalesced") => sim_apiserver::Framing::COALESCED,
        Ok("per-event") | Err(_) => sim_apiserver::Framing::PerEvent,
        Ok(other) => panic!("PEER_FRAMING={other}: per-event or coalesced"),
    }
}

/// Entry point of both binaries; `allocator` names the process's global allocator in the result.
pub fn run(allocator: &'static str) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let events = args
        .get(1)
        .map(|n| n.parse::<usize>().expect("events: a number"))
        .unwrap_or(DEFAULT_EVENTS);
    match args.first().map(String::as_str) {
        Some("serve") => server::serve(
            cached(),
            events,
            args.get(2).map(String::as_str) == Some("protobuf"),
        ),
        Some("wire") => println!("bench-result {}", wire::sizes(cached(), events)),
        Some("real-seed") => {
            let pods = args
                .get(1)
                .map_or_else(cached, |n| n.parse().expect("pods: a number"));
            println!("bench-result {}", real::seed(pods));
        }
        Some("real-write") => {
            let rate = args
                .get(1)
                .map(|r| r.parse::<f64>().expect("rate: writes per second"))
                .expect("real-write <rate> [seconds]");
            let seconds = args
                .get(2)
                .map(|s| s.parse::<f64>().expect("seconds: a number"));
            println!("bench-result {}", real::write(rate, cached(), seconds));
        }
        Some("soak") => {
            let soak = soak::run(events);
            println!("bench-result {}", soak.to_json(events, allocator));
        }
        Some(client) if go::CLIENTS.contains(&client) => {
            let figures = go::measure(client, events);
            println!(
                "bench-result {}",
                figures.to_json(client, events, "Go's runtime")
            );
        }
        Some(client) if CLIENTS.contains(&client) => {
            let figures = measure(client, events);
            println!(
                "bench-result {}",
                figures.to_json(client, events, allocator)
            );
        }
        _ => {
            eprintln!(
                "usage: peer-bench <{}|{}|soak|wire> [events, default {DEFAULT_EVENTS}]\n       \
                 peer-bench real-seed [pods] | real-write <rate> [seconds] (PEER_KUBECONFIG)",
                CLIENTS.join("|"),
                go::CLIENTS.join("|")
            );
            std::process::exit(2);
        }
    }
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    pub events_per_s: f64,
    pub sync_ms: f64,
    pub rss_sync_mb: f64,
    pub rss_end_mb: f64,
    /// The process's peak RSS over the whole run.
    pub peak_rss_mb: f64,
    /// The peak RSS up to the sync (the initial list).
    pub list_peak_rss_mb: f64,
    /// The peak RSS during the watch alone (the peak is reset at sync, where Linux allows it;
    /// else the whole run's).
    pub watch_peak_rss_mb: f64,
    pub cpu_us_per_event: f64,
    /// Context switches per event during the watch: voluntary (a thread blocked) and involuntary.
    pub voluntary_switches_per_event: f64,
    pub involuntary_switches_per_event: f64,
    /// Paced runs: the latency from the server's send to the handler's call, microseconds.
    pub latency_p50_us: Option<f64>,
    pub latency_p99_us: Option<f64>,
    /// Most notifications waiting in the handler's buffer, sampled every 10 ms during the watch
    /// (ours only: kube-rs's stream has no buffer between the cache and the consumer).
    pub max_backlog: Option<i64>,
    /// Watch-list streams the server closed before their end bookmark, over the whole run
    /// (ours only; each is retried).
    pub watch_lists_incomplete: Option<u64>,
}

impl Figures {
    fn to_json(self, client: &str, events: usize, allocator: &str) -> serde_json::Value {
        let paced = rate().map_or(String::new(), |r| format!(", paced at {r}/s"));
        let dropped = match drop_managed_fields() {
            None => "",
            Some(Dropper::Client) => ", managedFields dropped by the client",
            Some(Dropper::Server) => ", managedFields dropped by the server",
        };
        serde_json::json!({
            "name": format!("peer: {client}, watch {events} events over {} pods{paced}{dropped}, {allocator}", cached()),
            "drop_managed_fields": format!("{:?}", drop_managed_fields()),
            "value": self.events_per_s,
            "unit": "events/s",
            "client": client,
            "encoding": if PROTOBUF_CLIENTS.contains(&client) { "protobuf" } else { "json" },
            "framing": match framing() {
                sim_apiserver::Framing::PerEvent => "per-event",
                _ => "coalesced",
            },
            "allocator": allocator,
            "events": events,
            "cached": cached(),
            "kind": kind().plural(),
            "object_json_bytes": server::object_json(0).len(),
            "watch_list": watch_list(),
            "events_per_s": self.events_per_s,
            "sync_ms": self.sync_ms,
            "rss_sync_mb": self.rss_sync_mb,
            "rss_end_mb": self.rss_end_mb,
            "peak_rss_mb": self.peak_rss_mb,
            "list_peak_rss_mb": self.list_peak_rss_mb,
            "watch_peak_rss_mb": self.watch_peak_rss_mb,
            "cpu_us_per_event": self.cpu_us_per_event,
            "voluntary_switches_per_event": self.voluntary_switches_per_event,
            "involuntary_switches_per_event": self.involuntary_switches_per_event,
            "rate": rate(),
            "latency_p50_us": self.latency_p50_us,
            "latency_p99_us": self.latency_p99_us,
            "max_handler_backlog": self.max_backlog,
            "watch_lists_incomplete": self.watch_lists_incomplete,
        })
    }
}

/// The server process, and the way to release its watch events.
struct ServerProcess {
    child: Child,
    url: String,
}

impl ServerProcess {
    /// A server of `events`, which also serves protobuf when `protobuf`.
    fn start(events: usize, protobuf: bool) -> Self {
        let exe = std::env::current_exe().expect("current exe");
        let encoding = if protobuf { "protobuf" } else { "json" };
        let mut child = Command::new(exe)
            .args(["serve", &events.to_string(), encoding])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the server process");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the server's address");
        let url = line
            .trim()
            .strip_prefix("listening ")
            .expect("`listening <url>`")
            .to_string();
        ServerProcess { child, url }
    }

    /// Lets the first watch's events go.
    fn release(&mut self) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        stdin.write_all(b"go\n").expect("release");
        stdin.flush().expect("release");
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Closing its stdin ends the server.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Counts what the handler receives and wakes the waiter at `target`.
struct Counter {
    count: AtomicU64,
    /// The count the waiter waits for: fixed at the start against the fake server (whose events
    /// come only once released); against a real server, whose writer runs all along, set when the
    /// window opens ([`rearm`](Self::rearm)), and out of reach until then.
    target: AtomicU64,
    reached: tokio::sync::Notify,
    latencies: Latencies,
}

impl Counter {
    fn new(target: usize) -> Arc<Self> {
        Arc::new(Counter {
            count: AtomicU64::new(0),
            target: AtomicU64::new(target as u64),
            reached: tokio::sync::Notify::new(),
            latencies: Latencies::default(),
        })
    }

    /// The count the waiter waits for.
    fn target(&self) -> u64 {
        self.target.load(Ordering::Relaxed)
    }

    /// Opens the window of a watch whose events are already flowing: the waiter now waits for
    /// `events` more, and the latencies seen so far (those of the list's tail) are forgotten.
    fn rearm(&self, events: usize) {
        self.latencies.clear();
        let target = self.count.load(Ordering::Relaxed) + events as u64;
        self.target.store(target, Ordering::Relaxed);
        if self.count.load(Ordering::Relaxed) >= target {
            self.reached.notify_one();
        }
    }

    /// Counts one event, recording its latency when it carries a stamp.
    fn hit_stamped(&self, stamp: Option<&str>) {
        self.latencies.observe(stamp);
        self.hit();
    }

    fn hit(&self) {
        if self.count.fetch_add(1, Ordering::Relaxed) + 1 == self.target() {
            self.reached.notify_one();
        }
    }

    async fn wait(&self) {
        while self.count.load(Ordering::Relaxed) < self.target() {
            self.reached.notified().await;
        }
    }
}

/// The clients' runtime: multi-threaded, `PEER_WORKERS` workers (default 2).
fn client_runtime() -> tokio::runtime::Runtime {
    let workers = std::env::var("PEER_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(2);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The handler of our clients: counts the new object, with the send time it carries if paced.
fn count_stamped<K: Object>(new: &K, counter: &Counter) {
    counter.hit_stamped(new.annotation(SENT_ANNOTATION))
}

/// Runs one client against a fresh server process and returns its figures.
pub fn measure(client: &str, events: usize) -> Figures {
    // Against a real server (`PEER_KUBECONFIG`) there is no server process: its events come from
    // a writer already running, so the target is set when the window opens.
    let real = real_server().is_some();
    let mut server =
        (!real).then(|| ServerProcess::start(events, PROTOBUF_CLIENTS.contains(&client)));
    let rt = client_runtime();
    let counter = Counter::new(if real { usize::MAX } else { events });
    let url = server.as_ref().map_or_else(String::new, |s| s.url.clone());
    rt.block_on(async {
        let started = Instant::now();
        let client_run = match client {
            _ if kind() == Kind::ConfigMaps => {
                ClientRun::config_maps(client, &url, &counter).await
            }
            "serde-pod" | "prost-pod" if real => {
                panic!("{client} speaks plain HTTP to the fake server only")
            }
            "kube-pod" => {
                let client = kube_client(&url).await;
                ClientRun::kube(kube::Api::<Pod>::all(client), (), &counter).await
            }
            "kube-dynamic" => {
                let resource = kube::discovery::ApiResource::erase::<Pod>(&());
                let client = kube_client(&url).await;
                let api = kube::Api::<kube::api::DynamicObject>::all_with(client, &resource);
                ClientRun::kube(api, resource, &counter).await
            }
            "ours-pod" => ClientRun::ours::<Pod>(&url, &counter).await,
            "ours-dynamic" => ClientRun::ours::<DynamicObject>(&url, &counter).await,
            "ours-compact" => ClientRun::ours::<CompactObject>(&url, &counter).await,
            "ours-pod-thread" => ClientRun::ours_on_thread::<Pod>(&url, &counter).await,
            "ours-dynamic-thread" => {
                ClientRun::ours_on_thread::<DynamicObject>(&url, &counter).await
            }
            "ours-compact-thread" => {
                ClientRun::ours_on_thread::<CompactObject>(&url, &counter).await
            }
            "ours-pod-thread-batched" => {
                ClientRun::ours_on_batching_thread::<Pod>(&url, &counter).await
            }
            "ours-dynamic-thread-batched" => {
                ClientRun::ours_on_batching_thread::<DynamicObject>(&url, &counter).await
            }
            "ours-compact-thread-batched" => {
                ClientRun::ours_on_batching_thread::<CompactObject>(&url, &counter).await
            }
            "ours-pod-view-thread-batched" => {
                ClientRun::ours_encoded::<PbView<PbPod>>(
                    &url,
                    &counter,
                    Encoding::Auto,
                    Some(batch_window()),
                    ClientRun::view_and_count,
                )
                .await
            }
            "ours-pod-pb" => ClientRun::ours::<Pb<PbPod>>(&url, &counter).await,
            "ours-pod-view" => {
                ClientRun::ours_encoded::<PbView<PbPod>>(
                    &url,
                    &counter,
                    Encoding::Auto,
                    None,
                    ClientRun::view_and_count,
                )
                .await
            }
            "ours-pod-view-thread" => {
                ClientRun::ours_encoded::<PbView<PbPod>>(
                    &url,
                    &counter,
                    Encoding::Auto,
                    Some(Duration::ZERO),
                    ClientRun::view_and_count,
                )
                .await
            }
            "ours-compact-pb" => {
                ClientRun::ours_encoded::<CompactObject>(
                    &url,
                    &counter,
                    Encoding::Protobuf,
                    None,
                    count_stamped,
                )
                .await
            }
            "ours-compact-pb-thread-batched" => {
                ClientRun::ours_encoded::<CompactObject>(
                    &url,
                    &counter,
                    Encoding::Protobuf,
                    Some(batch_window()),
                    count_stamped,
                )
                .await
            }
            "ours-compact-pb-typed" => {
                ClientRun::ours_encoded::<CompactObject>(
                    &url,
                    &counter,
                    Encoding::Protobuf,
                    None,
                    ClientRun::decode_and_count,
                )
                .await
            }
            "serde-pod" => ClientRun::Alone(alone::serde_pod(&url, &counter).await),
            "prost-pod" => ClientRun::Alone(alone::prost_pod(&url, &counter).await),
            other => panic!("unknown client {other}"),
        };
        let sync = started.elapsed();
        let rss_sync_mb = status_mb("VmRSS:");
        arena_stats("at sync");
        let list_peak_rss_mb = status_mb("VmHWM:");
        reset_peak_rss();
        if std::env::var_os("PEER_TRACE").is_some() {
            let threads = thread_cpu();
            let by_thread: Vec<String> = threads
                .iter()
                .filter(|(_, cpu)| **cpu >= 0.01)
                .map(|(name, cpu)| format!("{name} {cpu:.2} s"))
                .collect();
            eprintln!(
                "  cpu by thread until sync ({} ms): {}",
                sync.as_millis(),
                by_thread.join(", ")
            );
        }
        let trace = std::env::var_os("PEER_TRACE").is_some().then(|| {
            let counter = Arc::clone(&counter);
            tokio::spawn(async move {
                let start = Instant::now();
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    arena_stats("trace");
                    eprintln!(
                        "  t={:>5} ms rss {:>6.0} MB handled {}",
                        start.elapsed().as_millis(),
                        status_mb("VmRSS:"),
                        counter.count.load(Ordering::Relaxed)
                    );
                }
            })
        });
        let backlog = client_run.backlog();
        if let Some(backlog) = &backlog {
            assert!((backlog.drained)().await, "the handler handled the initial list");
        }
        if real {
            // The updates written while the client listed come first, as a burst: left out.
            tokio::time::sleep(settle()).await;
        }
        let backlog_max = Arc::new(AtomicI64::new(0));
        let every = backlog_period();
        let sampler = backlog.map(|backlog| {
            let max = Arc::clone(&backlog_max);
            tokio::spawn(async move {
                loop {
                    max.fetch_max((backlog.pending)(), Ordering::Relaxed);
                    tokio::time::sleep(every).await;
                }
            })
        });
        let threads_before = thread_cpu();
        let cpu_before = process_cpu_s();
        let tasks_before = task_totals();
        perf_control("enable");
        let start = Instant::now();
        match &mut server {
            Some(server) => server.release(),
            None => counter.rearm(events),
        }
        counter.wait().await;
        let took = start.elapsed();
        perf_control("disable");
        let max_backlog = sampler.map(|sampler| {
            sampler.abort();
            backlog_max.load(Ordering::Relaxed)
        });
        let tasks = task_totals().since(tasks_before);
        // The scheduler's nanosecond clock where there is one, else the 10 ms ticks.
        let cpu = if tasks.cpu_ns > 0 {
            tasks.cpu_ns as f64 / 1e9
        } else {
            process_cpu_s() - cpu_before
        };
        let TaskTotals {
            voluntary_switches,
            involuntary_switches,
            ..
        } = tasks;
        arena_stats("after the watch");
        if let Some(trace) = trace {
            trace.abort();
            eprintln!(
                "  cpu by thread in the watch: {}",
                cpu_between(&threads_before, &thread_cpu())
            );
        }
        let figures = Figures {
            events_per_s: events as f64 / took.as_secs_f64(),
            sync_ms: sync.as_secs_f64() * 1e3,
            rss_sync_mb,
            rss_end_mb: status_mb("VmRSS:"),
            peak_rss_mb: list_peak_rss_mb.max(status_mb("VmHWM:")),
            list_peak_rss_mb,
            watch_peak_rss_mb: status_mb("VmHWM:"),
            cpu_us_per_event: cpu * 1e6 / events as f64,
            voluntary_switches_per_event: voluntary_switches as f64 / events as f64,
            involuntary_switches_per_event: involuntary_switches as f64 / events as f64,
            latency_p50_us: counter.latencies.quantile(0.5),
            latency_p99_us: counter.latencies.quantile(0.99),
            max_backlog,
            watch_lists_incomplete: client_run.watch_lists_incomplete(),
        };
        eprintln!(
            "{client}: {:.2} voluntary + {:.2} involuntary context switches per event, latency p50 {:?} µs, p99 {:?} µs",
            figures.voluntary_switches_per_event,
            figures.involuntary_switches_per_event,
            figures.latency_p50_us,
            figures.latency_p99_us
        );
        eprintln!(
            "{client}: sync {:.0} ms, watch {events} events in {:.2} s = {:.0} events/s, cpu {:.1} µs/event, rss at sync {:.0} MB, after {:.0} MB, peak in list {:.0} MB, in watch {:.0} MB, most notifications buffered {:?}, watch-lists cut {:?}",
            figures.sync_ms,
            took.as_secs_f64(),
            figures.events_per_s,
            figures.cpu_us_per_event,
            figures.rss_sync_mb,
            figures.rss_end_mb,
            figures.list_peak_rss_mb,
            figures.watch_peak_rss_mb,
            figures.max_backlog,
            figures.watch_lists_incomplete
        );
        client_run.stop().await;
        figures
    })
}

/// A kube-rs client of the server at `url`, or of the real server's kubeconfig
/// ([`real_server`]), with kube's default configuration otherwise.
async fn kube_client(url: &str) -> kube::Client {
    let config = match real_server() {
        Some((path, context)) => {
            let kubeconfig =
                kube::config::Kubeconfig::read_from(&path).expect("the real server's kubeconfig");
            let options = kube::config::KubeConfigOptions {
                context,
                ..Default::default()
            };
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .expect("a kube-rs configuration from the kubeconfig")
        }
        None => kube::Config::new(url.parse().expect("url")),
    };
    kube::Client::try_from(config).expect("kube client")
}

/// This project's configuration for the server at `url`, or for the real server's kubeconfig
/// ([`real_server`]).
fn cluster_config(url: &str) -> ClusterConfig {
    match real_server() {
        Some((path, context)) => ClusterConfig::from_kubeconfig_files(&[path], context.as_deref())
            .expect("the real server's kubeconfig"),
        None => ClusterConfig::new(url).expect("config"),
    }
}

/// A running, synced client.
enum ClientRun {
    Kube(tokio::task::JoinHandle<()>),
    /// `serde-pod`, `prost-pod`: a decoder alone, its watch task.
    Alone(tokio::task::JoinHandle<()>),
    /// The factory, and for `ours-*-thread` the thread its informers run on; last, the count of
    /// the informer's watch-list streams closed before their end (its reflector's
    /// `watch_lists_incomplete`).
    Ours(
        Box<SharedInformerFactory>,
        CancellationToken,
        Backlog,
        Option<InformerThread>,
        Box<dyn Fn() -> u64 + Send + Sync>,
    ),
    /// `PEER_WRAP=1`: an informer built by hand on a wrapped lister-watcher, and its run task.
    OursWrapped(tokio::task::JoinHandle<()>, CancellationToken, Backlog),
}

/// Our handler's backlog: how many notifications it has queued, and a wait for it to have
/// handled the initial list's adds. The informer syncs once its cache holds the list, while the
/// handler may still have thousands of those adds queued (P3 never waits for them): the watch
/// starts, and its backlog is sampled, once they are handled, so that the largest backlog measures
/// the watch's, and the watch's figures do not include the list's tail.
#[derive(Clone)]
struct Backlog {
    pending: Arc<dyn Fn() -> i64 + Send + Sync>,
    drained: Arc<dyn Fn() -> futures::future::BoxFuture<'static, bool> + Send + Sync>,
}

impl Backlog {
    fn of<K: Send + Sync + 'static>(registration: HandlerRegistration<K>) -> Self {
        let synced = registration.clone();
        Backlog {
            pending: Arc::new(move || registration.pending()),
            drained: Arc::new(move || {
                let synced = synced.clone();
                Box::pin(async move { synced.wait_for_sync().await })
            }),
        }
    }

    /// No handler (`PEER_NO_HANDLER`): nothing queued, ever.
    fn none() -> Self {
        Backlog {
            pending: Arc::new(|| 0),
            drained: Arc::new(|| Box::pin(async { true })),
        }
    }
}

/// `PEER_WRAP=1`: the informer's `HttpListerWatcher` wrapped in one that counts the calls and
/// forwards nothing but `list` and `watch`, as a wrapper written before decode lanes existed
/// does: it must keep the same rate (the reflector's lane needs no forwarding).
struct Counting<L> {
    inner: L,
    calls: AtomicU64,
}

impl<K, L> shared_informer::reflector::ListerWatcher<K> for Counting<L>
where
    K: Send + Sync + 'static,
    L: shared_informer::reflector::ListerWatcher<K>,
{
    async fn list(
        &self,
        options: shared_informer::reflector::ListOptions,
    ) -> Result<shared_informer::reflector::ObjectList<K>, shared_informer::reflector::ReflectorError>
    {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.list(options).await
    }

    async fn watch(
        &self,
        options: shared_informer::reflector::WatchOptions,
    ) -> Result<
        shared_informer::reflector::WatchStream<K>,
        shared_informer::reflector::ReflectorError,
    > {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.watch(options).await
    }
}

impl ClientRun {
    /// kube-rs: `reflector(writer, watcher(api, default config))`, consumed by one task that counts
    /// `Apply` events once the store is ready.
    async fn kube<K>(api: kube::Api<K>, dyntype: K::DynamicType, counter: &Arc<Counter>) -> Self
    where
        K: kube::Resource
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + Sync
            + 'static,
        K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
    {
        let writer = kube::runtime::reflector::store::Writer::new(dyntype);
        let store = writer.as_reader();
        let mut config = kube::runtime::watcher::Config::default();
        if watch_list() {
            config = config.streaming_lists();
        }
        // As kube-rs's examples write it: a watcher with the default backoff (without one, a failed
        // watch is retried at once, in a loop that never yields).
        let stream = kube::runtime::reflector(
            writer,
            kube::runtime::watcher(api, config).default_backoff(),
        );
        let counter = Arc::clone(counter);
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut synced = false;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(kube::runtime::watcher::Event::InitDone) => synced = true,
                    Ok(kube::runtime::watcher::Event::Apply(object)) if synced => {
                        let stamp = object
                            .meta()
                            .annotations
                            .as_ref()
                            .and_then(|a| a.get(SENT_ANNOTATION));
                        counter.hit_stamped(stamp.map(String::as_str));
                        if counter.count.load(Ordering::Relaxed) >= counter.target() {
                            // Done: nothing after the last event is measured.
                            break;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!("kube watcher: {e}"),
                }
            }
        });
        store.wait_until_ready().await.expect("kube store ready");
        assert_eq!(store.len(), cached(), "kube store synced");
        ClientRun::Kube(task)
    }

    /// `PEER_KIND=configmaps`: `client` of ConfigMaps, its typed `Pod` being its `ConfigMap`;
    /// every handler only counts.
    async fn config_maps(client: &str, url: &str, counter: &Arc<Counter>) -> Self {
        match client {
            "kube-pod" => {
                let client = kube_client(url).await;
                ClientRun::kube(kube::Api::<ConfigMap>::all(client), (), counter).await
            }
            "kube-dynamic" => {
                let resource = kube::discovery::ApiResource::erase::<ConfigMap>(&());
                let client = kube_client(url).await;
                let api = kube::Api::<kube::api::DynamicObject>::all_with(client, &resource);
                ClientRun::kube(api, resource, counter).await
            }
            "ours-pod" => ClientRun::ours::<ConfigMap>(url, counter).await,
            "ours-dynamic" => ClientRun::ours::<DynamicObject>(url, counter).await,
            "ours-compact" => ClientRun::ours::<CompactObject>(url, counter).await,
            "ours-pod-pb" => ClientRun::ours::<Pb<PbConfigMap>>(url, counter).await,
            "ours-pod-view" => ClientRun::ours::<PbView<PbConfigMap>>(url, counter).await,
            "ours-compact-pb" => {
                ClientRun::ours_encoded::<CompactObject>(
                    url,
                    counter,
                    Encoding::Protobuf,
                    None,
                    count_stamped,
                )
                .await
            }
            other => panic!("{other} does not run with PEER_KIND=configmaps"),
        }
    }

    /// This project: an informer of `K` from a factory, one `on_update` handler counting.
    async fn ours<K>(url: &str, counter: &Arc<Counter>) -> Self
    where
        K: Object + Decode + Send + Sync + 'static,
    {
        Self::ours_encoded::<K>(url, counter, Encoding::Auto, None, count_stamped).await
    }

    /// `ours-*-thread`: [`ours`](Self::ours), its informer started on an [`InformerThread`]
    /// (`SharedInformerFactory::start_on`), where one thread reads, decodes and handles each
    /// event, instead of on the clients' runtime.
    async fn ours_on_thread<K>(url: &str, counter: &Arc<Counter>) -> Self
    where
        K: Object + Decode + Send + Sync + 'static,
    {
        Self::ours_encoded::<K>(
            url,
            counter,
            Encoding::Auto,
            Some(Duration::ZERO),
            count_stamped,
        )
        .await
    }

    /// `ours-*-thread-batched`: [`ours_on_thread`](Self::ours_on_thread), the thread started with
    /// a batching window of [`batch_window`] (`InformerThread::spawn_batching`).
    async fn ours_on_batching_thread<K>(url: &str, counter: &Arc<Counter>) -> Self
    where
        K: Object + Decode + Send + Sync + 'static,
    {
        let window = Some(batch_window());
        Self::ours_encoded::<K>(url, counter, Encoding::Auto, window, count_stamped).await
    }

    /// `ours-compact-pb-typed`'s handler: decodes the new object into a `k8s_pb` `Pod`, reads a
    /// field of its spec, and counts it with the stamp read from the decoded pod.
    fn decode_and_count(new: &CompactObject, counter: &Counter) {
        let pod: PbPod = new.decode_pb().expect("a Pod");
        let image = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.as_deref());
        assert!(image.is_some());
        let stamp = pod
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.get(SENT_ANNOTATION));
        counter.hit_stamped(stamp.map(String::as_str))
    }

    /// `ours-pod-view`'s handler: reads the first container's image through the pod's view, and
    /// counts it with the stamp from its metadata.
    fn view_and_count(new: &PbView<PbPod>, counter: &Counter) {
        let image = new
            .view()
            .spec()
            .and_then(|s| s.containers().next())
            .and_then(|c| c.image());
        assert!(image.is_some());
        counter.hit_stamped(new.annotation(SENT_ANNOTATION))
    }

    /// [`ours`](Self::ours) with the factory's wire encoding set, on an `InformerThread` with
    /// `thread`'s batching window (zero for none) or on the clients' runtime (`None`), `handle`
    /// called with each update's new object.
    async fn ours_encoded<K>(
        url: &str,
        counter: &Arc<Counter>,
        encoding: Encoding,
        thread: Option<Duration>,
        handle: fn(&K, &Counter),
    ) -> Self
    where
        K: Object + Decode + Send + Sync + 'static,
    {
        if std::env::var_os("PEER_WRAP").is_some() {
            assert_eq!(
                (encoding, thread),
                (Encoding::Auto, None),
                "PEER_WRAP runs the default encoding on the clients' runtime"
            );
            return Self::ours_wrapped::<K>(url, counter).await;
        }
        let mut factory = SharedInformerFactory::new(cluster_config(url)).encoding(encoding);
        // Each mode asked for explicitly: the informers' default is a watch-list.
        factory = factory.reflector_options(ReflectorOptions {
            watch_list: watch_list(),
            ..ReflectorOptions::default()
        });
        if drop_managed_fields().is_some() {
            factory = factory.drop_managed_fields();
        }
        if let Some(pacing) = pacing_from_env() {
            factory = factory.pacing(pacing);
        }
        if let Some(queue) = queue_from_env() {
            factory = factory.queue(queue);
        }
        let informer = factory.informer::<K>(kind().resource()).expect("informer");
        let handler_counter = Arc::clone(counter);
        let registration = (std::env::var_os("PEER_NO_HANDLER").is_none()).then(|| {
            informer
                .add_event_handler(
                    EventHandlerFns::new()
                        .on_update(move |_: &Arc<K>, new: &Arc<K>| handle(new, &handler_counter)),
                )
                .expect("handler")
        });
        let cancel = CancellationToken::new();
        let thread = thread.map(|window| {
            InformerThread::spawn_batching("informers", window).expect("an informer thread")
        });
        match &thread {
            Some(thread) => factory.start_on(thread.handle(), &cancel),
            None => factory.start(&cancel),
        }
        let report = factory.wait_for_cache_sync(Duration::from_secs(600)).await;
        assert!(report.all_synced(), "informer synced");
        assert_eq!(informer.indexer().len(), cached(), "informer synced");
        let backlog = match registration {
            Some(registration) => Backlog::of(registration),
            None => {
                // PEER_NO_HANDLER: no handler; the end is seen in the cache, polled every
                // millisecond: the last event's pod at the last event's resource version.
                let target = counter.target() as usize;
                let cached = cached();
                let i = (target - 1) % cached;
                let key = format!("team-{}/web-{i}-7c9f8d6b5-x2k4p", i % 100);
                let last_rv = (cached + target).to_string();
                let counter = Arc::clone(counter);
                let informer = informer.clone();
                tokio::spawn(async move {
                    loop {
                        let done = informer
                            .indexer()
                            .get_by_key(&key)
                            .is_some_and(|o| o.resource_version() == Some(last_rv.as_str()));
                        if done {
                            counter.count.store(counter.target(), Ordering::Relaxed);
                            counter.reached.notify_one();
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                });
                Backlog::none()
            }
        };
        let incomplete = Box::new(move || informer.stats().reflector.watch_lists_incomplete);
        ClientRun::Ours(Box::new(factory), cancel, backlog, thread, incomplete)
    }

    /// `PEER_WRAP=1`: the same informer as [`ours`](Self::ours), built by hand on a counting
    /// wrapper of its `HttpListerWatcher` (one `on_update` handler counting).
    async fn ours_wrapped<K>(url: &str, counter: &Arc<Counter>) -> Self
    where
        K: Object + Decode + Send + Sync + 'static,
    {
        assert!(
            std::env::var_os("PEER_NO_HANDLER").is_none(),
            "PEER_WRAP runs with a handler"
        );
        let config = cluster_config(url);
        let lw =
            shared_informer::reflector::HttpListerWatcher::<K>::new(&config, kind().resource())
                .expect("lister-watcher");
        let mut options = shared_informer::InformerOptions {
            name: kind().plural().into(),
            ..Default::default()
        };
        options.reflector.watch_list = watch_list();
        if let Some(pacing) = pacing_from_env() {
            options.pacing = pacing;
        }
        if let Some(queue) = queue_from_env() {
            options.queue = queue;
        }
        let informer = shared_informer::SharedIndexInformer::new(
            Counting {
                inner: lw,
                calls: AtomicU64::new(0),
            },
            options,
        );
        let handler_counter = Arc::clone(counter);
        let registration = informer
            .add_event_handler(
                EventHandlerFns::new().on_update(move |_: &Arc<K>, _| handler_counter.hit()),
            )
            .expect("handler");
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (informer, cancel) = (informer.clone(), cancel.clone());
            async move { informer.run(cancel).await }
        });
        let synced = tokio::time::timeout(Duration::from_secs(600), informer.wait_for_sync()).await;
        assert_eq!(synced, Ok(true), "informer synced");
        assert_eq!(informer.indexer().len(), cached(), "informer synced");
        ClientRun::OursWrapped(task, cancel, Backlog::of(registration))
    }

    /// Watch-list streams the server closed before their end, for our factory's informers (the
    /// others do not count them).
    fn watch_lists_incomplete(&self) -> Option<u64> {
        match self {
            ClientRun::Ours(_, _, _, _, incomplete) => Some(incomplete()),
            _ => None,
        }
    }

    /// The handler's backlog, where there is one.
    fn backlog(&self) -> Option<Backlog> {
        match self {
            ClientRun::Kube(_) | ClientRun::Alone(_) => None,
            ClientRun::Ours(_, _, backlog, _, _) | ClientRun::OursWrapped(_, _, backlog) => {
                Some(backlog.clone())
            }
        }
    }

    async fn stop(self) {
        match self {
            ClientRun::Kube(task) | ClientRun::Alone(task) => task.abort(),
            ClientRun::OursWrapped(task, cancel, _) => {
                cancel.cancel();
                let _ = task.await;
            }
            ClientRun::Ours(factory, cancel, _, thread, _) => {
                cancel.cancel();
                factory.shutdown().await;
                drop(thread);
            }
        }
    }
}

/// `PEER_PACING=off` (client-go's unbounded buffers) or `PEER_PACING=<queue>,<handler>` (high
/// waters) in place of the informer's default pacing; unset: the default.
fn pacing_from_env() -> Option<Option<shared_informer::Pacing>> {
    let value = std::env::var("PEER_PACING").ok()?;
    if value == "off" {
        return Some(None);
    }
    let (queue, handler) = value
        .split_once(',')
        .expect("PEER_PACING=off or <queue>,<handler>");
    Some(Some(shared_informer::Pacing {
        queue_high_water: queue.parse().expect("queue high water"),
        handler_high_water: handler.parse().expect("handler high water"),
        ..shared_informer::Pacing::default()
    }))
}

/// `PEER_QUEUE=delta-fifo` (the classic queue) or `PEER_QUEUE=in-order,<batch size>` in place of
/// the informers' default queue (in order, batches of 1000); unset: the default.
fn queue_from_env() -> Option<shared_informer::InformerQueue> {
    let value = std::env::var("PEER_QUEUE").ok()?;
    if value == "delta-fifo" {
        return Some(shared_informer::InformerQueue::DeltaFifo);
    }
    let batch = value
        .strip_prefix("in-order,")
        .and_then(|b| b.parse().ok())
        .expect("PEER_QUEUE=delta-fifo or in-order,<batch size>");
    Some(shared_informer::InformerQueue::InOrder(
        shared_informer::InOrder {
            batch_size: batch,
            ..Default::default()
        },
    ))
}

/// How often the handler's backlog is sampled during the watch: `PEER_BACKLOG_MS`, else 10 ms.
/// Each sample wakes the client's runtime (kube-rs's run has no backlog and no sampler): at 200
/// paced events/s the default adds 0.5 wake-ups per event to ours, so paced comparisons may set it
/// higher.
fn backlog_period() -> Duration {
    let ms = std::env::var("PEER_BACKLOG_MS")
        .ok()
        .map(|ms| ms.parse::<u64>().expect("PEER_BACKLOG_MS: milliseconds"))
        .unwrap_or(10);
    Duration::from_millis(ms.max(1))
}

/// Writes `command` to the FIFO named by `PERF_CTL_FIFO`, if set, so that a profile taken with
/// `perf record --control fifo:<that path> -D -1` covers only the watch.
fn perf_control(command: &str) {
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

/// Resets the process's peak RSS (`VmHWM`) to its current RSS (Linux's `clear_refs` command 5), so
/// that the next reading is the peak from now on. Without it (not Linux, or not allowed) the next
/// reading is the whole run's peak.
fn reset_peak_rss() {
    if let Err(e) = std::fs::write("/proc/self/clear_refs", "5") {
        eprintln!("peak RSS not reset ({e}): the watch peak includes the list's");
    }
}

/// The fast fake API server, run as `peer-bench serve [events]` in a process of its own: the list
/// in one pre-built body, the first watch's events as pre-built chunks held back until a line comes
/// on its standard input; later watches stay open and silent. It ends when its input closes.
mod server {
    use std::collections::HashMap;
    use std::io::BufRead as _;
    use std::sync::Arc;

    use bytes::Bytes;
    use sim_apiserver::fixtures::realistic_pod_json;
    use sim_apiserver::prebuilt::protobuf_watch_frame;
    use sim_apiserver::{Prebuilt, PrebuiltList};

    /// Paced events carry a placeholder for their send time in this annotation (see `serve`).
    fn stamp_placeholder() -> Option<String> {
        super::rate().map(|_| {
            format!(
                r#""annotations":{{"{}":"{}","#,
                super::SENT_ANNOTATION,
                "0".repeat(sim_apiserver::prebuilt::STAMP_DIGITS)
            )
        })
    }

    /// The JSON line of a `MODIFIED` event of `pod` (the JSON of pod `i`) at resource version `rv`.
    fn event_line(pod: &str, i: usize, rv: &str, stamp: Option<&str>) -> String {
        let mut obj = pod.replacen(
            &format!(r#""resourceVersion":"{}""#, 1000 + i),
            &format!(r#""resourceVersion":"{rv}""#),
            1,
        );
        if let Some(stamp) = stamp {
            obj = obj.replacen(r#""annotations":{"#, stamp, 1);
        }
        format!("{{\"type\":\"MODIFIED\",\"object\":{obj}}}\n")
    }

    /// The list (served in pages of the client's `limit`, as kube-apiserver serves it) and the event
    /// lines: the bytes the `informer` bench's fast server serves.
    pub fn bytes(cached: usize, events: usize) -> (PrebuiltList, Vec<Bytes>) {
        bytes_of(cached, events, object_json)
    }

    /// The JSON of object `i` of the kind and size asked for (`PEER_KIND`, `PEER_OBJECT_BYTES`).
    pub fn object_json(i: usize) -> String {
        match (super::kind(), super::object_bytes()) {
            (super::Kind::Pods, None) => realistic_pod_json(i),
            (super::Kind::Pods, Some(bytes)) => pod_of_about(i, bytes),
            (super::Kind::ConfigMaps, bytes) => {
                config_map_of_about(i, bytes.unwrap_or(super::CONFIG_MAP_BYTES))
            }
        }
    }

    /// The realistic pod `i` grown to about `bytes` (never less than it is) with sidecar
    /// containers: copies of its container, each with its status, named `sidecar-<n>`.
    pub fn pod_of_about(i: usize, bytes: usize) -> String {
        let mut pod = realistic_pod_json(i);
        let span = |pod: &str, open: &str, close: &str| -> String {
            let start = pod.find(open).expect("the fixture's array") + open.len() - 1;
            let end = pod.find(close).expect("the array's end") + 1;
            pod[start..end].to_string()
        };
        let container = span(&pod, r#""containers":[{"#, r#"}],"restartPolicy""#);
        let status = span(&pod, r#""containerStatuses":[{"#, r#"}],"qosClass""#);
        let growth = container.len() + status.len() + 2;
        let mut n = 0;
        // Stop at the size closest to the target.
        while pod.len() + growth / 2 < bytes {
            n += 1;
            let name = format!(r#""name":"sidecar-{n}""#);
            for (item, close) in [
                (&container, r#"],"restartPolicy""#),
                (&status, r#"],"qosClass""#),
            ] {
                let copy = item.replacen(r#""name":"web""#, &name, 1);
                let at = pod.find(close).expect("the array's end");
                pod.insert_str(at, &format!(",{copy}"));
            }
        }
        pod
    }

    /// ConfigMap `i` of about `bytes` of JSON (at least its metadata's): a few labels, an
    /// annotation, kubectl's managed fields, and a properties file in its data.
    pub fn config_map_of_about(i: usize, bytes: usize) -> String {
        let head = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"settings-{i}","namespace":"team-{ns}","uid":"5d2c{i:08}-7e1a-4b3c-9d8e-1f2a3b4c5d6e","resourceVersion":"{rv}","creationTimestamp":"2026-11-01T10:00:00Z","labels":{{"app":"web","tier":"frontend"}},"annotations":{{"owner":"team-{ns}"}},"managedFields":[{{"manager":"kubectl-client-side-apply","operation":"Update","apiVersion":"v1","time":"2026-11-01T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:data":{{".":{{}},"f:LOG_LEVEL":{{}},"f:app.properties":{{}}}},"f:metadata":{{"f:labels":{{".":{{}},"f:app":{{}},"f:tier":{{}}}}}}}}}}]}},"data":{{"LOG_LEVEL":"info","app.properties":""#,
            ns = i % 100,
            rv = 1000 + i,
        );
        let tail = r#""}}"#;
        let mut properties = String::new();
        let mut n = 0;
        while head.len() + properties.len() + tail.len() < bytes {
            properties.push_str(&format!(
                r"service.{n}.url=http://svc-{n}.team-{}:8080\n",
                i % 100
            ));
            n += 1;
        }
        format!("{head}{properties}{tail}")
    }

    /// [`bytes`] of the pods `pod` writes.
    fn bytes_of(
        cached: usize,
        events: usize,
        pod: fn(usize) -> String,
    ) -> (PrebuiltList, Vec<Bytes>) {
        let pod_lines: Vec<String> = (0..cached).map(pod).collect();
        // MODIFIED events: the same pods with later resource versions.
        let stamp = stamp_placeholder();
        let lines = (0..events)
            .map(|e| {
                let i = e % cached;
                let rv = (cached + 1 + e).to_string();
                Bytes::from(event_line(&pod_lines[i], i, &rv, stamp.as_deref()))
            })
            .collect();
        let items = pod_lines.into_iter().map(Bytes::from).collect();
        let list = PrebuiltList::paged(super::kind().list_kind(), &cached.to_string(), items);
        (list, lines)
    }

    /// The same list and events in protobuf (`list` is [`bytes`]'s), transcoded with the
    /// simulator's codec. Events differ from their pod's only in the resource version, so each
    /// pod is transcoded once per length of resource version, with a placeholder of that length
    /// that each event's digits then overwrite (the same bytes as transcoding every event, in a
    /// tenth of the time).
    pub fn protobuf(
        cached: usize,
        events: usize,
        list: &PrebuiltList,
    ) -> (PrebuiltList, Vec<Bytes>) {
        protobuf_of(cached, events, list, object_json)
    }

    /// [`protobuf`] of the pods `pod` writes.
    fn protobuf_of(
        cached: usize,
        events: usize,
        list: &PrebuiltList,
        pod: fn(usize) -> String,
    ) -> (PrebuiltList, Vec<Bytes>) {
        let list = list.to_protobuf().expect("the pods transcode");
        let stamp = stamp_placeholder();
        let mut templates: HashMap<(usize, usize), (Bytes, usize)> = HashMap::new();
        let frames = (0..events)
            .map(|e| {
                let i = e % cached;
                let rv = (cached + 1 + e).to_string();
                let (template, at) = templates.entry((i, rv.len())).or_insert_with(|| {
                    let placeholder = "#".repeat(rv.len());
                    let line = event_line(&pod(i), i, &placeholder, stamp.as_deref());
                    let frame =
                        protobuf_watch_frame(line.as_bytes()).expect("the event transcodes");
                    let at = frame
                        .windows(rv.len())
                        .position(|w| w == placeholder.as_bytes())
                        .expect("the placeholder in the frame");
                    (frame, at)
                });
                let mut frame = template.to_vec();
                frame[*at..*at + rv.len()].copy_from_slice(rv.as_bytes());
                Bytes::from(frame)
            })
            .collect();
        (list, frames)
    }

    /// The marker after which a paced event's send time goes: the annotation's key, then its
    /// value's opening, in the encoding the server was started for.
    pub fn stamp_marker(protobuf: bool) -> Vec<u8> {
        let key = super::SENT_ANNOTATION.as_bytes();
        if protobuf {
            // A map entry: key (field 1), then value (field 2, length-delimited, 16 bytes).
            let mut marker = key.to_vec();
            marker.extend_from_slice(&[0x12, sim_apiserver::prebuilt::STAMP_DIGITS as u8]);
            marker
        } else {
            format!(r#""{}":""#, super::SENT_ANNOTATION).into_bytes()
        }
    }

    /// Object `i` ([`object_json`]) without its `metadata.managedFields` (the bytes around them
    /// as they are), as a server honouring `drop=metadata.managedFields` writes it.
    pub fn pod_without_managed_fields(i: usize) -> String {
        let pod = object_json(i);
        let start = pod
            .find(r#","managedFields":["#)
            .expect("the pod has managedFields");
        let open = start + r#","managedFields":"#.len();
        let mut depth = 0;
        let end = pod[open..]
            .char_indices()
            .find_map(|(at, c)| {
                match c {
                    '[' | '{' => depth += 1,
                    ']' | '}' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(open + at + 1)
            })
            .expect("the managedFields array ends");
        format!("{}{}", &pod[..start], &pod[end..])
    }

    pub fn serve(cached: usize, events: usize, protobuf: bool) {
        let (list, lines) = bytes(cached, events);
        let mut prebuilt = Prebuilt::new(list.clone(), Arc::new(lines)).framing(super::framing());
        if protobuf {
            let (list, frames) = self::protobuf(cached, events, &list);
            prebuilt = prebuilt.with_protobuf(list, Arc::new(frames));
        }
        if super::drop_managed_fields() == Some(super::Dropper::Server) {
            // Also the pods without managedFields, for clients that ask (KEP-5958).
            let (list, lines) = bytes_of(cached, events, pod_without_managed_fields);
            let pb = protobuf.then(|| {
                let (list, frames) = protobuf_of(cached, events, &list, pod_without_managed_fields);
                (list, Arc::new(frames))
            });
            prebuilt = prebuilt.with_managed_fields_dropped((list, Arc::new(lines)), pb);
        }
        let (release, released) = tokio::sync::watch::channel(false);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("server runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        println!("listening http://{}", listener.local_addr().expect("addr"));
        // The first line on stdin releases the events; its end stops the process.
        std::thread::spawn(move || {
            let mut lines = std::io::stdin().lock().lines();
            if let Some(Ok(_)) = lines.next() {
                release.send_replace(true);
            }
            for _ in lines {}
            std::process::exit(0);
        });
        // Served as the informer bench's fast server serves (`sim_apiserver::serve_prebuilt`), or
        // paced, each event stamped as it leaves (in the encoding this server was started for).
        if let Some(rate) = super::rate() {
            let pace = sim_apiserver::Pace::per_second(rate).stamped_after(stamp_marker(protobuf));
            prebuilt = prebuilt.paced(pace);
        }
        runtime.block_on(sim_apiserver::serve_prebuilt_with(
            listener, prebuilt, released,
        ))
    }

    #[cfg(test)]
    mod tests {
        use bytes::Bytes;
        use sim_apiserver::protobuf::{decode_object, FrameDecoder, RawWatchEvent};

        #[test]
        fn a_pod_without_managed_fields_is_the_pod_less_that_member() {
            let mut pod: serde_json::Value =
                serde_json::from_str(&super::realistic_pod_json(7)).unwrap();
            pod["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("managedFields")
                .expect("the fixture has managedFields");
            let cut: serde_json::Value =
                serde_json::from_str(&super::pod_without_managed_fields(7)).unwrap();
            assert_eq!(cut, pod);
        }

        #[test]
        fn protobuf_events_are_the_json_events_transcoded() {
            // Resource versions of two lengths (cached 3: 4..=12), each pod's template reused.
            let (list, lines) = super::bytes(3, 9);
            let (pb_list, frames) = super::protobuf(3, 9, &list);
            assert_eq!(frames.len(), lines.len());
            let event_of = |frame: &Bytes| {
                let mut decoder = FrameDecoder::new(1 << 20);
                decoder.push(frame);
                let event = RawWatchEvent::decode(&decoder.next_frame().unwrap().unwrap()).unwrap();
                assert_eq!(event.event_type, "MODIFIED");
                decode_object(&event.object).unwrap()
            };
            for (line, frame) in lines.iter().zip(&frames) {
                // The transcoder writes map entries in no fixed order: compare what the bytes
                // say, not the bytes.
                let direct = sim_apiserver::prebuilt::protobuf_watch_frame(line).unwrap();
                assert_eq!(frame.len(), direct.len());
                let pod = event_of(frame);
                assert_eq!(
                    pod,
                    event_of(&direct),
                    "templated bytes decode as the transcoder's"
                );
                let json: serde_json::Value = serde_json::from_slice(line).unwrap();
                assert_eq!(
                    pod["metadata"]["resourceVersion"],
                    json["object"]["metadata"]["resourceVersion"]
                );
            }
            let listed = decode_object(&Bytes::clone(pb_list.whole())).unwrap();
            assert_eq!(listed["items"].as_array().unwrap().len(), 3);
        }

        #[test]
        fn the_protobuf_stamp_marker_sits_right_before_the_placeholder_digits() {
            let pod = sim_apiserver::fixtures::realistic_pod_json(0);
            let stamp = format!(
                r#""annotations":{{"{}":"{}","#,
                super::super::SENT_ANNOTATION,
                "0".repeat(sim_apiserver::prebuilt::STAMP_DIGITS)
            );
            let line = super::event_line(&pod, 0, "77", Some(&stamp));
            let frame = sim_apiserver::prebuilt::protobuf_watch_frame(line.as_bytes()).unwrap();
            let marker = super::stamp_marker(true);
            let sent = std::time::UNIX_EPOCH + std::time::Duration::from_micros(42);
            let stamped = sim_apiserver::prebuilt::stamp(&frame, &marker, sent);
            let mut decoder = FrameDecoder::new(1 << 20);
            decoder.push(&stamped);
            let event = RawWatchEvent::decode(&decoder.next_frame().unwrap().unwrap()).unwrap();
            let pod = decode_object(&event.object).unwrap();
            assert_eq!(
                pod["metadata"]["annotations"][super::super::SENT_ANNOTATION],
                "0000000000000042"
            );
        }

        #[test]
        fn every_event_is_one_modified_line_with_a_later_resource_version() {
            let (list, lines) = super::bytes(3, 5);
            let list: serde_json::Value = serde_json::from_slice(list.whole()).unwrap();
            assert_eq!(list["items"].as_array().unwrap().len(), 3);
            for (e, line) in lines.iter().enumerate() {
                assert!(line.ends_with(b"\n"));
                let ev: serde_json::Value = serde_json::from_slice(line).unwrap();
                assert_eq!(ev["type"], "MODIFIED");
                assert_eq!(
                    ev["object"]["metadata"]["resourceVersion"],
                    (3 + 1 + e).to_string()
                );
            }
        }
    }
}

/// The soak variant (`peer-bench soak [events]`): a typed `Pod` informer and a `DynamicObject`
/// informer in one process, each against a server process of its own (10k pods, then `events`
/// `MODIFIED` events each, released together once both have synced), the process's RSS sampled
/// every 500 ms until both handlers have seen all their events. It reports the series, the RSS at
/// sync, the watch's peak and the final RSS: with both informers keeping up, memory stays flat.
pub mod soak {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use k8s_openapi::api::core::v1::Pod;
    use shared_informer::reflector::store_index::DynamicObject;

    use sim_apiserver::procstat::status_mb;

    use super::{reset_peak_rss, ClientRun, Counter, ServerProcess};

    /// One sample: milliseconds since the release, RSS, and each handler's count.
    #[derive(Debug, Clone, Copy)]
    pub struct Sample {
        pub t_ms: u128,
        pub rss_mb: f64,
        pub pods: u64,
        pub dynamic: u64,
    }

    /// The soak's figures.
    #[derive(Debug, Clone)]
    pub struct Soak {
        pub rss_sync_mb: f64,
        pub watch_peak_rss_mb: f64,
        pub rss_end_mb: f64,
        pub pod_events_per_s: f64,
        pub dynamic_events_per_s: f64,
        pub samples: Vec<Sample>,
    }

    impl Soak {
        pub fn to_json(&self, events: usize, allocator: &str) -> serde_json::Value {
            let ratio = self.watch_peak_rss_mb / self.rss_sync_mb;
            serde_json::json!({
                "name": format!("peer: soak, Pod + DynamicObject informers, {events} events each, {allocator}"),
                "value": ratio,
                "unit": "watch peak / RSS at sync",
                "allocator": allocator,
                "events": events,
                "rss_sync_mb": self.rss_sync_mb,
                "watch_peak_rss_mb": self.watch_peak_rss_mb,
                "rss_end_mb": self.rss_end_mb,
                "pod_events_per_s": self.pod_events_per_s,
                "dynamic_events_per_s": self.dynamic_events_per_s,
                "samples": self.samples.iter().map(|s| serde_json::json!([s.t_ms, s.rss_mb, s.pods, s.dynamic])).collect::<Vec<_>>(),
            })
        }
    }

    /// Runs the soak; progress lines go to stderr.
    pub fn run(events: usize) -> Soak {
        let mut pod_server = ServerProcess::start(events, false);
        let mut dyn_server = ServerProcess::start(events, false);
        let rt = super::client_runtime();
        let pods = Counter::new(events);
        let dynamic = Counter::new(events);
        rt.block_on(async {
            let pod_run = ClientRun::ours::<Pod>(&pod_server.url, &pods).await;
            let dyn_run = ClientRun::ours::<DynamicObject>(&dyn_server.url, &dynamic).await;
            let rss_sync_mb = status_mb("VmRSS:");
            reset_peak_rss();
            eprintln!("soak: both informers synced, RSS {rss_sync_mb:.0} MB; releasing {events} events each");
            let start = Instant::now();
            pod_server.release();
            dyn_server.release();
            let ends = {
                let (pods, dynamic) = (Arc::clone(&pods), Arc::clone(&dynamic));
                tokio::spawn(async move {
                    let pod_end = async {
                        pods.wait().await;
                        start.elapsed()
                    };
                    let dyn_end = async {
                        dynamic.wait().await;
                        start.elapsed()
                    };
                    tokio::join!(pod_end, dyn_end)
                })
            };
            let mut samples = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            loop {
                tick.tick().await;
                let sample = Sample {
                    t_ms: start.elapsed().as_millis(),
                    rss_mb: status_mb("VmRSS:"),
                    pods: pods.count.load(Ordering::Relaxed),
                    dynamic: dynamic.count.load(Ordering::Relaxed),
                };
                eprintln!(
                    "  t={:>6} ms  rss {:>5.0} MB  pods {:>7}  dynamic {:>7}",
                    sample.t_ms, sample.rss_mb, sample.pods, sample.dynamic
                );
                samples.push(sample);
                if ends.is_finished() {
                    break;
                }
            }
            let (pod_took, dyn_took) = ends.await.expect("counters");
            let soak = Soak {
                rss_sync_mb,
                watch_peak_rss_mb: status_mb("VmHWM:"),
                rss_end_mb: status_mb("VmRSS:"),
                pod_events_per_s: events as f64 / pod_took.as_secs_f64(),
                dynamic_events_per_s: events as f64 / dyn_took.as_secs_f64(),
                samples,
            };
            eprintln!(
                "soak: Pod {:.0} events/s, DynamicObject {:.0} events/s; RSS at sync {:.0} MB, watch peak {:.0} MB ({:.2}x), at the end {:.0} MB",
                soak.pod_events_per_s,
                soak.dynamic_events_per_s,
                soak.rss_sync_mb,
                soak.watch_peak_rss_mb,
                soak.watch_peak_rss_mb / soak.rss_sync_mb,
                soak.rss_end_mb
            );
            pod_run.stop().await;
            dyn_run.stop().await;
            soak
        })
    }
}

/// `PEER_MALLOC_STATS=1`: glibc's own account of its arenas (`malloc_stats(3)`: for each arena, the
/// bytes it took from the system and the bytes in use), on stderr under `when`. It shows where the
/// watch's RSS above the sync's goes: memory free in one thread's arena while another's grows.
fn arena_stats(when: &str) {
    if std::env::var_os("PEER_MALLOC_STATS").is_none() {
        return;
    }
    eprintln!("== glibc arenas, {when}");
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    {
        extern "C" {
            fn malloc_stats();
        }
        // SAFETY: glibc's malloc_stats takes no arguments, only reads the allocator's state under
        // its locks and writes to stderr.
        unsafe { malloc_stats() }
    }
}
