//! The `informer` bench with mimalloc as the global allocator, for comparison with the system
//! allocator (glibc's malloc) the `informer` bench itself uses.
//!
//! An informer is a pipeline over threads: objects are allocated where the watch is decoded and
//! freed where the cache replaces them or a handler lets go of them. glibc serialises such
//! cross-thread frees on its arena locks; mimalloc frees into the owning thread's page without a
//! lock. Same arguments and environment as `informer`:
//! `cargo bench -p shared-informer --bench informer_mimalloc -- fast`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "informer.rs"]
mod informer;

fn main() {
    informer::run("mimalloc");
}
