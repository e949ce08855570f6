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

/// A shard selector as kube-apiserver 1.36.3 echoes it.
const SHARD: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";

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
            remaining_item_count: Some(3),
            shard_selector: None,
        }
    );
    let sharded = json!({"apiVersion": "v1", "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "8", "shardInfo": {"selector": SHARD}}, "items": []});
    let raw = raw_of(&sharded);
    let mut fields = wire::Reader::new(&raw, "list");
    let Some(wire::Field::Bytes(1, lm)) = fields.next_field().unwrap() else {
        panic!("no list meta")
    };
    assert_eq!(
        meta::list_meta(lm).unwrap().shard_selector.as_deref(),
        Some(SHARD)
    );
    let status = json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "message": "too old resource version: 1 (5)", "reason": "Expired",
        "details": {"name": "x", "kind": "pods", "retryAfterSeconds": 2,
            "causes": [{"reason": "FieldValueInvalid", "message": "m", "field": "spec"}]},
        "code": 410});
    let expected: crate::Status = serde_json::from_value(status.clone()).unwrap();
    let got = crate::Status::from_protobuf(&raw_of(&status)).unwrap();
    assert_eq!(got, expected);
    assert!(got.is_expired());
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_in_any_layer(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let bytes = Bytes::from(data.clone());
        let _ = Unknown::decode(&bytes);
        let _ = RawWatchEvent::decode(&bytes);
        let _ = meta::object_meta_of(&data);
        let _ = meta::object_meta(&data);
        let _ = meta::list_meta(&data);
        let _ = crate::Status::from_protobuf(&data);
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend_from_slice(&data);
        let _ = Unknown::decode(&Bytes::from(with_magic));
        let mut frames = FrameDecoder::new(256);
        frames.push(&data);
        while let Ok(Some(f)) = frames.next_frame() {
            let _ = RawWatchEvent::decode(&f);
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
        let e = RawWatchEvent { event_type: ty, object: enc };
        let mut stream = Vec::new();
        encode_frame(&mut stream, &e.encode());
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME);
        d.push(&stream);
        let f = d.next_frame().unwrap().unwrap();
        prop_assert_eq!(RawWatchEvent::decode(&f).unwrap(), e);
        prop_assert!(d.finish().is_ok());
    }
}

fn frame_of(event_type: &str, object: &serde_json::Value) -> Vec<u8> {
    let object = Bytes::from(sim_apiserver::protobuf::encode_object(object).unwrap());
    let mut out = Vec::new();
    encode_frame(
        &mut out,
        &RawWatchEvent {
            event_type: event_type.into(),
            object,
        }
        .encode(),
    );
    out
}

#[test]
fn protobuf_watch_frames_carry_bookmarks_and_status_errors() {
    use crate::store_index::DynamicObject;
    use crate::WatchEvent as Event;
    let mut stream = frame_of(
        "BOOKMARK",
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"resourceVersion": "12",
            "annotations": {"k8s.io/initial-events-end": "true"}}}),
    );
    stream.extend(frame_of(
        "ERROR",
        &json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
            "reason": "Expired", "message": "too old", "code": 410}),
    ));
    let mut d =
        crate::WatchDecoder::<DynamicObject>::for_content_type(Some(WATCH_MEDIA_TYPE), 1 << 20);
    let mut events = Vec::new();
    // Cut anywhere: the frames come back whole.
    for part in stream.chunks(7) {
        d.decode(Bytes::copy_from_slice(part), &mut events).unwrap();
    }
    d.finish(&mut events).unwrap();
    match &events[..] {
        [Event::Bookmark(b), Event::Error(s)] => {
            assert_eq!(b.resource_version, "12");
            assert!(b.initial_events_end);
            assert!(s.is_expired() && s.code == 410);
        }
        other => panic!("{other:?}"),
    }
    // An object event for a type that reads JSON only is a typed error, not a panic or a skip.
    let added = frame_of(
        "ADDED",
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}),
    );
    let mut d = crate::WatchDecoder::<DynamicObject>::protobuf(1 << 20);
    let err = d.decode(Bytes::from(added), &mut events).unwrap_err();
    assert!(
        matches!(
            err,
            crate::DecodeError::Protobuf(ProtobufError::Unsupported { .. })
        ),
        "{err}"
    );
    // A cut frame at the end of the stream.
    let mut d = crate::WatchDecoder::<DynamicObject>::protobuf(1 << 20);
    d.decode(Bytes::from_static(b"\x00\x00\x00\x09abc"), &mut events)
        .unwrap();
    assert!(matches!(
        d.finish(&mut events),
        Err(crate::DecodeError::Truncated(3))
    ));
}

#[test]
fn protobuf_list_bodies_are_checked_like_json_ones() {
    use crate::store_index::DynamicObject;
    use crate::{ListPageError, ObjectList};
    let body =
        |v: serde_json::Value| Bytes::from(sim_apiserver::protobuf::encode_object(&v).unwrap());
    let gone = body(
        json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "reason": "Expired", "message": "too old", "code": 410}),
    );
    let err = ObjectList::<DynamicObject>::from_body(&gone, Some(MEDIA_TYPE)).unwrap_err();
    assert_eq!(err.status().map(|s| s.code), Some(410));
    let empty = body(
        json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": []}),
    );
    let page = ObjectList::<DynamicObject>::from_protobuf(&empty).unwrap();
    assert_eq!((page.items.len(), page.resource_version.as_str()), (0, "5"));
    let no_rv = body(json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []}));
    let not_a_list = body(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}));
    for bad in [
        no_rv,
        not_a_list,
        Bytes::from_static(b"k8s\x00\x12\x05ab"),
        Bytes::from_static(b"{}"),
    ] {
        assert!(matches!(
            ObjectList::<DynamicObject>::from_protobuf(&bad),
            Err(ListPageError::NotAList(_))
        ));
    }
    // Items a JSON-only type cannot read make the page an error, never a shorter list.
    let one = body(
        json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "5"},
        "items": [{"metadata": {"name": "a"}}]}),
    );
    assert!(ObjectList::<DynamicObject>::from_protobuf(&one).is_err());
    // A protobuf error body is read as the Status it is, and quotes nothing of a non-Status.
    let s = crate::Status::from_response(410, &gone);
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    let s = crate::Status::from_response(500, &one);
    assert!(
        !s.message.contains('a') || s.message.contains("protobuf"),
        "{s:?}"
    );
}

proptest! {
    #[test]
    fn arbitrary_protobuf_bodies_and_streams_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        use crate::store_index::{CompactObject, DynamicObject};
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend_from_slice(&data);
        for body in [Bytes::from(data.clone()), Bytes::from(with_magic)] {
            let _ = crate::ObjectList::<DynamicObject>::from_protobuf(&body);
            let _ = crate::ObjectList::<CompactObject>::from_protobuf(&body);
            let _ = crate::Status::from_response(500, &body);
        }
        let mut d = crate::WatchDecoder::<CompactObject>::protobuf(300);
        let mut events = Vec::new();
        let _ = d.decode(Bytes::from(data), &mut events);
        let _ = d.finish(&mut events);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lister_watcher_of_ones_own_decodes_a_protobuf_watch_body_by_its_content_type() {
    use futures::StreamExt as _;
    let mut stream = frame_of(
        "ADDED",
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "resourceVersion": "3"}}),
    );
    stream.extend(frame_of(
        "BOOKMARK",
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"resourceVersion": "4"}}),
    ));
    // Cut in 5-byte chunks, as a server may write them.
    let chunks: Vec<Result<Bytes, crate::BoxError>> = stream
        .chunks(5)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let events: Vec<_> = crate::decode_watch_body_as::<crate::store_index::CompactObject, _>(
        futures::stream::iter(chunks),
        Some(WATCH_MEDIA_TYPE),
        1 << 20,
    )
    .collect()
    .await;
    match &events[..] {
        [Ok(crate::WatchEvent::Added(a)), Ok(crate::WatchEvent::Bookmark(b))] => {
            use crate::store_index::Object;
            assert_eq!((a.name(), a.resource_version()), ("a", Some("3")));
            assert_eq!(b.resource_version, "4");
        }
        other => panic!("{other:?}"),
    }
}

/// M1 on protobuf: a watch frame is a slice of a chunk the thread reading the body received (or,
/// cut across chunks, a buffer that thread made), so an object decoded from it (on the
/// reflector's lane) keeps a copy of its message, not a slice of the frame; else it would pin the
/// HTTP client's read buffer, and the cache would move into the readers' allocator arenas as it
/// turns over.
#[test]
fn m1_compact_objects_from_watch_frames_keep_a_copy_made_where_they_are_decoded() {
    use crate::store_index::{CompactObject, Object, RawEncoding};
    use crate::WatchEvent as Event;
    let stream = frame_of(
        "ADDED",
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "ns",
            "resourceVersion": "3", "labels": {"app": "web"}}}),
    );
    let mut d = crate::WatchDecoder::<CompactObject>::protobuf(1 << 20);
    let mut frames = Vec::new();
    d.frames(Bytes::from(stream), &mut frames).unwrap();
    let spans: Vec<std::ops::Range<usize>> = frames
        .iter()
        .map(|f| f.bytes.as_ptr() as usize..f.bytes.as_ptr() as usize + f.bytes.len())
        .collect();
    let mut events: Vec<Event<CompactObject>> = Vec::new();
    crate::wire::decoder::decode_frames(frames, &mut events, false).unwrap();
    let [Event::Added(pod)] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(
        (pod.encoding(), pod.name(), pod.label("app")),
        (RawEncoding::Protobuf, "a", Some("web"))
    );
    let kept = pod.raw().as_ptr() as usize;
    assert!(
        spans.iter().all(|frame| !frame.contains(&kept)),
        "the object keeps a slice of the reader's frame"
    );
}

/// The metadata representation in protobuf, as client-go's metadata client receives it: list
/// items and watch events decode to `PartialObjectMetadata` of `meta.k8s.io/v1`; a whole object
/// (from a server that does not know the representation) keeps its metadata and its own type, the
/// rest skipped.
#[test]
fn partial_object_metadata_decodes_its_representation_and_whole_objects_from_protobuf() {
    use crate::store_index::{Object, PartialObjectMetadata};
    use crate::{ObjectList, WatchDecoder, WatchEvent as Event};
    let meta = json!({"name": "a", "namespace": "ns", "resourceVersion": "3",
        "labels": {"app": "web"}});
    let list = Bytes::from(
        sim_apiserver::protobuf::encode_object(&json!({"apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadataList", "metadata": {"resourceVersion": "5"},
            "items": [{"metadata": meta}]}))
        .unwrap(),
    );
    let page = ObjectList::<PartialObjectMetadata>::from_protobuf(&list).unwrap();
    let [item] = &page.items[..] else {
        panic!("{:?}", page.items)
    };
    assert!(item.is_metadata_representation());
    assert_eq!((item.name(), item.label("app")), ("a", Some("web")));
    assert_eq!(page.resource_version.as_str(), "5");

    let mut stream = frame_of(
        "MODIFIED",
        &json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": meta}),
    );
    stream.extend(frame_of(
        "ADDED",
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b", "resourceVersion": "4"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
    ));
    let mut d = WatchDecoder::<PartialObjectMetadata>::protobuf(1 << 20);
    let mut events = Vec::new();
    d.decode(Bytes::from(stream), &mut events).unwrap();
    match &events[..] {
        [Event::Modified(a), Event::Added(b)] => {
            assert!(a.is_metadata_representation());
            assert_eq!((a.name(), a.resource_version()), ("a", Some("3")));
            assert!(!b.is_metadata_representation());
            assert_eq!(
                (b.api_version(), b.kind(), b.name()),
                (Some("v1"), Some("Pod"), "b")
            );
            assert!(!serde_json::to_string(b).unwrap().contains("spec"));
        }
        other => panic!("{other:?}"),
    }
}

/// A `k8s_openapi` user's way to objects that came in protobuf: `decode_compact` gives from a
/// protobuf `CompactObject` what `decode` gives from the JSON one of the same pod.
#[test]
fn decode_compact_gives_from_protobuf_what_decode_gives_from_json() {
    use crate::protobuf::convert::decode_compact;
    use crate::store_index::CompactObject;
    use k8s_openapi::api::core::v1::Pod;

    for i in [0, 7, 12_345] {
        let text = sim_apiserver::fixtures::realistic_pod_json(i);
        let from_json = CompactObject::from_json(Bytes::from(text.clone())).unwrap();
        let object: serde_json::Value = serde_json::from_str(&text).unwrap();
        let from_pb = CompactObject::from_protobuf(raw_of(&object), "v1", "Pod").unwrap();
        assert!(from_pb.decode::<Pod>().is_err(), "decode reads JSON only");
        let expected: Pod = from_json.decode().unwrap();
        assert_eq!(decode_compact::<Pod>(&from_pb).unwrap(), expected);
        assert_eq!(decode_compact::<Pod>(&from_json).unwrap(), expected);
    }
    let unknown = CompactObject::from_protobuf(
        raw_of(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})),
        "example.com/v1",
        "Widget",
    )
    .unwrap();
    let err = decode_compact::<serde_json::Value>(&unknown).unwrap_err();
    assert!(
        err.to_string().contains("no protobuf message is known"),
        "{err}"
    );
}

/// `to_k8s_pb` and `from_k8s_pb` carry a `k8s_openapi` pod to its `k8s_pb` twin and back with
/// nothing lost, and the twin is what the server's protobuf gives.
#[cfg(feature = "k8s-pb")]
#[test]
fn k8s_openapi_and_k8s_pb_objects_convert_both_ways() {
    use crate::protobuf::convert::{from_k8s_pb, to_k8s_pb};
    use crate::store_index::k8s_pb::api::core::v1::Pod as PbPod;
    use k8s_openapi::api::core::v1::Pod;
    use prost::Message as _;

    let text = sim_apiserver::fixtures::realistic_pod_json(3);
    let object: serde_json::Value = serde_json::from_str(&text).unwrap();
    let openapi: Pod = serde_json::from_str(&text).unwrap();
    let pb: PbPod = to_k8s_pb(&openapi).unwrap();
    assert_eq!(pb, PbPod::decode(raw_of(&object)).unwrap());
    assert_eq!(from_k8s_pb::<Pod, _>(&pb).unwrap(), openapi);
    let wrong_kind = to_k8s_pb::<PbPod>(&json!({"metadata": {"name": 3}})).unwrap_err();
    assert!(
        matches!(&wrong_kind, ProtobufError::Json { path, .. } if path == ".metadata.name"),
        "{wrong_kind}"
    );
}
