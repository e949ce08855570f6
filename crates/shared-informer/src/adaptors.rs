//! Handler adaptors: [`FilteringHandler`] (client-go's `FilteringResourceEventHandler`, D12.2).

use std::sync::Arc;

use reflector::store_index::ObjectOrTombstone;

use crate::handler::ResourceEventHandler;

/// Forwards to `handler` only what concerns objects that pass `filter`, turning an update that
/// crosses the filter's boundary into what it means for the filtered view (D12.2):
///
/// | old passes | new passes | `handler` receives |
/// |---|---|---|
/// | yes | yes | the update |
/// | no | yes | an add of the new object (`is_in_initial_list` false) |
/// | yes | no | a delete of the old object |
/// | no | no | nothing |
///
/// Adds and deletes are forwarded when their object passes. A tombstone is judged by its last
/// known object; a tombstone without one is forwarded, since the deletion may concern an object
/// the handler was told about.
///
/// ```
/// use std::sync::Arc;
/// use shared_informer::{EventHandlerFns, FilteringHandler, ResourceEventHandler};
/// use shared_informer::reflector::store_index::{DynamicObject, Object};
///
/// let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let handler = FilteringHandler::new(
///     |pod: &DynamicObject| pod.namespace() == Some("prod"),
///     EventHandlerFns::new()
///         .on_add(move |pod: &Arc<DynamicObject>, _| log.lock().unwrap().push(format!("add {}", pod.name())))
///         .on_delete({
///             let log = seen.clone();
///             move |pod| log.lock().unwrap().push(format!("delete {}", pod.key().unwrap()))
///         }),
/// );
/// let staged = Arc::new(DynamicObject::new("v1", "Pod").within("staging").named("web"));
/// let promoted = Arc::new(DynamicObject::new("v1", "Pod").within("prod").named("web"));
/// handler.on_add(&staged, false); // filtered out
/// handler.on_update(&staged, &promoted); // enters the view: an add
/// handler.on_update(&promoted, &staged); // leaves it: a delete of the old object
/// assert_eq!(*seen.lock().unwrap(), ["add web", "delete prod/web"]);
/// ```
pub struct FilteringHandler<K, F, H> {
    filter: F,
    handler: H,
    _objects: std::marker::PhantomData<fn(&K)>,
}

impl<K, F, H> FilteringHandler<K, F, H>
where
    F: Fn(&K) -> bool + Send + Sync + 'static,
    H: ResourceEventHandler<K>,
{
    /// `handler`, seeing only objects that pass `filter`.
    pub fn new(filter: F, handler: H) -> Self {
        FilteringHandler {
            filter,
            handler,
            _objects: std::marker::PhantomData,
        }
    }
}

impl<K, F, H> ResourceEventHandler<K> for FilteringHandler<K, F, H>
where
    K: Send + Sync + 'static,
    F: Fn(&K) -> bool + Send + Sync + 'static,
    H: ResourceEventHandler<K>,
{
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if (self.filter)(obj) {
            self.handler.on_add(obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        match ((self.filter)(old), (self.filter)(new)) {
            (true, true) => self.handler.on_update(old, new),
            (false, true) => self.handler.on_add(new, false),
            (true, false) => self
                .handler
                .on_delete(&ObjectOrTombstone::Object(Arc::clone(old))),
            (false, false) => {}
        }
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        let passes = obj.object().is_none_or(|o| (self.filter)(o));
        if passes {
            self.handler.on_delete(obj);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::EventHandlerFns;
    use parking_lot::Mutex;
    use reflector::store_index::{DeletedFinalStateUnknown, DynamicObject, Object};

    fn pod(ns: &str, name: &str) -> Arc<DynamicObject> {
        Arc::new(DynamicObject::new("v1", "Pod").within(ns).named(name))
    }

    fn recording(log: &Arc<Mutex<Vec<String>>>) -> EventHandlerFns<DynamicObject> {
        let (a, u, d) = (log.clone(), log.clone(), log.clone());
        EventHandlerFns::new()
            .on_add(move |o: &Arc<DynamicObject>, initial| {
                a.lock().push(format!("add {} {initial}", o.name()))
            })
            .on_update(move |o, n| u.lock().push(format!("update {}->{}", o.name(), n.name())))
            .on_delete(move |o| {
                d.lock().push(format!(
                    "delete {} tombstone={}",
                    o.key().map(|k| k.to_string()).unwrap_or_default(),
                    o.is_tombstone()
                ))
            })
    }

    #[test]
    fn every_update_case_of_d12_2_and_tombstones() {
        let log = Arc::default();
        let h = FilteringHandler::new(
            |o: &DynamicObject| o.namespace() == Some("in"),
            recording(&log),
        );
        let (a_in, b_in, a_out) = (pod("in", "a"), pod("in", "b"), pod("out", "a"));
        h.on_add(&a_in, true);
        h.on_add(&a_out, true);
        h.on_update(&a_in, &b_in);
        h.on_update(&a_out, &a_in);
        h.on_update(&a_in, &a_out);
        h.on_update(&a_out, &a_out);
        h.on_delete(&ObjectOrTombstone::Object(a_out.clone()));
        h.on_delete(&ObjectOrTombstone::Object(b_in.clone()));
        let gone_out: ObjectOrTombstone<DynamicObject> = DeletedFinalStateUnknown {
            key: "out/a".into(),
            obj: Some(a_out),
        }
        .into();
        let gone_unknown: ObjectOrTombstone<DynamicObject> = DeletedFinalStateUnknown {
            key: "in/z".into(),
            obj: None,
        }
        .into();
        h.on_delete(&gone_out);
        h.on_delete(&gone_unknown);
        assert_eq!(
            *log.lock(),
            [
                "add a true",
                "update a->b",
                "add a false",
                "delete in/a tombstone=false",
                "delete in/b tombstone=false",
                "delete in/z tombstone=true",
            ]
        );
    }
}
