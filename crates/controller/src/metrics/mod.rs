//! Metrics and probes for a controller (feature `metrics`, rules MX in docs/semantics.md).
//!
//! - [`Health`]: named readiness checks (caches synced, the lease healthy).
//! - [`serve`]: one small HTTP/1.1 endpoint for `GET /metrics` (a `prometheus_client`
//!   registry), `/healthz` and `/readyz`.

mod health;
mod server;

pub use health::Health;
pub use server::{serve, serve_with_options, ServeOptions};
