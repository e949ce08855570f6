//! Where one cached typed `k8s_openapi` `Pod` spends its bytes, part by part: the bench's pod
//! (`sim_apiserver::fixtures::realistic_pod_json`, ~3.8 KB of JSON) decoded as an informer
//! decodes it (`Decode::decode_exact`, lists compacted), then taken apart one field at a time,
//! each part's heap measured as it is freed; then the `Arc` and the indexer's entry (key, map slot,
//! namespace index), as the factory's informers hold them. Run with
//! `cargo bench -p reflector --features k8s-openapi --bench pod_bytes`.
//!
//! A counting global allocator (this bench's own: the library never picks its users' allocator)
//! counts, for the live heap, the bytes asked for, the blocks, and the bytes glibc's malloc
//! really takes for them (each block rounded up to 16 bytes with its 8-byte header, 32 at least):
//! the last is what shows in RSS.
// The allocator wrapper needs `unsafe` to implement `GlobalAlloc`; it only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::mem::size_of;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use reflector::store_index::{Indexer, Indexers};
use reflector::{Decode, DecodeSource};
use sim_apiserver::fixtures::realistic_pod_json;

struct Counting;

static ASKED: AtomicIsize = AtomicIsize::new(0);
static CHUNKS: AtomicIsize = AtomicIsize::new(0);
static BLOCKS: AtomicIsize = AtomicIsize::new(0);

/// The size of the chunk glibc's malloc carves for a request of `size` bytes on 64-bit Linux:
/// the request plus the 8-byte size field, rounded up to 16, at least 32.
fn glibc_chunk(size: usize) -> isize {
    (((size + 8 + 15) & !15).max(32)) as isize
}

fn count(size: usize, sign: isize) {
    ASKED.fetch_add(sign * size as isize, Ordering::Relaxed);
    CHUNKS.fetch_add(sign * glibc_chunk(size), Ordering::Relaxed);
    BLOCKS.fetch_add(sign, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(layout.size(), -1);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout.size(), -1);
        count(new_size, 1);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The live heap: bytes asked for, glibc's chunks, blocks.
#[derive(Debug, Clone, Copy, Default)]
struct Heap {
    asked: isize,
    chunks: isize,
    blocks: isize,
}

impl Heap {
    fn now() -> Self {
        Heap {
            asked: ASKED.load(Ordering::Relaxed),
            chunks: CHUNKS.load(Ordering::Relaxed),
            blocks: BLOCKS.load(Ordering::Relaxed),
        }
    }
    fn minus(self, other: Heap) -> Heap {
        Heap {
            asked: self.asked - other.asked,
            chunks: self.chunks - other.chunks,
            blocks: self.blocks - other.blocks,
        }
    }
    fn plus(self, other: Heap) -> Heap {
        Heap {
            asked: self.asked + other.asked,
            chunks: self.chunks + other.chunks,
            blocks: self.blocks + other.blocks,
        }
    }
}

/// The heap `f` frees.
fn freed_by(f: impl FnOnce()) -> Heap {
    let before = Heap::now();
    f();
    before.minus(Heap::now())
}

/// Rows of the table: a part's name, its heap, and a note (its inline size, its shape).
struct Table {
    rows: Vec<(String, Heap, String)>,
}

impl Table {
    fn row(&mut self, name: &str, heap: Heap, note: impl Into<String>) {
        self.rows.push((name.to_string(), heap, note.into()));
    }

    fn total(&self) -> Heap {
        self.rows
            .iter()
            .fold(Heap::default(), |sum, (_, heap, _)| sum.plus(*heap))
    }

    fn print(&self, title: &str) {
        println!("\n{title}");
        println!("| part | bytes asked | glibc chunks | blocks | note |\n|---|---:|---:|---:|---|");
        for (name, heap, note) in &self.rows {
            println!(
                "| {name} | {} | {} | {} | {note} |",
                heap.asked, heap.chunks, heap.blocks
            );
        }
        let t = self.total();
        println!(
            "| **total** | **{}** | **{}** | **{}** | |",
            t.asked, t.chunks, t.blocks
        );
    }
}

/// A pod as an informer decodes it: compacted, from its exact JSON.
fn decode(json: &str) -> Pod {
    let bytes = Bytes::copy_from_slice(json.as_bytes());
    let text = std::str::from_utf8(&bytes).expect("utf-8");
    Pod::decode_exact(text, &DecodeSource::new(text, &bytes, false)).expect("the pod decodes")
}

/// Counts the maps, keys and values of a JSON tree.
fn tree_shape(value: &serde_json::Value) -> (usize, usize) {
    match value {
        serde_json::Value::Object(map) => map.values().fold((1, map.len()), |(m, k), v| {
            let (m2, k2) = tree_shape(v);
            (m + m2, k + k2)
        }),
        serde_json::Value::Array(items) => items.iter().fold((0, 0), |(m, k), v| {
            let (m2, k2) = tree_shape(v);
            (m + m2, k + k2)
        }),
        _ => (0, 0),
    }
}

/// Takes one pod apart, part by part, and tables the heap each part frees.
fn breakdown(json: &str) -> Table {
    let mut t = Table { rows: Vec::new() };
    let before = Heap::now();
    let pod = Arc::new(decode(json));
    let whole = Heap::now().minus(before);
    let mut pod = Arc::try_unwrap(pod).unwrap_or_else(|_| unreachable!("one owner"));
    let arc_block = before.plus(whole).minus(Heap::now());
    t.row(
        "`Arc` block: counts (16) + the `Pod` struct inline",
        arc_block,
        format!("size_of::<Pod>() = {}", size_of::<Pod>()),
    );

    let meta = &mut pod.metadata;
    let managed = meta
        .managed_fields
        .as_mut()
        .expect("the pod has managedFields");
    let (maps, keys) =
        managed
            .iter()
            .filter_map(|e| e.fields_v1.as_ref())
            .fold((0, 0), |(m, k), f| {
                let (m2, k2) = tree_shape(&f.0);
                (m + m2, k + k2)
            });
    let trees = freed_by(|| managed.iter_mut().for_each(|e| drop(e.fields_v1.take())));
    t.row(
        "metadata.managedFields: fieldsV1 trees (`serde_json::Value`)",
        trees,
        format!(
            "{maps} maps (a `BTreeMap` leaf node each, {} bytes), {keys} key strings",
            btree_leaf_bytes::<String, serde_json::Value>()
        ),
    );
    let entries = managed.len();
    let managed_rest = freed_by(|| drop(meta.managed_fields.take()));
    t.row(
        "metadata.managedFields: the rest (entries' strings, the `Vec`)",
        managed_rest,
        format!(
            "{entries} entry of {} bytes inline",
            size_of::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry>()
        ),
    );
    let labels = meta.labels.as_ref().map_or(0, |l| l.len());
    let annotations = meta.annotations.as_ref().map_or(0, |a| a.len());
    let maps = freed_by(|| {
        drop(meta.labels.take());
        drop(meta.annotations.take());
    });
    t.row(
        "metadata.labels + annotations (`BTreeMap<String, String>`)",
        maps,
        format!(
            "{labels} + {annotations} entries, a leaf node of {} bytes each map",
            btree_leaf_bytes::<String, String>()
        ),
    );
    let owners = freed_by(|| drop(meta.owner_references.take()));
    t.row("metadata.ownerReferences", owners, "1 reference: 4 strings");
    let strings = freed_by(|| {
        drop(meta.name.take());
        drop(meta.generate_name.take());
        drop(meta.namespace.take());
        drop(meta.uid.take());
        drop(meta.resource_version.take());
    });
    t.row(
        "metadata: name, generateName, namespace, uid, resourceVersion",
        strings,
        "5 strings (times are inline `jiff::Timestamp`s)",
    );

    let spec = pod.spec.as_mut().expect("spec");
    let containers = freed_by(|| drop(std::mem::take(&mut spec.containers)));
    t.row(
        "spec.containers (1)",
        containers,
        format!(
            "`Container` {} bytes inline; ports, env, probes, resources (2 `BTreeMap`s), mounts",
            size_of::<k8s_openapi::api::core::v1::Container>()
        ),
    );
    let volumes = freed_by(|| drop(spec.volumes.take()));
    t.row(
        "spec.volumes (1 projected)",
        volumes,
        format!(
            "`Volume` {} bytes inline",
            size_of::<k8s_openapi::api::core::v1::Volume>()
        ),
    );
    let tolerations = freed_by(|| drop(spec.tolerations.take()));
    t.row("spec.tolerations (2)", tolerations, "");
    let spec_rest = freed_by(|| drop(pod.spec.take()));
    t.row(
        "spec: the rest (its strings, `securityContext`)",
        spec_rest,
        format!(
            "`PodSpec` {} bytes inline in `Pod`",
            size_of::<k8s_openapi::api::core::v1::PodSpec>()
        ),
    );

    let status = pod.status.as_mut().expect("status");
    let conditions = freed_by(|| drop(status.conditions.take()));
    t.row("status.conditions (4)", conditions, "");
    let statuses = freed_by(|| drop(status.container_statuses.take()));
    t.row(
        "status.containerStatuses (1)",
        statuses,
        format!(
            "`ContainerStatus` {} bytes inline",
            size_of::<k8s_openapi::api::core::v1::ContainerStatus>()
        ),
    );
    let status_rest = freed_by(|| drop(pod.status.take()));
    t.row("status: the rest (strings, podIPs)", status_rest, "");
    let last = freed_by(|| drop(pod));
    t.row("anything left", last, "");
    assert_eq!(
        t.total().asked,
        whole.asked,
        "the parts add up to the whole pod"
    );
    t
}

/// The bytes of one leaf node of a `BTreeMap<K, V>` (capacity 11): what a map of 1 to 11 entries
/// allocates.
fn btree_leaf_bytes<K: Ord + Default, V: Default>() -> isize {
    let before = Heap::now();
    let mut map = std::collections::BTreeMap::new();
    map.insert(K::default(), V::default());
    let bytes = Heap::now().minus(before).asked;
    drop(map);
    bytes
}

/// The bytes this pod's absent optional structs hold inline: k8s-openapi keeps every
/// `Option<Struct>` in its parent (no box), so an absent one costs its whole size; Go's
/// `corev1` types hold such fields as pointers (8 bytes when absent).
fn absent_inline() -> Vec<(&'static str, usize)> {
    use k8s_openapi::api::core::v1 as core;
    vec![
        (
            "`Volume`: the 29 volume sources other than `projected`",
            size_of::<core::Volume>()
                - size_of::<String>()
                - size_of::<Option<core::ProjectedVolumeSource>>(),
        ),
        (
            "`Container`: `lifecycle`, `startupProbe`, `securityContext`",
            size_of::<Option<core::Lifecycle>>()
                + size_of::<Option<core::Probe>>()
                + size_of::<Option<core::SecurityContext>>(),
        ),
        (
            "`PodSpec`: `affinity`, `dnsConfig`, `os`, `resources`, `schedulingGroup`",
            size_of::<Option<core::Affinity>>()
                + size_of::<Option<core::PodDNSConfig>>()
                + size_of::<Option<core::PodOS>>()
                + size_of::<Option<core::ResourceRequirements>>()
                + size_of::<Option<core::PodSchedulingGroup>>(),
        ),
        (
            "`PodStatus`: `resources`, `extendedResourceClaimStatus`",
            size_of::<Option<core::ResourceRequirements>>()
                + size_of::<Option<core::PodExtendedResourceClaimStatus>>(),
        ),
    ]
}

/// Mean heap per entry of an indexer with the namespace index (the factory's informers'), over
/// `pods` already decoded: the key, the map slots, the index's sets.
fn store_overhead(pods: &[Arc<Pod>]) -> Heap {
    let before = Heap::now();
    let indexer: Indexer<Pod> = Indexer::new(Indexers::new().with_namespace_index());
    for pod in pods {
        indexer.add(Arc::clone(pod)).expect("add");
    }
    let grown = Heap::now().minus(before);
    drop(indexer);
    let n = pods.len() as isize;
    Heap {
        asked: grown.asked / n,
        chunks: grown.chunks / n,
        blocks: grown.blocks / n,
    }
}

fn main() {
    const PODS: usize = 10_000;
    let json = realistic_pod_json(1234);
    println!(
        "one pod of the peer bench's shape: {} bytes of JSON, decoded as an informer decodes it",
        json.len()
    );
    let table = breakdown(&json);
    table.print("The pod, part by part (heap freed as each part is dropped)");
    println!("\nInline bytes of the pod's absent optional structs (part of the rows above)");
    println!("| absent fields | bytes |\n|---|---:|");
    let mut absent = 0;
    for (what, bytes) in absent_inline() {
        println!("| {what} | {bytes} |");
        absent += bytes;
    }
    println!("| **total** | **{absent}** |");

    let lines: Vec<String> = (0..PODS).map(realistic_pod_json).collect();
    let before = Heap::now();
    let pods: Vec<Arc<Pod>> = lines.iter().map(|l| Arc::new(decode(l))).collect();
    let vec_itself = Heap {
        asked: (PODS * size_of::<Arc<Pod>>()) as isize,
        chunks: glibc_chunk(PODS * size_of::<Arc<Pod>>()),
        blocks: 1,
    };
    let objects = Heap::now().minus(before).minus(vec_itself);
    let store = store_overhead(&pods);
    let n = PODS as isize;
    println!(
        "\nmean over {PODS} pods: object {} bytes asked, {} in glibc chunks, {} blocks",
        objects.asked / n,
        objects.chunks / n,
        objects.blocks / n
    );
    println!(
        "store entry (indexer with the namespace index): {} bytes asked, {} in glibc chunks, {} blocks per pod",
        store.asked, store.chunks, store.blocks
    );
    let stripped: Vec<Arc<Pod>> = {
        let before = Heap::now();
        drop(pods);
        let freed = before.minus(Heap::now());
        let before = Heap::now();
        let kept = lines
            .iter()
            .map(|l| {
                let mut pod = decode(l);
                pod.metadata.managed_fields = None;
                Arc::new(pod)
            })
            .collect::<Vec<_>>();
        let grown = Heap::now().minus(before).minus(vec_itself);
        println!(
            "without managedFields: object {} bytes asked, {} in glibc chunks, {} blocks (with: {} in chunks)",
            grown.asked / n,
            grown.chunks / n,
            grown.blocks / n,
            freed.chunks / n
        );
        kept
    };
    let per_pod = |heap: Heap| heap.chunks as f64;
    println!(
        "bench-result {{\"name\":\"reflector: heap per cached typed Pod, glibc chunks (object + store entry)\",\"value\":{:.0},\"unit\":\"bytes\"}}",
        per_pod(objects) / n as f64 + per_pod(store)
    );
    drop(stripped);
}
