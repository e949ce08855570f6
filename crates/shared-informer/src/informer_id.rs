//! [`InformerId`]: who an informer is, as its registrations, logs and stats name it.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::informer_name::InformerNameAndResource;

/// Who an informer is: its name and the type of its objects, plus a serial number so that two
/// informers of the same name and type are still told apart (a registration is only ever removed
/// by the informer that made it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InformerId {
    /// The name (`InformerOptions::name`; the factory uses the resource's plural).
    pub name: String,
    /// The Rust type of the cached objects.
    pub type_name: &'static str,
    informer_name: Option<InformerNameAndResource>,
    serial: u64,
}

impl InformerId {
    pub(crate) fn new<K>(name: String, informer_name: Option<InformerNameAndResource>) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        InformerId {
            name,
            type_name: std::any::type_name::<K>(),
            informer_name,
            serial: NEXT.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The informer's identity under a reserved [`InformerName`](crate::InformerName), if it was
    /// given one; its [`is_reserved`](InformerNameAndResource::is_reserved) says whether this
    /// informer's metrics are to be published under that name.
    pub fn informer_name(&self) -> Option<&InformerNameAndResource> {
        self.informer_name.as_ref()
    }
}

impl std::fmt::Display for InformerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = self.type_name.rsplit("::").next().unwrap_or(self.type_name);
        if let Some(named) = &self.informer_name {
            write!(f, "{}/", named.name())?;
        }
        write!(f, "{} ({short})", self.name)
    }
}
