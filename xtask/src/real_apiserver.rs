//! `cargo xtask real-apiserver`: the real kube-apiserver and etcd of `tests/real-apiserver`.
//!
//! - `build` (the default): finds or builds both binaries into `target/real-apiserver/bin/` and
//!   prints where they are (`KUBE_APISERVER` and `ETCD` name binaries of your own instead).
//! - `start`: starts etcd and kube-apiserver on 127.0.0.1, prints the kubeconfig, and runs until
//!   Enter or end of input (ctrl-c works too: the servers' supervisors end them with us).
//! - `check`: starts both, asks `/version`, stops both: what CI's step runs before the suite.
//! - `kubectl`: finds or builds the kubectl the kubectl probe uses on a machine without one
//!   (`k8s.io/kubectl` at the version `tests/real-apiserver/go/kubectl` pins) and prints where.
//! - `regenerate [KUBERNETES_VERSION ETCD_VERSION]`: rewrites the committed build modules for
//!   other versions (by default the ones they pin now), generating kube-apiserver's staging
//!   replacements from the Kubernetes module's own go.mod.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use real_apiserver::{Binaries, BuildModule, RealServer, ServerOptions, User};

fn usage() -> &'static str {
    "usage: cargo xtask real-apiserver [build | start | check | kubectl | regenerate [K8S_VERSION ETCD_VERSION]]"
}

/// Runs the subcommand in `args`.
pub fn run(args: &[String]) -> Result<(), String> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        [] | ["build"] => build().map(|_| ()),
        ["start"] => start(),
        ["check"] => check(),
        ["kubectl"] => {
            let path = BuildModule::Kubectl.ensure().map_err(|e| e.to_string())?;
            println!("kubectl: {}", path.display());
            Ok(())
        }
        ["regenerate"] => {
            let kubernetes = BuildModule::KubeApiserver
                .version()
                .map_err(|e| e.to_string())?;
            let etcd = BuildModule::Etcd.version().map_err(|e| e.to_string())?;
            regenerate(&kubernetes, &etcd)
        }
        ["regenerate", kubernetes, etcd] => regenerate(kubernetes, etcd),
        _ => Err(usage().to_string()),
    }
}

/// Finds or builds both binaries and says where they are.
pub fn build() -> Result<Binaries, String> {
    let binaries = Binaries::ensure().map_err(|e| e.to_string())?;
    println!("kube-apiserver: {}", binaries.kube_apiserver.display());
    println!("etcd:           {}", binaries.etcd.display());
    Ok(binaries)
}

fn start() -> Result<(), String> {
    let binaries = build()?;
    let server =
        RealServer::start_with(&binaries, ServerOptions::default()).map_err(|e| e.to_string())?;
    println!(
        "\nexport KUBECONFIG={}\n\nkube-apiserver {} runs at {}; press Enter to stop it",
        server.kubeconfig().display(),
        server.version(),
        server.url()
    );
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    server.stop().map_err(|e| e.to_string())?;
    println!("stopped; the run directory is removed");
    Ok(())
}

/// Starts both servers and stops them again: the binaries run, the certificates, flags and
/// feature gates are accepted, and a stop leaves nothing behind.
pub fn check() -> Result<(), String> {
    let binaries = build()?;
    let server =
        RealServer::start_with(&binaries, ServerOptions::default()).map_err(|e| e.to_string())?;
    let dir = server.dir().to_path_buf();
    server.stop().map_err(|e| e.to_string())?;
    if dir.exists() {
        return Err(format!("{} is still there after the stop", dir.display()));
    }
    Ok(())
}

fn regenerate(kubernetes: &str, etcd: &str) -> Result<(), String> {
    real_apiserver::regenerate_build_modules(kubernetes, etcd).map_err(|e| e.to_string())
}

/// `cargo xtask demo --server real`: starts a real kube-apiserver, seeds pods and configmaps in
/// three namespaces, and runs the demo's informers (`--kubeconfig`, read-only) on it while pods
/// are created, labelled and deleted (a write every 20 ms plus its round trip) from another
/// thread; the demo's own
/// arguments (`--seconds N`) pass through.
pub fn demo(binary: &Path, args: &[String]) -> Result<(), String> {
    let server = Arc::new(
        RealServer::start_with(&build()?, ServerOptions::default()).map_err(|e| e.to_string())?,
    );
    let send = |method: &str, path: &str, body: serde_json::Value| -> Result<(), String> {
        let bytes = body.to_string().into_bytes();
        let content_type = if method == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        match server.request(User::Admin, method, path, Some((content_type, &bytes))) {
            Ok((status, _)) if (200..300).contains(&status) => Ok(()),
            Ok((status, answer)) => Err(format!("{method} {path}: {status} {}", answer.trim())),
            Err(e) => Err(e.to_string()),
        }
    };
    for n in 0..3 {
        send(
            "POST",
            "/api/v1/namespaces",
            serde_json::json!({"metadata": {"name": format!("demo-{n}")}}),
        )?;
        for i in 0..100 {
            send(
                "POST",
                &format!("/api/v1/namespaces/demo-{n}/pods"),
                demo_pod(&format!("seed-{i}")),
            )?;
        }
        send(
            "POST",
            &format!("/api/v1/namespaces/demo-{n}/configmaps"),
            serde_json::json!({"metadata": {"name": "settings"}, "data": {"n": n.to_string()}}),
        )?;
    }
    println!("seeded 300 pods and 3 configmaps in 3 namespaces; churning pods: a write every 20 ms plus its round trip");
    let stop = Arc::new(AtomicBool::new(false));
    let churn = std::thread::spawn({
        let (server, stop) = (server.clone(), stop.clone());
        move || {
            let mut ops = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let ns = format!("demo-{}", ops % 3);
                let name = format!("churn-{}", (ops / 3) % 40);
                let path = format!("/api/v1/namespaces/{ns}/pods");
                // Create a pod, label it on the next round, delete it on the one after.
                let result = match (ops / 120) % 3 {
                    0 => server.request(
                        User::Admin,
                        "POST",
                        &path,
                        Some(("application/json", demo_pod(&name).to_string().as_bytes())),
                    ),
                    1 => server.request(
                        User::Admin,
                        "PATCH",
                        &format!("{path}/{name}"),
                        Some((
                            "application/merge-patch+json",
                            br#"{"metadata":{"labels":{"churned":"yes"}}}"#,
                        )),
                    ),
                    _ => server.request(User::Admin, "DELETE", &format!("{path}/{name}"), None),
                };
                if let Err(e) = result {
                    eprintln!("churn: {e}");
                }
                ops += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            ops
        }
    });
    let kubeconfig = server.kubeconfig().display().to_string();
    let mut demo_args = vec!["--kubeconfig".to_string(), kubeconfig];
    demo_args.extend(args.iter().cloned());
    let status = std::process::Command::new(binary)
        .args(&demo_args)
        .status()
        .map_err(|e| format!("could not start {}: {e}", binary.display()));
    stop.store(true, Ordering::Relaxed);
    let ops = churn.join().unwrap_or(0);
    println!("churn: {ops} pod writes");
    if let Ok(server) = Arc::try_unwrap(server) {
        server.stop().map_err(|e| e.to_string())?;
    }
    match status? {
        status if status.success() => Ok(()),
        status => Err(format!("the demo exited with {status}")),
    }
}

fn demo_pod(name: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {"name": name, "labels": {"app": "demo"}},
        "spec": {"containers": [{"name": "app", "image": "registry.invalid/demo:1"}]}})
}
