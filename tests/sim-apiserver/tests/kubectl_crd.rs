//! kubectl and CustomResourceDefinitions: `kubectl apply -f` a CRD, wait for it to be
//! established, create a custom object, see its printer columns in `kubectl get`, reach it by
//! its short name, scale it, and delete the CRD — with the kubectl CI uses and 1.28, 1.30 and
//! 1.33. Each kubectl missing on this machine is skipped with a message.

#[path = "common/kubectl.rs"]
mod kubectl_common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use kubectl_common::Kube;

use sim_apiserver::SimServer;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
              color: {type: string, default: red}
              replicas: {type: integer, default: 1}
          status:
            type: object
            properties:
              replicas: {type: integer}
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
"#;

const WIDGET: &str = r#"apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 3
"#;

/// This test's kubectl run: the shared harness with the manifests written in its directory.
fn kube(bin: &Path, sim: &SimServer) -> Kube {
    let tag = format!("crd-{}", bin.file_name().unwrap().to_string_lossy());
    let k = Kube::new(bin.to_path_buf(), sim, &tag);
    k.file("crd.yaml", CRD);
    k.file("widget.yaml", WIDGET);
    k.file(
        "typo.yaml",
        &WIDGET
            .replace("w1", "w2")
            .replace("size: 3", "size: 3\n  colour: red"),
    );
    k
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> String {
    tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("kubectl watch output timed out")
        .unwrap()
        .expect("kubectl watch ended early")
}

/// The columns of a line of kubectl's table output.
fn cells(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

async fn crd_lifecycle(bin: &str) {
    let bin = Path::new(bin);
    if !bin.exists() {
        eprintln!("skipped: {} is not installed", bin.display());
        return;
    }
    let sim = SimServer::start().await.unwrap();
    let k = kube(bin, &sim);
    // kubectl 1.28 validates client-side against `/openapi/v2`; newer ones ask the server.
    let apply = |file: &'static str| vec!["apply", "-f", file];
    let out = k.run(&apply("crd.yaml")).await;
    assert!(out.contains("widgets.example.com created"), "{out}");
    k.run(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=30s",
    ])
    .await;
    let out = k.run(&apply("widget.yaml")).await;
    assert!(out.contains("widget.example.com/w1 created"), "{out}");

    // kubectl's default field validation is Strict: a typo is refused by the server.
    let typo = k.try_run(&["apply", "-f", "typo.yaml"]).await;
    assert_ne!(typo.code, Some(0));
    let err = typo.stderr;
    assert!(
        err.contains(r#"strict decoding error: unknown field "spec.colour""#),
        "{err}"
    );

    // The server's Table, with the CRD's printer columns.
    let out = k.run(&["get", "widgets"]).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        cells(lines[0]),
        ["NAME", "SIZE", "COLOR", "REPLICAS", "AGE"],
        "{out}"
    );
    assert_eq!(cells(lines[1])[..4], ["w1", "3", "red", "1"], "{out}");
    // The short name, from discovery.
    let out = k.run(&["get", "wd", "w1", "--no-headers"]).await;
    assert_eq!(cells(&out)[..2], ["w1", "3"], "{out}");

    // The schema refuses what kube-apiserver would.
    let bad = k
        .try_run(&[
            "patch",
            "wd",
            "w1",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":"big"}}"#,
        ])
        .await;
    assert_ne!(bad.code, Some(0));
    let err = bad.stderr;
    assert!(
        err.contains(r#"spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#),
        "{err}"
    );

    // A watch: kubectl asks for Tables in the events and prints their rows as they come.
    let mut child = k
        .cmd(&["get", "widgets", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let header = next_line(&mut lines).await;
    assert_eq!(
        cells(&header),
        ["EVENT", "NAME", "SIZE", "COLOR", "REPLICAS", "AGE"]
    );
    assert_eq!(
        cells(&next_line(&mut lines).await)[..3],
        ["ADDED", "w1", "3"]
    );

    let out = k.run(&["scale", "widget", "w1", "--replicas=4"]).await;
    assert!(out.contains("scaled"), "{out}");
    let out = k
        .run(&["get", "widget", "w1", "-o", "jsonpath={.spec.replicas}"])
        .await;
    assert_eq!(out, "4");
    assert_eq!(
        cells(&next_line(&mut lines).await)[..5],
        ["MODIFIED", "w1", "3", "red", "4"]
    );

    let out = k.run(&["delete", "crd", "widgets.example.com"]).await;
    assert!(out.contains("deleted"), "{out}");
    assert!(sim
        .list("customresourcedefinitions.apiextensions.k8s.io", None)
        .unwrap()
        .is_empty());
    assert_eq!(cells(&next_line(&mut lines).await)[..2], ["DELETED", "w1"]);
    child.kill().await.unwrap();
    let gone = k.try_run(&["get", "widgets"]).await;
    assert_ne!(gone.code, Some(0), "{}", gone.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_ci_manages_a_crd_and_its_objects() {
    crd_lifecycle("/usr/bin/kubectl").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_28_manages_a_crd_and_its_objects() {
    crd_lifecycle("/usr/lib/google-cloud-sdk/bin/kubectl.1.28").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_30_manages_a_crd_and_its_objects() {
    crd_lifecycle("/usr/lib/google-cloud-sdk/bin/kubectl.1.30").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33_manages_a_crd_and_its_objects() {
    crd_lifecycle("/usr/lib/google-cloud-sdk/bin/kubectl.1.33").await;
}
