//! A JSON watch stream, cut into chunks where the input says, decoded as each object type a user
//! picks: typed (`k8s_openapi`'s `Pod`), dynamic, compact. Whatever the bytes, the decoder gives
//! events or a typed error, never a panic; its event bound is small, so that inputs reach it.
#![no_main]

use bytes::Bytes;
use informer_fuzz::{cut, stream};
use k8s_openapi::api::core::v1::Pod;
use libfuzzer_sys::fuzz_target;
use reflector::store_index::{CompactObject, DynamicObject};
use reflector::{ObjectList, WatchDecoder};

/// The bound on one event: small, so that inputs reach it.
const MAX_EVENT: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some(chunks) = cut(data) else {
        return;
    };
    stream(WatchDecoder::<Pod>::new(MAX_EVENT), &chunks);
    stream(WatchDecoder::<DynamicObject>::new(MAX_EVENT), &chunks);
    stream(WatchDecoder::<CompactObject>::new(MAX_EVENT), &chunks);
    // The whole body as a JSON list of each object type, and as one compact object.
    let whole = Bytes::from(chunks.concat());
    let _ = ObjectList::<Pod>::from_json(&whole);
    let _ = ObjectList::<CompactObject>::from_json(&whole);
    if let Ok(object) = CompactObject::from_json(whole) {
        let _ = object.decode::<Pod>();
    }
});
