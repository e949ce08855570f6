//! Bytes of heap per cached object, for the three ways of holding a ~3.8 KB Pod: `CompactObject`
//! (metadata + raw JSON), `DynamicObject` (metadata + `serde_json::Value`) and a typed
//! `k8s_openapi` Pod. Run with `cargo bench -p store-index --bench memory --features k8s-openapi`.
//!
//! A counting global allocator measures live heap bytes before and after decoding 10,000 objects
//! into an `Indexer` with the namespace index, so the figure includes the store's own overhead.
// The allocator wrapper needs `unsafe` to implement `GlobalAlloc`; it only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use store_index::{CompactObject, DynamicObject, Indexer, Indexers, Object};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const OBJECTS: usize = 10_000;

/// A realistic Pod as kube-apiserver serves it (about 3.8 KB of JSON).
fn pod_json(i: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"web-{i}-7c9f8d6b5-x2k4p","generateName":"web-{i}-7c9f8d6b5-","namespace":"team-{ns}","uid":"0b6f{i:08}-3c1e-4a59-9d2f-5a7e8c1b2d3f","resourceVersion":"{rv}","creationTimestamp":"2026-11-01T10:00:00Z","labels":{{"app":"web","pod-template-hash":"7c9f8d6b5","tier":"frontend","version":"v1.{v}"}},"annotations":{{"kubectl.kubernetes.io/restartedAt":"2026-11-01T09:59:00Z","prometheus.io/scrape":"true","prometheus.io/port":"9090"}},"ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-{i}-7c9f8d6b5","uid":"9a8b7c6d-{i:08}-4e3f-8a9b-0c1d2e3f4a5b","controller":true,"blockOwnerDeletion":true}}],"managedFields":[{{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-11-01T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:generateName":{{}},"f:labels":{{".":{{}},"f:app":{{}},"f:pod-template-hash":{{}}}},"f:ownerReferences":{{}}}},"f:spec":{{"f:containers":{{}}}}}}}}]}},"spec":{{"volumes":[{{"name":"kube-api-access-{i}","projected":{{"sources":[{{"serviceAccountToken":{{"expirationSeconds":3607,"path":"token"}}}},{{"configMap":{{"name":"kube-root-ca.crt","items":[{{"key":"ca.crt","path":"ca.crt"}}]}}}}],"defaultMode":420}}}}],"containers":[{{"name":"web","image":"registry.example.com/team/web:v1.{v}","ports":[{{"name":"http","containerPort":8080,"protocol":"TCP"}},{{"name":"metrics","containerPort":9090,"protocol":"TCP"}}],"env":[{{"name":"LOG_LEVEL","value":"info"}},{{"name":"POD_NAME","valueFrom":{{"fieldRef":{{"apiVersion":"v1","fieldPath":"metadata.name"}}}}}},{{"name":"POD_IP","valueFrom":{{"fieldRef":{{"apiVersion":"v1","fieldPath":"status.podIP"}}}}}}],"resources":{{"limits":{{"cpu":"500m","memory":"512Mi"}},"requests":{{"cpu":"100m","memory":"128Mi"}}}},"volumeMounts":[{{"name":"kube-api-access-{i}","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}}],"livenessProbe":{{"httpGet":{{"path":"/healthz","port":8080,"scheme":"HTTP"}},"initialDelaySeconds":10,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3}},"readinessProbe":{{"httpGet":{{"path":"/ready","port":8080,"scheme":"HTTP"}},"timeoutSeconds":1,"periodSeconds":5,"successThreshold":1,"failureThreshold":3}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","serviceAccount":"default","nodeName":"node-{node}","securityContext":{{}},"schedulerName":"default-scheduler","tolerations":[{{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}},{{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}}],"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"}},"status":{{"phase":"Running","conditions":[{{"type":"Initialized","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-01T10:00:00Z"}},{{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-01T10:00:05Z"}},{{"type":"ContainersReady","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-01T10:00:05Z"}},{{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-01T10:00:00Z"}}],"hostIP":"10.0.{a}.{b}","podIP":"10.244.{a}.{b}","podIPs":[{{"ip":"10.244.{a}.{b}"}}],"startTime":"2026-11-01T10:00:00Z","containerStatuses":[{{"name":"web","state":{{"running":{{"startedAt":"2026-11-01T10:00:02Z"}}}},"lastState":{{}},"ready":true,"restartCount":0,"image":"registry.example.com/team/web:v1.{v}","imageID":"registry.example.com/team/web@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945","containerID":"containerd://8d3f4c2b1a0e9f8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d","started":true}}],"qosClass":"Burstable"}}}}"#,
        ns = i % 100,
        rv = 1000 + i,
        v = i % 7,
        node = i % 50,
        a = (i / 250) % 250,
        b = i % 250,
    )
}

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn measure<K: Object>(label: &str, lines: &[String], decode: impl Fn(&str) -> K) -> f64 {
    let before = live();
    let indexer: Indexer<K> = Indexer::new(Indexers::new().with_namespace_index());
    for line in lines {
        indexer.add(Arc::new(decode(line))).expect("add");
    }
    let per_object = (live() - before) as f64 / lines.len() as f64;
    println!("{label:<28} {per_object:>9.0} bytes/object");
    drop(indexer);
    per_object
}

fn main() {
    let lines: Vec<String> = (0..OBJECTS).map(pod_json).collect();
    let json = lines.iter().map(String::len).sum::<usize>() as f64 / lines.len() as f64;
    println!("pods: {OBJECTS}, mean JSON size {json:.0} bytes (store with the namespace index)");
    println!("{:<28} {json:>9.0} bytes/object", "raw JSON (reference)");
    let compact = measure("CompactObject", &lines, |l| {
        CompactObject::from_json(store_index::bytes::Bytes::copy_from_slice(l.as_bytes()))
            .expect("decode")
    });
    let dynamic = measure("DynamicObject", &lines, |l| {
        serde_json::from_str::<DynamicObject>(l).expect("decode")
    });
    println!("{:<28} {:>9.2}", "CompactObject / JSON", compact / json);
    println!("{:<28} {:>9.2}", "DynamicObject / JSON", dynamic / json);
    #[cfg(feature = "k8s-openapi")]
    {
        let typed = measure("k8s_openapi Pod (typed)", &lines, |l| {
            serde_json::from_str::<k8s_openapi::api::core::v1::Pod>(l).expect("decode")
        });
        println!("{:<28} {:>9.2}", "typed Pod / JSON", typed / json);
    }
    #[cfg(not(feature = "k8s-openapi"))]
    println!("(typed Pod skipped: run with --features k8s-openapi)");
}
