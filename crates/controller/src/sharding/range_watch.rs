//! Range mode's informers: the held virtual ranges watched in a bounded number of groups.
//!
//! ```text
//!   64 virtual ranges = 8 watch groups of 8 consecutive ranges
//!   group g with held ranges R ─► one informer, shardSelector = R (adjacent ones merged)
//!                                 (+ one children informer, label <range_label> in (R))
//!   the held ranges of g change ─► g's informer replaced: only g's held ranges are listed again
//! ```
//!
//! One informer per range would relist nothing but the range that moved, but a replica holding
//! every range would keep 64 watches per resource open on one HTTP/2 connection, beyond what a
//! server lets a connection carry at once (the replica's other requests then wait behind them).
//! Eight groups bound a replica to 8 watches per resource, and a move relists only its group's
//! held ranges (about 1/8 of the replica's share). The relisted objects that the replaced
//! informer held at the same resourceVersion queue nothing: their events were handled already,
//! and a reconcile each would only repeat the last (a heavy reconcile paid for every object of
//! the group at each move). Until the new informer has listed, lookups also read the replaced
//! one's cache: a key it queued, or one whose relisted add was skipped, still finds its object.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;

use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{
    shard_hash, DynamicObject, Object, ObjectOrTombstone, ShardField, ShardRange, ShardSelector,
};
use workqueue::shared_informer::reflector::{Client, Decode, Resource};
use workqueue::shared_informer::{
    ResourceEventHandler, SharedIndexInformer, SharedInformerFactory,
};
use workqueue::{KeyEnqueuer, RateLimitingQueue};

use super::ranges::{RangeTable, VIRTUAL_RANGES};

/// How many watch groups the virtual ranges fall into (8 consecutive ranges each).
pub(super) const WATCH_GROUPS: u32 = 8;

/// The watch group of virtual range `range`.
pub(super) fn group_of(range: u32) -> u32 {
    range / (VIRTUAL_RANGES / WATCH_GROUPS)
}

/// The label a child carries in range mode: `range.sharding.informer-rs.io/<ring>`, valued with
/// its owner's virtual range (`0`–`63`). The server shards a child by its own uid, not its
/// owner's, so a child is selected by this label instead; an owner's range is fixed by its uid,
/// so the label is never rewritten.
pub fn range_label(ring: &str) -> String {
    format!("range.sharding.informer-rs.io/{ring}")
}

/// The virtual range of an object of the shard's resource: its uid's.
pub(super) fn range_of<K: Object>(object: &K) -> Option<u32> {
    let uid = object.uid().filter(|uid| !uid.is_empty())?;
    Some(RangeTable::range_of_hash(shard_hash(uid)))
}

/// The virtual range a child's [`range_label`] names.
pub(super) fn child_range(ring: &str, child: &DynamicObject) -> Option<u32> {
    child
        .label(&range_label(ring))?
        .parse()
        .ok()
        .filter(|r| *r < VIRTUAL_RANGES)
}

/// The children a shard owns: a resource in the same namespace whose objects name an object of
/// the shard as controller owner.
#[derive(Debug, Clone)]
pub(super) struct Children {
    pub(super) resource: Resource,
    pub(super) owner_kind: String,
}

/// What the informers are made from.
pub(super) struct WatchSpec<'a> {
    pub(super) ring: &'a str,
    pub(super) client: &'a Client,
    pub(super) namespace: &'a str,
    pub(super) resource: &'a Resource,
    pub(super) children: Option<&'a Children>,
    pub(super) queue: &'a RateLimitingQueue<String>,
}

/// One watch group's informers over its held ranges.
///
/// Invariant: `replaced` is `Some` only while `informer` (or `children`) has not synced; a
/// lookup that misses in the new informers reads it, so that a key queued by the replaced
/// informers, or skipped by [`Unchanged`] because they held it, still finds its object.
struct Group<K> {
    ranges: BTreeSet<u32>,
    informer: SharedIndexInformer<K>,
    children: Option<SharedIndexInformer<DynamicObject>>,
    stop: CancellationToken,
    replaced: Option<Replaced<K>>,
}

/// The stopped informers a group's new ones replaced: their caches hold what was last seen of
/// the group, read until the new ones have listed.
struct Replaced<K> {
    informer: SharedIndexInformer<K>,
    children: Option<SharedIndexInformer<DynamicObject>>,
}

impl<K: Object + Decode + Send + Sync + 'static> Group<K> {
    fn has_synced(&self) -> bool {
        self.informer.has_synced() && self.children.as_ref().is_none_or(|c| c.has_synced())
    }

    /// The replaced informers, while the new ones have not synced.
    fn replaced(&self) -> Option<&Replaced<K>> {
        self.replaced.as_ref().filter(|_| !self.has_synced())
    }

    fn object(&self, key: &str) -> Option<Arc<K>> {
        self.informer
            .indexer()
            .get_by_key(key)
            .or_else(|| self.replaced()?.informer.indexer().get_by_key(key))
    }

    fn child(&self, key: &str) -> Option<Arc<DynamicObject>> {
        self.children
            .as_ref()?
            .indexer()
            .get_by_key(key)
            .or_else(|| {
                self.replaced()?
                    .children
                    .as_ref()?
                    .indexer()
                    .get_by_key(key)
            })
    }

    /// Every cached object (or child): the new informers' and, until they have synced, the
    /// replaced ones' not listed again yet.
    fn list<O: Object + Decode + Send + Sync + 'static>(
        &self,
        current: Option<&SharedIndexInformer<O>>,
        replaced: impl FnOnce(&Replaced<K>) -> Option<&SharedIndexInformer<O>>,
    ) -> Vec<Arc<O>> {
        let mut objects = current.map(|i| i.indexer().list()).unwrap_or_default();
        if let Some(old) = self.replaced().and_then(replaced) {
            let listed: HashSet<String> = objects.iter().filter_map(|o| key_of(&**o)).collect();
            objects.extend(
                old.indexer()
                    .list()
                    .into_iter()
                    .filter(|o| key_of(&**o).is_some_and(|k| !listed.contains(&k))),
            );
        }
        objects
    }
}

/// The informers of the held ranges, by watch group.
///
/// Invariant: the groups' `ranges` are exactly the ranges last given to
/// [`follow`](Self::follow), each in the group [`group_of`] names.
pub(super) struct RangeWatches<K> {
    groups: BTreeMap<u32, Group<K>>,
}

impl<K> Default for RangeWatches<K> {
    fn default() -> Self {
        Self {
            groups: BTreeMap::new(),
        }
    }
}

impl<K: Object + Decode + Send + Sync + 'static> RangeWatches<K> {
    /// Watches exactly `held`: a group whose held ranges changed gets new informers (the old ones
    /// stopped), a group with none left is stopped. An informer that cannot be made is logged,
    /// and tried again at the next call.
    pub(super) fn follow(
        &mut self,
        spec: &WatchSpec<'_>,
        held: &BTreeSet<u32>,
        cancel: &CancellationToken,
    ) {
        for group in self.groups.values_mut() {
            if group.has_synced() {
                group.replaced = None;
            }
        }
        for group in 0..WATCH_GROUPS {
            let wanted: BTreeSet<u32> = held
                .iter()
                .copied()
                .filter(|r| group_of(*r) == group)
                .collect();
            if self.groups.get(&group).map(|g| &g.ranges) == Some(&wanted) {
                continue;
            }
            let mut known = Known::default();
            let mut replaced = None;
            if let Some(old) = self.groups.remove(&group) {
                old.stop.cancel();
                known = Known::of(&old);
                replaced = Some(Replaced {
                    informer: old.informer,
                    children: old.children,
                });
            }
            if wanted.is_empty() {
                continue;
            }
            match start_group(spec, &wanted, known, cancel) {
                Ok(mut started) => {
                    started.replaced = replaced;
                    self.groups.insert(group, started);
                }
                Err(error) => {
                    tracing::error!(group, %error, "range mode: cannot watch the ranges");
                }
            }
        }
    }

    /// Stops every informer.
    pub(super) fn stop_all(&mut self) {
        for (_, group) in std::mem::take(&mut self.groups) {
            group.stop.cancel();
        }
    }

    /// The cached object `key` and its range (while a group's new informers list, what its
    /// replaced ones held).
    pub(super) fn object(&self, key: &str) -> Option<(u32, Arc<K>)> {
        self.groups.values().find_map(|g| {
            let object = g.object(key)?;
            Some((range_of(&*object)?, object))
        })
    }

    /// The cached child `key` and the range its label names.
    pub(super) fn child(&self, ring: &str, key: &str) -> Option<(u32, Arc<DynamicObject>)> {
        self.groups.values().find_map(|g| {
            let child = g.child(key)?;
            Some((child_range(ring, &child)?, child))
        })
    }

    /// The cached keys of `range`'s objects and of its children.
    pub(super) fn keys_in(&self, ring: &str, range: u32) -> (Vec<String>, Vec<String>) {
        let Some(group) = self.groups.get(&group_of(range)) else {
            return (Vec::new(), Vec::new());
        };
        let objects = group
            .list(Some(&group.informer), |old| Some(&old.informer))
            .into_iter()
            .filter(|o| range_of(&**o) == Some(range))
            .filter_map(|o| key_of(&*o))
            .collect();
        let children = group
            .list(group.children.as_ref(), |old| old.children.as_ref())
            .into_iter()
            .filter(|c| child_range(ring, c) == Some(range))
            .filter_map(|c| key_of(&*c))
            .collect();
        (objects, children)
    }

    /// Whether `range` is watched and its group's informers have synced.
    pub(super) fn synced(&self, range: u32) -> bool {
        self.groups
            .get(&group_of(range))
            .is_some_and(|g| g.ranges.contains(&range) && g.has_synced())
    }

    /// How many objects and children are cached.
    pub(super) fn len(&self) -> usize {
        self.groups
            .values()
            .map(|g| {
                g.informer.indexer().len() + g.children.as_ref().map_or(0, |c| c.indexer().len())
            })
            .sum()
    }

    /// How many watch groups are open.
    pub(super) fn groups(&self) -> usize {
        self.groups.len()
    }
}

fn key_of<O: Object + ?Sized>(object: &O) -> Option<String> {
    let name = object.name();
    (!name.is_empty()).then(|| format!("{}/{name}", object.namespace().unwrap_or_default()))
}

/// The selector of `ranges`, adjacent ones merged.
fn selector_of(ranges: &BTreeSet<u32>) -> Result<ShardSelector, String> {
    let mut merged: Vec<(u32, u32)> = Vec::new();
    for &r in ranges {
        match merged.last_mut() {
            Some((_, end)) if *end == r => *end = r + 1,
            _ => merged.push((r, r + 1)),
        }
    }
    let parts = merged
        .into_iter()
        .map(|(start, end)| {
            let first = ShardRange::equal_part(start, VIRTUAL_RANGES)?;
            let last = ShardRange::equal_part(end - 1, VIRTUAL_RANGES)?;
            ShardRange::new(first.start(), last.end())
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    ShardSelector::new(ShardField::Uid, parts).map_err(|e| e.to_string())
}

/// Starts the informers of one group's `ranges`.
fn start_group<K: Object + Decode + Send + Sync + 'static>(
    spec: &WatchSpec<'_>,
    ranges: &BTreeSet<u32>,
    known: Known,
    cancel: &CancellationToken,
) -> Result<Group<K>, String> {
    let factory = SharedInformerFactory::with_client(spec.client.clone())
        .namespace(spec.namespace.to_string())
        .shard_selector(selector_of(ranges)?);
    let informer = factory
        .informer::<K>(spec.resource.clone())
        .map_err(|e| e.to_string())?;
    informer
        .add_event_handler(Unchanged::new(
            KeyEnqueuer::<K, _>::new(spec.queue.clone()),
            known.objects,
        ))
        .map_err(|e| e.to_string())?;
    let children = match spec.children {
        Some(children) => Some(start_children(spec, children, ranges, known.children)?),
        None => None,
    };
    let stop = cancel.child_token();
    factory.start(&stop);
    let children = children.map(|(informer, factory)| {
        factory.start(&stop);
        informer
    });
    Ok(Group {
        ranges: ranges.clone(),
        informer,
        children,
        stop,
        replaced: None,
    })
}

/// The informer of the children labelled with one of `ranges`, each event queueing its
/// controlling owner's key, with its factory to start.
fn start_children(
    spec: &WatchSpec<'_>,
    children: &Children,
    ranges: &BTreeSet<u32>,
    known: HashMap<String, String>,
) -> Result<(SharedIndexInformer<DynamicObject>, SharedInformerFactory), String> {
    let values: Vec<String> = ranges.iter().map(u32::to_string).collect();
    let selector = format!("{} in ({})", range_label(spec.ring), values.join(","))
        .parse()
        .map_err(|e| format!("{e}"))?;
    let factory = SharedInformerFactory::with_client(spec.client.clone())
        .namespace(spec.namespace.to_string())
        .label_selector(selector);
    let informer = factory
        .informer::<DynamicObject>(children.resource.clone())
        .map_err(|e| e.to_string())?;
    let owners = crate::owners::OwnerEnqueuer::<DynamicObject, _>::new(
        spec.queue.clone(),
        spec.resource.group.clone(),
        children.owner_kind.clone(),
    );
    informer
        .add_event_handler(Unchanged::new(owners, known))
        .map_err(|e| e.to_string())?;
    Ok((informer, factory))
}

/// What a replaced group's informers held: each object's and child's key and resourceVersion.
#[derive(Default)]
struct Known {
    objects: HashMap<String, String>,
    children: HashMap<String, String>,
}

impl Known {
    fn of<K: Object + Decode + Send + Sync + 'static>(group: &Group<K>) -> Self {
        fn versions<O: Object>(objects: Vec<Arc<O>>) -> HashMap<String, String> {
            objects
                .into_iter()
                .filter_map(|o| Some((key_of(&*o)?, o.resource_version()?.to_string())))
                .collect()
        }
        Known {
            objects: versions(group.informer.indexer().list()),
            children: group
                .children
                .as_ref()
                .map(|c| versions(c.indexer().list()))
                .unwrap_or_default(),
        }
    }
}

/// A handler that passes everything on but the initial list's adds of objects `known` at the
/// same resourceVersion (a replaced informer held them, and their events were handled). Each
/// known key is forgotten once listed again, so what is left after the list is the few that
/// disappeared meanwhile.
struct Unchanged<H> {
    handler: H,
    known: Mutex<HashMap<String, String>>,
}

impl<H> Unchanged<H> {
    fn new(handler: H, known: HashMap<String, String>) -> Self {
        Unchanged {
            handler,
            known: Mutex::new(known),
        }
    }
}

impl<K: Object, H: ResourceEventHandler<K>> ResourceEventHandler<K> for Unchanged<H> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if is_in_initial_list {
            let held = key_of(&**obj).and_then(|key| self.known.lock().remove(&key));
            if held.is_some() && held.as_deref() == obj.resource_version() {
                return;
            }
        }
        self.handler.on_add(obj, is_in_initial_list);
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        self.handler.on_update(old, new);
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        self.handler.on_delete(obj);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relisted_object_unchanged_since_the_replaced_informer_queues_nothing() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let object = |name: &str, rv: &str| {
            let mut o = DynamicObject::new("v1", "ConfigMap")
                .within("ns")
                .named(name);
            o.metadata.resource_version = Some(rv.to_string());
            Arc::new(o)
        };
        let passed = Arc::new(AtomicUsize::new(0));
        let counter = passed.clone();
        let inner = workqueue::shared_informer::EventHandlerFns::<DynamicObject>::new().on_add(
            move |_, _| {
                counter.fetch_add(1, Ordering::SeqCst);
            },
        );
        let known: HashMap<String, String> = [
            ("ns/a".to_string(), "5".to_string()),
            ("ns/b".to_string(), "7".to_string()),
        ]
        .into();
        let handler = Unchanged::new(inner, known);
        let count = || passed.load(Ordering::SeqCst);
        handler.on_add(&object("a", "5"), true);
        assert_eq!(
            count(),
            0,
            "held at the same version: its events were handled"
        );
        handler.on_add(&object("b", "8"), true);
        assert_eq!(count(), 1, "changed while no informer watched: queued");
        handler.on_add(&object("c", "1"), true);
        assert_eq!(count(), 2, "new to this replica: queued");
        handler.on_add(&object("a", "5"), true);
        assert_eq!(count(), 3, "a known key is skipped once, then forgotten");
        handler.on_add(&object("d", "5"), false);
        assert_eq!(count(), 4, "an add after the list always passes");
        assert!(handler.known.lock().is_empty());
    }

    #[tokio::test]
    async fn a_replaced_groups_objects_stay_readable_until_its_new_informer_has_listed() {
        use workqueue::shared_informer::reflector::ClusterConfig;
        let server = sim_apiserver::TestServer::start().await.unwrap();
        let ns = serde_json::json!({"metadata": {"name": "ns"}});
        server.create("namespaces", None, ns).unwrap();
        for i in 0..400 {
            let map = serde_json::json!({"metadata": {"name": format!("c-{i}")}});
            server.create("configmaps", Some("ns"), map).unwrap();
        }
        let config =
            ClusterConfig::from_kubeconfig_files(&[server.kubeconfig_path().to_path_buf()], None)
                .unwrap();
        let client = Client::new(&config).unwrap();
        let queue = RateLimitingQueue::new(workqueue::default_controller_rate_limiter());
        let resource = Resource::namespaced("", "v1", "configmaps");
        let spec = WatchSpec {
            ring: "r",
            client: &client,
            namespace: "ns",
            resource: &resource,
            children: None,
            queue: &queue,
        };
        let cancel = CancellationToken::new();
        let mut watches = RangeWatches::<DynamicObject>::default();
        watches.follow(&spec, &(0..8).collect(), &cancel);
        assert!(watches.groups[&0].informer.wait_for_sync().await);
        let keys = |watches: &RangeWatches<DynamicObject>, ranges: std::ops::Range<u32>| {
            let mut keys: Vec<String> = ranges.flat_map(|r| watches.keys_in("r", r).0).collect();
            keys.sort();
            keys
        };
        let (kept, dropped) = (keys(&watches, 0..4), keys(&watches, 4..8));
        assert!(!kept.is_empty() && !dropped.is_empty());

        // Ranges 4–7 leave the group: its informer is replaced by one selecting 0–3. This
        // current-thread runtime has not run the new informer yet, let alone its list; its
        // keys were queued by the replaced informer (and their relisted adds are skipped), so
        // a worker must still find their objects.
        watches.follow(&spec, &(0..4).collect(), &cancel);
        assert!(!watches.synced(0));
        assert_eq!(keys(&watches, 0..4), kept);
        for key in &kept {
            let (range, object) = watches.object(key).expect("read from the replaced cache");
            assert!(range < 4);
            assert!(object.resource_version().is_some());
        }

        // Listed: the replaced cache is let go, and only the selected ranges remain.
        assert!(watches.groups[&0].informer.wait_for_sync().await);
        watches.follow(&spec, &(0..4).collect(), &cancel);
        assert!(watches.groups[&0].replaced.is_none());
        assert_eq!(keys(&watches, 0..4), kept);
        assert!(dropped.iter().all(|key| watches.object(key).is_none()));
        assert_eq!(watches.len(), kept.len());
        cancel.cancel();
    }

    #[test]
    fn a_groups_selector_merges_adjacent_ranges_and_covers_exactly_them() {
        let ranges: BTreeSet<u32> = [8, 9, 11].into();
        let selector = selector_of(&ranges).unwrap();
        assert_eq!(selector.ranges().len(), 2);
        for r in 0..VIRTUAL_RANGES {
            let part = ShardRange::equal_part(r, VIRTUAL_RANGES).unwrap();
            assert_eq!(
                selector.ranges().iter().any(|s| s.contains(part.start())),
                ranges.contains(&r),
                "range {r}"
            );
        }
        assert_eq!(
            (0..VIRTUAL_RANGES).map(group_of).max(),
            Some(WATCH_GROUPS - 1)
        );
        assert_eq!(group_of(8), group_of(15));
        assert_ne!(group_of(7), group_of(8));
    }
}
