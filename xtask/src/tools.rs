//! Running commands and installing what the build and tests need, idempotently.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

/// The workspace root (the parent of `xtask/`).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// Where cargo builds: `CARGO_TARGET_DIR`, else `target/` in the workspace root.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The cargo binary that invoked us, so that the same toolchain runs every step.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// Runs one named step, printing its start, its end and how long it took.
pub fn step(name: &str, f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    println!("==> {name}");
    let start = Instant::now();
    let result = f();
    let secs = start.elapsed().as_secs_f64();
    match &result {
        Ok(()) => println!("<== {name}: ok ({secs:.1}s)"),
        Err(e) => println!("<== {name}: FAILED ({secs:.1}s): {e}"),
    }
    result
}

/// Runs a command in the workspace root, inheriting stdio; fails on a non-zero exit.
pub fn run(program: &str, args: &[&str]) -> Result<(), String> {
    run_with_env(program, args, &[])
}

/// [`run`], with `env` (name, value) pairs set for that command only (this process's own
/// environment, and so the other steps', is left as it is).
pub fn run_with_env(program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    run_in(&workspace_root(), program, args, env)
}

/// [`run_with_env`] in `dir` instead of the workspace root.
pub fn run_in(
    dir: &std::path::Path,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<(), String> {
    let status = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .status()
        .map_err(|e| format!("could not start `{program}`: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{program} {}` exited with {status}",
            args.join(" ")
        ))
    }
}

/// Bytes free for this user on the filesystem holding `path`, as `df -Pk` reports them; `None`
/// when `df` cannot run or says something this does not read.
pub fn free_bytes(path: &std::path::Path) -> Option<u64> {
    let out = Command::new("df").arg("-Pk").arg(path).output().ok()?;
    if !out.status.success() {
        return None;
    }
    parse_df_available(&String::from_utf8_lossy(&out.stdout))
}

/// The "Available" column of `df -Pk`'s one data line, in bytes. POSIX fixes the columns:
/// filesystem, 1024-blocks, used, available, capacity, mount point.
fn parse_df_available(text: &str) -> Option<u64> {
    let line = text.lines().nth(1)?;
    let kib: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// True when `program args` runs and exits 0 (output discarded).
pub fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Makes sure rustfmt, clippy and kubectl are present, installing what is missing, and builds the
/// python and client-go probes the simulator's real-client tests run.
///
/// Idempotent: each tool is probed first and installed only when the probe fails. rustfmt and
/// clippy come from rustup. kubectl (the kubectl probe's, on the simulator and on the real
/// server) is the machine's when it has one; else it is built from the Go module proxy (the
/// `k8s.io/kubectl` module, at the version `tests/real-apiserver/go/kubectl` pins, the newest the
/// probe is checked with) into `target/real-apiserver/bin`, where the probe finds it. A kubectl
/// that cannot be built is not fatal: the kubectl tests then skip themselves saying so.
pub fn ensure_tools() -> Result<(), String> {
    let cargo = cargo();
    for (component, probe) in [("rustfmt", "fmt"), ("clippy", "clippy")] {
        if !succeeds(&cargo, &[probe, "--version"]) {
            println!("installing rust component {component}");
            run("rustup", &["component", "add", component])?;
        }
    }
    if !succeeds("kubectl", &["version", "--client"]) {
        println!("kubectl not found: building it from the Go module proxy");
        match real_apiserver::BuildModule::Kubectl.ensure() {
            Ok(path) => println!("kubectl: {}", path.display()),
            Err(e) => {
                println!("warning: could not build kubectl ({e}); the kubectl tests will skip")
            }
        }
    }
    ensure_python_probe();
    ensure_client_go_probe();
    Ok(())
}

/// The client-go probe CI builds (`tests/client-go`), run by the simulator's client-go test
/// through `SIM_CLIENT_GO`.
pub fn client_go_probe() -> PathBuf {
    target_dir().join("client-go-probe")
}

/// Where the Debian packages of client-go and of a Go toolchain are fetched and unpacked, apart
/// from the system: apt runs on a state of its own there (its own sources list naming Debian 13,
/// its own package lists and an empty dpkg status), so nothing is installed and the system's apt
/// configuration is left as it is.
fn client_go_debian() -> PathBuf {
    target_dir().join("client-go-debian")
}

/// The Debian release whose packages give client-go's source (`golang-k8s-client-go-dev`,
/// client-go 0.32 in GOPATH layout, with every library it imports) and a Go toolchain recent
/// enough to build it. Debian 12 packages neither.
const CLIENT_GO_SUITE: &str = "trixie";

/// The file in [`client_go_debian`] written once every package is unpacked.
const UNPACKED: &str = "unpacked";

/// The Go toolchain package of [`CLIENT_GO_SUITE`], and where it unpacks.
const CLIENT_GO_TOOLCHAIN: (&str, &str) = ("golang-1.24-go", "usr/lib/go-1.24");

/// Makes sure [`client_go_probe`] exists and is newer than its sources, building it from Debian's
/// packages of client-go (see [`client_go_debian`]) with `tests/client-go/build.sh` in GOPATH
/// mode.
///
/// Idempotent: nothing is fetched when the packages are already unpacked, nothing is built when
/// the probe is newer than every file of `tests/client-go`. Not fatal: when apt or the build
/// fails, a loud warning says so and the client-go test skips with a message.
pub fn ensure_client_go_probe() {
    let probe = client_go_probe();
    let sources = workspace_root().join("tests/client-go");
    if newer_than_all(&probe, &sources) {
        return;
    }
    if let Err(e) = build_client_go_probe(&probe, &sources) {
        let bar = "!".repeat(78);
        println!(
            "{bar}
WARNING: the client-go probe cannot be built: {e}
the simulator's client-go test will SKIP
{bar}"
        );
    }
}

/// Whether `file` exists and was modified after every file directly in `dir`.
fn newer_than_all(file: &std::path::Path, dir: &std::path::Path) -> bool {
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(built) = modified(file) else {
        return false;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries
        .flatten()
        .all(|e| modified(&e.path()).is_some_and(|m| m <= built))
}

/// Fetches and unpacks the packages if needed, then builds the probe into `probe`.
fn build_client_go_probe(probe: &std::path::Path, sources: &std::path::Path) -> Result<(), String> {
    let base = client_go_debian();
    let root = base.join("root");
    let gopath = root.join("usr/share/gocode");
    let goroot = root.join(CLIENT_GO_TOOLCHAIN.1);
    if !base.join(UNPACKED).is_file() {
        println!(
            "client-go probe: fetching Debian {CLIENT_GO_SUITE}'s golang-k8s-client-go-dev and {} into {}",
            CLIENT_GO_TOOLCHAIN.0,
            base.display()
        );
        fetch_client_go_packages(&base, &root)?;
    }
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let go = path(&goroot.join("bin/go"));
    let gocache = base.join("gocache");
    let (goroot, gopath, gocache_s) = (path(&goroot), path(&gopath), path(&gocache));
    let out = path(probe);
    let built = run_in(
        sources,
        "bash",
        &["build.sh", &out],
        &[
            ("GO", &go),
            ("GOROOT", &goroot),
            ("GOCACHE", &gocache_s),
            ("GOTOOLCHAIN", "local"),
            ("CLIENT_GO_GOPATH", &gopath),
        ],
    );
    // Go's build cache (about 800 MB) serves only a rebuild, which a change to the probe's
    // sources alone asks for: a minute of building is cheaper than keeping it.
    let _ = std::fs::remove_dir_all(&gocache);
    built
}

/// Downloads `golang-k8s-client-go-dev`, the Go toolchain and their dependencies from
/// [`CLIENT_GO_SUITE`] with apt on a state of its own under `base`, and unpacks the Go ones
/// (sources in GOPATH layout, the toolchain) into `root`.
fn fetch_client_go_packages(base: &std::path::Path, root: &std::path::Path) -> Result<(), String> {
    let archives = base.join("archives");
    for dir in [
        base.join("lists/partial"),
        archives.join("partial"),
        base.join("cache"),
    ] {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let list = base.join("sources.list");
    std::fs::write(
        &list,
        format!("deb http://deb.debian.org/debian {CLIENT_GO_SUITE} main\n"),
    )
    .map_err(|e| format!("{}: {e}", list.display()))?;
    // An empty dpkg status: apt resolves every dependency as if nothing were installed, and
    // only downloads (`--download-only`), so the system's packages are never touched.
    let status = base.join("status");
    std::fs::write(&status, "").map_err(|e| format!("{}: {e}", status.display()))?;
    let option = |name: &str, value: &std::path::Path| format!("{name}={}", value.display());
    let options = [
        option("Dir::Etc::sourcelist", &list),
        "Dir::Etc::sourceparts=-".to_string(),
        option("Dir::State::Lists", &base.join("lists")),
        option("Dir::State::status", &status),
        option("Dir::Cache", &base.join("cache")),
        option("Dir::Cache::archives", &archives),
        "APT::Sandbox::User=root".to_string(),
    ];
    let mut args: Vec<&str> = Vec::new();
    for o in &options {
        args.extend(["-o", o.as_str()]);
    }
    let with = |extra: &[&'static str]| -> Vec<&str> {
        let mut all = vec!["-qq"];
        all.extend(args.iter().copied());
        all.extend(extra.iter().copied());
        all
    };
    run("apt-get", &with(&["update"]))?;
    run(
        "apt-get",
        &with(&[
            "install",
            "-y",
            "--download-only",
            "--no-install-recommends",
            "golang-k8s-client-go-dev",
            CLIENT_GO_TOOLCHAIN.0,
        ]),
    )?;
    let debs = std::fs::read_dir(&archives).map_err(|e| format!("{}: {e}", archives.display()))?;
    let mut unpacked = 0;
    for deb in debs.flatten() {
        let name = deb.file_name().to_string_lossy().into_owned();
        if name.starts_with("golang-") && name.ends_with(".deb") {
            let (deb, root) = (deb.path(), root.to_string_lossy().into_owned());
            run("dpkg-deb", &["-x", &deb.to_string_lossy(), &root])?;
            unpacked += 1;
        }
    }
    // Unpacked, the packages are not needed again (about 80 MB). The mark says every one was:
    // a run cut short before it fetches and unpacks them again.
    let _ = std::fs::remove_dir_all(&archives);
    let mark = base.join(UNPACKED);
    std::fs::write(&mark, format!("{unpacked} packages\n"))
        .map_err(|e| format!("{}: {e}", mark.display()))?;
    println!("client-go probe: unpacked {unpacked} Go packages");
    Ok(())
}

/// The `kubernetes` release from PyPI the python client probe runs (pinned so that a new
/// release cannot change the probe's outcome unnoticed).
const PY_KUBERNETES: &str = "kubernetes==37.0.2";

/// Makes sure the venv `target/py-probe` holds the official python client, for the simulated
/// API server's python probe (`tests/sim-apiserver/tests/python_probe.rs`).
///
/// Idempotent: nothing is done when the venv already imports `kubernetes`. Not fatal: when
/// python or pip fails, the warning says so loudly and the probe test skips with a message.
pub fn ensure_python_probe() {
    let venv = workspace_root().join("target/py-probe");
    let py = venv.join("bin/python");
    let py = py.to_string_lossy().into_owned();
    if succeeds(&py, &["-c", "import kubernetes"]) {
        return;
    }
    println!(
        "python client probe: installing {PY_KUBERNETES} into {}",
        venv.display()
    );
    let venv_s = venv.to_string_lossy().into_owned();
    let result = run("python3", &["-m", "venv", &venv_s]).and_then(|()| {
        run(
            &py,
            &[
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                PY_KUBERNETES,
            ],
        )
    });
    if let Err(e) = result {
        let bar = "!".repeat(78);
        println!(
            "{bar}
WARNING: the python client probe cannot run: {e}
its test will SKIP
{bar}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::parse_df_available;

    #[test]
    fn df_available_is_read_from_the_fourth_column_in_kib() {
        let text = "Filesystem     1024-blocks     Used Available Capacity Mounted on\n\
                    /dev/vda         264091648 28311552  68157440      30% /\n";
        assert_eq!(parse_df_available(text), Some(68_157_440 * 1024));
    }

    #[test]
    fn df_output_that_is_not_understood_gives_nothing() {
        assert_eq!(parse_df_available(""), None);
        assert_eq!(parse_df_available("header only\n"), None);
        assert_eq!(parse_df_available("h\n/dev/vda 1 2 lots 3% /\n"), None);
    }
}
