//! `cargo xtask demo --replicas N`: a sharded widget controller in N replica
//! processes against the embedded simulator: progress per replica every second (widgets owned,
//! reconciles per second) while one replica joins and one leaves, then a verdict from the
//! server's write log that no object had two acting owners.
//!
//! The replicas are this binary re-executed (`informer-demo shard-replica ...`); the replica and
//! the fleet code are the integration suite's (`tests/integration/src/shard_replica.rs`,
//! `shard_fleet.rs`), included by path.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::shard_fleet::{
    check_write_log, converged, create_widget, identity, replica_opts, sim_for, Churn, Proc,
};

const NS: &str = "shards";

/// Options of the sharded demo.
pub struct ShardedArgs {
    /// Replicas at the start.
    pub replicas: usize,
    /// Widgets (each with a child ConfigMap).
    pub widgets: usize,
    /// Seconds of each phase (start, after the join, after the leave).
    pub phase_seconds: u64,
}

/// The replicas' ids (replica `replica-<id>`), in order of start; one more than asked joins.
pub const IDS: [&str; 9] = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];

/// One progress line per second for `seconds`: per replica, widgets owned and reconciles/s.
async fn progress(
    sim: &sim_apiserver::SimServer,
    procs: &BTreeMap<String, Proc>,
    last: &mut BTreeMap<String, (u64, Instant)>,
    seconds: u64,
    started: Instant,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    for _ in 0..seconds {
        tick.tick().await;
        let unassigned = sim
            .list("widgets.example.com", Some(NS))
            .map(|ws| {
                ws.iter()
                    .filter(|w| {
                        w.pointer("/metadata/labels")
                            .and_then(|l| l.get(controller::sharding::shard_label("widgets")))
                            .is_none()
                    })
                    .count()
            })
            .unwrap_or(0);
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
                " | {id}: {:>5} owned {:>6.0} rec/s",
                status.widgets, rate
            ));
        }
        line.push_str(&format!(
            " | unlabelled (new, or between ack and assignment) {unassigned}"
        ));
        println!("{line}");
    }
}

/// Runs the sharded demo.
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
         {} replicas, each a process with its own user, client and runtime",
        sim.url(),
        args.widgets,
        args.replicas
    );
    let mut procs = BTreeMap::new();
    for id in &IDS[..args.replicas] {
        let proc = Proc::spawn(&replica_opts(&sim, id, NS))?;
        procs.insert(proc.identity.clone(), proc);
    }
    let churn = Churn::start(sim.clone(), NS, args.widgets);
    churn.set(true);
    let mut last = BTreeMap::new();
    progress(&sim, &procs, &mut last, args.phase_seconds, started).await;

    let joiner = IDS[args.replicas];
    println!("---- {} joins", identity(joiner));
    let proc = Proc::spawn(&replica_opts(&sim, joiner, NS))?;
    procs.insert(proc.identity.clone(), proc);
    progress(&sim, &procs, &mut last, args.phase_seconds, started).await;

    let leaver = identity(IDS[0]);
    println!("---- {leaver} leaves (graceful stop: its Lease is released)");
    if let Some(proc) = procs.remove(&leaver) {
        proc.stop().await?;
    }
    last.remove(&leaver);
    progress(&sim, &procs, &mut last, args.phase_seconds, started).await;

    println!("---- churn stops; waiting for convergence");
    let churned = churn.finish().await;
    let members: Vec<String> = procs.keys().cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let owned = loop {
        match converged(&sim, NS, &members) {
            Ok(owned) => break owned,
            Err(why) if Instant::now() >= deadline => {
                return Err(format!("not converged within 60 s: {why}"))
            }
            Err(_) => progress(&sim, &procs, &mut last, 1, started).await,
        }
    };
    for (_, proc) in std::mem::take(&mut procs) {
        proc.stop().await?;
    }
    println!("converged: every widget labelled for its owner and reconciled by it: {owned:?}");
    let (checked, late) = check_write_log(&sim, NS)?;
    println!(
        "verdict: no object had two acting owners: {checked} replica writes in the server's \
         write log, each made to a version labelled for the writer ({late} child creates \
         landed after their owner moved); {churned} churn operations"
    );
    Ok(())
}
