//! Paginated list of many pods: time and peak RSS, beside the size of the decoded objects.
//!
//! A small in-process HTTP server generates ~4 KB pods page by page (it keeps nothing, so the
//! process's memory is the client's); the reflector lists them into a store that keeps every
//! object. Run: `cargo bench -p reflector --bench list_memory` (`LIST_BENCH_PODS` sets the count,
//! default 100000). Linux only (reads `/proc/self/status`).

use reflector::store_index::ResourceVersion;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use parking_lot::Mutex;
use reflector::delta_fifo::{FifoError, Store};
use reflector::store_index::CompactObject;
use reflector::{ClusterConfig, HttpListerWatcher, Reflector, ReflectorOptions, Resource};
use tokio_util::sync::CancellationToken;

fn pod(i: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"web-{i:06}","generateName":"web-","namespace":"ns-{ns}","uid":"0c4f2f7e-1d2b-4b8e-9a3c-{i:012}","resourceVersion":"{rv}","creationTimestamp":"2024-05-01T10:00:00Z","labels":{{"app":"web","pod-template-hash":"7d4b9c8f6","tier":"frontend"}},"annotations":{{"prometheus.io/scrape":"true"}},"ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d4b9c8f6","uid":"5b1e0d1e-aaaa-bbbb-cccc-000000000001","controller":true,"blockOwnerDeletion":true}}],"managedFields":[{{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2024-05-01T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:generateName":{{}},"f:labels":{{".":{{}},"f:app":{{}}}}}},"f:spec":{{"f:containers":{{}}}}}}}}]}},"spec":{{"containers":[{pad}],"nodeName":"node-{node}","restartPolicy":"Always","serviceAccountName":"default","tolerations":[{{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}}]}},"status":{{"phase":"Running","podIP":"10.244.{a}.{b}","conditions":[{{"type":"Ready","status":"True","lastTransitionTime":"2024-05-01T10:00:05Z"}}],"qosClass":"Burstable"}}}}"#,
        ns = i % 20,
        rv = 1000 + i,
        node = i % 50,
        a = i / 250 % 250,
        b = i % 250,
        pad = (0..3)
            .map(|c| format!(r#"{{"name":"app-{c}","image":"registry.example.com/team/app-{c}:v1.2.{i}","ports":[{{"containerPort":{p},"protocol":"TCP"}}],"env":[{{"name":"POD_NAME","valueFrom":{{"fieldRef":{{"apiVersion":"v1","fieldPath":"metadata.name"}}}}}},{{"name":"LOG_LEVEL","value":"info"}},{{"name":"FEATURE_FLAGS","value":"alpha,beta,gamma,delta"}}],"resources":{{"limits":{{"cpu":"500m","memory":"256Mi"}},"requests":{{"cpu":"100m","memory":"128Mi"}}}},"volumeMounts":[{{"name":"kube-api-access","mountPath":"/var/run/secrets/kubernetes.io/serviceaccount","readOnly":true}}],"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}}"#, p = 8080 + c))
            .collect::<Vec<_>>()
            .join(","),
    )
}

fn page(total: usize, query: &str) -> String {
    let mut limit = 0;
    let mut start = 0;
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "limit" => limit = v.parse().unwrap_or(0),
            "continue" => start = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    let end = if limit == 0 {
        total
    } else {
        (start + limit).min(total)
    };
    let cont = if end < total {
        end.to_string()
    } else {
        String::new()
    };
    let items: Vec<String> = (start..end).map(pod).collect();
    format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"5000","continue":"{cont}"}},"items":[{}]}}"#,
        items.join(",")
    )
}

fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[derive(Default)]
struct KeepAll(Mutex<Vec<Arc<CompactObject>>>);

impl Store<CompactObject> for KeepAll {
    fn add(&self, _: Arc<CompactObject>) -> Result<(), FifoError> {
        Ok(())
    }
    fn update(&self, _: Arc<CompactObject>) -> Result<(), FifoError> {
        Ok(())
    }
    fn delete(&self, _: Arc<CompactObject>) -> Result<(), FifoError> {
        Ok(())
    }
    fn replace(&self, list: Vec<Arc<CompactObject>>, _: &ResourceVersion) -> Result<(), FifoError> {
        *self.0.lock() = list;
        Ok(())
    }
    fn resync(&self) -> Result<(), FifoError> {
        Ok(())
    }
}

/// Holding the objects only, built directly from each pod's JSON: the decoded objects' own
/// footprint, allocator overhead included.
fn baseline(total: usize) {
    let rss_before = status_kb("VmRSS:");
    let mut items = Vec::with_capacity(total);
    for i in 0..total {
        let json = pod(i);
        items.push(Arc::new(
            CompactObject::from_json(Bytes::copy_from_slice(json.as_bytes())).unwrap(),
        ));
    }
    std::hint::black_box(&items);
    println!("{} {}", rss_before, status_kb("VmHWM:"));
}

fn list(total: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| async move {
                        let query = req.uri().query().unwrap_or("").to_string();
                        let resp = if query.contains("watch=true") {
                            Response::builder().status(403).body(Full::new(Bytes::from_static(br#"{"kind":"Status","code":403,"reason":"Forbidden","message":"bench"}"#)))
                        } else {
                            Response::builder().body(Full::new(Bytes::from(page(total, &query))))
                        };
                        Ok::<_, Infallible>(resp.unwrap())
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        let config = ClusterConfig::new(&format!("http://{addr}")).unwrap();
        let lw = HttpListerWatcher::<CompactObject>::new(&config, Resource::namespaced("", "v1", "pods")).unwrap();
        let store = Arc::new(KeepAll::default());
        // The paginated list is what is measured: no watch-list attempt first (this server
        // refuses every watch).
        let options = ReflectorOptions {
            watch_list: false,
            ..ReflectorOptions::default()
        };
        let r = Reflector::new(lw, store.clone(), options);
        let rss_before = status_kb("VmRSS:");
        let t = Instant::now();
        let _ = r.list_and_watch(&CancellationToken::new()).await;
        let secs = t.elapsed().as_secs_f64();
        let items = store.0.lock();
        let raw: usize = items.iter().map(|o| o.raw().len()).sum();
        eprintln!(
            "list_memory: {} CompactObject pods in {} pages of 500, {:.2} s ({:.0} objects/s, {:.1} MB/s of JSON, {:.1} MB of JSON)",
            items.len(), r.metrics().pages, secs, items.len() as f64 / secs, raw as f64 / secs / 1e6, raw as f64 / 1e6
        );
        println!("{} {}", rss_before, status_kb("VmHWM:"));
    });
}

fn run_child(mode: &str, total: usize) -> (f64, f64) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .env("LIST_BENCH_MODE", mode)
        .env("LIST_BENCH_PODS", total.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut nums = text
        .split_whitespace()
        .filter_map(|v| v.parse::<f64>().ok());
    let before = nums.next().unwrap_or(0.0) / 1e3;
    let peak = nums.next().unwrap_or(0.0) / 1e3;
    (before, peak)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let total: usize = std::env::var("LIST_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    match std::env::var("LIST_BENCH_MODE").as_deref() {
        Ok("baseline") => return baseline(total),
        Ok("list") => return list(total),
        _ => {}
    }
    let (b0, b1) = run_child("baseline", total);
    let (l0, l1) = run_child("list", total);
    let objects = b1 - b0;
    let listing = l1 - l0;
    println!(
        "list_memory: decoded objects alone {objects:.1} MB (peak RSS growth building them directly); \
         paginated list through the reflector: peak RSS growth {listing:.1} MB = {:.2}x the decoded objects",
        listing / objects
    );
    // For `cargo xtask bench`; the ratio is oriented so that higher is better (objects / RSS).
    println!(
        "bench-result {{\"name\":\"reflector paginated list of {total} CompactObject pods: peak RSS growth (MB)\",\"value\":{listing:.1},\"unit\":\"MB\",\"baseline\":{objects:.1},\"baseline_name\":\"the same objects built directly\",\"ratio\":{:.3},\"note\":\"{:.2}x the objects (target < 1.5x)\"}}",
        objects / listing,
        listing / objects
    );
}
