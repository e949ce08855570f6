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

use controller::sharding::{touch_annotation, RangeTable};
use serde_json::Value;
use sim_apiserver::SimServer;
use workqueue::shared_informer::reflector::store_index::shard_hash;

use crate::shard_fleet::{create_widget, identity, name_of, replica_opts, sim_for, Churn, Proc};
use crate::shard_replica::{child_name, Mode, ReplicaOpts, RING};
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

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
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

/// Why the stored state is not converged on `members`, if it is not; else the number of
/// widgets each member owns: every widget reconciled at its spec by the owner of its range in
/// the members' [`RangeTable`], and its child at that size.
fn converged(sim: &SimServer, members: &[String]) -> Result<BTreeMap<String, u64>, String> {
    let table = RangeTable::new(members.iter().map(String::as_str));
    let widgets = sim.list("widgets.example.com", Some(NS)).map_err(err)?;
    let children: BTreeMap<String, Value> = sim
        .list("configmaps", Some(NS))
        .map_err(err)?
        .into_iter()
        .map(|c| (name_of(&c).to_string(), c))
        .collect();
    let mut owned: BTreeMap<String, u64> = members.iter().map(|m| (m.clone(), 0)).collect();
    for widget in &widgets {
        let name = name_of(widget);
        let uid = widget.pointer("/metadata/uid").and_then(Value::as_str);
        let owner = table
            .owner_of_hash(shard_hash(uid.unwrap_or_default()))
            .ok_or("no members")?;
        let size = widget.pointer("/spec/size").and_then(Value::as_i64);
        let size = size.unwrap_or(0);
        let by = widget.pointer("/status/by").and_then(Value::as_str);
        let done = widget.pointer("/status/size").and_then(Value::as_i64);
        if by != Some(owner) || done != Some(size) {
            return Err(format!(
                "{name} at size {size} not reconciled by {owner}: status by {by:?} size {done:?}"
            ));
        }
        let child_size = children
            .get(&child_name(name))
            .and_then(|c| c.pointer("/data/size"))
            .and_then(Value::as_str);
        if child_size != Some(size.to_string().as_str()) {
            return Err(format!(
                "child of {name} at size {child_size:?}, not {size}"
            ));
        }
        *owned.entry(owner.to_string()).or_default() += 1;
    }
    Ok(owned)
}

/// The touches (SH23) stored in `ns` at revisions in `from..to`, widgets and ConfigMaps: the
/// versions of an object whose touch annotation differs from the version before. An object
/// never touched carries no touch annotation (reconciles never remove one), so only the
/// histories of those that do are read.
fn touches(sim: &SimServer, from: u64, to: u64) -> Result<usize, String> {
    let touch = touch_annotation(RING);
    let mark = |v: &Value| {
        v.pointer("/metadata/annotations")
            .and_then(|a| a.get(&touch))
            .cloned()
    };
    let mut count = 0;
    for resource in ["widgets.example.com", "configmaps"] {
        for object in sim.list(resource, Some(NS)).map_err(err)? {
            if mark(&object).is_none() {
                continue;
            }
            let history = sim.history(resource, Some(NS), name_of(&object));
            count += history
                .windows(2)
                .filter(|pair| {
                    let revision = crate::shard_fleet::revision_of(&pair[1]);
                    (from..to).contains(&revision) && mark(&pair[0]) != mark(&pair[1])
                })
                .count();
        }
    }
    Ok(count)
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
        match converged(&sim, &members) {
            Ok(owned) => break owned,
            Err(why) if Instant::now() >= deadline => {
                return Err(format!("not converged within 60 s: {why}"))
            }
            Err(_) => progress(&procs, &mut last, 1, started).await,
        }
    };
    let end = sim.revision() + 1;
    let at_start = touches(&sim, 0, join_from)?;
    for (_, proc) in std::mem::take(&mut procs) {
        proc.stop().await?;
    }
    println!("converged: every widget reconciled by its range's owner, with its child: {owned:?}");
    println!(
        "object writes the moves cost (touches of widgets and children stored by the \
         simulator): {at_start} at the start, {} at the join, {} from the leave to convergence; \
         {churned} churn operations",
        touches(&sim, join_from, leave_from)?,
        touches(&sim, leave_from, end)?
    );
    Ok(())
}
