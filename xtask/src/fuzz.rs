//! `cargo xtask fuzz`: the coverage-guided fuzz targets of `fuzz/` (libFuzzer through
//! cargo-fuzz), each run for a while from seeds the library's own encoders make.
//!
//! Not part of `ci`: building the targets with coverage instrumentation takes about 12 minutes
//! on 2 cores, and a fuzzer's findings come in hours, not in a CI step. CI runs the property
//! tests that push arbitrary and damaged bytes through the same decoders; an input a fuzzer
//! finds failing becomes a test in the crate that owns the decoder (docs/fuzzing.md).
//!
//! Steps: install cargo-fuzz when `cargo fuzz` does not answer (idempotent), write the seeds
//! (`fuzz/examples/seeds.rs` into `fuzz/corpus/<target>/`), then run each target for the time
//! asked. The targets build with `-s none` (no sanitizer): the stable toolchain has none to
//! give, and the library's crates forbid `unsafe`, so a sanitizer would have nothing of theirs
//! to watch. A failing input is saved under
//! `fuzz/artifacts/<target>/` and ends the run with cargo-fuzz's message, which says how to
//! reproduce it.

use crate::tools;

/// Every target, in the order run: what servers send, then what users write.
pub const TARGETS: [&str; 5] = [
    "watch_json",
    "watch_protobuf",
    "bodies",
    "texts",
    "kubeconfig",
];

/// The cargo-fuzz release installed when none is found.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// Seconds per target unless `--seconds` says otherwise.
const DEFAULT_SECONDS: u64 = 60;

/// The arguments: `--seconds N` (per target) and target names (all when none).
#[derive(Debug, PartialEq)]
struct Args {
    seconds: u64,
    targets: Vec<String>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut seconds = DEFAULT_SECONDS;
    let mut targets = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--seconds" => {
                let value = rest.next().ok_or("--seconds needs a number")?;
                seconds = value
                    .parse()
                    .ok()
                    .filter(|&s| s > 0)
                    .ok_or_else(|| format!("--seconds: `{value}` is not a positive number"))?;
            }
            name if TARGETS.contains(&name) => targets.push(name.to_string()),
            other => {
                return Err(format!(
                    "unknown fuzz target or option `{other}` (targets: {})",
                    TARGETS.join(", ")
                ))
            }
        }
    }
    if targets.is_empty() {
        targets = TARGETS.iter().map(|t| t.to_string()).collect();
    }
    Ok(Args { seconds, targets })
}

/// Runs `cargo <args>` in `fuzz/`, inheriting stdio; fails on a non-zero exit.
fn cargo_in_fuzz(args: &[&str]) -> Result<(), String> {
    tools::run_in(
        &tools::workspace_root().join("fuzz"),
        &tools::cargo(),
        args,
        &[],
    )
}

/// `cargo xtask fuzz [--seconds N] [TARGET...]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    tools::step("cargo-fuzz", || {
        if tools::succeeds(&tools::cargo(), &["fuzz", "--version"]) {
            return Ok(());
        }
        println!("cargo-fuzz not found: installing {CARGO_FUZZ_VERSION} from crates.io");
        tools::run(
            &tools::cargo(),
            &[
                "install",
                "--locked",
                "--version",
                CARGO_FUZZ_VERSION,
                "cargo-fuzz",
            ],
        )
    })?;
    tools::step("seeds", || {
        cargo_in_fuzz(&["run", "--quiet", "--release", "--example", "seeds"])
    })?;
    tools::step(
        "build the targets (about 12 minutes the first time)",
        || cargo_in_fuzz(&["fuzz", "build", "-s", "none", "-O"]),
    )?;
    let total = format!("-max_total_time={}", args.seconds);
    for target in &args.targets {
        tools::step(&format!("fuzz {target} for {} s", args.seconds), || {
            let mut command = vec![
                "fuzz",
                "run",
                "-s",
                "none",
                "-O",
                target.as_str(),
                "--",
                total.as_str(),
                "-max_len=8192",
                "-rss_limit_mb=4096",
                "-print_final_stats=1",
            ];
            if target == "kubeconfig" {
                command.push("-dict=kubeconfig.dict");
            }
            cargo_in_fuzz(&command)
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn no_argument_runs_every_target_for_the_default_time() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.seconds, DEFAULT_SECONDS);
        assert_eq!(args.targets, strings(&TARGETS));
    }

    #[test]
    fn targets_and_seconds_are_taken_in_any_order() {
        let args = parse(&strings(&["texts", "--seconds", "5", "bodies"])).unwrap();
        assert_eq!(
            args,
            Args {
                seconds: 5,
                targets: strings(&["texts", "bodies"])
            }
        );
    }

    #[test]
    fn a_bad_argument_is_refused_with_what_is_accepted() {
        let unknown = parse(&strings(&["json"])).unwrap_err();
        assert!(unknown.contains("watch_json"), "{unknown}");
        assert!(parse(&strings(&["--seconds"])).is_err());
        assert!(parse(&strings(&["--seconds", "0"])).is_err());
        assert!(parse(&strings(&["--seconds", "soon"])).is_err());
    }

    #[test]
    fn every_target_has_its_source_and_manifest_entry() {
        let fuzz = tools::workspace_root().join("fuzz");
        let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
        for target in TARGETS {
            assert!(
                fuzz.join(format!("fuzz_targets/{target}.rs")).is_file(),
                "{target}"
            );
            assert!(
                manifest.contains(&format!("name = \"{target}\"")),
                "{target}"
            );
        }
    }
}
