//! Project automation, run as `cargo xtask <command>` (aliased in `.cargo/config.toml`).
//!
//! Commands:
//! - `ci`: everything CI checks, in order of increasing cost: tools, layering, rules, modules, fmt,
//!   clippy, doc (rustdoc warnings denied), tests (doctests and the README's and the guide's
//!   snippets included), then the integration suite on both informer queues.
//! - `layering`: only the crate layering check.
//! - `rules`: only the rule-id check (every rule id and invariant label cited is defined once in
//!   docs/semantics.md) and the issue-number check (no file cites a tracker's issue number); it
//!   reads files and builds nothing.
//! - `modules`: only the module check (no import circle inside a library crate, the simulator or
//!   xtask, no import through a crate's walls, no simulator function over 80 lines); it reads
//!   files and builds nothing.
//! - `demo`: the main job (`tests/demo`), built in release mode; arguments are passed through.
//! - `integration`: the end-to-end scenarios (`tests/integration`) against the simulated API
//!   server, built in release mode; arguments (a name filter, `--list`, `--soak-seconds N`,
//!   `--queue in-order|delta-fifo|both`, `--only informers|others`) are passed through;
//!   `integration --ci` runs CI's integration step alone (both queues' rounds at once).
//! - `bench`: every benchmark in release mode, one table of figures with their same-run baselines,
//!   written into `docs/benchmarks.md` (`--quick` for shorter runs, `--no-write` to print only),
//!   and the peer comparison drawn as `docs/img/peer-bench.svg` (`--chart-only` redraws it from
//!   the recorded table without running anything); `bench --server real` runs instead the peer
//!   comparison against a real kube-apiserver and etcd (sync of 10k and 100k pods, a paced
//!   watch), recorded in a section of its own; `bench --scale` runs instead the scale record
//!   (opt-in, about 45 minutes: 165k pods of 10 KB through a watch-list and through paginated lists,
//!   1M ConfigMaps, each then watched at 1,000 events/s; kube-rs's and client-go's clients beside
//!   ours), recorded in a section of its own with its chart.
//! - `bench-memory`: the memory of a cache of pods at sync, this project's informers beside
//!   client-go's, with `metadata.managedFields` kept, dropped by the client or by the server,
//!   medians of interleaved rounds (`--pods N`, `--rounds N`, `--events N`); prints its table.
//! - `real-apiserver`: a real kube-apiserver and etcd, built from the Go module proxy into
//!   `target/real-apiserver/` (`build`), started on 127.0.0.1 until Enter (`start`), started and
//!   stopped once (`check`), or their build modules rewritten for other versions (`regenerate`);
//!   `kubectl` builds the kubectl probe's kubectl on a machine that has none.
//! - `differential`: the differential corpus (`tests/differential`): `record` the real
//!   kube-apiserver's normalised answers as golden files, or `compare --server real|sim` a
//!   server's answers with them and print the report.
//! - `fuzz`: the coverage-guided fuzz targets of `fuzz/` (cargo-fuzz, installed when missing),
//!   each for `--seconds N` (default 60) from seeds the library's encoders make; target names
//!   pick some. Not part of `ci` (docs/fuzzing.md).
//!
//! Each step prints one line when it starts and one when it ends, with its duration, so a long CI run
//! shows where its time goes.

mod bench;
mod chart;
mod ci;
mod differential;
mod fuzz;
mod integration;
mod issue_numbers;
mod layering;
mod memory_bench;
mod modules;
mod real_apiserver;
mod real_bench;
mod rules;
mod scale_bench;
mod tools;

use std::process::ExitCode;

fn usage() -> &'static str {
    "usage: cargo xtask <command>\n\
     \n\
     commands:\n  \
       ci           install missing tools, then layering, fmt, clippy, doc, all tests and the integration suite on both queues\n  \
       layering     check that each workspace crate depends only on the crate below it\n  \
       rules        check that every rule id and invariant label cited is defined once in docs/semantics.md,\n               \
       and that no file cites a tracker's issue number\n  \
       modules      check that no module of a library crate, the simulator or xtask imports in a circle or\n               \
       through its crate's walls, and that no simulator function is over 80 lines\n  \
       demo         run the demo against the embedded simulated API server\n               \
       (--seconds N, --rate N, --pods N; --real-cluster, --kubeconfig PATH or --context NAME for a real cluster;\n               \
       --server real to start a real kube-apiserver, seed and churn it, and run the demo's informers on it;\n               \
       --replicas N [--widgets N] [--mode label|range] for a sharded controller in N processes, one joining,\n               \
       one leaving; range mode splits the server's shard hash, label mode by default)\n  \
       integration  run the end-to-end scenarios against the simulated API server (about 7 minutes per queue)\n               \
       ([FILTER...] to pick scenarios by name, --list, --soak-seconds N, --queue in-order|delta-fifo|both,\n               \
       --only informers|others; --ci alone for CI's step: both queues at once)\n  \
       bench        run every benchmark in release mode and record the table in docs/benchmarks.md\n               \
       (--quick for shorter runs, --no-write to print only, --chart-only to redraw docs/img/peer-bench.svg;\n               \
       --server real for the peer comparison on a real kube-apiserver alone: --pods a,b, --rounds N, --rate N, --seconds N;\n               \
       --scale for the scale record alone, about 45 minutes: --sets watch-list,list,configmaps, --clients a,b, --pods N,\n               \
       --pod-bytes N, --objects N, --object-bytes N, --rounds N, --rate N, --seconds N, --note TEXT)\n  \
       bench-memory the memory per cached pod of our informers and client-go's, managedFields kept or dropped\n               \
       (--pods N, default 10000; --rounds N, default 3; --events N, default 1000; --clients a,b)\n  \
       real-apiserver  build kube-apiserver and etcd from the Go module proxy (cached under target/),\n               \
       or `start` them on 127.0.0.1, `check` that they start and stop, `regenerate` their build modules,\n               \
       `kubectl` to build kubectl 1.33 for the kubectl probe on a machine without one\n  \
       differential  hold the simulator to kube-apiserver: `record` the golden answers from a real server,\n               \
       or `compare --server real|sim` a server's answers with them ([GROUP...] to pick corpus groups)\n  \
       fuzz         run the fuzz targets of fuzz/ with cargo-fuzz, installing it when missing\n               \
       ([TARGET...] to pick some, --seconds N per target, 60 by default)\n"
}

/// Builds and runs the demo in release mode, passing `args` through; `--server real` runs it on
/// a real kube-apiserver instead ([`real_apiserver::demo`]).
fn demo(args: &[String]) -> Result<(), String> {
    let mut args = args.to_vec();
    let real = match args.iter().position(|a| a == "--server") {
        Some(at) => {
            let kind = args
                .get(at + 1)
                .cloned()
                .ok_or("--server needs a value: sim or real")?;
            args.drain(at..at + 2);
            match kind.as_str() {
                "sim" => false,
                "real" => true,
                other => return Err(format!("--server {other:?}: sim or real")),
            }
        }
        None => false,
    };
    println!("building the demo in release mode (the first build takes a few minutes)");
    tools::run(
        &tools::cargo(),
        &[
            "build",
            "--quiet",
            "--release",
            "--package",
            "informer-demo",
        ],
    )?;
    let binary = tools::target_dir().join("release").join("informer-demo");
    if real {
        return real_apiserver::demo(&binary, &args);
    }
    let status = std::process::Command::new(&binary)
        .args(&args)
        .current_dir(tools::workspace_root())
        .status()
        .map_err(|e| format!("could not start {}: {e}", binary.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the demo exited with {status}"))
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci::run(&args[1..]),
        Some("layering") => layering::run(),
        Some("rules") => rules::run(),
        Some("modules") => modules::run(),
        Some("demo") => demo(&args[1..]),
        Some("integration") => integration::run(&args[1..]),
        Some("bench") if scale_bench::asked(&args[1..]) => scale_bench::run_args(&args[1..]),
        Some("bench") if real_bench::asked(&args[1..]) => real_bench::run_args(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        Some("bench-memory") => memory_bench::run(&args[1..]),
        Some("fuzz") => fuzz::run(&args[1..]),
        Some("real-apiserver") => real_apiserver::run(&args[1..]),
        Some("differential") => differential::run(&args[1..]),
        Some("-h" | "--help" | "help") | None => {
            print!("{}", usage());
            return ExitCode::SUCCESS;
        }
        Some(other) => Err(format!("unknown command `{other}`\n\n{}", usage())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: error: {message}");
            ExitCode::FAILURE
        }
    }
}
