//! A list page: one list response decoded straight into objects, and checked to be a list before
//! anything can act on it (contract C5's page; the pager that asks for pages is the loop's
//! `list.rs`).

use std::fmt;
use std::marker::PhantomData;

use bytes::Bytes;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::store_index::ResourceVersion;
use crate::wire::object::{Decode, DecodeSource, ProtobufSource};
use crate::wire::protobuf::meta as pb_meta;
use crate::wire::protobuf::wire::{Field, Reader};
use crate::wire::protobuf::{is_protobuf, Unknown};
use crate::wire::snippet::{body_snippet, redact_quoted};
use crate::wire::status::Status;

/// One list response (a page).
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectList<K> {
    /// The items.
    pub items: Vec<K>,
    /// `metadata.resourceVersion`.
    pub resource_version: ResourceVersion,
    /// `metadata.continue` (`None` or empty: last page).
    pub continue_token: Option<String>,
    /// `kind` (`PodList`, or `Table` for a server-side table).
    pub kind: Option<String>,
    /// `apiVersion`.
    pub api_version: Option<String>,
    /// `metadata.shardInfo.selector`: the shard selector the server applied to this list, as it
    /// echoes it (`None`: the list is not a shard, or the server ignored the selector).
    pub shard_info: Option<String>,
}

impl<K> ObjectList<K> {
    /// A page with these items and resource version, and no continuation.
    pub fn new(items: Vec<K>, resource_version: impl Into<ResourceVersion>) -> Self {
        ObjectList {
            items,
            resource_version: resource_version.into(),
            continue_token: None,
            kind: None,
            api_version: None,
            shard_info: None,
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
    /// Decodes one list response body in one pass and checks that it really is a list, before
    /// anything can act on it: objects that keep raw bytes copy them out of the page so the page's
    /// buffer is freed once decoded.
    ///
    /// Servers and proxies do not always mean what their HTTP status says, so the body decides:
    /// - a `Status` object (whatever the HTTP code was, 200 included) is
    ///   [`ListPageError::Status`], the error the server meant (a
    ///   [`ClientError::Api`](crate::ClientError::Api) once converted into a
    ///   [`ReflectorError`](crate::ReflectorError)), as client-go turns such a body into an error;
    /// - a body that is not a list — not JSON (an HTML error page), no `kind` ending in `List`,
    ///   no `items` field, no `metadata.resourceVersion`, items that are not objects of the type —
    ///   is [`ListPageError::NotAList`] (a [`ReflectorError::InvalidList`](crate::ReflectorError::InvalidList)
    ///   once converted), so `{}` or an HTML page can never pass for an empty list;
    /// - a server-side `Table` is returned as it is, for the caller to refuse with a precise error.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use reflector::{ListPageError, ObjectList};
    /// use reflector::store_index::DynamicObject;
    ///
    /// let ok = Bytes::from_static(br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}"#);
    /// assert_eq!(ObjectList::<DynamicObject>::from_json(&ok).unwrap().resource_version, "7");
    ///
    /// let status = Bytes::from_static(br#"{"kind":"Status","status":"Failure","reason":"InternalError","code":500,"message":"boom"}"#);
    /// let err = ObjectList::<DynamicObject>::from_json(&status).unwrap_err();
    /// assert_eq!(err.status().map(|s| s.code), Some(500));
    ///
    /// let empty = Bytes::from_static(b"{}");
    /// assert!(matches!(ObjectList::<DynamicObject>::from_json(&empty), Err(ListPageError::NotAList(_))));
    /// ```
    pub fn from_json(body: &Bytes) -> Result<Self, ListPageError> {
        let text = std::str::from_utf8(body)
            .map_err(|_| ListError::new("not UTF-8", &String::from_utf8_lossy(body)))?;
        let frame = DecodeSource::new(text, body, false);
        let mut de = serde_json::Deserializer::from_str(text);
        let decoded = ListSeed::<K>(&frame, PhantomData)
            .deserialize(&mut de)
            .and_then(|l| de.end().map(|_| l));
        let (list, shape) = match decoded {
            Ok(decoded) => decoded,
            Err(source) => {
                // A Status whose fields do not fit a list's (a `metadata` that is not an object,
                // say) still says what the server meant.
                if let Some(status) = status_body(text) {
                    return Err(ListPageError::Status(Box::new(status)));
                }
                let reason = redact_quoted(&source.to_string());
                return Err(ListError::new(format!("not JSON of a list ({reason})"), text).into());
            }
        };
        if list.kind.as_deref() == Some("Status") {
            return Err(match status_body(text) {
                Some(status) => ListPageError::Status(Box::new(status)),
                None => ListError::new("a Status object that cannot be read", text).into(),
            });
        }
        if list.is_table() {
            return Ok(list);
        }
        let problem = match list.kind.as_deref() {
            None => Some("no kind".to_string()),
            Some(kind) if !kind.ends_with("List") => Some(format!("kind {kind:?} is not a list")),
            Some(_) if !shape.items => Some("no items".to_string()),
            Some(_) if list.resource_version.is_empty() => {
                Some("no metadata.resourceVersion".to_string())
            }
            Some(_) => None,
        };
        match problem {
            Some(problem) => Err(ListError::new(problem, text).into()),
            None => Ok(list),
        }
    }
}

impl<K: Decode> ObjectList<K> {
    /// Decodes one list response in the encoding its `Content-Type` names: protobuf
    /// ([`from_protobuf`](Self::from_protobuf)) or, for anything else, JSON
    /// ([`from_json`](Self::from_json)).
    pub fn from_body(body: &Bytes, content_type: Option<&str>) -> Result<Self, ListPageError> {
        if is_protobuf(content_type) {
            Self::from_protobuf(body)
        } else {
            Self::from_json(body)
        }
    }

    /// Decodes one protobuf list response (`k8s\0`, a `runtime.Unknown` of kind `<Kind>List`
    /// whose message holds `ListMeta` as field 1 and the items, bare messages of `<Kind>`, as
    /// field 2), with the checks of [`from_json`](Self::from_json): a `Status` envelope is
    /// [`ListPageError::Status`]; a body that is not an enveloped list with a resource version,
    /// or an item `K` cannot decode, is [`ListPageError::NotAList`]. Items that keep raw bytes copy
    /// them out of the page, so the page's buffer is freed once decoded.
    pub fn from_protobuf(body: &Bytes) -> Result<Self, ListPageError> {
        let not_a_list = |problem: String| ListError {
            problem,
            snippet: PROTOBUF_SNIPPET.to_string(),
        };
        let envelope = Unknown::decode(body).map_err(|e| not_a_list(e.to_string()))?;
        if !envelope.content_type.is_empty() || !envelope.content_encoding.is_empty() {
            return Err(not_a_list(format!(
                "an envelope of content type {:?}, encoding {:?}",
                envelope.content_type, envelope.content_encoding
            ))
            .into());
        }
        if envelope.kind == "Status" {
            let status =
                Status::from_protobuf(&envelope.raw).map_err(|e| not_a_list(e.to_string()))?;
            return Err(ListPageError::Status(Box::new(status)));
        }
        let Some(item_kind) = envelope.kind.strip_suffix("List") else {
            return Err(not_a_list(format!("kind {:?} is not a list", envelope.kind)).into());
        };
        let source = ProtobufSource::new(&envelope.api_version, item_kind, false);
        let mut list = ObjectList::new(Vec::new(), "");
        let mut fields = Reader::new(&envelope.raw, "list");
        while let Some(field) = fields.next_field().map_err(|e| not_a_list(e.to_string()))? {
            match field {
                Field::Bytes(1, meta) => {
                    let meta = pb_meta::list_meta(meta).map_err(|e| not_a_list(e.to_string()))?;
                    list.resource_version = meta.resource_version.into();
                    list.continue_token = meta.continue_token;
                    list.shard_info = meta.shard_selector;
                }
                Field::Bytes(2, item) => {
                    let item = K::decode_protobuf(&envelope.raw.slice_ref(item), &source).map_err(
                        |e| not_a_list(format!("item {} of the list: {e}", list.items.len())),
                    )?;
                    list.items.push(item);
                }
                _ => {}
            }
        }
        if list.resource_version.is_empty() {
            return Err(not_a_list("no metadata.resourceVersion".to_string()).into());
        }
        list.kind = Some(envelope.kind);
        list.api_version = Some(envelope.api_version);
        Ok(list)
    }
}

/// What a list error quotes of a protobuf body: not its bytes (binary, and possibly a Secret).
const PROTOBUF_SNIPPET: &str = "<protobuf body>";

/// A list response that is valid JSON but not a list: decoding it as one would have read it as an
/// empty list and emptied the cache.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the server's answer is not a list: {problem} (in {snippet:?})")]
pub struct ListError {
    /// What is missing or wrong (`no items`, `kind "Pod" is not a list`, ...).
    pub problem: String,
    /// The start of the body, its JSON string values redacted (`"…"`): it may be a Secret.
    pub snippet: String,
}

impl ListError {
    pub(crate) fn new(problem: impl Into<String>, body: &str) -> Self {
        ListError {
            problem: problem.into(),
            snippet: snippet(body),
        }
    }
}

/// The first 120 characters of `text`, string values redacted.
fn snippet(text: &str) -> String {
    body_snippet(text, 120)
}

/// `text` read as a `Status` object, when it is one (`"kind":"Status"`).
fn status_body(text: &str) -> Option<Status> {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(borrow)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    let kind: Kind<'_> = serde_json::from_str(text).ok()?;
    if kind.kind.as_deref() != Some("Status") {
        return None;
    }
    let mut status: Status = serde_json::from_str(text).ok()?;
    if status.code == 0 {
        // A Status that names no code still failed; 500 is how client-go reads it.
        status.code = 500;
    }
    Some(status)
}

/// What a list body had besides its values (to tell `"items": []` from no `items` at all).
#[derive(Debug, Default, Clone, Copy)]
struct ListShape {
    items: bool,
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

/// A list's `metadata`: an object only (a derived `Deserialize` would also take an array, reading
/// its elements as the fields in order).
#[derive(Default)]
struct ListMeta {
    resource_version: Option<String>,
    continue_token: Option<String>,
    shard_info: Option<ShardInfo>,
}

/// A list's `metadata.shardInfo`.
#[derive(Deserialize)]
struct ShardInfo {
    selector: Option<String>,
}

impl<'de> Deserialize<'de> for ListMeta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(field_identifier, rename_all = "camelCase")]
        enum MetaField {
            ResourceVersion,
            Continue,
            ShardInfo,
            #[serde(other)]
            Other,
        }
        struct MetaVisitor;
        impl<'de> Visitor<'de> for MetaVisitor {
            type Value = ListMeta;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("list metadata (an object)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ListMeta, A::Error> {
                let mut meta = ListMeta::default();
                while let Some(field) = map.next_key::<MetaField>()? {
                    match field {
                        MetaField::ResourceVersion => meta.resource_version = map.next_value()?,
                        MetaField::Continue => meta.continue_token = map.next_value()?,
                        MetaField::ShardInfo => meta.shard_info = map.next_value()?,
                        MetaField::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(meta)
            }
        }
        d.deserialize_map(MetaVisitor)
    }
}

struct ListSeed<'a, 'de, K>(&'a DecodeSource<'de>, PhantomData<fn() -> K>);
struct ItemsSeed<'a, 'de, K>(&'a DecodeSource<'de>, PhantomData<fn() -> K>);
struct ItemSeed<'a, 'de, K>(&'a DecodeSource<'de>, PhantomData<fn() -> K>);

impl<'de, K: Decode> DeserializeSeed<'de> for ListSeed<'_, 'de, K> {
    type Value = (ObjectList<K>, ListShape);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K: Decode> Visitor<'de> for ListSeed<'_, 'de, K> {
    type Value = (ObjectList<K>, ListShape);
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut list = ObjectList::new(Vec::new(), "");
        let mut shape = ListShape::default();
        while let Some(field) = map.next_key::<ListField>()? {
            match field {
                ListField::Kind => list.kind = map.next_value()?,
                ListField::ApiVersion => list.api_version = map.next_value()?,
                ListField::Metadata => {
                    let meta: Option<ListMeta> = map.next_value()?;
                    let meta = meta.unwrap_or_default();
                    list.resource_version = meta.resource_version.unwrap_or_default().into();
                    list.continue_token = meta.continue_token.filter(|c| !c.is_empty());
                    list.shard_info = meta
                        .shard_info
                        .and_then(|info| info.selector)
                        .filter(|s| !s.is_empty());
                }
                ListField::Items => {
                    shape.items = true;
                    list.items = map
                        .next_value_seed(ItemsSeed::<K>(self.0, PhantomData))?
                        .unwrap_or_default();
                }
                ListField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((list, shape))
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

/// Why a body is not a list page: the server said why (a `Status`), or it is not a list at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ListPageError {
    /// A `Status` object where a list was expected (whatever the HTTP code was): the error the
    /// server meant.
    #[error("{}", .0.message)]
    Status(Box<Status>),
    /// A body that is not a list (`{}`, an HTML page, a missing `items` or
    /// `metadata.resourceVersion`); nothing of it may be used.
    #[error(transparent)]
    NotAList(#[from] ListError),
}

impl ListPageError {
    /// The server's `Status`, when the body was one.
    pub fn status(&self) -> Option<&Status> {
        match self {
            ListPageError::Status(status) => Some(status),
            ListPageError::NotAList(_) => None,
        }
    }
}
