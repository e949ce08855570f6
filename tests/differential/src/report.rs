//! The comparison of a replay with the golden answers, and its report: how many requests, how
//! many identical, the deliberate differences grouped by reason, and every other difference
//! (grouped by step) with both sides.

use std::fmt;

use serde_json::Value;

use crate::allowlist::Entry;
use crate::diff::{diff, Difference};
use crate::golden::Golden;

/// The longest value shown in a report line.
const SHOWN_CHARS: usize = 200;

/// One compared step.
#[derive(Debug, Clone)]
pub struct StepResult {
    /// `group/step`.
    pub step: String,
    /// Its differences, each with the allowlist entry (index) that covers it, if any.
    pub differences: Vec<(Difference, Option<usize>)>,
}

impl StepResult {
    fn unexplained(&self) -> impl Iterator<Item = &Difference> {
        self.differences
            .iter()
            .filter(|(_, entry)| entry.is_none())
            .map(|(d, _)| d)
    }
}

/// A whole comparison.
#[derive(Debug, Clone)]
pub struct Report {
    /// What answered now.
    pub server: String,
    /// What answered when the golden files were recorded.
    pub golden_from: String,
    /// Every compared step.
    pub steps: Vec<StepResult>,
    /// The allowlist applied (empty when comparing the real server with its own recording).
    pub entries: Vec<Entry>,
    /// Whether unused allowlist entries fail the comparison (the simulator's comparison).
    pub strict_allowlist: bool,
    /// Mismatches between the corpus and the golden files (a step added since the recording).
    pub problems: Vec<String>,
}

impl Report {
    /// An empty report of `server` against golden answers of `golden_from`.
    pub fn new(server: &str, golden_from: &str, entries: Vec<Entry>, strict: bool) -> Report {
        Report {
            server: server.to_string(),
            golden_from: golden_from.to_string(),
            steps: Vec::new(),
            entries,
            strict_allowlist: strict,
            problems: Vec::new(),
        }
    }

    /// Compares one group's answers with its golden file.
    pub fn add_group(&mut self, golden: &Golden, actual: &[Value]) {
        let names = |answers: &[Value]| -> Vec<String> {
            answers
                .iter()
                .map(|a| a["step"].as_str().unwrap_or_default().to_string())
                .collect()
        };
        let (golden_steps, actual_steps) = (names(&golden.answers), names(actual));
        if golden_steps != actual_steps {
            self.problems.push(format!(
                "the golden file of `{}` is out of date (it has steps {:?}, the corpus {:?}): \
                 re-record it with `cargo xtask differential record`",
                golden.group, golden_steps, actual_steps
            ));
            return;
        }
        for (g, a) in golden.answers.iter().zip(actual) {
            let step = format!(
                "{}/{}",
                golden.group,
                g["step"].as_str().unwrap_or_default()
            );
            if g.get("request") != a.get("request") {
                self.problems.push(format!(
                    "the golden request of `{step}` is not the corpus's: re-record it"
                ));
                continue;
            }
            let differences = diff(g, a)
                .into_iter()
                .map(|d| {
                    let entry = self.entries.iter().position(|e| e.covers(&step, &d));
                    (d, entry)
                })
                .collect();
            self.steps.push(StepResult { step, differences });
        }
    }

    /// Compared requests.
    pub fn requests(&self) -> usize {
        self.steps.len()
    }

    /// Requests answered exactly as the golden answer (after normalisation).
    pub fn identical(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.differences.is_empty())
            .count()
    }

    /// Requests whose every difference is deliberate (and there is one).
    pub fn deliberate_only(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| !s.differences.is_empty() && s.unexplained().next().is_none())
            .count()
    }

    /// Requests with a difference no allowlist entry covers.
    pub fn unexplained(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.unexplained().next().is_some())
            .count()
    }

    /// Allowlist entries that covered no difference.
    pub fn unused_entries(&self) -> Vec<&Entry> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                !self
                    .steps
                    .iter()
                    .any(|s| s.differences.iter().any(|(_, e)| *e == Some(*i)))
            })
            .map(|(_, e)| e)
            .collect()
    }

    /// Whether the comparison passes: no unexplained difference, no problem, and (for the
    /// simulator) no unused allowlist entry.
    pub fn passed(&self) -> bool {
        self.unexplained() == 0
            && self.problems.is_empty()
            && (!self.strict_allowlist || self.unused_entries().is_empty())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "differential corpus: {} requests to {}, compared with the answers of {}",
            self.requests(),
            self.server,
            self.golden_from
        )?;
        writeln!(f, "  identical:           {}", self.identical())?;
        writeln!(f, "  deliberate only:     {}", self.deliberate_only())?;
        writeln!(f, "  unexplained:         {}", self.unexplained())?;
        self.fmt_deliberate(f)?;
        self.fmt_unexplained(f)?;
        let unused = self.unused_entries();
        if self.strict_allowlist && !unused.is_empty() {
            writeln!(
                f,
                "allowlist entries that cover no difference (remove them: deliberate.json and docs/simulator.md):"
            )?;
            for entry in unused {
                writeln!(f, "  {}", entry.id)?;
            }
        }
        for problem in &self.problems {
            writeln!(f, "problem: {problem}")?;
        }
        writeln!(
            f,
            "{}",
            if self.passed() {
                "result: PASS"
            } else {
                "result: FAIL"
            }
        )
    }
}

impl Report {
    fn fmt_deliberate(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut any = false;
        for (i, entry) in self.entries.iter().enumerate() {
            let steps: Vec<&str> = self
                .steps
                .iter()
                .filter(|s| s.differences.iter().any(|(_, e)| *e == Some(i)))
                .map(|s| s.step.as_str())
                .collect();
            let places: usize = self
                .steps
                .iter()
                .map(|s| s.differences.iter().filter(|(_, e)| *e == Some(i)).count())
                .sum();
            if steps.is_empty() {
                continue;
            }
            if !any {
                writeln!(f, "deliberate differences, by reason:")?;
                any = true;
            }
            writeln!(
                f,
                "  {} ({} requests, {} places): {}",
                entry.id,
                steps.len(),
                places,
                entry.reason
            )?;
        }
        Ok(())
    }

    fn fmt_unexplained(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failing: Vec<&StepResult> = self
            .steps
            .iter()
            .filter(|s| s.unexplained().next().is_some())
            .collect();
        if failing.is_empty() {
            return Ok(());
        }
        writeln!(f, "unexplained differences, by request:")?;
        for step in failing {
            writeln!(f, "  {}", step.step)?;
            for d in step.unexplained() {
                writeln!(
                    f,
                    "    {}: real {} / {} {}",
                    if d.path.is_empty() { "/" } else { &d.path },
                    shown(d.golden.as_ref()),
                    if self.server.starts_with("kube-apiserver") {
                        "now"
                    } else {
                        "sim"
                    },
                    shown(d.actual.as_ref())
                )?;
            }
        }
        Ok(())
    }
}

fn shown(value: Option<&Value>) -> String {
    match value {
        None => "(absent)".into(),
        Some(v) => {
            let text = v.to_string();
            if text.chars().count() > SHOWN_CHARS {
                let cut: String = text.chars().take(SHOWN_CHARS).collect();
                format!("{cut}...")
            } else {
                text
            }
        }
    }
}
