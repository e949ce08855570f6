//! Coordinated election's candidate side against the simulated API server, under tokio's paused
//! clock: client-go's `leasecandidate_test.go` (creation, acknowledgement of a ping), the
//! periodic renewal, and a coordinated elector announcing itself and leading once the test,
//! playing kube-apiserver's coordinator, names it holder (rules LC1–LC4, L11).

use std::time::{Duration, SystemTime};

use controller::leader_election::{
    format_micro_time, parse_micro_time, ApiLeaseLock, Candidacy, ElectionEnd,
    LeaderElectionConfig, LeaderElector, LeaseCandidate,
};
use reflector::{Client, ClusterConfig};
use serde_json::{json, Value};
use sim_apiserver::SimServer;
use tokio::time::{sleep, Instant};
use workqueue::shared_informer::reflector;
use workqueue::CancellationToken;

const CANDIDATES: &str = "leasecandidates.coordination.k8s.io";
const LEASES: &str = "leases.coordination.k8s.io";

async fn sim_and_client() -> (SimServer, Client) {
    let sim = SimServer::builder().start().await.unwrap();
    let client = Client::new(&ClusterConfig::new(&sim.url()).unwrap()).unwrap();
    (sim, client)
}

/// Polls every 10 ms of the paused clock until `found` gives a value, for at most `limit`.
async fn poll<T>(limit: Duration, mut found: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(value) = found() {
            return Some(value);
        }
        sleep(Duration::from_millis(10)).await;
    }
    found()
}

fn candidate_object(sim: &SimServer, name: &str) -> Option<Value> {
    sim.get(CANDIDATES, Some("default"), name).ok()
}

fn time_at(object: &Value, field: &str) -> Option<SystemTime> {
    object["spec"][field].as_str().and_then(parse_micro_time)
}

/// How many times the object was written (created included).
fn writes(sim: &SimServer, name: &str) -> usize {
    sim.history(CANDIDATES, Some("default"), name).len()
}

/// Sets `spec.pingTime` as the coordinator does: a conditional update of what it read.
fn ping(sim: &SimServer, name: &str) -> SystemTime {
    let mut object = candidate_object(sim, name).unwrap();
    let now = SystemTime::now();
    object["spec"]["pingTime"] = json!(format_micro_time(now));
    sim.update(CANDIDATES, Some("default"), object).unwrap();
    // Written at microsecond precision: what the candidate reads back.
    parse_micro_time(&format_micro_time(now)).unwrap()
}

fn start_candidate(
    client: &Client,
    name: &str,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let candidate = LeaseCandidate::new(
        client.clone(),
        "default",
        name,
        "lease",
        Candidacy::new("1.30.0", "1.30.0"),
    )
    .unwrap();
    let cancel = CancellationToken::new();
    (cancel.clone(), tokio::spawn(candidate.run(cancel)))
}

#[tokio::test(start_paused = true)]
async fn a_candidate_creates_its_lease_candidate() {
    let (sim, client) = sim_and_client().await;
    let (cancel, run) = start_candidate(&client, "foo");
    let created = poll(Duration::from_secs(10), || candidate_object(&sim, "foo"))
        .await
        .expect("the candidate was created");
    assert_eq!(created["spec"]["leaseName"], "lease");
    assert_eq!(created["spec"]["binaryVersion"], "1.30.0");
    assert_eq!(created["spec"]["emulationVersion"], "1.30.0");
    assert_eq!(created["spec"]["strategy"], "OldestEmulationVersion");
    assert!(time_at(&created, "renewTime").is_some(), "{created}");
    assert!(created["spec"].get("pingTime").is_none());
    cancel.cancel();
    run.await.unwrap();
    assert!(
        candidate_object(&sim, "foo").is_some(),
        "left in place on cancel, as client-go leaves it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_candidate_answers_a_ping_at_once_and_otherwise_renews_every_five_minutes() {
    let (sim, client) = sim_and_client().await;
    let (cancel, run) = start_candidate(&client, "foo");
    poll(Duration::from_secs(10), || candidate_object(&sim, "foo"))
        .await
        .unwrap();
    let created_at = Instant::now();

    // Nobody pings: no write until five minutes have passed, then one.
    sleep(Duration::from_secs(4 * 60 + 50)).await;
    assert_eq!(writes(&sim, "foo"), 1, "only the create");
    poll(Duration::from_secs(20), || {
        (writes(&sim, "foo") == 2).then_some(())
    })
    .await
    .expect("renewed after five minutes");
    assert!(created_at.elapsed() >= Duration::from_secs(5 * 60));

    // The coordinator pings: the candidate renews within moments, with a renew time after the
    // ping, and its own write does not set it renewing again.
    let pinged = ping(&sim, "foo");
    let before = Instant::now();
    let answered = poll(Duration::from_secs(1), || {
        let object = candidate_object(&sim, "foo")?;
        (time_at(&object, "renewTime")? > pinged).then_some(object)
    })
    .await
    .expect("the ping was answered");
    assert!(before.elapsed() < Duration::from_millis(200), "at once");
    assert_eq!(
        time_at(&answered, "pingTime"),
        Some(pinged),
        "the ping kept"
    );
    let after_answer = writes(&sim, "foo");
    assert_eq!(after_answer, 4, "create, renewal, ping, answer");
    sleep(Duration::from_secs(60)).await;
    assert_eq!(writes(&sim, "foo"), after_answer, "one answer per ping");

    cancel.cancel();
    run.await.unwrap();
    sleep(Duration::from_secs(10 * 60)).await;
    assert_eq!(writes(&sim, "foo"), after_answer, "nothing after cancel");
}

#[tokio::test(start_paused = true)]
async fn a_candidate_whose_object_is_deleted_creates_it_again_at_its_next_renewal() {
    let (sim, client) = sim_and_client().await;
    let (cancel, run) = start_candidate(&client, "foo");
    poll(Duration::from_secs(10), || candidate_object(&sim, "foo"))
        .await
        .unwrap();
    // The coordinator's garbage collector deletes candidates it judges gone.
    sim.delete(CANDIDATES, Some("default"), "foo").unwrap();
    sleep(Duration::from_secs(60)).await;
    assert!(candidate_object(&sim, "foo").is_none());
    poll(Duration::from_secs(5 * 60), || {
        candidate_object(&sim, "foo")
    })
    .await
    .expect("created again");
    cancel.cancel();
    run.await.unwrap();
}

fn coordinated(client: &Client, identity: &str) -> LeaderElector<ApiLeaseLock> {
    let lock = ApiLeaseLock::new(client.clone(), "default", "my-controller", identity);
    let config = LeaderElectionConfig::new("my-controller", identity)
        .coordinated(Candidacy::new("1.36.3", "1.36.0"));
    LeaderElector::new(config, lock).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_coordinated_elector_announces_itself_and_leads_once_the_coordinator_names_it() {
    let (sim, client) = sim_and_client().await;
    let mut replicas = Vec::new();
    for identity in ["pod-a", "pod-b"] {
        let cancel = CancellationToken::new();
        let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(coordinated(&client, identity).run_leading(
            cancel.clone(),
            move |leader, _guard| async move {
                let _ = started_tx.send(());
                leader.cancelled().await;
            },
        ));
        replicas.push((cancel, started, run));
    }
    for identity in ["pod-a", "pod-b"] {
        let candidate = poll(Duration::from_secs(10), || candidate_object(&sim, identity))
            .await
            .expect("each elector announces its candidate");
        assert_eq!(candidate["spec"]["leaseName"], "my-controller");
        assert_eq!(candidate["spec"]["binaryVersion"], "1.36.3");
    }
    sleep(Duration::from_secs(30)).await;
    assert!(
        sim.get(LEASES, Some("default"), "my-controller").is_err(),
        "no elector creates the Lease"
    );

    // The coordinator elects pod-b as kube-apiserver's does: a Lease naming it, for 5 s.
    sim.create(
        LEASES,
        Some("default"),
        json!({"metadata": {"name": "my-controller"}, "spec": {
            "holderIdentity": "pod-b", "leaseDurationSeconds": 5,
            "strategy": "OldestEmulationVersion",
            "renewTime": format_micro_time(SystemTime::now())}}),
    )
    .unwrap();
    let (cancel_a, mut started_a, run_a) = replicas.remove(0);
    let (cancel_b, started_b, run_b) = replicas.remove(0);
    tokio::time::timeout(Duration::from_secs(5), started_b)
        .await
        .expect("pod-b leads within an acquire period")
        .unwrap();
    sleep(Duration::from_secs(10)).await;
    let lease = sim.get(LEASES, Some("default"), "my-controller").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "pod-b");
    assert_eq!(
        lease["spec"]["leaseDurationSeconds"], 15,
        "renewed by pod-b"
    );
    assert_eq!(lease["spec"]["strategy"], "OldestEmulationVersion");
    assert!(started_a.try_recv().is_err(), "pod-a does not lead");

    // pod-b is cancelled: it releases the Lease and stops renewing its candidate, which stays.
    let b_writes = writes(&sim, "pod-b");
    cancel_b.cancel();
    assert_eq!(run_b.await.unwrap(), ElectionEnd::Cancelled);
    let lease = sim.get(LEASES, Some("default"), "my-controller").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "", "released");
    let a_writes = writes(&sim, "pod-a");
    sleep(Duration::from_secs(6 * 60)).await;
    assert_eq!(writes(&sim, "pod-b"), b_writes, "pod-b's candidate stopped");
    assert!(candidate_object(&sim, "pod-b").is_some());
    assert!(writes(&sim, "pod-a") > a_writes, "pod-a's candidate renews");
    assert!(
        started_a.try_recv().is_err(),
        "pod-a does not take the released Lease"
    );
    cancel_a.cancel();
    assert_eq!(run_a.await.unwrap(), ElectionEnd::Cancelled);
}
