//! Runs the simulated kube-apiserver by hand.
//!
//! Usage: `sim-apiserver [--tls] [--token TOKEN] [--user NAME:TOKEN[:GROUP,...]]...
//! [--users-file PATH] [--rule SPEC]... [--rules-file PATH] [--kubeconfig PATH] [--http1] [--pods N]
//! [--churn RATE] [--gzip] [--gzip-min-bytes BYTES] [--no-protobuf] [--fault SPEC]... [--compact-every SECS]
//! [--stall-every SECS] [--reset-connections-every SECS]`
//!
//! Prints the URL (and for TLS the CA path and token; with `--kubeconfig`, the kubeconfig file
//! it wrote for kubectl or a controller to use), then one `fault: ...` line per applied
//! fault, then serves until Ctrl-C. `--fault` (repeatable) makes the server misbehave, so any
//! client can be pointed at it; SPEC is one of `sim_apiserver::FAULT_SPECS`, e.g.
//! `list-status-200`, `list-html:3`, `watch-silent`, `fail-watch=503:2`, `rechunk=7`.

use std::process::ExitCode;
use std::time::Duration;

use sim_apiserver::authz::{parse_rule, parse_rules_file};
use sim_apiserver::users::parse_users_file;
use sim_apiserver::{
    apply_fault_spec, ChurnConfig, Faults, SimServer, SimServerBuilder, User,
    DEFAULT_GZIP_MIN_BYTES, FAULT_SPECS,
};

fn usage() -> String {
    format!(
        "sim-apiserver [--tls] [--token TOKEN] [--user NAME:TOKEN[:GROUP,...]]... [--users-file PATH]
              [--rule SPEC]... [--rules-file PATH] [--kubeconfig PATH] [--http1] [--pods N]
              [--churn OPS_PER_SEC] [--gzip] [--gzip-min-bytes BYTES] [--no-protobuf] [--fault SPEC]... [--compact-every SECS]
              [--stall-every SECS] [--reset-connections-every SECS]

  --token TOKEN                   require a bearer token; TOKEN is user `admin`, in
                                  system:masters (may do anything)
  --user NAME:TOKEN[:GROUP,...]   a user with a bearer token and groups (repeatable);
                                  group system:masters may do anything, others what
                                  --rule grants; once a user is given, requests without
                                  credentials are 401. Tokens are never printed.
  --users-file PATH               users from a CSV file as kube-apiserver's
                                  --token-auth-file: token,user,uid[,\"group1,group2\"]
  --rule SPEC                     grant a rule (repeatable), SPEC being `;`-separated
                                  key=value pairs: user=NAME or group=NAME, verbs=get,list,
                                  resources=pods,pods/status, and optionally
                                  apiGroups=core,apps (default *), namespaces=a,b
                                  (default: everywhere), names=x,y; e.g.
                                  \"user=bob;verbs=get,list,watch;resources=pods;namespaces=default\"
                                  Denied requests are 403 as kube-apiserver words them.
  --rules-file PATH               rules from a file, one SPEC a line (# comments)
  --kubeconfig PATH               write a kubeconfig for this server to PATH (context `sim`,
                                  namespace `default`), removed again on Ctrl-C; point
                                  KUBECONFIG at it to use kubectl or your own controller
  --gzip                          gzip lists, gets and errors of at least --gzip-min-bytes
                                  for requests with Accept-Encoding: gzip, as kube-apiserver
                                  does (never watches)
  --gzip-min-bytes BYTES          the smallest body --gzip compresses (default {})
  --no-protobuf                   speak JSON only, as an aggregated API server: no
                                  application/vnd.kubernetes.protobuf answers or bodies
  --fault SPEC                    make the server misbehave (repeatable); SPEC is one of
                                  {}
                                  `:N` = only the next N requests (or watch events for the
                                  watch-*-line/-event/-chunk one-shots); without it, every one.
                                  watch-expired answers watches 410 Expired.
  --compact-every SECS            compact the store every SECS seconds
  --stall-every SECS              stall all watch streams for 2 s after every SECS seconds
                                  of flow
  --reset-connections-every SECS  every SECS seconds, cut the next watch event in half and
                                  abort its connection",
        DEFAULT_GZIP_MIN_BYTES,
        FAULT_SPECS.join("\n                                  ")
    )
}

fn seconds(flag: &str, v: Option<String>) -> Result<Duration, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value (seconds)"))?;
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!("{flag}: {v:?} is not a positive number of seconds")),
    }
}

/// Runs `tick` after every `period` of quiet, measured from the end of the previous tick (so
/// a 2 s stall every 1 s still leaves 1 s of flow between stalls), until the process ends.
fn every<F, Fut>(period: Duration, faults: &Faults, tick: F)
where
    F: Fn(Faults) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let faults = faults.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(period).await;
            tick(faults.clone()).await;
        }
    });
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sim-apiserver: {e}");
            ExitCode::from(2)
        }
    }
}

/// The command line, parsed, but for the server's builder.
struct Options {
    pods: usize,
    churn: f64,
    fault_specs: Vec<String>,
    compact_every: Option<Duration>,
    stall_every: Option<Duration>,
    reset_every: Option<Duration>,
    kubeconfig: Option<std::path::PathBuf>,
    /// The names of the users given, to announce.
    users: Vec<String>,
}

type Error = Box<dyn std::error::Error>;

async fn run() -> Result<(), Error> {
    let Some((builder, o)) = parse_args(std::env::args().skip(1))? else {
        println!("{}", usage());
        return Ok(());
    };
    // Install the SIGINT handler before announcing the URL, so an early Ctrl-C still stops
    // the server cleanly (and removes the CA file).
    #[cfg(unix)]
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let sim = builder.start().await?;
    for i in 0..o.pods {
        sim.create(
            "pods",
            Some("default"),
            serde_json::json!({"metadata": {"name": format!("pod-{i}"), "labels": {"app": "demo"}},
                               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        )?;
    }
    // Apply every fault before announcing anything, so a bad spec fails before the URL line.
    let mut applied = Vec::new();
    for spec in &o.fault_specs {
        applied.push(apply_fault_spec(sim.faults(), spec)?);
    }
    announce(&sim, &o.users, o.kubeconfig.as_deref())?;
    for a in &applied {
        println!("fault: {a}");
    }
    start_periodic_faults(&sim, &o);
    let _churn = (o.churn > 0.0).then(|| {
        sim.churn(ChurnConfig {
            rate_per_sec: o.churn,
            max_ops: None,
            ..ChurnConfig::default()
        })
    });
    #[cfg(unix)]
    interrupt.recv().await;
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await?;
    if let Some(path) = &o.kubeconfig {
        // It names a CA file that is gone once the server stops.
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Parses the command line into the server's builder and the rest; `None` for `--help`.
fn parse_args(
    mut args: impl Iterator<Item = String>,
) -> Result<Option<(SimServerBuilder, Options)>, Error> {
    let mut b = SimServer::builder();
    let mut o = Options {
        pods: 0,
        churn: 0.0,
        fault_specs: Vec::new(),
        compact_every: None,
        stall_every: None,
        reset_every: None,
        kubeconfig: None,
        users: Vec::new(),
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tls" => b = b.tls(true),
            "--http1" => b = b.http2(false),
            "--gzip" => b = b.gzip_responses(true),
            "--no-protobuf" => b = b.protobuf(false),
            "--gzip-min-bytes" => {
                let v = args
                    .next()
                    .ok_or("--gzip-min-bytes needs a value (bytes)")?;
                let n = v
                    .parse()
                    .map_err(|_| format!("--gzip-min-bytes: {v:?} is not a number of bytes"))?;
                b = b.gzip_min_bytes(n);
            }
            "--token" => b = b.token(args.next().ok_or("--token needs a value")?),
            "--user" | "--users-file" | "--rule" | "--rules-file" => {
                b = access_flag(&a, &mut args, b, &mut o.users)?
            }
            "--kubeconfig" => {
                o.kubeconfig = Some(args.next().ok_or("--kubeconfig needs a PATH")?.into())
            }
            "--pods" => o.pods = args.next().ok_or("--pods needs a value")?.parse()?,
            "--churn" => o.churn = args.next().ok_or("--churn needs a value")?.parse()?,
            "--fault" => o.fault_specs.push(args.next().ok_or_else(|| {
                format!("--fault needs a SPEC, one of: {}", FAULT_SPECS.join(", "))
            })?),
            "--compact-every" => o.compact_every = Some(seconds(&a, args.next())?),
            "--stall-every" => o.stall_every = Some(seconds(&a, args.next())?),
            "--reset-connections-every" => o.reset_every = Some(seconds(&a, args.next())?),
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(Some((b, o)))
}

/// The flags that give users and their rules (`--user`, `--users-file`, `--rule`,
/// `--rules-file`), applied to `b`; the users' names are added to `users`.
fn access_flag(
    flag: &str,
    args: &mut impl Iterator<Item = String>,
    mut b: SimServerBuilder,
    users: &mut Vec<String>,
) -> Result<SimServerBuilder, Error> {
    match flag {
        "--user" => {
            let spec = args.next().ok_or("--user needs NAME:TOKEN[:GROUP,...]")?;
            let u = User::parse_flag(&spec).map_err(|e| format!("--user: {e}"))?;
            users.push(u.name().to_string());
            b = b.user(u);
        }
        "--users-file" => {
            let path = args.next().ok_or("--users-file needs a PATH")?;
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("--users-file: cannot read {path}: {e}"))?;
            for u in parse_users_file(&text).map_err(|e| format!("--users-file {path}: {e}"))? {
                users.push(u.name().to_string());
                b = b.user(u);
            }
        }
        "--rule" => {
            let spec = args.next().ok_or("--rule needs a SPEC")?;
            let (subject, rule) = parse_rule(&spec).map_err(|e| format!("--rule: {e}"))?;
            b = b.allow(subject, rule);
        }
        _ => {
            let path = args.next().ok_or("--rules-file needs a PATH")?;
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("--rules-file: cannot read {path}: {e}"))?;
            for (subject, rule) in
                parse_rules_file(&text).map_err(|e| format!("--rules-file {path}: {e}"))?
            {
                b = b.allow(subject, rule);
            }
        }
    }
    Ok(b)
}

/// Prints how to reach the server: its URL, CA and token, the users, and the kubeconfig it
/// writes to `kubeconfig`, if asked.
fn announce(
    sim: &SimServer,
    users: &[String],
    kubeconfig: Option<&std::path::Path>,
) -> Result<(), Error> {
    println!("url: {}", sim.url());
    if let Some(p) = sim.ca_path() {
        println!("ca: {}", p.display());
    }
    if let Some(t) = sim.token() {
        println!("token: {t}");
    }
    for u in users {
        println!("user: {u}");
    }
    if let Some(path) = kubeconfig {
        std::fs::write(path, sim.kubeconfig())
            .map_err(|e| format!("--kubeconfig: cannot write {}: {e}", path.display()))?;
        println!("kubeconfig: {}", path.display());
    }
    Ok(())
}

/// Starts the periodic faults asked for (compaction, stalls, connection resets), announcing
/// each.
fn start_periodic_faults(sim: &SimServer, o: &Options) {
    if let Some(p) = o.compact_every {
        println!("fault: compact every {}s", p.as_secs_f64());
        every(p, sim.faults(), |f| async move {
            f.compact();
        });
    }
    if let Some(p) = o.stall_every {
        println!(
            "fault: stall watches for 2s after every {}s",
            p.as_secs_f64()
        );
        every(p, sim.faults(), |f| async move {
            f.stall();
            tokio::time::sleep(Duration::from_secs(2)).await;
            f.unstall();
        });
    }
    if let Some(p) = o.reset_every {
        println!("fault: reset a watch connection every {}s", p.as_secs_f64());
        every(p, sim.faults(), |f| async move {
            // Arm at most one reset at a time, so quiet periods do not pile them up.
            if f.pending_resets() == 0 {
                f.reset_mid_chunk();
            }
        });
    }
}
