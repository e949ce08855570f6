//! A protobuf watch stream (length-prefixed `WatchEvent` frames around `k8s\0` envelopes), cut
//! into chunks where the input says, through every layer a user reaches: the frame decoder, the
//! event and envelope messages, and the watch decoder of each object type that reads protobuf
//! (`Pb<Pod>`, `CompactObject`, `DynamicObject` through the transcoder).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use reflector::protobuf::{FrameDecoder, Unknown, WatchEvent, MAGIC};
use reflector::store_index::k8s_pb::api::core::v1::Pod;
use reflector::store_index::{CompactObject, DynamicObject, Pb};
use reflector::{Decode, WatchDecoder};

/// The bound on one frame: small, so that inputs reach it.
const MAX_FRAME: usize = 4096;

fn stream<K: Decode>(chunks: &[&[u8]]) {
    let mut decoder = WatchDecoder::<K>::protobuf(MAX_FRAME);
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
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let at = if body.is_empty() {
        0
    } else {
        cut as usize % (body.len() + 1)
    };
    let chunks = [&body[..at], &body[at..]];

    let mut frames = FrameDecoder::new(MAX_FRAME);
    for chunk in chunks {
        frames.push(chunk);
        while let Ok(Some(frame)) = frames.next_frame() {
            if let Ok(event) = WatchEvent::decode(&frame) {
                let _ = Unknown::decode(&event.object);
            }
        }
    }
    let _ = frames.finish();

    stream::<Pb<Pod>>(&chunks);
    stream::<CompactObject>(&chunks);
    stream::<DynamicObject>(&chunks);

    // The body alone as an envelope, with and without its magic prefix.
    let mut enveloped = MAGIC.to_vec();
    enveloped.extend_from_slice(body);
    for envelope in [Bytes::copy_from_slice(body), Bytes::from(enveloped)] {
        let _ = Unknown::decode(&envelope);
    }
});
