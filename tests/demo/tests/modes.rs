//! The demo's choice of cluster, run as a user runs it: the simulated API server unless a flag asks
//! for a real cluster, whatever `KUBECONFIG` says; with the flag, the files of `KUBECONFIG`
//! merged as the library (and kubectl) merge them.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Two kubeconfig files for `KUBECONFIG=a:b`: `a` names the current context (`ctx-a`, server on
/// port 7), `b` another context (`ctx-b`, port 9) and its own current context, which the merge
/// ignores (the first file's wins). Both servers are closed ports: nothing is reached.
fn kubeconfigs(dir: &Path) -> String {
    let file = |name: &str, cluster: &str, port: u16, current: &str| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: {current}\n\
                 clusters:\n- name: {cluster}\n  cluster:\n    server: http://127.0.0.1:{port}\n\
                 contexts:\n- name: ctx-{cluster}\n  context:\n    cluster: {cluster}\n    user: u-{cluster}\n\
                 users:\n- name: u-{cluster}\n  user:\n    token: not-a-real-token\n"
            ),
        )
        .unwrap();
        path
    };
    let a = file("a.yaml", "a", 7, "ctx-a");
    let b = file("b.yaml", "b", 9, "ctx-b");
    format!("{}:{}", a.display(), b.display())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("demo-modes-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the demo with `args` and `KUBECONFIG`; its exit success and standard output.
fn demo(args: &[&str], kubeconfig: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_informer-demo"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn kubeconfig_set_without_a_flag_leaves_the_demo_on_the_simulated_server() {
    let dir = scratch("no-flag");
    let (ok, out) = demo(
        &["--seconds", "1", "--pods", "20", "--rate", "20"],
        &kubeconfigs(&dir),
    );
    assert!(out.contains("KUBECONFIG is set but not used"), "{out}");
    assert!(!out.contains("127.0.0.1:7"), "no real cluster: {out}");
    assert!(ok, "the simulated run passes: {out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn real_cluster_reads_every_kubeconfig_file_merged() {
    let dir = scratch("merged");
    let kubeconfig = kubeconfigs(&dir);
    // The first file's current context.
    let (ok, out) = demo(&["--real-cluster", "--seconds", "1"], &kubeconfig);
    assert!(!ok, "nothing listens there, so nothing syncs: {out}");
    assert!(
        out.contains("cluster http://127.0.0.1:7/ from ") && out.contains(&kubeconfig),
        "{out}"
    );
    // A context only the second file defines.
    let (_, out) = demo(&["--context", "ctx-b", "--seconds", "1"], &kubeconfig);
    assert!(out.contains("cluster http://127.0.0.1:9/ from "), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}
