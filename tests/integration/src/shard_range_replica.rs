//! One replica of the sharded widget controller in range mode (`integration-suite shard-replica
//! --mode range ...`): no sharder and no labels; the replica joins the ring and, through a
//! [`RangeShard`], lists, watches, caches and reconciles only the virtual ranges of the server's
//! shard hash it holds (claims, release and touch: docs/sharding.md, range mode).
//!
//! ```text
//!   Ring: holds Lease widgets-<identity>                 (user <identity>)
//!   Claims: ConfigMap widgets-ranges-<identity>          (same user)
//!   RangeShard: widgets of the held ranges, and the ConfigMaps labelled with those ranges
//!     reconcile(widget): wait `--delay-ms`; child ConfigMap <name>-cfg with data.size = spec.size
//!                        (created with its owner's range label); status {size, by: identity}
//! ```
//!
//! It takes the label mode's flags ([`ReplicaOpts`]; the sharder's are unused) and prints the
//! same status lines, with `widgets` the objects and children cached and `held`/`acting` its
//! ranges:
//!
//! ```text
//! STATUS widgets=742 children=0 reconciles=5120 fenced=3 members=4 lease=1 held=21 acting=21
//! ```
//!
//! A line `stop` on stdin, or stdin closing, stops it gracefully: it releases its ranges (the
//! reconciles in flight finished first), and only then its shard Lease.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use controller::sharding::{ApiRingLeases, FenceError, RangeShard, RangeWriter, Ring};
use controller::{Action, CancellationToken};
use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;
use workqueue::shared_informer::reflector::store_index::{DynamicObject, Object};
use workqueue::{default_controller_rate_limiter, RateLimitingQueue};

use crate::shard_replica::{
    child_name, configmaps, replica_client, spec_size, widgets, ReplicaOpts, GROUP, KIND, RING,
};

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Runs the replica until told to stop.
pub async fn run(opts: ReplicaOpts) -> Result<(), String> {
    let client = replica_client(&opts, false)?;
    let ns = opts.namespace.clone();
    // The ring has a token of its own, cancelled once the shard has left: its lease is held
    // while the shard releases its ranges, so that a graceful stop costs no object write.
    let (stop, ring_stop) = (CancellationToken::new(), CancellationToken::new());
    let ring = Ring::new(
        RING,
        opts.election(RING),
        ApiRingLeases::new(client.clone(), &ns),
    )
    .map_err(err)?;
    let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    let shard: RangeShard<DynamicObject> =
        RangeShard::new(&ring, client, widgets(), &ns, queue).owns(configmaps(), KIND);
    let reconciles = Arc::new(AtomicU64::new(0));
    let fenced = Arc::new(AtomicU64::new(0));
    let delay = Duration::from_millis(opts.delay_ms);
    let tasks = [
        tokio::spawn({
            let (ring, stop) = (ring.clone(), ring_stop.clone());
            async move {
                if let Err(error) = ring.run(ring.lock(), stop).await {
                    tracing::error!(%error, "the replica cannot join its ring");
                }
            }
        }),
        tokio::spawn({
            let (shard, ring, stop) = (shard.clone(), ring.clone(), stop.clone());
            async move { shard.run(&ring, stop).await }
        }),
        tokio::spawn({
            let me = opts.identity.clone();
            let (cache, reconciles, fenced) = (shard.clone(), reconciles.clone(), fenced.clone());
            shard.clone().run_controller(
                opts.workers.max(1),
                stop.clone(),
                move |widget, writer| {
                    let (me, cache) = (me.clone(), cache.clone());
                    let (reconciles, fenced) = (reconciles.clone(), fenced.clone());
                    async move {
                        reconciles.fetch_add(1, Ordering::Relaxed);
                        if !delay.is_zero() {
                            // The benchmark's stand-in for a reconcile's own work.
                            tokio::time::sleep(delay).await;
                        }
                        let result = reconcile(&me, &cache, &widget, &writer).await;
                        if matches!(result, Err(FenceError::Fenced(_))) {
                            fenced.fetch_add(1, Ordering::Relaxed);
                        }
                        result
                    }
                },
            )
        }),
    ];

    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut tick = tokio::time::interval(Duration::from_millis(opts.status_ms));
    loop {
        tokio::select! {
            line = stdin.next_line() => match line {
                Ok(Some(line)) if line.trim() != "stop" => continue,
                _ => break,
            },
            _ = tick.tick() => println!(
                "STATUS widgets={} children=0 reconciles={} fenced={} members={} lease={} \
                 held={} acting={}",
                shard.cached(),
                reconciles.load(Ordering::Relaxed),
                fenced.load(Ordering::Relaxed),
                ring.members().len(),
                u8::from(ring.guard().is_valid()),
                shard.held().len(),
                shard.acting().len(),
            ),
        }
    }
    stop.cancel();
    let [ring_task, shard_task, controller_task] = tasks;
    let _ = controller_task.await;
    let _ = shard_task.await;
    ring_stop.cancel();
    let _ = ring_task.await;
    Ok(())
}

/// The label mode's reconcile, through the range writer: child ConfigMap `<name>-cfg` with
/// `data.size = spec.size` (created labelled with its owner's range), then
/// `status {size, by: me}` on the widget.
async fn reconcile(
    me: &str,
    shard: &RangeShard<DynamicObject>,
    widget: &DynamicObject,
    writer: &RangeWriter<DynamicObject>,
) -> Result<Action, FenceError> {
    let size = spec_size(&widget.data);
    let name = widget.name();
    let ns = widget.namespace().unwrap_or_default();
    match shard.child(&format!("{ns}/{}", child_name(name))) {
        None => {
            let Some(uid) = widget.uid() else {
                return Ok(Action::Done);
            };
            let child = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": child_name(name), "ownerReferences": [{
                    "apiVersion": format!("{GROUP}/v1"), "kind": KIND, "name": name,
                    "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
                "data": {"size": size.to_string()},
            });
            match writer.create_child(widget, &child).await {
                Ok(_) => {}
                // Created by the range's previous holder and not cached yet: try again then.
                Err(FenceError::ChildExists { .. }) => {
                    return Ok(Action::RequeueAfter(Duration::from_millis(200)))
                }
                Err(e) => return Err(e),
            }
        }
        Some(child) => {
            let current = child.data.get("data").and_then(|d| d.get("size"));
            if current.and_then(Value::as_str) != Some(size.to_string().as_str()) {
                writer
                    .merge_patch_child(&child, &json!({"data": {"size": size.to_string()}}))
                    .await?;
            }
        }
    }
    let status = widget.data.get("status");
    let done = status.and_then(|s| s.get("size")).and_then(Value::as_i64) == Some(size)
        && status.and_then(|s| s.get("by")).and_then(Value::as_str) == Some(me);
    if !done {
        writer
            .merge_patch(widget, &json!({"status": {"size": size, "by": me}}))
            .await?;
    }
    Ok(Action::Done)
}
