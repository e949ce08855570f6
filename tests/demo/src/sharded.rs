//! `cargo xtask demo --replicas N [--mode label|range]`: a sharded widget controller in N
//! replica processes against the embedded simulator: progress per replica every second while
//! one replica joins and one leaves, then a verdict read from the server.
//!
//! - **Label mode** (the default): an elected sharder labels each widget for its owner; the
//!   progress shows the widgets each replica owns, and the verdict comes from the server's write
//!   log: every replica write was made to a version labelled for the writer.
//! - **Range mode**: no sharder and no labels; each replica lists, watches, caches and reconciles
//!   only the virtual ranges of the server's shard hash it holds. The progress shows ranges
//!   held/acting and objects cached, and the verdict counts the object writes each move cost:
//!   the touches the simulator stored in its window (none at a join or a graceful leave).
//!
//! The replicas are this binary re-executed (`informer-demo shard-replica [--mode range] ...`);
//! the replicas and the fleet code are the integration suite's
//! (`tests/integration/src/shard_replica.rs`, `shard_range_replica.rs`, `shard_fleet.rs`),
//! included by path.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sim_apiserver::SimServer;

use crate::shard_fleet::{
    check_write_log, converged, converged_range, create_widget, identity, replica_opts, sim_for,
    touches, Churn, Proc,
};
use crate::shard_replica::{Mode, ReplicaOpts, ReplicaStatus};

const NS: &str = "shards";

/// Options of the sharded demo.
pub struct ShardedArgs {
    /// Replicas at the start.
    pub replicas: usize,
    /// Widgets (each with a child ConfigMap).
    pub widgets: usize,
    /// Seconds of each phase (start, after the join, after the leave).
    pub phase_seconds: u64,
    /// How the replicas split the widgets.
    pub mode: Mode,
}

/// The replicas' ids (replica `replica-<id>`), in order of start; one more than asked joins.
pub const IDS: [&str; 9] = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];

/// Replica `id`'s options: the fleet's ([`replica_opts`]: its lease timings, 4 workers, 2,000
/// requests/s against the simulator) in `mode`.
fn opts(sim: &SimServer, id: &str, mode: Mode) -> ReplicaOpts {
    ReplicaOpts {
        mode,
        ..replica_opts(sim, id, NS)
    }
}

/// A replica's part of a progress line in `mode`, with its reconciles per second.
fn segment(mode: Mode, status: &ReplicaStatus, rate: f64) -> String {
    match mode {
        Mode::Label => format!("{:>5} owned {:>6.0} rec/s", status.widgets, rate),
        Mode::Range => format!(
            "{:>2}/{:<2} ranges held/acting {:>5} cached {:>6} rec ({:>4.0}/s)",
            status.held, status.acting, status.widgets, status.reconciles, rate
        ),
    }
}

/// One progress line per second for `seconds`: per replica, its [`segment`]; in label mode,
/// then the widgets no replica is labelled for.
async fn progress(
    sim: &SimServer,
    mode: Mode,
    procs: &BTreeMap<String, Proc>,
    last: &mut BTreeMap<String, (u64, Instant)>,
    seconds: u64,
    started: Instant,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    for _ in 0..seconds {
        tick.tick().await;
        let mut line = format!("{:>5.1}s ", started.elapsed().as_secs_f64());
        for (id, proc) in procs {
            let Some(status) = proc.status() else {
                line.push_str(&format!(" | {id}: starting"));
                continue;
            };
            let now = Instant::now();
            let (before, at) = last.get(id).copied().unwrap_or((status.reconciles, now));
            let secs = now.duration_since(at).as_secs_f64().max(1e-3);
            let rate = status.reconciles.saturating_sub(before) as f64 / secs;
            last.insert(id.clone(), (status.reconciles, now));
            line.push_str(&format!(" | {id}: {}", segment(mode, &status, rate)));
        }
        if mode == Mode::Label {
            let label = controller::sharding::shard_label(crate::shard_replica::RING);
            let unassigned = sim
                .list("widgets.example.com", Some(NS))
                .map(|ws| {
                    ws.iter()
                        .filter(|w| {
                            w.pointer("/metadata/labels")
                                .and_then(|l| l.get(&label))
                                .is_none()
                        })
                        .count()
                })
                .unwrap_or(0);
            line.push_str(&format!(
                " | unlabelled (new, or between ack and assignment) {unassigned}"
            ));
        }
        println!("{line}");
    }
}

/// Runs the sharded demo.
pub async fn run(args: ShardedArgs) -> Result<(), String> {
    if args.replicas == 0 || args.replicas >= IDS.len() {
        return Err(format!("--replicas must be 1 to {}", IDS.len() - 1));
    }
    let mode = args.mode;
    let started = Instant::now();
    let sim = sim_for(&IDS[..=args.replicas], NS).await?;
    for i in 0..args.widgets {
        create_widget(&sim, NS, &format!("w-{i}"), 0)?;
    }
    let how = match mode {
        Mode::Label => "an elected sharder labels each widget for its owner",
        Mode::Range => {
            "range mode: 64 ranges of the server's shard hash split by the ring; no sharder, \
             no labels"
        }
    };
    println!(
        "simulated API server at {}: {} widgets (a CRD), each to get a child ConfigMap; \
         {} replicas ({how}), each a process with its own user, client and runtime",
        sim.url(),
        args.widgets,
        args.replicas
    );
    let mut procs = BTreeMap::new();
    for id in &IDS[..args.replicas] {
        procs.insert(identity(id), Proc::spawn(&opts(&sim, id, mode))?);
    }
    let churn = Churn::start(sim.clone(), NS, args.widgets);
    churn.set(true);
    let mut last = BTreeMap::new();
    progress(&sim, mode, &procs, &mut last, args.phase_seconds, started).await;

    let joiner = IDS[args.replicas];
    println!("---- {} joins", identity(joiner));
    let join_from = sim.revision() + 1;
    procs.insert(identity(joiner), Proc::spawn(&opts(&sim, joiner, mode))?);
    progress(&sim, mode, &procs, &mut last, args.phase_seconds, started).await;

    let leaver = identity(IDS[0]);
    match mode {
        Mode::Label => println!("---- {leaver} leaves (graceful stop: its Lease is released)"),
        Mode::Range => {
            println!("---- {leaver} leaves (graceful stop: it releases its ranges, then its Lease)")
        }
    }
    let leave_from = sim.revision() + 1;
    if let Some(proc) = procs.remove(&leaver) {
        proc.stop().await?;
    }
    last.remove(&leaver);
    progress(&sim, mode, &procs, &mut last, args.phase_seconds, started).await;

    println!("---- churn stops; waiting for convergence");
    let churned = churn.finish().await;
    let members: Vec<String> = procs.keys().cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let owned = loop {
        let state = match mode {
            Mode::Label => converged(&sim, NS, &members),
            Mode::Range => converged_range(&sim, NS, &members),
        };
        match state {
            Ok(owned) => break owned,
            Err(why) if Instant::now() >= deadline => {
                return Err(format!("not converged within 60 s: {why}"))
            }
            Err(_) => progress(&sim, mode, &procs, &mut last, 1, started).await,
        }
    };
    let end = sim.revision() + 1;
    for (_, proc) in std::mem::take(&mut procs) {
        proc.stop().await?;
    }
    match mode {
        Mode::Label => {
            println!(
                "converged: every widget labelled for its owner and reconciled by it: {owned:?}"
            );
            let (checked, late) = check_write_log(&sim, NS)?;
            println!(
                "verdict: no object had two acting owners: {checked} replica writes in the \
                 server's write log, each made to a version labelled for the writer ({late} \
                 child creates landed after their owner moved); {churned} churn operations"
            );
        }
        Mode::Range => {
            println!(
                "converged: every widget reconciled by its range's owner, with its child: \
                 {owned:?}"
            );
            println!(
                "object writes the moves cost (touches of widgets and children stored by the \
                 simulator): {} at the start, {} at the join, {} from the leave to \
                 convergence; {churned} churn operations",
                touches(&sim, NS, 0, join_from)?,
                touches(&sim, NS, join_from, leave_from)?,
                touches(&sim, NS, leave_from, end)?
            );
        }
    }
    Ok(())
}
