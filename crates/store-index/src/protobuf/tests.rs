//! A `CompactObject` read from protobuf answers as the same object read from JSON; hostile bytes
//! are typed errors.

use bytes::Bytes;
use proptest::prelude::*;
use serde_json::json;

use crate::{CompactObject, Object, RawEncoding};

fn message_of(object: &serde_json::Value) -> Bytes {
    let body = Bytes::from(sim_apiserver::protobuf::encode_object(object).unwrap());
    sim_apiserver::protobuf::Unknown::decode(&body).unwrap().raw
}

fn pod() -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default", "uid": "u-1", "resourceVersion": "42",
            "generation": 3, "creationTimestamp": "2026-11-01T10:00:00Z",
            "deletionTimestamp": "2026-11-01T11:00:00Z",
            "labels": {"tier": "front", "app": "web"}, "annotations": {"a": "b", "z": "y"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                "uid": "rs-1", "controller": true}],
            "finalizers": ["f/one"]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}})
}

#[test]
fn a_protobuf_compact_object_answers_as_its_json_twin() {
    let json = CompactObject::from_json(Bytes::from(pod().to_string())).unwrap();
    let pb = CompactObject::from_protobuf(message_of(&pod()), "v1", "Pod").unwrap();
    assert_eq!(
        (pb.encoding(), json.encoding()),
        (RawEncoding::Protobuf, RawEncoding::Json)
    );
    assert_eq!(
        (pb.name(), pb.namespace(), pb.uid()),
        (json.name(), json.namespace(), json.uid())
    );
    assert_eq!(
        (pb.resource_version(), pb.generation()),
        (Some("42"), Some(3))
    );
    assert_eq!((pb.api_version(), pb.kind()), (Some("v1"), Some("Pod")));
    assert_eq!(pb.deletion_timestamp(), json.deletion_timestamp());
    assert_eq!(
        pb.label_pairs().collect::<Vec<_>>(),
        json.label_pairs().collect::<Vec<_>>()
    );
    assert_eq!(pb.annotation("z"), Some("y"));
    assert_eq!(pb.metadata(), json.metadata());
    // The strings are read in place: the name lies inside the message.
    let raw = pb.raw().as_ptr() as usize..pb.raw().as_ptr() as usize + pb.raw().len();
    assert!(raw.contains(&(pb.name().as_ptr() as usize)));
    assert!(pb.decode::<serde_json::Value>().is_err());
    assert!(serde_json::to_string(&pb).is_err());
    assert_ne!(pb, json);
}

#[test]
fn a_label_written_twice_keeps_its_last_value_as_a_map_does() {
    // metadata { labels { a: 1 } labels { a: 2 } labels { b: 3 } }
    let entry = |k: &[u8], v: &[u8]| {
        let mut e = vec![0x0a, k.len() as u8];
        e.extend_from_slice(k);
        e.extend_from_slice(&[0x12, v.len() as u8]);
        e.extend_from_slice(v);
        let mut f = vec![0x5a, e.len() as u8];
        f.extend(e);
        f
    };
    let meta: Vec<u8> = [entry(b"a", b"1"), entry(b"a", b"2"), entry(b"b", b"3")].concat();
    let mut message = vec![0x0a, meta.len() as u8];
    message.extend(meta);
    let obj = CompactObject::from_protobuf(Bytes::from(message), "v1", "ConfigMap").unwrap();
    assert_eq!(
        obj.label_pairs().collect::<Vec<_>>(),
        [("a", "2"), ("b", "3")]
    );
    assert_eq!(obj.metadata().labels.as_ref().unwrap()["a"], "2");
}

#[test]
fn malformed_metadata_is_a_typed_error() {
    // A name that is not UTF-8; a length past the end.
    for bad in [&b"\x0a\x03\x0a\x01\xff"[..], b"\x0a\x05\x0a\x09ab"] {
        assert!(CompactObject::from_protobuf(Bytes::copy_from_slice(bad), "v1", "Pod").is_err());
    }
}

#[cfg(feature = "k8s-pb")]
#[test]
fn a_protobuf_compact_object_decodes_into_its_k8s_pb_type_on_demand() {
    use crate::k8s_pb::api::core::v1::{ConfigMap, Pod};
    let pb = CompactObject::from_protobuf(message_of(&pod()), "v1", "Pod").unwrap();
    let typed: Pod = pb.decode_pb().unwrap();
    assert_eq!(typed.spec.unwrap().node_name.as_deref(), Some("n1"));
    assert!(pb.decode_pb::<ConfigMap>().is_err());
    let json = CompactObject::from_json(Bytes::from(pod().to_string())).unwrap();
    assert!(json.decode_pb::<Pod>().is_err());
}

#[test]
fn a_varint_beyond_64_bits_is_malformed_not_cut() {
    use super::wire::{Field, Reader};
    // Field 3, a varint of ten bytes whose last holds more than the 64th bit.
    let over = [
        0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
    ];
    assert!(matches!(
        Reader::new(&over, "test").next_field(),
        Err(super::ProtobufError::Malformed {
            why: "a varint beyond 64 bits",
            ..
        })
    ));
    let max = [
        0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    ];
    assert_eq!(
        Reader::new(&max, "test").next_field().unwrap(),
        Some(Field::Varint(3, u64::MAX))
    );
}

/// A label or annotation map: a few short keys, so that labels and annotations share some.
fn small_map() -> impl Strategy<Value = std::collections::BTreeMap<String, String>> {
    proptest::collection::btree_map("[a-d]{1,2}", "[a-z0-9]{0,3}", 0..6)
}

proptest! {
    /// CM2 and CM3 for protobuf, across objects read one after another on one thread (the label
    /// and annotation buffers are reused between objects, so one object's entries must never
    /// show in the next's).
    #[test]
    fn objects_read_in_turn_each_answer_their_own_labels_and_annotations(
        objects in proptest::collection::vec((small_map(), small_map()), 1..5),
    ) {
        for (labels, annotations) in objects {
            let mut metadata = json!({"name": "p"});
            if !labels.is_empty() {
                metadata["labels"] = json!(labels);
            }
            if !annotations.is_empty() {
                metadata["annotations"] = json!(annotations);
            }
            let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata});
            let pb = CompactObject::from_protobuf(message_of(&object), "v1", "Pod").unwrap();
            let pairs = |m: &std::collections::BTreeMap<String, String>| {
                m.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>()
            };
            let owned = |it: &mut dyn Iterator<Item = (&str, &str)>| {
                it.map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>()
            };
            prop_assert_eq!(owned(&mut pb.label_pairs()), pairs(&labels));
            for k in labels.keys().chain(annotations.keys()) {
                prop_assert_eq!(pb.annotation(k), annotations.get(k).map(String::as_str));
            }
            let full = pb.metadata();
            prop_assert_eq!(full.labels.clone().unwrap_or_default(), labels);
            prop_assert_eq!(full.annotations.clone().unwrap_or_default(), annotations);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = crate::protobuf::object_meta_of(&data);
        if let Ok(obj) = CompactObject::from_protobuf(Bytes::from(data), "v1", "Pod") {
            let _ = (obj.name(), obj.namespace(), obj.label("a"), obj.annotation("b"));
            let _ = obj.label_pairs().count();
            let _ = obj.metadata();
            let _ = obj.heap_size();
        }
    }

    #[test]
    fn a_pod_message_mutated_anywhere_never_panics(at in 0usize..4096, byte in any::<u8>()) {
        let mut message = message_of(&pod()).to_vec();
        let at = at % message.len();
        message[at] = byte;
        if let Ok(obj) = CompactObject::from_protobuf(Bytes::from(message), "v1", "Pod") {
            let _ = (obj.name(), obj.label_pairs().count(), obj.metadata());
        }
    }
}
