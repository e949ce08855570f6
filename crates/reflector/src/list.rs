//! List pages: decoding a page straight into objects, and the pager (contract C5).

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use bytes::Bytes;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::decoder::DecodeError;
use crate::error::ReflectorError;
use crate::lister_watcher::ListerWatcher;
use crate::object::{Decode, Frame};
use crate::params::ListOptions;

/// client-go's default page size.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// One list response (a page).
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectList<K> {
    /// The items.
    pub items: Vec<K>,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.continue` (`None` or empty: last page).
    pub continue_token: Option<String>,
    /// `kind` (`PodList`, or `Table` for a server-side table).
    pub kind: Option<String>,
    /// `apiVersion`.
    pub api_version: Option<String>,
}

impl<K> ObjectList<K> {
    /// A page with these items and resource version, and no continuation.
    pub fn new(items: Vec<K>, resource_version: impl Into<String>) -> Self {
        ObjectList {
            items,
            resource_version: resource_version.into(),
            continue_token: None,
            kind: None,
            api_version: None,
        }
    }

    /// With a continue token.
    pub fn with_continue(mut self, token: impl Into<String>) -> Self {
        self.continue_token = Some(token.into());
        self
    }

    /// Whether this is a server-side Table (meta.k8s.io v1 or v1beta1).
    pub fn is_table(&self) -> bool {
        self.kind.as_deref() == Some("Table")
            && matches!(
                self.api_version.as_deref(),
                Some("meta.k8s.io/v1" | "meta.k8s.io/v1beta1")
            )
    }
}

impl<K: Decode> ObjectList<K> {
    /// Decodes a list body in one pass; objects that keep raw bytes copy them out of the page so
    /// the page's buffer is freed once decoded.
    pub fn from_json(body: &Bytes) -> Result<Self, DecodeError> {
        let text = std::str::from_utf8(body).map_err(|_| DecodeError::Utf8)?;
        let frame = Frame::new(text, body, false);
        let mut de = serde_json::Deserializer::from_str(text);
        let list = ListSeed::<K>(&frame, PhantomData)
            .deserialize(&mut de)
            .and_then(|l| de.end().map(|_| l))
            .map_err(|source| DecodeError::Json {
                source,
                snippet: text.chars().take(120).collect(),
            })?;
        Ok(list)
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum ListField {
    Kind,
    ApiVersion,
    Metadata,
    Items,
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

struct ListSeed<'a, 'de, K>(&'a Frame<'de>, PhantomData<fn() -> K>);
struct ItemsSeed<'a, 'de, K>(&'a Frame<'de>, PhantomData<fn() -> K>);
struct ItemSeed<'a, 'de, K>(&'a Frame<'de>, PhantomData<fn() -> K>);

impl<'de, K: Decode> DeserializeSeed<'de> for ListSeed<'_, 'de, K> {
    type Value = ObjectList<K>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K: Decode> Visitor<'de> for ListSeed<'_, 'de, K> {
    type Value = ObjectList<K>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut list = ObjectList::new(Vec::new(), "");
        while let Some(field) = map.next_key::<ListField>()? {
            match field {
                ListField::Kind => list.kind = map.next_value()?,
                ListField::ApiVersion => list.api_version = map.next_value()?,
                ListField::Metadata => {
                    let meta: Option<ListMeta> = map.next_value()?;
                    let meta = meta.unwrap_or_default();
                    list.resource_version = meta.resource_version.unwrap_or_default();
                    list.continue_token = meta.continue_token.filter(|c| !c.is_empty());
                }
                ListField::Items => {
                    list.items = map
                        .next_value_seed(ItemsSeed::<K>(self.0, PhantomData))?
                        .unwrap_or_default();
                }
                ListField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(list)
    }
}

impl<'de, K: Decode> DeserializeSeed<'de> for ItemsSeed<'_, 'de, K> {
    type Value = Option<Vec<K>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, K: Decode> Visitor<'de> for ItemsSeed<'_, 'de, K> {
    type Value = Option<Vec<K>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of objects")
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(ItemSeed::<K>(self.0, PhantomData))? {
            items.push(item);
        }
        Ok(Some(items))
    }
}

impl<'de, K: Decode> DeserializeSeed<'de> for ItemSeed<'_, 'de, K> {
    type Value = K;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<K, D::Error> {
        K::decode(d, self.0)
    }
}

/// The result of a complete (possibly paginated) list.
#[derive(Debug)]
pub(crate) struct FullList<K> {
    /// Each object moved into its `Arc` as its page arrives, so no second vector of objects
    /// ever exists.
    pub(crate) items: Vec<Arc<K>>,
    pub(crate) resource_version: String,
    /// Whether the server split the answer into pages.
    pub(crate) paginated: bool,
}

/// Lists every page (contract C5.1, C5.3): follows `continue` tokens, clearing the resource
/// version and match on continuations; the list RV is the first page's. A continuation page that
/// fails with Expired restarts as one unpaginated list at the original RV.
pub(crate) async fn list_all<K, L: ListerWatcher<K>>(
    lw: &L,
    options: ListOptions,
    mut on_page: impl FnMut(usize),
) -> Result<FullList<K>, ReflectorError> {
    let first = lw.list(options.clone()).await?;
    on_page(first.items.len());
    if first.is_table() {
        return Err(ReflectorError::UnsupportedListGvk(format!(
            "{}, Kind=Table",
            first.api_version.unwrap_or_default()
        )));
    }
    let resource_version = first.resource_version;
    let mut items: Vec<Arc<K>> = first.items.into_iter().map(Arc::new).collect();
    let mut token = first.continue_token;
    let paginated = token.is_some();
    while let Some(cont) = token.take() {
        let page_options = ListOptions {
            continue_token: Some(cont),
            resource_version: None,
            resource_version_match: None,
            ..options.clone()
        };
        match lw.list(page_options).await {
            Ok(page) => {
                on_page(page.items.len());
                items.extend(page.items.into_iter().map(Arc::new));
                token = page.continue_token;
            }
            Err(e) if e.is_expired() => {
                tracing::debug!("continuation page expired; relisting without pagination");
                let full = lw
                    .list(ListOptions {
                        limit: 0,
                        continue_token: None,
                        ..options.clone()
                    })
                    .await?;
                on_page(full.items.len());
                return Ok(FullList {
                    items: full.items.into_iter().map(Arc::new).collect(),
                    resource_version: full.resource_version,
                    paginated,
                });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(FullList {
        items,
        resource_version,
        paginated,
    })
}

#[cfg(test)]
mod tests {
    use delta_fifo::store_index::{CompactObject, DynamicObject, Object};

    use super::*;

    #[test]
    fn list_page_decodes_metadata_and_items_in_one_pass() {
        let body = Bytes::from_static(
            br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"next"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#,
        );
        let l = ObjectList::<DynamicObject>::from_json(&body).unwrap();
        assert_eq!(l.resource_version, "42");
        assert_eq!(l.continue_token.as_deref(), Some("next"));
        assert_eq!(
            l.items.iter().map(|o| o.name()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let c = ObjectList::<CompactObject>::from_json(&body).unwrap();
        assert_eq!(c.items[1].raw().as_ref(), br#"{"metadata":{"name":"b"}}"#);
        assert!(!body.as_ptr_range().contains(&c.items[1].raw().as_ptr()));
    }

    #[test]
    fn null_items_and_empty_continue_mean_an_empty_last_page() {
        let body = Bytes::from_static(
            br#"{"metadata":{"resourceVersion":"1","continue":""},"items":null}"#,
        );
        let l = ObjectList::<DynamicObject>::from_json(&body).unwrap();
        assert!(l.items.is_empty());
        assert_eq!(l.continue_token, None);
    }

    #[test]
    fn table_and_garbage_are_recognised() {
        let t = ObjectList::<DynamicObject>::from_json(&Bytes::from_static(
            br#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","rows":[]}"#,
        ))
        .unwrap();
        assert!(t.is_table());
        assert!(
            ObjectList::<DynamicObject>::from_json(&Bytes::from_static(b"{\"items\":[1]}"))
                .is_err()
        );
        assert!(ObjectList::<DynamicObject>::from_json(&Bytes::from_static(b"{} x")).is_err());
    }
}
