//! Fault injection, controllable per test through [`Faults`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::status::ApiError;
use crate::storage::Storage;

/// Which requests a failure applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// Collection GETs without `watch`.
    List,
    /// Watch requests.
    Watch,
    /// GET of one object.
    Get,
    /// POST, PUT, PATCH, DELETE.
    Write,
    /// Any resource request (not discovery).
    Any,
}

/// How a list request misbehaves under [`Faults::list_body`]. Each variant answers in place
/// of the real list (after authentication and any [`Faults::fail_next`] failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListFault {
    /// HTTP **200** whose body is a failure `Status`
    /// (`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":..,
    /// "reason":"InternalError","code":500}`), as some proxies and aggregated API servers send.
    StatusWithOk,
    /// HTTP 200, `application/json`, body `{}` (no kind, no metadata, no items).
    EmptyObject,
    /// HTTP 200, `Content-Type: text/html`, a small HTML error page (a proxy's).
    Html,
    /// HTTP 200, `application/json`, a streamed body that starts like the real list
    /// (`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"<current>"},
    /// "items":[`) and then writes valid items (`{"metadata":{"name":"endless-N",..}},`) in
    /// 64 KiB chunks forever, never closing the array. It writes only as fast as the client
    /// reads and stops when the client disconnects or the server shuts down.
    Endless,
    /// The first page of the real list (honouring `limit`; the whole list without one) whose
    /// `metadata.continue` is always [`REPEAT_CONTINUE_TOKEN`]; a list continuing with that
    /// token gets the same page and token again, so a pager never ends. Every such answer
    /// counts as one of the `k`; once they are used up the token is refused like any garbled
    /// one (400 `continue key is not valid`).
    RepeatContinue,
    /// HTTP 200 with the real list body, but only its first half is sent; then the connection
    /// is aborted (HTTP/1.1: no terminating chunk; HTTP/2: the stream is reset).
    CloseMidBody,
    /// The real list body without `metadata.resourceVersion`.
    NoResourceVersion,
}

/// The fixed continue token of [`ListFault::RepeatContinue`] (not a valid token otherwise).
pub const REPEAT_CONTINUE_TOKEN: &str = "c2ltLWFwaXNlcnZlci1yZXBlYXQtY29udGludWU";

/// A count of remaining occurrences where `u32::MAX` means "every one, until reset".
const EVERY: u32 = u32::MAX;

/// Uses one occurrence of `n`: `false` when none is left; `EVERY` never runs out.
fn take_one(n: &mut u32) -> bool {
    match *n {
        0 => false,
        EVERY => true,
        _ => {
            *n -= 1;
            true
        }
    }
}

#[derive(Debug, Default)]
struct State {
    end_watches_after: Option<u64>,
    rechunk: Option<usize>,
    fail_next: Vec<(RequestKind, ApiError, u32)>,
    list_faults: Vec<(ListFault, u32)>,
    silent_watches: u32,
    reset_mid_chunk: u32,
    malformed: u32,
    unknown_events: u32,
    error_events: Vec<ApiError>,
    conflict_writes: u32,
    partitioned: HashSet<String>,
    slow: HashMap<String, Duration>,
}

/// Per-stream fault settings captured when a watch opens.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StreamFaults {
    pub end_after: Option<u64>,
    pub rechunk: Option<usize>,
}

/// A one-shot fault picked up by the next watch event written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OneShot {
    Reset,
    Malformed,
    UnknownType,
    ErrorEvent(ApiError),
}

/// The fault-injection handle (cheap to clone; shared with the server).
#[derive(Debug, Clone)]
pub struct Faults {
    state: Arc<Mutex<State>>,
    stall: Arc<watch::Sender<bool>>,
    /// Bumped whenever a user is partitioned or healed, to wake what waits on a partition.
    partitions: Arc<watch::Sender<u64>>,
    storage: Arc<Storage>,
}

impl Faults {
    pub(crate) fn new(storage: Arc<Storage>) -> Self {
        Self {
            state: Arc::default(),
            stall: Arc::new(watch::channel(false).0),
            partitions: Arc::new(watch::channel(0).0),
            storage,
        }
    }

    /// Every watch opened from now on ends (cleanly closes) after `n` events (bookmarks
    /// count; `0` closes each stream at once, with no event: a "very short watch").
    pub fn end_watches_after(&self, n: u64) -> &Self {
        self.state.lock().end_watches_after = Some(n);
        self
    }

    /// Re-chunks watch output of streams opened from now on into chunks of `size` bytes
    /// (minimum 1): events get split over chunks and several events share a chunk.
    pub fn rechunk(&self, size: usize) -> &Self {
        self.state.lock().rechunk = Some(size.max(1));
        self
    }

    /// The next `k` requests of `kind` fail with `status` (429 carries `Retry-After: 1`);
    /// `k = u32::MAX` fails every one until [`Faults::reset`].
    pub fn fail_next(&self, kind: RequestKind, status: u16, k: u32) -> &Self {
        self.fail_next_with(kind, ApiError::for_code(status), k)
    }

    /// The next `k` requests of `kind` fail with this exact Status, e.g.
    /// `ApiError::too_large_resource_version(20, 10)` or `ApiError::expired(..)`.
    pub fn fail_next_with(&self, kind: RequestKind, error: ApiError, k: u32) -> &Self {
        self.state.lock().fail_next.push((kind, error, k));
        self
    }

    /// The next `k` list requests (collection GETs without `watch`) are answered with the
    /// misbehaviour `fault` instead of the real list; `k = u32::MAX` answers every one until
    /// [`Faults::reset`]. Calls queue up: `list_body(Html, 1).list_body(EmptyObject, 1)`
    /// answers the next list with HTML and the one after with `{}`. The request counters
    /// still count these lists. The faults built on the real list (`RepeatContinue`,
    /// `CloseMidBody`, `NoResourceVersion`) answer its error instead when it fails (e.g. 410
    /// for a compacted `resourceVersion`), and that answer still counts as one of the `k`.
    pub fn list_body(&self, fault: ListFault, k: u32) -> &Self {
        if k > 0 {
            self.state.lock().list_faults.push((fault, k));
        }
        self
    }

    /// The next `k` watch requests get `200` headers and then nothing at all, ever: no
    /// events, no bookmarks, no timeout close, until the client disconnects or the server shuts
    /// down (unlike [`Faults::stall`], other streams keep flowing). `k = u32::MAX`: every watch
    /// until [`Faults::reset`]. Such streams count as watches and active watches, but are not
    /// registered with the store (not in `watcher_count`).
    pub fn silent_watches(&self, k: u32) -> &Self {
        let mut s = self.state.lock();
        s.silent_watches = s.silent_watches.saturating_add(k);
        self
    }

    /// The next watch event written (on any stream) is cut in half and the connection reset.
    pub fn reset_mid_chunk(&self) -> &Self {
        let mut s = self.state.lock();
        s.reset_mid_chunk = s.reset_mid_chunk.saturating_add(1);
        self
    }

    /// How many [`Faults::reset_mid_chunk`] one-shots are armed and not yet used
    /// (`u32::MAX`: every event, as armed by the `watch-reset-mid-chunk` fault spec).
    pub fn pending_resets(&self) -> u32 {
        self.state.lock().reset_mid_chunk
    }

    /// The next watch event written is preceded by a malformed (non-JSON) line.
    pub fn malformed_line(&self) -> &Self {
        let mut s = self.state.lock();
        s.malformed = s.malformed.saturating_add(1);
        self
    }

    /// The next watch event written is preceded by a well-formed line of an unknown event
    /// type, `{"type":"SURPRISE","object":<that event's object>}`. Like the other one-shots,
    /// calling it `n` times puts such a line before each of the next `n` events.
    pub fn unknown_event_type(&self) -> &Self {
        let mut s = self.state.lock();
        s.unknown_events = s.unknown_events.saturating_add(1);
        self
    }

    /// The next watch event written is replaced by an `ERROR` event carrying the Status for
    /// `code` (e.g. 410 Expired, 429, 500), after which the stream ends.
    pub fn error_event(&self, code: u16) -> &Self {
        self.error_event_with(ApiError::for_code(code))
    }

    /// Like [`Faults::error_event`] with an exact Status.
    pub fn error_event_with(&self, error: ApiError) -> &Self {
        self.state.lock().error_events.push(error);
        self
    }

    /// Stalls every watch stream: nothing more is written (not even bookmarks or the timeout
    /// close) until [`Faults::unstall`] or server shutdown.
    pub fn stall(&self) -> &Self {
        self.stall.send_replace(true);
        self
    }

    /// Ends a stall.
    pub fn unstall(&self) -> &Self {
        self.stall.send_replace(false);
        self
    }

    /// The next `k` writes (POST, PUT, PATCH, DELETE; not reads) answer 409 Conflict with
    /// kube-apiserver's update-conflict Status for the object written ("Operation cannot be
    /// fulfilled on leases.coordination.k8s.io \"l\": the object has been modified; please
    /// apply your changes to the latest version and try again"), as a controller sees after a
    /// lost race. Nothing is written. `k = u32::MAX`: every write until [`Faults::reset`].
    pub fn conflict_next_writes(&self, k: u32) -> &Self {
        let mut s = self.state.lock();
        s.conflict_writes = if k == EVERY {
            EVERY
        } else {
            s.conflict_writes.saturating_add(k)
        };
        self
    }

    /// The next `k` writes answer 429 TooManyRequests with `Retry-After: retry_after_secs`
    /// and `details.retryAfterSeconds` (API priority and fairness rejecting a request).
    pub fn throttle_next_writes(&self, retry_after_secs: u64, k: u32) -> &Self {
        self.fail_next_with(
            RequestKind::Write,
            ApiError::too_many_requests(retry_after_secs),
            k,
        )
    }

    /// Cuts `user` off: every request authenticated as that user (see
    /// [`crate::SimServerBuilder::user`] and [`crate::SimServerBuilder::user_token`]; `admin`
    /// for the main token or when no credentials are required, a client certificate's CN, a
    /// read-only token's user is named after it) gets no answer at all, and the
    /// user's open watch streams stop writing, as if the network dropped every packet. Held
    /// requests are handled when [`Faults::heal_user`] (or [`Faults::reset`]) ends the
    /// partition, as TCP would deliver them late, if the client is still waiting; a client
    /// that gave up meanwhile (timeout, cancelled stream) never sees them. Other users are
    /// served throughout.
    pub fn partition_user(&self, user: &str) -> &Self {
        self.state.lock().partitioned.insert(user.to_string());
        self.partitions.send_modify(|n| *n += 1);
        self
    }

    /// Ends [`Faults::partition_user`] and [`Faults::slow_user`] for `user`: requests from
    /// now on are served normally.
    pub fn heal_user(&self, user: &str) -> &Self {
        {
            let mut s = self.state.lock();
            s.partitioned.remove(user);
            s.slow.remove(user);
        }
        self.partitions.send_modify(|n| *n += 1);
        self
    }

    /// Delays every answer to `user` by `delay` (after the request is handled, before the
    /// response is sent), until [`Faults::heal_user`] or [`Faults::reset`].
    pub fn slow_user(&self, user: &str, delay: Duration) -> &Self {
        self.state.lock().slow.insert(user.to_string(), delay);
        self
    }

    pub(crate) fn is_partitioned(&self, user: &str) -> bool {
        self.state.lock().partitioned.contains(user)
    }

    pub(crate) fn user_delay(&self, user: &str) -> Option<Duration> {
        self.state.lock().slow.get(user).copied()
    }

    pub(crate) fn take_conflict(&self) -> bool {
        take_one(&mut self.state.lock().conflict_writes)
    }

    /// Compacts the store now; returns the compacted revision.
    pub fn compact(&self) -> u64 {
        self.storage.compact()
    }

    /// Clears every fault setting (and ends a stall).
    pub fn reset(&self) {
        *self.state.lock() = State::default();
        self.partitions.send_modify(|n| *n += 1);
        self.unstall();
    }

    /// Waits while `user` is partitioned ([`Faults::partition_user`]); `false` if the server
    /// shut down meanwhile.
    pub(crate) async fn partition_wait(
        &self,
        user: &str,
        shutdown: &mut watch::Receiver<bool>,
    ) -> bool {
        let mut changed = self.partitions.subscribe();
        while self.is_partitioned(user) {
            tokio::select! {
                _ = changed.changed() => {}
                _ = shutdown.changed() => return false,
            }
        }
        true
    }

    pub(crate) fn stall_rx(&self) -> watch::Receiver<bool> {
        self.stall.subscribe()
    }

    pub(crate) fn stream_faults(&self) -> StreamFaults {
        let s = self.state.lock();
        StreamFaults {
            end_after: s.end_watches_after,
            rechunk: s.rechunk,
        }
    }

    pub(crate) fn take_one_shot(&self) -> Option<OneShot> {
        let mut s = self.state.lock();
        if !s.error_events.is_empty() {
            return Some(OneShot::ErrorEvent(s.error_events.remove(0)));
        }
        if take_one(&mut s.reset_mid_chunk) {
            return Some(OneShot::Reset);
        }
        if take_one(&mut s.malformed) {
            return Some(OneShot::Malformed);
        }
        if take_one(&mut s.unknown_events) {
            return Some(OneShot::UnknownType);
        }
        None
    }

    pub(crate) fn take_list_fault(&self) -> Option<ListFault> {
        let mut s = self.state.lock();
        let pos = s.list_faults.iter().position(|(_, n)| *n > 0)?;
        let entry = &mut s.list_faults[pos];
        let fault = entry.0;
        take_one(&mut entry.1);
        if entry.1 == 0 {
            s.list_faults.remove(pos);
        }
        Some(fault)
    }

    pub(crate) fn take_silent_watch(&self) -> bool {
        take_one(&mut self.state.lock().silent_watches)
    }

    pub(crate) fn take_failure(&self, kind: RequestKind) -> Option<ApiError> {
        let mut s = self.state.lock();
        let pos = s
            .fail_next
            .iter()
            .position(|(k, _, n)| *n > 0 && (*k == kind || *k == RequestKind::Any))?;
        let entry = &mut s.fail_next[pos];
        take_one(&mut entry.2);
        let error = entry.1.clone();
        if entry.2 == 0 {
            s.fail_next.remove(pos);
        }
        Some(error)
    }
}

/// The fault specs [`apply_fault_spec`] accepts (`:N` = only the next `N` requests or events;
/// without it, every one until [`Faults::reset`]).
pub const FAULT_SPECS: &[&str] = &[
    "list-status-200[:N]",
    "list-empty-object[:N]",
    "list-html[:N]",
    "list-endless[:N]",
    "list-repeat-continue[:N]",
    "list-close-mid-body[:N]",
    "list-no-resource-version[:N]",
    "watch-silent[:N]",
    "watch-unknown-event[:N]",
    "watch-malformed-line[:N]",
    "watch-reset-mid-chunk[:N]",
    "fail-list=CODE[:N]",
    "fail-watch=CODE[:N]",
    "fail-write=CODE[:N]",
    "conflict-writes[:N]",
    "throttle-writes=SECS[:N]",
    "watch-expired[:N]",
    "rechunk=SIZE",
    "end-watches-after=N",
];

/// What one fault spec asks for.
enum Spec {
    List(ListFault),
    SilentWatch,
    UnknownEvent,
    MalformedLine,
    ResetMidChunk,
    Fail(RequestKind, ApiError),
    ConflictWrites,
    Rechunk(usize),
    EndWatchesAfter(u64),
}

/// How a count reads in a description: "every request", "next request", "next 3 events".
fn scope(count: Option<u32>, unit: &str) -> String {
    match count {
        None => format!("every {unit}"),
        Some(1) => format!("next {unit}"),
        Some(n) => format!("next {n} {unit}s"),
    }
}

/// Applies one fault spec (the `--fault` argument of the `sim-apiserver` binary, one of
/// [`FAULT_SPECS`]) to `faults`, e.g. `list-status-200`, `list-html:3`, `fail-watch=503:2`,
/// `rechunk=7`. `:N` limits the fault to the next `N` requests (or, for the `watch-*-line`,
/// `watch-unknown-event` and `watch-reset-mid-chunk` one-shots, the next `N` events); without
/// it the fault applies to every one until [`Faults::reset`]. `watch-expired` answers watch
/// requests with 410 Expired. Returns a one-line description of what was applied, such as
/// `list-status-200 (every request)`; a bad spec gives an error naming it and listing the
/// valid ones, and changes nothing.
pub fn apply_fault_spec(faults: &Faults, spec: &str) -> Result<String, String> {
    let bad = |why: String| bad_spec(spec, why);
    let (head, count) = match spec.split_once(':') {
        Some((h, n)) => match n.parse::<u32>() {
            Ok(n) if n > 0 => (h, Some(n)),
            _ => return Err(bad(format!("the count {n:?} is not a positive integer"))),
        },
        None => (spec, None),
    };
    let (name, value) = match head.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (head, None),
    };
    let parsed = parse_spec(spec, name, value, count)?;
    Ok(apply_spec(faults, head, count, parsed))
}

/// The error for a bad fault `spec`: why, and the valid specs.
fn bad_spec(spec: &str, why: String) -> String {
    format!(
        "invalid fault spec {spec:?}: {why}; valid specs: {}",
        FAULT_SPECS.join(", ")
    )
}

/// What the fault `name` (with its `=value` and `:count`, if any) of `spec` is, or why it is
/// refused.
fn parse_spec(
    spec: &str,
    name: &str,
    value: Option<&str>,
    count: Option<u32>,
) -> Result<Spec, String> {
    let bad = |why: String| bad_spec(spec, why);
    let code = |v: Option<&str>| -> Result<u16, String> {
        let v = v.ok_or_else(|| bad(format!("{name} needs a status code, as {name}=CODE")))?;
        match v.parse::<u16>() {
            Ok(c) if (400..=599).contains(&c) => Ok(c),
            _ => Err(bad(format!(
                "the status code {v:?} is not a number from 400 to 599"
            ))),
        }
    };
    let number = |v: Option<&str>| -> Result<u64, String> {
        let v = v.ok_or_else(|| bad(format!("{name} needs a value, as {name}=N")))?;
        v.parse::<u64>()
            .map_err(|_| bad(format!("the value {v:?} is not a non-negative integer")))
    };
    let no_value = |s: Spec| match value {
        None => Ok(s),
        Some(v) => Err(bad(format!("{name} takes no value (got ={v})"))),
    };
    Ok(match name {
        "list-status-200" => no_value(Spec::List(ListFault::StatusWithOk))?,
        "list-empty-object" => no_value(Spec::List(ListFault::EmptyObject))?,
        "list-html" => no_value(Spec::List(ListFault::Html))?,
        "list-endless" => no_value(Spec::List(ListFault::Endless))?,
        "list-repeat-continue" => no_value(Spec::List(ListFault::RepeatContinue))?,
        "list-close-mid-body" => no_value(Spec::List(ListFault::CloseMidBody))?,
        "list-no-resource-version" => no_value(Spec::List(ListFault::NoResourceVersion))?,
        "watch-silent" => no_value(Spec::SilentWatch)?,
        "watch-unknown-event" => no_value(Spec::UnknownEvent)?,
        "watch-malformed-line" => no_value(Spec::MalformedLine)?,
        "watch-reset-mid-chunk" => no_value(Spec::ResetMidChunk)?,
        "watch-expired" => no_value(Spec::Fail(
            RequestKind::Watch,
            ApiError::expired("The resourceVersion for the provided watch is too old."),
        ))?,
        "fail-list" => Spec::Fail(RequestKind::List, ApiError::for_code(code(value)?)),
        "fail-watch" => Spec::Fail(RequestKind::Watch, ApiError::for_code(code(value)?)),
        "fail-write" => Spec::Fail(RequestKind::Write, ApiError::for_code(code(value)?)),
        "conflict-writes" => no_value(Spec::ConflictWrites)?,
        "throttle-writes" => Spec::Fail(
            RequestKind::Write,
            ApiError::too_many_requests(number(value)?),
        ),
        "rechunk" | "end-watches-after" if count.is_some() => {
            return Err(bad(format!("{name} takes no :N count")))
        }
        "rechunk" => match number(value)? {
            0 => return Err(bad("the chunk size must be at least 1".into())),
            n => Spec::Rechunk(usize::try_from(n).unwrap_or(usize::MAX)),
        },
        "end-watches-after" => Spec::EndWatchesAfter(number(value)?),
        _ => return Err(bad(format!("unknown fault {name:?}"))),
    })
}

/// Applies the parsed fault to `faults` for `count` requests or events (every one without);
/// the description of what was applied, starting with the spec's `head`.
fn apply_spec(faults: &Faults, head: &str, count: Option<u32>, parsed: Spec) -> String {
    let k = count.unwrap_or(EVERY);
    let requests = scope(count, "request");
    let events = scope(count, "event");
    match parsed {
        Spec::List(f) => {
            faults.list_body(f, k);
            format!("{head} ({requests})")
        }
        Spec::SilentWatch => {
            faults.silent_watches(k);
            format!("{head} ({requests})")
        }
        Spec::Fail(kind, e) => {
            faults.fail_next_with(kind, e, k);
            format!("{head} ({requests})")
        }
        Spec::ConflictWrites => {
            faults.conflict_next_writes(k);
            format!("{head} ({requests})")
        }
        Spec::UnknownEvent | Spec::MalformedLine | Spec::ResetMidChunk => {
            let mut s = faults.state.lock();
            let n = match parsed {
                Spec::UnknownEvent => &mut s.unknown_events,
                Spec::MalformedLine => &mut s.malformed,
                _ => &mut s.reset_mid_chunk,
            };
            *n = if k == EVERY {
                EVERY
            } else {
                n.saturating_add(k)
            };
            format!("{head} ({events})")
        }
        Spec::Rechunk(size) => {
            faults.rechunk(size);
            format!("{head} (watch streams cut into {size}-byte chunks)")
        }
        Spec::EndWatchesAfter(n) => {
            faults.end_watches_after(n);
            format!("{head} (watch streams end after {n} events)")
        }
    }
}
