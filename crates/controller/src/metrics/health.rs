//! Named readiness checks for `/readyz` (MX2).

use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;
use workqueue::shared_informer::HasSynced;

use crate::leader_election::HealthzAdaptor;

type Check = Arc<dyn Fn() -> bool + Send + Sync>;

/// The readiness checks `/readyz` runs: ready when every one passes (none registered: ready).
/// Cheap to clone; a check added through any clone is seen by all, the server's included.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use controller::metrics::Health;
///
/// let health = Health::new();
/// let synced = Arc::new(AtomicBool::new(false));
/// let flag = synced.clone();
/// health.add_check("informers", move || flag.load(Ordering::SeqCst));
/// assert_eq!(health.failing(), ["informers"]);
/// synced.store(true, Ordering::SeqCst);
/// assert!(health.failing().is_empty());
/// ```
#[derive(Clone, Default)]
pub struct Health {
    checks: Arc<RwLock<Vec<(String, Check)>>>,
}

impl fmt::Debug for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let checks = self.checks.read();
        f.debug_struct("Health")
            .field("checks", &checks.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .finish()
    }
}

impl Health {
    /// No checks yet: ready.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a readiness check named `name`, passing while `check` returns `true`. It is called
    /// at each `/readyz` request, so it should be cheap and never block.
    pub fn add_check(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> bool + Send + Sync + 'static,
    ) {
        self.checks.write().push((name.into(), Arc::new(check)));
    }

    /// Adds a check passing once `synced` has synced (an informer, a registration, a queue:
    /// anything [`HasSynced`]).
    pub fn add_has_synced(&self, name: impl Into<String>, synced: impl HasSynced + 'static) {
        self.add_check(name, move || synced.has_synced());
    }

    /// Adds leader election's check under its name (`leaderElection`): failing while the
    /// adaptor's elector believes it leads but has not renewed its lease within the adaptor's
    /// tolerance (rule L10).
    pub fn add_leader_election(&self, adaptor: HealthzAdaptor) {
        let name = adaptor.name();
        self.add_check(name, move || adaptor.check().is_ok());
    }

    /// The names of the checks failing now, in the order they were added.
    pub fn failing(&self) -> Vec<String> {
        self.results()
            .into_iter()
            .filter(|(_, passed)| !passed)
            .map(|(name, _)| name)
            .collect()
    }

    /// Each check's name and whether it passes now, every check run once, in the order they
    /// were added. The checks run outside the list's lock, so a check may use this `Health`.
    pub(crate) fn results(&self) -> Vec<(String, bool)> {
        let checks: Vec<(String, Check)> = self.checks.read().clone();
        checks
            .into_iter()
            .map(|(name, check)| {
                let passed = check();
                (name, passed)
            })
            .collect()
    }

    /// The names of every check, in the order they were added.
    pub fn names(&self) -> Vec<String> {
        self.checks.read().iter().map(|(n, _)| n.clone()).collect()
    }
}
