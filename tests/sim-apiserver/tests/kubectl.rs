//! A real client accepts the simulator: kubectl lists, watches, creates and deletes through it,
//! over plain HTTP and over HTTPS with a bearer token. Skipped (with a message) without kubectl.

#[path = "common/kubectl.rs"]
mod kubectl_common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use kubectl_common::{find_kubectl as kubectl, Kube};
use serde_json::{json, Value};
use sim_apiserver::SimServer;
use tokio::io::{AsyncBufReadExt, BufReader};

async fn next_line(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> String {
    tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("kubectl watch output timed out")
        .unwrap()
        .expect("kubectl watch ended early")
}

async fn exercise(bin: PathBuf, sim: SimServer, tag: &str) {
    let k = Kube::new(bin, &sim, tag);
    sim.create("namespaces", None, json!({"metadata": {"name": "team"}}))
        .unwrap();
    for (ns, n) in [("default", "web-1"), ("team", "db-1")] {
        sim.create(
            "pods",
            Some(ns),
            json!({"metadata": {"name": n}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        )
        .unwrap();
    }

    // List across namespaces.
    let out: Value =
        serde_json::from_str(&k.run(&["get", "pods", "-A", "-o", "json"]).await).unwrap();
    let mut names: Vec<(String, String)> = out["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["metadata"]["namespace"].as_str().unwrap().to_string(),
                p["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("default".into(), "web-1".into()),
            ("team".into(), "db-1".into())
        ]
    );

    // Watch in the default namespace while creating and deleting through kubectl.
    let mut child = k
        .cmd(&["get", "pods", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let header = next_line(&mut lines).await;
    assert!(header.starts_with("EVENT"), "{header}");
    let first = next_line(&mut lines).await;
    assert_eq!(
        first.split_whitespace().take(2).collect::<Vec<_>>(),
        ["ADDED", "web-1"]
    );

    let manifest = k.dir.join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: from-kubectl\nspec:\n  containers:\n  - name: c\n    image: busybox\n",
    )
    .unwrap();
    let created = k.run(&["create", "-f", manifest.to_str().unwrap()]).await;
    assert_eq!(created.trim(), "pod/from-kubectl created");
    assert!(sim.get("pods", Some("default"), "from-kubectl").is_ok());
    let added = next_line(&mut lines).await;
    assert_eq!(
        added.split_whitespace().take(2).collect::<Vec<_>>(),
        ["ADDED", "from-kubectl"]
    );

    let deleted = k.run(&["delete", "pod", "from-kubectl"]).await;
    assert_eq!(deleted.trim(), "pod \"from-kubectl\" deleted");
    let ev = next_line(&mut lines).await;
    assert_eq!(
        ev.split_whitespace().take(2).collect::<Vec<_>>(),
        ["DELETED", "from-kubectl"]
    );
    child.kill().await.unwrap();
    assert!(sim.get("pods", Some("default"), "from-kubectl").is_err());
    assert!(sim.counters().watches >= 1);
}

fn skip_message() {
    println!(
        "SKIPPED: kubectl not found (run `cargo xtask ci`, which builds one, or set SIM_KUBECTL)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lists_watches_creates_and_deletes_over_http() {
    let Some(bin) = kubectl() else {
        return skip_message();
    };
    let sim = SimServer::start().await.unwrap();
    exercise(bin, sim, "http").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lists_watches_creates_and_deletes_over_https_with_a_token() {
    let Some(bin) = kubectl() else {
        return skip_message();
    };
    let sim = SimServer::builder()
        .tls(true)
        .token("kubectl-token")
        .start()
        .await
        .unwrap();
    exercise(bin, sim.clone(), "https").await;
    // A wrong token is refused.
    let k = Kube::new(kubectl().unwrap(), &sim, "bad");
    let cfg = std::fs::read_to_string(k.dir.join("config"))
        .unwrap()
        .replace("kubectl-token", "wrong");
    std::fs::write(k.dir.join("config"), cfg).unwrap();
    let out = k.cmd(&["get", "pods"]).output().await.unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("must be logged in"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_writes_leases_deployments_and_patches_through_the_new_verbs() {
    let Some(bin) = kubectl() else {
        return skip_message();
    };
    let sim = SimServer::start().await.unwrap();
    let k = Kube::new(bin, &sim, "writes");
    let resources = k.run(&["api-resources", "--no-headers"]).await;
    for name in ["leases", "deployments", "events", "pods", "configmaps"] {
        assert!(
            resources.lines().any(|l| l.starts_with(name)),
            "{name} missing from:\n{resources}"
        );
    }
    sim.create(
        "leases.coordination.k8s.io",
        Some("default"),
        json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a"}}),
    )
    .unwrap();
    let out = k.run(&["get", "leases", "-o", "name"]).await;
    assert_eq!(out.trim(), "lease.coordination.k8s.io/leader");

    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: c\n        image: nginx\n";
    let manifest = k.dir.join("deploy.yaml");
    std::fs::write(&manifest, deploy).unwrap();
    let out = k
        .run(&["apply", "--server-side", "-f", manifest.to_str().unwrap()])
        .await;
    assert_eq!(out.trim(), "deployment.apps/web serverside-applied");
    let d = sim.get("deployments.apps", Some("default"), "web").unwrap();
    assert_eq!(d["metadata"]["managedFields"][0]["manager"], "kubectl");
    let out = k.run(&["scale", "deployment", "web", "--replicas=3"]).await;
    assert_eq!(out.trim(), "deployment.apps/web scaled");
    let d = sim.get("deployments.apps", Some("default"), "web").unwrap();
    assert_eq!(d["spec"]["replicas"], 3);
    let out = k
        .run(&[
            "patch",
            "lease",
            "leader",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/holderIdentity","value":"b"}]"#,
        ])
        .await;
    assert_eq!(out.trim(), "lease.coordination.k8s.io/leader patched");
    let l = sim
        .get("leases.coordination.k8s.io", Some("default"), "leader")
        .unwrap();
    assert_eq!(l["spec"]["holderIdentity"], "b");
    let rev = sim.revision();
    let out = k
        .run(&["delete", "deployment", "web", "--dry-run=server"])
        .await;
    assert!(out.contains("(server dry run)"), "{out}");
    assert_eq!(sim.revision(), rev);
    let out = k.run(&["delete", "leases", "--all"]).await;
    assert!(out.contains("deleted"), "{out}");
    assert!(sim
        .list("leases.coordination.k8s.io", Some("default"))
        .unwrap()
        .is_empty());
}
