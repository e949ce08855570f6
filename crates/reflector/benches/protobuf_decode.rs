//! What protobuf costs and saves per object, beside JSON, in the same run: one watch
//! stream of realistic ~4 KB pods (the simulator's fixture) decoded by `WatchDecoder` into
//!
//! - `k8s_openapi` `Pod` from JSON (the typed JSON path) and from protobuf (each message read
//!   straight into the type),
//! - `k8s_pb` `Pod` from protobuf (the typed protobuf path), and from JSON (the fallback when a
//!   server answers JSON: each object transcoded by `reflector::protobuf::transcode`),
//! - `PbView<Pod>` from protobuf (the message checked against `Pod`'s layout and kept, read
//!   through its typed view),
//! - `CompactObject` from JSON and from protobuf,
//!
//! and, for a k8s-openapi user holding protobuf `CompactObject`s, the on-demand decode of one
//! cached object into a `k8s_pb` `Pod` (`decode_pb`) or into a `k8s_openapi` `Pod`
//! (`convert::decode_compact`, the message read straight into the type; and, as its baseline,
//! the transcoder's JSON tree then `serde_json::from_value`, the way it went before), beside
//! `decode::<k8s_openapi Pod>` of a JSON one, and a `k8s_openapi` `Pod` converted to its `k8s_pb`
//! twin (`convert::to_k8s_pb`). Each event is its own chunk, as kube-apiserver writes them.
//!
//! Run: `cargo bench -p reflector --features k8s-pb,k8s-openapi --bench protobuf_decode`.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use reflector::protobuf::convert::{decode_compact, to_k8s_pb};
use reflector::protobuf::transcode::decode_message_as;
use reflector::protobuf::{encode_frame, PbView, RawWatchEvent as Frame, WATCH_MEDIA_TYPE};
use reflector::store_index::CompactObject;
use reflector::{Decode, WatchDecoder, WatchEvent, DEFAULT_MAX_EVENT_SIZE};

const EVENTS: usize = 1_000;

/// The same events as JSON lines and as protobuf frames, one chunk each.
fn streams() -> (Vec<Bytes>, Vec<Bytes>) {
    let (mut json, mut pb) = (Vec::new(), Vec::new());
    for i in 0..EVENTS {
        let text = sim_apiserver::fixtures::realistic_pod_json(i);
        let object: serde_json::Value = serde_json::from_str(&text).unwrap();
        json.push(Bytes::from(format!(
            "{{\"type\":\"MODIFIED\",\"object\":{text}}}\n"
        )));
        let enveloped = sim_apiserver::protobuf::encode_object(&object).unwrap();
        let mut frame = Vec::new();
        encode_frame(
            &mut frame,
            &Frame {
                event_type: "MODIFIED".into(),
                object: Bytes::from(enveloped),
            }
            .encode(),
        );
        pb.push(Bytes::from(frame));
    }
    (json, pb)
}

fn decode_all<K: Decode>(chunks: &[Bytes], content_type: Option<&str>) -> Vec<WatchEvent<K>> {
    let mut d = WatchDecoder::<K>::for_content_type(content_type, DEFAULT_MAX_EVENT_SIZE);
    let mut out = Vec::with_capacity(chunks.len());
    for c in chunks {
        d.decode(c.clone(), &mut out).unwrap();
    }
    assert_eq!(out.len(), chunks.len());
    out
}

fn bench(c: &mut Criterion) {
    type OpenApiPod = k8s_openapi::api::core::v1::Pod;
    type PbPod = reflector::store_index::k8s_pb::api::core::v1::Pod;
    type TypedPbPod = reflector::store_index::Pb<PbPod>;
    let (json, pb) = streams();
    let json_bytes: usize = json.iter().map(Bytes::len).sum();
    let pb_bytes: usize = pb.iter().map(Bytes::len).sum();
    eprintln!(
        "{EVENTS} events: {json_bytes} bytes of JSON, {pb_bytes} of protobuf ({:.2}x)",
        pb_bytes as f64 / json_bytes as f64
    );
    let ct = Some(WATCH_MEDIA_TYPE);
    let mut g = c.benchmark_group("watch_events");
    g.throughput(Throughput::Elements(EVENTS as u64));
    g.sample_size(10);
    g.bench_function(BenchmarkId::new("typed", "k8s_openapi_json"), |b| {
        b.iter(|| decode_all::<OpenApiPod>(&json, None))
    });
    // k8s-openapi's own type from protobuf frames: each message read straight into it (WS1).
    g.bench_function(BenchmarkId::new("typed", "k8s_openapi_protobuf"), |b| {
        b.iter(|| decode_all::<OpenApiPod>(&pb, ct))
    });
    g.bench_function(BenchmarkId::new("typed", "k8s_pb_protobuf"), |b| {
        b.iter(|| decode_all::<TypedPbPod>(&pb, ct))
    });
    g.bench_function(BenchmarkId::new("typed", "k8s_pb_json_transcoded"), |b| {
        b.iter(|| decode_all::<TypedPbPod>(&json, None))
    });
    // The typed view: the metadata decoded, the message checked once and kept.
    g.bench_function(BenchmarkId::new("typed", "pb_view_protobuf"), |b| {
        b.iter(|| decode_all::<PbView<PbPod>>(&pb, ct))
    });
    g.bench_function(BenchmarkId::new("compact", "json"), |b| {
        b.iter(|| decode_all::<CompactObject>(&json, None))
    });
    g.bench_function(BenchmarkId::new("compact", "protobuf"), |b| {
        b.iter(|| decode_all::<CompactObject>(&pb, ct))
    });
    g.finish();

    let held = |events: Vec<WatchEvent<CompactObject>>| -> Vec<CompactObject> {
        events
            .into_iter()
            .filter_map(|e| match e {
                WatchEvent::Modified(o) => Some(o),
                _ => None,
            })
            .collect()
    };
    let json_cached = held(decode_all::<CompactObject>(&json, None));
    let pb_cached = held(decode_all::<CompactObject>(&pb, ct));
    let mut g = c.benchmark_group("on_demand");
    g.throughput(Throughput::Elements(EVENTS as u64));
    g.sample_size(10);
    g.bench_function(BenchmarkId::new("compact_json", "k8s_openapi_pod"), |b| {
        b.iter(|| {
            for o in &json_cached {
                let _: OpenApiPod = o.decode().unwrap();
            }
        })
    });
    g.bench_function(BenchmarkId::new("compact_protobuf", "k8s_pb_pod"), |b| {
        b.iter(|| {
            for o in &pb_cached {
                let _: PbPod = o.decode_pb().unwrap();
            }
        })
    });
    g.bench_function(
        BenchmarkId::new("compact_protobuf", "k8s_openapi_pod_transcoded"),
        |b| {
            b.iter(|| {
                for o in &pb_cached {
                    let _: OpenApiPod = decode_compact(o).unwrap();
                }
            })
        },
    );
    // The way `decode_compact` went before it read the message straight into the type (WS1):
    // the JSON tree, then `serde_json::from_value`; the same-run baseline of the row above.
    g.bench_function(
        BenchmarkId::new("compact_protobuf", "k8s_openapi_pod_via_json_tree"),
        |b| {
            b.iter(|| {
                for o in &pb_cached {
                    let json = decode_message_as("v1", "Pod", o.raw()).unwrap();
                    let _: OpenApiPod = serde_json::from_value(json).unwrap();
                }
            })
        },
    );
    let openapi: Vec<OpenApiPod> = json_cached.iter().map(|o| o.decode().unwrap()).collect();
    g.bench_function(BenchmarkId::new("k8s_openapi_pod", "to_k8s_pb_pod"), |b| {
        b.iter(|| {
            for o in &openapi {
                let _: PbPod = to_k8s_pb(o).unwrap();
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
