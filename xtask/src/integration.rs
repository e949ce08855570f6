//! `cargo xtask integration`: builds the end-to-end suite (`tests/integration`, package
//! `integration-suite`) in release mode and runs it, passing arguments through (a substring filter,
//! `--list`, `--soak-seconds N`, `--queue in-order|delta-fifo|both`). `cargo xtask ci` runs it with
//! `--queue both` as its last step.

use crate::tools;

/// The suite's package name.
const PACKAGE: &str = "integration-suite";

/// Builds and runs the suite in release mode with `args`.
pub fn run(args: &[String]) -> Result<(), String> {
    println!(
        "building the integration suite in release mode (the first build takes a few minutes)"
    );
    let mut command = vec!["run", "--quiet", "--release", "--package", PACKAGE, "--"];
    command.extend(args.iter().map(String::as_str));
    tools::run(&tools::cargo(), &command).map_err(|e| format!("integration suite failed: {e}"))
}
