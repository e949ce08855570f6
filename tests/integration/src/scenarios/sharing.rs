//! Scenario 6: five consumers ask one factory for the pods and configmaps informers (the fifth
//! only mid-churn, as a late handler); the server must see exactly one watch-list (the default
//! sync, kept as the watch) per resource, and every consumer a consistent history ending in the
//! server's state.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{CompactObject, DynamicObject};
use workqueue::shared_informer::{SharedIndexInformer, SharedInformerFactory};

use crate::check::{converge, Failure, Outcome, Recorder, Sequences};
use crate::harness::{churn, config_for, configmaps, finish_all, pods, seed};
use crate::{ensure, Opts};

type Pods = SharedIndexInformer<CompactObject>;
type ConfigMaps = SharedIndexInformer<DynamicObject>;

struct Consumer {
    pods: Pods,
    cms: ConfigMaps,
    pod_seq: Arc<Mutex<Sequences>>,
    cm_seq: Arc<Mutex<Sequences>>,
}

/// What one consumer does: ask the factory for its informers and register its handlers.
fn consumer(factory: &SharedInformerFactory) -> Result<Consumer, Failure> {
    let pods = factory.informer::<CompactObject>(pods())?;
    let cms = factory.informer::<DynamicObject>(configmaps())?;
    let (pr, pod_seq) = Recorder::new();
    let (cr, cm_seq) = Recorder::new();
    pods.add_event_handler(pr)?;
    cms.add_event_handler(cr)?;
    Ok(Consumer {
        pods,
        cms,
        pod_seq,
        cm_seq,
    })
}

/// Runs the scenario.
pub async fn five_consumers(_: Opts) -> Outcome {
    let sim = SimServer::start().await?;
    seed(&sim, "pods", "sh", 3, 1_000, 200)?;
    seed(&sim, "configmaps", "sh", 3, 300, 200)?;
    let factory = crate::harness::factory(config_for(&sim)?);
    let mut consumers = (0..4)
        .map(|_| consumer(&factory))
        .collect::<Result<Vec<_>, _>>()?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    let report = factory.wait_for_cache_sync(Duration::from_secs(30)).await;
    ensure!(
        report.len() == 2 && report.all_synced(),
        "want two synced informers for four consumers: {report:?}"
    );
    let churns = vec![
        churn(&sim, "pods", "sh-0", 500, 300.0, 10.0, 200),
        churn(&sim, "configmaps", "sh-1", 200, 150.0, 10.0, 200),
    ];
    // Wait for some churn to have happened before the late consumer arrives.
    crate::check::eventually("churn to begin", Duration::from_secs(10), || {
        let ops: u64 = churns.iter().map(|c| c.ops()).sum();
        if ops >= 1_000 {
            Ok(())
        } else {
            Err(format!("{ops} churn operations"))
        }
    })
    .await?;
    consumers.push(consumer(&factory)?);
    factory.start(&cancel); // a no-op for informers already running
    let ops = finish_all(churns).await;

    let first = &consumers[0];
    for (i, c) in consumers.iter().enumerate() {
        ensure!(
            std::ptr::eq(c.pods.indexer(), first.pods.indexer())
                && std::ptr::eq(c.cms.indexer(), first.cms.indexer()),
            "consumer {i} got its own informer"
        );
    }
    let names: Vec<String> = (0..consumers.len())
        .map(|i| format!("consumer-{i}"))
        .collect();
    let pod_handlers: Vec<_> = names
        .iter()
        .zip(&consumers)
        .map(|(n, c)| (n.as_str(), &c.pod_seq))
        .collect();
    let cm_handlers: Vec<_> = names
        .iter()
        .zip(&consumers)
        .map(|(n, c)| (n.as_str(), &c.cm_seq))
        .collect();
    let pods_detail = converge(
        &sim,
        "pods",
        first.pods.indexer(),
        &pod_handlers,
        Duration::from_secs(30),
    )
    .await?;
    let cms_detail = converge(
        &sim,
        "configmaps",
        first.cms.indexer(),
        &cm_handlers,
        Duration::from_secs(30),
    )
    .await?;
    let late_initial = consumers[4].pod_seq.lock().initial_adds;
    ensure!(
        late_initial > 0,
        "the late consumer got no replay of the cache"
    );
    // Each informer syncs through one watch-list (the default) and keeps it as its watch. (A
    // watcher the server dropped as too slow would be resumed by a new watch, not a list.)
    let c = sim.counters();
    let dropped = sim.slow_watcher_terminations();
    ensure!(
        c.lists == 0 && c.watches == 2 + dropped,
        "five consumers of two resources: want 2 watch-lists and no list, server saw {} lists and {} watches \
         ({dropped} watchers dropped as slow)",
        c.lists,
        c.watches
    );
    cancel.cancel();
    factory.shutdown().await;
    Ok(format!(
        "2 watch-lists for 5 consumers; {ops} ops; late consumer replayed {late_initial}; \
         {pods_detail}; {cms_detail}"
    ))
}
