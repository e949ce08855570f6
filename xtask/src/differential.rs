//! `cargo xtask differential`: the differential corpus of `tests/differential`, which holds the
//! simulator to a real kube-apiserver.
//!
//! - `record [GROUP...]`: starts kube-apiserver and etcd (built by `cargo xtask real-apiserver`
//!   when missing, which needs Go), replays the corpus and writes the normalised answers as the
//!   golden files `tests/differential/golden/*.json`.
//! - `compare --server real|sim [GROUP...]`: replays the corpus against a fresh real server (a
//!   check that the normalisation leaves nothing of one run) or the simulator, and prints the
//!   report: requests, identical answers, deliberate differences by reason, and every other
//!   difference; fails when one is unexplained. `--save DIR` also writes the normalised
//!   answers there, as golden files, to read them whole or diff them with the golden ones.
//!
//! The simulator's comparison also runs in `cargo test` (`tests/differential/tests`), against
//! the committed golden files, with no Go.

use crate::tools;

const PACKAGE: &str = "differential";

fn usage() -> &'static str {
    "usage: cargo xtask differential record [GROUP...]\n       \
     cargo xtask differential compare --server real|sim [--save DIR] [GROUP...]"
}

/// Runs the subcommand in `args`.
pub fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("record") => {}
        Some("compare") => match args.get(1..3) {
            Some([flag, server]) if flag == "--server" && (server == "real" || server == "sim") => {
            }
            _ => return Err(usage().to_string()),
        },
        _ => return Err(usage().to_string()),
    }
    let mut command = vec!["run", "--quiet", "--package", PACKAGE, "--"];
    command.extend(args.iter().map(String::as_str));
    tools::run(&tools::cargo(), &command).map_err(|e| format!("differential: {e}"))
}
