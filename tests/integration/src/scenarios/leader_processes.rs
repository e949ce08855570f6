//! Scenario `leader-election-processes`: three replicas of a leader-elected controller, each a
//! process of its own (`integration-suite le-replica`, reaching the server as a user of its own
//! through a kubeconfig), compete for one Lease; the leader writes a ConfigMap every 100 ms
//! through an `Api` its `LeaseGuard` protects. The leader is then killed (SIGKILL: it neither
//! releases the Lease nor sends another request), and the next one frozen (SIGSTOP) for longer
//! than the lease, then resumed (SIGCONT). The same on the simulator and on a real
//! kube-apiserver: no fault of the simulator's is used.
//!
//! Checked at the end, from the server's side (the histories of the Lease and of the written
//! ConfigMap, recorded from before the replicas started: the simulator's own, or a watch's on a
//! real server):
//! - no write by a replica other than the Lease's holder at that moment (merged by
//!   resourceVersion, the server's one order of writes); a frozen leader that resumed and wrote
//!   would show here;
//! - every takeover came after the previous holder's last renewal plus the lease duration, and
//!   both faults forced one, each within lease duration + twice the jittered retry period (and
//!   a margin) of the fault;
//! - the intervals in which replicas acted as leader (from `leading` to their last accepted
//!   write, by the processes' shared system clock) never overlap.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, ChildStdin};
use tokio::time::Instant;

use super::leader::{
    check_acting_terms_apart, check_no_write_by_a_non_holder, check_takeovers_after_the_lease, Act,
};
use crate::backend::{Backend, ServerKind};
use crate::check::{eventually, Failure, Outcome};
use crate::le_replica::{self, LEASE, RETRY};
use crate::shard_fleet::signal;
use crate::{ensure, Opts};

const NS: &str = "le-proc";
const LOCK: &str = "writer-lock";
const WRITES: &str = "leader-writes";
const REPLICAS: usize = 3;

/// What a replica process said, by the system clock in microseconds.
type Said = Arc<Mutex<Vec<(usize, String, u128)>>>;

/// One replica process.
struct Replica {
    identity: String,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Replica {
    fn spawn(i: usize, kubeconfig: &std::path::Path, said: Said) -> Result<Replica, Failure> {
        let identity = format!("replica-{i}");
        let exe = std::env::current_exe()?;
        let mut child = tokio::process::Command::new(exe)
            .args(le_replica::args(&identity, NS, LOCK, WRITES))
            .env("KUBECONFIG", kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| Failure("no stdout".into()))?;
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some((what, at)) = line.split_once(' ') {
                    if let Ok(at) = at.parse() {
                        said.lock().push((i, what.to_string(), at));
                    }
                }
            }
        });
        Ok(Replica {
            identity,
            stdin: child.stdin.take(),
            child,
        })
    }

    fn pid(&self) -> Result<u32, Failure> {
        self.child
            .id()
            .ok_or_else(|| Failure(format!("{} has exited", self.identity)))
    }

    /// A graceful stop: `stop` on its stdin (its Lease released), its exit awaited.
    async fn stop(mut self) -> Result<(), Failure> {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"stop\n").await;
        }
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(status) => {
                status?;
                Ok(())
            }
            Err(_) => {
                let _ = self.child.kill().await;
                Err(Failure(format!(
                    "{} did not stop within 10 s",
                    self.identity
                )))
            }
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

/// Runs the scenario.
pub async fn leader_election_processes(opts: Opts) -> Outcome {
    let server: Arc<dyn Backend> = match opts.server {
        // TLS: each replica reaches the simulator by a client certificate of its own.
        ServerKind::Sim => Arc::new(
            sim_apiserver::SimServer::builder()
                .tls(true)
                .history_limit(50_000)
                .history_max_versions(200_000)
                .start()
                .await?,
        ),
        ServerKind::Real => {
            Arc::new(crate::backend::Real::start(real_apiserver::ServerOptions::default()).await?)
        }
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

    let dir = std::env::temp_dir().join(format!("le-processes-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let said: Said = Arc::default();
    let mut replicas: Vec<Option<Replica>> = Vec::new();
    for i in 0..REPLICAS {
        let kubeconfig = dir.join(format!("replica-{i}.kubeconfig"));
        std::fs::write(
            &kubeconfig,
            server
                .kubeconfig_for(&format!("replica-{i}"))
                .map_err(Failure)?,
        )?;
        replicas.push(Some(Replica::spawn(i, &kubeconfig, said.clone())?));
    }
    let index_of = |who: &str| {
        who.strip_prefix("replica-")
            .and_then(|i| i.parse::<usize>().ok())
            .filter(|i| *i < REPLICAS)
            .ok_or_else(|| Failure(format!("unknown holder {who}")))
    };
    let wait_leader = |not: Option<String>, what: &'static str| {
        let server = server.clone();
        async move {
            eventually(what, LEASE * 6, || match holder(&*server) {
                Some(h) if Some(&h) != not.as_ref() => Ok(h),
                h => Err(format!("holder {h:?}")),
            })
            .await
        }
    };
    let bound = LEASE + RETRY.mul_f64(2.0 * 2.2) + Duration::from_millis(1500);
    let mut takeovers = Vec::new();
    let first = wait_leader(None, "a first leader").await?;
    let i = index_of(&first)?;
    // Let it lead for a while, its writes landing.
    eventually("the first leader to write", LEASE * 2, || {
        let wrote = said
            .lock()
            .iter()
            .filter(|(r, what, _)| *r == i && what == "wrote")
            .count();
        (wrote >= 5)
            .then_some(())
            .ok_or_else(|| format!("{first} wrote {wrote} times"))
    })
    .await?;

    // 1. Killed: no release; another takes over once the lease ran out.
    let at = Instant::now();
    let killed = replicas[i]
        .take()
        .ok_or_else(|| Failure("killed twice".into()))?;
    signal(killed.pid()?, "-KILL").map_err(Failure)?;
    let second = wait_leader(Some(first.clone()), "a leader after the kill").await?;
    takeovers.push(("kill", at.elapsed()));
    ensure!(
        at.elapsed() >= LEASE.saturating_sub(RETRY * 2),
        "{second} took over {:?} after {first} was killed, before its lease of {LEASE:?} could run out",
        at.elapsed()
    );

    // 2. Frozen past its lease, then resumed: another takes over; it must not write again.
    let j = index_of(&second)?;
    let pid = replicas[j]
        .as_ref()
        .ok_or_else(|| Failure(format!("{second} was killed")))?
        .pid()?;
    let at = Instant::now();
    signal(pid, "-STOP").map_err(Failure)?;
    let third = wait_leader(Some(second.clone()), "a leader after the freeze");
    let third = match tokio::time::timeout(LEASE + Duration::from_secs(6), third).await {
        Ok(third) => third,
        Err(_) => Err(Failure("no leader after the freeze".into())),
    };
    takeovers.push(("freeze", at.elapsed()));
    // Frozen longer than the lease whatever happened, then resumed.
    let frozen_for = LEASE + Duration::from_secs(3);
    tokio::time::sleep(frozen_for.saturating_sub(at.elapsed())).await;
    signal(pid, "-CONT").map_err(Failure)?;
    let third = third?;
    // Let the resumed replica run for a while: a write of its old term would land now.
    tokio::time::sleep(LEASE * 2).await;

    for replica in replicas.into_iter().flatten() {
        replica.stop().await?;
    }
    let _ = std::fs::remove_dir_all(&dir);

    lease_history.whole().map_err(Failure)?;
    write_history.whole().map_err(Failure)?;
    let leases = lease_history.versions(LOCK);
    let writes = write_history.versions(WRITES);
    ensure!(
        leases.len() > 10,
        "only {} Lease versions recorded",
        leases.len()
    );
    let guarded_writes = check_no_write_by_a_non_holder(&leases, &writes)?;
    let transitions = check_takeovers_after_the_lease(&leases, LEASE)?;
    ensure!(
        transitions >= 2,
        "only {transitions} forced takeovers in the Lease's history, want 2 (kill, freeze)"
    );
    for (what, took) in &takeovers {
        ensure!(
            *took <= bound,
            "after the {what}, the takeover took {took:?} (bound {bound:?})"
        );
    }

    // Acting intervals (from `leading` to the last accepted write) never overlap.
    let log: Vec<(usize, Act, u128)> = said
        .lock()
        .iter()
        .map(|(r, what, at)| {
            let act = match what.as_str() {
                "leading" => Act::Started,
                "wrote" => Act::Wrote,
                _ => Act::Stopped,
            };
            (*r, act, *at)
        })
        .collect();
    let terms = check_acting_terms_apart(&log)?;
    let took: Vec<String> = takeovers
        .iter()
        .map(|(w, t)| format!("{w} {:.1}s", t.as_secs_f64()))
        .collect();
    Ok(format!(
        "{first} led first, killed; then {second}, frozen; then {third}; {} terms, {guarded_writes} guarded writes, {} Lease versions, no write by a non-holder; takeovers: {}",
        terms,
        leases.len(),
        took.join(", ")
    ))
}
