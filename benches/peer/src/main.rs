//! The peer comparison with the system allocator (glibc's malloc); see the crate's documentation.

fn main() {
    peer_bench::run("glibc malloc");
}
