//! `ApiEventSink` against the simulated API server: an Event created in the involved object's
//! namespace, a repeat patched onto it, an expired Event created anew, and a duplicate create
//! refused as AlreadyExists. Each step is one request; nothing waits on a timer.

use controller::events::{
    ApiEventSink, BroadcasterConfig, EventBroadcaster, EventSink, EventSource, EventType,
    ObjectReference, SinkError,
};
use workqueue::shared_informer::reflector::store_index::DynamicObject;
use workqueue::shared_informer::reflector::{
    Api, Client, ClusterConfig, Credentials, DeleteOptions, Resource,
};
use workqueue::CancellationToken;

async fn client() -> (sim_apiserver::SimServer, Client) {
    let sim = sim_apiserver::SimServer::builder().start().await.unwrap();
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    if let Some(ca) = sim.ca_pem() {
        config.certificate_authority = Some(ca.as_bytes().to_vec());
    }
    if let Some(token) = sim.token() {
        config.credentials = Credentials::Token(token.into());
    }
    (sim, Client::new(&config).unwrap())
}

fn events(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        Resource::namespaced("", "v1", "events"),
        namespace,
    )
}

#[tokio::test]
async fn events_are_created_then_patched_through_the_api_and_recreated_once_expired() {
    let (_sim, client) = client().await;
    let sink = ApiEventSink::new(client.clone());
    let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
    let stats = broadcaster.stats_handle();
    let recorder = broadcaster.new_recorder(EventSource::new("web-controller"));
    let writer = broadcaster.start(sink.clone(), CancellationToken::new());

    let pod = ObjectReference::new("v1", "Pod", "default", "web-0").with_uid("u-1");
    recorder.event(&pod, EventType::Warning, "BackOff", "restarting");
    recorder.event(&pod, EventType::Warning, "BackOff", "restarting");
    drop(recorder);
    writer.await.unwrap();
    assert_eq!(
        (stats.get().created, stats.get().patched),
        (1, 1),
        "{:?}",
        stats.get()
    );

    let api = events(&client, "default");
    let list = api.list(&Default::default()).await.unwrap();
    let [stored] = &list.items[..] else {
        panic!("{:?}", list.items)
    };
    let json = serde_json::to_value(stored).unwrap();
    assert_eq!(json["count"], 2);
    assert_eq!(json["reason"], "BackOff");
    assert_eq!(json["involvedObject"]["name"], "web-0");
    assert_eq!(json["source"]["component"], "web-controller");
    let name = json["metadata"]["name"].as_str().unwrap().to_owned();

    // The sink's own contract: a patch of a missing Event is NotFound, a second create of one
    // name AlreadyExists.
    let mut event: controller::events::Event = serde_json::from_value(json).unwrap();
    api.delete(&name, &DeleteOptions::default()).await.unwrap();
    assert_eq!(
        sink.patch(&event, serde_json::json!({"count": 3})).await,
        Err(SinkError::NotFound)
    );
    event.metadata.resource_version.clear();
    event.count = 1;
    let created = sink.create(&event).await.unwrap();
    assert_eq!(
        (created.metadata.name.as_str(), created.count),
        (name.as_str(), 1)
    );
    assert!(!created.metadata.resource_version.is_empty());
    assert_eq!(sink.create(&event).await, Err(SinkError::AlreadyExists));
}
