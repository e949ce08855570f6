//! `meta.v1` messages read straight off the wire: a list's `ListMeta` and `Status`, and (from
//! `store_index::protobuf`) an object's `ObjectMeta`. As there, empty strings read as absent.

use crate::wire::status::{Status, StatusCause, StatusDetails};

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

/// Decodes a `meta.v1.Status` message (the `raw` of an envelope of kind `Status`). A code of 0
/// or beyond `u16` reads as 500, as client-go reads a Status that names no usable code.
pub fn status(bytes: &[u8]) -> Result<Status, ProtobufError> {
    let mut s = status_as_written(bytes)?;
    if s.code == 0 {
        s.code = 500;
    }
    Ok(s)
}

/// [`status`] with the code as written (0 when absent or unusable).
pub(crate) fn status_as_written(bytes: &[u8]) -> Result<Status, ProtobufError> {
    const WHAT: &str = "meta.v1.Status";
    let mut fields = Reader::new(bytes, WHAT);
    let mut s = Status::default();
    while let Some(f) = fields.next_field()? {
        match f {
            Field::Bytes(2, b) => s.status = string(b, WHAT)?,
            Field::Bytes(3, b) => s.message = utf8(b, WHAT)?.to_string(),
            Field::Bytes(4, b) => s.reason = utf8(b, WHAT)?.to_string(),
            Field::Bytes(5, b) => s.details = Some(status_details(b)?),
            Field::Varint(6, v) => s.code = u16::try_from(v as i32).unwrap_or(0),
            _ => {}
        }
    }
    Ok(s)
}

fn status_details(bytes: &[u8]) -> Result<StatusDetails, ProtobufError> {
    const WHAT: &str = "meta.v1.StatusDetails";
    let mut fields = Reader::new(bytes, WHAT);
    let mut d = StatusDetails::default();
    while let Some(f) = fields.next_field()? {
        match f {
            Field::Bytes(1, b) => d.name = utf8(b, WHAT)?.to_string(),
            Field::Bytes(3, b) => d.kind = utf8(b, WHAT)?.to_string(),
            Field::Bytes(4, b) => d.causes.push(status_cause(b)?),
            Field::Varint(5, v) => d.retry_after_seconds = u32::try_from(v as i32).ok(),
            _ => {}
        }
    }
    Ok(d)
}

fn status_cause(bytes: &[u8]) -> Result<StatusCause, ProtobufError> {
    const WHAT: &str = "meta.v1.StatusCause";
    let mut fields = Reader::new(bytes, WHAT);
    let mut c = StatusCause::default();
    while let Some(f) = fields.next_field()? {
        match f {
            Field::Bytes(1, b) => c.cause_type = utf8(b, WHAT)?.to_string(),
            Field::Bytes(2, b) => c.message = utf8(b, WHAT)?.to_string(),
            Field::Bytes(3, b) => c.field = utf8(b, WHAT)?.to_string(),
            _ => {}
        }
    }
    Ok(c)
}
