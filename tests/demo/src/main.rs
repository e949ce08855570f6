//! `cargo xtask demo`: a `SharedInformerFactory` with pod and configmap informers, and a workqueue
//! controller that keeps one summary configmap per namespace in step with the pods there, against
//! the embedded simulated API server under churn; live progress every second, then a consistency
//! verdict (caches = server state, summaries = pod counts). The controller runs under leader
//! election on a Lease and writes its summaries with a server-side apply through the informers'
//! own client, checking its lease guard before each write. With `--kubeconfig PATH`,
//! `--context NAME` or `--real-cluster` the same informers run read-only against a real cluster
//! instead; never because `KUBECONFIG` happens to be set.
//!
//! With `--replicas N`, a sharded controller instead ([`sharded`]): N replica processes split
//! widgets between them while one joins and one leaves, then a verdict from the write log;
//! with `--mode range` the replicas split the server's shard hash instead ([`sharded`]): no
//! sharder, no labels, and the object writes each move cost.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller::leader_election::ApiLeaseLock;
use controller::{Action, Controller, LeaderElectionConfig, LeaderElector};
use serde_json::json;
use sim_apiserver::{ChurnConfig, SimServer};
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{
    CompactObject, DynamicObject, Object, ObjectOrTombstone,
};
use workqueue::shared_informer::reflector::{
    Api, ClusterConfig, Credentials, Decode, Patch, PatchOptions, Resource,
};
use workqueue::shared_informer::{
    EventHandlerFns, HandlerRegistration, SharedIndexInformer, SharedInformerFactory,
};
use workqueue::{default_controller_rate_limiter, RateLimitingQueue};

mod sharded;
// The sharded replica and its fleet are the integration suite's, shared by path (the demo
// starts the same processes the `sharding` scenario checks); not every helper is used here.
#[allow(dead_code)]
#[path = "../../integration/src/shard_fleet.rs"]
mod shard_fleet;
#[path = "../../integration/src/shard_range_replica.rs"]
mod shard_range_replica;
#[allow(dead_code)]
#[path = "../../integration/src/shard_replica.rs"]
mod shard_replica;

type Pods = SharedIndexInformer<CompactObject>;
type ConfigMaps = SharedIndexInformer<DynamicObject>;

const NAMESPACES: usize = 4;
const SUMMARY: &str = "pod-summary";
/// Where the controller's Lease lives.
const LEASE_NAMESPACE: &str = "informer-demo";

struct Args {
    seconds: u64,
    rate: f64,
    pods: usize,
    kubeconfig: Option<String>,
    context: Option<String>,
    real_cluster: bool,
    replicas: Option<usize>,
    widgets: usize,
    /// `--mode range`: the sharded replicas in range mode rather than label mode.
    range_mode: bool,
}

fn usage() -> &'static str {
    "usage: cargo xtask demo [--seconds N] [--rate EVENTS_PER_SEC] [--pods N]\n\
     \x20                       [--real-cluster] [--kubeconfig PATH] [--context NAME]\n\
     \x20                       [--replicas N [--widgets N] [--mode label|range]]\n\
     By default the demo runs against the embedded simulated API server. A real cluster is used\n\
     only when asked: --kubeconfig PATH reads that file; --context NAME or --real-cluster read the\n\
     files of KUBECONFIG (several, separated by ':', merged as kubectl merges them) or\n\
     ~/.kube/config, with NAME or the current context. --replicas N runs a sharded controller\n\
     in N processes instead (one more joins, one leaves; --seconds is split in three phases);\n\
     --mode range has them split the server's shard hash (RangeShard) instead of labelling\n\
     widgets (label, the default)."
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        seconds: 15,
        rate: 600.0,
        pods: 2_000,
        kubeconfig: None,
        context: None,
        real_cluster: false,
        replicas: None,
        widgets: 3_000,
        range_mode: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or(format!("{name} needs a value\n{}", usage()))
        };
        match flag.as_str() {
            "--seconds" => {
                args.seconds = value("--seconds")?
                    .parse()
                    .map_err(|e| format!("--seconds: {e}"))?
            }
            "--rate" => {
                args.rate = value("--rate")?
                    .parse()
                    .map_err(|e| format!("--rate: {e}"))?
            }
            "--pods" => {
                args.pods = value("--pods")?
                    .parse()
                    .map_err(|e| format!("--pods: {e}"))?
            }
            "--kubeconfig" => args.kubeconfig = Some(value("--kubeconfig")?),
            "--context" => args.context = Some(value("--context")?),
            "--real-cluster" => args.real_cluster = true,
            "--replicas" => {
                args.replicas = Some(
                    value("--replicas")?
                        .parse()
                        .map_err(|e| format!("--replicas: {e}"))?,
                )
            }
            "--widgets" => {
                args.widgets = value("--widgets")?
                    .parse()
                    .map_err(|e| format!("--widgets: {e}"))?
            }
            "--mode" => {
                args.range_mode = match value("--mode")?.as_str() {
                    "label" => false,
                    "range" => true,
                    other => return Err(format!("--mode {other:?}: label or range")),
                }
            }
            "-h" | "--help" => return Err(usage().to_string()),
            other => return Err(format!("unknown argument {other:?}\n{}", usage())),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    // `--replicas` re-executes this binary as its replica processes.
    let raw: Vec<String> = std::env::args().collect();
    let subcommand = raw.get(1).map(String::as_str);
    if subcommand == Some("shard-replica") {
        tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "off".into()),
            )
            .with_writer(std::io::stderr)
            .init();
        return shard_replica::main(&raw[2..]);
    }
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(demo_main()),
        Err(e) => {
            eprintln!("demo: cannot build the tokio runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn demo_main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = match parse_args() {
        Ok(a) => a,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let real = args.real_cluster || args.kubeconfig.is_some() || args.context.is_some();
    if !real && std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty()) {
        println!("KUBECONFIG is set but not used: pass --real-cluster to run against that cluster");
    }
    if args.range_mode && args.replicas.is_none() {
        eprintln!("--mode goes with --replicas N\n{}", usage());
        return ExitCode::from(2);
    }
    let result = if let Some(replicas) = args.replicas {
        sharded::run(sharded::ShardedArgs {
            replicas,
            widgets: args.widgets,
            phase_seconds: (args.seconds / 3).max(3),
            mode: if args.range_mode {
                shard_replica::Mode::Range
            } else {
                shard_replica::Mode::Label
            },
        })
        .await
    } else if real {
        real_cluster(
            args.kubeconfig.as_deref(),
            args.context.as_deref(),
            args.seconds,
        )
        .await
    } else {
        simulated(&args).await
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("demo: {message}");
            ExitCode::FAILURE
        }
    }
}

fn pods() -> Resource {
    Resource::namespaced("", "v1", "pods")
}

fn configmaps() -> Resource {
    Resource::namespaced("", "v1", "configmaps")
}

async fn simulated(args: &Args) -> Result<(), String> {
    let sim = SimServer::builder()
        .tls(true)
        .token("demo-token")
        .start()
        .await
        .map_err(|e| format!("starting the simulated API server: {e}"))?;
    println!("simulated API server at {} (TLS, bearer token)", sim.url());
    for n in 0..NAMESPACES {
        sim.create(
            "namespaces",
            None,
            json!({"metadata": {"name": format!("demo-{n}")}}),
        )
        .map_err(|e| format!("creating the namespaces: {e}"))?;
    }
    for i in 0..args.pods {
        let ns = format!("demo-{}", i % NAMESPACES);
        let pod = json!({"metadata": {"name": format!("seed-{i}"), "labels": {"app": "seed"}}, "spec": {"nodeName": format!("node-{}", i % 7)}});
        sim.create("pods", Some(&ns), pod)
            .map_err(|e| format!("seeding pods: {e}"))?;
    }
    println!("seeded {} pods in {NAMESPACES} namespaces", args.pods);

    let mut config = ClusterConfig::new(&sim.url()).map_err(|e| e.to_string())?;
    config.certificate_authority = sim.ca_pem().map(|pem| pem.as_bytes().to_vec());
    config.credentials = Credentials::Token("demo-token".into());

    let cancel = CancellationToken::new();
    let queue: RateLimitingQueue<String> =
        RateLimitingQueue::new(default_controller_rate_limiter());
    let factory = SharedInformerFactory::new(config);
    let pod_informer: Pods = factory.informer(pods()).map_err(|e| e.to_string())?;
    let cm_informer: ConfigMaps = factory.informer(configmaps()).map_err(|e| e.to_string())?;
    let pod_events = watch(&pod_informer, Some(queue.clone()))?;
    let cm_events = watch(&cm_informer, None)?;
    let synced_in = start_and_sync(&factory, &cancel, Duration::from_secs(30)).await?;
    println!(
        "caches synced in {synced_in:.2?}: {} pods, {} configmaps",
        pod_informer.indexer().len(),
        cm_informer.indexer().len()
    );

    // The controller: one summary configmap per namespace, data.pods = the cached pod count.
    let reconciles = Arc::new(AtomicU64::new(0));
    let client = factory.client().map_err(|e| e.to_string())?;
    // Under leader election, as a controller with several replicas runs: the workers run only
    // while this process holds the Lease, and every write first checks the lease guard.
    sim.create(
        "namespaces",
        None,
        json!({"metadata": {"name": LEASE_NAMESPACE}}),
    )
    .map_err(|e| format!("creating the lease namespace: {e}"))?;
    let identity = format!("informer-demo-{}", std::process::id());
    let mut election = LeaderElectionConfig::new("informer-demo", identity.clone());
    election.release_on_cancel = true;
    let lock = ApiLeaseLock::new(
        client.clone(),
        LEASE_NAMESPACE,
        "informer-demo",
        identity.clone(),
    );
    let elector = LeaderElector::new(election, lock).map_err(|e| e.to_string())?;
    let controller = {
        let indexer = pod_informer.indexer().clone();
        let client = client.clone();
        let reconciles = Arc::clone(&reconciles);
        let cancel = cancel.clone();
        let queue = queue.clone();
        tokio::spawn(async move {
            elector
                .run_leading(cancel, move |leader, guard| async move {
                    println!(
                        "leader election: {identity} holds Lease {LEASE_NAMESPACE}/informer-demo"
                    );
                    Controller::new(queue)
                        .workers(2)
                        .run(leader, move |ns: String| {
                            let count = indexer.by_index("namespace", &ns).map(|p| p.len());
                            // Every write first checks the lease guard: none leaves this
                            // process once the lease may have passed to another replica.
                            let summaries: Api<DynamicObject> = guard
                                .protect(Api::namespaced_with(client.clone(), configmaps(), &ns));
                            let reconciles = Arc::clone(&reconciles);
                            async move {
                                reconciles.fetch_add(1, Ordering::Relaxed);
                                let count = count.map_err(|e| e.to_string())?;
                                write_summary(&summaries, count).await?;
                                Ok::<_, String>(Action::Done)
                            }
                        })
                        .await
                })
                .await
        })
    };

    let mut churns = Vec::new();
    for n in 0..NAMESPACES {
        churns.push(sim.churn(ChurnConfig {
            resource: "pods".into(),
            namespace: format!("demo-{n}"),
            keys: 250,
            rate_per_sec: args.rate / NAMESPACES as f64,
            max_ops: None,
            duration: Some(Duration::from_secs(args.seconds)),
            pad_bytes: 3_000,
        }));
    }
    println!(
        "churn: {:.0} pod events/s for {} s",
        args.rate, args.seconds
    );
    let mut last_events = 0;
    let churn_started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    while churn_started.elapsed() < Duration::from_secs(args.seconds) {
        tick.tick().await;
        let events = pod_events.processed() + cm_events.processed();
        println!(
            "t={:>3}s  events/s={:>6}  pods={:>5}  configmaps={:>3}  queue={:>3}  reconciles={:>6}",
            churn_started.elapsed().as_secs(),
            events - last_events,
            pod_informer.indexer().len(),
            cm_informer.indexer().len(),
            queue.len(),
            reconciles.load(Ordering::Relaxed),
        );
        last_events = events;
    }
    let mut ops = 0;
    for churn in churns {
        ops += churn.finished().await;
    }

    // Quiescence: wait until the caches equal the server and every summary is right.
    let verdict_started = Instant::now();
    let verdict = loop {
        let v = check(&sim, &pod_informer, &cm_informer);
        if v.is_ok() || verdict_started.elapsed() > Duration::from_secs(30) {
            break v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let counters = sim.counters();
    println!(
        "summary: {ops} churn operations, {} notifications handled, {} reconciles; server saw {} lists, {} watches, {} MB sent",
        pod_events.processed() + cm_events.processed(),
        reconciles.load(Ordering::Relaxed),
        counters.lists,
        counters.watches,
        counters.bytes / 1_000_000,
    );
    cancel.cancel();
    queue.shutdown();
    match controller.await {
        Ok(end) => println!("leader election: ended ({end:?}), lease released"),
        Err(e) => return Err(format!("the controller task failed: {e}")),
    }
    factory.shutdown().await;
    sim.shutdown();
    match verdict {
        Ok(summary) => {
            println!("verdict: CONSISTENT ({summary})");
            Ok(())
        }
        Err(problem) => Err(format!("verdict: INCONSISTENT: {problem}")),
    }
}

/// Starts the factory's informers and waits until their caches have synced, within `within`;
/// answers how long that took. The clock starts before the informers do, so the time is the
/// initial lists', not what was left of them once other work was done (the demo once started
/// it after setting up its controller, and printed microseconds for 2,000 pods).
async fn start_and_sync(
    factory: &SharedInformerFactory,
    cancel: &CancellationToken,
    within: Duration,
) -> Result<Duration, String> {
    let started = Instant::now();
    factory.start(cancel);
    let report = factory.wait_for_cache_sync(within).await;
    if !report.all_synced() {
        return Err(format!("caches did not sync within {within:?}: {report}"));
    }
    Ok(started.elapsed())
}

/// Registers a handler that counts what it sees and, with a queue, enqueues the namespace of every
/// change for the summary controller.
fn watch<K: Object + Decode>(
    informer: &SharedIndexInformer<K>,
    queue: Option<RateLimitingQueue<String>>,
) -> Result<HandlerRegistration<K>, String> {
    let enqueue = Arc::new(move |ns: Option<&str>| {
        if let (Some(q), Some(ns)) = (&queue, ns) {
            q.add(ns.to_string());
        }
    });
    let (on_add, on_update, on_delete) = (Arc::clone(&enqueue), Arc::clone(&enqueue), enqueue);
    informer
        .add_event_handler(
            EventHandlerFns::new()
                .on_add(move |o: &Arc<K>, _| on_add(o.namespace()))
                .on_update(move |_, new: &Arc<K>| on_update(new.namespace()))
                .on_delete(move |o: &ObjectOrTombstone<K>| {
                    let key = o.key().ok();
                    on_delete(key.as_ref().and_then(|k| k.split().ok()).map(|(ns, _)| ns))
                }),
        )
        .map_err(|e| e.to_string())
}

/// The field manager the demo's controller applies its summaries as.
const FIELD_MANAGER: &str = "informer-demo";

/// Writes the namespace's summary through the informers' own client, with a server-side apply:
/// one request creates or updates it, and the summary's `data.pods` is owned by this controller.
async fn write_summary(summaries: &Api<DynamicObject>, count: usize) -> Result<(), String> {
    let summary = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": SUMMARY},
        "data": {"pods": count.to_string()},
    });
    summaries
        .patch(
            SUMMARY,
            &PatchOptions::apply(FIELD_MANAGER).force(),
            &Patch::Apply(summary),
        )
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Compares the caches with the server: same keys, same resource versions, and every namespace's
/// summary equal to its pod count.
fn check(sim: &SimServer, pods: &Pods, cms: &ConfigMaps) -> Result<String, String> {
    let key = |o: &serde_json::Value| {
        let m = &o["metadata"];
        (
            format!(
                "{}/{}",
                m["namespace"].as_str().unwrap_or(""),
                m["name"].as_str().unwrap_or("")
            ),
            m["resourceVersion"].as_str().unwrap_or("").to_string(),
        )
    };
    let server_pods: BTreeMap<String, String> = sim
        .list("pods", None)
        .map_err(|e| e.to_string())?
        .iter()
        .map(key)
        .collect();
    let cached_pods: BTreeMap<String, String> = pods
        .indexer()
        .list()
        .iter()
        .map(|p| {
            (
                format!("{}/{}", p.namespace().unwrap_or(""), p.name()),
                p.resource_version().unwrap_or("").to_string(),
            )
        })
        .collect();
    if server_pods != cached_pods {
        let missing = server_pods
            .iter()
            .filter(|(k, v)| cached_pods.get(*k) != Some(v))
            .count();
        let extra = cached_pods
            .keys()
            .filter(|k| !server_pods.contains_key(*k))
            .count();
        return Err(format!(
            "pod cache differs from the server: {missing} missing or stale, {extra} extra"
        ));
    }
    let server_cms: BTreeMap<String, String> = sim
        .list("configmaps", None)
        .map_err(|e| e.to_string())?
        .iter()
        .map(key)
        .collect();
    let cached_cms: BTreeMap<String, String> = cms
        .indexer()
        .list()
        .iter()
        .map(|c| {
            (
                format!("{}/{}", c.namespace().unwrap_or(""), c.name()),
                c.resource_version().unwrap_or("").to_string(),
            )
        })
        .collect();
    if server_cms != cached_cms {
        return Err("configmap cache differs from the server".into());
    }
    for n in 0..NAMESPACES {
        let ns = format!("demo-{n}");
        let want = pods
            .indexer()
            .by_index("namespace", &ns)
            .map_err(|e| e.to_string())?
            .len()
            .to_string();
        let got = cms
            .indexer()
            .get_by_key(&format!("{ns}/{SUMMARY}"))
            .and_then(|c| {
                c.data
                    .get("data")
                    .and_then(|d| d["pods"].as_str())
                    .map(str::to_string)
            });
        if got.as_deref() != Some(want.as_str()) {
            return Err(format!(
                "summary of {ns} says {got:?}, the cache has {want} pods"
            ));
        }
    }
    Ok(format!(
        "{} pods and {} configmaps match the server; {NAMESPACES} summaries match",
        cached_pods.len(),
        cached_cms.len()
    ))
}

async fn real_cluster(
    path: Option<&str>,
    context: Option<&str>,
    seconds: u64,
) -> Result<(), String> {
    // The library's own file list and merge: what kubectl would read.
    let paths = match path {
        Some(p) if !std::path::Path::new(p).exists() => {
            return Err(format!("kubeconfig {p:?} does not exist"))
        }
        Some(p) => vec![std::path::PathBuf::from(p)],
        None => ClusterConfig::kubeconfig_paths().map_err(|e| e.to_string())?,
    };
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let load = ClusterConfig::load_kubeconfig_files(&paths, context)
        .map_err(|e| format!("loading kubeconfig {}: {e}", shown.join(":")))?;
    for warning in &load.warnings {
        println!("warning: {warning}");
    }
    let config = load.config;
    println!(
        "cluster {} from {} (read-only: pods and configmaps)",
        config.server,
        shown.join(":")
    );
    let cancel = CancellationToken::new();
    let factory = SharedInformerFactory::new(config);
    let pod_informer: Pods = factory.informer(pods()).map_err(|e| e.to_string())?;
    let cm_informer: ConfigMaps = factory.informer(configmaps()).map_err(|e| e.to_string())?;
    let pod_events = watch(&pod_informer, None)?;
    let cm_events = watch(&cm_informer, None)?;
    factory.start(&cancel);
    let started = Instant::now();
    let mut last = 0;
    while started.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let events = pod_events.processed() + cm_events.processed();
        println!(
            "t={:>3}s  synced={}  events/s={:>6}  pods={:>6}  configmaps={:>6}",
            started.elapsed().as_secs(),
            pod_informer.has_synced() && cm_informer.has_synced(),
            events - last,
            pod_informer.indexer().len(),
            cm_informer.indexer().len()
        );
        last = events;
    }
    let synced = pod_informer.has_synced() && cm_informer.has_synced();
    cancel.cancel();
    factory.shutdown().await;
    if synced {
        Ok(())
    } else {
        Err(format!("the caches did not sync within {seconds} s: is the server reachable and are the credentials right? (RUST_LOG=reflector=debug shows the errors)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The time the demo prints for its caches counts their initial lists: with every answer
    /// of the server delayed, it is at least that delay.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sync_time_counts_the_initial_lists() {
        let delay = Duration::from_millis(300);
        let sim = SimServer::builder().token("t").start().await.unwrap();
        for i in 0..20 {
            let pod = json!({"metadata": {"name": format!("p{i}")}});
            sim.create("pods", Some("default"), pod).unwrap();
        }
        sim.faults().slow_user("admin", delay);
        let mut config = ClusterConfig::new(&sim.url()).unwrap();
        config.credentials = Credentials::Token("t".into());
        let factory = SharedInformerFactory::new(config);
        let pods: Pods = factory.informer(pods()).unwrap();
        let cancel = CancellationToken::new();

        let synced_in = start_and_sync(&factory, &cancel, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(pods.indexer().len(), 20);
        assert!(synced_in >= delay, "caches synced in {synced_in:?}");
        cancel.cancel();
        factory.shutdown().await;
        sim.shutdown();
    }
}
