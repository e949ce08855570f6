//! Event handlers: what an informer tells its consumers.

use std::sync::Arc;

use reflector::store_index::{DeletedObject, ObjectOrTombstone};

/// Receives an informer's notifications. Each registered handler runs on its own task, one
/// notification at a time, in order; a slow handler delays only itself. Every method has a no-op
/// default.
pub trait ResourceEventHandler<K>: Send + Sync + 'static {
    /// An object appeared in the cache. `is_in_initial_list` is true for the objects of the first
    /// list, and for the cache replayed to a handler added after start.
    fn on_add(&self, _obj: &Arc<K>, _is_in_initial_list: bool) {}
    /// An object changed (or, with an unchanged resource version, was resynced).
    fn on_update(&self, _old: &Arc<K>, _new: &Arc<K>) {}
    /// An object was deleted: its final state, or a tombstone when the deletion was inferred by a
    /// relist.
    fn on_delete(&self, _obj: &ObjectOrTombstone<K>) {}
}

type AddFn<K> = Box<dyn Fn(&Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(&Arc<K>, &Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(&ObjectOrTombstone<K>) + Send + Sync>;

/// A handler built from closures; missing ones do nothing.
///
/// ```
/// use shared_informer::{EventHandlerFns, ResourceEventHandler};
/// use shared_informer::reflector::store_index::{DynamicObject, Object};
///
/// let handler = EventHandlerFns::<DynamicObject>::new()
///     .on_add(|obj, _initial| println!("added {}", obj.name()))
///     .on_delete(|obj| println!("deleted {:?}", obj.key()));
/// ```
pub struct EventHandlerFns<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> Default for EventHandlerFns<K> {
    fn default() -> Self {
        EventHandlerFns {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> EventHandlerFns<K> {
    /// A handler that does nothing yet.
    pub fn new() -> Self {
        Self::default()
    }
    /// Called for adds, with the is-in-initial-list flag.
    pub fn on_add(mut self, f: impl Fn(&Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }
    /// Called for updates with the old and new objects.
    pub fn on_update(mut self, f: impl Fn(&Arc<K>, &Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }
    /// Called for deletes.
    pub fn on_delete(mut self, f: impl Fn(&ObjectOrTombstone<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }

    /// Called for deletes with a [`DeletedObject`] (D12.3): the object (a tombstone's last known
    /// copy, when the deletion was inferred by a relist) and the tombstone, if any, with a name,
    /// namespace and key that never fail. Replaces [`on_delete`](Self::on_delete).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shared_informer::{EventHandlerFns, ResourceEventHandler};
    /// use shared_informer::reflector::store_index::{DeletedFinalStateUnknown, DynamicObject, ObjectOrTombstone};
    ///
    /// let handler = EventHandlerFns::<DynamicObject>::new().on_deleted(|gone| {
    ///     // No tombstone to unwrap, no key that can fail.
    ///     assert_eq!((gone.namespace(), gone.name(), gone.is_tombstone()), ("ns", "web", true));
    /// });
    /// let inferred = DeletedFinalStateUnknown { key: "ns/web".into(), obj: None };
    /// ResourceEventHandler::on_delete(&handler, &ObjectOrTombstone::Tombstone(inferred));
    /// ```
    pub fn on_deleted(mut self, f: impl Fn(&DeletedObject<K>) + Send + Sync + 'static) -> Self
    where
        K: 'static,
    {
        self.delete = Some(Box::new(move |obj: &ObjectOrTombstone<K>| {
            f(&DeletedObject::from(obj.clone()))
        }));
        self
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for EventHandlerFns<K> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(obj, is_in_initial_list)
        }
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new)
        }
    }
    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        if let Some(f) = &self.delete {
            f(obj)
        }
    }
}

/// One notification queued to a handler.
#[derive(Debug)]
pub(crate) enum Notification<K> {
    Add {
        obj: Arc<K>,
        is_in_initial_list: bool,
    },
    Update {
        old: Arc<K>,
        new: Arc<K>,
    },
    Delete(ObjectOrTombstone<K>),
}

impl<K> Notification<K> {
    /// Moves the objects this notification holds into `out` (for [`Reclaim`](reflector::Reclaim)).
    pub(crate) fn into_objects(self, out: &mut Vec<Arc<K>>) {
        match self {
            Notification::Add { obj, .. } => out.push(obj),
            Notification::Update { old, new } => {
                out.push(old);
                out.push(new);
            }
            Notification::Delete(ObjectOrTombstone::Object(obj)) => out.push(obj),
            Notification::Delete(ObjectOrTombstone::Tombstone(tombstone)) => {
                out.extend(tombstone.obj)
            }
        }
    }
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Notification::Add {
                obj,
                is_in_initial_list,
            } => Notification::Add {
                obj: Arc::clone(obj),
                is_in_initial_list: *is_in_initial_list,
            },
            Notification::Update { old, new } => Notification::Update {
                old: Arc::clone(old),
                new: Arc::clone(new),
            },
            Notification::Delete(o) => Notification::Delete(o.clone()),
        }
    }
}
