//! A protobuf watch stream (length-prefixed `WatchEvent` frames around `k8s\0` envelopes), cut
//! into chunks where the input says, through every layer a user reaches: the frame decoder, the
//! event and envelope messages, and the watch decoder of each object type that reads protobuf
//! (`Pb<Pod>`, `CompactObject`, `DynamicObject` through the transcoder).
#![no_main]

use bytes::Bytes;
use informer_fuzz::{cut, stream};
use libfuzzer_sys::fuzz_target;
use reflector::protobuf::{FrameDecoder, Unknown, WatchEvent, MAGIC};
use reflector::store_index::k8s_pb::api::core::v1::Pod;
use reflector::store_index::{CompactObject, DynamicObject, Pb};
use reflector::WatchDecoder;

/// The bound on one frame: small, so that inputs reach it.
const MAX_FRAME: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some(chunks) = cut(data) else {
        return;
    };

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

    stream(WatchDecoder::<Pb<Pod>>::protobuf(MAX_FRAME), &chunks);
    stream(WatchDecoder::<CompactObject>::protobuf(MAX_FRAME), &chunks);
    stream(WatchDecoder::<DynamicObject>::protobuf(MAX_FRAME), &chunks);

    // The body alone as an envelope, with and without its magic prefix.
    let body = chunks.concat();
    let mut enveloped = MAGIC.to_vec();
    enveloped.extend_from_slice(&body);
    for envelope in [Bytes::from(body), Bytes::from(enveloped)] {
        let _ = Unknown::decode(&envelope);
    }
});
