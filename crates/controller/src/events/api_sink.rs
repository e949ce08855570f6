//! An [`EventSink`] writing core/v1 Events through the informers' client
//! ([`reflector::Api`](workqueue::shared_informer::reflector::Api)), in the involved object's namespace.

use serde::{Deserialize, Serialize};
use workqueue::shared_informer::reflector::store_index::Object;
use workqueue::shared_informer::reflector::{
    Api, Client, ClientError, CreateOptions, Patch, PatchOptions, Resource,
};

use super::model::Event;
use super::sink::{EventSink, SinkError};

/// The server's copy of an Event, decodable by [`Api`] (kept private so that [`Event`] need not
/// be a store object).
#[derive(Debug, Deserialize)]
#[serde(transparent)]
struct ServerEvent(Event);

impl Object for ServerEvent {}

workqueue::shared_informer::reflector::decode_with_serde!(ServerEvent);

/// An Event with the type fields a request body carries.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    api_version: &'static str,
    kind: &'static str,
    #[serde(flatten)]
    event: &'a Event,
}

/// Writes Events to the API server: `POST` to create, a strategic-merge `PATCH` to update, in
/// `event.metadata.namespace` (the involved object's namespace, or `default`).
///
/// ```no_run
/// use controller::events::{ApiEventSink, BroadcasterConfig, EventBroadcaster, EventSource};
/// use workqueue::shared_informer::reflector::{Client, ClusterConfig};
/// use controller::CancellationToken;
///
/// # async fn run(client: Client) {
/// let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
/// let recorder = broadcaster.new_recorder(EventSource::new("web-controller"));
/// let writer = broadcaster.start(ApiEventSink::new(client), CancellationToken::new());
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ApiEventSink {
    client: Client,
}

impl ApiEventSink {
    /// A sink writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    fn api(&self, event: &Event) -> Api<ServerEvent> {
        Api::namespaced_with(
            self.client.clone(),
            Resource::namespaced("", "v1", "events"),
            &event.metadata.namespace,
        )
    }
}

/// Transient failures are retried; a refusal (invalid, forbidden — which includes a terminating
/// namespace — or a request this client cannot make) is not.
fn sink_error(error: ClientError) -> SinkError {
    match error {
        ClientError::NotFound(_) => SinkError::NotFound,
        ClientError::AlreadyExists(_) => SinkError::AlreadyExists,
        ClientError::Conflict(_)
        | ClientError::TooManyRequests { .. }
        | ClientError::Transport { .. }
        | ClientError::Timeout(_) => SinkError::Retryable(error.to_string()),
        ClientError::Api(status) if status.code >= 500 => {
            SinkError::Retryable(ClientError::Api(status).to_string())
        }
        other => SinkError::Rejected(other.to_string()),
    }
}

impl EventSink for ApiEventSink {
    async fn create(&self, event: &Event) -> Result<Event, SinkError> {
        let body = Body {
            api_version: "v1",
            kind: "Event",
            event,
        };
        self.api(event)
            .create(&CreateOptions::default(), &body)
            .await
            .map(|created| created.0)
            .map_err(sink_error)
    }

    async fn patch(&self, event: &Event, patch: serde_json::Value) -> Result<Event, SinkError> {
        self.api(event)
            .patch(
                &event.metadata.name,
                &PatchOptions::default(),
                &Patch::Strategic(patch),
            )
            .await
            .map(|patched| patched.0)
            .map_err(sink_error)
    }
}

#[cfg(test)]
mod tests {
    use workqueue::shared_informer::reflector::Status;

    use super::*;

    #[test]
    fn client_errors_map_to_retryable_or_final_sink_errors() {
        let api = |code, reason| ClientError::api(Status::failure(code, reason, "message"));
        assert_eq!(sink_error(api(404, "NotFound")), SinkError::NotFound);
        assert_eq!(
            sink_error(api(409, "AlreadyExists")),
            SinkError::AlreadyExists
        );
        assert!(matches!(
            sink_error(api(503, "ServiceUnavailable")),
            SinkError::Retryable(_)
        ));
        assert!(matches!(
            sink_error(api(429, "TooManyRequests")),
            SinkError::Retryable(_)
        ));
        assert!(matches!(
            sink_error(api(403, "Forbidden")),
            SinkError::Rejected(_)
        ));
        assert!(matches!(
            sink_error(api(422, "Invalid")),
            SinkError::Rejected(_)
        ));
    }

    #[test]
    fn a_request_body_carries_the_type_fields() {
        let event: Event = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web.1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web"},
            "firstTimestamp": null,
            "lastTimestamp": null,
        }))
        .unwrap();
        let body = serde_json::to_value(Body {
            api_version: "v1",
            kind: "Event",
            event: &event,
        })
        .unwrap();
        assert_eq!(body["apiVersion"], "v1");
        assert_eq!(body["kind"], "Event");
        assert_eq!(body["metadata"]["name"], "web.1");
    }
}
