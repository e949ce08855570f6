//! The `sim-apiserver` binary prints its URL (and for TLS the CA path and token) and serves.

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
async fn the_binary_prints_url_ca_and_token_and_serves_seeded_pods() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sim-apiserver"))
        .args(["--tls", "--token", "t0k", "--pods", "3"])
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
    // Ctrl-C stops it cleanly, removing the CA file it wrote.
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
}
