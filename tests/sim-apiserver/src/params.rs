//! Query parameters of list and watch requests, parsed strictly (bad values give 400).

use crate::representation::Representation;
use crate::selectors::{FieldSelector, LabelSelector, Selectors};
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

fn parse_int(name: &str, v: &str) -> Result<u64, ApiError> {
    v.parse::<i64>()
        .map_err(|_| {
            ApiError::bad_request(format!(
                "invalid value for {name}: strconv.ParseInt: parsing {v:?}: invalid syntax"
            ))
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
                "limit" => p.limit = Some(parse_int("limit", &v)? as usize).filter(|n| *n > 0),
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
                "timeoutSeconds" => {
                    p.timeout_seconds = Some(parse_int("timeoutSeconds", &v)?).filter(|n| *n > 0)
                }
                "sendInitialEvents" => {
                    p.send_initial_events = Some(parse_bool("sendInitialEvents", &v)?)
                }
                _ => {}
            }
        }
        Ok(p)
    }

    /// The resourceVersion as a number, if set and not "0"; 400 if not a number.
    pub fn rv_number(&self) -> Result<Option<u64>, ApiError> {
        match self.resource_version.as_deref() {
            None | Some("0") => Ok(None),
            Some(s) => s
                .parse::<u64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}"))),
        }
    }

    /// `ValidateListOptions` as kube-apiserver applies it (422 Invalid, kind ListOptions).
    pub fn validate(&self) -> Result<(), ApiError> {
        let invalid = |field: &str, reason: &str, detail: &str| {
            Err(ApiError::invalid(
                "ListOptions",
                "meta.k8s.io",
                "",
                field,
                reason,
                detail,
            ))
        };
        if let Some(m) = &self.rv_match {
            if !matches!(m.as_str(), "Exact" | "NotOlderThan") {
                return invalid(
                    "resourceVersionMatch",
                    "FieldValueNotSupported",
                    &format!("Unsupported value: {m:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""),
                );
            }
            if self.watch && self.send_initial_events != Some(true) {
                return invalid("resourceVersionMatch", "FieldValueForbidden", "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided");
            }
            if self.continue_token.is_some() {
                return invalid(
                    "resourceVersionMatch",
                    "FieldValueForbidden",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                );
            }
            if self.resource_version.is_none() && !self.watch {
                return invalid("resourceVersionMatch", "FieldValueForbidden", "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided");
            }
            if m == "Exact" && self.resource_version.as_deref() == Some("0") {
                return invalid("resourceVersionMatch", "FieldValueForbidden", "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"");
            }
        }
        if let Some(sie) = self.send_initial_events {
            if !self.watch {
                return invalid(
                    "sendInitialEvents",
                    "FieldValueForbidden",
                    "Forbidden: sendInitialEvents is forbidden for list",
                );
            }
            if self.rv_match.as_deref() != Some("NotOlderThan") {
                return invalid("resourceVersionMatch", "FieldValueForbidden", "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
            }
            if sie && !self.allow_bookmarks {
                return invalid(
                    "allowWatchBookmarks",
                    "FieldValueForbidden",
                    "Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true",
                );
            }
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
}
