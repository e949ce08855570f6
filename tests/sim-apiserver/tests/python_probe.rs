//! The python client probe: the official `kubernetes` client from PyPI runs
//! `tests/python/probe.py` (about forty named steps) against an in-process `SimServer` and
//! every step must pass. The client lives in the venv `cargo xtask ci` prepares under
//! `target/py-probe` (or the interpreter `SIM_PYTHON` names); without it the test skips,
//! saying so loudly.

use std::path::PathBuf;
use std::time::Duration;

use sim_apiserver::{ResourceDef, SimServer};

fn python() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SIM_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let p = root.join("target/py-probe/bin/python");
    p.exists().then_some(p)
}

fn skip(why: &str) {
    let bar = "!".repeat(78);
    println!("{bar}\nSKIPPED: python client probe not run: {why}\n(run `cargo xtask ci`, which installs the `kubernetes` package into target/py-probe, or set SIM_PYTHON)\n{bar}");
    eprintln!("SKIPPED: python client probe not run: {why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_probe_every_step_passes() {
    let Some(py) = python() else {
        return skip("no venv at target/py-probe");
    };
    let check = tokio::process::Command::new(&py)
        .args(["-c", "import kubernetes"])
        .output()
        .await;
    match check {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return skip(&format!(
                "`import kubernetes` fails: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ))
        }
        Err(e) => return skip(&format!("{} does not run: {e}", py.display())),
    }
    let sim = SimServer::builder()
        .resource(ResourceDef::new(
            "example.com",
            "v1",
            "Widget",
            "widgets",
            true,
        ))
        .start()
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(format!(
        "sim-py-probe-{}-{}",
        std::process::id(),
        sim.addr().port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("config");
    std::fs::write(&cfg, sim.kubeconfig()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/probe.py");
    let run = tokio::process::Command::new(&py)
        .arg(&script)
        .arg(&cfg)
        .env("HOME", &dir)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the python probe timed out")
        .expect("python runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stderr.trim().is_empty() {
        println!("stderr:\n{stderr}");
    }
    let summary = stdout
        .lines()
        .rev()
        .find(|l| l.ends_with("steps pass"))
        .unwrap_or("no summary line");
    let failed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        out.status.success() && failed.is_empty() && summary != "no summary line",
        "python probe: {summary}; failing:\n{}",
        failed.join("\n")
    );
}
