//! A controller: an informer feeds object keys to a rate-limited queue; workers reconcile them,
//! and a failed reconcile is retried with backoff. Runs against the simulated API server.
//! Run with `cargo run -p workqueue --example controller`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use controller::{Action, Controller};
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{DynamicObject, Object};
use workqueue::shared_informer::reflector::{ClusterConfig, Resource};
use workqueue::shared_informer::SharedInformerFactory;
use workqueue::{default_controller_rate_limiter, KeyEnqueuer, RateLimitingQueue};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sim = sim_apiserver::SimServer::start().await?;
    for i in 0..3 {
        sim.create(
            "pods",
            Some("default"),
            serde_json::json!({"metadata": {"name": format!("p{i}")}}),
        )?;
    }
    let factory = SharedInformerFactory::new(ClusterConfig::new(&sim.url())?);
    let pods = factory.informer::<DynamicObject>(Resource::namespaced("", "v1", "pods"))?;
    let queue: RateLimitingQueue<String> =
        RateLimitingQueue::new(default_controller_rate_limiter());
    pods.add_event_handler(KeyEnqueuer::new(queue.clone()))?;
    let cancel = CancellationToken::new();
    factory.start(&cancel);

    let cache = pods.indexer().clone();
    let failed_once = Arc::new(AtomicBool::new(false));
    let controller = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            Controller::new(queue)
                .workers(2)
                .run(cancel, move |key: String| {
                    let pod = cache.get_by_key(&key);
                    let fail = key == "default/p1" && !failed_once.swap(true, Ordering::SeqCst);
                    async move {
                        if fail {
                            println!("reconcile {key}: failing once, it will be retried");
                            return Err("transient failure");
                        }
                        match pod {
                            Some(p) => println!(
                                "reconcile {key}: present at resourceVersion {:?}",
                                p.resource_version()
                            ),
                            None => println!("reconcile {key}: gone"),
                        }
                        Ok(Action::Done)
                    }
                })
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    sim.delete("pods", Some("default"), "p0")?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    cancel.cancel();
    controller.await?;
    factory.shutdown().await;
    Ok(())
}
