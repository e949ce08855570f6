//! Bytes of heap per cached object, for the three ways of holding a ~3.8 KB Pod: `CompactObject`
//! (metadata + raw JSON), `DynamicObject` (metadata + `serde_json::Value`) and a typed
//! `k8s_openapi` Pod. Run with `cargo bench -p store-index --bench memory --features k8s-openapi`.
//!
//! A counting global allocator measures live heap bytes before and after decoding 10,000 objects
//! into an `Indexer` with the namespace index, so the figure includes the store's own overhead.
// The allocator wrapper needs `unsafe` to implement `GlobalAlloc`; it only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sim_apiserver::fixtures::realistic_pod_json as pod_json;
use store_index::{CompactObject, DynamicObject, Indexer, Indexers, Object};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const OBJECTS: usize = 10_000;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn measure<K: Object>(label: &str, lines: &[String], decode: impl Fn(&str) -> K) -> f64 {
    let before = live();
    let indexer: Indexer<K> = Indexer::new(Indexers::new().with_namespace_index());
    for line in lines {
        indexer.add(Arc::new(decode(line))).expect("add");
    }
    let per_object = (live() - before) as f64 / lines.len() as f64;
    let json = lines.iter().map(String::len).sum::<usize>() as f64 / lines.len() as f64;
    println!("{label:<28} {per_object:>9.0} bytes/object");
    // For `cargo xtask bench`; the ratio is oriented so that higher is better (JSON / held).
    println!(
        "bench-result {{\"name\":\"store-index memory per cached pod, {label}\",\"value\":{per_object:.0},\"unit\":\"bytes\",\"baseline\":{json:.0},\"baseline_name\":\"its JSON\",\"ratio\":{:.3},\"note\":\"{:.2}x its JSON\"}}",
        json / per_object,
        per_object / json
    );
    drop(indexer);
    per_object
}

fn main() {
    let lines: Vec<String> = (0..OBJECTS).map(pod_json).collect();
    let json = lines.iter().map(String::len).sum::<usize>() as f64 / lines.len() as f64;
    println!("pods: {OBJECTS}, mean JSON size {json:.0} bytes (store with the namespace index)");
    println!("{:<28} {json:>9.0} bytes/object", "raw JSON (reference)");
    let compact = measure("CompactObject", &lines, |l| {
        CompactObject::from_json(store_index::bytes::Bytes::copy_from_slice(l.as_bytes()))
            .expect("decode")
    });
    let dynamic = measure("DynamicObject", &lines, |l| {
        serde_json::from_str::<DynamicObject>(l).expect("decode")
    });
    println!("{:<28} {:>9.2}", "CompactObject / JSON", compact / json);
    println!("{:<28} {:>9.2}", "DynamicObject / JSON", dynamic / json);
    #[cfg(feature = "k8s-openapi")]
    {
        let typed = measure("k8s_openapi Pod (typed)", &lines, |l| {
            serde_json::from_str::<k8s_openapi::api::core::v1::Pod>(l).expect("decode")
        });
        println!("{:<28} {:>9.2}", "typed Pod / JSON", typed / json);
    }
    #[cfg(not(feature = "k8s-openapi"))]
    println!("(typed Pod skipped: run with --features k8s-openapi)");
}
