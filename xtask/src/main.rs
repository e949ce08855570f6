//! Project automation, run as `cargo xtask <command>` (aliased in `.cargo/config.toml`).
//!
//! Commands:
//! - `ci`: everything CI checks, in order of increasing cost: tools, layering, fmt, clippy, tests.
//! - `layering`: only the crate layering check.
//!
//! Each step prints one line when it starts and one when it ends, with its duration, so a long CI run
//! shows where its time goes.

mod ci;
mod layering;
mod tools;

use std::process::ExitCode;

fn usage() -> &'static str {
    "usage: cargo xtask <command>\n\
     \n\
     commands:\n  \
       ci         install missing tools, then layering, fmt, clippy and all tests\n  \
       layering   check that each workspace crate depends only on the crate below it\n"
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci::run(&args[1..]),
        Some("layering") => layering::run(),
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
