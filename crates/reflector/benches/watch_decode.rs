//! Watch decode throughput: the reflector (decoder + ListAndWatch loop) into a no-op store, beside
//! `serde_json::from_slice` of the same event lines into the same type, in the same run.
//!
//! Each event is a ~4 KB pod, delivered as its own chunk (kube-apiserver writes one chunk per
//! event). Run: `cargo bench -p reflector --bench watch_decode`.

use reflector::store_index::ResourceVersion;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use reflector::delta_fifo::{FifoError, Store};
use reflector::store_index::{CompactObject, DynamicObject};
use reflector::{
    decode_watch_body, BoxError, Decode, ListOptions, ListerWatcher, ObjectList, Reflector,
    ReflectorError, ReflectorOptions, Status, WatchDecoder, WatchOptions, WatchStream,
    DEFAULT_MAX_EVENT_SIZE,
};
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const EVENTS: usize = 2_000;

fn pod(i: usize) -> serde_json::Value {
    let containers: Vec<_> = (0..2)
        .map(|c| {
            json!({
                "name": format!("app-{c}"),
                "image": format!("registry.example.com/team/app-{c}:v1.2.{i}"),
                "ports": [{"containerPort": 8080 + c, "protocol": "TCP", "name": "http"}],
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "LOG_LEVEL", "value": "info"},
                    {"name": "FEATURE_FLAGS", "value": "a,b,c,d"}
                ],
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"
            })
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("web-7d4b9c8f6-{i:05}"),
            "generateName": "web-7d4b9c8f6-",
            "namespace": "default",
            "uid": format!("0c4f2f7e-1d2b-4b8e-9a3c-{i:012}"),
            "resourceVersion": format!("{}", 100_000 + i),
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6", "tier": "frontend"},
            "annotations": {"kubernetes.io/psp": "restricted", "prometheus.io/scrape": "true"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c8f6", "uid": "5b1e0d1e-aaaa-bbbb-cccc-000000000001", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "2024-05-01T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}}, "f:ownerReferences": {".": {}}},
                             "f:spec": {"f:containers": {}, "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {}}}}]
        },
        "spec": {
            "containers": containers,
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
            ]}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": format!("node-{}", i % 50),
            "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2024-05-01T10:00:00Z"},
                {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2024-05-01T10:00:05Z"},
                {"type": "ContainersReady", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2024-05-01T10:00:05Z"},
                {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2024-05-01T10:00:00Z"}
            ],
            "hostIP": "10.0.0.12", "podIP": format!("10.244.{}.{}", i / 250 % 250, i % 250),
            "podIPs": [{"ip": format!("10.244.{}.{}", i / 250 % 250, i % 250)}],
            "startTime": "2024-05-01T10:00:00Z",
            "containerStatuses": [
                {"name": "app-0", "state": {"running": {"startedAt": "2024-05-01T10:00:03Z"}}, "lastState": {}, "ready": true, "restartCount": 0,
                 "image": "registry.example.com/team/app-0:v1.2.3", "imageID": "registry.example.com/team/app-0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                 "containerID": "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "started": true},
                {"name": "app-1", "state": {"running": {"startedAt": "2024-05-01T10:00:04Z"}}, "lastState": {}, "ready": true, "restartCount": 0,
                 "image": "registry.example.com/team/app-1:v1.2.3", "imageID": "registry.example.com/team/app-1@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210",
                 "containerID": "containerd://fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210", "started": true}
            ],
            "qosClass": "Burstable"
        }
    })
}

/// One chunk per event, as kube-apiserver writes them: `type` first, then `object` (written by
/// hand: `json!` would sort the keys and put `object` first).
fn chunks() -> Arc<Vec<Bytes>> {
    Arc::new(
        (0..EVENTS)
            .map(|i| Bytes::from(format!("{{\"type\":\"MODIFIED\",\"object\":{}}}\n", pod(i))))
            .collect(),
    )
}

struct NoopStore;

impl<K> Store<K> for NoopStore {
    fn add(&self, _: Arc<K>) -> Result<(), FifoError> {
        Ok(())
    }
    fn update(&self, _: Arc<K>) -> Result<(), FifoError> {
        Ok(())
    }
    fn delete(&self, _: Arc<K>) -> Result<(), FifoError> {
        Ok(())
    }
    fn replace(&self, _: Vec<Arc<K>>, _: &ResourceVersion) -> Result<(), FifoError> {
        Ok(())
    }
    fn resync(&self) -> Result<(), FifoError> {
        Ok(())
    }
}

/// An empty list, then one watch streaming the chunks; the next watch is refused, which ends
/// `list_and_watch`.
struct ChunkLw {
    chunks: Arc<Vec<Bytes>>,
    watched: AtomicBool,
}

impl<K: Decode> ListerWatcher<K> for ChunkLw {
    async fn list(&self, _: ListOptions) -> Result<ObjectList<K>, ReflectorError> {
        Ok(ObjectList::new(Vec::new(), "1"))
    }
    async fn watch(&self, _: WatchOptions) -> Result<WatchStream<K>, ReflectorError> {
        if self.watched.swap(true, Ordering::SeqCst) {
            return Err(ReflectorError::api(Status::failure(
                403,
                "Forbidden",
                "done",
            )));
        }
        let chunks = self.chunks.clone();
        let body = futures::stream::iter(
            (0..chunks.len()).map(move |i| Ok::<_, BoxError>(chunks[i].clone())),
        );
        Ok(decode_watch_body(body, DEFAULT_MAX_EVENT_SIZE))
    }
}

#[derive(Deserialize)]
struct RawEvent<K> {
    #[serde(rename = "type")]
    _type: String,
    object: K,
}

fn bench_type<K>(c: &mut Criterion, name: &str, chunks: &Arc<Vec<Bytes>>)
where
    K: Decode + for<'de> Deserialize<'de>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group(format!("watch_decode/{name}"));
    group.throughput(Throughput::Elements(EVENTS as u64));
    group.sample_size(10);
    group.bench_function(BenchmarkId::from_parameter("serde_json_from_slice"), |b| {
        b.iter(|| run_serde::<K>(chunks))
    });
    group.bench_function(BenchmarkId::from_parameter("decoder"), |b| {
        b.iter(|| run_decoder::<K>(chunks))
    });
    group.bench_function(BenchmarkId::from_parameter("reflector"), |b| {
        b.iter(|| run_reflector::<K>(&rt, chunks))
    });
    group.finish();
}

fn run_serde<K: for<'de> Deserialize<'de>>(chunks: &[Bytes]) {
    for chunk in chunks {
        let ev: RawEvent<K> = serde_json::from_slice(chunk).unwrap();
        std::hint::black_box(ev.object);
    }
}

fn run_decoder<K: Decode>(chunks: &[Bytes]) {
    let mut out = Vec::with_capacity(1);
    let mut d = WatchDecoder::<K>::default();
    for chunk in chunks {
        d.decode(chunk.clone(), &mut out).unwrap();
        std::hint::black_box(out.drain(..).next());
    }
}

fn run_reflector<K: Decode>(rt: &tokio::runtime::Runtime, chunks: &Arc<Vec<Bytes>>) {
    let lw = ChunkLw {
        chunks: chunks.clone(),
        watched: AtomicBool::new(false),
    };
    // A list then a watch, the path this figure has always measured: the default's watch-list
    // would take the chunks for initial events, wait for their end bookmark, and apply none.
    let options = ReflectorOptions {
        watch_list: false,
        ..ReflectorOptions::default()
    };
    let r: Reflector<K, _, _> = Reflector::new(lw, NoopStore, options);
    let _ = rt.block_on(r.list_and_watch(&CancellationToken::new()));
    assert_eq!(r.metrics().modified, EVENTS as u64);
}

/// The three variants interleaved, round after round, keeping each one's best round: on a shared
/// machine this ratio is steadier than comparing separate criterion runs.
fn interleaved<K: Decode + for<'de> Deserialize<'de>>(name: &str, chunks: &Arc<Vec<Bytes>>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let bytes: usize = chunks.iter().map(Bytes::len).sum();
    let mut best = [f64::MAX; 3];
    for _ in 0..15 {
        let t = std::time::Instant::now();
        run_serde::<K>(chunks);
        best[0] = best[0].min(t.elapsed().as_secs_f64());
        let t = std::time::Instant::now();
        run_decoder::<K>(chunks);
        best[1] = best[1].min(t.elapsed().as_secs_f64());
        let t = std::time::Instant::now();
        run_reflector::<K>(&rt, chunks);
        best[2] = best[2].min(t.elapsed().as_secs_f64());
    }
    for (variant, secs) in ["serde_json_from_slice", "decoder", "reflector"]
        .iter()
        .zip(best)
    {
        eprintln!(
            "interleaved {name}/{variant}: {:.0} events/s, {:.1} MB/s, {:.1}% of serde_json::from_slice",
            EVENTS as f64 / secs,
            bytes as f64 / secs / 1e6,
            100.0 * best[0] / secs
        );
    }
}

fn watch_decode(c: &mut Criterion) {
    let chunks = chunks();
    interleaved::<DynamicObject>("DynamicObject", &chunks);
    interleaved::<CompactObject>("CompactObject", &chunks);
    let bytes: usize = chunks.iter().map(Bytes::len).sum();
    eprintln!(
        "{EVENTS} events, {} bytes per event on average ({bytes} bytes per iteration)",
        bytes / EVENTS
    );
    bench_type::<DynamicObject>(c, "DynamicObject", &chunks);
    bench_type::<CompactObject>(c, "CompactObject", &chunks);
}

criterion_group!(benches, watch_decode);
criterion_main!(benches);
