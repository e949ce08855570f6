//! `ApiLeaseLock` against the simulated API server: the Lease as client-go writes it, optimistic
//! concurrency, and an election acquired and released through it. Nothing here waits on a timer:
//! every step is one request.

use std::time::{Duration, SystemTime};

use controller::leader_election::{
    ApiLeaseLock, ElectionEnd, LeaderElectionConfig, LeaderElectionRecord, LeaderElector,
    LeaseLock, LockError,
};
use reflector::store_index::DynamicObject;
use reflector::{Api, Client, ClusterConfig, CreateOptions, Credentials, Resource};
use sim_apiserver::SimServer;
use workqueue::shared_informer::reflector;
use workqueue::CancellationToken;

async fn client() -> (SimServer, Client) {
    let sim = SimServer::builder().start().await.unwrap();
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    if let Some(ca) = sim.ca_pem() {
        config.certificate_authority = Some(ca.as_bytes().to_vec());
    }
    if let Some(token) = sim.token() {
        config.credentials = Credentials::Token(token.into());
    }
    let client = Client::new(&config).unwrap();
    (sim, client)
}

fn record(holder: &str, transitions: u32) -> LeaderElectionRecord {
    let now = SystemTime::now();
    LeaderElectionRecord {
        holder_identity: Some(holder.into()),
        lease_duration: Duration::from_secs(15),
        acquire_time: now,
        renew_time: now,
        leader_transitions: transitions,
        preferred_holder: None,
        strategy: None,
    }
}

fn leases(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        Resource::namespaced("coordination.k8s.io", "v1", "leases"),
        "default",
    )
}

async fn lease_json(client: &Client) -> serde_json::Value {
    serde_json::to_value(leases(client).get("my-controller").await.unwrap()).unwrap()
}

#[tokio::test]
async fn the_lease_is_written_as_client_go_writes_it_with_optimistic_concurrency() {
    let (_sim, client) = client().await;
    let a = ApiLeaseLock::new(client.clone(), "default", "my-controller", "a");
    let b = ApiLeaseLock::new(client.clone(), "default", "my-controller", "b");
    assert_eq!(a.describe(), "leases/default/my-controller");
    assert!(a.get().await.unwrap().is_none());

    let v1 = a.create(&record("a", 0)).await.unwrap();
    assert!(matches!(
        b.create(&record("b", 0)).await,
        Err(LockError::AlreadyExists)
    ));
    let (read, version) = b.get().await.unwrap().unwrap();
    assert_eq!(version, v1);
    assert_eq!(read.holder(), Some("a"));
    assert_eq!(read.lease_duration, Duration::from_secs(15));

    let v2 = a.update(&record("a", 0), &v1).await.unwrap();
    assert_ne!(v2, v1);
    assert!(
        matches!(
            b.update(&record("b", 1), &v1).await,
            Err(LockError::Conflict)
        ),
        "a write from a stale read is refused"
    );

    let spec = lease_json(&client).await["spec"].clone();
    assert_eq!(spec["holderIdentity"], "a");
    assert_eq!(spec["leaseDurationSeconds"], 15);
    assert_eq!(spec["leaseTransitions"], 0);
    // Events about the election are recorded against this Lease, as last written.
    let metadata = lease_json(&client).await["metadata"].clone();
    let reference = a.object_reference().unwrap();
    assert_eq!(
        (reference.kind.as_str(), reference.namespace.as_str()),
        ("Lease", "default")
    );
    assert_eq!(reference.name, "my-controller");
    assert_eq!(reference.uid, metadata["uid"].as_str().unwrap());
    assert_eq!(reference.resource_version, v2.as_str());
    let renew = spec["renewTime"].as_str().unwrap();
    assert_eq!(renew.len(), "2006-01-02T15:04:05.000000Z".len(), "{renew}");
    assert!(renew.ends_with('Z'));
}

#[tokio::test]
async fn an_elector_acquires_and_releases_a_lease() {
    let (_sim, client) = client().await;
    let lock = ApiLeaseLock::new(client.clone(), "default", "my-controller", "pod-a");
    // Releasing on cancel is the default.
    let config = LeaderElectionConfig::new("my-controller", "pod-a");
    let elector = LeaderElector::new(config, lock).unwrap();
    let cancel = CancellationToken::new();
    let end = elector
        .run_leading(cancel.clone(), |leader, guard| async move {
            assert!(guard.is_valid());
            cancel.cancel();
            leader.cancelled().await;
            assert!(!guard.is_valid());
        })
        .await;
    assert_eq!(end, ElectionEnd::Cancelled);

    let spec = lease_json(&client).await["spec"].clone();
    assert_eq!(
        spec["holderIdentity"], "",
        "released as client-go writes it: {spec}"
    );
    assert_eq!(spec["leaseDurationSeconds"], 1);
}

#[tokio::test]
async fn the_locks_labels_are_set_on_create_and_on_every_update_keeping_others() {
    let (_sim, client) = client().await;
    let a = ApiLeaseLock::new(client.clone(), "default", "my-controller", "a")
        .with_labels([("app", "my-controller"), ("tier", "control")]);
    a.create(&record("a", 0)).await.unwrap();
    let labels = lease_json(&client).await["metadata"]["labels"].clone();
    assert_eq!(
        labels,
        serde_json::json!({"app": "my-controller", "tier": "control"})
    );

    // Someone edits the labels: ours are written back at the next update, theirs are kept.
    let mut lease = leases(&client).get("my-controller").await.unwrap();
    let edited = lease.metadata.labels.get_or_insert_with(Default::default);
    edited.insert("app".into(), "renamed".into());
    edited.insert("team".into(), "platform".into());
    leases(&client)
        .replace("my-controller", &CreateOptions::default(), &lease)
        .await
        .unwrap();
    let (_, version) = a.get().await.unwrap().unwrap();
    a.update(&record("a", 0), &version).await.unwrap();
    let labels = lease_json(&client).await["metadata"]["labels"].clone();
    assert_eq!(
        labels,
        serde_json::json!({"app": "my-controller", "team": "platform", "tier": "control"})
    );
}
