//! `integration-suite le-replica`: one replica of the `leader-election-processes` scenario, a
//! process of its own, so that the scenario can kill it (SIGKILL: no release, no last request)
//! and freeze it (SIGSTOP, then SIGCONT) as a node or a kernel would.
//!
//! It competes for one Lease with client-go's timings scaled down, and while it leads, writes a
//! ConfigMap every 100 ms (`data.writer` its identity, `data.seq` a counter) through an `Api` its
//! `LeaseGuard` protects. It prints `leading <unix-µs>` when a term starts, `wrote <unix-µs>`
//! after each write the server accepted and `stopped <unix-µs>` when a term ends, on stdout,
//! with the system clock the scenario's process shares; `stop` on stdin (or its end) ends the
//! current term, releasing the Lease, and the process.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use controller::leader_election::ApiLeaseLock;
use controller::{LeaderElectionConfig, LeaderElector};
use serde_json::json;
use tokio::io::AsyncBufReadExt as _;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::DynamicObject;
use workqueue::shared_informer::reflector::{
    Api, Client, ClusterConfig, Patch, PatchOptions, Resource,
};

/// The Lease's timings: client-go's 15 s / 10 s / 2 s scaled down five-fold.
pub const LEASE: Duration = Duration::from_secs(3);
/// How long a leader keeps trying to renew before it steps down.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(2);
/// How often a standby tries to acquire, and a leader to renew.
pub const RETRY: Duration = Duration::from_millis(500);

/// What the replica was started with.
struct Args {
    identity: String,
    namespace: String,
    lock: String,
    writes: String,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut it = args.iter();
    let mut value = |flag: &str| {
        it.next()
            .filter(|f| *f == flag)
            .and_then(|_| it.next())
            .cloned()
            .ok_or_else(|| format!("expected {flag} VALUE"))
    };
    Ok(Args {
        identity: value("--identity")?,
        namespace: value("--namespace")?,
        lock: value("--lock")?,
        writes: value("--writes")?,
    })
}

/// The arguments of a replica named `identity`.
pub fn args(identity: &str, namespace: &str, lock: &str, writes: &str) -> Vec<String> {
    [
        "le-replica",
        "--identity",
        identity,
        "--namespace",
        namespace,
        "--lock",
        lock,
        "--writes",
        writes,
    ]
    .map(str::to_string)
    .to_vec()
}

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros()
}

fn say(what: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{what} {}", now_us());
    let _ = out.flush();
}

/// The replica's main: `args` after `le-replica`; the cluster from `KUBECONFIG`.
pub fn main(args: &[String]) -> ExitCode {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("le-replica: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("le-replica: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("le-replica: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let mut config = ClusterConfig::from_kubeconfig(None).map_err(|e| e.to_string())?;
    // A request the network holds is abandoned well before the guard's margin runs out.
    config.request_timeout = Some(Duration::from_millis(800));
    let client = Client::new(&config).map_err(|e| e.to_string())?;
    let writes: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        Resource::namespaced("", "v1", "configmaps"),
        &args.namespace,
    );
    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.trim() == "stop" {
                    break;
                }
            }
            stop.cancel();
        }
    });
    while !stop.is_cancelled() {
        let mut elector_config = LeaderElectionConfig::new(&args.lock, &args.identity);
        elector_config.lease_duration = LEASE;
        elector_config.renew_deadline = RENEW_DEADLINE;
        elector_config.retry_period = RETRY;
        elector_config.release_on_cancel = true;
        elector_config.guard_margin = Some(Duration::from_secs(1));
        let lock = ApiLeaseLock::new(client.clone(), &args.namespace, &args.lock, &args.identity);
        let elector =
            LeaderElector::new(elector_config, lock).map_err(|e| format!("election: {e}"))?;
        let (writes, identity, target) =
            (writes.clone(), args.identity.clone(), args.writes.clone());
        elector
            .run_leading(stop.child_token(), move |leader, guard| async move {
                say("leading");
                // Each write checks the guard right before it is sent, from the clock: lapsed
                // after a freeze, whatever the process believed before it.
                let writes = guard.protect(writes);
                let mut seq = 0u64;
                let mut tick = tokio::time::interval(Duration::from_millis(100));
                loop {
                    tokio::select! {
                        _ = leader.cancelled() => break,
                        _ = tick.tick() => {}
                    }
                    seq += 1;
                    let body = json!({"data": {"writer": identity, "seq": seq.to_string()}});
                    if writes
                        .patch(&target, &PatchOptions::default(), &Patch::Merge(body))
                        .await
                        .is_ok()
                    {
                        say("wrote");
                    }
                }
                say("stopped");
            })
            .await;
        // Compete again a little later, as a restarted pod would.
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.cancelled() => {}
        }
    }
    Ok(())
}
