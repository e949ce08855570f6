//! `cargo xtask demo --replicas N --mode range`: the sharded widget controller of
//! [`crate::sharded`] in range mode (`RangeShard`): no sharder and no labels; each replica
//! process lists, watches, caches and reconciles only the virtual ranges of the server's shard
//! hash it holds. Progress per replica every second (ranges held/acting, objects cached,
//! reconciles) while one replica joins and one leaves, then the object writes each move cost:
//! the touches (SH23) the simulator stored in its window.
//!
//! The replicas are this binary re-executed (`informer-demo shard-replica --mode range ...`,
//! the integration suite's [`crate::shard_range_replica`]); the simulator, the widgets, their
//! churn and the reconcile's outcome are the label mode's ([`crate::shard_fleet`],
//! [`crate::shard_replica`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sim_apiserver::SimServer;

use crate::shard_fleet::{
    converged_range, create_widget, identity, replica_opts, sim_for, touches, Churn, Proc,
};
use crate::shard_replica::{Mode, ReplicaOpts};
use crate::sharded::{ShardedArgs, IDS};

const NS: &str = "shards";

/// Replica `id`'s options: the label mode's ([`replica_opts`]: the fleet's lease timings, 4
/// workers, 2,000 requests/s against the simulator) in range mode.
fn range_opts(sim: &SimServer, id: &str) -> ReplicaOpts {
    ReplicaOpts {
        mode: Mode::Range,
        ..replica_opts(sim, id, NS)
    }
}

/// One progress line per second for `seconds`: per replica, ranges held/acting, objects cached
/// and reconciles (in all, and per second).
async fn progress(
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
            line.push_str(&format!(
                " | {id}: {:>2}/{:<2} ranges held/acting {:>5} cached {:>6} rec ({:>4.0}/s)",
                status.held, status.acting, status.widgets, status.reconciles, rate
            ));
        }
        println!("{line}");
    }
}

/// Runs the sharded demo in range mode.
pub async fn run(args: ShardedArgs) -> Result<(), String> {
    if args.replicas == 0 || args.replicas >= IDS.len() {
        return Err(format!("--replicas must be 1 to {}", IDS.len() - 1));
    }
    let started = Instant::now();
    let sim = sim_for(&IDS[..=args.replicas], NS).await?;
    for i in 0..args.widgets {
        create_widget(&sim, NS, &format!("w-{i}"), 0)?;
    }
    println!(
        "simulated API server at {}: {} widgets (a CRD), each to get a child ConfigMap; \
         {} replicas in range mode (64 ranges of the server's shard hash split by the ring; \
         no sharder, no labels), each a process with its own user, client and runtime",
        sim.url(),
        args.widgets,
        args.replicas
    );
    let mut procs = BTreeMap::new();
    for id in &IDS[..args.replicas] {
        procs.insert(identity(id), Proc::spawn(&range_opts(&sim, id))?);
    }
    let churn = Churn::start(sim.clone(), NS, args.widgets);
    churn.set(true);
    let mut last = BTreeMap::new();
    progress(&procs, &mut last, args.phase_seconds, started).await;

    let joiner = IDS[args.replicas];
    println!("---- {} joins", identity(joiner));
    let join_from = sim.revision() + 1;
    procs.insert(identity(joiner), Proc::spawn(&range_opts(&sim, joiner))?);
    progress(&procs, &mut last, args.phase_seconds, started).await;

    let leaver = identity(IDS[0]);
    println!("---- {leaver} leaves (graceful stop: it releases its ranges, then its Lease)");
    let leave_from = sim.revision() + 1;
    if let Some(proc) = procs.remove(&leaver) {
        proc.stop().await?;
    }
    last.remove(&leaver);
    progress(&procs, &mut last, args.phase_seconds, started).await;

    println!("---- churn stops; waiting for convergence");
    let churned = churn.finish().await;
    let members: Vec<String> = procs.keys().cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let owned = loop {
        match converged_range(&sim, NS, &members) {
            Ok(owned) => break owned,
            Err(why) if Instant::now() >= deadline => {
                return Err(format!("not converged within 60 s: {why}"))
            }
            Err(_) => progress(&procs, &mut last, 1, started).await,
        }
    };
    let end = sim.revision() + 1;
    let at_start = touches(&sim, NS, 0, join_from)?;
    for (_, proc) in std::mem::take(&mut procs) {
        proc.stop().await?;
    }
    println!("converged: every widget reconciled by its range's owner, with its child: {owned:?}");
    println!(
        "object writes the moves cost (touches of widgets and children stored by the \
         simulator): {at_start} at the start, {} at the join, {} from the leave to convergence; \
         {churned} churn operations",
        touches(&sim, NS, join_from, leave_from)?,
        touches(&sim, NS, leave_from, end)?
    );
    Ok(())
}
