//! Replaying a group against a server: each step's request sent (variables replaced), its answer
//! kept as JSON (the status, the compared headers, the body parsed by its content type, a
//! watch's events), not yet normalised. A transport failure is kept as the answer too, so that
//! a server that drops a request shows as a difference instead of ending the run.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{json, Map, Value};

use crate::corpus::{self, Action, Group, Read, RequestSpec, Step, Until};
use crate::http::{Answer, OpenWatch, Outgoing};
use crate::target::Target;
use crate::{protobuf, Error};

/// The response headers compared: what a client decodes by (`Content-Type`), what it tells its
/// user (`Warning`) and when it retries (`Retry-After`). Per-request ones (`Audit-Id`, `Date`,
/// the priority-and-fairness uids) are never kept.
pub const COMPARED_HEADERS: [&str; 3] = ["content-type", "warning", "retry-after"];

/// How long a watch that answered with an error may take to end its body.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(10);

/// One step's answer, as recorded.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The step's name.
    pub step: String,
    /// The answer as JSON: `request`, `status`, `headers`, and `body` or `events`.
    pub answer: Value,
}

/// Runs `group` on `target`; returns the compared steps' answers, in order.
pub async fn run_group(target: &Target, group: &Group) -> Result<Vec<Recorded>, Error> {
    let mut vars = BTreeMap::from([("ns".to_string(), group.namespace())]);
    let mut watches: HashMap<String, OpenWatch> = HashMap::new();
    let mut out = Vec::new();
    for step in &group.steps {
        let failed = |why: String| Error::Replay {
            group: group.name.clone(),
            step: step.name.clone(),
            why,
        };
        match &step.action {
            Action::Request {
                request,
                read,
                capture,
            } => {
                let outgoing = outgoing(target, request, &vars).map_err(failed)?;
                let answer = match read {
                    Read::Whole => whole(target, &outgoing).await,
                    Read::Events(n, timeout) => watch(target, &outgoing, *n, *timeout).await,
                    Read::Open(name) => {
                        let (answer, open) = open(target, &outgoing).await;
                        if let Some(open) = open {
                            watches.insert(name.clone(), open);
                        }
                        answer
                    }
                };
                for (var, pointer) in capture {
                    let value = answer
                        .get("body")
                        .and_then(|b| b.pointer(pointer))
                        .map(|v| match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        // The later steps' answers then show what is missing.
                        .unwrap_or_else(|| format!("missing-{var}"));
                    vars.insert(var.clone(), value);
                }
                out.push(recorded(step, request_line(request), answer));
            }
            Action::Collect {
                watch,
                events,
                timeout,
            } => {
                let answer = match watches.get_mut(watch) {
                    Some(open) => json!({"events": read_events(open, *events, *timeout).await}),
                    None => json!({"error": format!("the watch `{watch}` did not open")}),
                };
                out.push(recorded(step, json!({"collect": watch}), answer));
            }
            Action::Compact { probe } => {
                let outgoing = outgoing(target, probe, &vars).map_err(failed)?;
                target.compact(&outgoing).await?;
            }
            Action::Wait {
                request,
                until,
                timeout,
            } => {
                let outgoing = outgoing(target, request, &vars).map_err(failed)?;
                wait(target, &outgoing, until, *timeout)
                    .await
                    .map_err(failed)?;
            }
        }
    }
    Ok(out)
}

fn recorded(step: &Step, request: Value, answer: Value) -> Recorded {
    let mut entry = Map::new();
    entry.insert("step".into(), step.name.clone().into());
    entry.insert("request".into(), request);
    if let Value::Object(fields) = answer {
        entry.extend(fields);
    }
    Recorded {
        step: step.name.clone(),
        answer: Value::Object(entry),
    }
}

/// The request as the golden file shows it: variables not replaced, so that it reads the same
/// on every server and every run.
fn request_line(request: &RequestSpec) -> Value {
    let mut line = json!({"method": request.method, "path": request.path});
    if request.user != corpus::User::Admin {
        line["user"] = request.user.name().into();
    }
    for name in ["accept", "content-type"] {
        if let Some(value) = request.headers.get(name) {
            line[name] = value.clone().into();
        }
    }
    line
}

fn outgoing(
    target: &Target,
    request: &RequestSpec,
    vars: &BTreeMap<String, String>,
) -> Result<Outgoing, String> {
    let headers = request
        .headers
        .iter()
        .map(|(k, v)| Ok((k.clone(), corpus::substitute(v, vars)?)))
        .collect::<Result<Vec<_>, String>>()?;
    let body = match &request.body {
        Some(text) => Bytes::from(corpus::substitute(text, vars)?),
        None => Bytes::new(),
    };
    Ok(Outgoing {
        method: http::Method::from_bytes(request.method.as_bytes()).map_err(|e| e.to_string())?,
        path: corpus::substitute(&request.path, vars)?,
        headers,
        token: target.token(request.user).to_string(),
        body,
    })
}

async fn whole(target: &Target, request: &Outgoing) -> Value {
    match target.client().send(request).await {
        Ok(answer) => answer_json(&answer),
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// Status, compared headers and body of `answer`.
fn answer_json(answer: &Answer) -> Value {
    json!({
        "status": answer.status,
        "headers": headers_json(&answer.headers),
        "body": body_json(&answer.headers, &answer.body),
    })
}

fn headers_json(headers: &HeaderMap) -> Value {
    let mut out = Map::new();
    for name in COMPARED_HEADERS {
        let values: Vec<Value> = headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned().into())
            .collect();
        match values.len() {
            0 => {}
            1 => {
                out.insert(name.into(), values[0].clone());
            }
            _ => {
                out.insert(name.into(), Value::Array(values));
            }
        }
    }
    Value::Object(out)
}

/// The body by its content type: protobuf described, JSON parsed, anything else as text.
fn body_json(headers: &HeaderMap, body: &[u8]) -> Value {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if body.is_empty() {
        Value::Null
    } else if content_type.contains("protobuf") {
        json!({"protobuf": protobuf::describe(body)})
    } else {
        serde_json::from_slice(body)
            .unwrap_or_else(|_| json!({"text": String::from_utf8_lossy(body)}))
    }
}

async fn watch(target: &Target, request: &Outgoing, events: usize, timeout: Duration) -> Value {
    let (mut answer, open) = open(target, request).await;
    if let Some(mut open) = open {
        answer["events"] = read_events(&mut open, events, timeout).await;
    }
    answer
}

/// Opens a watch: its status and headers, and the watch itself when it answered 200 (an error
/// answer's body is read whole into `body`).
async fn open(target: &Target, request: &Outgoing) -> (Value, Option<OpenWatch>) {
    let mut open = match target.client().open_watch(request).await {
        Ok(open) => open,
        Err(e) => return (json!({"error": e.to_string()}), None),
    };
    let mut answer = json!({"status": open.status, "headers": headers_json(&open.headers)});
    if open.status == 200 {
        return (answer, Some(open));
    }
    let mut body = Vec::new();
    let deadline = tokio::time::Instant::now() + ERROR_BODY_WAIT;
    while let Ok(Some(Ok(line))) = tokio::time::timeout_at(deadline, open.lines.recv()).await {
        if !body.is_empty() {
            body.push(b'\n');
        }
        body.extend_from_slice(&line);
    }
    answer["body"] = body_json(&open.headers, &body);
    (answer, None)
}

/// Up to `events` events of `open`, or those that come within `timeout`.
async fn read_events(open: &mut OpenWatch, events: usize, timeout: Duration) -> Value {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < events {
        match tokio::time::timeout_at(deadline, open.lines.recv()).await {
            Ok(Some(Ok(line))) => out.push(
                serde_json::from_slice(&line)
                    .unwrap_or_else(|_| json!({"text": String::from_utf8_lossy(&line)})),
            ),
            Ok(Some(Err(e))) => {
                out.push(json!({"stream_error": e}));
                break;
            }
            Ok(None) => {
                out.push(json!({"stream_ended": true}));
                break;
            }
            Err(_) => {
                out.push(json!({"timed_out_after_events": out.len()}));
                break;
            }
        }
    }
    Value::Array(out)
}

/// Sends `request` until its answer is as `until` says, or `timeout` passes.
async fn wait(
    target: &Target,
    request: &Outgoing,
    until: &Until,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut every = tokio::time::interval(Duration::from_millis(100));
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        every.tick().await;
        match target.client().send(request).await {
            Ok(answer) => {
                let body: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
                let value_ok = match (&until.pointer, &until.equals) {
                    (Some(pointer), Some(expected)) => body.pointer(pointer) == Some(expected),
                    (Some(pointer), None) => body.pointer(pointer).is_some(),
                    _ => true,
                };
                if answer.status == until.status && value_ok {
                    return Ok(());
                }
                last = format!(
                    "{} {}",
                    answer.status,
                    String::from_utf8_lossy(&answer.body)
                        .chars()
                        .take(300)
                        .collect::<String>()
                );
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err(format!(
        "{} {} did not answer as waited for in {} s; last: {last}",
        request.method,
        request.path,
        timeout.as_secs()
    ))
}
