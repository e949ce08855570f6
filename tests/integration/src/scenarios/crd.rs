//! Scenario `crd-informer`: a CustomResourceDefinition (two served versions) created through the
//! API, and this project's `DynamicObject` informers on the resource it serves — one on
//! everything, one with a label selector, one on the second version — while custom objects are created, updated (moving in and out of the
//! selector) and deleted through the API. Then the CRD is deleted: the server deletes its
//! objects and ends the watches, and both informers must have seen every object go (their caches
//! and handler views empty, no sequence violation) while their reflectors keep retrying a
//! resource that is no longer served.

use std::time::Duration;

use serde_json::{json, Value};
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::DynamicObject;
use workqueue::shared_informer::reflector::{
    Api, Client, ClientError, CreateOptions, DeleteOptions, Patch, PatchOptions, Resource,
};

use crate::check::{
    cache_state, diff, eventually, server_state, server_state_where, Failure, Outcome, Recorder,
};
use crate::harness::{config_for, factory, fast_backoff, synced};
use crate::{ensure, Opts};

const NS: &str = "crd";
const GIZMOS: usize = 300;
const RESOURCE: &str = "gizmos.example.com";

fn gizmos() -> Resource {
    Resource::namespaced("example.com", "v1", "gizmos")
}

/// The same objects through the CRD's second served version.
fn gizmos_v2() -> Resource {
    Resource::namespaced("example.com", "v2", "gizmos")
}

fn crds() -> Resource {
    Resource::cluster("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

fn tier_a(o: &Value) -> bool {
    o.pointer("/metadata/labels/tier").and_then(Value::as_str) == Some("a")
}

fn gizmo_crd() -> Value {
    let mut crd = gizmo_crd_v1();
    let mut v2 = crd["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    if let Some(vs) = crd["spec"]["versions"].as_array_mut() {
        vs.push(v2);
    }
    crd
}

fn gizmo_crd_v1() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": RESOURCE},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gizmos", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "n": {"type": "integer", "minimum": 0},
                        "mode": {"type": "string", "default": "auto"}}}}}}}]},
    })
}

fn gizmo(i: usize, tier: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Gizmo",
        "metadata": {"name": format!("g-{i}"), "labels": {"tier": tier}}, "spec": {"n": i}})
}

/// Runs the scenario.
pub async fn crd_informer(_: Opts) -> Outcome {
    let sim = SimServer::start().await?;
    sim.create("namespaces", None, json!({"metadata": {"name": NS}}))?;
    let config = config_for(&sim)?;
    let client = Client::new(&config)?;
    let crd_api: Api<DynamicObject> = Api::all_with(client.clone(), crds());
    // Before the CRD, the resource is not served.
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), gizmos(), NS);
    ensure!(
        matches!(api.get("g-0").await, Err(ClientError::NotFound(_))),
        "gizmos answered before their CRD existed"
    );
    crd_api
        .create(&CreateOptions::default(), &gizmo_crd())
        .await?;
    let crd = crd_api.get(RESOURCE).await?;
    let established = crd
        .data
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        });
    ensure!(established, "the CRD is not established: {:?}", crd.data);

    // Half of the objects before the informers start (the initial list), half after (watch).
    for i in 0..GIZMOS / 2 {
        let tier = if i % 2 == 0 { "a" } else { "b" };
        api.create(&CreateOptions::default(), &gizmo(i, tier))
            .await?;
    }
    let all = factory(config.clone()).reflector_options(fast_backoff(false));
    let selected = factory(config)
        .label_selector("tier=a".parse()?)
        .reflector_options(fast_backoff(false));
    let all_informer = all.informer::<DynamicObject>(gizmos())?;
    let sel_informer = selected.informer::<DynamicObject>(gizmos())?;
    let v2_informer = all.informer::<DynamicObject>(gizmos_v2())?;
    let (all_rec, all_seq) = Recorder::new();
    let (sel_rec, sel_seq) = Recorder::new();
    all_informer.add_event_handler(all_rec)?;
    sel_informer.add_event_handler(sel_rec)?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    all.start(&cancel);
    selected.start(&cancel);
    synced(&all_informer, Duration::from_secs(30)).await?;
    synced(&sel_informer, Duration::from_secs(30)).await?;
    synced(&v2_informer, Duration::from_secs(30)).await?;
    ensure!(
        all_informer.indexer().len() == GIZMOS / 2,
        "synced with {} gizmos, the server has {}",
        all_informer.indexer().len(),
        GIZMOS / 2
    );

    for i in GIZMOS / 2..GIZMOS {
        let tier = if i % 2 == 0 { "a" } else { "b" };
        api.create(&CreateOptions::default(), &gizmo(i, tier))
            .await?;
    }
    // Flip tiers (in and out of the selector), update specs, delete some.
    let (mut flips, mut deletes) = (0, 0);
    for i in (0..GIZMOS).step_by(3) {
        let name = format!("g-{i}");
        if i % 9 == 0 {
            api.delete(&name, &DeleteOptions::default()).await?;
            deletes += 1;
        } else {
            let tier = if i % 2 == 0 { "b" } else { "a" };
            let patch = json!({"metadata": {"labels": {"tier": tier}}, "spec": {"n": i + 1}});
            api.patch(&name, &PatchOptions::default(), &Patch::Merge(patch))
                .await?;
            flips += 1;
        }
    }
    // A write the schema refuses changes nothing.
    let refused = api
        .patch(
            "g-1",
            &PatchOptions::default(),
            &Patch::Merge(json!({"spec": {"n": -1}})),
        )
        .await;
    ensure!(
        matches!(&refused, Err(e) if e.status().is_some_and(|s| s.code == 422)),
        "a negative n was not refused: {refused:?}"
    );
    let live = eventually(
        "both caches and handlers to equal the server",
        Duration::from_secs(30),
        || {
            let server = server_state(&sim, RESOURCE)?;
            let server_a = server_state_where(&sim, RESOURCE, tier_a)?;
            for (what, want, got) in [
                ("cache", &server, cache_state(all_informer.indexer())),
                ("handler", &server, all_seq.lock().view()),
                (
                    "selected cache",
                    &server_a,
                    cache_state(sel_informer.indexer()),
                ),
                ("v2 cache", &server, cache_state(v2_informer.indexer())),
                ("selected handler", &server_a, sel_seq.lock().view()),
            ] {
                if let Some(d) = diff(want, &got) {
                    return Err(format!("{what}: {d}"));
                }
            }
            Ok(server.len())
        },
    )
    .await?;
    let defaulted = all_informer
        .indexer()
        .list()
        .iter()
        .all(|g| g.data.get("spec").and_then(|s| s.get("mode")) == Some(&json!("auto")));
    ensure!(
        defaulted,
        "the schema's default is missing from cached gizmos"
    );
    let in_v2 = v2_informer
        .indexer()
        .list()
        .iter()
        .all(|g| g.api_version.as_deref() == Some("example.com/v2"));
    ensure!(in_v2, "the v2 informer holds gizmos of another version");

    // The CRD goes: its objects go with it, and both informers see every delete.
    crd_api.delete(RESOURCE, &DeleteOptions::default()).await?;
    eventually(
        "both caches and handlers to be empty",
        Duration::from_secs(30),
        || {
            let left = [
                all_informer.indexer().len(),
                all_seq.lock().view().len(),
                sel_informer.indexer().len(),
                sel_seq.lock().view().len(),
                v2_informer.indexer().len(),
            ];
            if left.iter().all(|n| *n == 0) {
                Ok(())
            } else {
                Err(format!(
                    "left (cache, handler, selected cache, selected handler, v2 cache): {left:?}"
                ))
            }
        },
    )
    .await?;
    for (what, seq) in [("all", &all_seq), ("selected", &sel_seq)] {
        let v = seq.lock().violations().to_vec();
        ensure!(
            v.is_empty(),
            "{what}: sequence violations: {:?}",
            &v[..v.len().min(3)]
        );
    }
    let gone = api.get("g-2").await;
    ensure!(
        matches!(gone, Err(ClientError::NotFound(_))),
        "gizmos still answered after their CRD was deleted: {gone:?}"
    );
    ensure!(
        sim.list(RESOURCE, None).is_err(),
        "the simulator still serves {RESOURCE}"
    );
    let (adds, removed) = {
        let s = all_seq.lock();
        (s.adds, s.deletes)
    };
    cancel.cancel();
    all.shutdown().await;
    selected.shutdown().await;
    if removed < live as u64 {
        return Err(Failure(format!(
            "{removed} deletes seen for {live} gizmos removed with their CRD"
        )));
    }
    Ok(format!(
        "{GIZMOS} gizmos, {flips} label flips, {deletes} deletes; {live} live removed with the \
         CRD; the unfiltered informer saw {adds} adds and {removed} deletes"
    ))
}
