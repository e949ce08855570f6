//! A JSON patch that cannot be applied (a failed `test`, a missing path) is answered as
//! kube-apiserver answers it: 422 with its generic text and empty details, and kubectl shows
//! that text.

mod common;

use common::Client;
use http::{Method, StatusCode};
use serde_json::json;
use sim_apiserver::SimServer;

#[tokio::test]
async fn an_unapplicable_json_patch_gets_kube_apiservers_generic_422() {
    let sim = SimServer::start().await.unwrap();
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "c", "labels": {"app": "a"}}}),
    )
    .unwrap();
    let c = Client::new(&sim);
    for patch in [
        json!([{"op": "test", "path": "/metadata/labels/app", "value": "b"}]),
        json!([{"op": "replace", "path": "/data/missing", "value": "x"}]),
    ] {
        let r = c
            .send(
                Method::PATCH,
                "/api/v1/namespaces/default/configmaps/c",
                Some(("application/json-patch+json", patch)),
            )
            .await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            r.body,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "the server rejected our request due to an error in our request",
                   "reason": "Invalid", "details": {}, "code": 422})
        );
    }
}

#[tokio::test]
async fn kubectl_shows_the_generic_text_for_a_failed_test() {
    let Some(bin) = ["/usr/bin/kubectl", "/usr/local/bin/kubectl"]
        .into_iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
    else {
        println!(
            "SKIPPED: kubectl not found (run `cargo xtask ci`, which builds one, or set SIM_KUBECTL)"
        );
        return;
    };
    let sim = SimServer::start().await.unwrap();
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "c"}}),
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!(
        "sim-kubectl-jsonpatch-{}-{}",
        std::process::id(),
        sim.addr().port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config"), sim.kubeconfig()).unwrap();
    let out = tokio::process::Command::new(bin)
        .env("KUBECONFIG", dir.join("config"))
        .env("HOME", &dir)
        .args(["patch", "configmap", "c", "--type=json", "-p"])
        .arg(r#"[{"op":"test","path":"/metadata/name","value":"d"}]"#)
        .output()
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "The request is invalid: the server rejected our request due to an error in our request"
    );
}
