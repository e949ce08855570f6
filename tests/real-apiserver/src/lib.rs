//! A real kube-apiserver backed by a real etcd, for tests: the judge of the client and of the
//! simulator.
//!
//! ```text
//!  go/kube-apiserver, go/etcd          target/real-apiserver/bin/        target/real-apiserver/run/<pid>-<n>/
//!  (committed build modules)  --build-->  kube-apiserver-v1.36.3 ...  --start-->  pki, etcd data, logs, kubeconfig
//! ```
//!
//! - [`Binaries::ensure`] finds the two binaries: `KUBE_APISERVER` and `ETCD` when set, else the
//!   ones built into `target/real-apiserver/bin/`, named by the versions the committed build
//!   modules pin; missing ones are built with the installed Go from the Go module proxy (a cold
//!   kube-apiserver build took under five minutes on 2 cores; a second call, seconds).
//! - [`RealServer::start`] generates a CA, serving and client certificates, bearer tokens and a
//!   service-account key; starts etcd and kube-apiserver on free ports of 127.0.0.1 with RBAC and
//!   the feature gates this project tests ([`ServerOptions`]); waits for etcd's `/health` and the
//!   apiserver's `/readyz`; and writes a kubeconfig.
//! - Stopping ([`RealServer::stop`], or dropping the server, also while a test unwinds) ends both
//!   processes and removes the run directory. Each process runs under a small shell supervisor
//!   that reads its stdin from us: if this process dies without unwinding (an abort, `SIGKILL`),
//!   the pipe closes and the supervisor ends its server, so no server outlives the test binary;
//!   the next start removes run directories left by dead processes.
//!
//! ```no_run
//! use real_apiserver::{RealServer, ServerOptions, User};
//!
//! fn main() -> Result<(), real_apiserver::Error> {
//!     let server = RealServer::start(ServerOptions::default())?;
//!     println!("KUBECONFIG={}", server.kubeconfig().display());
//!     let (status, body) = server.request(User::Admin, "GET", "/version", None)?;
//!     assert_eq!(status, 200, "{body}");
//!     server.stop()
//! }
//! ```
//!
//! Every failure is an [`Error`] naming the missing piece (no Go, the module proxy unreachable, a
//! port in use, a server that exited, with the tail of its log). Tokens and keys never appear in
//! `Debug` output or errors. docs/real-apiserver.md tells the whole story.

#![deny(missing_docs)]

// docs/real-apiserver.md's Rust snippet, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/real-apiserver.md")]
struct RealApiserverDoc;

mod build;
mod pki;
mod process;
mod server;

pub use build::{regenerate_build_modules, Binaries, BuildModule};
pub use server::{RealServer, ServerOptions, User};

/// Why a test that needs the real server should not run here, if it should not: it runs when
/// `REAL_APISERVER=1` (CI's real-server step, which builds the binaries first) or when both
/// binaries are there already (built, or named by `KUBE_APISERVER` and `ETCD`), so that
/// `cargo test --workspace` needs no Go.
pub fn unavailable() -> Option<String> {
    if std::env::var("REAL_APISERVER").is_ok_and(|v| v == "1") {
        return None;
    }
    let missing: Vec<String> = [BuildModule::Etcd, BuildModule::KubeApiserver]
        .into_iter()
        .filter_map(|module| module.present().err())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "no real kube-apiserver: {}; set REAL_APISERVER=1 to build and run",
            missing.join(", ")
        )
    })
}

use std::path::PathBuf;

/// What went wrong building or running the real server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No `go` command on `PATH`, or it does not run.
    #[error("no Go toolchain: `go version` failed ({0}); install Go 1.26 or set KUBE_APISERVER and ETCD to binaries of your own")]
    NoGo(String),
    /// The Go module proxy did not answer while a module was downloaded.
    #[error("the Go module proxy is unreachable while building {what}: {detail}")]
    ProxyUnreachable {
        /// What was being built.
        what: String,
        /// The end of Go's output.
        detail: String,
    },
    /// `go build` (or `go mod`) failed for another reason.
    #[error("building {what} failed: {detail}")]
    Build {
        /// What was being built.
        what: String,
        /// The end of Go's output.
        detail: String,
    },
    /// An environment variable names a binary that is not there.
    #[error("{variable} names {path}, which is not a file")]
    MissingBinary {
        /// `KUBE_APISERVER` or `ETCD`.
        variable: &'static str,
        /// What it names.
        path: PathBuf,
    },
    /// A committed build module is not as expected.
    #[error("build module {path}: {problem}")]
    BuildModule {
        /// Its go.mod.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A port asked for, or one a server tried to listen on, is taken.
    #[error("port {0} on 127.0.0.1 is in use")]
    PortInUse(u16),
    /// A server process exited before it was ready.
    #[error(
        "{process} exited before it was ready ({status}); the end of its log ({log}):\n{tail}"
    )]
    Exited {
        /// `etcd` or `kube-apiserver`.
        process: &'static str,
        /// How it exited.
        status: String,
        /// Where its whole log is.
        log: PathBuf,
        /// The last lines of its log.
        tail: String,
    },
    /// A server did not become ready in time.
    #[error("{process} was not ready after {seconds} s (last answer: {last}); its log: {log}")]
    NotReady {
        /// `etcd` or `kube-apiserver`.
        process: &'static str,
        /// How long we waited.
        seconds: u64,
        /// The last readiness answer or error.
        last: String,
        /// Where its log is.
        log: PathBuf,
    },
    /// Generating certificates or keys failed.
    #[error("generating certificates: {0}")]
    Pki(String),
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
}

impl Error {
    fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}

/// The workspace's target directory: `CARGO_TARGET_DIR` when set, else `target/` at the root.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => workspace_root().join("target"),
    }
}

/// The root of the workspace this crate was built in.
pub fn workspace_root() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..");
    root.canonicalize().unwrap_or(root)
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
