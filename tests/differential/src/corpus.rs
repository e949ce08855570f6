//! The corpus: groups of requests, as data (`corpus/<group>.json`), each group run in a
//! namespace of its own (`diff-<group>`, created by its first request) so that the groups are
//! independent of each other and of the order they run in.
//!
//! A group file is `{"about": "...", "steps": [...]}`; a step is one of
//!
//! - a request: `{"name", "note" (a comment, not sent), "method" (GET), "path", "user" ("admin" | "viewer"), "headers",
//!   "body" (JSON) or "body_text" (sent as is), "capture": {"var": "/json/pointer"}}`, its
//!   whole answer compared; with `"watch": N` the answer is a watch whose first N events are
//!   read (or as many as come in `timeout_ms`, 10 s by default) and compared; with
//!   `"open_watch": "w"` the watch stays open (its status and headers are compared) for a later
//!   `{"name", "collect": "w", "events": N}` to read N events of it, after the writes between;
//! - `{"name", "compact": "<path>"}`: the server compacts its history (the simulator at once, the
//!   real one when its compactor next runs), until the request at `path` answers 410; not
//!   compared;
//! - `{"name", "path", "wait_until": {"status", "pointer", "equals"}}`: the request is repeated
//!   until its answer has that status (and the JSON `pointer` of its body that value), as a
//!   client waits for a CustomResourceDefinition to be served; not compared.
//!
//! `${var}` in a path, a header or a body is replaced by a capture of an earlier step, or by
//! `${ns}`, the group's namespace. Everything is checked when the corpus is loaded, so that a
//! mistake in it is reported with its file and step, before any server starts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::Error;

/// How long a watch read, a collect or a wait goes on by default before it gives up.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The users a step may ask as: the two every server of the corpus knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum User {
    /// `admin`, in `system:masters`.
    Admin,
    /// `viewer`, with no grants of its own.
    Viewer,
}

impl User {
    /// The user's name, as both servers know it.
    pub fn name(self) -> &'static str {
        match self {
            User::Admin => "admin",
            User::Viewer => "viewer",
        }
    }
}

/// One group: a namespace's worth of steps.
#[derive(Debug, Clone)]
pub struct Group {
    /// The file's stem.
    pub name: String,
    /// What the group is about.
    pub about: String,
    /// The steps, in order (the namespace's creation first).
    pub steps: Vec<Step>,
}

impl Group {
    /// The namespace the group runs in.
    pub fn namespace(&self) -> String {
        format!("diff-{}", self.name)
    }

    /// The `metadata.generateName` prefixes the group's request bodies ask for: the names
    /// generated from them are random, in objects and in error messages alike.
    pub fn generate_name_prefixes(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .steps
            .iter()
            .filter_map(|step| match &step.action {
                Action::Request { request, .. } => request.body.as_deref(),
                _ => None,
            })
            .filter_map(|body| serde_json::from_str::<Value>(body).ok())
            .filter_map(|body| {
                body.pointer("/metadata/generateName")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .filter(|prefix| !prefix.is_empty())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// One step of a group.
#[derive(Debug, Clone)]
pub struct Step {
    /// Unique in its group.
    pub name: String,
    /// What it does.
    pub action: Action,
}

impl Step {
    /// Whether the step's answer is compared (requests and collects are; compactions and waits
    /// only prepare them).
    pub fn compared(&self) -> bool {
        matches!(self.action, Action::Request { .. } | Action::Collect { .. })
    }
}

/// What a step does.
#[derive(Debug, Clone)]
pub enum Action {
    /// Send a request and compare its answer.
    Request {
        /// The request, variables not yet replaced.
        request: RequestSpec,
        /// How much of the answer to read.
        read: Read,
        /// Variables taken from the answer's JSON body, by JSON pointer.
        capture: BTreeMap<String, String>,
    },
    /// Read events from a watch an earlier step opened.
    Collect {
        /// The watch's name.
        watch: String,
        /// How many events to wait for.
        events: usize,
        /// How long to wait for them.
        timeout: Duration,
    },
    /// Compact the server's history until `probe` answers 410.
    Compact {
        /// A GET whose answer turns 410 once the history it reads is compacted.
        probe: RequestSpec,
    },
    /// Repeat a request until its answer matches.
    Wait {
        /// The request.
        request: RequestSpec,
        /// What the answer must be.
        until: Until,
        /// How long to go on.
        timeout: Duration,
    },
}

/// How much of a request's answer a step reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// The whole body.
    Whole,
    /// A watch: this many events, or what comes before the timeout.
    Events(usize, Duration),
    /// A watch left open under a name, for later collects.
    Open(String),
}

/// A request, before its variables are replaced.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    /// The HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Who asks.
    pub user: User,
    /// Request headers, by lower-case name.
    pub headers: BTreeMap<String, String>,
    /// The body's text (a JSON body serialised), if any.
    pub body: Option<String>,
}

/// The answer a [`Action::Wait`] waits for.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Until {
    /// The HTTP status.
    pub status: u16,
    /// A JSON pointer into the body that must hold [`Until::equals`].
    #[serde(default)]
    pub pointer: Option<String>,
    /// The value at [`Until::pointer`].
    #[serde(default)]
    pub equals: Option<Value>,
}

/// A step as written in a corpus file; [`parse_step`] makes it a [`Step`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepText {
    name: String,
    /// A comment for the reader of the corpus; not sent.
    #[serde(default, rename = "note")]
    _note: Option<String>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<Value>,
    #[serde(default)]
    body_text: Option<String>,
    #[serde(default)]
    capture: BTreeMap<String, String>,
    #[serde(default)]
    watch: Option<usize>,
    #[serde(default)]
    open_watch: Option<String>,
    #[serde(default)]
    collect: Option<String>,
    #[serde(default)]
    events: Option<usize>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    compact: Option<String>,
    #[serde(default)]
    wait_until: Option<Until>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupText {
    about: String,
    steps: Vec<StepText>,
}

/// The corpus directory of this crate.
pub fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// Loads every `*.json` group of `dir`, in file-name order.
pub fn load(dir: &Path) -> Result<Vec<Group>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::Corpus {
            file: dir.to_path_buf(),
            problem: "no *.json group files".into(),
        });
    }
    files.iter().map(|f| load_group(f)).collect()
}

/// Loads and checks one group file.
pub fn load_group(file: &Path) -> Result<Group, Error> {
    let problem = |problem: String| Error::Corpus {
        file: file.to_path_buf(),
        problem,
    };
    let name = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_string();
    let valid_name = !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid_name {
        return Err(problem(
            "the file's stem names the group's namespace: lower-case letters, digits and '-', at most 40".into(),
        ));
    }
    let text = std::fs::read_to_string(file).map_err(|e| Error::io(file, e))?;
    let parsed: GroupText = serde_json::from_str(&text).map_err(|e| problem(e.to_string()))?;
    let namespace = format!("diff-{name}");
    let mut steps = vec![namespace_step(&namespace)];
    let mut defined: BTreeSet<String> = BTreeSet::from(["ns".to_string()]);
    let mut watches = BTreeSet::new();
    for raw in parsed.steps {
        let step_name = raw.name.clone();
        let step = parse_step(raw, &defined, &watches)
            .map_err(|p| problem(format!("step `{step_name}`: {p}")))?;
        if steps.iter().any(|s| s.name == step.name) {
            return Err(problem(format!("two steps are named `{}`", step.name)));
        }
        if let Action::Request { capture, read, .. } = &step.action {
            defined.extend(capture.keys().cloned());
            if let Read::Open(watch) = read {
                watches.insert(watch.clone());
            }
        }
        steps.push(step);
    }
    Ok(Group {
        name,
        about: parsed.about,
        steps,
    })
}

/// The first step of every group: its namespace.
fn namespace_step(namespace: &str) -> Step {
    Step {
        name: "create-namespace".into(),
        action: Action::Request {
            request: RequestSpec {
                method: "POST".into(),
                path: "/api/v1/namespaces".into(),
                user: User::Admin,
                headers: BTreeMap::from([("content-type".into(), "application/json".into())]),
                body: Some(
                    serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": namespace}})
                    .to_string(),
                ),
            },
            read: Read::Whole,
            capture: BTreeMap::new(),
        },
    }
}

fn parse_step(
    raw: StepText,
    defined: &BTreeSet<String>,
    watches: &BTreeSet<String>,
) -> Result<Step, String> {
    let kinds = [
        raw.collect.is_some(),
        raw.compact.is_some(),
        raw.wait_until.is_some(),
        raw.watch.is_some(),
        raw.open_watch.is_some(),
    ];
    if kinds.iter().filter(|k| **k).count() > 1 {
        return Err(
            "at most one of `collect`, `compact`, `wait_until`, `watch` and `open_watch`".into(),
        );
    }
    let timeout = raw
        .timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_TIMEOUT);
    let name = raw.name.clone();
    if let Some(watch) = raw.collect.clone() {
        if !watches.contains(&watch) {
            return Err(format!("collects `{watch}`, which no earlier step opened"));
        }
        let events = raw
            .events
            .ok_or("a collect says how many `events` it waits for")?;
        no_request_fields(&raw)?;
        return Ok(Step {
            name,
            action: Action::Collect {
                watch,
                events,
                timeout,
            },
        });
    }
    if raw.events.is_some() {
        return Err("`events` belongs to a `collect` step".into());
    }
    if let Some(path) = raw.compact.clone() {
        no_request_fields(&raw)?;
        let probe = RequestSpec {
            method: "GET".into(),
            path,
            user: User::Admin,
            headers: BTreeMap::new(),
            body: None,
        };
        check_variables(&probe, defined)?;
        return Ok(Step {
            name,
            action: Action::Compact { probe },
        });
    }
    let until = raw.wait_until.clone();
    let read = match (raw.watch, raw.open_watch.clone()) {
        (Some(n), _) => Read::Events(n, timeout),
        (_, Some(w)) => {
            if watches.contains(&w) {
                return Err(format!("the watch `{w}` is opened twice"));
            }
            Read::Open(w)
        }
        _ => Read::Whole,
    };
    if !raw.capture.is_empty() && read != Read::Whole {
        return Err("a watch's answer has nothing to capture".into());
    }
    for (var, pointer) in &raw.capture {
        if !pointer.starts_with('/') {
            return Err(format!(
                "capture `{var}`: `{pointer}` is not a JSON pointer"
            ));
        }
    }
    let capture = raw.capture.clone();
    let request = request_spec(raw)?;
    check_variables(&request, defined)?;
    Ok(Step {
        name,
        action: match until {
            Some(until) => Action::Wait {
                request,
                until,
                timeout,
            },
            None => Action::Request {
                request,
                read,
                capture,
            },
        },
    })
}

fn no_request_fields(raw: &StepText) -> Result<(), String> {
    let has_request = raw.method.is_some()
        || raw.path.is_some()
        || raw.user.is_some()
        || !raw.headers.is_empty()
        || raw.body.is_some()
        || raw.body_text.is_some()
        || !raw.capture.is_empty();
    if has_request {
        Err("a `collect` or `compact` step sends no request of its own".into())
    } else {
        Ok(())
    }
}

fn request_spec(raw: StepText) -> Result<RequestSpec, String> {
    let path = raw.path.ok_or("no `path`")?;
    if !path.starts_with('/') {
        return Err(format!("the path `{path}` does not start with `/`"));
    }
    let method = raw.method.unwrap_or_else(|| "GET".into());
    if http::Method::from_bytes(method.as_bytes()).is_err() {
        return Err(format!("`{method}` is not an HTTP method"));
    }
    let mut headers: BTreeMap<String, String> = raw
        .headers
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    let body = match (raw.body, raw.body_text) {
        (Some(_), Some(_)) => return Err("both `body` and `body_text`".into()),
        (Some(json), None) => {
            headers
                .entry("content-type".into())
                .or_insert_with(|| "application/json".into());
            Some(json.to_string())
        }
        (None, text) => text,
    };
    if body.is_some() && !headers.contains_key("content-type") {
        return Err("a `body_text` needs a `Content-Type` header".into());
    }
    Ok(RequestSpec {
        method,
        path,
        user: raw.user.unwrap_or(User::Admin),
        headers,
        body,
    })
}

/// Every `${var}` of `request` is defined by an earlier step.
fn check_variables(request: &RequestSpec, defined: &BTreeSet<String>) -> Result<(), String> {
    let texts = std::iter::once(&request.path)
        .chain(request.headers.values())
        .chain(request.body.iter());
    for text in texts {
        for var in variables(text) {
            if !defined.contains(var) {
                return Err(format!("uses `${{{var}}}`, which no earlier step captures"));
            }
        }
    }
    Ok(())
}

/// The names of the `${var}`s in `text`.
fn variables(text: &str) -> impl Iterator<Item = &str> {
    text.split("${")
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
}

/// `text` with each `${var}` replaced by its value in `vars`.
pub fn substitute(text: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let (name, tail) = after
            .split_once('}')
            .ok_or_else(|| format!("an unclosed `${{` in `{text}`"))?;
        let value = vars
            .get(name)
            .ok_or_else(|| format!("`${{{name}}}` has no value"))?;
        out.push_str(value);
        rest = tail;
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(text: &str) -> Result<Group, Error> {
        static FILES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("differential-corpus-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("g.json");
        std::fs::write(&file, text).unwrap();
        load_group(&file)
    }

    #[test]
    fn a_group_starts_with_its_namespace_and_captures_feed_later_steps() {
        let g = group(
            r#"{"about": "x", "steps": [
                {"name": "create", "method": "POST", "path": "/api/v1/namespaces/${ns}/configmaps",
                 "body": {"metadata": {"name": "a"}}, "capture": {"rv": "/metadata/resourceVersion"}},
                {"name": "get", "path": "/api/v1/namespaces/${ns}/configmaps?resourceVersion=${rv}"}
            ]}"#,
        )
        .unwrap();
        assert_eq!(g.namespace(), "diff-g");
        assert_eq!(g.steps[0].name, "create-namespace");
        assert_eq!(g.steps.len(), 3);
    }

    #[test]
    fn a_variable_nobody_captures_is_refused_with_its_step() {
        let e = group(r#"{"about": "x", "steps": [{"name": "get", "path": "/x/${nope}"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("step `get`") && e.contains("${nope}"), "{e}");
    }

    #[test]
    fn unknown_fields_and_collects_of_unopened_watches_are_refused() {
        let e = group(r#"{"about": "x", "steps": [{"name": "a", "path": "/", "bogus": 1}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("bogus"), "{e}");
        let e = group(r#"{"about": "x", "steps": [{"name": "a", "collect": "w", "events": 1}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no earlier step opened"), "{e}");
    }

    #[test]
    fn substitute_replaces_every_variable() {
        let vars = BTreeMap::from([("ns".to_string(), "n1".to_string())]);
        assert_eq!(substitute("/a/${ns}/b/${ns}", &vars).unwrap(), "/a/n1/b/n1");
        assert!(substitute("/a/${x}", &vars).is_err());
    }
}
