//! From a child to its controlling owner: client-go's `metav1.GetControllerOf` and an informer
//! handler that turns a child's events into its owner's key (kube-rs's `Controller::owns`,
//! controller-runtime's `EnqueueRequestForOwner(.., OnlyControllerOwner())`).
//!
//! A controller of widgets that creates ConfigMaps must reconcile a widget when one of *its*
//! ConfigMaps changes or disappears. The ConfigMap names its widget in an owner reference with
//! `controller: true` (at most one reference may say so; the API server enforces it), so the
//! handler reads that reference and enqueues the widget's `namespace/name`:
//!
//! ```text
//!   ConfigMap informer ──add / update / delete──► OwnerEnqueuer(group, kind) ──► queue of widget keys
//!                        controller_of(child): the ownerReference with controller: true,
//!                        kept when its group and kind are the owner's (any version)
//! ```
//!
//! Rules (OW in docs/semantics.md):
//! - OW1: only the reference with `controller: true` counts; other owners are not enqueued (a
//!   garbage-collection owner is not the controller that reconciles the child).
//! - OW2: the owner matches by API *group* and kind, whatever the version: a reference written as
//!   `example.com/v1beta1` names the same widget as `example.com/v1`.
//! - OW3: an update enqueues the controller of the old *and* of the new object, so both sides
//!   of a change of controller (adoption, orphaning, release) are reconciled; the same key once.
//! - OW4: a delete enqueues the owner of the final state, of a tombstone's last known copy when
//!   the deletion was inferred by a relist, and nothing for a tombstone without one (its owner
//!   references are unknown).
//! - OW5: the owner is in the child's namespace (owner references cannot cross namespaces);
//!   [`OwnerEnqueuer::cluster_scoped_owner`] says the owner kind has no namespace.
//!
//! The owner references are read through [`Object::object_meta`], which every type of this
//! workspace has ([`DynamicObject`], `PartialObjectMetadata`, `CompactObject`, a user's serde
//! struct); the `k8s_openapi` types keep their own metadata and give none, so watch children
//! metadata-only (`PartialObjectMetadata`, which is also the cheapest cache for children), or
//! give [`OwnerEnqueuer::with_owner_references`] a function that reads them.
//!
//! [`DynamicObject`]: workqueue::shared_informer::reflector::store_index::DynamicObject

use std::marker::PhantomData;
use std::sync::Arc;

use workqueue::shared_informer::reflector::store_index::{
    Object, ObjectOrTombstone, OwnerReference,
};
use workqueue::shared_informer::ResourceEventHandler;
use workqueue::Enqueue;

/// The owner reference of `obj` that has `controller: true` (client-go's `GetControllerOf`), if
/// any (rule OW1). Reads [`Object::object_meta`]; types without one have no owners here.
///
/// ```
/// use controller::owners::controller_of;
/// use workqueue::shared_informer::reflector::store_index::{DynamicObject, OwnerReference};
///
/// let mut cm = DynamicObject::new("v1", "ConfigMap").within("ns").named("web-config");
/// cm.metadata.owner_references = Some(vec![OwnerReference {
///     api_version: "example.com/v1".into(),
///     kind: "Widget".into(),
///     name: "web".into(),
///     uid: "u-1".into(),
///     controller: Some(true),
///     block_owner_deletion: Some(true),
/// }]);
/// assert_eq!(controller_of(&cm).map(|o| o.name.as_str()), Some("web"));
/// ```
pub fn controller_of<K: Object>(obj: &K) -> Option<&OwnerReference> {
    controller_among(
        obj.object_meta()
            .and_then(|meta| meta.owner_references.as_deref())
            .unwrap_or_default(),
    )
}

/// The reference with `controller: true` among `references`: the first, should a broken writer
/// have set several (the API server refuses that, client-go takes the first too).
pub fn controller_among(references: &[OwnerReference]) -> Option<&OwnerReference> {
    references.iter().find(|r| r.controller == Some(true))
}

/// The API group of an `apiVersion` (`apps/v1` → `apps`, `v1` → the core group `""`).
pub fn group_of(api_version: &str) -> &str {
    api_version
        .rsplit_once('/')
        .map_or("", |(group, _version)| group)
}

type OwnerRefsFn<K> = Arc<dyn Fn(&K) -> Vec<OwnerReference> + Send + Sync>;

/// An informer event handler for *children* that enqueues the `namespace/name` key of each
/// child's controlling owner of one group and kind (rules OW1–OW5 in [the module](crate::owners)).
///
/// ```
/// use std::sync::Arc;
/// use controller::owners::OwnerEnqueuer;
/// use workqueue::shared_informer::reflector::store_index::{DynamicObject, OwnerReference};
/// use workqueue::shared_informer::ResourceEventHandler;
/// use workqueue::WorkQueue;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let widgets: WorkQueue<String> = WorkQueue::new();
/// // configmap_informer.add_event_handler(OwnerEnqueuer::new(widgets.clone(), "example.com", "Widget"))?;
/// let handler = OwnerEnqueuer::<DynamicObject, _>::new(widgets.clone(), "example.com", "Widget");
/// let mut cm = DynamicObject::new("v1", "ConfigMap").within("ns").named("web-config");
/// cm.metadata.owner_references = Some(vec![OwnerReference {
///     api_version: "example.com/v1".into(),
///     kind: "Widget".into(),
///     name: "web".into(),
///     uid: "u-1".into(),
///     controller: Some(true),
///     block_owner_deletion: None,
/// }]);
/// handler.on_add(&Arc::new(cm), false);
/// assert_eq!(widgets.get().await.as_deref(), Some("ns/web"));
/// # }
/// ```
pub struct OwnerEnqueuer<K, Q> {
    queue: Q,
    group: String,
    kind: String,
    cluster_scoped: bool,
    owner_references: Option<OwnerRefsFn<K>>,
    _k: PhantomData<fn(&K)>,
}

impl<K, Q> std::fmt::Debug for OwnerEnqueuer<K, Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnerEnqueuer")
            .field("group", &self.group)
            .field("kind", &self.kind)
            .field("cluster_scoped", &self.cluster_scoped)
            .finish_non_exhaustive()
    }
}

impl<K: Object, Q: Enqueue> OwnerEnqueuer<K, Q> {
    /// A handler that feeds `queue` with the keys of the controlling owners of kind `kind` in API
    /// group `group` (`""` for the core group), owners in the child's namespace.
    pub fn new(queue: Q, group: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            queue,
            group: group.into(),
            kind: kind.into(),
            cluster_scoped: false,
            owner_references: None,
            _k: PhantomData,
        }
    }

    /// The owner kind is cluster-scoped: its key is its bare name (rule OW5).
    pub fn cluster_scoped_owner(mut self) -> Self {
        self.cluster_scoped = true;
        self
    }

    /// Reads the children's owner references with `read` instead of [`Object::object_meta`]
    /// (for types that keep their metadata otherwise, such as the `k8s_openapi` ones).
    pub fn with_owner_references(
        mut self,
        read: impl Fn(&K) -> Vec<OwnerReference> + Send + Sync + 'static,
    ) -> Self {
        self.owner_references = Some(Arc::new(read));
        self
    }

    /// The owner key `child` maps to, if its controller is of our group and kind.
    pub fn owner_key(&self, child: &K) -> Option<String> {
        let owned;
        let references = match &self.owner_references {
            Some(read) => {
                owned = read(child);
                owned.as_slice()
            }
            None => child
                .object_meta()
                .and_then(|meta| meta.owner_references.as_deref())
                .unwrap_or_default(),
        };
        let owner = controller_among(references)?;
        if owner.kind != self.kind || group_of(&owner.api_version) != self.group {
            return None;
        }
        if owner.name.is_empty() {
            tracing::debug!(child = child.name(), "controller reference without a name");
            return None;
        }
        Some(match child.namespace().filter(|ns| !ns.is_empty()) {
            Some(namespace) if !self.cluster_scoped => format!("{namespace}/{}", owner.name),
            _ => owner.name.clone(),
        })
    }
}

impl<K: Object, Q: Enqueue> ResourceEventHandler<K> for OwnerEnqueuer<K, Q> {
    fn on_add(&self, obj: &Arc<K>, _is_in_initial_list: bool) {
        if let Some(key) = self.owner_key(obj) {
            self.queue.enqueue(key);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let old_key = self.owner_key(old);
        let new_key = self.owner_key(new);
        if old_key != new_key {
            if let Some(key) = old_key {
                self.queue.enqueue(key);
            }
        }
        if let Some(key) = new_key {
            self.queue.enqueue(key);
        }
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        match obj.object() {
            Some(last) => {
                if let Some(key) = self.owner_key(last) {
                    self.queue.enqueue(key);
                }
            }
            None => tracing::debug!(
                "deleted child known only by a tombstone without its object; owner unknown"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use workqueue::shared_informer::reflector::store_index::{
        DeletedFinalStateUnknown, DynamicObject,
    };
    use workqueue::WorkQueue;

    fn reference(
        api_version: &str,
        kind: &str,
        name: &str,
        controller: Option<bool>,
    ) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller,
            block_owner_deletion: None,
        }
    }

    fn child(owners: Vec<OwnerReference>) -> Arc<DynamicObject> {
        let mut cm = DynamicObject::new("v1", "ConfigMap")
            .within("ns")
            .named("child");
        cm.metadata.owner_references = Some(owners);
        Arc::new(cm)
    }

    fn widget_owner(name: &str) -> OwnerReference {
        reference("example.com/v1", "Widget", name, Some(true))
    }

    fn handler(queue: &WorkQueue<String>) -> OwnerEnqueuer<DynamicObject, WorkQueue<String>> {
        OwnerEnqueuer::new(queue.clone(), "example.com", "Widget")
    }

    /// The keys queued, in order; `get` answers at once while keys wait, so no runtime is needed.
    fn drain(queue: &WorkQueue<String>) -> Vec<String> {
        let mut keys = Vec::new();
        while !queue.is_empty() {
            let key = futures::FutureExt::now_or_never(queue.get())
                .flatten()
                .expect("a queued key is handed out at once");
            queue.done(&key);
            keys.push(key);
        }
        keys
    }

    #[test]
    fn controller_of_is_the_reference_marked_controller_and_only_it() {
        let gc_owner = reference("example.com/v1", "Widget", "plain", None);
        let not_controller = reference("example.com/v1", "Widget", "no", Some(false));
        assert_eq!(
            controller_of(&*child(vec![gc_owner.clone(), not_controller])),
            None
        );
        let obj = child(vec![gc_owner, widget_owner("web")]);
        assert_eq!(controller_of(&*obj).map(|o| o.name.as_str()), Some("web"));
        assert_eq!(controller_of(&DynamicObject::new("v1", "ConfigMap")), None);
    }

    #[test]
    fn group_of_splits_the_api_version() {
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("v1"), "");
        assert_eq!(group_of("example.com/v1beta1"), "example.com");
    }

    #[test]
    fn an_added_child_enqueues_its_controlling_owner_of_the_kind_in_its_namespace() {
        let queue = WorkQueue::new();
        let handler = handler(&queue);
        handler.on_add(&child(vec![widget_owner("web")]), true);
        assert_eq!(drain(&queue), ["ns/web"]);
    }

    #[test]
    fn owners_of_another_kind_or_group_or_not_controlling_are_not_enqueued() {
        let queue = WorkQueue::new();
        let handler = handler(&queue);
        for owners in [
            vec![reference("apps/v1", "Widget", "other-group", Some(true))],
            vec![reference(
                "example.com/v1",
                "Gadget",
                "other-kind",
                Some(true),
            )],
            vec![reference("example.com/v1", "Widget", "gc-only", None)],
            vec![],
        ] {
            handler.on_add(&child(owners), false);
        }
        assert_eq!(queue.len(), 0);
    }

    #[test]
    fn any_version_of_the_owners_group_matches() {
        let queue = WorkQueue::new();
        handler(&queue).on_add(
            &child(vec![reference(
                "example.com/v1beta1",
                "Widget",
                "web",
                Some(true),
            )]),
            false,
        );
        assert_eq!(drain(&queue), ["ns/web"]);
    }

    #[test]
    fn an_update_that_changes_the_controller_enqueues_both_owners() {
        let queue = WorkQueue::new();
        let handler = handler(&queue);
        handler.on_update(
            &child(vec![widget_owner("old")]),
            &child(vec![widget_owner("new")]),
        );
        assert_eq!(drain(&queue), ["ns/old", "ns/new"]);
        // Orphaned (the controller reference removed): the former owner still hears of it.
        handler.on_update(&child(vec![widget_owner("old")]), &child(vec![]));
        assert_eq!(drain(&queue), ["ns/old"]);
        // Adopted.
        handler.on_update(&child(vec![]), &child(vec![widget_owner("new")]));
        assert_eq!(drain(&queue), ["ns/new"]);
    }

    #[test]
    fn an_update_with_the_same_controller_enqueues_it_once() {
        let queue = WorkQueue::new();
        let handler = handler(&queue);
        let obj = child(vec![widget_owner("web")]);
        handler.on_update(&obj, &obj);
        assert_eq!(queue.len(), 1);
        assert_eq!(drain(&queue), ["ns/web"]);
    }

    #[test]
    fn a_delete_enqueues_the_owner_of_the_final_state_or_of_the_tombstones_copy() {
        let queue = WorkQueue::new();
        let handler = handler(&queue);
        handler.on_delete(&ObjectOrTombstone::Object(child(vec![widget_owner("a")])));
        handler.on_delete(&ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "ns/child".into(),
            obj: Some(child(vec![widget_owner("b")])),
        }));
        handler.on_delete(&ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "ns/child".into(),
            obj: None,
        }));
        assert_eq!(drain(&queue), ["ns/a", "ns/b"]);
    }

    #[test]
    fn a_cluster_scoped_owner_is_keyed_by_name_alone() {
        let queue = WorkQueue::new();
        OwnerEnqueuer::<DynamicObject, _>::new(queue.clone(), "", "Node")
            .cluster_scoped_owner()
            .on_add(
                &child(vec![reference("v1", "Node", "n1", Some(true))]),
                false,
            );
        assert_eq!(drain(&queue), ["n1"]);
    }

    #[test]
    fn owner_references_can_be_read_by_a_given_function() {
        let queue = WorkQueue::new();
        let handler = handler(&queue)
            .with_owner_references(|_child: &DynamicObject| vec![widget_owner("from-fn")]);
        handler.on_add(&child(vec![]), false);
        assert_eq!(drain(&queue), ["ns/from-fn"]);
    }
}
