//! A shared informer with a handler, against the simulated API server, which the example also
//! changes to show updates and deletes. Run with `cargo run -p shared-informer --example informer`.

use std::sync::Arc;
use std::time::Duration;

use shared_informer::reflector::store_index::{DynamicObject, Object};
use shared_informer::reflector::{ClusterConfig, Resource};
use shared_informer::{EventHandlerFns, SharedInformerFactory};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sim = sim_apiserver::SimServer::start().await?;
    let config = ClusterConfig::new(&sim.url())?;
    sim.create(
        "configmaps",
        Some("default"),
        serde_json::json!({"metadata": {"name": "settings"}, "data": {"a": "1"}}),
    )?;
    let factory = SharedInformerFactory::new(config);
    let configmaps =
        factory.informer::<DynamicObject>(Resource::namespaced("", "v1", "configmaps"))?;
    let registration = configmaps.add_event_handler(
        EventHandlerFns::new()
            .on_add(|cm: &Arc<DynamicObject>, initial| {
                println!(
                    "add {}/{} (initial list: {initial})",
                    cm.namespace().unwrap_or(""),
                    cm.name()
                )
            })
            .on_update(|old, new| {
                println!(
                    "update {} {:?} -> {:?}",
                    new.name(),
                    old.resource_version(),
                    new.resource_version()
                )
            })
            .on_delete(|cm| println!("delete {:?}", cm.key())),
    )?;
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    println!(
        "synced: {:?}",
        factory.wait_for_cache_sync(Duration::from_secs(10)).await
    );
    sim.update(
        "configmaps",
        Some("default"),
        serde_json::json!({"metadata": {"name": "settings"}, "data": {"a": "2"}}),
    )?;
    sim.delete("configmaps", Some("default"), "settings")?;
    while registration.processed() < 3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cancel.cancel();
    factory.shutdown().await;
    Ok(())
}
