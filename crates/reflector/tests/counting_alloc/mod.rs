//! A global allocator for tests that count allocations: it counts those made on the thread that
//! asked for counting (a test's own), whatever the other tests of the binary allocate meanwhile
//! on theirs, and forwards everything to `System`. A test binary that declares `mod
//! counting_alloc;` allocates through it.

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
pub fn allocations_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    COUNTING.with(|c| c.set(Some(0)));
    let out = f();
    let n = COUNTING.with(|c| c.replace(None)).unwrap_or(0);
    (out, n)
}
