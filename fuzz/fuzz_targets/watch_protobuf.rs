//! A protobuf watch stream (length-prefixed `WatchEvent` frames around `k8s\0` envelopes), cut
//! into chunks where the input says, through every layer a user reaches: the frame decoder (fed
//! copies and slices, which must agree), the event and envelope messages, and the watch decoder
//! of each object type that reads protobuf (`Pb<Pod>`, `CompactObject`, `DynamicObject` through
//! the transcoder).
#![no_main]

use bytes::Bytes;
use informer_fuzz::{cut, stream};
use libfuzzer_sys::fuzz_target;
use reflector::protobuf::{FrameDecoder, RawWatchEvent, Unknown, MAGIC};
use reflector::store_index::k8s_pb::api::core::v1::Pod;
use reflector::store_index::{CompactObject, DynamicObject, Pb};
use reflector::WatchDecoder;

/// The bound on one frame: small, so that inputs reach it.
const MAX_FRAME: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some(chunks) = cut(data) else {
        return;
    };

    // Copied out of the chunks, and sliced out of them: the same frames, the same end.
    let mut frames = FrameDecoder::new(MAX_FRAME);
    let mut sliced = FrameDecoder::new(MAX_FRAME);
    for chunk in chunks {
        frames.push(chunk);
        sliced.push_bytes(Bytes::copy_from_slice(chunk));
        loop {
            let (copy, slice) = (frames.next_frame(), sliced.next_frame());
            assert_eq!(copy, slice, "push and push_bytes disagree");
            let Ok(Some(frame)) = copy else { break };
            if let Ok(event) = RawWatchEvent::decode(&frame) {
                let _ = Unknown::decode(&event.object);
            }
        }
    }
    assert_eq!(frames.finish(), sliced.finish());

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
