//! List and watch options and their query strings.

use crate::store_index::ResourceVersion;

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceVersionMatch {
    /// `NotOlderThan`.
    NotOlderThan,
    /// `Exact`.
    Exact,
}

impl ResourceVersionMatch {
    fn as_str(self) -> &'static str {
        match self {
            ResourceVersionMatch::NotOlderThan => "NotOlderThan",
            ResourceVersionMatch::Exact => "Exact",
        }
    }
}

/// Options of one list request (one page).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `shardSelector` (server-side sharded lists; render one with
    /// [`ShardSelector`](crate::store_index::ShardSelector)'s `to_string`).
    pub shard_selector: Option<String>,
    /// `limit` (0: none).
    pub limit: u32,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion` (`None`: not sent, which the server treats like `""`).
    pub resource_version: Option<ResourceVersion>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u32>,
}

/// Options of one watch request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `shardSelector` (server-side sharded watches; render one with
    /// [`ShardSelector`](crate::store_index::ShardSelector)'s `to_string`).
    pub shard_selector: Option<String>,
    /// `resourceVersion` to watch from.
    pub resource_version: Option<ResourceVersion>,
    /// `resourceVersionMatch` (watch-list mode only).
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `timeoutSeconds`: the server ends the watch after this long.
    pub timeout_seconds: Option<u32>,
    /// `sendInitialEvents` (watch-list mode).
    pub send_initial_events: Option<bool>,
}

fn push(q: &mut url::form_urlencoded::Serializer<'_, String>, k: &str, v: Option<&str>) {
    if let Some(v) = v {
        q.append_pair(k, v);
    }
}

/// `resourceVersion` and `resourceVersionMatch`, each when set.
fn push_version(
    q: &mut url::form_urlencoded::Serializer<'_, String>,
    version: &Option<ResourceVersion>,
    version_match: Option<ResourceVersionMatch>,
) {
    push(
        q,
        "resourceVersion",
        version.as_ref().map(ResourceVersion::as_str),
    );
    push(q, "resourceVersionMatch", version_match.map(|m| m.as_str()));
}

impl ListOptions {
    /// The query string (without `?`).
    pub fn to_query(&self) -> String {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        push(&mut q, "labelSelector", self.label_selector.as_deref());
        push(&mut q, "fieldSelector", self.field_selector.as_deref());
        push(&mut q, "shardSelector", self.shard_selector.as_deref());
        if self.limit > 0 {
            q.append_pair("limit", &self.limit.to_string());
        }
        push(&mut q, "continue", self.continue_token.as_deref());
        push_version(&mut q, &self.resource_version, self.resource_version_match);
        if let Some(t) = self.timeout_seconds {
            q.append_pair("timeoutSeconds", &t.to_string());
        }
        q.finish()
    }
}

impl WatchOptions {
    /// The query string (without `?`), including `watch=true`.
    pub fn to_query(&self) -> String {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        q.append_pair("watch", "true");
        push(&mut q, "labelSelector", self.label_selector.as_deref());
        push(&mut q, "fieldSelector", self.field_selector.as_deref());
        push(&mut q, "shardSelector", self.shard_selector.as_deref());
        push_version(&mut q, &self.resource_version, self.resource_version_match);
        if self.allow_watch_bookmarks {
            q.append_pair("allowWatchBookmarks", "true");
        }
        if let Some(t) = self.timeout_seconds {
            q.append_pair("timeoutSeconds", &t.to_string());
        }
        if let Some(s) = self.send_initial_events {
            q.append_pair("sendInitialEvents", if s { "true" } else { "false" });
        }
        q.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_options_encode_every_parameter() {
        let o = ListOptions {
            label_selector: Some("app=web,tier!=db".into()),
            field_selector: Some("spec.nodeName=n1".into()),
            shard_selector: Some(
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
                    .into(),
            ),
            limit: 500,
            continue_token: Some("abc=".into()),
            resource_version: Some("0".into()),
            resource_version_match: Some(ResourceVersionMatch::NotOlderThan),
            timeout_seconds: Some(10),
        };
        assert_eq!(
            o.to_query(),
            "labelSelector=app%3Dweb%2Ctier%21%3Ddb&fieldSelector=spec.nodeName%3Dn1&shardSelector=shardRange%28object.metadata.uid%2C+%270x0000000000000000%27%2C+%270x8000000000000000%27%29&limit=500&continue=abc%3D&resourceVersion=0&resourceVersionMatch=NotOlderThan&timeoutSeconds=10"
        );
        assert_eq!(ListOptions::default().to_query(), "");
    }

    #[test]
    fn watch_options_encode_bookmarks_timeout_and_initial_events() {
        let o = WatchOptions {
            resource_version: Some("".into()),
            resource_version_match: Some(ResourceVersionMatch::NotOlderThan),
            allow_watch_bookmarks: true,
            timeout_seconds: Some(300),
            send_initial_events: Some(true),
            ..Default::default()
        };
        assert_eq!(
            o.to_query(),
            "watch=true&resourceVersion=&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=300&sendInitialEvents=true"
        );
    }
}
