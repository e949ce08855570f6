//! A [`LeaseLock`] on a `coordination.k8s.io/v1` Lease, through the informers' client
//! ([`reflector::Api`](workqueue::shared_informer::reflector::Api)).
//!
//! The Lease's spec carries the record as client-go's `LeaseLock` writes it, so Go and Rust
//! replicas can share one election: `holderIdentity`, `leaseDurationSeconds`, `acquireTime` and
//! `renewTime` (RFC 3339 micro-times), `leaseTransitions`. The `resourceVersion` is the version
//! of optimistic concurrency: a `replace` on a changed Lease is a 409, [`LockError::Conflict`].

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use workqueue::shared_informer::reflector::store_index::{Object, ObjectMeta};
use workqueue::shared_informer::reflector::{Api, Client, ClientError, CreateOptions, Resource};

use super::config::Candidacy;
use super::lease_candidate::LeaseCandidate;
use super::lock::{LeaseLock, LockError, RawVersion};
use super::micro_time;
use super::record::LeaderElectionRecord;
use crate::events::ObjectReference;

/// The parts of a `coordination.k8s.io/v1` Lease the election reads and writes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Lease {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: LeaseSpec,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeaseSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    holder_identity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_duration_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    acquire_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    renew_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_transitions: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    preferred_holder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    strategy: Option<String>,
}

impl Object for Lease {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        Some(&self.metadata)
    }
}

workqueue::shared_informer::reflector::decode_with_serde!(Lease);

impl LeaseSpec {
    fn from_record(record: &LeaderElectionRecord) -> Self {
        // Rounded up: others must wait at least the lease we count with.
        let seconds =
            record.lease_duration.as_secs() + u64::from(record.lease_duration.subsec_nanos() > 0);
        Self {
            // Always written, empty when nobody holds the lease, as client-go writes it: readers
            // that test for an empty string rather than a missing field see a release too.
            holder_identity: Some(record.holder_identity.clone().unwrap_or_default()),
            lease_duration_seconds: Some(i32::try_from(seconds).unwrap_or(i32::MAX)),
            acquire_time: Some(micro_time::format(record.acquire_time)),
            renew_time: Some(micro_time::format(record.renew_time)),
            lease_transitions: Some(i32::try_from(record.leader_transitions).unwrap_or(i32::MAX)),
            // Left out when empty, as client-go leaves them out.
            preferred_holder: record.preferred_holder.clone().filter(|p| !p.is_empty()),
            strategy: record.strategy.clone().filter(|s| !s.is_empty()),
        }
    }

    /// The record; unreadable times (display only) read as the epoch, negative numbers as 0.
    fn to_record(&self) -> LeaderElectionRecord {
        let time = |text: &Option<String>| -> SystemTime {
            text.as_deref()
                .and_then(micro_time::parse)
                .unwrap_or(UNIX_EPOCH)
        };
        let non_negative = |n: Option<i32>| u32::try_from(n.unwrap_or(0)).unwrap_or(0);
        LeaderElectionRecord {
            holder_identity: self
                .holder_identity
                .clone()
                .filter(|holder| !holder.is_empty()),
            lease_duration: Duration::from_secs(u64::from(non_negative(
                self.lease_duration_seconds,
            ))),
            acquire_time: time(&self.acquire_time),
            renew_time: time(&self.renew_time),
            leader_transitions: non_negative(self.lease_transitions),
            preferred_holder: self.preferred_holder.clone().filter(|p| !p.is_empty()),
            strategy: self.strategy.clone().filter(|s| !s.is_empty()),
        }
    }
}

impl Lease {
    /// The election record this Lease carries (for readers of many Leases: the shard ring).
    pub(crate) fn record(&self) -> LeaderElectionRecord {
        self.spec.to_record()
    }
}

/// The `coordination.k8s.io/v1` Leases of `namespace`.
pub(crate) fn leases_api(client: Client, namespace: &str) -> Api<Lease> {
    Api::namespaced_with(
        client,
        Resource::namespaced("coordination.k8s.io", "v1", "leases"),
        namespace,
    )
}

pub(crate) fn lock_error(error: ClientError) -> LockError {
    match error {
        ClientError::Conflict(_) => LockError::Conflict,
        ClientError::NotFound(_) => LockError::NotFound,
        ClientError::AlreadyExists(_) => LockError::AlreadyExists,
        other => LockError::Other(Box::new(other)),
    }
}

/// A [`LeaseLock`] on the Lease `namespace/name` (client-go's `resourcelock.LeaseLock`).
///
/// ```no_run
/// use controller::leader_election::{ApiLeaseLock, LeaderElectionConfig, LeaderElector};
/// use workqueue::shared_informer::reflector::{Client, ClusterConfig};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::new(&ClusterConfig::from_kubeconfig(None)?)?;
/// let identity = std::env::var("POD_NAME")?;
/// let lock = ApiLeaseLock::new(client, "kube-system", "my-controller", identity.clone());
/// let elector = LeaderElector::new(LeaderElectionConfig::new("my-controller", identity), lock)?;
/// # Ok(()) }
/// ```
pub struct ApiLeaseLock {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    /// Set on the Lease at every create and update (client-go's `LeaseLock.Labels`).
    labels: BTreeMap<String, String>,
    /// The metadata last read or written, so that an update keeps the Lease's labels,
    /// annotations and owners.
    last_metadata: Mutex<Option<ObjectMeta>>,
}

impl std::fmt::Debug for ApiLeaseLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiLeaseLock")
            .field("lease", &self.describe())
            .field("identity", &self.identity)
            .field("labels", &self.labels)
            .finish_non_exhaustive()
    }
}

impl ApiLeaseLock {
    /// A lock on the Lease `name` in `namespace`, written as `identity`.
    pub fn new(
        client: Client,
        namespace: &str,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            api: leases_api(client, namespace),
            namespace: namespace.to_string(),
            name: name.into(),
            identity: identity.into(),
            labels: BTreeMap::new(),
            last_metadata: Mutex::new(None),
        }
    }

    /// Sets `labels` on the Lease whenever this lock creates or updates it (client-go's
    /// `LeaseLock.Labels`): only these keys are written, over whatever values they had; the
    /// Lease's other labels are kept.
    ///
    /// ```no_run
    /// # use controller::leader_election::ApiLeaseLock;
    /// # use workqueue::shared_informer::reflector::{Client, ClusterConfig};
    /// # fn f(client: Client) {
    /// let lock = ApiLeaseLock::new(client, "kube-system", "my-controller", "pod-a")
    ///     .with_labels([("app.kubernetes.io/name", "my-controller")]);
    /// # }
    /// ```
    pub fn with_labels<K, V>(mut self, labels: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.labels
            .extend(labels.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    fn lease(&self, record: &LeaderElectionRecord, version: Option<&RawVersion>) -> Lease {
        let mut metadata = self.last_metadata.lock().clone().unwrap_or_default();
        metadata.name = Some(self.name.clone());
        metadata.namespace = Some(self.namespace.clone());
        metadata.resource_version = version.map(|v| v.as_str().to_string());
        if !self.labels.is_empty() {
            metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .extend(self.labels.clone());
        }
        Lease {
            api_version: "coordination.k8s.io/v1".into(),
            kind: "Lease".into(),
            metadata,
            spec: LeaseSpec::from_record(record),
        }
    }

    fn remember(&self, lease: Lease) -> Result<RawVersion, LockError> {
        let version = lease
            .metadata
            .resource_version
            .clone()
            .map(RawVersion::new)
            .ok_or_else(|| LockError::Other("the server's Lease has no resourceVersion".into()));
        *self.last_metadata.lock() = Some(lease.metadata);
        version
    }
}

impl LeaseLock for ApiLeaseLock {
    async fn get(&self) -> Result<Option<(LeaderElectionRecord, RawVersion)>, LockError> {
        let Some(lease) = self.api.get_opt(&self.name).await.map_err(lock_error)? else {
            return Ok(None);
        };
        let record = lease.spec.to_record();
        Ok(Some((record, self.remember(lease)?)))
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<RawVersion, LockError> {
        let lease = self.lease(record, None);
        let created = self
            .api
            .create(&CreateOptions::default(), &lease)
            .await
            .map_err(lock_error)?;
        self.remember(created)
    }

    async fn update(
        &self,
        record: &LeaderElectionRecord,
        version: &RawVersion,
    ) -> Result<RawVersion, LockError> {
        let lease = self.lease(record, Some(version));
        let updated = self
            .api
            .replace(&self.name, &CreateOptions::default(), &lease)
            .await
            .map_err(lock_error)?;
        self.remember(updated)
    }

    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        format!("leases/{}/{}", self.namespace, self.name)
    }

    /// The Lease, with the UID and resource version last read or written.
    fn object_reference(&self) -> Option<ObjectReference> {
        let mut reference = ObjectReference::new(
            "coordination.k8s.io/v1",
            "Lease",
            self.namespace.clone(),
            self.name.clone(),
        );
        if let Some(metadata) = &*self.last_metadata.lock() {
            reference.uid = metadata.uid.clone().unwrap_or_default();
            reference.resource_version = metadata.resource_version.clone().unwrap_or_default();
        }
        Some(reference)
    }

    /// The LeaseCandidate `namespace/<identity>` for this Lease, through this lock's client.
    fn candidate(&self, candidacy: &Candidacy) -> Option<LeaseCandidate> {
        Some(LeaseCandidate::unchecked(
            self.api.client().clone(),
            &self.namespace,
            self.identity.clone(),
            self.name.clone(),
            candidacy.clone(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_through_a_lease_spec_at_micro_time_precision() {
        let record = LeaderElectionRecord {
            holder_identity: Some("pod-a".into()),
            lease_duration: Duration::from_secs(15),
            acquire_time: UNIX_EPOCH + Duration::from_micros(1_795_451_151_123_456),
            renew_time: UNIX_EPOCH + Duration::from_micros(1_795_451_161_000_001),
            leader_transitions: 4,
            preferred_holder: Some("pod-b".into()),
            strategy: Some("OldestEmulationVersion".into()),
        };
        let spec = LeaseSpec::from_record(&record);
        assert_eq!(
            spec.renew_time.as_deref(),
            Some("2026-11-23T16:26:01.000001Z")
        );
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["preferredHolder"], "pod-b");
        assert_eq!(json["strategy"], "OldestEmulationVersion");
        assert_eq!(spec.to_record(), record);
    }

    #[test]
    fn a_released_record_is_written_with_an_empty_holder_identity() {
        let released = LeaderElectionRecord {
            holder_identity: None,
            lease_duration: Duration::from_secs(1),
            acquire_time: UNIX_EPOCH,
            renew_time: UNIX_EPOCH,
            leader_transitions: 2,
            preferred_holder: None,
            strategy: None,
        };
        let json = serde_json::to_value(LeaseSpec::from_record(&released)).unwrap();
        assert_eq!(json["holderIdentity"], "", "{json}");
        assert_eq!(json["leaseDurationSeconds"], 1);
        assert_eq!(json["leaseTransitions"], 2);
        assert!(json.get("preferredHolder").is_none() && json.get("strategy").is_none());
        // And read back as no holder.
        assert_eq!(LeaseSpec::from_record(&released).to_record(), released);
    }

    #[test]
    fn a_fractional_lease_is_written_rounded_up_and_bad_numbers_read_as_zero() {
        let mut record = LeaderElectionRecord {
            holder_identity: None,
            lease_duration: Duration::from_millis(15_500),
            acquire_time: UNIX_EPOCH,
            renew_time: UNIX_EPOCH,
            leader_transitions: 0,
            preferred_holder: None,
            strategy: None,
        };
        assert_eq!(
            LeaseSpec::from_record(&record).lease_duration_seconds,
            Some(16)
        );
        record.lease_duration = Duration::ZERO;
        let spec = LeaseSpec {
            lease_duration_seconds: Some(-5),
            lease_transitions: Some(-1),
            renew_time: Some("yesterday".into()),
            ..LeaseSpec::default()
        };
        assert_eq!(spec.to_record(), record);
    }
}
