//! Whole response bodies in protobuf: list pages of each object type, `Status` errors, a
//! message read as a compact object and then decoded on demand, a message checked for a typed
//! view (and, when it passes with no field the view does not know, decoded by prost too, and
//! read whole through the view), and the transcoder from protobuf to JSON for the kinds it knows.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use prost::Message as _;
use reflector::protobuf::{convert, meta, transcode, view, PbView, MAGIC};
use reflector::store_index::k8s_pb::api::core::v1::Pod;
use reflector::store_index::{CompactObject, DynamicObject, Pb};
use reflector::{ObjectList, Status};

/// Kinds the input's first byte picks from.
const KINDS: [(&str, &str); 4] = [
    ("v1", "Pod"),
    ("v1", "ConfigMap"),
    ("apps/v1", "Deployment"),
    ("v1", "Status"),
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let mut enveloped = MAGIC.to_vec();
    enveloped.extend_from_slice(body);
    for whole in [Bytes::copy_from_slice(body), Bytes::from(enveloped)] {
        let _ = ObjectList::<Pb<Pod>>::from_protobuf(&whole);
        let _ = ObjectList::<PbView<Pod>>::from_protobuf(&whole);
        let _ = ObjectList::<CompactObject>::from_protobuf(&whole);
        let _ = ObjectList::<DynamicObject>::from_protobuf(&whole);
        let _ = Status::from_response(500, &whole);
        let _ = transcode::decode_object(&whole);
    }
    let _ = meta::list_meta(body);
    let _ = Status::from_protobuf(body);

    // What the view's walk accepts with no field it does not know, prost decodes (V1-V4), and
    // the view reads to its end.
    if let Ok(pod) = view::validate::<Pod>(body) {
        let unknown = view::unknown_fields::<Pod>(body).expect("validated");
        assert!(
            unknown > 0 || Pod::decode(body).is_ok(),
            "a view accepted what prost refuses"
        );
        let _ = format!("{pod:?}");
    }

    let (api_version, kind) = KINDS[pick as usize % KINDS.len()];
    let message = Bytes::copy_from_slice(body);
    let _ = transcode::decode_message_as(api_version, kind, body);
    let _ = convert::decode_message_into::<k8s_openapi::api::core::v1::Pod>(
        api_version,
        kind,
        &message,
    );
    if let Ok(object) = CompactObject::from_protobuf(message, api_version, kind) {
        let _ = object.decode_pb::<Pod>();
        let _ = convert::decode_compact::<reflector::store_index::serde_json::Value>(&object);
    }
});
