//! Range mode's runtime: a replica that lists, watches, caches and reconciles only the virtual
//! ranges of the hash space it holds, with no write to any object to move one (unless its
//! holder died), and no cache of all objects anywhere.
//!
//! ```text
//!   RangeShard::run, every tick of the ring's retry period:
//!     ring members ──► RangeTable ──► decide (claims.rs) ──► release / claim / act / touch
//!     claim r:  watch r (range_watch.rs: its watch group's informer now selects r too),
//!               publish <ring>-ranges-<me>.data.held
//!     act r:    after a fresh listing of every member's claims (SH21); enqueue r's keys
//!     release:  stop admitting r, wait for r's reconciles in flight, touch r's keys whose
//!               last write got no answer, unpublish, stop watching r (SH22)
//!   RangeShard::run_controller: workers over the queue; a key is reconciled only when its
//!     object is cached in a range acted on, with a RangeWriter (guard + range + resourceVersion)
//! ```
//!
//! The hand-over rules are SH21–SH23 ([`super::claims`]); the argument is in docs/sharding.md.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{DynamicObject, Object};
use workqueue::shared_informer::reflector::{
    Api, Client, ClientError, CreateOptions, Decode, ListOptions, Patch, PatchOptions, Resource,
};
use workqueue::RateLimitingQueue;

use crate::leader_election::LeaseGuard;
use crate::runner::{Action, Controller};

use super::claims::{
    claims_name, decide, encode_claims, parse_claims, PeerClaims, RangeDecision, CLAIMS_KEY,
};
use super::fence::{seen_version, with_precondition, FenceError};
use super::handover::LAPSED_RETRY;
use super::range_watch::{child_range, range_label, range_of, Children, RangeWatches, WatchSpec};
use super::ranges::RangeTable;
use super::ring::{Ring, RingLeases, RING_LABEL};

/// The annotation a touch writes (SH23): `touched.sharding.informer-rs.io/<ring>`, valued with
/// the toucher and a mark of the touch, so that every touch changes the object.
pub fn touch_annotation(ring: &str) -> String {
    format!("touched.sharding.informer-rs.io/{ring}")
}

/// How long a graceful leave waits for the reconciles in flight and the touches of unanswered
/// keys before it unpublishes what it could release.
pub const LEAVE_BOUND: Duration = Duration::from_secs(30);

/// How many times a touch reads an object again after a conflict before giving up for this tick.
const TOUCH_TRIES: usize = 20;

/// How many touches of one range are in flight at once: a dead member's range of a few hundred
/// objects is touched in a few round trips rather than one object after another (the client's
/// rate limit still paces them).
const TOUCH_CONCURRENCY: usize = 16;

/// The slowest a failing touch or publish is retried.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

fn configmaps(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        Resource::namespaced("", "v1", "configmaps"),
        namespace,
    )
}

/// Whether a failed request got an answer: the server refused it, or nothing was sent. A
/// timeout or a broken connection leaves the write's fate unknown (SH22).
fn answered(error: &ClientError) -> bool {
    !matches!(
        error,
        ClientError::Transport { .. } | ClientError::Timeout(_)
    )
}

/// What a [`RangeShard`] holds, acts on and has in flight.
///
/// Invariants: `acting ⊆ held`, and is empty unless `acting_term` is the guard's term; `in_flight` counts the admitted reconciles of each range, and a
/// range leaves `held` only when its count is zero and its `unknown` keys were touched (SH22);
/// `watches` follows `held` plus the ranges claimed in the current tick.
struct State<K> {
    /// Published in the claims ConfigMap (after the publish succeeded).
    held: BTreeSet<u32>,
    acting: BTreeSet<u32>,
    /// The shard lease's term `acting` was granted in: acting counts only while the lease has
    /// been valid since, without a lapse ([`LeaseGuard::term`]).
    acting_term: Option<u64>,
    in_flight: BTreeMap<u32, usize>,
    /// Keys of each range whose last write got no answer, `true` for a child's.
    unknown: BTreeMap<u32, BTreeSet<(bool, String)>>,
    /// Ranges this member's previous incarnation held: touched before acted on or released.
    inherited: BTreeSet<u32>,
    watches: RangeWatches<K>,
    /// The claims ConfigMap's resourceVersion, once read or written.
    claims_version: Option<String>,
    /// The stored claims may differ from `held`: others removed ranges from them while this
    /// member's lease had lapsed (SH23's cleanup), or a write of ours whose answer was lost
    /// landed. Read again before anything else (SH21: a member acts only on what its stored
    /// claims name).
    stale_claims: bool,
}

impl<K> State<K> {
    /// Whether `range` is acted on now: granted in the guard's current term, still valid.
    fn acts_on(&self, range: u32, guard: &LeaseGuard) -> bool {
        guard.is_valid() && self.acting_term == Some(guard.term()) && self.acting.contains(&range)
    }
}

impl<K> Default for State<K> {
    fn default() -> Self {
        Self {
            held: BTreeSet::new(),
            acting: BTreeSet::new(),
            acting_term: None,
            in_flight: BTreeMap::new(),
            unknown: BTreeMap::new(),
            inherited: BTreeSet::new(),
            watches: RangeWatches::default(),
            claims_version: None,
            stale_claims: false,
        }
    }
}

struct Inner<K> {
    ring: String,
    identity: String,
    namespace: String,
    client: Client,
    resource: Resource,
    children: Option<Children>,
    guard: LeaseGuard,
    queue: RateLimitingQueue<String>,
    state: Mutex<State<K>>,
    /// Told whenever a reconcile in flight ends (a leave waits on it).
    drained: Notify,
    touch_key: String,
    /// Distinguishes this process's touches from any earlier one's.
    incarnation: String,
}

/// A replica of a shard ring in range mode, for one namespaced resource: every tick of the
/// ring it releases, claims, acts on or touches its ranges (SH21–SH23), with one informer per
/// held range; docs/sharding.md gives the design and the safety argument.
///
/// ```no_run
/// use controller::leader_election::LeaderElectionConfig;
/// use controller::sharding::{ApiRingLeases, FenceError, RangeShard, Ring};
/// use controller::{Action, CancellationToken};
/// use serde_json::json;
/// use workqueue::shared_informer::reflector::store_index::DynamicObject;
/// use workqueue::shared_informer::reflector::{Client, Resource};
/// use workqueue::{default_controller_rate_limiter, RateLimitingQueue};
///
/// # async fn replica(client: Client, identity: &str) -> Result<(), Box<dyn std::error::Error>> {
/// // The ring's token is its own: the lease is released only after the shard has left.
/// let (stop, ring_stop) = (CancellationToken::new(), CancellationToken::new());
/// let leases = ApiRingLeases::new(client.clone(), "default");
/// let ring = Ring::new("widgets", LeaderElectionConfig::new("widgets", identity), leases)?;
/// let membership = tokio::spawn({
///     let (ring, ring_stop) = (ring.clone(), ring_stop.clone());
///     async move { ring.run(ring.lock(), ring_stop).await }
/// });
/// let queue = RateLimitingQueue::new(default_controller_rate_limiter());
/// let widgets = Resource::namespaced("example.com", "v1", "widgets");
/// let shard: RangeShard<DynamicObject> = RangeShard::new(&ring, client, widgets, "default", queue);
/// let ranges = tokio::spawn({
///     let (shard, ring, stop) = (shard.clone(), ring.clone(), stop.clone());
///     async move { shard.run(&ring, stop).await }
/// });
/// shard
///     .run_controller(4, stop, |widget, writer| async move {
///         writer.merge_patch_status(&widget, &json!({"status": {"ready": true}})).await?;
///         Ok::<_, FenceError>(Action::Done)
///     })
///     .await; // until `stop` is cancelled (a SIGTERM handler, say)
/// ranges.await?; // every range released
/// ring_stop.cancel();
/// membership.await??;
/// # Ok(()) }
/// ```
pub struct RangeShard<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for RangeShard<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for RangeShard<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.lock();
        f.debug_struct("RangeShard")
            .field("ring", &self.inner.ring)
            .field("identity", &self.inner.identity)
            .field("held", &state.held)
            .field("acting", &state.acting)
            .finish_non_exhaustive()
    }
}

impl<K: Object + Decode + Send + Sync + 'static> RangeShard<K> {
    /// `ring`'s replica for `resource` in `namespace`, feeding `queue` with the keys of the
    /// ranges it holds. Its claims ConfigMap is written in `namespace`.
    pub fn new<S: RingLeases>(
        ring: &Ring<S>,
        client: Client,
        resource: Resource,
        namespace: &str,
        queue: RateLimitingQueue<String>,
    ) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Self {
            inner: Arc::new(Inner {
                ring: ring.name().to_string(),
                identity: ring.identity().to_string(),
                namespace: namespace.to_string(),
                client,
                resource,
                children: None,
                guard: ring.guard(),
                queue,
                state: Mutex::new(State::default()),
                drained: Notify::new(),
                touch_key: touch_annotation(ring.name()),
                incarnation: format!("{nanos:x}"),
            }),
        }
    }

    /// This shard owns children in `children` (same namespace): objects whose controller owner
    /// reference names an object of kind `owner_kind` of the shard's resource. Each held range
    /// then has a children informer too (the label [`range_label`] naming the range), a child's
    /// events queue its owner's key, a touch covers the range's children, and the
    /// [`RangeWriter`] creates and writes children ([`RangeWriter::create_child`],
    /// [`RangeWriter::merge_patch_child`]). Call it on the shard [`new`](Self::new) returned,
    /// before it is cloned or run: a clone made earlier stays without children.
    #[must_use]
    pub fn owns(self, children: Resource, owner_kind: &str) -> Self {
        let inner = &self.inner;
        Self {
            inner: Arc::new(Inner {
                ring: inner.ring.clone(),
                identity: inner.identity.clone(),
                namespace: inner.namespace.clone(),
                client: inner.client.clone(),
                resource: inner.resource.clone(),
                children: Some(Children {
                    resource: children,
                    owner_kind: owner_kind.to_string(),
                }),
                guard: inner.guard.clone(),
                queue: inner.queue.clone(),
                state: Mutex::new(State::default()),
                drained: Notify::new(),
                touch_key: inner.touch_key.clone(),
                incarnation: inner.incarnation.clone(),
            }),
        }
    }

    /// The cached child `key` (`namespace/name`), if it lies in a range acted on.
    pub fn child(&self, key: &str) -> Option<Arc<DynamicObject>> {
        let state = self.inner.state.lock();
        let (range, child) = state.watches.child(&self.inner.ring, key)?;
        state.acts_on(range, &self.inner.guard).then_some(child)
    }

    /// The ranges published as held, in order.
    pub fn held(&self) -> Vec<u32> {
        self.inner.state.lock().held.iter().copied().collect()
    }

    /// The ranges acted on now, in order (none while the shard lease is lapsed, nor after a
    /// lapse until the ranges are granted again).
    pub fn acting(&self) -> Vec<u32> {
        let state = self.inner.state.lock();
        (0..super::VIRTUAL_RANGES)
            .filter(|r| state.acts_on(*r, &self.inner.guard))
            .collect()
    }

    /// How many objects (and children) the held ranges' caches hold.
    pub fn cached(&self) -> usize {
        self.inner.state.lock().watches.len()
    }

    /// How many watch groups are open (at most 8 per resource, whatever the ranges held).
    pub fn watch_groups(&self) -> usize {
        self.inner.state.lock().watches.groups()
    }

    /// The writer reconciles write with.
    pub fn writer(&self) -> RangeWriter<K> {
        RangeWriter {
            api: self.inner.guard.protect(Api::namespaced_with(
                self.inner.client.clone(),
                self.inner.resource.clone(),
                &self.inner.namespace,
            )),
            shard: self.clone(),
        }
    }

    /// Moves the replica's ranges as the ring changes, one tick per `ring`'s retry period, until
    /// `cancel` fires; then leaves: it stops acting, lets the reconciles in flight finish,
    /// touches the keys whose last write got no answer, unpublishes its claims (within
    /// [`LEAVE_BOUND`]) and stops its informers. `ring` must be the one given to
    /// [`new`](Self::new) and be [run](Ring::run) beside it, **stopped only after this returns**:
    /// the leave needs the shard lease, and a lease released first makes the others take this
    /// member for dead and touch its ranges (a write per object). A failing tick is logged and
    /// tried again at the next one.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: stop it with `cancel`. Dropped (or the process killed), the claims stay
    /// published: to the others, a member whose lease runs out, whose ranges their next holders
    /// touch (SH23).
    pub async fn run<S: RingLeases>(&self, ring: &Ring<S>, cancel: CancellationToken) {
        let period = ring.retry_period();
        let mut failures = 0u32;
        loop {
            let tick = tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                tick = self.tick(ring, &cancel) => tick,
            };
            match tick {
                Ok(()) => failures = 0,
                Err(error) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(ring = %self.inner.ring, identity = %self.inner.identity,
                        %error, failures, "range mode: tick failed; trying again");
                }
            }
            let backoff = period
                .saturating_mul(failures.min(3) + 1)
                .min(MAX_BACKOFF.max(period));
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                () = tokio::time::sleep(backoff) => {}
            }
        }
        self.leave().await;
    }

    /// A graceful leave (SH22 for every held range): stop acting, let the reconciles in flight
    /// finish, touch the keys whose last write got no answer, and unpublish what was released,
    /// all within [`LEAVE_BOUND`]; then stop the informers. A range that could not be released
    /// (a reconcile still running, a touch that failed, the shard lease already gone) stays
    /// claimed, and its next holder touches it once this member's lease has run out (SH23).
    async fn leave(&self) {
        let inner = &self.inner;
        inner.state.lock().acting.clear();
        let deadline = tokio::time::Instant::now() + LEAVE_BOUND;
        // The run's token is cancelled by now: the leave's touches get one of their own.
        let leaving = CancellationToken::new();
        let mut held = inner.state.lock().held.clone();
        while !held.is_empty() && inner.guard.is_valid() {
            let drained = inner.drained.notified();
            for range in held.clone() {
                match self.release(range, &leaving).await {
                    Ok(true) => {
                        held.remove(&range);
                    }
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(range, %error, "range mode: not released on leaving")
                    }
                }
            }
            let busy = inner.state.lock().in_flight.values().any(|n| *n > 0);
            if held.is_empty() || !busy || tokio::time::Instant::now() >= deadline {
                break;
            }
            let _ = tokio::time::timeout_at(deadline, drained).await;
        }
        let publish = self.publish(&held);
        match tokio::time::timeout_at(deadline + MAX_BACKOFF, publish).await {
            Ok(Ok(())) if held.is_empty() => {
                tracing::info!(identity = %inner.identity, "range mode: left, every range released");
            }
            Ok(Ok(())) => tracing::warn!(identity = %inner.identity, ?held,
                "range mode: left with ranges still claimed; their next holders touch them"),
            Ok(Err(error)) => tracing::warn!(%error,
                "range mode: left without unpublishing; the next holders touch every range"),
            Err(_) => tracing::warn!("range mode: left without unpublishing (timed out)"),
        }
        let mut state = inner.state.lock();
        state.acting.clear();
        state.watches.stop_all();
    }

    /// One round: read what an earlier incarnation published (once), release, claim, publish,
    /// list every member's claims, refresh the ring, and act or touch (SH21–SH23).
    async fn tick<S: RingLeases>(
        &self,
        ring: &Ring<S>,
        cancel: &CancellationToken,
    ) -> Result<(), ClientError> {
        let inner = &self.inner;
        {
            // Not a member by its own clock, or no longer the one that started acting (a lapse
            // in between, however short): stop acting; what is held stays published, so that
            // others wait for it or, once its lease has run out, touch (SH22, SH23).
            let mut state = inner.state.lock();
            if !inner.guard.is_valid() || state.acting_term != Some(inner.guard.term()) {
                state.acting.clear();
            }
        }
        if !inner.guard.is_valid() {
            return Ok(());
        }
        if inner.state.lock().claims_version.is_none() {
            self.inherit(cancel).await?;
        } else if inner.state.lock().stale_claims {
            self.reread(cancel).await?;
        }
        let members = ring.members();
        let table = if members.iter().any(|m| *m == inner.identity) {
            RangeTable::new(members.iter().map(String::as_str))
        } else {
            RangeTable::new(std::iter::empty())
        };
        let plan = {
            let state = inner.state.lock();
            decide(&inner.identity, &table, &state.held, &state.acting, &[])
        };
        let mut held = inner.state.lock().held.clone();
        for range in &plan.release {
            inner.state.lock().acting.remove(range);
            if self.release(*range, cancel).await? {
                held.remove(range);
            }
        }
        held.extend(plan.claim.iter().copied());
        // Watched before published: the cache warms while others release.
        self.follow(&held, cancel);
        self.publish(&held).await?;
        let peers = self.list_claims().await?;
        // Our own claims as stored must be what we hold: the others cleaned them up if they
        // took us for dead (a lapse, a freeze, a partition), and acting on a range our stored
        // claims do not name would let its next owner start without waiting for us (SH21).
        let stored = peers.iter().find(|(m, _)| *m == inner.identity);
        let held_now = inner.state.lock().held.clone();
        if stored.map_or(!held_now.is_empty(), |(_, claims)| *claims != held_now) {
            tracing::info!(identity = %inner.identity, stored = ?stored.map(|s| &s.1),
                held = ?held_now, "range mode: our stored claims changed; reading them again");
            let mut state = inner.state.lock();
            state.acting.clear();
            state.stale_claims = true;
            return Ok(());
        }
        // After the listing: a member whose claims were listed wrote its Lease before them,
        // so a fresh view counts it live (SH7), never dead for want of having seen it.
        if let Err(error) = ring.refresh().await {
            tracing::warn!(%error, "range mode: could not refresh the ring; acting on no new range");
            return Ok(());
        }
        let live = ring.members();
        let peers: Vec<PeerClaims> = peers
            .into_iter()
            .map(|(member, held)| PeerClaims {
                live: live.contains(&member),
                member,
                held,
            })
            .collect();
        let decision = {
            let state = inner.state.lock();
            decide(&inner.identity, &table, &state.held, &state.acting, &peers)
        };
        self.act_on(decision, cancel).await
    }

    /// Acts on the ranges `decision` allows, touching first those a dead member (or this
    /// member's previous incarnation) claimed.
    async fn act_on(
        &self,
        decision: RangeDecision,
        cancel: &CancellationToken,
    ) -> Result<(), ClientError> {
        let inherited = self.inner.state.lock().inherited.clone();
        let mut to_touch: BTreeMap<u32, Vec<String>> = decision.touch;
        for range in decision.act.iter().filter(|r| inherited.contains(r)) {
            to_touch.insert(*range, vec![self.inner.identity.clone()]);
        }
        for range in decision.act.iter().filter(|r| !inherited.contains(r)) {
            self.start_acting(*range);
        }
        for (range, dead) in to_touch {
            if !self.synced(range) {
                continue;
            }
            if !self.touch_range(range, cancel).await? {
                continue;
            }
            tracing::info!(range, ?dead, "range mode: range touched; acting on it");
            self.inner.state.lock().inherited.remove(&range);
            for member in dead.iter().filter(|m| **m != self.inner.identity) {
                self.unclaim_for(member, range).await;
            }
            self.start_acting(range);
        }
        Ok(())
    }

    /// Starts acting on `range`: its cached keys are queued (their events may have been
    /// skipped while it was waited for).
    fn start_acting(&self, range: u32) {
        let keys = {
            let mut state = self.inner.state.lock();
            let term = self.inner.guard.term();
            if state.acting_term != Some(term) {
                state.acting.clear();
                state.acting_term = Some(term);
            }
            if !state.held.contains(&range) || !state.acting.insert(range) {
                return;
            }
            state.watches.keys_in(&self.inner.ring, range).0
        };
        for key in keys {
            self.inner.queue.add(key);
        }
    }

    fn synced(&self, range: u32) -> bool {
        self.inner.state.lock().watches.synced(range)
    }

    /// Watches exactly `held` (see [`RangeWatches::follow`]).
    fn follow(&self, held: &BTreeSet<u32>, cancel: &CancellationToken) {
        let inner = &self.inner;
        let spec = WatchSpec {
            ring: &inner.ring,
            client: &inner.client,
            namespace: &inner.namespace,
            resource: &inner.resource,
            children: inner.children.as_ref(),
            queue: &inner.queue,
        };
        inner.state.lock().watches.follow(&spec, held, cancel);
    }

    /// Lets `range` go if its reconciles in flight are done and its unanswered keys touched
    /// (SH22); `Ok(false)` when it must wait for a later tick.
    async fn release(&self, range: u32, cancel: &CancellationToken) -> Result<bool, ClientError> {
        let (busy, unknown, inherited) = {
            let state = self.inner.state.lock();
            (
                state.in_flight.get(&range).copied().unwrap_or(0) > 0,
                state.unknown.get(&range).cloned().unwrap_or_default(),
                state.inherited.contains(&range),
            )
        };
        if busy {
            return Ok(false);
        }
        if inherited {
            if !self.synced(range) || !self.touch_range(range, cancel).await? {
                return Ok(false);
            }
        } else {
            for (child, key) in &unknown {
                let resource = match (&self.inner.children, child) {
                    (Some(children), true) => &children.resource,
                    _ => &self.inner.resource,
                };
                if !self.touch_key(resource, key, None, cancel).await? {
                    return Ok(false);
                }
            }
        }
        let mut state = self.inner.state.lock();
        state.unknown.remove(&range);
        state.inherited.remove(&range);
        Ok(true)
    }

    /// Touches every cached object of `range` (SH23); `Ok(false)` when one could not be.
    async fn touch_range(
        &self,
        range: u32,
        cancel: &CancellationToken,
    ) -> Result<bool, ClientError> {
        if !self.synced(range) {
            return Ok(false);
        }
        // Each key with the resourceVersion its cache holds: the first try writes on it, and
        // reads the object only if it changed since (a conflict).
        let touches: Vec<(Resource, String, Option<String>)> = {
            let state = self.inner.state.lock();
            let (keys, child_keys) = state.watches.keys_in(&self.inner.ring, range);
            let version = |object: Option<String>| object.filter(|rv| !rv.is_empty());
            let mut touches: Vec<(Resource, String, Option<String>)> = keys
                .into_iter()
                .map(|key| {
                    let rv = state
                        .watches
                        .object(&key)
                        .and_then(|(_, o)| o.resource_version().map(str::to_string));
                    (self.inner.resource.clone(), key, version(rv))
                })
                .collect();
            if let Some(children) = &self.inner.children {
                touches.extend(child_keys.into_iter().map(|key| {
                    let rv = state
                        .watches
                        .child(&self.inner.ring, &key)
                        .and_then(|(_, c)| c.resource_version().map(str::to_string));
                    (children.resource.clone(), key, version(rv))
                }));
            }
            touches
        };
        let mut done =
            futures::stream::iter(touches)
                .map(|(resource, key, rv)| async move {
                    self.touch_key(&resource, &key, rv, cancel).await
                })
                .buffer_unordered(TOUCH_CONCURRENCY);
        // The first touch that does not get through ends the range's: the others in flight are
        // dropped (each may or may not have landed) and the range is touched again next tick.
        while let Some(touched) = done.next().await {
            if !touched? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One touch of `key`: write the touch annotation conditioned on `cached` (the version the
    /// cache holds) or, without one or after a conflict, on the version just read. Any of them
    /// that lands changes the object's resourceVersion, which is all a touch is for.
    /// `Ok(false)` when it did not get through.
    async fn touch_key(
        &self,
        resource: &Resource,
        key: &str,
        mut cached: Option<String>,
        cancel: &CancellationToken,
    ) -> Result<bool, ClientError> {
        let name = key.rsplit('/').next().unwrap_or(key);
        let api = self
            .inner
            .guard
            .protect(Api::<DynamicObject>::namespaced_with(
                self.inner.client.clone(),
                resource.clone(),
                &self.inner.namespace,
            ));
        let mark = format!("{} {}", self.inner.identity, self.inner.incarnation);
        let mut backoff = Duration::from_millis(50);
        for _ in 0..TOUCH_TRIES {
            if cancel.is_cancelled() {
                return Ok(false);
            }
            let rv = match cached.take() {
                Some(rv) => rv,
                None => match api.get(name).await {
                    Ok(seen) => match seen.resource_version() {
                        Some(rv) => rv.to_string(),
                        None => return Ok(false),
                    },
                    Err(ClientError::NotFound(_)) => return Ok(true),
                    Err(error) => return Err(error),
                },
            };
            // A touch that changes nothing would not change the resourceVersion either.
            let value = format!("{mark} {rv}");
            let patch = json!({"metadata": {"annotations": {self.inner.touch_key.clone(): value}}});
            let patch = with_precondition(&patch, &rv)
                .map_err(|e| ClientError::InvalidRequest(format!("touch of {key}: {e}")))?;
            match api
                .patch(name, &PatchOptions::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) | Err(ClientError::NotFound(_)) => return Ok(true),
                Err(ClientError::Conflict(_)) => {}
                Err(error) if answered(&error) => return Err(error),
                Err(_) => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        Ok(false)
    }

    /// Reads the claims an earlier run of this identity published: they are held again, to be
    /// touched before acted on or released (SH23).
    async fn inherit(&self, cancel: &CancellationToken) -> Result<(), ClientError> {
        // Unreadable, an earlier incarnation may have held any range: all are touched.
        let (held, version) = self.read_own_claims().await?;
        let mut state = self.inner.state.lock();
        state.held.clone_from(&held);
        state.inherited = held;
        state.claims_version = Some(version.unwrap_or_default());
        state.stale_claims = false;
        drop(state);
        let held = self.inner.state.lock().held.clone();
        self.follow(&held, cancel);
        Ok(())
    }

    /// Takes this member's stored claims as held again (see [`State::stale_claims`]). A range
    /// they no longer name was taken by others, who touched it: nothing of it is kept (not
    /// acted on, its unanswered writes already fenced by the touch). A range they name that was
    /// not held (a write whose answer was lost, or an earlier run's) is held, and touched
    /// before it is acted on (SH23), as an inherited one.
    async fn reread(&self, cancel: &CancellationToken) -> Result<(), ClientError> {
        let (stored, version) = self.read_own_claims().await?;
        let held = {
            let mut state = self.inner.state.lock();
            let gone: Vec<u32> = state.held.difference(&stored).copied().collect();
            for range in &gone {
                state.acting.remove(range);
                state.unknown.remove(range);
                state.inherited.remove(range);
            }
            let found: Vec<u32> = stored.difference(&state.held).copied().collect();
            state.inherited.extend(found);
            state.held.clone_from(&stored);
            state.claims_version = Some(version.unwrap_or_default());
            state.stale_claims = false;
            if !gone.is_empty() {
                tracing::info!(identity = %self.inner.identity, ?gone,
                    "range mode: ranges taken while our lease had lapsed; no longer held");
            }
            state.held.clone()
        };
        self.follow(&held, cancel);
        Ok(())
    }

    /// This member's claims as stored, and their ConfigMap's resourceVersion (none without
    /// one); claims that cannot be read name every range ([`claims_or_all`]).
    async fn read_own_claims(&self) -> Result<(BTreeSet<u32>, Option<String>), ClientError> {
        let api = configmaps(&self.inner.client, &self.inner.namespace);
        let name = claims_name(&self.inner.ring, &self.inner.identity);
        Ok(match api.get_opt(&name).await? {
            Some(map) => (
                claims_or_all(&self.inner.identity, &map),
                map.resource_version().map(str::to_string),
            ),
            None => (BTreeSet::new(), None),
        })
    }

    /// Stores `held` as this member's claims (creating the ConfigMap the first time), then
    /// takes it as held.
    async fn publish(&self, held: &BTreeSet<u32>) -> Result<(), ClientError> {
        let inner = &self.inner;
        let (current, version) = {
            let state = inner.state.lock();
            (
                state.held.clone(),
                state.claims_version.clone().unwrap_or_default(),
            )
        };
        if *held == current && !version.is_empty() {
            return Ok(());
        }
        let api = configmaps(&inner.client, &inner.namespace);
        let name = claims_name(&inner.ring, &inner.identity);
        let body = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": inner.namespace,
                         "labels": {RING_LABEL: inner.ring},
                         "resourceVersion": (!version.is_empty()).then_some(&version)},
            "data": {CLAIMS_KEY: encode_claims(held)},
        });
        let stored = if version.is_empty() {
            api.create(&CreateOptions::default(), &body).await
        } else {
            api.replace(&name, &CreateOptions::default(), &body).await
        };
        let stored = match stored {
            Ok(stored) => stored,
            Err(error @ ClientError::Conflict(_)) => {
                // Someone cleaned up a range of ours (SH23), or a write of ours whose answer
                // was lost landed: read it again at the next tick, keeping what is held until
                // then.
                inner.state.lock().stale_claims = true;
                return Err(error);
            }
            Err(error @ ClientError::AlreadyExists(_)) => {
                // An earlier run's create landed after we found none: inherit it.
                inner.state.lock().claims_version = None;
                return Err(error);
            }
            Err(error) => return Err(error),
        };
        let mut state = inner.state.lock();
        state.claims_version = Some(stored.resource_version().unwrap_or_default().to_string());
        for range in state.held.difference(held).copied().collect::<Vec<_>>() {
            state.acting.remove(&range);
        }
        state.held.clone_from(held);
        Ok(())
    }

    /// Every member's published claims, read now from the server.
    async fn list_claims(&self) -> Result<Vec<(String, BTreeSet<u32>)>, ClientError> {
        let api = configmaps(&self.inner.client, &self.inner.namespace);
        let prefix = claims_name(&self.inner.ring, "");
        let mut options = ListOptions {
            label_selector: Some(format!("{RING_LABEL}={}", self.inner.ring)),
            limit: 500,
            ..ListOptions::default()
        };
        let mut out = Vec::new();
        loop {
            let page = api.list(&options).await?;
            for map in page.items {
                let Some(member) = map.name().strip_prefix(&prefix) else {
                    continue;
                };
                out.push((member.to_string(), claims_or_all(member, &map)));
            }
            match page.continue_token.filter(|t| !t.is_empty()) {
                Some(token) => options.continue_token = Some(token),
                None => return Ok(out),
            }
        }
    }

    /// Removes `range` from a dead member's claims once it was touched, so that its next holder
    /// need not touch it again. Best effort: a conflict (the member came back and wrote) leaves
    /// it, and the next holder touches once more.
    async fn unclaim_for(&self, member: &str, range: u32) {
        let api = configmaps(&self.inner.client, &self.inner.namespace);
        let name = claims_name(&self.inner.ring, member);
        // Several members may clean the same dead member's claims at once: read again after a
        // conflict, a bounded number of times.
        for _ in 0..TOUCH_TRIES {
            let Ok(Some(map)) = api.get_opt(&name).await else {
                return;
            };
            let (Ok(mut held), Some(rv)) = (read_claims(&map), map.resource_version()) else {
                return;
            };
            if !held.remove(&range) {
                return;
            }
            let patch = json!({"metadata": {"resourceVersion": rv},
                               "data": {CLAIMS_KEY: encode_claims(&held)}});
            match api
                .patch(&name, &PatchOptions::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => return,
                Err(ClientError::Conflict(_)) => tokio::task::yield_now().await,
                Err(error) => {
                    tracing::debug!(member, range, %error, "range mode: a dead member's claim left");
                    return;
                }
            }
        }
    }

    /// The cached object of `key` if it lies in a range acted on, with a permit that counts it
    /// in flight until dropped.
    fn admit(&self, key: &str) -> Option<(Arc<K>, RangePermit<K>)> {
        let mut state = self.inner.state.lock();
        let (range, object) = state.watches.object(key)?;
        if !state.acts_on(range, &self.inner.guard) {
            return None;
        }
        *state.in_flight.entry(range).or_default() += 1;
        Some((
            object,
            RangePermit {
                shard: self.clone(),
                range,
            },
        ))
    }

    /// Workers over the queue given to [`new`](Self::new): `reconcile(object, writer)` is
    /// called for a key whose object is cached in a range acted on; other keys are skipped
    /// (they are queued again when their range is acted on). Runs until `cancel` fires.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: stop it with `cancel`, which lets each reconcile finish.
    pub async fn run_controller<F, Fut, E>(
        self,
        workers: usize,
        cancel: CancellationToken,
        reconcile: F,
    ) where
        F: Fn(Arc<K>, RangeWriter<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        let reconcile = Arc::new(reconcile);
        let writer = self.writer();
        let queue = self.inner.queue.clone();
        Controller::new(queue)
            .workers(workers)
            .run(cancel, move |key: String| {
                let (shard, writer, reconcile) = (self.clone(), writer.clone(), reconcile.clone());
                async move {
                    if !shard.inner.guard.is_valid() {
                        return Ok(Action::RequeueAfter(LAPSED_RETRY));
                    }
                    let Some((object, permit)) = shard.admit(&key) else {
                        return Ok(Action::Done);
                    };
                    let result = reconcile(object, writer).await;
                    drop(permit);
                    result
                }
            })
            .await
    }
}

fn read_claims(map: &DynamicObject) -> Result<BTreeSet<u32>, ClientError> {
    let value = map
        .data
        .get("data")
        .and_then(|d| d.get(CLAIMS_KEY))
        .and_then(Value::as_str)
        .unwrap_or_default();
    parse_claims(value).map_err(|e| ClientError::InvalidRequest(format!("{}: {e}", map.name())))
}

/// The ranges another member's claims ConfigMap names; one that cannot be read (written by hand,
/// or by something else) counts as claiming every range, so that nobody acts on a range it may
/// hold: others wait for it while it is live, and touch its ranges once it is not (SH21, SH23).
fn claims_or_all(member: &str, map: &DynamicObject) -> BTreeSet<u32> {
    read_claims(map).unwrap_or_else(|error| {
        tracing::error!(member, %error, "range mode: unreadable claims, taken as claiming every range");
        (0..super::VIRTUAL_RANGES).collect()
    })
}

/// A reconcile of a range in flight: the range is not released before it is dropped (SH22).
struct RangePermit<K> {
    shard: RangeShard<K>,
    range: u32,
}

impl<K> Drop for RangePermit<K> {
    fn drop(&mut self) {
        let mut state = self.shard.inner.state.lock();
        if let Some(count) = state.in_flight.get_mut(&self.range) {
            *count = count.saturating_sub(1);
        }
        drop(state);
        self.shard.inner.drained.notify_waiters();
    }
}

/// Writes of a [`RangeShard`]'s replica: refused locally unless its shard lease is held and the
/// object, as seen, lies in a range it acts on; sent with the seen resourceVersion as
/// precondition; a write whose fate is unknown (no answer) marks its key to be touched before
/// its range is released (SH22).
pub struct RangeWriter<K> {
    api: Api<K>,
    shard: RangeShard<K>,
}

impl<K> Clone for RangeWriter<K> {
    fn clone(&self) -> Self {
        Self {
            api: self.api.clone(),
            shard: self.shard.clone(),
        }
    }
}

impl<K> fmt::Debug for RangeWriter<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RangeWriter")
            .field("identity", &self.shard.inner.identity)
            .finish_non_exhaustive()
    }
}

impl<K: Object + Decode + Send + Sync + 'static> RangeWriter<K> {
    /// The range `seen` lies in if this replica acts on it, and its resourceVersion.
    pub fn check<'a, T: Object>(&self, seen: &'a T) -> Result<(u32, &'a str), FenceError> {
        self.fence(seen, range_of(seen))
    }

    /// SH8's check in range mode: the shard lease held since the ranges were granted, `range`
    /// (the object's) acted on, and the seen resourceVersion to send as precondition.
    fn fence<'a, T: Object>(
        &self,
        seen: &'a T,
        range: Option<u32>,
    ) -> Result<(u32, &'a str), FenceError> {
        let inner = &self.shard.inner;
        if !inner.guard.is_valid() {
            return Err(FenceError::LeaseNotHeld {
                identity: inner.identity.clone(),
            });
        }
        let Some(range) = range.filter(|r| inner.state.lock().acts_on(*r, &inner.guard)) else {
            return Err(FenceError::NotAssigned {
                object: seen.name().to_string(),
                assigned_to: None,
                identity: inner.identity.clone(),
            });
        };
        Ok((range, seen_version(seen)?))
    }

    /// A JSON merge patch of `seen`, conditioned on its resourceVersion.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one request; dropped, its fate is unknown and its key is not marked (the
    /// reconcile that dropped it should return an error, so that the key is retried).
    pub async fn merge_patch(&self, seen: &K, patch: &Value) -> Result<K, FenceError> {
        self.patch(seen, patch, false).await
    }

    /// [`merge_patch`](Self::merge_patch) through the `status` subresource.
    ///
    /// # Cancel safety
    ///
    /// As [`merge_patch`](Self::merge_patch).
    pub async fn merge_patch_status(&self, seen: &K, patch: &Value) -> Result<K, FenceError> {
        self.patch(seen, patch, true).await
    }

    async fn patch(&self, seen: &K, patch: &Value, status: bool) -> Result<K, FenceError> {
        let (range, rv) = self.check(seen)?;
        let patch = Patch::Merge(with_precondition(patch, rv)?);
        let api = &self.api;
        let options = PatchOptions::default();
        let result = if status {
            api.patch_status(seen.name(), &options, &patch).await
        } else {
            api.patch(seen.name(), &options, &patch).await
        };
        self.answer(range, false, seen, result)
    }

    /// Remembers (or forgets) `seen`'s key as one whose last write got no answer (SH22).
    fn answer<T, O: Object>(
        &self,
        range: u32,
        child: bool,
        seen: &O,
        result: Result<T, ClientError>,
    ) -> Result<T, FenceError> {
        let key = (
            child,
            format!("{}/{}", seen.namespace().unwrap_or_default(), seen.name()),
        );
        let mut state = self.shard.inner.state.lock();
        match &result {
            Err(error) if !answered(error) => {
                state.unknown.entry(range).or_default().insert(key);
            }
            _ => {
                if let Some(keys) = state.unknown.get_mut(&range) {
                    keys.remove(&key);
                }
            }
        }
        drop(state);
        Ok(result?)
    }

    fn children(&self) -> Result<&Children, FenceError> {
        self.shard
            .inner
            .children
            .as_ref()
            .ok_or_else(|| FenceError::NotOwned {
                resource: "(none: the shard owns no children)".into(),
            })
    }

    /// The child API of this shard (guarded), in `namespace`.
    fn children_api(&self, children: &Children) -> Api<DynamicObject> {
        let inner = &self.shard.inner;
        inner.guard.protect(Api::namespaced_with(
            inner.client.clone(),
            children.resource.clone(),
            &inner.namespace,
        ))
    }

    /// Creates `child` for the owner `owner_seen`, refused locally unless the shard lease is held
    /// and the owner lies in a range acted on; the child must have a fixed name (a duplicate
    /// delivered late is refused as AlreadyExists) and is labelled [`range_label`] with its
    /// owner's range, so that this replica's children informer sees it and the range's next
    /// holder does too. A child that exists already is [`FenceError::ChildExists`]: requeue the
    /// owner. The shard must own children ([`RangeShard::owns`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one request; dropped, the child may or may not exist.
    pub async fn create_child(
        &self,
        owner_seen: &K,
        child: &Value,
    ) -> Result<DynamicObject, FenceError> {
        let children = self.children()?;
        let (range, _) = self.check(owner_seen)?;
        let name = child
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or(FenceError::UnnamedChild)?
            .to_string();
        let mut body = child.clone();
        let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) else {
            return Err(FenceError::ChildNotAnObject("no metadata object".into()));
        };
        let labels = metadata
            .entry("labels")
            .or_insert_with(|| Value::Object(Default::default()));
        let Some(labels) = labels.as_object_mut() else {
            return Err(FenceError::ChildNotAnObject(
                "labels is not an object".into(),
            ));
        };
        labels.insert(
            range_label(&self.shard.inner.ring),
            Value::from(range.to_string()),
        );
        let result = self
            .children_api(children)
            .create(&CreateOptions::default(), &body)
            .await;
        match result {
            Err(source @ ClientError::AlreadyExists(_)) => Err(FenceError::ChildExists {
                child: name,
                source,
            }),
            other => {
                let seen = DynamicObject::new("v1", "Child")
                    .within(self.shard.inner.namespace.clone())
                    .named(name);
                self.answer(range, true, &seen, other)
            }
        }
    }

    /// A JSON merge patch of the child `seen`, refused locally unless the shard lease is held and
    /// the child's [`range_label`] names a range acted on; conditioned on its resourceVersion.
    ///
    /// # Cancel safety
    ///
    /// As [`merge_patch`](Self::merge_patch).
    pub async fn merge_patch_child(
        &self,
        seen: &DynamicObject,
        patch: &Value,
    ) -> Result<DynamicObject, FenceError> {
        let children = self.children()?;
        let (range, rv) = self.fence(seen, child_range(&self.shard.inner.ring, seen))?;
        let patch = Patch::Merge(with_precondition(patch, rv)?);
        let result = self
            .children_api(children)
            .patch(seen.name(), &PatchOptions::default(), &patch)
            .await;
        self.answer(range, true, seen, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims_map(held: &str) -> DynamicObject {
        let mut map = DynamicObject::new("v1", "ConfigMap").named("widgets-ranges-b");
        map.data.insert("data".into(), json!({ CLAIMS_KEY: held }));
        map
    }

    #[test]
    fn unreadable_claims_of_another_member_count_as_claiming_every_range() {
        // SH21: a member that cannot read another's claims must not act as if it had none.
        assert_eq!(
            claims_or_all("b", &claims_map("3,5")),
            BTreeSet::from([3, 5])
        );
        let all = claims_or_all("b", &claims_map("3,x"));
        assert_eq!(all.len(), super::super::VIRTUAL_RANGES as usize);
        assert!(read_claims(&claims_map("64")).is_err());
    }
}
