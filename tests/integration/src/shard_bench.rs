//! The sharding benchmark (`integration-suite shard-bench [--quick]`, run by `cargo xtask bench`):
//! replica processes of the sharded widget controller ([`crate::shard_replica`]) whose reconcile
//! waits 20 ms per key, with 4 workers each, against the embedded simulator.
//!
//! - **Throughput with 1, 2 and 4 replicas**: once the ring has converged, every widget's
//!   `spec.size` is bumped; the figure is the replicas' status writes that follow, divided by the
//!   time between the first and the last of them (the server's write log), so that seeding the
//!   bump does not count.
//! - **Rebalance after a join** (2 → 3) and **after a kill** (3 → 2, SIGKILL): from the event to
//!   the server converged on the new members (every widget labelled for its owner and
//!   reconciled by it, children following); the kill includes the lease running out.
//! - **API requests per assignment and per move**: the simulator's request counter over the
//!   initial assignment (per widget) and over the join (per moved widget), and the sharder's and
//!   replicas' stored writes from the write log.
//! - **Cache size per replica**: the widgets in each replica's controller cache at convergence.
//!
//! Prints `bench-result {json}` lines (read by `cargo xtask bench`) and a summary.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};
use sim_apiserver::SimServer;

use crate::shard_fleet::{converged, create_widget, identity, replica_opts, sim_for, Proc};

const NS: &str = "bench";
const WORKERS: usize = 4;
const DELAY_MS: u64 = 20;

/// The `shard-bench` subcommand.
pub fn main(args: &[String]) -> ExitCode {
    let quick = args.iter().any(|a| a == "--quick");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("shard-bench: cannot build the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bench(quick)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("shard-bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn result(name: &str, unit: &str, value: f64, extra: Value) {
    let mut line = json!({"name": name, "unit": unit, "value": value});
    if let (Some(line), Some(extra)) = (line.as_object_mut(), extra.as_object()) {
        line.extend(extra.clone());
    }
    println!("bench-result {line}");
}

type Procs = BTreeMap<String, Proc>;

fn spawn(sim: &SimServer, procs: &mut Procs, id: &str) -> Result<(), String> {
    let mut opts = replica_opts(sim, id, NS);
    opts.workers = WORKERS;
    opts.delay_ms = DELAY_MS;
    let proc = Proc::spawn(&opts)?;
    procs.insert(proc.identity.clone(), proc);
    Ok(())
}

/// Waits (deadline 180 s) until the server is converged on `procs` and each replica's cache
/// holds its share; returns the widgets each owns.
async fn converge(sim: &SimServer, procs: &Procs) -> Result<BTreeMap<String, u64>, String> {
    let members: Vec<String> = procs.keys().cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let why = match converged(sim, NS, &members) {
            Ok(owned) => {
                let caches_match = procs
                    .iter()
                    .all(|(id, p)| p.status().is_some_and(|s| s.widgets == owned[id]));
                if caches_match {
                    return Ok(owned);
                }
                "caches not yet at their share".to_string()
            }
            Err(why) => why,
        };
        if Instant::now() >= deadline {
            return Err(format!("not converged within 180 s: {why}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn is_replica_widget_write(w: &sim_apiserver::WriteRecord) -> bool {
    w.resource == "widgets" && w.namespace == NS && w.user.starts_with("replica-")
}

/// Writes after `revision`: (by sharders, by replicas), widgets and children.
fn writes_since(sim: &SimServer, revision: u64) -> (u64, u64) {
    let (mut sharder, mut replica) = (0, 0);
    for w in sim.write_log() {
        if w.revision <= revision || w.namespace != NS || w.resource == "leases" {
            continue;
        }
        if w.user.starts_with("sharder-") {
            sharder += 1;
        } else if w.user.starts_with("replica-") {
            replica += 1;
        }
    }
    (sharder, replica)
}

async fn shutdown(procs: Procs) -> Result<(), String> {
    for (_, proc) in procs {
        proc.stop().await?;
    }
    Ok(())
}

/// One ring of `n` replicas: its throughput, and with `rebalance` the join and the kill.
async fn ring(n: usize, widgets: usize, rebalance: bool) -> Result<f64, String> {
    let ids = ["a", "b", "c", "d", "e"];
    let sim = sim_for(&ids, NS).await?;
    for i in 0..widgets {
        create_widget(&sim, NS, &format!("w-{i}"), 0)?;
    }
    let mut procs = Procs::new();
    let seeded = sim.revision();
    let before = sim.counters();
    let started = Instant::now();
    for id in &ids[..n] {
        spawn(&sim, &mut procs, id)?;
    }
    let owned = converge(&sim, &procs).await?;
    let assign_time = started.elapsed();
    let requests = sim.counters().requests - before.requests;
    let (sharder_writes, _) = writes_since(&sim, seeded);
    let caches: Vec<u64> = procs
        .values()
        .filter_map(|p| p.status())
        .map(|s| s.widgets)
        .collect();
    println!(
        "{n} replica(s): {widgets} widgets assigned and reconciled in {:.1}s, {requests} requests \
         ({:.2}/widget), {sharder_writes} sharder writes; owned {owned:?}, caches {caches:?}",
        assign_time.as_secs_f64(),
        requests as f64 / widgets as f64
    );
    if n == 1 {
        result(
            "sharding: API requests per widget, initial assignment and first reconcile (1 replica)",
            "requests",
            requests as f64 / widgets as f64,
            json!({"note": format!("{:.2} sharder writes per assignment", sharder_writes as f64 / widgets as f64)}),
        );
    }
    let max_cache = caches.iter().copied().max().unwrap_or(0);
    result(
        &format!("sharding: largest replica cache, {n} replica(s), {widgets} widgets"),
        "widgets",
        max_cache as f64,
        json!({"note": format!("{:.2}× an even share", max_cache as f64 * n as f64 / widgets as f64)}),
    );

    // Throughput: bump every widget, measure the replicas' status writes that follow.
    let bump_from = sim.revision();
    for i in 0..widgets {
        sim.patch(
            "widgets.example.com",
            Some(NS),
            &format!("w-{i}"),
            &json!({"spec": {"size": 1}}),
        )
        .map_err(|e| e.to_string())?;
    }
    converge(&sim, &procs).await?;
    let times: Vec<SystemTime> = sim
        .write_log()
        .into_iter()
        .filter(|w| w.revision > bump_from && is_replica_widget_write(w))
        .map(|w| w.at)
        .collect();
    let (Some(first), Some(last)) = (times.iter().min(), times.iter().max()) else {
        return Err("no status write after the bump".into());
    };
    let span = last
        .duration_since(*first)
        .unwrap_or_default()
        .as_secs_f64();
    let throughput = times.len() as f64 / span.max(1e-3);
    println!(
        "{n} replica(s): {} reconciles in {span:.2}s: {throughput:.0}/s",
        times.len()
    );

    if rebalance {
        // Join: a third replica.
        let joined_rev = sim.revision();
        let before = sim.counters();
        let members_before: Vec<String> = procs.keys().cloned().collect();
        let t = Instant::now();
        spawn(&sim, &mut procs, ids[n])?;
        converge(&sim, &procs).await?;
        let join_time = t.elapsed();
        let members_after: Vec<String> = procs.keys().cloned().collect();
        let moved = (0..widgets)
            .filter(|i| {
                let key = format!("{NS}/w-{i}");
                controller::sharding::owner_of(&key, members_before.iter().map(String::as_str))
                    != controller::sharding::owner_of(
                        &key,
                        members_after.iter().map(String::as_str),
                    )
            })
            .count()
            .max(1);
        let requests = sim.counters().requests - before.requests;
        let (sharder, replica) = writes_since(&sim, joined_rev);
        println!(
            "join {n} → {}: {moved} widgets moved in {:.1}s; {requests} requests ({:.1}/move), \
             {sharder} sharder and {replica} replica writes ({:.1} and {:.1}/move)",
            n + 1,
            join_time.as_secs_f64(),
            requests as f64 / moved as f64,
            sharder as f64 / moved as f64,
            replica as f64 / moved as f64,
        );
        result(
            &format!(
                "sharding: rebalance after a join ({n} → {}), {widgets} widgets",
                n + 1
            ),
            "s",
            join_time.as_secs_f64(),
            json!({"note": format!("{moved} moved; from process start to converged")}),
        );
        result(
            "sharding: API requests per moved widget (join)",
            "requests",
            requests as f64 / moved as f64,
            json!({"note": format!("{:.1} sharder + {:.1} replica writes per move",
                sharder as f64 / moved as f64, replica as f64 / moved as f64)}),
        );

        // Kill: the joiner, SIGKILL.
        let victim = identity(ids[n]);
        let proc = procs
            .remove(&victim)
            .ok_or_else(|| format!("no {victim}"))?;
        let t = Instant::now();
        proc.kill().await?;
        converge(&sim, &procs).await?;
        let kill_time = t.elapsed();
        println!(
            "kill {} → {n}: converged in {:.1}s (lease {} ms)",
            n + 1,
            kill_time.as_secs_f64(),
            crate::shard_fleet::LEASE_MS
        );
        result(
            &format!(
                "sharding: rebalance after a kill ({} → {n}), {widgets} widgets",
                n + 1
            ),
            "s",
            kill_time.as_secs_f64(),
            json!({"note": format!("includes the {} ms lease running out", crate::shard_fleet::LEASE_MS)}),
        );
    }
    shutdown(procs).await?;
    Ok(throughput)
}

async fn bench(quick: bool) -> Result<(), String> {
    let widgets = if quick { 800 } else { 2000 };
    let one = ring(1, widgets, false).await?;
    result(
        "sharding: throughput, 1 replica (4 workers, 20 ms per key)",
        "reconciles/s",
        one,
        json!({}),
    );
    for n in [2usize, 4] {
        let tput = ring(n, widgets, n == 2).await?;
        let ratio = tput / (n as f64 * one);
        result(
            &format!("sharding: throughput, {n} replicas"),
            "reconciles/s",
            tput,
            json!({"baseline": n as f64 * one, "baseline_name": format!("{n} × 1 replica"), "ratio": ratio}),
        );
    }
    Ok(())
}
