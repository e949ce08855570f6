//! Compiles Kubernetes' vendored `.proto` files (under `proto/k8s.io/`, see its README) into one
//! `FileDescriptorSet` that the protobuf codec loads with `prost-reflect`: the wire layout then
//! comes from Kubernetes' own definitions, not from hand-written structs.
//!
//! `protox` is a pure-Rust protobuf compiler (no `protoc` binary to install, which these machines
//! cannot download), maintained alongside `prost-reflect` and widely used by tonic/prost users.

fn main() {
    const FILES: &[&str] = &[
        "k8s.io/api/core/v1/generated.proto",
        "k8s.io/api/apps/v1/generated.proto",
        "k8s.io/api/coordination/v1/generated.proto",
        "k8s.io/api/events/v1/generated.proto",
        "k8s.io/api/authorization/v1/generated.proto",
        "k8s.io/api/authentication/v1/generated.proto",
        "k8s.io/api/autoscaling/v1/generated.proto",
    ];
    println!("cargo:rerun-if-changed=proto");
    let mut compiler = protox::Compiler::new(["proto"]).expect("the proto include path exists");
    compiler.include_imports(true);
    compiler.include_source_info(false);
    compiler
        .open_files(FILES)
        .unwrap_or_else(|e| panic!("Kubernetes' .proto files compile: {e}"));
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(
        out.join("k8s_descriptors.bin"),
        compiler.encode_file_descriptor_set(),
    )
    .expect("OUT_DIR is writable");
}
