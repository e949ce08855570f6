//! Fault injection, controllable per test through [`Faults`].

use std::sync::Arc;

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

#[derive(Debug, Default)]
struct State {
    end_watches_after: Option<u64>,
    rechunk: Option<usize>,
    fail_next: Vec<(RequestKind, ApiError, u32)>,
    reset_mid_chunk: u32,
    malformed: u32,
    error_events: Vec<ApiError>,
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
    ErrorEvent(ApiError),
}

/// The fault-injection handle (cheap to clone; shared with the server).
#[derive(Debug, Clone)]
pub struct Faults {
    state: Arc<Mutex<State>>,
    stall: Arc<watch::Sender<bool>>,
    storage: Arc<Storage>,
}

impl Faults {
    pub(crate) fn new(storage: Arc<Storage>) -> Self {
        Self {
            state: Arc::default(),
            stall: Arc::new(watch::channel(false).0),
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

    /// The next `k` requests of `kind` fail with `status` (429 carries `Retry-After: 1`).
    pub fn fail_next(&self, kind: RequestKind, status: u16, k: u32) -> &Self {
        self.fail_next_with(kind, ApiError::for_code(status), k)
    }

    /// The next `k` requests of `kind` fail with this exact Status, e.g.
    /// `ApiError::too_large_resource_version(20, 10)` or `ApiError::expired(..)`.
    pub fn fail_next_with(&self, kind: RequestKind, error: ApiError, k: u32) -> &Self {
        self.state.lock().fail_next.push((kind, error, k));
        self
    }

    /// The next watch event written (on any stream) is cut in half and the connection reset.
    pub fn reset_mid_chunk(&self) -> &Self {
        self.state.lock().reset_mid_chunk += 1;
        self
    }

    /// The next watch event written is preceded by a malformed (non-JSON) line.
    pub fn malformed_line(&self) -> &Self {
        self.state.lock().malformed += 1;
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

    /// Compacts the store now; returns the compacted revision.
    pub fn compact(&self) -> u64 {
        self.storage.compact()
    }

    /// Clears every fault setting (and ends a stall).
    pub fn reset(&self) {
        *self.state.lock() = State::default();
        self.unstall();
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
        if s.reset_mid_chunk > 0 {
            s.reset_mid_chunk -= 1;
            return Some(OneShot::Reset);
        }
        if s.malformed > 0 {
            s.malformed -= 1;
            return Some(OneShot::Malformed);
        }
        None
    }

    pub(crate) fn take_failure(&self, kind: RequestKind) -> Option<ApiError> {
        let mut s = self.state.lock();
        let pos = s
            .fail_next
            .iter()
            .position(|(k, _, n)| *n > 0 && (*k == kind || *k == RequestKind::Any))?;
        let entry = &mut s.fail_next[pos];
        entry.2 -= 1;
        let error = entry.1.clone();
        if entry.2 == 0 {
            s.fail_next.remove(pos);
        }
        Some(error)
    }
}
