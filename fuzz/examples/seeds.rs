//! Writes each fuzz target's seed inputs into `fuzz/corpus/<target>/`: valid watch streams, list
//! bodies and texts of the shapes kube-apiserver and users produce, made from `seeds/pod.json`
//! with the library's own encoders, so that the fuzzers start from inputs that reach deep into
//! each decoder instead of having to find a valid protobuf frame by chance. `cargo xtask fuzz`
//! runs it before the fuzzers.

use std::path::Path;

use bytes::Bytes;
use reflector::protobuf::transcode::{encode_message_as, encode_object};
use reflector::protobuf::{encode_frame, RawWatchEvent};
use reflector::store_index::serde_json::{self, json, Value};

const POD: &str = include_str!("../seeds/pod.json");

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    std::fs::create_dir_all(&dir).expect("the corpus directory");
    std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("a seed");
}

/// `first` (the byte each target reads as a choice) followed by `body`.
fn with(first: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![first];
    out.extend_from_slice(body);
    out
}

fn main() {
    let pod: Value = serde_json::from_str(POD).expect("seeds/pod.json is a pod");
    let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
        "message": "too old resource version: 1 (2)", "reason": "Expired", "code": 410});
    let bookmark = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"resourceVersion": "1200",
            "annotations": {"k8s.io/initial-events-end": "true"}}});
    let events = [
        ("ADDED", &pod),
        ("MODIFIED", &pod),
        ("BOOKMARK", &bookmark),
        ("ERROR", &status),
    ];

    // JSON watch streams: one event per line, as kube-apiserver writes them.
    let mut lines = Vec::new();
    for (i, (ty, object)) in events.iter().enumerate() {
        let line = serde_json::to_vec(&json!({"type": ty, "object": object})).expect("JSON");
        write("watch_json", &format!("event-{i}"), &with(40, &line));
        lines.extend_from_slice(&line);
        lines.push(b'\n');
    }
    write("watch_json", "stream", &with(200, &lines));
    let list = json!({"apiVersion": "v1", "kind": "PodList",
        "metadata": {"resourceVersion": "1100", "continue": "abc"}, "items": [&pod, &pod]});
    write(
        "watch_json",
        "list",
        &with(0, &serde_json::to_vec(&list).expect("JSON")),
    );

    // Protobuf watch streams: length-prefixed frames of WatchEvent around enveloped objects.
    let mut stream = Vec::new();
    for (i, (ty, object)) in events.iter().enumerate() {
        let object = Bytes::from(encode_object(object).expect("the object encodes"));
        let event = RawWatchEvent {
            event_type: ty.to_string(),
            object,
        };
        let mut frame = Vec::new();
        encode_frame(&mut frame, &event.encode());
        write("watch_protobuf", &format!("frame-{i}"), &with(7, &frame));
        stream.extend_from_slice(&frame);
    }
    write("watch_protobuf", "stream", &with(100, &stream));

    // Protobuf bodies: a list page, a Status, and bare messages of the kinds `bodies` picks.
    let list = encode_object(&list).expect("the list encodes");
    write("bodies", "list", &with(0, &list));
    write(
        "bodies",
        "status",
        &with(3, &encode_object(&status).expect("Status")),
    );
    let message = encode_message_as("v1", "Pod", &pod).expect("the pod encodes");
    write("bodies", "pod", &with(0, &message));
    let config_map = json!({"metadata": {"name": "settings", "labels": {"a": "b"}},
        "data": {"mode": "fast"}, "binaryData": {"blob": "AAEC"}});
    let message = encode_message_as("v1", "ConfigMap", &config_map).expect("a ConfigMap");
    write("bodies", "configmap", &with(1, &message));

    // Texts.
    for (i, text) in [
        "app=web,tier in (frontend,backend),!canary,version notin (v0),env!=prod,exists",
        "team-0/web-0-7c9f8d6b5-x2k4p",
        "cluster-scoped",
        "2026-11-01T10:00:00.123456789+02:00",
        "1h2m3.5s",
    ]
    .iter()
    .enumerate()
    {
        write("texts", &i.to_string(), text.as_bytes());
    }

    // A kubeconfig with every kind of user a cluster hands out.
    let kubeconfig = "apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
    tls-server-name: kubernetes
    proxy-url: http://proxy:3128
contexts:
- name: dev
  context:
    cluster: dev
    user: token
    namespace: team-0
users:
- name: token
  user:
    token: hunter2
- name: basic
  user:
    username: admin
    password: hunter2
- name: exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: kubectl-plugin
      args: [get-token]
      env: [{name: A, value: b}]
- name: oidc
  user:
    auth-provider:
      name: oidc
      config: {idp-issuer-url: https://issuer, client-id: c, refresh-token: r}
";
    write("kubeconfig", "full", kubeconfig.as_bytes());
    eprintln!("seeds written under fuzz/corpus/");
}
