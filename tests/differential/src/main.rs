//! `differential`: records the corpus's golden answers from a real kube-apiserver, or compares a
//! server's answers with them. Run through `cargo xtask differential` (which says how).

use std::process::ExitCode;

use differential::target::{Kind, Target};
use differential::{allowlist, corpus, golden, Error};

const USAGE: &str = "usage: differential record [GROUP...]\n       \
                     differential compare --server real|sim [--save DIR] [GROUP...]";

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("differential: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the command; `Ok(false)` when a comparison failed.
async fn run(args: &[String]) -> Result<bool, Error> {
    let (command, rest) = args
        .split_first()
        .ok_or_else(|| Error::Usage(USAGE.into()))?;
    let all = corpus::load(&corpus::default_dir())?;
    match command.as_str() {
        "record" => {
            let groups = select(&all, rest)?;
            let target = Target::real().await?;
            let dir = golden::default_dir();
            let written = differential::record(&target, &groups, &dir).await?;
            if groups.len() == all.len() {
                differential::remove_orphans(&dir, &all)?;
            }
            target.stop()?;
            println!(
                "recorded {written} answers of {} groups into {}",
                groups.len(),
                dir.display()
            );
            Ok(true)
        }
        "compare" => {
            let (kind, names) = match rest {
                [flag, kind, names @ ..] if flag == "--server" => (kind.parse::<Kind>()?, names),
                _ => return Err(Error::Usage(USAGE.into())),
            };
            let (save, names) = match names {
                [flag, dir, names @ ..] if flag == "--save" => {
                    (Some(std::path::PathBuf::from(dir)), names)
                }
                _ => (None, names),
            };
            let groups = select(&all, names)?;
            let entries = match kind {
                Kind::Sim => allowlist::load(&allowlist::default_path())?,
                Kind::Real => Vec::new(),
            };
            // Unused entries fail only a whole comparison of the simulator: a few groups cover
            // only their own entries.
            let strict = kind == Kind::Sim && groups.len() == all.len();
            let target = Target::start(kind).await?;
            let dir = golden::default_dir();
            let mut report =
                differential::compare(&target, &groups, &dir, entries, strict, save.as_deref())
                    .await?;
            if groups.len() == all.len() {
                report
                    .problems
                    .extend(differential::orphan_problems(&dir, &all));
            }
            target.stop()?;
            print!("{report}");
            Ok(report.passed())
        }
        _ => Err(Error::Usage(USAGE.into())),
    }
}

/// The groups named in `names`, or all of them.
fn select(all: &[corpus::Group], names: &[String]) -> Result<Vec<corpus::Group>, Error> {
    if names.is_empty() {
        return Ok(all.to_vec());
    }
    names
        .iter()
        .map(|name| {
            all.iter()
                .find(|g| &g.name == name)
                .cloned()
                .ok_or_else(|| {
                    let known: Vec<&str> = all.iter().map(|g| g.name.as_str()).collect();
                    Error::Usage(format!(
                        "no group `{name}` in the corpus (there are: {})",
                        known.join(", ")
                    ))
                })
        })
        .collect()
}
