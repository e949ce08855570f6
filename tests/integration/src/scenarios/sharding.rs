//! Scenario `sharding`: a sharded widget controller in replica processes of its own
//! ([`crate::shard_replica`]: each its own user, client, tokio runtime and clock), reconciling
//! 3,000 widgets (a CRD) and a child ConfigMap each, under churn, while the ring scales
//! 1 → 3 → 2 → 4; one replica is killed (SIGKILL), one frozen past its lease (SIGSTOP, then
//! SIGCONT) and one partitioned from the server (its requests held, then delivered late).
//!
//! ```text
//!   a ─────────────────────────────────────────────────────────────────────────────►
//!   b, c join ──────────── c SIGKILL
//!                               d, e join ─ d SIGSTOP ··· SIGCONT ─ e partitioned ··· healed ─►
//!   members:  1        3          2        4       3            4        3             4
//! ```
//!
//! On a real kube-apiserver (`--server real`) the same replica processes run, each with a
//! kubeconfig of its own (a user by client certificate for the replica and one for its
//! sharder), on 400 widgets unless `--widgets` says otherwise (see [`REAL_WIDGETS`]); the kill
//! and the freeze and every check below are the same. The partition, which needs the
//! simulator's fault hooks (requests of one user held, then delivered), is left out there.
//!
//! Checked from the server's side (never the replicas' logs): on the simulator from its write
//! log (who wrote each revision) and the stored versions of each object; on a real server from
//! a watch started before the first widget that records every version of every widget and
//! child, the writer of each told by its `managedFields` (see [`crate::shard_history`]):
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
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use controller::sharding::shard_label;
use serde_json::{json, Value};
use sim_apiserver::SimServer;
use tokio::time::Instant;

use crate::backend::{Backend, History, Real, ServerKind};
use crate::check::{eventually, Failure, Outcome};
use crate::shard_fleet::{
    check_write_log, converged_in, explain, identity, label, name_of, replica_opts, revision_of,
    signal, sim_for, Churn, ChurnTarget, Proc, LEASE_MS,
};
use crate::shard_history::{check_versions, explain_versions, writers};
use crate::shard_replica::{sharder_user, widget_crd, ReplicaOpts, RING};
use crate::{fail, Opts};

pub(super) const NS: &str = "shards";
pub(super) const WIDGETS: usize = 3000;
/// The widgets on a real kube-apiserver. The bound that counts is [`ORPHAN_BOUND`]: the
/// killed and the frozen replica's widgets relabelled within 2 s of their lease running out.
/// There, on the project's 2-core machine shared with etcd, the replicas and the recording
/// watch, the sharder relabelled about a hundred widgets a second (each write an etcd write
/// and an event to a dozen watches), so 1,000 widgets (307 held by the killed replica) left
/// 101 unassigned at the bound; 400 were reassigned in 3.3–5.0 s (load average 5–7).
pub(super) const REAL_WIDGETS: usize = 400;
/// The rebalance bound sharding was designed to: lease duration + 2 s from the moment the
/// owner died.
const ORPHAN_BOUND: Duration = Duration::from_millis(LEASE_MS + 2000);
pub(super) const CONVERGE: Duration = Duration::from_secs(60);
pub(super) const WIDGETS_RESOURCE: &str = "widgets.example.com";

/// The server and what the scenario reads of it besides its current state: on the simulator
/// its write log (through `sim`), on a real server the recorded versions of every widget and
/// child. Shared with the range mode's scenario ([`super::shard_ranges`]).
pub(super) struct Cluster {
    pub(super) server: Arc<dyn Backend>,
    pub(super) sim: Option<SimServer>,
    widgets: Box<dyn History>,
    children: Box<dyn History>,
    /// Where the replicas' kubeconfigs are written on a real server; removed on drop.
    dir: Option<PathBuf>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Cluster {
    pub(super) async fn start(kind: ServerKind, ids: &[&str]) -> Result<Cluster, Failure> {
        let (sim, server): (Option<SimServer>, Arc<dyn Backend>) = match kind {
            ServerKind::Sim => {
                let sim = sim_for(ids, NS).await.map_err(Failure)?;
                (Some(sim.clone()), Arc::new(sim))
            }
            ServerKind::Real => {
                let real = Real::start(real_apiserver::ServerOptions::default()).await?;
                real.create(
                    "customresourcedefinitions.apiextensions.k8s.io",
                    None,
                    widget_crd(),
                )
                .map_err(Failure)?;
                eventually("the widgets to be served", Duration::from_secs(30), || {
                    real.list(WIDGETS_RESOURCE, Some(NS)).map(|_| ())
                })
                .await?;
                (None, Arc::new(real))
            }
        };
        // Before the first widget: each object's first recorded version is its creation.
        let widgets = server.record(WIDGETS_RESOURCE, NS).map_err(Failure)?;
        let children = server.record("configmaps", NS).map_err(Failure)?;
        let dir = match &sim {
            Some(_) => None,
            None => {
                let dir = std::env::temp_dir().join(format!("sharding-{}", std::process::id()));
                std::fs::create_dir_all(&dir).map_err(|e| Failure(e.to_string()))?;
                Some(dir)
            }
        };
        Ok(Cluster {
            server,
            sim,
            widgets,
            children,
            dir,
        })
    }

    /// The fleet's server for replicas `ids`, seeded with `opts.widgets` widgets (the server's
    /// default count otherwise): the cluster, how many widgets, and how long seeding took.
    pub(super) async fn seeded(
        opts: &Opts,
        ids: &[&str],
    ) -> Result<(Cluster, usize, Duration), Failure> {
        let cluster = Cluster::start(opts.server, ids).await?;
        let widgets = opts.widgets.unwrap_or(match opts.server {
            ServerKind::Sim => WIDGETS,
            ServerKind::Real => REAL_WIDGETS,
        });
        let seeding = Instant::now();
        seed(&cluster.server, widgets).await?;
        Ok((cluster, widgets, seeding.elapsed()))
    }

    /// Churn over the first `widgets` widgets, through the simulator's test API or the real
    /// server's backend; paused.
    pub(super) fn churn(&self, widgets: usize) -> Churn {
        match &self.sim {
            Some(sim) => Churn::start(sim.clone(), NS, widgets),
            None => Churn::start(BackendChurn(self.server.clone()), NS, widgets),
        }
    }

    /// The options of replica `id`: on the simulator, its users' tokens; on a real server,
    /// kubeconfigs for a user of its own and one for its sharder, by client certificate.
    pub(super) fn replica(&self, id: &str, opts: &Opts) -> Result<ReplicaOpts, Failure> {
        let mut replica = match (&self.sim, &self.dir) {
            (Some(sim), _) => replica_opts(sim, id, NS),
            (None, Some(dir)) => {
                let me = identity(id);
                let mut files = Vec::new();
                for user in [me.clone(), sharder_user(&me)] {
                    let path = dir.join(format!("{user}.kubeconfig"));
                    let text = self.server.kubeconfig_for(&user).map_err(Failure)?;
                    write_private(&path, &text)?;
                    files.push(path.display().to_string());
                }
                ReplicaOpts {
                    kubeconfigs: Some((files[0].clone(), files[1].clone())),
                    ..real_opts(&me)
                }
            }
            (None, None) => return Err(Failure("no directory for the kubeconfigs".into())),
        };
        if let Some(qps) = opts.replica_qps {
            replica.qps = qps;
        }
        replica.shared_budgets = u64::from(opts.shared_budgets);
        Ok(replica)
    }

    pub(super) fn list(&self, resource: &str) -> Result<Vec<Value>, Failure> {
        self.server.list(resource, Some(NS)).map_err(Failure)
    }

    /// The history of widget `name` and its child, for a failure message.
    fn explain(&self, name: &str) -> String {
        match &self.sim {
            Some(sim) => explain(sim, NS, name),
            None => {
                let child = crate::shard_replica::child_name(name);
                let widgets = HashMap::from([(name.to_string(), self.widgets.versions(name))]);
                let children = HashMap::from([(child.clone(), self.children.versions(&child))]);
                explain_versions(&widgets, &children, name)
            }
        }
    }

    fn labelled(&self, who: &str) -> Result<Vec<String>, Failure> {
        let shard = shard_label(RING);
        Ok(self
            .list(WIDGETS_RESOURCE)?
            .iter()
            .filter(|w| label(w, &shard).as_deref() == Some(who))
            .map(|w| name_of(w).to_string())
            .collect())
    }

    /// Gives `who` work: a new `spec.size` for every widget it holds, written four at a time
    /// so that on a real server too (a write takes milliseconds there) the work arrives
    /// faster than the replica gets through it, and its workers have writes in flight when
    /// the fault that follows strikes.
    async fn bump(&self, who: &str, size: i64) -> Result<usize, Failure> {
        let held = self.labelled(who)?;
        let patch = json!({"spec": {"size": size}});
        in_lanes(&self.server, held.clone(), move |server, name| {
            server
                .merge_patch(WIDGETS_RESOURCE, Some(NS), &name, patch.clone())
                .map(|_| ())
        })
        .await?;
        Ok(held.len())
    }

    /// Every version of every widget and ConfigMap now stored, by name, once the recording has
    /// caught up with the server (on the simulator, its own history).
    pub(super) async fn recorded(
        &self,
    ) -> Result<(HashMap<String, Vec<Value>>, HashMap<String, Vec<Value>>), Failure> {
        let current: Vec<(bool, String, u64)> = self
            .list(WIDGETS_RESOURCE)?
            .iter()
            .map(|w| (true, name_of(w).to_string(), revision_of(w)))
            .chain(
                self.list("configmaps")?
                    .iter()
                    .map(|c| (false, name_of(c).to_string(), revision_of(c))),
            )
            .collect();
        // Every object's current version recorded: the watch has caught up with the end.
        eventually(
            "the recording to reach the end",
            Duration::from_secs(30),
            || {
                self.widgets.whole()?;
                self.children.whole()?;
                for (widget, name, revision) in &current {
                    let history = if *widget {
                        &self.widgets
                    } else {
                        &self.children
                    };
                    let last = history.versions(name).last().map(revision_of);
                    if last != Some(*revision) {
                        return Err(format!(
                            "{name} recorded up to {last:?}, stored at {revision}"
                        ));
                    }
                }
                Ok(())
            },
        )
        .await?;
        let mut widgets = HashMap::new();
        let mut children = HashMap::new();
        for (widget, name, _) in current {
            if widget {
                widgets.insert(name.clone(), self.widgets.versions(&name));
            } else {
                children.insert(name.clone(), self.children.versions(&name));
            }
        }
        Ok((widgets, children))
    }

    /// The fence check over the whole run, from the simulator's write log or from the real
    /// server's recorded versions: (replica writes checked, late child creates).
    async fn check_writes(&self) -> Result<(usize, usize, String), Failure> {
        if let Some(sim) = &self.sim {
            let (checked, late) = check_write_log(sim, NS).map_err(Failure)?;
            return Ok((checked, late, "the write log".into()));
        }
        let (widgets, children) = self.recorded().await?;
        let checked = check_versions(&widgets, &children).map_err(Failure)?;
        let versions: usize = widgets
            .values()
            .chain(children.values())
            .map(Vec::len)
            .sum();
        let mut by = writers(&widgets);
        for (who, n) in writers(&children) {
            *by.entry(who).or_default() += n;
        }
        Ok((
            checked.writes,
            checked.late_creates,
            format!(
                "{versions} recorded versions, writers by managedFields {by:?}, {} drain \
                 acknowledgements each on a draining version",
                checked.acknowledgements
            ),
        ))
    }
}

/// A replica's options on a real server, but for its kubeconfigs: the simulator's timings
/// ([`replica_opts`]), with no URL or tokens.
fn real_opts(identity: &str) -> ReplicaOpts {
    ReplicaOpts {
        url: String::new(),
        token: String::new(),
        sharder_token: String::new(),
        kubeconfigs: None,
        identity: identity.to_string(),
        namespace: NS.into(),
        lease_ms: LEASE_MS,
        renew_ms: crate::shard_fleet::RENEW_MS,
        retry_ms: crate::shard_fleet::RETRY_MS,
        workers: 4,
        delay_ms: 0,
        status_ms: 200,
        qps: 2000,
        shared_budgets: 0,
        mode: crate::shard_replica::Mode::Label,
    }
}

/// Writes `text` to `path`, readable by this user only: a kubeconfig holds a private key.
fn write_private(path: &std::path::Path, text: &str) -> Result<(), Failure> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Failure(format!("writing {}: {e}", path.display())))?;
    file.write_all(text.as_bytes())
        .map_err(|e| Failure(format!("writing {}: {e}", path.display())))
}

/// Churn through a [`Backend`].
pub(super) struct BackendChurn(pub(super) Arc<dyn Backend>);

impl ChurnTarget for BackendChurn {
    fn create_widget(&self, ns: &str, name: &str, size: i64) -> Result<(), String> {
        self.0
            .create(WIDGETS_RESOURCE, Some(ns), widget(name, size))
            .map(|_| ())
    }

    fn set_size(&self, ns: &str, name: &str, size: i64) -> Result<(), String> {
        self.0
            .merge_patch(
                WIDGETS_RESOURCE,
                Some(ns),
                name,
                json!({"spec": {"size": size}}),
            )
            .map(|_| ())
    }
}

fn widget(name: &str, size: i64) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": name}, "spec": {"size": size}})
}

/// Creates `w-0` .. `w-{n-1}`, four at a time (a real server's writes wait on etcd).
pub(super) async fn seed(server: &Arc<dyn Backend>, n: usize) -> Result<(), Failure> {
    let names = (0..n).map(|i| format!("w-{i}")).collect();
    in_lanes(server, names, |server, name| {
        server
            .create(WIDGETS_RESOURCE, Some(NS), widget(&name, 0))
            .map(|_| ())
    })
    .await
}

/// `write` for each of `names`, in four lanes at once (blocking threads: a real server's
/// backend blocks on each request).
pub(super) async fn in_lanes<F>(
    server: &Arc<dyn Backend>,
    names: Vec<String>,
    write: F,
) -> Result<(), Failure>
where
    F: Fn(&dyn Backend, String) -> Result<(), String> + Clone + Send + 'static,
{
    let lanes = 4;
    let mut tasks = Vec::new();
    for lane in 0..lanes {
        let (server, write) = (server.clone(), write.clone());
        let mine: Vec<String> = names.iter().skip(lane).step_by(lanes).cloned().collect();
        tasks.push(tokio::task::spawn_blocking(move || {
            mine.into_iter().try_for_each(|name| write(&*server, name))
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| Failure(format!("a lane of writes: {e}")))?
            .map_err(Failure)?;
    }
    Ok(())
}

/// Waits until the server is converged on `procs` as members and every replica's caches hold
/// exactly its share; returns the largest cache / (total / members) ratio.
async fn converge(
    cluster: &Cluster,
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
        let widgets = cluster.list(WIDGETS_RESOURCE).map_err(|e| e.0)?;
        let children = cluster.list("configmaps").map_err(|e| e.0)?;
        let owned = converged_in(&widgets, children, NS, &members).map_err(|e| {
            // The first widget named in the reason, with its history and its child's.
            let history = e
                .split_whitespace()
                .find(|w| w.starts_with("w-"))
                .map(|w| cluster.explain(w))
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
    cluster: &Cluster,
    gone: &str,
    held: &[String],
    live: &[String],
    since: Instant,
) -> Result<Duration, Failure> {
    let shard = shard_label(RING);
    let deadline = since + ORPHAN_BOUND;
    loop {
        let widgets = cluster.list(WIDGETS_RESOURCE)?;
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

/// Waits until each of `joiners` is labelled on some widget: the ring has seen them and the
/// hand-over is under way.
async fn moving(cluster: &Cluster, joiners: &[String]) -> Result<(), Failure> {
    eventually("the joiners get widgets", CONVERGE, || {
        for joiner in joiners {
            if cluster.labelled(joiner).map_err(|e| e.0)?.is_empty() {
                return Err(format!("{joiner} has none yet"));
            }
        }
        Ok(())
    })
    .await
}

/// The scenario.
pub async fn sharding(opts: Opts) -> Outcome {
    let started = Instant::now();
    let (cluster, widgets, seeded) = Cluster::seeded(&opts, &["a", "b", "c", "d", "e"]).await?;
    let mut procs: BTreeMap<String, Proc> = BTreeMap::new();
    let mut steps = Vec::new();
    let mut max_ratio: f64 = 0.0;
    let spawn = |procs: &mut BTreeMap<String, Proc>, id: &str| -> Result<(), Failure> {
        let proc = Proc::spawn(&cluster.replica(id, &opts)?).map_err(Failure)?;
        procs.insert(proc.identity.clone(), proc);
        Ok(())
    };
    let churn = cluster.churn(widgets);

    // 1: one replica.
    spawn(&mut procs, "a")?;
    let (ratio, took) = converge(&cluster, &procs, "on 1 replica").await?;
    max_ratio = max_ratio.max(ratio);
    steps.push(format!("1:{:.0}s", took.as_secs_f64()));

    // 1 → 3, under churn until the move is under way.
    churn.set(true);
    spawn(&mut procs, "b")?;
    spawn(&mut procs, "c")?;
    moving(&cluster, &[identity("b"), identity("c")]).await?;
    churn.set(false);
    let (ratio, took) = converge(&cluster, &procs, "on 3 replicas").await?;
    max_ratio = max_ratio.max(ratio);
    steps.push(format!("3:{:.0}s", took.as_secs_f64()));

    // 3 → 2: c killed.
    churn.set(true);
    let c = procs.remove(&identity("c")).ok_or(Failure("no c".into()))?;
    let held = cluster.labelled(&c.identity)?;
    let killed_at = Instant::now();
    c.kill().await.map_err(Failure)?;
    let live: Vec<String> = procs.keys().cloned().collect();
    let after_kill = reassigned(&cluster, &identity("c"), &held, &live, killed_at).await?;
    churn.set(false);
    let (ratio, took) = converge(&cluster, &procs, "on 2 replicas after the kill").await?;
    max_ratio = max_ratio.max(ratio);
    steps.push(format!("2:{:.0}s", took.as_secs_f64()));

    // 2 → 4.
    churn.set(true);
    spawn(&mut procs, "d")?;
    spawn(&mut procs, "e")?;
    moving(&cluster, &[identity("d"), identity("e")]).await?;
    churn.set(false);
    let (ratio, took) = converge(&cluster, &procs, "on 4 replicas").await?;
    max_ratio = max_ratio.max(ratio);
    steps.push(format!("4:{:.0}s", took.as_secs_f64()));

    // d frozen past its lease: SIGSTOP until its widgets are the others', then SIGCONT.
    churn.set(true);
    let d_id = identity("d");
    let pid = procs[&d_id].pid().map_err(Failure)?;
    let fenced_before_freeze = procs[&d_id].status().map_or(0, |s| s.fenced);
    cluster.bump(&d_id, 2001).await?;
    let held = cluster.labelled(&d_id)?;
    let frozen_at = Instant::now();
    signal(pid, "-STOP").map_err(Failure)?;
    let live: Vec<String> = procs.keys().filter(|k| **k != d_id).cloned().collect();
    let after_freeze = reassigned(&cluster, &d_id, &held, &live, frozen_at).await;
    // Resumed whatever happened: a stopped process outlives the scenario otherwise.
    signal(pid, "-CONT").map_err(Failure)?;
    let after_freeze = after_freeze?;
    moving(&cluster, std::slice::from_ref(&d_id)).await?;
    churn.set(false);
    let (ratio, took) = converge(&cluster, &procs, "on 4 replicas after the freeze").await?;
    max_ratio = max_ratio.max(ratio);
    steps.push(format!("thaw:{:.0}s", took.as_secs_f64()));
    let fenced_thawed = procs[&d_id].status().map_or(0, |s| s.fenced) - fenced_before_freeze;

    // e partitioned, on the simulator only (the fault is its own): its requests (controller,
    // Lease, sharder) held in the network until its widgets are the others', then delivered
    // late.
    let partition = match &cluster.sim {
        Some(sim) => {
            churn.set(true);
            let e_id = identity("e");
            let fenced_before = procs[&e_id].status().map_or(0, |s| s.fenced);
            cluster.bump(&e_id, 2002).await?;
            let held = cluster.labelled(&e_id)?;
            let partitioned_at = Instant::now();
            sim.faults().partition_user(&e_id);
            sim.faults().partition_user(&sharder_user(&e_id));
            let live: Vec<String> = procs.keys().filter(|k| **k != e_id).cloned().collect();
            let after_partition = reassigned(&cluster, &e_id, &held, &live, partitioned_at).await?;
            sim.faults().heal_user(&e_id);
            sim.faults().heal_user(&sharder_user(&e_id));
            moving(&cluster, std::slice::from_ref(&e_id)).await?;
            churn.set(false);
            let (ratio, took) =
                converge(&cluster, &procs, "on 4 replicas after the partition").await?;
            max_ratio = max_ratio.max(ratio);
            steps.push(format!("heal:{:.0}s", took.as_secs_f64()));
            let fenced_late = procs[&e_id].status().map_or(0, |s| s.fenced) - fenced_before;
            Some((after_partition, fenced_late))
        }
        None => None,
    };

    let churned = churn.finish().await;
    for (_, proc) in std::mem::take(&mut procs) {
        proc.stop().await.map_err(Failure)?;
    }
    let (checked, late_creates, source) = cluster.check_writes().await?;
    let total = cluster.list(WIDGETS_RESOURCE)?.len();
    let partition = match partition {
        Some((after, fenced)) => (
            format!(", partition {:.1}s", after.as_secs_f64()),
            format!(", the partitioned one {fenced}"),
        ),
        None => (
            ", no partition (a fault of the simulator's)".into(),
            String::new(),
        ),
    };
    let (partition, partition_fenced) = partition;
    Ok(format!(
        "{}: {total} widgets + children (seeded in {:.0}s), {churned} churn ops; converged {} \
         in {:.0}s; reassigned after kill {:.1}s, freeze {:.1}s{partition} (bound {:.0}s); \
         from {source}: {checked} replica writes all on versions labelled for the writer, \
         {late_creates} late child creates; writes refused (409): the frozen replica \
         {fenced_thawed}{partition_fenced}; caches ≤ {max_ratio:.2}× share",
        cluster.server.name(),
        seeded.as_secs_f64(),
        steps.join(" "),
        started.elapsed().as_secs_f64(),
        after_kill.as_secs_f64(),
        after_freeze.as_secs_f64(),
        ORPHAN_BOUND.as_secs_f64(),
    ))
}
