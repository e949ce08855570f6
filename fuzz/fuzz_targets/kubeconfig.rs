//! A kubeconfig file as a user's disk may hold it: whatever the bytes, loading it gives a
//! configuration (with its warnings) or a typed error, never a panic. (That neither shows a
//! secret is `reflector`'s `tests/no_secrets.rs`: here a secret cannot be told from a value
//! the fuzzer moved into a field that is not one.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use reflector::ClusterConfig;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("informer-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let path = dir.join("config");
    std::fs::write(&path, data).expect("the scratch kubeconfig");
    let shown = match ClusterConfig::load_kubeconfig_files(&[path], None) {
        Ok(load) => format!("{:?} {:?}", load.config, load.warnings),
        Err(e) => format!("{e} {e:?}"),
    };
    std::hint::black_box(shown);
});
