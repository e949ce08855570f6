//! The client's half of server-side sharded lists and watches (rule H9): the shard selector an
//! [`HttpListerWatcher`](crate::HttpListerWatcher) sends, and the same selector applied again to
//! what comes back.
//!
//! A server with the `ShardedListAndWatch` gate returns only the objects of the shard and echoes
//! the selector in each list page's `metadata.shardInfo`; a server without it (or an older one)
//! ignores the parameter and returns everything. A watch carries no echo at all (kube-apiserver
//! 1.36.3 puts none on the watch-list's closing bookmark either), so the client cannot know in
//! advance which kind of server answers. It therefore checks every object of every page and
//! event against the selector, with the hash the server uses: one FNV-1a pass over a uid, far
//! cheaper than decoding the object it rides on. The cache and handlers then see only the shard
//! whatever the server did, and nothing is lost either way: an object outside the shard never
//! becomes part of it (neither a uid nor a namespace changes).
//!
//! When the server did not apply the selector, the client says so once per lister-watcher (a
//! warning naming the resource) and counts it in the reflector's metrics
//! ([`ReflectorStats::shard_filtered`](crate::ReflectorStats::shard_filtered) and
//! [`shard_unapplied`](crate::ReflectorStats::shard_unapplied)).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::metrics::ReflectorMetrics;
use crate::store_index::{Object, ShardSelector};
use crate::wire::decoder::WatchEvent;
use crate::wire::list_page::ObjectList;

/// What a list page's `shardInfo` says.
enum Echo {
    /// The selector sent: the server applied it.
    Applied,
    /// Another selector.
    Other,
    /// None, on a kind of list the server echoes on when it applies a selector.
    Missing,
    /// None, on a metadata-only list, which kube-apiserver sends without the echo either way.
    Silent,
}

/// One lister-watcher's shard selector, rendered once, and whether the fallback was reported.
#[derive(Debug)]
pub(crate) struct ShardFilter {
    selector: ShardSelector,
    /// What is sent as `shardSelector` (the selector's normal form).
    rendered: String,
    /// Named in the warning.
    resource: String,
    /// Whether the warning that the server did not apply the selector was logged.
    reported: AtomicBool,
}

impl ShardFilter {
    pub(crate) fn new(selector: ShardSelector, resource: String) -> Self {
        ShardFilter {
            rendered: selector.to_string(),
            selector,
            resource,
            reported: AtomicBool::new(false),
        }
    }

    /// The `shardSelector` parameter.
    pub(crate) fn parameter(&self) -> &str {
        &self.rendered
    }

    pub(crate) fn selector(&self) -> &ShardSelector {
        &self.selector
    }

    /// What `list`'s echo says of the selector: applied, not applied, or nothing at all
    /// (kube-apiserver 1.36.3 leaves `shardInfo` out of a metadata-only list,
    /// `PartialObjectMetadataList`, even when it applied the selector).
    fn echo_of<K>(&self, list: &ObjectList<K>) -> Echo {
        match list.shard_info.as_deref() {
            Some(echo) if echo.parse::<ShardSelector>().as_ref() == Ok(&self.selector) => {
                Echo::Applied
            }
            Some(_) => Echo::Other,
            None if list.kind.as_deref() == Some("PartialObjectMetadataList") => Echo::Silent,
            None => Echo::Missing,
        }
    }

    /// Keeps only the page's objects in the shard, counting the objects dropped and the page
    /// when the server did not apply the selector (by its echo, or, where a server sends none,
    /// by the objects outside the shard it sent).
    pub(crate) fn filter_list<K: Object>(
        &self,
        list: &mut ObjectList<K>,
        metrics: Option<&ReflectorMetrics>,
    ) {
        let echo = self.echo_of(list);
        let before = list.items.len();
        list.items.retain(|item| self.selector.matches(item));
        let dropped = (before - list.items.len()) as u64;
        let unapplied = match echo {
            Echo::Applied => false,
            Echo::Other | Echo::Missing => true,
            Echo::Silent => dropped > 0,
        };
        if let Some(m) = metrics {
            m.add_shard_filtered(dropped);
            if unapplied {
                m.add_shard_unapplied(1);
            }
        }
        match echo {
            Echo::Missing => self.report("a list page came without a shardInfo echo"),
            Echo::Other => self.report("a list page echoed another shard selector"),
            _ if dropped > 0 => self.report("a list page held objects outside the shard"),
            _ => {}
        }
    }

    /// Whether the watch event is kept: bookmarks and errors are; an object event only when its
    /// object is in the shard (one that is not is counted and dropped).
    pub(crate) fn keep_event<K: Object>(
        &self,
        event: &WatchEvent<K>,
        metrics: Option<&ReflectorMetrics>,
    ) -> bool {
        let object = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => o,
            WatchEvent::Bookmark(_) | WatchEvent::Error(_) => return true,
        };
        if self.selector.matches(object) {
            return true;
        }
        if let Some(m) = metrics {
            m.add_shard_filtered(1);
        }
        self.report("a watch sent an object outside the shard");
        false
    }

    fn report(&self, what: &str) {
        if !self.reported.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                resource = %self.resource,
                selector = %self.rendered,
                "{what}: the server did not apply the shard selector (a server without the \
                 ShardedListAndWatch feature ignores it); filtering on the client instead"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store_index::{DynamicObject, ShardField, ShardRange};
    use crate::wire::decoder::Bookmark;

    /// Uids whose FNV-1a 64 hashes were computed apart from this code: 0x86ce… (upper half) and
    /// 0x2299… (lower half).
    const UPPER: &str = "6a401f32-7c09-4900-82e3-293f835f0157";
    const LOWER: &str = "383d4e86-3295-4b65-b95d-bc4dd48c9fde";

    fn lower_half() -> ShardFilter {
        let selector =
            ShardSelector::new(ShardField::Uid, [ShardRange::equal_part(0, 2).unwrap()]).unwrap();
        ShardFilter::new(selector, "configmaps".into())
    }

    fn object(uid: &str) -> DynamicObject {
        DynamicObject::new("v1", "ConfigMap")
            .within("default")
            .named(uid)
            .with_uid(uid)
    }

    #[test]
    fn a_page_the_server_sharded_is_kept_whole_and_not_counted_as_unapplied() {
        let filter = lower_half();
        let metrics = ReflectorMetrics::default();
        let mut page = ObjectList::new(vec![object(LOWER)], "5");
        page.shard_info = Some(filter.parameter().to_string());
        filter.filter_list(&mut page, Some(&metrics));
        assert_eq!(page.items.len(), 1);
        let stats = metrics.snapshot();
        assert_eq!((stats.shard_filtered, stats.shard_unapplied), (0, 0));
    }

    #[test]
    fn a_page_without_the_echo_is_filtered_on_the_client_and_counted() {
        let filter = lower_half();
        let metrics = ReflectorMetrics::default();
        for echo in [
            None,
            Some("shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"),
        ] {
            let mut page = ObjectList::new(vec![object(LOWER), object(UPPER)], "5");
            page.shard_info = echo.map(str::to_string);
            filter.filter_list(&mut page, Some(&metrics));
            assert_eq!(page.items, [object(LOWER)]);
        }
        let stats = metrics.snapshot();
        assert_eq!((stats.shard_filtered, stats.shard_unapplied), (2, 2));
        assert!(filter.reported.load(Ordering::Relaxed));
    }

    #[test]
    fn a_metadata_list_without_the_echo_counts_as_unapplied_only_when_it_held_other_shards() {
        let filter = lower_half();
        let metrics = ReflectorMetrics::default();
        let mut page = ObjectList::new(vec![object(LOWER)], "5");
        page.kind = Some("PartialObjectMetadataList".into());
        filter.filter_list(&mut page.clone(), Some(&metrics));
        assert_eq!(metrics.snapshot().shard_unapplied, 0);
        assert!(!filter.reported.load(Ordering::Relaxed));
        page.items.push(object(UPPER));
        filter.filter_list(&mut page, Some(&metrics));
        assert_eq!(page.items, [object(LOWER)]);
        let stats = metrics.snapshot();
        assert_eq!((stats.shard_filtered, stats.shard_unapplied), (1, 1));
        assert!(filter.reported.load(Ordering::Relaxed));
    }

    #[test]
    fn watch_events_outside_the_shard_are_dropped_and_the_rest_pass() {
        let filter = lower_half();
        let metrics = ReflectorMetrics::default();
        assert!(filter.keep_event(&WatchEvent::Added(object(LOWER)), Some(&metrics)));
        assert!(!filter.reported.load(Ordering::Relaxed));
        for event in [
            WatchEvent::Added(object(UPPER)),
            WatchEvent::Modified(object(UPPER)),
            WatchEvent::Deleted(object(UPPER)),
        ] {
            assert!(!filter.keep_event(&event, Some(&metrics)));
        }
        let bookmark = WatchEvent::<DynamicObject>::Bookmark(Bookmark {
            resource_version: "9".into(),
            initial_events_end: false,
        });
        assert!(filter.keep_event(&bookmark, Some(&metrics)));
        assert_eq!(metrics.snapshot().shard_filtered, 3);
        assert!(filter.reported.load(Ordering::Relaxed));
    }
}
