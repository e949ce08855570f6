//! `cargo xtask demo --replicas N --mode range`: the sharded widget controller of
//! [`crate::sharded`] in range mode ([`RangeShard`]): no sharder and no labels; each replica
//! process lists, watches, caches and reconciles only the virtual ranges of the server's shard
//! hash it holds. Progress per replica every second (ranges held/acting, objects cached,
//! reconciles) while one replica joins and one leaves, then the object writes each move cost:
//! the touches (SH23) the simulator stored in its window.
//!
//! The replicas are this binary re-executed (`informer-demo range-replica ...`, [`replica_main`]);
//! the simulator, the widgets, their churn and the reconcile's outcome are the label mode's
//! ([`crate::shard_fleet`], [`crate::shard_replica`]).

use std::collections::BTreeMap;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use controller::leader_election::LeaderElectionConfig;
use controller::sharding::{
    touch_annotation, ApiRingLeases, FenceError, RangeShard, RangeTable, RangeWriter, Ring,
};
use controller::{Action, CancellationToken};
use serde_json::{json, Value};
use sim_apiserver::SimServer;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use workqueue::shared_informer::reflector::store_index::{shard_hash, DynamicObject, Object};
use workqueue::shared_informer::reflector::{Client, ClusterConfig, Credentials, RateLimit};
use workqueue::{default_controller_rate_limiter, RateLimitingQueue};

use crate::shard_fleet::{
    create_widget, identity, name_of, sim_for, Churn, LEASE_MS, RENEW_MS, RETRY_MS,
};
use crate::shard_replica::{
    child_name, configmaps, spec_size, user_agent, widgets, GROUP, KIND, RING,
};
use crate::sharded::{ShardedArgs, IDS};

const NS: &str = "shards";
/// The replicas' request rate (burst twice that): a simulator on this machine answers far
/// faster than client-go's 50 requests/s (the label mode's replicas get the same).
const QPS: u32 = 2000;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// What a range replica reports in its status lines:
/// `RANGE held=21 acting=21 cached=2100 reconciles=5120 fenced=0`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RangeStatus {
    /// Ranges published as held.
    held: u64,
    /// Ranges acted on.
    acting: u64,
    /// Widgets and children in the held ranges' caches.
    cached: u64,
    /// Reconciles run.
    reconciles: u64,
    /// Writes refused (the fence, or an ordinary conflict).
    fenced: u64,
}

impl RangeStatus {
    /// Parses a `RANGE ...` line; `None` for any other line.
    fn parse(line: &str) -> Option<Self> {
        let rest = line.strip_prefix("RANGE ")?;
        let mut status = RangeStatus::default();
        for field in rest.split_whitespace() {
            let (key, value) = field.split_once('=')?;
            let value: u64 = value.parse().ok()?;
            match key {
                "held" => status.held = value,
                "acting" => status.acting = value,
                "cached" => status.cached = value,
                "reconciles" => status.reconciles = value,
                "fenced" => status.fenced = value,
                _ => {}
            }
        }
        Some(status)
    }
}

/// The `range-replica` subcommand: `args` are `URL TOKEN IDENTITY NAMESPACE`. It prints a
/// status line every 200 ms and stops on a line `stop` on stdin, or when stdin closes.
pub fn replica_main(args: &[String]) -> ExitCode {
    let [url, token, identity, namespace] = args else {
        eprintln!("range-replica: usage: range-replica URL TOKEN IDENTITY NAMESPACE");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("range-replica: cannot build the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(replica(url, token, identity, namespace)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("range-replica: {message}");
            ExitCode::FAILURE
        }
    }
}

/// One replica: its ring membership, its range shard (widgets, owning their ConfigMaps) and its
/// controller, until told to stop.
async fn replica(url: &str, token: &str, identity: &str, ns: &str) -> Result<(), String> {
    let mut config = ClusterConfig::new(url).map_err(err)?;
    config.credentials = Credentials::Token(token.into());
    config.user_agent = user_agent(identity);
    config.rate_limit = Some(RateLimit::new(f64::from(QPS), 2 * QPS));
    let client = Client::new(&config).map_err(err)?;
    // The ring has a token of its own, cancelled once the shard has left: its lease is held
    // while the shard releases its ranges, so that a graceful stop costs no object write.
    let (stop, ring_stop) = (CancellationToken::new(), CancellationToken::new());

    let mut election = LeaderElectionConfig::new(RING, identity);
    election.lease_duration = Duration::from_millis(LEASE_MS);
    election.renew_deadline = Duration::from_millis(RENEW_MS);
    election.retry_period = Duration::from_millis(RETRY_MS);
    let ring = Ring::new(RING, election, ApiRingLeases::new(client.clone(), ns)).map_err(err)?;
    let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    let shard: RangeShard<DynamicObject> =
        RangeShard::new(&ring, client, widgets(), ns, queue).owns(configmaps(), KIND);
    let reconciles = Arc::new(AtomicU64::new(0));
    let fenced = Arc::new(AtomicU64::new(0));
    let tasks = [
        tokio::spawn({
            let (ring, stop) = (ring.clone(), ring_stop.clone());
            async move {
                if let Err(error) = ring.run(ring.lock(), stop).await {
                    tracing::error!(%error, "the replica cannot join its ring");
                }
            }
        }),
        tokio::spawn({
            let (shard, ring, stop) = (shard.clone(), ring.clone(), stop.clone());
            async move { shard.run(&ring, stop).await }
        }),
        tokio::spawn({
            let me = identity.to_string();
            let (cache, reconciles, fenced) = (shard.clone(), reconciles.clone(), fenced.clone());
            shard
                .clone()
                .run_controller(4, stop.clone(), move |widget, writer| {
                    let (me, cache) = (me.clone(), cache.clone());
                    let (reconciles, fenced) = (reconciles.clone(), fenced.clone());
                    async move {
                        reconciles.fetch_add(1, Ordering::Relaxed);
                        let result = reconcile(&me, &cache, &widget, &writer).await;
                        if matches!(result, Err(FenceError::Fenced(_))) {
                            fenced.fetch_add(1, Ordering::Relaxed);
                        }
                        result
                    }
                })
        }),
    ];

    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            line = stdin.next_line() => match line {
                Ok(Some(line)) if line.trim() != "stop" => continue,
                _ => break,
            },
            _ = tick.tick() => println!(
                "RANGE held={} acting={} cached={} reconciles={} fenced={}",
                shard.held().len(),
                shard.acting().len(),
                shard.cached(),
                reconciles.load(Ordering::Relaxed),
                fenced.load(Ordering::Relaxed),
            ),
        }
    }
    stop.cancel();
    let [ring_task, shard_task, controller_task] = tasks;
    let _ = controller_task.await;
    let _ = shard_task.await;
    ring_stop.cancel();
    let _ = ring_task.await;
    Ok(())
}

/// The label mode's reconcile, through the range writer: child ConfigMap `<name>-cfg` with
/// `data.size = spec.size` (created labelled with its owner's range), then
/// `status {size, by: me}` on the widget.
async fn reconcile(
    me: &str,
    shard: &RangeShard<DynamicObject>,
    widget: &DynamicObject,
    writer: &RangeWriter<DynamicObject>,
) -> Result<Action, FenceError> {
    let size = spec_size(&widget.data);
    let name = widget.name();
    let ns = widget.namespace().unwrap_or_default();
    match shard.child(&format!("{ns}/{}", child_name(name))) {
        None => {
            let Some(uid) = widget.uid() else {
                return Ok(Action::Done);
            };
            let child = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": child_name(name), "ownerReferences": [{
                    "apiVersion": format!("{GROUP}/v1"), "kind": KIND, "name": name,
                    "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
                "data": {"size": size.to_string()},
            });
            match writer.create_child(widget, &child).await {
                Ok(_) => {}
                // Created by the range's previous holder and not cached yet: try again then.
                Err(FenceError::ChildExists { .. }) => {
                    return Ok(Action::RequeueAfter(Duration::from_millis(200)))
                }
                Err(e) => return Err(e),
            }
        }
        Some(child) => {
            let current = child.data.get("data").and_then(|d| d.get("size"));
            if current.and_then(Value::as_str) != Some(size.to_string().as_str()) {
                writer
                    .merge_patch_child(&child, &json!({"data": {"size": size.to_string()}}))
                    .await?;
            }
        }
    }
    let status = widget.data.get("status");
    let done = status.and_then(|s| s.get("size")).and_then(Value::as_i64) == Some(size)
        && status.and_then(|s| s.get("by")).and_then(Value::as_str) == Some(me);
    if !done {
        writer
            .merge_patch(widget, &json!({"status": {"size": size, "by": me}}))
            .await?;
    }
    Ok(Action::Done)
}

/// A range replica process and its last status line.
struct RangeProc {
    child: Child,
    stdin: Option<ChildStdin>,
    status: Arc<Mutex<Option<RangeStatus>>>,
}

impl RangeProc {
    /// Starts `informer-demo range-replica` as replica `id` of `sim`.
    fn spawn(sim: &SimServer, id: &str) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(err)?;
        let mut child = tokio::process::Command::new(exe)
            .args([
                "range-replica".to_string(),
                sim.url(),
                format!("{id}-token"),
            ])
            .args([identity(id), NS.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(err)?;
        let status = Arc::new(Mutex::new(None));
        let stdout = child.stdout.take().ok_or("no stdout")?;
        tokio::spawn({
            let status = status.clone();
            async move {
                let mut lines = tokio::io::BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some(s) = RangeStatus::parse(&line) {
                        *status.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
                    }
                }
            }
        });
        Ok(Self {
            stdin: child.stdin.take(),
            child,
            status,
        })
    }

    /// Its last status, if it printed one.
    fn status(&self) -> Option<RangeStatus> {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A graceful stop: `stop` on its stdin, and its exit awaited (its shard Lease released).
    async fn stop(mut self) -> Result<(), String> {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"stop\n").await;
        }
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(status) => status.map(|_| ()).map_err(err),
            Err(_) => {
                self.child.start_kill().map_err(err)?;
                Err("a replica did not stop within 10 s".into())
            }
        }
    }
}

/// One progress line per second for `seconds`: per replica, ranges held/acting, objects cached
/// and reconciles (in all, and per second).
async fn progress(
    procs: &BTreeMap<String, RangeProc>,
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
                status.held, status.acting, status.cached, status.reconciles, rate
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
        procs.insert(identity(id), RangeProc::spawn(&sim, id)?);
    }
    let churn = Churn::start(sim.clone(), NS, args.widgets);
    churn.set(true);
    let mut last = BTreeMap::new();
    progress(&procs, &mut last, args.phase_seconds, started).await;

    let joiner = IDS[args.replicas];
    println!("---- {} joins", identity(joiner));
    let join_from = sim.revision() + 1;
    procs.insert(identity(joiner), RangeProc::spawn(&sim, joiner)?);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_line_is_parsed_and_other_lines_are_not() {
        let line = "RANGE held=21 acting=20 cached=2100 reconciles=5120 fenced=3";
        assert_eq!(
            RangeStatus::parse(line),
            Some(RangeStatus {
                held: 21,
                acting: 20,
                cached: 2100,
                reconciles: 5120,
                fenced: 3,
            })
        );
        assert_eq!(RangeStatus::parse("STATUS widgets=1"), None);
        assert_eq!(RangeStatus::parse("RANGE held=x"), None);
    }
}
