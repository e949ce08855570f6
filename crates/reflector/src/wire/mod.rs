//! The wire: what the API server's bytes mean, with no I/O and nothing of the client or the loop
//! above it. Object decoding ([`object`]: `Decode`, `DecodeSource`, the `decode_with_serde!`
//! macros; [`exact`]: typed objects decoded at exact capacities; `k8s`: the k8s-openapi types),
//! list pages ([`list_page`]: `ObjectList`, checked to be a list), watch frames ([`decoder`]:
//! `WatchDecoder`, `WatchEvent`), the server's `Status` ([`status`]), request parameters
//! ([`params`]), Kubernetes' protobuf encoding ([`protobuf`]), resources ([`resource`]), representations ([`representation`]) and the redacted
//! body snippets errors quote ([`snippet`]).
//!
//! The client (`crate::client`) and the list-and-watch loop build on these and re-export them;
//! nothing here imports from either (`cargo xtask modules` refuses it).

pub(crate) mod decoder;
pub(crate) mod encoding;
pub(crate) mod exact;
#[cfg(feature = "k8s-openapi")]
pub(crate) mod k8s;
#[cfg(feature = "k8s-pb")]
pub(crate) mod k8s_pb;
pub(crate) mod list_page;
pub(crate) mod object;
pub(crate) mod params;
#[cfg(feature = "k8s-pb")]
pub(crate) mod pb_view;
pub mod protobuf;
pub(crate) mod representation;
pub(crate) mod resource;
pub(crate) mod snippet;
pub(crate) mod status;
