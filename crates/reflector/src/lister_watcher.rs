//! [`ListerWatcher`]: the two calls a reflector makes to the API server.

use std::future::Future;

use futures::stream::BoxStream;

use crate::client::{ListOptions, Representation, Resource, WatchOptions};
use crate::error::ReflectorError;
use crate::wire::decoder::WatchEvent;
use crate::wire::list_page::ObjectList;

/// A watch in progress: events in order, `None` when the server closed it normally. Dropping it
/// closes the connection.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, ReflectorError>>;

/// Lists (one page per call) and watches one resource. [`HttpListerWatcher`](crate::HttpListerWatcher)
/// talks to an API server; tests implement it with scripted answers.
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// One list request (one page when `options.limit` is set).
    ///
    /// # Cancel safety
    ///
    /// Implementations must be cancel safe: the reflector drops the future when it is cancelled.
    fn list(
        &self,
        options: ListOptions,
    ) -> impl Future<Output = Result<ObjectList<K>, ReflectorError>> + Send;

    /// Opens a watch.
    ///
    /// # Cancel safety
    ///
    /// Implementations must be cancel safe: the reflector drops the future when it is cancelled.
    fn watch(
        &self,
        options: WatchOptions,
    ) -> impl Future<Output = Result<WatchStream<K>, ReflectorError>> + Send;

    /// Whether watch-list streaming may be tried (contract C1.3). Default: yes.
    fn supports_watch_list(&self) -> bool {
        true
    }

    /// The representation this lister-watcher asks the server for: with
    /// [`ReflectorOptions::expected_gvk`](crate::ReflectorOptions::expected_gvk) set, the
    /// reflector also accepts lists and objects of that representation's own type
    /// (`PartialObjectMetadataList`, `PartialObjectMetadata`). Default: the objects as they are.
    fn representation(&self) -> Representation {
        Representation::Object
    }

    /// The resource listed and watched, if there is one: the reflector names it in its errors
    /// and logs (`failed to list widgets.example.com: …`) unless
    /// [`ReflectorOptions::type_description`](crate::ReflectorOptions::type_description) names
    /// something else. A lister-watcher that wraps another forwards it. Default: none (the
    /// reflector then names the expected GVK, or else the Rust type).
    fn resource(&self) -> Option<Resource> {
        None
    }
}
