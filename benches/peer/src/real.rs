//! The real server's side of the peer comparison (`PEER_KUBECONFIG`, see [`real_server`]): its
//! pods and its watch events, written through this project's client, in processes of their own
//! so that no client measured pays for them.
//!
//! - `peer-bench real-seed [objects]` creates the namespaces `team-0`..`team-99` and the fake
//!   server's objects of the kind and size asked for (`PEER_KIND`, `PEER_OBJECT_BYTES`: by
//!   default its realistic pods, `sim_apiserver::fixtures::realistic_pod_json`), `PEER_CACHED`
//!   of them by default, `PEER_SEED_CONCURRENCY` creates at a time (default 32), a pod's
//!   followed by a write of its status (a create drops a pod's status). What the server sets
//!   (uid, resourceVersion, creationTimestamp, managedFields) is the server's: the objects
//!   differ from the fake server's there, and are the same for every client.
//! - `peer-bench real-write <rate> [seconds]` updates those objects one after another at `rate`
//!   merge patches a second, each setting the annotation [`SENT_ANNOTATION`] to its send time
//!   (microseconds since the UNIX epoch, as the fake server stamps its paced events), so a
//!   client's handler reads the latency from the writer's send through kube-apiserver and etcd
//!   to itself. It prints `writing` once started, runs until its standard input closes (or, given
//!   `seconds`, for that long whatever its input), then prints `bench-result {json}`: patches sent, answered, failed, the rate
//!   kept. With `rate` 0 it writes as fast as `PEER_WRITE_CONCURRENCY` patches in flight allow
//!   (default 32): what the server sustains.
//!
//! The pods of the [`real_server`]'s kubeconfig; no client-side rate limit.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use shared_informer::reflector::store_index::{CompactObject, Object as _};
use shared_informer::reflector::{
    Api, Client, ClientError, ClusterConfig, CreateOptions, ListOptions, Patch, PatchOptions,
    Resource,
};

use super::{real_server, SENT_ANNOTATION};

/// Namespaces the pods are spread over (`team-{i % 100}`, as the fixture names them).
const NAMESPACES: usize = 100;

fn client() -> Client {
    let (path, context) = real_server().expect("PEER_KUBECONFIG names the real server");
    let mut config = ClusterConfig::from_kubeconfig_files(&[path], context.as_deref())
        .expect("the real server's kubeconfig");
    config.rate_limit = None;
    Client::new(&config).expect("a client")
}

/// The seeded objects' API in `namespace` (`PEER_KIND`'s resource).
fn objects(client: &Client, namespace: &str) -> Api<CompactObject> {
    Api::namespaced_with(client.clone(), super::kind().resource(), namespace)
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|n| n.parse().unwrap_or_else(|_| panic!("{name}: a number")))
        .unwrap_or(default)
}

/// The name and namespace of object `i` of the fixture (of `PEER_KIND`).
pub fn object_name(i: usize) -> (String, String) {
    let name = match super::kind() {
        super::Kind::Pods => format!("web-{i}-7c9f8d6b5-x2k4p"),
        super::Kind::ConfigMaps => format!("settings-{i}"),
    };
    (name, format!("team-{}", i % NAMESPACES))
}

/// Object `i` of the fixture (of `PEER_KIND` and `PEER_OBJECT_BYTES`) as a create sends it:
/// without what the server sets, and a pod without its status (written after the create).
pub fn seed_object(i: usize) -> (serde_json::Value, Option<serde_json::Value>) {
    let mut object: serde_json::Value =
        serde_json::from_str(&super::server::object_json(i)).expect("the fixture");
    let status = match super::kind() {
        super::Kind::Pods => object
            .as_object_mut()
            .and_then(|p| p.remove("status"))
            .map(|status| serde_json::json!({ "status": status })),
        super::Kind::ConfigMaps => None,
    };
    let metadata = object["metadata"].as_object_mut().expect("metadata");
    for field in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
    ] {
        metadata.remove(field);
    }
    (object, status)
}

/// `peer-bench real-seed`: the namespaces, then `count` objects (and a pod's status).
pub fn seed(count: usize) -> serde_json::Value {
    let concurrency = env_number("PEER_SEED_CONCURRENCY", 32).max(1);
    let runtime = super::client_runtime();
    runtime.block_on(async {
        let client = client();
        let namespaces = Api::<CompactObject>::all_with(
            client.clone(),
            Resource::cluster("", "v1", "namespaces"),
        );
        for n in 0..NAMESPACES.min(count) {
            let namespace = serde_json::json!({"metadata": {"name": format!("team-{n}")}});
            match namespaces
                .create(&CreateOptions::default(), &namespace)
                .await
            {
                Ok(_) | Err(ClientError::AlreadyExists(_)) => {}
                Err(e) => panic!("creating namespace team-{n}: {e}"),
            }
        }
        let started = Instant::now();
        let done = AtomicU64::new(0);
        futures::stream::iter(0..count)
            .map(|i| {
                let (client, done) = (&client, &done);
                async move {
                    let (name, namespace) = object_name(i);
                    let api = objects(client, &namespace);
                    let (object, status) = seed_object(i);
                    match api.create(&CreateOptions::default(), &object).await {
                        Ok(_) | Err(ClientError::AlreadyExists(_)) => {}
                        Err(e) => panic!("creating {namespace}/{name}: {e}"),
                    }
                    if let Some(status) = status {
                        api.patch_status(&name, &PatchOptions::default(), &Patch::Merge(&status))
                            .await
                            .unwrap_or_else(|e| {
                                panic!("writing the status of {namespace}/{name}: {e}")
                            });
                    }
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if n % 10_000 == 0 {
                        eprintln!(
                            "real-seed: {n} {} in {:.1} s",
                            super::kind().plural(),
                            started.elapsed().as_secs_f64()
                        );
                    }
                }
            })
            .buffer_unordered(concurrency)
            .collect::<()>()
            .await;
        let seconds = started.elapsed().as_secs_f64();
        let total = count + not_seeded(&client).await;
        eprintln!(
            "real-seed: {count} {} in {seconds:.1} s, {:.0} a second, {concurrency} at a time",
            super::kind().plural(),
            count as f64 / seconds
        );
        serde_json::json!({
            "kind": super::kind().plural(),
            "pods": count,
            "total": total,
            "seconds": seconds,
            "pods_per_s": count as f64 / seconds,
            "concurrency": concurrency,
        })
    })
}

/// How many objects of `PEER_KIND` the server holds beside the seeded ones (kube-apiserver
/// keeps a few ConfigMaps of its own in `kube-system`): a client watching every namespace
/// caches them too, so its count at sync is the seeded ones plus these.
async fn not_seeded(client: &Client) -> usize {
    let namespaces =
        Api::<CompactObject>::all_with(client.clone(), Resource::cluster("", "v1", "namespaces"));
    let listed = namespaces
        .list(&ListOptions::default())
        .await
        .unwrap_or_else(|e| panic!("listing the namespaces: {e}"));
    let mut others = 0;
    for namespace in listed.items {
        let name = namespace.name();
        if name.starts_with("team-") {
            continue;
        }
        let objects = objects(client, name)
            .list(&ListOptions::default())
            .await
            .unwrap_or_else(|e| panic!("listing {}: {e}", super::kind().plural()));
        others += objects.items.len();
    }
    others
}

/// Microseconds since the UNIX epoch, zero-padded to the fake server's 16 digits.
fn stamp() -> String {
    let us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    format!("{us:016}")
}

/// What the writer did.
#[derive(Default)]
struct Tally {
    sent: AtomicU64,
    answered: AtomicU64,
    failed: AtomicU64,
    /// Ticks at which `PEER_WRITE_CONCURRENCY` patches were already in flight: the server did
    /// not keep up, and the tick's patch went later.
    late: AtomicU64,
}

/// `peer-bench real-write`: merge patches of the seeded objects at `rate` a second (0: as fast as
/// the writes in flight allow) until standard input closes or `seconds` pass.
pub fn write(rate: f64, count: usize, seconds: Option<f64>) -> serde_json::Value {
    let in_flight = env_number("PEER_WRITE_CONCURRENCY", 32).max(1);
    let runtime = super::client_runtime();
    let stop = Arc::new(AtomicBool::new(false));
    if seconds.is_none() {
        std::thread::spawn({
            let stop = Arc::clone(&stop);
            move || {
                // Its end (the bench closing it) stops the writer.
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
                stop.store(true, Ordering::Relaxed);
            }
        });
    }
    runtime.block_on(async {
        let client = client();
        let apis: Vec<Api<CompactObject>> = (0..NAMESPACES.min(count))
            .map(|n| objects(&client, &format!("team-{n}")))
            .collect();
        let tally = Arc::new(Tally::default());
        let slots = Arc::new(tokio::sync::Semaphore::new(in_flight));
        let started = Instant::now();
        let deadline = seconds.map(|s| started + Duration::from_secs_f64(s));
        let mut tick = (rate > 0.0).then(|| {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            // Behind schedule, catch up: the rate is kept on average.
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            tick
        });
        println!("writing");
        let mut next = 0usize;
        while !stop.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
            if let Some(tick) = &mut tick {
                tick.tick().await;
            }
            let slot = match Arc::clone(&slots).try_acquire_owned() {
                Ok(slot) => slot,
                Err(_) => {
                    if tick.is_some() {
                        tally.late.fetch_add(1, Ordering::Relaxed);
                    }
                    Arc::clone(&slots).acquire_owned().await.expect("slots")
                }
            };
            let i = next % count;
            next += 1;
            let (name, _) = object_name(i);
            let api = apis[i % apis.len()].clone();
            let tally = Arc::clone(&tally);
            tokio::spawn(async move {
                let patch =
                    serde_json::json!({"metadata": {"annotations": {SENT_ANNOTATION: stamp()}}});
                tally.sent.fetch_add(1, Ordering::Relaxed);
                match api
                    .patch(&name, &PatchOptions::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => tally.answered.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        eprintln!("real-write: patching {name}: {e}");
                        tally.failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
                drop(slot);
            });
        }
        // Let the patches in flight end.
        let _ = slots.acquire_many(in_flight as u32).await;
        let seconds = started.elapsed().as_secs_f64();
        let answered = tally.answered.load(Ordering::Relaxed);
        let result = serde_json::json!({
            "rate": rate,
            "in_flight": in_flight,
            "seconds": seconds,
            "sent": tally.sent.load(Ordering::Relaxed),
            "answered": answered,
            "failed": tally.failed.load(Ordering::Relaxed),
            "late_ticks": tally.late.load(Ordering::Relaxed),
            "answered_per_s": answered as f64 / seconds,
        });
        eprintln!("real-write: {result}");
        result
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_seed_pod_is_the_fixture_less_what_the_server_sets_and_its_status_apart() {
        let (pod, status) = super::seed_object(7);
        let fixture: serde_json::Value =
            serde_json::from_str(&sim_apiserver::fixtures::realistic_pod_json(7)).unwrap();
        assert_eq!(status.unwrap()["status"], fixture["status"]);
        assert!(pod.get("status").is_none());
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            assert!(pod["metadata"].get(field).is_none(), "{field}");
        }
        assert_eq!(pod["spec"], fixture["spec"]);
        assert_eq!(pod["metadata"]["labels"], fixture["metadata"]["labels"]);
        let (name, namespace) = super::object_name(7);
        assert_eq!(pod["metadata"]["name"], name.as_str());
        assert_eq!(pod["metadata"]["namespace"], namespace.as_str());
    }
}
