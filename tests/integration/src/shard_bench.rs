//! The sharding benchmark (`integration-suite shard-bench [--quick] [--mode label|range|both]
//! [--rounds N]`, run by `cargo xtask bench`): replica processes of the sharded widget
//! controller, in label mode ([`crate::shard_replica`]) and in range mode
//! ([`crate::shard_range_replica`]), whose reconcile waits 20 ms per key, with 4 workers each,
//! against the embedded simulator. The same figures for each mode:
//!
//! - **Throughput with 1, 2 and 4 replicas**: once the ring has converged, every widget's
//!   `spec.size` is bumped; the figure is the replicas' status writes that follow, divided by the
//!   time between the first and the last of them (the server's write log), so that seeding the
//!   bump does not count; with 2 and 4 against N × one replica's of the same round.
//! - **Rebalance after a join** (2 → 3) and **after a kill** (3 → 2, SIGKILL): from the event
//!   (the process's start; the kill) to the server converged on the new members (every widget
//!   reconciled by its owner, children following, each replica's cache at its share); the kill
//!   includes the lease running out.
//! - **Writes and requests per moved widget**: the object writes each move cost (label mode: the
//!   sharder's label writes and the old owners' acknowledgements of their drains; range mode: the
//!   touches, SH23) with, in range mode, the claims ConfigMaps' writes beside them; and every
//!   request the replicas made over the move (`SimServer::user_counters`), per moved widget.
//! - **Cache per replica** at convergence (widgets and children), against an even share.
//! - **Bytes received per replica**, counted by the server per user from the replicas' start to
//!   the end of the throughput run (label mode: the replica's user and its sharder candidate's),
//!   against what an unsharded list and watch of every widget and ConfigMap, started at the same
//!   moment in this process, received over the same span.
//!
//! With `--rounds N` the modes alternate (label, range, label, range...) and the figures are the
//! medians, each with its rounds' spread. Prints `bench-result {json}` lines (read by
//! `cargo xtask bench`; names say the mode) and a summary comparing the modes.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use controller::sharding::{owner_of, RangeTable};
use controller::CancellationToken;
use serde_json::{json, Value};
use sim_apiserver::{SimServer, UserSnapshot};
use workqueue::shared_informer::reflector::store_index::{shard_hash, DynamicObject};
use workqueue::shared_informer::reflector::{Client, ClusterConfig, Credentials};
use workqueue::shared_informer::SharedInformerFactory;

use crate::shard_fleet::{
    converged, converged_range, create_widget, identity, replica_opts, sim_for, touches, Proc,
    LEASE_MS,
};
use crate::shard_replica::{configmaps, widgets, Mode};

const NS: &str = "bench";
const WORKERS: usize = 4;
const DELAY_MS: u64 = 20;
/// The simulator's user of this process's own client (the unsharded watch): `sim_for`'s token.
const OBSERVER: &str = "admin";
const IDS: [&str; 5] = ["a", "b", "c", "d", "e"];

struct Args {
    quick: bool,
    modes: Vec<Mode>,
    rounds: usize,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        quick: false,
        modes: vec![Mode::Label, Mode::Range],
        rounds: 1,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--quick" => parsed.quick = true,
            "--mode" => {
                parsed.modes = match it.next().map(String::as_str) {
                    Some("both") => vec![Mode::Label, Mode::Range],
                    Some(mode) => vec![Mode::parse(mode)?],
                    None => return Err("--mode needs label, range or both".into()),
                }
            }
            "--rounds" => {
                parsed.rounds = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or("--rounds needs a number above 0")?
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(parsed)
}

/// The `shard-bench` subcommand.
pub fn main(args: &[String]) -> ExitCode {
    let args = match parse(args) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("shard-bench: {message}");
            return ExitCode::from(2);
        }
    };
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
    match runtime.block_on(bench(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("shard-bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// One figure of one round.
#[derive(Debug, Clone)]
struct Figure {
    name: String,
    unit: &'static str,
    value: f64,
    /// Same-round baseline and its name.
    baseline: Option<(f64, String)>,
    /// value / baseline, only where higher is better (throughput).
    ratio: Option<f64>,
    note: String,
}

fn figure(name: impl Into<String>, unit: &'static str, value: f64, note: String) -> Figure {
    Figure {
        name: name.into(),
        unit,
        value,
        baseline: None,
        ratio: None,
        note,
    }
}

fn mode_name(mode: Mode) -> String {
    format!("sharding, {} mode", mode.as_str())
}

type Procs = BTreeMap<String, Proc>;

fn spawn(sim: &SimServer, procs: &mut Procs, id: &str, mode: Mode) -> Result<(), String> {
    let mut opts = replica_opts(sim, id, NS);
    opts.workers = WORKERS;
    opts.delay_ms = DELAY_MS;
    opts.mode = mode;
    let proc = Proc::spawn(&opts)?;
    procs.insert(proc.identity.clone(), proc);
    Ok(())
}

/// The objects (widgets and children) in a replica's controller caches.
fn cached(proc: &Proc, mode: Mode) -> Option<u64> {
    let status = proc.status()?;
    Some(match mode {
        Mode::Label => status.widgets + status.children,
        // Range mode's `widgets` counts objects and children.
        Mode::Range => status.widgets,
    })
}

/// Why the server or a replica's cache is not converged on `procs`, if it is not; else the
/// widgets each owns.
fn converged_now(
    sim: &SimServer,
    procs: &Procs,
    mode: Mode,
) -> Result<BTreeMap<String, u64>, String> {
    let members: Vec<String> = procs.keys().cloned().collect();
    let owned = match mode {
        Mode::Label => converged(sim, NS, &members)?,
        Mode::Range => converged_range(sim, NS, &members)?,
    };
    let table = RangeTable::new(members.iter().map(String::as_str));
    for (id, proc) in procs {
        let status = proc
            .status()
            .ok_or_else(|| format!("{id}: no status yet"))?;
        // A widget and its child each.
        let share = 2 * owned[id];
        if cached(proc, mode) != Some(share) {
            return Err(format!("{id}: cache not yet at its share {share}"));
        }
        let ranges = table.ranges_of(id).len() as u64;
        if mode == Mode::Range && (status.held != ranges || status.acting != ranges) {
            return Err(format!(
                "{id}: holds {} and acts on {} ranges, not {ranges}",
                status.held, status.acting
            ));
        }
    }
    Ok(owned)
}

/// Waits (deadline 180 s) until [`converged_now`]; returns the widgets each owns and, for
/// `first` (a replica's identity), how long after the call it first reconciled.
async fn converge(
    sim: &SimServer,
    procs: &Procs,
    mode: Mode,
    first: Option<&str>,
) -> Result<(BTreeMap<String, u64>, Option<Duration>), String> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(180);
    let mut first_reconcile = None;
    loop {
        if first_reconcile.is_none() {
            let reconciled = first
                .and_then(|id| procs.get(id))
                .and_then(Proc::status)
                .is_some_and(|s| s.reconciles > 0);
            if reconciled {
                first_reconcile = Some(started.elapsed());
            }
        }
        let why = match converged_now(sim, procs, mode) {
            Ok(owned) => return Ok((owned, first_reconcile)),
            Err(why) => why,
        };
        if Instant::now() >= deadline {
            return Err(format!("not converged within 180 s: {why}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Each user's counters now.
fn users(sim: &SimServer) -> BTreeMap<String, UserSnapshot> {
    sim.user_counters()
}

/// What `user` cost between `before` and `after`.
fn spent(
    before: &BTreeMap<String, UserSnapshot>,
    after: &BTreeMap<String, UserSnapshot>,
    user: &str,
) -> UserSnapshot {
    let (b, a) = (
        before.get(user).copied().unwrap_or_default(),
        after.get(user).copied().unwrap_or_default(),
    );
    UserSnapshot {
        requests: a.requests - b.requests,
        bytes: a.bytes - b.bytes,
        read_bytes: a.read_bytes - b.read_bytes,
    }
}

/// The requests of every user but this process's own between `before` and `after`: the
/// replicas' (and in label mode their sharders').
fn replica_requests(
    before: &BTreeMap<String, UserSnapshot>,
    after: &BTreeMap<String, UserSnapshot>,
) -> u64 {
    after
        .keys()
        .filter(|user| *user != OBSERVER)
        .map(|user| spent(before, after, user).requests)
        .sum()
}

/// Stored writes in `NS` after `revision` (Leases aside), by kind.
#[derive(Debug, Default)]
struct Writes {
    /// By a sharder (label mode).
    sharder: u64,
    /// Range mode's claims ConfigMaps.
    claims: u64,
    /// By a replica to a widget whose owner under `members` it is not: in label mode, the old
    /// owner's acknowledgement of a drain.
    acks: u64,
    /// Every other replica write (status, children).
    replica: u64,
}

fn writes_since(sim: &SimServer, revision: u64, owners: &BTreeMap<String, String>) -> Writes {
    let claims_prefix = format!("{}-ranges-", crate::shard_replica::RING);
    let mut writes = Writes::default();
    for w in sim.write_log() {
        if w.revision <= revision || w.namespace != NS || w.resource == "leases" {
            continue;
        }
        if w.user.starts_with("sharder-") {
            writes.sharder += 1;
        } else if w.resource == "configmaps" && w.name.starts_with(&claims_prefix) {
            writes.claims += 1;
        } else if w.resource == "widgets" && owners.get(&w.name) != Some(&w.user) {
            writes.acks += 1;
        } else if w.user.starts_with("replica-") {
            writes.replica += 1;
        }
    }
    writes
}

/// Each widget's owner (by name) under `members`.
fn owners(
    sim: &SimServer,
    mode: Mode,
    members: &[String],
) -> Result<BTreeMap<String, String>, String> {
    let table = RangeTable::new(members.iter().map(String::as_str));
    let mut owners = BTreeMap::new();
    for widget in sim
        .list("widgets.example.com", Some(NS))
        .map_err(|e| e.to_string())?
    {
        let name = crate::shard_fleet::name_of(&widget).to_string();
        let owner = match mode {
            Mode::Label => owner_of(&format!("{NS}/{name}"), members.iter().map(String::as_str)),
            Mode::Range => {
                let uid = widget.pointer("/metadata/uid").and_then(Value::as_str);
                table.owner_of_hash(shard_hash(uid.unwrap_or_default()))
            }
        };
        owners.insert(name, owner.ok_or("no members")?.to_string());
    }
    Ok(owners)
}

/// This process's unsharded list and watch of every widget and ConfigMap of `NS`: the baseline
/// of the replicas' bytes.
fn observe(sim: &SimServer, stop: &CancellationToken) -> Result<(), String> {
    let mut config = ClusterConfig::new(&sim.url()).map_err(|e| e.to_string())?;
    config.credentials = Credentials::Token(sim.token().unwrap_or_default().into());
    let client = Client::new(&config).map_err(|e| e.to_string())?;
    let factory = SharedInformerFactory::with_client(client).namespace(NS);
    factory
        .informer::<DynamicObject>(widgets())
        .map_err(|e| e.to_string())?;
    factory
        .informer::<DynamicObject>(configmaps())
        .map_err(|e| e.to_string())?;
    factory.start(stop);
    Ok(())
}

async fn shutdown(procs: Procs) -> Result<(), String> {
    for (_, proc) in procs {
        proc.stop().await?;
    }
    Ok(())
}

/// The replicas' status writes after `from` per second, from the first to the last.
fn throughput(sim: &SimServer, from: u64) -> Result<(usize, f64, f64), String> {
    let times: Vec<SystemTime> = sim
        .write_log()
        .into_iter()
        .filter(|w| {
            w.revision > from
                && w.resource == "widgets"
                && w.namespace == NS
                && w.user.starts_with("replica-")
        })
        .map(|w| w.at)
        .collect();
    let (Some(first), Some(last)) = (times.iter().min(), times.iter().max()) else {
        return Err("no status write after the bump".into());
    };
    let span = last
        .duration_since(*first)
        .unwrap_or_default()
        .as_secs_f64();
    Ok((times.len(), span, times.len() as f64 / span.max(1e-3)))
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// One ring of `n` replicas in `mode`: its figures and throughput, and with `rebalance` the join
/// and the kill.
async fn ring(
    mode: Mode,
    n: usize,
    widgets: usize,
    rebalance: bool,
) -> Result<(Vec<Figure>, f64), String> {
    let prefix = mode_name(mode);
    let mut out = Vec::new();
    let sim = sim_for(&IDS, NS).await?;
    for i in 0..widgets {
        create_widget(&sim, NS, &format!("w-{i}"), 0)?;
    }
    let mut procs = Procs::new();
    let seeded = sim.revision();
    let before = users(&sim);
    let observer = CancellationToken::new();
    observe(&sim, &observer)?;
    let started = Instant::now();
    for id in &IDS[..n] {
        spawn(&sim, &mut procs, id, mode)?;
    }
    let (owned, _) = converge(&sim, &procs, mode, None).await?;
    let assign_time = started.elapsed();
    let members: Vec<String> = procs.keys().cloned().collect();
    let requests = replica_requests(&before, &users(&sim));
    let writes = writes_since(&sim, seeded, &owners(&sim, mode, &members)?);
    let caches: Vec<u64> = procs.values().filter_map(|p| cached(p, mode)).collect();
    let table = RangeTable::new(members.iter().map(String::as_str));
    let ranges: Vec<usize> = members.iter().map(|m| table.ranges_of(m).len()).collect();
    println!(
        "{prefix}, {n} replica(s): {widgets} widgets assigned and reconciled in {:.1}s, \
         {requests} requests ({:.2}/widget), {} sharder and {} claims writes; owned {owned:?}, \
         caches {caches:?}, range mode's table would give them {ranges:?} of 64 ranges",
        assign_time.as_secs_f64(),
        requests as f64 / widgets as f64,
        writes.sharder,
        writes.claims,
    );
    if n == 1 {
        let note = match mode {
            Mode::Label => format!(
                "{:.2} sharder writes per assignment",
                writes.sharder as f64 / widgets as f64
            ),
            Mode::Range => format!("{} claims writes in all", writes.claims),
        };
        out.push(figure(
            format!("{prefix}: API requests per widget, initial assignment and first reconcile (1 replica)"),
            "requests",
            requests as f64 / widgets as f64,
            note,
        ));
    }
    let max_cache = caches.iter().copied().max().unwrap_or(0);
    let sharder_cache = match mode {
        Mode::Label => "; each sharder candidate also caches every object's metadata".into(),
        Mode::Range => format!("; {ranges:?} of the 64 ranges"),
    };
    out.push(figure(
        format!("{prefix}: largest replica cache, {n} replica(s), {widgets} widgets and children"),
        "objects",
        max_cache as f64,
        format!(
            "{:.2}× an even share{sharder_cache}",
            max_cache as f64 * n as f64 / (2 * widgets) as f64
        ),
    ));

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
    converge(&sim, &procs, mode, None).await?;
    let after = users(&sim);
    observer.cancel();
    let (count, span, tput) = throughput(&sim, bump_from)?;
    println!("{prefix}, {n} replica(s): {count} reconciles in {span:.2}s: {tput:.0}/s");

    // Bytes received, from the start to the end of the throughput run.
    out.push(bytes_figure(&prefix, mode, n, &procs, &before, &after));

    if rebalance {
        let (join, kill) = join_and_kill(&sim, &mut procs, mode, n).await?;
        out.extend(join);
        out.extend(kill);
    }
    shutdown(procs).await?;
    Ok((out, tput))
}

/// The bytes the largest replica received from its reads (lists, watches, gets; in label mode
/// its sharder candidate's too) between `before` and `after`, against the unsharded watch's.
fn bytes_figure(
    prefix: &str,
    mode: Mode,
    n: usize,
    procs: &Procs,
    before: &BTreeMap<String, UserSnapshot>,
    after: &BTreeMap<String, UserSnapshot>,
) -> Figure {
    let unsharded = spent(before, after, OBSERVER).read_bytes;
    // (its controller's reads, its sharder candidate's, all it received with writes' answers)
    let per_replica: Vec<(u64, u64, u64)> = procs
        .keys()
        .map(|id| {
            let own = spent(before, after, id);
            let sharder = spent(before, after, &crate::shard_replica::sharder_user(id));
            (
                own.read_bytes,
                sharder.read_bytes,
                own.bytes + sharder.bytes,
            )
        })
        .collect();
    println!(
        "{prefix}, {n} replica(s): bytes received per replica {per_replica:?} (reads, its \
         sharder's reads, all with writes' answers); unsharded watch {unsharded}"
    );
    let sum = |f: fn(&(u64, u64, u64)) -> u64| per_replica.iter().map(f).sum::<u64>();
    let (own, sharder, all) = (sum(|r| r.0), sum(|r| r.1), sum(|r| r.2));
    let largest = per_replica.iter().map(|r| r.0 + r.1).max().unwrap_or(0);
    let of = |x: u64| x as f64 / (n as u64 * unsharded).max(1) as f64;
    let split = match mode {
        Mode::Label => format!(
            "; its controller {:.2}×, its sharder candidate {:.2}×",
            of(own),
            of(sharder)
        ),
        Mode::Range => String::new(),
    };
    Figure {
        baseline: Some((mb(unsharded), "one unsharded list and watch".into())),
        ..figure(
            format!("{prefix}: bytes received per replica by its reads (mean), {n} replica(s)"),
            "MB",
            mb(own + sharder) / n as f64,
            format!(
                "{:.2}× the unsharded watch's (1/N = {:.2}){split}; the largest replica {:.2}×; \
                 {:.2}× with the writes' answers",
                of(own + sharder),
                1.0 / n as f64,
                largest as f64 / unsharded.max(1) as f64,
                of(all)
            ),
        )
    }
}

/// A replica joins (n → n + 1), then is killed (SIGKILL, n + 1 → n): the figures of each move.
async fn join_and_kill(
    sim: &SimServer,
    procs: &mut Procs,
    mode: Mode,
    n: usize,
) -> Result<(Vec<Figure>, Vec<Figure>), String> {
    let prefix = mode_name(mode);
    let widgets = sim
        .list("widgets.example.com", Some(NS))
        .map_err(|e| e.to_string())?
        .len();
    let owners_before = owners(sim, mode, &procs.keys().cloned().collect::<Vec<_>>())?;

    // Join.
    let joined_rev = sim.revision();
    let before = users(sim);
    let joiner = identity(IDS[n]);
    let t = Instant::now();
    spawn(sim, procs, IDS[n], mode)?;
    let (_, first) = converge(sim, procs, mode, Some(&joiner)).await?;
    let join_time = t.elapsed();
    let end = sim.revision() + 1;
    let members: Vec<String> = procs.keys().cloned().collect();
    let owners_after = owners(sim, mode, &members)?;
    let moved = owners_after
        .iter()
        .filter(|(name, owner)| owners_before.get(*name) != Some(*owner))
        .count()
        .max(1);
    let requests = replica_requests(&before, &users(sim));
    let writes = writes_since(sim, joined_rev, &owners_after);
    let touched = touches(sim, NS, joined_rev + 1, end)? as u64;
    let first = first.map_or("-".to_string(), |d| format!("{:.1}", d.as_secs_f64()));
    println!(
        "{prefix}, join {n} → {}: {moved} widgets moved in {:.1}s (the joiner's first \
         reconcile after {first}s); {requests} requests ({:.1}/move); writes: {} sharder, {} \
         acks, {} claims, {touched} touches, {} other replica writes",
        n + 1,
        join_time.as_secs_f64(),
        requests as f64 / moved as f64,
        writes.sharder,
        writes.acks,
        writes.claims,
        writes.replica,
    );
    let per = |x: u64| x as f64 / moved as f64;
    let (object_writes, how) = match mode {
        Mode::Label => (
            writes.sharder + writes.acks,
            format!(
                "{:.1} sharder + {:.1} acknowledgements per move",
                per(writes.sharder),
                per(writes.acks)
            ),
        ),
        Mode::Range => (
            touched,
            format!(
                "{touched} touches; and {} claims ConfigMap writes in all",
                writes.claims
            ),
        ),
    };
    let join = vec![
        figure(
            format!("{prefix}: rebalance after a join ({n} → {}), {widgets} widgets", n + 1),
            "s",
            join_time.as_secs_f64(),
            format!("{moved} moved; from the process's start to converged; its first reconcile after {first} s"),
        ),
        figure(
            format!("{prefix}: object writes per moved widget (join)"),
            "writes",
            per(object_writes),
            how,
        ),
        figure(
            format!("{prefix}: API requests per moved widget (join)"),
            "requests",
            per(requests),
            format!("{:.1} status and child writes per move", per(writes.replica)),
        ),
    ];

    // Kill: the joiner, SIGKILL.
    let moved = owners_after
        .values()
        .filter(|o| **o == joiner)
        .count()
        .max(1);
    let proc = procs
        .remove(&joiner)
        .ok_or_else(|| format!("no {joiner}"))?;
    let killed_rev = sim.revision();
    let before = users(sim);
    let t = Instant::now();
    proc.kill().await?;
    converge(sim, procs, mode, None).await?;
    let kill_time = t.elapsed();
    let end = sim.revision() + 1;
    let members: Vec<String> = procs.keys().cloned().collect();
    let requests = replica_requests(&before, &users(sim));
    let writes = writes_since(sim, killed_rev, &owners(sim, mode, &members)?);
    let touched = touches(sim, NS, killed_rev + 1, end)? as u64;
    let per = |x: u64| x as f64 / moved as f64;
    println!(
        "{prefix}, kill {} → {n}: {moved} widgets moved, converged in {:.1}s (lease {LEASE_MS} \
         ms); {requests} requests; writes: {} sharder, {} claims, {touched} touches",
        n + 1,
        kill_time.as_secs_f64(),
        writes.sharder,
        writes.claims,
    );
    let (object_writes, how) = match mode {
        Mode::Label => (writes.sharder, "the sharder's relabels".to_string()),
        Mode::Range => (
            touched,
            format!(
                "{touched} touches; and {} claims ConfigMap writes in all",
                writes.claims
            ),
        ),
    };
    let kill = vec![
        figure(
            format!(
                "{prefix}: rebalance after a kill ({} → {n}), {widgets} widgets",
                n + 1
            ),
            "s",
            kill_time.as_secs_f64(),
            format!("{moved} moved; includes the {LEASE_MS} ms lease running out"),
        ),
        figure(
            format!("{prefix}: object writes per moved widget (kill)"),
            "writes",
            per(object_writes),
            how,
        ),
        figure(
            format!("{prefix}: API requests per moved widget (kill)"),
            "requests",
            per(requests),
            String::new(),
        ),
    ];
    Ok((join, kill))
}

/// One round of `mode`: 1, 2 (with the join and the kill) and 4 replicas.
async fn round(mode: Mode, widgets: usize) -> Result<Vec<Figure>, String> {
    let prefix = mode_name(mode);
    let (mut figures, one) = ring(mode, 1, widgets, false).await?;
    figures.push(figure(
        format!("{prefix}: throughput, 1 replica (4 workers, 20 ms per key)"),
        "reconciles/s",
        one,
        String::new(),
    ));
    for n in [2usize, 4] {
        let (more, tput) = ring(mode, n, widgets, n == 2).await?;
        figures.extend(more);
        figures.push(Figure {
            baseline: Some((n as f64 * one, format!("{n} × 1 replica"))),
            ratio: Some(tput / (n as f64 * one)),
            ..figure(
                format!("{prefix}: throughput, {n} replicas"),
                "reconciles/s",
                tput,
                String::new(),
            )
        });
    }
    Ok(figures)
}

/// The median of `rounds` (by value) with the rounds' spread in its note.
fn median(rounds: &[&Figure]) -> Figure {
    let mut sorted: Vec<&Figure> = rounds.to_vec();
    sorted.sort_by(|a, b| a.value.total_cmp(&b.value));
    let mut out = sorted[(sorted.len() - 1) / 2].clone();
    if let Some(ratio) = out.ratio {
        let mut ratios: Vec<f64> = rounds.iter().filter_map(|f| f.ratio).collect();
        ratios.sort_by(f64::total_cmp);
        out.ratio = Some(
            ratios
                .get((ratios.len().max(1) - 1) / 2)
                .copied()
                .unwrap_or(ratio),
        );
    }
    if rounds.len() > 1 {
        let (lo, hi) = (sorted[0].value, sorted[sorted.len() - 1].value);
        let spread = format!("median of {}, rounds {lo:.3}–{hi:.3}", rounds.len());
        out.note = if out.note.is_empty() {
            spread
        } else {
            format!("{}; {spread}", out.note)
        };
    }
    out
}

fn print_result(f: &Figure) {
    let mut line = json!({"name": f.name, "unit": f.unit, "value": f.value});
    if let Some((baseline, name)) = &f.baseline {
        line["baseline"] = json!(baseline);
        line["baseline_name"] = json!(name);
    }
    if let Some(ratio) = f.ratio {
        line["ratio"] = json!(ratio);
    }
    if !f.note.is_empty() {
        line["note"] = json!(f.note);
    }
    println!("bench-result {line}");
}

async fn bench(args: Args) -> Result<(), String> {
    let widgets = if args.quick { 800 } else { 2000 };
    let mut rounds: BTreeMap<&'static str, Vec<Vec<Figure>>> = BTreeMap::new();
    for r in 0..args.rounds {
        for &mode in &args.modes {
            println!(
                "---- round {} of {}: {} mode",
                r + 1,
                args.rounds,
                mode.as_str()
            );
            let figures = round(mode, widgets).await?;
            rounds.entry(mode.as_str()).or_default().push(figures);
        }
    }
    // Medians per mode, in the order of the first round's figures.
    let mut medians: BTreeMap<&'static str, Vec<Figure>> = BTreeMap::new();
    for &mode in &args.modes {
        let runs = &rounds[mode.as_str()];
        for f in &runs[0] {
            let same: Vec<&Figure> = runs
                .iter()
                .filter_map(|run| run.iter().find(|g| g.name == f.name))
                .collect();
            let m = median(&same);
            print_result(&m);
            medians.entry(mode.as_str()).or_default().push(m);
        }
    }
    if let (Some(label), Some(range)) = (medians.get("label"), medians.get("range")) {
        println!("\n| figure | label mode | range mode | range ÷ label |");
        println!("|---|---|---|---|");
        for l in label {
            let what = l.name.split_once(": ").map_or(l.name.as_str(), |p| p.1);
            let Some(r) = range.iter().find(|r| r.name.ends_with(what)) else {
                continue;
            };
            println!(
                "| {what} | {:.3} {} | {:.3} {} | {:.2} |",
                l.value,
                l.unit,
                r.value,
                r.unit,
                r.value / l.value
            );
        }
    }
    Ok(())
}
