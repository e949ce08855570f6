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

/// Makes sure rustfmt, clippy and kubectl are present, installing what is missing.
///
/// Idempotent: each tool is probed first and installed only when the probe fails. rustfmt and
/// clippy come from rustup; kubectl (used by the simulated API server's real-client test) comes
/// from Debian's `kubernetes-client` package. A missing kubectl that cannot be installed is not
/// fatal: that one test then skips itself with a message saying so.
pub fn ensure_tools() -> Result<(), String> {
    let cargo = cargo();
    for (component, probe) in [("rustfmt", "fmt"), ("clippy", "clippy")] {
        if !succeeds(&cargo, &[probe, "--version"]) {
            println!("installing rust component {component}");
            run("rustup", &["component", "add", component])?;
        }
    }
    if !succeeds("kubectl", &["version", "--client"]) {
        println!("kubectl not found: installing Debian package kubernetes-client");
        let installed = succeeds("apt-get", &["update", "-qq"])
            && succeeds("apt-get", &["install", "-y", "-qq", "kubernetes-client"]);
        if !installed {
            println!("warning: could not install kubernetes-client; the kubectl test will skip");
        }
    }
    ensure_python_probe();
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
