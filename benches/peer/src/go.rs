//! client-go's informer as a peer (`go-pod`: a shared informer of `Pod` in protobuf, client-go's
//! default for built-in kinds since v0.32; `go-pod-json`: the same in JSON). Its process is the
//! client-go probe's peer mode (`tests/client-go`, built by its `build.sh`), named by
//! `PEER_CLIENT_GO`; it measures itself as this crate measures its own clients (every thread's
//! CPU and context switches from `/proc/self/task`, `VmRSS` and `VmHWM`, the peak reset at
//! sync) and reports one JSON line. Its informer lists then watches
//! (`KUBE_FEATURE_WatchListClient=false`), or with `PEER_WATCH_LIST=1` streams its initial list in
//! a watch (`KUBE_FEATURE_WatchListClient=true`); with `PEER_KIND=configmaps` it is an informer of
//! ConfigMaps. The probe
//! inherits `PEER_DROP` (a transform strips managedFields; `server` also asks the server not to
//! send them) and `PEER_GO_HEAP=1` (a collection at sync, then its live heap in the result and
//! its types' sizes on stderr). Against a real server (`PEER_KUBECONFIG`) it gets the server's
//! address, CA and the kubeconfig user's bearer token, and counts the updates after "go".

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use shared_informer::reflector::{ClusterConfig, Credentials, ExposeSecret as _};

use super::{cached, kind, real_server, watch_list, Figures, ServerProcess, PROTOBUF_CLIENTS};

/// The client-go clients, as named on the command line.
pub const CLIENTS: [&str; 2] = ["go-pod", "go-pod-json"];

/// Runs client-go's informer against a fresh server process and returns its figures.
pub fn measure(client: &str, events: usize) -> Figures {
    let bin = std::env::var_os("PEER_CLIENT_GO").unwrap_or_else(|| {
        eprintln!("{client}: set PEER_CLIENT_GO to the client-go probe (tests/client-go/build.sh)");
        std::process::exit(2)
    });
    let protobuf = PROTOBUF_CLIENTS.contains(&client);
    // Against a real server (`PEER_KUBECONFIG`): its address, CA and bearer token, read from the
    // kubeconfig as our clients read it; its events already flow, and the probe counts those
    // after "go".
    let real = real_server().map(|(path, context)| {
        let config = ClusterConfig::from_kubeconfig_files(&[path], context.as_deref())
            .expect("the real server's kubeconfig");
        let ca = std::env::temp_dir().join(format!("peer-bench-ca-{}.pem", std::process::id()));
        std::fs::write(
            &ca,
            config.certificate_authority.as_deref().unwrap_or_default(),
        )
        .expect("writing the CA for the probe");
        let token = match &config.credentials {
            Credentials::Token(token) => token.expose_secret().to_string(),
            _ => panic!("the probe needs a bearer token: use the kubeconfig's token context"),
        };
        let url = config.server.as_str().trim_end_matches('/').to_string();
        (url, ca, token)
    });
    let mut server = real
        .is_none()
        .then(|| ServerProcess::start(events, protobuf));
    let (url, ca, token) = match (&real, &server) {
        (Some((url, ca, token)), _) => (url.clone(), Some(ca.clone()), token.clone()),
        (None, Some(server)) => (server.url.clone(), None, String::new()),
        (None, None) => unreachable!("a server or a real one"),
    };
    let workers = std::env::var("PEER_WORKERS").unwrap_or_else(|_| "2".into());
    let started = Instant::now();
    let mut child = Command::new(bin)
        .env("PROBE_MODE", "peer")
        .env("SIM_URL", &url)
        .env("SIM_TOKEN", &token)
        .env("SIM_CA", ca.as_deref().unwrap_or(std::path::Path::new("")))
        .env("PEER_EVENTS", events.to_string())
        .env("PEER_CACHED", cached().to_string())
        .env("PEER_ENCODING", if protobuf { "protobuf" } else { "json" })
        .env("GOMAXPROCS", workers)
        .env("PEER_KIND", kind().plural())
        .env(
            "KUBE_FEATURE_WatchListClient",
            if watch_list() { "true" } else { "false" },
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the client-go probe");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = || {
        lines
            .next()
            .expect("the client-go probe's output")
            .expect("a line")
    };
    assert_eq!(next(), "ready", "the client-go probe did not sync");
    let sync = started.elapsed();
    // Said at once, so that a run that stops later shows how far it came.
    eprintln!(
        "{client}: synced in {:.0} ms; counting {events} events",
        sync.as_secs_f64() * 1e3
    );
    if real.is_some() {
        // As for our clients: the burst of updates written during the list is left out.
        std::thread::sleep(super::settle());
    }
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").expect("tell the probe to start");
    stdin.flush().expect("flush");
    if let Some(server) = &mut server {
        server.release();
    }
    let line = next();
    let result: serde_json::Value = serde_json::from_str(
        line.strip_prefix("result ")
            .unwrap_or_else(|| panic!("not a result: {line}")),
    )
    .expect("the result's JSON");
    drop(stdin);
    let _ = child.wait();
    if let Some(ca) = ca {
        let _ = std::fs::remove_file(ca);
    }
    let f = |k: &str| result[k].as_f64().unwrap_or(0.0);
    let figures = Figures {
        events_per_s: f("events_per_s"),
        // The bench's clock: the probe's start included, as for the others.
        sync_ms: sync.as_secs_f64() * 1e3,
        rss_sync_mb: f("rss_sync_mb"),
        rss_end_mb: f("rss_end_mb"),
        peak_rss_mb: f("list_peak_rss_mb").max(f("watch_peak_rss_mb")),
        list_peak_rss_mb: f("list_peak_rss_mb"),
        watch_peak_rss_mb: f("watch_peak_rss_mb"),
        cpu_us_per_event: f("cpu_us_per_event"),
        voluntary_switches_per_event: f("voluntary_switches_per_event"),
        involuntary_switches_per_event: f("involuntary_switches_per_event"),
        latency_p50_us: result["latency_p50_us"].as_f64(),
        latency_p99_us: result["latency_p99_us"].as_f64(),
        max_backlog: None,
        watch_lists_incomplete: None,
    };
    eprintln!(
        "{client}: sync {:.0} ms, watch {events} events = {:.0} events/s, cpu {:.1} µs/event, {:.2} + {:.2} switches/event, rss at sync {:.0} MB, peak in list {:.0} MB, in watch {:.0} MB, latency p50 {:?} µs, p99 {:?} µs",
        figures.sync_ms,
        figures.events_per_s,
        figures.cpu_us_per_event,
        figures.voluntary_switches_per_event,
        figures.involuntary_switches_per_event,
        figures.rss_sync_mb,
        figures.list_peak_rss_mb,
        figures.watch_peak_rss_mb,
        figures.latency_p50_us,
        figures.latency_p99_us,
    );
    figures
}
