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

/// A `meta.v1.ListMeta`: `resourceVersion`, `continue` and `remainingItemCount`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListMeta {
    /// `resourceVersion` (empty when absent).
    pub resource_version: String,
    /// `continue` (`None` when absent or empty: the last page).
    pub continue_token: Option<String>,
    /// `remainingItemCount`.
    pub remaining_item_count: Option<i64>,
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
            _ => {}
        }
    }
    Ok(l)
}
