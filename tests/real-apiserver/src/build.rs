//! Finding or building the kube-apiserver and etcd binaries.
//!
//! Each binary is built from a committed build module under `go/` (a `go.mod`, a `go.sum` and a
//! three-line `main.go`), so a build is reproducible: Go verifies every download against `go.sum`
//! and may not change either file (`-mod=readonly`). The version pinned in `go.mod` names the
//! cached binary, `target/real-apiserver/bin/<name>-<version>`; building it again is skipped
//! while it is there. Go's own module and build caches stay Go's (in the user's home), so even a
//! fresh checkout rebuilds in about a minute once a machine has built the version before.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{tail, target_dir, workspace_root, Error};

/// One committed Go build module and the binary it makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildModule {
    /// `go/kube-apiserver`: upstream `cmd/kube-apiserver` from `k8s.io/kubernetes`.
    KubeApiserver,
    /// `go/etcd`: upstream `etcdmain` from `go.etcd.io/etcd/server/v3`.
    Etcd,
    /// `go/kubectl`: upstream kubectl's command from the published `k8s.io/kubectl` module, for
    /// the kubectl probe on a machine that has no kubectl (built only when asked for).
    Kubectl,
}

impl BuildModule {
    /// The binary's name.
    pub fn name(self) -> &'static str {
        match self {
            BuildModule::KubeApiserver => "kube-apiserver",
            BuildModule::Etcd => "etcd",
            BuildModule::Kubectl => "kubectl",
        }
    }

    /// The module whose version the binary carries.
    fn upstream(self) -> &'static str {
        match self {
            BuildModule::KubeApiserver => "k8s.io/kubernetes",
            BuildModule::Etcd => "go.etcd.io/etcd/server/v3",
            BuildModule::Kubectl => "k8s.io/kubectl",
        }
    }

    /// The environment variable that names a binary of the user's own instead.
    fn variable(self) -> &'static str {
        match self {
            BuildModule::KubeApiserver => "KUBE_APISERVER",
            BuildModule::Etcd => "ETCD",
            BuildModule::Kubectl => "KUBECTL",
        }
    }

    /// The module's directory in the repository.
    pub fn dir(self) -> PathBuf {
        workspace_root()
            .join("tests")
            .join("real-apiserver")
            .join("go")
            .join(self.name())
    }

    /// The upstream version the committed `go.mod` pins.
    pub fn version(self) -> Result<String, Error> {
        let path = self.dir().join("go.mod");
        let text = std::fs::read_to_string(&path)
            .map_err(Error::io(format!("reading {}", path.display())))?;
        pinned_version(&text, self.upstream()).ok_or_else(|| Error::BuildModule {
            path,
            problem: format!("no `require {} v...` line", self.upstream()),
        })
    }

    /// Where the built binary is cached.
    pub fn cached(self) -> Result<PathBuf, Error> {
        Ok(bin_dir().join(format!("{}-{}", self.name(), self.version()?)))
    }

    /// The linker flags that stamp the version, as upstream's release builds do, so that
    /// `/version` answers the real version rather than `v0.0.0-master`.
    fn ldflags(self, version: &str) -> String {
        match self {
            BuildModule::KubeApiserver => {
                let (major, minor) = major_minor(version);
                let pkg = "k8s.io/component-base/version";
                format!(
                    "-s -w -X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major} \
                     -X {pkg}.gitMinor={minor} -X {pkg}.gitTreeState=clean"
                )
            }
            BuildModule::Etcd => "-s -w".to_string(),
            BuildModule::Kubectl => {
                // The module's tag is `v0.33.13` for kubectl 1.33.13.
                let release = version.replacen("v0.", "v1.", 1);
                let (major, minor) = major_minor(&release);
                let pkg = "k8s.io/component-base/version";
                format!(
                    "-s -w -X {pkg}.gitVersion={release} -X {pkg}.gitMajor={major} \
                     -X {pkg}.gitMinor={minor} -X {pkg}.gitTreeState=clean"
                )
            }
        }
    }

    /// The binary to run if it is there now, without building: the environment variable's when
    /// set, else the cached build; else why not.
    pub fn present(self) -> Result<PathBuf, String> {
        let path = match std::env::var_os(self.variable()).filter(|p| !p.is_empty()) {
            Some(path) => PathBuf::from(path),
            None => self.cached().map_err(|e| e.to_string())?,
        };
        if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{} not built", path.display()))
        }
    }

    /// The binary to run: the environment variable's when set, else the cached build, built now
    /// when missing.
    pub fn ensure(self) -> Result<PathBuf, Error> {
        if let Some(path) = std::env::var_os(self.variable()).filter(|p| !p.is_empty()) {
            let path = PathBuf::from(path);
            return if path.is_file() {
                Ok(path)
            } else {
                Err(Error::MissingBinary {
                    variable: self.variable(),
                    path,
                })
            };
        }
        let cached = self.cached()?;
        if cached.is_file() {
            return Ok(cached);
        }
        self.build(&cached)?;
        Ok(cached)
    }

    /// Builds the binary into `out` (through a temporary name, so that a cut-short build leaves
    /// nothing that looks finished).
    fn build(self, out: &Path) -> Result<(), Error> {
        go_version()?;
        let version = self.version()?;
        let what = format!("{} {version}", self.name());
        std::fs::create_dir_all(bin_dir()).map_err(Error::io("creating the binaries' folder"))?;
        let partial = out.with_extension("partial");
        println!(
            "real-apiserver: building {what} with Go from the module proxy into {} \
             (cold: {}; once built: seconds)",
            out.display(),
            match self {
                BuildModule::KubeApiserver => "about 5 minutes on 2 cores",
                BuildModule::Etcd => "a few minutes",
                BuildModule::Kubectl => "about 4 minutes on 2 cores",
            }
        );
        let mut command = go();
        command
            .current_dir(self.dir())
            .args(["build", "-trimpath", "-mod=readonly", "-o"])
            .arg(&partial)
            .arg(format!("-ldflags={}", self.ldflags(&version)))
            .arg(".");
        run_go(command, &what)?;
        std::fs::rename(&partial, out)
            .map_err(Error::io(format!("moving the new {what} into place")))?;
        println!("real-apiserver: built {}", out.display());
        Ok(())
    }
}

/// Both binaries, found or built.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The kube-apiserver binary.
    pub kube_apiserver: PathBuf,
    /// The etcd binary.
    pub etcd: PathBuf,
}

impl Binaries {
    /// Finds or builds both (etcd first: it is the quicker, and a broken toolchain shows sooner).
    pub fn ensure() -> Result<Binaries, Error> {
        let etcd = BuildModule::Etcd.ensure()?;
        let kube_apiserver = BuildModule::KubeApiserver.ensure()?;
        Ok(Binaries {
            kube_apiserver,
            etcd,
        })
    }
}

/// Rewrites `go/kube-apiserver/go.mod` for Kubernetes `kubernetes_version` (`v1.36.3`) and
/// `go/etcd/go.mod` for etcd `etcd_version` (`v3.6.16`), then lets `go mod tidy` fill in both
/// `go.sum` files. The kube-apiserver module replaces every staging module with its `v0.x.y` tag,
/// as listed by the Kubernetes module's own `go.mod` (its `=> ./staging/...` lines), and copies
/// its `go` and `godebug` lines; nothing is listed by hand.
pub fn regenerate_build_modules(kubernetes_version: &str, etcd_version: &str) -> Result<(), Error> {
    go_version()?;
    let upstream_mod = download_go_mod(BuildModule::KubeApiserver.upstream(), kubernetes_version)?;
    let text = kube_apiserver_go_mod(&upstream_mod, kubernetes_version).map_err(|problem| {
        Error::BuildModule {
            path: PathBuf::from(format!("k8s.io/kubernetes@{kubernetes_version}/go.mod")),
            problem,
        }
    })?;
    write_module(BuildModule::KubeApiserver, &text)?;
    let etcd = format!(
        "// Generated by `cargo xtask real-apiserver regenerate`.\n\
         module realapiserver/etcd\n\ngo 1.26.0\n\nrequire {} {etcd_version}\n",
        BuildModule::Etcd.upstream()
    );
    write_module(BuildModule::Etcd, &etcd)?;
    // kubectl stays at the version it pins (the newest the kubectl probe is checked with).
    let kubectl = format!(
        "// Generated by `cargo xtask real-apiserver regenerate`.\n\
         module realapiserver/kubectl\n\ngo 1.26.0\n\nrequire {} {}\n",
        BuildModule::Kubectl.upstream(),
        BuildModule::Kubectl.version()?
    );
    write_module(BuildModule::Kubectl, &kubectl)
}

fn write_module(module: BuildModule, go_mod: &str) -> Result<(), Error> {
    let dir = module.dir();
    let path = dir.join("go.mod");
    std::fs::write(&path, go_mod).map_err(Error::io(format!("writing {}", path.display())))?;
    let mut tidy = go();
    tidy.current_dir(&dir).args(["mod", "tidy"]);
    run_go(tidy, &format!("{}'s go.sum", module.name()))?;
    println!("real-apiserver: regenerated {}", path.display());
    Ok(())
}

/// The build module's go.mod for Kubernetes `version`, from `upstream`, the text of the
/// Kubernetes module's own go.mod.
fn kube_apiserver_go_mod(upstream: &str, version: &str) -> Result<String, String> {
    let staging_tag = staging_tag(version)?;
    let mut out = String::from(
        "// Generated by `cargo xtask real-apiserver regenerate` from k8s.io/kubernetes's go.mod.\n\
         module realapiserver/kubeapiserver\n\n",
    );
    let mut copied = 0;
    for line in upstream.lines() {
        if line.starts_with("go ") || line.starts_with("godebug ") {
            out.push_str(line);
            out.push_str("\n\n");
            copied += 1;
        }
    }
    if copied == 0 {
        return Err("no `go` line".into());
    }
    out.push_str(&format!(
        "require k8s.io/kubernetes {version}\n\nreplace (\n"
    ));
    let mut staging = 0;
    for line in upstream.lines() {
        let mut words = line.split_whitespace();
        if let (Some(module), Some("=>"), Some(target)) = (words.next(), words.next(), words.next())
        {
            if target.starts_with("./staging/") {
                out.push_str(&format!("\t{module} => {module} {staging_tag}\n"));
                staging += 1;
            }
        }
    }
    if staging == 0 {
        return Err("no `=> ./staging/...` replace line".into());
    }
    out.push_str(")\n");
    Ok(out)
}

/// `v0.36.3` for `v1.36.3`: the tag Kubernetes gives its staging modules for a release.
fn staging_tag(version: &str) -> Result<String, String> {
    match version.strip_prefix("v1.") {
        Some(rest) if rest.split('.').count() >= 2 => Ok(format!("v0.{rest}")),
        _ => Err(format!(
            "{version:?} is not a Kubernetes release version (v1.x.y)"
        )),
    }
}

fn major_minor(version: &str) -> (&str, &str) {
    let mut parts = version.trim_start_matches('v').split('.');
    (parts.next().unwrap_or(""), parts.next().unwrap_or(""))
}

/// The version `require module vX` names in a go.mod's text (one line or inside a block).
fn pinned_version(go_mod: &str, module: &str) -> Option<String> {
    go_mod.lines().find_map(|line| {
        let line = line.trim().trim_start_matches("require").trim();
        let mut words = line.split_whitespace();
        (words.next() == Some(module))
            .then(|| words.next().map(str::to_string))
            .flatten()
    })
}

/// Fetches `module@version`'s go.mod through the module proxy and returns its text.
fn download_go_mod(module: &str, version: &str) -> Result<String, Error> {
    let what = format!("{module}@{version}");
    let mut command = go();
    command.args(["mod", "download", "-json", &what]);
    let output = run_go(command, &what)?;
    let info: serde_json::Value = serde_json::from_str(&output).map_err(|e| Error::Build {
        what: what.clone(),
        detail: format!("`go mod download -json` printed no JSON: {e}"),
    })?;
    let path = info["GoMod"].as_str().ok_or_else(|| Error::Build {
        what: what.clone(),
        detail: "`go mod download -json` named no GoMod file".into(),
    })?;
    std::fs::read_to_string(path).map_err(Error::io(format!("reading {path}")))
}

/// `target/real-apiserver/bin`.
fn bin_dir() -> PathBuf {
    target_dir().join("real-apiserver").join("bin")
}

/// A `go` command that never switches toolchain behind our back and builds static binaries, as
/// upstream releases are.
fn go() -> Command {
    let mut command = Command::new("go");
    command
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-buildvcs=false");
    command
}

/// Checks that Go runs.
fn go_version() -> Result<String, Error> {
    match go().arg("version").output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => Err(Error::NoGo(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        )),
        Err(e) => Err(Error::NoGo(e.to_string())),
    }
}

/// Runs a `go` command, printing a line every half minute while it runs (a cold build is long
/// and otherwise silent); returns its standard output, or an error with the end of its output.
fn run_go(mut command: Command, what: &str) -> Result<String, Error> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::NoGo(e.to_string()))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let mut last_report = started;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(Error::io(format!("waiting for go ({what})"))(e)),
        }
        if last_report.elapsed() >= Duration::from_secs(30) {
            last_report = Instant::now();
            println!(
                "real-apiserver: still building {what} ({} s)",
                started.elapsed().as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    if status.success() {
        return Ok(stdout);
    }
    let detail = tail(&stderr, 20);
    if proxy_unreachable(&stderr) {
        Err(Error::ProxyUnreachable {
            what: what.to_string(),
            detail,
        })
    } else {
        Err(Error::Build {
            what: what.to_string(),
            detail,
        })
    }
}

/// Whether Go's output says a download failed for want of the network.
fn proxy_unreachable(stderr: &str) -> bool {
    [
        "dial tcp",
        "no such host",
        "i/o timeout",
        "connection refused",
        "TLS handshake timeout",
        "proxyconnect",
    ]
    .iter()
    .any(|needle| stderr.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UPSTREAM: &str = "module k8s.io/kubernetes\n\ngo 1.26.0\n\ngodebug default=go1.26\n\n\
        require (\n\tk8s.io/api v0.0.0\n\tgithub.com/x/y v1.0.0\n)\n\n\
        replace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\
        \tk8s.io/client-go => ./staging/src/k8s.io/client-go\n\tgithub.com/a/b => github.com/a/b v1.2.3\n)\n";

    #[test]
    fn the_generated_module_replaces_each_staging_module_with_its_release_tag() {
        let text = kube_apiserver_go_mod(UPSTREAM, "v1.36.3").unwrap();
        assert!(text.contains("go 1.26.0\n"));
        assert!(text.contains("godebug default=go1.26\n"));
        assert!(text.contains("require k8s.io/kubernetes v1.36.3\n"));
        assert!(text.contains("\tk8s.io/api => k8s.io/api v0.36.3\n"));
        assert!(text.contains("\tk8s.io/client-go => k8s.io/client-go v0.36.3\n"));
        assert!(!text.contains("github.com/a/b"), "only staging modules");
        assert_eq!(
            pinned_version(&text, "k8s.io/kubernetes").as_deref(),
            Some("v1.36.3")
        );
    }

    #[test]
    fn a_go_mod_without_staging_lines_or_a_bad_version_is_refused() {
        assert!(kube_apiserver_go_mod("module x\n\ngo 1.26\n", "v1.36.3")
            .unwrap_err()
            .contains("staging"));
        assert!(kube_apiserver_go_mod(UPSTREAM, "1.36")
            .unwrap_err()
            .contains("not a Kubernetes release"));
    }

    #[test]
    fn the_committed_modules_pin_a_version_each() {
        let kube = BuildModule::KubeApiserver.version().unwrap();
        let etcd = BuildModule::Etcd.version().unwrap();
        assert!(kube.starts_with("v1."), "{kube}");
        assert!(etcd.starts_with("v3."), "{etcd}");
        let kubectl = BuildModule::Kubectl.version().unwrap();
        assert!(kubectl.starts_with("v0."), "{kubectl}");
        // Every staging replacement carries the release's staging tag, none a stale one.
        let go_mod =
            std::fs::read_to_string(BuildModule::KubeApiserver.dir().join("go.mod")).unwrap();
        let tag = staging_tag(&kube).unwrap();
        let replaced: Vec<&str> = go_mod.lines().filter(|l| l.contains("=>")).collect();
        assert!(replaced.len() > 30, "{} replacements", replaced.len());
        for line in replaced {
            assert!(line.trim_end().ends_with(&tag), "{line}");
        }
    }

    #[test]
    fn kubectl_is_stamped_with_its_release_version_not_its_module_tag() {
        let flags = BuildModule::Kubectl.ldflags("v0.33.13");
        assert!(flags.contains("version.gitVersion=v1.33.13 "), "{flags}");
        assert!(flags.contains("version.gitMajor=1 "), "{flags}");
        assert!(flags.contains("version.gitMinor=33 "), "{flags}");
    }

    #[test]
    fn network_failures_are_told_apart_from_build_failures() {
        assert!(proxy_unreachable(
            "go: k8s.io/api@v0.36.3: Get \"https://proxy.golang.org/...\": dial tcp: lookup proxy.golang.org: no such host"
        ));
        assert!(!proxy_unreachable("./main.go:3:2: undefined: app"));
    }
}
