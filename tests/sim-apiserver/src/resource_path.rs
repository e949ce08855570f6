//! A request path that names a served resource, parsed by the server's routing.

use crate::resources::ResourceDef;

/// A parsed resource path.
pub(crate) struct ResourcePath {
    pub(crate) idx: usize,
    pub(crate) def: ResourceDef,
    pub(crate) ns: Option<String>,
    pub(crate) name: Option<String>,
    /// `status` or `scale` (only for a resource that has it).
    pub(crate) sub: Option<String>,
}
