//! The write log: every stored change, in revision order, with the user whose request made it,
//! read from the server's side ([`crate::SimServer::write_log`]).
//!
//! A test of a controller asks two questions its own logs cannot answer honestly: what did the
//! server accept, and from whom. A leader-elected or sharded controller must never have two
//! replicas acting on one object; the proof is in which identity's writes the server stored
//! while another identity held the object, late writes delayed by a partition included. The log
//! records each change as the store commits it (so a refused write, a dry run or a write held back
//! by a partition and dropped is not in it), named by the authenticated user of the request that
//! made it, or [`TEST_API_USER`] for the in-process test API and the churn generator.
//!
//! Bounded: the oldest records go first beyond [`SimServerBuilder::write_log_limit`]
//! (default [`DEFAULT_WRITE_LOG_LIMIT`]); [`WriteLog::dropped`] counts them, so that a test can
//! tell a complete log from a truncated one.
//!
//! [`SimServerBuilder::write_log_limit`]: crate::SimServerBuilder::write_log_limit

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use crate::watch_event::EventType;

/// Records kept by default.
pub const DEFAULT_WRITE_LOG_LIMIT: usize = 100_000;

/// The user named for changes made through the in-process test API ([`crate::SimServer::create`]
/// and friends) and by the churn generator: no HTTP request, no authenticated user.
pub const TEST_API_USER: &str = "sim:test-api";

tokio::task_local! {
    /// The authenticated user of the request the current task is handling.
    static WRITER: Arc<str>;
}

/// Runs `f` (the handling of one request) with `user` as the writer its changes are recorded
/// under.
pub(crate) async fn as_writer<F: Future>(user: &str, f: F) -> F::Output {
    WRITER.scope(Arc::from(user), f).await
}

/// The writer of the current task, or [`TEST_API_USER`] outside any request.
fn current_writer() -> Arc<str> {
    WRITER
        .try_with(Arc::clone)
        .unwrap_or_else(|_| Arc::from(TEST_API_USER))
}

/// One stored change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRecord {
    /// The revision the change was stored at (its resourceVersion).
    pub revision: u64,
    /// What the change did: `Added` (create), `Modified` (update, patch, apply, status or scale
    /// write, a deletion that only set `deletionTimestamp`), `Deleted`.
    pub event: EventType,
    /// The resource's plural name (`pods`, `widgets`).
    pub resource: String,
    /// The resource's API group (`""` for core).
    pub group: String,
    /// The namespace (`""` for cluster-scoped objects).
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The authenticated user of the request (the name a token or certificate stands for), or
    /// [`TEST_API_USER`].
    pub user: String,
    /// When the store committed it (wall clock).
    pub at: SystemTime,
}

/// The bounded log (see the [module docs](self)).
#[derive(Debug)]
pub struct WriteLog {
    records: VecDeque<Pending>,
    limit: usize,
    dropped: u64,
}

/// A record as the store commits it: the resource by registry index, resolved when read.
#[derive(Debug, Clone)]
struct Pending {
    revision: u64,
    event: EventType,
    res: usize,
    namespace: String,
    name: String,
    user: Arc<str>,
    at: SystemTime,
}

impl Default for WriteLog {
    fn default() -> Self {
        WriteLog::with_limit(DEFAULT_WRITE_LOG_LIMIT)
    }
}

impl WriteLog {
    /// An empty log of at most `limit` records (0 keeps none).
    pub fn with_limit(limit: usize) -> Self {
        WriteLog {
            records: VecDeque::new(),
            limit,
            dropped: 0,
        }
    }

    /// Records a change the store commits now, under the current task's writer.
    pub(crate) fn record(&mut self, revision: u64, event: EventType, res: usize, key: &str) {
        if self.limit == 0 {
            self.dropped += 1;
            return;
        }
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        self.records.push_back(Pending {
            revision,
            event,
            res,
            namespace: namespace.to_string(),
            name: name.to_string(),
            user: current_writer(),
            at: SystemTime::now(),
        });
        while self.records.len() > self.limit {
            self.records.pop_front();
            self.dropped += 1;
        }
    }

    /// Records dropped to keep the bound (0: the log is complete since the server started).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The records, oldest first, with each resource index resolved by `resource` into its
    /// (plural, group).
    pub(crate) fn records(&self, resource: impl Fn(usize) -> (String, String)) -> Vec<WriteRecord> {
        self.records
            .iter()
            .map(|p| {
                let (plural, group) = resource(p.res);
                WriteRecord {
                    revision: p.revision,
                    event: p.event,
                    resource: plural,
                    group,
                    namespace: p.namespace.clone(),
                    name: p.name.clone(),
                    user: p.user.to_string(),
                    at: p.at,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(res: usize) -> (String, String) {
        (format!("r{res}"), String::new())
    }

    #[tokio::test]
    async fn a_change_is_recorded_under_the_requests_user_and_the_test_api_outside_one() {
        let mut log = WriteLog::default();
        log.record(1, EventType::Added, 0, "default/a");
        as_writer("alice", async {
            log.record(2, EventType::Modified, 0, "default/a")
        })
        .await;
        log.record(3, EventType::Deleted, 1, "cluster-thing");
        let records = log.records(resolve);
        let users: Vec<&str> = records.iter().map(|r| r.user.as_str()).collect();
        assert_eq!(users, [TEST_API_USER, "alice", TEST_API_USER]);
        assert_eq!(records[1].namespace, "default");
        assert_eq!(records[1].name, "a");
        assert_eq!(records[2].namespace, "");
        assert_eq!(records[2].name, "cluster-thing");
        assert_eq!(records[2].resource, "r1");
        assert_eq!(log.dropped(), 0);
    }

    #[test]
    fn the_oldest_records_go_first_beyond_the_limit_and_are_counted() {
        let mut log = WriteLog::with_limit(2);
        for rev in 1..=5 {
            log.record(rev, EventType::Modified, 0, "ns/x");
        }
        let revisions: Vec<u64> = log.records(resolve).iter().map(|r| r.revision).collect();
        assert_eq!(revisions, [4, 5]);
        assert_eq!(log.dropped(), 3);
        let mut none = WriteLog::with_limit(0);
        none.record(1, EventType::Added, 0, "x");
        assert!(none.records(resolve).is_empty());
        assert_eq!(none.dropped(), 1);
    }
}
