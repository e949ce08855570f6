//! Allocations on the path a reflector takes for every watch event: recording the event's
//! resource version in a `RealFifo` reuses the version the queue already holds, and copies it only
//! for a `Bookmark` entry.

use delta_fifo::store_index::{CompactObject, ResourceVersion};
use delta_fifo::{Atomic, RealFifo, RealFifoOptions, Store};

/// Counts the allocations made on the thread that asked for counting (a test's own), whatever
/// the other tests of this binary allocate meanwhile on theirs.
struct CountingAllocator;

thread_local! {
    static COUNTING: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

// `GlobalAlloc` cannot be implemented without `unsafe`; this one only counts and forwards to
// `System`, under the same contract.
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let _ = COUNTING.try_with(|c| c.set(c.get().map(|n| n + 1)));
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        let _ = COUNTING.try_with(|c| c.set(c.get().map(|n| n + 1)));
        unsafe { std::alloc::System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Allocations made by `f` on this thread.
fn allocations_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    COUNTING.with(|c| c.set(Some(0)));
    let out = f();
    let n = COUNTING.with(|c| c.replace(None)).unwrap_or(0);
    (out, n)
}

fn fifo(emit_bookmarks: bool) -> RealFifo<CompactObject> {
    RealFifo::new(RealFifoOptions::atomic(Atomic {
        emit_bookmarks,
        ..Atomic::default()
    }))
}

/// One hundred watch events' versions, each as long as the first.
fn versions() -> Vec<ResourceVersion> {
    (100_001..=100_100)
        .map(|v| ResourceVersion::from(v.to_string().as_str()))
        .collect()
}

#[test]
fn recording_each_events_resource_version_allocates_nothing() {
    let f = fifo(false);
    f.update_resource_version(&ResourceVersion::from("100000"));
    let versions = versions();
    let ((), allocations) = allocations_of(|| {
        for rv in &versions {
            f.update_resource_version(rv);
        }
    });
    assert_eq!(allocations, 0, "for {} versions", versions.len());
    assert_eq!(f.last_sync_resource_version(), "100100");
    assert!(f.is_empty(), "no bookmark entries without emit_bookmarks");
}

#[test]
fn with_bookmark_entries_each_version_is_copied_once_for_its_entry() {
    let f = fifo(true);
    f.update_resource_version(&ResourceVersion::from("100000"));
    let versions = versions();
    let ((), allocations) = allocations_of(|| {
        for rv in &versions {
            f.update_resource_version(rv);
        }
    });
    assert_eq!(f.last_sync_resource_version(), "100100");
    assert_eq!(
        f.len(),
        versions.len() + 1,
        "one bookmark entry per version"
    );
    // One copy per entry; the queue's own growth (a doubling Vec) adds a handful at most.
    assert!(
        (versions.len()..=versions.len() + 8).contains(&allocations),
        "{allocations} allocations for {} versions",
        versions.len()
    );
}
