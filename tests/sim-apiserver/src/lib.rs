//! A simulated kube-apiserver for the integration suite, the demo and the benchmarks.
//!
//! It behaves like kube-apiserver on the wire: one global revision used as resourceVersion,
//! list semantics (`resourceVersion` unset / `"0"` / exact with `resourceVersionMatch`,
//! pagination with continue tokens, 410 Expired after compaction, the "Too large resource
//! version" 504), chunked watch streams with bookmarks and `sendInitialEvents`, label and
//! field selectors, `Status` errors, discovery, HTTP/1.1 and HTTP/2, TLS with bearer tokens,
//! plus fault injection ([`Faults`]), a churn generator ([`ChurnConfig`]) and request counters.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use sim_apiserver::SimServer;
//! let sim = SimServer::builder().tls(true).token("t").start().await?;
//! sim.create("pods", Some("default"), serde_json::json!({"metadata": {"name": "p1"}}))?;
//! sim.faults().end_watches_after(3).rechunk(7);
//! println!("{} {:?}", sim.url(), sim.ca_path());
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod body;
pub mod churn;
pub mod continue_token;
pub mod discovery;
pub mod faults;
pub mod list;
pub mod metrics;
pub mod params;
pub mod resources;
pub mod selectors;
mod server;
pub mod status;
pub mod storage;
pub mod tls;
mod watch;

pub use churn::{ChurnConfig, ChurnHandle};
pub use faults::{Faults, RequestKind};
pub use metrics::CounterSnapshot;
pub use resources::ResourceDef;
pub use server::{SimError, SimServer, SimServerBuilder};
pub use status::ApiError;
