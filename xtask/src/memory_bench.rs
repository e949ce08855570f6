//! `cargo xtask bench-memory`: the memory a cache of pods takes at sync, this project's informers
//! beside client-go's, each in a process of its own on the peer benchmark's fast server
//! (`benches/peer`, the same bytes for every client), with `metadata.managedFields` kept, dropped
//! by the client, or dropped by the server (`PEER_DROP`). Each client and mode runs `--rounds`
//! times (default 3), round by round, so that a slow moment of the machine weighs on every client
//! alike; the table has the medians of the RSS at sync, that RSS per pod, and its ratio to
//! client-go's protobuf informer (client-go's default for built-in kinds) in the same mode.
//!
//! Arguments: `--pods N` (default 10,000), `--rounds N` (default 3), `--events N` (the watch
//! after the sync, default 1,000: the figures are the sync's), `--clients a,b` (only these of
//! [`CLIENTS`], by their `peer-bench` names). client-go's rows need its probe
//! (`PEER_CLIENT_GO`, or the build `cargo xtask bench` makes); without one they are left out,
//! saying so. Prints the table; docs/benchmarks.md records it by hand, with the command.

use std::collections::BTreeMap;

use crate::{bench, tools};

/// The clients and how each drops managedFields (`PEER_DROP`; empty: kept).
const CLIENTS: &[(&str, &str, &[&str])] = &[
    (
        "go-pod",
        "client-go informer, Pod, protobuf",
        &["", "client", "server"],
    ),
    (
        "go-pod-json",
        "client-go informer, Pod, JSON",
        &["", "client", "server"],
    ),
    (
        "ours-pod",
        "informer, k8s-openapi Pod, JSON",
        &["", "client", "server"],
    ),
    (
        "ours-pod-pb",
        "informer, Pb<Pod>, protobuf",
        &["", "client", "server"],
    ),
    (
        "ours-pod-view",
        "informer, PbView<Pod>, protobuf",
        &["", "client", "server"],
    ),
    (
        "ours-compact",
        "informer, CompactObject, JSON",
        &["", "client", "server"],
    ),
    (
        "ours-compact-pb",
        "informer, CompactObject, protobuf",
        &["", "client", "server"],
    ),
];

/// The client every row is compared with, in the same mode.
const BASELINE: &str = "go-pod";

struct Options {
    pods: usize,
    rounds: usize,
    events: usize,
    /// Only these clients (all when empty).
    clients: Vec<String>,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        pods: 10_000,
        rounds: 3,
        events: 1_000,
        clients: Vec::new(),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut number = |what: &str| {
            args.next()
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{what} needs a positive number"))
        };
        match arg.as_str() {
            "--pods" => o.pods = number("--pods")?,
            "--rounds" => o.rounds = number("--rounds")?,
            "--events" => o.events = number("--events")?,
            "--clients" => {
                let names = args.next().ok_or("--clients needs a list of clients")?;
                o.clients = names.split(',').map(str::to_string).collect();
                if let Some(unknown) = o
                    .clients
                    .iter()
                    .find(|c| !CLIENTS.iter().any(|(name, _, _)| name == c))
                {
                    return Err(format!("--clients: no client `{unknown}`"));
                }
            }
            other => return Err(format!("`bench-memory`: unknown argument `{other}`")),
        }
    }
    Ok(o)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let o = options(args)?;
    let exe = bench::build_peer_bench(&tools::cargo())?;
    let go = bench::go_peer_enabled();
    if !go {
        println!(
            "bench-memory: no client-go probe (PEER_CLIENT_GO): client-go's rows are left out"
        );
    }
    let (pods, events) = (o.pods.to_string(), o.events.to_string());
    let mut runs: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
    for round in 1..=o.rounds {
        for &(client, _, drops) in CLIENTS {
            let picked = o.clients.is_empty() || o.clients.iter().any(|c| c == client);
            if !picked || (client.starts_with("go-") && !go) {
                continue;
            }
            for &drop in drops {
                println!(
                    "bench-memory, {pods} pods, round {round}/{}: {client} {drop}",
                    o.rounds
                );
                let env = [("PEER_CACHED", pods.as_str()), ("PEER_DROP", drop)];
                let result = bench::run_peer_bench(&exe, &[client, &events], 2, &env)?;
                let rss = result["rss_sync_mb"]
                    .as_f64()
                    .ok_or_else(|| format!("{client}: no rss_sync_mb"))?;
                runs.entry((client, drop)).or_default().push(rss);
            }
        }
    }
    println!("\n{}", table(&runs, o.pods));
    Ok(())
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn mode(drop: &str) -> &'static str {
    match drop {
        "client" => "dropped by the client",
        "server" => "dropped by the server",
        _ => "kept",
    }
}

/// The table of medians: RSS at sync, per pod, and against client-go's protobuf informer in the
/// same mode.
fn table(runs: &BTreeMap<(&str, &str), Vec<f64>>, pods: usize) -> String {
    let mut out = String::from(
        "| client | managedFields | RSS at sync (MB) | per pod (KiB) | ÷ client-go protobuf, same mode |\n\
         |---|---|---:|---:|---:|\n",
    );
    for &(client, label, drops) in CLIENTS {
        for &drop in drops {
            let Some(rss) = runs.get(&(client, drop)).map(|r| median(r)) else {
                continue;
            };
            let ratio = runs
                .get(&(BASELINE, drop))
                .map(|b| format!("{:.2}", rss / median(b)))
                .unwrap_or_default();
            let rounds = runs[&(client, drop)]
                .iter()
                .map(|r| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join(", ");
            out.push_str(&format!(
                "| {label} | {} | {rss:.0} ({rounds}) | {:.1} | {ratio} |\n",
                mode(drop),
                rss * 1024.0 / pods as f64,
            ));
        }
    }
    out
}
