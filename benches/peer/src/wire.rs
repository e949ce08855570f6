//! `peer-bench wire [events]`: the bytes each encoding puts on the wire for the bench's own
//! objects (`PEER_CACHED` pods, default 10k, and `events` `MODIFIED` events of them): per listed
//! pod (the whole list's body over its pods, envelope included) and per watch event (a JSON line,
//! or a length-prefixed protobuf frame). HTTP's own bytes (headers, chunk sizes) are left out: the
//! same for both encodings at one chunk per event, and smaller than either when coalesced.
//! It also times each decoder alone on those events in memory (serde_json into `k8s_openapi`'s
//! `Pod`, prost into `k8s_pb`'s), the ceiling of the `serde-pod` and `prost-pod` clients.

use super::server;

/// The sizes as a `bench-result` JSON object: protobuf's bytes against JSON's.
pub fn sizes(cached: usize, events: usize) -> serde_json::Value {
    let (list, lines) = server::bytes(cached, events);
    let (pb_list, frames) = server::protobuf(cached, events, &list);
    let per = |total: usize, n: usize| total as f64 / n.max(1) as f64;
    let json_pod = per(list.whole().len(), cached);
    let pb_pod = per(pb_list.whole().len(), cached);
    let json_event = per(lines.iter().map(|l| l.len()).sum(), events);
    let pb_event = per(frames.iter().map(|f| f.len()).sum(), events);
    // The decoders alone, in this process, on the same bytes: no socket, no HTTP, no task.
    let json_rate = decode_rate(&lines, |line| super::alone::json_event(line).is_some());
    let protobuf_rate = decode_rate(&frames, |frame| {
        super::alone::protobuf_event(&frame[4..]).is_some()
    });
    eprintln!(
        "wire: decoding in memory, serde_json {json_rate:.0} events/s, prost {protobuf_rate:.0} events/s ({:.2}x)",
        protobuf_rate / json_rate
    );
    eprintln!(
        "wire: per listed pod {json_pod:.0} B JSON, {pb_pod:.0} B protobuf ({:.2}x); per watch event {json_event:.0} B JSON, {pb_event:.0} B protobuf ({:.2}x)",
        pb_pod / json_pod,
        pb_event / json_event
    );
    serde_json::json!({
        "name": format!("peer: bytes on the wire, {cached} pods, {events} events"),
        "value": pb_event,
        "unit": "bytes per event (protobuf)",
        "cached": cached,
        "events": events,
        "json_bytes_per_pod": json_pod,
        "protobuf_bytes_per_pod": pb_pod,
        "json_bytes_per_event": json_event,
        "protobuf_bytes_per_event": pb_event,
        "json_decode_events_per_s": json_rate,
        "protobuf_decode_events_per_s": protobuf_rate,
    })
}

/// Events decoded per second by `decode` over all of `events`, the best of three passes (the
/// first warms the allocator).
fn decode_rate(events: &[bytes::Bytes], decode: impl Fn(&[u8]) -> bool) -> f64 {
    (0..3)
        .map(|_| {
            let start = std::time::Instant::now();
            let decoded = events.iter().filter(|e| decode(e)).count();
            assert_eq!(decoded, events.len(), "every event decodes");
            events.len() as f64 / start.elapsed().as_secs_f64()
        })
        .fold(0.0, f64::max)
}
