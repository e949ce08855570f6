//! Real kubectl against the simulator's OpenAPI documents and strategic merge patch: `explain`
//! (kubectl 1.28 reads `/openapi/v2` as protobuf, later ones `/openapi/v3`), client-side
//! `apply` twice (kubectl computes a strategic merge patch from the schema's merge keys),
//! `patch --type strategic`, and `create -f` (which 1.28 validates against `/openapi/v2`).
//! Runs every kubectl found among the versions below; skipped, with a message, without any.

#[path = "common/kubectl.rs"]
mod kubectl_common;

use std::path::Path;

use kubectl_common::Kube;

use serde_json::{json, Value};
use sim_apiserver::SimServer;

const KUBECTLS: &[&str] = &[
    "/usr/bin/kubectl",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.28",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.30",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
];

fn deployment(containers: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
{containers}"
    )
}

/// The deployment's containers, without the fields the server defaults.
fn containers(sim: &SimServer) -> Value {
    let stored = sim.get("deployments.apps", Some("default"), "web").unwrap();
    let mut containers = stored["spec"]["template"]["spec"]["containers"].clone();
    for c in containers.as_array_mut().into_iter().flatten() {
        let c = c.as_object_mut().unwrap();
        for defaulted in [
            "imagePullPolicy",
            "resources",
            "terminationMessagePath",
            "terminationMessagePolicy",
        ] {
            c.remove(defaulted);
        }
    }
    containers
}

async fn exercise(bin: &Path) {
    let sim = SimServer::start().await.unwrap();
    let tag = format!("openapi-{}", bin.file_name().unwrap().to_string_lossy());
    let k = Kube::new(bin.to_path_buf(), &sim, &tag);
    let who = bin.display();

    let out = k.run(&["explain", "pod.spec.containers"]).await;
    assert!(out.contains("containers <[]Container>"), "{who}: {out}");
    assert!(out.contains("imagePullPolicy"), "{who}: {out}");
    let out = k.run(&["explain", "deployment.spec.strategy"]).await;
    assert!(out.contains("rollingUpdate"), "{who}: {out}");

    let v1 = k.file(
        "v1.yaml",
        &deployment(
            "      - {name: app, image: 'app:1'}\n      - {name: sidecar, image: 'side:1'}\n",
        ),
    );
    assert!(
        k.run(&["apply", "-f", &v1]).await.contains("created"),
        "{who}"
    );
    // Only the sidecar changes: the patch kubectl computes names it by its merge key.
    let v2 = k.file(
        "v2.yaml",
        &deployment(
            "      - {name: app, image: 'app:1'}\n      - {name: sidecar, image: 'side:2'}\n",
        ),
    );
    assert!(
        k.run(&["apply", "-f", &v2]).await.contains("configured"),
        "{who}"
    );
    assert_eq!(
        containers(&sim),
        json!([{"name": "app", "image": "app:1"}, {"name": "sidecar", "image": "side:2"}]),
        "{who}"
    );
    // Dropping the sidecar from the file: kubectl sends `$patch: delete` for it.
    let v3 = k.file(
        "v3.yaml",
        &deployment(
            "      - name: app\n        image: 'app:1'\n        env: [{name: A, value: '1'}]\n",
        ),
    );
    k.run(&["apply", "-f", &v3]).await;
    assert_eq!(
        containers(&sim),
        json!([{"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]}]),
        "{who}"
    );
    let p = r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app:2"}]}}}}"#;
    k.run(&["patch", "deployment", "web", "--type", "strategic", "-p", p])
        .await;
    assert_eq!(
        containers(&sim),
        json!([{"name": "app", "image": "app:2", "env": [{"name": "A", "value": "1"}]}]),
        "{who}"
    );

    let cm = k.file(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\ndata: {k: v}\n",
    );
    k.run(&["create", "-f", &cm]).await;
    assert_eq!(
        sim.get("configmaps", Some("default"), "c").unwrap()["data"],
        json!({"k": "v"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explains_applies_and_patches_with_the_servers_schemas() {
    let found: Vec<&Path> = KUBECTLS
        .iter()
        .map(Path::new)
        .filter(|p| p.exists())
        .collect();
    if found.is_empty() {
        eprintln!("skipped: no kubectl among {KUBECTLS:?}");
        return;
    }
    for bin in found {
        exercise(bin).await;
    }
}
