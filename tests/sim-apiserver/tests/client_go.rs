//! client-go itself against the simulator, speaking protobuf as Kubernetes' own components do:
//! the probe in `tests/client-go` (a Go program) creates, updates, gets, lists and deletes
//! built-in kinds with protobuf bodies and answers, reads a scale subresource and a typed
//! NotFound, lists and watches pods' metadata (`PartialObjectMetadata`), and runs a shared
//! informer through its list and watch, once listing then watching and once streaming the
//! initial list in a watch (`WatchListClient`), over HTTP/2 and HTTP/1.1, then again with
//! faults (a 410 on the first watch, a watch cut inside a frame, frames split into 7-byte
//! chunks). Each run then checks what client-go does in its default encodings: discovery, a
//! CustomResourceDefinition and its resources through the dynamic client and a dynamic
//! informer, a strategic merge patch, server-side apply with a conflict, and the event recorder.
//!
//! The probe is built by `tests/client-go/build.sh`, which needs client-go's source: a Go
//! module proxy, or a GOPATH holding it. This test runs the binary `SIM_CLIENT_GO` names and
//! skips, saying so, when it is not set. `cargo xtask ci` builds the probe from Debian 13's
//! client-go packages and runs this test on it in its `client-go` step (docs/simulator.md).

use std::path::PathBuf;
use std::time::Duration;

use sim_apiserver::{apply_fault_spec, SimServer};
use tokio::process::Command;

const TOKEN: &str = "client-go-probe-token";

/// The probe `SIM_CLIENT_GO` names; `None`, having said the test skips, when it is not set.
fn probe() -> Option<PathBuf> {
    let Some(p) = std::env::var_os("SIM_CLIENT_GO") else {
        eprintln!(
            "SKIPPED: SIM_CLIENT_GO is not set (build the probe with tests/client-go/build.sh)"
        );
        return None;
    };
    let p = PathBuf::from(p);
    assert!(
        p.exists(),
        "SIM_CLIENT_GO names {}, which does not exist",
        p.display()
    );
    Some(p)
}

async fn tls_server(http2: bool) -> SimServer {
    SimServer::builder()
        .tls(true)
        .http2(http2)
        .token(TOKEN)
        .start()
        .await
        .expect("the simulator starts")
}

/// Runs the probe in namespace `ns` and returns its report; fails unless every check passed.
async fn run(bin: &PathBuf, sim: &SimServer, ns: &str, watch_list: bool, faults: bool) -> String {
    let mut cmd = Command::new(bin);
    cmd.env("SIM_URL", sim.url())
        .env("SIM_TOKEN", TOKEN)
        .env("SIM_CA", sim.ca_path().expect("a TLS server has a CA"))
        .env("PROBE_NAMESPACE", ns)
        .env("PROBE_VERBOSE", "1")
        .env("KUBE_FEATURE_WatchListClient", watch_list.to_string())
        .kill_on_drop(true);
    if faults {
        cmd.env("PROBE_FAULTS", "1");
    }
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("the probe finishes within two minutes")
        .expect("the probe runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("--- client-go probe, namespace {ns}:\n{report}");
    assert!(out.status.success(), "the probe failed:\n{report}");
    let summary = report
        .lines()
        .find(|l| l.ends_with("checks pass"))
        .expect("a summary line");
    let (passed, total) = summary
        .trim_end_matches(" checks pass")
        .split_once(" of ")
        .expect("N of M");
    assert_eq!(passed, total, "{summary}");
    report
}

/// What the probe leaves behind in namespace `ns`, read from the simulator's own store.
fn assert_left_behind(sim: &SimServer, ns: &str) {
    assert!(sim.get("namespaces", None, ns).is_ok(), "namespace {ns}");
    assert!(sim.get("configmaps", Some(ns), "probe-cm").is_err());
    let d = sim
        .get("deployments.apps", Some(ns), "probe-deploy")
        .expect("the deployment");
    assert_eq!(d["spec"]["replicas"], 2);
    let mut pods: Vec<String> = sim
        .list("pods", Some(ns))
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    pods.sort();
    assert_eq!(
        pods,
        ["after-1", "before-0", "before-2", "late-0", "late-1", "meta-0"]
    );
    let touched = sim.get("pods", Some(ns), "before-0").unwrap();
    assert_eq!(touched["metadata"]["labels"]["touched"], "yes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_go_works_in_protobuf_listing_or_streaming_its_informers_list() {
    let Some(bin) = probe() else { return };
    // HTTP/2, as client-go speaks over TLS by default, then HTTP/1.1 (chunked watch frames).
    for (sim, http) in [
        (tls_server(true).await, "h2"),
        (tls_server(false).await, "http1"),
    ] {
        for (ns, watch_list) in [("list-then-watch", false), ("watch-list", true)] {
            let ns = format!("{http}-{ns}");
            let ns = ns.as_str();
            let before = sim.counters().protobuf_responses;
            let report = run(&bin, &sim, ns, watch_list, false).await;
            assert_left_behind(&sim, ns);
            // The server's count of protobuf answers agrees with what the probe saw arrive.
            let seen = report
                .lines()
                .filter_map(|l| l.split_once(" answered "))
                .filter(|(_, answer)| answer.contains("\"application/vnd.kubernetes.protobuf"))
                .count();
            let answered = sim.counters().protobuf_responses - before;
            assert!(seen >= 15, "{seen} protobuf answers seen");
            assert_eq!(answered as usize, seen, "{report}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_go_recovers_from_an_expired_watch_and_a_frame_cut_in_half() {
    let Some(bin) = probe() else { return };
    for (ns, watch_list) in [("faults-list", false), ("faults-watch-list", true)] {
        let sim = tls_server(true).await;
        for spec in ["rechunk=7", "watch-expired:1", "watch-reset-mid-chunk:1"] {
            apply_fault_spec(sim.faults(), spec).unwrap();
        }
        let report = run(&bin, &sim, ns, watch_list, true).await;
        assert_left_behind(&sim, ns);
        // Both faults were met, and survived (the checks above): the 410, and the cut frame.
        assert!(
            report.contains("answered 410"),
            "the expired watch was not met:\n{report}"
        );
        assert_eq!(
            sim.faults().pending_resets(),
            0,
            "the watch was never cut:\n{report}"
        );
    }
}
