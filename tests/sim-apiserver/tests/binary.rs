//! The `sim-apiserver` binary prints its URL (and for TLS the CA path and token) and serves.

mod common;

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

async fn next(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> String {
    tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("binary output timed out")
        .unwrap()
        .expect("binary exited early")
}

#[tokio::test]
async fn the_binary_prints_url_ca_token_and_kubeconfig_and_serves_seeded_pods() {
    let kubeconfig =
        std::env::temp_dir().join(format!("sim-binary-kubeconfig-{}", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_sim-apiserver"))
        .args(["--tls", "--token", "t0k", "--pods", "3", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = next(&mut lines).await;
    let ca = next(&mut lines).await;
    let token = next(&mut lines).await;
    assert!(url.starts_with("url: https://127.0.0.1:"), "{url}");
    let ca_path = ca.strip_prefix("ca: ").expect("ca line");
    let pem = std::fs::read_to_string(ca_path).unwrap();
    assert!(pem.contains("BEGIN CERTIFICATE"));
    assert_eq!(token, "token: t0k");
    let written = next(&mut lines).await;
    assert_eq!(written, format!("kubeconfig: {}", kubeconfig.display()));
    let config = std::fs::read_to_string(&kubeconfig).unwrap();
    let server = url.strip_prefix("url: ").unwrap();
    assert!(
        config.contains(&format!("server: \"{server}\"")),
        "{config}"
    );
    assert!(
        config.contains(&format!("certificate-authority: \"{ca_path}\"")),
        "{config}"
    );
    assert!(config.contains("token: \"t0k\""), "{config}");
    // Ctrl-C stops it cleanly, removing the CA file and the kubeconfig it wrote.
    let pid = child.id().unwrap().to_string();
    let st = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .await
        .unwrap();
    assert!(st.success());
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("binary did not stop on SIGINT")
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    assert!(!std::path::Path::new(ca_path).exists());
    assert!(!kubeconfig.exists());
}

#[tokio::test]
async fn the_binary_applies_fault_specs_and_announces_them_after_the_url() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sim-apiserver"))
        .args([
            "--pods",
            "1",
            "--fault",
            "list-status-200",
            "--fault",
            "fail-watch=503:1",
        ])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = next(&mut lines).await;
    let base = url.strip_prefix("url: ").expect("url line");
    assert!(base.starts_with("http://127.0.0.1:"), "{url}");
    assert_eq!(
        next(&mut lines).await,
        "fault: list-status-200 (every request)"
    );
    assert_eq!(
        next(&mut lines).await,
        "fault: fail-watch=503 (next request)"
    );
    let c = common::Client::at(base);
    let pods = "/api/v1/namespaces/default/pods";
    for _ in 0..2 {
        let r = c.get(pods).await;
        assert_eq!(r.status, http::StatusCode::OK);
        assert_eq!(r.body["kind"], "Status");
        assert_eq!(r.body["status"], "Failure");
        assert_eq!(r.body["code"], 500);
    }
    let r = c.get(&format!("{pods}?watch=true")).await;
    assert_eq!(r.status, http::StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(c.get(&format!("{pods}/pod-0")).await.body["kind"], "Pod");
}

#[tokio::test]
async fn the_binary_rejects_a_bad_fault_spec_with_the_valid_ones() {
    let out = Command::new(env!("CARGO_BIN_EXE_sim-apiserver"))
        .args(["--fault", "list-nonsense:3"])
        .stdin(Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out)
        .await
        .expect("binary did not exit")
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no url is announced");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(r#"invalid fault spec "list-nonsense:3": unknown fault "list-nonsense""#),
        "{err}"
    );
    assert!(err.contains("list-status-200[:N]"), "{err}");
}

#[tokio::test]
async fn the_binary_gzips_responses_with_the_gzip_flags() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sim-apiserver"))
        .args(["--pods", "2", "--gzip", "--gzip-min-bytes", "1"])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = next(&mut lines).await;
    let base = url.strip_prefix("url: ").expect("url line");
    let c = common::Client::at(base);
    let pods = "/api/v1/namespaces/default/pods";
    let r = c
        .raw_with(
            http::Method::GET,
            pods,
            None,
            &[("accept-encoding", "gzip")],
        )
        .await;
    assert_eq!(r.headers()[http::header::CONTENT_ENCODING], "gzip");
    let r = c.raw(http::Method::GET, pods, None).await;
    assert!(r.headers().get(http::header::CONTENT_ENCODING).is_none());

    let out = Command::new(env!("CARGO_BIN_EXE_sim-apiserver"))
        .args(["--gzip-min-bytes", "lots"])
        .stdin(Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out)
        .await
        .expect("binary did not exit")
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(r#"--gzip-min-bytes: "lots" is not a number of bytes"#),
        "{err}"
    );
}

#[tokio::test]
async fn the_binary_speaks_protobuf_unless_told_not_to() {
    let pods = "/api/v1/namespaces/default/pods";
    for (args, want) in [
        (&["--pods", "1"][..], "application/vnd.kubernetes.protobuf"),
        (&["--pods", "1", "--no-protobuf"][..], "application/json"),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sim-apiserver"))
            .args(args)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = next(&mut lines).await;
        let c = common::Client::at(url.strip_prefix("url: ").expect("url line"));
        let r = c
            .raw_with(
                http::Method::GET,
                pods,
                None,
                &[(
                    "accept",
                    "application/vnd.kubernetes.protobuf, application/json",
                )],
            )
            .await;
        assert_eq!(r.headers()[http::header::CONTENT_TYPE], want, "{args:?}");
    }
}
