//! `cargo xtask real-apiserver`: the real kube-apiserver and etcd of `tests/real-apiserver`.
//!
//! - `build` (the default): finds or builds both binaries into `target/real-apiserver/bin/` and
//!   prints where they are (`KUBE_APISERVER` and `ETCD` name binaries of your own instead).
//! - `start`: starts etcd and kube-apiserver on 127.0.0.1, prints the kubeconfig, and runs until
//!   Enter or end of input (ctrl-c works too: the servers' supervisors end them with us).
//! - `check`: starts both, asks `/version`, stops both: what CI's step runs before the suite.
//! - `regenerate [KUBERNETES_VERSION ETCD_VERSION]`: rewrites the committed build modules for
//!   other versions (by default the ones they pin now), generating kube-apiserver's staging
//!   replacements from the Kubernetes module's own go.mod.

use real_apiserver::{Binaries, BuildModule, RealServer, ServerOptions};

fn usage() -> &'static str {
    "usage: cargo xtask real-apiserver [build | start | check | regenerate [K8S_VERSION ETCD_VERSION]]"
}

/// Runs the subcommand in `args`.
pub fn run(args: &[String]) -> Result<(), String> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        [] | ["build"] => build().map(|_| ()),
        ["start"] => start(),
        ["check"] => check(),
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
