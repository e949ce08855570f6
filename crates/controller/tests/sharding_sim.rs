//! The shard ring and fenced writes against the simulated API server, checked from the server's
//! side: each replica has its own user, and the simulator's write log names the user whose
//! request stored each change.

use std::time::Duration;

use controller::leader_election::LeaderElectionConfig;
use controller::sharding::{
    shard_label, shard_lease_name, ApiRingLeases, FenceError, FencedWriter, Ring, RING_LABEL,
};
use controller::CancellationToken;
use reflector::store_index::{DynamicObject, Object};
use reflector::{Api, Client, ClusterConfig, CreateOptions, Credentials, Resource};
use serde_json::json;
use sim_apiserver::{SimServer, WriteRecord};
use tokio::task::JoinHandle;
use workqueue::shared_informer::reflector;

const RING: &str = "widgets";
const NS: &str = "default";

async fn sim() -> SimServer {
    SimServer::builder()
        .token("admin-token")
        .user_token("a-token", "replica-a")
        .user_token("b-token", "replica-b")
        .start()
        .await
        .unwrap()
}

fn client(sim: &SimServer, token: &str) -> Client {
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    config.credentials = Credentials::Token(token.into());
    Client::new(&config).unwrap()
}

fn configmaps(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        Resource::namespaced("", "v1", "configmaps"),
        NS,
    )
}

struct Replica {
    ring: Ring<ApiRingLeases>,
    client: Client,
    stop: CancellationToken,
    run: JoinHandle<()>,
}

impl Replica {
    async fn join(sim: &SimServer, token: &str, identity: &str) -> Self {
        Self::join_with(sim, token, LeaderElectionConfig::new(RING, identity)).await
    }

    async fn join_with(sim: &SimServer, token: &str, config: LeaderElectionConfig) -> Self {
        let client = client(sim, token);
        let leases = ApiRingLeases::new(client.clone(), NS);
        let ring = Ring::new(RING, config, leases.clone()).unwrap();
        let stop = CancellationToken::new();
        let run = tokio::spawn({
            let (ring, stop) = (ring.clone(), stop.clone());
            async move {
                ring.run(ring.lock(), stop)
                    .await
                    .expect("the ring's own lock")
            }
        });
        let replica = Self {
            ring,
            client,
            stop,
            run,
        };
        // The first acquire attempt is immediate: a bounded wait for one request's round trip.
        wait_until("the shard lease is held", || {
            replica.ring.guard().is_valid()
        })
        .await;
        replica
    }

    fn writer(&self) -> FencedWriter<DynamicObject> {
        FencedWriter::for_ring(configmaps(&self.client), &self.ring)
    }

    async fn leave(self) {
        self.stop.cancel();
        self.run.await.unwrap();
    }
}

/// Polls `condition` (a state reached by requests already sent) for up to 10 s.
async fn wait_until(what: &str, condition: impl Fn() -> bool) {
    for _ in 0..1000 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

fn assigned_widget(sim: &SimServer, name: &str, to: &str) {
    sim.create(
        "configmaps",
        Some(NS),
        json!({"metadata": {"name": name, "labels": {shard_label(RING): to}}, "data": {"n": "0"}}),
    )
    .unwrap();
}

/// What the sharder does to move an object: relabel it (a write by the test's own user).
fn relabel(sim: &SimServer, name: &str, to: &str) -> u64 {
    sim.patch(
        "configmaps",
        Some(NS),
        name,
        &json!({"metadata": {"labels": {shard_label(RING): to}}}),
    )
    .unwrap();
    sim.revision()
}

fn writes_to(log: &[WriteRecord], name: &str, user: &str, after_revision: u64) -> Vec<WriteRecord> {
    log.iter()
        .filter(|w| w.resource == "configmaps" && w.name == name && w.user == user)
        .filter(|w| w.revision > after_revision)
        .cloned()
        .collect()
}

#[tokio::test]
async fn members_hold_labelled_leases_on_the_server_and_a_graceful_stop_leaves_the_ring() {
    let sim = sim().await;
    // A Lease of another ring, and an unlabelled one, are not members.
    sim.create(
        "leases.coordination.k8s.io",
        Some(NS),
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "gadgets-c", "labels": {RING_LABEL: "gadgets"}},
               "spec": {"holderIdentity": "c", "leaseDurationSeconds": 15}}),
    )
    .unwrap();
    sim.create(
        "leases.coordination.k8s.io",
        Some(NS),
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "widgets-d"},
               "spec": {"holderIdentity": "d", "leaseDurationSeconds": 15}}),
    )
    .unwrap();
    let a = Replica::join(&sim, "a-token", "replica-a").await;
    let b = Replica::join(&sim, "b-token", "replica-b").await;

    let lease = sim
        .get(
            "leases.coordination.k8s.io",
            Some(NS),
            &shard_lease_name(RING, "replica-a"),
        )
        .unwrap();
    assert_eq!(lease["metadata"]["labels"][RING_LABEL], RING, "{lease}");
    assert_eq!(lease["spec"]["holderIdentity"], "replica-a");
    let created_by: Vec<String> = sim
        .write_log()
        .iter()
        .filter(|w| w.resource == "leases" && w.name == "widgets-replica-b")
        .map(|w| w.user.clone())
        .collect();
    assert!(!created_by.is_empty() && created_by.iter().all(|u| u == "replica-b"));

    a.ring.refresh().await.unwrap();
    assert_eq!(a.ring.members(), ["replica-a", "replica-b"]);

    b.leave().await;
    let released = sim
        .get("leases.coordination.k8s.io", Some(NS), "widgets-replica-b")
        .unwrap();
    assert_eq!(
        released["spec"]["holderIdentity"], "",
        "released: {released}"
    );
    a.ring.refresh().await.unwrap();
    assert_eq!(a.ring.members(), ["replica-a"], "gone at the next listing");
    a.leave().await;
}

/// Short timings, so that a lease runs out within a test: 3 s lease, 2 s renew deadline, 0.5 s
/// retry period.
fn quick(identity: &str) -> LeaderElectionConfig {
    let mut config = LeaderElectionConfig::new(RING, identity);
    config.lease_duration = Duration::from_secs(3);
    config.renew_deadline = Duration::from_secs(2);
    config.retry_period = Duration::from_millis(500);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_member_leaves_the_ring_after_its_own_guard_lapsed_and_rejoins_after() {
    let sim = sim().await;
    let a = Replica::join_with(&sim, "a-token", quick("replica-a")).await;
    let b = Replica::join_with(&sim, "b-token", quick("replica-b")).await;
    wait_until("a sees b", || {
        a.ring.members() == ["replica-a", "replica-b"]
    })
    .await;

    // b's requests stop arriving: its renewals are held, a's listings go on.
    sim.faults().partition_user("replica-b");
    let b_guard = b.ring.guard();
    // a drops b only once b's lease ran out on a's clock, and by then b itself stopped writing.
    wait_until("a drops b", || a.ring.members() == ["replica-a"]).await;
    assert!(
        !b_guard.is_valid(),
        "b's guard lapsed before any observer dropped it"
    );

    sim.faults().heal_user("replica-b");
    wait_until("b is back", || {
        b_guard.is_valid() && a.ring.members() == ["replica-a", "replica-b"]
    })
    .await;
    a.leave().await;
    b.leave().await;
}

#[tokio::test]
async fn a_write_computed_before_a_relabel_and_sent_after_it_is_refused_by_the_server() {
    let sim = sim().await;
    assigned_widget(&sim, "w1", "replica-a");
    let a = Replica::join(&sim, "a-token", "replica-a").await;
    let writer = a.writer();

    // A reads and computes its write while the object is its own...
    let seen = configmaps(&a.client).get("w1").await.unwrap();
    writer.check(&seen).unwrap();
    let mut desired = seen.clone();
    desired
        .data
        .insert("data".into(), json!({"n": "1", "by": "a"}));
    // ...the sharder moves it to B...
    let moved_at = relabel(&sim, "w1", "replica-b");
    // ...and A's write arrives: 409, nothing stored.
    let refused = writer.replace(&seen, &desired).await;
    assert!(matches!(refused, Err(FenceError::Fenced(_))), "{refused:?}");
    let patch = writer
        .merge_patch(&seen, &json!({"data": {"by": "a"}}))
        .await;
    assert!(matches!(patch, Err(FenceError::Fenced(_))), "{patch:?}");
    let delete = writer.delete(&seen).await;
    assert!(matches!(delete, Err(FenceError::Fenced(_))), "{delete:?}");
    assert!(writes_to(&sim.write_log(), "w1", "replica-a", moved_at).is_empty());
    assert_eq!(
        sim.get("configmaps", Some(NS), "w1").unwrap()["data"]["n"],
        "0"
    );

    // Read again, the object says B: A refuses locally, sending nothing.
    let fresh = configmaps(&a.client).get("w1").await.unwrap();
    let log_len = sim.write_log().len();
    let local = writer
        .merge_patch(&fresh, &json!({"data": {"by": "a"}}))
        .await;
    assert!(
        matches!(&local, Err(FenceError::NotAssigned { assigned_to: Some(b), .. }) if b == "replica-b"),
        "{local:?}"
    );
    assert_eq!(sim.write_log().len(), log_len);
    a.leave().await;
}

#[tokio::test]
async fn a_write_delayed_in_the_network_past_a_reassignment_never_lands() {
    let sim = sim().await;
    assigned_widget(&sim, "w2", "replica-a");
    let a = Replica::join(&sim, "a-token", "replica-a").await;
    let b = Replica::join(&sim, "b-token", "replica-b").await;
    let seen = configmaps(&a.client).get("w2").await.unwrap();
    let mut desired = seen.clone();
    desired
        .data
        .insert("data".into(), json!({"n": "1", "by": "a"}));

    // A's packets stop arriving; its write leaves while its lease guard is still valid.
    sim.faults().partition_user("replica-a");
    let writer = a.writer();
    let late = tokio::spawn(async move { writer.replace(&seen, &desired).await });
    // The sharder moves the object and B writes it meanwhile.
    let moved_at = relabel(&sim, "w2", "replica-b");
    let fresh = configmaps(&b.client).get("w2").await.unwrap();
    b.writer()
        .merge_patch(&fresh, &json!({"data": {"n": "2", "by": "b"}}))
        .await
        .unwrap();
    // The partition heals: the held request reaches the server now.
    sim.faults().heal_user("replica-a");
    let outcome = late.await.unwrap();
    assert!(matches!(outcome, Err(FenceError::Fenced(_))), "{outcome:?}");

    let log = sim.write_log();
    assert!(
        writes_to(&log, "w2", "replica-a", moved_at).is_empty(),
        "{log:#?}"
    );
    assert_eq!(writes_to(&log, "w2", "replica-b", moved_at).len(), 1);
    let stored = sim.get("configmaps", Some(NS), "w2").unwrap();
    assert_eq!(stored["data"], json!({"n": "2", "by": "b"}));
    a.leave().await;
    b.leave().await;
}

/// The same late write without the resourceVersion precondition lands: what the fence prevents
/// (and what a lease check alone lets through, as measured while sharding was built:
/// docs/sharding.md, *The property, and why a lease is not enough*).
#[tokio::test]
async fn without_the_precondition_the_same_late_write_lands() {
    let sim = sim().await;
    assigned_widget(&sim, "w3", "replica-a");
    let a = Replica::join(&sim, "a-token", "replica-a").await;
    let seen = configmaps(&a.client).get("w3").await.unwrap();
    let mut unfenced = seen.clone();
    unfenced.metadata.resource_version = None;
    unfenced.data.insert("data".into(), json!({"by": "a"}));
    sim.faults().partition_user("replica-a");
    let api = a.ring.guard().protect(configmaps(&a.client));
    let late = tokio::spawn(async move {
        api.replace("w3", &CreateOptions::default(), &unfenced)
            .await
    });
    let moved_at = relabel(&sim, "w3", "replica-b");
    sim.faults().heal_user("replica-a");
    late.await.unwrap().unwrap();
    assert_eq!(
        writes_to(&sim.write_log(), "w3", "replica-a", moved_at).len(),
        1
    );
    a.leave().await;
}

#[tokio::test]
async fn a_fenced_create_needs_the_owners_assignment_and_a_fixed_name() {
    let sim = sim().await;
    assigned_widget(&sim, "owner", "replica-a");
    assigned_widget(&sim, "not-mine", "replica-b");
    let a = Replica::join(&sim, "a-token", "replica-a").await;
    let writer = a.writer();
    let children = configmaps(&a.client);
    let owner = children.get("owner").await.unwrap();
    let child = DynamicObject::new("v1", "ConfigMap")
        .within(NS)
        .named("owner-child");
    writer
        .create_child(&children, &owner, &child)
        .await
        .unwrap();
    // Created with this replica's label, so that its own label-selector cache sees it.
    let stored = sim.get("configmaps", Some(NS), "owner-child").unwrap();
    assert_eq!(stored["metadata"]["labels"][shard_label(RING)], "replica-a");
    // A duplicate delivered late is refused by name, not stored twice: the caller requeues.
    let again = writer.create_child(&children, &owner, &child).await;
    assert!(
        matches!(again, Err(FenceError::ChildExists { .. })),
        "{again:?}"
    );
    // A child labelled for another member would be cached by that member: refused.
    let misdirected = DynamicObject::new("v1", "ConfigMap")
        .within(NS)
        .named("owner-child-b")
        .with_label(shard_label(RING), "replica-b");
    let refused = writer.create_child(&children, &owner, &misdirected).await;
    assert!(
        matches!(refused, Err(FenceError::ChildLabelledForAnother { .. })),
        "{refused:?}"
    );

    let foreign = children.get("not-mine").await.unwrap();
    let refused = writer.create_child(&children, &foreign, &child).await;
    assert!(
        matches!(refused, Err(FenceError::NotAssigned { .. })),
        "{refused:?}"
    );
    let mut unnamed = DynamicObject::new("v1", "ConfigMap").within(NS);
    unnamed.metadata.generate_name = Some("child-".into());
    let refused = writer.create_child(&children, &owner, &unnamed).await;
    assert!(
        matches!(refused, Err(FenceError::UnnamedChild)),
        "{refused:?}"
    );

    // After leaving the ring, nothing is written at all.
    let guard = a.ring.guard();
    a.leave().await;
    assert!(!guard.is_valid());
    let other = DynamicObject::new("v1", "ConfigMap")
        .within(NS)
        .named("owner-child-2");
    let refused = writer.create_child(&children, &owner, &other).await;
    assert!(
        matches!(refused, Err(FenceError::LeaseNotHeld { .. })),
        "{refused:?}"
    );
    let created: Vec<_> = sim
        .write_log()
        .into_iter()
        .filter(|w| w.user == "replica-a" && w.resource == "configmaps")
        .map(|w| w.name)
        .collect();
    assert_eq!(created, ["owner-child"]);
    assert!(owner.resource_version().is_some());
}

/// A child write the old owner computed before a hand-over and the network delivered after it
/// is refused: the sharder relabels the children before it assigns their owner elsewhere (SH19),
/// and the child writer conditions each write on the child's seen resourceVersion.
#[tokio::test]
async fn a_child_write_delayed_past_its_owners_hand_over_never_lands() {
    let sim = sim().await;
    assigned_widget(&sim, "w5", "replica-a");
    sim.create(
        "configmaps",
        Some(NS),
        json!({"metadata": {"name": "w5-child", "labels": {shard_label(RING): "replica-a"}},
               "data": {"n": "0"}}),
    )
    .unwrap();
    let a = Replica::join(&sim, "a-token", "replica-a").await;
    let b = Replica::join(&sim, "b-token", "replica-b").await;
    let child_writer = a.writer().for_children(configmaps(&a.client));
    // Another member's child, as seen, is not written at all.
    let foreign = DynamicObject::new("v1", "ConfigMap")
        .within(NS)
        .named("x")
        .with_label(shard_label(RING), "replica-b")
        .with_resource_version("1");
    assert!(matches!(
        child_writer
            .merge_patch(&foreign, &json!({"data": {}}))
            .await,
        Err(FenceError::NotAssigned { .. })
    ));

    let seen = configmaps(&a.client).get("w5-child").await.unwrap();
    sim.faults().partition_user("replica-a");
    let late = tokio::spawn(async move {
        child_writer
            .merge_patch(&seen, &json!({"data": {"n": "1", "by": "a"}}))
            .await
    });
    // The hand-over: the child moves first, then its owner; B writes the child.
    let moved_at = {
        sim.patch(
            "configmaps",
            Some(NS),
            "w5-child",
            &json!({"metadata": {"labels": {shard_label(RING): "replica-b"}}}),
        )
        .unwrap();
        sim.revision()
    };
    relabel(&sim, "w5", "replica-b");
    let fresh = configmaps(&b.client).get("w5-child").await.unwrap();
    b.writer()
        .for_children(configmaps(&b.client))
        .merge_patch(&fresh, &json!({"data": {"n": "2", "by": "b"}}))
        .await
        .unwrap();
    sim.faults().heal_user("replica-a");
    let outcome = late.await.unwrap();
    assert!(matches!(outcome, Err(FenceError::Fenced(_))), "{outcome:?}");
    let log = sim.write_log();
    assert!(
        writes_to(&log, "w5-child", "replica-a", moved_at).is_empty(),
        "{log:#?}"
    );
    let stored = sim.get("configmaps", Some(NS), "w5-child").unwrap();
    assert_eq!(stored["data"], json!({"n": "2", "by": "b"}));
    a.leave().await;
    b.leave().await;
}
