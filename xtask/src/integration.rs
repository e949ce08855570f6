//! `cargo xtask integration`: builds the end-to-end suite (`tests/integration`, package
//! `integration-suite`) in release mode and runs it, passing arguments through (a substring filter,
//! `--list`, `--soak-seconds N`, `--queue in-order|delta-fifo|both`, `--only informers|others`).
//! `cargo xtask ci` runs [`run_ci`]: the same scenarios as `--queue both`, with the two queues'
//! rounds at once; `cargo xtask integration --ci` runs that step alone. Its last step,
//! [`run_real_ci`], runs the portable scenarios on a real kube-apiserver (`--server real`).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;

use crate::tools;

/// The suite's package name, and its binary's.
const PACKAGE: &str = "integration-suite";

/// The soak's length in CI, on each queue (the default is 120 s; see [`run_ci`]).
const CI_SOAK_SECONDS: u64 = 90;

/// Builds and runs the suite in release mode with `args`; `--ci` alone runs CI's step instead.
pub fn run(args: &[String]) -> Result<(), String> {
    if args.first().map(String::as_str) == Some("--ci") {
        if let Some(extra) = args.get(1) {
            return Err(format!(
                "`integration --ci` takes nothing more (got `{extra}`)"
            ));
        }
        return run_ci();
    }
    println!(
        "building the integration suite in release mode (the first build takes a few minutes)"
    );
    let mut command = vec!["run", "--quiet", "--release", "--package", PACKAGE, "--"];
    command.extend(args.iter().map(String::as_str));
    tools::run(&tools::cargo(), &command).map_err(|e| format!("integration suite failed: {e}"))
}

/// CI's integration step: every scenario that runs informers on each queue, then the scenarios
/// without informers (leader election, sharding) once, with a soak of [`CI_SOAK_SECONDS`].
///
/// The two queues' rounds run at once, each in a process of its own, so that each keeps the
/// resident-memory figures its soak and hostile scenarios check to itself. Most of a round is
/// spent waiting (paced churn, fault windows, backoffs), so two of them share 2 cores with time
/// to spare, and the step takes about half as long as the rounds one after the other. The
/// scenarios without informers bound takeover and reassignment times, so they run alone
/// afterwards. Each line a round prints is prefixed with its queue's name.
pub fn run_ci() -> Result<(), String> {
    let binary = build_suite()?;
    let soak = CI_SOAK_SECONDS.to_string();
    println!("informer scenarios: the in-order queue's round and the DeltaFifo's, at once");
    let rounds: Vec<_> = ["in-order", "delta-fifo"]
        .into_iter()
        .map(|queue| {
            let args = [
                "--queue",
                queue,
                "--only",
                "informers",
                "--soak-seconds",
                &soak,
            ];
            (queue, spawn_prefixed(&binary, &args, queue))
        })
        .collect();
    let mut failures = Vec::new();
    for (queue, round) in rounds {
        if let Err(e) = round.and_then(Round::wait) {
            failures.push(format!("the {queue} round: {e}"));
        }
    }
    println!("scenarios without informers, alone");
    if let Err(e) = spawn_prefixed(&binary, &["--only", "others"], "no-queue").and_then(Round::wait)
    {
        failures.push(format!("the scenarios without informers: {e}"));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("integration suite failed: {}", failures.join("; ")))
    }
}

/// CI's real-server step: the portable scenarios on a real kube-apiserver and etcd (each
/// scenario starts its own), on each queue, one round after the other: a round holds one
/// control plane at a time, and two at once would crowd 2 cores.
pub fn run_real_ci() -> Result<(), String> {
    let binary = build_suite()?;
    spawn_prefixed(&binary, &["--server", "real", "--queue", "both"], "real")
        .and_then(Round::wait)
        .map_err(|e| format!("the portable scenarios on the real server failed: {e}"))
}

/// Builds the suite in release mode; returns its binary.
fn build_suite() -> Result<std::path::PathBuf, String> {
    println!("building the integration suite in release mode");
    tools::run(
        &tools::cargo(),
        &["build", "--quiet", "--release", "--package", PACKAGE],
    )?;
    Ok(tools::target_dir().join("release").join(PACKAGE))
}

/// A running suite process and the threads copying its output.
struct Round {
    child: std::process::Child,
    copiers: Vec<thread::JoinHandle<()>>,
    command: String,
}

impl Round {
    /// Waits for the process and for its last line of output; fails on a non-zero exit.
    fn wait(mut self) -> Result<(), String> {
        let status = self
            .child
            .wait()
            .map_err(|e| format!("could not wait for `{}`: {e}", self.command))?;
        for copier in self.copiers {
            // A copier only reads and prints; it ends when the process's pipe closes.
            let _ = copier.join();
        }
        if status.success() {
            Ok(())
        } else {
            Err(format!("`{}` exited with {status}", self.command))
        }
    }
}

/// Starts `binary args` in the workspace root, copying each line it prints to stdout or stderr to
/// ours with `[prefix] ` in front. A line is printed whole: the two rounds' lines never mix.
fn spawn_prefixed(binary: &Path, args: &[&str], prefix: &str) -> Result<Round, String> {
    let command = format!("{} {}", binary.display(), args.join(" "));
    let mut child = Command::new(binary)
        .args(args)
        .current_dir(tools::workspace_root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start `{command}`: {e}"))?;
    let tag = format!("[{prefix}]");
    let mut copiers = Vec::new();
    if let Some(out) = child.stdout.take() {
        let tag = tag.clone();
        copiers.push(thread::spawn(move || {
            copy_lines(out, |line| println!("{tag} {line}"))
        }));
    }
    if let Some(err) = child.stderr.take() {
        copiers.push(thread::spawn(move || {
            copy_lines(err, |line| eprintln!("{tag} {line}"))
        }));
    }
    Ok(Round {
        child,
        copiers,
        command,
    })
}

/// Hands each line of `from` to `print` until it ends or fails to read. Bytes that are not
/// UTF-8 are shown replaced rather than dropping the line.
fn copy_lines(from: impl Read, print: impl Fn(&str)) {
    let mut reader = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                print(text.trim_end_matches(['\n', '\r']));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::copy_lines;
    use std::cell::RefCell;

    fn copied(input: &[u8]) -> Vec<String> {
        let lines = RefCell::new(Vec::new());
        copy_lines(input, |line| lines.borrow_mut().push(line.to_string()));
        lines.into_inner()
    }

    #[test]
    fn each_line_is_handed_on_whole_without_its_line_ending() {
        assert_eq!(
            copied(b"PASS  a   1.0s  x\r\n....  b\nlast, unterminated"),
            ["PASS  a   1.0s  x", "....  b", "last, unterminated"]
        );
        assert!(copied(b"").is_empty());
    }

    #[test]
    fn a_line_that_is_not_utf8_is_shown_replaced_not_dropped() {
        assert_eq!(
            copied(b"ok\n\xff bad\nafter\n"),
            ["ok", "\u{fffd} bad", "after"]
        );
    }
}
