//! A fleet of sharded replica processes ([`crate::shard_replica`]) against an embedded
//! simulator, and what is checked of it from the server's side: shared by the `sharding`
//! scenario, the sharding benchmark and `cargo xtask demo --replicas` (which includes this file
//! and the replica's by path).

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use controller::sharding::{drain_label, owner_of, shard_label, touch_annotation, RangeTable};
use serde_json::{json, Value};
use sim_apiserver::storage::EventType;
use sim_apiserver::SimServer;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use workqueue::shared_informer::reflector::store_index::shard_hash;

use crate::shard_replica::{
    child_name, sharder_user, widget_crd, Mode, ReplicaOpts, ReplicaStatus, RING,
};

/// Shard and sharder lease duration (ms): short, so that a death is noticed within seconds.
pub const LEASE_MS: u64 = 3000;
/// Renew deadline (ms).
pub const RENEW_MS: u64 = 2000;
/// Retry period (ms).
pub const RETRY_MS: u64 = 500;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The identity of replica `id`.
pub fn identity(id: &str) -> String {
    format!("replica-{id}")
}

/// Sends a signal to a process by its id, through `kill(1)` (no libc binding needed).
pub fn signal(pid: u32, sig: &str) -> Result<(), String> {
    let status = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .map_err(err)?;
    if !status.success() {
        return Err(format!("kill {sig} {pid}: {status}"));
    }
    Ok(())
}

/// A replica process and its last status line.
pub struct Proc {
    /// Its identity.
    pub identity: String,
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its last status.
    pub status: Arc<Mutex<Option<ReplicaStatus>>>,
}

impl Proc {
    /// Starts `integration-suite shard-replica` with `opts`.
    pub fn spawn(opts: &ReplicaOpts) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(err)?;
        let mut child = tokio::process::Command::new(exe)
            .args(opts.to_args())
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
                    if let Some(s) = ReplicaStatus::parse(&line) {
                        *status.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
                    }
                }
            }
        });
        Ok(Self {
            identity: opts.identity.clone(),
            stdin: child.stdin.take(),
            child,
            status,
        })
    }

    /// Its process id.
    pub fn pid(&self) -> Result<u32, String> {
        self.child
            .id()
            .ok_or_else(|| format!("{} has exited", self.identity))
    }

    /// Its last status, if it printed one.
    pub fn status(&self) -> Option<ReplicaStatus> {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// SIGKILL, and reaped.
    pub async fn kill(mut self) -> Result<(), String> {
        self.child.start_kill().map_err(err)?;
        self.child.wait().await.map_err(err)?;
        Ok(())
    }

    /// A graceful stop: `stop` on its stdin, and its exit awaited (its Lease released).
    pub async fn stop(mut self) -> Result<(), String> {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"stop\n").await;
        }
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(status) => {
                status.map_err(err)?;
                Ok(())
            }
            Err(_) => {
                self.child.start_kill().map_err(err)?;
                Err(format!("{} did not stop within 10 s", self.identity))
            }
        }
    }
}

/// The simulator with a user per replica and per replica's sharder, and logs large enough to
/// keep every change of the run (checked: nothing dropped).
pub async fn sim_for(ids: &[&str], ns: &str) -> Result<SimServer, String> {
    let mut builder = SimServer::builder()
        .token("admin-token")
        .write_log_limit(2_000_000)
        .history_limit(100_000)
        .history_max_versions(4_000_000)
        .max_log_events(200_000);
    for id in ids {
        builder = builder
            .user_token(format!("{id}-token"), identity(id))
            .user_token(format!("{id}-sharder-token"), sharder_user(&identity(id)));
    }
    let sim = builder.start().await.map_err(err)?;
    sim.create("namespaces", None, json!({"metadata": {"name": ns}}))
        .map_err(err)?;
    sim.create(
        "customresourcedefinitions.apiextensions.k8s.io",
        None,
        widget_crd(),
    )
    .map_err(err)?;
    Ok(sim)
}

/// A replica's options against `sim`.
pub fn replica_opts(sim: &SimServer, id: &str, ns: &str) -> ReplicaOpts {
    ReplicaOpts {
        url: sim.url(),
        token: format!("{id}-token"),
        sharder_token: format!("{id}-sharder-token"),
        kubeconfigs: None,
        identity: identity(id),
        namespace: ns.into(),
        lease_ms: LEASE_MS,
        renew_ms: RENEW_MS,
        retry_ms: RETRY_MS,
        workers: 4,
        delay_ms: 0,
        status_ms: 200,
        // A simulator on this machine answers far faster than client-go's 50 requests/s.
        qps: 2000,
        shared_budgets: 0,
        mode: Mode::Label,
    }
}

/// Creates widget `name` with `spec.size`.
pub fn create_widget(sim: &SimServer, ns: &str, name: &str, size: i64) -> Result<(), String> {
    sim.create(
        "widgets.example.com",
        Some(ns),
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": name}, "spec": {"size": size}}),
    )
    .map_err(err)?;
    Ok(())
}

pub fn label(obj: &Value, key: &str) -> Option<String> {
    obj.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
        .map(str::to_string)
}

pub fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

pub fn revision_of(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

/// Why the stored state is not converged on `members`, if it is not; else the number of
/// widgets each member owns.
pub fn converged(
    sim: &SimServer,
    ns: &str,
    members: &[String],
) -> Result<BTreeMap<String, u64>, String> {
    let widgets = sim
        .list("widgets.example.com", Some(ns))
        .map_err(|e| e.to_string())?;
    let children = sim
        .list("configmaps", Some(ns))
        .map_err(|e| e.to_string())?;
    converged_in(&widgets, children, ns, members)
}

/// [`converged`] on `widgets` and `children` (the ConfigMaps of `ns`) as read from any server.
pub fn converged_in(
    widgets: &[Value],
    children: Vec<Value>,
    ns: &str,
    members: &[String],
) -> Result<BTreeMap<String, u64>, String> {
    let children: HashMap<String, Value> = children
        .into_iter()
        .map(|c| (name_of(&c).to_string(), c))
        .collect();
    let (shard, drain) = (shard_label(RING), drain_label(RING));
    let mut owned: BTreeMap<String, u64> = members.iter().map(|m| (m.clone(), 0)).collect();
    for widget in widgets {
        let name = name_of(widget);
        let key = format!("{ns}/{name}");
        let owner = owner_of(&key, members.iter().map(String::as_str))
            .ok_or("no members")?
            .to_string();
        let labelled = label(widget, &shard);
        if labelled.as_deref() != Some(owner.as_str()) || label(widget, &drain).is_some() {
            return Err(format!("{name} labelled {labelled:?}, owner {owner}"));
        }
        let size = widget
            .pointer("/spec/size")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let by = widget.pointer("/status/by").and_then(Value::as_str);
        let done = widget.pointer("/status/size").and_then(Value::as_i64);
        if by != Some(owner.as_str()) || done != Some(size) {
            return Err(format!(
                "{name} at size {size} not reconciled by {owner}: status by {by:?} size {done:?}"
            ));
        }
        let child = children
            .get(&child_name(name))
            .ok_or_else(|| format!("{name} has no child"))?;
        let child_size = child.pointer("/data/size").and_then(Value::as_str);
        if label(child, &shard).as_deref() != Some(owner.as_str())
            || child_size != Some(size.to_string().as_str())
        {
            return Err(format!(
                "child of {name} labelled {:?} size {child_size:?}, owner {owner} size {size}",
                label(child, &shard)
            ));
        }
        *owned.entry(owner).or_default() += 1;
    }
    Ok(owned)
}

/// Range mode's [`converged`]: why the stored state is not converged on `members`, if it is
/// not; else the number of widgets each member owns: every widget reconciled at its spec by the owner of its range in
/// the members' [`RangeTable`], and its child at that size.
pub fn converged_range(
    sim: &SimServer,
    ns: &str,
    members: &[String],
) -> Result<BTreeMap<String, u64>, String> {
    let table = RangeTable::new(members.iter().map(String::as_str));
    let widgets = sim.list("widgets.example.com", Some(ns)).map_err(err)?;
    let children: BTreeMap<String, Value> = sim
        .list("configmaps", Some(ns))
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
pub fn touches(sim: &SimServer, ns: &str, from: u64, to: u64) -> Result<usize, String> {
    let touch = touch_annotation(RING);
    let mark = |v: &Value| {
        v.pointer("/metadata/annotations")
            .and_then(|a| a.get(&touch))
            .cloned()
    };
    let mut count = 0;
    for resource in ["widgets.example.com", "configmaps"] {
        for object in sim.list(resource, Some(ns)).map_err(err)? {
            if mark(&object).is_none() {
                continue;
            }
            let history = sim.history(resource, Some(ns), name_of(&object));
            count += history
                .windows(2)
                .filter(|pair| {
                    let revision = revision_of(&pair[1]);
                    (from..to).contains(&revision) && mark(&pair[0]) != mark(&pair[1])
                })
                .count();
        }
    }
    Ok(count)
}

/// What churn writes through: the simulator's test API, or any other path to a server.
pub trait ChurnTarget: Send + Sync + 'static {
    /// Creates widget `name` in `ns` with `spec.size`.
    fn create_widget(&self, ns: &str, name: &str, size: i64) -> Result<(), String>;
    /// Sets widget `name`'s `spec.size`.
    fn set_size(&self, ns: &str, name: &str, size: i64) -> Result<(), String>;
}

impl ChurnTarget for SimServer {
    fn create_widget(&self, ns: &str, name: &str, size: i64) -> Result<(), String> {
        create_widget(self, ns, name, size)
    }

    fn set_size(&self, ns: &str, name: &str, size: i64) -> Result<(), String> {
        self.patch(
            "widgets.example.com",
            Some(ns),
            name,
            &json!({"spec": {"size": size}}),
        )
        .map(|_| ())
        .map_err(err)
    }
}

/// Churn: spec updates of random widgets and a few new widgets, while `on`.
pub struct Churn {
    on: Arc<AtomicBool>,
    ops: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Churn {
    /// Starts it, paused.
    pub fn start(sim: impl ChurnTarget, ns: &str, widgets: usize) -> Self {
        let on = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (on, ops, stop) = (on.clone(), ops.clone(), stop.clone());
            let ns = ns.to_string();
            async move {
                let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
                let mut next = move || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                let mut created = 0u64;
                let mut tick = tokio::time::interval(Duration::from_millis(10));
                while !stop.load(Ordering::SeqCst) {
                    tick.tick().await;
                    if !on.load(Ordering::SeqCst) {
                        continue;
                    }
                    // About 150 ops/s: 97% spec updates, 3% new widgets.
                    for _ in 0..(1 + next() % 2) {
                        let n = next();
                        let done = if n % 100 < 3 {
                            created += 1;
                            sim.create_widget(&ns, &format!("w-new-{created}"), 1)
                                .is_ok()
                        } else {
                            let name = format!("w-{}", n % widgets as u64);
                            sim.set_size(&ns, &name, ((n >> 32) % 1000) as i64).is_ok()
                        };
                        if done {
                            ops.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
        });
        Self {
            on,
            ops,
            stop,
            task: Some(task),
        }
    }

    /// Pauses or resumes it.
    pub fn set(&self, on: bool) {
        self.on.store(on, Ordering::SeqCst);
    }

    /// Stops it; returns the operations made.
    pub async fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.ops.load(Ordering::Relaxed)
    }
}

impl Drop for Churn {
    /// A scenario that fails half-way leaves no churn behind against its simulator.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The server-side safety check over the whole run: every change a replica stored to a widget
/// or a child was made to a version labelled for it (fence), except children created while their
/// owner was another's (late creates, counted). Returns (writes checked, late creates).
pub fn check_write_log(sim: &SimServer, ns: &str) -> Result<(usize, usize), String> {
    if sim.write_log_dropped() != 0 {
        return Err("the write log dropped records: raise its limit".into());
    }
    let shard = shard_label(RING);
    let mut histories: HashMap<(String, String), Vec<Value>> = HashMap::new();
    let mut history = |resource: &str, name: &str| -> Vec<Value> {
        histories
            .entry((resource.to_string(), name.to_string()))
            .or_insert_with(|| {
                let plural = if resource == "widgets" {
                    "widgets.example.com"
                } else {
                    resource
                };
                sim.history(plural, Some(ns), name)
            })
            .clone()
    };
    // The label of `name` just before `revision`, from its stored versions; None when unknown.
    fn label_before(versions: &[Value], revision: u64, shard: &str) -> Option<Option<String>> {
        let first = versions.first().map(revision_of)?;
        if first >= revision {
            return None;
        }
        versions
            .iter()
            .take_while(|v| revision_of(v) < revision)
            .last()
            .map(|v| label(v, shard))
    }
    let (mut checked, mut late_creates) = (0, 0);
    for write in sim.write_log() {
        if write.namespace != ns || !write.user.starts_with("replica-") {
            continue;
        }
        let resource = write.resource.as_str();
        if resource != "widgets" && resource != "configmaps" {
            continue;
        }
        checked += 1;
        match write.event {
            EventType::Modified => {
                let versions = history(resource, &write.name);
                let Some(before) = label_before(&versions, write.revision, &shard) else {
                    return Err(format!(
                        "{resource}/{} changed by {} at {}: the version before is not kept",
                        write.name, write.user, write.revision
                    ));
                };
                if before.as_deref() != Some(write.user.as_str()) {
                    return Err(format!(
                        "{resource}/{} changed by {} at revision {} while labelled {before:?}",
                        write.name, write.user, write.revision
                    ));
                }
            }
            EventType::Added if resource == "configmaps" => {
                let owner = write.name.trim_end_matches("-cfg");
                let versions = history("widgets", owner);
                let before = label_before(&versions, write.revision, &shard).flatten();
                if before.as_deref() != Some(write.user.as_str()) {
                    late_creates += 1;
                }
            }
            other => {
                return Err(format!(
                    "{resource}/{}: unexpected {other:?} by {}",
                    write.name, write.user
                ))
            }
        }
    }
    if checked == 0 {
        return Err("no replica write in the log".into());
    }
    Ok((checked, late_creates))
}

/// The history of widget `name` and its child, one line per stored version (revision, writer,
/// assignment and drain labels, status), for a failure message.
pub fn explain(sim: &SimServer, ns: &str, name: &str) -> String {
    let users: HashMap<u64, String> = sim
        .write_log()
        .into_iter()
        .filter(|w| w.namespace == ns)
        .map(|w| (w.revision, w.user))
        .collect();
    let (shard, drain) = (shard_label(RING), drain_label(RING));
    let mut out = String::new();
    for (resource, object) in [
        ("widgets.example.com", name.to_string()),
        ("configmaps", child_name(name)),
    ] {
        out.push_str(&format!("\n  {resource}/{object}:"));
        for version in sim.history(resource, Some(ns), &object) {
            let rv = revision_of(&version);
            out.push_str(&format!(
                "\n    {rv} by {} label {:?} drain {:?} status {} data {}",
                users.get(&rv).map_or("?", String::as_str),
                label(&version, &shard),
                label(&version, &drain),
                version.get("status").unwrap_or(&Value::Null),
                version.get("data").unwrap_or(&Value::Null),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Range mode's convergence names the owner by the members' range table over the uid's
    /// hash, and the touch count sees exactly the versions that changed the touch mark.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn range_convergence_and_touches_are_read_from_the_server() {
        let sim = sim_for(&["a", "b"], "t").await.unwrap();
        create_widget(&sim, "t", "w-0", 3).unwrap();
        let widget = sim.get("widgets.example.com", Some("t"), "w-0").unwrap();
        let uid = widget
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap();
        let members = vec![identity("a"), identity("b")];
        let table = RangeTable::new(members.iter().map(String::as_str));
        let owner = table.owner_of_hash(shard_hash(uid)).unwrap().to_string();
        let other = members.iter().find(|m| **m != owner).unwrap().clone();
        let set = |by: &str| {
            sim.patch(
                "widgets.example.com",
                Some("t"),
                "w-0",
                &json!({"status": {"size": 3, "by": by}}),
            )
            .unwrap();
        };
        sim.create(
            "configmaps",
            Some("t"),
            json!({"metadata": {"name": "w-0-cfg"}, "data": {"size": "3"}}),
        )
        .unwrap();
        set(&other);
        let error = converged_range(&sim, "t", &members).unwrap_err();
        assert!(
            error.contains(&format!("not reconciled by {owner}")),
            "{error}"
        );
        set(&owner);
        let owned = converged_range(&sim, "t", &members).unwrap();
        assert_eq!((owned[&owner], owned[&other]), (1, 0));

        let from = sim.revision() + 1;
        assert_eq!(touches(&sim, "t", 0, from), Ok(0));
        let touch = |mark: &str| {
            sim.patch(
                "configmaps",
                Some("t"),
                "w-0-cfg",
                &json!({"metadata": {"annotations": {touch_annotation(RING): mark}}}),
            )
            .unwrap();
        };
        touch("1");
        set(&other); // not a touch
        touch("2");
        assert_eq!(touches(&sim, "t", from, sim.revision() + 1), Ok(2));
        assert_eq!(touches(&sim, "t", 0, from), Ok(0));
    }
    use crate::shard_replica::{client, widgets};
    use workqueue::shared_informer::reflector::store_index::DynamicObject;
    use workqueue::shared_informer::reflector::{Api, Patch, PatchOptions};

    /// The write-log check is what the scenario stands on: it must catch a replica writing an
    /// object labelled for another.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_to_an_object_labelled_for_another_replica_fails_the_check() {
        let sim = sim_for(&["a", "b"], "t").await.unwrap();
        create_widget(&sim, "t", "w-0", 0).unwrap();
        sim.patch(
            "widgets.example.com",
            Some("t"),
            "w-0",
            &json!({"metadata": {"labels": {shard_label(RING): "replica-b"}}}),
        )
        .unwrap();
        let write_as = |token: &str, size: i64| {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client(&sim.url(), token, 0).unwrap(), widgets(), "t");
            async move {
                api.patch(
                    "w-0",
                    &PatchOptions::default(),
                    &Patch::Merge(json!({"status": {"size": size}})),
                )
                .await
                .unwrap();
            }
        };
        write_as("b-token", 1).await;
        assert_eq!(check_write_log(&sim, "t"), Ok((1, 0)));
        write_as("a-token", 2).await;
        let error = check_write_log(&sim, "t").unwrap_err();
        assert!(
            error.contains("changed by replica-a") && error.contains("Some(\"replica-b\")"),
            "{error}"
        );
    }
}
