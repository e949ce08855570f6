//! The sharder and the hand-over against the simulated API server, with two or three replicas
//! in this process, each with its own users (one for its controller and ring Lease, one for its
//! sharder), so that the simulator's write log names who stored each change. Objects are
//! ConfigMaps `w-*` of ring `widgets`; their children are Pods with a controller reference.
//!
//! Checked from the server's side (rules SH11–SH18): every object ends labelled with
//! `owner_of(key, members)` and reconciled by that member, children carry their owner's label,
//! a join writes only the objects that move, each move goes through the old owner's
//! acknowledgement, and no replica writes an object after another replica started writing it
//! unless the sharder wrote in between.

use std::collections::BTreeMap;
use std::time::Duration;

use controller::leader_election::{ApiLeaseLock, LeaderElectionConfig};
use controller::sharding::{
    drain_label, max_departure_delay, owner_of, shard_label, shard_selector, ApiRingLeases,
    FencedWriter, Ring, ShardGate, ShardedController, Sharder, SharderConfig,
};
use controller::{Action, CancellationToken};
use reflector::store_index::{DynamicObject, PartialObjectMetadata, Selector};
use reflector::{Api, Client, ClusterConfig, Credentials, Resource};
use serde_json::{json, Value};
use sim_apiserver::{SimServer, WriteRecord};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use workqueue::shared_informer::reflector;
use workqueue::shared_informer::SharedInformerFactory;
use workqueue::{default_controller_rate_limiter, KeyEnqueuer, RateLimitingQueue};

const RING: &str = "widgets";
const NS: &str = "default";
const SHARDER_LEASE: &str = "widgets-sharder";

fn configmaps_resource() -> Resource {
    Resource::namespaced("", "v1", "configmaps")
}

fn pods_resource() -> Resource {
    Resource::namespaced("", "v1", "pods")
}

async fn sim() -> SimServer {
    let mut builder = SimServer::builder().token("admin-token");
    for id in ["a", "b", "c"] {
        builder = builder
            .user_token(format!("{id}-token"), format!("replica-{id}"))
            .user_token(format!("{id}-sharder-token"), format!("sharder-{id}"));
    }
    builder.start().await.unwrap()
}

fn client(sim: &SimServer, token: &str) -> Client {
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    config.credentials = Credentials::Token(token.into());
    Client::new(&config).unwrap()
}

/// Short timings, so that a lease runs out within a test.
fn quick(name: &str, identity: &str) -> LeaderElectionConfig {
    let mut config = LeaderElectionConfig::new(name, identity);
    config.lease_duration = Duration::from_secs(3);
    config.renew_deadline = Duration::from_secs(2);
    config.retry_period = Duration::from_millis(500);
    config
}

struct Replica {
    id: String,
    ring: Ring<ApiRingLeases>,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    factories: Vec<SharedInformerFactory>,
}

impl Replica {
    /// Starts replica `replica-<id>`: its ring membership, its sharder candidate (metadata-only
    /// informers of all objects and children) and its controller (an informer of its share).
    async fn start(sim: &SimServer, id: &str) -> Self {
        Self::start_with(sim, id, true).await
    }

    /// A replica whose controller runs only if `controller` (without it, it is a member that
    /// never acknowledges a drain: a wedged worker).
    async fn start_with(sim: &SimServer, id: &str, controller: bool) -> Self {
        let identity = format!("replica-{id}");
        let stop = CancellationToken::new();
        let mut tasks = Vec::new();

        let client = client(sim, &format!("{id}-token"));
        let leases = ApiRingLeases::new(client.clone(), NS);
        let ring = Ring::new(RING, quick(RING, &identity), leases.clone()).unwrap();
        tasks.push(tokio::spawn({
            let (ring, stop) = (ring.clone(), stop.clone());
            async move {
                ring.run(ring.lock(), stop)
                    .await
                    .expect("the ring's own lock")
            }
        }));

        // The sharder candidate, writing as its own user so that the write log tells its
        // writes from the controller's.
        let sharder_client = self::client(sim, &format!("{id}-sharder-token"));
        let sharder_factory =
            SharedInformerFactory::with_client(sharder_client.clone()).namespace(NS);
        let objects = sharder_factory
            .metadata_informer(configmaps_resource())
            .unwrap();
        let children = sharder_factory.metadata_informer(pods_resource()).unwrap();
        let sharder: Sharder<PartialObjectMetadata, _> = Sharder::new(
            ring.clone(),
            sharder_client.clone(),
            configmaps_resource(),
            "ConfigMap",
            &objects,
            SharderConfig::default(),
        )
        .unwrap()
        .with_children(pods_resource(), &children)
        .unwrap();
        sharder_factory.start(&stop);
        tasks.push(tokio::spawn({
            let lock = ApiLeaseLock::new(sharder_client, NS, SHARDER_LEASE, identity.clone());
            let (stop, config) = (stop.clone(), quick(SHARDER_LEASE, &identity));
            async move { sharder.run_elected(config, lock, stop).await }
        }));

        if !controller {
            return Self {
                id: identity,
                ring,
                stop,
                tasks,
                factories: vec![sharder_factory],
            };
        }
        // The controller: an informer of this replica's share only, and a gated runner.
        let selector: Selector = shard_selector(RING, &identity).parse().unwrap();
        let factory = SharedInformerFactory::with_client(client.clone())
            .namespace(NS)
            .label_selector(selector);
        let widgets = factory
            .informer::<DynamicObject>(configmaps_resource())
            .unwrap();
        let queue = RateLimitingQueue::new(default_controller_rate_limiter());
        widgets
            .add_event_handler(KeyEnqueuer::<DynamicObject, _>::new(queue.clone()))
            .unwrap();
        factory.start(&stop);
        let api = Api::namespaced_with(client.clone(), configmaps_resource(), NS);
        let gate = ShardGate::for_ring(api, &ring, widgets.indexer().clone());
        tasks.push(tokio::spawn({
            let (stop, identity) = (stop.clone(), identity.clone());
            async move {
                ShardedController::new(gate, queue)
                    .workers(2)
                    .run(stop, move |obj, writer| {
                        reconcile(identity.clone(), obj, writer)
                    })
                    .await
            }
        }));
        Self {
            id: identity,
            ring,
            stop,
            tasks,
            factories: vec![sharder_factory, factory],
        }
    }

    /// A graceful stop: every task told to stop, the ring Lease released.
    async fn stop(self) {
        self.stop.cancel();
        for task in self.tasks {
            task.await.unwrap();
        }
        for factory in self.factories {
            factory.shutdown().await;
        }
    }
}

/// The reconcile: the object records which replica reconciled it (one fenced write, none when
/// already so).
async fn reconcile(
    identity: String,
    obj: std::sync::Arc<DynamicObject>,
    writer: FencedWriter<DynamicObject>,
) -> Result<Action, controller::sharding::FenceError> {
    if by(&obj.data) != Some(identity.as_str()) {
        writer
            .merge_patch(&obj, &json!({"data": {"by": identity}}))
            .await?;
    }
    Ok(Action::Done)
}

fn by(data: &serde_json::Map<String, Value>) -> Option<&str> {
    data.get("data")?.get("by")?.as_str()
}

fn create_widgets(sim: &SimServer, names: impl IntoIterator<Item = String>) {
    for name in names {
        let cm = sim
            .create(
                "configmaps",
                Some(NS),
                json!({"metadata": {"name": name}, "data": {"n": "0"}}),
            )
            .unwrap();
        sim.create(
            "pods",
            Some(NS),
            json!({"metadata": {"name": format!("{name}-child"), "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": name,
                "uid": cm["metadata"]["uid"], "controller": true}]},
                "spec": {"containers": [{"name": "c", "image": "example.com/c"}]}}),
        )
        .unwrap();
    }
}

fn label(obj: &Value, key: &str) -> Option<String> {
    obj["metadata"]["labels"][key].as_str().map(str::to_string)
}

/// Why the stored state is not yet converged on `members`, if it is not.
fn not_converged(sim: &SimServer, members: &[String]) -> Option<String> {
    let cms = sim.list("configmaps", Some(NS)).unwrap();
    let mut owners = BTreeMap::new();
    for cm in cms.iter().filter(|cm| is_widget(cm)) {
        let name = cm["metadata"]["name"].as_str().unwrap().to_string();
        let key = format!("{NS}/{name}");
        let owner = owner_of(&key, members.iter().map(String::as_str)).unwrap();
        let labelled = label(cm, &shard_label(RING));
        if labelled.as_deref() != Some(owner) || label(cm, &drain_label(RING)).is_some() {
            return Some(format!("{name} labelled {labelled:?}, owner {owner}"));
        }
        if cm["data"]["by"].as_str() != Some(owner) {
            return Some(format!("{name} not yet reconciled by {owner}"));
        }
        owners.insert(name, owner.to_string());
    }
    for pod in sim.list("pods", Some(NS)).unwrap() {
        let name = pod["metadata"]["name"].as_str().unwrap();
        let owner = &owners[name.trim_end_matches("-child")];
        if label(&pod, &shard_label(RING)).as_ref() != Some(owner) {
            return Some(format!("child {name} not labelled {owner}"));
        }
    }
    None
}

fn is_widget(cm: &Value) -> bool {
    cm["metadata"]["name"]
        .as_str()
        .is_some_and(|n| n.starts_with("w-"))
}

/// Polls a state the replicas reach by requests already under way, for up to `limit`.
async fn converge(sim: &SimServer, members: &[&str], limit: Duration) -> Duration {
    let members: Vec<String> = members.iter().map(|m| format!("replica-{m}")).collect();
    let start = Instant::now();
    let mut why = None;
    while start.elapsed() < limit {
        why = not_converged(sim, &members);
        if why.is_none() {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("not converged on {members:?} within {limit:?}: {why:?}");
}

async fn wait_until(what: &str, condition: impl Fn() -> bool) {
    for _ in 0..1500 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting until {what}");
}

fn object_writes(log: &[WriteRecord], after: u64) -> BTreeMap<String, Vec<WriteRecord>> {
    let mut writes: BTreeMap<String, Vec<WriteRecord>> = BTreeMap::new();
    for write in log.iter().filter(|w| w.revision > after) {
        if write.resource == "configmaps" && write.name.starts_with("w-") {
            writes
                .entry(write.name.clone())
                .or_default()
                .push(write.clone());
        }
    }
    writes
}

/// No two acting owners: in each object's history after `after`, whenever a write by one
/// replica is followed by a write of another, the sharder wrote in between (the assignment);
/// and a replica's write is never followed by a sharder write and then its own write again
/// without the sharder having assigned it back (not distinguishable here, and not needed: the
/// tests move an object at most once per phase).
fn assert_one_acting_owner_at_a_time(log: &[WriteRecord], after: u64) {
    for (name, writes) in object_writes(log, after) {
        let mut last_replica: Option<&str> = None;
        let mut sharder_since = false;
        for write in &writes {
            if write.user.starts_with("sharder-") {
                sharder_since = true;
                continue;
            }
            if let Some(last) = last_replica {
                assert!(
                    last == write.user || sharder_since,
                    "{name}: {} wrote after {last} with no assignment between: {writes:#?}",
                    write.user
                );
            }
            last_replica = Some(&write.user);
            sharder_since = false;
        }
    }
}

fn revision_of(version: &Value) -> u64 {
    version["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .expect("a stored version has a numeric resourceVersion")
}

/// SH19, from the server's history: whenever a widget is assigned to a member (its version whose
/// assignment label changes to that member), its child, if it existed then, already carried that
/// member's label (its last version before the assignment). Returns how many assignments moved a
/// child.
fn assert_children_moved_first(sim: &SimServer) -> usize {
    let shard = shard_label(RING);
    let mut checked = 0;
    for cm in sim
        .list("configmaps", Some(NS))
        .unwrap()
        .iter()
        .filter(|cm| is_widget(cm))
    {
        let name = cm["metadata"]["name"].as_str().unwrap();
        let child = format!("{name}-child");
        let child_history = sim.history("pods", Some(NS), &child);
        let mut before: Option<String> = None;
        for version in sim.history("configmaps", Some(NS), name) {
            let now = label(&version, &shard);
            if now.is_some() && now != before {
                let at = revision_of(&version);
                let child_then = child_history
                    .iter()
                    .take_while(|c| revision_of(c) < at)
                    .last();
                if let Some(child_then) = child_then {
                    if label(child_then, &shard).is_some() || before.is_some() {
                        assert_eq!(
                            label(child_then, &shard),
                            now,
                            "{name} was assigned {now:?} at {at} while its child still carried \
                             another label"
                        );
                        checked += 1;
                    }
                }
            }
            before = now;
        }
    }
    checked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_assigned_on_start_and_a_join_moves_only_the_new_members_share_through_a_drain()
{
    let sim = sim().await;
    create_widgets(&sim, (0..60).map(|i| format!("w-{i}")));
    let a = Replica::start(&sim, "a").await;
    let b = Replica::start(&sim, "b").await;
    converge(&sim, &["a", "b"], Duration::from_secs(30)).await;

    // A new object (and its child) is assigned promptly, by events, not by a period.
    let created = Instant::now();
    create_widgets(&sim, ["w-new".to_string()]);
    wait_until("w-new is assigned", || {
        label(
            &sim.get("configmaps", Some(NS), "w-new").unwrap(),
            &shard_label(RING),
        )
        .is_some()
    })
    .await;
    let assigned_in = created.elapsed();
    assert!(assigned_in < Duration::from_secs(1), "{assigned_in:?}");
    converge(&sim, &["a", "b"], Duration::from_secs(10)).await;

    // C joins.
    let joined_at = sim.revision();
    let c = Replica::start(&sim, "c").await;
    converge(&sim, &["a", "b", "c"], Duration::from_secs(30)).await;

    let log = sim.write_log();
    let two = ["replica-a", "replica-b"];
    let three = ["replica-a", "replica-b", "replica-c"];
    let writes = object_writes(&log, joined_at);
    let mut moved = 0;
    for name in sim
        .list("configmaps", Some(NS))
        .unwrap()
        .iter()
        .filter(|cm| is_widget(cm))
        .map(|cm| cm["metadata"]["name"].as_str().unwrap().to_string())
    {
        let key = format!("{NS}/{name}");
        let before = owner_of(&key, two).unwrap();
        let after = owner_of(&key, three).unwrap();
        let history = writes.get(&name).cloned().unwrap_or_default();
        let users: Vec<&str> = history.iter().map(|w| w.user.as_str()).collect();
        if before == after {
            // Only the objects whose owner changes are written (SH15).
            assert!(
                history.is_empty(),
                "{name} stayed with {before} but: {users:?}"
            );
            continue;
        }
        moved += 1;
        assert_eq!(
            after, "replica-c",
            "{name}: a join moves keys only to the joiner"
        );
        // The hand-over (SH12, SH17): the sharder marks it draining, the old owner
        // acknowledges (its one and last write), the sharder assigns C, C reconciles.
        let old_writes: Vec<usize> = (0..users.len()).filter(|&i| users[i] == before).collect();
        assert_eq!(
            old_writes.len(),
            1,
            "{name}: the old owner's one write is its ack: {users:?}"
        );
        let ack = old_writes[0];
        assert!(
            users[..ack].iter().any(|u| u.starts_with("sharder-")),
            "{name}: drain first: {users:?}"
        );
        let first_c = users
            .iter()
            .position(|u| *u == "replica-c")
            .expect("C reconciled it");
        assert!(
            users[ack + 1..first_c]
                .iter()
                .any(|u| u.starts_with("sharder-")),
            "{name}: assigned to C after the ack, before C wrote: {users:?}"
        );
    }
    assert!(
        (5..=45).contains(&moved),
        "{moved} of 61 moved to the third member"
    );
    assert_one_acting_owner_at_a_time(&log, 0);
    let moved_children = assert_children_moved_first(&sim);
    assert!(
        moved_children >= moved,
        "{moved_children} children moved first, {moved} owners moved"
    );
    for replica in [a, b, c] {
        replica.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_leaves_or_dies_loses_its_objects_at_once_and_children_follow() {
    let sim = sim().await;
    create_widgets(&sim, (0..40).map(|i| format!("w-{i}")));
    let a = Replica::start(&sim, "a").await;
    let b = Replica::start(&sim, "b").await;
    let c = Replica::start(&sim, "c").await;
    converge(&sim, &["a", "b", "c"], Duration::from_secs(30)).await;

    // C stops gracefully: its Lease is released, the others see it gone at their next listing,
    // and its objects are relabelled without waiting for an acknowledgement (SH13).
    let c_id = c.id.clone();
    c.stop().await;
    let left_at = sim.revision();
    converge(&sim, &["a", "b"], Duration::from_secs(10)).await;
    let log = sim.write_log();
    assert!(
        log.iter()
            .all(|w| w.revision <= left_at || !w.user.ends_with("-c")),
        "{c_id} wrote after it stopped"
    );

    // The sharder's leader dies: its requests (controller, ring Lease, sharder) stop arriving.
    // The survivor's sharder takes over once the sharder Lease ran out, and relabels the dead
    // member's objects without hand-over; the dead sharder's writes held in the network are
    // fenced like any other.
    let leader = sim
        .get("leases.coordination.k8s.io", Some(NS), SHARDER_LEASE)
        .unwrap()["spec"]["holderIdentity"]
        .as_str()
        .unwrap()
        .to_string();
    let (dead, alive, survivor) = match leader.as_str() {
        "replica-a" => ("a", "b", &b),
        "replica-b" => ("b", "a", &a),
        other => panic!("sharder led by {other}"),
    };
    let died_at = sim.revision();
    let died = Instant::now();
    sim.faults().partition_user(&format!("replica-{dead}"));
    sim.faults().partition_user(&format!("sharder-{dead}"));
    let took = converge(&sim, &[alive], Duration::from_secs(20)).await;
    let bound = max_departure_delay(&quick(RING, "replica-a")) + Duration::from_secs(2);
    // The rebalance bound sharding was designed to (lease duration + 2 s, plus the listing period
    // our members are read at), measured to when every object is also reconciled by the survivor.
    assert!(
        died.elapsed() < bound,
        "reassigned {took:?} after the death, bound {bound:?}"
    );
    let suffix = format!("-{dead}");
    let log = sim.write_log();
    assert!(
        log.iter()
            .all(|w| w.revision <= died_at || !w.user.ends_with(&suffix)),
        "the partitioned replica wrote"
    );

    // It heals and joins again: its share comes back through the survivor's acknowledgements.
    sim.faults().heal_user(&format!("replica-{dead}"));
    sim.faults().heal_user(&format!("sharder-{dead}"));
    wait_until("the healed replica is a member again", || {
        survivor.ring.members() == ["replica-a", "replica-b"]
    })
    .await;
    converge(&sim, &["a", "b"], Duration::from_secs(30)).await;
    assert_one_acting_owner_at_a_time(&sim.write_log(), 0);
    assert!(assert_children_moved_first(&sim) > 0);
    for replica in [a, b] {
        replica.stop().await;
    }
}

/// SH17: the drain mark arrives while a reconcile of the key is in flight. The acknowledgement
/// waits for it; the reconcile's write, computed on the copy before the mark, is refused by the
/// server (the mark changed the resourceVersion); the acknowledgement is the replica's only
/// stored write, and the reconcile is not called again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_for_the_reconcile_in_flight_and_the_ack_is_the_old_owners_last_write() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::sync::{mpsc, Semaphore};

    let sim = sim().await;
    let identity = "replica-a";
    sim.create(
        "configmaps",
        Some(NS),
        json!({"metadata": {"name": "w-x", "labels": {shard_label(RING): identity}}}),
    )
    .unwrap();
    let stop = CancellationToken::new();
    let client = client(&sim, "a-token");
    let leases = ApiRingLeases::new(client.clone(), NS);
    let ring = Ring::new(RING, quick(RING, identity), leases.clone()).unwrap();
    let ring_task = tokio::spawn({
        let (ring, stop) = (ring.clone(), stop.clone());
        async move {
            ring.run(ring.lock(), stop)
                .await
                .expect("the ring's own lock")
        }
    });
    wait_until("a holds its shard lease", || ring.guard().is_valid()).await;
    let factory = SharedInformerFactory::with_client(client.clone())
        .namespace(NS)
        .label_selector(shard_selector(RING, identity).parse().unwrap());
    let widgets = factory
        .informer::<DynamicObject>(configmaps_resource())
        .unwrap();
    let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    widgets
        .add_event_handler(KeyEnqueuer::<DynamicObject, _>::new(queue.clone()))
        .unwrap();
    factory.start(&stop);
    let api = Api::namespaced_with(client.clone(), configmaps_resource(), NS);
    let gate = ShardGate::for_ring(api, &ring, widgets.indexer().clone());

    let release = Arc::new(Semaphore::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (outcome_tx, mut outcome) = mpsc::unbounded_channel();
    let controller = tokio::spawn({
        let (stop, release, calls) = (stop.clone(), release.clone(), calls.clone());
        async move {
            ShardedController::new(gate, queue)
                .run(stop, move |obj: Arc<DynamicObject>, writer| {
                    let (release, calls) = (release.clone(), calls.clone());
                    let (started_tx, outcome_tx) = (started_tx.clone(), outcome_tx.clone());
                    async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        let _ = started_tx.send(());
                        release.acquire().await.unwrap().forget();
                        let written = writer
                            .merge_patch(&obj, &json!({"data": {"by": "replica-a"}}))
                            .await;
                        let fenced = written.is_err();
                        let _ = outcome_tx.send(written.map(|_| ()));
                        if fenced {
                            Err("fenced")
                        } else {
                            Ok(Action::Done)
                        }
                    }
                })
                .await
        }
    });

    started.recv().await.unwrap();
    // The sharder's drain mark (written here by the test's own user).
    sim.patch(
        "configmaps",
        Some(NS),
        "w-x",
        &json!({"metadata": {"labels": {drain_label(RING): identity}}}),
    )
    .unwrap();
    let drained_at = sim.revision();
    wait_until("a's cache sees the drain", || {
        widgets
            .indexer()
            .get_by_key(&format!("{NS}/w-x"))
            .is_some_and(|o| {
                o.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(&drain_label(RING)))
            })
    })
    .await;
    let stored = sim.get("configmaps", Some(NS), "w-x").unwrap();
    assert_eq!(
        label(&stored, &shard_label(RING)).as_deref(),
        Some(identity),
        "no ack while the reconcile runs"
    );

    release.add_permits(1);
    let written = outcome.recv().await.unwrap();
    assert!(
        matches!(written, Err(controller::sharding::FenceError::Fenced(_))),
        "{written:?}"
    );
    wait_until("the ack removed both labels", || {
        let stored = sim.get("configmaps", Some(NS), "w-x").unwrap();
        label(&stored, &shard_label(RING)).is_none() && label(&stored, &drain_label(RING)).is_none()
    })
    .await;
    let by_a: Vec<u64> = sim
        .write_log()
        .iter()
        .filter(|w| w.resource == "configmaps" && w.user == identity)
        .map(|w| w.revision)
        .collect();
    assert_eq!(by_a.len(), 1, "only the ack: {by_a:?}");
    assert!(by_a[0] > drained_at);
    wait_until("a's cache dropped the object", || {
        widgets.indexer().get_by_key(&format!("{NS}/w-x")).is_none()
    })
    .await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "not reconciled after the drain"
    );

    stop.cancel();
    controller.await.unwrap();
    ring_task.await.unwrap();
    factory.shutdown().await;
}

/// SH12 and SH14: an owner that never acknowledges keeps its objects draining (the joiner gets
/// none of them: nothing is assigned over a live owner's head); when the joiner leaves, the
/// marks are withdrawn and the objects stay with their owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_without_acknowledgement_assigns_nothing_and_is_withdrawn_when_the_joiner_leaves() {
    let sim = sim().await;
    create_widgets(&sim, (0..30).map(|i| format!("w-{i}")));
    // A: a member (and sharder candidate) whose controller does not run.
    let a = Replica::start_with(&sim, "a", false).await;
    let all_labelled = |to: &str, drained: Option<usize>| {
        let cms = sim.list("configmaps", Some(NS)).unwrap();
        let widgets: Vec<&Value> = cms.iter().filter(|cm| is_widget(cm)).collect();
        widgets
            .iter()
            .all(|cm| label(cm, &shard_label(RING)).as_deref() == Some(to))
            && drained.is_none_or(|n| {
                widgets
                    .iter()
                    .filter(|cm| label(cm, &drain_label(RING)).as_deref() == Some(to))
                    .count()
                    == n
            })
    };
    wait_until("every object is a's", || all_labelled("replica-a", Some(0))).await;

    // B joins (a member only): its share is marked draining from A, and stays so.
    let b = Replica::start_with(&sim, "b", false).await;
    let members = ["replica-a", "replica-b"];
    let share = (0..30)
        .filter(|i| owner_of(&format!("{NS}/w-{i}"), members) == Some("replica-b"))
        .count();
    assert!(share > 0);
    wait_until("b's share is draining", || {
        all_labelled("replica-a", Some(share))
    })
    .await;
    let marked_at = sim.revision();
    // The marks' own events bring every marked object back to the sharder while B is a live
    // member: the log check below (one write per object after the marks, the withdrawal) shows
    // it assigned none of them to B meanwhile.
    assert_eq!(a.ring.members(), members);

    // B leaves: the marks are withdrawn, the objects stay A's.
    b.stop().await;
    wait_until("the marks are withdrawn", || {
        all_labelled("replica-a", Some(0))
    })
    .await;
    let log = sim.write_log();
    let withdrawn = object_writes(&log, marked_at);
    assert_eq!(withdrawn.len(), share, "one withdrawal per marked object");
    assert!(withdrawn
        .values()
        .all(|w| w.len() == 1 && w[0].user.starts_with("sharder-")));
    a.stop().await;
}
