//! The sharder: the one elected member that writes each object's assignment label, moves
//! objects between live members through a hand-over, and makes children follow their owner.
//!
//! ```text
//!   objects informer (metadata-only) ──► queue ──► plan(label, drain, members) ──► merge patch
//!   children informers ──► queue ──► plan_child(child, owner) ──────────────────┘  with the seen
//!   Ring::members() polled ──► on change: every object queued again                resourceVersion,
//!   LeaderElector (one sharder per ring) ──► Sharder::run(leader token, guard)     guarded
//! ```
//!
//! Rules (SH11–SH16 and SH19 in docs/semantics.md; the protocol in docs/sharding.md):
//! - SH11: an unassigned object (no assignment label) is labelled with its owner by
//!   [`owner_of`] over the live members at once (no hand-over is needed: nobody acts on it).
//! - SH12: an object whose labelled owner is still a live member but no longer its owner is not
//!   relabelled: it is marked draining ([`drain_label`]) and left alone until the old owner
//!   acknowledges by removing both labels; only then is the new owner written (SH11).
//! - SH13: an object whose labelled owner is not a live member (its lease ran out, or it left)
//!   is relabelled at once, without hand-over.
//! - SH14: a drain whose reason went away (the labelled owner is the owner again) is withdrawn.
//! - SH15: every sharder write is a merge patch carrying the seen resourceVersion, sent only
//!   while its leader guard is valid; a conflict is retried with backoff on a fresher copy.
//!   Objects whose owner does not change are never written (only about 1/N move on a join).
//! - SH16: a child (controller owner reference to an object of the ring's kind) carries its
//!   owner's assignment label while that label names a live member (a draining owner's children
//!   stay with it); when the owner has no label (its old owner acknowledged a drain) or names a
//!   member that is gone, the child gets the owner's next owner ([`owner_of`] over the live
//!   members).
//! - SH19: an owner is assigned ([`Step::Assign`]) only once every cached child of it carries
//!   the assignee's label: children move first. Each child's relabel is a fenced write that
//!   changes its resourceVersion, so a write the old owner computed for a child before the
//!   hand-over (and the network delays past it) is refused, as its writes to the owner are; the
//!   new owner never acts on the owner while a child still names the old one.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{
    DynamicObject, Object, ObjectOrTombstone, ReadOnlyIndexer,
};
use workqueue::shared_informer::reflector::{
    Api, Client, ClientError, Decode, ListerWatcher, Patch, PatchOptions, RateLimit, Resource,
};
use workqueue::shared_informer::{EventHandlerFns, InformerError, SharedIndexInformer};
use workqueue::{ItemExponentialFailureRateLimiter, RateLimitingQueue};

use crate::leader_election::{LeaderElectionConfig, LeaderElector, LeaseGuard, LeaseLock};
use crate::owners::{controller_of, group_of};
use crate::runner::{Action, Controller};

use super::assign::owner_of;
use super::fence::shard_label;
use super::ring::{Ring, RingLeases};

/// The prefix of drain labels: an object of ring `r` being handed over carries
/// `drain.sharding.informer-rs.io/<r>=<the member it drains from>`.
pub const DRAIN_LABEL_PREFIX: &str = "drain.sharding.informer-rs.io/";

/// The label marking an object of `ring` as draining from its labelled owner (SH12).
pub fn drain_label(ring: &str) -> String {
    format!("{DRAIN_LABEL_PREFIX}{ring}")
}

/// The label selector of `identity`'s share of `ring`: give it to the replica's informers so
/// that the server filters and the replica caches only its objects.
///
/// ```
/// assert_eq!(
///     controller::sharding::shard_selector("widgets", "pod-a"),
///     "shard.sharding.informer-rs.io/widgets=pod-a"
/// );
/// ```
pub fn shard_selector(ring: &str, identity: &str) -> String {
    format!("{}={identity}", shard_label(ring))
}

/// What the sharder does with one object, given its labels and the live members.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Nothing to write: assigned to its owner, or no member to assign it to.
    Keep,
    /// Write the assignment label naming this member, and remove any drain label (SH11, SH13).
    Assign(String),
    /// Mark the object draining from its live labelled owner (SH12).
    Drain,
    /// Remove a drain label: the labelled owner is the owner again (SH14).
    CancelDrain,
    /// Draining: wait for the old owner's acknowledgement (SH12).
    AwaitAck,
}

/// The sharder's decision for the object `key`, labelled `current` (the assignment label's
/// value) and `draining` (a drain label present), with the live `members` (SH11–SH14).
///
/// ```
/// use controller::sharding::{owner_of, plan, Step};
///
/// let members = ["a".to_string(), "b".to_string()];
/// let owner = owner_of("ns/w", members.iter().map(String::as_str)).unwrap();
/// assert_eq!(plan("ns/w", None, false, &members), Step::Assign(owner.to_string()));
/// assert_eq!(plan("ns/w", Some(owner), false, &members), Step::Keep);
/// // A dead owner loses the object at once.
/// assert_eq!(plan("ns/w", Some("gone"), false, &members), Step::Assign(owner.to_string()));
/// ```
pub fn plan(key: &str, current: Option<&str>, draining: bool, members: &[String]) -> Step {
    let Some(desired) = owner_of(key, members.iter().map(String::as_str)) else {
        return Step::Keep;
    };
    match current {
        None => Step::Assign(desired.to_string()),
        Some(current) if current == desired => {
            if draining {
                Step::CancelDrain
            } else {
                Step::Keep
            }
        }
        Some(current) if !members.iter().any(|m| m == current) => Step::Assign(desired.to_string()),
        Some(_) if draining => Step::AwaitAck,
        Some(_) => Step::Drain,
    }
}

/// The assignment label a child should get (SH16), when it differs from the child's
/// `child_label`: its owner's `owner_label` while that names one of the live `members`, else the
/// owner's next owner, [`owner_of`]`(owner_key, members)`; `None` when there is nothing to
/// write (or no member).
///
/// ```
/// use controller::sharding::{owner_of, plan_child};
///
/// let members = ["a".to_string(), "b".to_string()];
/// // With a live owner: follow its label (also while it drains).
/// assert_eq!(plan_child(None, "ns/w", Some("a"), &members), Some("a".into()));
/// assert_eq!(plan_child(Some("a"), "ns/w", Some("a"), &members), None);
/// // The owner acknowledged a drain, or its member is gone: move to its next owner first.
/// let next = owner_of("ns/w", members.iter().map(String::as_str)).unwrap();
/// assert_eq!(plan_child(Some("gone"), "ns/w", None, &members), Some(next.to_string()));
/// assert_eq!(plan_child(Some("a"), "ns/w", Some("gone"), &members), (next != "a").then(|| next.to_string()));
/// ```
pub fn plan_child(
    child_label: Option<&str>,
    owner_key: &str,
    owner_label: Option<&str>,
    members: &[String],
) -> Option<String> {
    let target = match owner_label {
        Some(label) if members.iter().any(|m| m == label) => label,
        _ => owner_of(owner_key, members.iter().map(String::as_str))?,
    };
    (child_label != Some(target)).then(|| target.to_string())
}

/// One unit of the sharder's work: an object of the ring, or a child in one child resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Work {
    Object(String),
    Child(usize, String),
}

struct ChildSource<K> {
    resource: Resource,
    cache: ReadOnlyIndexer<K>,
}

/// The knobs of a [`Sharder`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SharderConfig {
    /// Concurrent writes (workers).
    pub workers: usize,
    /// How often the live members are compared with the last seen (members come from the
    /// ring's listings, which are this often or rarer).
    pub membership_poll: Duration,
    /// First backoff of a conflicting write; it doubles per failure up to `max_backoff`.
    pub base_backoff: Duration,
    /// Longest backoff of a failing write.
    pub max_backoff: Duration,
    /// The sharder's own request budget (over the connections of the client it is given): a
    /// rebalance writes a few labels per moved object, and neither those writes nor the
    /// replica's reconciles may starve the other. `None`: share the given client's budget.
    pub rate_limit: Option<RateLimit>,
}

/// The sharder's default request budget: a rebalance of 1,000 objects (about 3,000 label
/// writes) in about 15 s, far above what the replica's own reconciles get by default (client-go's
/// 50 requests/s), which it no longer waits behind.
pub const SHARDER_RATE_LIMIT: RateLimit = RateLimit {
    qps: 200.0,
    burst: 400,
};

impl Default for SharderConfig {
    fn default() -> Self {
        Self {
            workers: 4,
            membership_poll: Duration::from_millis(100),
            base_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_secs(5),
            rate_limit: Some(SHARDER_RATE_LIMIT),
        }
    }
}

/// The sharder of a ring: assigns the ring's objects to its live members, hands moving objects
/// over, and makes children follow their owner (rules SH11–SH16 and SH19 in
/// [the sharding module](crate::sharding) and docs/sharding.md).
///
/// Every replica may build one (it registers handlers on the informers it is given), but only
/// the replica elected for the ring runs it: [`run_elected`](Self::run_elected) competes for a
/// Lease and runs the sharder while leading, with the leader's guard on every write.
///
/// The caches are of one type `K`, usually `PartialObjectMetadata` from
/// `SharedInformerFactory::metadata_informer` (the sharder reads labels and owner references
/// only).
pub struct Sharder<K, S> {
    inner: Arc<Inner<K, S>>,
}

impl<K, S> Clone for Sharder<K, S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K, S> std::fmt::Debug for Sharder<K, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharder")
            .field("ring", &self.inner.ring_name)
            .field("kind", &self.inner.kind)
            .finish_non_exhaustive()
    }
}

struct Inner<K, S> {
    ring: Ring<S>,
    ring_name: String,
    shard: String,
    drain: String,
    client: Client,
    resource: Resource,
    kind: String,
    objects: ReadOnlyIndexer<K>,
    children: Mutex<Vec<ChildSource<K>>>,
    /// Owner key → its children (source index, key), kept by the children's handlers.
    owned: Mutex<HashMap<String, BTreeSet<(usize, String)>>>,
    /// The queue of the current term, `None` while not leading.
    queue: Mutex<Option<RateLimitingQueue<Work>>>,
    /// Work key → the resourceVersion a write of ours used as precondition: a cached copy
    /// still at that version is stale (our write's event has not arrived) and is skipped.
    written: Mutex<HashMap<Work, String>>,
    config: SharderConfig,
}

impl<K, S> Sharder<K, S>
where
    K: Object + Send + Sync + 'static,
    S: RingLeases + 'static,
{
    /// The sharder of `ring` for the objects of `resource` (of `kind`), cached by `objects`,
    /// writing through `client`. Registers an event handler on `objects`.
    pub fn new<L>(
        ring: Ring<S>,
        client: Client,
        resource: Resource,
        kind: impl Into<String>,
        objects: &SharedIndexInformer<K, L>,
        config: SharderConfig,
    ) -> Result<Self, InformerError>
    where
        L: ListerWatcher<K> + Send + Sync + 'static,
        K: Decode,
    {
        let ring_name = ring.name().to_string();
        let sharder = Self {
            inner: Arc::new(Inner {
                shard: shard_label(&ring_name),
                drain: drain_label(&ring_name),
                ring_name,
                ring,
                client: match config.rate_limit {
                    Some(limit) => client.with_rate_limit(Some(limit)),
                    None => client,
                },
                resource,
                kind: kind.into(),
                objects: objects.indexer().clone(),
                children: Mutex::new(Vec::new()),
                owned: Mutex::new(HashMap::new()),
                queue: Mutex::new(None),
                written: Mutex::new(HashMap::new()),
                config,
            }),
        };
        let weak = Arc::downgrade(&sharder.inner);
        let enqueue = move |key: String| {
            if let Some(inner) = weak.upgrade() {
                inner.enqueue(Work::Object(key));
            }
        };
        let (on_add, on_update, on_delete) = (enqueue.clone(), enqueue.clone(), enqueue);
        objects.add_event_handler(
            EventHandlerFns::new()
                .on_add(move |obj: &Arc<K>, _| on_add(obj_key(&**obj)))
                .on_update(move |_, obj: &Arc<K>| on_update(obj_key(&**obj)))
                .on_delete(move |obj: &ObjectOrTombstone<K>| {
                    if let Ok(key) = obj.key() {
                        on_delete(key.to_string())
                    }
                }),
        )?;
        Ok(sharder)
    }

    /// Makes the children in `resource`, cached by `children`, follow their controlling owner
    /// of the ring's kind (SH16). Registers an event handler on `children`.
    pub fn with_children<L>(
        self,
        resource: Resource,
        children: &SharedIndexInformer<K, L>,
    ) -> Result<Self, InformerError>
    where
        L: ListerWatcher<K> + Send + Sync + 'static,
        K: Decode,
    {
        let index = {
            let mut sources = self.inner.children.lock();
            sources.push(ChildSource {
                resource,
                cache: children.indexer().clone(),
            });
            sources.len() - 1
        };
        let weak = Arc::downgrade(&self.inner);
        let (w_add, w_update, w_delete) = (weak.clone(), weak.clone(), weak);
        children.add_event_handler(
            EventHandlerFns::new()
                .on_add(move |child: &Arc<K>, _| {
                    if let Some(inner) = w_add.upgrade() {
                        inner.child_seen(index, None, child);
                    }
                })
                .on_update(move |old: &Arc<K>, new: &Arc<K>| {
                    if let Some(inner) = w_update.upgrade() {
                        inner.child_seen(index, Some(old), new);
                    }
                })
                .on_delete(move |child: &ObjectOrTombstone<K>| {
                    let Some(inner) = w_delete.upgrade() else {
                        return;
                    };
                    let Ok(key) = child.key() else { return };
                    let last = match child {
                        ObjectOrTombstone::Object(obj) => Some(obj.clone()),
                        ObjectOrTombstone::Tombstone(t) => t.obj.clone(),
                    };
                    if let Some(owner) = last.and_then(|c| inner.owner_key(&*c)) {
                        inner.unlink(&owner, index, key.as_str());
                    }
                }),
        )?;
        Ok(self)
    }

    /// Competes for `lock` with `config` (the ring's sharder Lease, one for all replicas) and
    /// runs the sharder while leading, until `cancel` fires; after a lost term it competes
    /// again. Releases the Lease on cancel (unless the config says otherwise).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future releases nothing (the sharder Lease runs out on its
    /// own). Stop it with `cancel`.
    pub async fn run_elected<L: LeaseLock>(
        &self,
        config: LeaderElectionConfig,
        lock: L,
        cancel: CancellationToken,
    ) {
        let lock = Arc::new(lock);
        while !cancel.is_cancelled() {
            let elector = match LeaderElector::new(config.clone(), lock.clone()) {
                Ok(elector) => elector,
                Err(error) => {
                    tracing::error!(ring = %self.inner.ring_name, %error, "cannot elect a sharder");
                    return;
                }
            };
            let this = self.clone();
            elector
                .run_leading(cancel.clone(), move |leader, guard| async move {
                    this.run(leader, guard).await
                })
                .await;
        }
    }

    /// Runs the sharder for one term: every object and child is examined, then every event and
    /// every change of the members, until `leader` fires. Each write is sent only while `guard`
    /// is valid (and `guard` protects the API calls too).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future abandons the term's queue and its writes in flight. End
    /// the term with `leader`.
    pub async fn run(&self, leader: CancellationToken, guard: LeaseGuard) {
        let limiter = ItemExponentialFailureRateLimiter::new(
            self.inner.config.base_backoff,
            self.inner.config.max_backoff,
        );
        let queue = RateLimitingQueue::new(limiter);
        *self.inner.queue.lock() = Some(queue.clone());
        self.inner.written.lock().clear();
        // A fresh listing before the first decisions: a sharder elected right after its
        // replica started may not have listed the ring yet, and would otherwise assign to the
        // few members it saw and move the objects again a retry period later.
        if let Err(error) = self.inner.ring.refresh().await {
            tracing::warn!(ring = %self.inner.ring_name, %error, "failed to list the ring's leases");
        }
        for key in self.inner.objects.list_keys() {
            queue.add(Work::Object(key.to_string()));
        }
        let poll = async {
            let mut last = self.inner.ring.members();
            loop {
                tokio::select! {
                    biased;
                    () = leader.cancelled() => return,
                    () = tokio::time::sleep(self.inner.config.membership_poll) => {}
                }
                let members = self.inner.ring.members();
                if members != last {
                    tracing::info!(ring = %self.inner.ring_name, ?members, "members changed");
                    for key in self.inner.objects.list_keys() {
                        queue.add(Work::Object(key.to_string()));
                    }
                    last = members;
                }
            }
        };
        let inner = self.inner.clone();
        let workers = Controller::new(queue.clone())
            .workers(self.inner.config.workers.max(1))
            .run(leader.clone(), move |work: Work| {
                let (inner, guard) = (inner.clone(), guard.clone());
                async move { inner.process(work, &guard).await }
            });
        futures::join!(poll, workers);
        *self.inner.queue.lock() = None;
    }
}

fn obj_key<K: Object + ?Sized>(obj: &K) -> String {
    match obj.namespace().filter(|ns| !ns.is_empty()) {
        Some(ns) => format!("{ns}/{}", obj.name()),
        None => obj.name().to_string(),
    }
}

impl<K, S> Inner<K, S>
where
    K: Object + Send + Sync + 'static,
    S: RingLeases + 'static,
{
    fn enqueue(&self, work: Work) {
        if let Some(queue) = self.queue.lock().as_ref() {
            queue.add(work);
        }
    }

    /// The key of `child`'s controlling owner, if it is of the ring's resource and kind.
    fn owner_key(&self, child: &K) -> Option<String> {
        let owner = controller_of(child)?;
        if owner.kind != self.kind
            || group_of(&owner.api_version) != self.resource.group
            || owner.name.is_empty()
        {
            return None;
        }
        Some(match child.namespace().filter(|ns| !ns.is_empty()) {
            Some(ns) if self.resource.namespaced => format!("{ns}/{}", owner.name),
            _ => owner.name.clone(),
        })
    }

    fn unlink(&self, owner: &str, index: usize, key: &str) {
        let mut owned = self.owned.lock();
        if let Some(set) = owned.get_mut(owner) {
            set.remove(&(index, key.to_string()));
            if set.is_empty() {
                owned.remove(owner);
            }
        }
    }

    fn child_seen(&self, index: usize, old: Option<&Arc<K>>, child: &Arc<K>) {
        let key = obj_key(&**child);
        let old_owner = old.and_then(|old| self.owner_key(old));
        let owner = self.owner_key(child);
        if old_owner != owner {
            if let Some(old_owner) = old_owner {
                self.unlink(&old_owner, index, &key);
            }
        }
        if let Some(owner) = owner {
            self.owned
                .lock()
                .entry(owner.clone())
                .or_default()
                .insert((index, key.clone()));
            self.enqueue(Work::Child(index, key));
            // An owner waiting for its children (SH19) is looked at again as each one moves.
            let relabelled =
                old.is_none_or(|old| old.label(&self.shard) != child.label(&self.shard));
            if relabelled {
                self.enqueue(Work::Object(owner));
            }
        }
    }

    /// The cached children of `owner` that do not carry the label `to` yet (SH19).
    fn children_not_labelled(&self, owner: &str, to: &str) -> Vec<(usize, String)> {
        let children: Vec<(usize, String)> = self
            .owned
            .lock()
            .get(owner)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default();
        let sources = self.children.lock();
        children
            .into_iter()
            .filter(|(index, key)| {
                sources
                    .get(*index)
                    .and_then(|source| source.cache.get_by_key(key))
                    .is_some_and(|child| child.label(&self.shard) != Some(to))
            })
            .collect()
    }

    /// Is the cached copy at the version our last write to `work` was conditioned on? Then the
    /// write's own event has not arrived yet: acting on it would only conflict.
    fn stale(&self, work: &Work, rv: Option<&str>) -> bool {
        let mut written = self.written.lock();
        match written.get(work) {
            Some(before) if Some(before.as_str()) == rv => true,
            Some(_) => {
                written.remove(work);
                false
            }
            None => false,
        }
    }

    async fn process(&self, work: Work, guard: &LeaseGuard) -> Result<Action, ClientError> {
        if !guard.is_valid() {
            // The term is ending: the next one examines everything again.
            return Ok(Action::Done);
        }
        match &work {
            Work::Object(key) => {
                let Some(obj) = self.objects.get_by_key(key) else {
                    self.written.lock().remove(&work);
                    return Ok(Action::Done);
                };
                if self.stale(&work, obj.resource_version()) {
                    return Ok(Action::Done);
                }
                let members = self.ring.members();
                let step = plan(
                    key,
                    obj.label(&self.shard),
                    obj.label(&self.drain).is_some(),
                    &members,
                );
                if let Step::Assign(to) = &step {
                    let waiting = self.children_not_labelled(key, to);
                    if !waiting.is_empty() {
                        // Children first (SH19): each relabel's event queues the owner again.
                        tracing::debug!(ring = %self.ring_name, key, children = waiting.len(), "children move first");
                        for (index, child) in waiting {
                            self.enqueue(Work::Child(index, child));
                        }
                        return Ok(Action::Retry);
                    }
                }
                let labels = match &step {
                    Step::Keep | Step::AwaitAck => None,
                    Step::Assign(to) => Some(json!({ &self.shard: to, &self.drain: null })),
                    Step::Drain => Some(json!({ &self.drain: obj.label(&self.shard) })),
                    Step::CancelDrain => Some(json!({ &self.drain: null })),
                };
                let action = match labels {
                    Some(labels) => {
                        tracing::debug!(ring = %self.ring_name, key, ?step, "sharder writes");
                        self.write(&work, &self.resource, &*obj, labels, guard)
                            .await?
                    }
                    None => Action::Done,
                };
                // Children follow the owner's label as it is now cached; after our write,
                // its event queues the owner again and then the children.
                let children: Vec<(usize, String)> = self
                    .owned
                    .lock()
                    .get(key)
                    .map(|set| set.iter().cloned().collect())
                    .unwrap_or_default();
                for (index, child) in children {
                    self.enqueue(Work::Child(index, child));
                }
                Ok(action)
            }
            Work::Child(index, key) => {
                let (resource, child) = {
                    let sources = self.children.lock();
                    let Some(source) = sources.get(*index) else {
                        return Ok(Action::Done);
                    };
                    (source.resource.clone(), source.cache.get_by_key(key))
                };
                let Some(child) = child else {
                    self.written.lock().remove(&work);
                    return Ok(Action::Done);
                };
                if self.stale(&work, child.resource_version()) {
                    return Ok(Action::Done);
                }
                let Some(owner_key) = self.owner_key(&child) else {
                    return Ok(Action::Done);
                };
                let owner = self.objects.get_by_key(&owner_key);
                let owner_label = owner.as_deref().and_then(|o| o.label(&self.shard));
                let members = self.ring.members();
                match plan_child(child.label(&self.shard), &owner_key, owner_label, &members) {
                    Some(to) => {
                        self.write(&work, &resource, &*child, json!({ &self.shard: to }), guard)
                            .await
                    }
                    None => Ok(Action::Done),
                }
            }
        }
    }

    /// Merge-patches `labels` onto `obj` with its seen resourceVersion as precondition (SH15).
    async fn write(
        &self,
        work: &Work,
        resource: &Resource,
        obj: &K,
        labels: Value,
        guard: &LeaseGuard,
    ) -> Result<Action, ClientError> {
        let Some(rv) = obj.resource_version().filter(|rv| !rv.is_empty()) else {
            tracing::warn!(object = obj.name(), "no resourceVersion: not written");
            return Ok(Action::Done);
        };
        let mut metadata = Map::new();
        metadata.insert("resourceVersion".into(), Value::from(rv));
        metadata.insert("labels".into(), labels);
        let patch = json!({ "metadata": metadata });
        let api: Api<DynamicObject> = match obj.namespace().filter(|ns| !ns.is_empty()) {
            Some(ns) if resource.namespaced => {
                Api::namespaced_with(self.client.clone(), resource.clone(), ns)
            }
            _ => Api::all_with(self.client.clone(), resource.clone()),
        };
        let api = guard.protect(api);
        match api
            .patch(obj.name(), &PatchOptions::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {
                self.written.lock().insert(work.clone(), rv.to_string());
                Ok(Action::Done)
            }
            // Changed since seen: its event brings a fresher copy; try that after a backoff.
            Err(ClientError::Conflict(_)) => Ok(Action::Retry),
            Err(ClientError::NotFound(_)) => Ok(Action::Done),
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use workqueue::shared_informer::reflector::store_index::DynamicObject;

    fn members(names: &[&str]) -> Vec<String> {
        names.iter().map(|m| m.to_string()).collect()
    }

    /// A key owned by `owner` among `all`.
    fn key_owned_by(owner: &str, all: &[String]) -> String {
        (0..)
            .map(|i| format!("ns/w-{i}"))
            .find(|k| owner_of(k, all.iter().map(String::as_str)) == Some(owner))
            .unwrap()
    }

    #[test]
    fn an_unassigned_object_is_assigned_to_its_owner_at_once() {
        // SH11
        let all = members(&["a", "b", "c"]);
        let key = key_owned_by("b", &all);
        assert_eq!(plan(&key, None, false, &all), Step::Assign("b".into()));
        assert_eq!(
            plan(&key, None, true, &all),
            Step::Assign("b".into()),
            "a stray drain label goes with the assignment"
        );
        assert_eq!(plan(&key, None, false, &[]), Step::Keep, "no members");
    }

    #[test]
    fn a_live_owner_is_drained_before_the_object_moves() {
        // SH12
        let all = members(&["a", "b", "c"]);
        let key = key_owned_by("c", &all);
        assert_eq!(plan(&key, Some("a"), false, &all), Step::Drain);
        assert_eq!(plan(&key, Some("a"), true, &all), Step::AwaitAck);
        // The acknowledgement removed both labels: now the new owner is written.
        assert_eq!(plan(&key, None, false, &all), Step::Assign("c".into()));
    }

    #[test]
    fn a_dead_owner_loses_its_objects_without_hand_over() {
        // SH13
        let all = members(&["a", "b"]);
        let key = key_owned_by("b", &all);
        assert_eq!(plan(&key, Some("z"), false, &all), Step::Assign("b".into()));
        assert_eq!(plan(&key, Some("z"), true, &all), Step::Assign("b".into()));
    }

    #[test]
    fn a_drain_whose_reason_went_away_is_withdrawn() {
        // SH14
        let all = members(&["a", "b"]);
        let key = key_owned_by("a", &all);
        assert_eq!(plan(&key, Some("a"), true, &all), Step::CancelDrain);
        assert_eq!(plan(&key, Some("a"), false, &all), Step::Keep);
    }

    #[test]
    fn a_join_writes_only_the_objects_that_move() {
        // SH15: of 600 keys, those whose owner stays get Keep; the others (about a third) Drain.
        let before = members(&["a", "b"]);
        let after = members(&["a", "b", "c"]);
        let mut drained = 0;
        for i in 0..600 {
            let key = format!("ns/w-{i}");
            let owner = owner_of(&key, before.iter().map(String::as_str)).unwrap();
            match plan(&key, Some(owner), false, &after) {
                Step::Keep => {}
                Step::Drain => drained += 1,
                other => panic!("{key}: {other:?}"),
            }
        }
        assert!((120..280).contains(&drained), "{drained} of 600 moved");
    }

    #[test]
    fn a_child_follows_its_owners_live_label_and_else_its_next_owner() {
        // SH16
        let all = members(&["a", "b", "c"]);
        let key = key_owned_by("c", &all);
        assert_eq!(plan_child(None, &key, Some("a"), &all), Some("a".into()));
        assert_eq!(
            plan_child(Some("b"), &key, Some("a"), &all),
            Some("a".into())
        );
        assert_eq!(plan_child(Some("a"), &key, Some("a"), &all), None);
        // The owner drained and acknowledged (no label): the child moves to the next owner
        // before the owner is assigned (SH19).
        assert_eq!(plan_child(Some("a"), &key, None, &all), Some("c".into()));
        assert_eq!(plan_child(Some("c"), &key, None, &all), None);
        // The owner's member is gone: the same.
        assert_eq!(
            plan_child(Some("z"), &key, Some("z"), &all),
            Some("c".into())
        );
        // No member at all: nothing to do.
        assert_eq!(plan_child(Some("a"), &key, None, &[]), None);
    }

    fn widget_sharder() -> Sharder<DynamicObject, crate::sharding::MemoryRingLeases> {
        use workqueue::shared_informer::reflector::ClusterConfig;
        use workqueue::shared_informer::SharedInformerFactory;
        // Informers never started: the handlers and the index are exercised by hand.
        let client = Client::new(&ClusterConfig::new("http://127.0.0.1:1").unwrap()).unwrap();
        let factory = SharedInformerFactory::with_client(client.clone());
        let widgets = Resource::namespaced("example.com", "v1", "widgets");
        let objects = factory.informer::<DynamicObject>(widgets.clone()).unwrap();
        let children = factory
            .informer::<DynamicObject>(Resource::namespaced("", "v1", "configmaps"))
            .unwrap();
        let ring = Ring::new(
            "widgets",
            LeaderElectionConfig::new("widgets", "a"),
            crate::sharding::MemoryRingLeases::new(),
        )
        .unwrap();
        Sharder::new(
            ring,
            client,
            widgets,
            "Widget",
            &objects,
            SharderConfig::default(),
        )
        .unwrap()
        .with_children(Resource::namespaced("", "v1", "configmaps"), &children)
        .unwrap()
    }

    fn child(
        name: &str,
        api_version: &str,
        kind: &str,
        owner: &str,
        controller: bool,
    ) -> Arc<DynamicObject> {
        let mut cm = DynamicObject::new("v1", "ConfigMap")
            .within("ns")
            .named(name);
        cm.metadata.owner_references = Some(vec![
            workqueue::shared_informer::reflector::store_index::OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: owner.into(),
                uid: "u".into(),
                controller: Some(controller),
                block_owner_deletion: None,
            },
        ]);
        Arc::new(cm)
    }

    #[tokio::test]
    async fn children_are_indexed_under_their_controlling_owner_of_the_rings_kind() {
        // SH16: only a controller reference to the ring's group and kind (any version) counts.
        let sharder = widget_sharder();
        let inner = &sharder.inner;
        let web = child("web-config", "example.com/v1beta1", "Widget", "web", true);
        assert_eq!(inner.owner_key(&web).as_deref(), Some("ns/web"));
        for other in [
            child("x", "example.com/v1", "Gadget", "web", true),
            child("x", "other.com/v1", "Widget", "web", true),
            child("x", "example.com/v1", "Widget", "web", false),
        ] {
            assert_eq!(inner.owner_key(&other), None);
        }
        inner.child_seen(0, None, &web);
        let owned = |owner: &str| inner.owned.lock().get(owner).cloned().unwrap_or_default();
        assert_eq!(owned("ns/web"), [(0, "ns/web-config".to_string())].into());
        // Adopted by another widget: moved in the index.
        let adopted = child("web-config", "example.com/v1", "Widget", "api", true);
        inner.child_seen(0, Some(&web), &adopted);
        assert!(owned("ns/web").is_empty());
        assert_eq!(owned("ns/api").len(), 1);
        inner.unlink("ns/api", 0, "ns/web-config");
        assert!(inner.owned.lock().is_empty(), "no empty sets left behind");
    }

    #[test]
    fn selectors_and_labels_name_the_ring() {
        assert_eq!(drain_label("w"), "drain.sharding.informer-rs.io/w");
        assert_eq!(
            shard_selector("w", "a"),
            "shard.sharding.informer-rs.io/w=a"
        );
    }
}
