//! The python client probe against a real kube-apiserver: the same `probe.py` (the official
//! `kubernetes` client from PyPI, about forty named steps) that the simulator's test runs, with
//! the same verdict required, so that a step passing on the simulator and failing on the real
//! server (or the reverse) is a difference found. Runs when `REAL_APISERVER=1` (CI's real-server
//! step) or when the binaries are built; needs the venv `cargo xtask ci` prepares under
//! `target/py-probe` (or `SIM_PYTHON`), and says loudly why when it skips.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use real_apiserver::{RealServer, ServerOptions, User};

fn skip(why: &str) {
    let bar = "!".repeat(78);
    println!("{bar}\nSKIPPED: python client probe on the real server not run: {why}\n{bar}");
    eprintln!("SKIPPED: python client probe on the real server not run: {why}");
}

fn python() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SIM_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let p = real_apiserver::target_dir().join("py-probe/bin/python");
    p.exists().then_some(p)
}

/// The CRD whose `widgets` the probe's custom object steps use (the simulator's test registers
/// the same resource).
const WIDGETS: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.example.com"},
  "spec": {"group": "example.com", "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}"#;

#[test]
fn python_client_probe_every_step_passes_on_the_real_server() {
    if let Some(why) = real_apiserver::unavailable() {
        return skip(&why);
    }
    let Some(py) = python() else {
        return skip("no venv at target/py-probe (run `cargo xtask ci`, or set SIM_PYTHON)");
    };
    if !Command::new(&py)
        .args(["-c", "import kubernetes"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return skip(&format!("{} cannot import kubernetes", py.display()));
    }
    let server = RealServer::start(ServerOptions::default()).expect("the real server starts");
    let (status, body) = server
        .request(
            User::Admin,
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(("application/json", WIDGETS.as_bytes())),
        )
        .expect("the CRD request");
    assert_eq!(status, 201, "{body}");
    let served = Instant::now();
    loop {
        let (status, _) = server
            .request(
                User::Admin,
                "GET",
                "/apis/example.com/v1/namespaces/default/widgets",
                None,
            )
            .expect("a list of widgets");
        if status == 200 {
            break;
        }
        assert!(
            served.elapsed() < Duration::from_secs(30),
            "widgets not served after 30 s ({status})"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let script = real_apiserver::workspace_root().join("tests/sim-apiserver/tests/python/probe.py");
    let mut child = Command::new(&py)
        .arg(&script)
        .arg(server.kubeconfig())
        .env("HOME", server.dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    // Bounded: a step that hangs fails the test instead of holding CI (the output, a line per
    // step, fits the pipes' buffers while it runs).
    let started = Instant::now();
    while child.try_wait().expect("the probe's state").is_none() {
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            panic!("the python probe ran over 180 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("the probe's output");
    server.stop().expect("the real server stops");
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
        "python probe on the real server: {summary}; failing:\n{}",
        failed.join("\n")
    );
}
