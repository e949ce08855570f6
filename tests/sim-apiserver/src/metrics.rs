//! Request counters, so tests can prove e.g. that two informers share one watch; and the same
//! per authenticated user, so that a test can tell what each of several clients cost the server.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Live counters (all monotonic except `active_watches`).
#[derive(Debug, Default)]
pub struct Counters {
    pub(crate) lists: AtomicU64,
    pub(crate) watches: AtomicU64,
    pub(crate) gets: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) discovery: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) watch_events: AtomicU64,
    pub(crate) active_watches: AtomicU64,
    pub(crate) gzip_responses: AtomicU64,
    pub(crate) protobuf_responses: AtomicU64,
    /// Per authenticated user (by name).
    users: Mutex<HashMap<String, Arc<UserCounters>>>,
}

/// One user's live counters.
#[derive(Debug, Default)]
pub(crate) struct UserCounters {
    requests: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) read_bytes: AtomicU64,
}

/// What one authenticated user's requests cost the server, at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserSnapshot {
    /// Requests authenticated as the user.
    pub requests: u64,
    /// Response body bytes written to the user (lists, gets, writes' answers, errors and watch
    /// streams, after compression; HTTP headers and framing not counted).
    pub bytes: u64,
    /// Of `bytes`, those answering GETs: lists, watches, gets of one object, discovery.
    pub read_bytes: u64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// List requests (GET on a collection without `watch`).
    pub lists: u64,
    /// Watch requests.
    pub watches: u64,
    /// GETs of a single object.
    pub gets: u64,
    /// POST, PUT, PATCH and DELETE requests.
    pub writes: u64,
    /// Discovery and version requests.
    pub discovery: u64,
    /// All requests.
    pub requests: u64,
    /// Responses with a Status error (including injected ones).
    pub errors: u64,
    /// Response body bytes written.
    pub bytes: u64,
    /// Watch events written (including bookmarks and ERROR events).
    pub watch_events: u64,
    /// Watch streams currently open.
    pub active_watches: u64,
    /// Responses sent gzip-compressed (with
    /// [`gzip_responses`](crate::SimServerBuilder::gzip_responses) on).
    pub gzip_responses: u64,
    /// Responses answered in protobuf (whole bodies and watch streams), for requests whose
    /// `Accept` preferred it.
    pub protobuf_responses: u64,
}

impl Counters {
    pub(crate) fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// `user`'s counters, with one more request counted.
    pub(crate) fn user_request(&self, user: &str) -> Arc<UserCounters> {
        let counters = self
            .users
            .lock()
            .entry(user.to_string())
            .or_default()
            .clone();
        Self::inc(&counters.requests);
        counters
    }

    /// Reads every user's counters.
    pub fn users(&self) -> BTreeMap<String, UserSnapshot> {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        self.users
            .lock()
            .iter()
            .map(|(user, c)| {
                let snapshot = UserSnapshot {
                    requests: r(&c.requests),
                    bytes: r(&c.bytes),
                    read_bytes: r(&c.read_bytes),
                };
                (user.clone(), snapshot)
            })
            .collect()
    }

    /// Reads all counters.
    pub fn snapshot(&self) -> CounterSnapshot {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CounterSnapshot {
            lists: r(&self.lists),
            watches: r(&self.watches),
            gets: r(&self.gets),
            writes: r(&self.writes),
            discovery: r(&self.discovery),
            requests: r(&self.requests),
            errors: r(&self.errors),
            bytes: r(&self.bytes),
            watch_events: r(&self.watch_events),
            active_watches: r(&self.active_watches),
            gzip_responses: r(&self.gzip_responses),
            protobuf_responses: r(&self.protobuf_responses),
        }
    }
}
