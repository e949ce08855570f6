//! The server's clock as kube-apiserver writes it: RFC 3339 in UTC, to the second
//! (`creationTimestamp`, `deletionTimestamp`, a review's and a managed field's time), through the
//! workspace's one date codec.

use std::time::SystemTime;

use crate::protobuf::time;

/// Current time in RFC 3339 (`2024-01-02T03:04:05Z`).
pub fn rfc3339_now() -> String {
    time::format_system_time(SystemTime::now(), 0)
}
