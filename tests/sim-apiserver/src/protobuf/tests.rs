//! Transcoding round trips on realistic objects, and hostile bytes at every layer.

use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

/// `v` without nulls: JSON nulls are absent fields in protobuf.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k.clone(), without_nulls(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

fn round_trip(object: &Value) -> Value {
    let body = Bytes::from(encode_object(object).expect("encodes"));
    decode_object(&body).expect("decodes")
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "5c1f6a3e-1d2b-4c3d-9e8f-0a1b2c3d4e5f",
            "resourceVersion": "42", "generation": 3, "creationTimestamp": "2026-11-01T10:00:00Z",
            "labels": {"app": "web"}, "annotations": {"deployment.kubernetes.io/revision": "2"}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
            "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "250m"}},
                    "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 5}}],
                    "restartPolicy": "Always", "terminationGracePeriodSeconds": 30}}},
        "status": {"observedGeneration": 3, "replicas": 0, "conditions": [{"type": "Available", "status": "True",
            "lastUpdateTime": "2026-11-01T10:00:05Z", "lastTransitionTime": "2026-11-01T10:00:05Z",
            "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."}]}
    })
}

#[test]
fn a_realistic_pod_round_trips() {
    for i in [0, 7, 4242] {
        let pod: Value = serde_json::from_str(&crate::fixtures::realistic_pod_json(i)).unwrap();
        assert_eq!(round_trip(&pod), without_nulls(&pod), "pod {i}");
    }
}

#[test]
fn a_deployment_with_int_or_string_quantities_and_a_zero_replica_count_round_trips() {
    let d = deployment();
    assert_eq!(round_trip(&d), d);
}

#[test]
fn events_of_both_groups_and_a_lease_round_trip_with_micro_times() {
    let core = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "web.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "apiVersion": "v1"},
        "reason": "Scheduled", "message": "assigned", "type": "Normal", "count": 2,
        "source": {"component": "scheduler"}, "firstTimestamp": "2026-11-01T10:00:00Z",
        "lastTimestamp": "2026-11-01T10:00:01Z", "eventTime": "2026-11-01T10:00:00.123456Z",
        "reportingComponent": "scheduler", "reportingInstance": "sched-1"});
    assert_eq!(round_trip(&core), core);
    let events = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "web.2", "namespace": "default"},
        "eventTime": "2026-11-01T10:00:00.000001Z", "reportingController": "kubelet",
        "reportingInstance": "node-1", "action": "Pulling", "reason": "Pulling", "type": "Normal",
        "regarding": {"kind": "Pod", "name": "web"}, "note": "pulling image",
        "series": {"count": 3, "lastObservedTime": "2026-11-01T10:00:09.500000Z"}});
    assert_eq!(round_trip(&events), events);
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "leader", "namespace": "kube-system"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
            "acquireTime": "2026-11-01T10:00:00.000000Z", "renewTime": "2026-11-01T10:00:10.250000Z",
            "leaseTransitions": 0}});
    assert_eq!(round_trip(&lease), lease);
}

#[test]
fn config_maps_namespaces_services_lists_and_statuses_round_trip() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
        "data": {"a": "1"}, "binaryData": {"b": "AAEC/w=="}, "immutable": false});
    assert_eq!(round_trip(&cm), cm);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team",
        "deletionTimestamp": "2026-11-01T10:00:00Z", "deletionGracePeriodSeconds": 0},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
    assert_eq!(round_trip(&ns), ns);
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
            {"name": "m", "port": 9090, "targetPort": "metrics"}],
            "selector": {"app": "web"}, "type": "ClusterIP", "clusterIP": "10.96.0.10"}});
    assert_eq!(round_trip(&svc), svc);
    let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "7", "continue": "tok", "remainingItemCount": 3},
        "items": [{"metadata": {"name": "a"}, "data": {"k": "v"}}, {"metadata": {"name": "b"}}]});
    assert_eq!(round_trip(&list), list);
    let status = json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "message": "pods \"x\" not found", "reason": "NotFound",
        "details": {"name": "x", "kind": "pods", "causes": [{"reason": "FieldValueInvalid", "field": "spec"}]},
        "code": 404});
    assert_eq!(round_trip(&status), status);
    let delete = json!({"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 0, "preconditions": {"uid": "u"}, "dryRun": ["All"]});
    assert_eq!(round_trip(&delete), delete);
}

/// Every field Go embeds with an empty JSON name in the groups beyond the first seven
/// (`ingressRuleValue`, `rule`, `ruleWithOperations` twice over, `deviceConfiguration`) keeps its
/// fields in the outer JSON object: read as an ordinary field, they would be dropped on the way
/// in and the round trip would lose `http`, `apiGroups` and `opaque`. So do the fields whose
/// `.proto` name differs from their JSON name (`Webhooks`, `Name`, `Expression`), and the one
/// whose JSON name is upper case (`Port`).
#[test]
fn inline_and_renamed_fields_of_every_api_group_round_trip() {
    let ingress = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"ingressClassName": "nginx", "rules": [{"host": "example.com", "http": {"paths": [
            {"path": "/", "pathType": "Prefix",
             "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}});
    let webhook = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "guard"},
        "webhooks": [{"name": "guard.example.com",
            "clientConfig": {"service": {"namespace": "guard", "name": "guard", "path": "/validate", "port": 443}},
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["pods"], "scope": "Namespaced"}],
            "matchConditions": [{"name": "not-system", "expression": "request.namespace != 'kube-system'"}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 5}]});
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}});
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "replicas"},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"resourceNames": ["web"], "operations": ["CREATE"],
                "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5"}]}});
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "gpu", "namespace": "default"},
        "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}],
            "config": [{"requests": ["gpu"],
                "opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "time-sliced"}}}]}}});
    let job = json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "default"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"backoffLimit": 2,
            "template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "run",
                "image": "busybox", "env": [{"name": "MODE", "valueFrom":
                    {"configMapKeyRef": {"name": "settings", "key": "mode"}}}]}],
                "volumes": [{"name": "cache", "emptyDir": {}}]}}}}}});
    for object in [ingress, webhook, node, policy, claim, job] {
        assert_eq!(round_trip(&object), object);
    }
}

#[test]
fn extra_values_and_raw_extensions_keep_their_json_shapes() {
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "metadata": {}, "spec": {"user": "u", "extra": {"scopes": ["a", "b"]},
        "resourceAttributes": {"verb": "get", "resource": "pods"}}});
    assert_eq!(round_trip(&sar), sar);
}

#[test]
fn custom_resources_and_misfitting_objects_are_typed_errors() {
    let cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert!(matches!(
        encode_object(&cr),
        Err(ProtobufError::UnknownKind { .. })
    ));
    let same_kind_other_group = json!({"apiVersion": "events.example.com/v1", "kind": "Event"});
    assert!(matches!(
        encode_object(&same_kind_other_group),
        Err(ProtobufError::UnknownKind { .. })
    ));
    let bad = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 3}});
    assert!(
        matches!(encode_object(&bad), Err(ProtobufError::Json { path, .. }) if path == ".metadata.name")
    );
    let bad_time =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"creationTimestamp": "yesterday"}});
    assert!(matches!(
        encode_object(&bad_time),
        Err(ProtobufError::Json { .. })
    ));
    let unknown = Unknown::new("example.com/v1", "Widget", Bytes::new()).encode();
    assert!(matches!(
        decode_object(&Bytes::from(unknown)),
        Err(ProtobufError::UnknownKind { .. })
    ));
}

#[test]
fn an_envelope_of_json_or_gzip_is_refused_not_misread() {
    let mut u = Unknown::new("v1", "ConfigMap", Bytes::from_static(b"{}"));
    u.content_type = "application/json".into();
    assert!(matches!(
        decode_object(&Bytes::from(u.encode())),
        Err(ProtobufError::Malformed { .. })
    ));
    let mut u = Unknown::new("v1", "ConfigMap", Bytes::new());
    u.content_encoding = "gzip".into();
    assert!(matches!(
        decode_object(&Bytes::from(u.encode())),
        Err(ProtobufError::Malformed { .. })
    ));
}

#[test]
fn an_unknown_field_number_is_a_typed_error() {
    // Field 999 (varint) in a ConfigMap.
    let raw = Bytes::from_static(b"\xb8\x3e\x01");
    let body = Bytes::from(Unknown::new("v1", "ConfigMap", raw).encode());
    assert!(matches!(
        decode_object(&body),
        Err(ProtobufError::UnknownField { number: 999, .. })
    ));
}

#[test]
fn go_style_empty_fields_read_back_as_kube_apiserver_json() {
    // Go writes every non-pointer field: empty strings and a zero creationTimestamp (an empty
    // Time message) are absent from kube-apiserver's JSON.
    let mut meta = Vec::new();
    meta.extend_from_slice(b"\x0a\x03gen"); // name
    meta.extend_from_slice(b"\x12\x00"); // generateName ""
    meta.extend_from_slice(b"\x42\x00"); // creationTimestamp {}
    let mut raw = vec![0x0a, meta.len() as u8];
    raw.extend_from_slice(&meta);
    let body = Bytes::from(Unknown::new("v1", "ConfigMap", Bytes::from(raw)).encode());
    assert_eq!(
        decode_object(&body).unwrap(),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gen"}})
    );
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let bytes = Bytes::from(data.clone());
        let _ = Unknown::decode(&bytes);
        let _ = RawWatchEvent::decode(&bytes);
        let _ = decode_object(&bytes);
        let _ = decode_message_as("v1", "Pod", &data);
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend_from_slice(&data);
        let _ = decode_object(&Bytes::from(with_magic));
        let mut frames = FrameDecoder::new(256);
        frames.push(&data);
        while let Ok(Some(f)) = frames.next_frame() {
            let _ = RawWatchEvent::decode(&f);
        }
    }

    #[test]
    fn a_pod_message_mutated_anywhere_never_panics(at in 0usize..4096, byte in any::<u8>()) {
        let pod: Value = serde_json::from_str(&crate::fixtures::realistic_pod_json(1)).unwrap();
        let mut body = encode_object(&pod).unwrap();
        let at = at % body.len();
        body[at] = byte;
        let _ = decode_object(&Bytes::from(body.clone()));
        body.truncate(at);
        let _ = decode_object(&Bytes::from(body));
    }
}

#[test]
fn a_realistic_pod_takes_at_most_six_tenths_of_its_json_bytes() {
    // The protobuf goal: at most 0.6x the JSON bytes on the wire; field names become varint tags.
    let json = crate::fixtures::realistic_pod_json(3);
    let pod: Value = serde_json::from_str(&json).unwrap();
    let pb = encode_object(&pod).unwrap();
    let ratio = pb.len() as f64 / json.len() as f64;
    assert!(
        ratio <= 0.6,
        "{} protobuf bytes for {} JSON bytes",
        pb.len(),
        json.len()
    );
}

fn int_or_string() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i32>().prop_map(Value::from),
        "[0-9]{1,3}%".prop_map(Value::from),
    ]
}

proptest! {
    #[test]
    fn generated_config_maps_and_deployments_round_trip(
        name in "[a-z][a-z0-9-]{0,20}",
        // Empty maps are absent in protobuf, as Go omits them from JSON.
        data in proptest::collection::btree_map(".{0,12}", ".{0,40}", 1..6),
        binary in proptest::collection::btree_map("[a-z]{1,8}", proptest::collection::vec(any::<u8>(), 0..32), 1..4),
        replicas in any::<i32>(),
        generation in any::<i64>(),
        surge in int_or_string(),
        seconds in 0i64..4_102_444_800,
    ) {
        use base64::Engine as _;
        let binary: serde_json::Map<String, Value> = binary
            .into_iter()
            .map(|(k, v)| (k, Value::from(base64::engine::general_purpose::STANDARD.encode(v))))
            .collect();
        let created = crate::protobuf::time::format_rfc3339(seconds, 0, 0);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "generation": generation, "creationTimestamp": created, "labels": data},
            "data": data, "binaryData": binary});
        prop_assert_eq!(round_trip(&cm), cm);
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "strategy": {"rollingUpdate": {"maxSurge": surge}}}});
        prop_assert_eq!(round_trip(&d), d);
    }
}
