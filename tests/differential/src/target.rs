//! The server a replay runs against: the real kube-apiserver (started from the binaries `cargo
//! xtask real-apiserver` builds) or the simulator (in this process), both over HTTPS with the
//! corpus's two users, `admin` (in `system:masters`) and `viewer` (no grants).

use std::time::{Duration, Instant};

use real_apiserver::{RealServer, ServerOptions};
use sim_apiserver::{SimServer, User as SimUser};

use crate::corpus::User;
use crate::http::{Client, Outgoing};
use crate::Error;

/// How often kube-apiserver compacts etcd while the corpus runs: short, so that a compaction
/// step waits seconds, long enough that no group's captured resourceVersion is compacted under
/// it (a group runs in well under a second).
const REAL_COMPACTION_INTERVAL: Duration = Duration::from_secs(5);

/// How long a compaction step waits for the real compactor: two of its intervals (it compacts
/// to the revision it saw one interval before) and room for a loaded machine.
const COMPACTION_WAIT: Duration = Duration::from_secs(60);

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// kube-apiserver and etcd.
    Real,
    /// `sim-apiserver`.
    Sim,
}

impl std::str::FromStr for Kind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Kind, Error> {
        match s {
            "real" => Ok(Kind::Real),
            "sim" => Ok(Kind::Sim),
            other => Err(Error::Usage(format!(
                "`{other}` is no server: `real` or `sim`"
            ))),
        }
    }
}

enum Running {
    Real(Box<RealServer>),
    Sim(SimServer),
}

/// A running server and a client of it.
pub struct Target {
    running: Running,
    client: Client,
    admin: String,
    viewer: String,
    /// What answered: `kube-apiserver v1.36.3`, `sim-apiserver`.
    pub description: String,
}

impl Target {
    /// Starts a server of `kind`.
    pub async fn start(kind: Kind) -> Result<Target, Error> {
        match kind {
            Kind::Real => Target::real().await,
            Kind::Sim => Target::sim().await,
        }
    }

    /// Starts kube-apiserver and etcd (blocking work, on a blocking thread).
    pub async fn real() -> Result<Target, Error> {
        let server = tokio::task::spawn_blocking(|| {
            let mut options = ServerOptions::default();
            options.compaction_interval = REAL_COMPACTION_INTERVAL;
            RealServer::start(options)
        })
        .await
        .map_err(|e| Error::Setup(format!("starting the real server: {e}")))?
        .map_err(|e| Error::Setup(format!("starting the real server: {e}")))?;
        let client = Client::new(server.url(), server.ca_pem())?;
        Ok(Target {
            admin: server.token(real_apiserver::User::Admin).to_string(),
            viewer: server.token(real_apiserver::User::Viewer).to_string(),
            description: format!("kube-apiserver {}", server.version()),
            client,
            running: Running::Real(Box::new(server)),
        })
    }

    /// Starts the simulator over HTTPS with the corpus's users.
    pub async fn sim() -> Result<Target, Error> {
        let admin = "differential-admin-token".to_string();
        let viewer = "differential-viewer-token".to_string();
        let server = SimServer::builder()
            .tls(true)
            // Named, with uids and groups, as tests/real-apiserver's token file names them.
            .user(
                SimUser::new(User::Admin.name())
                    .uid("admin-uid")
                    .token(&admin)
                    .group("system:masters"),
            )
            .user(
                SimUser::new(User::Viewer.name())
                    .uid("viewer-uid")
                    .token(&viewer),
            )
            .start()
            .await
            .map_err(|e| Error::Setup(format!("starting the simulator: {e}")))?;
        let ca = server
            .ca_pem()
            .ok_or_else(|| Error::Setup("the simulator serves TLS but has no CA".into()))?;
        let client = Client::new(&server.url(), ca)?;
        Ok(Target {
            admin,
            viewer,
            description: "sim-apiserver".into(),
            client,
            running: Running::Sim(server),
        })
    }

    /// The client of the server.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The bearer token of `user`.
    pub fn token(&self, user: User) -> &str {
        match user {
            User::Admin => &self.admin,
            User::Viewer => &self.viewer,
        }
    }

    /// Compacts the server's history so that `probe` (a read at an old resourceVersion)
    /// answers 410: the simulator compacts at once; the real server's compactor runs on its
    /// own, so its answer is asked again until it turns (for at most a minute).
    pub async fn compact(&self, probe: &Outgoing) -> Result<(), Error> {
        if let Running::Sim(sim) = &self.running {
            sim.faults().compact();
        }
        let started = Instant::now();
        let mut every = tokio::time::interval(Duration::from_millis(250));
        loop {
            every.tick().await;
            let answer = self.client.send(probe).await?;
            if answer.status == 410 {
                return Ok(());
            }
            let waited = started.elapsed();
            if matches!(self.running, Running::Sim(_)) || waited > COMPACTION_WAIT {
                return Err(Error::Setup(format!(
                    "{} still answers {} to {} after compacting for {} s",
                    self.description,
                    answer.status,
                    probe.path,
                    waited.as_secs()
                )));
            }
        }
    }

    /// Stops the server.
    pub fn stop(self) -> Result<(), Error> {
        match self.running {
            Running::Real(server) => server
                .stop()
                .map_err(|e| Error::Setup(format!("stopping the real server: {e}"))),
            Running::Sim(server) => {
                server.shutdown();
                Ok(())
            }
        }
    }
}
