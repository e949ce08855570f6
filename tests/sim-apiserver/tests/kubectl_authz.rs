//! kubectl against the simulator's users and rules: `auth can-i` says yes and no per user,
//! `auth whoami` names the user, a denied request shows kube-apiserver's 403 text, and the
//! short names and the `all` category resolve. Skipped (with a message) without kubectl.

#[path = "common/kubectl.rs"]
mod kubectl_common;

use std::path::Path;

use kubectl_common::find_kubectl as kubectl;

use serde_json::json;
use sim_apiserver::{Rule, SimServer, Subject, User};

/// kubectl as one user: the shared harness, with that user's kubeconfig.
struct Kube(kubectl_common::Kube);

impl Kube {
    fn new(bin: &Path, sim: &SimServer, tag: &str, kubeconfig: String) -> Self {
        let tag = format!("authz-{tag}");
        Kube(kubectl_common::Kube::with_kubeconfig(
            bin.to_path_buf(),
            sim,
            &tag,
            &kubeconfig,
        ))
    }

    /// Runs kubectl and returns (exit success, stdout, stderr).
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let o = self.0.try_run(args).await;
        (
            o.code == Some(0),
            o.stdout.trim().to_string(),
            o.stderr.trim().to_string(),
        )
    }
}

async fn server() -> SimServer {
    SimServer::builder()
        .tls(true)
        .client_cert_auth(true)
        .token("admin-token")
        .user(User::new("alice").token("alice-token"))
        .user(User::new("bob").token("bob-token"))
        .allow(
            Subject::user("alice"),
            Rule::new(&["get", "list", "watch"], &[""], &["pods"]).in_namespaces(&["default"]),
        )
        .allow(
            Subject::user("bob"),
            Rule::new(&["*"], &["apps"], &["deployments"]),
        )
        .start()
        .await
        .unwrap()
}

fn skip() {
    println!(
        "SKIPPED: kubectl not found (run `cargo xtask ci`, which builds one, or set SIM_KUBECTL)"
    );
}

#[tokio::test]
async fn kubectl_auth_can_i_answers_per_user_and_whoami_names_them() {
    let Some(bin) = kubectl() else {
        return skip();
    };
    let sim = server().await;
    let alice = Kube::new(&bin, &sim, "alice", sim.kubeconfig_for_token("alice-token"));
    let bob = Kube::new(&bin, &sim, "bob", sim.kubeconfig_for_token("bob-token"));
    assert_eq!(
        alice.run(&["auth", "can-i", "list", "pods"]).await,
        (true, "yes".into(), String::new())
    );
    let (ok, out, _) = alice.run(&["auth", "can-i", "delete", "pods"]).await;
    assert_eq!((ok, out.as_str()), (false, "no"));
    let (ok, out, _) = alice
        .run(&["auth", "can-i", "list", "pods", "-n", "kube-system"])
        .await;
    assert_eq!((ok, out.as_str()), (false, "no"));
    let (ok, out, _) = bob.run(&["auth", "can-i", "list", "pods"]).await;
    assert_eq!((ok, out.as_str()), (false, "no"));
    let (ok, out, _) = bob
        .run(&["auth", "can-i", "create", "deployments.apps"])
        .await;
    assert_eq!((ok, out.as_str()), (true, "yes"));
    let (ok, out, err) = alice.run(&["auth", "can-i", "--list"]).await;
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("pods ") && l.contains("[get list watch]")),
        "{out}"
    );
    let (ok, out, err) = alice.run(&["auth", "whoami"]).await;
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("Username") && l.ends_with("alice")),
        "{out}"
    );
    assert!(out.contains("system:authenticated"), "{out}");
    // A client certificate's user and groups, through kubectl.
    let carol = Kube::new(
        &bin,
        &sim,
        "carol",
        sim.kubeconfig_with_cert("carol", &["dev"]).unwrap(),
    );
    let (ok, out, err) = carol.run(&["auth", "whoami", "-o", "json"]).await;
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"]["userInfo"]["username"], "carol");
    assert_eq!(
        v["status"]["userInfo"]["groups"],
        json!(["dev", "system:authenticated"])
    );
}

#[tokio::test]
async fn kubectl_shows_kube_apiservers_403_text() {
    let Some(bin) = kubectl() else {
        return skip();
    };
    let sim = server().await;
    let alice = Kube::new(
        &bin,
        &sim,
        "alice403",
        sim.kubeconfig_for_token("alice-token"),
    );
    let (ok, _, err) = alice.run(&["get", "pods", "-n", "kube-system"]).await;
    assert!(!ok);
    assert_eq!(
        err,
        "Error from server (Forbidden): pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"kube-system\""
    );
    let (ok, _, err) = alice.run(&["delete", "configmap", "x"]).await;
    assert!(!ok);
    assert!(
        err.contains("configmaps \"x\" is forbidden: User \"alice\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"default\""),
        "{err}"
    );
    let (ok, out, err) = alice.run(&["get", "pods"]).await;
    assert!(ok, "{err}");
    assert!(out.is_empty() || out.starts_with("NAME"), "{out}");
}

#[tokio::test]
async fn kubectl_resolves_short_names_and_the_all_category() {
    let Some(bin) = kubectl() else {
        return skip();
    };
    let sim = server().await;
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "p1"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .unwrap();
    sim.create(
        "deployments.apps",
        Some("default"),
        json!({"metadata": {"name": "d1"}, "spec": {"replicas": 1}}),
    )
    .unwrap();
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "c1"}}),
    )
    .unwrap();
    let admin = Kube::new(&bin, &sim, "admin", sim.kubeconfig());
    let names = |out: &str| -> Vec<String> { out.lines().map(str::to_string).collect() };
    for (args, want) in [
        (vec!["get", "po", "-o", "name"], vec!["pod/p1"]),
        (vec!["get", "cm", "c1", "-o", "name"], vec!["configmap/c1"]),
        (
            vec!["get", "deploy", "-o", "name"],
            vec!["deployment.apps/d1"],
        ),
        (
            vec!["get", "ns", "-o", "name"],
            vec![
                "namespace/default",
                "namespace/kube-public",
                "namespace/kube-system",
            ],
        ),
        (
            vec!["get", "all", "-o", "name"],
            vec!["pod/p1", "deployment.apps/d1"],
        ),
    ] {
        let (ok, out, err) = admin.run(&args).await;
        assert!(ok, "{args:?}: {err}");
        assert_eq!(names(&out), want, "{args:?}");
    }
    // An Event written through events.k8s.io is listed by `kubectl get ev` (core/v1).
    sim.create(
        "events.events.k8s.io",
        Some("default"),
        json!({"metadata": {"name": "e1"}, "note": "hello", "reason": "Test",
               "regarding": {"kind": "Pod", "name": "p1", "namespace": "default"}}),
    )
    .unwrap();
    let (ok, out, err) = admin
        .run(&["get", "ev", "-o", "jsonpath={.items[*].message}"])
        .await;
    assert!(ok, "{err}");
    assert_eq!(out, "hello");
    // A delete answered with a success Status reads as kubectl expects.
    let (ok, out, err) = admin.run(&["delete", "cm", "c1"]).await;
    assert!(ok, "{err}");
    assert_eq!(out, "configmap \"c1\" deleted");
}
