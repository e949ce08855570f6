//! The pager (contract C5): a list asked for page by page, each page within its byte bound, the
//! whole within its page count. A page itself is decoded by the wire (`wire/list_page.rs`).

use std::collections::HashSet;
use std::sync::Arc;

use crate::client::{ListOptions, Representation};
use crate::error::{PaginationError, ReflectorError};
use crate::lister_watcher::ListerWatcher;
use crate::store_index::ResourceVersion;
use crate::wire::list_page::{ListError, ObjectList};

/// client-go's default page size.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// What a list page may weigh beside its items (its envelope, and slack) in
/// [`page_byte_bound`].
pub const LIST_PAGE_ENVELOPE_BYTES: usize = 8 << 20;

/// What each item a page asks for may weigh on average in [`page_byte_bound`]: 512 KiB. A
/// page of client-go's default 500 items is then bounded at 258 MiB, where a page of 500 pods
/// weighs about 2 MiB; one of 500 objects near kube-apiserver's size limit (1.5 MiB in etcd)
/// would weigh over 700 MiB, and is asked for in pages of 7 instead. The allowance trades the
/// memory a body that never ends may cost (measured: under 512 MB for a whole process at 258
/// MiB, 1,092 MB at the former flat 1 GiB) against extra requests for collections of huge
/// objects.
pub const LIST_ITEM_ALLOWANCE_BYTES: usize = 512 << 10;

/// The byte bound of one list page asked for with `limit` items (0: no limit), at most `max`
/// ([`HttpListerWatcher::max_list_page_bytes`](crate::HttpListerWatcher::max_list_page_bytes)):
/// [`LIST_PAGE_ENVELOPE_BYTES`] plus [`LIST_ITEM_ALLOWANCE_BYTES`] per item asked for, an
/// unlimited list counting as a page of [`DEFAULT_PAGE_SIZE`].
///
/// Why a bound from the page's size rather than decoding as the body streams: decoding as it
/// streams would bound the raw bytes but not what they decode into, and a body that never ends
/// decodes into objects that never end either, so a byte bound is needed all the same; the
/// question is only its size. A bound that fits the page asked for keeps a body that never ends
/// (a broken server or proxy) at 258 MiB instead of 1 GiB, and a legitimate page larger
/// than it (collections of huge objects, or a server that ignored the limit) is not refused:
/// the pager asks for it again in smaller pages (contract H3).
///
/// ```
/// use reflector::{page_byte_bound, DEFAULT_MAX_BODY_BYTES};
/// assert_eq!(page_byte_bound(500, DEFAULT_MAX_BODY_BYTES), (8 << 20) + 500 * (512 << 10));
/// assert_eq!(page_byte_bound(0, DEFAULT_MAX_BODY_BYTES), page_byte_bound(500, DEFAULT_MAX_BODY_BYTES));
/// assert_eq!(page_byte_bound(100_000, DEFAULT_MAX_BODY_BYTES), DEFAULT_MAX_BODY_BYTES);
/// assert_eq!(page_byte_bound(500, 1 << 20), 1 << 20);
/// ```
pub fn page_byte_bound(limit: u32, max: usize) -> usize {
    let items = if limit == 0 { DEFAULT_PAGE_SIZE } else { limit };
    LIST_ITEM_ALLOWANCE_BYTES
        .saturating_mul(items as usize)
        .saturating_add(LIST_PAGE_ENVELOPE_BYTES)
        .min(max)
}

/// The byte bound of a first page that the watch cache may answer (resource version `"0"`, no
/// continue token): 384 MiB, or [`page_byte_bound`]'s if larger. kube-apiserver's watch cache
/// may ignore the limit there and send the whole collection in one body (kube-apiserver 1.36
/// does), which client-go accepts; so a collection of up to about 60k pods in JSON or 85k in
/// protobuf (a real server's pods, 6.5 KB and 4.5 KB each with the managed fields of their two
/// writers) still comes in one request, and only a larger one is read in part, refused, and asked
/// for again at `""`, where the limit is honoured. A body that never ends costs this bound once
/// (measured: under 512 MB for a whole process). A reflector syncs through a watch-list by
/// default (contract C1.3), which has no such body: this bound matters where a list is made.
pub const LIST_FROM_CACHE_BYTES: usize = 384 << 20;

/// The byte bound of the list request `options`, at most `max`: [`page_byte_bound`] of its
/// limit, raised to [`LIST_FROM_CACHE_BYTES`] where the watch cache may answer it whole.
pub(crate) fn request_byte_bound(options: &ListOptions, max: usize) -> usize {
    let bound = page_byte_bound(options.limit, max);
    if may_come_whole(options) {
        bound.max(LIST_FROM_CACHE_BYTES.min(max))
    } else {
        bound
    }
}

/// Whether kube-apiserver's watch cache may answer `options` with the whole collection in one
/// body, whatever its limit: a first page (no continue token) at resource version `"0"`.
fn may_come_whole(options: &ListOptions) -> bool {
    options.continue_token.is_none()
        && options
            .resource_version
            .as_ref()
            .is_some_and(|rv| rv.as_str() == "0")
}

/// `options` asked for at resource version `""`, which etcd answers in pages of its limit.
fn from_etcd(options: &ListOptions) -> ListOptions {
    ListOptions {
        resource_version: None,
        resource_version_match: None,
        ..options.clone()
    }
}

/// The request to make instead of `options` after its page overran its byte bound
/// ([`page_byte_bound`]), or `None` when nothing smaller can be asked for. In order: an
/// unlimited list is asked for in pages of [`DEFAULT_PAGE_SIZE`] (at the same resource
/// version); a first page at resource version `"0"` is asked for at `""`, because the watch cache
/// that answers `"0"` may ignore the limit and send the whole collection, where etcd honours it;
/// then the limit is divided by 8 down to one item. So a page is asked for at most five times,
/// and only a single object over the bound fails the list.
fn smaller_page(options: &ListOptions) -> Option<ListOptions> {
    if options.limit == 0 {
        return Some(ListOptions {
            limit: DEFAULT_PAGE_SIZE,
            ..options.clone()
        });
    }
    if may_come_whole(options) {
        return Some(from_etcd(options));
    }
    (options.limit > 1).then(|| ListOptions {
        limit: (options.limit / 8).max(1),
        ..options.clone()
    })
}

/// One page, asked for again in smaller pages while it overruns its byte bound (see
/// [`smaller_page`]), and at `""` when the watch cache's answer did not arrive within the
/// request timeout; `options` becomes the request that was answered.
async fn list_page<K, L: ListerWatcher<K>>(
    lw: &L,
    options: &mut ListOptions,
) -> Result<ObjectList<K>, ReflectorError> {
    loop {
        match lw.list(options.clone()).await {
            // H3: the whole collection in one body can take longer than the request timeout
            // to arrive on a slow link, every time; etcd's pages each come in a fraction of it.
            Err(e) if timed_out(&e) && may_come_whole(options) => {
                tracing::warn!(
                    limit = options.limit,
                    "a first list page at resource version \"0\" timed out; asking for it again at \"\" in pages: {e}"
                );
                *options = from_etcd(options);
            }
            Err(e) if e.is_body_too_large() => {
                let Some(smaller) = smaller_page(options) else {
                    return Err(e);
                };
                tracing::warn!(
                    limit = options.limit,
                    next_limit = smaller.limit,
                    "a list page overran its byte bound; asking for it again in smaller pages: {e}"
                );
                *options = smaller;
            }
            answer => return answer,
        }
    }
}

/// Whether the request failed on the client's request timeout
/// ([`ClusterConfig::request_timeout`](crate::ClusterConfig::request_timeout)).
fn timed_out(error: &ReflectorError) -> bool {
    matches!(
        error.client_error(),
        Some(crate::client::ClientError::Timeout(_))
    )
}

/// The result of a complete (possibly paginated) list.
#[derive(Debug)]
pub(crate) struct FullList<K> {
    /// Each object moved into its `Arc` as its page arrives, so no second vector of objects
    /// ever exists.
    pub(crate) items: Vec<Arc<K>>,
    pub(crate) resource_version: ResourceVersion,
    /// Whether the server split the answer into pages.
    pub(crate) paginated: bool,
}

/// Default bound on the pages of one list: 10,000 pages of client-go's 500 objects is five million
/// objects, far beyond any real cluster's resource.
pub const DEFAULT_MAX_LIST_PAGES: u32 = 10_000;

/// What one complete list may take, so that a server that never stops paginating ends in an error
/// rather than in endless requests and growing memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PageLimits {
    /// Most pages of one list (at least 1).
    pub(crate) max_pages: u32,
    /// The kind every page must have (`PodList`), when the caller knows it.
    pub(crate) expected_kind: Option<String>,
    /// The representation the lister-watcher asked for: its own list type
    /// (`PartialObjectMetadataList` of `meta.k8s.io/v1`) is as good as the expected kind, and the
    /// expected kind is what a server that does not know the representation answers with.
    pub(crate) representation: Representation,
}

impl PageLimits {
    /// Refuses a page whose kind is not the expected one, nor the list type of the representation
    /// asked for (pages of scripted listers name no kind).
    fn check_kind<K>(&self, page: &ObjectList<K>) -> Result<(), ListError> {
        let of_representation = self.representation.list_type().is_some_and(|(av, kind)| {
            page.kind.as_deref() == Some(kind) && page.api_version.as_deref() == Some(av)
        });
        match (&self.expected_kind, &page.kind) {
            (Some(expected), Some(kind))
                if kind != expected && !page.is_table() && !of_representation =>
            {
                Err(ListError {
                    problem: format!("kind {kind:?} where {expected:?} was expected"),
                    snippet: String::new(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// Lists every page (contract C5.1, C5.3): follows `continue` tokens, clearing the resource
/// version and match on continuations; the list RV is the first page's. A continuation page that
/// fails with Expired restarts as one unpaginated list at the original RV.
///
/// Bounded: a token seen before in this list, or more than `limits.max_pages` pages, ends it with
/// a [`PaginationError`]; nothing is returned, so nothing reaches the store.
pub(crate) async fn list_all<K, L: ListerWatcher<K>>(
    lw: &L,
    options: ListOptions,
    limits: &PageLimits,
    mut on_page: impl FnMut(usize),
) -> Result<FullList<K>, ReflectorError> {
    let mut options = options;
    let first = list_page(lw, &mut options).await?;
    on_page(first.items.len());
    limits.check_kind(&first)?;
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
    let mut seen: HashSet<String> = HashSet::new();
    let mut pages = 1u32;
    while let Some(cont) = token.take() {
        if pages >= limits.max_pages.max(1) {
            return Err(PaginationError::TooManyPages {
                max: limits.max_pages.max(1),
            }
            .into());
        }
        if !seen.insert(cont.clone()) {
            return Err(PaginationError::RepeatedContinue { token: cont, pages }.into());
        }
        let mut page_options = ListOptions {
            continue_token: Some(cont),
            resource_version: None,
            resource_version_match: None,
            ..options.clone()
        };
        match list_page(lw, &mut page_options).await {
            Ok(page) => {
                // A smaller limit that was needed once is kept: the collection's objects are big.
                options.limit = page_options.limit;
                pages += 1;
                on_page(page.items.len());
                limits.check_kind(&page)?;
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
                limits.check_kind(&full)?;
                if let Some(token) = full.continue_token {
                    // An unpaginated list was asked for: keeping only this page would drop the
                    // rest, and following the token could start the loop bounded above again.
                    return Err(PaginationError::UnexpectedContinue { token }.into());
                }
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
    use bytes::Bytes;

    use crate::wire::list_page::ListPageError;
    use delta_fifo::store_index::{CompactObject, DynamicObject, Object};

    use crate::client::DEFAULT_MAX_BODY_BYTES;

    use super::*;

    /// A first page the watch cache may answer whole (RV "0", no continue token) is bounded at
    /// `LIST_FROM_CACHE_BYTES`, so a collection of about 100k pods is not read twice; any other
    /// page keeps the bound of its limit.
    #[test]
    fn a_page_the_watch_cache_may_answer_whole_gets_the_cache_bound() {
        let max = DEFAULT_MAX_BODY_BYTES;
        let first = ListOptions {
            limit: 500,
            resource_version: Some("0".into()),
            ..ListOptions::default()
        };
        assert_eq!(request_byte_bound(&first, max), LIST_FROM_CACHE_BYTES);
        let exact = ListOptions {
            resource_version: Some("42".into()),
            ..first.clone()
        };
        assert_eq!(request_byte_bound(&exact, max), page_byte_bound(500, max));
        let next = ListOptions {
            continue_token: Some("c".into()),
            ..first.clone()
        };
        assert_eq!(request_byte_bound(&next, max), page_byte_bound(500, max));
        assert_eq!(
            request_byte_bound(&first, 1 << 20),
            1 << 20,
            "never above max"
        );
    }

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
            br#"{"kind":"PodList","metadata":{"resourceVersion":"1","continue":""},"items":null}"#,
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

    /// Serves `pages` in order, each decoded as the HTTP lister-watcher decodes a body.
    struct Pages {
        pages: parking_lot::Mutex<std::collections::VecDeque<&'static str>>,
        requests: std::sync::atomic::AtomicU32,
    }

    impl Pages {
        fn new(pages: &[&'static str]) -> Self {
            Pages {
                pages: parking_lot::Mutex::new(pages.iter().copied().collect()),
                requests: Default::default(),
            }
        }
    }

    impl ListerWatcher<DynamicObject> for Pages {
        async fn list(&self, _: ListOptions) -> Result<ObjectList<DynamicObject>, ReflectorError> {
            self.requests
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let body = self.pages.lock().pop_front().unwrap_or("{}");
            Ok(ObjectList::from_json(&Bytes::from_static(body.as_bytes()))?)
        }
        async fn watch(
            &self,
            _: crate::client::WatchOptions,
        ) -> Result<crate::lister_watcher::WatchStream<DynamicObject>, ReflectorError> {
            unreachable!("list_all never watches")
        }
    }

    fn list_pages(
        pages: &Pages,
        max_pages: u32,
    ) -> Result<FullList<DynamicObject>, ReflectorError> {
        let limits = PageLimits {
            max_pages,
            ..PageLimits::default()
        };
        futures::executor::block_on(list_all(pages, ListOptions::default(), &limits, |_| {}))
    }

    /// A collection of `objects` objects of `object_bytes` each, served as kube-apiserver serves
    /// it, each page under [`page_byte_bound`] of its limit: the watch cache (resource version
    /// `"0"`) ignores the limit and sends everything; any other request honours it.
    struct Weighed {
        objects: usize,
        object_bytes: usize,
        /// Every page overruns, as a body that never ends does.
        endless: bool,
        /// Every request at resource version `"0"`, or every request, times out.
        timeouts: Timeouts,
        asked: parking_lot::Mutex<Vec<ListOptions>>,
    }

    impl ListerWatcher<DynamicObject> for Weighed {
        async fn list(&self, o: ListOptions) -> Result<ObjectList<DynamicObject>, ReflectorError> {
            self.asked.lock().push(o.clone());
            let start: usize = o
                .continue_token
                .as_deref()
                .map_or(0, |c| c.parse().unwrap());
            let from_cache = o
                .resource_version
                .as_ref()
                .is_some_and(|rv| rv.as_str() == "0");
            let n = if o.limit == 0 || from_cache {
                self.objects - start
            } else {
                (o.limit as usize).min(self.objects - start)
            };
            let timed_out = match self.timeouts {
                Timeouts::None => false,
                Timeouts::FromCache => from_cache,
                Timeouts::All => true,
            };
            if timed_out {
                let timeout = std::time::Duration::from_secs(60);
                return Err(crate::client::ClientError::Timeout(timeout).into());
            }
            let bound = page_byte_bound(o.limit, DEFAULT_MAX_BODY_BYTES);
            if self.endless || n * self.object_bytes > bound {
                return Err(crate::client::ClientError::BodyTooLarge {
                    what: "GET /api/v1/pods".into(),
                    limit: bound,
                }
                .into());
            }
            let items = (start..start + n)
                .map(|i| DynamicObject::new("v1", "Pod").named(format!("p{i}")))
                .collect();
            let page = ObjectList::new(items, "7");
            Ok(match start + n < self.objects {
                true => page.with_continue((start + n).to_string()),
                false => page,
            })
        }
        async fn watch(
            &self,
            _: crate::client::WatchOptions,
        ) -> Result<crate::lister_watcher::WatchStream<DynamicObject>, ReflectorError> {
            unreachable!("list_all never watches")
        }
    }

    /// A list's outcome, and the (resource version, limit) of every request it made.
    type Weighing = (
        Result<FullList<DynamicObject>, ReflectorError>,
        Vec<(String, u32)>,
    );

    fn weighed_list(lw: &Weighed, rv: &str, limit: u32) -> Weighing {
        let options = ListOptions {
            resource_version: Some(rv.into()),
            limit,
            ..ListOptions::default()
        };
        let limits = PageLimits {
            max_pages: DEFAULT_MAX_LIST_PAGES,
            ..PageLimits::default()
        };
        let result = futures::executor::block_on(list_all(lw, options, &limits, |_| {}));
        let asked = lw
            .asked
            .lock()
            .iter()
            .map(|o| {
                let rv = o.resource_version.as_ref().map(|rv| rv.to_string());
                (rv.unwrap_or_else(|| "none".into()), o.limit)
            })
            .collect();
        (result, asked)
    }

    /// Which requests of a [`Weighed`] collection time out.
    #[derive(Clone, Copy)]
    enum Timeouts {
        None,
        FromCache,
        All,
    }

    fn weighed(objects: usize, object_bytes: usize, endless: bool) -> Weighed {
        Weighed {
            objects,
            object_bytes,
            endless,
            timeouts: Timeouts::None,
            asked: Default::default(),
        }
    }

    #[test]
    fn a_first_page_from_the_watch_cache_that_times_out_is_asked_for_again_in_pages() {
        // H3: 10k objects whose whole answer at "0" never arrives in time; etcd's pages do.
        let slow_cache = Weighed {
            timeouts: Timeouts::FromCache,
            ..weighed(10_000, 1 << 10, false)
        };
        let (list, asked) = weighed_list(&slow_cache, "0", 500);
        assert_eq!(list.unwrap().items.len(), 10_000);
        assert_eq!(asked[..2], [("0".into(), 500), ("none".into(), 500)]);
        assert_eq!(asked.len(), 1 + 20, "the first try, then 20 pages of 500");
        // A page elsewhere that times out fails the list at once: the reflector retries it
        // after a backoff delay, as any failed list.
        let slow = Weighed {
            timeouts: Timeouts::All,
            ..weighed(10_000, 1 << 10, false)
        };
        for rv in ["42", "0"] {
            let (list, asked) = weighed_list(&slow, rv, 500);
            let error = list.unwrap_err();
            assert!(timed_out(&error), "{error}");
            let tries = if rv == "0" { 2 } else { 1 };
            assert_eq!(asked.len(), tries, "at {rv}: {asked:?}");
            slow.asked.lock().clear();
        }
    }

    #[test]
    fn a_page_over_its_byte_bound_is_asked_for_again_smaller_never_refused() {
        const MIB: usize = 1 << 20;
        // 100k pods of 4 KiB at "0": the watch cache ignores the limit and sends 400 MiB, over
        // the 258 MiB of a page of 500; etcd, at "", honours it.
        let (list, asked) = weighed_list(&weighed(100_000, 4 << 10, false), "0", 500);
        assert_eq!(list.unwrap().items.len(), 100_000);
        assert_eq!(asked[..2], [("0".into(), 500), ("none".into(), 500)]);
        assert_eq!(asked.len(), 1 + 200, "the first try, then 200 pages of 500");
        // 2,000 objects of 1.5 MiB, kube-apiserver's largest, in an unlimited relist: pages of
        // 500 and of 62 are too heavy, pages of 7 are not, and stay at 7 for the rest.
        let (list, asked) = weighed_list(&weighed(2_000, 3 * MIB / 2, false), "42", 0);
        assert_eq!(list.unwrap().items.len(), 2_000);
        assert_eq!(
            asked[..4],
            [
                ("42".into(), 0),
                ("42".into(), 500),
                ("42".into(), 62),
                ("42".into(), 7)
            ]
        );
        assert!(asked[4..].iter().all(|(_, limit)| *limit == 7), "{asked:?}");
        assert_eq!(asked.len(), 3 + 2_000usize.div_ceil(7));
    }

    #[test]
    fn a_body_that_never_ends_fails_the_list_after_at_most_five_bounded_requests() {
        let (list, asked) = weighed_list(&weighed(1, 1, true), "0", 500);
        assert!(list.unwrap_err().is_body_too_large());
        assert_eq!(
            asked,
            [
                ("0".into(), 500),
                ("none".into(), 500),
                ("none".into(), 62),
                ("none".into(), 7),
                ("none".into(), 1),
            ]
        );
        let (list, asked) = weighed_list(&weighed(1, 1, true), "42", 0);
        assert!(list.unwrap_err().is_body_too_large());
        assert_eq!(asked.len(), 5, "{asked:?}");
        // What the largest of those requests could cost: 258 MiB, not the 1 GiB of old.
        let largest = page_byte_bound(500, DEFAULT_MAX_BODY_BYTES);
        assert_eq!(largest, 258 << 20);
    }

    #[test]
    fn a_status_body_is_an_api_error_whatever_the_http_code_was() {
        let body = Bytes::from_static(
            br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"etcd is sad","reason":"InternalError","code":500}"#,
        );
        let err = ReflectorError::from(ObjectList::<DynamicObject>::from_json(&body).unwrap_err());
        assert!(err.is_internal_error(), "{err}");
        assert_eq!(
            err.status().map(|s| s.message.as_str()),
            Some("etcd is sad")
        );
        // An expired Status in a 200 is still an expiry: the reflector relists at "" for it.
        let gone = Bytes::from_static(
            br#"{"kind":"Status","status":"Failure","reason":"Expired","code":410,"message":"too old"}"#,
        );
        assert!(
            ReflectorError::from(ObjectList::<DynamicObject>::from_json(&gone).unwrap_err())
                .is_expired()
        );
        // A Status naming no code still failed.
        let bare = Bytes::from_static(br#"{"kind":"Status","status":"Failure"}"#);
        assert_eq!(
            ObjectList::<DynamicObject>::from_json(&bare)
                .unwrap_err()
                .status()
                .map(|s| s.code),
            Some(500)
        );
        // Fields of a shape a list would refuse do not hide that it is a Status.
        let odd = Bytes::from_static(
            br#"{"kind":"Status","metadata":"x","items":7,"code":403,"reason":"Forbidden"}"#,
        );
        assert_eq!(
            ObjectList::<DynamicObject>::from_json(&odd)
                .unwrap_err()
                .status()
                .map(|s| s.code),
            Some(403)
        );
    }

    #[test]
    fn bodies_that_are_not_lists_are_refused_with_what_is_wrong() {
        for (body, problem) in [
            ("{}", "no kind"),
            (
                r#"{"kind":"Pod","metadata":{"resourceVersion":"1"},"items":[]}"#,
                "is not a list",
            ),
            (
                r#"{"kind":"PodList","metadata":{"resourceVersion":"1"}}"#,
                "no items",
            ),
            (
                r#"{"kind":"PodList","items":[]}"#,
                "no metadata.resourceVersion",
            ),
            (
                r#"{"kind":"PodList","metadata":{"resourceVersion":""},"items":[]}"#,
                "no metadata.resourceVersion",
            ),
            (
                r#"{"kind":"PodList","metadata":{},"items":[]}"#,
                "no metadata.resourceVersion",
            ),
        ] {
            match ObjectList::<DynamicObject>::from_json(&Bytes::from(body)) {
                Err(ListPageError::NotAList(e)) => {
                    assert!(e.problem.contains(problem), "{body}: {e}")
                }
                other => panic!("{body}: expected an invalid list, got {other:?}"),
            }
        }
        for body in [
            "<html><body>502 Bad Gateway</body></html>",
            "",
            "null",
            "[]",
            "42",
            "{} x",
        ] {
            match ObjectList::<DynamicObject>::from_json(&Bytes::from(body)) {
                Err(ListPageError::NotAList(e)) => {
                    assert!(e.problem.starts_with("not JSON of a list"), "{body}: {e}")
                }
                other => panic!("{body:?}: expected an invalid list, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_repeated_continue_token_ends_the_list_with_an_error() {
        let pages = Pages::new(&[
            r#"{"kind":"PodList","metadata":{"resourceVersion":"5","continue":"A"},"items":[{"metadata":{"name":"a"}}]}"#,
            r#"{"kind":"PodList","metadata":{"resourceVersion":"5","continue":"B"},"items":[{"metadata":{"name":"b"}}]}"#,
            r#"{"kind":"PodList","metadata":{"resourceVersion":"5","continue":"A"},"items":[{"metadata":{"name":"a"}}]}"#,
            r#"{"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[]}"#,
        ]);
        match list_pages(&pages, 100) {
            Err(ReflectorError::Pagination(PaginationError::RepeatedContinue { token, pages })) => {
                assert_eq!((token.as_str(), pages), ("A", 3))
            }
            other => panic!("expected a repeated token, got {other:?}"),
        }
        assert_eq!(pages.requests.load(std::sync::atomic::Ordering::Relaxed), 3);
    }

    #[test]
    fn a_list_of_more_pages_than_the_maximum_fails_after_exactly_that_many_requests() {
        let pages = Pages::new(&[
            r#"{"kind":"PodList","metadata":{"resourceVersion":"5","continue":"A"},"items":[]}"#,
            r#"{"kind":"PodList","metadata":{"resourceVersion":"5","continue":"B"},"items":[]}"#,
            r#"{"kind":"PodList","metadata":{"resourceVersion":"5","continue":"C"},"items":[]}"#,
            r#"{"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[]}"#,
        ]);
        assert!(matches!(
            list_pages(&pages, 3),
            Err(ReflectorError::Pagination(PaginationError::TooManyPages {
                max: 3
            }))
        ));
        assert_eq!(pages.requests.load(std::sync::atomic::Ordering::Relaxed), 3);
        let all = Pages::new(&[
            r#"{"kind":"PodList","metadata":{"resourceVersion":"5","continue":"A"},"items":[{"metadata":{"name":"a"}}]}"#,
            r#"{"kind":"PodList","metadata":{"resourceVersion":"6"},"items":[{"metadata":{"name":"b"}}]}"#,
        ]);
        let full = list_pages(&all, 2).expect("two pages fit a maximum of two");
        assert_eq!((full.items.len(), full.resource_version.as_str()), (2, "5"));
    }

    #[test]
    fn a_page_of_another_kind_than_expected_is_refused() {
        let pages = Pages::new(&[
            r#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"5"},"items":[]}"#,
        ]);
        let limits = PageLimits {
            max_pages: 10,
            expected_kind: Some("PodList".into()),
            representation: Representation::Object,
        };
        let got =
            futures::executor::block_on(list_all(&pages, ListOptions::default(), &limits, |_| {}));
        assert!(
            matches!(&got, Err(ReflectorError::InvalidList(e)) if e.problem.contains("PodList")),
            "{got:?}"
        );
    }

    #[test]
    fn a_metadata_list_passes_for_the_expected_kind_only_when_metadata_was_asked_for() {
        const META_PAGE: &str = r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"5"},"items":[{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a"}}]}"#;
        const POD_PAGE: &str = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a"}}]}"#;
        let list = |page: &'static str, representation| {
            let limits = PageLimits {
                max_pages: 10,
                expected_kind: Some("PodList".into()),
                representation,
            };
            let pages = Pages::new(&[page]);
            futures::executor::block_on(list_all(&pages, ListOptions::default(), &limits, |_| {}))
        };
        let meta = Representation::PartialObjectMetadata;
        assert_eq!(list(META_PAGE, meta).unwrap().items.len(), 1);
        // A server that does not know the representation answers with the resource's own list.
        assert_eq!(list(POD_PAGE, meta).unwrap().items.len(), 1);
        let got = list(META_PAGE, Representation::Object);
        assert!(
            matches!(&got, Err(ReflectorError::InvalidList(e)) if e.problem.contains("PartialObjectMetadataList")),
            "{got:?}"
        );
        // The representation's list kind of another group is not it.
        let other = r#"{"kind":"PartialObjectMetadataList","apiVersion":"example.com/v1","metadata":{"resourceVersion":"5"},"items":[]}"#;
        assert!(list(other, meta).is_err());
    }

    mod props {
        use proptest::prelude::*;
        use serde_json::{json, Value};

        use super::*;

        /// What `list_all` may return: an object whose `kind` ends in `List`, with an `items`
        /// field (an array, or null for none) and a non-empty `metadata.resourceVersion`.
        fn is_well_formed_list(v: &Value) -> bool {
            v["kind"].as_str().is_some_and(|k| k.ends_with("List"))
                && v.get("items").is_some_and(|i| i.is_array() || i.is_null())
                && v["metadata"]["resourceVersion"]
                    .as_str()
                    .is_some_and(|rv| !rv.is_empty())
        }

        fn any_json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                prop_oneof![
                    Just("PodList".to_string()),
                    Just("Status".to_string()),
                    Just("Table".to_string()),
                    Just("".to_string()),
                    "[a-zA-Z0-9]{0,8}",
                ]
                .prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 48, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::btree_map(
                        prop_oneof![
                            Just("kind".to_string()),
                            Just("items".to_string()),
                            Just("metadata".to_string()),
                            Just("resourceVersion".to_string()),
                            Just("continue".to_string()),
                            Just("apiVersion".to_string()),
                            Just("code".to_string()),
                            "[a-z]{1,6}",
                        ],
                        inner,
                        0..5
                    )
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        /// A well-formed list with one part damaged or dropped, or left intact.
        fn near_list() -> impl Strategy<Value = Value> {
            (0..8usize, any_json()).prop_map(|(damage, junk)| {
                let mut v = json!({
                    "kind": "PodList",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": "12"},
                    "items": [{"metadata": {"name": "a", "namespace": "ns"}}],
                });
                match damage {
                    0 => {}
                    1 => v["kind"] = junk,
                    2 => v["items"] = junk,
                    3 => v["metadata"] = junk,
                    4 => v["metadata"]["resourceVersion"] = junk,
                    5 => drop(v.as_object_mut().map(|o| o.remove("items"))),
                    6 => drop(v.as_object_mut().map(|o| o.remove("kind"))),
                    _ => v["kind"] = json!("Status"),
                }
                v
            })
        }

        proptest! {
            /// A list body that is any JSON value other than a well-formed list never comes out
            /// of `list_all`, so it can never reach the store's `replace`.
            #[test]
            fn proptest_only_well_formed_lists_reach_the_store(
                v in prop_oneof![any_json(), near_list()]
            ) {
                let text: &'static str = Box::leak(v.to_string().into_boxed_str());
                let pages = Pages::new(&[text]);
                if let Ok(full) = list_pages(&pages, 10) {
                    prop_assert!(is_well_formed_list(&v), "accepted {text}");
                    prop_assert_eq!(full.resource_version.as_str(), v["metadata"]["resourceVersion"].as_str().unwrap_or(""));
                }
            }
        }
    }
}
