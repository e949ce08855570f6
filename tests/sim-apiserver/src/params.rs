//! Query parameters of list and watch requests, parsed strictly (bad values give 400).

use crate::representation::Representation;
use crate::selectors::{FieldSelector, LabelSelector, Selectors};
use crate::shard_selector::ShardSelector;
use crate::status::ApiError;

/// Parsed list/watch options.
#[derive(Debug, Clone, Default)]
pub struct ListParams {
    /// `resourceVersion` (absent or empty → `None`).
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub rv_match: Option<String>,
    /// `limit` (0 → `None`).
    pub limit: Option<usize>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// Label and field selectors.
    pub selectors: Selectors,
    /// `watch`.
    pub watch: bool,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `timeoutSeconds` (0 → `None`).
    pub timeout_seconds: Option<u64>,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `shardSelector` as sent (absent or empty → `None`); read into
    /// [`Selectors::shard`] by [`apply_shard_selector`](Self::apply_shard_selector).
    pub shard_selector: Option<String>,
    /// How the objects are written: not a query parameter but negotiated from the `Accept`
    /// header (see [`representation`](crate::representation)); the objects as they are unless
    /// set.
    pub representation: Representation,
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(name: &str, v: &str) -> Result<bool, ApiError> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(ApiError::bad_request(format!(
            "invalid value for {name}: strconv.ParseBool: parsing {v:?}: invalid syntax"
        ))),
    }
}

fn parse_int(v: &str) -> Result<u64, ApiError> {
    v.parse::<i64>()
        .map_err(|_| {
            ApiError::bad_request(format!("strconv.ParseInt: parsing {v:?}: invalid syntax"))
        })
        .map(|n| n.max(0) as u64)
}

impl ListParams {
    /// Parses a query string (field selectors limited to the generic metadata fields).
    pub fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        Self::parse_for("", query)
    }

    /// Parses a query string for a resource of `kind` (which decides the field selectors).
    pub fn parse_for(kind: &str, query: Option<&str>) -> Result<Self, ApiError> {
        let mut p = Self::default();
        let Some(q) = query else { return Ok(p) };
        for (k, v) in url::form_urlencoded::parse(q.as_bytes()) {
            match k.as_ref() {
                "resourceVersion" => {
                    p.resource_version = Some(v.to_string()).filter(|s| !s.is_empty())
                }
                "resourceVersionMatch" => {
                    p.rv_match = Some(v.to_string()).filter(|s| !s.is_empty())
                }
                "limit" => p.limit = Some(parse_int(&v)? as usize).filter(|n| *n > 0),
                "continue" => p.continue_token = Some(v.to_string()).filter(|s| !s.is_empty()),
                "labelSelector" => {
                    p.selectors.labels = LabelSelector::parse(&v).map_err(ApiError::bad_request)?
                }
                "fieldSelector" => {
                    p.selectors.fields =
                        FieldSelector::parse_for(kind, &v).map_err(ApiError::bad_request)?
                }
                "watch" => p.watch = parse_bool("watch", &v)?,
                "allowWatchBookmarks" => p.allow_bookmarks = parse_bool("allowWatchBookmarks", &v)?,
                "timeoutSeconds" => p.timeout_seconds = Some(parse_int(&v)?).filter(|n| *n > 0),
                "shardSelector" => p.shard_selector = Some(v.to_string()).filter(|s| !s.is_empty()),
                "sendInitialEvents" => {
                    p.send_initial_events = Some(parse_bool("sendInitialEvents", &v)?)
                }
                _ => {}
            }
        }
        Ok(p)
    }

    /// Reads `shardSelector` into the selectors when the server serves sharded lists and
    /// watches (`enabled`); a server without the feature ignores it. A selector that does not
    /// parse is kube-apiserver's answer: a 500 with no reason.
    pub fn apply_shard_selector(&mut self, enabled: bool) -> Result<(), ApiError> {
        if let (true, Some(text)) = (enabled, &self.shard_selector) {
            self.selectors.shard = Some(ShardSelector::parse(text)?);
        }
        Ok(())
    }

    /// The resourceVersion as a number, if set and not "0"; 400 if not a number (in
    /// kube-apiserver's words for a list).
    pub fn rv_number(&self) -> Result<Option<u64>, ApiError> {
        match self.resource_version.as_deref() {
            None | Some("0") => Ok(None),
            Some(s) => s.parse::<u64>().map(Some).map_err(|_| {
                ApiError::bad_request(format!("invalid resource version: {}", unparsable_rv(s)))
            }),
        }
    }

    /// [`ListParams::rv_number`] for a get or a watch, where kube-apiserver answers a
    /// malformed resourceVersion with a 500 that has no reason.
    pub fn rv_number_or_500(&self) -> Result<Option<u64>, ApiError> {
        self.rv_number().map_err(|_| {
            ApiError::unclassified(unparsable_rv(
                self.resource_version.as_deref().unwrap_or(""),
            ))
        })
    }

    /// `ValidateListOptions` as kube-apiserver applies it (422 Invalid, kind ListOptions,
    /// every broken rule a cause of its own), then the continue rule of its storage (400).
    pub fn validate(&self) -> Result<(), ApiError> {
        let errors = if self.watch {
            self.watch_errors()
        } else {
            self.list_errors()
        };
        if !errors.is_empty() {
            let causes: Vec<(&str, String, String)> = errors
                .into_iter()
                .map(|(field, reason, detail)| (reason, field.to_string(), detail))
                .collect();
            return Err(ApiError::invalid_causes(
                "ListOptions",
                "meta.k8s.io",
                "",
                &causes,
            ));
        }
        if self.continue_token.is_some()
            && self.resource_version.as_deref().is_some_and(|rv| rv != "0")
        {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        Ok(())
    }

    /// The rules of a list: `(field, cause reason, detail)` for each one broken.
    fn list_errors(&self) -> Vec<(&'static str, &'static str, String)> {
        let mut out = Vec::new();
        if let Some(m) = &self.rv_match {
            if self.resource_version.is_none() {
                out.push(forbidden(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if self.continue_token.is_some() {
                out.push(forbidden(
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if !matches!(m.as_str(), "Exact" | "NotOlderThan") {
                out.push(not_supported(m, "\"Exact\", \"NotOlderThan\", \"\""));
            }
            if m == "Exact" && self.resource_version.as_deref() == Some("0") {
                out.push(forbidden(
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if self.send_initial_events.is_some() {
            out.push((
                "sendInitialEvents",
                "FieldValueForbidden",
                "Forbidden: sendInitialEvents is forbidden for list".into(),
            ));
        }
        out
    }

    /// The rules of a watch (WatchList enabled, as kube-apiserver 1.34 and later have it).
    fn watch_errors(&self) -> Vec<(&'static str, &'static str, String)> {
        let mut out = Vec::new();
        let m = self.rv_match.as_deref();
        if self.send_initial_events.is_some() && m != Some("NotOlderThan") {
            out.push(forbidden(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if let Some(m) = m {
            if self.send_initial_events.is_none() {
                out.push(forbidden(
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if m != "NotOlderThan" {
                out.push(not_supported(m, "\"NotOlderThan\""));
            }
            if self.continue_token.is_some() {
                out.push(forbidden(
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        out
    }
}

fn forbidden(detail: &str) -> (&'static str, &'static str, String) {
    (
        "resourceVersionMatch",
        "FieldValueForbidden",
        format!("Forbidden: {detail}"),
    )
}

fn not_supported(value: &str, supported: &str) -> (&'static str, &'static str, String) {
    (
        "resourceVersionMatch",
        "FieldValueNotSupported",
        format!("Unsupported value: {value:?}: supported values: {supported}"),
    )
}

/// Why `rv` is no resourceVersion, as kube-apiserver says it (Go's `strconv.ParseUint`).
pub fn unparsable_rv(rv: &str) -> String {
    format!(
        "resourceVersion: Invalid value: {rv:?}: strconv.ParseUint: parsing {rv:?}: invalid syntax"
    )
}
