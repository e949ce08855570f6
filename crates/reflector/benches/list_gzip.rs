//! What asking for gzip costs on a 10k-pod list: ~4 KB pods (`list_memory`'s, with container
//! statuses whose digests are pseudo-random, so the list compresses as a real one does) served
//! whole, as identity or pre-compressed gzip (gzip's fastest level, as kube-apiserver), by an
//! in-process server over loopback, fetched with `Client::get_bytes`; beside the inflating
//! alone (flate2, 16 KiB frames, no network) and decoding the list into `CompactObject`s, for
//! scale. Loopback moves bytes at memory speed, so this is the CPU price of compression; what it
//! saves is the network's share. Run: `cargo bench -p reflector --bench list_gzip`
//! (`GZIP_BENCH_PODS` sets the count, default 10000).

use std::convert::Infallible;
use std::io::Write as _;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use flate2::write::{GzDecoder, GzEncoder};
use flate2::Compression;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use reflector::store_index::CompactObject;
use reflector::{Client, ClusterConfig, ObjectList};

fn pod(i: usize) -> String {
    format!(
        r#"{{"metadata":{{"name":"web-{i:06}","generateName":"web-","namespace":"ns-{ns}","uid":"{uid}","resourceVersion":"{rv}","creationTimestamp":"2024-05-01T10:00:00Z","labels":{{"app":"web","pod-template-hash":"7d4b9c8f6","tier":"frontend"}},"annotations":{{"prometheus.io/scrape":"true"}},"ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d4b9c8f6","uid":"5b1e0d1e-aaaa-bbbb-cccc-000000000001","controller":true,"blockOwnerDeletion":true}}],"managedFields":[{{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2024-05-01T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:generateName":{{}},"f:labels":{{".":{{}},"f:app":{{}}}}}},"f:spec":{{"f:containers":{{}}}}}}}}]}},"spec":{{"containers":[{pad}],"nodeName":"node-{node}","restartPolicy":"Always","serviceAccountName":"default","tolerations":[{{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}}]}},"status":{{"phase":"Running","podIP":"10.244.{a}.{b}","conditions":[{{"type":"Ready","status":"True","lastTransitionTime":"2024-05-01T10:00:05Z"}}],"qosClass":"Burstable","containerStatuses":[{statuses}]}}}}"#,
        ns = i % 20,
        uid = hex(i, 32),
        rv = 1000 + i,
        node = i % 50,
        a = i / 250 % 250,
        b = i % 250,
        pad = (0..3)
            .map(|c| format!(r#"{{"name":"app-{c}","image":"registry.example.com/team/app-{c}:v1.2.{i}","ports":[{{"containerPort":{p},"protocol":"TCP"}}],"env":[{{"name":"POD_NAME","valueFrom":{{"fieldRef":{{"apiVersion":"v1","fieldPath":"metadata.name"}}}}}},{{"name":"LOG_LEVEL","value":"info"}},{{"name":"FEATURE_FLAGS","value":"alpha,beta,gamma,delta"}}],"resources":{{"limits":{{"cpu":"500m","memory":"256Mi"}},"requests":{{"cpu":"100m","memory":"128Mi"}}}},"volumeMounts":[{{"name":"kube-api-access","mountPath":"/var/run/secrets/kubernetes.io/serviceaccount","readOnly":true}}],"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}}"#, p = 8080 + c))
            .collect::<Vec<_>>()
            .join(","),
        statuses = (0..3)
            .map(|c| format!(r#"{{"name":"app-{c}","ready":true,"restartCount":{r},"image":"registry.example.com/team/app-{c}:v1.2.{i}","imageID":"registry.example.com/team/app-{c}@sha256:{image}","containerID":"containerd://{container}","started":true,"state":{{"running":{{"startedAt":"2024-05-01T10:{m:02}:{s:02}Z"}}}}}}"#,
                r = (i + c) % 3,
                image = hex(i * 3 + c, 64),
                container = hex(i * 5 + c + 1_000_000, 64),
                m = (i + c) % 60,
                s = (i * 7 + c) % 60))
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `len` pseudo-random hex digits seeded by `seed`: the image and container digests every real
/// pod carries, which compress as badly as in a real list.
fn hex(seed: usize, len: usize) -> String {
    let mut x = (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from_digit((x % 16) as u32, 16).unwrap()
        })
        .collect()
}

fn list(n: usize) -> Bytes {
    let items: Vec<String> = (0..n).map(pod).collect();
    Bytes::from(format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"5000"}},"items":[{}]}}"#,
        items.join(",")
    ))
}

fn gzip(body: &[u8]) -> Bytes {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(body).unwrap();
    Bytes::from(e.finish().unwrap())
}

/// Serves `identity` or, to a request accepting gzip, `gzipped`, on 127.0.0.1; returns its URL.
async fn serve(identity: Bytes, gzipped: Bytes) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (identity, gzipped) = (identity.clone(), gzipped.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let gz = req
                        .headers()
                        .get("accept-encoding")
                        .is_some_and(|v| v.as_bytes() == b"gzip");
                    let mut resp = Response::builder().header("content-type", "application/json");
                    if gz {
                        resp = resp.header("content-encoding", "gzip");
                    }
                    let body = if gz {
                        gzipped.clone()
                    } else {
                        identity.clone()
                    };
                    async move { Ok::<_, Infallible>(resp.body(Full::new(body)).unwrap()) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    url
}

fn list_gzip(c: &mut Criterion) {
    let pods = std::env::var("GZIP_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let body = list(pods);
    let gzipped = gzip(&body);
    println!(
        "list of {pods} pods: {} bytes, {} gzipped ({:.1}x smaller)",
        body.len(),
        gzipped.len(),
        body.len() as f64 / gzipped.len() as f64
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let url = rt.block_on(serve(body.clone(), gzipped.clone()));
    let client = |compression: bool| {
        let mut config = ClusterConfig::new(&url).unwrap();
        config.compression = compression;
        config.rate_limit = None;
        Client::new(&config).unwrap()
    };
    let (identity, compressed) = (client(false), client(true));
    let path = "/api/v1/pods";
    assert_eq!(rt.block_on(compressed.get_bytes(path)).unwrap(), body);

    let mut g = c.benchmark_group(format!("list_gzip/{pods}_pods"));
    g.sample_size(10);
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("get_bytes_identity", |b| {
        b.iter(|| rt.block_on(identity.get_bytes(path)).unwrap())
    });
    g.bench_function("get_bytes_gzip", |b| {
        b.iter(|| rt.block_on(compressed.get_bytes(path)).unwrap())
    });
    g.bench_function("inflate_only", |b| {
        b.iter(|| {
            let mut d = GzDecoder::new(Vec::with_capacity(body.len()));
            for frame in gzipped.chunks(16 << 10) {
                d.write_all(frame).unwrap();
            }
            d.finish().unwrap()
        })
    });
    g.bench_function("decode_compact_objects", |b| {
        b.iter(|| ObjectList::<CompactObject>::from_json(&body).unwrap())
    });
    g.finish();
}

criterion_group!(benches, list_gzip);
criterion_main!(benches);
