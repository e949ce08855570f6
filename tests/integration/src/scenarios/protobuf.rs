//! Protobuf end to end: a typed `Pb<Pod>` informer, a `PbView<Pod>` informer (typed
//! views of kept messages), a `CompactObject` informer and a controller fed by the typed one, all on Kubernetes' protobuf encoding, under churn with watches
//! cut every few hundred events, frames split over 7-byte chunks, and a 410 `ERROR` frame that
//! forces a relist. Then the same informers against a server that answers JSON to the
//! protobuf `Accept` and refuses protobuf bodies: the typed one reads JSON through the
//! transcoder, and a typed write is sent again as JSON. Checked: caches equal the server, every
//! handler's per-key sequence in order with nothing lost or duplicated, every cached
//! `CompactObject` in the encoding the server spoke, every key's last reconcile saw the server's
//! version of a fully decoded typed pod, every cached view's spec read through it agreeing with
//! its metadata, and the typed caches equal to the server on the JSON path too, the fallback write
//! included.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use controller::{Action, Controller};
use parking_lot::Mutex;
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::protobuf::PbView;
use workqueue::shared_informer::reflector::store_index::k8s_pb::api::core::v1::{
    Container, Pod, PodSpec,
};
use workqueue::shared_informer::reflector::store_index::k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use workqueue::shared_informer::reflector::store_index::{CompactObject, Object, Pb, RawEncoding};
use workqueue::shared_informer::reflector::{Api, Client, CreateOptions, Encoding, Resource};
use workqueue::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, KeyEnqueuer, MaxOf, RateLimitingQueue,
};

use crate::check::{converge, eventually, server_state, Failure, Outcome, Recorder};
use crate::harness::{churn, config_for, fast_backoff, finish_all, pods, seed, synced};
use crate::{ensure, Opts};

/// Runs both parts.
pub async fn protobuf_end_to_end(_: Opts) -> Outcome {
    let on_protobuf = protobuf_server().await?;
    let on_json = json_server().await?;
    Ok(format!(
        "[protobuf: {on_protobuf}] [json answers: {on_json}]"
    ))
}

async fn protobuf_server() -> Outcome {
    let sim = SimServer::start().await?;
    seed(&sim, "pods", "pb", 2, 300, 100)?;
    // CompactObject asks for protobuf only when told to (its `decode` reads JSON).
    let factory = crate::harness::factory(config_for(&sim)?)
        .reflector_options(fast_backoff(false))
        .encoding(Encoding::Protobuf);
    let typed = factory.informer::<Pb<Pod>>(Resource::of_pb::<Pod>())?;
    let viewed = factory.informer::<PbView<Pod>>(Resource::of_pb::<Pod>())?;
    let compact = factory.informer::<CompactObject>(pods())?;
    let (typed_rec, typed_seq) = Recorder::new();
    let (viewed_rec, viewed_seq) = Recorder::new();
    let (compact_rec, compact_seq) = Recorder::new();
    typed.add_event_handler(typed_rec)?;
    viewed.add_event_handler(viewed_rec)?;
    compact.add_event_handler(compact_rec)?;
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new(MaxOf::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1),
        )),
        Box::new(BucketRateLimiter::new(1000.0, 500)),
    ]));
    typed.add_event_handler(KeyEnqueuer::new(queue.clone()))?;
    // Per key, the version the last reconcile saw (None: absent), and typed pods seen undecoded.
    let last: Arc<Mutex<HashMap<String, Option<u64>>>> = Arc::default();
    let undecoded: Arc<Mutex<Vec<String>>> = Arc::default();
    // Every watch ends after 300 events; watch streams are split into 7-byte chunks.
    sim.faults().end_watches_after(300).rechunk(7);
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    let runner = {
        let indexer = typed.indexer().clone();
        let (last, undecoded) = (Arc::clone(&last), Arc::clone(&undecoded));
        let (cancel, queue) = (cancel.clone(), queue.clone());
        tokio::spawn(async move {
            Controller::new(queue)
                .workers(2)
                .run(cancel, move |key: String| {
                    let seen = indexer.get_by_key(&key).map(|p| {
                        // The typed pod is whole, its spec agreeing with its metadata: a churned
                        // pod's image names its generation, a seeded one has its node.
                        let spec = p.spec.as_ref();
                        let whole = match p.annotation("sim/gen") {
                            Some(generation) => {
                                spec.and_then(|s| s.containers.first())
                                    .and_then(|c| c.image.as_deref())
                                    == Some(format!("busybox:{generation}").as_str())
                            }
                            None => spec.and_then(|s| s.node_name.as_ref()).is_some(),
                        };
                        if !whole {
                            undecoded.lock().push(key.clone());
                        }
                        p.resource_version()
                            .and_then(|r| r.parse::<u64>().ok())
                            .unwrap_or(0)
                    });
                    last.lock().insert(key, seen);
                    async { Ok::<_, String>(Action::Done) }
                })
                .await
        })
    };
    synced(&typed, Duration::from_secs(30)).await?;
    synced(&viewed, Duration::from_secs(30)).await?;
    synced(&compact, Duration::from_secs(30)).await?;
    let churns = vec![
        churn(&sim, "pods", "pb-0", 200, 150.0, 8.0, 100),
        churn(&sim, "pods", "pb-1", 200, 150.0, 8.0, 100),
    ];
    eventually("half the churn", Duration::from_secs(20), || {
        let ops: u64 = churns.iter().map(|c| c.ops()).sum();
        if ops >= 1_200 {
            Ok(())
        } else {
            Err(format!("{ops} ops"))
        }
    })
    .await?;
    // A 410 in a protobuf ERROR frame, the store compacted: a relist.
    sim.faults().error_event(410);
    sim.faults().compact();
    let ops = finish_all(churns).await;
    let typed_detail = converge(
        &sim,
        "pods",
        typed.indexer(),
        &[("typed", &typed_seq)],
        Duration::from_secs(30),
    )
    .await?;
    let compact_detail = converge(
        &sim,
        "pods",
        compact.indexer(),
        &[("compact", &compact_seq)],
        Duration::from_secs(30),
    )
    .await?;
    let viewed_detail = converge(
        &sim,
        "pods",
        viewed.indexer(),
        &[("viewed", &viewed_seq)],
        Duration::from_secs(30),
    )
    .await?;
    // Every cached view reads a spec that agrees with its metadata, as the reconciles check on
    // the decoded pods.
    let disagreeing: Vec<String> = viewed
        .indexer()
        .list()
        .iter()
        .filter(|p| {
            let spec = p.view().spec();
            let whole = match p.annotation("sim/gen") {
                Some(generation) => {
                    spec.and_then(|s| s.containers().next())
                        .and_then(|c| c.image())
                        == Some(format!("busybox:{generation}").as_str())
                }
                None => spec.and_then(|s| s.node_name()).is_some(),
            };
            !whole
        })
        .map(|p| p.name().to_string())
        .take(5)
        .collect();
    ensure!(
        disagreeing.is_empty(),
        "cached views whose spec disagrees with their metadata: {disagreeing:?}"
    );
    let not_protobuf = compact
        .indexer()
        .list()
        .iter()
        .filter(|o| o.encoding() != RawEncoding::Protobuf)
        .count();
    ensure!(
        not_protobuf == 0,
        "{not_protobuf} cached CompactObjects are not protobuf"
    );
    let reconciled = eventually(
        "every key's last reconcile to see the server's version",
        Duration::from_secs(60),
        || {
            let server = server_state(&sim, "pods")?;
            let last = last.lock();
            let wrong: BTreeMap<&String, (Option<&u64>, Option<u64>)> = last
                .iter()
                .filter(|(k, seen)| server.get(*k).copied() != **seen)
                .map(|(k, seen)| (k, (server.get(k), *seen)))
                .take(3)
                .collect();
            let never = server.keys().filter(|k| !last.contains_key(*k)).count();
            if wrong.is_empty() && never == 0 && queue.is_empty() && queue.waiting_len() == 0 {
                Ok(format!("{} keys reconciled", last.len()))
            } else {
                Err(format!(
                    "stale (server, reconciled): {wrong:?}; {never} never reconciled"
                ))
            }
        },
    )
    .await?;
    let undecoded = undecoded.lock().clone();
    ensure!(
        undecoded.is_empty(),
        "{} reconciles saw a typed pod whose spec disagrees with its metadata: {:?}",
        undecoded.len(),
        &undecoded[..undecoded.len().min(5)]
    );
    cancel.cancel();
    let _ = runner.await;
    Ok(format!(
        "{ops} ops; typed {typed_detail}; viewed {viewed_detail}; compact {compact_detail}; {reconciled}"
    ))
}

async fn json_server() -> Outcome {
    let sim = SimServer::builder().protobuf(false).start().await?;
    seed(&sim, "pods", "js", 2, 200, 100)?;
    // CompactObject asks for protobuf only when told to (its `decode` reads JSON).
    let factory = crate::harness::factory(config_for(&sim)?)
        .reflector_options(fast_backoff(false))
        .encoding(Encoding::Protobuf);
    let compact = factory.informer::<CompactObject>(pods())?;
    let typed = factory.informer::<Pb<Pod>>(Resource::of_pb::<Pod>())?;
    let viewed = factory.informer::<PbView<Pod>>(Resource::of_pb::<Pod>())?;
    let (rec, seq) = Recorder::new();
    let (typed_rec, typed_seq) = Recorder::new();
    let (viewed_rec, viewed_seq) = Recorder::new();
    compact.add_event_handler(rec)?;
    typed.add_event_handler(typed_rec)?;
    viewed.add_event_handler(viewed_rec)?;
    sim.faults().end_watches_after(200);
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    factory.start(&cancel);
    synced(&compact, Duration::from_secs(30)).await?;
    synced(&typed, Duration::from_secs(30)).await?;
    synced(&viewed, Duration::from_secs(30)).await?;
    // A typed write: its protobuf body is refused (415) and the same pod goes again as JSON.
    sim.create(
        "namespaces",
        None,
        serde_json::json!({"metadata": {"name": "js-1"}}),
    )?;
    let api: Api<Pb<Pod>> = Api::namespaced(Client::new(&config_for(&sim)?)?, "js-1");
    let written = Pod {
        metadata: Some(ObjectMeta {
            name: Some("typed-write".into()),
            labels: [("written".to_string(), "protobuf-then-json".to_string())].into(),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: Some("c".into()),
                image: Some("nginx:1.27".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    api.create_pb(&CreateOptions::default(), &written)
        .await
        .map_err(|e| {
            Failure(format!(
                "a typed write to a server refusing protobuf bodies: {e}"
            ))
        })?;
    let ops = finish_all(vec![churn(&sim, "pods", "js-0", 150, 150.0, 4.0, 100)]).await;
    let detail = converge(
        &sim,
        "pods",
        compact.indexer(),
        &[("compact", &seq)],
        Duration::from_secs(30),
    )
    .await?;
    let typed_detail = converge(
        &sim,
        "pods",
        typed.indexer(),
        &[("typed", &typed_seq)],
        Duration::from_secs(30),
    )
    .await?;
    let viewed_detail = converge(
        &sim,
        "pods",
        viewed.indexer(),
        &[("viewed", &viewed_seq)],
        Duration::from_secs(30),
    )
    .await?;
    let viewed_write = viewed
        .indexer()
        .get_by_key("js-1/typed-write")
        .ok_or_else(|| Failure("the typed write is not in the view cache".into()))?;
    let image = viewed_write
        .view()
        .spec()
        .and_then(|s| s.containers().next())
        .and_then(|c| c.image());
    ensure!(
        image == Some("nginx:1.27"),
        "the typed write reads through its view as image {image:?}"
    );
    let typed_write = typed
        .indexer()
        .get_by_key("js-1/typed-write")
        .ok_or_else(|| Failure("the typed write is not in the typed cache".into()))?;
    ensure!(
        typed_write.label("written") == Some("protobuf-then-json"),
        "the typed write came back as {:?}",
        typed_write.metadata
    );
    ensure!(
        sim.counters().protobuf_responses == 0,
        "a server that speaks no protobuf answered in protobuf"
    );
    let not_json = compact
        .indexer()
        .list()
        .iter()
        .filter(|o| o.encoding() != RawEncoding::Json)
        .count();
    ensure!(
        not_json == 0,
        "{not_json} cached CompactObjects are not JSON"
    );
    Ok(format!(
        "{ops} ops; compact {detail}; typed from JSON {typed_detail}; viewed from JSON {viewed_detail}"
    ))
}
