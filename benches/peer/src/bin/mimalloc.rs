//! The peer comparison with mimalloc as the process's global allocator, for either client (feature
//! `mimalloc` of this crate only); see the crate's documentation.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    peer_bench::run("mimalloc");
}
