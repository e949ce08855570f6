//! Counters of one reflector: what it asked the server and what it received.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Live counters (shared; read with [`ReflectorMetrics::snapshot`]).
#[derive(Debug, Default)]
pub struct ReflectorMetrics {
    lists: AtomicU64,
    pages: AtomicU64,
    listed_items: AtomicU64,
    watches: AtomicU64,
    added: AtomicU64,
    modified: AtomicU64,
    deleted: AtomicU64,
    bookmarks: AtomicU64,
    errors: AtomicU64,
    relists: AtomicU64,
    expired: AtomicU64,
    backoff_waits: AtomicU64,
    bytes: AtomicU64,
    shard_filtered: AtomicU64,
    shard_unapplied: AtomicU64,
    watch_lists_incomplete: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReflectorStats {
    /// Complete lists started.
    pub lists: u64,
    /// List pages received.
    pub pages: u64,
    /// Objects received in list pages.
    pub listed_items: u64,
    /// Watches opened.
    pub watches: u64,
    /// `ADDED` events.
    pub added: u64,
    /// `MODIFIED` events.
    pub modified: u64,
    /// `DELETED` events.
    pub deleted: u64,
    /// `BOOKMARK` events.
    pub bookmarks: u64,
    /// `ERROR` events.
    pub errors: u64,
    /// Lists after the first one.
    pub relists: u64,
    /// 410 Expired answers (lists and watches).
    pub expired: u64,
    /// Backoff delays waited.
    pub backoff_waits: u64,
    /// Body bytes received (where the lister-watcher reports them).
    pub bytes: u64,
    /// Objects of list pages and watch events outside the lister-watcher's shard selector, which
    /// the server sent anyway and the client dropped (a server that does not apply shard
    /// selectors sends every object).
    pub shard_filtered: u64,
    /// List pages the server answered without applying the shard selector: no `shardInfo`
    /// echo, or the echo of another selector (or, on metadata-only lists, which kube-apiserver
    /// sends without the echo, objects outside the shard).
    pub shard_unapplied: u64,
    /// Watch-list streams the server closed before their initial-events-end bookmark, each
    /// started again after a backoff delay with nothing of it applied (contract C13.4).
    /// kube-apiserver's watch cache does not read a watcher's buffer of new events until it has
    /// sent the initial ones, and closes the watcher once that buffer (10 to 1,000 events, sized
    /// for about a second of the resource's writes) is full for longer than its short dispatch
    /// budget; so a large collection that is written often can take several attempts to sync.
    pub watch_lists_incomplete: u64,
}

macro_rules! incr {
    ($($name:ident => $field:ident),* $(,)?) => {$(
        pub(crate) fn $name(&self, n: u64) {
            self.$field.fetch_add(n, Relaxed);
        }
    )*};
}

impl ReflectorMetrics {
    incr!(
        add_lists => lists, add_pages => pages, add_listed_items => listed_items,
        add_watches => watches, add_added => added, add_modified => modified,
        add_deleted => deleted, add_bookmarks => bookmarks, add_errors => errors,
        add_relists => relists, add_expired => expired, add_backoff_waits => backoff_waits,
        add_watch_lists_incomplete => watch_lists_incomplete,
    );

    /// Counts body bytes received (called by lister-watchers).
    pub fn add_bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Relaxed);
    }

    /// Counts objects outside the shard selector dropped on the client (called by
    /// lister-watchers).
    pub fn add_shard_filtered(&self, n: u64) {
        self.shard_filtered.fetch_add(n, Relaxed);
    }

    /// Counts list pages on which the server did not apply the shard selector (called by
    /// lister-watchers).
    pub fn add_shard_unapplied(&self, n: u64) {
        self.shard_unapplied.fetch_add(n, Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> ReflectorStats {
        ReflectorStats {
            lists: self.lists.load(Relaxed),
            pages: self.pages.load(Relaxed),
            listed_items: self.listed_items.load(Relaxed),
            watches: self.watches.load(Relaxed),
            added: self.added.load(Relaxed),
            modified: self.modified.load(Relaxed),
            deleted: self.deleted.load(Relaxed),
            bookmarks: self.bookmarks.load(Relaxed),
            errors: self.errors.load(Relaxed),
            relists: self.relists.load(Relaxed),
            expired: self.expired.load(Relaxed),
            backoff_waits: self.backoff_waits.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            shard_filtered: self.shard_filtered.load(Relaxed),
            shard_unapplied: self.shard_unapplied.load(Relaxed),
            watch_lists_incomplete: self.watch_lists_incomplete.load(Relaxed),
        }
    }
}
