//! Writing one sink's events: correlation, then create or patch with bounded retries
//! (client-go's `recordToSink` and `recordEvent`), and the loop that feeds it from the sink's
//! buffer.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

use super::correlator::{Correlated, Correlation, EventCorrelator};
use super::fanout::{Fanout, Subscription};
use super::model::Event;
use super::shared::{bump, BroadcasterConfig, Counters, Shared};
use super::sink::{EventSink, SinkError};

/// Writes the events of `subscription` to `sink`, in the order they were recorded, until the
/// buffer closes and is drained, or until `cancel` fires: then it returns at once, abandoning the
/// event being written and those still queued. Either way the sink stops being offered events.
pub(crate) async fn write_to_sink<S: EventSink>(
    subscription: Subscription,
    fanout: Weak<Fanout>,
    sink: S,
    config: BroadcasterConfig,
    shared: Arc<Shared>,
    cancel: CancellationToken,
) {
    let Subscription {
        id,
        mut receiver,
        counters,
    } = subscription;
    /// Unsubscribes however the loop ends, so that recorders do not count the sink's absence as
    /// drops forever after.
    struct Leave(Weak<Fanout>, u64);
    impl Drop for Leave {
        fn drop(&mut self) {
            if let Some(fanout) = self.0.upgrade() {
                fanout.unsubscribe(self.1);
            }
        }
    }
    let _leave = Leave(fanout, id);
    let mut writer = Writer {
        correlator: EventCorrelator::new(config.correlator.clone(), shared.clock),
        config,
        sink,
        shared,
        own: counters,
        rng: Jitter::seeded(),
    };
    loop {
        let event = tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            event = receiver.recv() => match event {
                Some(event) => Arc::unwrap_or_clone(event),
                None => return,
            },
        };
        tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            () = writer.record(event) => {}
        }
    }
}

/// The random fraction of the first retry pause (xorshift64*: no need for a crypto RNG here).
#[derive(Debug)]
struct Jitter(u64);

impl Jitter {
    fn seeded() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        Self(u64::from(nanos) ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }

    /// A number in [0, 1).
    fn next_fraction(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Writer<S> {
    config: BroadcasterConfig,
    correlator: EventCorrelator,
    sink: S,
    /// The broadcaster's counts, summed over its sinks.
    shared: Arc<Shared>,
    /// This sink's own counts.
    own: Arc<Counters>,
    rng: Jitter,
}

/// How one attempt ended.
enum Written {
    Created(Event),
    Patched(Event),
}

impl<S: EventSink> Writer<S> {
    /// Counts in the broadcaster's stats and the sink's own.
    fn count(&self, counter: fn(&Counters) -> &AtomicU64) {
        bump(counter(&self.shared.counters));
        bump(counter(&self.own));
    }

    /// Correlates `event` and writes the result, retrying transient failures
    /// (client-go's `recordToSink`).
    async fn record(&mut self, event: Event) {
        let mut correlated = match self.correlator.correlate(event) {
            Correlation::Filtered => {
                self.count(|c| &c.filtered);
                return;
            }
            Correlation::Write(correlated) => correlated,
        };
        if correlated.aggregated {
            self.count(|c| &c.aggregated);
        }
        let max_attempts = self.config.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            let error = match self.attempt(&mut correlated).await {
                Ok(written) => {
                    let server = match written {
                        Written::Created(event) => {
                            self.count(|c| &c.created);
                            event
                        }
                        Written::Patched(event) => {
                            self.count(|c| &c.patched);
                            event
                        }
                    };
                    self.correlator.update_state(&correlated, &server);
                    return;
                }
                Err(error) => error,
            };
            let event = &correlated.event;
            let retry = matches!(error, SinkError::Retryable(_)) && attempt < max_attempts;
            match (&error, retry) {
                (_, true) => tracing::debug!(
                    %error, attempt, reason = %event.reason, name = %event.metadata.name,
                    "writing event failed; retrying"
                ),
                (SinkError::AlreadyExists, _) => tracing::debug!(
                    reason = %event.reason, name = %event.metadata.name,
                    "event already exists; not retrying"
                ),
                _ => tracing::warn!(
                    %error, attempt, reason = %event.reason, name = %event.metadata.name,
                    "giving up writing event"
                ),
            }
            if !retry {
                self.count(|c| &c.failed);
                return;
            }
            let pause = if attempt == 1 {
                self.config.retry_interval.mul_f64(self.rng.next_fraction())
            } else {
                self.config.retry_interval
            };
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }

    /// One attempt: the patch if the Event exists, else (or if it has vanished) a create
    /// (client-go's `recordEvent`).
    async fn attempt(&self, correlated: &mut Correlated) -> Result<Written, SinkError> {
        if let Some(patch) = &correlated.patch {
            match self.sink.patch(&correlated.event, patch.clone()).await {
                Ok(event) => return Ok(Written::Patched(event)),
                Err(SinkError::NotFound) => {
                    // The Event expired or was deleted: create it afresh, counting from this
                    // occurrence (client-go would create it with the accumulated count), and
                    // keep creating on later attempts.
                    let event = &mut correlated.event;
                    event.count = 1;
                    event.first_timestamp = event.last_timestamp;
                    correlated.patch = None;
                }
                Err(error) => return Err(error),
            }
        }
        correlated.event.metadata.resource_version.clear();
        self.sink
            .create(&correlated.event)
            .await
            .map(Written::Created)
    }
}
