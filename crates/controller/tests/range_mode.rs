//! Range mode end to end, on the simulator by `cargo test` and on a real kube-apiserver with
//! `ShardedListAndWatch` by `REAL_APISERVER=1 cargo test`: replicas that split 120
//! Services by the server's shard selector, through their ring's Leases and claims
//! ConfigMaps, under churn, while a member is killed (its lease left to run out), another
//! joins and a third leaves gracefully (its ranges released before its lease).
//!
//! Checked from the server's side, on a recording of every version of every object and every
//! claims ConfigMap (a watch started before the replicas):
//! - each reconcile write names its writer (`by`, on the Service and on its child ConfigMap,
//!   created by the reconcile and labelled with its owner's range), a touch names its toucher; whenever the
//!   writer of an object changes from A to B, B's write is a touch (SH23) or A's claims lost the
//!   object's range at a revision between A's last write and B's first (SH22): no object ever
//!   has two acting owners;
//! - after each step every object is reconciled by its range's owner in the live members'
//!   table, at its current spec, and only the killed member's ranges were touched (the join and
//!   the leave touch nothing);
//! - each replica caches about its share of the objects.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use controller::leader_election::LeaderElectionConfig;
use controller::sharding::{
    claims_name, parse_claims, range_label, touch_annotation, ApiRingLeases, FenceError,
    RangeShard, RangeTable, RangeWriter, Ring, CLAIMS_KEY,
};
use controller::{Action, CancellationToken};
use parking_lot::Mutex;
use serde_json::{json, Value};
use shared_informer::reflector::store_index::{shard_hash, DynamicObject, Object};
use shared_informer::reflector::{Api, Client, ClusterConfig, Patch, PatchOptions, Resource};
use shared_informer::{EventHandlerFns, SharedInformerFactory};
use sim_apiserver::TestServer;
use workqueue::{default_controller_rate_limiter, RateLimitingQueue};

const NS: &str = "ranges";
const RING: &str = "accounts";
const OBJECTS: usize = 120;

fn election(identity: &str) -> LeaderElectionConfig {
    let mut config = LeaderElectionConfig::new(RING, identity);
    config.lease_duration = Duration::from_secs(4);
    config.renew_deadline = Duration::from_secs(3);
    config.retry_period = Duration::from_millis(500);
    config
}

/// One replica: its ring membership, its range shard and its controller, stopped together.
struct Replica {
    name: String,
    stop: CancellationToken,
    /// The ring's own token: cancelled once the shard has left, so that its lease is held
    /// while it releases its ranges.
    ring_stop: CancellationToken,
    shard: RangeShard<DynamicObject>,
    /// The ring's, the shard's and the controller's tasks.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Replica {
    /// A graceful stop: the controller's and the shard's (which releases every range), then
    /// the ring's (which releases the lease).
    async fn leave(mut self) {
        self.stop.cancel();
        let ring = self.tasks.remove(0);
        for task in self.tasks {
            task.await.unwrap();
        }
        self.ring_stop.cancel();
        ring.await.unwrap();
    }

    /// A crash: every task stops where it is; nothing is released.
    fn kill(self) {
        for task in &self.tasks {
            task.abort();
        }
        self.ring_stop.cancel();
    }
}

/// A reconcile the test holds in flight: the reconcile of the object named here waits, once it
/// has said so, until the test lets it go.
#[derive(Default)]
struct Hold {
    name: Mutex<Option<String>>,
    entered: tokio::sync::Notify,
    released: tokio::sync::Notify,
    /// Told when a reconcile of the held object returns, whatever it returns.
    finished: tokio::sync::Notify,
}

impl Hold {
    async fn pass(&self, name: &str) {
        if self.name.lock().as_deref() == Some(name) {
            let released = self.released.notified();
            self.entered.notify_one();
            released.await;
        }
    }

    fn finish(&self, name: &str) {
        if self.name.lock().as_deref() == Some(name) {
            self.finished.notify_one();
        }
    }
}

fn start_replica(
    config: &ClusterConfig,
    name: &str,
    release_on_cancel: bool,
    hold: &Arc<Hold>,
) -> Replica {
    // A client of its own, as a replica in a process of its own has: its connection carries
    // its watches (at most 8 groups per resource) and its requests.
    let client = &Client::new(config).unwrap();
    let (stop, ring_stop) = (CancellationToken::new(), CancellationToken::new());
    let mut election = election(name);
    election.release_on_cancel = release_on_cancel;
    let leases = ApiRingLeases::new(client.clone(), NS);
    let ring = Ring::new(RING, election, leases).unwrap();
    let mut tasks = vec![tokio::spawn({
        let (ring, stop) = (ring.clone(), ring_stop.clone());
        async move { ring.run(ring.lock(), stop).await.unwrap() }
    })];
    let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    let accounts = Resource::namespaced("", "v1", "services");
    let shard: RangeShard<DynamicObject> =
        RangeShard::new(&ring, client.clone(), accounts, NS, queue)
            .owns(Resource::namespaced("", "v1", "configmaps"), "Service");
    tasks.push(tokio::spawn({
        let (shard, ring, stop) = (shard.clone(), ring.clone(), stop.clone());
        async move { shard.run(&ring, stop).await }
    }));
    let (me, hold, cache) = (name.to_string(), hold.clone(), shard.clone());
    tasks.push(tokio::spawn(shard.clone().run_controller(
        2,
        stop.clone(),
        move |account, writer| {
            let (me, hold, cache) = (me.clone(), hold.clone(), cache.clone());
            async move {
                let name = account.name().to_string();
                let result = reconcile(me, hold.clone(), cache, account, writer).await;
                hold.finish(&name);
                result
            }
        },
    )));
    Replica {
        name: name.to_string(),
        stop,
        ring_stop,
        shard,
        tasks,
    }
}

/// The reconcile: the Service's child ConfigMap `<name>-cfg` and the Service itself carry
/// `by: <me>` and `seen: <its spec>` (the child created through the range writer, labelled with
/// its owner's range).
async fn reconcile(
    me: String,
    hold: Arc<Hold>,
    cache: RangeShard<DynamicObject>,
    account: Arc<DynamicObject>,
    writer: RangeWriter<DynamicObject>,
) -> Result<Action, FenceError> {
    let spec = account.annotation("spec").unwrap_or_default().to_string();
    let child_name = format!("{}-cfg", account.name());
    let child = cache.child(&format!("{NS}/{child_name}"));
    let mine = |obj: &DynamicObject| {
        written(obj, "by") == Some(me.as_str()) && written(obj, "seen") == Some(spec.as_str())
    };
    if mine(&account) && child.as_deref().is_some_and(mine) {
        return Ok(Action::Done);
    }
    hold.pass(account.name()).await;
    let data = json!({"by": me, "seen": spec});
    match child {
        None => {
            let owner = json!([{"apiVersion": "v1", "kind": "Service", "name": account.name(),
                                "uid": account.uid(), "controller": true}]);
            let child = json!({"metadata": {"name": child_name, "ownerReferences": owner},
                               "data": data});
            match writer.create_child(&account, &child).await {
                Ok(_) => {}
                // Created by the range's previous holder and not in the cache yet.
                Err(FenceError::ChildExists { .. }) => {
                    return Ok(Action::RequeueAfter(Duration::from_millis(200)))
                }
                Err(error) => return Err(error),
            }
        }
        Some(child) if !mine(&child) => {
            writer
                .merge_patch_child(&child, &json!({"data": data}))
                .await?;
        }
        Some(_) => {}
    }
    writer
        .merge_patch(&account, &json!({"metadata": {"annotations": data}}))
        .await?;
    Ok(Action::Done)
}

/// Every version of every object of one resource, by name, as a watch delivered them.
#[derive(Clone, Default)]
struct Recording(Arc<Mutex<BTreeMap<String, Vec<Arc<DynamicObject>>>>>);

impl Recording {
    fn start(factory: &SharedInformerFactory, resource: Resource) -> Recording {
        let recording = Recording::default();
        let informer = factory.informer::<DynamicObject>(resource).unwrap();
        let (on_add, on_update) = (recording.clone(), recording.clone());
        informer
            .add_event_handler(
                EventHandlerFns::new()
                    .on_add(move |obj, _| on_add.push(obj))
                    .on_update(move |_, obj| on_update.push(obj)),
            )
            .unwrap();
        recording
    }

    fn push(&self, obj: &Arc<DynamicObject>) {
        self.0
            .lock()
            .entry(obj.name().to_string())
            .or_default()
            .push(obj.clone());
    }

    /// The highest resourceVersion recorded so far.
    fn last_revision(&self) -> u64 {
        self.0
            .lock()
            .values()
            .flatten()
            .map(|v| revision(v))
            .max()
            .unwrap_or(0)
    }

    fn snapshot(&self) -> BTreeMap<String, Vec<Arc<DynamicObject>>> {
        self.0.lock().clone()
    }
}

/// What a reconcile wrote, `by` or `seen`: an annotation of a Service, a data key of its child.
fn written<'a>(obj: &'a DynamicObject, field: &str) -> Option<&'a str> {
    obj.annotation(field)
        .or_else(|| obj.data.get("data")?.get(field)?.as_str())
}

/// The virtual range of an object: its uid's, or for a child the one its label names.
fn range_in(obj: &DynamicObject) -> u32 {
    match obj.label(&range_label(RING)) {
        Some(label) => label.parse().unwrap_or(u32::MAX),
        None => range_of(obj),
    }
}

fn revision(obj: &DynamicObject) -> u64 {
    obj.resource_version().unwrap_or("0").parse().unwrap_or(0)
}

fn range_of(obj: &DynamicObject) -> u32 {
    RangeTable::range_of_hash(shard_hash(obj.uid().unwrap_or_default()))
}

/// Each member's claims over time: (revision, ranges held from then on).
fn claims_history(
    maps: &BTreeMap<String, Vec<Arc<DynamicObject>>>,
) -> BTreeMap<String, Vec<(u64, BTreeSet<u32>)>> {
    let prefix = claims_name(RING, "");
    let mut out = BTreeMap::new();
    for (name, versions) in maps {
        let Some(member) = name.strip_prefix(&prefix) else {
            continue;
        };
        let history = versions
            .iter()
            .map(|v| {
                let held = v
                    .data
                    .get("data")
                    .and_then(|d| d.get(CLAIMS_KEY))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                (revision(v), parse_claims(held).unwrap())
            })
            .collect();
        out.insert(member.to_string(), history);
    }
    out
}

/// Each member's claims over time: (revision, ranges held from then on).
type ClaimsHistory = BTreeMap<String, Vec<(u64, BTreeSet<u32>)>>;
/// Every recorded version of each object, by name.
type Versions = BTreeMap<String, Vec<Arc<DynamicObject>>>;

/// The recorded ConfigMaps, split: every member's claims over time, and the children's versions.
fn claims_and_children(maps: &Recording) -> (ClaimsHistory, Versions) {
    let maps = maps.snapshot();
    let claims = claims_history(&maps);
    let children = maps
        .into_iter()
        .filter(|(name, _)| name.ends_with("-cfg"))
        .collect();
    (claims, children)
}

/// How many claims versions were written in `(from, to]`.
fn maps_claims_versions(
    claims: &BTreeMap<String, Vec<(u64, BTreeSet<u32>)>>,
    from: u64,
    to: u64,
) -> usize {
    claims
        .values()
        .flatten()
        .filter(|(r, _)| (from + 1..=to).contains(r))
        .count()
}

/// The fence check over the recording (see the module doc); the number of writer changes it
/// checked, and of touches.
fn check_owners(
    objects: &BTreeMap<String, Vec<Arc<DynamicObject>>>,
    claims: &BTreeMap<String, Vec<(u64, BTreeSet<u32>)>>,
) -> Result<(usize, usize), String> {
    let touch = touch_annotation(RING);
    let (mut switches, mut touches) = (0, 0);
    for (name, versions) in objects {
        let mut versions: Vec<&Arc<DynamicObject>> = versions.iter().collect();
        versions.sort_by_key(|v| revision(v));
        versions.dedup_by_key(|v| revision(v));
        // (writer, revision of its last write so far); a child's creator wrote its first version.
        let mut last: Option<(String, u64)> = versions.first().and_then(|v| {
            let creator = written(v, "by").filter(|by| !by.is_empty())?;
            Some((creator.to_string(), revision(v)))
        });
        for pair in versions.windows(2) {
            let (before, now) = (pair[0], pair[1]);
            let rev = revision(now);
            let writer = if now.annotation(&touch) != before.annotation(&touch) {
                touches += 1;
                let toucher = now.annotation(&touch).unwrap_or_default();
                Some((
                    toucher.split(' ').next().unwrap_or_default().to_string(),
                    true,
                ))
            } else if written(now, "by") != written(before, "by")
                || written(now, "seen") != written(before, "seen")
            {
                Some((written(now, "by").unwrap_or_default().to_string(), false))
            } else {
                None
            };
            let Some((writer, is_touch)) = writer else {
                continue;
            };
            if let Some((previous, at)) = &last {
                if *previous != writer && !is_touch {
                    switches += 1;
                    let range = range_in(now);
                    let released = claims.get(previous).is_some_and(|history| {
                        history
                            .iter()
                            .any(|(r, held)| *r > *at && *r < rev && !held.contains(&range))
                    });
                    if !released {
                        return Err(format!(
                            "{name}: written by {writer} at {rev} after {previous}'s write at \
                             {at}, with neither a touch nor a release of range {range} between"
                        ));
                    }
                }
            }
            last = Some((writer, rev));
        }
    }
    Ok((switches, touches))
}

/// Waits until every account is reconciled by the owner of its range among `members`, at its
/// current spec; `Err` with what is not, at the deadline.
async fn converged(
    server: &TestServer,
    churn_paused: &std::sync::atomic::AtomicBool,
    members: &[&str],
) -> Result<(), String> {
    churn_paused.store(true, std::sync::atomic::Ordering::SeqCst);
    let result = settled(server, members).await;
    churn_paused.store(false, std::sync::atomic::Ordering::SeqCst);
    result
}

async fn settled(server: &TestServer, members: &[&str]) -> Result<(), String> {
    let table = RangeTable::new(members.iter().copied());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let accounts = server.list("services", Some(NS)).unwrap();
        let children: BTreeMap<String, Value> = server
            .list("configmaps", Some(NS))
            .unwrap()
            .into_iter()
            .filter_map(|c| Some((c["metadata"]["name"].as_str()?.to_string(), c)))
            .collect();
        let wrong: Vec<String> = accounts
            .iter()
            .filter(|a| a["metadata"]["annotations"]["spec"].is_string())
            .filter_map(|a| {
                let uid = a["metadata"]["uid"].as_str().unwrap_or_default();
                let owner = table.owner_of_hash(shard_hash(uid)).unwrap_or_default();
                let notes = &a["metadata"]["annotations"];
                let name = a["metadata"]["name"].as_str().unwrap_or_default();
                let child = children.get(&format!("{name}-cfg"));
                let child_ok = child.is_some_and(|c| {
                    c["data"]["by"] == owner && c["data"]["seen"] == notes["spec"]
                });
                (notes["by"] != owner || notes["seen"] != notes["spec"] || !child_ok)
                    .then(|| format!("{name} (owner {owner}): {notes} child {child:?}"))
            })
            .collect();
        if wrong.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "{} not converged: {:?}",
                wrong.len(),
                &wrong[..wrong.len().min(5)]
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An object whose range moves to `joiner` when it joins `members`, its owner now and the range.
fn moving_to(joiner: &str, server: &TestServer, members: &[&str]) -> (String, String, u32) {
    let before = RangeTable::new(members.iter().copied());
    let after = RangeTable::new(members.iter().copied().chain([joiner]));
    let services = server.list("services", Some(NS)).unwrap();
    services
        .iter()
        .find_map(|s| {
            let hash = shard_hash(s["metadata"]["uid"].as_str()?);
            let range = RangeTable::range_of_hash(hash);
            (after.owner(range) == Some(joiner)).then(|| {
                let name = s["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (
                    name,
                    before.owner(range).unwrap_or_default().to_string(),
                    range,
                )
            })
        })
        .expect("an object whose range moves to the joiner")
}

async fn patch_spec(client: &Client, name: &str, spec: &str) {
    let api = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        Resource::namespaced("", "v1", "services"),
        NS,
    );
    let patch = Patch::Merge(json!({"metadata": {"annotations": {"spec": spec}}}));
    api.patch(name, &PatchOptions::default(), &patch)
        .await
        .unwrap();
}

/// Waits (the churn running) until `replicas` together act on every range, each on its own.
async fn acting_on_all(replicas: &[&Replica]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut all = BTreeSet::new();
        let mut total = 0;
        for replica in replicas {
            let acting = replica.shard.acting();
            total += acting.len();
            all.extend(acting);
        }
        if all.len() == controller::sharding::VIRTUAL_RANGES as usize && total == all.len() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} ranges acted on ({total} in all) after a minute",
            all.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_split_by_range_hand_over_without_writes_and_touch_only_a_dead_members_ranges() {
    let server = TestServer::start().await.expect("a test server");
    server
        .create("namespaces", None, json!({"metadata": {"name": NS}}))
        .unwrap();
    let config =
        ClusterConfig::from_kubeconfig_files(&[server.kubeconfig_path().to_path_buf()], None)
            .unwrap();
    let client = Client::new(&config).unwrap();
    let recorder = SharedInformerFactory::new(config.clone()).namespace(NS);
    let objects = Recording::start(&recorder, Resource::namespaced("", "v1", "services"));
    let claims = Recording::start(&recorder, Resource::namespaced("", "v1", "configmaps"));
    let stop_recording = CancellationToken::new();
    recorder.start(&stop_recording);
    for i in 0..OBJECTS {
        let account = json!({"metadata": {"name": format!("sa-{i}"), "annotations": {"spec": "0"}},
                              "spec": {"ports": [{"port": 80}]}});
        server.create("services", Some(NS), account).unwrap();
    }

    // Churn: a spec changes every 50 ms, through the test's own client, while the ring
    // changes; paused while convergence is checked.
    let churn_stop = CancellationToken::new();
    let paused = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = tokio::spawn({
        let (server_url, stop) = (server.kubeconfig_path().to_path_buf(), churn_stop.clone());
        let paused = paused.clone();
        async move {
            let config = ClusterConfig::from_kubeconfig_files(&[server_url], None).unwrap();
            let api = Api::<DynamicObject>::namespaced_with(
                Client::new(&config).unwrap(),
                Resource::namespaced("", "v1", "services"),
                NS,
            );
            let mut n = 0u64;
            while !stop.is_cancelled() {
                tokio::time::sleep(Duration::from_millis(50)).await;
                if paused.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                n += 1;
                let name = format!("sa-{}", (n * 7) % OBJECTS as u64);
                let patch = json!({"metadata": {"annotations": {"spec": n.to_string()}}});
                let _ = api
                    .patch(&name, &PatchOptions::default(), &Patch::Merge(patch))
                    .await;
            }
        }
    });

    let hold = Arc::new(Hold::default());
    let a = start_replica(&config, "a", true, &hold);
    let b = start_replica(&config, "b", true, &hold);
    let c = start_replica(&config, "c", false, &hold);

    converged(&server, &paused, &["a", "b", "c"]).await.unwrap();
    let shares: Vec<usize> = [&a, &b, &c].iter().map(|r| r.shard.cached()).collect();
    for replica in [&a, &b, &c] {
        assert!(
            replica.shard.watch_groups() <= 8,
            "{} watch groups",
            replica.shard.watch_groups()
        );
    }
    // Each Service and its child: 2 × OBJECTS objects in all.
    println!("three members: caches {shares:?} of {}", 2 * OBJECTS);
    for (replica, cached) in [&a, &b, &c].iter().zip(&shares) {
        assert!(
            *cached < 2 * OBJECTS * 6 / 10,
            "{} caches {cached} of {}: not its share",
            replica.name,
            2 * OBJECTS
        );
    }

    // c dies without releasing: its lease runs out, its ranges are touched and taken.
    let c_ranges: BTreeSet<u32> = c.shard.held().into_iter().collect();
    c.kill();
    let killed = tokio::time::Instant::now();
    acting_on_all(&[&a, &b]).await;
    println!(
        "after the kill: every range acted on again in {:?} (lease 4 s)",
        killed.elapsed()
    );
    converged(&server, &paused, &["a", "b"]).await.unwrap();

    // d joins: ranges move to it from a and b, drained and released, with no touch.
    // d joins while a reconcile of an object whose range moves to d is in flight: d must not
    // act on that range before its holder finished and released it (SH21, SH22).
    let (moving, from, range) = moving_to("d", &server, &["a", "b"]);
    *hold.name.lock() = Some(moving.clone());
    let entered = hold.entered.notified();
    patch_spec(&client, &moving, "held").await;
    entered.await;
    let join_from = objects.last_revision().max(claims.last_revision());
    let joined = tokio::time::Instant::now();
    let d = start_replica(&config, "d", true, &hold);
    let others = RangeTable::new(["a", "b", "d"]).ranges_of("d").len() - 1;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while d.shard.acting().len() < others {
        assert!(
            tokio::time::Instant::now() < deadline,
            "d acts on {:?}",
            d.shard.acting()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "after the join: d acts on its {others} other ranges in {:?}",
        joined.elapsed()
    );
    assert!(
        !d.shard.acting().contains(&range),
        "d acts on range {range} while {from} reconciles {moving} in it"
    );
    *hold.name.lock() = None;
    hold.released.notify_waiters();
    acting_on_all(&[&a, &b, &d]).await;
    converged(&server, &paused, &["a", "b", "d"]).await.unwrap();
    let join_to = objects.last_revision().max(claims.last_revision());

    // a leaves gracefully: it releases its ranges before its lease, so nobody touches them.
    let leave_from = join_to;
    let left = tokio::time::Instant::now();
    a.leave().await;
    acting_on_all(&[&b, &d]).await;
    println!(
        "after the leave: every range acted on again in {:?}",
        left.elapsed()
    );
    converged(&server, &paused, &["b", "d"]).await.unwrap();
    let leave_to = objects.last_revision().max(claims.last_revision());

    churn_stop.cancel();
    churn.await.unwrap();
    converged(&server, &paused, &["b", "d"]).await.unwrap();
    for replica in [b, d] {
        replica.leave().await;
    }
    stop_recording.cancel();

    let objects = objects.snapshot();
    let (claims, children) = claims_and_children(&claims);
    assert_eq!(children.len(), OBJECTS, "a child per Service");
    // The join and the leave moved ranges with no write to any object or child for the move
    // itself: no touch between the move's start and convergence; the move's writes are the
    // claims ConfigMaps'.
    let touch = touch_annotation(RING);
    for (step, from, to, moved) in [
        (
            "join",
            join_from,
            join_to,
            RangeTable::new(["a", "b", "d"]).ranges_of("d").len(),
        ),
        (
            "leave",
            leave_from,
            leave_to,
            RangeTable::new(["a", "b", "d"]).ranges_of("a").len(),
        ),
    ] {
        let within = |v: &Arc<DynamicObject>| (from + 1..=to).contains(&revision(v));
        let touched: Vec<&str> = objects
            .iter()
            .chain(&children)
            .flat_map(|(name, versions)| {
                versions
                    .windows(2)
                    .filter(|p| within(&p[1]) && p[1].annotation(&touch) != p[0].annotation(&touch))
                    .map(move |_| name.as_str())
            })
            .collect();
        assert!(touched.is_empty(), "the {step} touched {touched:?}");
        let claims_writes = maps_claims_versions(&claims, from, to);
        println!(
            "the {step}: {moved} ranges moved, {claims_writes} claims writes, 0 object writes"
        );
    }
    let (child_switches, child_touches) = check_owners(&children, &claims).unwrap();
    println!("children: {child_switches} hand-overs by release, {child_touches} touches");
    assert!(child_touches > 0, "c's children were not touched");
    let (switches, touches) = check_owners(&objects, &claims).unwrap();
    println!("{switches} hand-overs by release, {touches} touches");
    assert!(switches > 0, "no hand-over by release was exercised");
    // Only the dead member's ranges were touched, each object at most once per taker.
    let touch = touch_annotation(RING);
    for (name, versions) in &objects {
        let last = versions.iter().max_by_key(|v| revision(v)).unwrap();
        if let Some(mark) = last.annotation(&touch) {
            assert!(
                c_ranges.contains(&range_in(last)),
                "{name} (range {}) touched by {mark}, not one of c's ranges {c_ranges:?}",
                range_in(last)
            );
        }
    }
    for (name, versions) in &children {
        let last = versions.iter().max_by_key(|v| revision(v)).unwrap();
        if last.annotation(&touch).is_some() {
            assert!(
                c_ranges.contains(&range_in(last)),
                "{name} touched out of c's ranges"
            );
        }
    }
    assert!(touches > 0, "c's ranges were not touched");
    server.stop().await.unwrap();
}

#[test]
fn the_owner_check_fails_a_write_by_a_member_that_neither_released_nor_was_touched() {
    fn account(rv: u64, by: &str, seen: &str) -> Arc<DynamicObject> {
        let mut account = DynamicObject::new("v1", "Service")
            .within(NS)
            .named("sa-0")
            .with_uid("uid-0")
            .with_resource_version(rv.to_string());
        account
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .extend([
                ("by".to_string(), by.to_string()),
                ("seen".to_string(), seen.to_string()),
            ]);
        Arc::new(account)
    }
    let range = RangeTable::range_of_hash(shard_hash("uid-0"));
    let objects = BTreeMap::from([(
        "sa-0".to_string(),
        vec![
            account(1, "", ""),
            account(2, "a", "1"),
            account(5, "b", "1"),
        ],
    )]);
    let held_by_a = |at: u64, held: bool| {
        let ranges: BTreeSet<u32> = if held {
            [range].into()
        } else {
            BTreeSet::new()
        };
        (at, ranges)
    };
    // a still held the range when b wrote: refused.
    let claims = BTreeMap::from([("a".to_string(), vec![held_by_a(1, true)])]);
    let error = check_owners(&objects, &claims).unwrap_err();
    assert!(
        error.contains("written by b at 5 after a's write at 2"),
        "{error}"
    );
    // a released it at revision 3, before b's write: a hand-over.
    let claims = BTreeMap::from([(
        "a".to_string(),
        vec![held_by_a(1, true), held_by_a(3, false)],
    )]);
    assert_eq!(check_owners(&objects, &claims), Ok((1, 0)));
}

/// SH23 against delayed packets, on the simulator (which can hold one user's requests): b's
/// write to an object is in the network when b is partitioned; b's lease runs out, a touches b's
/// ranges and starts reconciling the object; only then is b's write delivered. It must be
/// refused: the touch changed the object's resourceVersion. Without the touch it lands after
/// a took over, and the owner check fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_members_delayed_write_is_refused_once_its_range_was_touched() {
    let sim = sim_apiserver::SimServer::builder()
        .token("admin-token")
        .user_token("a-token", "a")
        .user_token("b-token", "b")
        .start()
        .await
        .unwrap();
    sim.create("namespaces", None, json!({"metadata": {"name": NS}}))
        .unwrap();
    let as_user = |token: &str| {
        let mut config = ClusterConfig::new(&sim.url()).unwrap();
        config.credentials = shared_informer::reflector::Credentials::Token(token.into());
        config
    };
    let recorder = SharedInformerFactory::new(as_user("admin-token")).namespace(NS);
    let objects = Recording::start(&recorder, Resource::namespaced("", "v1", "services"));
    let maps = Recording::start(&recorder, Resource::namespaced("", "v1", "configmaps"));
    let stop_recording = CancellationToken::new();
    recorder.start(&stop_recording);
    for i in 0..40 {
        let service = json!({"metadata": {"name": format!("sa-{i}"), "annotations": {"spec": "0"}},
                             "spec": {"ports": [{"port": 80}]}});
        sim.create("services", Some(NS), service).unwrap();
    }
    let hold = Arc::new(Hold::default());
    let a = start_replica(&as_user("a-token"), "a", true, &hold);
    let b = start_replica(&as_user("b-token"), "b", true, &hold);
    let members = ["a", "b"];
    let table = RangeTable::new(members);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let reconciled = |s: &Value| {
        let uid = s["metadata"]["uid"].as_str().unwrap_or_default();
        s["metadata"]["annotations"]["by"]
            == table.owner_of_hash(shard_hash(uid)).unwrap_or_default()
    };
    while !sim
        .list("services", Some(NS))
        .unwrap()
        .iter()
        .all(reconciled)
    {
        assert!(tokio::time::Instant::now() < deadline, "not converged");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // b reconciles x, held just before its writes; b is cut off, then its writes are sent.
    let services = sim.list("services", Some(NS)).unwrap();
    let x = services
        .iter()
        .find(|s| s["metadata"]["annotations"]["by"] == "b")
        .and_then(|s| s["metadata"]["name"].as_str())
        .expect("a service of b's")
        .to_string();
    *hold.name.lock() = Some(x.clone());
    let entered = hold.entered.notified();
    let admin = Client::new(&as_user("admin-token")).unwrap();
    patch_spec(&admin, &x, "late").await;
    entered.await;
    sim.faults().partition_user("b");
    let a_entered = hold.entered.notified();
    hold.released.notify_waiters();

    // b's lease runs out; a touches b's ranges and starts on x, held before writing.
    a_entered.await;
    // (a admits only keys of ranges it acts on.)
    // The network delivers b's delayed write now, while a reconciles x; b's reconcile returns
    // whatever it got. None of b's writes may land in between.
    let child = format!("{x}-cfg");
    let last_revision = |name: &str| {
        sim.history("configmaps", Some(NS), name)
            .iter()
            .filter_map(|v| {
                v["metadata"]["resourceVersion"]
                    .as_str()?
                    .parse::<u64>()
                    .ok()
            })
            .max()
            .unwrap_or(0)
    };
    let before = last_revision(&child);
    let b_finished = hold.finished.notified();
    sim.faults().heal_user("b");
    b_finished.await;
    let landed: Vec<Value> = sim
        .history("configmaps", Some(NS), &child)
        .into_iter()
        .filter(|v| {
            v["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|r| r.parse::<u64>().ok())
                > Some(before)
                && v["data"]["by"] == "b"
        })
        .collect();
    assert!(
        landed.is_empty(),
        "b's delayed write landed while a reconciled {x}: {landed:?}"
    );
    *hold.name.lock() = None;
    hold.released.notify_waiters();

    // b is back (its lease renewed once the network delivered it): the ring is a and b again,
    // and every service ends with its owner's reconcile at its current spec.
    let done = |s: &Value| {
        reconciled(s)
            && s["metadata"]["annotations"]["seen"] == s["metadata"]["annotations"]["spec"]
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !sim.list("services", Some(NS)).unwrap().iter().all(done) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not converged after the partition"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // While b was cut off, a touched b's ranges and removed them from b's stored claims. Back,
    // b acts on its ranges again only once its stored claims name them (SH21): otherwise a
    // member the table next gives them to would not wait for b's reconciles in flight.
    let mine: BTreeSet<u32> = table.ranges_of("b").into_iter().collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while b.shard.acting().into_iter().collect::<BTreeSet<u32>>() != mine {
        assert!(
            tokio::time::Instant::now() < deadline,
            "b acts on {:?} after the partition, not on its ranges {mine:?}",
            b.shard.acting()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stored = sim
        .get("configmaps", Some(NS), &claims_name(RING, "b"))
        .unwrap();
    let stored = parse_claims(stored["data"]["held"].as_str().unwrap_or_default()).unwrap();
    for range in b.shard.acting() {
        assert!(
            stored.contains(&range),
            "b acts on range {range}, which its stored claims {stored:?} do not name"
        );
    }
    for replica in [a, b] {
        replica.leave().await;
    }
    stop_recording.cancel();
    let objects = objects.snapshot();
    let (claims, children) = claims_and_children(&maps);
    check_owners(&children, &claims).unwrap();
    check_owners(&objects, &claims).unwrap();
    // x's child was touched by a before a acted on it; b's delayed write of it, had it landed
    // after the touch, would be a change of writer from a to b with no release by a between.
    let touch = touch_annotation(RING);
    assert!(
        children[&format!("{x}-cfg")]
            .iter()
            .any(|v| v.annotation(&touch).is_some_and(|t| t.starts_with("a "))),
        "x's child not touched by a"
    );
}
