//! What the crates log, kept for the scenarios to check: every WARN and ERROR event, whatever
//! `RUST_LOG` says is printed, so that a scenario can assert that a misbehaving server shows in the
//! logs (the hostile scenarios do).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::OnceLock;

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// Lines kept at most: the oldest are dropped first.
const KEPT: usize = 4096;

struct Log {
    /// Lines ever recorded (the sequence number of the next one).
    next: u64,
    lines: VecDeque<String>,
}

fn log() -> &'static Mutex<Log> {
    static LOG: OnceLock<Mutex<Log>> = OnceLock::new();
    LOG.get_or_init(|| {
        Mutex::new(Log {
            next: 0,
            lines: VecDeque::new(),
        })
    })
}

/// A position in the log: lines recorded after it are read with [`since`].
#[derive(Debug, Clone, Copy)]
pub struct Mark(u64);

/// The current end of the log.
pub fn mark() -> Mark {
    Mark(log().lock().next)
}

/// The WARN and ERROR lines recorded after `mark` (as many as are still kept), each as
/// `LEVEL target: message field=value ...`.
pub fn since(mark: Mark) -> Vec<String> {
    let log = log().lock();
    let first = log.next - log.lines.len() as u64;
    let skip = mark.0.saturating_sub(first) as usize;
    log.lines.iter().skip(skip).cloned().collect()
}

/// The layer that records WARN and ERROR events.
pub struct Tap;

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value}");
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

impl<S: Subscriber> Layer<S> for Tap {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let level = *event.metadata().level();
        if level > Level::WARN {
            return;
        }
        let mut line = Line(format!("{level} {}:", event.metadata().target()));
        event.record(&mut line);
        let mut log = log().lock();
        if log.lines.len() == KEPT {
            log.lines.pop_front();
        }
        log.lines.push_back(line.0);
        log.next += 1;
    }
}
