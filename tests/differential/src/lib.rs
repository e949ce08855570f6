//! The differential corpus: the simulator held to a real kube-apiserver.
//!
//! The simulator (`tests/sim-apiserver`) claims kube-apiserver's wire behaviour; this crate
//! checks the claim request by request. A corpus of requests (`corpus/*.json`, data, see
//! [`corpus`]) is replayed against a real kube-apiserver and etcd (`tests/real-apiserver`), and
//! the answers, normalised so that only what servers decide is left ([`normalise`]), are the
//! golden files (`golden/*.json`). The same corpus replayed against the simulator must give
//! the same normalised answers, but for the differences listed as deliberate, each with its
//! reason (`deliberate.json`, [`allowlist`]).
//!
//! ```text
//!  corpus/*.json ──replay──▶ kube-apiserver ──normalise──▶ golden/*.json   (cargo xtask differential record)
//!        │                                                       │
//!        └──────replay──▶ sim-apiserver ──normalise──▶ diff ◀────┘  ──▶ report, allowlist
//!                                   (cargo test -p differential; cargo xtask differential compare)
//! ```
//!
//! Invariants the comparison keeps:
//! - every group runs in a namespace of its own, created by its first request, so a group's
//!   answers do not depend on the other groups or their order;
//! - a difference is either covered by an allowlist entry or fails the comparison, and an entry
//!   that covers nothing fails it too;
//! - replaying the corpus against a fresh real server gives the golden files again (`cargo xtask
//!   differential compare --server real` checks the normalisation is complete).

#![deny(missing_docs)]

pub mod allowlist;
pub mod corpus;
pub mod diff;
pub mod golden;
pub mod http;
pub mod normalise;
pub mod protobuf;
pub mod replay;
pub mod report;
pub mod target;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::corpus::Group;
use crate::golden::Golden;
use crate::report::Report;
use crate::target::Target;

/// What went wrong, before or around the comparison (a difference is not an error: it is in
/// the [`Report`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A corpus file is malformed.
    #[error("corpus {file}: {problem}")]
    Corpus {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The allowlist is malformed.
    #[error("allowlist {file}: {problem}")]
    Allowlist {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A golden file is missing or malformed.
    #[error("golden file {0}")]
    Golden(String),
    /// A server did not start or stop, or a compaction did not happen.
    #[error("{0}")]
    Setup(String),
    /// A request could not be sent or its answer not read.
    #[error("{request}: {why}")]
    Request {
        /// Method and URL.
        request: String,
        /// The cause.
        why: String,
    },
    /// A step could not be run.
    #[error("group `{group}`, step `{step}`: {why}")]
    Replay {
        /// The group.
        group: String,
        /// The step.
        step: String,
        /// Why.
        why: String,
    },
    /// The command line is wrong.
    #[error("{0}")]
    Usage(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl Error {
    fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Replays `group` on `target` and normalises its answers.
pub async fn replay_group(target: &Target, group: &Group) -> Result<Vec<Value>, Error> {
    let recorded = replay::run_group(target, group).await?;
    let mut answers: Vec<Value> = recorded.into_iter().map(|r| r.answer).collect();
    normalise::normalise_group(
        &mut answers,
        target.client().authority(),
        &group.generate_name_prefixes(),
    );
    Ok(answers)
}

/// Replays `groups` on `target` (the real server) and writes their golden files into `dir`;
/// returns how many answers were written.
pub async fn record(target: &Target, groups: &[Group], dir: &Path) -> Result<usize, Error> {
    let mut written = 0;
    for group in groups {
        let answers = replay_group(target, group).await?;
        written += answers.len();
        println!("recorded {:>3} answers of {}", answers.len(), group.name);
        golden::write(
            dir,
            &Golden {
                group: group.name.clone(),
                recorded_from: target.description.clone(),
                answers,
            },
        )?;
    }
    Ok(written)
}

/// Removes the golden files in `dir` of groups no longer in `groups` (the whole corpus).
pub fn remove_orphans(dir: &Path, groups: &[Group]) -> Result<(), Error> {
    let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    for orphan in golden::orphans(dir, &names) {
        std::fs::remove_file(&orphan).map_err(|e| Error::io(&orphan, e))?;
        println!("removed {} (its group is gone)", orphan.display());
    }
    Ok(())
}

/// The golden files in `dir` of no group of `groups` (the whole corpus), as report problems.
pub fn orphan_problems(dir: &Path, groups: &[Group]) -> Vec<String> {
    let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    golden::orphans(dir, &names)
        .into_iter()
        .map(|f| format!("{} has no group in the corpus: re-record", f.display()))
        .collect()
}

/// Replays `groups` on `target` and compares the answers with the golden files in `dir`,
/// excusing what `entries` list; `strict` makes unused entries fail the comparison (what the
/// simulator's comparison wants; the real server's own has no entries). With `save`, the
/// normalised answers are also written there, as golden files are, to read them whole.
pub async fn compare(
    target: &Target,
    groups: &[Group],
    dir: &Path,
    entries: Vec<allowlist::Entry>,
    strict: bool,
    save: Option<&Path>,
) -> Result<Report, Error> {
    let goldens: Vec<Golden> = groups
        .iter()
        .map(|g| golden::read(dir, &g.name))
        .collect::<Result<_, _>>()?;
    let golden_from = goldens
        .first()
        .map(|g| g.recorded_from.clone())
        .unwrap_or_default();
    let mut report = Report::new(&target.description, &golden_from, entries, strict);
    for (group, golden) in groups.iter().zip(&goldens) {
        let answers = replay_group(target, group).await?;
        report.add_group(golden, &answers);
        if let Some(save) = save {
            golden::write(
                save,
                &Golden {
                    group: group.name.clone(),
                    recorded_from: target.description.clone(),
                    answers,
                },
            )?;
        }
    }
    Ok(report)
}
