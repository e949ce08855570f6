//! Runs the simulated kube-apiserver by hand.
//!
//! Usage: `sim-apiserver [--tls] [--token TOKEN] [--http1] [--pods N] [--churn RATE]`
//! Prints the URL (and for TLS the CA path and token), then serves until Ctrl-C.

use sim_apiserver::{ChurnConfig, SimServer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut b = SimServer::builder();
    let mut pods = 0usize;
    let mut churn = 0f64;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tls" => b = b.tls(true),
            "--http1" => b = b.http2(false),
            "--token" => b = b.token(args.next().ok_or("--token needs a value")?),
            "--pods" => pods = args.next().ok_or("--pods needs a value")?.parse()?,
            "--churn" => churn = args.next().ok_or("--churn needs a value")?.parse()?,
            "-h" | "--help" => {
                println!("sim-apiserver [--tls] [--token TOKEN] [--http1] [--pods N] [--churn OPS_PER_SEC]");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    // Install the SIGINT handler before announcing the URL, so an early Ctrl-C still stops
    // the server cleanly (and removes the CA file).
    #[cfg(unix)]
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let sim = b.start().await?;
    for i in 0..pods {
        sim.create(
            "pods",
            Some("default"),
            serde_json::json!({"metadata": {"name": format!("pod-{i}"), "labels": {"app": "demo"}},
                               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        )?;
    }
    println!("url: {}", sim.url());
    if let Some(p) = sim.ca_path() {
        println!("ca: {}", p.display());
    }
    if let Some(t) = sim.token() {
        println!("token: {t}");
    }
    let _churn = (churn > 0.0).then(|| {
        sim.churn(ChurnConfig {
            rate_per_sec: churn,
            max_ops: None,
            ..ChurnConfig::default()
        })
    });
    #[cfg(unix)]
    interrupt.recv().await;
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await?;
    Ok(())
}
