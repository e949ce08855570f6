//! `cargo xtask ci`: the whole CI job, as `.ci/run` and the README run it.

use crate::{layering, tools};

/// Runs every CI step in order, stopping at the first failure.
pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(arg) = args.first() {
        return Err(format!("`ci` takes no arguments (got `{arg}`)"));
    }
    let cargo = tools::cargo();
    tools::step("tools", tools::ensure_tools)?;
    tools::step("layering", layering::run)?;
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
    // --all-features: the k8s-openapi and prometheus code paths are tested too.
    tools::step("tests", || {
        tools::run(&cargo, &["test", "--workspace", "--all-features"])
    })?;
    // End to end, in release mode: every scenario of tests/integration (about 5 minutes).
    tools::step("integration", || crate::integration::run(&[]))?;
    println!("ci: all steps passed");
    Ok(())
}
