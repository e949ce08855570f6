//! What every handler shares: the server's state ([`Shared`]), one per server, behind an `Arc`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::watch;

use crate::authz::Policy;
use crate::builder::SimServerBuilder;
use crate::crd::serving::CrdState;
use crate::faults::Faults;
use crate::metrics::Counters;
use crate::resources::Registry;
use crate::status::ApiError;
use crate::storage::Storage;
use crate::tls::TlsMaterial;
use crate::users::Directory;

pub(crate) struct Shared {
    pub(crate) directory: Directory,
    pub(crate) policy: Policy,
    pub(crate) storage: Arc<Storage>,
    pub(crate) registry: RwLock<Registry>,
    pub(crate) crds: CrdState,
    pub(crate) faults: Faults,
    pub(crate) counters: Arc<Counters>,
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) addr: SocketAddr,
    pub(crate) tls: Option<TlsMaterial>,
    pub(crate) ca_path: Option<PathBuf>,
    pub(crate) cfg: SimServerBuilder,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(p) = &self.ca_path {
            let _ = std::fs::remove_file(p);
            if let Some(d) = p.parent() {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
}

impl Shared {
    /// Whether `shardSelector` is served (the simulator's stand-in for the feature gate).
    pub(crate) fn sharded_list_and_watch(&self) -> bool {
        self.cfg.sharded_list_and_watch
    }

    /// Whether protobuf is spoken ([`SimServerBuilder::protobuf`]).
    pub(crate) fn speaks_protobuf(&self) -> bool {
        self.cfg.protobuf
    }

    /// Resolves `plural` or `plural.group` to a registry index.
    pub(crate) fn resolve(&self, resource: &str) -> Option<usize> {
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        self.registry
            .read()
            .position(|d| d.plural == plural && d.group == group)
    }
    /// 404 unless the namespace `ns` exists.
    pub(crate) fn check_namespace(&self, ns: &str) -> Result<(), ApiError> {
        let idx = self.resolve("namespaces").expect("builtin namespaces");
        if self.storage.get(idx, ns).is_none() {
            return Err(ApiError::not_found("namespaces", "", ns));
        }
        Ok(())
    }

    /// Serves the stored CRDs as they now are, after a write to one (see
    /// [`reconcile`](crate::crd::serving::reconcile)).
    pub(crate) fn reconcile_crds(&self) {
        crate::crd::serving::reconcile(&self.registry, &self.storage, &self.crds);
    }
}
