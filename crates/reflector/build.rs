//! With the `protobuf-json` feature, compiles Kubernetes' vendored `.proto` files (under
//! `proto/k8s.io/`, see its README) into one `FileDescriptorSet` that
//! `reflector::protobuf::transcode` loads with `prost-reflect`: the wire layout of every built-in
//! kind then comes from Kubernetes' own definitions, not from hand-written structs.
//!
//! `protox` is a pure-Rust protobuf compiler (no `protoc` binary to install), maintained
//! alongside `prost-reflect` and widely used by tonic/prost users. Without the feature this script
//! does nothing.

fn main() {
    #[cfg(feature = "protobuf-json")]
    descriptors::compile();
}

#[cfg(feature = "protobuf-json")]
mod descriptors {
    use std::path::{Path, PathBuf};

    /// Every `generated.proto` under `proto/k8s.io/api`: the built-in API groups. Their imports
    /// (apimachinery's meta, runtime, intstr and resource) are found through the include path.
    fn api_files(root: &Path) -> Vec<String> {
        let mut files = Vec::new();
        let mut dirs = vec![root.join("k8s.io/api")];
        while let Some(dir) = dirs.pop() {
            let entries = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
            for entry in entries {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "proto") {
                    let rel = path.strip_prefix(root).expect("under the include root");
                    files.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        // A stable order: the descriptor set is then the same bytes on every build.
        files.sort();
        files
    }

    pub fn compile() {
        let root = PathBuf::from("proto");
        println!("cargo:rerun-if-changed=proto");
        let files = api_files(&root);
        let mut compiler = protox::Compiler::new([&root]).expect("the proto include path exists");
        compiler.include_imports(true);
        compiler.include_source_info(false);
        compiler
            .open_files(&files)
            .unwrap_or_else(|e| panic!("Kubernetes' .proto files compile: {e}"));
        let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        std::fs::write(
            out.join("k8s_descriptors.bin"),
            compiler.encode_file_descriptor_set(),
        )
        .expect("OUT_DIR is writable");
    }
}
