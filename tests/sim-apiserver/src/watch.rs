//! Watch streams: one JSON event per line over a chunked (HTTP/1.1) or data-frame (HTTP/2) body,
//! start semantics, bookmarks, `sendInitialEvents`, selectors (an object that stops matching is
//! delivered as DELETED), timeouts, slow-watcher termination and stream faults. Objects, bookmarks
//! included, are written in the representation negotiated for the request.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::body::Chunk;
use crate::faults::{Faults, OneShot, StreamFaults};
use crate::metrics::Counters;
use crate::params::ListParams;
use crate::representation::{Representation, PARTIAL_OBJECT_METADATA};
use crate::resources::ResourceDef;
use crate::selectors::Selectors;
use crate::status::ApiError;
use crate::storage::{Event, Registration, Storage, WatchFrom};
use crate::watch_event::{event_line, event_object, EventType};

/// Everything a watch stream task needs.
pub(crate) struct WatchCtx {
    pub storage: Arc<Storage>,
    pub faults: Faults,
    pub counters: Arc<Counters>,
    pub shutdown: watch::Receiver<bool>,
    pub bookmark_interval: Duration,
    pub default_timeout: Duration,
    /// Who opened the stream (a partition of that user stalls it).
    pub user: String,
}

/// What the stream starts with.
enum Start {
    Registered {
        reg: Registration,
        min_rv: u64,
        initial_end_bookmark: bool,
    },
    Error(ApiError),
}

/// Validates the request and registers the watcher; returns the body receiver.
pub(crate) fn open(
    ctx: WatchCtx,
    res: usize,
    def: &ResourceDef,
    ns: Option<&str>,
    p: &ListParams,
) -> Result<mpsc::Receiver<Chunk>, ApiError> {
    p.validate()?;
    let rv = p.rv_number_or_500()?;
    let start = if p.send_initial_events == Some(true) {
        if let Some(x) = rv {
            let cur = ctx.storage.revision();
            if x > cur {
                return Err(ApiError::too_large_resource_version(x, cur));
            }
        }
        let reg = ctx.storage.watch(res, WatchFrom::Now)?;
        Start::Registered {
            reg,
            min_rv: 0,
            // Bookmarks, this one too, only for a client that allows them.
            initial_end_bookmark: p.allow_bookmarks,
        }
    } else {
        let from = match (rv, p.send_initial_events) {
            (None, Some(false)) => WatchFrom::After(ctx.storage.revision()),
            (None, _) => WatchFrom::Now,
            (Some(x), _) => WatchFrom::After(x),
        };
        match ctx.storage.watch(res, from) {
            Ok(reg) => Start::Registered {
                reg,
                min_rv: rv.unwrap_or(0),
                initial_end_bookmark: false,
            },
            Err(e) => Start::Error(e),
        }
    };
    let (tx, rx) = mpsc::channel::<Chunk>(16);
    let (kind, api_version) = match p.representation {
        Representation::Object => (def.kind.clone(), def.api_version()),
        Representation::PartialObjectMetadata { api_version } => {
            (PARTIAL_OBJECT_METADATA.to_string(), api_version.to_string())
        }
    };
    let stream = Stream {
        tx,
        kind,
        api_version,
        representation: p.representation,
        ns: ns.map(str::to_string),
        selectors: p.selectors.clone(),
        bookmarks: p.allow_bookmarks,
        // Capped at a year so absurd values cannot overflow the clock.
        timeout: p
            .timeout_seconds
            .map(|s| Duration::from_secs(s.min(365 * 24 * 3600)))
            .unwrap_or(ctx.default_timeout),
        sf: ctx.faults.stream_faults(),
        pending: BytesMut::new(),
        written: 0,
        last_rv: 0,
        ctx,
    };
    Counters::inc(&stream.ctx.counters.active_watches);
    tokio::spawn(stream.run(start));
    Ok(rx)
}

struct Stream {
    tx: mpsc::Sender<Chunk>,
    /// `kind` and `apiVersion` of bookmark objects: the resource's, or the metadata
    /// representation's (kube-apiserver converts bookmarks like any other object; ERROR events
    /// keep their Status).
    kind: String,
    api_version: String,
    representation: Representation,
    ns: Option<String>,
    selectors: Selectors,
    bookmarks: bool,
    timeout: Duration,
    sf: StreamFaults,
    pending: BytesMut,
    written: u64,
    last_rv: u64,
    ctx: WatchCtx,
}

/// Why writing stopped.
enum Stop {
    /// End the stream cleanly.
    End,
    /// Abort the connection (client gone or injected reset).
    Abort,
}

impl Stream {
    async fn run(mut self, start: Start) {
        let _ = self.run_inner(start).await;
        self.ctx
            .counters
            .active_watches
            .fetch_sub(1, Ordering::Relaxed);
    }

    async fn run_inner(&mut self, start: Start) -> Result<(), Stop> {
        let (mut reg, min_rv, end_bookmark) = match start {
            Start::Error(e) => {
                let line = event_line("ERROR", e.to_value().to_string().as_bytes());
                return self.write_raw(line, true).await;
            }
            Start::Registered {
                reg,
                min_rv,
                initial_end_bookmark,
            } => (reg, min_rv, initial_end_bookmark),
        };
        if self.sf.end_after == Some(0) {
            return Ok(());
        }
        let deadline = Instant::now() + self.timeout;
        let initial = std::mem::take(&mut reg.initial);
        let n_initial = initial.len();
        for (i, ev) in initial.iter().enumerate() {
            self.stall_wait().await?;
            let flush = i + 1 == n_initial && !end_bookmark;
            self.deliver(ev, min_rv, flush).await?;
        }
        if end_bookmark {
            self.last_rv = self.last_rv.max(reg.rev);
            self.bookmark(reg.rev, true).await?;
        }
        let mut shutdown = self.ctx.shutdown.clone();
        // Like the watch cache: a bookmark every interval, and one 2 s before the deadline.
        let interval = self.ctx.bookmark_interval;
        let next_after = move |now: Instant| {
            let periodic = now + interval;
            match deadline.checked_sub(Duration::from_secs(2)) {
                Some(pre) if pre > now && pre < periodic => pre,
                _ => periodic,
            }
        };
        let mut next_bookmark = next_after(Instant::now());
        loop {
            if reg.terminated.load(Ordering::SeqCst) {
                return self.flush().await;
            }
            tokio::select! {
                biased;
                _ = shutdown.changed() => return Err(Stop::Abort),
                _ = self.tx.closed() => return Err(Stop::Abort),
                _ = tokio::time::sleep_until(deadline) => {
                    self.stall_wait().await?;
                    return self.flush().await;
                }
                ev = reg.rx.recv() => {
                    let Some(ev) = ev else { return self.flush().await };
                    if reg.terminated.load(Ordering::SeqCst) {
                        return self.flush().await;
                    }
                    self.stall_wait().await?;
                    let flush = reg.rx.is_empty();
                    self.deliver(&ev, min_rv, flush).await?;
                }
                _ = tokio::time::sleep_until(next_bookmark), if self.bookmarks => {
                    next_bookmark = next_after(Instant::now());
                    self.stall_wait().await?;
                    let rev = self.ctx.storage.revision();
                    if reg.rx.is_empty() && rev >= min_rv && rev >= self.last_rv {
                        self.last_rv = rev;
                        self.bookmark(rev, false).await?;
                    }
                }
            }
        }
    }

    async fn stall_wait(&self) -> Result<(), Stop> {
        let mut stall = self.ctx.faults.stall_rx();
        let mut shutdown = self.ctx.shutdown.clone();
        loop {
            while *stall.borrow_and_update() {
                tokio::select! {
                    r = stall.changed() => if r.is_err() { return Err(Stop::Abort) },
                    _ = shutdown.changed() => return Err(Stop::Abort),
                }
            }
            if !self.ctx.faults.is_partitioned(&self.ctx.user) {
                return Ok(());
            }
            if !self
                .ctx
                .faults
                .partition_wait(&self.ctx.user, &mut shutdown)
                .await
            {
                return Err(Stop::Abort);
            }
        }
    }

    async fn bookmark(&mut self, rv: u64, initial_end: bool) -> Result<(), Stop> {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.kind, "apiVersion": self.api_version, "metadata": meta});
        let line = event_line("BOOKMARK", obj.to_string().as_bytes());
        self.write_event(line, true).await
    }

    fn matches(&self, v: &Value) -> bool {
        self.selectors.matches(v)
    }

    async fn deliver(&mut self, ev: &Event, min_rv: u64, flush: bool) -> Result<(), Stop> {
        if min_rv > 0 && ev.rv <= min_rv {
            return if flush { self.flush().await } else { Ok(()) };
        }
        if let Some(ns) = &self.ns {
            if &ev.ns != ns {
                return if flush { self.flush().await } else { Ok(()) };
            }
        }
        let cur = self.matches(&ev.obj.value);
        let prev = ev.prev.as_ref().is_some_and(|p| self.matches(&p.value));
        let etype = match ev.etype {
            EventType::Added => cur.then_some(EventType::Added),
            EventType::Modified => match (prev, cur) {
                (true, true) => Some(EventType::Modified),
                (true, false) => Some(EventType::Deleted),
                (false, true) => Some(EventType::Added),
                (false, false) => None,
            },
            EventType::Deleted => prev.then_some(EventType::Deleted),
        };
        self.last_rv = self.last_rv.max(ev.rv);
        match etype {
            Some(EventType::Deleted) if ev.etype == EventType::Modified => {
                let last_matching = ev.prev.as_ref().expect("it matched before");
                let line = last_matching
                    .at_revision(ev.rv, EventType::Deleted)
                    .event_line_as(EventType::Deleted, self.representation);
                self.write_event(line, flush).await
            }
            Some(t) => {
                let line = ev.obj.event_line_as(t, self.representation);
                self.write_event(line, flush).await
            }
            None if flush => self.flush().await,
            None => Ok(()),
        }
    }

    /// Writes one event, applying one-shot faults and the end-after limit.
    async fn write_event(&mut self, line: Bytes, flush: bool) -> Result<(), Stop> {
        match self.ctx.faults.take_one_shot() {
            Some(OneShot::ErrorEvent(e)) => {
                let line = event_line("ERROR", e.to_value().to_string().as_bytes());
                self.write_raw(line, true).await?;
                return Err(Stop::End);
            }
            Some(OneShot::Reset) => {
                self.flush().await?;
                let half = line.slice(..line.len() / 2);
                crate::body::send_then_abort(self.tx.clone(), half, "injected reset").await;
                return Err(Stop::Abort);
            }
            Some(OneShot::Malformed) => {
                self.write_raw(
                    Bytes::from_static(b"{\"type\":\"ADDED\",\"object\":{\"kind\":}\n"),
                    false,
                )
                .await?;
            }
            Some(OneShot::UnknownType) => {
                let surprise = event_line("SURPRISE", event_object(&line));
                self.write_raw(surprise, false).await?;
            }
            None => {}
        }
        let end = self.sf.end_after.is_some_and(|n| self.written + 1 >= n);
        self.write_raw(line, flush || end).await?;
        self.written += 1;
        if end {
            return Err(Stop::End);
        }
        Ok(())
    }

    async fn write_raw(&mut self, line: Bytes, flush: bool) -> Result<(), Stop> {
        Counters::inc(&self.ctx.counters.watch_events);
        match self.sf.rechunk {
            None => self.send(line).await,
            Some(size) => {
                self.pending.extend_from_slice(&line);
                while self.pending.len() >= size {
                    let chunk = self.pending.split_to(size).freeze();
                    self.send(chunk).await?;
                }
                if flush {
                    self.flush().await?;
                }
                Ok(())
            }
        }
    }

    async fn flush(&mut self) -> Result<(), Stop> {
        if !self.pending.is_empty() {
            let chunk = self.pending.split().freeze();
            self.send(chunk).await?;
        }
        Ok(())
    }

    async fn send(&mut self, b: Bytes) -> Result<(), Stop> {
        self.tx.send(Ok(b)).await.map_err(|_| Stop::Abort)
    }
}
