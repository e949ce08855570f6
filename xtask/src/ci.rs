//! `cargo xtask ci`: the whole CI job, as `.ci/run` and the README run it.
//!
//! Steps, in order of increasing cost, stopping at the first failure: report the free disk (a
//! warning when a clean run may not fit); install missing tools;
//! layering; `cargo fmt --check`; clippy with `-D warnings`; `cargo doc --workspace --no-deps
//! --all-features` with rustdoc warnings denied (broken or private intra-doc links, bad code
//! block attributes); every test with `--all-features`, doctests included (the Rust
//! snippets of the README and of docs/guide.md run as doctests of `controller`); then the integration suite in release mode, with
//! every scenario that runs informers on both queues (the two rounds at once); last, a real
//! kube-apiserver and etcd built from the Go module proxy, and the portable scenarios on them.

use crate::{layering, tools};

/// The Kubernetes version k8s-openapi is built for by `cargo doc`. Tests get one from the
/// dev-dependencies' `latest` feature (v1_37 in k8s-openapi 0.29), but `cargo doc` builds no
/// dev-dependency, so k8s-openapi's build script is told through `K8S_OPENAPI_ENABLED_VERSION`, as
/// it suggests for `cargo doc`. Keep it among the versions the k8s-openapi in Cargo.lock supports.
const K8S_OPENAPI_VERSION_FOR_DOCS: &str = "1.37";

/// Disk a clean run takes, about: the debug build of every test binary (4.5 GB), the release
/// build of the integration suite (1.3 GB), docs and the python probe's environment.
const CI_DISK_NEEDED_BYTES: u64 = 7 << 30;

/// Says, before anything is built, how much disk the target directory's filesystem has, and warns
/// when a run may not fit: a full disk otherwise shows as a linker's or rustc's I/O error minutes
/// into the run. Only a warning: what is free moves with the other users of the disk, and the
/// estimate is rough.
fn disk_check() -> Result<(), String> {
    let target = tools::target_dir();
    let probe = if target.exists() {
        target
    } else {
        tools::workspace_root()
    };
    let gib = |bytes: u64| bytes as f64 / f64::from(1u32 << 30);
    match tools::free_bytes(&probe) {
        Some(free) if free < CI_DISK_NEEDED_BYTES => println!(
            "warning: {:.1} GiB free on the filesystem of {}; a clean CI run builds about \
             {:.0} GiB there, and may fail with \"No space left on device\"",
            gib(free),
            probe.display(),
            gib(CI_DISK_NEEDED_BYTES)
        ),
        Some(free) => println!(
            "{:.1} GiB free on the filesystem of {}",
            gib(free),
            probe.display()
        ),
        None => println!("could not tell the free disk space (`df -Pk` failed)"),
    }
    Ok(())
}

/// Runs every CI step in order, stopping at the first failure.
pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(arg) = args.first() {
        return Err(format!("`ci` takes no arguments (got `{arg}`)"));
    }
    let cargo = tools::cargo();
    // A CI run starts from a clean checkout and builds once: incremental caches would only take
    // disk (about 5 GB for the debug build), so they are off for every cargo command below.
    // Set before any thread is started: xtask is single-threaded here.
    std::env::set_var("CARGO_INCREMENTAL", "0");
    tools::step("disk", disk_check)?;
    tools::step("tools", tools::ensure_tools)?;
    tools::step("layering", layering::run)?;
    tools::step("rules", crate::rules::run)?;
    tools::step("modules", crate::modules::run)?;
    tools::step("fmt", || {
        tools::run(&cargo, &["fmt", "--all", "--", "--check"])
    })?;
    tools::step("clippy", || {
        tools::run(
            &cargo,
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        )
    })?;
    // Every intra-doc link resolving, no link to a private item: rustdoc warnings are errors
    // here. RUSTDOCFLAGS is set for this command only, not for the other steps (the test step
    // runs rustdoc too, for the doctests).
    tools::step("doc", || {
        tools::run_with_env(
            &cargo,
            &["doc", "--workspace", "--no-deps", "--all-features"],
            &[
                ("RUSTDOCFLAGS", "-D warnings"),
                ("K8S_OPENAPI_ENABLED_VERSION", K8S_OPENAPI_VERSION_FOR_DOCS),
            ],
        )
    })?;
    // --all-features: the k8s-openapi and prometheus code paths are tested too.
    tools::step("tests", || {
        tools::run(&cargo, &["test", "--workspace", "--all-features"])
    })?;
    // The simulator's client-go test (protobuf, its informer listing or streaming, faults) on the
    // probe `tools` built from Debian's client-go 0.32; it skipped above, with no probe named.
    // `--workspace`, as above, so that the test binary the tests step built is the one run.
    // The leader-election test against client-go stays a run by hand with a current client-go:
    // 0.32's elector, cancelled while a renewal is in flight, releases with its stale copy of the
    // Lease, gets a conflict, and leaves the lease held (docs/simulator.md).
    tools::step("client-go", || {
        let probe = tools::client_go_probe();
        if !probe.is_file() {
            println!("SKIPPED: no client-go probe (the tools step said why)");
            return Ok(());
        }
        let probe = probe.to_string_lossy();
        tools::run_with_env(
            &cargo,
            &[
                "test",
                "--workspace",
                "--all-features",
                "--test",
                "client_go",
            ],
            &[("SIM_CLIENT_GO", &probe)],
        )
    })?;
    // End to end, in release mode: every scenario of tests/integration that runs informers on
    // the in-order queue and on the DeltaFifo (every informer test runs on both queues), the two
    // rounds at once in processes of their own; then leader election and sharding, which run no
    // informer, once. The soak runs 90 s on each queue (the default is 120 s): a leak of 1 KiB
    // per event still grows the fitted line by about 90 MiB over its last 60 s, against a limit
    // of about 60 MiB.
    tools::step("integration", crate::integration::run_ci)?;
    // The judge: a real kube-apiserver 1.36 and etcd 3.6, built from the Go module proxy into
    // target/real-apiserver (cached by version; Go's own caches make a rebuild on a machine that
    // built them once a matter of a minute), started and stopped once, then every portable
    // scenario on it, on both queues.
    // Coordinated leader election is judged by kube-apiserver's own coordinator, the event
    // recorder's repeated and combined Events by what the server stores, and the python
    // client's probe runs on it as on the simulator: those tests skip in the tests step, where
    // the binaries may not be built yet, and run here.
    tools::step("real-apiserver", || {
        crate::real_apiserver::check()?;
        crate::integration::run_real_ci()?;
        tools::run_with_env(
            &cargo,
            &[
                "test",
                "--workspace",
                "--all-features",
                "--test",
                "lease_candidate_real",
                "--test",
                "python_probe_real",
                "--test",
                "test_server",
                "--test",
                "events_server",
                // Range mode's replicas split by the server's shard selector.
                "--test",
                "range_mode",
                // The kubectl probe's steps on the real server (and again, in 20 s, on the
                // simulator, whose run the tests step made already).
                "--test",
                "kubectl_probe",
            ],
            &[("REAL_APISERVER", "1")],
        )
    })?;
    println!("ci: all steps passed");
    Ok(())
}
