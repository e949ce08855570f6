//! A cache kept in sync by a reflector through a DeltaFIFO: the pipeline an informer runs,
//! assembled by hand until the shared-informer crate exists.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use reflector::delta_fifo::{DeltaFifo, DeltaFifoOptions, DeltaType, FifoError, ProcessError};
use reflector::store_index::{Indexer, Indexers, Object, ObjectKey};
use reflector::{ClusterConfig, HttpListerWatcher, Reflector, ReflectorOptions, Resource};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Called with every key whose object changed, after the indexer was updated.
pub type OnChange = Arc<dyn Fn(&ObjectKey) + Send + Sync>;

/// One resource's cache: reflector → DeltaFifo → indexer.
pub struct Cache<K: Object> {
    /// The cache.
    pub indexer: Indexer<K>,
    /// Deltas applied so far.
    pub events: Arc<AtomicU64>,
    fifo: DeltaFifo<K>,
    tasks: Vec<JoinHandle<()>>,
}

impl<K> Cache<K>
where
    K: Object + reflector::Decode,
{
    /// Starts listing and watching `resource` in all namespaces.
    pub fn start(
        config: &ClusterConfig,
        resource: Resource,
        name: &str,
        on_change: Option<OnChange>,
        cancel: &CancellationToken,
    ) -> Result<Self, reflector::ConfigError> {
        let indexer: Indexer<K> = Indexer::new(Indexers::new().with_namespace_index());
        let fifo = DeltaFifo::new(
            DeltaFifoOptions::new()
                .known_objects(indexer.clone())
                .emit_replaced(true)
                .name(name),
        );
        let lw = HttpListerWatcher::<K>::new(config, resource)?;
        let options = ReflectorOptions {
            name: name.to_string(),
            ..ReflectorOptions::default()
        };
        let reflector = Reflector::new(lw, fifo.clone(), options);
        let events = Arc::new(AtomicU64::new(0));

        let run = {
            let cancel = cancel.clone();
            let fifo = fifo.clone();
            tokio::spawn(async move {
                reflector.run(cancel).await;
                fifo.close();
            })
        };
        let pop = {
            let fifo = fifo.clone();
            let indexer = indexer.clone();
            let events = Arc::clone(&events);
            tokio::spawn(async move {
                loop {
                    let result = fifo
                        .pop(|deltas, _initial| {
                            for delta in deltas {
                                let key = delta.object.key().map_err(ProcessError::failed)?;
                                match (delta.kind, delta.object()) {
                                    (DeltaType::Deleted, _) => {
                                        indexer
                                            .delete_by_key(key.as_str())
                                            .map_err(ProcessError::failed)?;
                                    }
                                    (_, Some(obj)) => indexer
                                        .update(Arc::clone(obj))
                                        .map_err(ProcessError::failed)?,
                                    (_, None) => {}
                                }
                                events.fetch_add(1, Ordering::Relaxed);
                                if let Some(f) = &on_change {
                                    f(&key);
                                }
                            }
                            Ok(())
                        })
                        .await;
                    match result {
                        Ok(_) => {}
                        Err(FifoError::Closed) => return,
                        Err(e) => tracing::warn!(error = %e, "applying deltas failed"),
                    }
                }
            })
        };
        Ok(Cache {
            indexer,
            events,
            fifo,
            tasks: vec![run, pop],
        })
    }

    /// Whether the initial list has been applied.
    pub fn has_synced(&self) -> bool {
        self.fifo.has_synced()
    }

    /// Waits for the reflector and the pop loop to stop (after cancellation).
    pub async fn stopped(self) {
        for task in self.tasks {
            let _ = task.await;
        }
    }
}
