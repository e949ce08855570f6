//! Our elector and client-go's share one Lease, as replicas do while a controller moves from Go
//! to Rust: a client-go elector leads, ours waits for it; it releases, ours takes over at its
//! next attempt rather than after the lease's duration; another client-go elector sees ours as
//! leader and waits; ours releases on cancel, and client-go takes over the same way. The Lease's
//! history in the simulator shows one holder at a time, each release written between them. And
//! when both start at once on a Lease nobody holds, one wins and the other waits.
//!
//! The client-go side is the client-go probe's leader mode (`tests/client-go`, a Go program built
//! by its `build.sh`); this test runs the binary `SIM_CLIENT_GO` names and skips, saying so, when
//! it is not set. CI does not set it: client-go 0.32, the one CI builds the probe from, leaves the
//! lease held when cancelled during a renewal (docs/simulator.md), so this runs by hand with a
//! current client-go.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use controller::leader_election::{ApiLeaseLock, ElectionEnd, LeaderElectionConfig, LeaderElector};
use reflector::{Client, ClusterConfig, Credentials};
use serde_json::Value;
use sim_apiserver::SimServer;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::oneshot;
use workqueue::shared_informer::reflector;
use workqueue::CancellationToken;

const NS: &str = "default";
const LEASE: &str = "shared-controller";
/// The lease both sides use: long, so that a takeover sooner than this proves the release was
/// read, not waited out.
const LEASE_DURATION: Duration = Duration::from_secs(15);

/// One client-go elector, its standard input held open until [`GoElector::stop`].
struct GoElector {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    identity: &'static str,
}

impl GoElector {
    fn start(bin: &PathBuf, sim: &SimServer, identity: &'static str) -> Self {
        let mut cmd = Command::new(bin);
        cmd.env("SIM_URL", sim.url())
            .env("PROBE_MODE", "leader")
            .env("PROBE_NAMESPACE", NS)
            .env("PROBE_LEASE", LEASE)
            .env("PROBE_IDENTITY", identity)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        if let Some(token) = sim.token() {
            cmd.env("SIM_TOKEN", token);
        }
        if let Some(ca) = sim.ca_path() {
            cmd.env("SIM_CA", ca);
        }
        let mut child = cmd.spawn().expect("the client-go probe starts");
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            lines,
            identity,
        }
    }

    /// Reads the elector's lines until one equals `want`; every line read is returned.
    async fn until(&mut self, want: &str) -> Vec<String> {
        let mut seen = Vec::new();
        let read = async {
            while let Some(line) = self.lines.next_line().await.expect("probe output") {
                let done = line == want;
                seen.push(line);
                if done {
                    return true;
                }
            }
            false
        };
        let found = tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .unwrap_or(false);
        assert!(
            found,
            "client-go elector {} never printed {want:?}; it printed {seen:?}",
            self.identity
        );
        seen
    }

    /// Ends the election (its standard input closes) and waits for it to release and exit.
    async fn stop(mut self) -> Vec<String> {
        drop(self.child.stdin.take());
        let seen = self.until("released").await;
        let status = self.child.wait().await.unwrap();
        assert!(status.success(), "{}: {status}", self.identity);
        seen
    }
}

fn client_for(sim: &SimServer) -> Client {
    let mut config = ClusterConfig::new(&sim.url()).unwrap();
    if let Some(ca) = sim.ca_pem() {
        config.certificate_authority = Some(ca.as_bytes().to_vec());
    }
    if let Some(token) = sim.token() {
        config.credentials = Credentials::Token(token.into());
    }
    Client::new(&config).unwrap()
}

/// The holders the Lease named over its history, repeats folded: `""` is a release.
fn holders(sim: &SimServer) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for version in sim.history("leases.coordination.k8s.io", Some(NS), LEASE) {
        let holder = version["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if out.last() != Some(&holder) {
            out.push(holder);
        }
    }
    out
}

fn lease(sim: &SimServer) -> Value {
    sim.get("leases.coordination.k8s.io", Some(NS), LEASE)
        .expect("the lease")
}

/// The probe `SIM_CLIENT_GO` names; `None`, having said the test skips, when it is not set.
fn probe() -> Option<PathBuf> {
    let Some(bin) = std::env::var_os("SIM_CLIENT_GO").map(PathBuf::from) else {
        eprintln!(
            "SKIPPED: SIM_CLIENT_GO is not set (build the probe with tests/client-go/build.sh)"
        );
        return None;
    };
    assert!(bin.exists(), "SIM_CLIENT_GO names {}", bin.display());
    Some(bin)
}

async fn server() -> SimServer {
    SimServer::builder()
        .tls(true)
        .token("le-interop")
        .history_limit(100_000)
        .start()
        .await
        .unwrap()
}

/// Our elector, running `run_leading` with client-go's timings above.
struct Ours {
    guard: controller::leader_election::LeaseGuard,
    cancel: CancellationToken,
    led: oneshot::Receiver<Instant>,
    run: tokio::task::JoinHandle<ElectionEnd>,
}

impl Ours {
    fn start(sim: &SimServer, identity: &str) -> Self {
        let mut config = LeaderElectionConfig::new(LEASE, identity);
        config.lease_duration = LEASE_DURATION;
        config.renew_deadline = Duration::from_secs(10);
        config.retry_period = Duration::from_millis(250);
        let lock = ApiLeaseLock::new(client_for(sim), NS, LEASE, identity);
        let elector = LeaderElector::new(config, lock).unwrap();
        let guard = elector.guard();
        let cancel = CancellationToken::new();
        let (led_tx, led) = oneshot::channel();
        let run = tokio::spawn(
            elector.run_leading(cancel.clone(), |leader, guard| async move {
                assert!(guard.is_valid());
                let _ = led_tx.send(Instant::now());
                leader.cancelled().await;
            }),
        );
        Self {
            guard,
            cancel,
            led,
            run,
        }
    }

    /// When ours started leading.
    async fn led(&mut self) -> Instant {
        tokio::time::timeout(Duration::from_secs(60), &mut self.led)
            .await
            .expect("ours leads")
            .expect("the elector ran")
    }

    /// Cancels ours, which releases the lease.
    async fn stop(self) {
        self.cancel.cancel();
        assert_eq!(self.run.await.unwrap(), ElectionEnd::Cancelled);
    }
}

/// Waits for the lease's holder to renew `times` times (it renews every 250 ms).
async fn renewals(sim: &SimServer, times: usize) {
    for _ in 0..times {
        let before = lease(sim)["spec"]["renewTime"].clone();
        tokio::time::timeout(Duration::from_secs(10), async {
            while lease(sim)["spec"]["renewTime"] == before {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the holder renews");
    }
}

/// No holder ever replaced another without a release between them: within a lease duration
/// nobody may take a held lease.
fn assert_one_holder_at_a_time(sim: &SimServer) -> Vec<String> {
    let h = holders(sim);
    for pair in h.windows(2) {
        assert!(
            pair[0].is_empty() || pair[1].is_empty(),
            "{h:?}: {} replaced {} without a release",
            pair[1],
            pair[0]
        );
    }
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_elector_and_client_go_hand_one_lease_back_and_forth() {
    let Some(bin) = probe() else { return };
    let sim = server().await;

    // client-go leads first.
    let mut go_a = GoElector::start(&bin, &sim, "go-a");
    go_a.until("leading").await;
    assert_eq!(lease(&sim)["spec"]["holderIdentity"], "go-a");

    // Ours starts while go-a holds the lease, and waits through several of go-a's renewals.
    let mut ours = Ours::start(&sim, "rust-b");
    renewals(&sim, 4).await;
    assert!(
        !ours.guard.is_valid(),
        "ours leads while go-a holds the lease"
    );
    assert_eq!(lease(&sim)["spec"]["holderIdentity"], "go-a");

    // go-a releases; ours takes over at its next attempt, well before the lease would expire.
    go_a.stop().await;
    let released = Instant::now();
    let led = ours.led().await;
    assert!(
        led.saturating_duration_since(released) < LEASE_DURATION / 2,
        "ours waited {:?} after the release: it did not read it",
        led.saturating_duration_since(released)
    );
    assert_eq!(lease(&sim)["spec"]["holderIdentity"], "rust-b");

    // Another client-go elector sees ours leading, and waits.
    let mut go_c = GoElector::start(&bin, &sim, "go-c");
    go_c.until("leader rust-b").await;
    renewals(&sim, 1).await;
    assert_eq!(lease(&sim)["spec"]["holderIdentity"], "rust-b");

    // Ours is cancelled and releases; go-c takes over at its next attempt.
    ours.stop().await;
    let released = Instant::now();
    go_c.until("leading").await;
    assert!(
        released.elapsed() < LEASE_DURATION / 2,
        "go-c waited {:?} after ours released",
        released.elapsed()
    );
    let spec = lease(&sim)["spec"].clone();
    assert_eq!(spec["holderIdentity"], "go-c");
    assert_eq!(spec["leaseTransitions"], 2, "{spec}");
    go_c.stop().await;

    // One holder at a time, a release between each two.
    assert_eq!(
        assert_one_holder_at_a_time(&sim),
        ["go-a", "", "rust-b", "", "go-c", ""]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_for_a_free_lease_ours_and_client_go_never_hold_it_together() {
    let Some(bin) = probe() else { return };
    for round in 0..3 {
        let sim = server().await;
        // Both start at once on a Lease nobody has created: one create wins.
        let mut go = GoElector::start(&bin, &sim, "go-x");
        let mut ours = Ours::start(&sim, "rust-y");
        let first = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                if let Ok(l) = sim.get("leases.coordination.k8s.io", Some(NS), LEASE) {
                    if let Some(h) = l["spec"]["holderIdentity"]
                        .as_str()
                        .filter(|h| !h.is_empty())
                    {
                        return h.to_string();
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("someone takes the lease");
        // The loser waits while the winner renews; then the winner lets go and the loser leads.
        if first == "go-x" {
            go.until("leading").await;
            renewals(&sim, 4).await;
            assert!(!ours.guard.is_valid(), "round {round}: both lead");
            go.stop().await;
            ours.led().await;
            ours.stop().await;
        } else {
            assert_eq!(first, "rust-y");
            ours.led().await;
            go.until("leader rust-y").await;
            renewals(&sim, 4).await;
            ours.stop().await;
            go.until("leading").await;
            go.stop().await;
        }
        let h = assert_one_holder_at_a_time(&sim);
        let held: Vec<&String> = h.iter().filter(|x| !x.is_empty()).collect();
        assert_eq!(held.len(), 2, "round {round}: {h:?}");
        assert_ne!(held[0], held[1], "round {round}: {h:?}");
    }
}
