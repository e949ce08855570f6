//! `meta.v1` messages read straight off the wire: a list's `ListMeta`, and (from
//! `store_index::protobuf`) an object's `ObjectMeta`. As there, empty strings read as absent. A
//! `Status` is read by `Status::from_protobuf`.

pub use crate::store_index::protobuf::{object_meta, object_meta_of};

use super::wire::{utf8, Field, Reader};
use super::ProtobufError;

fn string(bytes: &[u8], what: &'static str) -> Result<Option<String>, ProtobufError> {
    let s = utf8(bytes, what)?;
    Ok((!s.is_empty()).then(|| s.to_string()))
}

/// A `meta.v1.ListMeta`: `resourceVersion`, `continue`, `remainingItemCount` and
/// `shardInfo.selector`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListMeta {
    /// `resourceVersion` (empty when absent).
    pub resource_version: String,
    /// `continue` (`None` when absent or empty: the last page).
    pub continue_token: Option<String>,
    /// `remainingItemCount`.
    pub remaining_item_count: Option<i64>,
    /// `shardInfo.selector` (`None` when absent or empty: not a shard).
    pub shard_selector: Option<String>,
}

/// Decodes a `meta.v1.ListMeta` message.
pub fn list_meta(bytes: &[u8]) -> Result<ListMeta, ProtobufError> {
    const WHAT: &str = "meta.v1.ListMeta";
    let mut fields = Reader::new(bytes, WHAT);
    let mut l = ListMeta::default();
    while let Some(f) = fields.next_field()? {
        match f {
            Field::Bytes(2, b) => l.resource_version = utf8(b, WHAT)?.to_string(),
            Field::Bytes(3, b) => l.continue_token = string(b, WHAT)?,
            Field::Varint(4, v) => l.remaining_item_count = Some(v as i64),
            Field::Bytes(5, b) => l.shard_selector = shard_info_selector(b)?,
            _ => {}
        }
    }
    Ok(l)
}

/// The `selector` (field 1) of a `meta.v1.ShardInfo` message.
fn shard_info_selector(bytes: &[u8]) -> Result<Option<String>, ProtobufError> {
    const WHAT: &str = "meta.v1.ShardInfo";
    let mut fields = Reader::new(bytes, WHAT);
    let mut selector = None;
    while let Some(f) = fields.next_field()? {
        if let Field::Bytes(1, b) = f {
            selector = string(b, WHAT)?;
        }
    }
    Ok(selector)
}
