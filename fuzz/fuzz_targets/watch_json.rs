//! A JSON watch stream, cut into chunks where the input says, decoded as each object type a user
//! picks: typed (`k8s_openapi`'s `Pod`), dynamic, compact. Whatever the bytes, the decoder gives
//! events or a typed error; it never panics and never holds more than its event bound.
#![no_main]

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use libfuzzer_sys::fuzz_target;
use reflector::store_index::{CompactObject, DynamicObject};
use reflector::{Decode, WatchDecoder};

/// The bound on one event: small, so that inputs reach it.
const MAX_EVENT: usize = 4096;

fn stream<K: Decode>(chunks: &[&[u8]]) {
    let mut decoder = WatchDecoder::<K>::new(MAX_EVENT);
    let mut events = Vec::new();
    for chunk in chunks {
        if decoder
            .decode(Bytes::copy_from_slice(chunk), &mut events)
            .is_err()
        {
            return;
        }
    }
    let _ = decoder.finish(&mut events);
}

fuzz_target!(|data: &[u8]| {
    // The first byte chooses where the one cut falls.
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let at = if body.is_empty() {
        0
    } else {
        cut as usize % (body.len() + 1)
    };
    let chunks = [&body[..at], &body[at..]];
    stream::<Pod>(&chunks);
    stream::<DynamicObject>(&chunks);
    stream::<CompactObject>(&chunks);
    // Whole lists in JSON, as each object type.
    let whole = Bytes::copy_from_slice(body);
    let _ = reflector::ObjectList::<Pod>::from_json(&whole);
    let _ = reflector::ObjectList::<CompactObject>::from_json(&whole);
    if let Ok(object) = CompactObject::from_json(whole) {
        let _ = object.decode::<Pod>();
    }
});
