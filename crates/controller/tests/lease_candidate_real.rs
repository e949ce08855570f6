//! Coordinated election against a real kube-apiserver (tests/real-apiserver, 1.36.3 with the
//! `CoordinatedLeaderElection` gate and `coordination.k8s.io/v1beta1` served): coordinated
//! electors of ours announce themselves for one Lease and the server's own coordinator, inside
//! kube-apiserver, picks the holder by the versions they announce (rules LC1–LC4, L11):
//! - of two, it names the one with the older binary, and that one leads;
//! - a third joins with an older emulation version: the coordinator marks the holder's end of
//!   term (`preferredHolder`), the holder stops leading, and once its lease has run out the
//!   newcomer is named and leads;
//! - the newcomer is cancelled and releases the Lease: the coordinator skips the candidate whose
//!   elector has ended (it no longer answers pings) and names the last one.
//!
//! The versions differ so that every election has one answer: between candidates alike (same
//! versions, created in the same second) kube-apiserver 1.36.3's coordinator picks one at
//! random at each election round, and so hands the Lease from one to another.
//!
//! It needs the real server's binaries: it runs when `REAL_APISERVER=1` (building them with Go
//! if missing, about five minutes cold) or when both are already built under
//! `target/real-apiserver/bin/`, and otherwise passes saying why it did not run, so that
//! `cargo test --workspace` needs no Go. Run it with
//! `REAL_APISERVER=1 cargo test -p controller --test lease_candidate_real -- --nocapture`.

use std::sync::Arc;
use std::time::Duration;

use controller::leader_election::{
    ApiLeaseLock, Candidacy, ElectionEnd, LeaderElectionConfig, LeaderElector,
};
use parking_lot::Mutex;
use real_apiserver::{RealServer, ServerOptions, User};
use reflector::{Client, ClusterConfig, Credentials};
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};
use workqueue::shared_informer::reflector;
use workqueue::CancellationToken;

const NAMESPACE: &str = "coordinated";
const LEASE: &str = "my-controller";

fn request(server: &RealServer, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let body = body.map(|b| b.to_string());
    let (status, text) = server
        .request(
            User::Admin,
            method,
            path,
            body.as_deref().map(|b| ("application/json", b.as_bytes())),
        )
        .unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn lease(server: &RealServer) -> Option<Value> {
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{LEASE}");
    match request(server, "GET", &path, None) {
        (200, lease) => Some(lease),
        _ => None,
    }
}

fn candidates(server: &RealServer) -> Vec<Value> {
    let path = format!("/apis/coordination.k8s.io/v1beta1/namespaces/{NAMESPACE}/leasecandidates");
    let (status, list) = request(server, "GET", &path, None);
    assert_eq!(status, 200, "{list}");
    list["items"].as_array().cloned().unwrap_or_default()
}

/// One elector of ours; its work records it in `leading` while it leads.
struct Replica {
    cancel: CancellationToken,
    run: JoinHandle<ElectionEnd>,
}

/// Starts the coordinated elector `identity`, announcing `binary` and `emulation` versions.
fn start(
    client: &Client,
    identity: &'static str,
    (binary, emulation): (&str, &str),
    leading: &Arc<Mutex<Vec<&'static str>>>,
) -> Replica {
    let lock = ApiLeaseLock::new(client.clone(), NAMESPACE, LEASE, identity);
    let config =
        LeaderElectionConfig::new(LEASE, identity).coordinated(Candidacy::new(binary, emulation));
    let elector = LeaderElector::new(config, lock).unwrap();
    let cancel = CancellationToken::new();
    let leading = Arc::clone(leading);
    let run = tokio::spawn(
        elector.run_leading(cancel.clone(), move |leader, guard| async move {
            assert!(guard.check().is_ok());
            leading.lock().push(identity);
            leader.cancelled().await;
            leading.lock().retain(|l| *l != identity);
        }),
    );
    Replica { cancel, run }
}

/// Waits until the Lease names one of `among` as holder and that replica leads; returns it.
async fn elected(
    server: &Arc<RealServer>,
    leading: &Arc<Mutex<Vec<&'static str>>>,
    among: &[&'static str],
    limit: Duration,
) -> &'static str {
    let deadline = Instant::now() + limit;
    loop {
        let holder = {
            let server = Arc::clone(server);
            tokio::task::spawn_blocking(move || lease(&server))
                .await
                .unwrap()
                .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
        };
        let now_leading = leading.lock().clone();
        if let Some(holder) = &holder {
            if let Some(ours) = among.iter().find(|i| **i == holder) {
                if now_leading == [*ours] {
                    return ours;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no candidate of {among:?} elected and leading after {limit:?}: holder {holder:?}, \
             leading {now_leading:?}; the apiserver's coordinator said:\n{}",
            coordinator_log(server)
        );
        sleep(Duration::from_millis(250)).await;
    }
}

/// The last lines of kube-apiserver's log about coordinated election.
fn coordinator_log(server: &RealServer) -> String {
    let log = std::fs::read_to_string(server.dir().join("kube-apiserver.log")).unwrap_or_default();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| {
            let l = l.to_lowercase();
            l.contains("leaderelection") || l.contains("leasecandidate") || l.contains(LEASE)
        })
        .collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

async fn holder_fields(server: &Arc<RealServer>) -> Value {
    let server = Arc::clone(server);
    tokio::task::spawn_blocking(move || lease(&server))
        .await
        .unwrap()
        .map(|l| l["spec"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_kube_apiserver_elects_our_candidates_by_their_versions() {
    if let Some(reason) = real_apiserver::unavailable() {
        println!("skipped: {reason}");
        return;
    }
    let server = tokio::task::spawn_blocking(|| RealServer::start(ServerOptions::default()))
        .await
        .unwrap()
        .unwrap_or_else(|error| panic!("the real kube-apiserver did not start: {error}"));
    let server = Arc::new(server);
    let (status, body) = request(
        &server,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"metadata": {"name": NAMESPACE}})),
    );
    assert_eq!(status, 201, "{body}");
    let mut config = ClusterConfig::new(server.url()).unwrap();
    config.certificate_authority = Some(server.ca_pem().as_bytes().to_vec());
    config.credentials = Credentials::Token(server.token(User::Admin).to_string().into());
    let client = Client::new(&config).unwrap();
    let leading = Arc::new(Mutex::new(Vec::new()));

    // Two candidates: the older binary is named.
    let started = Instant::now();
    let b = start(&client, "pod-b", ("1.36.3", "1.36.0"), &leading);
    let c = start(&client, "pod-c", ("1.37.0", "1.36.0"), &leading);
    let first = elected(
        &server,
        &leading,
        &["pod-b", "pod-c"],
        Duration::from_secs(60),
    )
    .await;
    println!(
        "named {first} (of pod-b, pod-c) and it leads, {:.1} s after the electors started",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(first, "pod-b", "the older binary version");
    let spec = holder_fields(&server).await;
    println!("lease: {spec}");
    assert_eq!(spec["strategy"], "OldestEmulationVersion");
    assert_eq!(spec["leaseDurationSeconds"], 15, "renewed by pod-b");
    let seen = tokio::task::spawn_blocking({
        let server = Arc::clone(&server);
        move || candidates(&server)
    })
    .await
    .unwrap();
    for candidate in &seen {
        println!(
            "candidate {}: {}",
            candidate["metadata"]["name"], candidate["spec"]
        );
        assert_eq!(candidate["spec"]["leaseName"], LEASE);
        assert_eq!(candidate["spec"]["strategy"], "OldestEmulationVersion");
    }
    assert_eq!(seen.len(), 2);

    // A better candidate joins: pod-b's term ends, pod-a is named once pod-b's lease ran out.
    let joined = Instant::now();
    let a = start(&client, "pod-a", ("1.36.3", "1.35.0"), &leading);
    assert_eq!(b.run.await.unwrap(), ElectionEnd::LeadershipLost);
    println!(
        "pod-b stopped leading {:.1} s after pod-a joined (lease: {})",
        joined.elapsed().as_secs_f64(),
        holder_fields(&server).await
    );
    let second = elected(&server, &leading, &["pod-a"], Duration::from_secs(60)).await;
    println!(
        "named {second} and it leads, {:.1} s after it joined",
        joined.elapsed().as_secs_f64()
    );

    // pod-a is cancelled and releases: pod-b's elector has ended, so pod-c is named.
    a.cancel.cancel();
    assert_eq!(a.run.await.unwrap(), ElectionEnd::Cancelled);
    let released = Instant::now();
    let third = elected(&server, &leading, &["pod-c"], Duration::from_secs(60)).await;
    println!(
        "after pod-a released the lease, named {third}, leading {:.1} s later",
        released.elapsed().as_secs_f64()
    );
    c.cancel.cancel();
    assert_eq!(c.run.await.unwrap(), ElectionEnd::Cancelled);
    let server = Arc::into_inner(server).expect("no other handle");
    tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap()
        .unwrap();
}
