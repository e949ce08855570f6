//! The candidate's side of coordinated leader election (client-go's `leasecandidate.go`): a
//! `coordination.k8s.io/v1beta1` LeaseCandidate that tells the API server's coordinator that we
//! can hold a Lease, and with which versions.
//!
//! Why: with `CoordinatedLeaderElection` on, kube-apiserver picks the holder of a Lease among
//! the LeaseCandidates that name it (`spec.leaseName`) and are alive. Before it elects, it asks
//! each candidate whether it is still there by setting `spec.pingTime`; a candidate answers by
//! renewing, that is by writing a `spec.renewTime` later than the ping. Only candidates that
//! answered within five seconds are elected, and a candidate not renewed for 30 minutes is
//! deleted.
//!
//! ```text
//!   run: informer on our one LeaseCandidate (field selector metadata.name=<name>)
//!        └─ synced → renew (create if missing), then wait for the first of:
//!             - a ping: the object's pingTime later than its renewTime  → renew at once
//!             - renew_interval since the last renew (5 min)             → renew
//!             - a failed renew: client-go's controller backoff, at most renew_interval
//!             - cancel                                                  → stop (object left)
//! ```
//!
//! Rules LC1–LC4 in docs/semantics.md. The object is left in place on cancel, as client-go leaves
//! it: the coordinator ignores a candidate that does not answer its ping, and removes it after
//! 30 minutes without a renewal.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{Object, ObjectMeta, ReadOnlyIndexer};
use workqueue::shared_informer::reflector::{
    Api, Client, ClientError, CreateOptions, HttpListerWatcher, Resource,
};
use workqueue::shared_informer::{EventHandlerFns, InformerOptions, SharedIndexInformer};
use workqueue::{default_controller_rate_limiter, RateLimiter};

use super::config::{Candidacy, LeaderElectionConfigError};
use super::micro_time;

/// A `coordination.k8s.io/v1beta1` LeaseCandidate, the parts a candidate reads and writes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LeaseCandidateObject {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: CandidateSpec,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CandidateSpec {
    #[serde(default)]
    lease_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    binary_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    emulation_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    strategy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    renew_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ping_time: Option<String>,
    /// Fields a later API version adds, written back as read.
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

impl Object for LeaseCandidateObject {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        Some(&self.metadata)
    }
}

workqueue::shared_informer::reflector::decode_with_serde!(LeaseCandidateObject);

impl LeaseCandidateObject {
    /// The ping not answered yet: `pingTime` later than `renewTime` (or no `renewTime`).
    fn unanswered_ping(&self) -> Option<SystemTime> {
        let ping = self.spec.ping_time.as_deref().and_then(micro_time::parse)?;
        let renewed = self.spec.renew_time.as_deref().and_then(micro_time::parse);
        renewed.is_none_or(|renewed| ping > renewed).then_some(ping)
    }
}

/// The LeaseCandidates of `namespace`.
fn resource() -> Resource {
    Resource::namespaced("coordination.k8s.io", "v1beta1", "leasecandidates")
}

/// Announces one candidate of coordinated election, `namespace/name`, for the Lease
/// `lease_name` of the same namespace, and keeps it alive until cancelled (client-go's
/// `LeaseCandidate`; rules LC1–LC4).
///
/// A [`LeaderElector`](crate::leader_election::LeaderElector) configured with
/// [`LeaderElectionConfig::coordinated`](crate::leader_election::LeaderElectionConfig::coordinated)
/// runs one for its identity through its lock; run one yourself only for an elector of another
/// kind. The candidate's name is the identity the coordinator writes as the Lease's holder.
/// It needs `get`, `list`, `watch`, `create` and `update` on `leasecandidates` in
/// `coordination.k8s.io`.
///
/// ```no_run
/// use controller::leader_election::{Candidacy, LeaseCandidate};
/// use controller::CancellationToken;
/// use workqueue::shared_informer::reflector::{Client, ClusterConfig};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::new(&ClusterConfig::from_kubeconfig(None)?)?;
/// let candidate = LeaseCandidate::new(
///     client,
///     "kube-system",
///     "pod-a",
///     "my-controller",
///     Candidacy::new("1.36.3", "1.36.0"),
/// )?;
/// let cancel = CancellationToken::new();
/// tokio::spawn(candidate.run(cancel.clone())); // until cancel.cancel()
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LeaseCandidate {
    client: Client,
    namespace: String,
    name: String,
    lease_name: String,
    candidacy: Candidacy,
}

/// The key for the one failure count of a candidate's backoff.
const BACKOFF_KEY: () = ();

impl LeaseCandidate {
    /// The candidate `namespace/name` for the Lease `lease_name`, after
    /// [`Candidacy::validate`] (a lease name is required too).
    pub fn new(
        client: Client,
        namespace: &str,
        name: impl Into<String>,
        lease_name: impl Into<String>,
        candidacy: Candidacy,
    ) -> Result<Self, LeaderElectionConfigError> {
        let candidate = Self::unchecked(client, namespace, name, lease_name, candidacy);
        if candidate.lease_name.is_empty() {
            return Err(LeaderElectionConfigError::Empty("lease_name"));
        }
        candidate.candidacy.validate(&candidate.name)?;
        Ok(candidate)
    }

    /// For a lock whose elector has validated the candidacy already.
    pub(crate) fn unchecked(
        client: Client,
        namespace: &str,
        name: impl Into<String>,
        lease_name: impl Into<String>,
        candidacy: Candidacy,
    ) -> Self {
        Self {
            client,
            namespace: namespace.to_string(),
            name: name.into(),
            lease_name: lease_name.into(),
            candidacy,
        }
    }

    /// The candidate's name: the identity the coordinator names as holder.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it announces.
    pub fn candidacy(&self) -> &Candidacy {
        &self.candidacy
    }

    /// Watches the candidate's object and renews it (creating it when missing) once the watch
    /// has synced, then at once after each ping and every
    /// [`renew_interval`](Candidacy::renew_interval) otherwise, until `cancel`. Failures are
    /// logged and retried (LC3).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future drops the informer's run with it, without the
    /// orderly stop `cancel` gives its handler; stop it with `cancel`. Either way the object
    /// stays, and a write in flight may still land.
    pub async fn run(self, cancel: CancellationToken) {
        let lw =
            HttpListerWatcher::<LeaseCandidateObject>::with_client(self.client.clone(), resource())
                .namespace(self.namespace.clone())
                .field_selector(format!("metadata.name={}", self.name));
        let informer = SharedIndexInformer::new(
            lw,
            InformerOptions {
                name: format!("leasecandidate {}/{}", self.namespace, self.name),
                ..InformerOptions::default()
            },
        );
        let pinged = Arc::new(Notify::new());
        let notify = Arc::clone(&pinged);
        let handler = EventHandlerFns::new().on_update(
            move |_old: &Arc<LeaseCandidateObject>, new: &Arc<LeaseCandidateObject>| {
                if new.unanswered_ping().is_some() {
                    notify.notify_one();
                }
            },
        );
        if let Err(error) = informer.add_event_handler(handler) {
            tracing::error!(candidate = %self.name, %error, "cannot watch the LeaseCandidate");
            return;
        }
        let stop = cancel.child_token();
        let watch = informer.run(stop.clone());
        let renew = async {
            tokio::select! {
                biased;
                () = stop.cancelled() => {}
                synced = informer.wait_for_sync() => if synced {
                    self.keep_alive(informer.indexer(), &pinged, &stop).await;
                }
            }
            stop.cancel();
        };
        futures::join!(watch, renew);
        tracing::debug!(candidate = %self.name, "stopped announcing the lease candidate");
    }

    /// The renew loop, from a synced cache.
    async fn keep_alive(
        &self,
        cache: &ReadOnlyIndexer<LeaseCandidateObject>,
        pinged: &Notify,
        stop: &CancellationToken,
    ) {
        let api = Api::<LeaseCandidateObject>::namespaced_with(
            self.client.clone(),
            resource(),
            &self.namespace,
        );
        let key = format!("{}/{}", self.namespace, self.name);
        let backoff = default_controller_rate_limiter::<()>();
        loop {
            let wait = match self.renew(&api, cache.get_by_key(&key).as_deref()).await {
                Ok(()) => {
                    backoff.forget(&BACKOFF_KEY);
                    self.candidacy.renew_interval
                }
                Err(error) => {
                    let wait = backoff
                        .when(&BACKOFF_KEY)
                        .min(self.candidacy.renew_interval);
                    tracing::warn!(
                        candidate = %self.name,
                        lease = %self.lease_name,
                        %error,
                        retry_in = ?wait,
                        "failed to renew the lease candidate"
                    );
                    wait
                }
            };
            tokio::select! {
                biased;
                () = stop.cancelled() => return,
                () = pinged.notified() => {}
                () = sleep(wait) => {}
            }
        }
    }

    /// client-go's `ensureLease`: creates the object if the cache has none, else updates the
    /// cached one with a new renew time and our versions (LC2).
    async fn renew(
        &self,
        api: &Api<LeaseCandidateObject>,
        cached: Option<&LeaseCandidateObject>,
    ) -> Result<(), ClientError> {
        let Some(cached) = cached else {
            let created = self.object(None);
            api.create(&CreateOptions::default(), &created).await?;
            tracing::info!(
                candidate = %self.name,
                lease = %self.lease_name,
                "created the lease candidate"
            );
            return Ok(());
        };
        let answering = cached.unanswered_ping();
        api.replace(
            &self.name,
            &CreateOptions::default(),
            &self.object(Some(cached)),
        )
        .await?;
        match answering {
            Some(_) => tracing::debug!(candidate = %self.name, "answered the coordinator's ping"),
            None => tracing::trace!(candidate = %self.name, "renewed the lease candidate"),
        }
        Ok(())
    }

    /// The object to write: `current` (its metadata, ping and unknown fields kept) or a new one,
    /// with our lease name, versions and strategy and a renew time later than any ping.
    fn object(&self, current: Option<&LeaseCandidateObject>) -> LeaseCandidateObject {
        let mut object = current.cloned().unwrap_or_default();
        object.api_version = "coordination.k8s.io/v1beta1".into();
        object.kind = "LeaseCandidate".into();
        object.metadata.name = Some(self.name.clone());
        object.metadata.namespace = Some(self.namespace.clone());
        let spec = &mut object.spec;
        if spec.lease_name.is_empty() {
            spec.lease_name.clone_from(&self.lease_name);
        }
        spec.binary_version
            .clone_from(&self.candidacy.binary_version);
        spec.emulation_version
            .clone_from(&self.candidacy.emulation_version);
        spec.strategy.clone_from(&self.candidacy.strategy);
        spec.renew_time = Some(micro_time::format(renew_time(
            SystemTime::now(),
            current.and_then(LeaseCandidateObject::unanswered_ping),
        )));
        object
    }
}

/// Our clock's time, or just after the ping being answered if that is later: the coordinator
/// counts a ping as answered only by a renew time after it, and a clock behind the server's
/// would otherwise leave the ping unanswered and renew again at every echo of our own write.
fn renew_time(now: SystemTime, ping: Option<SystemTime>) -> SystemTime {
    match ping {
        Some(ping) if ping >= now => ping + Duration::from_micros(1),
        _ => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn at(micros: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(micros)
    }

    fn with_times(renew: Option<u64>, ping: Option<u64>) -> LeaseCandidateObject {
        let mut object = LeaseCandidateObject::default();
        object.spec.renew_time = renew.map(|t| micro_time::format(at(t)));
        object.spec.ping_time = ping.map(|t| micro_time::format(at(t)));
        object
    }

    #[test]
    fn a_ping_is_unanswered_only_while_it_is_later_than_the_renew_time() {
        assert_eq!(with_times(Some(10), None).unanswered_ping(), None);
        assert_eq!(
            with_times(Some(10), Some(11)).unanswered_ping(),
            Some(at(11))
        );
        assert_eq!(with_times(Some(11), Some(11)).unanswered_ping(), None);
        assert_eq!(with_times(Some(12), Some(11)).unanswered_ping(), None);
        assert_eq!(with_times(None, Some(11)).unanswered_ping(), Some(at(11)));
    }

    #[test]
    fn the_renew_time_answering_a_ping_is_after_it_even_on_a_clock_behind_the_servers() {
        assert_eq!(renew_time(at(50), None), at(50));
        assert_eq!(renew_time(at(50), Some(at(40))), at(50));
        assert_eq!(renew_time(at(50), Some(at(50))), at(51));
        assert_eq!(renew_time(at(50), Some(at(90))), at(91));
    }

    #[test]
    fn the_object_keeps_the_servers_fields_and_writes_ours() {
        let candidacy = Candidacy::new("1.36.3", "1.36.0");
        let client = Client::new(
            &workqueue::shared_informer::reflector::ClusterConfig::new("http://127.0.0.1:1")
                .unwrap(),
        )
        .unwrap();
        let candidate =
            LeaseCandidate::unchecked(client, "default", "pod-a", "my-controller", candidacy);
        let created = serde_json::to_value(candidate.object(None)).unwrap();
        assert_eq!(created["apiVersion"], "coordination.k8s.io/v1beta1");
        assert_eq!(created["metadata"]["name"], "pod-a");
        assert_eq!(created["spec"]["leaseName"], "my-controller");
        assert_eq!(created["spec"]["binaryVersion"], "1.36.3");
        assert_eq!(created["spec"]["emulationVersion"], "1.36.0");
        assert_eq!(created["spec"]["strategy"], "OldestEmulationVersion");
        assert!(created["spec"]["renewTime"].is_string());
        assert!(created["spec"].get("pingTime").is_none());

        let mut current: LeaseCandidateObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pod-a", "namespace": "default", "resourceVersion": "7"},
            "spec": {"leaseName": "my-controller", "binaryVersion": "1.35.0",
                     "renewTime": "2026-01-01T00:00:00.000000Z",
                     "pingTime": "2999-01-01T00:00:00.000000Z", "futureField": 3}
        }))
        .unwrap();
        current.spec.strategy = "example.com/mine".into();
        let renewed = serde_json::to_value(candidate.object(Some(&current))).unwrap();
        assert_eq!(renewed["metadata"]["resourceVersion"], "7");
        assert_eq!(renewed["spec"]["binaryVersion"], "1.36.3", "our versions");
        assert_eq!(renewed["spec"]["strategy"], "OldestEmulationVersion");
        assert_eq!(renewed["spec"]["pingTime"], "2999-01-01T00:00:00.000000Z");
        assert_eq!(renewed["spec"]["renewTime"], "2999-01-01T00:00:00.000001Z");
        assert_eq!(renewed["spec"]["futureField"], 3);
    }
}
