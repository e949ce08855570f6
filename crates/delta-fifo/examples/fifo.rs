//! A DeltaFIFO between a source of changes and a cache: a relist turns vanished keys into
//! tombstones. Run with `cargo run -p delta-fifo --example fifo`.

use std::sync::Arc;

use delta_fifo::store_index::{DynamicObject, Indexer};
use delta_fifo::{DeltaFifo, DeltaFifoOptions, DeltaType, ProcessError};

fn pod(name: &str, rv: &str) -> Arc<DynamicObject> {
    Arc::new(
        DynamicObject::new("v1", "Pod")
            .within("ns")
            .named(name)
            .with_resource_version(rv),
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cache: Indexer<DynamicObject> = Indexer::default();
    let fifo = DeltaFifo::new(
        DeltaFifoOptions::new()
            .known_objects(cache.clone())
            .emit_replaced(true),
    );
    fifo.replace(vec![pod("a", "1"), pod("b", "2")], "2")?;
    drain(&fifo, &cache).await?;
    // b disappeared while we were not watching: the next relist reports it as a tombstone.
    fifo.replace(vec![pod("a", "3")], "3")?;
    drain(&fifo, &cache).await?;
    println!("cache now holds {:?}", cache.list_keys());
    Ok(())
}

async fn drain(
    fifo: &DeltaFifo<DynamicObject>,
    cache: &Indexer<DynamicObject>,
) -> Result<(), Box<dyn std::error::Error>> {
    while !fifo.is_empty() {
        fifo.pop(|deltas, initial| {
            for delta in deltas {
                let key = delta.object.key().map_err(ProcessError::failed)?;
                println!(
                    "{:?} {key} (tombstone: {}, initial list: {initial})",
                    delta.kind,
                    delta.object.is_tombstone()
                );
                match (delta.kind, delta.object()) {
                    (DeltaType::Deleted, _) => {
                        cache
                            .delete_by_key(key.as_str())
                            .map_err(ProcessError::failed)?;
                    }
                    (_, Some(obj)) => cache
                        .update(Arc::clone(obj))
                        .map_err(ProcessError::failed)?,
                    (_, None) => {}
                }
            }
            Ok(())
        })
        .await?;
    }
    Ok(())
}
