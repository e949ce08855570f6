//! A reflector listing and watching pods into a DeltaFIFO, against the simulated API server. Run
//! with `cargo run -p reflector --example reflector`; add `-- --real-cluster` to use the cluster of
//! `KUBECONFIG` (or `~/.kube/config`) instead.

use std::time::Duration;

use reflector::delta_fifo::{DeltaFifo, DeltaFifoOptions};
use reflector::store_index::CompactObject;
use reflector::{ClusterConfig, HttpListerWatcher, Reflector, ReflectorOptions, Resource};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sim;
    let real_cluster = std::env::args().any(|a| a == "--real-cluster");
    let config = match real_cluster {
        true => ClusterConfig::from_kubeconfig(None)?,
        false => {
            sim = sim_apiserver::SimServer::start().await?;
            for i in 0..5 {
                sim.create(
                    "pods",
                    Some("default"),
                    serde_json::json!({"metadata": {"name": format!("p{i}")}}),
                )?;
            }
            ClusterConfig::new(&sim.url())?
        }
    };
    let fifo: DeltaFifo<CompactObject> = DeltaFifo::new(DeltaFifoOptions::new());
    let lw =
        HttpListerWatcher::<CompactObject>::new(&config, Resource::namespaced("", "v1", "pods"))?;
    let reflector = Reflector::new(lw, fifo.clone(), ReflectorOptions::default());
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { reflector.run(cancel).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!("queued keys after one second: {:?}", fifo.list_keys());
    cancel.cancel();
    run.await?;
    Ok(())
}
