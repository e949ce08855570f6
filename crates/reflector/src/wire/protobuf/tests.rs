//! Hostile bytes at every layer of the client's protobuf codec, and metadata read off the wire
//! against the simulator's descriptor-driven encoder.

use bytes::Bytes;
use proptest::prelude::*;
use serde_json::json;

use super::*;

fn raw_of(object: &serde_json::Value) -> Bytes {
    let body = Bytes::from(sim_apiserver::protobuf::encode_object(object).unwrap());
    Unknown::decode(&body).unwrap().raw
}

#[test]
fn object_meta_reads_as_its_json_does() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default", "uid": "u-1", "resourceVersion": "42",
            "generation": 3, "creationTimestamp": "2026-11-01T10:00:00Z",
            "deletionTimestamp": "2026-11-01T11:00:00Z", "deletionGracePeriodSeconds": 0,
            "labels": {"app": "web", "tier": "front"}, "annotations": {"a": "b"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                "uid": "rs-1", "controller": true, "blockOwnerDeletion": true}],
            "finalizers": ["f/one"],
            "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-01T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {}}}}]},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let expected: crate::store_index::ObjectMeta =
        serde_json::from_value(pod["metadata"].clone()).unwrap();
    assert_eq!(meta::object_meta_of(&raw_of(&pod)).unwrap(), expected);
}

#[test]
fn list_meta_and_status_read_as_their_json_does() {
    let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "7", "continue": "tok", "remainingItemCount": 3}, "items": []});
    let raw = raw_of(&list);
    let mut fields = wire::Reader::new(&raw, "list");
    let Some(wire::Field::Bytes(1, lm)) = fields.next_field().unwrap() else {
        panic!("no list meta")
    };
    assert_eq!(
        meta::list_meta(lm).unwrap(),
        meta::ListMeta {
            resource_version: "7".into(),
            continue_token: Some("tok".into()),
            remaining_item_count: Some(3)
        }
    );
    let status = json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "message": "too old resource version: 1 (5)", "reason": "Expired",
        "details": {"name": "x", "kind": "pods", "retryAfterSeconds": 2,
            "causes": [{"reason": "FieldValueInvalid", "message": "m", "field": "spec"}]},
        "code": 410});
    let expected: crate::Status = serde_json::from_value(status.clone()).unwrap();
    let got = meta::status(&raw_of(&status)).unwrap();
    assert_eq!(got, expected);
    assert!(got.is_expired());
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_in_any_layer(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let bytes = Bytes::from(data.clone());
        let _ = Unknown::decode(&bytes);
        let _ = WatchEvent::decode(&bytes);
        let _ = meta::object_meta_of(&data);
        let _ = meta::object_meta(&data);
        let _ = meta::list_meta(&data);
        let _ = meta::status(&data);
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend_from_slice(&data);
        let _ = Unknown::decode(&Bytes::from(with_magic));
        let mut frames = FrameDecoder::new(256);
        frames.push(&data);
        while let Ok(Some(f)) = frames.next_frame() {
            let _ = WatchEvent::decode(&f);
        }
        let _ = frames.finish();
    }

    #[test]
    fn envelopes_and_events_round_trip(
        api_version in "[a-z0-9./]{0,20}", kind in "[A-Za-z]{0,20}",
        raw in proptest::collection::vec(any::<u8>(), 0..256), ty in "[A-Z]{1,10}",
    ) {
        let u = Unknown::new(api_version, kind, Bytes::from(raw));
        let enc = Bytes::from(u.encode());
        prop_assert_eq!(&Unknown::decode(&enc).unwrap(), &u);
        let e = WatchEvent { event_type: ty, object: enc };
        let mut stream = Vec::new();
        encode_frame(&mut stream, &e.encode());
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME);
        d.push(&stream);
        let f = d.next_frame().unwrap().unwrap();
        prop_assert_eq!(WatchEvent::decode(&f).unwrap(), e);
        prop_assert!(d.finish().is_ok());
    }
}
