//! Scenario `leader-election`: three replicas of a controller compete for one
//! `coordination.k8s.io/v1` Lease through their own clients (each its own identity and token),
//! and the leader writes a ConfigMap every 100 ms through an `Api` its `LeaseGuard` protects.
//! Each replica runs on a runtime of its own, on a thread of its own, so that one can be frozen
//! (its thread blocked, as SIGSTOP or a long GC pause would) without the others noticing.
//!
//! The leader is then, in turn: cancelled (it releases the lease), partitioned from the server
//! (every request hangs), slowed (every answer 400 ms late, less than the renew deadline), and
//! frozen for longer than the lease, then resumed. On a real kube-apiserver (`--server real`)
//! the partition and the slowing, which only the simulator can inject, are left out; the
//! cancel and the freeze (a blocked thread) and every check below are the same.
//!
//! Checked at the end:
//! - on the server, no write is made by a replica other than the Lease's holder at that moment:
//!   the Lease's and the ConfigMap's histories (the simulator's own, or a watch's on a real
//!   server, see [`crate::backend::History`]) are merged by resourceVersion (the server's one
//!   order of writes), so no clock is involved; a frozen leader that resumed and wrote would
//!   show here;
//! - every takeover in the Lease's history came after the previous holder's last renewal plus the
//!   lease duration (the replicas share this process's clock, so their timestamps compare), and
//!   within lease duration + twice the jittered retry period of the moment the leader stopped
//!   renewing;
//! - the intervals in which replicas acted as leader (from `on_started_leading` to the sending
//!   of their last guarded write that succeeded) never overlap;
//! - the slowed leader kept the lease.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use controller::leader_election::{parse_micro_time, ApiLeaseLock};
use controller::{LeaderElectionConfig, LeaderElector};
use parking_lot::Mutex;
use serde_json::{json, Value};
use sim_apiserver::SimServer;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::DynamicObject;
use workqueue::shared_informer::reflector::{
    Api, Client, ClusterConfig, Credentials, Patch, PatchOptions,
};

use crate::backend::{Backend, Real, ServerKind};
use crate::check::{eventually, Failure, Outcome};
use crate::harness::{config_for, configmaps};
use crate::{ensure, Opts};

const NS: &str = "le";
const LOCK: &str = "writer-lock";
const WRITES: &str = "leader-writes";
const REPLICAS: usize = 3;
const LEASE: Duration = Duration::from_secs(3);
const RENEW_DEADLINE: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(500);
const MARGIN: Duration = Duration::from_secs(1);
/// How soon after a cancel another replica must have taken over (its next attempt, jittered,
/// with room to spare). The cancelled replica sits out this long before it competes again, so
/// that it never races the standbys for the lease it has just released: restarted after a
/// second, it sometimes won that race on a loaded machine, and then kept its lease.
const TAKEOVER_AFTER_RELEASE: Duration = Duration::from_millis(RETRY.as_millis() as u64 * 3 + 1000);

/// What a replica did, by a clock all replicas share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    Started,
    Wrote,
    Stopped,
}

type Log = Arc<Mutex<Vec<(usize, Act, Instant)>>>;

/// Orders for one replica.
enum Order {
    /// End the current term (the lease is released), then compete again once
    /// [`TAKEOVER_AFTER_RELEASE`] has passed.
    Cancel,
    /// Block the replica's thread for this long: nothing of it runs meanwhile.
    Freeze(Duration),
}

fn identity(i: usize) -> String {
    format!("replica-{i}")
}

fn elector_config(i: usize) -> LeaderElectionConfig {
    let mut c = LeaderElectionConfig::new(LOCK, identity(i));
    c.lease_duration = LEASE;
    c.renew_deadline = RENEW_DEADLINE;
    c.retry_period = RETRY;
    c.release_on_cancel = true;
    c.guard_margin = Some(MARGIN);
    c
}

/// One replica: terms of leadership one after another until `stop`.
async fn replica(
    i: usize,
    config: ClusterConfig,
    mut orders: mpsc::UnboundedReceiver<Order>,
    log: Log,
    stop: CancellationToken,
) {
    let client = match Client::new(&config) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(replica = i, error = %e, "no client");
            return;
        }
    };
    let writes: Api<DynamicObject> = Api::namespaced_with(client.clone(), configmaps(), NS);
    while !stop.is_cancelled() {
        let lock = ApiLeaseLock::new(client.clone(), NS, LOCK, identity(i));
        let elector = match LeaderElector::new(elector_config(i), lock) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(replica = i, error = %e, "bad election config");
                return;
            }
        };
        let term = stop.child_token();
        let (log, writes) = (log.clone(), writes.clone());
        let run = elector.run_leading(term.clone(), move |leader, guard| async move {
            log.lock().push((i, Act::Started, Instant::now()));
            // Every write checks the guard, read from the clock right before sending: lapsed if
            // this thread was frozen.
            let writes = guard.protect(writes);
            let mut seq = 0u64;
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tokio::select! {
                    _ = leader.cancelled() => break,
                    _ = tick.tick() => {}
                }
                seq += 1;
                let body = json!({"data": {"writer": identity(i), "seq": seq.to_string()}});
                // A write acts as leader when it is sent (the guard is checked right then), not
                // when its answer comes back: an answer held up by the slowed network and then
                // by the freeze that follows reached this task after the next leader started,
                // and stamped at that moment it made the terms overlap though the write had
                // landed before the takeover (the server's order showed it).
                let sent = Instant::now();
                if writes
                    .patch(WRITES, &PatchOptions::default(), &Patch::Merge(body))
                    .await
                    .is_ok()
                {
                    log.lock().push((i, Act::Wrote, sent));
                }
            }
            log.lock().push((i, Act::Stopped, Instant::now()));
        });
        tokio::pin!(run);
        let mut cancelled = false;
        loop {
            tokio::select! {
                _ = &mut run => break,
                order = orders.recv() => match order {
                    Some(Order::Cancel) => {
                        cancelled = true;
                        term.cancel();
                    }
                    // Blocking on purpose: this is the fault (the whole runtime stops).
                    Some(Order::Freeze(d)) => std::thread::sleep(d),
                    None => term.cancel(),
                },
            }
        }
        if stop.is_cancelled() {
            break;
        }
        // Compete again a little later (a restarted pod); after a cancel, only once another
        // replica has had its time to take the released lease over.
        let pause = if cancelled {
            TAKEOVER_AFTER_RELEASE
        } else {
            Duration::from_secs(1)
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.cancelled() => {}
        }
    }
}

/// The current holder per the server.
fn holder(server: &dyn Backend) -> Option<String> {
    let lease = server
        .get("leases.coordination.k8s.io", Some(NS), LOCK)
        .ok()?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_string)
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// Runs the scenario.
pub async fn leader_election(opts: Opts) -> Outcome {
    // The simulator, when the scenario runs on it: the partition and the slowing need it.
    let (sim, server): (Option<SimServer>, Arc<dyn Backend>) = match opts.server {
        ServerKind::Sim => {
            let mut builder = SimServer::builder()
                .history_limit(50_000)
                .history_max_versions(200_000);
            for i in 0..REPLICAS {
                builder = builder.user_token(format!("token-{i}"), identity(i));
            }
            let sim = builder.start().await?;
            (Some(sim.clone()), Arc::new(sim))
        }
        ServerKind::Real => (
            None,
            Arc::new(Real::start(real_apiserver::ServerOptions::default()).await?),
        ),
    };
    server
        .create(
            "configmaps",
            Some(NS),
            json!({"metadata": {"name": WRITES}, "data": {}}),
        )
        .map_err(Failure)?;
    let lease_history = server
        .record("leases.coordination.k8s.io", NS)
        .map_err(Failure)?;
    let write_history = server.record("configmaps", NS).map_err(Failure)?;
    let base = match &sim {
        Some(sim) => config_for(sim)?,
        None => server.config()?,
    };
    let log: Log = Arc::default();
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let mut orders = Vec::new();
    let mut threads = Vec::new();
    for i in 0..REPLICAS {
        let mut config = base.clone();
        if sim.is_some() {
            // Each replica its own user, so that faults can pick one.
            config.credentials = Credentials::Token(format!("token-{i}").into());
        }
        // A request to a partitioned server is abandoned well before the guard's margin runs out.
        config.request_timeout = Some(Duration::from_millis(800));
        let (tx, rx) = mpsc::unbounded_channel();
        orders.push(tx);
        let (log, stop) = (log.clone(), stop.clone());
        threads.push(
            std::thread::Builder::new()
                .name(format!("replica-{i}"))
                .spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("a runtime");
                    rt.block_on(replica(i, config, rx, log, stop));
                })?,
        );
    }
    let leader_index = |who: &str| (0..REPLICAS).find(|i| identity(*i) == who);
    let wait_leader = |not: Option<String>, what: &'static str| {
        let server = server.clone();
        async move {
            eventually(what, LEASE * 4, || match holder(&*server) {
                Some(h) if Some(&h) != not.as_ref() => Ok(h),
                h => Err(format!("holder {h:?}")),
            })
            .await
        }
    };
    let mut takeovers = Vec::new();
    let first = wait_leader(None, "a first leader").await?;
    let mut report = vec![format!("{first} led first")];

    // 1. Cancelled: it releases, another takes over at its next attempt. The order goes once the
    //    leader knows it leads: the server names a holder as soon as its acquiring write lands,
    //    and a replica cancelled before it has read the answer was never leading, so releases
    //    nothing, and, restarted under the same identity, renews its own lease and keeps it.
    let i = leader_index(&first).ok_or_else(|| Failure(format!("unknown holder {first}")))?;
    let started = |log: &Log| {
        log.lock()
            .iter()
            .any(|(r, act, _)| *r == i && matches!(act, Act::Started))
    };
    eventually("the first leader to know it leads", LEASE, || {
        started(&log)
            .then_some(())
            .ok_or_else(|| format!("{first} has not started leading"))
    })
    .await?;
    let at = Instant::now();
    orders[i].send(Order::Cancel).ok();
    let second = wait_leader(Some(first.clone()), "a leader after the cancel").await?;
    takeovers.push(("cancel", at.elapsed()));
    ensure!(
        at.elapsed() <= TAKEOVER_AFTER_RELEASE,
        "after a release, the takeover took {:?}",
        at.elapsed()
    );

    // 2. Partitioned: its requests hang; it steps down after the renew deadline, another takes
    //    over once the lease has expired by its own observation.
    // 3. Slowed, but within the renew deadline: it keeps the lease.
    //    Both are faults of the simulator's; on a real server the second leader goes on.
    let third = match &sim {
        Some(sim) => {
            let at = Instant::now();
            sim.faults().partition_user(&second);
            let third = wait_leader(Some(second.clone()), "a leader after the partition").await?;
            takeovers.push(("partition", at.elapsed()));
            sim.faults().heal_user(&second);

            sim.faults().slow_user(&third, Duration::from_millis(400));
            tokio::time::sleep(LEASE * 2).await;
            let still = holder(sim);
            sim.faults().slow_user(&third, Duration::ZERO);
            ensure!(
                still.as_deref() == Some(third.as_str()),
                "a leader slowed by 400 ms lost the lease to {still:?}"
            );
            third
        }
        None => second.clone(),
    };

    // 4. Frozen past its lease, then resumed: another takes over; it must not write again.
    let at = Instant::now();
    let i = leader_index(&third).ok_or_else(|| Failure(format!("unknown holder {third}")))?;
    orders[i]
        .send(Order::Freeze(LEASE + Duration::from_secs(3)))
        .ok();
    let fourth = wait_leader(Some(third.clone()), "a leader after the freeze").await?;
    takeovers.push(("freeze", at.elapsed()));
    // Let the frozen replica resume and run for a while.
    tokio::time::sleep(LEASE * 2).await;
    report.push(match &sim {
        Some(_) => format!(
            "then {second} (after cancel), {third} (after partition, kept it while slowed), {fourth} (after freeze)"
        ),
        None => format!(
            "then {second} (after cancel), {fourth} (after freeze); no partition or slowing on a real server"
        ),
    });

    stop.cancel();
    for t in threads {
        let _ = tokio::task::spawn_blocking(move || t.join()).await;
    }

    // The server's order of writes: Lease versions and guarded writes, by resourceVersion.
    let leases = lease_history.versions(LOCK);
    let writes = write_history.versions(WRITES);
    ensure!(
        leases.len() > 10,
        "only {} Lease versions recorded",
        leases.len()
    );
    let guarded_writes = check_no_write_by_a_non_holder(&leases, &writes)?;
    let transitions = check_takeovers_after_the_lease(&leases, LEASE)?;
    // The freeze forces one, and on the simulator the partition another.
    let forced = if sim.is_some() { 2 } else { 1 };
    ensure!(
        transitions >= forced,
        "only {transitions} forced takeovers in the Lease's history, want {forced}"
    );
    let bound = LEASE + RETRY.mul_f64(2.0 * 2.2) + Duration::from_millis(500);
    for (what, took) in &takeovers {
        ensure!(
            *took <= bound,
            "after the {what}, the takeover took {took:?} (bound {bound:?})"
        );
    }

    // Acting intervals (start to last guarded write) never overlap.
    let log = log.lock().clone();
    let terms = check_acting_terms_apart(&log)?;
    let took: Vec<String> = takeovers
        .iter()
        .map(|(w, t)| format!("{w} {:.1}s", t.as_secs_f64()))
        .collect();
    Ok(format!(
        "{}; {} terms, {guarded_writes} guarded writes, {} Lease versions, no write by a non-holder; takeovers: {}",
        report.join(", "),
        terms,
        leases.len(),
        took.join(", ")
    ))
}

/// In the server's order of writes (Lease versions and guarded writes merged by resourceVersion,
/// so no clock is involved), every write carrying `data.writer` was made while the Lease named
/// that writer: the number of such writes.
pub(crate) fn check_no_write_by_a_non_holder(
    leases: &[Value],
    writes: &[Value],
) -> Result<usize, Failure> {
    let mut timeline: BTreeMap<u64, (bool, String)> = BTreeMap::new();
    for l in leases {
        let h = l["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or("")
            .to_string();
        timeline.insert(rv(l), (true, h));
    }
    let mut guarded_writes = 0;
    for w in writes {
        if let Some(writer) = w["data"]["writer"].as_str() {
            timeline.insert(rv(w), (false, writer.to_string()));
            guarded_writes += 1;
        }
    }
    let mut holder_now = String::new();
    let mut bad = Vec::new();
    for (at, (is_lease, who)) in &timeline {
        if *is_lease {
            holder_now = who.clone();
        } else if *who != holder_now {
            bad.push(format!(
                "rv {at}: {who} wrote while the Lease said {holder_now:?}"
            ));
        }
    }
    ensure!(
        bad.is_empty(),
        "writes by a non-holder: {:?}",
        &bad[..bad.len().min(5)]
    );
    Ok(guarded_writes)
}

/// In the Lease's history, every takeover (a new holder, not after a release) came at least
/// `lease` after the previous holder's last renewal (the replicas share one machine's clock, so
/// their timestamps compare): the number of takeovers.
pub(crate) fn check_takeovers_after_the_lease(
    leases: &[Value],
    lease: Duration,
) -> Result<usize, Failure> {
    let mut last: Option<(String, SystemTime)> = None;
    let mut transitions = 0;
    for l in leases {
        let spec = &l["spec"];
        let h = spec["holderIdentity"].as_str().unwrap_or("").to_string();
        let renew = spec["renewTime"].as_str().and_then(parse_micro_time);
        let acquire = spec["acquireTime"].as_str().and_then(parse_micro_time);
        let released = h.is_empty();
        if let (Some((prev, prev_renew)), Some(acquire)) = (&last, acquire) {
            if !released && !prev.is_empty() && *prev != h {
                transitions += 1;
                let gap = acquire.duration_since(*prev_renew).unwrap_or_default();
                ensure!(
                    gap >= lease,
                    "{h} took the lease from {prev} {gap:?} after its last renewal, before the lease of {lease:?} ran out"
                );
            }
        }
        if let Some(renew) = renew {
            last = Some((h, renew));
        }
    }
    Ok(transitions)
}

/// The terms in which replicas acted as leader, from `Started` to their last `Wrote` (a term
/// never stopped, as a killed replica's, ends at its last write), by a clock every replica
/// shares: none may begin before the one before it ended. The number of terms.
pub(crate) fn check_acting_terms_apart<T: Ord + Copy + std::fmt::Debug>(
    log: &[(usize, Act, T)],
) -> Result<usize, Failure> {
    let mut terms: Vec<(usize, T, T)> = Vec::new();
    let mut open: BTreeMap<usize, (T, T)> = BTreeMap::new();
    for (i, act, at) in log {
        match act {
            Act::Started => {
                if let Some((s, e)) = open.insert(*i, (*at, *at)) {
                    terms.push((*i, s, e));
                }
            }
            Act::Wrote => {
                if let Some(t) = open.get_mut(i) {
                    t.1 = *at;
                }
            }
            Act::Stopped => {
                if let Some((s, e)) = open.remove(i) {
                    terms.push((*i, s, e));
                }
            }
        }
    }
    terms.extend(open.into_iter().map(|(i, (s, e))| (i, s, e)));
    terms.sort_by_key(|t| t.1);
    for w in terms.windows(2) {
        ensure!(
            w[1].1 >= w[0].2,
            "replica {} acted as leader from {:?} while replica {} still did until {:?}",
            w[1].0,
            w[1].1,
            w[0].0,
            w[0].2
        );
    }
    Ok(terms.len())
}
