//! Allocations on the path a reflector takes for every watch event: recording the event's
//! resource version in its `RealFifo` reuses the version the queue already holds, and copies it
//! only for a `Bookmark` entry.

mod counting_alloc;

use counting_alloc::allocations_of;
use reflector::delta_fifo::{Atomic, RealFifo, RealFifoOptions, Store};
use reflector::store_index::{CompactObject, ResourceVersion};

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

/// Records `versions` in `f`, as a reflector does for each watch event, after a first one;
/// returns the allocations the recording made.
fn record(f: &RealFifo<CompactObject>, versions: &[ResourceVersion]) -> usize {
    f.update_resource_version(&ResourceVersion::from("100000"));
    let ((), allocations) = allocations_of(|| {
        for rv in versions {
            f.update_resource_version(rv);
        }
    });
    allocations
}

#[test]
fn recording_each_events_resource_version_allocates_nothing() {
    let f = fifo(false);
    let versions = versions();
    let allocations = record(&f, &versions);
    assert_eq!(allocations, 0, "for {} versions", versions.len());
    assert_eq!(f.last_sync_resource_version(), "100100");
    assert!(f.is_empty(), "no bookmark entries without emit_bookmarks");
}

#[test]
fn with_bookmark_entries_each_version_is_copied_once_for_its_entry() {
    let f = fifo(true);
    let versions = versions();
    let allocations = record(&f, &versions);
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
