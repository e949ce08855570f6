//! Scenario `sharding`: a sharded widget controller in replica processes of its own
//! ([`crate::shard_replica`]: each its own simulator user, client, tokio runtime and clock),
//! reconciling 3,000 widgets (a CRD) and a child ConfigMap each, under churn, while the ring
//! scales 1 → 3 → 2 → 4; one replica is killed (SIGKILL), one frozen past its lease (SIGSTOP,
//! then SIGCONT) and one partitioned from the server (its requests held, then delivered late).
//!
//! ```text
//!   a ─────────────────────────────────────────────────────────────────────────────►
//!   b, c join ──────────── c SIGKILL
//!                               d, e join ─ d SIGSTOP ··· SIGCONT ─ e partitioned ··· healed ─►
//!   members:  1        3          2        4       3            4        3             4
//! ```
//!
//! Checked from the server's side (the write log and the stored versions of each object, never
//! the replicas' logs):
//! - **fence**: every change a replica stored to a widget or a child was made to a version
//!   labelled for that replica (the version just before it in the object's history); a child
//!   created while its owner was labelled for another replica (a late create, which the design
//!   allows once, see docs/sharding.md) is counted and reported apart;
//! - **no orphaned object**: after the kill, the freeze and the partition, every widget the
//!   replica held is labelled for a live member within lease duration + 2 s of the event;
//! - **convergence**: after each step, every widget is labelled `owner_of(key, members)`, not
//!   draining, reconciled by that owner (`status.by`) at its current `spec.size`, and its child
//!   carries the same label and size;
//! - **caches**: at each converged step, every replica's controller caches (widgets and
//!   children, from its status line) hold at most 1.2× total / members.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use controller::sharding::shard_label;
use serde_json::Value;
use sim_apiserver::SimServer;
use tokio::time::Instant;

use crate::check::{eventually, Failure, Outcome};
use crate::shard_fleet::{
    check_write_log, converged, create_widget, explain, identity, label, name_of, replica_opts,
    signal, sim_for, Churn, Proc, LEASE_MS,
};
use crate::shard_replica::{sharder_user, RING};
use crate::{fail, Opts};

const NS: &str = "shards";
const WIDGETS: usize = 3000;
/// The rebalance bound sharding was designed to: lease duration + 2 s from the moment the
/// owner died.
const ORPHAN_BOUND: Duration = Duration::from_millis(LEASE_MS + 2000);
const CONVERGE: Duration = Duration::from_secs(60);

/// Waits until the server is converged on `procs` as members and every replica's caches hold
/// exactly its share; returns the largest cache / (total / members) ratio.
async fn converge(
    sim: &SimServer,
    procs: &BTreeMap<String, Proc>,
    what: &str,
) -> Result<(f64, Duration), Failure> {
    let started = Instant::now();
    let members: Vec<String> = procs.keys().cloned().collect();
    let owned = eventually(&format!("convergence {what}"), CONVERGE, || {
        let statuses: Vec<String> = procs
            .iter()
            .map(|(id, p)| format!("{id}: {:?}", p.status()))
            .collect();
        let owned = converged(sim, NS, &members).map_err(|e| {
            // The first widget named in the reason, with its history and its child's.
            let history = e
                .split_whitespace()
                .find(|w| w.starts_with("w-"))
                .map(|w| explain(sim, NS, w))
                .unwrap_or_default();
            format!("{e}; {statuses:?}{history}")
        })?;
        for (id, proc) in procs {
            let status = proc.status().ok_or(format!("{id} reported nothing"))?;
            let share = owned[id];
            if status.widgets != share || status.children != share {
                return Err(format!(
                    "{id} caches {} widgets and {} children, owns {share}",
                    status.widgets, status.children
                ));
            }
        }
        Ok(owned)
    })
    .await?;
    let total: u64 = owned.values().sum();
    let fair = total as f64 / members.len() as f64;
    let ratio = owned.values().map(|&n| n as f64 / fair).fold(0.0, f64::max);
    if ratio > 1.2 {
        fail!("{what}: a replica caches {ratio:.2}× its share ({owned:?})");
    }
    Ok((ratio, started.elapsed()))
}

/// Waits until no widget in `held` (names) is labelled `gone` any more, each now labelled for
/// one of `live`; fails past `since + ORPHAN_BOUND`. Returns the time taken from `since`.
async fn reassigned(
    sim: &SimServer,
    gone: &str,
    held: &[String],
    live: &[String],
    since: Instant,
) -> Result<Duration, Failure> {
    let shard = shard_label(RING);
    let deadline = since + ORPHAN_BOUND;
    loop {
        let widgets = sim.list("widgets.example.com", Some(NS))?;
        let by_name: HashMap<&str, &Value> = widgets.iter().map(|w| (name_of(w), w)).collect();
        let left: Vec<&String> = held
            .iter()
            .filter(|name| {
                by_name.get(name.as_str()).is_some_and(|w| {
                    let to = label(w, &shard);
                    !to.is_some_and(|to| live.contains(&to))
                })
            })
            .collect();
        if left.is_empty() {
            return Ok(since.elapsed());
        }
        if Instant::now() >= deadline {
            fail!(
                "{} of {gone}'s {} widgets still not assigned to a live member {:?} after it \
                 died (bound {ORPHAN_BOUND:?}), e.g. {}",
                left.len(),
                held.len(),
                since.elapsed(),
                left[0]
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Gives `who` work: a new `spec.size` for every widget it holds, so that its workers have
/// writes in flight when the fault that follows strikes.
fn bump(sim: &SimServer, who: &str, size: i64) -> Result<usize, Failure> {
    let held = labelled(sim, who)?;
    for name in &held {
        sim.patch(
            "widgets.example.com",
            Some(NS),
            name,
            &serde_json::json!({"spec": {"size": size}}),
        )?;
    }
    Ok(held.len())
}

/// Waits until each of `joiners` is labelled on some widget: the ring has seen them and the
/// hand-over is under way.
async fn moving(sim: &SimServer, joiners: &[String]) -> Result<(), Failure> {
    eventually("the joiners get widgets", CONVERGE, || {
        for joiner in joiners {
            if labelled(sim, joiner).map_err(|e| e.0)?.is_empty() {
                return Err(format!("{joiner} has none yet"));
            }
        }
        Ok(())
    })
    .await
}

fn labelled(sim: &SimServer, who: &str) -> Result<Vec<String>, Failure> {
    let shard = shard_label(RING);
    Ok(sim
        .list("widgets.example.com", Some(NS))?
        .iter()
        .filter(|w| label(w, &shard).as_deref() == Some(who))
        .map(|w| name_of(w).to_string())
        .collect())
}

/// The scenario.
pub async fn sharding(opts: Opts) -> Outcome {
    let started = Instant::now();
    let ids = ["a", "b", "c", "d", "e"];
    let sim = sim_for(&ids, NS).await.map_err(Failure)?;
    let widgets = opts.widgets.unwrap_or(WIDGETS);
    for i in 0..widgets {
        create_widget(&sim, NS, &format!("w-{i}"), 0).map_err(Failure)?;
    }
    let mut procs: BTreeMap<String, Proc> = BTreeMap::new();
    let mut steps = Vec::new();
    let mut max_ratio: f64 = 0.0;
    let spawn = |procs: &mut BTreeMap<String, Proc>, id: &str| -> Result<(), Failure> {
        let mut replica = replica_opts(&sim, id, NS);
        if let Some(qps) = opts.replica_qps {
            replica.qps = qps;
        }
        replica.shared_budgets = u64::from(opts.shared_budgets);
        let proc = Proc::spawn(&replica).map_err(Failure)?;
        procs.insert(proc.identity.clone(), proc);
        Ok(())
    };
    let churn = Churn::start(sim.clone(), NS, widgets);

    // 1: one replica.
    spawn(&mut procs, "a")?;
    let (ratio, took) = converge(&sim, &procs, "on 1 replica").await?;
    max_ratio = max_ratio.max(ratio);
    steps.push(format!("1:{:.0}s", took.as_secs_f64()));

    // 1 → 3, under churn until the move is under way.
    churn.set(true);
    spawn(&mut procs, "b")?;
    spawn(&mut procs, "c")?;
    moving(&sim, &[identity("b"), identity("c")]).await?;
    churn.set(false);
    let (ratio, took) = converge(&sim, &procs, "on 3 replicas").await?;
    max_ratio = max_ratio.max(ratio);
    steps.push(format!("3:{:.0}s", took.as_secs_f64()));

    // 3 → 2: c killed.
    churn.set(true);
    let c = procs.remove(&identity("c")).ok_or(Failure("no c".into()))?;
    let held = labelled(&sim, &c.identity)?;
    let killed_at = Instant::now();
    c.kill().await.map_err(Failure)?;
    let live: Vec<String> = procs.keys().cloned().collect();
    let after_kill = reassigned(&sim, &identity("c"), &held, &live, killed_at).await?;
    churn.set(false);
    let (ratio, took) = converge(&sim, &procs, "on 2 replicas after the kill").await?;
    max_ratio = max_ratio.max(ratio);
    steps.push(format!("2:{:.0}s", took.as_secs_f64()));

    // 2 → 4.
    churn.set(true);
    spawn(&mut procs, "d")?;
    spawn(&mut procs, "e")?;
    moving(&sim, &[identity("d"), identity("e")]).await?;
    churn.set(false);
    let (ratio, took) = converge(&sim, &procs, "on 4 replicas").await?;
    max_ratio = max_ratio.max(ratio);
    steps.push(format!("4:{:.0}s", took.as_secs_f64()));

    // d frozen past its lease: SIGSTOP until its widgets are the others', then SIGCONT.
    churn.set(true);
    let d_id = identity("d");
    let pid = procs[&d_id].pid().map_err(Failure)?;
    let fenced_before_freeze = procs[&d_id].status().map_or(0, |s| s.fenced);
    bump(&sim, &d_id, 2001)?;
    let held = labelled(&sim, &d_id)?;
    let frozen_at = Instant::now();
    signal(pid, "-STOP").map_err(Failure)?;
    let live: Vec<String> = procs.keys().filter(|k| **k != d_id).cloned().collect();
    let after_freeze = reassigned(&sim, &d_id, &held, &live, frozen_at).await?;
    signal(pid, "-CONT").map_err(Failure)?;
    moving(&sim, std::slice::from_ref(&d_id)).await?;
    churn.set(false);
    let (ratio, took) = converge(&sim, &procs, "on 4 replicas after the freeze").await?;
    max_ratio = max_ratio.max(ratio);
    steps.push(format!("thaw:{:.0}s", took.as_secs_f64()));

    // e partitioned: its requests (controller, Lease, sharder) held in the network until its
    // widgets are the others', then delivered late.
    churn.set(true);
    let e_id = identity("e");
    let fenced_before = procs[&e_id].status().map_or(0, |s| s.fenced);
    bump(&sim, &e_id, 2002)?;
    let held = labelled(&sim, &e_id)?;
    let partitioned_at = Instant::now();
    sim.faults().partition_user(&e_id);
    sim.faults().partition_user(&sharder_user(&e_id));
    let live: Vec<String> = procs.keys().filter(|k| **k != e_id).cloned().collect();
    let after_partition = reassigned(&sim, &e_id, &held, &live, partitioned_at).await?;
    sim.faults().heal_user(&e_id);
    sim.faults().heal_user(&sharder_user(&e_id));
    moving(&sim, std::slice::from_ref(&e_id)).await?;
    churn.set(false);
    let (ratio, took) = converge(&sim, &procs, "on 4 replicas after the partition").await?;
    max_ratio = max_ratio.max(ratio);
    steps.push(format!("heal:{:.0}s", took.as_secs_f64()));
    let fenced_late = procs[&e_id].status().map_or(0, |s| s.fenced) - fenced_before;
    let fenced_thawed = procs[&d_id].status().map_or(0, |s| s.fenced) - fenced_before_freeze;

    let churned = churn.finish().await;
    for (_, proc) in std::mem::take(&mut procs) {
        proc.stop().await.map_err(Failure)?;
    }
    let (checked, late_creates) = check_write_log(&sim, NS).map_err(Failure)?;
    let total = sim.list("widgets.example.com", Some(NS))?.len();
    Ok(format!(
        "{total} widgets + children, {churned} churn ops; converged {} in {:.0}s; reassigned \
         after kill {:.1}s, freeze {:.1}s, partition {:.1}s (bound {:.0}s); {checked} replica \
         writes all on versions labelled for the writer, {late_creates} late child creates; \
         the partitioned and the frozen replica saw {fenced_late} and {fenced_thawed} writes \
         refused (409); caches ≤ {max_ratio:.2}× share",
        steps.join(" "),
        started.elapsed().as_secs_f64(),
        after_kill.as_secs_f64(),
        after_freeze.as_secs_f64(),
        after_partition.as_secs_f64(),
        ORPHAN_BOUND.as_secs_f64(),
    ))
}
