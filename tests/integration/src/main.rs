//! `cargo xtask integration`: end-to-end scenarios against the embedded simulated API server.
//!
//! Each scenario starts its own [`sim_apiserver::SimServer`], drives informers (and a controller)
//! through churn and injected faults, and at quiescence asserts that every informer's cache equals
//! the server's state (key → resourceVersion) and that every handler's per-key sequence is
//! consistent (see [`check`]). Scenarios run one after another, each with its own timeout; a
//! failing or panicking scenario is reported and the others still run. One line per scenario:
//!
//! ```text
//! PASS  churn-10k-list              45.1s  10000 listed, 30012 churn ops (1000/s) …
//! FAIL  watch-faults                12.0s  no quiescence within 60s: …
//! 8 passed, 1 failed
//! ```
//!
//! Arguments: `[FILTER…]` (substrings of scenario names), `--list`, `--soak-seconds N`,
//! `--queue in-order|delta-fifo|both` (the informers' queue; default `in-order`, client-go's
//! default; `both` runs every scenario that has informers on each, about twice as long, and
//! the ones without, leader election and sharding, once), `--only informers|others` (the scenarios
//! that run informers, or only those that do not). `cargo xtask ci` runs the informer scenarios
//! of each queue in a process of its own, the two at once, then the others alone.

mod backend;
mod check;
mod harness;
mod hostile;
mod le_replica;
mod logs;
mod scenarios;
mod shard_bench;
mod shard_fleet;
mod shard_history;
mod shard_range_history;
mod shard_range_replica;
mod shard_replica;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use workqueue::shared_informer::{InOrder, InformerQueue};

use crate::check::{Outcome, INJECTED_PANIC};

/// Options every scenario receives.
#[derive(Debug, Clone, Copy)]
pub struct Opts {
    /// Length of the memory soak.
    pub soak_seconds: u64,
    /// The server the portable scenarios run on (the others always run on the simulator).
    pub server: backend::ServerKind,
    /// The request budget of each sharded replica's clients, requests/s (`None`: the
    /// scenario's own, 2,000; `--replica-qps 50` runs them at client-go's default).
    pub replica_qps: Option<u64>,
    /// How many widgets the sharding scenario runs with (`None`: its own 3,000, or 400 on a
    /// real server).
    pub widgets: Option<usize>,
    /// The sharded replicas' ring and sharder share their clients' request budgets, as before
    /// they had their own (`--shared-budgets`, for comparisons).
    pub shared_budgets: bool,
}

/// One scenario: a name to filter on, a description, a time limit and the code.
pub struct Scenario {
    /// Short unique name.
    pub name: &'static str,
    /// What it proves.
    pub about: &'static str,
    /// Its time limit for these options.
    pub timeout: fn(&Opts) -> Duration,
    /// Whether it runs informers. One that does not (leader election: replicas, a Lease and
    /// writes) does not depend on the informers' queue and runs once with `--queue both`.
    pub informers: bool,
    /// Whether it runs on a real kube-apiserver too (`--server real`): it drives the server
    /// only through [`backend::Backend`], with no fault that only the simulator can inject.
    pub portable: bool,
    /// Runs it.
    pub run: fn(Opts) -> BoxFuture<'static, Outcome>,
}

fn usage() -> &'static str {
    "usage: cargo xtask integration [FILTER...] [--list] [--soak-seconds N]\n\
     \x20                              [--queue in-order|delta-fifo|both]\n\
     \x20                              [--only informers|others] [--server sim|real]\n\
     \x20                              [--replica-qps N] [--widgets N] [--shared-budgets]\n\
     Runs the end-to-end scenarios whose names contain any FILTER (all without one), with the\n\
     informers on the in-order queue (default), the DeltaFifo, or each in turn (`both`: the\n\
     scenarios without informers run once); `--only` keeps the scenarios that run informers,\n\
     or those that do not; `--server real` runs the portable scenarios on a real kube-apiserver\n\
     and etcd (built from the Go module proxy when missing) instead of the simulator;\n\
     `--replica-qps N` gives the sharded replicas' clients N requests/s (default 2,000), and\n\
     `--widgets N` runs the sharding scenario with N widgets (default 3,000; 400 on a real\n\
     server); `--shared-budgets` makes the replicas' ring and sharder share their clients'\n\
     request budgets."
}

struct Args {
    filters: Vec<String>,
    list: bool,
    opts: Opts,
    queues: Vec<(&'static str, InformerQueue)>,
    /// `Some(true)`: only the scenarios with informers; `Some(false)`: only those without.
    only_informers: Option<bool>,
}

const IN_ORDER: (&str, InformerQueue) = (
    "in-order",
    InformerQueue::InOrder(InOrder {
        batch_size: workqueue::shared_informer::reflector::delta_fifo::DEFAULT_BATCH_SIZE,
        atomic: true,
        unlock_while_processing: true,
    }),
);
const DELTA_FIFO: (&str, InformerQueue) = ("delta-fifo", InformerQueue::DeltaFifo);

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        filters: Vec::new(),
        list: false,
        opts: Opts {
            soak_seconds: 120,
            server: backend::ServerKind::Sim,
            replica_qps: None,
            widgets: None,
            shared_budgets: false,
        },
        queues: vec![IN_ORDER],
        only_informers: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--list" => args.list = true,
            "--soak-seconds" => {
                let v = it
                    .next()
                    .ok_or_else(|| format!("--soak-seconds needs a value\n{}", usage()))?;
                args.opts.soak_seconds = v
                    .parse()
                    .map_err(|e| format!("--soak-seconds {v:?}: {e}"))?;
                if args.opts.soak_seconds < 6 {
                    return Err("--soak-seconds must be at least 6".into());
                }
            }
            "--replica-qps" => {
                let v = it
                    .next()
                    .ok_or_else(|| format!("--replica-qps needs a value\n{}", usage()))?;
                let qps: u64 = v.parse().map_err(|e| format!("--replica-qps {v:?}: {e}"))?;
                if qps == 0 {
                    return Err("--replica-qps must be at least 1".into());
                }
                args.opts.replica_qps = Some(qps);
            }
            "--shared-budgets" => args.opts.shared_budgets = true,
            "--widgets" => {
                let v = it
                    .next()
                    .ok_or_else(|| format!("--widgets needs a value\n{}", usage()))?;
                let n: usize = v.parse().map_err(|e| format!("--widgets {v:?}: {e}"))?;
                if !(10..=100_000).contains(&n) {
                    return Err("--widgets must be between 10 and 100000".into());
                }
                args.opts.widgets = Some(n);
            }
            "--server" => {
                let v = it
                    .next()
                    .ok_or_else(|| format!("--server needs a value\n{}", usage()))?;
                args.opts.server = match v.as_str() {
                    "sim" => backend::ServerKind::Sim,
                    "real" => backend::ServerKind::Real,
                    other => return Err(format!("--server {other:?}\n{}", usage())),
                };
            }
            "--queue" => {
                let v = it
                    .next()
                    .ok_or_else(|| format!("--queue needs a value\n{}", usage()))?;
                args.queues = match v.as_str() {
                    "in-order" => vec![IN_ORDER],
                    "delta-fifo" => vec![DELTA_FIFO],
                    "both" => vec![IN_ORDER, DELTA_FIFO],
                    other => return Err(format!("--queue {other:?}\n{}", usage())),
                };
            }
            "--only" => {
                let v = it
                    .next()
                    .ok_or_else(|| format!("--only needs a value\n{}", usage()))?;
                args.only_informers = match v.as_str() {
                    "informers" => Some(true),
                    "others" => Some(false),
                    other => return Err(format!("--only {other:?}\n{}", usage())),
                };
            }
            "-h" | "--help" => return Err(usage().to_string()),
            flag if flag.starts_with('-') => {
                return Err(format!("unknown flag {flag:?}\n{}", usage()))
            }
            filter => args.filters.push(filter.to_string()),
        }
    }
    Ok(args)
}

/// Keeps the panics the suite injects into handlers quiet; every other panic is printed as usual.
fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() == Some(&INJECTED_PANIC) {
            return;
        }
        default(info);
    }));
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

async fn run_one(scenario: &Scenario, opts: Opts) -> Outcome {
    let limit = (scenario.timeout)(&opts);
    let task = tokio::spawn((scenario.run)(opts));
    let abort = task.abort_handle();
    match tokio::time::timeout(limit, task).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(e)) if e.is_panic() => Err(check::Failure(format!(
            "panicked: {}",
            panic_message(&*e.into_panic())
        ))),
        Ok(Err(e)) => Err(check::Failure(format!("scenario task failed: {e}"))),
        Err(_) => {
            abort.abort();
            Err(check::Failure(format!("timed out after {limit:?}")))
        }
    }
}

fn main() -> ExitCode {
    // The sharding scenario and benchmark re-execute this binary as their replicas.
    let raw: Vec<String> = std::env::args().collect();
    if raw.get(1).map(String::as_str) == Some("shard-bench") {
        return shard_bench::main(&raw[2..]);
    }
    if raw.get(1).map(String::as_str) == Some("le-replica") {
        return le_replica::main(&raw[2..]);
    }
    if raw.get(1).map(String::as_str) == Some("shard-replica") {
        let filter =
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "off".into());
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
        return shard_replica::main(&raw[2..]);
    }
    let args = match parse_args() {
        Ok(a) => a,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    {
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        use tracing_subscriber::Layer as _;
        // What RUST_LOG asks for is printed; WARN and ERROR are always kept for the scenarios.
        let printed =
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "off".into());
        tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer().with_filter(printed))
            .with(logs::Tap)
            .init();
    }
    let all = scenarios::all();
    let chosen: Vec<&Scenario> = all
        .iter()
        .filter(|s| args.filters.is_empty() || args.filters.iter().any(|f| s.name.contains(f)))
        .filter(|s| args.only_informers.is_none_or(|only| s.informers == only))
        .filter(|s| args.opts.server == backend::ServerKind::Sim || s.portable)
        .collect();
    if args.list {
        for s in &chosen {
            println!(
                "{:<28} {:>5.0}s max  {}",
                s.name,
                (s.timeout)(&args.opts).as_secs_f64(),
                s.about
            );
        }
        return ExitCode::SUCCESS;
    }
    if chosen.is_empty() {
        eprintln!("no scenario matches {:?}; see --list", args.filters);
        return ExitCode::from(2);
    }
    install_panic_hook();
    // More workers than cores: the slow-handler scenario blocks one on purpose.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("integration: cannot build the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    let (mut passed, mut failed) = (0, 0);
    let several = args.queues.len() > 1;
    runtime.block_on(async {
        for (round, (queue_name, queue)) in args.queues.iter().enumerate() {
            harness::use_queue(*queue);
            if several {
                println!("informers on the {queue_name} queue");
            }
            for s in &chosen {
                if round > 0 && !s.informers {
                    // No informer, so the queue changes nothing: the first round ran it.
                    continue;
                }
                let name = if several && s.informers {
                    format!("{}@{queue_name}", s.name)
                } else {
                    s.name.to_string()
                };
                println!("....  {name:<28} {}", s.about);
                let t = Instant::now();
                let outcome = run_one(s, args.opts).await;
                let secs = t.elapsed().as_secs_f64();
                match outcome {
                    Ok(detail) => {
                        passed += 1;
                        println!("PASS  {name:<28} {secs:>6.1}s  {detail}");
                    }
                    Err(reason) => {
                        failed += 1;
                        println!("FAIL  {name:<28} {secs:>6.1}s  {reason}");
                    }
                }
            }
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    println!("total {:.1}s", started.elapsed().as_secs_f64());
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
